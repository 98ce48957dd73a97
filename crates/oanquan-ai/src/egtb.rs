//! Endgame tables: the exact value of every position with up to `N` plain stones on the board,
//! by retrograde analysis ([`Tablebase::generate`]), saved to a file ([`Tablebase::to_bytes`],
//! [`Tablebase::from_bytes`]) and probed by the [`crate::Engine`].
//!
//! # What a table holds
//!
//! One entry per *start-of-turn* position (after the refill) with at most `N` plain stones on the
//! board: the twelve squares, the mandarin pieces still standing (piece setups only; pieces are
//! not stones and are not counted in `N`) and the player to move. Entries are 3 bytes: the value,
//! and two proof depths (below). Positions where the game is over are not stored (the engine
//! scores them itself); positions whose value the analysis could not establish are stored as
//! *unknown* and never used.
//!
//! # Values (1): relative to the score difference
//!
//! Nothing in the rules depends on the captured counts (but see the debt limit below), so an
//! entry stores `final difference − current difference`, both for the player to move:
//! [`crate::score_difference`] of the position plus the entry gives the exact final margin, as
//! the engine's transposition table does.
//!
//! # The set and refills (2)
//!
//! A move never adds stones to the board, except the refill that follows it: after a move that
//! leaves `b` stones and the next mover's side empty, the next position has `b + 5` stones, which
//! may be more than `N`. The set is therefore *not* closed, and nothing outside it is assumed: a
//! move that leaves the set counts as unknown, exactly like a line that never ends (below). A
//! position is only resolved when its value can be proved without such moves; the generator
//! reports how many stay unknown.
//!
//! # Values (3): repetition and the ply limit
//!
//! A true value depends on the game's history (the 3-fold rule) and on the ply (the 300-ply
//! limit). The table stores a value that depends on neither, and the engine uses it only where it
//! provably equals the true value:
//!
//! * `M(P)`: the best final margin the player to move can *force*, when every line that does not
//!   end (or leaves the set) counts as a loss of everything for them;
//! * `N(P)`: the best the player to move can hope for when such lines count as a win of
//!   everything for them. `M ≤ N`, both computed as fixed points by value iteration.
//!
//! A position is *resolved* when `M(P) = N(P) = v`; v is stored. Then each side has a strategy
//! that depends on the position only and ends the game, within the set, with at least `v` for
//! the mover (resp. at most `v`): the iteration builds them so that a *proof depth* strictly
//! decreases along every line they allow, so no position occurs twice on such a line and every
//! line ends within that many plies. The entry stores both depths, `dM` (the mover's proof,
//! `≥ v`) and `dN` (the opponent's proof, `≤ v`).
//!
//! Under the real rules `v` is the exact value of the position when
//!
//! * the game ends by natural causes on those lines before the ply limit: `ply + max(dM, dN) ≤
//!   max_plies` ([`Probe::fits_ply_limit`]);
//! * no line can complete a repetition: every position of the game's history (the current path
//!   of the search included) has occurred at most `repetition_limit − 2` times. A proof line
//!   visits each position at most once, so nothing on it reaches the limit. The engine checks
//!   this and does not probe otherwise (chess tables have the same caveat with the 50-move rule);
//! * the mover of every later refill stays within the debt limit (`MAX_DEBT`), checked from the
//!   captured counts and the depth;
//! * the mandarin squares are no longer protected (`ply ≥ protected_plies`);
//! * the rule set is exactly the table's (stored in the file header and compared in full).
//!
//! With those conditions both strategies are legal and unaffected by the cycle rules, so the
//! value is exact whatever the history: this is also what the engine's exact solver finds with
//! an empty history far from the ply limit, and the `egtb verify` example checks the two agree.
//!
//! The cost of this honesty: positions whose value depends on a cycle (each player can keep
//! shuffling and prefers to) stay unknown, and those are most positions: with few stones and
//! stones left in a mandarin square, the game rarely *has* to end. Lines in which one side gains
//! by pumping a cycle (a refill inside a cycle moves 5 points each lap) make `M` grow without
//! bound; values are clamped at ±[`VALUE_LIMIT`], which keeps the bounds sound and leaves such
//! positions unknown.
//!
//! Before a table is returned, every bound with a proof depth is checked again against its
//! position's moves alone (`Generator::check_proofs`): a lower bound needs one move whose
//! child's opposite bound is proved with a smaller depth, an upper bound needs it of every
//! move, so depths strictly decrease and no proof can lean on a cycle. A table in which one
//! does not check is an error, not a file.
//!
//! The proof depths are computed from above (every depth starts infinite and only shrinks when a
//! move justifies it), so any finite depth stands for a real pair of strategies. They follow
//! value-optimal moves; where the only optimal lines of a child pump a cycle, the parent stays
//! unknown even though a proof for the smaller bound it needs may exist. Adding positions can
//! open such cycles, so the generator builds the tables for 0, 1, …, `N` stones in turn and
//! seeds each with the proofs of the one before (a proof for `n − 1` stones never leaves them,
//! so it holds in the larger set): the proved sets nest.
//!
//! # File format
//!
//! `OAQEGTB\0`, a format version (`u32`), the rule set (every field), `N` (`u32`), the number of
//! entries (`u64`), the entries (3 bytes each), and a 64-bit checksum of everything before it.
//! All integers little-endian. [`Tablebase::from_bytes`] refuses a file whose checksum, magic,
//! version, rule set or size does not match, with a [`TableError`]; it never panics.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicI16, AtomicU8, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use oanquan_rules::{
    ByPlayer, EmptyMandarinNext, EndCondition, MAX_DEBT, MandarinSetup, Move, Player, Position,
    Rules, SQUARES, Setup,
};

use crate::eval::score_difference;
use crate::rng::SplitMix64;

