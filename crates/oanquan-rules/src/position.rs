use std::fmt;

use serde::{Deserialize, Serialize};

use crate::outcome::{EndReason, Outcome};
use crate::player::{ByPlayer, Direction, Player};
use crate::rules::{
    CITIZEN_STONES, EmptyMandarinNext, EndCondition, MANDARIN_STONES, Rules, RulesError,
};
use crate::trace::{NoTrace, Step, Tracer};

/// Squares on the ring.
pub const SQUARES: usize = 12;
/// The two mandarin squares' ring indices (left, right as the first player sees them).
pub const MANDARIN_SQUARES: [u8; 2] = [0, 6];
/// The most plain stones the board may hold in all (and so any one square).
///
/// Sowing only moves stones around the board, so with at most this many on it no square (a `u8`)
/// can overflow, whatever the position. Only a refill adds stones to the board, borrowed against
/// a captured count; a game whose borrowing would take the board past this bound ends instead
/// (see the crate docs). Ordinary games stay far below it: a board starts with 70 (50 with
/// pieces).
pub const MAX_BOARD_STONES: i32 = 255;
/// The deepest debt a captured count may hold: counts below `-MAX_DEBT` are refused by
/// [`Position::from_setup`], and a refill that would go below it ends the game instead. With
/// the total fixed, a count can then never exceed the rule set's total plus `MAX_DEBT`, so every
/// score and sum of scores stays far inside `i32`.
pub const MAX_DEBT: i32 = 100_000;

/// Whether ring square `square` is a mandarin square.
#[must_use]
pub const fn is_mandarin(square: u8) -> bool {
    square == 0 || square == 6
}

/// A move: sow from one of the mover's citizen squares in a direction.
///
/// Its text form (see the crate docs) is the ring index followed by `+` or `-`: `3-`, `10+`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Move {
    /// Ring index of the square to empty, `1..=5` for the first player, `7..=11` for the second.
    pub square: u8,
    /// Which way to sow.
    pub direction: Direction,
}

impl Move {
    /// A move from `square` towards `direction`.
    #[must_use]
    pub const fn new(square: u8, direction: Direction) -> Move {
        Move { square, direction }
    }
}

/// A plain, unvalidated position, with public fields: what a user, a file or the network hands
/// in. Turn it into a playable [`Position`] with [`Position::from_setup`].
///
/// Counts are `i32` so that any input maps here without loss and bad values (negative stones, a
/// second piece) are reported by validation instead of being unrepresentable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Setup {
    /// Plain stones in each square, by ring index.
    pub squares: [i32; SQUARES],
    /// Mandarin pieces in each square, by ring index (only squares 0 and 6 may hold one).
    pub pieces: [i32; SQUARES],
    /// Plain stones captured by each player; negative after borrowing to refill.
    pub captured: ByPlayer<i32>,
    /// Mandarin pieces captured by each player.
    pub captured_pieces: ByPlayer<i32>,
    /// The player to move.
    pub to_move: Player,
    /// Moves played so far (the opening protection depends on it).
    pub ply: u32,
}

impl Setup {
    /// The start position of a rule set.
    #[must_use]
    pub fn start(rules: &Rules) -> Setup {
        let mut squares = [i32::from(CITIZEN_STONES); SQUARES];
        let mut pieces = [0; SQUARES];
        for m in MANDARIN_SQUARES {
            if rules.has_pieces() {
                squares[m as usize] = 0;
                pieces[m as usize] = 1;
            } else {
                squares[m as usize] = i32::from(MANDARIN_STONES);
            }
        }
        Setup {
            squares,
            pieces,
            captured: ByPlayer::default(),
            captured_pieces: ByPlayer::default(),
            to_move: Player::First,
            ply: 0,
        }
    }
}

