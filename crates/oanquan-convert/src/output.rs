//! Domain → protobuf: responses, with every derived field filled in.

use std::cell::RefCell;
use std::time::SystemTime;

use oanquan_proto::v1 as pb;
use oanquan_rules::{
    ByPlayer, Direction, EmptyMandarinNext, EndCondition, EndReason, MandarinSetup, Move, Outcome,
    Player, Position, Preset, Rules, Step,
};
use pb::step::Kind as StepKind;
use prost_types::Timestamp;

use oanquan_game::account::{Account, ApiKeyRecord, RatingChange, SeatAccount};
use oanquan_game::clock::{ClockReading, TimeControl};
use oanquan_game::computer::Analysis;
use oanquan_game::rating::{Rating, Speed};
use oanquan_game::seek::SeekInfo;
use oanquan_game::timing;
use oanquan_game::{
    GameInfo, GameResult, GameStatus, MoveRecord, PlayerKind, Ranked, SeatInfo, Termination,
};

/// An analysis that took `history_plies` moves of the game before the position into account.
#[must_use]
pub fn analysis_out(analysis: &Analysis, history_plies: usize) -> pb::AnalyzeResponse {
    let result = &analysis.result;
    pb::AnalyzeResponse {
        best_move: result.best_move.map(move_out),
        eval_points: result.eval_points,
        principal_variation: result.pv.iter().map(|&mv| move_out(mv)).collect(),
        depth: result.depth,
        nodes: result.nodes,
        exact: result.exact,
        time_ms: u32::try_from(result.time.as_millis()).unwrap_or(u32::MAX),
        book: result.book,
        tablebase: result.tablebase,
        history_plies: u32::try_from(history_plies).unwrap_or(u32::MAX),
        for_mistakes: result.for_mistakes,
        cut_short: analysis.cut_short,
    }
}

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