const MAGIC: &[u8; 8] = b"OAQEGTB\0";
/// Bumped whenever the meaning of the entries or the layout changes.
pub const FORMAT_VERSION: u32 = 1;
/// The largest `N` a table may have (the index fits easily; generation would not).
pub const MAX_TABLE_STONES: u32 = 30;
/// Stored values lie within ±`VALUE_LIMIT` points; anything beyond stays unknown.
pub const VALUE_LIMIT: i32 = 120;
/// Proof depths fit a byte; a longer proof stays unknown.
const DEPTH_LIMIT: u32 = 254;
const ENTRY_BYTES: usize = 3;
const HEADER_BYTES: usize = 8 + 4 + 2 + 3 + 1 + 4 + 4 + 4 + 4 + 8;
const CITIZEN_STONES: i32 = 5;

/// Lower and upper bounds beyond any real value during generation.
const LO_INF: i16 = -30_000;
const HI_INF: i16 = 30_000;
const DEPTH_INF: u8 = u8::MAX;

/// Why a table cannot be built or used.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TableError {
    /// The file is shorter than its header or than the entries it announces.
    Truncated,
    /// The checksum does not match: the file is damaged.
    Checksum,
    /// Not an endgame-table file.
    Magic,
    /// A format version this build cannot read.
    Version(u32),
    /// The rule set in the header is not a valid rule set.
    BadRules,
    /// `N` out of range, or the entry count does not match it.
    BadSize,
    /// The generator was asked for more stones than [`MAX_TABLE_STONES`].
    TooManyStones(u32),
    /// The generation was cancelled.
    Cancelled,
    /// A bound the generator found has no proof in its own results: a bug, reported rather
    /// than written to a file. The entry's index and what failed.
    Unproved(u64, &'static str),
}

impl fmt::Display for TableError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TableError::Truncated => f.write_str("endgame table file is truncated"),
            TableError::Checksum => {
                f.write_str("endgame table file is damaged (checksum mismatch)")
            }
            TableError::Magic => f.write_str("not an endgame table file (bad magic bytes)"),
            TableError::Version(v) => write!(
                f,
                "endgame table format version {v} is not supported (this build reads {FORMAT_VERSION})"
            ),
            TableError::BadRules => f.write_str("endgame table header holds an invalid rule set"),
            TableError::BadSize => {
                f.write_str("endgame table header's stone count and entry count do not match")
            }
            TableError::TooManyStones(n) => write!(
                f,
                "endgame tables are limited to {MAX_TABLE_STONES} stones, {n} asked"
            ),
            TableError::Cancelled => f.write_str("endgame table generation was cancelled"),
            TableError::Unproved(i, what) => write!(
                f,
                "endgame table generation found a bound without a proof at entry {i}: {what} \
                 (a bug in the generator; no file was written: please report it with the preset \
                 and --max-stones)"
            ),
        }
    }
}

impl std::error::Error for TableError {}

/// Binomial coefficients `C(n, k)` for the index, `n ≤ 48`, `k ≤ 13`.
struct Binomials([[u64; 14]; 49]);

const BINOMIALS: Binomials = {
    let mut t = [[0u64; 14]; 49];
    let mut n = 0;
    while n < 49 {
        t[n][0] = 1;
        let mut k = 1;
        while k < 14 && k <= n {
            t[n][k] = t[n - 1][k - 1] + if k < n { t[n - 1][k] } else { 0 };
            k += 1;
        }
        n += 1;
    }
    Binomials(t)
};

fn binom(n: usize, k: usize) -> u64 {
    BINOMIALS.0[n][k]
}

/// Boards with at most `n` stones over the 12 squares: `C(n + 12, 12)`.
fn board_count(n: u32) -> u64 {
    binom(n as usize + SQUARES, SQUARES)
}

/// The index of a board among those with at most `n` stones, in lexicographic order (square 0
/// most significant). `counts` must sum to at most `n`.
fn rank(counts: &[u8; SQUARES], n: u32) -> u64 {
    let mut left = n as usize;
    let mut index = 0;
    for (i, &c) in counts.iter().enumerate() {
        let k = SQUARES - 1 - i;
        let c = usize::from(c);
        // Boards that agree so far and hold fewer stones here: a hockey-stick sum.
        index += binom(left + k + 1, k + 1) - binom(left - c + k + 1, k + 1);
        left -= c;
    }
    index
}

/// The inverse of [`rank`].
fn unrank(mut index: u64, n: u32) -> [u8; SQUARES] {
    let mut counts = [0u8; SQUARES];
    let mut left = n as usize;
    for (i, slot) in counts.iter_mut().enumerate() {
        let k = SQUARES - 1 - i;
        let mut c = 0;
        loop {
            let with_c = binom(left - c + k, k);
            if index < with_c {
                break;
            }
            index -= with_c;
            c += 1;
        }
        *slot = c as u8;
        left -= c;
    }
    counts
}

/// The next board in [`rank`] order, or `false` after the last one.
fn next_board(counts: &mut [u8; SQUARES], total: &mut u32, n: u32) -> bool {
    for i in (0..SQUARES).rev() {
        if *total < n {
            counts[i] += 1;
            *total += 1;
            return true;
        }
        *total -= u32::from(counts[i]);
        counts[i] = 0;
    }
    false
}

/// What a probe found for a position inside the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Probe {
    /// Final score difference minus the current one, in points, for the player to move.
    pub relative: i32,
    /// Plies within which the mover's strategy (getting at least the value) ends the game.
    pub mover_depth: u32,
    /// Plies within which the opponent's strategy (holding the mover to the value) ends it.
    pub opponent_depth: u32,
}

impl Probe {
    /// The longest line either proof allows.
    #[must_use]
    pub fn depth(&self) -> u32 {
        self.mover_depth.max(self.opponent_depth)
    }

    /// The exact final difference (mover's points minus the opponent's) under best play.
    #[must_use]
    pub fn final_difference(&self, position: &Position) -> i32 {
        score_difference(position) + self.relative
    }

    /// Whether both proofs end before `position`'s ply limit, no refill on them can run into the
    /// debt limit, and the opening protection is over: the conditions of the module docs that
    /// depend on the position alone (the repetition condition depends on the history).
    #[must_use]
    pub fn fits_ply_limit(&self, position: &Position) -> bool {
        let rules = position.rules();
        let depth = self.depth();
        let captured = position.captured();
        let lowest = captured.first.min(captured.second);
        position.ply() >= rules.protected_plies
            && u64::from(position.ply()) + u64::from(depth) <= u64::from(rules.max_plies)
            && i64::from(lowest) - i64::from(CITIZEN_STONES) * i64::from(depth)
                >= -i64::from(MAX_DEBT)
    }
}

