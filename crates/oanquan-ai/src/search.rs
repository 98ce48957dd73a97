//! Negamax with alpha-beta (principal variation search), iterative deepening, a transposition
//! table and move ordering.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use oanquan_rules::{Direction, Game, Move, Position, Rules};

use crate::egtb::Tablebase;
use crate::eval::{EVAL_SCALE, EvalWeights, repetition_final_difference, score_difference};
use crate::rng::SplitMix64;
use crate::tt::{Bound, DEPTH_SOLVED, Table, decode, encode};
use crate::zobrist::{repetition_key, search_key};

/// The deepest the search goes, in plies from the root (iterative deepening stops here even when
/// no other limit is set). Games last at most `max_plies` (300 in every preset) moves, and endgames
/// with few stones are solved long before this depth.
pub const MAX_DEPTH: u32 = 200;

/// Default transposition-table size of [`Engine::new`]: 8 MiB.
pub const DEFAULT_TT_BYTES: usize = 8 << 20;

/// Default for [`Engine::set_endgame_threshold`]: with at most this many points on the board
/// (stones, a mandarin piece counting its value), a depth limit is lifted and the search runs to
/// the end of the game, bounded by time and nodes only.
pub const DEFAULT_ENDGAME_POINTS: u32 = 16;

const INF: i32 = i32::MAX / 4;
const MAX_PLY: usize = MAX_DEPTH as usize;
/// The clock and the cancel flag are read every this many nodes (a few microseconds of search).
const CHECK_EVERY: u64 = 1024;

/// What bounds a search. Every limit that is set applies; the search stops at the first one
/// reached. With none set the search runs until the position is solved or [`MAX_DEPTH`] is
/// reached, which can take very long: the server should always pass a time or node limit.
///
/// Time limits make results depend on the machine's speed; node and depth limits give fully
/// reproducible results (see [`Engine`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SearchLimits {
    /// Wall-clock budget. Iterative deepening also stops early when the next iteration would
    /// probably not finish (more than half the budget used).
    pub time: Option<Duration>,
    /// Node budget (positions visited).
    pub nodes: Option<u64>,
    /// Depth cap in plies (lifted in endgames, see [`Engine::set_endgame_threshold`]).
    pub depth: Option<u32>,
}

impl SearchLimits {
    /// No limit at all.
    pub const NONE: SearchLimits = SearchLimits {
        time: None,
        nodes: None,
        depth: None,
    };

    /// Only a time budget.
    #[must_use]
    pub const fn time(time: Duration) -> SearchLimits {
        SearchLimits {
            time: Some(time),
            ..SearchLimits::NONE
        }
    }

    /// Only a node budget.
    #[must_use]
    pub const fn nodes(nodes: u64) -> SearchLimits {
        SearchLimits {
            nodes: Some(nodes),
            ..SearchLimits::NONE
        }
    }

    /// Only a depth cap.
    #[must_use]
    pub const fn depth(depth: u32) -> SearchLimits {
        SearchLimits {
            depth: Some(depth),
            ..SearchLimits::NONE
        }
    }

    /// These limits with a time budget too.
    #[must_use]
    pub const fn with_time(self, time: Duration) -> SearchLimits {
        SearchLimits {
            time: Some(time),
            ..self
        }
    }

    /// These limits with a node budget too.
    #[must_use]
    pub const fn with_nodes(self, nodes: u64) -> SearchLimits {
        SearchLimits {
            nodes: Some(nodes),
            ..self
        }
    }

    /// These limits with a depth cap too.
    #[must_use]
    pub const fn with_depth(self, depth: u32) -> SearchLimits {
        SearchLimits {
            depth: Some(depth),
            ..self
        }
    }
}

