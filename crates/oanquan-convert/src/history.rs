//! `MoveHistory` → [`Game`]: a start position and the moves since, replayed with the
//! repetition rule, for the RulesService calls that judge a position by its game.

use oanquan_proto::v1 as pb;
use oanquan_rules::{Game, Rules};

use super::input::{mv, position};
use oanquan_game::GameError;

/// Most moves a `MoveHistory` may hold, whatever the rule set's `max_plies`: a custom rule set
/// may allow billions of plies, and replaying is work done before any slot or limit applies.
/// The longest a hosted game may last, so that any hosted game's history fits.
pub const MAX_HISTORY_MOVES: u32 = oanquan_game::limits::MAX_GAME_PLIES;

/// A `MoveHistory` under `rules`, replayed: every move legal in turn, the repetition rule
/// applied on the way. The length is checked before any move is read, so a huge list costs
/// nothing but its decoding.
///
/// # Errors
///
/// [`GameError::InvalidArgument`] naming `{field}.start...`, `{field}.moves` (too many) or
/// `{field}.moves[i]` (malformed, or not legal after the moves before it).
pub fn history(history: &pb::MoveHistory, rules: Rules, field: &str) -> Result<Game, GameError> {
    let start = position(history.start.as_ref(), rules, &format!("{field}.start"))?;
    let limit = rules.max_plies.min(MAX_HISTORY_MOVES);
    if history.moves.len() > limit as usize {
        return Err(GameError::invalid(
            format!("{field}.moves"),
            format!(
                "{} moves is too many: at most {limit} (the rule set's max_plies, and never \
                 more than {MAX_HISTORY_MOVES})",
                history.moves.len()
            ),
        ));
    }
    let mut game = Game::from_position(start);
    for (index, sent) in history.moves.iter().enumerate() {
        let name = format!("{field}.moves[{index}]");
        let played = mv(Some(sent), &name)?;
        game.play(played).map_err(|error| {
            GameError::invalid(
                &name,
                format!("{played} is not legal after the moves before it: {error}"),
            )
        })?;
    }
    Ok(game)
}