/// Counts from [`Tablebase::generate`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GenerateStats {
    /// Positions indexed (every board, piece state and mover, valid or not).
    pub entries: u64,
    /// Positions where the game goes on (the player to move has a move).
    pub live: u64,
    /// Live positions whose value was proved.
    pub resolved: u64,
    /// Value-iteration sweeps over the live positions.
    pub value_sweeps: u32,
    /// Sweeps to settle the proof depths.
    pub depth_sweeps: u32,
    /// Resolved values whose proofs were checked move by move against their children, in the
    /// largest table (generation fails with [`TableError::Unproved`] if one does not check):
    /// equal to `resolved`.
    pub proofs_checked: u64,
    /// Wall-clock time.
    pub time: Duration,
}

/// Loaded (or freshly generated) endgame tables for one rule set.
#[derive(Clone, PartialEq, Eq)]
pub struct Tablebase {
    rules: Rules,
    max_stones: u32,
    entries: Vec<u8>,
}

impl fmt::Debug for Tablebase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tablebase")
            .field("rules", &self.rules)
            .field("max_stones", &self.max_stones)
            .field("entries", &self.len())
            .finish()
    }
}

fn piece_states(rules: &Rules) -> u64 {
    if rules.has_pieces() { 4 } else { 1 }
}

fn entry_count(rules: &Rules, n: u32) -> u64 {
    board_count(n) * piece_states(rules) * 2
}

/// The index of a position's entry (the board must hold at most `n` stones).
fn entry_index(position: &Position, n: u32, states: u64) -> usize {
    let squares = position.squares();
    let pieces = u64::from(position.has_piece(0)) | u64::from(position.has_piece(6)) << 1;
    let mover = position.to_move().index() as u64;
    ((rank(&squares, n) * states + pieces) * 2 + mover) as usize
}

fn board_stones(position: &Position) -> u32 {
    position.squares().iter().map(|&s| u32::from(s)).sum()
}

/// The position of an entry, or `None` if it is not a valid start-of-turn position (the mover's
/// side is empty) or the game is already over there.
fn entry_position(
    rules: &Rules,
    squares: &[u8; SQUARES],
    pieces: u64,
    mover: Player,
) -> Option<Position> {
    let value = rules.piece_value();
    let mut setup = Setup {
        squares: squares.map(i32::from),
        pieces: [0; SQUARES],
        captured: ByPlayer::new(0, 0),
        captured_pieces: ByPlayer::new(0, 0),
        to_move: mover,
        ply: rules.protected_plies,
    };
    let mut standing = 0;
    if rules.has_pieces() {
        for (bit, square) in [(1, 0), (2, 6)] {
            if pieces & bit != 0 {
                setup.pieces[square] = 1;
                standing += 1;
            }
        }
        // Who captured the missing pieces does not matter: values are relative.
        setup.captured_pieces.first = 2 - standing;
    }
    let board: i32 = setup.squares.iter().sum();
    setup.captured.first = rules.total() - board - value * (standing + setup.captured_pieces.first);
    let position = Position::from_setup(setup, *rules).ok()?;
    (!position.is_over()).then_some(position)
}

/// Decodes the entry bytes: `None` for unknown.
fn decode_entry(bytes: &[u8]) -> Option<Probe> {
    let mover_depth = u32::from(bytes[1]);
    (mover_depth != 0).then(|| Probe {
        relative: i32::from(bytes[0] as i8),
        mover_depth,
        opponent_depth: u32::from(bytes[2]),
    })
}

/// The score a child adds, from the parent mover's point of view, before the child's own value:
/// `−score_difference(child) − score_difference(parent)`.
fn step_gain(parent: &Position, child: &Position) -> i32 {
    -score_difference(child) - score_difference(parent)
}

impl Tablebase {
    /// The rule set the table was built for.
    #[must_use]
    pub fn rules(&self) -> &Rules {
        &self.rules
    }

    /// `N`: the table covers positions with at most this many plain stones on the board.
    #[must_use]
    pub fn max_stones(&self) -> u32 {
        self.max_stones
    }

    /// Entries (positions indexed, including invalid and unknown ones).
    #[must_use]
    pub fn len(&self) -> usize {
        self.entries.len() / ENTRY_BYTES
    }

    /// Whether the table has no entries (never, for a table that loaded).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Entries with a proved value.
    #[must_use]
    pub fn resolved(&self) -> usize {
        self.entries
            .chunks_exact(ENTRY_BYTES)
            .filter(|e| e[1] != 0)
            .count()
    }

    /// Whether `position` is inside the table: same rule set, game not over, at most `N` stones.
    #[must_use]
    pub fn covers(&self, position: &Position) -> bool {
        *position.rules() == self.rules
            && !position.is_over()
            && board_stones(position) <= self.max_stones
    }

    /// The stored entry for `position`, if it is covered and its value was proved. The caller
    /// must still check the conditions of the module docs ([`Probe::fits_ply_limit`] and the
    /// repetition history) before taking the value as exact; [`crate::Engine`] does.
    #[must_use]
    pub fn probe(&self, position: &Position) -> Option<Probe> {
        if !self.covers(position) {
            return None;
        }
        let i = entry_index(position, self.max_stones, piece_states(&self.rules)) * ENTRY_BYTES;
        decode_entry(self.entries.get(i..i + ENTRY_BYTES)?)
    }

    /// A move that keeps the proved value and follows the mover's proof (its opponent depth is
    /// the smallest, so replaying these moves ends the game), with the resulting position.
    #[must_use]
    pub fn best_move(&self, position: &Position) -> Option<(Move, Probe)> {
        let probe = self.probe(position)?;
        let mut best: Option<(u32, Move)> = None;
        for &mv in &position.legal_moves() {
            let mut child = *position;
            child.play_unchecked(mv);
            let (value, depth) = if child.is_over() {
                (step_gain(position, &child), 0)
            } else {
                match self.probe(&child) {
                    Some(p) => (step_gain(position, &child) - p.relative, p.opponent_depth),
                    None => continue,
                }
            };
            if value == probe.relative && best.is_none_or(|(d, _)| depth < d) {
                best = Some((depth, mv));
            }
        }
        best.map(|(_, mv)| (mv, probe))
    }

