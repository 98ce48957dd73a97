//! The game's life cycle as pure functions: `(state, command, now) -> Result<(new state,
//! events), GameError>`. No store, no runtime, no clock of their own: the manager loads a state,
//! calls one of these, and commits what it returns; a refused command changes nothing.
//!
//! Invariants every transition keeps (see the property test below): the summary's position is
//! the engine's, after exactly `move_count` moves, all in the move log; a game is over exactly
//! when it has a result; an active game has both seats.

use std::net::IpAddr;
use std::time::SystemTime;

use oanquan_ai::Level;
use oanquan_rules::{ByPlayer, Move, Outcome, Player, Position, Preset, Rules};

use crate::error::GameError;
use crate::model::{
    GameEventKind, GameId, GameInfo, GameResult, GameState, GameStatus, LobbyEventKind, MoveRecord,
    PlayerKind, SeatInfo, Termination, computer_name,
};
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
    /// The computer's level, seated in the other seat (the game starts at once).
    pub computer: Option<Level>,
    /// The creator's address in `client_key` form.
    pub creator: Option<IpAddr>,
}

/// Creates a game: the creator in their seat, and the computer in the other if asked.
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
    };
    let seat = command.seat;
    info.seats[seat] = Some(SeatInfo {
        display_name: command.display_name.clone(),
        kind: PlayerKind::Human,
    });
    let mut game_events = vec![GameEventKind::PlayerJoined {
        seat,
        display_name: command.display_name,
        kind: PlayerKind::Human,
    }];
    let mut lobby_events = Vec::new();
    if let Some(level) = command.computer {
        seat_computer(
            &mut info,
            seat.other(),
            level,
            &mut game_events,
            &mut lobby_events,
        );
    }
    lobby_events.insert(
        0,
        LobbyEventKind::GameCreated {
            game: Box::new(info.clone()),
        },
    );
    let mut token_hashes = ByPlayer::default();
    token_hashes[seat] = Some(command.token);
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
    state.edit(|info| {
        info.seats[seat] = Some(SeatInfo {
            display_name: display_name.to_owned(),
            kind: PlayerKind::Human,
        });
        info.status = GameStatus::Active;
        info.updated = now;
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
/// request cannot play twice.
///
/// # Errors
///
/// [`GameError::WrongToken`], [`GameError::GameNotStarted`], [`GameError::GameOver`],
/// [`GameError::StalePly`], [`GameError::NotYourTurn`], [`GameError::IllegalMove`].
pub fn play(
    mut state: GameState,
    mover: Mover,
    mv: Move,
    expected_ply: Option<u32>,
    now: SystemTime,
) -> Decided<MoveRecord> {
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
        GameStatus::Finished | GameStatus::Aborted => return Err(GameError::GameOver),
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
    let record = state.play(seat, mv, now)?;
    let position = record.position;
    state.edit(|info| info.updated = now);
    let mut game_events = vec![GameEventKind::MovePlayed {
        record: Box::new(record.clone()),
    }];
    let mut lobby_events = Vec::new();
    if let Some(reason) = position.end_reason() {
        let result = GameResult {
            outcome: position.outcome(),
            scores: position.scores(),
            termination: Termination::Rules(reason),
            ended_by: None,
        };
        finish(
            &mut state,
            GameStatus::Finished,
            result,
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
        });
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

/// Resigns for the seat whose token hashes to `token`; the opponent wins.
///
/// # Errors
///
/// [`GameError::WrongToken`], [`GameError::GameNotStarted`] (abort instead),
/// [`GameError::GameOver`].
pub fn resign(state: GameState, token: &TokenHash, now: SystemTime) -> Decided<()> {
    let seat = state.seat_of(token).ok_or(GameError::WrongToken)?;
    match state.info().status {
        GameStatus::WaitingForPlayers => return Err(GameError::GameNotStarted),
        GameStatus::Finished | GameStatus::Aborted => return Err(GameError::GameOver),
        GameStatus::Active => {}
    }
    let result = GameResult {
        outcome: Some(Outcome::Decisive {
            winner: seat.other(),
        }),
        scores: state.position().scores(),
        termination: Termination::Resignation,
        ended_by: Some(seat),
    };
    Ok(ended(state, GameStatus::Finished, result, now))
}

/// Aborts a game before its first move, for the seat whose token hashes to `token`.
///
/// # Errors
///
/// [`GameError::WrongToken`], [`GameError::GameAlreadyStarted`], [`GameError::GameOver`].
pub fn abort(state: GameState, token: &TokenHash, now: SystemTime) -> Decided<()> {
    let seat = state.seat_of(token).ok_or(GameError::WrongToken)?;
    if state.info().status.is_over() {
        return Err(GameError::GameOver);
    }
    if state.info().move_count > 0 {
        return Err(GameError::GameAlreadyStarted);
    }
    let result = GameResult {
        outcome: None,
        scores: state.position().scores(),
        termination: Termination::Aborted,
        ended_by: Some(seat),
    };
    Ok(ended(state, GameStatus::Aborted, result, now))
}

/// Aborts a waiting or active game whose last change is older than `idle_since` (no seat ends
/// it: `ended_by` stays empty).
///
/// # Errors
///
/// [`GameError::GameOver`] if the game is over or changed since: nothing to expire.
pub fn expire(state: GameState, idle_since: SystemTime, now: SystemTime) -> Decided<()> {
    if state.info().status.is_over() || state.info().updated >= idle_since {
        return Err(GameError::GameOver);
    }
    let result = GameResult {
        outcome: None,
        scores: state.position().scores(),
        termination: Termination::Aborted,
        ended_by: None,
    };
    Ok(ended(state, GameStatus::Aborted, result, now))
}

/// Seats the computer at `level` in `seat` of a game being created and starts it, with the
/// events of a person joining.
fn seat_computer(
    info: &mut GameInfo,
    seat: Player,
    level: Level,
    game_events: &mut Vec<GameEventKind>,
    lobby_events: &mut Vec<LobbyEventKind>,
) {
    let display_name = computer_name(level);
    let kind = PlayerKind::Computer { level };
    info.seats[seat] = Some(SeatInfo {
        display_name: display_name.clone(),
        kind,
    });
    info.status = GameStatus::Active;
    game_events.extend([
        GameEventKind::PlayerJoined {
            seat,
            display_name,
            kind,
        },
        GameEventKind::GameStarted {
            game: Box::new(info.clone()),
        },
        GameEventKind::TurnStarted {
            player: info.position.to_move(),
            ply: info.position.ply(),
            refill: None,
        },
    ]);
    lobby_events.push(LobbyEventKind::GameStarted {
        game_id: info.id.clone(),
    });
}

/// The change that ends a game by a decision outside the rules (resignation, abort, expiry).
fn ended(
    mut state: GameState,
    status: GameStatus,
    result: GameResult,
    now: SystemTime,
) -> (GameState, Transition<()>) {
    state.edit(|info| info.updated = now);
    let (mut game_events, mut lobby_events) = (Vec::new(), Vec::new());
    finish(
        &mut state,
        status,
        result,
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

fn finish(
    state: &mut GameState,
    status: GameStatus,
    result: GameResult,
    game_events: &mut Vec<GameEventKind>,
    lobby_events: &mut Vec<LobbyEventKind>,
) {
    state.edit(|info| {
        info.status = status;
        info.result = Some(result);
    });
    game_events.push(GameEventKind::GameOver { result });
    lobby_events.push(LobbyEventKind::GameFinished {
        game_id: state.info().id.clone(),
        result,
    });
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
                computer,
                creator: None,
            },
            at(0),
        );
        (state, transition, token)
    }

    #[test]
    fn a_second_player_starts_the_game_and_a_third_is_refused() {
        let (state, _, _) = created(Player::First, None);
        let joiner = PlayerToken::generate().hash();
        let (state, joined) = join(state, "Minh", joiner, at(1)).unwrap();
        assert_eq!(joined.output, Player::Second);
        assert_eq!(state.info().status, GameStatus::Active);
        assert_eq!(state.seat_of(&joiner), Some(Player::Second));
        assert_eq!(state.info().updated, at(1));
        let third = join(state, "Hoa", PlayerToken::generate().hash(), at(2));
        assert!(matches!(third, Err(GameError::SeatTaken(_))));
    }

    #[test]
    fn a_move_needs_the_right_token_turn_and_ply() {
        let (state, _, first) = created(Player::First, None);
        let second = PlayerToken::generate().hash();
        let (state, _) = join(state, "Minh", second, at(1)).unwrap();
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
    #[derive(Debug, Clone)]
    enum Command {
        Join,
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
    }

    fn command() -> impl Strategy<Value = Command> {
        prop_oneof![
            1 => Just(Command::Join),
            8 => (0..2usize, 0..12u8, any::<bool>(), proptest::bool::weighted(0.1))
                .prop_map(|(seat, square, right, stale)| Command::Play { seat, square, right, stale }),
            3 => (0..16usize).prop_map(|index| Command::Computer { index }),
            1 => (0..2usize).prop_map(|seat| Command::Resign { seat }),
            1 => (0..2usize).prop_map(|seat| Command::Abort { seat }),
            1 => any::<bool>().prop_map(|idle| Command::Expire { idle }),
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
    }

    impl Replayed {
        fn apply(&mut self, event: &GameEventKind) {
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
                    });
                }
                GameEventKind::GameStarted { .. } => self.started = true,
                GameEventKind::MovePlayed { record } => {
                    self.move_count += 1;
                    assert_eq!(record.number, self.move_count);
                    self.position = Some(record.position);
                }
                GameEventKind::GameOver { result } => {
                    assert!(self.result.is_none(), "a game ends twice");
                    self.result = Some(*result);
                }
                _ => {}
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
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// Any sequence of commands keeps the invariants, a refused command changes nothing
        /// (it returns no state), and the events of the accepted ones rebuild the game.
        #[test]
        fn any_sequence_of_commands_keeps_the_invariants_and_the_events_rebuild_the_game(
            creator in 0..2usize,
            computer in any::<bool>(),
            commands in proptest::collection::vec(command(), 0..60),
        ) {
            let seat = Player::ALL[creator];
            let (mut state, created, creator_token) =
                created(seat, computer.then_some(Level::Random));
            let mut tokens: ByPlayer<Option<TokenHash>> = ByPlayer::default();
            tokens[seat] = Some(creator_token);
            let mut replayed = Replayed::default();
            created.game_events.iter().for_each(|e| replayed.apply(e));
            check_invariants(&state);
            let mut clock = 1;
            for command in commands {
                clock += 1;
                let now = at(clock);
                let token_of = |tokens: &ByPlayer<Option<TokenHash>>, seat: usize| {
                    tokens[Player::ALL[seat]].unwrap_or_else(|| PlayerToken::generate().hash())
                };
                let before = state.clone();
                let decided: Result<(GameState, Vec<GameEventKind>), GameError> = match command {
                    Command::Join => {
                        let token = PlayerToken::generate().hash();
                        join(before, "Minh", token, now).map(|(s, t)| {
                            tokens[t.output] = Some(token);
                            (s, t.game_events)
                        })
                    }
                    Command::Play { seat, square, right, stale } => {
                        let text = format!("{square}{}", if right { '+' } else { '-' });
                        let Ok(mv) = text.parse::<Move>() else { continue };
                        let ply = state.info().position.ply() + u32::from(stale);
                        play(before, Mover::Token(token_of(&tokens, seat)), mv, Some(ply), now)
                            .map(|(s, t)| (s, t.game_events))
                    }
                    Command::Computer { index } => {
                        let legal = state.info().position.legal_moves();
                        if legal.is_empty() { continue; }
                        let mv = legal[index % legal.len()];
                        play(before, Mover::Computer, mv, None, now).map(|(s, t)| (s, t.game_events))
                    }
                    Command::Resign { seat } => resign(before, &token_of(&tokens, seat), now)
                        .map(|(s, t)| (s, t.game_events)),
                    Command::Abort { seat } => abort(before, &token_of(&tokens, seat), now)
                        .map(|(s, t)| (s, t.game_events)),
                    Command::Expire { idle } => {
                        let cutoff = if idle { now } else { state.info().updated };
                        expire(before, cutoff, now).map(|(s, t)| (s, t.game_events))
                    }
                };
                if let Ok((next, events)) = decided {
                    prop_assert!(!events.is_empty(), "an accepted command says what it did");
                    prop_assert!(!state.info().status.is_over(), "a finished game changed");
                    events.iter().for_each(|e| replayed.apply(e));
                    state = next;
                    check_invariants(&state);
                }
            }
            prop_assert_eq!(&replayed.seats, &state.info().seats);
            let both_seated = Player::ALL.into_iter().all(|p| state.info().seats[p].is_some());
            prop_assert_eq!(replayed.started, both_seated);
            prop_assert_eq!(replayed.position.unwrap_or(state.info().start), state.info().position);
            prop_assert_eq!(replayed.move_count, state.info().move_count);
            prop_assert_eq!(replayed.result, state.info().result);
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
                info, *state.token_hashes(), played(), state.creator(), position,
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
}
