//! The game's life cycle as pure functions: `(state, command, now) -> Result<(new state,
//! events), GameError>`. No store, no runtime, no clock of their own: the manager loads a state,
//! calls one of these, and commits what it returns; a refused command changes nothing.
//!
//! Invariants every transition keeps (see the property test below): the summary's position is
//! the engine's, after exactly `move_count` moves, all in the move log; a game is over exactly
//! when it has a result; an active game has both seats and a turn start; a timed game has a
//! clock.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use oanquan_ai::Level;
use oanquan_rules::{ByPlayer, Move, Outcome, Player, Position, Preset, Rules};

use crate::account::SeatAccount;
use crate::clock::{self, Clock, DeadlineKind, Rematch, TimeControl, TimePolicy};
use crate::error::GameError;
use crate::model::{
    DrawAction, GameEventKind, GameId, GameInfo, GameResult, GameState, GameStatus, LobbyEventKind,
    MoveRecord, PlayerKind, RematchAction, SeatInfo, Termination, computer_name,
};
use crate::timing;
use crate::token::TokenHash;

/// What a transition does besides the new state: the events to commit with it, and what the
/// caller gets back.
#[derive(Debug, Clone, PartialEq)]
pub struct Transition<T> {
    /// Events of the game, in order.
    pub game_events: Vec<GameEventKind>,
    /// Events of the lobby, in order.
    pub lobby_events: Vec<LobbyEventKind>,
    /// The command's own answer (the seat taken, the move played).
    pub output: T,
}

/// A transition's result.
pub type Decided<T> = Result<(GameState, Transition<T>), GameError>;

/// Who takes the seat the creator did not take.
#[derive(Debug, Clone)]
pub enum Opponent {
    /// Nobody yet: the game waits for someone to join.
    Wait,
    /// The server's computer at this level: the game starts at once.
    Computer(Level),
    /// A person already paired (a seek, a rematch): the game starts at once.
    Human {
        /// Display name, already checked (an account's username).
        display_name: String,
        /// Their token's hash.
        token: TokenHash,
        /// Their account, if they play as one.
        account: Option<SeatAccount>,
    },
}

/// A new game, its creator seated.
#[derive(Debug, Clone)]
pub struct Create {
    /// The new game's id.
    pub id: GameId,
    /// The full rule set.
    pub rules: Rules,
    /// The preset it came from, if any.
    pub preset: Option<Preset>,
    /// The start position, checked under `rules` and not over.
    pub start: Position,
    /// The creator's seat.
    pub seat: Player,
    /// The creator's display name, already checked.
    pub display_name: String,
    /// The creator's token hash.
    pub token: TokenHash,
    /// Who sits in the other seat.
    pub opponent: Opponent,
    /// The creator's address in `client_key` form.
    pub creator: Option<IpAddr>,
    /// The players' time control.
    pub time_control: TimeControl,
    /// The server's time policy (first-move limit).
    pub policy: TimePolicy,
    /// The game this one is a rematch of.
    pub rematch_of: Option<GameId>,
    /// The creator's account, if they play as one.
    pub account: Option<SeatAccount>,
    /// Whether the result changes ratings (the caller checked that both seats will be
    /// accounts).
    pub rated: bool,
}

/// Creates a game: the creator in their seat, and the opponent in the other if there is one.
#[must_use]
pub fn create(command: Create, now: SystemTime) -> (GameState, Transition<()>) {
    let mut info = GameInfo {
        id: command.id,
        rules: command.rules,
        preset: command.preset,
        seats: Default::default(),
        status: GameStatus::WaitingForPlayers,
        start: command.start,
        position: command.start,
        move_count: 0,
        result: None,
        created: now,
        updated: now,
        sequence: 0,
        time_control: command.time_control,
        clock: Clock::new(command.time_control, &command.policy),
        turn_started: None,
        draw_offer: None,
        last_draw_offer: ByPlayer::default(),
        rematch: Rematch {
            of: command.rematch_of,
            ..Rematch::default()
        },
        rated: command.rated,
    };
    let seat = command.seat;
    info.seats[seat] = Some(SeatInfo {
        display_name: command.display_name.clone(),
        kind: PlayerKind::Human,
        account: command.account,
    });
    let mut game_events = vec![GameEventKind::PlayerJoined {
        seat,
        display_name: command.display_name,
        kind: PlayerKind::Human,
    }];
    let mut lobby_events = Vec::new();
    let mut token_hashes = ByPlayer::default();
    token_hashes[seat] = Some(command.token);
    match command.opponent {
        Opponent::Wait => {}
        Opponent::Computer(level) => {
            let kind = PlayerKind::Computer { level };
            seat_opponent(
                &mut info,
                seat.other(),
                (computer_name(level), None),
                kind,
                now,
                &mut game_events,
                &mut lobby_events,
            );
        }
        Opponent::Human {
            display_name,
            token,
            account,
        } => {
            token_hashes[seat.other()] = Some(token);
            seat_opponent(
                &mut info,
                seat.other(),
                (display_name, account),
                PlayerKind::Human,
                now,
                &mut game_events,
                &mut lobby_events,
            );
        }
    }
    lobby_events.insert(
        0,
        LobbyEventKind::GameCreated {
            game: Box::new(info.clone()),
        },
    );
    let state = GameState::new(info, token_hashes, command.creator);
    (
        state,
        Transition {
            game_events,
            lobby_events,
            output: (),
        },
    )
}

/// Seats a second player, `display_name` (checked) with token `token`, in the free seat of a
/// waiting game, which starts.
///
/// # Errors
///
/// [`GameError::SeatTaken`] if the game is full, [`GameError::GameOver`] if it ended.
pub fn join(
    mut state: GameState,
    display_name: &str,
    token: TokenHash,
    account: Option<SeatAccount>,
    now: SystemTime,
) -> Decided<Player> {
    match state.info().status {
        GameStatus::WaitingForPlayers => {}
        GameStatus::Active => {
            return Err(GameError::SeatTaken(
                "both seats are taken; watch the game or create a new one",
            ));
        }
        GameStatus::Finished | GameStatus::Aborted => return Err(GameError::GameOver),
    }
    let seat = Player::ALL
        .into_iter()
        .find(|&p| state.info().seats[p].is_none())
        .ok_or(GameError::SeatTaken("both seats are taken"))?;
    if state.info().rated && account.is_none() {
        return Err(GameError::RatedNeedsAccount);
    }
    let other = state.info().seats[seat.other()]
        .as_ref()
        .and_then(|s| s.account.as_ref());
    if account
        .as_ref()
        .zip(other)
        .is_some_and(|(mine, theirs)| mine.id == theirs.id)
    {
        return Err(GameError::SeatTaken(
            "your account holds the other seat of this game; play someone else",
        ));
    }
    state.edit(|info| {
        info.seats[seat] = Some(SeatInfo {
            display_name: display_name.to_owned(),
            kind: PlayerKind::Human,
            account,
        });
        info.status = GameStatus::Active;
        info.updated = now;
        info.turn_started = Some(now);
    });
    state.set_token(seat, token);
    let position = *state.position();
    let id = state.info().id.clone();
    let transition = Transition {
        game_events: vec![
            GameEventKind::PlayerJoined {
                seat,
                display_name: display_name.to_owned(),
                kind: PlayerKind::Human,
            },
            GameEventKind::GameStarted {
                game: Box::new(state.info().clone()),
            },
            GameEventKind::TurnStarted {
                player: position.to_move(),
                ply: position.ply(),
                refill: None,
                clock: timing::reading(state.info(), now),
            },
        ],
        lobby_events: vec![
            LobbyEventKind::SeatTaken {
                game_id: id.clone(),
                seat,
                display_name: display_name.to_owned(),
            },
            LobbyEventKind::GameStarted { game_id: id },
        ],
        output: seat,
    };
    Ok((state, transition))
}

