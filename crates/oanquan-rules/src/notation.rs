//! Text forms of moves and positions; see the crate docs for the grammar.

use std::fmt;
use std::str::FromStr;

use crate::player::{ByPlayer, Direction, Player};
use crate::position::{Move, SQUARES, Setup};

/// Text that is not a move or a position in the crate's notation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotationError {
    what: &'static str,
    detail: String,
}

impl NotationError {
    fn new(what: &'static str, detail: impl Into<String>) -> Self {
        NotationError {
            what,
            detail: detail.into(),
        }
    }
}

impl fmt::Display for NotationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid {}: {}", self.what, self.detail)
    }
}

impl std::error::Error for NotationError {}

impl fmt::Display for Move {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = match self.direction {
            Direction::Right => '+',
            Direction::Left => '-',
        };
        write!(f, "{}{sign}", self.square)
    }
}

impl FromStr for Move {
    type Err = NotationError;

    /// Reads `<ring index><+|->`, e.g. `3-` or `10+`.
    fn from_str(s: &str) -> Result<Move, NotationError> {
        const HINT: &str = "expected a ring index 0-11 followed by + or -, like 3- or 10+";
        let err = || NotationError::new("move", format!("{s:?}: {HINT}"));
        let s_trim = s.trim();
        let (digits, direction) = if let Some(d) = s_trim.strip_suffix('+') {
            (d, Direction::Right)
        } else if let Some(d) = s_trim.strip_suffix('-') {
            (d, Direction::Left)
        } else {
            return Err(err());
        };
        if digits.is_empty() || digits.len() > 2 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(err());
        }
        let square: u8 = digits.parse().map_err(|_| err())?;
        if square as usize >= SQUARES {
            return Err(err());
        }
        Ok(Move::new(square, direction))
    }
}

/// The longest text [`Setup`]'s `Display` writes: 12 squares and 2 captured counts of at most 11
/// characters (`-2147483648`) and 8 `q`s each, 11 commas, ` `, `:`, ` 1 ` and a `u32` ply.
const MAX_SETUP_TEXT: usize = 14 * (11 + 8) + 11 + 5 + 10;

/// A stack buffer the notation is written into, then handed to the formatter in one
/// `write_str`: positions are written for every response and event the server sends, and going
/// through `write!` per number cost several times more than this.
struct TextBuf {
    bytes: [u8; MAX_SETUP_TEXT],
    len: usize,
}

impl TextBuf {
    const fn new() -> Self {
        TextBuf {
            bytes: [0; MAX_SETUP_TEXT],
            len: 0,
        }
    }

    fn push(&mut self, byte: u8) {
        self.bytes[self.len] = byte;
        self.len += 1;
    }

    fn integer(&mut self, n: i64) {
        // Counts of stones are small: one or two digits are pushed as they are, sparing the
        // digit buffer and its copy (the notation is written for every move's response).
        if (0..10).contains(&n) {
            self.push(b'0' + n as u8);
            return;
        }
        if (10..100).contains(&n) {
            self.push(b'0' + (n / 10) as u8);
            self.push(b'0' + (n % 10) as u8);
            return;
        }
        if n < 0 {
            self.push(b'-');
        }
        let mut n = n.unsigned_abs();
        let mut digits = [0_u8; 20];
        let mut start = digits.len();
        loop {
            start -= 1;
            digits[start] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        let digits = &digits[start..];
        self.bytes[self.len..self.len + digits.len()].copy_from_slice(digits);
        self.len += digits.len();
    }

    /// Stones, then one `q` per mandarin piece (at most 8); `omit_zero`: a square holding only
    /// pieces is written `q`, not `0q`.
    fn count_with_pieces(&mut self, stones: i32, pieces: i32, omit_zero: bool) {
        if !(omit_zero && stones == 0 && pieces > 0) {
            self.integer(i64::from(stones));
        }
        for _ in 0..pieces.clamp(0, 8) {
            self.push(b'q');
        }
    }

    fn write_to(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Only ASCII is ever pushed, so this check cannot fail.
        f.write_str(std::str::from_utf8(&self.bytes[..self.len]).map_err(|_| fmt::Error)?)
    }
}

impl fmt::Display for Setup {
    /// `<12 squares> <captured> <to move> <ply>`, e.g. the standard start
    /// `10,5,5,5,5,5,10,5,5,5,5,5 0:0 1 0`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = TextBuf::new();
        for i in 0..SQUARES {
            if i > 0 {
                out.push(b',');
            }
            out.count_with_pieces(self.squares[i], self.pieces[i], true);
        }
        out.push(b' ');
        out.count_with_pieces(self.captured.first, self.captured_pieces.first, false);
        out.push(b':');
        out.count_with_pieces(self.captured.second, self.captured_pieces.second, false);
        out.push(b' ');
        out.push(match self.to_move {
            Player::First => b'1',
            Player::Second => b'2',
        });
        out.push(b' ');
        out.integer(i64::from(self.ply));
        out.write_to(f)
    }
}

