//! Property tests of the rules: conservation, termination, legality, replay, notation, traces,
//! and agreement with the naive implementation in `common`.

mod common;

use common::{Naive, Rng, random_game, random_rules};
use oanquan_rules::{
    ByPlayer, Direction, EndReason, Game, MAX_BOARD_STONES, MAX_DEBT, Move, Player, Position,
    Preset, Rules, Setup, Step, is_mandarin,
};
use proptest::prelude::*;

fn conserved(p: &Position) -> bool {
    let s = p.scores();
    p.board_points() + s.first + s.second == p.rules().total()
}

/// Rebuilds the position after a move from the position before and the trace alone, as a client
/// animating the move would.
fn apply_trace(before: &Position, trace: &[Step]) -> Setup {
    let mut s = before.to_setup();
    let mut hand = 0;
    for step in trace {
        match *step {
            Step::PickUp { square, stones, .. } => {
                assert_eq!(s.squares[square as usize], i32::from(stones));
                s.squares[square as usize] = 0;
                hand = i32::from(stones);
            }
            Step::Sow { square } => {
                assert!(hand > 0, "sowing from an empty hand");
                hand -= 1;
                s.squares[square as usize] += 1;
            }
            Step::Capture {
                player,
                square,
                stones,
                pieces,
            } => {
                assert_eq!(s.squares[square as usize], i32::from(stones));
                s.squares[square as usize] = 0;
                s.pieces[square as usize] -= i32::from(pieces);
                s.captured[player] += i32::from(stones);
                s.captured_pieces[player] += i32::from(pieces);
            }
            Step::Refill {
                player,
                captured_after,
            } => {
                for sq in player.citizen_squares() {
                    s.squares[sq as usize] = 1;
                }
                s.captured[player] -= 5;
                assert_eq!(s.captured[player], captured_after);
            }
            Step::GameOver { collected, .. } => {
                let total: i32 = s.squares.iter().sum();
                assert_eq!(collected.first + collected.second, total);
                s.squares = [0; 12];
                for p in Player::ALL {
                    s.captured[p] += collected[p];
                }
            }
            Step::StopAtMandarin { square }
            | Step::CaptureProtected { square }
            | Step::CaptureImmature { square } => {
                assert!(is_mandarin(square));
            }
            Step::StopTwoEmpty { .. } => {}
        }
    }
    assert_eq!(hand, 0, "stones left in hand");
    s.ply += 1;
    s.to_move = before.to_move().other();
    s
}