/// What a search found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchResult {
    /// The move to play; `None` only when the game is over.
    pub best_move: Option<Move>,
    /// The evaluation in points from the point of view of the player to move (rounded from
    /// [`SearchResult::eval`]). When [`SearchResult::exact`], the final score difference under
    /// best play.
    pub eval_points: i32,
    /// The evaluation in units of 1/[`EVAL_SCALE`] point.
    pub eval: i32,
    /// Whether the evaluation is exact: the search reached the end of every line (the game is
    /// solved from here, with the repetition caveats of the crate docs).
    pub exact: bool,
    /// The principal variation, starting with the best move.
    pub pv: Vec<Move>,
    /// Depth of the last completed iteration, in plies.
    pub depth: u32,
    /// Positions visited.
    pub nodes: u64,
    /// Wall-clock time used.
    pub time: Duration,
    /// Whether a limit or the cancel flag cut an iteration short.
    pub stopped: bool,
    /// Whether the root's value and move come from the endgame tables
    /// ([`Engine::set_tablebase`]); `exact` is then true.
    pub tablebase: bool,
    /// Positions inside the search whose value came from the endgame tables.
    pub tablebase_hits: u64,
    /// Whether the move and value come from the opening book ([`Engine::analyze_game`]): then
    /// `depth`, `nodes` and `exact` are those of the deep search that made the book entry, and
    /// nothing was searched now.
    pub book: bool,
    /// Whether the move was chosen for the opponent's mistakes ([`Engine::set_play_for_mistakes`]):
    /// against a greedy opponent the main search found no win, or its best move would end the
    /// game lost, and another move gives the opponent more ways to go wrong. `eval` and `pv`
    /// are then that move's value and line against the best reply the pass found.
    pub for_mistakes: bool,
}

impl SearchResult {
    /// Nodes per second.
    #[must_use]
    pub fn nodes_per_second(&self) -> f64 {
        self.nodes as f64 / self.time.as_secs_f64().max(1e-9)
    }
}

/// Keys are already random: hash them as they are.
#[derive(Debug, Default, Clone, Copy)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

type KeyCounts = HashMap<u64, u32, BuildHasherDefault<KeyHasher>>;

#[derive(Debug, Clone, Copy)]
struct Child {
    mv: Move,
    pos: Position,
    rkey: u64,
    /// `Some(value)` (child's point of view, eval units) when the child ends the game by
    /// repetition.
    repetition: Option<i32>,
    order: i32,
}

/// A reusable search engine: owns the transposition table (kept between searches, so searching
/// the positions of one game in turn gets faster), killer moves and history counters.
///
/// # Determinism
///
/// Moves the search cannot tell apart are ordered by a generator seeded with
/// [`Engine::set_seed`]. A search with a node or depth limit (and no time limit) is fully
/// reproducible: the same engine state (a new engine, or after [`Engine::clear`]), the same
/// seed and the same position give the same result on every machine.
///
/// # Repetition
///
/// The rule set's repetition rule is applied inside the search: a position that would occur
/// for the `repetition_limit`-th time, counting the game's history ([`Engine::search_game`]) or
/// only the root ([`Engine::search`]) plus the current search path, ends the game there and is
/// scored exactly like the rules crate scores it. Results that depend on such a repetition are
/// not stored in the transposition table (they depend on the path); the reverse case, a stored
/// result reused where its subtree would repeat a different path, is ignored, as chess engines
/// do. The ply limit (`max_plies`) is exact: the ply is part of the table key.
#[derive(Debug)]
pub struct Engine {
    tt: Table,
    rules: Option<Rules>,
    eval: EvalWeights,
    /// Whether the top level plays from the opening book (see `level.rs`).
    pub(crate) use_book: bool,
    /// Whether the top level plays for the opponent's mistakes (see `mistakes.rs`).
    pub(crate) play_for_mistakes: bool,
    seed: u64,
    endgame_points: Option<u32>,
    killers: Vec<[u8; 2]>,
    history: [u32; 24],
    pv: Vec<Move>,
    pv_len: Vec<usize>,
    // Per-search state.
    hist: KeyCounts,
    path: Vec<u64>,
    repetition_limit: u32,
    nodes: u64,
    node_limit: u64,
    deadline: Option<Instant>,
    aborted: bool,
    horizon: u64,
    repetition_hits: u64,
    tables: Option<Arc<Tablebase>>,
    /// Positions of the history and the search path that occurred `repetition_limit − 1` times
    /// or more: while there is one, a table value may be wrong and is not used (see
    /// [`crate::egtb`]).
    repeated: u32,
    tablebase_hits: u64,
}

impl Default for Engine {
    fn default() -> Self {
        Engine::new()
    }
}

const NO_MOVE: Move = Move::new(1, Direction::Left);

impl Engine {
    /// An engine with a [`DEFAULT_TT_BYTES`] transposition table, seed 0 and the default endgame
    /// threshold.
    #[must_use]
    pub fn new() -> Engine {
        Engine::with_tt_bytes(DEFAULT_TT_BYTES)
    }

