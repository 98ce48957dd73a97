//! Protobuf → domain: every request field validated, so nothing a client sends can reach a
//! cast or an index unchecked; errors name the field (`move.square`).

use oanquan_ai::Level;
use oanquan_proto::v1 as pb;
use oanquan_rules::{
    ByPlayer, Direction, EmptyMandarinNext, EndCondition, MAX_BOARD_STONES, MandarinSetup, Move,
    Player, Position, PositionError, Preset, Rules, RulesError, SQUARES, Setup,
};

use oanquan_game::clock::TimeControlError;
use oanquan_game::rating::Speed;
use oanquan_game::{GameError, GameFilter, GameId, PlayerResult, TimeControl, quoted};

type Result<T> = std::result::Result<T, GameError>;

fn sub(field: &str, name: &str) -> String {
    format!("{field}.{name}")
}

/// A game id field.
pub fn game_id(id: &str, field: &str) -> Result<GameId> {
    GameId::parse(id).map_err(|e| GameError::invalid(field, e.to_string()))
}

/// A seek id field, checked in shape (seek ids are made like game ids) so that a malformed one
/// is refused as such and never echoed, as a malformed game id is not.
pub fn seek_id<'a>(id: &'a str, field: &str) -> Result<&'a str> {
    match GameId::parse(id) {
        Ok(_) => Ok(id),
        Err(oanquan_game::GameIdError::Empty) => Err(GameError::invalid(
            field,
            "a seek id is required; list open seeks with ListSeeks",
        )),
        Err(oanquan_game::GameIdError::Malformed) => Err(GameError::invalid(
            field,
            "not a seek id (at most 64 characters of A-Z a-z 0-9 - _); list open seeks with \
             ListSeeks",
        )),
    }
}

/// A `ComputerOpponent` (unset or level 0 → `None`).
pub fn computer_opponent(
    computer: Option<&pb::ComputerOpponent>,
    field: &str,
) -> Result<Option<Level>> {
    let level = computer.map_or(0, |c| c.level);
    if level == 0 {
        return Ok(None);
    }
    u8::try_from(level)
        .ok()
        .and_then(Level::from_number)
        .map(Some)
        .ok_or_else(|| {
            GameError::invalid(
                sub(field, "level"),
                format!(
                    "must be 1 ({}) to 7 ({}), or 0 for no computer; got {level}",
                    Level::Random,
                    Level::Master
                ),
            )
        })
}

/// A `Player` that may be unset (`PLAYER_UNSPECIFIED` → `None`); an unknown value is refused
/// with all three named, since unset is one of the choices here (an outside probe's `seat: 7`
/// was told only of the two seats).
pub fn optional_player(value: i32, field: &str) -> Result<Option<Player>> {
    known_player(
        value,
        field,
        "PLAYER_FIRST, PLAYER_SECOND or PLAYER_UNSPECIFIED",
    )
}

/// A `Player` that must be set.
pub fn player(value: i32, field: &str) -> Result<Player> {
    known_player(value, field, "PLAYER_FIRST or PLAYER_SECOND")?.ok_or_else(|| {
        GameError::invalid(field, "must be PLAYER_FIRST or PLAYER_SECOND, not unset")
    })
}

fn known_player(value: i32, field: &str, choices: &str) -> Result<Option<Player>> {
    match pb::Player::try_from(value) {
        Ok(pb::Player::Unspecified) => Ok(None),
        Ok(pb::Player::First) => Ok(Some(Player::First)),
        Ok(pb::Player::Second) => Ok(Some(Player::Second)),
        Err(_) => Err(GameError::invalid(
            field,
            format!("unknown Player value {value}; use {choices}"),
        )),
    }
}

