//! The worked examples of RULES.md, one test each, with the steps a client would animate.

use oanquan_rules::{
    ByPlayer, EndReason, Game, Move, Outcome, Player, Position, Preset, Rules, Setup, Step,
};

fn position(text: &str, rules: Rules) -> Position {
    Position::from_setup(text.parse::<Setup>().unwrap(), rules).unwrap()
}

fn play(pos: &Position, mv: &str) -> (Position, Vec<Step>) {
    pos.play(mv.parse::<Move>().unwrap()).unwrap()
}

#[test]
fn example_1_opening_protection() {
    let start = Position::new(Rules::STANDARD).unwrap();
    let (after, trace) = play(&start, "1-");
    assert_eq!(after.squares(), [11, 0, 6, 6, 6, 6, 11, 0, 6, 6, 6, 6]);
    assert_eq!(after.scores(), ByPlayer::new(0, 0));
    assert_eq!(
        trace
            .iter()
            .filter(|s| matches!(
                s,
                Step::PickUp {
                    relay: true,
                    square: 7,
                    stones: 5
                }
            ))
            .count(),
        1
    );
    assert_eq!(trace.last(), Some(&Step::CaptureProtected { square: 0 }));

    let (after, trace) = play(&Position::new(Rules::TRADITIONAL).unwrap(), "1-");
    assert_eq!(after.scores(), ByPlayer::new(11, 0));
    assert!(trace.contains(&Step::Capture {
        player: Player::First,
        square: 0,
        stones: 11,
        pieces: 0
    }));
}

#[test]
fn example_2_plain_opening_capture() {
    let (after, _) = play(&Position::new(Rules::STANDARD).unwrap(), "1+");
    assert_eq!(after.squares(), [11, 0, 0, 6, 6, 6, 11, 0, 6, 6, 6, 6]);
    assert_eq!(after.scores(), ByPlayer::new(6, 0));
    assert_eq!(after.to_move(), Player::Second);
}

#[test]
fn example_3_empty_mandarin_square_next() {
    let text = "1,0,0,0,1,0,0,1,0,0,0,0 29:38 1 47";
    let (after, trace) = play(&position(text, Rules::STANDARD), "4+");
    assert_eq!(after.squares(), [1, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0]);
    assert_eq!(trace.last(), Some(&Step::StopAtMandarin { square: 6 }));

    let (after, trace) = play(&position(text, Rules::TRADITIONAL), "4+");
    assert!(trace.contains(&Step::Capture {
        player: Player::First,
        square: 7,
        stones: 1,
        pieces: 0
    }));
    assert_eq!(after.captured().first, 30);
}

#[test]
fn example_4_chain_of_three_through_a_mandarin_square() {
    let pos = position("1,0,0,0,0,1,0,0,1,0,1,0 30:36 1 50", Rules::STANDARD);
    let (after, trace) = play(&pos, "5+");
    let captures: Vec<u8> = trace
        .iter()
        .filter_map(|s| match s {
            Step::Capture { square, .. } => Some(*square),
            _ => None,
        })
        .collect();
    assert_eq!(captures, [8, 10, 0]);
    assert!(trace.contains(&Step::StopTwoEmpty { gap: 1, next: 2 }));
    assert_eq!(
        trace.last(),
        Some(&Step::Refill {
            player: Player::Second,
            captured_after: 31
        })
    );
    assert_eq!(after.squares(), [0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1]);
    assert_eq!(after.captured(), ByPlayer::new(33, 31));
}

#[test]
fn example_5_two_empty_squares() {
    let pos = position("1,0,1,0,0,0,0,0,0,0,0,0 32:36 1 50", Rules::STANDARD);
    let (after, trace) = play(&pos, "2+");
    assert!(trace.contains(&Step::StopTwoEmpty { gap: 4, next: 5 }));
    assert_eq!(after.squares(), [1, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1, 1]);
    assert_eq!(after.captured(), ByPlayer::new(32, 31));
}

