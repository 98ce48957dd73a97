//! Moves in the player's own terms, and what the player types at the prompt.
//!
//! The server speaks ring indices (RULES.md): the first player owns squares 1..5, the second
//! player 7..11, and RIGHT (+1) is "to my right" from the mover's own seat for both players. A
//! player thinks in "my third square from the left, sow to the right", so the client translates:
//!
//! * first player (South, sees the board as drawn in RULES.md): own square `k` is ring `k`;
//! * second player (North, sees it rotated 180°): own squares left to right are ring 7, 8, 9,
//!   10, 11 — the drawing shows `11 10 9 8 7` on top from South's seat, so from North's seat the
//!   order reverses. Own square `k` is ring `k + 6`. Walking 7 → 8 is +1, which is to North's
//!   right, matching the rule that +1 is "to my right" for both players.
//!
//! So the direction never changes with the seat; only the square number is offset.

use std::fmt;
use std::str::FromStr;

use oanquan_proto::v1::{Direction, Move, Player, Position};

/// A seat at the table. Unlike the proto `Player` it has no "unspecified" value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    First,
    Second,
}

impl Side {
    pub fn from_proto(player: Player) -> Option<Self> {
        match player {
            Player::First => Some(Side::First),
            Player::Second => Some(Side::Second),
            Player::Unspecified => None,
        }
    }

    /// Reads a raw proto enum value; unknown numbers (a newer server) are `None`.
    pub fn from_i32(value: i32) -> Option<Self> {
        Player::try_from(value).ok().and_then(Self::from_proto)
    }

    pub fn to_proto(self) -> Player {
        match self {
            Side::First => Player::First,
            Side::Second => Player::Second,
        }
    }

    pub fn other(self) -> Self {
        match self {
            Side::First => Side::Second,
            Side::Second => Side::First,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Side::First => "first",
            Side::Second => "second",
        }
    }

    /// Ring index of the player's own square `local` (1..5, left to right from their seat).
    fn ring_offset(self) -> u32 {
        match self {
            Side::First => 0,
            Side::Second => 6,
        }
    }

    /// The ring indices of the player's five squares, left to right as they see them.
    pub fn own_ring_squares(self) -> [u32; 5] {
        let o = self.ring_offset();
        [o + 1, o + 2, o + 3, o + 4, o + 5]
    }

    /// The player's own square number (1..5) for a ring index, if it is one of theirs.
    pub fn local_square(self, ring: u32) -> Option<u8> {
        let local = ring.checked_sub(self.ring_offset())?;
        u8::try_from(local).ok().filter(|l| (1..=5).contains(l))
    }
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Side {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "first" | "1" | "south" => Ok(Side::First),
            "second" | "2" | "north" => Ok(Side::Second),
            _ => Err(format!("`{s}` is not a seat (first or second)")),
        }
    }
}

/// A direction as the mover sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    Left,
    Right,
}

impl Dir {
    pub fn from_proto(direction: Direction) -> Option<Self> {
        match direction {
            Direction::Left => Some(Dir::Left),
            Direction::Right => Some(Dir::Right),
            Direction::Unspecified => None,
        }
    }

    pub fn to_proto(self) -> Direction {
        match self {
            Dir::Left => Direction::Left,
            Dir::Right => Direction::Right,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Dir::Left => "left",
            Dir::Right => "right",
        }
    }

    pub fn letter(self) -> char {
        match self {
            Dir::Left => 'l',
            Dir::Right => 'r',
        }
    }

    /// The ring step, as written in RULES.md.
    pub fn ring_step(self) -> &'static str {
        match self {
            Dir::Left => "-1",
            Dir::Right => "+1",
        }
    }
}

/// A move in the mover's own terms: square 1..5 from their left, and a direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalMove {
    pub square: u8,
    pub dir: Dir,
}

impl LocalMove {
    /// Sorts moves as the player reads them: by their square 1 to 5, left before right. The
    /// server lists by board square, left before right on the board, which from the second
    /// seat read `1r 1l 2r 2l` (an outside probe saw it after a refused move).
    pub fn in_player_order(moves: &mut [LocalMove]) {
        moves.sort_by_key(|m| (m.square, m.dir != Dir::Left));
    }