/// A move.
pub fn mv(mv: Option<&pb::Move>, field: &str) -> Result<Move> {
    let mv = mv.ok_or_else(|| GameError::invalid(field, "a move is required"))?;
    let square = mv.square.ok_or_else(|| {
        GameError::invalid(
            sub(field, "square"),
            "a square (1 to 5 or 7 to 11) is required",
        )
    })?;
    let square = u8::try_from(square)
        .ok()
        .filter(|&s| usize::from(s) < SQUARES)
        .ok_or_else(|| {
            GameError::invalid(
                sub(field, "square"),
                format!("{square} is not a ring square; squares are 0 to 11"),
            )
        })?;
    let direction = match pb::Direction::try_from(mv.direction) {
        Ok(pb::Direction::Right) => Direction::Right,
        Ok(pb::Direction::Left) => Direction::Left,
        _ => {
            return Err(GameError::invalid(
                sub(field, "direction"),
                "must be DIRECTION_RIGHT or DIRECTION_LEFT",
            ));
        }
    };
    Ok(Move::new(square, direction))
}

/// A `RulesSpec`; unset means the standard preset.
pub fn rules_spec(spec: Option<&pb::RulesSpec>, field: &str) -> Result<(Rules, Option<Preset>)> {
    match spec.and_then(|s| s.kind.as_ref()) {
        None => Ok((Rules::STANDARD, Some(Preset::Standard))),
        Some(pb::rules_spec::Kind::Preset(name)) => {
            let preset: Preset = name.parse().map_err(|_: oanquan_rules::UnknownPreset| {
                let known: Vec<&str> = Preset::ALL.iter().map(|p| p.name()).collect();
                GameError::invalid(
                    sub(field, "preset"),
                    format!(
                        "unknown rule preset {}; known presets: {}",
                        quoted(name),
                        known.join(", ")
                    ),
                )
            })?;
            Ok((preset.rules(), Some(preset)))
        }
        Some(pb::rules_spec::Kind::RuleSet(set)) => {
            Ok((rule_set(set, &sub(field, "rule_set"))?, None))
        }
    }
}

fn enum_error(field: &str, name: &str, value: i32) -> GameError {
    GameError::invalid(
        sub(field, name),
        format!("must be set to a known value, got {value}"),
    )
}

fn small(value: u32, field: &str, name: &str) -> Result<u8> {
    u8::try_from(value).map_err(|_| {
        GameError::invalid(
            sub(field, name),
            format!("{value} is too large; at most 255"),
        )
    })
}

/// A full rule set, validated.
pub fn rule_set(set: &pb::RuleSet, field: &str) -> Result<Rules> {
    let mandarin = match pb::MandarinSetup::try_from(set.mandarin_setup) {
        Ok(pb::MandarinSetup::Stones) => MandarinSetup::Stones,
        Ok(pb::MandarinSetup::Piece) => MandarinSetup::Piece {
            value: small(set.quan_value, field, "quan_value")?,
        },
        _ => return Err(enum_error(field, "mandarin_setup", set.mandarin_setup)),
    };
    let empty_mandarin_next = match pb::EmptyMandarinRule::try_from(set.empty_mandarin) {
        Ok(pb::EmptyMandarinRule::EndsTurn) => EmptyMandarinNext::EndsTurn,
        Ok(pb::EmptyMandarinRule::EmptySquare) => EmptyMandarinNext::EmptySquare,
        _ => return Err(enum_error(field, "empty_mandarin", set.empty_mandarin)),
    };
    let end_condition = match pb::EndCondition::try_from(set.end_condition) {
        Ok(pb::EndCondition::MandarinSquaresEmpty) => EndCondition::MandarinSquaresEmpty,
        Ok(pb::EndCondition::PiecesCaptured) => EndCondition::PiecesCaptured,
        _ => return Err(enum_error(field, "end_condition", set.end_condition)),
    };
    let rules = Rules {
        mandarin,
        empty_mandarin_next,
        protected_plies: set.protected_plies,
        immature_mandarin: small(
            set.immature_mandarin_min_stones,
            field,
            "immature_mandarin_min_stones",
        )?,
        end_condition,
        repetition_limit: set.repetition_limit,
        max_plies: set.max_plies,
    };
    rules.validate().map_err(|e| {
        let name = match e {
            RulesError::ZeroPieceValue => "quan_value",
            RulesError::ImmatureWithoutPieces => "immature_mandarin_min_stones",
            RulesError::PiecesCapturedWithoutPieces => "end_condition",
            RulesError::RepetitionLimitOne => "repetition_limit",
            RulesError::ZeroMaxPlies => "max_plies",
            _ => return GameError::invalid(field, e.to_string()),
        };
        GameError::invalid(sub(field, name), e.to_string())
    })?;
    Ok(rules)
}