/// Who asks to play a move.
#[derive(Debug, Clone, Copy)]
pub enum Mover {
    /// The seat whose token hashes to this.
    Token(TokenHash),
    /// The server's computer, for the seat to move, which must be a computer seat.
    Computer,
}

/// Plays `mv` for `mover`; with `expected_ply`, only if the game is at that ply, so a retried
/// request cannot play twice. In a timed game the move must arrive before the mover's
/// deadline; the time since the turn started is charged to the mover (except for each
/// player's first move), then the increment added.
///
/// # Errors
///
/// [`GameError::WrongToken`], [`GameError::GameNotStarted`], [`GameError::GameOver`],
/// [`GameError::StalePly`], [`GameError::NotYourTurn`], [`GameError::TimeUp`],
/// [`GameError::IllegalMove`].
pub fn play(
    mut state: GameState,
    mover: Mover,
    mv: Move,
    expected_ply: Option<u32>,
    now: SystemTime,
) -> Decided<Arc<MoveRecord>> {
    let seat = match mover {
        Mover::Token(hash) => state.seat_of(&hash).ok_or(GameError::WrongToken)?,
        Mover::Computer => {
            let to_move = state.position().to_move();
            let is_computer = state.info().seats[to_move]
                .as_ref()
                .is_some_and(|s| matches!(s.kind, PlayerKind::Computer { .. }));
            if !is_computer {
                return Err(GameError::NotYourTurn { to_move });
            }
            to_move
        }
    };
    match state.info().status {
        GameStatus::WaitingForPlayers => return Err(GameError::GameNotStarted),
        GameStatus::Finished | GameStatus::Aborted => return Err(over_for(state.info(), seat)),
        GameStatus::Active => {}
    }
    let current = state.position().ply();
    match expected_ply {
        Some(expected) if expected != current => {
            return Err(GameError::StalePly { expected, current });
        }
        _ => {}
    }
    let to_move = state.position().to_move();
    if to_move != seat {
        return Err(GameError::NotYourTurn { to_move });
    }
    if let Some(deadline) = timing::deadline(state.info())
        && now >= deadline.at
    {
        return Err(GameError::TimeUp {
            first_move: matches!(deadline.kind, DeadlineKind::FirstMove { .. }),
        });
    }
    let first_move = timing::is_first_move(state.info());
    let record = state.play(seat, mv, now)?;
    let position = record.position;
    state.edit(|info| {
        info.updated = now;
        if let (Some(clock), Some(started)) = (info.clock.as_mut(), info.turn_started) {
            let spent = now.duration_since(started).unwrap_or_default();
            match info.time_control {
                TimeControl::RealTime { increment, .. } if !first_move => {
                    clock.remaining[seat] = clock.remaining[seat].saturating_sub(spent) + increment;
                }
                TimeControl::Correspondence { per_move } => {
                    clock.remaining = ByPlayer::new(per_move, per_move);
                }
                _ => {}
            }
        }
        info.turn_started = Some(now);
        // An offer stands until the offerer's opponent moves: this mover's opponent's offer
        // lapses; the mover's own stays.
        if info.draw_offer == Some(seat.other()) {
            info.draw_offer = None;
        }
    });
    let mut game_events = vec![GameEventKind::MovePlayed {
        record: Arc::clone(&record),
        clock: None,
    }];
    let mut lobby_events = Vec::new();
    if let Some(reason) = position.end_reason() {
        let result = GameResult {
            outcome: position.outcome(),
            scores: position.scores(),
            termination: Termination::Rules(reason),
            ended_by: None,
            ratings: None,
        };
        finish(
            &mut state,
            GameStatus::Finished,
            result,
            now,
            &mut game_events,
            &mut lobby_events,
        );
    } else {
        let refill = record
            .refill()
            .filter(|&(player, _)| player == position.to_move())
            .map(|(_, captured_after)| captured_after);
        game_events.push(GameEventKind::TurnStarted {
            player: position.to_move(),
            ply: position.ply(),
            refill,
            clock: timing::reading(state.info(), now),
        });
    }
    // The move's clocks are those the next turn starts with (or the final ones).
    let after = timing::reading(state.info(), now);
    if let Some(GameEventKind::MovePlayed { clock, .. }) = game_events.first_mut() {
        *clock = after;
    }
    Ok((
        state,
        Transition {
            game_events,
            lobby_events,
            output: record,
        },
    ))
}

/// Why a move for `seat` of a game that is over is refused. The player whose flag fell is told
/// that their time ran out, as they are when their move beats the timekeeper to the deadline:
/// which of the two comes first is a matter of milliseconds, and must not change the answer.
fn over_for(info: &GameInfo, seat: Player) -> GameError {
    match info.result {
        Some(GameResult {
            termination: Termination::Timeout,
            ended_by: Some(flagged),
            ..
        }) if flagged == seat => GameError::TimeUp { first_move: false },
        _ => GameError::GameOver,
    }
}

/// Resigns for the seat whose token hashes to `token`; the opponent wins.
///
/// # Errors
///
/// [`GameError::WrongToken`], [`GameError::GameNotStarted`] (abort instead),
/// [`GameError::GameOver`], also once the player to move is out of time.
pub fn resign(state: GameState, token: &TokenHash, now: SystemTime) -> Decided<()> {
    let seat = state.seat_of(token).ok_or(GameError::WrongToken)?;
    active(&state)?;
    before_deadline(&state, now)?;
    let result = GameResult {
        outcome: Some(Outcome::Decisive {
            winner: seat.other(),
        }),
        scores: state.position().scores(),
        termination: Termination::Resignation,
        ended_by: Some(seat),
        ratings: None,
    };
    Ok(ended(state, GameStatus::Finished, result, now, Vec::new()))
}

/// Aborts a game before its first move, for the seat whose token hashes to `token`.
///
/// # Errors
///
/// [`GameError::WrongToken`], [`GameError::GameAlreadyStarted`], [`GameError::GameOver`],
/// also once the player to move is out of time.
pub fn abort(state: GameState, token: &TokenHash, now: SystemTime) -> Decided<()> {
    let seat = state.seat_of(token).ok_or(GameError::WrongToken)?;
    if state.info().status.is_over() {
        return Err(GameError::GameOver);
    }
    before_deadline(&state, now)?;
    if state.info().move_count > 0 {
        return Err(GameError::GameAlreadyStarted);
    }
    Ok(aborted(state, Some(seat), now))
}

/// The game aborted at `now`, by `by` (a seat, or none for the server).
fn aborted(state: GameState, by: Option<Player>, now: SystemTime) -> (GameState, Transition<()>) {
    let result = GameResult {
        outcome: None,
        scores: state.position().scores(),
        termination: Termination::Aborted,
        ended_by: by,
        ratings: None,
    };
    ended(state, GameStatus::Aborted, result, now, Vec::new())
}

/// Aborts a game still waiting for its second player on behalf of `seat`, the one taken
/// (see `GameManager::join_game_as`: a seat whose account revoked a key since).
///
/// # Errors
///
/// [`GameError::GameOver`] once the game is over, [`GameError::GameAlreadyStarted`] once
/// it is not waiting any more.
pub fn withdraw_waiting(state: GameState, seat: Player, now: SystemTime) -> Decided<()> {
    if state.info().status.is_over() {
        return Err(GameError::GameOver);
    }
    if state.info().status != GameStatus::WaitingForPlayers {
        return Err(GameError::GameAlreadyStarted);
    }
    Ok(aborted(state, Some(seat), now))
}