    /// An engine whose transposition table takes about `bytes` bytes (rounded down to a power of
    /// two entries of 16 bytes; at least 16 KiB).
    #[must_use]
    pub fn with_tt_bytes(bytes: usize) -> Engine {
        Engine {
            tt: Table::with_bytes(bytes),
            rules: None,
            eval: EvalWeights::DEFAULT,
            use_book: true,
            play_for_mistakes: true,
            seed: 0,
            endgame_points: Some(DEFAULT_ENDGAME_POINTS),
            killers: vec![[0; 2]; MAX_PLY + 2],
            history: [0; 24],
            pv: vec![NO_MOVE; (MAX_PLY + 2) * (MAX_PLY + 2)],
            pv_len: vec![0; MAX_PLY + 2],
            hist: KeyCounts::default(),
            path: Vec::with_capacity(MAX_PLY + 2),
            repetition_limit: 0,
            nodes: 0,
            node_limit: u64::MAX,
            deadline: None,
            aborted: false,
            horizon: 0,
            repetition_hits: 0,
            tables: None,
            repeated: 0,
            tablebase_hits: 0,
        }
    }

    /// The transposition table's size in bytes.
    #[must_use]
    pub fn tt_bytes(&self) -> usize {
        self.tt.bytes()
    }

    /// Sets the evaluation's weights ([`EvalWeights::DEFAULT`] in a new engine) and empties the
    /// transposition table, whose values were computed with the old ones.
    pub fn set_eval(&mut self, eval: EvalWeights) {
        if eval != self.eval {
            self.eval = eval;
            self.clear();
        }
    }

    /// The evaluation's weights.
    #[must_use]
    pub fn eval(&self) -> EvalWeights {
        self.eval
    }

    /// Sets the seed that breaks ties between moves (see the type's docs).
    pub fn set_seed(&mut self, seed: u64) {
        self.seed = seed;
    }

    /// The tie-breaking seed.
    #[must_use]
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// With at most `points` points on the board, a depth limit is lifted so that the search
    /// solves the endgame exactly (bounded by the time and node limits, which must be set for
    /// this to apply). `None` turns this off.
    pub fn set_endgame_threshold(&mut self, points: Option<u32>) {
        self.endgame_points = points;
    }

    /// The endgame threshold (see [`Engine::set_endgame_threshold`]).
    #[must_use]
    pub fn endgame_threshold(&self) -> Option<u32> {
        self.endgame_points
    }

    /// Endgame tables to probe, or `None`. A table is used only for positions of its own rule
    /// set, and only where its value is exact for the game at hand (see [`crate::egtb`]):
    /// positions inside it then count as solved.
    pub fn set_tablebase(&mut self, tables: Option<Arc<Tablebase>>) {
        self.tables = tables;
    }

    /// The endgame tables in use, if any.
    #[must_use]
    pub fn tablebase(&self) -> Option<&Arc<Tablebase>> {
        self.tables.as_ref()
    }

    /// Forgets everything learnt: empties the transposition table.
    pub fn clear(&mut self) {
        self.tt.clear();
        self.rules = None;
    }

    /// Searches `position`, counting only the position itself for the repetition rule.
    ///
    /// Returns the best move found so far when a limit is reached or `cancel` is set (checked
    /// every 1024 nodes, a fraction of a millisecond); if not even one move was searched, the
    /// move that looks best at a glance. `best_move` is `None` only if the game is over.
    pub fn search(
        &mut self,
        position: &Position,
        limits: SearchLimits,
        cancel: &AtomicBool,
    ) -> SearchResult {
        let mut hist = KeyCounts::default();
        hist.insert(repetition_key(position), 1);
        self.run(position, hist, limits, None, cancel)
    }

    /// Searches the current position of `game`, applying the repetition rule with the game's
    /// whole history. Otherwise as [`Engine::search`].
    pub fn search_game(
        &mut self,
        game: &Game,
        limits: SearchLimits,
        cancel: &AtomicBool,
    ) -> SearchResult {
        self.run(game.position(), game_history(game), limits, None, cancel)
    }