/// The twelve entries of `field.name`; a value past `i32` is refused saying `most` (what one
/// square may hold).
fn twelve(
    values: &[u32],
    field: &str,
    name: &str,
    most: &str,
    empty_ok: bool,
) -> Result<[i32; SQUARES]> {
    let mut out = [0; SQUARES];
    if values.is_empty() && empty_ok {
        return Ok(out);
    }
    if values.len() != SQUARES {
        return Err(GameError::invalid(
            sub(field, name),
            format!(
                "needs exactly 12 entries (ring squares 0 to 11), got {}",
                values.len()
            ),
        ));
    }
    for (i, (slot, &value)) in out.iter_mut().zip(values).enumerate() {
        *slot = i32::try_from(value).map_err(|_| {
            GameError::invalid(
                format!("{field}.{name}[{i}]"),
                format!("{value} is out of range; a square holds at most {most}"),
            )
        })?;
    }
    Ok(out)
}

/// The request field a [`PositionError`] is about, below the position's own path `field`.
fn position_error_field(error: &PositionError, field: &str) -> String {
    let player = |p: &Player| match p {
        Player::First => "first",
        Player::Second => "second",
    };
    match error {
        PositionError::Rules(_) => "rules".to_owned(),
        PositionError::NegativeStones { square } | PositionError::TooManyStones { square } => {
            format!("{field}.squares[{square}]")
        }
        PositionError::BoardOverfull { .. } | PositionError::Uncollected { .. } => {
            sub(field, "squares")
        }
        PositionError::BadPieceCount { square }
        | PositionError::PieceOutsideMandarinSquare { square } => {
            format!("{field}.pieces[{square}]")
        }
        PositionError::PieceTotal { .. } => sub(field, "pieces"),
        PositionError::CapturedOutOfRange { player: p } => {
            format!("{field}.captured.{}", player(p))
        }
        PositionError::CapturedPiecesOutOfRange { player: p } => {
            format!("{field}.captured_pieces.{}", player(p))
        }
        PositionError::MoverHasNoStones => sub(field, "to_move"),
        _ => field.to_owned(),
    }
}

/// A position under `rules`; unset means the rules' start position.
pub fn position(position: Option<&pb::Position>, rules: Rules, field: &str) -> Result<Position> {
    let Some(p) = position else {
        return Position::new(rules).map_err(|e| GameError::invalid("rules", e.to_string()));
    };
    let pair = |pair: Option<&pb::PlayerPair>| {
        pair.map_or_else(ByPlayer::default, |p| ByPlayer::new(p.first, p.second))
    };
    let to_move = optional_player(p.to_move, &sub(field, "to_move"))?;
    let setup = Setup {
        squares: twelve(
            &p.squares,
            field,
            "squares",
            &format!("{MAX_BOARD_STONES} stones"),
            false,
        )?,
        // No entries = no pieces, so stone-setup clients need not send twelve zeros.
        pieces: twelve(&p.pieces, field, "pieces", "1 mandarin piece", true)?,
        captured: pair(p.captured.as_ref()),
        captured_pieces: pair(p.captured_pieces.as_ref()),
        to_move: to_move.unwrap_or(Player::First),
        ply: p.ply,
    };
    let checked = Position::from_setup(setup, rules);
    if to_move.is_none() {
        // Nobody is to move in a finished position (how outputs show one), and such a position
        // must be accepted back as it is; its end does not depend on who would have moved.
        match checked {
            Ok(position) if position.is_over() => return Ok(position),
            Ok(_) | Err(PositionError::MoverHasNoStones) => {
                return Err(GameError::invalid(
                    sub(field, "to_move"),
                    "must be PLAYER_FIRST or PLAYER_SECOND: only a finished position has no \
                     player to move, and this one is not over by the rule set's end condition \
                     or ply limit, the only ends a position shows by itself (a game that ended \
                     by repetition, or by a refill past the engine's bounds, did so by its \
                     history: send the history instead)",
                ));
            }
            Err(_) => {}
        }
    }
    checked.map_err(|e| GameError::invalid(position_error_field(&e, field), e.to_string()))
}

