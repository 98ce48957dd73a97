//! Domain tests of online play (issue 15). The transitions are pure, so clocks, deadlines,
//! victory claims, draw offers and rematches are driven with fake times and checked on both
//! the state and the events. The seek pool and the timekeeper need a running manager: they use
//! a memory store under tokio with short real durations.

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use oanquan_ai::Level;
use oanquan_rules::{ByPlayer, Outcome, Player, Position, Preset};

use crate::clock::{ClockReading, DeadlineKind, TimeControl, TimePolicy};
use crate::error::GameError;
use crate::hub::Hub;
use crate::manager::{GameManager, ManagerLimits, NewGame, Seated};
use crate::memory::{MemoryLimits, MemoryStore};
use crate::model::{
    DrawAction, GameEvent, GameEventKind, GameId, GameInfo, GameResult, GameState, GameStatus,
    LobbyEventKind, MoveRecord, PlayerKind, RematchAction, Termination,
};
use crate::seek::{SeekLimits, SeekOutcome, SeekPool, SeekRequest, SeekUpdate};
use crate::store::GameStore;
use crate::timing;
use crate::token::{PlayerToken, TokenHash};
use crate::transition::{self, Create, Mover, Opponent, RematchOffer, Transition};
use crate::watch::{Sequenced, WatchItem};

const T0: SystemTime = SystemTime::UNIX_EPOCH;
const FIRST: Player = Player::First;
const SECOND: Player = Player::Second;

fn secs(s: u64) -> SystemTime {
    T0 + Duration::from_secs(s)
}

fn ms(m: u64) -> SystemTime {
    T0 + Duration::from_millis(m)
}