// The default config reads PROPTEST_CASES (256 unless set); `.ci/run` raises it.
proptest! {

    #[test]
    fn every_game_ends_and_conserves_stones(seed in any::<u64>()) {
        let mut rng = Rng(seed);
        let rules = random_rules(&mut rng);
        let game = random_game(rules, &mut rng);
        prop_assert!(game.moves().len() as u32 <= rules.max_plies);
        prop_assert!(game.outcome().is_some());
        let replayed = Game::replay(*game.start(), game.moves()).unwrap();
        let mut pos = *game.start();
        for &mv in game.moves() {
            pos.play_unchecked(mv);
            prop_assert!(conserved(&pos), "{pos:?}");
        }
        prop_assert_eq!(replayed.position(), game.position());
    }

    #[test]
    fn legal_moves_are_exactly_the_accepted_moves(seed in any::<u64>()) {
        let mut rng = Rng(seed);
        let rules = random_rules(&mut rng);
        let game = random_game(rules, &mut rng);
        let mut pos = *game.start();
        let mut positions = vec![pos];
        for &mv in game.moves() {
            pos = pos.play(mv).unwrap().0;
            positions.push(pos);
        }
        for p in positions {
            let legal = p.legal_moves();
            for square in 0..=14u8 {
                for direction in Direction::ALL {
                    let mv = Move::new(square, direction);
                    prop_assert_eq!(legal.contains(&mv), p.play(mv).is_ok(), "{:?} {}", p, mv);
                }
            }
            prop_assert_eq!(legal.is_empty(), p.is_over());
        }
    }

    #[test]
    fn traces_rebuild_the_position(seed in any::<u64>()) {
        let mut rng = Rng(seed);
        let rules = random_rules(&mut rng);
        let game = random_game(rules, &mut rng);
        let mut pos = *game.start();
        for &mv in game.moves() {
            let (after, trace) = pos.play(mv).unwrap();
            prop_assert_eq!(apply_trace(&pos, &trace), after.to_setup());
            pos = after;
        }
    }

    #[test]
    fn records_replay_every_position(seed in any::<u64>()) {
        let mut rng = Rng(seed);
        let rules = random_rules(&mut rng);
        let game = random_game(rules, &mut rng);
        let record = game.record();
        let json = serde_json::to_string(&record).unwrap();
        let back: oanquan_rules::GameRecord = serde_json::from_str(&json).unwrap();
        let replayed = back.replay().unwrap();
        prop_assert_eq!(replayed.position(), game.position());
        prop_assert_eq!(replayed.end_reason(), game.end_reason());
    }

    #[test]
    fn naive_implementation_agrees(seed in any::<u64>()) {
        let mut rng = Rng(seed);
        let rules = if seed % 4 == 3 { random_rules(&mut rng) } else { Preset::ALL[(seed % 3) as usize].rules() };
        let mut game = Game::new(rules).unwrap();
        let mut naive = Naive::new(rules);
        prop_assert!(naive.matches(&game));
        while !game.is_over() {
            let legal = naive.legal();
            let engine: Vec<Move> = game.position().legal_moves().to_vec();
            prop_assert_eq!(legal.iter().map(|&m| Naive::as_move(m)).collect::<Vec<_>>(), engine);
            let pick = legal[rng.below(legal.len())];
            naive.play(pick.0, pick.1);
            game.play(Naive::as_move(pick)).unwrap();
            prop_assert!(naive.matches(&game), "after {:?}: naive {:?} engine {:?}", game.moves(), naive, game.position());
        }
        prop_assert!(naive.over.is_some());
        let s = naive.scores();
        prop_assert_eq!(game.scores(), ByPlayer::new(s[0] as i32, s[1] as i32));
    }

    #[test]
    fn position_notation_round_trips(seed in any::<u64>()) {
        let mut rng = Rng(seed);
        let game = random_game(random_rules(&mut rng), &mut rng);
        let mut pos = *game.start();
        for &mv in game.moves() {
            let text = pos.to_string();
            let setup: Setup = text.parse().unwrap();
            prop_assert_eq!(setup, pos.to_setup());
            prop_assert_eq!(Position::from_setup(setup, *pos.rules()).unwrap(), pos);
            let mv_text = mv.to_string();
            prop_assert_eq!(mv_text.parse::<Move>().unwrap(), mv);
            pos.play_unchecked(mv);
        }
    }

    #[test]
    fn arbitrary_setups_round_trip_or_are_rejected(
        squares in proptest::array::uniform12(0i32..80),
        pieces in proptest::array::uniform12(0i32..2),
        c1 in -50i32..80, c2 in -50i32..80, p1 in 0i32..3, p2 in 0i32..3,
        second in any::<bool>(), ply in 0u32..400,
    ) {
        let setup = Setup {
            squares, pieces,
            captured: ByPlayer::new(c1, c2),
            captured_pieces: ByPlayer::new(p1, p2),
            to_move: if second { Player::Second } else { Player::First },
            ply,
        };
        prop_assert_eq!(setup.to_string().parse::<Setup>().unwrap(), setup);
        for preset in Preset::ALL {
            // Never panics; whatever it accepts is consistent.
            if let Ok(pos) = Position::from_setup(setup, preset.rules()) {
                prop_assert!(conserved(&pos));
                prop_assert_eq!(pos.legal_moves().is_empty(), pos.is_over());
            }
        }
    }

    #[test]
    fn text_never_panics(text in "\\PC{0,60}") {
        let _ = text.parse::<Setup>();
        let _ = text.parse::<Move>();
        let _ = text.parse::<Preset>();
    }
}

