//! The rules of Ô Ăn Quan, the Vietnamese mancala game: positions, moves with a step-by-step
//! trace, whole games with repetition and ply limits, a text notation and `perft`.
//!
//! ```
//! use oanquan_rules::{Direction, Game, Move, Player, Preset, Step};
//!
//! let mut game = Game::new(Preset::Standard.rules())?;
//! // The first player sows square 1 to the right (+1 on the ring): the relay from square 7
//! // ends with square 2 captured (RULES.md, worked example 2).
//! let trace = game.play(Move::new(1, Direction::Right))?;
//! assert!(trace.contains(&Step::Capture { player: Player::First, square: 2, stones: 6, pieces: 0 }));
//! assert_eq!(game.position().to_string(), "11,0,0,6,6,6,11,0,6,6,6,6 6:0 2 1");
//! assert_eq!(game.position().legal_moves().len(), 8);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Positions come from text as well, and a rule set is plain data:
//!
//! ```
//! use oanquan_rules::{Position, Preset, Rules, Setup};
//!
//! let setup: Setup = "1,0,0,0,1,0,0,1,0,0,0,0 29:38 1 47".parse()?;
//! let position = Position::from_setup(setup, Rules::TRADITIONAL)?;
//! let (after, _trace) = position.play("4+".parse()?)?;
//! // Traditional: the empty mandarin square 6 is a gap, so square 7 is captured.
//! assert_eq!(after.captured().first, 30);
//! assert_eq!("mancala-world".parse::<Preset>()?.rules(), Rules::MANCALA_WORLD);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # The board
//!
//! Twelve squares in a ring: `0` and `6` are mandarin squares, `1..=5` the first player's
//! citizen squares, `7..=11` the second player's. [`Direction::Right`] is `+1` on the ring, which
//! is "to my right" for both players seen from their own seats.
//!
//! # Notation
//!
//! * A **move** is the ring index of the square followed by `+` ([`Direction::Right`]) or `-`
//!   ([`Direction::Left`]): `3-`, `10+`.
//! * A **position** is four fields separated by spaces:
//!   1. the twelve squares by ring index, separated by commas; each is its stone count, followed
//!      by `q` if the mandarin piece stands there (`q` alone: a piece and no stones);
//!   2. the captured counts `first:second`, each a whole number (negative after borrowing)
//!      followed by one `q` per captured mandarin piece;
//!   3. the player to move, `1` (first) or `2` (second);
//!   4. the ply, the number of moves played so far.
//!
//!   The standard start is `10,5,5,5,5,5,10,5,5,5,5,5 0:0 1 0`; the mancala-world start is
//!   `q,5,5,5,5,5,q,5,5,5,5,5 0:0 1 0`. The text is a [`Setup`]; [`Position::from_setup`]
//!   checks it against a rule set.
//!
//! # Where RULES.md is silent
//!
//! * The ply limit is checked right after the move, before any refill: "no refill after the
//!   final move" holds for every ending but repetition, whose positions are compared after the
//!   refill (as RULES.md defines them).
//! * At every ending the stones left in *both* mandarin squares are pooled and split evenly, the
//!   odd stone to the player who did not make the last move.
//! * "Holds stones" for the square after a gap includes a mandarin square that holds only its
//!   piece: a piece is worth points and is captured like stones.
//! * A position handed in must be one after the refill: the player to move must have a stone,
//!   unless the game is over. One that is over must be one after the final collection, with no
//!   plain stones left on the board ([`PositionError::Uncollected`]): every finished position
//!   that play produces is, and a result read off stones still on the board would be wrong.
//! * A move that reaches the ply limit ends the game by the ply limit even if it also repeats a
//!   position for the last allowed time.
//! * A refill borrows stones that are not on the board, yet RULES.md puts no limit on the debt:
//!   two players who avoid captures can keep borrowing, and the board keeps filling. The engine
//!   bounds it: the board holds at most [`MAX_BOARD_STONES`] plain stones and a captured count
//!   owes at most [`MAX_DEBT`]. A refill that would break either bound cannot be made, and the
//!   game ends there as at the ply limit ([`EndReason::PlyLimit`], the same collection). No
//!   ordinary game comes near: random games stay below 80 stones on the board, and pushing the
//!   board up on purpose takes both players some 300 moves to reach 200.

mod game;
mod notation;
mod outcome;
mod perft;
mod player;
mod position;
mod rules;
mod trace;

pub use game::{Game, GameRecord, ReplayError};
pub use notation::NotationError;
pub use outcome::{EndReason, Outcome};
pub use perft::perft;
pub use player::{ByPlayer, Direction, Player};
pub use position::{
    MANDARIN_SQUARES, MAX_BOARD_STONES, MAX_DEBT, Move, MoveList, PlayError, Position,
    PositionError, SQUARES, Setup, is_mandarin,
};
pub use rules::{
    CITIZEN_STONES, EmptyMandarinNext, EndCondition, MANDARIN_STONES, MandarinSetup, Preset, Rules,
    RulesError, UnknownPreset,
};
pub use trace::Step;
