//! An exact solver for endgames whose value does not depend on a cycle, fast enough to check
//! every endgame-table value against (`egtb verify --solver fast`), and sound for the real
//! rules: the 3-fold repetition rule and the ply limit included, with an empty history (the
//! root counted once).
//!
//! # Why the engine's search is not enough, and why a transposition table is hard
//!
//! Under the real rules the value of a position depends on the path that led to it (the
//! repetition rule counts earlier occurrences), so a transposition table keyed on the position
//! can reuse a result where it does not hold (the graph-history interaction). The engine does
//! not store results that met a repetition but ignores the reverse case, as chess engines do,
//! and its deepening re-searches the cycles it cannot store up to the ply limit, which is why
//! long proofs (50–60 plies) take minutes.
//!
//! # What this solver computes instead: two path-free games
//!
//! For a position `x` with `k` plies before the limit, two games without any repetition rule:
//!
//! * `a(x, k)`: the best relative margin (final difference minus the current one) the player to
//!   move can force **when every line that has not ended naturally (both mandarin squares empty;
//!   under the piece setups, the end condition) within the `k` plies counts as a total loss for
//!   them** — the ply limit and a refused refill included;
//! * `b(x, k)`: the same when such lines count as a total win for them.
//!
//! Both are plain minimax values of a finite tree whose nodes are (board, mandarin pieces,
//! player to move, ply): no node depends on the path, so a transposition table keyed on exactly
//! that (the full key is stored and compared, no hash collision can mix two nodes) is exact.
//! Values are relative to the score difference: nothing in the rules reads the captured counts
//! except the debt limit of a refill, and the solver refuses a root where a refill within the
//! remaining plies could reach it (`lowest captured − 5 × plies left < −MAX_DEBT`). By
//! induction `a ≤ b`.
//!
//! # From the two games to the real value: certificates
//!
//! A value `a(x, k) ≥ t` does not by itself prove that the mover gets `t` under the real rules:
//! the strategy behind it may revisit a board with a different score (a refill inside a cycle
//! moves points each lap), and under the real rules the third visit ends the game by repetition
//! with another result. So every bound is turned into a strategy and checked:
//!
//! * the prover (the player whose bound is to be shown) plays, at a board with goal `τ`, the
//!   first move (in the search's order) that shows `a ≥ τ` within the plies the line has left,
//!   and the opponent's every reply is followed; nodes are (board, goal), so the strategy
//!   depends on the board and the goal only. If that strategy fails the checks below, it is
//!   built again with each move found at its *rank*, the smallest `k` with `a(x, k) ≥ τ` (the
//!   rank then strictly decreases along every line; the searches at other `k` move the board
//!   to another ply, which changes nothing once the mandarin squares' opening protection is
//!   over: the solver refuses a root before that);
//! * every line of the strategy is replayed with the rules: each terminal must be a natural end
//!   with the goal met, the graph of boards it visits must have **no cycle** (so no board
//!   occurs twice on any line, and with the root counted once no position reaches the
//!   repetition limit, which is at least 2), and its longest line must fit the plies left (so
//!   the ply limit never ends a line).
//!
//! Such a strategy gives the prover at least `t` in the real game whatever the opponent does:
//! every line it allows ends naturally, before the ply limit, without a repetition, meeting the
//! goal at its end. The solver computes `v = a(root) = b(root)` when the two agree, certifies
//! `≥ v` for the mover and `≤ v` for the opponent (the same construction from the opponent's
//! side), and only then reports [`ExactOutcome::Solved`]: the exact value under the real rules
//! (it lies between the two certified bounds, which are equal). The search only *finds* the
//! strategies; their check uses nothing but the rules, so a bug in the search can make the
//! solver fail to certify, not certify a wrong value.
//!
//! # Speed: move ordering, and why it cannot change an outcome
//!
//! Alpha-beta returns the same value whatever order it tries moves in, and a certificate is
//! checked by replaying it, so the order only decides the time. With no hints the solver tries
//! the transposition table's move, natural ends and captures first, and a long proof (30–60
//! plies) can take minutes: proving that a wrong first move fails costs a large tree. With
//! hints ([`ExactSolver::set_hints`]: an endgame table's stored values;
//! [`ExactSolver::set_bound_hints`]: the generator's one-sided bounds of every table size,
//! which also cover the unresolved positions a proof passes through) the first move tried is
//! almost always one that works, and a 60-ply proof takes about as many nodes as its
//! certificate (hundreds). A wrong hint, like a wrong first guess
//! ([`ExactSolver::solve_near`]), makes the solver slower, never wrong: the outcome is decided
//! by the searches and the rules alone. This is what lets `egtb verify` check every table
//! value it samples against a solver of the real rules.
//!
//! # Outcomes, and the endgame tables
//!
//! Where `a(root) < b(root)` lines that end naturally do not settle the value: it depends on
//! cycles, the repetition rule and the ply limit, and the solver reports [`ExactOutcome::Open`] with the two path-free values, which are
//! *not* certified bounds. This covers exactly the positions an endgame table proves: a table
//! value `v` comes with two strategies whose proof depths strictly decrease and which end
//! naturally within `max(dM, dN)` plies, so at that many plies before the limit `a ≥ v ≥ b`,
//! hence `a = b = v`; conversely `Solved(w)` with `w ≠ v`, or `Open`, refutes the table.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use oanquan_rules::{EndReason, MAX_DEBT, Move, Player, Position, Setup};