/// A listing filter.
pub fn filter(value: i32) -> Result<GameFilter> {
    match pb::GameFilter::try_from(value) {
        Ok(pb::GameFilter::Unspecified | pb::GameFilter::All) => Ok(GameFilter::All),
        Ok(pb::GameFilter::Open) => Ok(GameFilter::Open),
        Ok(pb::GameFilter::Active) => Ok(GameFilter::Active),
        Ok(pb::GameFilter::Finished) => Ok(GameFilter::Finished),
        Err(_) => Err(GameError::invalid(
            "filter",
            format!("unknown GameFilter value {value}"),
        )),
    }
}

/// A `google.protobuf.Duration`: present, normalised (seconds and nanos of one sign, nanos
/// below a second) and not negative.
pub fn duration(value: Option<&prost_types::Duration>, field: &str) -> Result<std::time::Duration> {
    let value = value.ok_or_else(|| GameError::invalid(field, "a duration is required"))?;
    if (value.seconds > 0 && value.nanos < 0) || (value.seconds < 0 && value.nanos > 0) {
        // google.protobuf.Duration's own rule; "negative" would misname 5 s − 0.999… s.
        return Err(GameError::invalid(
            field,
            format!(
                "seconds and nanos must have the same sign (got {}s {}ns)",
                value.seconds, value.nanos
            ),
        ));
    }
    if value.seconds < 0 || value.nanos < 0 {
        return Err(GameError::invalid(
            field,
            format!(
                "must not be negative (got {}s {}ns)",
                value.seconds, value.nanos
            ),
        ));
    }
    if value.nanos >= 1_000_000_000 {
        return Err(GameError::invalid(
            field,
            format!("nanos must be below 1e9 (got {})", value.nanos),
        ));
    }
    let seconds = u64::try_from(value.seconds).unwrap_or(0);
    let nanos = u32::try_from(value.nanos).unwrap_or(0);
    Ok(std::time::Duration::new(seconds, nanos))
}

/// A `TimeControl` (unset, or no case set → untimed), checked against the server's bounds.
pub fn time_control(value: Option<&pb::TimeControl>, field: &str) -> Result<TimeControl> {
    use pb::time_control::Kind;
    let checked = |result: std::result::Result<TimeControl, TimeControlError>, case: &str| {
        result.map_err(|e| GameError::invalid(format!("{field}.{case}.{}", e.field), e.description))
    };
    match value.and_then(|v| v.kind.as_ref()) {
        None => Ok(TimeControl::Untimed),
        Some(Kind::RealTime(real)) => {
            let case = "real_time";
            let initial = duration(real.initial.as_ref(), &format!("{field}.{case}.initial"))?;
            // An unset increment is no increment ("5+0").
            let increment = match real.increment.as_ref() {
                None => std::time::Duration::ZERO,
                Some(inc) => duration(Some(inc), &format!("{field}.{case}.increment"))?,
            };
            checked(TimeControl::real_time(initial, increment), case)
        }
        Some(Kind::Correspondence(corr)) => {
            let case = "correspondence";
            let per_move = duration(corr.per_move.as_ref(), &format!("{field}.{case}.per_move"))?;
            checked(TimeControl::correspondence(per_move), case)
        }
    }
}

/// Longest wait for a person before a seek plays the computer.
pub const MAX_COMPUTER_AFTER: std::time::Duration = std::time::Duration::from_secs(600);

