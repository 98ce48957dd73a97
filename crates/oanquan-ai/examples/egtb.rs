//! Endgame tables: generate, verify against the exact solver, and measure.
//!
//! ```text
//! cargo run --release -p oanquan-ai --example egtb -- generate --preset standard --max-stones N --out FILE [--threads T]
//! cargo run --release -p oanquan-ai --example egtb -- verify --tables FILE [--positions 10000] [--seed S] [--slack K] [--tt-mb MB] [--threads T] [--time-limit-ms MS] [--solver fast|engine] [--hints bounds|table|none]
//! cargo run --release -p oanquan-ai --example egtb -- bench --tables FILE [--positions 1000] [--seed S]
//! ```
//!
//! `generate` fails rather than write a table with a proof that does not check against its
//! position's moves ([`Tablebase::generate`]). `verify` draws random positions inside the table
//! with a proved value, places each at the tightest ply its value is claimed for, and compares
//! the stored final margin with an exact solver of the real rules (an empty history): by
//! default (`--solver fast`) [`ExactSolver`], which proves the value with two path-free
//! searches and certifies it with strategies replayed by the rules (see `oanquan_ai::exact`;
//! the few positions it cannot certify go to the engine), ordering its moves by the
//! generator's bounds, generated again at the start (`--hints bounds`, about 100 s of CPU for
//! 12 stones; the output says whether the table generated with them is identical to the file),
//! by the file's values (`--hints table`) or by nothing (`--hints none`): only the time depends
//! on the hints. `--solver engine` uses the engine's search instead (no limits, tables off;
//! slow on long proofs). With `--time-limit-ms` a position the solver has not solved in that
//! time is counted as not checked, apart from the disagreements, and the exit status is 1 only
//! on a disagreement. `bench` measures probes per second and the nodes the
//! engine needs to solve random endgames just above the table's range with and without the
//! tables.

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use oanquan_ai::egtb::{ProofBounds, Tablebase};
use oanquan_ai::exact::{ExactOutcome, ExactSolver};
use oanquan_ai::{Engine, SearchLimits};
use oanquan_rules::{ByPlayer, Player, Position, Preset, Setup};

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(command) = args.next() else {
        eprintln!("usage: egtb generate|verify|bench [--flag value]...");
        return ExitCode::from(2);
    };
    let mut flags = HashMap::new();
    while let Some(flag) = args.next() {
        let Some(name) = flag.strip_prefix("--") else {
            eprintln!("unexpected argument {flag}");
            return ExitCode::from(2);
        };
        let Some(value) = args.next() else {
            eprintln!("--{name} needs a value");
            return ExitCode::from(2);
        };
        flags.insert(name.to_owned(), value);
    }
    let result = match command.as_str() {
        "generate" => generate(&flags),
        "verify" => verify(&flags),
        "bench" => bench(&flags),
        "compare" => compare(&flags),
        other => Err(format!("unknown command {other}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("egtb: {e}");
            ExitCode::FAILURE
        }
    }
}

fn flag<T: std::str::FromStr>(
    flags: &HashMap<String, String>,
    name: &str,
    default: Option<T>,
) -> Result<T, String> {
    match flags.get(name) {
        Some(v) => v.parse().map_err(|_| format!("bad --{name} {v}")),
        None => default.ok_or_else(|| format!("--{name} is required")),
    }
}

fn generate(flags: &HashMap<String, String>) -> Result<(), String> {
    let preset: Preset = flag(flags, "preset", Some(Preset::Standard))?;
    let n: u32 = flag(flags, "max-stones", None)?;
    let out: String = flag(flags, "out", None)?;
    let threads: usize = flag(
        flags,
        "threads",
        Some(std::thread::available_parallelism().map_or(1, |n| n.get())),
    )?;
    let cancel = AtomicBool::new(false);
    let (table, stats) =
        Tablebase::generate(preset.rules(), n, threads, &cancel).map_err(|e| e.to_string())?;
    let bytes = table.to_bytes();
    std::fs::write(&out, &bytes).map_err(|e| format!("cannot write {out}: {e}"))?;
    println!(
        "preset {preset} max-stones {n}: {} entries, {} live, {} resolved ({:.1} %), {} of them with proofs checked move by move, {} value sweeps, {} depth sweeps, {:.1} s on {threads} threads, {} bytes written to {out}",
        stats.entries,
        stats.live,
        stats.resolved,
        100.0 * stats.resolved as f64 / stats.live.max(1) as f64,
        stats.proofs_checked,
        stats.value_sweeps,
        stats.depth_sweeps,
        stats.time.as_secs_f64(),
        bytes.len(),
    );
    Ok(())
}