#[test]
fn bad_setups_get_typed_errors() {
    use oanquan_rules::PositionError as E;
    let base: Setup = "10,5,5,5,5,5,10,5,5,5,5,5 0:0 1 0".parse().unwrap();
    let std = Rules::STANDARD;
    let mut s = base;
    s.squares[1] = 6;
    assert!(matches!(
        Position::from_setup(s, std),
        Err(E::WrongTotal {
            expected: 70,
            found: 71
        })
    ));
    let mut s = base;
    s.squares[2] = -1;
    s.squares[3] = 6;
    assert_eq!(
        Position::from_setup(s, std),
        Err(E::NegativeStones { square: 2 })
    );
    let mut s = base;
    s.pieces[3] = 1;
    assert_eq!(
        Position::from_setup(s, std),
        Err(E::PieceOutsideMandarinSquare { square: 3 })
    );
    let mut s = base;
    s.pieces[0] = 1;
    s.squares[0] = 0;
    assert!(matches!(
        Position::from_setup(s, std),
        Err(E::PieceTotal { .. })
    ));
    let mut s = base;
    s.squares = [10, 0, 0, 0, 0, 0, 10, 10, 10, 10, 10, 10];
    assert_eq!(Position::from_setup(s, std), Err(E::MoverHasNoStones));
    let mut bad = std;
    bad.max_plies = 0;
    assert!(matches!(Position::from_setup(base, bad), Err(E::Rules(_))));
    let mut s = base;
    s.captured_pieces.first = -1;
    assert_eq!(
        Position::from_setup(s, std),
        Err(E::CapturedPiecesOutOfRange {
            player: Player::First
        })
    );
}

/// A finished game shows no plain stones on the board: the move that ends it collects them.
/// A setup that is over by itself with stones left would report a winner without them.
#[test]
fn a_finished_setup_must_have_its_stones_collected() {
    use oanquan_rules::PositionError as E;
    let std = Rules::STANDARD;
    // RULES.md worked example 8 right after the capture, before the collection.
    let before: Setup = "0,0,0,1,0,0,0,0,1,0,0,0 28:40 1 80".parse().unwrap();
    assert_eq!(
        Position::from_setup(before, std),
        Err(E::Uncollected { stones: 2 })
    );
    // The same game after the collection, as play leaves it: accepted, and over.
    let after: Setup = "0,0,0,0,0,0,0,0,0,0,0,0 29:41 1 80".parse().unwrap();
    let pos = Position::from_setup(after, std).unwrap();
    assert_eq!(pos.end_reason(), Some(EndReason::Mandarins));
    // The ply limit reached with stones still on the board.
    let mut limit = Setup::start(&std);
    limit.ply = std.max_plies;
    assert_eq!(
        Position::from_setup(limit, std),
        Err(E::Uncollected { stones: 70 })
    );
    // A finished piece-setup game may keep a piece standing (scored by nobody).
    let pieces: Setup = "q,0,0,0,0,0,0,0,0,0,0,0 25:25q 2 300".parse().unwrap();
    let pos = Position::from_setup(pieces, Rules::MANCALA_WORLD).unwrap();
    assert_eq!(pos.end_reason(), Some(EndReason::PlyLimit));
    assert!(
        E::Uncollected { stones: 2 }
            .to_string()
            .contains("2 stones are still on the board"),
    );
}

#[test]
fn play_errors_say_why() {
    use oanquan_rules::PlayError as E;
    let pos = Position::new(Rules::STANDARD).unwrap();
    let right = |sq| Move::new(sq, Direction::Right);
    assert_eq!(
        pos.play(right(12)).unwrap_err(),
        E::NoSuchSquare { square: 12 }
    );
    assert_eq!(
        pos.play(right(6)).unwrap_err(),
        E::MandarinSquare { square: 6 }
    );
    assert_eq!(
        pos.play(right(8)).unwrap_err(),
        E::NotYourSquare {
            square: 8,
            to_move: Player::First
        }
    );
    let (after, _) = pos.play(right(1)).unwrap();
    // The relay emptied square 7.
    assert_eq!(
        after.play(right(7)).unwrap_err(),
        E::EmptySquare { square: 7 }
    );
    assert!(
        E::NotYourSquare {
            square: 8,
            to_move: Player::First
        }
        .to_string()
        .contains("squares 1 to 5")
    );
}