use crate::egtb::{ProofBounds, Tablebase};
use crate::eval::score_difference;

/// Beyond any relative margin (at most 70 points plus 5 a ply of refills): a line that did not
/// end naturally.
const INF: i32 = 1 << 20;
const CITIZEN_STONES: i64 = 5;
/// The clock and the cancel flag are read every this many nodes.
const CHECK_EVERY: u64 = 4096;
const NO_MOVE: u8 = u8::MAX;

/// What [`ExactSolver::solve`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExactOutcome {
    /// The exact final difference (mover's points minus the opponent's) under the real rules
    /// with an empty history, both bounds certified.
    Solved(i32),
    /// The value depends on a cycle: the path-free games disagree. Final differences with
    /// unfinished lines lost (`lower`) and won (`upper`) for the mover; not certified bounds.
    Open {
        /// `a(root)` as a final difference (`None`: no line ends naturally in time).
        lower: Option<i32>,
        /// `b(root)` as a final difference (`None`: the opponent cannot force a natural end).
        upper: Option<i32>,
    },
    /// The path-free games agree on this final difference but a strategy could not be
    /// certified (a board revisited with another score, or a line too long): not solved.
    Uncertified(i32),
    /// The time limit or the cancel flag stopped the solver.
    Stopped,
    /// Outside what the solver handles: the game is over, a refill within the plies left could
    /// reach the debt limit, or the mandarin squares are still protected.
    Refused,
}

/// A result of [`ExactSolver::solve`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExactResult {
    /// What was found.
    pub outcome: ExactOutcome,
    /// Nodes searched (the certificates' rank searches included).
    pub nodes: u64,
    /// Of those, the nodes searched to find the value (the rest built the certificates).
    pub value_nodes: u64,
    /// Nodes of the certified strategies (both sides).
    pub certificate_nodes: u64,
    /// Wall-clock time.
    pub time: Duration,
}

/// Which path-free game a node belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Game {
    /// `a`: unfinished lines are lost for the mover.
    Lower,
    /// `b`: unfinished lines are won for the mover.
    Upper,
}

impl Game {
    fn other(self) -> Game {
        match self {
            Game::Lower => Game::Upper,
            Game::Upper => Game::Lower,
        }
    }

    /// The value of an unfinished line for the mover.
    fn unfinished(self) -> i32 {
        match self {
            Game::Lower => -INF,
            Game::Upper => INF,
        }
    }
}

/// Bounds on one path-free game's value at one board, each with the plies left at which it
/// was shown. `a(x, k)` never decreases as `k` grows (a strategy that ends the game within `k`
/// plies does within `k + 1`) and `b(x, k)` never increases, so a bound shown at `k` holds on
/// one side of `k`: for `a`, a lower bound for every larger `k` and an upper bound for every
/// smaller one; for `b` the reverse. `−∞` and `+∞` hold everywhere.
#[derive(Clone, Copy)]
struct Entry {
    key: u128,
    lo: i32,
    hi: i32,
    lo_k: u16,
    hi_k: u16,
    mv: u8,
}