#[test]
fn example_6_refill_into_debt() {
    let pos = position("2,0,0,0,1,0,0,0,0,0,0,0 66:1 1 50", Rules::STANDARD);
    let (after, _) = play(&pos, "4-");
    assert_eq!(after.captured(), ByPlayer::new(66, -4));
    assert_eq!(after.squares(), [2, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1, 1]);
    assert_eq!(after.to_string(), "2,0,0,1,0,0,0,1,1,1,1,1 66:-4 2 51");
}

#[test]
fn example_7_wrap_around() {
    let pos = position("1,0,1,0,0,0,0,0,0,0,13,0 32:23 2 50", Rules::STANDARD);
    let (after, trace) = play(&pos, "10+");
    assert_eq!(after.squares(), [2, 1, 2, 1, 1, 1, 1, 1, 1, 1, 1, 2]);
    assert!(
        trace.contains(&Step::Sow { square: 10 }),
        "the origin gets a stone back"
    );
    assert_eq!(trace.last(), Some(&Step::StopAtMandarin { square: 0 }));
}

#[test]
fn example_8_end_of_the_game() {
    let pos = position("0,0,0,1,0,0,1,0,0,1,0,0 28:39 2 50", Rules::STANDARD);
    let mut game = Game::from_position(pos);
    let trace = game.play("9-".parse().unwrap()).unwrap();
    assert_eq!(
        trace.last(),
        Some(&Step::GameOver {
            reason: EndReason::Mandarins,
            collected: ByPlayer::new(1, 1)
        })
    );
    assert_eq!(game.scores(), ByPlayer::new(29, 41));
    assert_eq!(
        game.outcome(),
        Some(Outcome::Decisive {
            winner: Player::Second
        })
    );
    assert!(game.position().legal_moves().is_empty());
}

#[test]
fn repetition_ends_the_game_and_splits_the_mandarin_stones() {
    // Two lone stones chase each other round the board forever; the third occurrence ends it.
    let mut rules = Preset::Standard.rules();
    rules.repetition_limit = 3;
    let pos = position("33,1,0,0,0,0,0,0,0,0,0,1 1:34 1 50", rules);
    let mut game = Game::from_position(pos);
    let mut plies = 0;
    while !game.is_over() {
        let mv = game.position().legal_moves()[0];
        game.play(mv).unwrap();
        plies += 1;
        assert!(plies < 50, "no repetition found: {game:?}");
    }
    assert_eq!(game.end_reason(), Some(EndReason::Repetition));
    let total: i32 =
        game.scores().into_array().iter().sum::<i32>() + game.position().board_points();
    assert_eq!(total, 70);
}

#[test]
fn ply_limit_ends_the_game_without_a_refill() {
    let mut rules = Rules::STANDARD;
    rules.max_plies = 51;
    // The first player's last stone leaves their side; no refill after the final move.
    let pos = position("2,0,0,0,1,0,0,0,0,0,0,0 66:1 1 50", rules);
    let (after, trace) = play(&pos, "4-");
    assert_eq!(after.end_reason(), Some(EndReason::PlyLimit));
    assert!(!trace.iter().any(|s| matches!(s, Step::Refill { .. })));
    // Mandarin square 0 holds 2: split evenly.
    assert_eq!(
        trace.last(),
        Some(&Step::GameOver {
            reason: EndReason::PlyLimit,
            collected: ByPlayer::new(2, 1)
        })
    );
}

#[test]
fn immature_mandarin_cannot_be_captured() {
    let mut rules = Rules::MANCALA_WORLD;
    rules.immature_mandarin = 5;
    // The stone lands in 2, square 1 is the gap, and square 0 holds its piece with 3 stones.
    let text = "3q,0,0,1,0,0,q,0,0,0,0,1 25:20 1 10";
    let (after, trace) = play(&position(text, rules), "3-");
    assert_eq!(trace.last(), Some(&Step::CaptureImmature { square: 0 }));
    assert_eq!(after.captured_pieces(), ByPlayer::new(0, 0));

    rules.immature_mandarin = 3;
    let (after, trace) = play(&position(text, rules), "3-");
    assert!(trace.contains(&Step::Capture {
        player: Player::First,
        square: 0,
        stones: 3,
        pieces: 1
    }));
    assert_eq!(after.scores(), ByPlayer::new(25 + 3 + 10, 20));
}