/// Aborts a waiting or active game idle since before `idle_since` ([`GameInfo::idle_since`];
/// no seat ends it: `ended_by` stays empty).
///
/// # Errors
///
/// [`GameError::GameOver`] if the game is over or changed since: nothing to expire. Also
/// once the player to move is out of time: the deadline, not idleness, ends that game.
pub fn expire(state: GameState, idle_since: SystemTime, now: SystemTime) -> Decided<()> {
    if state.info().status.is_over() || state.info().idle_since() >= idle_since {
        return Err(GameError::GameOver);
    }
    before_deadline(&state, now)?;
    Ok(aborted(state, None, now))
}

/// Applies the game's [`deadline`](clock::deadline) if it has passed at `now`: a flag falls
/// (the opponent wins on time), a first move not made aborts the game, a rematch window
/// closes. Returns what it applied.
///
/// # Errors
///
/// [`GameError::NotDue`] if nothing is due (a move came first, or the game changed).
pub fn apply_deadline(state: GameState, now: SystemTime) -> Decided<DeadlineKind> {
    let Some(deadline) = timing::deadline(state.info()).filter(|d| now >= d.at) else {
        return Err(GameError::NotDue);
    };
    let kind = deadline.kind;
    let (state, transition) = match kind {
        DeadlineKind::FirstMove { player } => {
            let result = GameResult {
                outcome: None,
                scores: state.position().scores(),
                termination: Termination::Aborted,
                ended_by: Some(player),
                ratings: None,
            };
            ended(state, GameStatus::Aborted, result, deadline.at, Vec::new())
        }
        DeadlineKind::Flag { player } => {
            let mut state = state;
            state.edit(|info| {
                if let Some(clock) = info.clock.as_mut() {
                    clock.remaining[player] = Duration::ZERO;
                }
            });
            let result = GameResult {
                outcome: Some(Outcome::Decisive {
                    winner: player.other(),
                }),
                scores: state.position().scores(),
                termination: Termination::Timeout,
                ended_by: Some(player),
                ratings: None,
            };
            // The game ends at the deadline, whenever the server got to it.
            ended(state, GameStatus::Finished, result, deadline.at, Vec::new())
        }
        DeadlineKind::RematchWindow => {
            let mut state = state;
            state.edit(|info| {
                info.rematch.open_until = None;
                info.rematch.offered_by = None;
                info.updated = now;
            });
            (
                state,
                Transition {
                    game_events: vec![GameEventKind::Rematch {
                        by: None,
                        action: RematchAction::Expired,
                    }],
                    lobby_events: Vec::new(),
                    output: (),
                },
            )
        }
    };
    Ok((
        state,
        Transition {
            game_events: transition.game_events,
            lobby_events: transition.lobby_events,
            output: kind,
        },
    ))
}

/// After a server restart, resumes the turn of an active game's player to move at `now`: the
/// outage is not charged to anyone, but the part of the turn that ran while the last server
/// was `alive` is. That holds for a clock, and for the abandonment time of an untimed game,
/// which its turn's start measures too (an outage longer than it let the opponent claim the
/// win at once). The turn's start moves later by the outage (`alive` to `now`), so the player
/// has what they had left when that server died, and a deadline that passed before it falls
/// at once. Without `alive` (unknown), or with a turn that started after it, the turn starts
/// again at `now` with the time the player had when it started.
///
/// # Errors
///
/// [`GameError::NotDue`] if the game is not active.
pub fn resume_clock(
    mut state: GameState,
    now: SystemTime,
    alive: Option<SystemTime>,
) -> Decided<()> {
    if state.info().status != GameStatus::Active {
        return Err(GameError::NotDue);
    }
    let used = match (state.info().turn_started, alive) {
        (Some(started), Some(alive)) if alive <= now => {
            alive.duration_since(started).unwrap_or_default()
        }
        _ => Duration::ZERO,
    };
    let started = now.checked_sub(used).unwrap_or(now);
    state.edit(|info| info.turn_started = Some(started));
    let position = *state.position();
    let event = GameEventKind::TurnStarted {
        player: position.to_move(),
        ply: position.ply(),
        refill: None,
        clock: timing::reading(state.info(), now),
    };
    Ok((
        state,
        Transition {
            game_events: vec![event],
            lobby_events: Vec::new(),
            output: (),
        },
    ))
}

/// Claims the win of an untimed game whose player to move, the claimer's opponent, has not
/// moved for `abandon_after`. If that player has not made a first move, the game is aborted
/// instead, with them as `ended_by`.
///
/// # Errors
///
/// [`GameError::WrongToken`], [`GameError::GameNotStarted`], [`GameError::GameOver`],
/// [`GameError::CannotClaim`] if it is the claimer's turn, the game is timed, or the time has
/// not passed.
pub fn claim_victory(
    state: GameState,
    token: &TokenHash,
    abandon_after: Duration,
    now: SystemTime,
) -> Decided<()> {
    let seat = state.seat_of(token).ok_or(GameError::WrongToken)?;
    active(&state)?;
    let info = state.info();
    if info.time_control.is_timed() {
        return Err(GameError::CannotClaim(
            "this game is timed: it ends on its own when the clock of the player to move runs out"
                .to_owned(),
        ));
    }
    let to_move = state.position().to_move();
    if to_move == seat {
        return Err(GameError::CannotClaim(
            "it is your turn: only the player waiting for a move can claim".to_owned(),
        ));
    }
    let since = info.turn_started.unwrap_or(info.updated);
    let waited = now.duration_since(since).unwrap_or_default();
    if waited < abandon_after {
        return Err(GameError::CannotClaim(format!(
            "your opponent has had the move for {}; you can claim the win once they have not \
             moved for {} (in {})",
            clock::format_duration(round_secs(waited)),
            clock::format_duration(abandon_after),
            // Up: a client that waits as long as it is told must not be refused again.
            clock::format_duration(ceil_secs(abandon_after - waited)),
        )));
    }
    if timing::is_first_move(info) {
        // As a timed game's missed first move: a game its opponent never played counts for
        // nobody (an outside probe won by claim a game nobody had moved in, and the win counted
        // in both records).
        let result = GameResult {
            outcome: None,
            scores: state.position().scores(),
            termination: Termination::Aborted,
            ended_by: Some(to_move),
            ratings: None,
        };
        return Ok(ended(state, GameStatus::Aborted, result, now, Vec::new()));
    }
    let result = GameResult {
        outcome: Some(Outcome::Decisive { winner: seat }),
        scores: state.position().scores(),
        termination: Termination::Abandonment,
        ended_by: Some(to_move),
        ratings: None,
    };
    Ok(ended(state, GameStatus::Finished, result, now, Vec::new()))
}

fn round_secs(d: Duration) -> Duration {
    Duration::from_secs(d.as_secs())
}

/// `d` in whole seconds, rounded up.
fn ceil_secs(d: Duration) -> Duration {
    Duration::from_secs(d.as_secs() + u64::from(d.subsec_nanos() > 0))
}