/// Why a [`Setup`] is not a playable position under a rule set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PositionError {
    /// The rule set itself is contradictory.
    Rules(RulesError),
    /// A square holds a negative number of stones.
    NegativeStones {
        /// Ring index.
        square: u8,
    },
    /// A square holds more than [`MAX_BOARD_STONES`] stones.
    TooManyStones {
        /// Ring index.
        square: u8,
    },
    /// The board holds more than [`MAX_BOARD_STONES`] plain stones in all.
    BoardOverfull {
        /// Plain stones on the board.
        found: i64,
    },
    /// A square holds a piece count other than 0 or 1.
    BadPieceCount {
        /// Ring index.
        square: u8,
    },
    /// A piece stands on a citizen square.
    PieceOutsideMandarinSquare {
        /// Ring index.
        square: u8,
    },
    /// Pieces on the board or captured under a rule set without pieces, or pieces on the board
    /// plus captured pieces not adding up to 2.
    PieceTotal {
        /// Pieces the rule set plays with (0 or 2).
        expected: i32,
        /// Pieces in the setup.
        found: i32,
    },
    /// A captured stone count is out of range: a debt deeper than [`MAX_DEBT`], or more than
    /// the rule set's total plus [`MAX_DEBT`] (which no position adding up to its total has).
    CapturedOutOfRange {
        /// Whose count.
        player: Player,
    },
    /// A captured piece count is not 0, 1 or 2.
    CapturedPiecesOutOfRange {
        /// Whose count.
        player: Player,
    },
    /// Stones on the board (pieces counting their value) plus both scores do not add up to the
    /// rule set's total.
    WrongTotal {
        /// The rule set's total (70 in every preset).
        expected: i32,
        /// What the setup adds up to.
        found: i64,
    },
    /// The game is not over, yet the player to move has no stones on their side. Positions are
    /// given after the refill that starts a turn.
    MoverHasNoStones,
    /// The game is over by the setup itself (its end condition holds, or its ply reached
    /// `max_plies`), yet plain stones are left on the board. The move that ends a game also
    /// collects them (RULES.md §6 and §8), so no finished game shows them, and a winner read
    /// off such a setup would ignore them.
    Uncollected {
        /// Plain stones on the board.
        stones: i64,
    },
}

impl fmt::Display for PositionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            PositionError::Rules(e) => write!(f, "invalid rule set: {e}"),
            PositionError::NegativeStones { square } => {
                write!(f, "square {square} holds a negative number of stones")
            }
            PositionError::TooManyStones { square } => write!(
                f,
                "square {square} holds more than {MAX_BOARD_STONES} stones, the most the whole board may hold"
            ),
            PositionError::BoardOverfull { found } => write!(
                f,
                "the board holds {found} stones in all; at most {MAX_BOARD_STONES}"
            ),
            PositionError::BadPieceCount { square } => {
                write!(f, "square {square} must hold 0 or 1 mandarin piece")
            }
            PositionError::PieceOutsideMandarinSquare { square } => write!(
                f,
                "square {square} is a citizen square; mandarin pieces stand only on squares 0 and 6"
            ),
            PositionError::PieceTotal { expected, found } => write!(
                f,
                "pieces on the board plus captured pieces must be {expected} under this rule set, found {found}"
            ),
            PositionError::CapturedOutOfRange { player } => write!(
                f,
                "the {player}'s captured count is out of range: a debt of at most {MAX_DEBT} stones, and no more than the rule set's total plus {MAX_DEBT}"
            ),
            PositionError::CapturedPiecesOutOfRange { player } => write!(
                f,
                "the {player}'s captured pieces must be 0, 1 or 2"
            ),
            PositionError::WrongTotal { expected, found } => write!(
                f,
                "stones on the board plus both scores must add up to {expected}, found {found}"
            ),
            PositionError::MoverHasNoStones => f.write_str(
                "the player to move has no stones on their side; give the position after the refill that starts the turn",
            ),
            PositionError::Uncollected { stones } => write!(
                f,
                "the game is over in this position (by the rule set's end condition or its ply limit), yet {stones} stones are still on the board; the move that ends a game collects them into the captured counts, so give the position after that collection"
            ),
        }
    }
}

impl std::error::Error for PositionError {}

impl From<RulesError> for PositionError {
    fn from(e: RulesError) -> Self {
        PositionError::Rules(e)
    }
}