    /// [`Engine::search_game`] that gives up part of its budget once `cap` says the position is
    /// lost (for `mistakes.rs`, whose pass gets the rest).
    pub(crate) fn search_game_capped(
        &mut self,
        game: &Game,
        limits: SearchLimits,
        cap: LostCap,
        cancel: &AtomicBool,
    ) -> SearchResult {
        self.run(
            game.position(),
            game_history(game),
            limits,
            Some(cap),
            cancel,
        )
    }

    fn run(
        &mut self,
        root: &Position,
        hist: KeyCounts,
        limits: SearchLimits,
        mut cap: Option<LostCap>,
        cancel: &AtomicBool,
    ) -> SearchResult {
        let start = Instant::now();
        if self.rules != Some(*root.rules()) {
            // A new engine's table is empty already (and clearing 8 MiB costs a millisecond).
            if self.rules.is_some() {
                self.tt.clear();
            }
            self.rules = Some(*root.rules());
        }
        self.killers.fill([0; 2]);
        self.history = [0; 24];
        self.hist = hist;
        self.path.clear();
        self.repetition_limit = root.rules().repetition_limit;
        self.nodes = 1;
        self.node_limit = limits.nodes.unwrap_or(u64::MAX).max(1);
        self.deadline = limits.time.map(|t| start + t);
        self.aborted = false;
        self.horizon = 0;
        self.repetition_hits = 0;
        self.tablebase_hits = 0;
        self.repeated = if self.repetition_limit == 0 {
            0
        } else {
            self.hist
                .values()
                .filter(|&&c| c + 1 >= self.repetition_limit)
                .count() as u32
        };

        let mut result = SearchResult {
            best_move: None,
            eval_points: score_difference(root),
            eval: self.eval.evaluate(root),
            exact: root.is_over(),
            pv: Vec::new(),
            depth: 0,
            nodes: 1,
            time: Duration::ZERO,
            stopped: false,
            tablebase: false,
            tablebase_hits: 0,
            book: false,
            for_mistakes: false,
        };
        if root.is_over() {
            result.time = start.elapsed();
            return result;
        }
        if let Some(solved) = self.root_from_tables(root) {
            return SearchResult {
                time: start.elapsed(),
                ..solved
            };
        }

        let mut time_budget = limits.time;
        let mut max_depth = limits.depth.unwrap_or(MAX_DEPTH).clamp(1, MAX_DEPTH);
        let bounded = limits.time.is_some() || limits.nodes.is_some();
        if let Some(points) = self.endgame_points
            && bounded
            && root.board_points() <= points as i32
        {
            max_depth = MAX_DEPTH;
        }

        let root_key = repetition_key(root);
        let mut children = self.children(root, 0).to_vec();
        // Seeded shuffle first, so that the stable sort below breaks ties by the seed.
        let mut rng = SplitMix64::new(self.seed ^ root_key);
        rng.shuffle(&mut children);
        let tt_move = self
            .tt
            .probe(search_key(root_key, root.ply()))
            .map_or(0, |e| e.mv);
        for c in &mut children {
            if encode(c.mv) == tt_move {
                c.order = i32::MAX;
            }
        }
        children.sort_by_key(|c| std::cmp::Reverse(c.order));
        result.best_move = Some(children[0].mv);
        result.pv = vec![children[0].mv];

        for depth in 1..=max_depth {
            if self.should_stop(cancel) {
                self.aborted = true;
            }
            if self.aborted {
                break;
            }
            let horizon_before = self.horizon;
            let (best, value, complete) = self.root_iteration(&children, depth, cancel);
            if let Some(best) = best {
                result.best_move = Some(children[best].mv);
                result.eval = value;
                result.pv = self.pv[..self.pv_len[0]].to_vec();
                if complete {
                    result.depth = depth;
                }
                let chosen = children.remove(best);
                children.insert(0, chosen);
            }
            if !complete {
                break;
            }
            if self.horizon == horizon_before {
                result.exact = true;
                break;
            }
            if let Some(LostCap {
                at_or_below,
                keep: share,
            }) = cap
                && (at_or_below.is_some_and(|lost| result.eval <= lost)
                    || result.best_move.is_some_and(|mv| ends_lost(root, mv)))
                && share < 1.0
            {
                // Applied once: later iterations keep the reduced budget.
                cap = None;
                time_budget = time_budget.map(|t| t.mul_f64(share));
                self.deadline = time_budget.map(|t| start + t);
                if let Some(n) = limits.nodes {
                    self.node_limit = ((n as f64 * share) as u64).max(1);
                }
                if self.nodes >= self.node_limit {
                    break;
                }
            }
            if let Some(t) = time_budget
                && start.elapsed() * 2 > t
            {
                break;
            }
        }
        result.eval_points = (result.eval + EVAL_SCALE / 2).div_euclid(EVAL_SCALE);
        result.nodes = self.nodes;
        result.time = start.elapsed();
        result.stopped = self.aborted;
        result.tablebase_hits = self.tablebase_hits;
        result
    }

