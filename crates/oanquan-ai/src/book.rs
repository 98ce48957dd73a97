//! The opening book: the first plies of each preset, searched deeply once by a command and
//! committed as text (`data/opening-book.txt`, compiled in).
//!
//! # Format
//!
//! One entry a line; `#` starts a comment line. An entry is
//!
//! ```text
//! PRESET [MOVE...] : BEST EVAL DEPTH NODES ~CHECK
//! ```
//!
//! * `PRESET [MOVE...]`: the position, as the moves that reach it from the preset's start;
//! * `BEST`: the move to play there;
//! * `EVAL`: the search's value in points for the player to move, prefixed `=` when exact;
//! * `DEPTH`, `NODES`: the search that found it;
//! * `~CHECK`: eight hex digits, the FNV-1a hash of everything before ` ~`, so that a damaged
//!   line (a changed move or value that is still well formed) is refused.
//!
//! Entries are keyed by the position (board, pieces, player to move and ply — the same key as
//! the transposition table) and the rule set, so a position reached by two move orders finds
//! the same entry. [`OpeningBook::parse`] replays every line and refuses the whole book on the
//! first bad one: a preset it does not know, an illegal or finished line, an illegal best move,
//! a position listed twice, a bad field or checksum.

use std::collections::HashMap;
use std::fmt;
use std::sync::OnceLock;

use oanquan_rules::{Move, Position, Preset, Rules};

use crate::zobrist::{repetition_key, search_key};

/// The committed book, compiled in.
const BOOK_TEXT: &str = include_str!("../data/opening-book.txt");

/// One book entry: what a deep search found in a position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BookEntry {
    /// The move to play.
    pub mv: Move,
    /// The search's value in points for the player to move.
    pub eval_points: i32,
    /// Whether that value is exact (the search reached the end of every line).
    pub exact: bool,
    /// The search's depth, in plies.
    pub depth: u32,
    /// The search's nodes.
    pub nodes: u64,
}

impl BookEntry {
    /// The book line for this entry in the position reached by `moves` from `preset`'s start,
    /// checksum included (what [`OpeningBook::parse`] reads).
    #[must_use]
    pub fn line(&self, preset: Preset, moves: &[Move]) -> String {
        let mut body = preset.name().to_owned();
        for mv in moves {
            body += &format!(" {mv}");
        }
        body += &format!(
            " : {} {}{:+} {} {}",
            self.mv,
            if self.exact { "=" } else { "" },
            self.eval_points,
            self.depth,
            self.nodes
        );
        format!("{body} ~{:08x}", fnv1a(body.as_bytes()))
    }
}

/// Why a book was refused: the first bad line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BookError {
    /// The line's number, from 1.
    pub line: usize,
    /// What is wrong with it.
    pub reason: String,
}

impl fmt::Display for BookError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "opening book line {}: {}", self.line, self.reason)
    }
}

impl std::error::Error for BookError {}

/// A parsed opening book.
#[derive(Debug, Clone, Default)]
pub struct OpeningBook {
    entries: HashMap<(Rules, u64), BookEntry>,
}

fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5_u32, |h, &b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

fn position_key(position: &Position) -> (Rules, u64) {
    (
        *position.rules(),
        search_key(repetition_key(position), position.ply()),
    )
}

impl OpeningBook {
    /// Reads a book in the format of the module docs.
    ///
    /// # Errors
    ///
    /// The first line that is not a valid entry (see the module docs).
    pub fn parse(text: &str) -> Result<OpeningBook, BookError> {
        let mut book = OpeningBook::default();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let err = |reason: String| BookError {
                line: i + 1,
                reason,
            };
            let (position, entry) = parse_line(line).map_err(err)?;
            if book
                .entries
                .insert(position_key(&position), entry)
                .is_some()
            {
                return Err(err("the position is listed twice".into()));
            }
        }
        Ok(book)
    }

    /// The entry for `position`, if the book has one (same rule set, board, player to move and
    /// ply as one of its positions).
    #[must_use]
    pub fn get(&self, position: &Position) -> Option<BookEntry> {
        if position.is_over() {
            return None;
        }
        self.entries.get(&position_key(position)).copied()
    }

    /// How many positions the book holds.
    #[must_use]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the book is empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The book compiled into the crate (parsed once). Empty if the committed file were damaged,
    /// which the crate's tests rule out.
    #[must_use]
    pub fn builtin() -> &'static OpeningBook {
        static BOOK: OnceLock<OpeningBook> = OnceLock::new();
        BOOK.get_or_init(|| OpeningBook::parse(BOOK_TEXT).unwrap_or_default())
    }
}