fn load(flags: &HashMap<String, String>) -> Result<Arc<Tablebase>, String> {
    let path: String = flag(flags, "tables", None)?;
    let start = Instant::now();
    let table = Tablebase::load(std::path::Path::new(&path))?;
    println!(
        "loaded {path}: max-stones {}, {} entries, {} resolved, in {:.2} s",
        table.max_stones(),
        table.len(),
        table.resolved(),
        start.elapsed().as_secs_f64()
    );
    Ok(Arc::new(table))
}

fn verify(flags: &HashMap<String, String>) -> Result<(), String> {
    let count: usize = flag(flags, "positions", Some(10_000))?;
    let seed: u64 = flag(flags, "seed", Some(1))?;
    let slack: u32 = flag(flags, "slack", Some(0))?;
    // The solver walks lines up to the ply limit; a table that holds its tree saves most of it.
    let tt_mb: usize = flag(flags, "tt-mb", Some(64))?;
    if !(1..=4096).contains(&tt_mb) {
        return Err(format!("--tt-mb must be 1 to 4096 (MB), not {tt_mb}"));
    }
    // 0: no limit. Positions the solver does not finish within it are counted apart: not
    // checked, and not a disagreement either.
    let limit_ms: u64 = flag(flags, "time-limit-ms", Some(0))?;
    let threads: usize = flag(flags, "threads", Some(1))?;
    if !(1..=256).contains(&threads) {
        return Err(format!("--threads must be 1 to 256, not {threads}"));
    }
    let solver: Solver = flag(flags, "solver", Some(Solver::Fast))?;
    // Move ordering for the fast solver: its outcome does not depend on it.
    let hints: Hints = flag(flags, "hints", Some(Hints::Bounds))?;
    // Flags first: a bad one is refused before a large file is read.
    let table = load(flags)?;
    let bounds = if solver == Solver::Fast && hints == Hints::Bounds {
        // The generator's one-sided bounds, which the file does not keep: generated again.
        let start = Instant::now();
        let cancel = AtomicBool::new(false);
        let (again, _, bounds) =
            Tablebase::generate_with_bounds(*table.rules(), table.max_stones(), threads, &cancel)
                .map_err(|e| e.to_string())?;
        println!(
            "move-ordering hints: the generator's bounds, generated again in {:.1} s (the table generated with them is {} the file)",
            start.elapsed().as_secs_f64(),
            if again == *table {
                "identical to"
            } else {
                "NOT identical to"
            }
        );
        Some(Arc::new(bounds))
    } else {
        None
    };
    let start = Instant::now();
    let limits = SearchLimits {
        time: (limit_ms > 0).then(|| Duration::from_millis(limit_ms)),
        ..SearchLimits::NONE
    };
    let check = Check {
        table: &table,
        seed,
        slack,
        tt_mb,
        limits,
        solver,
        hints,
        bounds,
        trace: std::env::var_os("EGTB_TRACE").is_some(),
    };
    let done = AtomicUsize::new(0);
    // Each thread takes every `threads`-th position, with its own solver.
    let tallies: Vec<Result<Tally, String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (check, done) = (&check, &done);
                scope.spawn(move || {
                    let cancel = AtomicBool::new(false);
                    let mut tally = Tally::default();
                    // Its table's entries do not depend on the root: kept across positions.
                    let mut fast = (check.solver == Solver::Fast).then(|| {
                        let mut solver = ExactSolver::with_tt_bytes(check.tt_mb << 20);
                        match check.hints {
                            Hints::Bounds => solver.set_bound_hints(check.bounds.clone()),
                            Hints::Table => solver.set_hints(Some(Arc::clone(check.table))),
                            Hints::None => {}
                        }
                        solver
                    });
                    for i in (t..count).step_by(threads) {
                        tally.add(check.position(i, &cancel, fast.as_mut())?);
                        let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                        if n % 1000 == 0 {
                            eprintln!(
                                "{n} of {count} positions ({:.0} s)",
                                start.elapsed().as_secs_f64()
                            );
                        }
                    }
                    Ok(tally)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a solver thread panicked".to_owned()))
            })
            .collect()
    });
    let mut total = Tally::default();
    for tally in tallies {
        total.merge(&tally?);
    }
    let unsolved = if limits.time.is_some() {
        format!(
            ", {} not solved within {limit_ms} ms (not checked)",
            total.unsolved
        )
    } else {
        String::new()
    };
    let fallbacks = if solver == Solver::Fast {
        format!(
            ", {} certified by the fast solver, {} left to the engine",
            total.certified, total.fallbacks
        )
    } else {
        String::new()
    };
    println!(
        "{} of {count} positions agree with the exact solver ({solver}), {} disagree{unsolved} ({} solver nodes{fallbacks}, {:.1} s on {threads} thread{})",
        total.agree,
        total.disagree,
        total.nodes,
        start.elapsed().as_secs_f64(),
        if threads == 1 { "" } else { "s" }
    );
    total.outcome()
}