fn dur(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn id(text: &str) -> GameId {
    GameId::parse(text).unwrap()
}

fn real_time(initial: u64, increment: u64) -> TimeControl {
    TimeControl::real_time(dur(initial), dur(increment)).unwrap()
}

/// A game `g1` between Lan (first) and Minh (second), started at `T0`.
fn started(time_control: TimeControl) -> (GameState, ByPlayer<TokenHash>) {
    let tokens = ByPlayer::new(
        PlayerToken::generate().hash(),
        PlayerToken::generate().hash(),
    );
    let (state, _) = create_g1(
        Opponent::Human {
            display_name: "Minh".to_owned(),
            token: tokens[SECOND],
            account: None,
        },
        tokens[FIRST],
        time_control,
    );
    assert_eq!(state.info().status, GameStatus::Active);
    (state, tokens)
}

/// A game `g1` between Lan (first) and the computer, started at `T0`.
fn against_computer(time_control: TimeControl) -> (GameState, TokenHash) {
    let token = PlayerToken::generate().hash();
    let (state, _) = create_g1(Opponent::Computer(Level::Random), token, time_control);
    (state, token)
}

fn create_g1(
    opponent: Opponent,
    token: TokenHash,
    time_control: TimeControl,
) -> (GameState, Transition<()>) {
    let rules = Preset::Standard.rules();
    transition::create(
        Create {
            id: id("g1"),
            rules,
            preset: Some(Preset::Standard),
            start: Position::new(rules).unwrap(),
            seat: FIRST,
            display_name: "Lan".to_owned(),
            token,
            opponent,
            creator: None,
            time_control,
            policy: TimePolicy::default(),
            rematch_of: None,
            account: None,
            rated: false,
        },
        T0,
    )
}

/// The player to move plays their first legal move at `now`.
fn move_at(
    state: GameState,
    tokens: &ByPlayer<TokenHash>,
    now: SystemTime,
) -> (GameState, Transition<Arc<MoveRecord>>) {
    let mover = state.position().to_move();
    let mv = state.position().legal_moves()[0];
    transition::play(state, Mover::Token(tokens[mover]), mv, None, now).expect("a legal move")
}

/// Plays `count` moves, one a second from `from`.
fn moves(mut state: GameState, tokens: &ByPlayer<TokenHash>, count: u64, from: u64) -> GameState {
    for n in 0..count {
        state = move_at(state, tokens, secs(from + n)).0;
    }
    state
}

fn remaining(state: &GameState) -> ByPlayer<Duration> {
    state
        .info()
        .clock
        .expect("a timed game has a clock")
        .remaining
}

/// The clock readings the events carry, in order.
fn readings(events: &[GameEventKind]) -> Vec<Option<ClockReading>> {
    events
        .iter()
        .filter_map(|event| match event {
            GameEventKind::MovePlayed { clock, .. }
            | GameEventKind::TurnStarted { clock, .. }
            | GameEventKind::GameOver { clock, .. } => Some(*clock),
            _ => None,
        })
        .collect()
}

fn game_over(events: &[GameEventKind]) -> (GameResult, Option<ClockReading>, Option<SystemTime>) {
    let over: Vec<_> = events
        .iter()
        .filter_map(|event| match event {
            GameEventKind::GameOver {
                result,
                clock,
                rematch_until,
            } => Some((*result, *clock, *rematch_until)),
            _ => None,
        })
        .collect();
    assert_eq!(over.len(), 1, "one GameOver in {events:?}");
    over[0]
}

/// The manager's step after every transition: a game that just finished gets its window.
fn with_window<T>(
    (mut state, mut transition): (GameState, Transition<T>),
    until: SystemTime,
) -> (GameState, Transition<T>) {
    transition::open_rematch_window(&mut state, &mut transition, until);
    (state, transition)
}

/// Only the last event of a batch may end the game's log, and it does exactly when the state
/// says the log is closed: what watchers rely on to end their streams.
fn assert_log_closes(state: &GameState, events: &[GameEventKind], closed: bool) {
    assert_eq!(
        state.info().log_closed(),
        closed,
        "{:?}",
        state.info().rematch
    );
    let finals: Vec<bool> = events
        .iter()
        .map(|kind| {
            GameEvent {
                game_id: state.info().id.clone(),
                sequence: 1,
                time: T0,
                kind: kind.clone(),
            }
            .is_final()
        })
        .collect();
    assert_eq!(finals.last(), Some(&closed), "{events:?}");
    assert!(
        finals.iter().rev().skip(1).all(|&f| !f),
        "a final event before the last: {events:?}"
    );
}

// --- Real-time and correspondence clocks ---------------------------------------------------

/// A move's record exists once: the game's log, its `MovePlayed` event and the answer to the
/// player share it (a copy each cost two allocations a move and, in a store that keeps its
/// events, the memory twice over).
#[test]
fn a_moves_record_is_shared_by_the_log_the_event_and_the_answer() {
    let (state, tokens) = started(TimeControl::Untimed);
    let (state, moved) = move_at(state, &tokens, secs(1));
    let logged = state.moves().last().expect("the move is logged");
    let [GameEventKind::MovePlayed { record, .. }, ..] = moved.game_events.as_slice() else {
        panic!("a move starts with MovePlayed: {:?}", moved.game_events)
    };
    assert!(Arc::ptr_eq(record, &moved.output));
    assert!(std::ptr::eq(logged, &*moved.output));
    assert_eq!(logged.number, 1);
}

#[test]
fn real_time_charges_the_mover_from_turn_start_and_adds_the_increment_after_the_first_moves() {
    let (state, tokens) = started(real_time(60, 2));
    let clock = state.info().clock.unwrap();
    assert_eq!(clock.remaining, ByPlayer::new(dur(60), dur(60)));
    assert_eq!(clock.first_move, TimePolicy::default().first_move);
    assert_eq!(state.info().turn_started, Some(T0));

    // Each player's first move has its own limit: no charge, no increment, no running clock.
    let (state, moved) = move_at(state, &tokens, secs(10));
    assert_eq!(remaining(&state), ByPlayer::new(dur(60), dur(60)));
    assert_eq!(state.info().turn_started, Some(secs(10)));
    let second_first = ClockReading {
        remaining: ByPlayer::new(dur(60), dur(60)),
        measured_at: secs(10),
        running: None,
        deadline: Some(secs(40)),
    };
    assert_eq!(
        readings(&moved.game_events),
        [Some(second_first), Some(second_first)]
    );
    let (state, moved) = move_at(state, &tokens, secs(15));
    assert_eq!(remaining(&state), ByPlayer::new(dur(60), dur(60)));
    let clocks_start = ClockReading {
        remaining: ByPlayer::new(dur(60), dur(60)),
        measured_at: secs(15),
        running: Some(FIRST),
        deadline: Some(secs(75)),
    };
    assert_eq!(
        readings(&moved.game_events),
        [Some(clocks_start), Some(clocks_start)]
    );

    // From the third move on: charged from the turn start to the move, then the increment.
    let (state, moved) = move_at(state, &tokens, secs(25));
    assert_eq!(remaining(&state), ByPlayer::new(dur(52), dur(60)));
    let after = ClockReading {
        remaining: ByPlayer::new(dur(52), dur(60)),
        measured_at: secs(25),
        running: Some(SECOND),
        deadline: Some(secs(85)),
    };
    assert_eq!(readings(&moved.game_events), [Some(after), Some(after)]);
    let (state, _) = move_at(state, &tokens, ms(28_500));
    assert_eq!(
        remaining(&state),
        ByPlayer::new(dur(52), Duration::from_millis(58_500))
    );
    assert_eq!(state.info().turn_started, Some(ms(28_500)));
}

#[test]
fn a_reading_runs_the_clock_of_the_player_to_move_only() {
    let (state, tokens) = started(real_time(60, 0));
    assert_eq!(
        timing::reading(state.info(), secs(5)).unwrap().running,
        None
    );
    // Three moves: the second player's clock runs from 2 s.
    let state = moves(state, &tokens, 3, 0);
    assert_eq!(remaining(&state), ByPlayer::new(dur(59), dur(60)));
    assert_eq!(
        timing::reading(state.info(), secs(10)),
        Some(ClockReading {
            remaining: ByPlayer::new(dur(59), dur(52)),
            measured_at: secs(10),
            running: Some(SECOND),
            deadline: Some(secs(62)),
        })
    );
    let later = timing::reading(state.info(), secs(30)).unwrap();
    assert_eq!(later.remaining, ByPlayer::new(dur(59), dur(32)));
    assert_eq!(later.deadline, Some(secs(62)));
    // Past the deadline a reading shows nothing left, never less.
    let flagged = timing::reading(state.info(), secs(100)).unwrap();
    assert_eq!(flagged.remaining.second, Duration::ZERO);
    // An untimed game has no clock to read.
    let (untimed, _) = started(TimeControl::Untimed);
    assert_eq!(timing::reading(untimed.info(), secs(1)), None);
    assert_eq!(untimed.info().clock, None);
    assert_eq!(timing::deadline(untimed.info()), None);
}

#[test]
fn correspondence_gives_the_full_time_for_every_move() {
    let hour = dur(3600);
    let (state, tokens) = started(TimeControl::correspondence(hour).unwrap());
    // A day-long move needs no shorter first one.
    assert_eq!(state.info().clock.unwrap().first_move, hour);
    assert_eq!(
        timing::deadline(state.info()).map(|d| (d.at, d.kind)),
        Some((secs(3600), DeadlineKind::FirstMove { player: FIRST }))
    );
    let state = moves(state, &tokens, 2, 600);
    assert_eq!(remaining(&state), ByPlayer::new(hour, hour));
    // The first player takes 50 minutes: what is left is not carried over.
    let (state, moved) = move_at(state, &tokens, secs(601 + 3000));
    assert_eq!(remaining(&state), ByPlayer::new(hour, hour));
    assert_eq!(
        readings(&moved.game_events)[0].unwrap().deadline,
        Some(secs(601 + 3000 + 3600))
    );
    let reading = timing::reading(state.info(), secs(601 + 3000 + 600)).unwrap();
    assert_eq!(reading.remaining, ByPlayer::new(hour, dur(3000)));
    assert_eq!(reading.running, Some(SECOND));
    // Missing it loses on time, as in real time.
    assert_eq!(
        timing::deadline(state.info()).map(|d| d.kind),
        Some(DeadlineKind::Flag { player: SECOND })
    );
}

#[test]
fn a_first_move_not_made_in_time_aborts_the_game_without_a_result() {
    let (state, tokens) = started(real_time(60, 0));
    let limit = TimePolicy::default().first_move;
    assert_eq!(
        timing::deadline(state.info()).map(|d| (d.at, d.kind)),
        Some((T0 + limit, DeadlineKind::FirstMove { player: FIRST }))
    );
    assert_eq!(
        transition::apply_deadline(state.clone(), T0 + limit - Duration::from_millis(1))
            .unwrap_err(),
        GameError::NotDue
    );
    let mv = state.position().legal_moves()[0];
    assert_eq!(
        transition::play(
            state.clone(),
            Mover::Token(tokens[FIRST]),
            mv,
            None,
            T0 + limit
        )
        .unwrap_err(),
        GameError::TimeUp { first_move: true }
    );
    let (aborted, applied) = with_window(
        transition::apply_deadline(state, T0 + limit + dur(3)).unwrap(),
        secs(1000),
    );
    assert_eq!(applied.output, DeadlineKind::FirstMove { player: FIRST });
    let info = aborted.info();
    assert_eq!(info.status, GameStatus::Aborted);
    assert_eq!(
        info.result.map(|r| (r.outcome, r.termination, r.ended_by)),
        Some((None, Termination::Aborted, Some(FIRST)))
    );
    // Ended at the deadline, whenever the server got to it; an aborted game gets no rematch.
    assert_eq!(info.updated, T0 + limit);
    assert_eq!(info.turn_started, None);
    let (result, _, rematch_until) = game_over(&applied.game_events);
    assert_eq!(result, info.result.unwrap());
    assert_eq!(rematch_until, None);
    assert_eq!(
        applied.lobby_events,
        [LobbyEventKind::GameFinished {
            game_id: id("g1"),
            result
        }]
    );
    assert_log_closes(&aborted, &applied.game_events, true);
    assert_eq!(timing::deadline(info), None);
    assert_eq!(
        transition::apply_deadline(aborted, secs(500)).unwrap_err(),
        GameError::NotDue
    );
}

#[test]
fn the_second_players_first_move_has_its_own_limit_from_the_first_move() {
    let (state, tokens) = started(real_time(60, 0));
    let (state, _) = move_at(state, &tokens, secs(20));
    let limit = TimePolicy::default().first_move;
    assert_eq!(
        timing::deadline(state.info()).map(|d| (d.at, d.kind)),
        Some((secs(20) + limit, DeadlineKind::FirstMove { player: SECOND }))
    );
    let (aborted, applied) = transition::apply_deadline(state, secs(20) + limit).unwrap();
    assert_eq!(applied.output, DeadlineKind::FirstMove { player: SECOND });
    assert_eq!(aborted.info().result.unwrap().ended_by, Some(SECOND));
    assert_eq!(aborted.info().result.unwrap().outcome, None);
}

#[test]
fn a_flag_falls_at_the_deadline_and_the_opponent_wins_on_time() {
    let (state, tokens) = started(real_time(60, 0));
    let state = moves(state, &tokens, 2, 1);
    // The first player's turn started at 2 s with 60 s left.
    let deadline = timing::deadline(state.info()).unwrap();
    assert_eq!(
        (deadline.at, deadline.kind),
        (secs(62), DeadlineKind::Flag { player: FIRST })
    );
    let mv = state.position().legal_moves()[0];
    for late in [secs(62), secs(70)] {
        assert_eq!(
            transition::play(state.clone(), Mover::Token(tokens[FIRST]), mv, None, late)
                .unwrap_err(),
            GameError::TimeUp { first_move: false }
        );
    }
    assert_eq!(
        transition::apply_deadline(state.clone(), ms(61_999)).unwrap_err(),
        GameError::NotDue
    );
    // The timekeeper is late: the game still ends at the deadline.
    let (flagged, applied) = with_window(
        transition::apply_deadline(state.clone(), secs(63)).unwrap(),
        secs(63 + 120),
    );
    assert_eq!(applied.output, DeadlineKind::Flag { player: FIRST });
    let info = flagged.info();
    assert_eq!(info.status, GameStatus::Finished);
    let result = info.result.unwrap();
    assert_eq!(result.outcome, Some(Outcome::Decisive { winner: SECOND }));
    assert_eq!(result.termination, Termination::Timeout);
    assert_eq!(result.ended_by, Some(FIRST));
    assert_eq!(remaining(&flagged), ByPlayer::new(Duration::ZERO, dur(60)));
    assert_eq!(info.updated, secs(62));
    assert_eq!(info.turn_started, None);
    assert_eq!(info.position, state.info().position);
    let (over, clock, rematch_until) = game_over(&applied.game_events);
    assert_eq!(over, result);
    assert_eq!(
        clock,
        Some(ClockReading {
            remaining: ByPlayer::new(Duration::ZERO, dur(60)),
            measured_at: secs(62),
            running: None,
            deadline: None,
        })
    );
    assert_eq!(rematch_until, Some(secs(183)));
    assert_log_closes(&flagged, &applied.game_events, false);
    // What remains due is the rematch window.
    assert_eq!(
        timing::deadline(info).map(|d| (d.at, d.kind)),
        Some((secs(183), DeadlineKind::RematchWindow))
    );
}

#[test]
fn past_the_deadline_only_the_deadline_ends_the_game() {
    let (state, tokens) = started(real_time(60, 0));
    let state = moves(state, &tokens, 2, 1);
    // The second player offered a draw; the first player's flag falls at 62 s.
    let (offered, _) = transition::offer_draw(state, &tokens[SECOND], secs(3)).unwrap();
    let late = secs(62);
    let refusals = [
        transition::offer_draw(offered.clone(), &tokens[FIRST], late).map(|_| ()),
        transition::offer_draw(offered.clone(), &tokens[SECOND], late).map(|_| ()),
        transition::decline_draw(offered.clone(), &tokens[FIRST], late).map(|_| ()),
        transition::resign(offered.clone(), &tokens[SECOND], late).map(|_| ()),
        transition::resign(offered.clone(), &tokens[FIRST], late).map(|_| ()),
        transition::expire(offered.clone(), late, late).map(|_| ()),
    ];
    for refused in refusals {
        assert_eq!(refused, Err(GameError::GameOver));
    }
    // A moment earlier the draw could still be agreed.
    let (drawn, _) = transition::offer_draw(offered.clone(), &tokens[FIRST], ms(61_999)).unwrap();
    assert_eq!(
        drawn.info().result.unwrap().termination,
        Termination::Agreement
    );
    let (flagged, _) = transition::apply_deadline(offered, late).unwrap();
    assert_eq!(
        flagged.info().result.unwrap().outcome,
        Some(Outcome::Decisive { winner: SECOND })
    );

    // Nor can a game whose first move is late be aborted by the other player.
    let (state, tokens) = started(real_time(60, 0));
    let late = T0 + TimePolicy::default().first_move;
    assert_eq!(
        transition::abort(state.clone(), &tokens[SECOND], late).unwrap_err(),
        GameError::GameOver
    );
    let (aborted, _) = transition::apply_deadline(state, late).unwrap();
    assert_eq!(aborted.info().result.unwrap().ended_by, Some(FIRST));
}

#[test]
fn a_move_just_before_the_deadline_is_charged_all_but_the_rest() {
    let (state, tokens) = started(real_time(60, 0));
    let state = moves(state, &tokens, 2, 1);
    let (state, _) = move_at(state, &tokens, ms(61_999));
    assert_eq!(
        remaining(&state),
        ByPlayer::new(Duration::from_millis(1), dur(60))
    );
    assert_eq!(
        transition::apply_deadline(state, secs(62)).unwrap_err(),
        GameError::NotDue
    );
}

/// The part of the turn that ran before the server died is charged, the outage is not: a
/// restart must not give a player back the time they had already spent (a correspondence
/// player would otherwise get a fresh period with every deploy).
#[test]
fn resuming_a_clock_charges_the_turn_up_to_the_last_sign_of_life() {
    let (state, tokens) = started(real_time(60, 0));
    let state = moves(state, &tokens, 3, 1);
    // The second player's turn started at 3 s (60 s left); the server was alive until 23 s
    // and came back at 100 s: 20 s were used, 40 s are left from 100 s.
    let (resumed, transition) =
        transition::resume_clock(state.clone(), secs(100), Some(secs(23))).unwrap();
    assert_eq!(resumed.info().turn_started, Some(secs(80)));
    assert_eq!(remaining(&resumed), remaining(&state));
    let [GameEventKind::TurnStarted { clock, .. }] = transition.game_events.as_slice() else {
        panic!("{:?}", transition.game_events)
    };
    let clock = clock.unwrap();
    assert_eq!(clock.remaining, ByPlayer::new(dur(59), dur(40)));
    assert_eq!(clock.deadline, Some(secs(140)));
    // Alive past the deadline (63 s): the flag falls as soon as the keeper looks.
    let (late, _) = transition::resume_clock(state.clone(), secs(100), Some(secs(70))).unwrap();
    assert_eq!(
        timing::deadline(late.info()).map(|d| d.at),
        Some(secs(100) - dur(7))
    );
    let (flagged, _) = transition::apply_deadline(late, secs(100)).unwrap();
    assert_eq!(flagged.info().status, GameStatus::Finished);
    // A sign of life from before the turn started, or from the future: nothing is charged.
    for alive in [secs(2), secs(101)] {
        let (resumed, _) = transition::resume_clock(state.clone(), secs(100), Some(alive)).unwrap();
        assert_eq!(resumed.info().turn_started, Some(secs(100)), "{alive:?}");
    }
}

#[test]
fn resuming_a_clock_restarts_the_turn_without_charging_the_outage() {
    let (state, tokens) = started(real_time(60, 0));
    let state = moves(state, &tokens, 3, 1);
    // The second player's turn started at 3 s; the server was down until 100 s.
    // When the last server was last alive is not known: the whole turn starts again.
    let (resumed, transition) = transition::resume_clock(state.clone(), secs(100), None).unwrap();
    assert_eq!(resumed.info().turn_started, Some(secs(100)));
    assert_eq!(remaining(&resumed), remaining(&state));
    assert_eq!(resumed.info().position, state.info().position);
    assert_eq!(
        transition.game_events,
        [GameEventKind::TurnStarted {
            player: SECOND,
            ply: 3,
            refill: None,
            clock: Some(ClockReading {
                remaining: ByPlayer::new(dur(59), dur(60)),
                measured_at: secs(100),
                running: Some(SECOND),
                deadline: Some(secs(160)),
            }),
        }]
    );
    let (resigned, _) = transition::resign(resumed, &tokens[FIRST], secs(101)).unwrap();
    assert_eq!(
        transition::resume_clock(resigned, secs(102), Some(secs(101))).unwrap_err(),
        GameError::NotDue
    );
}

/// The idle reaper counts an outage as nobody's idleness, as a claim does: an outside probe's
/// untimed game was aborted the moment its server came back.
#[test]
fn an_outage_is_no_idleness() {
    let day = dur(24 * 3600);
    let (state, tokens) = started(TimeControl::Untimed);
    let state = moves(state, &tokens, 2, 1);
    // Alive one second into the turn (started at 2 s), back two days later.
    let back = secs(2) + day * 2;
    let (resumed, _) = transition::resume_clock(state, back, Some(secs(3))).unwrap();
    assert_eq!(resumed.info().idle_since(), back - dur(1));
    // A sweep right after the restart, with a cutoff an hour back, finds it fresh.
    assert_eq!(
        transition::expire(resumed.clone(), back - dur(3600), back).unwrap_err(),
        GameError::GameOver
    );
    // Idle long enough after the restart, it goes.
    assert!(transition::expire(resumed, back + dur(10), back + dur(20)).is_ok());
}

/// An untimed game's turn measures the abandonment time: an outage is not counted towards a
/// victory claim (an outside probe's claim was 6 s closer after a 6 s outage).
#[test]
fn resuming_an_untimed_game_moves_its_turn_by_the_outage() {
    let day = dur(24 * 3600);
    let (state, tokens) = started(TimeControl::Untimed);
    let state = moves(state, &tokens, 3, 1);
    assert_eq!(state.info().turn_started, Some(secs(3)));
    // Alive until 23 s, back a day later: 20 s of the turn ran.
    let back = secs(23) + day;
    let (resumed, _) = transition::resume_clock(state, back, Some(secs(23))).unwrap();
    assert_eq!(resumed.info().turn_started, Some(back - dur(20)));
    match transition::claim_victory(resumed, &tokens[FIRST], day, back) {
        Err(GameError::CannotClaim(why)) => assert!(why.contains("for 20s"), "{why}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_resignation_charges_the_player_to_move_up_to_the_end() {
    let (state, tokens) = started(real_time(60, 0));
    let state = moves(state, &tokens, 2, 1);
    let (resigned, transition) = transition::resign(state, &tokens[SECOND], secs(12)).unwrap();
    assert_eq!(remaining(&resigned), ByPlayer::new(dur(50), dur(60)));
    let (_, clock, _) = game_over(&transition.game_events);
    assert_eq!(clock.unwrap().remaining, ByPlayer::new(dur(50), dur(60)));
}

// --- Victory claims ------------------------------------------------------------------------

#[test]
fn a_victory_claim_waits_for_the_abandonment_time_and_only_in_untimed_games() {
    let day = dur(24 * 3600);
    let (state, tokens) = started(TimeControl::Untimed);
    // The first player is to move; only the second can claim.
    match transition::claim_victory(state.clone(), &tokens[FIRST], day, secs(100_000)) {
        Err(GameError::CannotClaim(why)) => assert!(why.contains("your turn"), "{why}"),
        other => panic!("{other:?}"),
    }
    match transition::claim_victory(state.clone(), &tokens[SECOND], day, secs(3600)) {
        Err(GameError::CannotClaim(why)) => {
            assert!(why.contains("for 1h"), "{why}");
            assert!(why.contains("(in 23h)"), "{why}");
        }
        other => panic!("{other:?}"),
    }
    // The time still to wait is rounded up: told "in 1s" with 1.9 s left, a client that
    // waited 1 s was refused again (an outside probe's).
    let abandon = dur(2);
    let nearly = T0 + Duration::from_millis(100);
    match transition::claim_victory(state.clone(), &tokens[SECOND], abandon, nearly) {
        Err(GameError::CannotClaim(why)) => assert!(why.contains("(in 2s)"), "{why}"),
        other => panic!("{other:?}"),
    }
    let stranger = PlayerToken::generate().hash();
    assert_eq!(
        transition::claim_victory(state.clone(), &stranger, day, secs(100_000)).unwrap_err(),
        GameError::WrongToken
    );

    // The first player never moved: the game counts for nobody, as a missed first move.
    let (aborted, transition) =
        transition::claim_victory(state.clone(), &tokens[SECOND], day, T0 + day).unwrap();
    let result = aborted.info().result.unwrap();
    assert_eq!(aborted.info().status, GameStatus::Aborted);
    assert_eq!(result.outcome, None);
    assert_eq!(result.termination, Termination::Aborted);
    assert_eq!(result.ended_by, Some(FIRST));
    assert_eq!(game_over(&transition.game_events).0, result);
    // Nor the second player's first move.
    let (state, _) = move_at(state, &tokens, T0);
    let (aborted, _) =
        transition::claim_victory(state.clone(), &tokens[FIRST], day, T0 + day).unwrap();
    assert_eq!(aborted.info().status, GameStatus::Aborted);
    assert_eq!(aborted.info().result.unwrap().ended_by, Some(SECOND));

    let (state, _) = move_at(state, &tokens, T0);
    let (claimed, transition) = with_window(
        transition::claim_victory(state.clone(), &tokens[SECOND], day, T0 + day).unwrap(),
        T0 + day + dur(120),
    );
    let result = claimed.info().result.unwrap();
    assert_eq!(claimed.info().status, GameStatus::Finished);
    assert_eq!(result.outcome, Some(Outcome::Decisive { winner: SECOND }));
    assert_eq!(result.termination, Termination::Abandonment);
    assert_eq!(result.ended_by, Some(FIRST));
    assert_eq!(game_over(&transition.game_events).0, result);
    assert_eq!(
        transition::claim_victory(claimed, &tokens[SECOND], day, T0 + day * 2).unwrap_err(),
        GameError::GameOver
    );

    // A move restarts the wait.
    let (moved, _) = move_at(state, &tokens, T0 + day - dur(1));
    assert!(matches!(
        transition::claim_victory(moved, &tokens[FIRST], day, T0 + day),
        Err(GameError::CannotClaim(_))
    ));

    // A timed game ends by its clock instead.
    let (timed, tokens) = started(real_time(60, 0));
    match transition::claim_victory(timed, &tokens[SECOND], day, T0 + day * 2) {
        Err(GameError::CannotClaim(why)) => assert!(why.contains("timed"), "{why}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_victory_claim_needs_a_started_game() {
    let token = PlayerToken::generate().hash();
    let (waiting, _) = create_g1(Opponent::Wait, token, TimeControl::Untimed);
    assert_eq!(
        transition::claim_victory(waiting, &token, Duration::ZERO, secs(10)).unwrap_err(),
        GameError::GameNotStarted
    );
}

// --- Draw offers ---------------------------------------------------------------------------

#[test]
fn a_draw_offer_stands_until_answered_and_the_opponents_offer_accepts_it() {
    let (state, tokens) = started(real_time(60, 0));
    let state = moves(state, &tokens, 2, 1);
    let (offered, transition) = transition::offer_draw(state, &tokens[FIRST], secs(5)).unwrap();
    assert_eq!(transition.output, DrawAction::Offered);
    assert_eq!(
        transition.game_events,
        [GameEventKind::Draw {
            by: FIRST,
            action: DrawAction::Offered
        }]
    );
    assert_eq!(offered.info().draw_offer, Some(FIRST));
    assert_eq!(offered.info().status, GameStatus::Active);

    // Offering again while it stands says nothing new.
    let (again, transition) =
        transition::offer_draw(offered.clone(), &tokens[FIRST], secs(6)).unwrap();
    assert_eq!(transition.output, DrawAction::Offered);
    assert!(transition.game_events.is_empty() && transition.lobby_events.is_empty());
    assert_eq!(again.info(), offered.info());

    // The opponent's offer accepts it.
    let (drawn, transition) = with_window(
        transition::offer_draw(offered, &tokens[SECOND], secs(8)).unwrap(),
        secs(200),
    );
    assert_eq!(transition.output, DrawAction::Accepted);
    assert_eq!(
        transition.game_events[0],
        GameEventKind::Draw {
            by: SECOND,
            action: DrawAction::Accepted
        }
    );
    assert_eq!(transition.game_events.len(), 2);
    let (result, clock, rematch_until) = game_over(&transition.game_events);
    assert_eq!(result.outcome, Some(Outcome::Draw));
    assert_eq!(result.termination, Termination::Agreement);
    assert_eq!(result.ended_by, None);
    assert_eq!(drawn.info().result, Some(result));
    assert_eq!(drawn.info().status, GameStatus::Finished);
    assert_eq!(drawn.info().draw_offer, None);
    // The first player, to move, was charged up to the agreement.
    assert_eq!(clock.unwrap().remaining, ByPlayer::new(dur(54), dur(60)));
    assert_eq!(rematch_until, Some(secs(200)));
    assert!(matches!(
        transition.lobby_events.as_slice(),
        [LobbyEventKind::GameFinished { .. }]
    ));
    assert_eq!(
        transition::offer_draw(drawn, &tokens[FIRST], secs(9)).unwrap_err(),
        GameError::GameOver
    );
}

#[test]
fn a_declined_draw_cannot_be_offered_again_before_the_offerers_next_move() {
    let (state, tokens) = started(TimeControl::Untimed);
    assert_eq!(
        transition::decline_draw(state.clone(), &tokens[SECOND], secs(1)).unwrap_err(),
        GameError::NoOffer("your opponent has no draw offer standing")
    );
    let (offered, _) = transition::offer_draw(state, &tokens[SECOND], secs(1)).unwrap();
    // One's own offer is not for oneself to decline.
    assert!(matches!(
        transition::decline_draw(offered.clone(), &tokens[SECOND], secs(2)),
        Err(GameError::NoOffer(_))
    ));
    let (declined, transition) =
        transition::decline_draw(offered, &tokens[FIRST], secs(2)).unwrap();
    assert_eq!(
        transition.game_events,
        [GameEventKind::Draw {
            by: FIRST,
            action: DrawAction::Declined
        }]
    );
    assert_eq!(declined.info().draw_offer, None);
    assert_eq!(declined.info().status, GameStatus::Active);
    match transition::offer_draw(declined.clone(), &tokens[SECOND], secs(3)) {
        Err(GameError::CannotOffer(why)) => assert!(why.contains("next move"), "{why}"),
        other => panic!("{other:?}"),
    }
    // The other player has not offered on this move: they may.
    let (_, transition) =
        transition::offer_draw(declined.clone(), &tokens[FIRST], secs(3)).unwrap();
    assert_eq!(transition.output, DrawAction::Offered);
    // After moves, the second player may offer again.
    let state = moves(declined, &tokens, 2, 4);
    let (_, transition) = transition::offer_draw(state, &tokens[SECOND], secs(9)).unwrap();
    assert_eq!(transition.output, DrawAction::Offered);
}

#[test]
fn a_draw_offer_lapses_when_the_offerers_opponent_moves_and_stays_when_the_offerer_moves() {
    let (state, tokens) = started(TimeControl::Untimed);
    // The first player, to move, offers then moves: the offer stands.
    let (offered, _) = transition::offer_draw(state, &tokens[FIRST], secs(1)).unwrap();
    let (moved, _) = move_at(offered, &tokens, secs(2));
    assert_eq!(moved.info().draw_offer, Some(FIRST));
    // The second player moves instead of answering: it lapses.
    let (moved, _) = move_at(moved, &tokens, secs(3));
    assert_eq!(moved.info().draw_offer, None);
    assert!(matches!(
        transition::decline_draw(moved.clone(), &tokens[SECOND], secs(4)),
        Err(GameError::NoOffer(_))
    ));
    // A second player's offer lapses once the first player moves.
    let (offered, _) = transition::offer_draw(moved, &tokens[SECOND], secs(4)).unwrap();
    let (moved, _) = move_at(offered, &tokens, secs(5));
    assert_eq!(moved.info().draw_offer, None);
}

#[test]
fn the_computer_is_not_offered_draws() {
    let (state, token) = against_computer(TimeControl::Untimed);
    match transition::offer_draw(state, &token, secs(1)) {
        Err(GameError::CannotOffer(why)) => assert!(why.contains("computer"), "{why}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_draw_cannot_be_offered_in_a_game_that_has_not_started_or_is_over() {
    let token = PlayerToken::generate().hash();
    let (waiting, _) = create_g1(Opponent::Wait, token, TimeControl::Untimed);
    assert_eq!(
        transition::offer_draw(waiting, &token, secs(1)).unwrap_err(),
        GameError::GameNotStarted
    );
    let (state, tokens) = started(TimeControl::Untimed);
    let (offered, _) = transition::offer_draw(state, &tokens[FIRST], secs(1)).unwrap();
    let (resigned, _) = transition::resign(offered, &tokens[FIRST], secs(2)).unwrap();
    // The end withdraws any offer.
    assert_eq!(resigned.info().draw_offer, None);
    assert_eq!(
        transition::decline_draw(resigned, &tokens[SECOND], secs(3)).unwrap_err(),
        GameError::GameOver
    );
}

// --- Rematches -----------------------------------------------------------------------------

const WINDOW: u64 = 120;

/// `g1` between Lan and Minh in `time_control`, resigned by Minh at 10 s, its rematch window
/// open until 130 s.
fn finished(time_control: TimeControl) -> (GameState, ByPlayer<TokenHash>) {
    let (state, tokens) = started(time_control);
    let state = moves(state, &tokens, 3, 1);
    let (state, transition) = with_window(
        transition::resign(state, &tokens[SECOND], secs(10)).unwrap(),
        secs(10 + WINDOW),
    );
    assert_eq!(
        game_over(&transition.game_events).2,
        Some(secs(10 + WINDOW))
    );
    assert_log_closes(&state, &transition.game_events, false);
    (state, tokens)
}

fn offer(
    state: GameState,
    token: &TokenHash,
    next_token: TokenHash,
    next_id: &str,
    now: SystemTime,
) -> Result<(GameState, Transition<RematchOffer>), GameError> {
    let policy = TimePolicy::default();
    transition::offer_rematch(state, token, next_token, id(next_id), &policy, now)
}

#[test]
fn a_rematch_starts_when_both_offer_with_the_seats_swapped_and_the_tokens_of_the_offers() {
    let time_control = real_time(180, 2);
    let (state, tokens) = finished(time_control);
    let lan_next = PlayerToken::generate().hash();
    let minh_next = PlayerToken::generate().hash();

    let (offered, transition) = offer(state.clone(), &tokens[FIRST], lan_next, "g2", secs(20))
        .expect("an offer in the window");
    assert!(matches!(transition.output, RematchOffer::Offered));
    assert_eq!(
        transition.game_events,
        [GameEventKind::Rematch {
            by: Some(FIRST),
            action: RematchAction::Offered
        }]
    );
    assert_eq!(offered.info().rematch.offered_by, Some(FIRST));
    assert_eq!(offered.rematch_tokens()[FIRST], Some(lan_next));
    assert_eq!(offered.info().status, GameStatus::Finished);
    assert_eq!(offered.info().result, state.info().result);
    assert_log_closes(&offered, &transition.game_events, false);

    let (linked, transition) = offer(offered, &tokens[SECOND], minh_next, "g3", secs(30)).unwrap();
    assert_eq!(
        transition.game_events,
        [GameEventKind::Rematch {
            by: None,
            action: RematchAction::Started { game_id: id("g3") }
        }]
    );
    assert_eq!(linked.info().rematch.next, Some(id("g3")));
    assert_eq!(linked.info().rematch.offered_by, None);
    assert_eq!(linked.info().result, state.info().result);
    assert_log_closes(&linked, &transition.game_events, true);
    assert_eq!(timing::deadline(linked.info()), None);

    let RematchOffer::Started(next) = transition.output else {
        panic!("both offered: the rematch starts");
    };
    let (next, created) = *next;
    let (old, new) = (state.info(), next.info());
    assert_eq!(new.id, id("g3"));
    assert_eq!(new.status, GameStatus::Active);
    assert_eq!(new.rematch.of, Some(id("g1")));
    assert_eq!(
        (new.rules, new.preset, new.start, new.time_control),
        (old.rules, old.preset, old.start, old.time_control)
    );
    assert_eq!(new.position, new.start);
    assert_eq!(new.move_count, 0);
    assert_eq!(new.seats[FIRST], old.seats[SECOND]);
    assert_eq!(new.seats[SECOND], old.seats[FIRST]);
    // Lan played first and now plays second with the token of her offer; Minh the reverse.
    assert_eq!(next.seat_of(&lan_next), Some(SECOND));
    assert_eq!(next.seat_of(&minh_next), Some(FIRST));
    assert_eq!(next.seat_of(&tokens[FIRST]), None);
    assert_eq!(next.seat_of(&tokens[SECOND]), None);
    assert_eq!(
        new.clock.unwrap().remaining,
        ByPlayer::new(dur(180), dur(180))
    );
    assert_eq!(new.turn_started, Some(secs(30)));
    assert!(
        created
            .game_events
            .iter()
            .any(|e| matches!(e, GameEventKind::GameStarted { .. })),
        "{:?}",
        created.game_events
    );
    assert!(matches!(
        created.lobby_events.first(),
        Some(LobbyEventKind::GameCreated { .. })
    ));

    // Once started, no more rematch.
    match offer(linked.clone(), &tokens[FIRST], lan_next, "g4", secs(31)) {
        Err(GameError::RematchUnavailable(why)) => assert!(why.contains("g3"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        transition::decline_rematch(linked, &tokens[SECOND], secs(31)),
        Err(GameError::RematchUnavailable(_))
    ));
}

#[test]
fn a_rematch_keeps_the_first_move_limit_of_the_game() {
    let (state, tokens) = finished(real_time(60, 0));
    let (offered, _) = offer(
        state,
        &tokens[FIRST],
        PlayerToken::generate().hash(),
        "g2",
        secs(20),
    )
    .unwrap();
    let shorter = TimePolicy {
        first_move: dur(5),
        ..TimePolicy::default()
    };
    let (_, transition) = transition::offer_rematch(
        offered,
        &tokens[SECOND],
        PlayerToken::generate().hash(),
        id("g2"),
        &shorter,
        secs(21),
    )
    .unwrap();
    let RematchOffer::Started(next) = transition.output else {
        panic!("both offered");
    };
    assert_eq!(
        next.0.info().clock.unwrap().first_move,
        TimePolicy::default().first_move
    );
}

#[test]
fn a_rematch_against_the_computer_starts_at_the_first_offer() {
    let (state, token) = against_computer(TimeControl::Untimed);
    let (state, transition) = with_window(
        transition::resign(state, &token, secs(3)).unwrap(),
        secs(3 + WINDOW),
    );
    assert_log_closes(&state, &transition.game_events, false);
    let next_token = PlayerToken::generate().hash();
    let (linked, transition) = offer(state, &token, next_token, "g2", secs(5)).unwrap();
    assert_log_closes(&linked, &transition.game_events, true);
    let RematchOffer::Started(next) = transition.output else {
        panic!("the computer always accepts");
    };
    let info = next.0.info();
    assert_eq!(info.status, GameStatus::Active);
    assert_eq!(next.0.seat_of(&next_token), Some(SECOND));
    assert!(matches!(
        info.seats[FIRST].as_ref().map(|s| s.kind),
        Some(PlayerKind::Computer {
            level: Level::Random
        })
    ));
    assert_eq!(next.0.token_hashes()[FIRST], None);
    assert_eq!(info.rematch.of, Some(id("g1")));
}

#[test]
fn declining_closes_the_rematch_window() {
    let (state, tokens) = finished(TimeControl::Untimed);
    // Before any offer, or after one.
    let (offered, _) = offer(
        state.clone(),
        &tokens[FIRST],
        PlayerToken::generate().hash(),
        "g2",
        secs(20),
    )
    .unwrap();
    for (before, by) in [(state, FIRST), (offered, SECOND)] {
        let (declined, transition) =
            transition::decline_rematch(before, &tokens[by], secs(25)).unwrap();
        assert_eq!(
            transition.game_events,
            [GameEventKind::Rematch {
                by: Some(by),
                action: RematchAction::Declined
            }]
        );
        assert_eq!(declined.info().rematch.offered_by, None);
        assert_eq!(declined.info().rematch.open_until, None);
        assert_eq!(declined.info().rematch.next, None);
        assert_log_closes(&declined, &transition.game_events, true);
        assert_eq!(timing::deadline(declined.info()), None);
        for seat in Player::ALL {
            assert!(matches!(
                offer(
                    declined.clone(),
                    &tokens[seat],
                    PlayerToken::generate().hash(),
                    "g3",
                    secs(26)
                ),
                Err(GameError::RematchUnavailable(_))
            ));
        }
        assert!(matches!(
            transition::decline_rematch(declined, &tokens[FIRST], secs(26)),
            Err(GameError::RematchUnavailable(_))
        ));
    }
}

#[test]
fn the_rematch_window_expires_at_its_deadline() {
    let (state, tokens) = finished(TimeControl::Untimed);
    let (offered, _) = offer(
        state,
        &tokens[SECOND],
        PlayerToken::generate().hash(),
        "g2",
        secs(20),
    )
    .unwrap();
    let closes = secs(10 + WINDOW);
    assert_eq!(
        timing::deadline(offered.info()).map(|d| (d.at, d.kind)),
        Some((closes, DeadlineKind::RematchWindow))
    );
    assert_eq!(
        transition::apply_deadline(offered.clone(), closes - Duration::from_millis(1)).unwrap_err(),
        GameError::NotDue
    );
    // Once the window has passed, an offer is refused even before the deadline is applied.
    assert!(matches!(
        offer(
            offered.clone(),
            &tokens[FIRST],
            PlayerToken::generate().hash(),
            "g3",
            closes
        ),
        Err(GameError::RematchUnavailable(_))
    ));
    let (expired, transition) = transition::apply_deadline(offered.clone(), closes).unwrap();
    assert_eq!(transition.output, DeadlineKind::RematchWindow);
    assert_eq!(
        transition.game_events,
        [GameEventKind::Rematch {
            by: None,
            action: RematchAction::Expired
        }]
    );
    assert!(transition.lobby_events.is_empty());
    assert_eq!(expired.info().rematch.offered_by, None);
    assert_eq!(expired.info().rematch.open_until, None);
    assert_eq!(expired.info().result, offered.info().result);
    assert_log_closes(&expired, &transition.game_events, true);
    assert_eq!(
        transition::apply_deadline(expired, secs(1000)).unwrap_err(),
        GameError::NotDue
    );
}

#[test]
fn no_rematch_for_an_aborted_or_unfinished_game_or_a_stranger() {
    let (active, tokens) = started(TimeControl::Untimed);
    match offer(active.clone(), &tokens[FIRST], tokens[FIRST], "g2", secs(1)) {
        Err(GameError::RematchUnavailable(why)) => assert!(why.contains("not over"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        transition::decline_rematch(active.clone(), &tokens[FIRST], secs(1)),
        Err(GameError::RematchUnavailable(_))
    ));
    let (aborted, transition) = with_window(
        transition::abort(active, &tokens[SECOND], secs(2)).unwrap(),
        secs(2 + WINDOW),
    );
    assert_log_closes(&aborted, &transition.game_events, true);
    assert_eq!(aborted.info().rematch.open_until, None);
    match offer(aborted, &tokens[FIRST], tokens[FIRST], "g2", secs(3)) {
        Err(GameError::RematchUnavailable(why)) => assert!(why.contains("aborted"), "{why}"),
        other => panic!("{other:?}"),
    }
    let (finished, _) = finished(TimeControl::Untimed);
    let stranger = PlayerToken::generate().hash();
    assert_eq!(
        offer(finished, &stranger, stranger, "g2", secs(20)).unwrap_err(),
        GameError::WrongToken
    );
}

#[test]
fn a_repeated_rematch_offer_keeps_the_newest_token() {
    let (state, tokens) = finished(TimeControl::Untimed);
    let (old, new) = (
        PlayerToken::generate().hash(),
        PlayerToken::generate().hash(),
    );
    let (offered, _) = offer(state, &tokens[FIRST], old, "g2", secs(20)).unwrap();
    let (offered, transition) = offer(offered, &tokens[FIRST], new, "g2", secs(21)).unwrap();
    assert!(matches!(transition.output, RematchOffer::Offered));
    assert_eq!(offered.rematch_tokens()[FIRST], Some(new));
    let (_, transition) = offer(
        offered,
        &tokens[SECOND],
        PlayerToken::generate().hash(),
        "g2",
        secs(22),
    )
    .unwrap();
    let RematchOffer::Started(next) = transition.output else {
        panic!("both offered");
    };
    assert_eq!(next.0.seat_of(&new), Some(SECOND));
    assert_eq!(next.0.seat_of(&old), None);
}

// --- Seeks ---------------------------------------------------------------------------------

fn manager(limits: ManagerLimits) -> Arc<GameManager> {
    let store: Arc<dyn GameStore> = Arc::new(MemoryStore::new(MemoryLimits::default()));
    Arc::new(GameManager::new(store, Hub::new(1024), limits))
}

fn seek_request(name: &str, time_control: TimeControl) -> SeekRequest {
    SeekRequest {
        rules: Preset::Standard.rules(),
        preset: Some(Preset::Standard),
        time_control,
        display_name: name.to_owned(),
        computer: None,
        client: None,
        account: None,
        rated: false,
        rating_range: None,
    }
}

/// A routable address (TEST-NET-3, never contacted): per-client limits apply to it.
fn remote_client(last: u8) -> Option<IpAddr> {
    Some(IpAddr::V4(Ipv4Addr::new(203, 0, 113, last)))
}

/// Waits for a seat, failing instead of hanging.
async fn seated(outcome: SeekOutcome) -> Seated {
    match outcome {
        SeekOutcome::Paired(seated) => seated,
        SeekOutcome::Waiting(mut ticket) => {
            tokio::time::timeout(Duration::from_secs(30), ticket.wait())
                .await
                .expect("a waiting seek was paired in time")
                .expect("the pairing created a game")
        }
    }
}

/// `name`'s seek for a 3+2 game, which finds nobody and waits.
async fn waiting_seek(pool: &Arc<SeekPool>, name: &str) -> crate::seek::SeekTicket {
    match pool.seek(seek_request(name, real_time(180, 2))).await {
        Ok(SeekOutcome::Waiting(ticket)) => ticket,
        Ok(SeekOutcome::Paired(_)) => panic!("{name}'s seek paired; it should wait"),
        Err(error) => panic!("{name}'s seek: {error:?}"),
    }
}

/// `name`'s seek for a 3+2 game, which pairs at once with the one waiting.
async fn pairing_seek(pool: &Arc<SeekPool>, name: &str) -> Seated {
    match pool.seek(seek_request(name, real_time(180, 2))).await {
        Ok(SeekOutcome::Paired(seated)) => seated,
        Ok(SeekOutcome::Waiting(_)) => panic!("{name}'s seek waits; it should pair"),
        Err(error) => panic!("{name}'s seek: {error:?}"),
    }
}

/// The stored game holds each seat's token where the seat says.
async fn assert_tokens_seat(manager: &GameManager, seats: &[&Seated]) {
    for seat in seats {
        let state = manager.load_state(&seat.game.id).await.unwrap();
        assert_eq!(state.seat_of(&seat.token.hash()), Some(seat.seat));
    }
}

#[tokio::test]
async fn two_compatible_seeks_pair_into_one_active_game() {
    let manager = manager(ManagerLimits::default());
    let pool = SeekPool::new(Arc::clone(&manager), SeekLimits::default());
    let (open, mut updates) = pool.subscribe();
    assert!(open.is_empty());
    let mut ticket = waiting_seek(&pool, "Lan").await;
    let seek_id = ticket.info().id.clone();
    assert_eq!(pool.list(), [ticket.info().clone()]);
    assert_eq!(
        updates.recv().await.unwrap(),
        SeekUpdate::Added(ticket.info().clone())
    );
    let minh = pairing_seek(&pool, "Minh").await;
    let lan = ticket.wait().await.unwrap();
    assert_eq!(lan.game.id, minh.game.id);
    assert_eq!(minh.game.status, GameStatus::Active);
    assert_ne!(lan.seat, minh.seat);
    assert_eq!(minh.game.time_control, real_time(180, 2));
    assert_eq!(
        minh.game.seats[lan.seat]
            .as_ref()
            .map(|s| s.display_name.as_str()),
        Some("Lan")
    );
    assert_eq!(
        minh.game.seats[minh.seat]
            .as_ref()
            .map(|s| s.display_name.as_str()),
        Some("Minh")
    );
    assert_tokens_seat(&manager, &[&lan, &minh]).await;
    assert!(pool.list().is_empty());
    assert!(matches!(
        updates.recv().await.unwrap(),
        SeekUpdate::Removed { id, .. } if id == seek_id
    ));
    // The paired ticket going away announces nothing more.
    drop(ticket);
    assert!(updates.try_recv().is_err());
}

#[tokio::test]
async fn seeks_with_other_time_controls_do_not_pair_and_a_dropped_ticket_withdraws() {
    let manager = manager(ManagerLimits::default());
    let pool = SeekPool::new(Arc::clone(&manager), SeekLimits::default());
    let mut tickets = Vec::new();
    for time_control in [real_time(180, 2), real_time(300, 0), TimeControl::Untimed] {
        match pool.seek(seek_request("Lan", time_control)).await.unwrap() {
            SeekOutcome::Waiting(ticket) => tickets.push(ticket),
            SeekOutcome::Paired(seated) => panic!("paired across time controls: {seated:?}"),
        }
    }
    let listed: Vec<TimeControl> = pool.list().iter().map(|s| s.time_control).collect();
    assert_eq!(
        listed,
        [real_time(180, 2), real_time(300, 0), TimeControl::Untimed]
    );
    let (_, mut updates) = pool.subscribe();
    let withdrawn = tickets.remove(1);
    let withdrawn_id = withdrawn.info().id.clone();
    drop(withdrawn);
    assert_eq!(
        updates.recv().await.unwrap(),
        SeekUpdate::Removed {
            id: withdrawn_id.clone(),
            game_id: None
        }
    );
    assert_eq!(pool.list().len(), 2);
    assert!(matches!(
        pool.accept(&withdrawn_id, "Minh", None, None).await,
        Err(GameError::SeekNotFound(_))
    ));
    drop(tickets);
    assert!(pool.list().is_empty());
    let listed = manager
        .list_games(crate::model::GameFilter::All, 0, None)
        .await
        .unwrap();
    assert!(listed.games.is_empty(), "no game without a pairing");
}

#[tokio::test]
async fn a_seek_can_be_accepted_by_id_once() {
    let manager = manager(ManagerLimits::default());
    let pool = SeekPool::new(Arc::clone(&manager), SeekLimits::default());
    let SeekOutcome::Waiting(mut ticket) = pool
        .seek(seek_request("Lan", TimeControl::Untimed))
        .await
        .unwrap()
    else {
        panic!("nobody to pair with yet");
    };
    let seek_id = ticket.info().id.clone();
    match pool.accept("unknown", "Minh", None, None).await {
        Err(GameError::SeekNotFound(what)) => assert!(what.contains("unknown"), "{what}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(pool.list().len(), 1, "a failed accept leaves the seek");
    let minh = pool.accept(&seek_id, "Minh", None, None).await.unwrap();
    let lan = ticket.wait().await.unwrap();
    assert_eq!(lan.game.id, minh.game.id);
    assert_ne!(lan.seat, minh.seat);
    assert_eq!(minh.game.status, GameStatus::Active);
    assert_tokens_seat(&manager, &[&lan, &minh]).await;
    assert!(pool.list().is_empty());
    assert!(matches!(
        pool.accept(&seek_id, "Hoa", None, None).await,
        Err(GameError::SeekNotFound(_))
    ));
}

#[tokio::test]
async fn a_client_has_a_limited_number_of_open_seeks() {
    let manager = manager(ManagerLimits::default());
    let limits = SeekLimits {
        max_per_client: 2,
        ..SeekLimits::default()
    };
    let pool = SeekPool::new(Arc::clone(&manager), limits);
    let seek_from = |client, minutes: u64| SeekRequest {
        client,
        ..seek_request("Lan", real_time(60 * minutes, 0))
    };
    let mut tickets = Vec::new();
    for minutes in [1, 2] {
        let outcome = pool
            .seek(seek_from(remote_client(7), minutes))
            .await
            .unwrap();
        let SeekOutcome::Waiting(ticket) = outcome else {
            panic!("nobody to pair with");
        };
        tickets.push(ticket);
    }
    match pool.seek(seek_from(remote_client(7), 3)).await {
        Err(GameError::LimitExceeded(why)) => assert!(why.contains("per client"), "{why}"),
        other => panic!("{other:?}"),
    }
    // Another address, and loopback, are not held to this one's share.
    for client in [remote_client(8), Some(IpAddr::V4(Ipv4Addr::LOCALHOST))] {
        let outcome = pool.seek(seek_from(client, 4)).await.unwrap();
        match outcome {
            SeekOutcome::Waiting(ticket) => tickets.push(ticket),
            // The loopback seek pairs with the one from address 8: just as good.
            SeekOutcome::Paired(_) => {}
        }
    }
    // A withdrawn seek frees its place.
    tickets.remove(0);
    assert!(matches!(
        pool.seek(seek_from(remote_client(7), 3)).await.unwrap(),
        SeekOutcome::Waiting(_)
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_concurrent_seeks_make_exactly_one_hundred_games() {
    let manager = manager(ManagerLimits::default());
    let pool = SeekPool::new(Arc::clone(&manager), SeekLimits::default());
    let start = Arc::new(tokio::sync::Barrier::new(200));
    let seekers: Vec<_> = (0..200)
        .map(|n| {
            let pool = Arc::clone(&pool);
            let start = Arc::clone(&start);
            tokio::spawn(async move {
                start.wait().await;
                let outcome = pool
                    .seek(seek_request(&format!("p{n}"), real_time(180, 2)))
                    .await
                    .unwrap();
                (n, seated(outcome).await)
            })
        })
        .collect();
    let mut games: HashMap<GameId, Vec<(usize, Player)>> = HashMap::new();
    let mut tokens = HashSet::new();
    for seeker in seekers {
        let (n, seat) = seeker.await.unwrap();
        assert_eq!(
            seat.game.seats[seat.seat]
                .as_ref()
                .map(|s| s.display_name.clone()),
            Some(format!("p{n}")),
        );
        assert_tokens_seat(&manager, &[&seat]).await;
        assert!(tokens.insert(seat.token.expose().to_owned()));
        games
            .entry(seat.game.id.clone())
            .or_default()
            .push((n, seat.seat));
    }
    assert_eq!(games.len(), 100);
    for (game, seats) in &games {
        assert_eq!(seats.len(), 2, "game {game}: {seats:?}");
        assert_ne!(seats[0].1, seats[1].1, "game {game}: {seats:?}");
    }
    assert!(pool.list().is_empty());
    let mut stored = 0;
    let mut cursor: Option<String> = None;
    loop {
        let page = manager
            .list_games(crate::model::GameFilter::Active, 100, cursor.as_deref())
            .await
            .unwrap();
        stored += page.games.len();
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    assert_eq!(stored, 100);
}

#[tokio::test]
async fn a_seek_nobody_answers_is_handed_to_the_computer() {
    let manager = manager(ManagerLimits::default());
    let pool = SeekPool::new(Arc::clone(&manager), SeekLimits::default());
    let request = SeekRequest {
        computer: Some((Duration::from_millis(50), Level::Random)),
        ..seek_request("Lan", real_time(180, 2))
    };
    let SeekOutcome::Waiting(ticket) = pool.seek(request).await.unwrap() else {
        panic!("nobody to pair with");
    };
    assert_eq!(
        ticket.info().computer_after,
        Some(Duration::from_millis(50))
    );
    let lan = seated(SeekOutcome::Waiting(ticket)).await;
    let game = &lan.game;
    assert_eq!(game.status, GameStatus::Active);
    assert_eq!(game.time_control, real_time(180, 2));
    assert_eq!(
        game.seats[lan.seat]
            .as_ref()
            .map(|s| (s.display_name.as_str(), s.kind)),
        Some(("Lan", PlayerKind::Human))
    );
    assert!(matches!(
        game.seats[lan.seat.other()].as_ref().map(|s| s.kind),
        Some(PlayerKind::Computer { .. })
    ));
    assert_tokens_seat(&manager, &[&lan]).await;
    assert!(pool.list().is_empty());
}

// --- The timekeeper ------------------------------------------------------------------------

const FIRST_MOVE_LIMIT: Duration = Duration::from_millis(300);

fn timed_manager() -> Arc<GameManager> {
    manager(ManagerLimits {
        time: TimePolicy {
            first_move: FIRST_MOVE_LIMIT,
            ..TimePolicy::default()
        },
        ..ManagerLimits::default()
    })
}

/// A 1+0 game between Lan (first) and Minh, started.
async fn one_second_game(manager: &GameManager) -> (GameInfo, ByPlayer<PlayerToken>) {
    let lan = manager
        .create_game(NewGame {
            rules: Preset::Standard.rules(),
            preset: Some(Preset::Standard),
            start: None,
            seat: Some(FIRST),
            display_name: "Lan".to_owned(),
            computer: None,
            time_control: TimeControl::real_time(dur(1), Duration::ZERO).unwrap(),
            account: None,
            rated: false,
        })
        .await
        .unwrap();
    let minh = manager.join_game(&lan.game.id, "Minh").await.unwrap();
    assert_eq!(minh.game.status, GameStatus::Active);
    (minh.game, ByPlayer::new(lan.token, minh.token))
}

/// Waits for the event that ends game `id`, as a watcher sees it, and says when it came.
async fn ended(manager: &GameManager, id: &GameId) -> (GameInfo, SystemTime) {
    let mut watch = manager.watch_game(id, None).await.unwrap();
    let when = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match watch.next().await.unwrap() {
                Some(WatchItem::Event(event))
                    if matches!(event.kind, GameEventKind::GameOver { .. }) =>
                {
                    return SystemTime::now();
                }
                Some(WatchItem::Snapshot { snapshot, .. }) => {
                    assert!(!snapshot.status.is_over(), "over before the watch began");
                }
                Some(_) => {}
                None => panic!("the watch ended without a GameOver"),
            }
        }
    })
    .await
    .expect("the timekeeper ended the game by itself");
    (manager.get_game(id).await.unwrap(), when)
}

#[tokio::test]
async fn the_timekeeper_aborts_a_game_whose_first_move_is_not_made() {
    let manager = timed_manager();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let keeper = crate::timekeeper::spawn_timekeeper(Arc::clone(&manager), false, stopped);
    let (game, _tokens) = one_second_game(&manager).await;
    let deadline = game.turn_started.unwrap() + FIRST_MOVE_LIMIT;
    let (info, when) = ended(&manager, &game.id).await;
    assert!(when >= deadline, "aborted before the deadline");
    assert_eq!(info.status, GameStatus::Aborted);
    let result = info.result.unwrap();
    assert_eq!(
        (result.outcome, result.termination, result.ended_by),
        (None, Termination::Aborted, Some(FIRST))
    );
    assert!(info.log_closed());
    stop.send(true).unwrap();
    keeper.await.unwrap();
}

#[tokio::test]
async fn the_timekeeper_lets_a_flag_fall_within_100_ms_of_the_deadline() {
    let manager = timed_manager();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let keeper = crate::timekeeper::spawn_timekeeper(Arc::clone(&manager), false, stopped);
    let (game, tokens) = one_second_game(&manager).await;
    let mut info = game;
    for _ in 0..2 {
        let mover = info.position.to_move();
        let mv = info.position.legal_moves()[0];
        info = manager
            .play_move(&info.id, &tokens[mover], mv, Some(info.position.ply()))
            .await
            .unwrap()
            .1;
    }
    // The first player's clock runs from the second move.
    let deadline = info.turn_started.unwrap() + dur(1);
    assert_eq!(
        timing::deadline(&info).map(|d| (d.at, d.kind)),
        Some((deadline, DeadlineKind::Flag { player: FIRST }))
    );
    let (over, when) = ended(&manager, &info.id).await;
    let late = when
        .duration_since(deadline)
        .expect("the flag fell before the deadline");
    assert!(
        late < Duration::from_millis(100),
        "the flag fell {late:?} late"
    );
    assert_eq!(over.status, GameStatus::Finished);
    let result = over.result.unwrap();
    assert_eq!(result.termination, Termination::Timeout);
    assert_eq!(result.outcome, Some(Outcome::Decisive { winner: SECOND }));
    assert_eq!(result.ended_by, Some(FIRST));
    assert_eq!(over.clock.unwrap().remaining.first, Duration::ZERO);
    assert_eq!(over.updated, deadline);
    // A late move finds the game over on time, and is told so; the opponent's, that it is over.
    let mv = over.position.legal_moves()[0];
    assert_eq!(
        manager
            .play_move(&over.id, &tokens[FIRST], mv, None)
            .await
            .unwrap_err(),
        GameError::TimeUp { first_move: false }
    );
    assert_eq!(
        manager
            .play_move(&over.id, &tokens[SECOND], mv, None)
            .await
            .unwrap_err(),
        GameError::GameOver
    );
    stop.send(true).unwrap();
    keeper.await.unwrap();
}

// --- The idle reaper and online play --------------------------------------------------------

/// The reaper leaves timed games to their clocks, and an active untimed game to its waiting
/// player's claim until the abandonment time has passed too; a game nobody joins still goes.
#[tokio::test]
async fn the_idle_reaper_leaves_claimable_and_timed_games_alone() {
    let manager = manager(ManagerLimits {
        time: TimePolicy {
            abandon_after: Duration::from_millis(400),
            ..TimePolicy::default()
        },
        ..ManagerLimits::default()
    });
    let new_game = |time_control| crate::manager::NewGame {
        rules: Preset::Standard.rules(),
        preset: Some(Preset::Standard),
        start: None,
        seat: Some(FIRST),
        display_name: "Lan".to_owned(),
        computer: None,
        time_control,
        account: None,
        rated: false,
    };
    let waiting = manager
        .create_game(new_game(TimeControl::Untimed))
        .await
        .unwrap();
    let untimed = manager
        .create_game(new_game(TimeControl::Untimed))
        .await
        .unwrap();
    manager.join_game(&untimed.game.id, "Minh").await.unwrap();
    let correspondence = TimeControl::correspondence(Duration::from_secs(86_400)).unwrap();
    let timed = manager.create_game(new_game(correspondence)).await.unwrap();
    manager.join_game(&timed.game.id, "Hoa").await.unwrap();
    let idle = Duration::from_millis(100);
    let up_since = crate::service_clock::now();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        crate::reaper::expire_idle_games(&manager, idle, up_since)
            .await
            .unwrap(),
        1
    );
    let status = |id| {
        let manager = Arc::clone(&manager);
        async move { manager.get_game(&id).await.unwrap().status }
    };
    assert_eq!(status(waiting.game.id.clone()).await, GameStatus::Aborted);
    assert_eq!(status(untimed.game.id.clone()).await, GameStatus::Active);
    // Past the abandonment time and the idle time after it, the untimed game goes too; the
    // correspondence game, with a day to move, stays.
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        crate::reaper::expire_idle_games(&manager, idle, up_since)
            .await
            .unwrap(),
        1
    );
    assert_eq!(status(untimed.game.id.clone()).await, GameStatus::Aborted);
    assert_eq!(status(timed.game.id.clone()).await, GameStatus::Active);
}

/// A waiting game left by a server that stopped for longer than the idle time gets the whole
/// idle time again from the next server's start: nobody could join it meanwhile.
#[tokio::test]
async fn a_waiting_game_gets_its_idle_time_again_after_a_restart() {
    let manager = manager(ManagerLimits::default());
    let waiting = manager.create_game(waiting_game()).await.unwrap();
    let idle = Duration::from_millis(300);
    tokio::time::sleep(Duration::from_millis(400)).await;
    // The server "starts" now: the game has been idle past `idle`, all of it before the start.
    let up_since = crate::service_clock::now();
    let expire = || crate::reaper::expire_idle_games(&manager, idle, up_since);
    assert_eq!(expire().await.unwrap(), 0);
    let status = || async { manager.get_game(&waiting.game.id).await.unwrap().status };
    assert_eq!(status().await, GameStatus::WaitingForPlayers);
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(expire().await.unwrap(), 1);
    assert_eq!(status().await, GameStatus::Aborted);
}

// --- A full memory store ---------------------------------------------------------------------

fn small_store(max_games: usize) -> GameManager {
    let store: Arc<dyn GameStore> = Arc::new(MemoryStore::new(MemoryLimits {
        max_games,
        ..MemoryLimits::default()
    }));
    GameManager::new(store, Hub::new(1024), ManagerLimits::default())
}

fn waiting_game() -> NewGame {
    NewGame {
        rules: Preset::Standard.rules(),
        preset: Some(Preset::Standard),
        start: None,
        seat: Some(FIRST),
        display_name: "Guest Lan".to_owned(),
        computer: None,
        time_control: TimeControl::Untimed,
        account: None,
        rated: false,
    }
}

/// A full in-memory store forgets the game that ended first to make room: an outside probe
/// filled one with aborted games from one address, and then nobody could create a game or be
/// paired until a restart. Only while every game kept is unfinished is creation refused.
#[tokio::test]
async fn a_full_memory_store_makes_room_by_forgetting_the_first_game_to_end() {
    let manager = small_store(2);
    let first = manager.create_game(waiting_game()).await.unwrap();
    let second = manager.create_game(waiting_game()).await.unwrap();
    let refused = manager.create_game(waiting_game()).await.unwrap_err();
    assert!(
        matches!(&refused, GameError::LimitExceeded(why) if why.contains("none of them over")),
        "{refused:?}"
    );
    manager.abort(&second.game.id, &second.token).await.unwrap();
    manager.abort(&first.game.id, &first.token).await.unwrap();
    // The second ended first: it goes, the first stays until the next creation.
    let third = manager.create_game(waiting_game()).await.unwrap();
    assert!(matches!(
        manager.get_game(&second.game.id).await,
        Err(GameError::GameNotFound(_))
    ));
    assert_eq!(
        manager.get_game(&first.game.id).await.unwrap().status,
        GameStatus::Aborted
    );
    let fourth = manager.create_game(waiting_game()).await.unwrap();
    assert!(manager.get_game(&first.game.id).await.is_err());
    // Listings skip what was forgotten, newest first, across pages.
    let page = manager
        .list_games(crate::model::GameFilter::All, 1, None)
        .await
        .unwrap();
    assert_eq!(page.games[0].id, fourth.game.id);
    let rest = manager
        .list_games(
            crate::model::GameFilter::All,
            10,
            page.next_cursor.as_deref(),
        )
        .await
        .unwrap();
    let ids: Vec<_> = rest.games.iter().map(|g| g.id.clone()).collect();
    assert_eq!(ids, std::slice::from_ref(&third.game.id));
    assert!(manager.create_game(waiting_game()).await.is_err());
}

/// A finished game stays while a rematch can be offered: its players may still come back to it.
#[tokio::test]
async fn a_full_memory_store_keeps_a_game_in_its_rematch_window() {
    let manager = small_store(1);
    let created = manager.create_game(waiting_game()).await.unwrap();
    let id = created.game.id.clone();
    let joined = manager.join_game(&id, "Guest Minh").await.unwrap();
    let tokens = [created.token, joined.token];
    for token in &tokens {
        let position = manager.get_game(&id).await.unwrap().position;
        let _ = manager
            .play_move(&id, token, position.legal_moves()[0], None)
            .await;
    }
    manager.resign(&id, &tokens[0]).await.unwrap();
    assert_eq!(
        manager.get_game(&id).await.unwrap().status,
        GameStatus::Finished
    );
    assert!(manager.create_game(waiting_game()).await.is_err());
    assert!(manager.get_game(&id).await.is_ok());
}

/// A pairing the full store refuses leaves the waiting seeker's seek in the pool: an outside
/// probe saw the innocent seeker's stream end with the caller's RESOURCE_EXHAUSTED.
#[tokio::test]
async fn a_pairing_refused_by_a_full_store_keeps_the_waiting_seek() {
    let manager = Arc::new(small_store(2));
    let pool = SeekPool::new(Arc::clone(&manager), SeekLimits::default());
    let first = manager.create_game(waiting_game()).await.unwrap();
    manager.create_game(waiting_game()).await.unwrap();
    let mut ticket = waiting_seek(&pool, "Lan").await;
    let (_, mut updates) = pool.subscribe();
    let refused = pool
        .seek(seek_request("Minh", real_time(180, 2)))
        .await
        .unwrap_err();
    assert!(
        matches!(refused, GameError::LimitExceeded(_)),
        "{refused:?}"
    );
    assert_eq!(pool.list(), [ticket.info().clone()]);
    // Lobby watchers saw it taken and put back.
    assert!(matches!(
        updates.recv().await.unwrap(),
        SeekUpdate::Removed { .. }
    ));
    assert_eq!(
        updates.recv().await.unwrap(),
        SeekUpdate::Added(ticket.info().clone())
    );
    assert!(
        tokio::time::timeout(Duration::from_millis(100), ticket.wait())
            .await
            .is_err(),
        "the waiting seeker was told something"
    );
    // Once there is room, the same seek pairs.
    manager.abort(&first.game.id, &first.token).await.unwrap();
    let minh = pairing_seek(&pool, "Minh").await;
    let lan = ticket.wait().await.unwrap();
    assert_eq!(lan.game.id, minh.game.id);
}