fn parse_line(line: &str) -> Result<(Position, BookEntry), String> {
    let (body, check) = line
        .rsplit_once(" ~")
        .ok_or("no ~checksum at the end of the line")?;
    let check = u32::from_str_radix(check.trim(), 16).map_err(|_| "a bad checksum field")?;
    if check != fnv1a(body.as_bytes()) {
        return Err("the checksum does not match: the line is damaged".into());
    }
    let (path, result) = body.split_once(" : ").ok_or("no ' : ' separator")?;
    let mut path = path.split_whitespace();
    let preset: Preset = path
        .next()
        .ok_or("no preset")?
        .parse()
        .map_err(|e| format!("{e}"))?;
    let mut position = Position::new(preset.rules()).map_err(|e| format!("{e}"))?;
    for token in path {
        let mv: Move = token.parse().map_err(|e| format!("move {token}: {e}"))?;
        position = position
            .play(mv)
            .map_err(|e| format!("move {token}: {e}"))?
            .0;
    }
    if position.is_over() {
        return Err("the line ends the game".into());
    }
    let fields: Vec<&str> = result.split_whitespace().collect();
    let [mv, eval, depth, nodes] = fields[..] else {
        return Err("expected BEST EVAL DEPTH NODES".into());
    };
    let mv: Move = mv.parse().map_err(|e| format!("best move {mv}: {e}"))?;
    position
        .check(mv)
        .map_err(|e| format!("best move {mv}: {e}"))?;
    let (exact, eval) = match eval.strip_prefix('=') {
        Some(rest) => (true, rest),
        None => (false, eval),
    };
    let entry = BookEntry {
        mv,
        eval_points: eval.parse().map_err(|_| format!("bad eval {eval}"))?,
        exact,
        depth: depth.parse().map_err(|_| format!("bad depth {depth}"))?,
        nodes: nodes.parse().map_err(|_| format!("bad nodes {nodes}"))?,
    };
    Ok((position, entry))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mv(s: &str) -> Move {
        s.parse().unwrap()
    }

    fn entry(m: &str) -> BookEntry {
        BookEntry {
            mv: mv(m),
            eval_points: -3,
            exact: false,
            depth: 12,
            nodes: 1000,
        }
    }

    #[test]
    fn the_builtin_book_parses_and_its_moves_are_legal() {
        let book = OpeningBook::parse(BOOK_TEXT).expect("the committed book parses");
        assert!(!book.is_empty());
        for preset in Preset::ALL {
            let start = Position::new(preset.rules()).unwrap();
            let e = book
                .get(&start)
                .expect("every preset's start is in the book");
            assert!(start.legal_moves().contains(&e.mv));
        }
        // Every entry's move is legal in its own position (parse checks it; this checks again
        // through the lookup, by walking every line).
        for line in BOOK_TEXT
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
        {
            let (pos, e) = parse_line(line).unwrap();
            assert_eq!(book.get(&pos), Some(e));
            assert!(pos.legal_moves().contains(&e.mv), "{line}");
        }
        assert_eq!(OpeningBook::builtin().len(), book.len());
    }

    #[test]
    fn lines_round_trip_and_transpose() {
        let a = entry("3+").line(Preset::Standard, &[mv("4+"), mv("11+")]);
        let b = entry("2-").line(Preset::Traditional, &[]);
        let book = OpeningBook::parse(&format!("# comment\n{a}\n\n{b}\n")).unwrap();
        assert_eq!(book.len(), 2);
        let mut pos = Position::new(Preset::Standard.rules()).unwrap();
        pos.play_unchecked(mv("4+"));
        pos.play_unchecked(mv("11+"));
        assert_eq!(book.get(&pos), Some(entry("3+")));
        // Same board and ply under other rules: not this entry.
        let other = Position::new(Preset::Standard.rules()).unwrap();
        assert_eq!(book.get(&other), None);
        let trad = Position::new(Preset::Traditional.rules()).unwrap();
        assert_eq!(book.get(&trad), Some(entry("2-")));
    }

    #[test]
    fn damaged_entries_are_refused() {
        let good = entry("3+").line(Preset::Standard, &[mv("4+"), mv("11+")]);
        assert!(OpeningBook::parse(&good).is_ok());
        let damaged = [
            // A changed but well-formed move: only the checksum catches it.
            good.replace(": 3+", ": 3-"),
            good.replace("-3 12", "+9 12"),
            // The checksum itself.
            good[..good.len() - 1].to_owned() + "0",
            good.split(" ~").next().unwrap().to_owned(),
        ];
        for line in &damaged {
            let e = OpeningBook::parse(&format!("{good}\n{line}\n")).unwrap_err();
            assert_eq!(e.line, 2, "{line}: {e}");
        }
        // Well-formed lines (valid checksums) with bad content.
        let bad = [
            entry("3+").line(Preset::Standard, &[mv("4+"), mv("4+")]), // not the mover's square
            entry("8+").line(Preset::Standard, &[]),                   // illegal best move
            entry("3+").line(Preset::Standard, &[mv("4+"), mv("11+")]), // listed twice
        ];
        for line in &bad {
            assert!(
                OpeningBook::parse(&format!("{good}\n{line}\n")).is_err(),
                "{line}"
            );
        }
        for junk in ["standard : 3+ 1 2 ~zz", "nonsense ~00000000", "standard"] {
            assert!(OpeningBook::parse(junk).is_err(), "{junk}");
        }
    }
}