    /// The table's value of `pos` in evaluation units, where it is exact for this search: no
    /// position of the history or path is one occurrence short of the repetition limit, and the
    /// proofs fit the ply and debt limits (see [`crate::egtb`]).
    fn table_value(&self, pos: &Position) -> Option<i32> {
        let tables = self.tables.as_ref()?;
        if self.repeated > 0 {
            return None;
        }
        let probe = tables.probe(pos)?;
        probe
            .fits_ply_limit(pos)
            .then(|| EVAL_SCALE * probe.final_difference(pos))
    }

    /// A whole result from the tables when the root is inside them: the proof's move and, as
    /// the principal variation, the proof's line while it stays inside the tables.
    fn root_from_tables(&self, root: &Position) -> Option<SearchResult> {
        let eval = self.table_value(root)?;
        let tables = self.tables.as_ref()?;
        let (best, _) = tables.best_move(root)?;
        let mut pv = vec![best];
        let mut pos = *root;
        pos.play_unchecked(best);
        while pv.len() < MAX_PLY
            && let Some((mv, _)) = tables.best_move(&pos)
        {
            pv.push(mv);
            pos.play_unchecked(mv);
        }
        Some(SearchResult {
            best_move: Some(best),
            eval_points: eval / EVAL_SCALE,
            eval,
            exact: true,
            pv,
            depth: 0,
            nodes: 1,
            time: Duration::ZERO,
            stopped: false,
            tablebase: true,
            tablebase_hits: 1,
            book: false,
            for_mistakes: false,
        })
    }

    /// One iteration at the root: the index of the best move among those fully searched, its
    /// value, and whether every move was searched.
    fn root_iteration(
        &mut self,
        children: &[Child],
        depth: u32,
        cancel: &AtomicBool,
    ) -> (Option<usize>, i32, bool) {
        let mut alpha = -INF;
        let beta = INF;
        let mut best = None;
        self.pv_len[0] = 0;
        for (i, child) in children.iter().enumerate() {
            let v = self.search_child(child, depth, alpha, beta, 0, i == 0, cancel);
            if self.aborted {
                return (best, alpha, false);
            }
            if v > alpha || best.is_none() {
                alpha = v;
                best = Some(i);
                self.update_pv(0, child.mv);
            }
        }
        (best, alpha, true)
    }

    /// Searches one child of a node at `ply` with principal variation search (a null window for
    /// all but the first child, re-searched when it beats alpha). Returns the value from the
    /// parent's point of view.
    #[allow(clippy::too_many_arguments)]
    fn search_child(
        &mut self,
        child: &Child,
        depth: u32,
        alpha: i32,
        beta: i32,
        ply: usize,
        first: bool,
        cancel: &AtomicBool,
    ) -> i32 {
        if let Some(v) = child.repetition {
            if self.nodes >= self.node_limit {
                self.aborted = true;
                return 0;
            }
            self.repetition_hits += 1;
            self.nodes += 1;
            self.pv_len[ply + 1] = ply + 1;
            return -v;
        }
        self.path.push(child.rkey);
        // Only tracked with tables: it costs a scan of the path.
        let crossed = self.tables.is_some()
            && self.repetition_limit > 0
            && self.hist.get(&child.rkey).copied().unwrap_or(0)
                + self.path.iter().filter(|&&k| k == child.rkey).count() as u32
                == self.repetition_limit - 1;
        self.repeated += u32::from(crossed);
        let v = if first {
            -self.negamax(
                &child.pos,
                child.rkey,
                depth - 1,
                -beta,
                -alpha,
                ply + 1,
                cancel,
            )
        } else {
            let mut v = -self.negamax(
                &child.pos,
                child.rkey,
                depth - 1,
                -alpha - 1,
                -alpha,
                ply + 1,
                cancel,
            );
            if v > alpha && v < beta && !self.aborted {
                v = -self.negamax(
                    &child.pos,
                    child.rkey,
                    depth - 1,
                    -beta,
                    -alpha,
                    ply + 1,
                    cancel,
                );
            }
            v
        };
        self.path.pop();
        self.repeated -= u32::from(crossed);
        v
    }

