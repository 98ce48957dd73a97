use std::fmt;

use foldhash::HashMap;

use serde::{Deserialize, Serialize};

use crate::outcome::{EndReason, Outcome};
use crate::player::{ByPlayer, Player};
use crate::position::{Move, PlayError, Position, PositionError, SQUARES, Setup};
use crate::rules::Rules;
use crate::trace::Step;

/// A game: a start position, the moves played from it, and the repetition count that a single
/// position cannot know.
pub struct Game {
    start: Position,
    moves: Vec<Move>,
    position: Position,
    /// Hashed with foldhash, not SipHash: it is hashed on every move and copied with every
    /// stored game a server loads. Its keys are positions that the rules reach, at most one per
    /// ply, under a per-map random seed.
    seen: HashMap<([u8; SQUARES], u8, Player), u32>,
}

/// A game as stored: the full rule set, the start setup and the moves. Replaying it with
/// [`GameRecord::replay`] reproduces every position.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GameRecord {
    /// The full rule set (not only a preset name), so that the game replays exactly.
    pub rules: Rules,
    /// The position the game started from.
    pub start: Setup,
    /// The moves, in order.
    pub moves: Vec<Move>,
}

/// Why a [`GameRecord`] does not replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplayError {
    /// The start setup is not playable under the rule set.
    Start(PositionError),
    /// Move number `index` (0-based) is illegal where it stands.
    Move {
        /// 0-based index into the move list.
        index: usize,
        /// The move.
        mv: Move,
        /// Why it is illegal.
        error: PlayError,
    },
}

impl fmt::Display for ReplayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReplayError::Start(e) => write!(f, "start position: {e}"),
            ReplayError::Move { index, mv, error } => {
                write!(f, "move {} ({mv}): {error}", index + 1)
            }
        }
    }
}

impl std::error::Error for ReplayError {}

/// A copy is usually made to play the next move on it (a server loads a stored game, plays, and
/// stores it back): the move list gets room for one more move, which spares reallocating it
/// (and copying it whole) at that move.
impl Clone for Game {
    fn clone(&self) -> Game {
        let mut moves = Vec::with_capacity(self.moves.len() + 1);
        moves.extend_from_slice(&self.moves);
        Game {
            start: self.start,
            moves,
            position: self.position,
            seen: self.seen.clone(),
        }
    }
}

impl Game {
    /// A new game from the start position of `rules`.
    ///
    /// # Errors
    ///
    /// [`PositionError::Rules`] if the rule set is contradictory.
    pub fn new(rules: Rules) -> Result<Game, PositionError> {
        Ok(Game::from_position(Position::new(rules)?))
    }

    /// A new game from any playable position (puzzles, analysis).
    #[must_use]
    pub fn from_position(start: Position) -> Game {
        let mut game = Game {
            start,
            moves: Vec::new(),
            position: start,
            seen: HashMap::default(),
        };
        game.seen.insert(start.repetition_key(), 1);
        game
    }

    /// Plays a move, applying the repetition rule on top of [`Position::play`].
    ///
    /// # Errors
    ///
    /// Why the move is illegal, as a [`PlayError`]; the game is untouched.
    pub fn play(&mut self, mv: Move) -> Result<Vec<Step>, PlayError> {
        let (mut next, mut trace) = self.position.play(mv)?;
        if !next.is_over() {
            let count = self.seen.entry(next.repetition_key()).or_insert(0);
            *count += 1;
            let limit = next.rules().repetition_limit;
            if limit > 0 && *count >= limit {
                next.finish_by_repetition(&mut trace);
            }
        }
        self.moves.push(mv);
        self.position = next;
        Ok(trace)
    }

    /// Replays `moves` from `start`.
    ///
    /// # Errors
    ///
    /// [`ReplayError::Move`] for the first illegal move.
    pub fn replay(start: Position, moves: &[Move]) -> Result<Game, ReplayError> {
        let mut game = Game::from_position(start);
        for (index, &mv) in moves.iter().enumerate() {
            game.play(mv)
                .map_err(|error| ReplayError::Move { index, mv, error })?;
        }
        Ok(game)
    }

    /// The rule set.
    #[must_use]
    pub fn rules(&self) -> &Rules {
        self.position.rules()
    }

    /// The position the game started from.
    #[must_use]
    pub fn start(&self) -> &Position {
        &self.start
    }

    /// The current position.
    #[must_use]
    pub fn position(&self) -> &Position {
        &self.position
    }

    /// The moves played so far.
    #[must_use]
    pub fn moves(&self) -> &[Move] {
        &self.moves
    }

    /// Whether the game is over.
    #[must_use]
    pub fn is_over(&self) -> bool {
        self.position.is_over()
    }

    /// Why the game ended, if it did.
    #[must_use]
    pub fn end_reason(&self) -> Option<EndReason> {
        self.position.end_reason()
    }

    /// The result, once the game is over.
    #[must_use]
    pub fn outcome(&self) -> Option<Outcome> {
        self.position.outcome()
    }

    /// Each player's points now (final scores once the game is over).
    #[must_use]
    pub fn scores(&self) -> ByPlayer<i32> {
        self.position.scores()
    }

    /// The record to store.
    #[must_use]
    pub fn record(&self) -> GameRecord {
        GameRecord {
            rules: *self.rules(),
            start: self.start.to_setup(),
            moves: self.moves.clone(),
        }
    }
}

impl GameRecord {
    /// Replays the record.
    ///
    /// # Errors
    ///
    /// [`ReplayError::Start`] for a start setup that does not fit the rule set, or
    /// [`ReplayError::Move`] for the first illegal move.
    pub fn replay(&self) -> Result<Game, ReplayError> {
        let start = Position::from_setup(self.start, self.rules).map_err(ReplayError::Start)?;
        Game::replay(start, &self.moves)
    }
}

impl fmt::Debug for Game {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Game")
            .field("start", &self.start)
            .field("moves", &self.moves.len())
            .field("position", &self.position)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A copy has the original's moves and position and goes on independently of it.
    #[test]
    fn a_copy_plays_on_independently() {
        let mut game = Game::from_position(Position::new(Rules::default()).expect("valid rules"));
        for _ in 0..6 {
            let mv = *game.position().legal_moves().iter().next().expect("a move");
            game.play(mv).expect("a legal move");
        }
        let mut copy = game.clone();
        assert_eq!(copy.moves(), game.moves());
        assert_eq!(copy.position(), game.position());
        let mv = *copy.position().legal_moves().iter().next().expect("a move");
        copy.play(mv).expect("a legal move");
        assert_eq!(copy.moves().len(), game.moves().len() + 1);
        assert_eq!(&copy.moves()[..game.moves().len()], game.moves());
        let mut again = game.clone();
        again.play(mv).expect("a legal move");
        assert_eq!(again.position(), copy.position());
    }
}