/// Splits `12qq` into `(12, 2)`; `q` alone is `(0, 1)` when `allow_bare` is set.
fn parse_count_with_pieces(token: &str, allow_bare: bool) -> Option<(i32, i32)> {
    let digits = token.trim_end_matches('q');
    let pieces = (token.len() - digits.len()) as i32;
    if pieces > 2 {
        return None;
    }
    if digits.is_empty() {
        return (allow_bare && pieces > 0).then_some((0, pieces));
    }
    let unsigned = digits.strip_prefix('-').unwrap_or(digits);
    if unsigned.is_empty() || unsigned.len() > 9 || !unsigned.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().map(|n| (n, pieces))
}

impl FromStr for Setup {
    type Err = NotationError;

    /// Reads the form [`Setup`]'s `Display` writes. Validation against a rule set is
    /// [`crate::Position::from_setup`]'s job.
    fn from_str(s: &str) -> Result<Setup, NotationError> {
        const WHAT: &str = "position";
        let fields: Vec<&str> = s.split_whitespace().collect();
        let [board, captured, mover, ply] = fields[..] else {
            return Err(NotationError::new(
                WHAT,
                format!(
                    "expected 4 fields (squares, captured, player to move, ply), found {}",
                    fields.len()
                ),
            ));
        };
        let cells: Vec<&str> = board.split(',').collect();
        if cells.len() != SQUARES {
            return Err(NotationError::new(
                WHAT,
                format!("expected 12 comma-separated squares, found {}", cells.len()),
            ));
        }
        let mut squares = [0; SQUARES];
        let mut pieces = [0; SQUARES];
        for (i, cell) in cells.iter().enumerate() {
            let (stones, piece) = parse_count_with_pieces(cell, true).filter(|&(n, _)| n >= 0).ok_or_else(|| {
                NotationError::new(
                    WHAT,
                    format!("square {i}: {cell:?} is not a stone count, optionally followed by q for a mandarin piece"),
                )
            })?;
            squares[i] = stones;
            pieces[i] = piece;
        }
        let (a, b) = captured.split_once(':').ok_or_else(|| {
            NotationError::new(
                WHAT,
                format!("captured counts {captured:?} must look like 6:0 or 18q:-4"),
            )
        })?;
        let parse_captured = |t: &str| {
            parse_count_with_pieces(t, false).ok_or_else(|| {
                NotationError::new(
                    WHAT,
                    format!("captured count {t:?} must be a whole number, followed by one q per captured piece"),
                )
            })
        };
        let (c1, p1) = parse_captured(a)?;
        let (c2, p2) = parse_captured(b)?;
        let to_move = match mover {
            "1" => Player::First,
            "2" => Player::Second,
            _ => {
                return Err(NotationError::new(
                    WHAT,
                    format!("player to move {mover:?} must be 1 (first) or 2 (second)"),
                ));
            }
        };
        let ply = ply
            .parse()
            .map_err(|_| NotationError::new(WHAT, format!("ply {ply:?} must be a whole number")))?;
        Ok(Setup {
            squares,
            pieces,
            captured: ByPlayer::new(c1, c2),
            captured_pieces: ByPlayer::new(p1, p2),
            to_move,
            ply,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Position, Rules};

    #[test]
    fn start_positions_read_as_documented() {
        assert_eq!(
            Setup::start(&Rules::STANDARD).to_string(),
            "10,5,5,5,5,5,10,5,5,5,5,5 0:0 1 0"
        );
        assert_eq!(
            Setup::start(&Rules::MANCALA_WORLD).to_string(),
            "q,5,5,5,5,5,q,5,5,5,5,5 0:0 1 0"
        );
    }

    /// The short paths for one and two digits write what the long one (and `format!`) does.
    #[test]
    fn integers_are_written_in_decimal() {
        let boundaries = [i64::MIN, i64::MIN + 1, i64::MAX, -1_000_000_000];
        for n in (-1_000..=1_000).chain(boundaries) {
            let mut out = TextBuf::new();
            out.integer(n);
            assert_eq!(&out.bytes[..out.len], n.to_string().as_bytes());
        }
    }

    #[test]
    fn extreme_counts_are_written_in_full() {
        let widest = Setup {
            squares: [i32::MIN; SQUARES],
            pieces: [i32::MAX; SQUARES],
            captured: ByPlayer::new(i32::MIN, i32::MIN),
            captured_pieces: ByPlayer::new(9, 100),
            to_move: Player::Second,
            ply: u32::MAX,
        };
        let square = "-2147483648qqqqqqqq";
        let text = widest.to_string();
        assert_eq!(
            text,
            format!(
                "{},{square} {square}:{square} 2 4294967295",
                [square; 11].join(",")
            )
        );
        assert_eq!(text.len(), MAX_SETUP_TEXT);
        let mixed = Setup {
            squares: [0, 7, 0, 10, 0, 100, 0, 1, 2, 3, 4, 2_147_483_647],
            pieces: [1, 0, 0, 0, 0, 0, 2, 0, -1, 0, 0, 0],
            captured: ByPlayer::new(0, -40),
            captured_pieces: ByPlayer::new(1, 0),
            to_move: Player::First,
            ply: 0,
        };
        assert_eq!(
            mixed.to_string(),
            "q,7,0,10,0,100,qq,1,2,3,4,2147483647 0q:-40 1 0"
        );
    }

    #[test]
    fn a_position_reads_as_its_setup() {
        let setup: Setup = "3q,0,0,0,3,1,10,5,1,1,1,0 29q:-4 2 13".parse().unwrap();
        let position = Position::from_setup(setup, Rules::MANCALA_WORLD).unwrap();
        assert_eq!(
            position.to_string(),
            "3q,0,0,0,3,1,10,5,1,1,1,0 29q:-4 2 13"
        );
    }

    #[test]
    fn pieces_and_debt_round_trip() {
        let text = "3q,0,0,0,3,1,10,5,1,1,1,0 29q:-4 2 13";
        let setup: Setup = text.parse().unwrap();
        assert_eq!(setup.pieces[0], 1);
        assert_eq!(setup.squares[0], 3);
        assert_eq!(setup.captured.second, -4);
        assert_eq!(setup.captured_pieces.first, 1);
        assert_eq!(setup.to_string(), text);
        Position::from_setup(setup, Rules::MANCALA_WORLD).unwrap();
    }

    #[test]
    fn bad_text_says_what_is_wrong() {
        for (text, needle) in [
            ("", "4 fields"),
            ("1,2 0:0 1 0", "12 comma-separated"),
            ("x,5,5,5,5,5,10,5,5,5,5,5 0:0 1 0", "square 0"),
            ("-1,5,5,5,5,5,10,5,5,5,5,5 0:0 1 0", "square 0"),
            ("10,5,5,5,5,5,10,5,5,5,5,5 0-0 1 0", "captured counts"),
            ("10,5,5,5,5,5,10,5,5,5,5,5 0:x 1 0", "captured count"),
            ("10,5,5,5,5,5,10,5,5,5,5,5 0:0 3 0", "player to move"),
            ("10,5,5,5,5,5,10,5,5,5,5,5 0:0 1 -1", "ply"),
        ] {
            let err = text.parse::<Setup>().unwrap_err().to_string();
            assert!(err.contains(needle), "{text:?}: {err}");
        }
        for text in [
            "", "+", "3", "12+", "3*", "a+", "+3", "1000-", "٣+", "3é", "é",
        ] {
            assert!(text.parse::<Move>().is_err(), "{text:?}");
        }
    }
}