    /// A random position inside the table (uniform over entries, drawn with `seed`): only
    /// positions with a proved value when `proved`, any position where the game goes on
    /// otherwise. The ply is the first unprotected one and the captured counts are made up (the
    /// values are relative). `None` if a million draws found none.
    #[must_use]
    pub fn sample(&self, seed: u64, proved: bool) -> Option<Position> {
        let mut rng = SplitMix64::new(seed);
        let states = piece_states(&self.rules);
        for _ in 0..1_000_000 {
            let i = rng.below(self.len());
            if proved && self.entries[i * ENTRY_BYTES + 1] == 0 {
                continue;
            }
            let mover = if i % 2 == 0 {
                Player::First
            } else {
                Player::Second
            };
            let pieces = (i as u64 / 2) % states;
            let board = unrank(i as u64 / 2 / states, self.max_stones);
            if let Some(pos) = entry_position(&self.rules, &board, pieces, mover) {
                return Some(pos);
            }
        }
        None
    }

    /// Builds the tables for `rules` and `max_stones`, on `threads` threads (at least one).
    /// Stops with [`TableError::Cancelled`] when `cancel` is set.
    ///
    /// # Errors
    ///
    /// [`TableError::TooManyStones`] above [`MAX_TABLE_STONES`]; [`TableError::Cancelled`];
    /// [`TableError::Unproved`] if a proof the iteration found does not check against its
    /// position's moves (a bug: the table is not returned).
    pub fn generate(
        rules: Rules,
        max_stones: u32,
        threads: usize,
        cancel: &AtomicBool,
    ) -> Result<(Tablebase, GenerateStats), TableError> {
        Tablebase::generate_inner(rules, max_stones, threads, cancel, false)
            .map(|(table, stats, _)| (table, stats))
    }

    /// [`Tablebase::generate`], also keeping the one-sided bounds of the largest table (see
    /// [`ProofBounds`]). The table is the same.
    ///
    /// # Errors
    ///
    /// As [`Tablebase::generate`].
    pub fn generate_with_bounds(
        rules: Rules,
        max_stones: u32,
        threads: usize,
        cancel: &AtomicBool,
    ) -> Result<(Tablebase, GenerateStats, ProofBounds), TableError> {
        let (table, stats, bounds) =
            Tablebase::generate_inner(rules, max_stones, threads, cancel, true)?;
        Ok((table, stats, bounds.ok_or(TableError::BadSize)?))
    }

    fn generate_inner(
        rules: Rules,
        max_stones: u32,
        threads: usize,
        cancel: &AtomicBool,
        keep_bounds: bool,
    ) -> Result<(Tablebase, GenerateStats, Option<ProofBounds>), TableError> {
        if max_stones > MAX_TABLE_STONES {
            return Err(TableError::TooManyStones(max_stones));
        }
        let start = Instant::now();
        let threads = threads.max(1);
        let mut stats = GenerateStats::default();
        // Table n starts from table n − 1's proofs (their lines stay below n stones, so they
        // hold in the larger set): the proved sets nest, and proofs that the larger set's
        // pumping cycles would hide (see the module docs) are kept.
        let mut previous: Option<Tablebase> = None;
        let mut levels = Vec::new();
        for n in 0..=max_stones {
            let g = Generator::new(rules, n);
            stats.entries = g.entries;
            stats.live = g.par_count(threads, |g, i, _| g.init(i));
            if let Some(smaller) = &previous {
                g.seed(smaller);
            }
            g.settle(threads, cancel, &mut stats)?;
            stats.proofs_checked = g.check_proofs(threads, previous.as_ref())?;
            if keep_bounds {
                levels.push(g.bounds());
            }
            previous = Some(g.finish());
        }
        let table = previous.ok_or(TableError::BadSize)?;
        stats.resolved = table.resolved() as u64;
        stats.time = start.elapsed();
        let bounds = keep_bounds.then_some(ProofBounds { levels });
        Ok((table, stats, bounds))
    }