/// Which exact solver `verify` uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Solver {
    /// [`ExactSolver`]: path-free games and checked strategies (exact for the real rules where
    /// it certifies; the engine solves the rest).
    Fast,
    /// The engine's search with no limits, no tables and an empty history.
    Engine,
}

impl std::str::FromStr for Solver {
    type Err = ();

    fn from_str(s: &str) -> Result<Solver, ()> {
        match s {
            "fast" => Ok(Solver::Fast),
            "engine" => Ok(Solver::Engine),
            _ => Err(()),
        }
    }
}

impl std::fmt::Display for Solver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Solver::Fast => "fast",
            Solver::Engine => "engine",
        })
    }
}

/// What the fast solver orders its moves by (its outcome never depends on it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hints {
    /// The generator's one-sided bounds, generated again at the start (the file keeps only the
    /// positions where they meet, and the proofs also pass through the others).
    Bounds,
    /// The table's stored values.
    Table,
    /// None: captures first, the transposition table's move.
    None,
}

impl std::str::FromStr for Hints {
    type Err = ();

    fn from_str(s: &str) -> Result<Hints, ()> {
        match s {
            "bounds" => Ok(Hints::Bounds),
            "table" => Ok(Hints::Table),
            "none" => Ok(Hints::None),
            _ => Err(()),
        }
    }
}

/// What `verify` checks each sampled position with.
struct Check<'a> {
    table: &'a Arc<Tablebase>,
    seed: u64,
    slack: u32,
    tt_mb: usize,
    limits: SearchLimits,
    solver: Solver,
    hints: Hints,
    bounds: Option<Arc<ProofBounds>>,
    trace: bool,
}

/// How one position's solver result compares with the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Agree,
    /// The solver did not finish within the time limit: not checked.
    Unsolved,
    Disagree,
}

/// One position's verdict, the nodes spent on it, and which solver decided it.
struct Checked {
    verdict: Verdict,
    nodes: u64,
    /// The fast solver certified the value (agreeing or not).
    certified: bool,
    /// The fast solver left it to the engine.
    fallback: bool,
}