    #[allow(clippy::too_many_arguments)]
    fn negamax(
        &mut self,
        pos: &Position,
        rkey: u64,
        depth: u32,
        mut alpha: i32,
        beta: i32,
        ply: usize,
        cancel: &AtomicBool,
    ) -> i32 {
        self.pv_len[ply] = ply;
        self.nodes += 1;
        if self.nodes > self.node_limit
            || (self.nodes % CHECK_EVERY == 0 && self.should_stop(cancel))
        {
            // Stopped at, not visited: the count stays within the budget (the root alone
            // fills a budget of 1), and reaches it (an outside probe's budget of N visited
            // N − 1, and budgets of 1 and 2 searched alike).
            self.nodes -= 1;
            self.aborted = true;
            return 0;
        }
        if pos.is_over() {
            return EVAL_SCALE * score_difference(pos);
        }
        if let Some(v) = self.table_value(pos) {
            self.tablebase_hits += 1;
            return v;
        }
        if depth == 0 || ply >= MAX_PLY {
            self.horizon += 1;
            return self.eval.evaluate(pos);
        }
        let base = EVAL_SCALE * score_difference(pos);
        let key = search_key(rkey, pos.ply());
        let mut tt_move = 0;
        if let Some(e) = self.tt.probe(key) {
            tt_move = e.mv;
            if u32::from(e.depth) >= depth {
                let v = e.value + base;
                let cut = match e.bound {
                    Bound::Exact => true,
                    Bound::Lower => v >= beta,
                    Bound::Upper => v <= alpha,
                };
                if cut {
                    if e.depth != DEPTH_SOLVED {
                        self.horizon += 1;
                    }
                    return v;
                }
            }
        }

        let mut children = self.children(pos, ply);
        for c in children.iter_mut() {
            if encode(c.mv) == tt_move {
                c.order = i32::MAX;
            }
        }
        // Insertion sort, stable, best first: at most ten moves.
        for i in 1..children.len() {
            let mut j = i;
            while j > 0 && children[j - 1].order < children[j].order {
                children.swap(j - 1, j);
                j -= 1;
            }
        }

        let alpha_orig = alpha;
        let horizon_before = self.horizon;
        let repetitions_before = self.repetition_hits;
        let mut best = -INF;
        let mut best_move = children[0].mv;
        for (i, child) in children.iter().enumerate() {
            let v = self.search_child(child, depth, alpha, beta, ply, i == 0, cancel);
            if self.aborted {
                return 0;
            }
            if v > best {
                best = v;
                best_move = child.mv;
                if v > alpha {
                    alpha = v;
                    self.update_pv(ply, child.mv);
                    if v >= beta {
                        let code = encode(child.mv);
                        let k = &mut self.killers[ply];
                        if k[0] != code {
                            k[1] = k[0];
                            k[0] = code;
                        }
                        self.history[usize::from(code - 1)] += depth * depth;
                        break;
                    }
                }
            }
        }

        if self.repetition_hits == repetitions_before {
            let stored_depth = if self.horizon == horizon_before {
                DEPTH_SOLVED
            } else {
                depth.min(u32::from(DEPTH_SOLVED - 1)) as u8
            };
            let bound = if best >= beta {
                Bound::Lower
            } else if best > alpha_orig {
                Bound::Exact
            } else {
                Bound::Upper
            };
            self.tt
                .store(key, best - base, best_move, stored_depth, bound);
        }
        best
    }

