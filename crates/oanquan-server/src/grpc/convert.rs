//! Protobuf ↔ domain conversions, at the edge. Inputs are validated field by field, so nothing a
//! client sends can reach a cast or an index unchecked; errors name the field (`move.square`).

use std::time::SystemTime;

use oanquan_ai::{Level, SearchResult};
use oanquan_proto::v1 as pb;
use oanquan_rules::{
    ByPlayer, Direction, EmptyMandarinNext, EndCondition, EndReason, MAX_BOARD_STONES,
    MandarinSetup, Move, Outcome, Player, Position, PositionError, Preset, Rules, RulesError,
    SQUARES, Setup, Step,
};
use pb::step::Kind as StepKind;
use prost_types::Timestamp;

use crate::domain::{
    GameError, GameEvent, GameEventKind, GameFilter, GameId, GameInfo, GameResult, GameStatus,
    LobbyEvent, LobbyEventKind, MoveRecord, PlayerKind, SeatInfo, Termination, quoted,
};

type Result<T> = std::result::Result<T, GameError>;

fn sub(field: &str, name: &str) -> String {
    format!("{field}.{name}")
}

// ---------------------------------------------------------------------------------------------
// Inputs.

/// A game id field.
pub fn game_id(id: &str, field: &str) -> Result<GameId> {
    GameId::parse(id).map_err(|e| GameError::invalid(field, e.to_string()))
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

/// An analysis.
#[must_use]
pub fn analysis_out(result: &SearchResult) -> pb::AnalyzeResponse {
    pb::AnalyzeResponse {
        best_move: result.best_move.map(move_out),
        eval_points: result.eval_points,
        principal_variation: result.pv.iter().map(|&mv| move_out(mv)).collect(),
        depth: result.depth,
        nodes: result.nodes,
        exact: result.exact,
        time_ms: u32::try_from(result.time.as_millis()).unwrap_or(u32::MAX),
    }
}

/// A `Player` that may be unset (`PLAYER_UNSPECIFIED` → `None`).
pub fn optional_player(value: i32, field: &str) -> Result<Option<Player>> {
    match pb::Player::try_from(value) {
        Ok(pb::Player::Unspecified) => Ok(None),
        Ok(pb::Player::First) => Ok(Some(Player::First)),
        Ok(pb::Player::Second) => Ok(Some(Player::Second)),
        Err(_) => Err(GameError::invalid(
            field,
            format!("unknown Player value {value}; use PLAYER_FIRST or PLAYER_SECOND"),
        )),
    }
}

/// A `Player` that must be set.
pub fn player(value: i32, field: &str) -> Result<Player> {
    optional_player(value, field)?.ok_or_else(|| {
        GameError::invalid(field, "must be PLAYER_FIRST or PLAYER_SECOND, not unset")
    })
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

fn twelve(values: &[u32], field: &str, name: &str, empty_ok: bool) -> Result<[i32; SQUARES]> {
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
                format!(
                    "{value} is out of range; a square holds at most {MAX_BOARD_STONES} stones"
                ),
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
        PositionError::BoardOverfull { .. } => sub(field, "squares"),
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
        squares: twelve(&p.squares, field, "squares", false)?,
        // No entries = no pieces, so stone-setup clients need not send twelve zeros.
        pieces: twelve(&p.pieces, field, "pieces", true)?,
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
                     or ply limit (the only ends a position shows without its game's history)",
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

// ---------------------------------------------------------------------------------------------
// Outputs.

/// A time stamp.
#[must_use]
pub fn timestamp(time: SystemTime) -> Option<Timestamp> {
    Some(Timestamp::from(time))
}

/// A player.
#[must_use]
pub fn player_out(player: Player) -> i32 {
    match player {
        Player::First => pb::Player::First,
        Player::Second => pb::Player::Second,
    }
    .into()
}

fn optional_player_out(player: Option<Player>) -> i32 {
    player.map_or(pb::Player::Unspecified.into(), player_out)
}

fn pair(pair: ByPlayer<i32>) -> Option<pb::PlayerPair> {
    Some(pb::PlayerPair {
        first: pair.first,
        second: pair.second,
    })
}

/// A rule set.
#[must_use]
pub fn rule_set_out(rules: &Rules) -> pb::RuleSet {
    let (mandarin_setup, quan_value) = match rules.mandarin {
        MandarinSetup::Stones => (pb::MandarinSetup::Stones, 0),
        MandarinSetup::Piece { value } => (pb::MandarinSetup::Piece, u32::from(value)),
    };
    pb::RuleSet {
        mandarin_setup: mandarin_setup.into(),
        quan_value,
        empty_mandarin: match rules.empty_mandarin_next {
            EmptyMandarinNext::EndsTurn => pb::EmptyMandarinRule::EndsTurn,
            EmptyMandarinNext::EmptySquare => pb::EmptyMandarinRule::EmptySquare,
        }
        .into(),
        protected_plies: rules.protected_plies,
        immature_mandarin_min_stones: u32::from(rules.immature_mandarin),
        end_condition: match rules.end_condition {
            EndCondition::MandarinSquaresEmpty => pb::EndCondition::MandarinSquaresEmpty,
            EndCondition::PiecesCaptured => pb::EndCondition::PiecesCaptured,
        }
        .into(),
        repetition_limit: rules.repetition_limit,
        max_plies: rules.max_plies,
    }
}

/// A preset.
#[must_use]
pub fn preset_out(preset: Preset) -> pb::Preset {
    pb::Preset {
        name: preset.name().to_owned(),
        description: preset.description().to_owned(),
        rule_set: Some(rule_set_out(&preset.rules())),
    }
}

fn end_reason_out(reason: Option<EndReason>) -> pb::EndReason {
    match reason {
        None => pb::EndReason::Unspecified,
        Some(EndReason::Mandarins) => pb::EndReason::Mandarins,
        Some(EndReason::Repetition) => pb::EndReason::Repetition,
        Some(EndReason::PlyLimit) => pb::EndReason::PlyLimit,
    }
}

fn outcome_out(outcome: Option<Outcome>) -> pb::Outcome {
    match outcome {
        None => pb::Outcome::Unspecified,
        Some(Outcome::Decisive {
            winner: Player::First,
        }) => pb::Outcome::FirstWins,
        Some(Outcome::Decisive {
            winner: Player::Second,
        }) => pb::Outcome::SecondWins,
        Some(Outcome::Draw) => pb::Outcome::Draw,
    }
}

/// A position, with every derived field.
#[must_use]
pub fn position_out(position: &Position) -> pb::Position {
    pb::Position {
        squares: position.squares().iter().map(|&s| u32::from(s)).collect(),
        pieces: position.pieces().iter().map(|&s| u32::from(s)).collect(),
        captured: pair(position.captured()),
        captured_pieces: pair(position.captured_pieces().map(i32::from)),
        scores: pair(position.scores()),
        // Nobody is to move once the game is over.
        to_move: optional_player_out((!position.is_over()).then(|| position.to_move())),
        ply: position.ply(),
        over: position.is_over(),
        end_reason: end_reason_out(position.end_reason()).into(),
        outcome: outcome_out(position.outcome()).into(),
        notation: position.to_string(),
    }
}

/// A move.
#[must_use]
pub fn move_out(mv: Move) -> pb::Move {
    pb::Move {
        square: Some(u32::from(mv.square)),
        direction: match mv.direction {
            Direction::Right => pb::Direction::Right,
            Direction::Left => pb::Direction::Left,
        }
        .into(),
    }
}

/// A position's legal moves, and whether (and how) it is over instead.
#[must_use]
pub fn legal_moves_out(position: &Position) -> pb::LegalMovesResponse {
    pb::LegalMovesResponse {
        moves: position
            .legal_moves()
            .iter()
            .map(|&mv| move_out(mv))
            .collect(),
        over: position.is_over(),
        end_reason: end_reason_out(position.end_reason()).into(),
        outcome: outcome_out(position.outcome()).into(),
    }
}

/// A trace step.
#[must_use]
pub fn step_out(step: &Step) -> pb::Step {
    let kind = match *step {
        Step::PickUp {
            square,
            stones,
            relay,
        } => StepKind::PickUp(pb::step::PickUp {
            square: Some(square.into()),
            stones: stones.into(),
            relay,
        }),
        Step::Sow { square } => StepKind::Sow(pb::step::Sow {
            square: Some(square.into()),
        }),
        Step::StopAtMandarin { square } => StepKind::StopAtMandarin(pb::step::StopAtMandarin {
            square: Some(square.into()),
        }),
        Step::StopTwoEmpty { gap, next } => StepKind::StopTwoEmpty(pb::step::StopTwoEmpty {
            gap: Some(gap.into()),
            next: Some(next.into()),
        }),
        Step::Capture {
            player,
            square,
            stones,
            pieces,
        } => StepKind::Capture(pb::step::Capture {
            square: Some(square.into()),
            stones: stones.into(),
            pieces: pieces.into(),
            player: player_out(player),
        }),
        Step::CaptureProtected { square } => {
            StepKind::CaptureProtected(pb::step::CaptureProtected {
                square: Some(square.into()),
            })
        }
        Step::CaptureImmature { square } => StepKind::CaptureImmature(pb::step::CaptureImmature {
            square: Some(square.into()),
        }),
        Step::Refill {
            player,
            captured_after,
        } => StepKind::Refill(refill_out(player, captured_after)),
        Step::GameOver { reason, collected } => StepKind::GameOver(pb::step::GameOver {
            reason: end_reason_out(Some(reason)).into(),
            collected: pair(collected),
        }),
    };
    pb::Step { kind: Some(kind) }
}

fn refill_out(player: Player, captured_after: i32) -> pb::step::Refill {
    pb::step::Refill {
        player: player_out(player),
        captured_after,
    }
}

/// A trace.
#[must_use]
pub fn steps_out(steps: &[Step]) -> Vec<pb::Step> {
    steps.iter().map(step_out).collect()
}

fn status_out(status: GameStatus) -> i32 {
    match status {
        GameStatus::WaitingForPlayers => pb::GameStatus::WaitingForPlayers,
        GameStatus::Active => pb::GameStatus::Active,
        GameStatus::Finished => pb::GameStatus::Finished,
        GameStatus::Aborted => pb::GameStatus::Aborted,
    }
    .into()
}

fn kind_out(kind: PlayerKind) -> i32 {
    match kind {
        PlayerKind::Human => pb::PlayerKind::Human,
        PlayerKind::Computer { .. } => pb::PlayerKind::Computer,
    }
    .into()
}

fn seat_out(player: Player, seat: Option<&SeatInfo>) -> pb::Seat {
    pb::Seat {
        player: player_out(player),
        occupied: seat.is_some(),
        display_name: seat.map(|s| s.display_name.clone()).unwrap_or_default(),
        kind: seat.map_or(pb::PlayerKind::Unspecified.into(), |s| kind_out(s.kind)),
        computer_level: match seat.map(|s| s.kind) {
            Some(PlayerKind::Computer { level }) => u32::from(level.number()),
            _ => 0,
        },
    }
}

/// A result.
#[must_use]
pub fn result_out(result: &GameResult) -> pb::GameResult {
    let end_reason = match result.termination {
        Termination::Rules(reason) => end_reason_out(Some(reason)),
        Termination::Resignation => pb::EndReason::Resignation,
        Termination::Aborted => pb::EndReason::Aborted,
    };
    pb::GameResult {
        outcome: outcome_out(result.outcome).into(),
        winner: optional_player_out(result.outcome.and_then(Outcome::winner)),
        scores: pair(result.scores),
        end_reason: end_reason.into(),
        ended_by: optional_player_out(result.ended_by),
    }
}

/// A game.
#[must_use]
pub fn game_out(game: &GameInfo) -> pb::Game {
    game_with_position(game, position_out(&game.position))
}

/// [`game_out`] with its current position already converted.
fn game_with_position(game: &GameInfo, position: pb::Position) -> pb::Game {
    pb::Game {
        id: game.id.to_string(),
        rule_set: Some(rule_set_out(&game.rules)),
        preset: game.preset.map(|p| p.name().to_owned()).unwrap_or_default(),
        first_seat: Some(seat_out(Player::First, game.seats.first.as_ref())),
        second_seat: Some(seat_out(Player::Second, game.seats.second.as_ref())),
        status: status_out(game.status),
        start_position: Some(position_out(&game.start)),
        position: Some(position),
        move_count: game.move_count,
        result: game.result.as_ref().map(result_out),
        create_time: timestamp(game.created),
        update_time: timestamp(game.updated),
    }
}

/// A move record.
#[must_use]
pub fn move_record_out(record: &MoveRecord) -> pb::MoveRecord {
    move_record_with_position(record, position_out(&record.position))
}

/// [`move_record_out`] with the position after the move already converted.
fn move_record_with_position(record: &MoveRecord, position: pb::Position) -> pb::MoveRecord {
    pb::MoveRecord {
        number: record.number,
        player: player_out(record.player),
        r#move: Some(move_out(record.mv)),
        steps: steps_out(&record.steps),
        position: Some(position),
        play_time: timestamp(record.time),
    }
}

/// A move record and the game after it (a `PlayMoveResponse`): the position after the move,
/// which is also the game's, is converted once.
#[must_use]
pub fn move_and_game_out(record: &MoveRecord, game: &GameInfo) -> (pb::MoveRecord, pb::Game) {
    let after = position_out(&record.position);
    let current = if game.position == record.position {
        after.clone()
    } else {
        position_out(&game.position)
    };
    (
        move_record_with_position(record, after),
        game_with_position(game, current),
    )
}

/// A game event.
#[must_use]
pub fn game_event_out(event: &GameEvent) -> pb::GameEvent {
    use pb::game_event as ge;
    let kind = match &event.kind {
        GameEventKind::PlayerJoined {
            seat,
            display_name,
            kind,
        } => ge::Kind::PlayerJoined(ge::PlayerJoined {
            seat: player_out(*seat),
            display_name: display_name.clone(),
            kind: kind_out(*kind),
        }),
        GameEventKind::GameStarted { game } => ge::Kind::GameStarted(ge::GameStarted {
            game: Some(game_out(game)),
        }),
        GameEventKind::MovePlayed { record } => ge::Kind::MovePlayed(ge::MovePlayed {
            record: Some(move_record_out(record)),
        }),
        GameEventKind::TurnStarted {
            player,
            ply,
            refill,
        } => ge::Kind::TurnStarted(ge::TurnStarted {
            player: player_out(*player),
            ply: *ply,
            refill: refill.map(|captured_after| refill_out(*player, captured_after)),
        }),
        GameEventKind::GameOver { result } => ge::Kind::GameOver(ge::GameOver {
            result: Some(result_out(result)),
        }),
    };
    pb::GameEvent {
        sequence: event.sequence,
        time: timestamp(event.time),
        kind: Some(kind),
    }
}

/// A game snapshot (not a real event: it carries the sequence it reflects).
#[must_use]
pub fn game_snapshot_out(game: &GameInfo, sequence: u64) -> pb::GameEvent {
    pb::GameEvent {
        sequence,
        time: timestamp(SystemTime::now()),
        kind: Some(pb::game_event::Kind::Snapshot(pb::game_event::Snapshot {
            game: Some(game_out(game)),
            move_count: game.move_count,
        })),
    }
}

/// A game heartbeat.
#[must_use]
pub fn game_heartbeat_out(sequence: u64) -> pb::GameEvent {
    pb::GameEvent {
        sequence,
        time: timestamp(SystemTime::now()),
        kind: Some(pb::game_event::Kind::Heartbeat(
            pb::game_event::Heartbeat {},
        )),
    }
}

/// A lobby event.
#[must_use]
pub fn lobby_event_out(event: &LobbyEvent) -> pb::LobbyEvent {
    use pb::lobby_event as le;
    let kind = match &event.kind {
        LobbyEventKind::GameCreated { game } => le::Kind::GameCreated(le::GameCreated {
            game: Some(game_out(game)),
        }),
        LobbyEventKind::SeatTaken {
            game_id,
            seat,
            display_name,
        } => le::Kind::SeatTaken(le::SeatTaken {
            game_id: game_id.to_string(),
            seat: player_out(*seat),
            display_name: display_name.clone(),
        }),
        LobbyEventKind::GameStarted { game_id } => le::Kind::GameStarted(le::GameStarted {
            game_id: game_id.to_string(),
        }),
        LobbyEventKind::GameFinished { game_id, result } => {
            le::Kind::GameFinished(le::GameFinished {
                game_id: game_id.to_string(),
                result: Some(result_out(result)),
            })
        }
    };
    pb::LobbyEvent {
        sequence: event.sequence,
        time: timestamp(event.time),
        kind: Some(kind),
    }
}

/// A lobby snapshot.
#[must_use]
pub fn lobby_snapshot_out(games: &[GameInfo], sequence: u64) -> pb::LobbyEvent {
    pb::LobbyEvent {
        sequence,
        time: timestamp(SystemTime::now()),
        kind: Some(pb::lobby_event::Kind::Snapshot(pb::lobby_event::Snapshot {
            games: games.iter().map(game_out).collect(),
        })),
    }
}

/// A lobby heartbeat.
#[must_use]
pub fn lobby_heartbeat_out(sequence: u64) -> pb::LobbyEvent {
    pb::LobbyEvent {
        sequence,
        time: timestamp(SystemTime::now()),
        kind: Some(pb::lobby_event::Kind::Heartbeat(
            pb::lobby_event::Heartbeat {},
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field_of(error: GameError) -> String {
        match error {
            GameError::InvalidArgument { field, .. } => field,
            other => panic!("expected InvalidArgument, got {other:?}"),
        }
    }

    #[test]
    fn rule_sets_round_trip() {
        for preset in Preset::ALL {
            let rules = preset.rules();
            assert_eq!(
                rule_set(&rule_set_out(&rules), "r").unwrap(),
                rules,
                "{preset}"
            );
            let (back, named) = rules_spec(
                Some(&pb::RulesSpec {
                    kind: Some(pb::rules_spec::Kind::Preset(preset.name().to_owned())),
                }),
                "rules",
            )
            .unwrap();
            assert_eq!((back, named), (rules, Some(preset)));
        }
        assert_eq!(
            rules_spec(None, "rules").unwrap(),
            (Rules::STANDARD, Some(Preset::Standard))
        );
    }

    #[test]
    fn bad_rule_sets_name_the_field() {
        let good = rule_set_out(&Rules::MANCALA_WORLD);
        let cases: Vec<(pb::RuleSet, &str)> = vec![
            (
                pb::RuleSet {
                    mandarin_setup: 0,
                    ..good
                },
                "r.mandarin_setup",
            ),
            (
                pb::RuleSet {
                    mandarin_setup: 99,
                    ..good
                },
                "r.mandarin_setup",
            ),
            (
                pb::RuleSet {
                    quan_value: 256,
                    ..good
                },
                "r.quan_value",
            ),
            (
                pb::RuleSet {
                    quan_value: 0,
                    ..good
                },
                "r.quan_value",
            ),
            (
                pb::RuleSet {
                    empty_mandarin: -1,
                    ..good
                },
                "r.empty_mandarin",
            ),
            (
                pb::RuleSet {
                    end_condition: 0,
                    ..good
                },
                "r.end_condition",
            ),
            (
                pb::RuleSet {
                    immature_mandarin_min_stones: 300,
                    ..good
                },
                "r.immature_mandarin_min_stones",
            ),
            (
                pb::RuleSet {
                    repetition_limit: 1,
                    ..good
                },
                "r.repetition_limit",
            ),
            (
                pb::RuleSet {
                    max_plies: 0,
                    ..good
                },
                "r.max_plies",
            ),
        ];
        for (set, field) in cases {
            assert_eq!(field_of(rule_set(&set, "r").unwrap_err()), field, "{set:?}");
        }
        let unknown = pb::RulesSpec {
            kind: Some(pb::rules_spec::Kind::Preset("chess".into())),
        };
        assert_eq!(
            field_of(rules_spec(Some(&unknown), "rules").unwrap_err()),
            "rules.preset"
        );
    }

    #[test]
    fn positions_round_trip() {
        for preset in Preset::ALL {
            let rules = preset.rules();
            let start = Position::new(rules).unwrap();
            let (after, _) = start.play(start.legal_moves()[0]).unwrap();
            for p in [start, after] {
                assert_eq!(position(Some(&position_out(&p)), rules, "p").unwrap(), p);
            }
        }
        let start = Position::new(Rules::STANDARD).unwrap();
        assert_eq!(position(None, Rules::STANDARD, "p").unwrap(), start);
        // Stone-setup clients may leave `pieces` empty.
        let mut no_pieces = position_out(&start);
        no_pieces.pieces.clear();
        assert_eq!(
            position(Some(&no_pieces), Rules::STANDARD, "p").unwrap(),
            start
        );
    }

    #[test]
    fn a_finished_position_names_nobody_and_reads_back() {
        // At the ply limit with SECOND to move: over whoever would move.
        let setup = Setup {
            to_move: Player::Second,
            ply: Rules::STANDARD.max_plies,
            ..Setup::start(&Rules::STANDARD)
        };
        let finished = Position::from_setup(setup, Rules::STANDARD).unwrap();
        let out = position_out(&finished);
        assert!(out.over);
        assert_eq!(out.to_move(), pb::Player::Unspecified);
        let back = position(Some(&out), Rules::STANDARD, "p").unwrap();
        assert!(back.is_over());
        assert_eq!(back.end_reason(), finished.end_reason());
        assert_eq!(
            Setup {
                to_move: Player::Second,
                ..back.to_setup()
            },
            setup
        );
    }

    #[test]
    fn a_play_move_response_converts_the_position_after_the_move_once() {
        let start = Position::new(Rules::STANDARD).unwrap();
        let mv = start.legal_moves()[0];
        let (after, steps) = start.play(mv).unwrap();
        let record = MoveRecord {
            number: 1,
            player: Player::First,
            mv,
            steps,
            position: after,
            time: SystemTime::UNIX_EPOCH,
        };
        let mut game = GameInfo {
            id: GameId::parse("g1").unwrap(),
            rules: Rules::STANDARD,
            preset: None,
            seats: ByPlayer::new(None, None),
            status: GameStatus::Active,
            start,
            position: after,
            move_count: 1,
            result: None,
            created: SystemTime::UNIX_EPOCH,
            updated: SystemTime::UNIX_EPOCH,
            sequence: 6,
        };
        let (record_out, game_out_) = move_and_game_out(&record, &game);
        assert_eq!(record_out, move_record_out(&record));
        assert_eq!(game_out_, game_out(&game));
        // A game that moved on since (not what PlayMove returns) still shows its own position.
        game.position = start;
        assert_eq!(move_and_game_out(&record, &game).1, game_out(&game));
    }

    #[test]
    fn bad_positions_name_the_field() {
        let good = position_out(&Position::new(Rules::STANDARD).unwrap());
        let mut short = good.clone();
        short.squares.pop();
        let mut huge = good.clone();
        huge.squares[3] = u32::MAX;
        let mut piece = good.clone();
        piece.pieces[0] = 1;
        let mut total = good.clone();
        total.squares[1] += 1;
        let mut nobody = good.clone();
        nobody.to_move = 0;
        let mut alien = good.clone();
        alien.to_move = 7;
        let mut debt = good.clone();
        debt.captured = Some(pb::PlayerPair {
            first: i32::MIN,
            second: 0,
        });
        let mut heap = good.clone();
        heap.squares[1] = 1000;
        heap.captured = Some(pb::PlayerPair {
            first: -995,
            second: 0,
        });
        let mut full = good.clone();
        full.squares[0] = 255;
        full.captured = Some(pb::PlayerPair {
            first: -245,
            second: 0,
        });
        let mut pieces = good.clone();
        pieces.captured_pieces = Some(pb::PlayerPair {
            first: 0,
            second: 3,
        });
        let cases = [
            (short, "p.squares"),
            (huge, "p.squares[3]"),
            (piece, "p.pieces"),
            (total, "p"),
            (nobody, "p.to_move"),
            (alien, "p.to_move"),
            (debt, "p.captured.first"),
            (heap, "p.squares[1]"),
            (full, "p.squares"),
            (pieces, "p.captured_pieces.second"),
        ];
        for (p, field) in cases {
            assert_eq!(
                field_of(position(Some(&p), Rules::STANDARD, "p").unwrap_err()),
                field
            );
        }
    }

    #[test]
    fn moves_round_trip_and_reject_bad_input() {
        for square in 0..12 {
            for direction in Direction::ALL {
                let m = Move::new(square, direction);
                assert_eq!(mv(Some(&move_out(m)), "move").unwrap(), m);
            }
        }
        let bad = |square, direction| pb::Move { square, direction };
        assert_eq!(field_of(mv(None, "move").unwrap_err()), "move");
        // Unset is not square 0: presence is what lets square 0 show in JSON.
        for square in [None, Some(12), Some(255), Some(256), Some(u32::MAX)] {
            assert_eq!(
                field_of(mv(Some(&bad(square, 1)), "move").unwrap_err()),
                "move.square"
            );
        }
        for direction in [0, 3, -1] {
            assert_eq!(
                field_of(mv(Some(&bad(Some(1), direction)), "move").unwrap_err()),
                "move.direction"
            );
        }
    }

    #[test]
    fn enums_and_ids_reject_unknown_values() {
        assert_eq!(optional_player(0, "seat").unwrap(), None);
        assert_eq!(optional_player(2, "seat").unwrap(), Some(Player::Second));
        assert_eq!(field_of(optional_player(3, "seat").unwrap_err()), "seat");
        assert_eq!(field_of(filter(5).unwrap_err()), "filter");
        assert_eq!(filter(0).unwrap(), GameFilter::All);
        assert_eq!(field_of(game_id("", "game_id").unwrap_err()), "game_id");
        assert_eq!(field_of(game_id("a/b", "game_id").unwrap_err()), "game_id");
        assert_eq!(
            field_of(game_id(&"a".repeat(65), "game_id").unwrap_err()),
            "game_id"
        );
    }

    #[test]
    fn traces_convert_every_step() {
        let rules = Rules::STANDARD;
        let start = Position::new(rules).unwrap();
        let (_, trace) = start.play(Move::new(1, Direction::Right)).unwrap();
        let steps = steps_out(&trace);
        assert_eq!(steps.len(), trace.len());
        assert!(steps.iter().all(|s| s.kind.is_some()));
        assert!(matches!(
            steps.last().and_then(|s| s.kind.as_ref()),
            Some(StepKind::Capture(pb::step::Capture {
                square: Some(2),
                stones: 6,
                ..
            }))
        ));
    }
}