/// A valid setup at the edges of the bounds: up to [`MAX_BOARD_STONES`] stones, piled into one
/// square or spread, and captured counts at the deepest debt or the matching surplus.
fn extreme_setup(rng: &mut Rng, rules: Rules) -> Setup {
    let value = rules.piece_value();
    let mut setup = Setup::start(&rules);
    setup.squares = [0; 12];
    if rules.has_pieces() {
        setup.pieces[0] = rng.below(2) as i32;
        setup.pieces[6] = rng.below(2) as i32;
        let captured = 2 - setup.pieces[0] - setup.pieces[6];
        setup.captured_pieces.first = rng.below(captured as usize + 1) as i32;
        setup.captured_pieces.second = captured - setup.captured_pieces.first;
    }
    setup.to_move = Player::ALL[rng.below(2)];
    let own = setup.to_move.citizen_squares();
    let board = match rng.below(3) {
        0 => MAX_BOARD_STONES,
        1 => MAX_BOARD_STONES - rng.below(12) as i32,
        _ => 1 + rng.below(MAX_BOARD_STONES as usize) as i32,
    };
    // The mover needs a stone; the rest goes into one square or everywhere.
    setup.squares[own[rng.below(5)] as usize] = 1;
    let heap = rng.below(12);
    for _ in 1..board {
        let square = if rng.below(2) == 0 {
            heap
        } else {
            rng.below(12)
        };
        setup.squares[square] += 1;
    }
    let plain = rules.total() - 2 * value;
    let sum = plain - board;
    let first = match rng.below(4) {
        0 => -MAX_DEBT,
        1 => sum + MAX_DEBT,
        2 => -MAX_DEBT + rng.below(12) as i32,
        _ => sum / 2,
    };
    setup.captured = ByPlayer::new(first, sum - first);
    setup.ply = match rng.below(3) {
        0 => rules.max_plies - 1,
        _ => rng.below(rules.max_plies as usize) as u32,
    };
    setup
}

fn plain_on_board(p: &Setup) -> i32 {
    p.squares.iter().sum()
}

proptest! {
    /// Sowing, relays, captures and refills at the bounds: no arithmetic wraps (the tests build
    /// with overflow checks), stones are conserved, `play_unchecked` agrees with `play`, the
    /// naive implementation (in `i64`) agrees with every move, and what a move produces passes
    /// `from_setup` again.
    #[test]
    fn extreme_positions_play_like_the_naive_rules(seed in any::<u64>()) {
        let mut rng = Rng(seed);
        let rules = if seed % 2 == 0 { random_rules(&mut rng) } else { Preset::ALL[(seed / 2 % 3) as usize].rules() };
        let setup = extreme_setup(&mut rng, rules);
        let checked = Position::from_setup(setup, rules);
        // Over from the start (both mandarin squares empty, or both pieces captured) with
        // stones on the board: not a position play leaves, and nothing to play from it.
        prop_assume!(!matches!(checked, Err(oanquan_rules::PositionError::Uncollected { .. })));
        let mut pos = checked.unwrap_or_else(|e| panic!("{setup} under {rules:?}: {e}"));
        for _ in 0..40 {
            let legal = pos.legal_moves();
            if legal.is_empty() {
                break;
            }
            for &mv in &legal {
                let (after, _) = pos.play(mv).unwrap();
                let mut fast = pos;
                fast.play_unchecked(mv);
                prop_assert_eq!(fast, after);
                prop_assert!(conserved(&after), "{:?}", after);
                let mut game = Game::from_position(pos);
                game.play(mv).unwrap();
                let mut naive = Naive::from_position(&pos);
                naive.play(usize::from(mv.square), i64::from(mv.direction.delta()));
                let refused_loan = after.end_reason() == Some(EndReason::PlyLimit)
                    && after.ply() < rules.max_plies;
                if refused_loan {
                    // The naive rules refilled anyway, past a bound.
                    let board: i64 = naive.stones.iter().sum();
                    let debt = naive.captured[after.to_move().index()];
                    prop_assert!(board > i64::from(MAX_BOARD_STONES) || debt < -i64::from(MAX_DEBT),
                        "{:?} ended by {} with board {} debt {}", pos, mv, board, debt);
                } else {
                    prop_assert!(naive.matches(&game), "{:?} {}: naive {:?} engine {:?}", pos, mv, naive, after);
                }
                if !after.is_over() {
                    prop_assert_eq!(Position::from_setup(after.to_setup(), rules), Ok(after));
                }
                prop_assert!(plain_on_board(&after.to_setup()) <= MAX_BOARD_STONES);
            }
            pos.play_unchecked(legal[rng.below(legal.len())]);
        }
    }
}