/// Why a move was refused. The position is `Copy` and [`Position::play`] takes it by reference,
/// so the caller still holds it unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PlayError {
    /// The game is over.
    GameOver,
    /// No square has that index (0..=11 exist).
    NoSuchSquare {
        /// The index given.
        square: u8,
    },
    /// Mandarin squares are never sown from.
    MandarinSquare {
        /// The index given.
        square: u8,
    },
    /// The square is a citizen square of the other player.
    NotYourSquare {
        /// The index given.
        square: u8,
        /// The player to move.
        to_move: Player,
    },
    /// The square holds no stones.
    EmptySquare {
        /// The index given.
        square: u8,
    },
}

impl fmt::Display for PlayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            PlayError::GameOver => f.write_str("the game is over; no more moves can be played"),
            PlayError::NoSuchSquare { square } => {
                write!(f, "there is no square {square}; ring squares are 0 to 11")
            }
            PlayError::MandarinSquare { square } => write!(
                f,
                "square {square} is a mandarin square; sow from one of your own citizen squares"
            ),
            PlayError::NotYourSquare { square, to_move } => {
                let [a, .., b] = to_move.citizen_squares();
                write!(
                    f,
                    "square {square} belongs to the {}; the {to_move} to move sows from squares {a} to {b}",
                    to_move.other()
                )
            }
            PlayError::EmptySquare { square } => {
                write!(f, "square {square} is empty; choose a square with stones")
            }
        }
    }
}

impl std::error::Error for PlayError {}

/// The legal moves of a position, on the stack (at most 5 squares × 2 directions).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct MoveList {
    moves: [Move; 10],
    len: u8,
}

impl MoveList {
    const fn new() -> MoveList {
        MoveList {
            moves: [Move::new(0, Direction::Left); 10],
            len: 0,
        }
    }

    fn push(&mut self, mv: Move) {
        self.moves[self.len as usize] = mv;
        self.len += 1;
    }
}

impl std::ops::Deref for MoveList {
    type Target = [Move];
    fn deref(&self) -> &[Move] {
        &self.moves[..self.len as usize]
    }
}

impl fmt::Debug for MoveList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<'a> IntoIterator for &'a MoveList {
    type Item = &'a Move;
    type IntoIter = std::slice::Iter<'a, Move>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// A validated, playable position under a rule set.
///
/// It exists only through [`Position::new`] (the start) or [`Position::from_setup`], so every
/// `Position` is consistent: its points add up to the rule set's total and the player to move can
/// move unless the game is over.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Position {
    rules: Rules,
    squares: [u8; SQUARES],
    /// Bit 0: a piece on square 0; bit 1: a piece on square 6.
    pieces: u8,
    captured: ByPlayer<i32>,
    captured_pieces: ByPlayer<u8>,
    to_move: Player,
    ply: u32,
    end: Option<EndReason>,
}

const fn piece_bit(square: u8) -> u8 {
    if square == 0 { 1 } else { 2 }
}

const fn next(square: u8, direction: Direction) -> u8 {
    match direction {
        Direction::Right => {
            if square == 11 {
                0
            } else {
                square + 1
            }
        }
        Direction::Left => {
            if square == 0 {
                11
            } else {
                square - 1
            }
        }
    }
}

impl Position {
    /// The start position of `rules`.
    ///
    /// # Errors
    ///
    /// [`PositionError::Rules`] if the rule set is contradictory.
    pub fn new(rules: Rules) -> Result<Position, PositionError> {
        Position::from_setup(Setup::start(&rules), rules)
    }