    pub fn to_proto(self, side: Side) -> Move {
        Move {
            square: Some(side.ring_offset() + u32::from(self.square)),
            direction: self.dir.to_proto().into(),
        }
    }

    /// The mover's view of a proto move; `None` if the square is not the mover's or the
    /// direction is unset (a server would never send that, but the client must not panic).
    pub fn from_proto(side: Side, mv: &Move) -> Option<Self> {
        Some(Self {
            square: side.local_square(mv.square?)?,
            dir: Dir::from_proto(Direction::try_from(mv.direction).ok()?)?,
        })
    }

    /// Compact form, as listed after `legal moves:` and accepted at the prompt: `3r`.
    pub fn short(self) -> String {
        format!("{}{}", self.square, self.dir.letter())
    }
}

impl fmt::Display for LocalMove {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.square, self.dir.name())
    }
}

/// Why `side` cannot sow `mv` in `position`, told before the move goes to the server: the
/// server's refusal names ring squares (`square 8 is empty`), which are not the squares the
/// player typed. Only an empty square is caught here; the server judges everything else.
/// `None` when the square holds stones, or when the position does not say (the server decides).
pub fn empty_square(position: &Position, side: Side, mv: LocalMove) -> Option<String> {
    let stones = |ring: u32| {
        usize::try_from(ring)
            .ok()
            .and_then(|i| position.squares.get(i).copied())
    };
    let ring = side.own_ring_squares()[usize::from(mv.square.clamp(1, 5) - 1)];
    if stones(ring)? > 0 {
        return None;
    }
    let holding: Vec<String> = (1u8..)
        .zip(side.own_ring_squares())
        .filter(|&(_, ring)| stones(ring).unwrap_or(0) > 0)
        .map(|(local, _)| local.to_string())
        .collect();
    let mut why = format!(
        "square {} is empty: choose a square of yours that holds stones",
        mv.square
    );
    if !holding.is_empty() {
        why.push_str(&format!(" ({})", holding.join(", ")));
    }
    Some(why)
}

/// One line typed at the `play` prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    Move(LocalMove),
    Help,
    Board,
    Moves,
    Resign,
    Abort,
    Hint,
    /// Offer a draw, or accept the opponent's offer.
    Draw,
    /// Refuse the opponent's draw offer; after the game, a rematch.
    Decline,
    /// Claim the win against an opponent who stays away.
    Claim,
    /// Offer or accept a rematch (after the game).
    Rematch,
    Quit,
    Empty,
}

/// Why a typed line is not understood; the message is shown before a new prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputError(pub String);

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

const DIRECTION_WORDS: &[(&str, Dir)] = &[
    ("l", Dir::Left),
    ("left", Dir::Left),
    ("r", Dir::Right),
    ("right", Dir::Right),
];

/// Parses a prompt line: a command (`help`, `board`, `moves`, `hint`, `resign`, `abort`, `draw`,
/// `decline`/`no`, `claim`, `rematch`, `quit`) or a move such as `3 r`, `3r`, `3 left`, `r 3`,
/// `3-right`.
pub fn parse_input(line: &str) -> Result<Input, InputError> {
    let text = line.trim().to_lowercase();
    let command = |word: &str| match word {
        "" => Some(Input::Empty),
        "h" | "help" | "?" => Some(Input::Help),
        "b" | "board" => Some(Input::Board),
        "m" | "moves" | "legal" => Some(Input::Moves),
        "resign" => Some(Input::Resign),
        "abort" => Some(Input::Abort),
        "hint" => Some(Input::Hint),
        "draw" => Some(Input::Draw),
        "decline" | "no" => Some(Input::Decline),
        "claim" => Some(Input::Claim),
        "rematch" => Some(Input::Rematch),
        "q" | "quit" | "exit" => Some(Input::Quit),
        _ => None,
    };
    if let Some(command) = command(&text) {
        return Ok(command);
    }
    // A command with more after it (`hint 3`) was read as a move whose direction is `hint`.
    let mut words = text.split_whitespace();
    if let (Some(first), Some(_)) = (words.next(), words.next())
        && command(first).is_some()
    {
        return Err(InputError(format!(
            "`{first}` takes nothing after it: type `{first}` on its own"
        )));
    }
    // The line as typed, so that a refusal quotes it as typed (not lower-cased).
    parse_move(line).map(Input::Move)
}