const EMPTY: Entry = Entry {
    key: 0,
    lo: -INF,
    hi: INF,
    lo_k: 0,
    hi_k: 0,
    mv: NO_MOVE,
};

impl Entry {
    /// The lower bound that holds at `k` plies left.
    fn lower(&self, game: Game, k: u16) -> i32 {
        let holds = match game {
            Game::Lower => k >= self.lo_k,
            Game::Upper => k <= self.lo_k,
        };
        if holds { self.lo } else { -INF }
    }

    /// The upper bound that holds at `k` plies left.
    fn upper(&self, game: Game, k: u16) -> i32 {
        let holds = match game {
            Game::Lower => k <= self.hi_k,
            Game::Upper => k >= self.hi_k,
        };
        if holds { self.hi } else { INF }
    }

    /// Records a lower bound shown at `k`, unless the one held covers it.
    fn set_lower(&mut self, game: Game, k: u16, lo: i32) {
        let covers = self.lo >= lo
            && match game {
                Game::Lower => self.lo_k <= k,
                Game::Upper => self.lo_k >= k,
            };
        if !covers {
            (self.lo, self.lo_k) = (lo, k);
        }
    }

    /// Records an upper bound shown at `k`, unless the one held covers it.
    fn set_upper(&mut self, game: Game, k: u16, hi: i32) {
        let covers = self.hi <= hi
            && match game {
                Game::Lower => self.hi_k >= k,
                Game::Upper => self.hi_k <= k,
            };
        if !covers {
            (self.hi, self.hi_k) = (hi, k);
        }
    }
}

/// The board, pieces and player to move: what the repetition rule compares. Exact (no hash).
fn board_key(pos: &Position) -> u128 {
    let mut key = 0u128;
    for (i, &c) in pos.squares().iter().enumerate() {
        key |= u128::from(c) << (8 * i);
    }
    key |= u128::from(pos.has_piece(0)) << 96;
    key |= u128::from(pos.has_piece(6)) << 97;
    key |= u128::from(pos.to_move() == Player::Second) << 98;
    key
}

/// A board in one of the path-free games (the plies left are not in it: see [`Entry`]).
/// Never 0 (bit 127).
fn node_key(pos: &Position, game: Game) -> u128 {
    board_key(pos) | u128::from(game == Game::Upper) << 99 | 1 << 127
}

/// The mover's gain in score difference by the move that led from `parent` to `child`.
fn gain(parent: &Position, child: &Position) -> i32 {
    -score_difference(child) - score_difference(parent)
}

/// The child's value seen from the parent: `g − v`, with an unfinished line's ±∞ kept.
fn from_child(g: i32, v: i32) -> i32 {
    if v.abs() >= INF { -v } else { g - v }
}

/// The inverse of [`from_child`] for a window bound (bounds beyond ±∞ stay beyond).
fn to_child(g: i32, t: i32) -> i32 {
    if t.abs() >= INF { -t } else { g - t }
}

/// `pos` moved to `ply` (the same board, scores and mover).
fn at_ply(pos: &Position, ply: u32) -> Position {
    let setup = Setup {
        ply,
        ..pos.to_setup()
    };
    Position::from_setup(setup, *pos.rules()).expect("the same position at a later ply")
}

/// A node of a certificate: a board with the prover or the opponent to move, and the goal.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct CertNode {
    board: u128,
    goal: i32,
    prover_to_move: bool,
}

/// A certificate under construction: the longest line below each finished node (`None` while
/// it is on the current path) and the edges between boards.
#[derive(Default)]
struct Certificate {
    height: HashMap<CertNode, Option<u32>>,
    edges: Vec<(u128, u128)>,
    /// Play the first move that shows the goal within the plies the line has left, instead of
    /// one at the smallest rank (cheaper; may fail where ranks succeed).
    quick: bool,
}

/// Why a certificate could not be built.
enum CertError {
    Stopped,
    Failed,
}