    /// Validates a setup under a rule set.
    ///
    /// A valid position has no negative counts; at most [`MAX_BOARD_STONES`] plain stones on the
    /// board in all; captured stone counts from `-MAX_DEBT` to the rule set's total plus
    /// [`MAX_DEBT`]; 0 to 2 captured pieces each; pieces only on mandarin squares, two in all
    /// under a piece setup (none otherwise); and points adding up to the rule set's total. Play
    /// never leaves these bounds, so every position a move produces passes this check again.
    ///
    /// A setup in which the game is already over (the end condition holds, or `ply` reached
    /// `max_plies`) is accepted as a finished position with no legal moves, as play leaves one:
    /// with no plain stones on the board (pieces still standing may stay), since the move that
    /// ends a game collects them. Its end reason is read off the setup: the end condition if it
    /// holds, else the ply limit. A game that ended by repetition or by the refill bound does
    /// not show it; its last position reads as over by the end condition (the collection empties
    /// the board) or, under a piece setup with a piece still standing, not as a finished
    /// position at all ([`PositionError::MoverHasNoStones`]).
    ///
    /// # Errors
    ///
    /// The first problem found, as a [`PositionError`].
    pub fn from_setup(setup: Setup, rules: Rules) -> Result<Position, PositionError> {
        rules.validate()?;
        let mut squares = [0u8; SQUARES];
        let mut pieces = 0u8;
        let mut total: i64 = 0;
        let mut board_stones: i64 = 0;
        for (i, (&stones, &piece)) in setup.squares.iter().zip(&setup.pieces).enumerate() {
            let square = i as u8;
            if stones < 0 {
                return Err(PositionError::NegativeStones { square });
            }
            let Some(stones_u8) = u8::try_from(stones)
                .ok()
                .filter(|_| stones <= MAX_BOARD_STONES)
            else {
                return Err(PositionError::TooManyStones { square });
            };
            if !(0..=1).contains(&piece) {
                return Err(PositionError::BadPieceCount { square });
            }
            if piece == 1 {
                if !is_mandarin(square) {
                    return Err(PositionError::PieceOutsideMandarinSquare { square });
                }
                pieces |= piece_bit(square);
            }
            board_stones += i64::from(stones);
            total += i64::from(stones) + i64::from(piece) * i64::from(rules.piece_value());
            squares[i] = stones_u8;
        }
        if board_stones > i64::from(MAX_BOARD_STONES) {
            return Err(PositionError::BoardOverfull {
                found: board_stones,
            });
        }
        for player in Player::ALL {
            let c = setup.captured[player];
            let p = setup.captured_pieces[player];
            if !(-MAX_DEBT..=rules.total().saturating_add(MAX_DEBT)).contains(&c) {
                return Err(PositionError::CapturedOutOfRange { player });
            }
            if !(0..=2).contains(&p) {
                return Err(PositionError::CapturedPiecesOutOfRange { player });
            }
            total += i64::from(c) + i64::from(p) * i64::from(rules.piece_value());
        }
        let expected_pieces = if rules.has_pieces() { 2 } else { 0 };
        let found_pieces =
            pieces.count_ones() as i32 + setup.captured_pieces.first + setup.captured_pieces.second;
        if found_pieces != expected_pieces {
            return Err(PositionError::PieceTotal {
                expected: expected_pieces,
                found: found_pieces,
            });
        }
        if total != i64::from(rules.total()) {
            return Err(PositionError::WrongTotal {
                expected: rules.total(),
                found: total,
            });
        }
        let mut pos = Position {
            rules,
            squares,
            pieces,
            captured: setup.captured,
            captured_pieces: setup.captured_pieces.map(|p| p as u8),
            to_move: setup.to_move,
            ply: setup.ply,
            end: None,
        };
        if pos.end_condition_met() {
            pos.end = Some(EndReason::Mandarins);
        } else if pos.ply >= rules.max_plies {
            pos.end = Some(EndReason::PlyLimit);
        } else if pos.side_is_empty(pos.to_move) {
            return Err(PositionError::MoverHasNoStones);
        }
        if pos.end.is_some() && board_stones > 0 {
            return Err(PositionError::Uncollected {
                stones: board_stones,
            });
        }
        Ok(pos)
    }

    /// The plain setup of this position (drops the rule set and the end state).
    #[must_use]
    pub fn to_setup(&self) -> Setup {
        Setup {
            squares: self.squares.map(i32::from),
            pieces: self.pieces().map(i32::from),
            captured: self.captured,
            captured_pieces: self.captured_pieces.map(i32::from),
            to_move: self.to_move,
            ply: self.ply,
        }
    }

