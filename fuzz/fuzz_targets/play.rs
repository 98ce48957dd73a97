//! `play` on arbitrary positions under arbitrary rule sets, with arbitrary moves: it never
//! panics, accepts exactly the legal moves, agrees with `play_unchecked`, keeps every stone and
//! every position within the bounds `from_setup` accepts, and a refused move leaves nothing
//! changed.
#![no_main]

use libfuzzer_sys::fuzz_target;
use oanquan_rules::{
    ByPlayer, Direction, EmptyMandarinNext, EndCondition, MAX_BOARD_STONES, MAX_DEBT,
    MandarinSetup, Move, Player, Position, Preset, Rules, SQUARES, Setup,
};

/// Reads bytes, then zeros.
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&first, rest)) => {
                self.0 = rest;
                first
            }
            None => 0,
        }
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    fn i32(&mut self) -> i32 {
        self.u32() as i32
    }
    fn small(&mut self) -> i32 {
        // Mostly ordinary stone counts; sometimes counts at the engine's bounds (a board of
        // 255 stones, a debt of 100,000), where a wrap would hide; sometimes anything.
        match self.u8() {
            255 => self.i32(),
            254 => MAX_BOARD_STONES - 16 + i32::from(self.u8() % 32),
            253 => -MAX_DEBT - 16 + i32::from(self.u8() % 32),
            b => i32::from(b % 24),
        }
    }
}

fn rules(bytes: &mut Bytes<'_>) -> Rules {
    let mut rules = Preset::ALL[usize::from(bytes.u8()) % 3].rules();
    let knobs = bytes.u8();
    if knobs & 1 != 0 {
        rules.mandarin = match bytes.u8() % 2 {
            0 => MandarinSetup::Stones,
            _ => MandarinSetup::Piece { value: bytes.u8() },
        };
    }
    if knobs & 2 != 0 {
        rules.empty_mandarin_next = if bytes.u8() % 2 == 0 {
            EmptyMandarinNext::EndsTurn
        } else {
            EmptyMandarinNext::EmptySquare
        };
    }
    if knobs & 4 != 0 {
        rules.protected_plies = bytes.u32() % 8;
    }
    if knobs & 8 != 0 {
        rules.immature_mandarin = bytes.u8();
    }
    if knobs & 16 != 0 {
        rules.end_condition = if bytes.u8() % 2 == 0 {
            EndCondition::MandarinSquaresEmpty
        } else {
            EndCondition::PiecesCaptured
        };
    }
    if knobs & 32 != 0 {
        rules.repetition_limit = bytes.u32() % 5;
    }
    if knobs & 64 != 0 {
        rules.max_plies = bytes.u32();
    }
    rules
}

fn start(bytes: &mut Bytes<'_>, rules: Rules) -> Option<Position> {
    if bytes.u8() % 4 == 0 {
        return Position::new(rules).ok();
    }
    let mut squares = [0; SQUARES];
    let mut pieces = [0; SQUARES];
    for square in &mut squares {
        *square = bytes.small();
    }
    let piece_bits = bytes.u8();
    pieces[0] = i32::from(piece_bits & 1);
    pieces[6] = i32::from((piece_bits >> 1) & 1);
    if piece_bits & 4 != 0 {
        pieces[usize::from(bytes.u8()) % SQUARES] = bytes.small();
    }
    let mut setup = Setup {
        squares,
        pieces,
        // Wrapping: `small` may return any i32, and the engine must refuse extreme counts.
        captured: ByPlayer::new(bytes.small().wrapping_sub(4), bytes.small().wrapping_sub(4)),
        captured_pieces: ByPlayer::new(i32::from(bytes.u8() % 3), i32::from(bytes.u8() % 3)),
        to_move: if bytes.u8() % 2 == 0 {
            Player::First
        } else {
            Player::Second
        },
        ply: bytes.u32() % 64,
    };
    if piece_bits & 8 != 0 {
        // The second count takes whatever makes the points add up, so that piled-up squares
        // and deep debts get past the total check to the bounds themselves, and to `play`.
        let value = i64::from(rules.piece_value());
        let pieces: i64 = setup.pieces.iter().map(|&p| i64::from(p)).sum::<i64>()
            + i64::from(setup.captured_pieces.first)
            + i64::from(setup.captured_pieces.second);
        let rest = setup.squares.iter().map(|&s| i64::from(s)).sum::<i64>()
            + pieces * value
            + i64::from(setup.captured.first);
        setup.captured.second = i32::try_from(i64::from(rules.total()) - rest).unwrap_or(0);
    }
    Position::from_setup(setup, rules).ok()
}

fuzz_target!(|data: &[u8]| {
    let mut bytes = Bytes(data);
    let rules = rules(&mut bytes);
    let Some(mut position) = start(&mut bytes, rules) else {
        return;
    };
    for _ in 0..200 {
        if bytes.0.is_empty() {
            break;
        }
        let b = bytes.u8();
        let legal = position.legal_moves();
        let mv = if b & 0x80 != 0 && !legal.is_empty() {
            legal
                .iter()
                .copied()
                .nth(usize::from(b & 0x7f) % legal.len())
                .unwrap()
        } else {
            let direction = if b & 1 == 0 {
                Direction::Right
            } else {
                Direction::Left
            };
            Move::new((b >> 1) % 16, direction)
        };
        let before = position;
        match position.play(mv) {
            Ok((after, steps)) => {
                assert!(
                    legal.iter().any(|&m| m == mv),
                    "played an illegal move {mv}"
                );
                assert!(position.check(mv).is_ok());
                assert!(!steps.is_empty());
                let mut fast = before;
                fast.play_unchecked(mv);
                assert_eq!(fast, after, "play and play_unchecked disagree on {mv}");
                assert_eq!(after.ply(), before.ply() + 1);
                let scores = after.scores();
                assert_eq!(
                    after.board_points() + scores.first + scores.second,
                    rules.total(),
                    "{mv} from {before:?} lost or made stones"
                );
                if !after.is_over() {
                    assert_eq!(
                        Position::from_setup(after.to_setup(), rules),
                        Ok(after),
                        "{mv} from {before:?} left the bounds"
                    );
                }
                position = after;
            }
            Err(_) => {
                assert!(!legal.iter().any(|&m| m == mv), "refused a legal move {mv}");
                assert_eq!(position, before);
            }
        }
    }
});