/// A `ComputerFallback` (unset → none).
pub fn computer_fallback(
    value: Option<&pb::ComputerFallback>,
    field: &str,
) -> Result<Option<(std::time::Duration, Level)>> {
    let Some(value) = value else {
        return Ok(None);
    };
    let after = duration(value.after.as_ref(), &sub(field, "after"))?;
    if !(std::time::Duration::from_secs(1)..=MAX_COMPUTER_AFTER).contains(&after) {
        return Err(GameError::invalid(
            sub(field, "after"),
            format!(
                "must be between 1 second and {} seconds",
                MAX_COMPUTER_AFTER.as_secs()
            ),
        ));
    }
    // 0 means "no computer" on a ComputerOpponent, not here: a fallback is a computer.
    let level = u8::try_from(value.level)
        .ok()
        .and_then(Level::from_number)
        .ok_or_else(|| {
            GameError::invalid(
                sub(field, "level"),
                format!(
                    "must be 1 ({}) to 7 ({}); got {}",
                    Level::Random,
                    Level::Master,
                    value.level
                ),
            )
        })?;
    Ok(Some((after, level)))
}

/// A `Speed` that may be unset (`SPEED_UNSPECIFIED` → `None`: any speed, as a filter).
pub fn optional_speed(value: i32, field: &str) -> Result<Option<Speed>> {
    match pb::Speed::try_from(value) {
        Ok(pb::Speed::Unspecified) => Ok(None),
        Ok(pb::Speed::Bullet) => Ok(Some(Speed::Bullet)),
        Ok(pb::Speed::Blitz) => Ok(Some(Speed::Blitz)),
        Ok(pb::Speed::Rapid) => Ok(Some(Speed::Rapid)),
        Ok(pb::Speed::Classical) => Ok(Some(Speed::Classical)),
        Ok(pb::Speed::Correspondence) => Ok(Some(Speed::Correspondence)),
        Err(_) => Err(GameError::invalid(
            field,
            format!("unknown Speed value {value}"),
        )),
    }
}

/// A `Speed` that must be set.
pub fn speed(value: i32, field: &str) -> Result<Speed> {
    optional_speed(value, field)?.ok_or_else(|| {
        GameError::invalid(
            field,
            "a speed is required: SPEED_BULLET, SPEED_BLITZ, SPEED_RAPID, SPEED_CLASSICAL or SPEED_CORRESPONDENCE",
        )
    })
}

/// A `PlayerResult` filter (`PLAYER_RESULT_UNSPECIFIED` → `None`: any game).
pub fn player_result(value: i32, field: &str) -> Result<Option<PlayerResult>> {
    match pb::PlayerResult::try_from(value) {
        Ok(pb::PlayerResult::Unspecified) => Ok(None),
        Ok(pb::PlayerResult::Win) => Ok(Some(PlayerResult::Win)),
        Ok(pb::PlayerResult::Draw) => Ok(Some(PlayerResult::Draw)),
        Ok(pb::PlayerResult::Loss) => Ok(Some(PlayerResult::Loss)),
        Err(_) => Err(GameError::invalid(
            field,
            format!("unknown PlayerResult value {value}"),
        )),
    }
}

/// A `RatingRange` (unset → none; `max` 0, which proto3 cannot tell from unset, → no upper
/// bound). Its order is the seek pool's to check.
///
/// # Errors
///
/// [`GameError::InvalidArgument`] on `rating_range.min` or `.max` for a negative bound: no
/// rating is below zero, and such a range was taken as "any" and listed as typed.
pub fn rating_range(value: Option<&pb::RatingRange>) -> Result<Option<(i32, i32)>> {
    let Some(range) = value else {
        return Ok(None);
    };
    for (bound, field) in [
        (range.min, "rating_range.min"),
        (range.max, "rating_range.max"),
    ] {
        if bound < 0 {
            return Err(GameError::invalid(
                field,
                format!(
                    "{bound} is negative; ratings run from {} to {} (0 = no bound)",
                    oanquan_game::rating::MIN_RATING,
                    oanquan_game::rating::MAX_RATING
                ),
            ));
        }
    }
    let highest = oanquan_game::rating::MAX_RATING as i32;
    if range.max == 0 && range.min > highest {
        // Said of the bound given: "5000 above 4000" read as if the caller had sent 4000.
        return Err(GameError::invalid(
            "rating_range.min",
            format!(
                "{} is above the highest rating there is ({highest})",
                range.min
            ),
        ));
    }
    let max = if range.max == 0 { highest } else { range.max };
    Ok(Some((range.min, max)))
}