    /// The rule set this position is played under.
    #[must_use]
    pub const fn rules(&self) -> &Rules {
        &self.rules
    }

    /// Plain stones in each square, by ring index.
    #[must_use]
    pub const fn squares(&self) -> [u8; SQUARES] {
        self.squares
    }

    /// Mandarin pieces in each square (1 on square 0 or 6 while its piece is there).
    #[must_use]
    pub fn pieces(&self) -> [u8; SQUARES] {
        let mut out = [0; SQUARES];
        for m in MANDARIN_SQUARES {
            out[m as usize] = u8::from(self.has_piece(m));
        }
        out
    }

    /// Whether the mandarin piece still stands on `square`.
    #[must_use]
    pub const fn has_piece(&self, square: u8) -> bool {
        is_mandarin(square) && self.pieces & piece_bit(square) != 0
    }

    /// Plain stones captured by each player (negative after borrowing).
    #[must_use]
    pub const fn captured(&self) -> ByPlayer<i32> {
        self.captured
    }

    /// Mandarin pieces captured by each player.
    #[must_use]
    pub const fn captured_pieces(&self) -> ByPlayer<u8> {
        self.captured_pieces
    }

    /// Each player's points: captured stones plus the value of captured pieces.
    #[must_use]
    pub fn scores(&self) -> ByPlayer<i32> {
        let value = self.rules.piece_value();
        ByPlayer::new_with(|p| self.captured[p] + value * i32::from(self.captured_pieces[p]))
    }

    /// The player to move (after the game's end: the player who would have moved next).
    #[must_use]
    pub const fn to_move(&self) -> Player {
        self.to_move
    }

    /// Moves played so far.
    #[must_use]
    pub const fn ply(&self) -> u32 {
        self.ply
    }

    /// Why the game ended, or `None` while it goes on.
    #[must_use]
    pub const fn end_reason(&self) -> Option<EndReason> {
        self.end
    }

    /// Whether the game is over.
    #[must_use]
    pub const fn is_over(&self) -> bool {
        self.end.is_some()
    }

    /// The result once the game is over: more points wins, equal points is a draw.
    #[must_use]
    pub fn outcome(&self) -> Option<Outcome> {
        self.end?;
        let s = self.scores();
        Some(match s.first.cmp(&s.second) {
            std::cmp::Ordering::Greater => Outcome::Decisive {
                winner: Player::First,
            },
            std::cmp::Ordering::Less => Outcome::Decisive {
                winner: Player::Second,
            },
            std::cmp::Ordering::Equal => Outcome::Draw,
        })
    }

    /// Points on the board: plain stones plus the value of pieces still standing.
    #[must_use]
    pub fn board_points(&self) -> i32 {
        self.squares.iter().map(|&s| i32::from(s)).sum::<i32>()
            + self.pieces.count_ones() as i32 * self.rules.piece_value()
    }

    /// What the repetition rule compares: the board and the player to move.
    #[must_use]
    pub const fn repetition_key(&self) -> ([u8; SQUARES], u8, Player) {
        (self.squares, self.pieces, self.to_move)
    }

    /// The legal moves, citizen squares left to right as the mover sees them, left before right.
    #[must_use]
    pub fn legal_moves(&self) -> MoveList {
        let mut list = MoveList::new();
        if self.end.is_some() {
            return list;
        }
        for square in self.to_move.citizen_squares() {
            if self.squares[square as usize] > 0 {
                for direction in Direction::ALL {
                    list.push(Move::new(square, direction));
                }
            }
        }
        list
    }

    /// Checks a move against this position without playing it.
    ///
    /// # Errors
    ///
    /// Why the move is illegal, as a [`PlayError`].
    pub fn check(&self, mv: Move) -> Result<(), PlayError> {
        let square = mv.square;
        if self.end.is_some() {
            Err(PlayError::GameOver)
        } else if square as usize >= SQUARES {
            Err(PlayError::NoSuchSquare { square })
        } else if is_mandarin(square) {
            Err(PlayError::MandarinSquare { square })
        } else if !self.to_move.owns(square) {
            Err(PlayError::NotYourSquare {
                square,
                to_move: self.to_move,
            })
        } else if self.squares[square as usize] == 0 {
            Err(PlayError::EmptySquare { square })
        } else {
            Ok(())
        }
    }