    /// The file's bytes (see the module docs for the format).
    #[must_use]
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_BYTES + self.entries.len() + 8);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        let (kind, value) = match self.rules.mandarin {
            MandarinSetup::Stones => (0u8, 0u8),
            MandarinSetup::Piece { value } => (1, value),
        };
        out.extend_from_slice(&[kind, value]);
        out.push(match self.rules.empty_mandarin_next {
            EmptyMandarinNext::EndsTurn => 0,
            EmptyMandarinNext::EmptySquare => 1,
        });
        out.push(self.rules.immature_mandarin);
        out.push(match self.rules.end_condition {
            EndCondition::MandarinSquaresEmpty => 0,
            EndCondition::PiecesCaptured => 1,
        });
        out.push(0);
        out.extend_from_slice(&self.rules.protected_plies.to_le_bytes());
        out.extend_from_slice(&self.rules.repetition_limit.to_le_bytes());
        out.extend_from_slice(&self.rules.max_plies.to_le_bytes());
        out.extend_from_slice(&self.max_stones.to_le_bytes());
        out.extend_from_slice(&(self.len() as u64).to_le_bytes());
        debug_assert_eq!(out.len(), HEADER_BYTES);
        out.extend_from_slice(&self.entries);
        let sum = checksum(&out);
        out.extend_from_slice(&sum.to_le_bytes());
        out
    }

    /// Reads a table file's bytes.
    ///
    /// # Errors
    ///
    /// A [`TableError`] saying what is wrong: damaged (checksum), not a table (magic), another
    /// version, an invalid rule set, or a size that does not match the header.
    pub fn from_bytes(bytes: &[u8]) -> Result<Tablebase, TableError> {
        if bytes.len() < HEADER_BYTES + 8 {
            return Err(TableError::Truncated);
        }
        if &bytes[..8] != MAGIC {
            return Err(TableError::Magic);
        }
        let (body, tail) = bytes.split_at(bytes.len() - 8);
        let stored = u64::from_le_bytes(tail.try_into().map_err(|_| TableError::Truncated)?);
        if checksum(body) != stored {
            return Err(TableError::Checksum);
        }
        let u32_at = |at: usize| {
            u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
        };
        let version = u32_at(8);
        if version != FORMAT_VERSION {
            return Err(TableError::Version(version));
        }
        let mandarin = match (bytes[12], bytes[13]) {
            (0, 0) => MandarinSetup::Stones,
            (1, value) => MandarinSetup::Piece { value },
            _ => return Err(TableError::BadRules),
        };
        let empty_mandarin_next = match bytes[14] {
            0 => EmptyMandarinNext::EndsTurn,
            1 => EmptyMandarinNext::EmptySquare,
            _ => return Err(TableError::BadRules),
        };
        let immature_mandarin = bytes[15];
        let end_condition = match bytes[16] {
            0 => EndCondition::MandarinSquaresEmpty,
            1 => EndCondition::PiecesCaptured,
            _ => return Err(TableError::BadRules),
        };
        let rules = Rules {
            mandarin,
            empty_mandarin_next,
            protected_plies: u32_at(18),
            immature_mandarin,
            end_condition,
            repetition_limit: u32_at(22),
            max_plies: u32_at(26),
        };
        if bytes[17] != 0 || rules.validate().is_err() {
            return Err(TableError::BadRules);
        }
        let max_stones = u32_at(30);
        if max_stones > MAX_TABLE_STONES {
            return Err(TableError::BadSize);
        }
        let mut count = [0u8; 8];
        count.copy_from_slice(&bytes[34..42]);
        let count = u64::from_le_bytes(count);
        if count != entry_count(&rules, max_stones) {
            return Err(TableError::BadSize);
        }
        let payload = &body[HEADER_BYTES..];
        if payload.len() as u64 != count * ENTRY_BYTES as u64 {
            return Err(TableError::Truncated);
        }
        Ok(Tablebase {
            rules,
            max_stones,
            entries: payload.to_vec(),
        })
    }

    /// Reads a table file.
    ///
    /// # Errors
    ///
    /// The I/O error, or [`Tablebase::from_bytes`]'s, as text with the path.
    pub fn load(path: &std::path::Path) -> Result<Tablebase, String> {
        use std::io::Read as _;
        let cannot_read =
            |e: std::io::Error| format!("cannot read endgame tables {}: {e}", path.display());
        // Opening a FIFO would wait for a writer, forever at a server's start.
        if !std::fs::metadata(path).map_err(cannot_read)?.is_file() {
            return Err(format!(
                "cannot read endgame tables {}: not a regular file",
                path.display()
            ));
        }
        let mut file = std::fs::File::open(path).map_err(cannot_read)?;
        // The magic first: a wrong path to a large file (or to /dev/zero) is refused without
        // reading it all into memory.
        let mut magic = [0u8; 8];
        match file.read_exact(&mut magic) {
            Ok(()) if &magic != MAGIC => {
                return Err(format!("{}: {}", path.display(), TableError::Magic));
            }
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                return Err(format!("{}: {}", path.display(), TableError::Truncated));
            }
            Err(e) => return Err(cannot_read(e)),
        }
        let mut bytes = magic.to_vec();
        file.read_to_end(&mut bytes).map_err(cannot_read)?;
        Tablebase::from_bytes(&bytes).map_err(|e| format!("{}: {e}", path.display()))
    }
}

/// A 64-bit checksum, eight bytes at a time (fast on a 100 MB file, and any flipped bit changes
/// it).
fn checksum(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xCBF2_9CE4_8422_2325 ^ bytes.len() as u64;
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        h = (h ^ u64::from_le_bytes(w))
            .wrapping_mul(0x0000_0100_0000_01B3)
            .rotate_left(29);
    }
    for &b in chunks.remainder() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01B3);
    }
    crate::rng::mix(h)
}

/// Whether bounds and depths make a stored (resolved) entry: both bounds equal, within the
/// value range, with proofs short enough for a byte.
fn is_stored(lo: i32, hi: i32, d_lo: u32, d_hi: u32) -> bool {
    lo == hi && lo.abs() <= VALUE_LIMIT && d_lo <= DEPTH_LIMIT && d_hi <= DEPTH_LIMIT
}

/// The upper bounds the generator proved for every position of each table it built (0, 1, …,
/// `N` stones), also where they are not values (the file keeps only the positions where the
/// two bounds meet): `N(P) ≤ upper` with a proof depth, checked move by move like the stored
/// values (see the module docs). A child's upper bound is what its parent's mover needs for a
/// lower bound, so these give the mover's proof moves. Every size is kept because a proof seeded from
/// a smaller table may pass through positions whose bound the larger table improved without a
/// proof. Not saved to the file; [`crate::exact::ExactSolver`] orders its moves by them.
#[derive(Clone)]
pub struct ProofBounds {
    levels: Vec<LevelBounds>,
}

impl fmt::Debug for ProofBounds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProofBounds")
            .field("levels", &self.levels.len())
            .finish_non_exhaustive()
    }
}

impl ProofBounds {
    fn proved_uppers(&self, position: &Position) -> impl Iterator<Item = (i32, u32)> {
        let stones = board_stones(position) as usize;
        self.levels
            .iter()
            .skip(stones)
            .filter_map(move |level| level.upper(position))
    }

    /// The shortest proof, over every table size, that `N(position) ≤ limit` (relative, for
    /// the mover): its depth.
    #[must_use]
    pub fn upper_within(&self, position: &Position, limit: i32) -> Option<u32> {
        self.proved_uppers(position)
            .filter(|&(hi, _)| hi <= limit)
            .map(|(_, d)| d)
            .min()
    }

    /// The lowest proved upper bound of `N(position)` over every table size, and its depth.
    #[must_use]
    pub fn best_upper(&self, position: &Position) -> Option<(i32, u32)> {
        self.proved_uppers(position).min()
    }
}

/// [`ProofBounds`] of one table size.
#[derive(Clone)]
struct LevelBounds {
    rules: Rules,
    n: u32,
    states: u64,
    hi: Vec<i16>,
    d_hi: Vec<u8>,
}

