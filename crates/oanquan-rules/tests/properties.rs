//! Property tests of the rules: conservation, termination, legality, replay, notation, traces,
//! and agreement with the naive implementation in `common`.

mod common;

use common::{Naive, Rng, random_game, random_rules};
use oanquan_rules::{
    ByPlayer, Direction, Game, Move, Player, Position, Preset, Rules, Setup, Step, is_mandarin,
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
        Err(E::CapturedOutOfRange {
            player: Player::First
        })
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