    /// Plays a move and returns the new position with the step-by-step trace of what happened
    /// (pick-ups, every stone sown, relays, captures, the refill and the end of the game).
    ///
    /// The repetition rule needs the game's history and is applied by [`crate::Game`], not here.
    ///
    /// # Errors
    ///
    /// Why the move is illegal, as a [`PlayError`]; `self` is untouched.
    pub fn play(&self, mv: Move) -> Result<(Position, Vec<Step>), PlayError> {
        self.check(mv)?;
        let mut next = *self;
        let mut trace = Vec::with_capacity(32);
        next.apply(mv, &mut trace);
        Ok((next, trace))
    }

    /// Plays a move with no checks and no trace: the fast path for search and perft.
    ///
    /// # Panics
    ///
    /// May panic, or leave a position that breaks the invariants, if `mv` is not one of
    /// [`Position::legal_moves`]. Debug builds assert legality.
    pub fn play_unchecked(&mut self, mv: Move) {
        debug_assert_eq!(self.check(mv), Ok(()), "play_unchecked({mv:?}) on {self:?}");
        self.apply(mv, &mut NoTrace);
    }

    fn is_empty(&self, square: u8) -> bool {
        self.squares[square as usize] == 0 && !self.has_piece(square)
    }

    fn side_is_empty(&self, player: Player) -> bool {
        let s = &self.squares;
        match player {
            Player::First => s[1] | s[2] | s[3] | s[4] | s[5] == 0,
            Player::Second => s[7] | s[8] | s[9] | s[10] | s[11] == 0,
        }
    }

    fn end_condition_met(&self) -> bool {
        match self.rules.end_condition {
            EndCondition::MandarinSquaresEmpty => {
                self.pieces == 0 && self.squares[0] == 0 && self.squares[6] == 0
            }
            EndCondition::PiecesCaptured => self.pieces == 0,
        }
    }

    fn apply<T: Tracer>(&mut self, mv: Move, trace: &mut T) {
        let mover = self.to_move;
        let direction = mv.direction;
        let mut from = mv.square;
        let mut relay = false;
        loop {
            let stones = std::mem::take(&mut self.squares[from as usize]);
            trace.step(Step::PickUp {
                square: from,
                stones,
                relay,
            });
            let last = self.sow(from, stones, direction, trace);
            let n = next(last, direction);
            if is_mandarin(n) {
                if self.rules.empty_mandarin_next == EmptyMandarinNext::EmptySquare
                    && self.is_empty(n)
                {
                    self.capture_chain(n, direction, mover, trace);
                } else {
                    trace.step(Step::StopAtMandarin { square: n });
                }
                break;
            }
            if self.squares[n as usize] == 0 {
                self.capture_chain(n, direction, mover, trace);
                break;
            }
            from = n;
            relay = true;
        }
        self.ply += 1;
        self.to_move = mover.other();
        if self.end_condition_met() {
            self.finish(EndReason::Mandarins, mover, trace);
        } else if self.ply >= self.rules.max_plies
            || (self.side_is_empty(self.to_move) && !self.can_refill(self.to_move))
        {
            self.finish(EndReason::PlyLimit, mover, trace);
        } else if self.side_is_empty(self.to_move) {
            let player = self.to_move;
            for sq in player.citizen_squares() {
                self.squares[sq as usize] = 1;
            }
            self.captured[player] -= i32::from(CITIZEN_STONES);
            trace.step(Step::Refill {
                player,
                captured_after: self.captured[player],
            });
        }
    }

    /// Whether `player` may borrow a refill: the stones must fit on the board
    /// ([`MAX_BOARD_STONES`]) and the debt within [`MAX_DEBT`]. Only a refill adds stones to the
    /// board or deepens a debt, so this one check keeps every position inside the bounds
    /// [`Position::from_setup`] enforces.
    fn can_refill(&self, player: Player) -> bool {
        let board: i32 = self.squares.iter().map(|&s| i32::from(s)).sum();
        board + i32::from(CITIZEN_STONES) <= MAX_BOARD_STONES
            && self.captured[player] - i32::from(CITIZEN_STONES) >= -MAX_DEBT
    }