impl Check<'_> {
    /// Samples the `i`-th proved position, places it at the tightest ply its value is claimed
    /// for (`--slack K`: up to K plies further from the limit) and solves it.
    fn position(
        &self,
        i: usize,
        cancel: &AtomicBool,
        fast: Option<&mut ExactSolver>,
    ) -> Result<Checked, String> {
        let pos = self
            .table
            .sample(self.seed.wrapping_add(i as u64), true)
            .ok_or("the table has no proved position")?;
        let probe = self
            .table
            .probe(&pos)
            .ok_or("a drawn position must be proved")?;
        // The proofs end exactly at the limit, and the limit bounds the solver's tree (cycles
        // would otherwise only end by repetition).
        let mut setup = pos.to_setup();
        setup.ply = (pos.rules().max_plies - probe.depth())
            .saturating_sub((i % (self.slack as usize + 1)) as u32)
            .max(pos.ply());
        let pos = Position::from_setup(setup, *pos.rules()).map_err(|e| e.to_string())?;
        let expected = probe.final_difference(&pos);
        if self.trace {
            println!("{i}: {pos:?}");
        }
        let mut nodes = 0;
        if let Some(fast) = fast {
            // The table's value is only a first guess: it saves time when right, and the
            // outcome is the same either way (see `ExactSolver::solve_near`).
            let r = fast.solve_near(&pos, Some(expected), self.limits.time, cancel);
            nodes = r.nodes;
            if self.trace {
                println!("{i}: {:?}", r);
            }
            let decided = |verdict| Checked {
                verdict,
                nodes: r.nodes,
                certified: matches!(r.outcome, ExactOutcome::Solved(_)),
                fallback: false,
            };
            match r.outcome {
                ExactOutcome::Solved(v) if v == expected => return Ok(decided(Verdict::Agree)),
                ExactOutcome::Solved(_) | ExactOutcome::Open { .. } => {
                    // A certified other value, or no strategy that ends the game in time where
                    // the table claims one: the table is wrong either way.
                    println!(
                        "DISAGREE {pos:?}: table {expected:+}, fast solver {:?}",
                        r.outcome
                    );
                    return Ok(decided(Verdict::Disagree));
                }
                ExactOutcome::Stopped => return Ok(decided(Verdict::Unsolved)),
                // Not certified or refused: the engine decides.
                ExactOutcome::Uncertified(_) | ExactOutcome::Refused => {}
            }
        }
        let fallback = self.solver == Solver::Fast;
        let r = Engine::with_tt_bytes(self.tt_mb << 20).search(&pos, self.limits, cancel);
        let verdict = if r.exact && r.eval_points == expected {
            Verdict::Agree
        } else if !r.exact && self.limits.time.is_some() {
            Verdict::Unsolved
        } else {
            println!(
                "DISAGREE {pos:?}: table {expected:+}, solver {:+} (exact {})",
                r.eval_points, r.exact
            );
            Verdict::Disagree
        };
        Ok(Checked {
            verdict,
            nodes: nodes + r.nodes,
            certified: false,
            fallback,
        })
    }
}

#[derive(Default)]
struct Tally {
    agree: usize,
    unsolved: usize,
    disagree: usize,
    nodes: u64,
    certified: usize,
    fallbacks: usize,
}

impl Tally {
    fn add(&mut self, checked: Checked) {
        match checked.verdict {
            Verdict::Agree => self.agree += 1,
            Verdict::Unsolved => self.unsolved += 1,
            Verdict::Disagree => self.disagree += 1,
        }
        self.nodes += checked.nodes;
        self.certified += usize::from(checked.certified);
        self.fallbacks += usize::from(checked.fallback);
    }

    fn merge(&mut self, other: &Tally) {
        self.agree += other.agree;
        self.unsolved += other.unsolved;
        self.disagree += other.disagree;
        self.nodes += other.nodes;
        self.certified += other.certified;
        self.fallbacks += other.fallbacks;
    }

    /// The run fails on any disagreement; a position left unsolved is not one.
    fn outcome(&self) -> Result<(), String> {
        if self.disagree == 0 {
            Ok(())
        } else {
            Err(format!("{} disagreements", self.disagree))
        }
    }
}

fn bench(flags: &HashMap<String, String>) -> Result<(), String> {
    let table = load(flags)?;
    let count: usize = flag(flags, "positions", Some(1_000))?;
    let seed: u64 = flag(flags, "seed", Some(1))?;
    let positions: Vec<_> = (0..count)
        .filter_map(|i| table.sample(seed.wrapping_add(i as u64), true))
        .collect();
    let start = Instant::now();
    let mut found = 0u64;
    let rounds = 1000;
    for _ in 0..rounds {
        for pos in &positions {
            found += u64::from(table.probe(pos).is_some());
        }
    }
    let probes = (rounds * positions.len()) as f64;
    println!(
        "probe: {:.0} ns per probe ({found} hits)",
        start.elapsed().as_secs_f64() * 1e9 / probes
    );

    // Solving endgames a little above the table's range, to the end, with and without it.
    let extra: u32 = flag(flags, "extra-stones", Some(2))?;
    let plies_left: u32 = flag(flags, "plies-left", Some(40))?;
    let solves: u64 = flag(flags, "solves", Some(100))?;
    let cancel = AtomicBool::new(false);
    let mut nodes = [0u64; 2];
    let mut cpu = [0f64; 2];
    let mut hits = 0;
    let mut root_hits = 0;
    let mut rng = seed;
    for _ in 0..solves {
        let pos = random_position(&table, table.max_stones() + extra, plies_left, &mut rng);
        let mut values = [0; 2];
        for (with, slot) in [false, true].into_iter().zip(0..) {
            let mut engine = Engine::with_tt_bytes(1 << 22);
            if with {
                engine.set_tablebase(Some(Arc::clone(&table)));
            }
            let r = engine.search(&pos, SearchLimits::NONE, &cancel);
            if !r.exact {
                return Err(format!("{pos:?} not solved"));
            }
            nodes[slot] += r.nodes;
            cpu[slot] += r.time.as_secs_f64();
            values[slot] = r.eval_points;
            if with {
                hits += r.tablebase_hits;
                root_hits += u64::from(r.tablebase);
            }
        }
        if values[0] != values[1] {
            return Err(format!(
                "{pos:?}: {:+} without tables, {:+} with",
                values[0], values[1]
            ));
        }
    }
    println!(
        "solving {solves} positions with {} stones, {plies_left} plies before the limit: \
         {} nodes ({:.2} s) without tables, {} nodes ({:.2} s) with ({:.1}x fewer nodes, \
         {hits} table hits, {root_hits} roots from the table); same values",
        table.max_stones() + extra,
        nodes[0],
        cpu[0],
        nodes[1],
        cpu[1],
        nodes[0] as f64 / nodes[1].max(1) as f64,
    );
    Ok(())
}