    /// Plays every legal move of `pos` (the cheap trial behind the move ordering) and scores it
    /// for ordering: the static evaluation after the move (captures first, biggest first), then
    /// killer moves, then the history counters.
    fn children(&self, pos: &Position, ply: usize) -> ChildList {
        let moves = pos.legal_moves();
        let mut list = ChildList::new(Child {
            mv: NO_MOVE,
            pos: *pos,
            rkey: 0,
            repetition: None,
            order: 0,
        });
        let killers = self.killers[ply];
        for &mv in &moves {
            let mut next = *pos;
            next.play_unchecked(mv);
            let rkey = repetition_key(&next);
            let repetition = (!next.is_over() && self.repeats(rkey))
                .then(|| EVAL_SCALE * repetition_final_difference(&next));
            let code = encode(mv);
            let static_value = repetition.unwrap_or_else(|| self.eval.evaluate_for_ordering(&next));
            let killer = if killers[0] == code {
                2
            } else {
                i32::from(killers[1] == code)
            };
            // Debts may reach 100,000 stones (the rules crate's `MAX_DEBT`), so a value times
            // 4096 would overflow; beyond ±2^18 (65,536 points) the order cannot matter anyway.
            let order = -static_value.clamp(-(1 << 18), 1 << 18) * 4096
                + killer * 1024
                + self.history[usize::from(code - 1)].min(1023) as i32;
            list.push(Child {
                mv,
                pos: next,
                rkey,
                repetition,
                order,
            });
        }
        list
    }

    /// Whether a position with repetition key `rkey`, reached now, ends the game by repetition.
    fn repeats(&self, rkey: u64) -> bool {
        if self.repetition_limit == 0 {
            return false;
        }
        let before = self.hist.get(&rkey).copied().unwrap_or(0)
            + self.path.iter().filter(|&&k| k == rkey).count() as u32;
        before + 1 >= self.repetition_limit
    }

    fn update_pv(&mut self, ply: usize, mv: Move) {
        const W: usize = MAX_PLY + 2;
        self.pv[ply * W + ply] = mv;
        let child_len = self.pv_len[ply + 1].max(ply + 1);
        for j in ply + 1..child_len {
            self.pv[ply * W + j] = self.pv[(ply + 1) * W + j];
        }
        self.pv_len[ply] = child_len;
    }

    fn should_stop(&self, cancel: &AtomicBool) -> bool {
        cancel.load(Ordering::Relaxed) || self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// The move stored for `position` in the transposition table, if any (for tests and tools).
    #[must_use]
    pub fn hash_move(&self, position: &Position) -> Option<Move> {
        let key = search_key(repetition_key(position), position.ply());
        self.tt.probe(key).and_then(|e| decode(e.mv))
    }
}

/// Counts of the repetition keys of every position of `game`, the start included, as the rules
/// crate's `Game` counts them.
fn game_history(game: &Game) -> KeyCounts {
    let mut counts = KeyCounts::default();
    let mut pos = *game.start();
    *counts.entry(repetition_key(&pos)).or_insert(0) += 1;
    for &mv in game.moves() {
        if pos.check(mv).is_err() {
            break;
        }
        pos.play_unchecked(mv);
        if !pos.is_over() {
            *counts.entry(repetition_key(&pos)).or_insert(0) += 1;
        }
    }
    counts
}

/// Up to ten children on the stack.
#[derive(Clone, Copy)]
struct ChildList {
    items: [Child; 10],
    len: usize,
}

impl ChildList {
    /// An empty list; `filler` only fills the unused slots.
    const fn new(filler: Child) -> ChildList {
        ChildList {
            items: [filler; 10],
            len: 0,
        }
    }

    fn push(&mut self, child: Child) {
        self.items[self.len] = child;
        self.len += 1;
    }
}

impl std::ops::Deref for ChildList {
    type Target = [Child];
    fn deref(&self) -> &[Child] {
        &self.items[..self.len]
    }
}

impl std::ops::DerefMut for ChildList {
    fn deref_mut(&mut self) -> &mut [Child] {
        &mut self.items[..self.len]
    }
}

/// When a search for `mistakes.rs` gives up part of its budget: once an iteration's best move
/// ends the game lost, or (when set) values the root at or below `at_or_below` (eval units), it
/// keeps only the share `keep` and leaves the rest to the pass that looks for the opponent's
/// mistakes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LostCap {
    pub at_or_below: Option<i32>,
    pub keep: f64,
}

/// Whether `mv` ends the game with its player behind: a sure loss, whatever the search says of
/// the other moves.
pub(crate) fn ends_lost(position: &Position, mv: Move) -> bool {
    let mut next = *position;
    next.play_unchecked(mv);
    // After the move the opponent is the one to move: a positive difference is theirs.
    next.is_over() && score_difference(&next) > 0
}