/// The solver: its transposition table (kept between solves: its entries do not depend on the
/// root) and counters.
pub struct ExactSolver {
    tt: Vec<Entry>,
    mask: usize,
    nodes: u64,
    value_nodes: u64,
    hints: Option<Arc<Tablebase>>,
    bounds: Option<Arc<ProofBounds>>,
    deadline: Option<Instant>,
    aborted: bool,
}

impl std::fmt::Debug for ExactSolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExactSolver")
            .field("tt_entries", &self.tt.len())
            .finish_non_exhaustive()
    }
}

impl ExactSolver {
    /// A solver whose transposition table takes at most `bytes` (the largest power of two of
    /// entries that fits, at least 1024 entries).
    #[must_use]
    pub fn with_tt_bytes(bytes: usize) -> ExactSolver {
        let fit = (bytes / std::mem::size_of::<Entry>()).max(1024);
        let entries = if fit.is_power_of_two() {
            fit
        } else {
            fit.next_power_of_two() / 2
        };
        ExactSolver {
            tt: vec![EMPTY; entries],
            mask: entries - 1,
            nodes: 0,
            value_nodes: 0,
            hints: None,
            bounds: None,
            deadline: None,
            aborted: false,
        }
    }

    /// Endgame tables to order moves by (their proved values first): only the search's speed
    /// depends on them, never its outcome (alpha-beta's result does not depend on the order in
    /// which moves are tried, and the certificates are checked with the rules alone).
    pub fn set_hints(&mut self, tables: Option<Arc<Tablebase>>) {
        self.hints = tables;
    }

    /// The generator's one-sided bounds to order moves by (they cover the positions the tables
    /// leave unknown too; used instead of [`ExactSolver::set_hints`] when set). As with those,
    /// only the speed depends on them.
    pub fn set_bound_hints(&mut self, bounds: Option<Arc<ProofBounds>>) {
        self.bounds = bounds;
    }

    /// Solves `pos` under the real rules with an empty history (see the module docs), within
    /// `time` if given; `cancel` stops it too.
    pub fn solve(
        &mut self,
        pos: &Position,
        time: Option<Duration>,
        cancel: &AtomicBool,
    ) -> ExactResult {
        self.solve_near(pos, None, time, cancel)
    }

    /// [`ExactSolver::solve`], trying `guess` (a final difference) first: two null-window
    /// searches (`a ≥ guess`, `b ≤ guess`) show `a = b = guess` when it is right, which is
    /// much faster than computing both values; a wrong guess only costs time (the values are
    /// then computed in full), it never changes the outcome.
    pub fn solve_near(
        &mut self,
        pos: &Position,
        guess: Option<i32>,
        time: Option<Duration>,
        cancel: &AtomicBool,
    ) -> ExactResult {
        let start = Instant::now();
        self.nodes = 0;
        self.value_nodes = 0;
        self.deadline = time.map(|t| start + t);
        self.aborted = false;
        let (outcome, certificate_nodes) = self.solve_inner(pos, guess, cancel);
        ExactResult {
            outcome,
            nodes: self.nodes,
            value_nodes: self.value_nodes,
            certificate_nodes,
            time: start.elapsed(),
        }
    }