pub(super) fn optional_player_out(player: Option<Player>) -> i32 {
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

pub(super) fn refill_out(player: Player, captured_after: i32) -> pb::step::Refill {
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

pub(super) fn kind_out(kind: PlayerKind) -> i32 {
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
        account: seat.and_then(|s| s.account.as_ref()).map(seat_account_out),
    }
}

/// An account in a seat or a seek (its id stays inside the server).
#[must_use]
pub fn seat_account_out(account: &SeatAccount) -> pb::SeatAccount {
    pb::SeatAccount {
        username: account.username.clone(),
        rating: account.rating.unwrap_or(0),
        provisional: account.provisional,
    }
}

/// One side's rating change.
#[must_use]
pub fn rating_change_out(change: &RatingChange) -> pb::RatingChange {
    pb::RatingChange {
        before: change.before,
        after: change.after,
        provisional: change.provisional,
    }
}

/// A speed.
#[must_use]
pub fn speed_out(speed: Speed) -> pb::Speed {
    match speed {
        Speed::Bullet => pb::Speed::Bullet,
        Speed::Blitz => pb::Speed::Blitz,
        Speed::Rapid => pb::Speed::Rapid,
        Speed::Classical => pb::Speed::Classical,
        Speed::Correspondence => pb::Speed::Correspondence,
    }
}

/// A rating at one speed.
#[must_use]
pub fn rating_out(speed: Speed, rating: &Rating) -> pb::Rating {
    pb::Rating {
        speed: speed_out(speed).into(),
        rating: rating.rounded(),
        deviation: rating.rounded_deviation(),
        volatility: rating.clamped().volatility,
        games: rating.games,
        provisional: rating.is_provisional(),
    }
}

/// A player's public profile.
#[must_use]
pub fn profile_out(account: &Account) -> pb::PlayerProfile {
    pb::PlayerProfile {
        username: account.username.as_str().to_owned(),
        ratings: account
            .ratings
            .iter()
            .map(|(&speed, rating)| rating_out(speed, rating))
            .collect(),
        wins: account.record.wins,
        draws: account.record.draws,
        losses: account.record.losses,
        create_time: timestamp(account.created),
    }
}

/// An API key's public data.
#[must_use]
pub fn api_key_out(key: &ApiKeyRecord) -> pb::ApiKey {
    pb::ApiKey {
        id: key.id.clone(),
        create_time: timestamp(key.created),
        revoke_time: key.revoked.and_then(timestamp),
    }
}

/// A leaderboard line at `speed`.
#[must_use]
pub fn leaderboard_entry_out(speed: Speed, ranked: &Ranked) -> pb::LeaderboardEntry {
    pb::LeaderboardEntry {
        rank: ranked.rank,
        username: ranked.account.username.as_str().to_owned(),
        rating: Some(rating_out(speed, &ranked.account.rating(speed))),
    }
}

/// A result.
#[must_use]
pub fn result_out(result: &GameResult) -> pb::GameResult {
    let end_reason = match result.termination {
        Termination::Rules(reason) => end_reason_out(Some(reason)),
        Termination::Resignation => pb::EndReason::Resignation,
        Termination::Aborted => pb::EndReason::Aborted,
        Termination::Timeout => pb::EndReason::Timeout,
        Termination::Agreement => pb::EndReason::Agreement,
        Termination::Abandonment => pb::EndReason::Abandonment,
    };
    pb::GameResult {
        outcome: outcome_out(result.outcome).into(),
        winner: optional_player_out(result.outcome.and_then(Outcome::winner)),
        scores: pair(result.scores),
        end_reason: end_reason.into(),
        ended_by: optional_player_out(result.ended_by),
        first_rating: result.ratings.map(|r| rating_change_out(&r.first)),
        second_rating: result.ratings.map(|r| rating_change_out(&r.second)),
    }
}

/// A game, its clocks read now.
#[must_use]
pub fn game_out(game: &GameInfo) -> pb::Game {
    game_out_at(game, oanquan_game::service_clock::now())
}

/// A game, its clocks read at `at`: an event's snapshot reads them when the event happened, so
/// that a replay sends the event as it was sent live.
#[must_use]
pub fn game_out_at(game: &GameInfo, at: SystemTime) -> pb::Game {
    game_with_position(game, position_out(&game.position), at)
}

/// [`game_out_at`] with its current position already converted.
fn game_with_position(game: &GameInfo, position: pb::Position, at: SystemTime) -> pb::Game {
    pb::Game {
        id: game.id.as_str().to_owned(),
        rule_set: Some(rule_set_out(&game.rules)),
        preset: game.preset.map(|p| p.name().to_owned()).unwrap_or_default(),
        first_seat: Some(seat_out(Player::First, game.seats.first.as_ref())),
        second_seat: Some(seat_out(Player::Second, game.seats.second.as_ref())),
        status: status_out(game.status),
        start_position: Some(start_position_out(&game.start)),
        position: Some(position),
        move_count: game.move_count,
        result: game.result.as_ref().map(result_out),
        create_time: timestamp(game.created),
        update_time: timestamp(game.updated),
        time_control: time_control_out(game.time_control),
        clocks: timing::reading(game, at).as_ref().map(clocks_out),
        turn_start_time: game.turn_started.and_then(timestamp),
        draw_offer: optional_player_out(game.draw_offer),
        rematch_of: game
            .rematch
            .of
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default(),
        rematch: game
            .rematch
            .next
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default(),
        rematch_offer: optional_player_out(game.rematch.offered_by),
        rematch_deadline: game.rematch.open_until().and_then(timestamp),
        rated: game.rated,
    }
}

/// [`position_out`] for a game's start position, which is the same for every move of a game
/// and for every game of a rule set: each thread keeps the last one it converted and clones it,
/// which skips rebuilding its notation on every `PlayMove` (BENCHMARKS.md, issue 20).
fn start_position_out(start: &Position) -> pb::Position {
    thread_local! {
        static LAST: RefCell<Option<(Position, pb::Position)>> = const { RefCell::new(None) };
    }
    LAST.with(|last| {
        let mut last = last.borrow_mut();
        match last.as_ref() {
            Some((position, converted)) if position == start => converted.clone(),
            _ => {
                let converted = position_out(start);
                *last = Some((*start, converted.clone()));
                converted
            }
        }
    })
}

/// A duration (non-negative: every duration of the domain is).
#[must_use]
pub fn duration_out(duration: std::time::Duration) -> Option<prost_types::Duration> {
    Some(prost_types::Duration {
        seconds: i64::try_from(duration.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(duration.subsec_nanos()).unwrap_or(0),
    })
}

/// A time control (`None` = untimed).
#[must_use]
pub fn time_control_out(control: TimeControl) -> Option<pb::TimeControl> {
    use pb::time_control::{Correspondence, Kind, RealTime};
    let kind = match control {
        TimeControl::Untimed => return None,
        TimeControl::RealTime { initial, increment } => Kind::RealTime(RealTime {
            initial: duration_out(initial),
            increment: duration_out(increment),
        }),
        TimeControl::Correspondence { per_move } => Kind::Correspondence(Correspondence {
            per_move: duration_out(per_move),
        }),
    };
    Some(pb::TimeControl { kind: Some(kind) })
}

/// A clock reading.
#[must_use]
pub fn clocks_out(reading: &ClockReading) -> pb::Clocks {
    pb::Clocks {
        first_remaining: duration_out(reading.remaining.first),
        second_remaining: duration_out(reading.remaining.second),
        measured_at: timestamp(reading.measured_at),
        running: optional_player_out(reading.running),
        deadline: reading.deadline.and_then(timestamp),
    }
}

/// A seek.
#[must_use]
pub fn seek_out(seek: &SeekInfo) -> pb::Seek {
    pb::Seek {
        id: seek.id.clone(),
        display_name: seek.display_name.clone(),
        rule_set: Some(rule_set_out(&seek.rules)),
        preset: seek.preset.map(|p| p.name().to_owned()).unwrap_or_default(),
        time_control: time_control_out(seek.time_control),
        create_time: timestamp(seek.created),
        computer_after: seek.computer_after.and_then(duration_out),
        account: seek.account.as_ref().map(seat_account_out),
        rated: seek.rated,
        rating_range: seek
            .rating_range
            .map(|(min, max)| pb::RatingRange { min, max }),
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
        game_with_position(game, current, oanquan_game::service_clock::now()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cache answers with the conversion of the position asked for, also when the
    /// positions asked for alternate (games of different rule sets, or a game's later
    /// position, on one thread).
    #[test]
    fn start_position_out_converts_the_position_asked_for() {
        let start = Position::new(Rules::default()).expect("the default rules are valid");
        let mv = *start
            .legal_moves()
            .iter()
            .next()
            .expect("the start has moves");
        let (after, _) = start.play(mv).expect("a legal move");
        assert_ne!(position_out(&start), position_out(&after));
        for position in [start, start, after, start, after, after] {
            assert_eq!(start_position_out(&position), position_out(&position));
        }
    }
}