/// Offers a draw for the token's seat, or accepts the opponent's standing offer (the game is
/// drawn by agreement). One offer per player per move: a second offer before the player's next
/// move is refused, unless the first still stands (then nothing changes).
///
/// # Errors
///
/// [`GameError::WrongToken`], [`GameError::GameNotStarted`], [`GameError::GameOver`] (also
/// once the player to move is out of time), [`GameError::CannotOffer`] for a second offer on
/// the same move, or to the computer.
pub fn offer_draw(state: GameState, token: &TokenHash, now: SystemTime) -> Decided<DrawAction> {
    let seat = state.seat_of(token).ok_or(GameError::WrongToken)?;
    active(&state)?;
    before_deadline(&state, now)?;
    let info = state.info();
    if info.draw_offer == Some(seat.other()) {
        let result = GameResult {
            outcome: Some(Outcome::Draw),
            scores: state.position().scores(),
            termination: Termination::Agreement,
            ended_by: None,
            ratings: None,
        };
        let accepted = GameEventKind::Draw {
            by: seat,
            action: DrawAction::Accepted,
        };
        let (state, transition) = ended(state, GameStatus::Finished, result, now, vec![accepted]);
        return Ok((state, with_output(transition, DrawAction::Accepted)));
    }
    if info.draw_offer == Some(seat) {
        return Ok((state, with_output(nothing(), DrawAction::Offered)));
    }
    // The computer never answers an offer: refused at once rather than left standing unheard.
    if let Some(PlayerKind::Computer { .. }) = info.seats[seat.other()].as_ref().map(|s| &s.kind) {
        return Err(GameError::CannotOffer(
            "the computer does not take draws: play on, or resign".to_owned(),
        ));
    }
    if info.last_draw_offer[seat] == Some(info.move_count) {
        return Err(GameError::CannotOffer(
            "you already offered a draw on this move and it was declined; offer again after your next move"
                .to_owned(),
        ));
    }
    let mut state = state;
    state.edit(|info| {
        info.draw_offer = Some(seat);
        info.last_draw_offer[seat] = Some(info.move_count);
        info.updated = now;
    });
    Ok((
        state,
        Transition {
            game_events: vec![GameEventKind::Draw {
                by: seat,
                action: DrawAction::Offered,
            }],
            lobby_events: Vec::new(),
            output: DrawAction::Offered,
        },
    ))
}

/// Declines the opponent's standing draw offer.
///
/// # Errors
///
/// [`GameError::WrongToken`], [`GameError::GameNotStarted`], [`GameError::GameOver`] (also
/// once the player to move is out of time), [`GameError::NoOffer`] if no offer of the
/// opponent stands.
pub fn decline_draw(mut state: GameState, token: &TokenHash, now: SystemTime) -> Decided<()> {
    let seat = state.seat_of(token).ok_or(GameError::WrongToken)?;
    active(&state)?;
    before_deadline(&state, now)?;
    if state.info().draw_offer != Some(seat.other()) {
        return Err(GameError::NoOffer(
            "your opponent has no draw offer standing",
        ));
    }
    state.edit(|info| {
        info.draw_offer = None;
        info.updated = now;
    });
    Ok((
        state,
        Transition {
            game_events: vec![GameEventKind::Draw {
                by: seat,
                action: DrawAction::Declined,
            }],
            lobby_events: Vec::new(),
            output: (),
        },
    ))
}

/// `seat`'s account as a rematch shows it: with the rating `result` left it, not the one it
/// had when the finished game began (that game's rating change is already committed).
fn rated_after(
    account: Option<SeatAccount>,
    seat: Player,
    result: Option<GameResult>,
) -> Option<SeatAccount> {
    let mut account = account?;
    if let Some(change) = result.and_then(|r| r.ratings) {
        account.rating = Some(change[seat].after);
        account.provisional = change[seat].provisional;
    }
    Some(account)
}

/// What an offer of a rematch did.
#[derive(Debug, Clone)]
pub enum RematchOffer {
    /// The offer stands; the opponent has not asked yet.
    Offered,
    /// Both asked (or the opponent is the computer): the new game, to create.
    Started(Box<(GameState, Transition<()>)>),
}

/// Offers a rematch of a finished game for the token's seat, keeping `next_token` as the hash
/// of the token the player will have in it. When the opponent has offered too (or is the
/// computer), the rematch is created as `next_id`: seats swapped, the same rules, start and
/// time control; this game links to it and its log ends.
///
/// # Errors
///
/// [`GameError::WrongToken`], [`GameError::RematchUnavailable`] if the game is not finished,
/// the window closed, or the rematch was declined or already started.
pub fn offer_rematch(
    mut state: GameState,
    token: &TokenHash,
    next_token: TokenHash,
    next_id: GameId,
    policy: &TimePolicy,
    now: SystemTime,
) -> Decided<RematchOffer> {
    let seat = state.seat_of(token).ok_or(GameError::WrongToken)?;
    rematch_open(&state, now)?;
    let opponent = seat.other();
    let opponent_seat =
        state.info().seats[opponent]
            .clone()
            .ok_or(GameError::RematchUnavailable(
                "the game has no opponent".to_owned(),
            ))?;
    state.set_rematch_token(seat, next_token);
    let pairs = match opponent_seat.kind {
        PlayerKind::Computer { .. } => true,
        PlayerKind::Human => state.info().rematch.offered_by == Some(opponent),
    };
    if !pairs {
        // A repeated offer replaces the token kept from the first, and is announced again.
        state.edit(|info| {
            info.rematch.offered_by = Some(seat);
            info.updated = now;
        });
        return Ok((
            state,
            Transition {
                game_events: vec![GameEventKind::Rematch {
                    by: Some(seat),
                    action: RematchAction::Offered,
                }],
                lobby_events: Vec::new(),
                output: RematchOffer::Offered,
            },
        ));
    }
    // Seats swap: whoever played first now plays second.
    let info = state.info();
    let me = info.seats[seat].clone().ok_or(GameError::WrongToken)?;
    let opponent_entry = match opponent_seat.kind {
        PlayerKind::Computer { level } => Opponent::Computer(level),
        PlayerKind::Human => Opponent::Human {
            display_name: opponent_seat.display_name.clone(),
            token: state.rematch_tokens()[opponent].ok_or(GameError::RematchUnavailable(
                "your opponent's offer has no token; offer again".to_owned(),
            ))?,
            account: rated_after(opponent_seat.account.clone(), opponent, info.result),
        },
    };
    let next = create(
        Create {
            id: next_id.clone(),
            rules: info.rules,
            preset: info.preset,
            start: info.start,
            seat: seat.other(),
            display_name: me.display_name,
            token: next_token,
            opponent: opponent_entry,
            creator: state.creator(),
            time_control: info.time_control,
            policy: TimePolicy {
                first_move: info.clock.map_or(policy.first_move, |c| c.first_move),
                ..*policy
            },
            rematch_of: Some(info.id.clone()),
            account: rated_after(me.account, seat, info.result),
            rated: info.rated,
        },
        now,
    );
    state.edit(|info| {
        info.rematch.next = Some(next_id.clone());
        info.rematch.offered_by = None;
        info.rematch.open_until = None;
        info.updated = now;
    });
    Ok((
        state,
        Transition {
            game_events: vec![GameEventKind::Rematch {
                by: None,
                action: RematchAction::Started { game_id: next_id },
            }],
            lobby_events: Vec::new(),
            output: RematchOffer::Started(Box::new(next)),
        },
    ))
}

/// Declines a rematch (the opponent's offer, or any before it is made): the window closes.
///
/// # Errors
///
/// [`GameError::WrongToken`], [`GameError::RematchUnavailable`].
pub fn decline_rematch(mut state: GameState, token: &TokenHash, now: SystemTime) -> Decided<()> {
    let seat = state.seat_of(token).ok_or(GameError::WrongToken)?;
    rematch_open(&state, now)?;
    state.edit(|info| {
        info.rematch.offered_by = None;
        info.rematch.open_until = None;
        info.updated = now;
    });
    Ok((
        state,
        Transition {
            game_events: vec![GameEventKind::Rematch {
                by: Some(seat),
                action: RematchAction::Declined,
            }],
            lobby_events: Vec::new(),
            output: (),
        },
    ))
}

fn rematch_open(state: &GameState, now: SystemTime) -> Result<(), GameError> {
    let info = state.info();
    match info.status {
        GameStatus::Finished => {}
        GameStatus::Aborted => {
            return Err(GameError::RematchUnavailable(
                "the game was aborted; create a new one".to_owned(),
            ));
        }
        GameStatus::WaitingForPlayers | GameStatus::Active => {
            return Err(GameError::RematchUnavailable(
                "the game is not over yet".to_owned(),
            ));
        }
    }
    if let Some(next) = &info.rematch.next {
        return Err(GameError::RematchUnavailable(format!(
            "the rematch has started: game {next}"
        )));
    }
    match info.rematch.open_until {
        Some(until) if now < until => Ok(()),
        _ => Err(GameError::RematchUnavailable(
            "no rematch can be offered any more (declined, or the time to offer one has passed)"
                .to_owned(),
        )),
    }
}