    fn solve_inner(
        &mut self,
        pos: &Position,
        guess: Option<i32>,
        cancel: &AtomicBool,
    ) -> (ExactOutcome, u64) {
        let rules = pos.rules();
        if pos.is_over() || pos.ply() < rules.protected_plies {
            return (ExactOutcome::Refused, 0);
        }
        let plies_left = rules.max_plies - pos.ply();
        let captured = pos.captured();
        let lowest = i64::from(captured.first.min(captured.second));
        if lowest - CITIZEN_STONES * i64::from(plies_left) < -i64::from(MAX_DEBT) {
            return (ExactOutcome::Refused, 0);
        }
        let base = score_difference(pos);
        // `a ≤ b`, so `a ≥ g` and `b ≤ g` mean both equal `g`.
        let shown = match guess {
            Some(g) => {
                let g = g - base;
                let at_least = self.search(pos, Game::Lower, g - 1, g, cancel) >= g;
                let at_most = !self.aborted
                    && at_least
                    && self.search(pos, Game::Upper, g, g + 1, cancel) <= g;
                at_most && !self.aborted
            }
            None => false,
        };
        let (lower, upper) = if shown {
            let g = guess.unwrap_or(0) - base;
            (g, g)
        } else if self.aborted {
            (0, 0)
        } else {
            let lower = self.search(pos, Game::Lower, -INF - 1, INF + 1, cancel);
            let upper = if self.aborted {
                0
            } else {
                self.search(pos, Game::Upper, -INF - 1, INF + 1, cancel)
            };
            (lower, upper)
        };
        if self.aborted {
            return (ExactOutcome::Stopped, 0);
        }
        if lower != upper {
            let finite = |v: i32| (v.abs() < INF).then_some(base + v);
            return (
                ExactOutcome::Open {
                    lower: finite(lower),
                    upper: finite(upper),
                },
                0,
            );
        }
        let v = lower;
        self.value_nodes = self.nodes;
        // The mover proves `≥ v`; the opponent proves the mover gets `≤ v`.
        let mut nodes = 0;
        for prover_to_move in [true, false] {
            let mut certified = false;
            for quick in [true, false] {
                let mut cert = Certificate {
                    quick,
                    ..Certificate::default()
                };
                match self.certify(pos, v, prover_to_move, plies_left, &mut cert, cancel) {
                    Ok(height) if height <= plies_left && acyclic(&cert.edges) => {
                        nodes += cert.height.len() as u64;
                        certified = true;
                        break;
                    }
                    Ok(_) | Err(CertError::Failed) => {}
                    Err(CertError::Stopped) => return (ExactOutcome::Stopped, nodes),
                }
            }
            if !certified {
                return (ExactOutcome::Uncertified(base + v), nodes);
            }
        }
        (ExactOutcome::Solved(base + v), nodes)
    }

    fn stop(&mut self, cancel: &AtomicBool) -> bool {
        if !self.aborted
            && self.nodes % CHECK_EVERY == 0
            && (cancel.load(Ordering::Relaxed)
                || self.deadline.is_some_and(|d| Instant::now() >= d))
        {
            self.aborted = true;
        }
        self.aborted
    }

    /// Fail-soft alpha-beta on the path-free game `game` for a position where the game goes on.
    /// Values are relative to `pos`'s score difference, for its mover.
    fn search(
        &mut self,
        pos: &Position,
        game: Game,
        mut alpha: i32,
        mut beta: i32,
        cancel: &AtomicBool,
    ) -> i32 {
        self.nodes += 1;
        if self.stop(cancel) {
            return 0;
        }
        let k = (pos.rules().max_plies - pos.ply()).min(u32::from(u16::MAX)) as u16;
        let key = node_key(pos, game);
        let slot = self.slot(key);
        let mut entry = self.tt[slot];
        if entry.key != key {
            entry = Entry { key, ..EMPTY };
        }
        let (mut lo, mut hi) = (entry.lower(game, k), entry.upper(game, k));
        // `a ≤ b`: each game's entry bounds the other's value on one side.
        let other = self.tt[self.slot(node_key(pos, game.other()))];
        if other.key == node_key(pos, game.other()) {
            match game {
                Game::Lower => hi = hi.min(other.upper(Game::Upper, k)),
                Game::Upper => lo = lo.max(other.lower(Game::Lower, k)),
            }
        }
        if lo >= beta || lo == hi {
            return lo;
        }
        if hi <= alpha {
            return hi;
        }
        alpha = alpha.max(lo);
        beta = beta.min(hi);
        let (alpha_orig, beta_orig) = (alpha, beta);

        let (children, order, n) = self.ordered(pos, entry.mv, beta);
        let mut best = -INF - 1;
        let mut best_move = NO_MOVE;
        for &i in &order[..n] {
            let child = &children[usize::from(i)];
            let g = gain(pos, child);
            let v = match child.end_reason() {
                Some(EndReason::Mandarins) => g,
                Some(_) => game.unfinished(),
                None => {
                    let cv = self.search(
                        child,
                        game.other(),
                        to_child(g, beta),
                        to_child(g, alpha),
                        cancel,
                    );
                    if self.aborted {
                        return 0;
                    }
                    from_child(g, cv)
                }
            };
            if v > best {
                best = v;
                best_move = i;
                if v > alpha {
                    alpha = v;
                    if alpha >= beta {
                        break;
                    }
                }
            }
        }

        if best < beta_orig {
            entry.set_upper(game, k, best);
        }
        if best > alpha_orig {
            entry.set_lower(game, k, best);
        }
        entry.mv = best_move;
        self.tt[slot] = entry;
        best
    }