    /// Drops `stones` one by one after `from`; returns the square of the last one.
    fn sow<T: Tracer>(&mut self, from: u8, stones: u8, direction: Direction, trace: &mut T) -> u8 {
        if T::ENABLED {
            let mut at = from;
            for _ in 0..stones {
                at = next(at, direction);
                self.squares[at as usize] += 1;
                trace.step(Step::Sow { square: at });
            }
            return at;
        }
        // Whole laps first, then the remainder: the same board as stone by stone, in
        // O(squares) instead of O(stones).
        let laps = stones / SQUARES as u8;
        let rest = stones % SQUARES as u8;
        if laps > 0 {
            for s in &mut self.squares {
                *s += laps;
            }
        }
        let mut at = from;
        for _ in 0..rest {
            at = next(at, direction);
            self.squares[at as usize] += 1;
        }
        at
    }

    /// Captures from the square after `gap` on, as long as gaps and full squares alternate.
    fn capture_chain<T: Tracer>(
        &mut self,
        mut gap: u8,
        direction: Direction,
        mover: Player,
        trace: &mut T,
    ) {
        loop {
            let target = next(gap, direction);
            if self.is_empty(target) {
                trace.step(Step::StopTwoEmpty { gap, next: target });
                return;
            }
            if is_mandarin(target) {
                if self.ply < self.rules.protected_plies {
                    trace.step(Step::CaptureProtected { square: target });
                    return;
                }
                if self.has_piece(target)
                    && self.squares[target as usize] < self.rules.immature_mandarin
                {
                    trace.step(Step::CaptureImmature { square: target });
                    return;
                }
            }
            let stones = std::mem::take(&mut self.squares[target as usize]);
            let pieces = u8::from(self.has_piece(target));
            if pieces > 0 {
                self.pieces &= !piece_bit(target);
                self.captured_pieces[mover] += 1;
            }
            self.captured[mover] += i32::from(stones);
            trace.step(Step::Capture {
                player: mover,
                square: target,
                stones,
                pieces,
            });
            let after = next(target, direction);
            if !self.is_empty(after) {
                return;
            }
            let beyond = next(after, direction);
            if self.is_empty(beyond) {
                trace.step(Step::StopTwoEmpty {
                    gap: after,
                    next: beyond,
                });
                return;
            }
            gap = after;
        }
    }

    /// Ends the game: each player collects the stones on their own side, stones left in mandarin
    /// squares are split evenly with the odd one to the player who did not make the last move,
    /// and pieces still standing stay on the board, scored by nobody.
    fn finish<T: Tracer>(&mut self, reason: EndReason, last_mover: Player, trace: &mut T) {
        let mut collected = ByPlayer::new(0i32, 0i32);
        for player in Player::ALL {
            for sq in player.citizen_squares() {
                collected[player] += i32::from(std::mem::take(&mut self.squares[sq as usize]));
            }
        }
        let leftover: i32 = MANDARIN_SQUARES
            .iter()
            .map(|&m| i32::from(std::mem::take(&mut self.squares[m as usize])))
            .sum();
        collected[last_mover] += leftover / 2;
        collected[last_mover.other()] += leftover - leftover / 2;
        for player in Player::ALL {
            self.captured[player] += collected[player];
        }
        self.end = Some(reason);
        trace.step(Step::GameOver { reason, collected });
    }

    /// Ends the game by repetition; called by [`crate::Game`], which sees the history.
    pub(crate) fn finish_by_repetition(&mut self, trace: &mut Vec<Step>) {
        let last_mover = self.to_move.other();
        self.finish(EndReason::Repetition, last_mover, trace);
    }
}

impl fmt::Debug for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Position({}", self.to_setup())?;
        if let Some(end) = self.end {
            write!(f, ", over: {end}")?;
        }
        f.write_str(")")
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.to_setup(), f)
    }
}