/// Parses a move in the player's own terms.
pub fn parse_move(text: &str) -> Result<LocalMove, InputError> {
    let typed = crate::error::typed(text.trim());
    // Separators stand between the square and the direction (`3-r`, `3,r`), never around the
    // move: `-1r` is not square 1, and must not be played as if it were.
    let separator = |c: char| matches!(c, ',' | '-' | '/' | ':');
    if text.trim().starts_with(separator) || text.trim().ends_with(separator) {
        return Err(InputError(format!(
            "`{typed}` is not a move: type a square 1-5 and a direction, e.g. `3 r` or `2 left` (`help` for more)"
        )));
    }
    let cleaned: String = text
        .chars()
        .filter(|c| !c.is_whitespace() && !matches!(c, ',' | '-' | '/' | ':'))
        .collect::<String>()
        .to_lowercase();
    let digits_first = cleaned.starts_with(|c: char| c.is_ascii_digit());
    let split = cleaned
        .find(|c: char| c.is_ascii_digit() != digits_first)
        .unwrap_or(cleaned.len());
    let (a, b) = cleaned.split_at(split);
    let (number, word) = if digits_first { (a, b) } else { (b, a) };
    if number.is_empty() {
        return Err(InputError(format!(
            "`{typed}` is not a move: type a square 1-5 and a direction, e.g. `3 r` or `2 left` (`help` for more)"
        )));
    }
    if !number.chars().all(|c| c.is_ascii_digit()) || word.contains(|c: char| c.is_ascii_digit()) {
        return Err(InputError(format!(
            "`{typed}` is not a move: one square number and one direction, e.g. `3 r`"
        )));
    }
    // Letters that are no direction, with a number that is no square or with more than one
    // word of them (`bad utf8`, `3 r r`): the line is no move at all, rather than a wrong
    // square or a direction nobody typed (`rr`). A single unknown word after a square (`3 up`)
    // is named as the direction it stands for.
    // And a direction is one word as typed: `3 r ight` is a typo, not `3 right`, and a move
    // played from a typo cannot be taken back.
    let one_word = text.to_lowercase().contains(word);
    let known_direction = word.is_empty() || DIRECTION_WORDS.iter().any(|(w, _)| *w == word);
    let named_as_direction = matches!(number.parse::<u8>(), Ok(1..=5)) && one_word;
    if !one_word || (!known_direction && !named_as_direction) {
        return Err(InputError(format!(
            "`{typed}` is not a move: type a square 1-5 and a direction, e.g. `3 r` or `2 left` (`help` for more)"
        )));
    }
    let square = match number.parse::<u8>() {
        Ok(n @ 1..=5) => n,
        _ => {
            return Err(InputError(format!(
                "square `{}` is out of range: your squares are 1-5, counted from your left",
                crate::error::typed(number)
            )));
        }
    };
    if word.is_empty() {
        return Err(InputError(format!(
            "which direction? type `{square} l` (left) or `{square} r` (right)"
        )));
    }
    let dir = DIRECTION_WORDS
        .iter()
        .find(|(w, _)| *w == word)
        .map(|(_, d)| *d)
        .ok_or_else(|| {
            InputError(format!(
                "`{}` is not a direction: use l/left or r/right (as you see the board)",
                crate::error::typed(word)
            ))
        })?;
    Ok(LocalMove { square, dir })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moves_are_listed_in_the_players_order() {
        let local = |square, dir| LocalMove { square, dir };
        let mut moves = [
            local(2, Dir::Right),
            local(2, Dir::Left),
            local(1, Dir::Right),
            local(1, Dir::Left),
        ];
        LocalMove::in_player_order(&mut moves);
        assert_eq!(
            moves,
            [
                local(1, Dir::Left),
                local(1, Dir::Right),
                local(2, Dir::Left),
                local(2, Dir::Right)
            ]
        );
    }

    fn mv(square: u8, dir: Dir) -> Input {
        Input::Move(LocalMove { square, dir })
    }

    #[test]
    fn accepts_the_documented_forms() {
        for (text, want) in [
            ("3 r", mv(3, Dir::Right)),
            ("3r", mv(3, Dir::Right)),
            ("3 left", mv(3, Dir::Left)),
            ("  1 L ", mv(1, Dir::Left)),
            ("5RIGHT", mv(5, Dir::Right)),
            ("r 2", mv(2, Dir::Right)),
            ("left4", mv(4, Dir::Left)),
            ("3-r", mv(3, Dir::Right)),
            ("3, l", mv(3, Dir::Left)),
        ] {
            assert_eq!(parse_input(text), Ok(want), "{text:?}");
        }
    }

    #[test]
    fn commands() {
        assert_eq!(parse_input("help"), Ok(Input::Help));
        assert_eq!(parse_input("?"), Ok(Input::Help));
        assert_eq!(parse_input("Board"), Ok(Input::Board));
        assert_eq!(parse_input("quit"), Ok(Input::Quit));
        assert_eq!(parse_input("q"), Ok(Input::Quit));
        assert_eq!(parse_input("moves"), Ok(Input::Moves));
        assert_eq!(parse_input("resign"), Ok(Input::Resign));
        assert_eq!(parse_input("Abort"), Ok(Input::Abort));
        assert_eq!(parse_input("   "), Ok(Input::Empty));
        assert_eq!(parse_input("draw"), Ok(Input::Draw));
        assert_eq!(parse_input(" Decline "), Ok(Input::Decline));
        assert_eq!(parse_input("no"), Ok(Input::Decline));
        assert_eq!(parse_input("claim"), Ok(Input::Claim));
        assert_eq!(parse_input("REMATCH"), Ok(Input::Rematch));
    }

    #[test]
    fn rejects_bad_input_with_a_reason() {
        for (text, needle) in [
            ("6 r", "out of range"),
            // A direction split by a typo is no direction (an outside probe played `3 r ight`).
            ("3 r ight", "is not a move"),
            ("3 le ft", "is not a move"),
            ("r ight 3", "is not a move"),
            ("0 l", "out of range"),
            ("99999999999999999999 l", "out of range"),
            ("3", "which direction"),
            ("3 up", "not a direction"),
            ("foo", "not a move"),
            ("3 r 4", "not a move"),
            ("r", "not a move"),
            ("ｒ３", "not a move"),
            // A leading or trailing separator is not a separator: `-1r` is not `1r`.
            ("-1r", "not a move"),
            ("--3r", "not a move"),
            (",3r", "not a move"),
            ("3r-", "not a move"),
            // Words that are no direction make the line no move: not a wrong square taken from
            // its digits (`utf8`), nor a direction nobody typed (`rr`).
            ("\u{fffd}\u{fffd} bad utf8", "is not a move"),
            ("hello 8", "is not a move"),
            ("3 r r", "`3 r r` is not a move"),
            ("3 up up", "`3 up up` is not a move"),
            ("18446744073709551616 up", "is not a move"),
            (
                "18446744073709551616 r",
                "square `18446744073709551616` is out of range",
            ),
            ("-5 r", "not a move"),
            ("hello 3", "`hello` is not a direction"),
            ("hint 3", "`hint` takes nothing after it"),
            ("Resign now", "`resign` takes nothing after it"),
            ("b 3", "`b` takes nothing after it"),
        ] {
            match parse_input(text) {
                Err(InputError(msg)) => assert!(msg.contains(needle), "{text:?}: {msg}"),
                Ok(other) => panic!("{text:?} parsed as {other:?}"),
            }
        }
        for inner in ["3-r", "3,r", "3/r", "3:r", "3 - r"] {
            assert!(parse_input(inner).is_ok(), "{inner:?}");
        }
    }

    /// What was typed is quoted as typed input is: cut at 64 characters, controls escaped.
    #[test]
    fn refused_input_is_quoted_short_and_escaped() {
        for text in [
            "\u{1b}]0;pwned\u{7}",
            &"A".repeat(10_000),
            &"1".repeat(10_000),
        ] {
            let Err(InputError(msg)) = parse_input(text) else {
                panic!("{text:?} parsed")
            };
            assert!(msg.len() < 300, "{msg}");
            assert!(!msg.contains(|c: char| c.is_control()), "{msg:?}");
        }
        // As typed: not lower-cased.
        let Err(InputError(msg)) = parse_input("\u{1b}[2J Nope") else {
            panic!("parsed")
        };
        assert!(msg.starts_with(r"`\u{1b}[2J Nope` is not a move"), "{msg}");
    }

    #[test]
    fn first_player_squares_are_ring_1_to_5() {
        let m = LocalMove {
            square: 1,
            dir: Dir::Left,
        }
        .to_proto(Side::First);
        assert_eq!((m.square, m.direction()), (Some(1), Direction::Left));
        assert_eq!(Side::First.own_ring_squares(), [1, 2, 3, 4, 5]);
    }

    #[test]
    fn second_player_sees_ring_7_at_their_left() {
        // From North's seat the RULES.md drawing is upside down: 7 8 9 10 11 left to right.
        assert_eq!(Side::Second.own_ring_squares(), [7, 8, 9, 10, 11]);
        let m = LocalMove {
            square: 1,
            dir: Dir::Right,
        }
        .to_proto(Side::Second);
        // Own leftmost square, sown to the right = toward 8 = +1 = proto RIGHT.
        assert_eq!((m.square, m.direction()), (Some(7), Direction::Right));
        let m = LocalMove {
            square: 5,
            dir: Dir::Left,
        }
        .to_proto(Side::Second);
        assert_eq!((m.square, m.direction()), (Some(11), Direction::Left));
    }

    #[test]
    fn proto_round_trip_and_foreign_squares() {
        for side in [Side::First, Side::Second] {
            for square in 1..=5 {
                for dir in [Dir::Left, Dir::Right] {
                    let local = LocalMove { square, dir };
                    assert_eq!(
                        LocalMove::from_proto(side, &local.to_proto(side)),
                        Some(local)
                    );
                }
            }
        }
        let foreign = Move {
            square: Some(8),
            direction: Direction::Left.into(),
        };
        assert_eq!(LocalMove::from_proto(Side::First, &foreign), None);
        let unset = Move {
            square: Some(2),
            direction: 0,
        };
        assert_eq!(LocalMove::from_proto(Side::First, &unset), None);
        let junk = Move {
            square: Some(u32::MAX),
            direction: 77,
        };
        assert_eq!(LocalMove::from_proto(Side::Second, &junk), None);
    }

    #[test]
    fn an_empty_square_is_refused_in_the_players_own_numbers() {
        // Ring 8 (North's square 2) and ring 1 (South's square 1) are empty.
        let position = Position {
            squares: vec![10, 0, 5, 5, 5, 5, 10, 5, 0, 5, 0, 5],
            ..Position::default()
        };
        let mv = |square| LocalMove {
            square,
            dir: Dir::Right,
        };
        assert_eq!(
            empty_square(&position, Side::First, mv(1)).as_deref(),
            Some("square 1 is empty: choose a square of yours that holds stones (2, 3, 4, 5)")
        );
        assert_eq!(empty_square(&position, Side::First, mv(2)), None);
        assert_eq!(
            empty_square(&position, Side::Second, mv(2)).as_deref(),
            Some("square 2 is empty: choose a square of yours that holds stones (1, 3, 5)")
        );
        assert_eq!(empty_square(&position, Side::Second, mv(1)), None);
        // A position that does not say is left to the server; no input panics.
        assert_eq!(
            empty_square(&Position::default(), Side::Second, mv(5)),
            None
        );
        for square in [0, 6, u8::MAX] {
            let _ = empty_square(&position, Side::Second, mv(square));
        }
    }

    #[test]
    fn short_form_parses_back() {
        let m = LocalMove {
            square: 4,
            dir: Dir::Left,
        };
        assert_eq!(m.short(), "4l");
        assert_eq!(parse_move(&m.short()), Ok(m));
        assert_eq!(parse_move(&m.to_string()), Ok(m));
    }
}