    /// The children of `pos` (in [`Position::legal_moves`] order) and the order to try them
    /// in: with hints, the children whose proved bound meets `goal` (the shortest proof first),
    /// then by hinted value; then `tt_move`, natural ends, the biggest gains.
    fn ordered(&self, pos: &Position, tt_move: u8, goal: i32) -> ([Position; 10], [u8; 10], usize) {
        let moves = pos.legal_moves();
        let mut keys = [(i32::MIN, 0u8); 10];
        let mut children = [*pos; 10];
        for (i, &mv) in moves.iter().enumerate() {
            let mut child = *pos;
            child.play_unchecked(mv);
            let g = gain(pos, &child);
            let hint = if child.is_over() {
                (self.hints.is_some() || self.bounds.is_some()).then_some(if g >= goal {
                    (INF, 0)
                } else {
                    (g, 0)
                })
            } else if let Some(b) = &self.bounds {
                // A proof that meets the goal, the shortest first; then the best value.
                b.upper_within(&child, g - goal)
                    .map(|d| (INF, d))
                    .or_else(|| b.best_upper(&child).map(|(hi, d)| (g - hi, d)))
            } else {
                self.hints
                    .as_ref()
                    .and_then(|t| t.probe(&child))
                    .map(|p| (g - p.relative, p.opponent_depth))
            }
            .map(|(value, depth)| (value.clamp(-511, 511) + 512) * 512 - depth.min(511) as i32);
            let key = if let Some(h) = hint {
                1 << 24 | h
            } else if i as u8 == tt_move {
                1 << 23
            } else if child.end_reason() == Some(EndReason::Mandarins) {
                1 << 16 | (g + 1024)
            } else {
                g + 1024
            };
            keys[i] = (key, i as u8);
            children[i] = child;
        }
        let n = moves.len();
        keys[..n].sort_by_key(|k| std::cmp::Reverse(k.0));
        let mut order = [0u8; 10];
        for (o, k) in order.iter_mut().zip(&keys) {
            *o = k.1;
        }
        (children, order, n)
    }

