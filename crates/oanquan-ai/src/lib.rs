//! A computer player for Ô Ăn Quan on top of [`oanquan_rules`]: negamax with alpha-beta
//! (principal variation search), iterative deepening, a transposition table, move ordering, an
//! exact endgame solver, and playing [`Level`]s from a random mover to the full-strength search.
//!
//! ```
//! use std::sync::atomic::AtomicBool;
//! use std::time::Duration;
//!
//! use oanquan_ai::{Engine, Level, SearchLimits, choose_move};
//! use oanquan_rules::{Game, Position, Preset};
//!
//! let start = Position::new(Preset::Standard.rules())?;
//! let cancel = AtomicBool::new(false);
//!
//! // Analysis: a reusable engine, a node budget (reproducible) and a cancel flag.
//! let mut engine = Engine::new();
//! let result = engine.search(&start, SearchLimits::nodes(20_000), &cancel);
//! let best = result.best_move.expect("the game is not over");
//! assert!(start.legal_moves().contains(&best));
//! println!("{best} evaluates to {} points at depth {}", result.eval_points, result.depth);
//!
//! // Seating the computer: a level, a seed and a time budget, with the game's history.
//! let mut game = Game::new(Preset::Standard.rules())?;
//! let limits = SearchLimits::time(Duration::from_millis(20));
//! let mv = engine.choose_move_in_game(Level::Master, &game, 7, limits, &cancel).unwrap();
//! game.play(mv)?;
//!
//! // One-off moves without keeping an engine around.
//! let reply = choose_move(Level::Greedy, game.position(), 7, limits, &cancel).unwrap();
//! game.play(reply)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Evaluation
//!
//! Values are from the point of view of the player to move, in units of 1/[`EVAL_SCALE`] point
//! ([`SearchResult::eval_points`] rounds them to points). A finished game scores its exact
//! final difference (mine − theirs, debts and end-of-game collection included); an unfinished
//! one the current difference plus a quarter point per stone on the mover's own citizen squares,
//! minus the same for the opponent's ([`evaluate`]).
//!
//! The transposition table stores values *relative to the score difference* of their position:
//! nothing in the rules depends on the captured counts, so positions that differ only in their
//! scores share an entry. Its Zobrist key covers the squares, the mandarin pieces, the player to
//! move and the ply (the ply limit and the opening protection depend on it); the rule set is
//! not in the key — the table is emptied when a search comes with other rules.
//!
//! # Endgames
//!
//! The search knows when a result depends on no depth horizon (every line it looked at ended
//! the game): such results are stored as exact at every depth, iterative deepening stops as soon
//! as the root is solved, and [`SearchResult::exact`] says so. With few points left on the board
//! ([`Engine::set_endgame_threshold`], [`DEFAULT_ENDGAME_POINTS`] by default) a depth cap is
//! lifted so that the search runs to the end of the game, bounded by its time or node budget.
//! It always terminates: every game ends within `max_plies` moves and the search depth is capped
//! at [`MAX_DEPTH`].
//!
//! # Endgame tables
//!
//! [`egtb::Tablebase`] holds the proved values of positions with few stones (built by
//! retrograde analysis: `cargo run --release -p oanquan-ai --example egtb -- generate`). An
//! engine given tables ([`Engine::set_tablebase`]) answers from them at the root
//! ([`SearchResult::tablebase`]) and inside the search, only for positions of the tables' rule
//! set and only where the stored value holds for the game at hand (see [`egtb`] for what that
//! means with the repetition rule and the ply limit).
//!
//! # Repetition
//!
//! The rule set's repetition rule is applied inside the search, with the game's history when
//! searching a [`oanquan_rules::Game`]: a position that would occur for the
//! `repetition_limit`-th time ends the game there, scored as the rules crate scores it. See
//! [`Engine`] for how this interacts with the transposition table.
//!
//! # Cancellation
//!
//! Every search takes a `&AtomicBool`. It is read every 1024 nodes (well under a millisecond);
//! once it is set, the search returns the best move found so far. A server runs searches on a
//! blocking thread pool and sets the flag when the game ends or the server stops.

pub mod egtb;
mod eval;
mod level;
mod rng;
mod search;
mod tt;
mod zobrist;

pub use eval::{EVAL_SCALE, evaluate, score_difference};
pub use level::{Level, UnknownLevel, choose_move};
pub use search::{
    DEFAULT_ENDGAME_POINTS, DEFAULT_TT_BYTES, Engine, MAX_DEPTH, SearchLimits, SearchResult,
};