/// A random position of the table's rule set with `stones` plain stones on the board (pieces
/// standing), `plies_left` plies before the limit, where the game goes on.
fn random_position(table: &Tablebase, stones: u32, plies_left: u32, rng: &mut u64) -> Position {
    let rules = *table.rules();
    loop {
        let mut setup = Setup::start(&rules);
        setup.squares = [0; 12];
        for _ in 0..stones {
            setup.squares[(next(rng) % 12) as usize] += 1;
        }
        setup.to_move = if next(rng) % 2 == 0 {
            Player::First
        } else {
            Player::Second
        };
        setup.ply = rules.max_plies.saturating_sub(plies_left);
        setup.captured = ByPlayer::new(
            rules.total() - stones as i32 - setup.pieces.iter().sum::<i32>() * rules.piece_value(),
            0,
        );
        if let Ok(pos) = Position::from_setup(setup, rules)
            && !pos.is_over()
        {
            return pos;
        }
    }
}

fn next(state: &mut u64) -> u64 {
    // SplitMix64.
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Positions proved by `--small` tables must have the same value in `--tables` (a superset).
fn compare(flags: &HashMap<String, String>) -> Result<(), String> {
    let large = load(flags)?;
    let path: String = flag(flags, "small", None)?;
    let small = Tablebase::load(std::path::Path::new(&path))?;
    let count: u64 = flag(flags, "positions", Some(100_000))?;
    let (mut same, mut unknown, mut differ) = (0, 0, 0);
    for seed in 0..count {
        let Some(pos) = small.sample(seed, true) else {
            break;
        };
        let a = small.probe(&pos).map(|p| p.relative);
        match large.probe(&pos).map(|p| p.relative) {
            None => unknown += 1,
            b if b == a => same += 1,
            _ => differ += 1,
        }
    }
    println!("{same} same, {unknown} unknown in the larger table, {differ} differ");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checked(verdict: Verdict, nodes: u64) -> Checked {
        Checked {
            verdict,
            nodes,
            certified: verdict == Verdict::Agree,
            fallback: verdict == Verdict::Unsolved,
        }
    }

    #[test]
    fn a_tally_counts_each_verdict_and_merges_across_threads() {
        let mut a = Tally::default();
        a.add(checked(Verdict::Agree, 10));
        a.add(checked(Verdict::Agree, 5));
        a.add(checked(Verdict::Unsolved, 100));
        let mut b = Tally::default();
        b.add(checked(Verdict::Agree, 1));
        a.merge(&b);
        assert_eq!((a.agree, a.unsolved, a.disagree, a.nodes), (3, 1, 0, 116));
        assert_eq!((a.certified, a.fallbacks), (3, 1));
        assert_eq!(
            a.outcome(),
            Ok(()),
            "unsolved positions are not disagreements"
        );

        let mut c = Tally::default();
        c.add(checked(Verdict::Disagree, 7));
        a.merge(&c);
        a.merge(&c);
        assert_eq!((a.agree, a.disagree, a.nodes), (3, 2, 130));
        assert_eq!(a.outcome(), Err("2 disagreements".to_owned()));
    }
}