/// A game whose player to move is out of time (or missed their first move) ended at that
/// deadline, whether or not the timekeeper has applied it yet: refusing every other command
/// keeps a draw agreed, a resignation or an expiry after a flag from changing the result.
fn before_deadline(state: &GameState, now: SystemTime) -> Result<(), GameError> {
    match timing::deadline(state.info()) {
        Some(deadline) if state.info().status == GameStatus::Active && now >= deadline.at => {
            Err(GameError::GameOver)
        }
        _ => Ok(()),
    }
}

fn active(state: &GameState) -> Result<(), GameError> {
    match state.info().status {
        GameStatus::WaitingForPlayers => Err(GameError::GameNotStarted),
        GameStatus::Finished | GameStatus::Aborted => Err(GameError::GameOver),
        GameStatus::Active => Ok(()),
    }
}

fn nothing() -> Transition<()> {
    Transition {
        game_events: Vec::new(),
        lobby_events: Vec::new(),
        output: (),
    }
}

fn with_output<T>(transition: Transition<()>, output: T) -> Transition<T> {
    Transition {
        game_events: transition.game_events,
        lobby_events: transition.lobby_events,
        output,
    }
}

/// Seats the opponent (the computer, or a paired person) in `seat` of a game being created and
/// starts it, with the events of a person joining.
fn seat_opponent(
    info: &mut GameInfo,
    seat: Player,
    (display_name, account): (String, Option<SeatAccount>),
    kind: PlayerKind,
    now: SystemTime,
    game_events: &mut Vec<GameEventKind>,
    lobby_events: &mut Vec<LobbyEventKind>,
) {
    info.seats[seat] = Some(SeatInfo {
        display_name: display_name.clone(),
        kind,
        account,
    });
    info.status = GameStatus::Active;
    info.turn_started = Some(now);
    game_events.extend([
        GameEventKind::PlayerJoined {
            seat,
            display_name: display_name.clone(),
            kind,
        },
        GameEventKind::GameStarted {
            game: Box::new(info.clone()),
        },
        GameEventKind::TurnStarted {
            player: info.position.to_move(),
            ply: info.position.ply(),
            refill: None,
            clock: timing::reading(info, now),
        },
    ]);
    if kind == PlayerKind::Human {
        lobby_events.push(LobbyEventKind::SeatTaken {
            game_id: info.id.clone(),
            seat,
            display_name,
        });
    }
    lobby_events.push(LobbyEventKind::GameStarted {
        game_id: info.id.clone(),
    });
}

/// The change that ends a game by a decision outside the rules (resignation, abort, expiry,
/// time, agreement, abandonment), after `before` events.
fn ended(
    mut state: GameState,
    status: GameStatus,
    result: GameResult,
    now: SystemTime,
    before: Vec<GameEventKind>,
) -> (GameState, Transition<()>) {
    state.edit(|info| info.updated = info.updated.max(now));
    let (mut game_events, mut lobby_events) = (before, Vec::new());
    finish(
        &mut state,
        status,
        result,
        now,
        &mut game_events,
        &mut lobby_events,
    );
    (
        state,
        Transition {
            game_events,
            lobby_events,
            output: (),
        },
    )
}

/// The rematch window a game gets when it ends: set later by the manager from its policy (a
/// transition does not know it), so a finished game starts with none.
fn finish(
    state: &mut GameState,
    status: GameStatus,
    result: GameResult,
    now: SystemTime,
    game_events: &mut Vec<GameEventKind>,
    lobby_events: &mut Vec<LobbyEventKind>,
) {
    state.edit(|info| {
        info.status = status;
        info.result = Some(result);
        info.draw_offer = None;
        if let (Some(clock), Some(started), GameStatus::Active | GameStatus::Finished) =
            (info.clock.as_mut(), info.turn_started, status)
        {
            // The mover's time is charged up to the end (not during the first moves).
            if info.move_count >= 2 && result.termination != Termination::Timeout {
                let player = info.position.to_move();
                let spent = now.duration_since(started).unwrap_or_default();
                if !info.position.is_over() {
                    clock.remaining[player] = clock.remaining[player].saturating_sub(spent);
                }
            }
        }
        info.turn_started = None;
    });
    game_events.push(GameEventKind::GameOver {
        result,
        clock: timing::reading(state.info(), now),
        rematch_until: None,
    });
    lobby_events.push(LobbyEventKind::GameFinished {
        game_id: state.info().id.clone(),
        result,
    });
}