    fn slot(&self, key: u128) -> usize {
        ((key as u64 ^ (key >> 64) as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 20) as usize
            & self.mask
    }

    /// Whether `a(pos moved to k plies before the limit) ≥ goal`, and a move that shows it.
    fn proves(
        &mut self,
        pos: &Position,
        k: u32,
        goal: i32,
        cancel: &AtomicBool,
    ) -> Result<Option<Move>, CertError> {
        let at = at_ply(pos, pos.rules().max_plies - k);
        let key = node_key(&at, Game::Lower);
        let entry = self.tt[self.slot(key)];
        let tt_move = if entry.key == key { entry.mv } else { NO_MOVE };
        let (children, order, n) = self.ordered(&at, tt_move, goal);
        let moves = at.legal_moves();
        // The move must show the bound by itself: one level by hand, the children by search.
        for &i in &order[..n] {
            let (mv, child) = (moves[usize::from(i)], children[usize::from(i)]);
            let g = gain(&at, &child);
            let v = match child.end_reason() {
                Some(EndReason::Mandarins) => g,
                Some(_) => -INF,
                None => {
                    let need = g - goal;
                    let cv = self.search(&child, Game::Upper, need, need + 1, cancel);
                    if self.aborted {
                        return Err(CertError::Stopped);
                    }
                    from_child(g, cv)
                }
            };
            if v >= goal {
                return Ok(Some(mv));
            }
        }
        Ok(None)
    }

    /// Builds the prover's strategy from `pos` (the prover to move if `prover_to_move`) for the
    /// goal `goal` (relative, for the player to move: at least it for the prover, at most it for
    /// the opponent), within `limit` plies, replaying every line with the rules. Returns the
    /// longest line in plies.
    fn certify(
        &mut self,
        pos: &Position,
        goal: i32,
        prover_to_move: bool,
        limit: u32,
        cert: &mut Certificate,
        cancel: &AtomicBool,
    ) -> Result<u32, CertError> {
        let node = CertNode {
            board: board_key(pos),
            goal,
            prover_to_move,
        };
        match cert.height.get(&node) {
            Some(Some(h)) => return Ok(*h),
            // A cycle of (board, goal) nodes: no strategy of this shape.
            Some(None) => return Err(CertError::Failed),
            None => {}
        }
        if limit == 0 {
            return Err(CertError::Failed);
        }
        cert.height.insert(node, None);
        let mut height = 0;
        if prover_to_move {
            // The smallest rank: a(·, k) grows with k, so a binary search.
            let (mut lo, mut hi) = (if cert.quick { limit } else { 1 }, limit);
            let mut found = self.proves(pos, hi, goal, cancel)?;
            if found.is_none() {
                return Err(CertError::Failed);
            }
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                match self.proves(pos, mid, goal, cancel)? {
                    Some(mv) => {
                        hi = mid;
                        found = Some(mv);
                    }
                    None => lo = mid + 1,
                }
            }
            let mv = found.ok_or(CertError::Failed)?;
            // `found` is the move at rank `hi`: the last successful probe.
            let rank = hi;
            let mut child = *pos;
            child.play_unchecked(mv);
            let g = gain(pos, &child);
            match child.end_reason() {
                Some(EndReason::Mandarins) if g >= goal => height = 1,
                Some(_) => return Err(CertError::Failed),
                None => {
                    cert.edges.push((node.board, board_key(&child)));
                    let h = self.certify(&child, g - goal, false, rank - 1, cert, cancel)?;
                    height = 1 + h;
                }
            }
        } else {
            for &mv in &pos.legal_moves() {
                let mut child = *pos;
                child.play_unchecked(mv);
                let g = gain(pos, &child);
                let h = match child.end_reason() {
                    Some(EndReason::Mandarins) if g <= goal => 0,
                    Some(_) => return Err(CertError::Failed),
                    None => {
                        cert.edges.push((node.board, board_key(&child)));
                        self.certify(&child, g - goal, true, limit - 1, cert, cancel)?
                    }
                };
                height = height.max(1 + h);
            }
        }
        cert.height.insert(node, Some(height));
        Ok(height)
    }
}

/// Whether the directed graph of boards has no cycle (Kahn's algorithm).
fn acyclic(edges: &[(u128, u128)]) -> bool {
    let mut index: HashMap<u128, usize> = HashMap::new();
    let id = |b: u128, index: &mut HashMap<u128, usize>| {
        let n = index.len();
        *index.entry(b).or_insert(n)
    };
    let mut pairs = Vec::with_capacity(edges.len());
    for &(a, b) in edges {
        let a = id(a, &mut index);
        let b = id(b, &mut index);
        pairs.push((a, b));
    }
    pairs.sort_unstable();
    pairs.dedup();
    let n = index.len();
    let mut indegree = vec![0u32; n];
    let mut start = vec![0usize; n + 1];
    for &(a, b) in &pairs {
        indegree[b] += 1;
        start[a + 1] += 1;
    }
    for i in 0..n {
        start[i + 1] += start[i];
    }
    let mut ready: Vec<usize> = (0..n).filter(|&i| indegree[i] == 0).collect();
    let mut done = 0;
    while let Some(a) = ready.pop() {
        done += 1;
        for &(_, b) in &pairs[start[a]..start[a + 1]] {
            indegree[b] -= 1;
            if indegree[b] == 0 {
                ready.push(b);
            }
        }
    }
    done == n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cycle_of_boards_is_found() {
        assert!(acyclic(&[(1, 2), (2, 3), (1, 3)]));
        assert!(!acyclic(&[(1, 2), (2, 3), (3, 1)]));
        assert!(!acyclic(&[(5, 5)]));
        assert!(acyclic(&[]));
    }

    #[test]
    fn window_maps_keep_the_unfinished_values() {
        assert_eq!(from_child(3, INF), -INF);
        assert_eq!(from_child(3, -INF), INF);
        assert_eq!(from_child(3, 1), 2);
        assert_eq!(to_child(3, -INF - 1), INF + 1);
        assert_eq!(to_child(3, 2), 1);
    }
}
