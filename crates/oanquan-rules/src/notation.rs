//! Text forms of moves and positions; see the crate docs for the grammar.

use std::fmt::{self, Write as _};
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

fn write_count_with_pieces(
    f: &mut impl fmt::Write,
    stones: i32,
    pieces: i32,
    omit_zero: bool,
) -> fmt::Result {
    if !(omit_zero && stones == 0 && pieces > 0) {
        write!(f, "{stones}")?;
    }
    for _ in 0..pieces.clamp(0, 8) {
        f.write_char('q')?;
    }
    Ok(())
}

impl fmt::Display for Setup {
    /// `<12 squares> <captured> <to move> <ply>`, e.g. the standard start
    /// `10,5,5,5,5,5,10,5,5,5,5,5 0:0 1 0`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for i in 0..SQUARES {
            if i > 0 {
                f.write_char(',')?;
            }
            write_count_with_pieces(f, self.squares[i], self.pieces[i], true)?;
        }
        f.write_char(' ')?;
        write_count_with_pieces(f, self.captured.first, self.captured_pieces.first, false)?;
        f.write_char(':')?;
        write_count_with_pieces(f, self.captured.second, self.captured_pieces.second, false)?;
        let mover = match self.to_move {
            Player::First => 1,
            Player::Second => 2,
        };
        write!(f, " {mover} {}", self.ply)
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