/// Opens the rematch window of a game that has just finished, until `until`: the manager calls
/// it on the result of any transition that finished a game with two seats.
pub fn open_rematch_window(
    state: &mut GameState,
    transition: &mut Transition<impl Sized>,
    until: SystemTime,
) {
    if state.info().status != GameStatus::Finished || state.info().rematch.open_until.is_some() {
        return;
    }
    let ended_now = transition
        .game_events
        .iter()
        .any(|e| matches!(e, GameEventKind::GameOver { .. }));
    if !ended_now {
        return;
    }
    state.edit(|info| info.rematch.open_until = Some(until));
    for event in &mut transition.game_events {
        if let GameEventKind::GameOver { rematch_until, .. } = event {
            *rematch_until = Some(until);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use oanquan_rules::Game;
    use proptest::prelude::*;

    use super::*;
    use crate::model::{PlayedMove, RestoreError};
    use crate::token::PlayerToken;

    const T0: SystemTime = SystemTime::UNIX_EPOCH;

    fn at(seconds: u64) -> SystemTime {
        T0 + Duration::from_secs(seconds)
    }

    fn created(seat: Player, computer: Option<Level>) -> (GameState, Transition<()>, TokenHash) {
        created_timed(seat, computer, TimeControl::Untimed)
    }

    fn created_timed(
        seat: Player,
        computer: Option<Level>,
        time_control: TimeControl,
    ) -> (GameState, Transition<()>, TokenHash) {
        created_with(seat, computer, time_control, TimePolicy::default())
    }

    fn created_with(
        seat: Player,
        computer: Option<Level>,
        time_control: TimeControl,
        policy: TimePolicy,
    ) -> (GameState, Transition<()>, TokenHash) {
        let token = PlayerToken::generate().hash();
        let rules = Preset::Standard.rules();
        let (state, transition) = create(
            Create {
                id: GameId::parse("g1").unwrap(),
                rules,
                preset: Some(Preset::Standard),
                start: Position::new(rules).unwrap(),
                seat,
                display_name: "Lan".to_owned(),
                token,
                opponent: computer.map_or(Opponent::Wait, Opponent::Computer),
                creator: None,
                time_control,
                policy,
                rematch_of: None,
                account: None,
                rated: false,
            },
            at(0),
        );
        (state, transition, token)
    }

    #[test]
    fn a_second_player_starts_the_game_and_a_third_is_refused() {
        let (state, _, _) = created(Player::First, None);
        let joiner = PlayerToken::generate().hash();
        let (state, joined) = join(state, "Minh", joiner, None, at(1)).unwrap();
        assert_eq!(joined.output, Player::Second);
        assert_eq!(state.info().status, GameStatus::Active);
        assert_eq!(state.seat_of(&joiner), Some(Player::Second));
        assert_eq!(state.info().updated, at(1));
        let third = join(state, "Hoa", PlayerToken::generate().hash(), None, at(2));
        assert!(matches!(third, Err(GameError::SeatTaken(_))));
    }

    #[test]
    fn a_move_needs_the_right_token_turn_and_ply() {
        let (state, _, first) = created(Player::First, None);
        let second = PlayerToken::generate().hash();
        let (state, _) = join(state, "Minh", second, None, at(1)).unwrap();
        let mv = state.info().position.legal_moves()[0];
        let stranger = PlayerToken::generate().hash();
        assert_eq!(
            play(state.clone(), Mover::Token(stranger), mv, None, at(2)).unwrap_err(),
            GameError::WrongToken
        );
        assert_eq!(
            play(state.clone(), Mover::Token(second), mv, None, at(2)).unwrap_err(),
            GameError::NotYourTurn {
                to_move: Player::First
            }
        );
        assert_eq!(
            play(state.clone(), Mover::Token(first), mv, Some(3), at(2)).unwrap_err(),
            GameError::StalePly {
                expected: 3,
                current: 0
            }
        );
        assert_eq!(
            play(state.clone(), Mover::Computer, mv, None, at(2)).unwrap_err(),
            GameError::NotYourTurn {
                to_move: Player::First
            }
        );
        let (after, played) = play(state, Mover::Token(first), mv, Some(0), at(2)).unwrap();
        assert_eq!(played.output.number, 1);
        assert_eq!(after.info().position, *after.engine().position());
        assert_eq!(after.moves().len(), 1);
    }

    #[test]
    fn a_computer_game_starts_at_once_and_only_the_computer_plays_its_turns() {
        let (state, created, _) = created(Player::Second, Some(Level::Random));
        assert_eq!(state.info().status, GameStatus::Active);
        assert!(
            created.lobby_events.len() == 2,
            "{:?}",
            created.lobby_events
        );
        let mv = state.info().position.legal_moves()[0];
        let (state, _) = play(state, Mover::Computer, mv, Some(0), at(1)).unwrap();
        let mv = state.info().position.legal_moves()[0];
        assert_eq!(
            play(state, Mover::Computer, mv, None, at(2)).unwrap_err(),
            GameError::NotYourTurn {
                to_move: Player::Second
            }
        );
    }

    #[test]
    fn the_summary_position_is_the_engines_whatever_a_transition_writes_into_it() {
        let (mut state, _, _) = created(Player::First, None);
        let (moved, _) = Position::new(Preset::Standard.rules())
            .unwrap()
            .play(state.position().legal_moves()[0])
            .unwrap();
        state.edit(|info| {
            info.position = moved;
            info.move_count = 7;
        });
        assert_eq!(state.info().position, *state.engine().position());
        assert_eq!(state.info().move_count, 0);
    }

    #[test]
    fn a_stored_move_by_the_wrong_player_or_against_the_rules_does_not_restore() {
        let (state, _, _) = created(Player::First, None);
        let start = state.info().start;
        let mut info = state.info().clone();
        info.move_count = 1;
        let restore = |player, mv| {
            GameState::restore(
                info.clone(),
                *state.token_hashes(),
                ByPlayer::default(),
                [PlayedMove {
                    player,
                    mv,
                    time: T0,
                }],
                None,
                None,
            )
        };
        let legal = start.legal_moves()[0];
        assert_eq!(
            restore(Player::Second, legal).unwrap_err(),
            RestoreError::WrongPlayer { number: 1 }
        );
        let illegal = (0..12u8)
            .flat_map(|square| [format!("{square}+"), format!("{square}-")])
            .filter_map(|text| text.parse::<Move>().ok())
            .find(|mv| !start.legal_moves().contains(mv))
            .unwrap();
        assert!(matches!(
            restore(Player::First, illegal),
            Err(RestoreError::IllegalMove { number: 1, .. })
        ));
        let restored = restore(Player::First, legal).unwrap();
        assert_eq!(restored.info().move_count, 1);
        assert_eq!(restored.moves().len(), 1);
    }

    #[test]
    fn only_a_game_idle_since_before_the_cutoff_expires() {
        let (state, _, _) = created(Player::First, None);
        assert_eq!(
            expire(state.clone(), at(0), at(5)).unwrap_err(),
            GameError::GameOver
        );
        let (state, expired) = expire(state, at(1), at(5)).unwrap();
        assert_eq!(state.info().status, GameStatus::Aborted);
        assert_eq!(state.info().result.unwrap().ended_by, None);
        assert_eq!(expired.lobby_events.len(), 1);
        assert_eq!(
            expire(state, at(9), at(10)).unwrap_err(),
            GameError::GameOver
        );
    }

    /// A command of the property test; seats are 0 or 1 (first or second).
    #[derive(Debug, Clone, Copy)]
    enum Command {
        Join,
        /// A legal move for the player to move, with their token.
        Move {
            index: usize,
        },
        /// Any move by either seat, legal or not.
        Play {
            seat: usize,
            square: u8,
            right: bool,
            stale: bool,
        },
        Computer {
            index: usize,
        },
        Resign {
            seat: usize,
        },
        Abort {
            seat: usize,
        },
        Expire {
            idle: bool,
        },
        ApplyDeadline,
        OfferDraw {
            seat: usize,
        },
        DeclineDraw {
            seat: usize,
        },
        ClaimVictory {
            seat: usize,
        },
        OfferRematch {
            seat: usize,
        },
        DeclineRematch {
            seat: usize,
        },
    }

    fn command() -> impl Strategy<Value = Command> {
        let seat = || 0..2usize;
        prop_oneof![
            2 => Just(Command::Join),
            12 => (0..16usize).prop_map(|index| Command::Move { index }),
            4 => (seat(), 0..12u8, any::<bool>(), proptest::bool::weighted(0.1))
                .prop_map(|(seat, square, right, stale)| Command::Play { seat, square, right, stale }),
            3 => (0..16usize).prop_map(|index| Command::Computer { index }),
            1 => seat().prop_map(|seat| Command::Resign { seat }),
            1 => seat().prop_map(|seat| Command::Abort { seat }),
            1 => any::<bool>().prop_map(|idle| Command::Expire { idle }),
            2 => Just(Command::ApplyDeadline),
            2 => seat().prop_map(|seat| Command::OfferDraw { seat }),
            1 => seat().prop_map(|seat| Command::DeclineDraw { seat }),
            1 => seat().prop_map(|seat| Command::ClaimVictory { seat }),
            2 => seat().prop_map(|seat| Command::OfferRematch { seat }),
            1 => seat().prop_map(|seat| Command::DeclineRematch { seat }),
        ]
    }

    /// Short enough for a few dozen commands to reach every deadline and claim.
    const POLICY: TimePolicy = TimePolicy {
        first_move: Duration::from_secs(5),
        abandon_after: Duration::from_secs(15),
        rematch_window: Duration::from_secs(20),
    };

    fn time_control() -> impl Strategy<Value = TimeControl> {
        prop_oneof![
            Just(TimeControl::Untimed),
            (1..=20u64, 0..=3u64).prop_map(|(initial, increment)| TimeControl::real_time(
                Duration::from_secs(initial),
                Duration::from_secs(increment)
            )
            .unwrap()),
        ]
    }

    /// Time between two commands: mostly a quick move, sometimes a long think.
    fn pause() -> impl Strategy<Value = Duration> {
        prop_oneof![
            6 => (0..1_500u64).prop_map(Duration::from_millis),
            1 => (0..20_000u64).prop_map(Duration::from_millis),
        ]
    }

    /// What the events say the game is, rebuilt from them alone.
    #[derive(Debug, Default)]
    struct Replayed {
        seats: ByPlayer<Option<SeatInfo>>,
        started: bool,
        position: Option<Position>,
        move_count: u32,
        result: Option<GameResult>,
        draw_offer: Option<Player>,
        /// The clocks of the last reading.
        remaining: Option<ByPlayer<Duration>>,
        rematch: Rematch,
        /// A final event was seen: nothing may follow.
        closed: bool,
    }

    impl Replayed {
        fn apply(&mut self, event: &GameEventKind) {
            assert!(!self.closed, "an event after the last one: {event:?}");
            match event {
                GameEventKind::PlayerJoined {
                    seat,
                    display_name,
                    kind,
                } => {
                    assert!(self.seats[*seat].is_none(), "a seat is taken twice");
                    self.seats[*seat] = Some(SeatInfo {
                        display_name: display_name.clone(),
                        kind: *kind,
                        account: None,
                    });
                }
                GameEventKind::GameStarted { .. } => self.started = true,
                GameEventKind::MovePlayed { record, clock } => {
                    self.move_count += 1;
                    assert_eq!(record.number, self.move_count);
                    self.position = Some(record.position);
                    // An offer stands until the offerer's opponent moves.
                    if self.draw_offer == Some(record.player.other()) {
                        self.draw_offer = None;
                    }
                    self.read(*clock);
                }
                GameEventKind::TurnStarted { clock, .. } => self.read(*clock),
                GameEventKind::GameOver {
                    result,
                    clock,
                    rematch_until,
                } => {
                    assert!(self.result.is_none(), "a game ends twice");
                    self.result = Some(*result);
                    self.draw_offer = None;
                    self.read(*clock);
                    self.rematch.open_until = *rematch_until;
                }
                GameEventKind::Draw { by, action } => {
                    self.draw_offer = match action {
                        DrawAction::Offered => Some(*by),
                        DrawAction::Declined | DrawAction::Accepted => None,
                    };
                }
                GameEventKind::Rematch { by, action } => match action {
                    RematchAction::Offered => self.rematch.offered_by = *by,
                    RematchAction::Declined | RematchAction::Expired => {
                        self.rematch.offered_by = None;
                        self.rematch.open_until = None;
                    }
                    RematchAction::Started { game_id } => {
                        self.rematch.next = Some(game_id.clone());
                        self.rematch.offered_by = None;
                        self.rematch.open_until = None;
                    }
                },
            }
            self.closed = crate::watch::Sequenced::is_final(&crate::model::GameEvent {
                game_id: GameId::parse("g1").unwrap(),
                sequence: 1,
                time: T0,
                kind: event.clone(),
            });
        }

        fn read(&mut self, clock: Option<clock::ClockReading>) {
            if let Some(reading) = clock {
                self.remaining = Some(reading.remaining);
            }
        }
    }

    fn check_invariants(state: &GameState) {
        let info = state.info();
        assert_eq!(info.position, *state.engine().position());
        assert_eq!(info.move_count as usize, state.moves().len());
        assert_eq!(
            state.moves().last().map(|m| m.position),
            (info.move_count > 0).then_some(info.position)
        );
        assert_eq!(info.status.is_over(), info.result.is_some());
        let seated = Player::ALL
            .into_iter()
            .filter(|&p| info.seats[p].is_some())
            .count();
        match info.status {
            GameStatus::WaitingForPlayers => assert_eq!(seated, 1),
            GameStatus::Active => assert_eq!(seated, 2),
            GameStatus::Finished | GameStatus::Aborted => {}
        }
        if let Some(GameResult {
            termination: Termination::Rules(_),
            ..
        }) = info.result
        {
            assert!(info.position.is_over());
        }
        for player in Player::ALL {
            let human = matches!(
                info.seats[player],
                Some(SeatInfo {
                    kind: PlayerKind::Human,
                    ..
                })
            );
            assert_eq!(human, state.token_hashes()[player].is_some());
        }
        // Time: a timed game has a clock, an active one a running turn and so a deadline.
        assert_eq!(info.time_control.is_timed(), info.clock.is_some());
        assert_eq!(
            info.turn_started.is_some(),
            info.status == GameStatus::Active
        );
        if info.status == GameStatus::Active && info.time_control.is_timed() {
            assert!(timing::deadline(info).is_some());
        }
        if let (TimeControl::RealTime { initial, increment }, Some(clock)) =
            (info.time_control, info.clock)
        {
            for player in Player::ALL {
                let moves = state.moves().iter().filter(|m| m.player == player).count();
                let most = initial + increment * u32::try_from(moves).unwrap();
                assert!(clock.remaining[player] <= most, "{player:?} gained time");
            }
        }
        // Offers: a draw only while playing, a rematch only after a finish.
        assert!(info.draw_offer.is_none() || info.status == GameStatus::Active);
        if info.status != GameStatus::Finished {
            let unfinished = Rematch {
                of: info.rematch.of.clone(),
                ..Rematch::default()
            };
            assert_eq!(info.rematch, unfinished);
        }
        if info.rematch.offered_by.is_some() {
            assert!(info.rematch.open_until.is_some());
        }
    }

    /// A finished game with what may still change of it blanked out.
    fn without_rematch(info: &GameInfo) -> GameInfo {
        GameInfo {
            rematch: Rematch::default(),
            updated: T0,
            ..info.clone()
        }
    }

    /// A rematch `next` that `offerer` started from `old`: the seats swapped, the same game
    /// otherwise, each player with the token of their offer.
    fn check_rematch(
        old: &GameState,
        offerer: Player,
        next: &GameState,
        rematch_tokens: &ByPlayer<Option<TokenHash>>,
    ) {
        check_invariants(next);
        let (old_info, info) = (old.info(), next.info());
        assert_eq!(info.status, GameStatus::Active);
        assert_eq!(info.rematch.of.as_ref(), Some(&old_info.id));
        assert_eq!(old_info.rematch.next.as_ref(), Some(&info.id));
        assert_eq!(
            (info.rules, info.start, info.time_control),
            (old_info.rules, old_info.start, old_info.time_control)
        );
        assert_eq!(info.move_count, 0);
        for player in Player::ALL {
            assert_eq!(info.seats[player], old_info.seats[player.other()]);
        }
        assert_eq!(
            next.token_hashes()[offerer.other()],
            rematch_tokens[offerer]
        );
        if old.token_hashes()[offerer.other()].is_some() {
            assert_eq!(
                next.token_hashes()[offerer],
                rematch_tokens[offerer.other()]
            );
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// Any sequence of commands, at any pace, keeps the invariants, a refused command
        /// changes nothing (it returns no state), a game over changes only in its rematch, and
        /// the events of the accepted ones rebuild the game.
        #[test]
        fn any_sequence_of_commands_keeps_the_invariants_and_the_events_rebuild_the_game(
            creator in 0..2usize,
            computer in any::<bool>(),
            time_control in time_control(),
            commands in proptest::collection::vec((pause(), command()), 0..80),
        ) {
            let seat = Player::ALL[creator];
            let (mut state, created, creator_token) =
                created_with(seat, computer.then_some(Level::Random), time_control, POLICY);
            let mut tokens: ByPlayer<Option<TokenHash>> = ByPlayer::default();
            tokens[seat] = Some(creator_token);
            let mut rematch_tokens: ByPlayer<Option<TokenHash>> = ByPlayer::default();
            let mut replayed = Replayed::default();
            created.game_events.iter().for_each(|e| replayed.apply(e));
            check_invariants(&state);
            let mut now = at(1);
            for (pause, command) in commands {
                now += pause;
                // The manager's step after each transition: a game just finished gets a window.
                let until = now + POLICY.rematch_window;
                let token_of = |tokens: &ByPlayer<Option<TokenHash>>, seat: usize| {
                    tokens[Player::ALL[seat]].unwrap_or_else(|| PlayerToken::generate().hash())
                };
                let before = state.clone();
                let mut applied = None;
                let mut rematch = None;
                let decided: Result<(GameState, Vec<GameEventKind>), GameError> = match command {
                    Command::Join => {
                        let token = PlayerToken::generate().hash();
                        settle(join(state.clone(), "Minh", token, None, now), until).map(|(s, e, seat)| {
                            tokens[seat] = Some(token);
                            (s, e)
                        })
                    }
                    Command::Play { seat, square, right, stale } => {
                        let text = format!("{square}{}", if right { '+' } else { '-' });
                        let Ok(mv) = text.parse::<Move>() else { continue };
                        let ply = state.info().position.ply() + u32::from(stale);
                        let mover = Mover::Token(token_of(&tokens, seat));
                        settle(play(state.clone(), mover, mv, Some(ply), now), until)
                            .map(|(s, e, _)| (s, e))
                    }
                    Command::Move { index } => {
                        let legal = state.info().position.legal_moves();
                        if legal.is_empty() { continue; }
                        let mv = legal[index % legal.len()];
                        let to_move = state.info().position.to_move();
                        let mover = Mover::Token(token_of(&tokens, usize::from(to_move == Player::Second)));
                        settle(play(state.clone(), mover, mv, None, now), until)
                            .map(|(s, e, _)| (s, e))
                    }
                    Command::Computer { index } => {
                        let legal = state.info().position.legal_moves();
                        if legal.is_empty() { continue; }
                        let mv = legal[index % legal.len()];
                        settle(play(state.clone(), Mover::Computer, mv, None, now), until)
                            .map(|(s, e, _)| (s, e))
                    }
                    Command::Resign { seat } => {
                        settle(resign(state.clone(), &token_of(&tokens, seat), now), until)
                            .map(|(s, e, ())| (s, e))
                    }
                    Command::Abort { seat } => {
                        settle(abort(state.clone(), &token_of(&tokens, seat), now), until)
                            .map(|(s, e, ())| (s, e))
                    }
                    Command::Expire { idle } => {
                        let cutoff = if idle { now } else { state.info().updated };
                        settle(expire(state.clone(), cutoff, now), until).map(|(s, e, ())| (s, e))
                    }
                    Command::ApplyDeadline => {
                        settle(apply_deadline(state.clone(), now), until).map(|(s, e, kind)| {
                            applied = Some(kind);
                            (s, e)
                        })
                    }
                    Command::OfferDraw { seat } => {
                        settle(offer_draw(state.clone(), &token_of(&tokens, seat), now), until)
                            .map(|(s, e, _)| (s, e))
                    }
                    Command::DeclineDraw { seat } => {
                        settle(decline_draw(state.clone(), &token_of(&tokens, seat), now), until)
                            .map(|(s, e, ())| (s, e))
                    }
                    Command::ClaimVictory { seat } => {
                        let token = token_of(&tokens, seat);
                        settle(claim_victory(state.clone(), &token, POLICY.abandon_after, now), until)
                            .map(|(s, e, ())| (s, e))
                    }
                    Command::OfferRematch { seat } => {
                        let next_token = PlayerToken::generate().hash();
                        let next_id = GameId::parse("g2").unwrap();
                        let token = token_of(&tokens, seat);
                        settle(
                            offer_rematch(state.clone(), &token, next_token, next_id, &POLICY, now),
                            until,
                        )
                        .map(|(s, e, offer)| {
                            let offerer = Player::ALL[seat];
                            rematch_tokens[offerer] = Some(next_token);
                            if let RematchOffer::Started(next) = offer {
                                rematch = Some((offerer, next.0));
                            }
                            (s, e)
                        })
                    }
                    Command::DeclineRematch { seat } => {
                        settle(decline_rematch(state.clone(), &token_of(&tokens, seat), now), until)
                            .map(|(s, e, ())| (s, e))
                    }
                };
                if let Ok((next, events)) = decided {
                    // Once the player to move is out of time, the game ended at that deadline
                    // whether or not it was applied yet: nothing else may happen to it.
                    let due = timing::deadline(before.info())
                        .filter(|d| before.info().status == GameStatus::Active && now >= d.at);
                    if let Some(due) = due {
                        prop_assert_eq!(
                            applied, Some(due.kind),
                            "{:?} accepted after the deadline", command
                        );
                    }
                    if before.info().status.is_over() {
                        let rematch_command = matches!(
                            command,
                            Command::OfferRematch { .. } | Command::DeclineRematch { .. }
                        ) || applied == Some(DeadlineKind::RematchWindow);
                        prop_assert!(rematch_command, "a finished game changed: {:?}", command);
                        prop_assert_eq!(without_rematch(next.info()), without_rematch(before.info()));
                        prop_assert_eq!(next.token_hashes(), before.token_hashes());
                        prop_assert_eq!(next.moves(), before.moves());
                    }
                    if events.is_empty() {
                        // Only a repeated draw offer is accepted without saying anything.
                        prop_assert!(
                            matches!(command, Command::OfferDraw { .. }),
                            "an accepted command says what it did: {:?}", command
                        );
                        prop_assert_eq!(next.info(), before.info());
                    }
                    events.iter().for_each(|e| replayed.apply(e));
                    prop_assert_eq!(replayed.closed, next.info().log_closed());
                    state = next;
                    check_invariants(&state);
                    if let Some((offerer, next)) = rematch {
                        check_rematch(&state, offerer, &next, &rematch_tokens);
                    }
                }
            }
            prop_assert_eq!(&replayed.seats, &state.info().seats);
            let both_seated = Player::ALL.into_iter().all(|p| state.info().seats[p].is_some());
            prop_assert_eq!(replayed.started, both_seated);
            prop_assert_eq!(replayed.position.unwrap_or(state.info().start), state.info().position);
            prop_assert_eq!(replayed.move_count, state.info().move_count);
            prop_assert_eq!(replayed.result, state.info().result);
            prop_assert_eq!(replayed.draw_offer, state.info().draw_offer);
            prop_assert_eq!(&replayed.rematch, &state.info().rematch);
            if let Some(remaining) = replayed.remaining {
                prop_assert_eq!(Some(remaining), state.info().clock.map(|c| c.remaining));
            }
            // The log replays to the same position from the start: one position, one place.
            let mut moves: Vec<Move> = state.moves().iter_newest_first().map(|m| m.mv).collect();
            moves.reverse();
            let game = Game::replay(state.info().start, &moves).unwrap();
            prop_assert_eq!(*game.position(), state.info().position);
            // What a durable store keeps restores the same state, and only that.
            let played = || state.moves().iter().map(|m| PlayedMove {
                player: m.player,
                mv: m.mv,
                time: m.time,
            });
            let restore = |info: GameInfo, position| GameState::restore(
                info, *state.token_hashes(), *state.rematch_tokens(), played(), state.creator(), position,
            );
            let restored = restore(state.info().clone(), Some(state.info().position)).unwrap();
            prop_assert_eq!(restored.info(), state.info());
            prop_assert_eq!(restored.moves(), state.moves());
            check_invariants(&restored);
            let mut miscounted = state.info().clone();
            miscounted.move_count += 1;
            prop_assert!(
                matches!(restore(miscounted, None), Err(RestoreError::MoveCount { .. })),
                "a move count the log does not have restores"
            );
            let first = state.moves().iter().map(|m| m.position).next();
            if let Some(other) = first.filter(|&p| p != state.info().position) {
                prop_assert_eq!(
                    restore(state.info().clone(), Some(other)).unwrap_err(),
                    RestoreError::PositionDiffers
                );
            }
        }
    }

    /// A transition as the manager commits it: with the rematch window of a game it finished.
    fn settle<T>(
        decided: Decided<T>,
        until: SystemTime,
    ) -> Result<(GameState, Vec<GameEventKind>, T), GameError> {
        decided.map(|(mut state, mut transition)| {
            open_rematch_window(&mut state, &mut transition, until);
            (state, transition.game_events, transition.output)
        })
    }
}