impl LevelBounds {
    fn index(&self, position: &Position) -> Option<usize> {
        (*position.rules() == self.rules && !position.is_over() && board_stones(position) <= self.n)
            .then(|| entry_index(position, self.n, self.states))
    }

    /// The proved upper bound of `N` (relative, for the mover) and its proof depth.
    fn upper(&self, position: &Position) -> Option<(i32, u32)> {
        let i = self.index(position)?;
        (self.d_hi[i] != DEPTH_INF && self.hi[i] != HI_INF)
            .then(|| (i32::from(self.hi[i]), u32::from(self.d_hi[i])))
    }
}

/// Retrograde state: bounds `M ≤ N` and proof depths for every entry, shared between threads
/// (relaxed atomics: the iteration is monotone, so reading a value another thread is about to
/// improve only delays convergence, and the loop runs until a sweep changes nothing).
struct Generator {
    rules: Rules,
    n: u32,
    states: u64,
    entries: u64,
    live: Vec<AtomicBool>,
    lo: Vec<AtomicI16>,
    hi: Vec<AtomicI16>,
    d_lo: Vec<AtomicU8>,
    d_hi: Vec<AtomicU8>,
}

/// A child of a live position: the score it adds and its entry, or `None` when the game ends.
enum ChildRef {
    Over(i32),
    Entry(i32, usize),
    Outside,
}

impl Generator {
    fn new(rules: Rules, n: u32) -> Generator {
        let entries = entry_count(&rules, n);
        let len = entries as usize;
        Generator {
            rules,
            n,
            states: piece_states(&rules),
            entries,
            live: (0..len).map(|_| AtomicBool::new(false)).collect(),
            lo: (0..len).map(|_| AtomicI16::new(LO_INF)).collect(),
            hi: (0..len).map(|_| AtomicI16::new(HI_INF)).collect(),
            d_lo: (0..len).map(|_| AtomicU8::new(DEPTH_INF)).collect(),
            d_hi: (0..len).map(|_| AtomicU8::new(DEPTH_INF)).collect(),
        }
    }