#[test]
fn counts_beyond_the_bounds_are_refused_with_the_field() {
    use oanquan_rules::PositionError as E;
    // The two positions of issue 12: a square of 1000 balanced by a debt, and 255 stones in a
    // mandarin square on a board of 315 (the move `1-` used to wrap it to 0).
    let piled: Setup = "10,1000,5,5,5,5,10,5,5,5,5,5 -995:0 1 0".parse().unwrap();
    assert_eq!(
        Position::from_setup(piled, Rules::STANDARD),
        Err(E::TooManyStones { square: 1 })
    );
    let full: Setup = "255,5,5,5,5,5,10,5,5,5,5,5 -245:0 1 0".parse().unwrap();
    assert_eq!(
        Position::from_setup(full, Rules::STANDARD),
        Err(E::BoardOverfull { found: 315 })
    );
    let mut deep: Setup = "10,5,5,5,5,5,10,5,5,5,5,5 0:0 1 0".parse().unwrap();
    deep.captured = ByPlayer::new(-MAX_DEBT - 1, MAX_DEBT + 1);
    assert_eq!(
        Position::from_setup(deep, Rules::STANDARD),
        Err(E::CapturedOutOfRange {
            player: Player::First
        })
    );
    deep.captured = ByPlayer::new(-MAX_DEBT, MAX_DEBT);
    assert!(Position::from_setup(deep, Rules::STANDARD).is_ok());
    deep.captured_pieces.second = 3;
    assert_eq!(
        Position::from_setup(deep, Rules::STANDARD),
        Err(E::CapturedPiecesOutOfRange {
            player: Player::Second
        })
    );
    // The fullest board there may be still plays without wrapping.
    let fullest: Setup = "1,1,0,0,0,0,0,0,0,0,253,0 -185:0 2 5".parse().unwrap();
    let pos = Position::from_setup(fullest, Rules::STANDARD).unwrap();
    let (after, _) = pos.play(Move::new(10, Direction::Right)).unwrap();
    assert!(conserved(&after));
    assert_eq!(plain_on_board(&after.to_setup()), 255);
}

#[test]
fn a_loan_past_the_bounds_ends_the_game() {
    // 255 stones on the board; after `5+` the second player's side is empty and a refill would
    // put 260 there: the game ends as at the ply limit, the mandarin squares split 127 / 128.
    let setup: Setup = "4,0,0,0,0,1,250,0,0,0,0,0 -100:-85 1 10".parse().unwrap();
    let pos = Position::from_setup(setup, Rules::STANDARD).unwrap();
    let (after, trace) = pos.play(Move::new(5, Direction::Right)).unwrap();
    assert_eq!(after.end_reason(), Some(EndReason::PlyLimit));
    assert_eq!(after.captured(), ByPlayer::new(27, 43));
    assert!(!trace.iter().any(|s| matches!(s, Step::Refill { .. })));
    assert!(conserved(&after));
    // The same with the second player's debt at the bound instead.
    let setup: Setup = "4,0,0,0,0,1,10,0,0,0,0,0 100053:-99998 1 10"
        .parse()
        .unwrap();
    let pos = Position::from_setup(setup, Rules::STANDARD).unwrap();
    let (after, _) = pos.play(Move::new(5, Direction::Right)).unwrap();
    assert_eq!(after.end_reason(), Some(EndReason::PlyLimit));
    // One stone of room is enough for the ordinary refill.
    let setup: Setup = "4,0,0,0,0,1,10,0,0,0,0,0 100050:-99995 1 10"
        .parse()
        .unwrap();
    let pos = Position::from_setup(setup, Rules::STANDARD).unwrap();
    let (after, _) = pos.play(Move::new(5, Direction::Right)).unwrap();
    assert!(!after.is_over());
    assert_eq!(after.captured().second, -MAX_DEBT);
}