    /// Runs `step` on every live entry (all entries when `live` is not yet known), boards split
    /// into chunks that threads take in turn; returns how many calls returned `true`.
    fn par_count(
        &self,
        threads: usize,
        step: impl Fn(&Generator, usize, &Position) -> bool + Sync,
    ) -> u64 {
        let boards = board_count(self.n);
        let chunk = (boards / 256).max(1);
        let next = AtomicUsize::new(0);
        let total = std::sync::atomic::AtomicU64::new(0);
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    let mut changed = 0;
                    loop {
                        let first = next.fetch_add(1, Ordering::Relaxed) as u64 * chunk;
                        if first >= boards {
                            break;
                        }
                        let last = (first + chunk).min(boards);
                        let mut counts = unrank(first, self.n);
                        let mut stones: u32 = counts.iter().map(|&c| u32::from(c)).sum();
                        for b in first..last {
                            for pieces in 0..self.states {
                                for mover in Player::ALL {
                                    let i = ((b * self.states + pieces) * 2 + mover.index() as u64)
                                        as usize;
                                    if let Some(pos) =
                                        entry_position(&self.rules, &counts, pieces, mover)
                                        && step(self, i, &pos)
                                    {
                                        changed += 1;
                                    }
                                }
                            }
                            if !next_board(&mut counts, &mut stones, self.n) {
                                break;
                            }
                        }
                    }
                    total.fetch_add(changed, Ordering::Relaxed);
                });
            }
        });
        total.load(Ordering::Relaxed)
    }

    /// Iterates the bounds, then the proof depths, to their fixed points.
    fn settle(
        &self,
        threads: usize,
        cancel: &AtomicBool,
        stats: &mut GenerateStats,
    ) -> Result<(), TableError> {
        let sweep = |step: fn(&Generator, usize, &Position) -> bool, sweeps: &mut u32| loop {
            if cancel.load(Ordering::Relaxed) {
                return Err(TableError::Cancelled);
            }
            *sweeps += 1;
            if self.par_count(threads, step) == 0 {
                return Ok(());
            }
        };
        sweep(Generator::value_step, &mut stats.value_sweeps)?;
        sweep(Generator::depth_step, &mut stats.depth_sweeps)
    }

    /// Copies the proofs of a table for fewer stones.
    fn seed(&self, smaller: &Tablebase) {
        let n = smaller.max_stones;
        let mut counts = [0u8; SQUARES];
        let mut stones = 0;
        for b in 0..board_count(n) {
            let big = rank(&counts, self.n);
            for pieces in 0..self.states {
                for mover in 0..2 {
                    let from = (((b * self.states + pieces) * 2 + mover) as usize) * ENTRY_BYTES;
                    let to = ((big * self.states + pieces) * 2 + mover) as usize;
                    let e = &smaller.entries[from..from + ENTRY_BYTES];
                    if e[1] != 0 {
                        let v = i16::from(e[0] as i8);
                        self.lo[to].store(v, Ordering::Relaxed);
                        self.hi[to].store(v, Ordering::Relaxed);
                        self.d_lo[to].store(e[1], Ordering::Relaxed);
                        self.d_hi[to].store(e[2], Ordering::Relaxed);
                    }
                }
            }
            if !next_board(&mut counts, &mut stones, n) {
                break;
            }
        }
    }

    fn init(&self, i: usize) -> bool {
        self.live[i].store(true, Ordering::Relaxed);
        true
    }

    fn child(&self, pos: &Position, mv: Move) -> ChildRef {
        let mut child = *pos;
        child.play_unchecked(mv);
        let gain = step_gain(pos, &child);
        if child.is_over() {
            ChildRef::Over(gain)
        } else if board_stones(&child) > self.n {
            ChildRef::Outside
        } else {
            ChildRef::Entry(gain, entry_index(&child, self.n, self.states))
        }
    }

    /// One value-iteration update of `M` and `N`; `true` if either moved.
    fn value_step(&self, i: usize, pos: &Position) -> bool {
        let (old_lo, old_hi) = (
            self.lo[i].load(Ordering::Relaxed),
            self.hi[i].load(Ordering::Relaxed),
        );
        if old_lo == old_hi {
            return false;
        }
        let mut lo = i32::from(LO_INF);
        let mut hi = i32::from(LO_INF);
        for &mv in &pos.legal_moves() {
            let (c_lo, c_hi) = match self.child(pos, mv) {
                ChildRef::Over(gain) => (gain, gain),
                ChildRef::Entry(gain, c) => {
                    let c_lo = self.lo[c].load(Ordering::Relaxed);
                    let c_hi = self.hi[c].load(Ordering::Relaxed);
                    let lo = if c_hi == HI_INF {
                        i32::from(LO_INF)
                    } else {
                        gain - i32::from(c_hi)
                    };
                    let hi = if c_lo == LO_INF {
                        i32::from(HI_INF)
                    } else {
                        gain - i32::from(c_lo)
                    };
                    (lo, hi)
                }
                ChildRef::Outside => (i32::from(LO_INF), i32::from(HI_INF)),
            };
            lo = lo.max(c_lo);
            hi = hi.max(c_hi);
        }
        // Clamping keeps both bounds sound (a lower bound lowered, an upper bound raised) and
        // stops a pumping cycle from iterating forever; clamped values never count as proved.
        let lo = if lo == i32::from(LO_INF) {
            LO_INF
        } else {
            lo.min(VALUE_LIMIT + 1) as i16
        };
        let hi = if hi == i32::from(HI_INF) {
            HI_INF
        } else {
            hi.max(-VALUE_LIMIT - 1) as i16
        };
        let lo = lo.max(old_lo);
        let hi = hi.min(old_hi);
        if (lo, hi) == (old_lo, old_hi) {
            return false;
        }
        self.lo[i].store(lo, Ordering::Relaxed);
        self.hi[i].store(hi, Ordering::Relaxed);
        true
    }

    /// One update of the proof depths; `true` if one shrank. `dM` follows the child that gives
    /// `M` with the shortest opponent proof; `dN` must cover every child.
    fn depth_step(&self, i: usize, pos: &Position) -> bool {
        let lo = self.lo[i].load(Ordering::Relaxed);
        let hi = self.hi[i].load(Ordering::Relaxed);
        let mut changed = false;
        if lo != LO_INF {
            let mut best = u32::from(DEPTH_INF);
            for &mv in &pos.legal_moves() {
                let d = match self.child(pos, mv) {
                    ChildRef::Over(gain) if gain == i32::from(lo) => 0,
                    ChildRef::Entry(gain, c)
                        if gain - i32::from(self.hi[c].load(Ordering::Relaxed))
                            == i32::from(lo)
                            && self.hi[c].load(Ordering::Relaxed) != HI_INF =>
                    {
                        u32::from(self.d_hi[c].load(Ordering::Relaxed))
                    }
                    _ => continue,
                };
                best = best.min(d + 1);
            }
            let best = best.min(u32::from(DEPTH_INF)) as u8;
            if best < self.d_lo[i].load(Ordering::Relaxed) {
                self.d_lo[i].store(best, Ordering::Relaxed);
                changed = true;
            }
        }
        if hi != HI_INF {
            let mut worst = 0;
            for &mv in &pos.legal_moves() {
                let d = match self.child(pos, mv) {
                    ChildRef::Over(_) => 0,
                    ChildRef::Entry(_, c) => u32::from(self.d_lo[c].load(Ordering::Relaxed)),
                    ChildRef::Outside => u32::from(DEPTH_INF),
                };
                worst = worst.max(d + 1);
            }
            let worst = worst.min(u32::from(DEPTH_INF)) as u8;
            if worst < self.d_hi[i].load(Ordering::Relaxed) {
                self.d_hi[i].store(worst, Ordering::Relaxed);
                changed = true;
            }
        }
        changed
    }

    /// Checks every bound with a finite proof depth against its children, independently of how
    /// the iteration reached it: a lower bound `M` needs one move whose result is at least `M`
    /// (the game ends, or the child's upper bound is proved with a smaller depth); an upper
    /// bound `N` needs every move's result at most `N` (each child's lower bound proved with a
    /// smaller depth, none outside the set). Depths strictly decrease along every line the
    /// proofs allow, so by induction on the depth each checked bound holds under the rules, and
    /// the stored values (both bounds equal) are exact in the sense of the module docs.
    ///
    /// A bound still exactly as seeded from `smaller` (same value, same depth) is not checked
    /// again: its proof was checked in the smaller table, where its lines stay, and it may rest
    /// on a child's weaker bound that this table has since improved and no longer holds.
    /// Returns how many resolved values were checked.
    fn check_proofs(&self, threads: usize, smaller: Option<&Tablebase>) -> Result<u64, TableError> {
        let failure: std::sync::Mutex<Option<TableError>> = std::sync::Mutex::new(None);
        let resolved = self.par_count(threads, |g, i, pos| match g.check_entry(i, pos, smaller) {
            Ok(resolved) => resolved,
            Err(what) => {
                let mut failure = failure
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                failure.get_or_insert(TableError::Unproved(i as u64, what));
                false
            }
        });
        match failure
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
        {
            Some(error) => Err(error),
            None => Ok(resolved),
        }
    }

    /// [`Generator::check_proofs`] for one entry: `Ok(true)` if it is a resolved value.
    fn check_entry(
        &self,
        i: usize,
        pos: &Position,
        smaller: Option<&Tablebase>,
    ) -> Result<bool, &'static str> {
        let lo = i32::from(self.lo[i].load(Ordering::Relaxed));
        let hi = i32::from(self.hi[i].load(Ordering::Relaxed));
        let d_lo = u32::from(self.d_lo[i].load(Ordering::Relaxed));
        let d_hi = u32::from(self.d_hi[i].load(Ordering::Relaxed));
        let seeded = smaller.and_then(|t| t.probe(pos));
        let moves = pos.legal_moves();
        if d_lo != u32::from(DEPTH_INF)
            && seeded.is_none_or(|s| (s.relative, s.mover_depth) != (lo, d_lo))
        {
            if lo == i32::from(LO_INF) {
                return Err("a lower-bound depth without a lower bound");
            }
            let proved = moves.iter().any(|&mv| match self.child(pos, mv) {
                ChildRef::Over(gain) => gain >= lo && d_lo >= 1,
                ChildRef::Entry(gain, c) => {
                    let c_hi = self.hi[c].load(Ordering::Relaxed);
                    let c_d = u32::from(self.d_hi[c].load(Ordering::Relaxed));
                    c_hi != HI_INF
                        && c_d != u32::from(DEPTH_INF)
                        && gain - i32::from(c_hi) >= lo
                        && c_d < d_lo
                }
                ChildRef::Outside => false,
            });
            if !proved {
                return Err("no move proves the lower bound");
            }
        }
        if d_hi != u32::from(DEPTH_INF)
            && seeded.is_none_or(|s| (s.relative, s.opponent_depth) != (hi, d_hi))
        {
            if hi == i32::from(HI_INF) {
                return Err("an upper-bound depth without an upper bound");
            }
            let proved = moves.iter().all(|&mv| match self.child(pos, mv) {
                ChildRef::Over(gain) => gain <= hi && d_hi >= 1,
                ChildRef::Entry(gain, c) => {
                    let c_lo = self.lo[c].load(Ordering::Relaxed);
                    let c_d = u32::from(self.d_lo[c].load(Ordering::Relaxed));
                    c_lo != LO_INF
                        && c_d != u32::from(DEPTH_INF)
                        && gain - i32::from(c_lo) <= hi
                        && c_d < d_hi
                }
                ChildRef::Outside => false,
            });
            if !proved {
                return Err("a move escapes the upper bound");
            }
        }
        Ok(is_stored(lo, hi, d_lo, d_hi))
    }

    fn bounds(&self) -> LevelBounds {
        let load16 = |v: &[AtomicI16]| v.iter().map(|x| x.load(Ordering::Relaxed)).collect();
        let load8 = |v: &[AtomicU8]| v.iter().map(|x| x.load(Ordering::Relaxed)).collect();
        LevelBounds {
            rules: self.rules,
            n: self.n,
            states: self.states,
            hi: load16(&self.hi),
            d_hi: load8(&self.d_hi),
        }
    }

    fn finish(self) -> Tablebase {
        let len = self.entries as usize;
        let mut entries = vec![0u8; len * ENTRY_BYTES];
        for i in 0..len {
            if !self.live[i].load(Ordering::Relaxed) {
                continue;
            }
            let lo = i32::from(self.lo[i].load(Ordering::Relaxed));
            let hi = i32::from(self.hi[i].load(Ordering::Relaxed));
            let d_lo = u32::from(self.d_lo[i].load(Ordering::Relaxed));
            let d_hi = u32::from(self.d_hi[i].load(Ordering::Relaxed));
            if is_stored(lo, hi, d_lo, d_hi) {
                let e = &mut entries[i * ENTRY_BYTES..(i + 1) * ENTRY_BYTES];
                e[0] = lo as i8 as u8;
                e[1] = d_lo as u8;
                e[2] = d_hi as u8;
            }
        }
        Tablebase {
            rules: self.rules,
            max_stones: self.n,
            entries,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_and_unrank_are_inverse_and_follow_the_enumeration() {
        for n in [0, 1, 3] {
            let mut counts = [0u8; SQUARES];
            let mut total = 0;
            let mut i = 0;
            loop {
                assert_eq!(rank(&counts, n), i);
                assert_eq!(unrank(i, n), counts);
                i += 1;
                if !next_board(&mut counts, &mut total, n) {
                    break;
                }
            }
            assert_eq!(i, board_count(n));
        }
    }

    /// A settled 5-stone generator for the standard rules, and one resolved entry (value and
    /// both proof depths) whose lower bound no single move reaches at once (`dM ≥ 2`).
    fn settled() -> (Generator, usize) {
        let g = Generator::new(oanquan_rules::Preset::Standard.rules(), 5);
        g.par_count(2, |g, i, _| g.init(i));
        g.settle(2, &AtomicBool::new(false), &mut GenerateStats::default())
            .expect("not cancelled");
        let i = (0..g.entries as usize)
            .find(|&i| {
                g.live[i].load(Ordering::Relaxed)
                    && g.lo[i].load(Ordering::Relaxed) == g.hi[i].load(Ordering::Relaxed)
                    && (2..u32::from(DEPTH_INF))
                        .contains(&u32::from(g.d_lo[i].load(Ordering::Relaxed)))
                    && g.d_hi[i].load(Ordering::Relaxed) != DEPTH_INF
            })
            .expect("a resolved entry with a two-ply proof");
        (g, i)
    }

    #[test]
    fn the_proof_check_passes_on_the_generator_s_results_and_catches_each_kind_of_bad_bound() {
        let (g, i) = settled();
        assert!(g.check_proofs(2, None).expect("every proof checks") > 0);
        let unproved = |g: &Generator| match g.check_proofs(2, None) {
            Err(TableError::Unproved(at, what)) => (at, what),
            other => panic!("a tampered bound passed: {other:?}"),
        };

        let v = g.lo[i].load(Ordering::Relaxed);
        g.lo[i].store(v + 1, Ordering::Relaxed);
        assert_eq!(unproved(&g), (i as u64, "no move proves the lower bound"));
        g.lo[i].store(v, Ordering::Relaxed);

        g.hi[i].store(v - 1, Ordering::Relaxed);
        assert_eq!(unproved(&g), (i as u64, "a move escapes the upper bound"));
        g.hi[i].store(v, Ordering::Relaxed);

        // A depth that does not decrease along the line: the proof could be a cycle.
        let d = g.d_lo[i].load(Ordering::Relaxed);
        g.d_lo[i].store(1, Ordering::Relaxed);
        assert_eq!(unproved(&g), (i as u64, "no move proves the lower bound"));
        g.d_lo[i].store(d, Ordering::Relaxed);

        assert!(g.check_proofs(2, None).is_ok(), "restored");
    }

    #[test]
    fn checksum_sees_a_flipped_bit() {
        let a = vec![7u8; 1001];
        let mut b = a.clone();
        b[500] ^= 4;
        assert_ne!(checksum(&a), checksum(&b));
    }
}
