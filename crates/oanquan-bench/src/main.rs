//! `oanquan-bench`: load benchmark of `oanquan-server` against a bare tonic echo server, in one
//! run. See `crates/oanquan-bench/RESULTS.md` for what each scenario measures and the figures.
//!
//! ```sh
//! cargo run --release -p oanquan-bench -- all            # every scenario, a few minutes
//! cargo run --release -p oanquan-bench -- throughput --concurrency 1,16,64
//! ```

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use clap::{Parser, ValueEnum};
use oanquan_bench::chart;
use oanquan_bench::clocks::{self, ClockLoad, ClockRun};
use oanquan_bench::load::{self, EchoLoad, GameLoad, LoadStats, Pool};
use oanquan_bench::pg::{PgCounters, PgFigures, PgSchema};
use oanquan_bench::procs::{self, ProcSample, ServerProcess};
use oanquan_bench::report::{Point, Usage};
use serde::Serialize;

/// Load benchmark of oanquan-server: moves/s, move latency, event delivery to spectators, server
/// CPU and peak memory, each beside a bare tonic echo server driven by the same client with the
/// same concurrency and message sizes, in the same run.
///
/// The servers are started by the benchmark on 127.0.0.1 (a fresh process per measurement) and
/// killed at its end. Output: a table on stdout, and in --out-dir `results.json`,
/// `throughput.svg` and `results.md`.
#[derive(Debug, Parser)]
#[command(name = "oanquan-bench", version, about, long_about)]
struct Args {
    /// What to run: one scenario, or several separated by commas (`throughput,cross-node,idle`),
    /// run in the order of the list below.
    #[arg(value_enum, value_delimiter = ',', required = true)]
    scenario: Vec<Scenario>,

    /// The `oanquan-server` binary [default: target/release/oanquan-server, built with
    /// `cargo build --release -p oanquan-server` if missing].
    #[arg(long, env = "OANQUAN_BENCH_SERVER_BIN")]
    server_bin: Option<PathBuf>,

    /// The `oanquan-echo-server` binary [default: next to this binary].
    #[arg(long, env = "OANQUAN_BENCH_ECHO_BIN")]
    echo_bin: Option<PathBuf>,

    /// Where to write results.json, throughput.svg and results.md [default: target/bench].
    #[arg(long)]
    out_dir: Option<PathBuf>,

    /// Server storages to measure; `durable` needs a server with `--database PATH`.
    #[arg(long, value_delimiter = ',', default_value = "memory,durable")]
    storage: Vec<StorageKind>,

    /// Concurrency levels of the throughput sweep (concurrent games = echo callers).
    #[arg(long, value_delimiter = ',', default_value = "1,4,16,64,256")]
    concurrency: Vec<usize>,

    /// HTTP/2 connections of the load (players and echo callers); fewer if fewer workers.
    #[arg(long, default_value_t = 4)]
    connections: usize,

    /// Warm-up before each measurement window (not counted).
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    warmup: Duration,

    /// Each measurement window.
    #[arg(long, default_value = "3s", value_parser = parse_duration)]
    duration: Duration,

    /// Spectators per game in the throughput sweep.
    #[arg(long, default_value_t = 0)]
    spectators: usize,

    /// `spectators` scenario: concurrent games.
    #[arg(long, default_value_t = 64)]
    few_concurrency: usize,

    /// `spectators` scenario: spectators per game.
    #[arg(long, default_value_t = 2)]
    few_spectators: usize,

    /// `fanout` scenario: spectators of the one game.
    #[arg(long, default_value_t = 1000)]
    fanout_spectators: usize,

    /// `fanout` scenario: connections the spectators are spread over.
    #[arg(long, default_value_t = 8)]
    fanout_connections: usize,

    /// `fanout` scenario: games played one after the other (each with fresh spectators).
    #[arg(long, default_value_t = 3)]
    fanout_games: usize,

    /// `fanout` scenario: pause between moves of the paced run (an unpaced run follows).
    #[arg(long, default_value = "100ms", value_parser = parse_duration)]
    fanout_interval: Duration,

    /// `idle` scenario: open WatchGame streams.
    #[arg(long, default_value_t = 10_000)]
    idle_streams: usize,

    /// `idle` scenario: games watched (streams are spread evenly).
    #[arg(long, default_value_t = 100)]
    idle_games: usize,

    /// `idle` scenario: connections the streams are spread over.
    #[arg(long, default_value_t = 20)]
    idle_connections: usize,

    /// `first-move` scenario: moves/s to hold [default: half of the peak measured by the
    /// throughput sweep in the same run, or by a short peak run]. The echo's rounds beside it
    /// always run at half of the echo's own peak.
    #[arg(long, value_parser = parse_rate)]
    first_move_rate: Option<f64>,

    /// `first-move` scenario: concurrent games.
    #[arg(long, default_value_t = 64)]
    first_move_concurrency: usize,

    /// Seed of the move choices.
    #[arg(long, default_value_t = 1)]
    seed: u64,

    /// `clocks` scenario: timed games whose clocks run at once.
    #[arg(long, default_value_t = 10_000)]
    clock_games: usize,

    /// `clocks` scenario: which deadlines to measure: `spread` (over --clock-spread) and
    /// `burst` (all within 100 ms).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "spread,burst"
    )]
    clock_variants: Vec<ClockVariant>,

    /// `clocks` scenario: how long the deadlines of the `spread` variant are spread over.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    clock_spread: Duration,

    /// `clocks` scenario: the idle window (nobody calls; the server's CPU is measured) before
    /// the first deadline.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    clock_idle: Duration,

    /// `clocks` scenario: the second moves, which start the clocks, are spread over this long.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    clock_schedule: Duration,

    /// `clocks` scenario: games set up (and read back) at once.
    #[arg(long, default_value_t = 64)]
    clock_parallel: usize,

    /// `clocks` scenario: run against a SQLite server (`--database`) instead of `--in-memory`.
    #[arg(long)]
    durable: bool,

    /// A PostgreSQL database (`postgres://…`) to measure too: each measurement starts its
    /// server nodes on a fresh schema of it (dropped after), and the rows `pg×N` (N from
    /// --nodes) follow the memory and durable rows. The user must be allowed to create schemas.
    #[arg(long, env = "OANQUAN_BENCH_DATABASE_URL")]
    database: Option<String>,

    /// With --database: how many server nodes share the database, one row each; the load's
    /// connections are spread evenly over the nodes.
    #[arg(long, value_delimiter = ',', default_value = "1,2,3")]
    nodes: Vec<usize>,

    /// `cross-node` scenario: concurrent games, each with one spectator.
    #[arg(long, default_value_t = 16)]
    cross_games: usize,

    /// `cross-node` scenario: pause between each game's moves in the paced runs (a run with
    /// moves back to back follows).
    #[arg(long, default_value = "100ms", value_parser = parse_duration)]
    cross_interval: Duration,

    /// Pin the servers to CPU 1 and this client to CPU 0 (with `taskset`), so that each has one
    /// core of its own instead of competing for both.
    #[arg(long)]
    pin: bool,

    /// The cost of metrics: in the throughput sweep, measure each server target this many times
    /// without and with `--metrics-listen` (rows `memory` and `memory+metrics`, alternating, so
    /// that drifting load on a shared machine falls on both). 0: without only.
    #[arg(long, default_value_t = 0)]
    metrics_pairs: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Scenario {
    /// Every scenario below but `clocks`, in one run.
    All,
    /// Moves/s and p99 against concurrency, each storage beside echo; draws the chart.
    Throughput,
    /// Many games with a few spectators each: moves/s and delivery latency, beside echo.
    Spectators,
    /// One game with 1,000 spectators: delivery of each move to all of them.
    Fanout,
    /// 10,000 idle WatchGame streams: server memory.
    Idle,
    /// Create-to-first-move latency at half of the peak load, beside its floor: the echo
    /// making rounds of three calls at half of its own peak.
    FirstMove,
    /// Two nodes on one PostgreSQL database (--database): players on node A, a spectator of
    /// each game on node A (same node) or node B (across nodes); delivery latency. Part of
    /// `all` when --database is given.
    CrossNode,
    /// 10,000 timed games on one server: every flag falls by itself, lateness against the
    /// deadline, and the server's CPU while the clocks run and nobody calls. Not part of `all`.
    Clocks,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
enum ClockVariant {
    /// Deadlines spread over --clock-spread.
    Spread,
    /// Every deadline within the same 100 ms.
    Burst,
}

/// The deadlines of the `burst` variant fall within this long.
const BURST_SPREAD: Duration = Duration::from_millis(100);

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
enum StorageKind {
    /// `--in-memory`.
    Memory,
    /// `--database PATH` (SQLite), in a temporary directory.
    Durable,
}

impl StorageKind {
    fn name(self) -> &'static str {
        match self {
            StorageKind::Memory => "memory",
            StorageKind::Durable => "durable",
        }
    }
}

/// `500ms`, `15s`, `2m`, `1h`, or a bare number of seconds: what the server's duration flags
/// take. A copy of the server's parser rather than a shared one: the two binaries share no
/// runtime crate where command-line parsing belongs (the bench reaches the server crate only in
/// its tests).
fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration like 500ms, 15s or 2m"))?;
    let seconds = match unit {
        "ms" => value / 1000.0,
        "" | "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        _ => return Err(format!("unknown unit {unit:?}; use ms, s, m or h")),
    };
    Duration::try_from_secs_f64(seconds).map_err(|e| e.to_string())
}

/// The most moves/s a paced run can be asked for: a caller's period stays above zero.
const MAX_RATE: f64 = 10_000_000.0;
/// The fewest: a caller's period stays a number of seconds that a clock can add.
const MIN_RATE: f64 = 0.001;

/// A `--first-move-rate`: moves/s, from [`MIN_RATE`] to [`MAX_RATE`].
fn parse_rate(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(rate) if (MIN_RATE..=MAX_RATE).contains(&rate) => Ok(rate),
        Ok(_) => Err(format!(
            "{text:?}: a rate is from {MIN_RATE} to {MAX_RATE} moves/s"
        )),
        Err(_) => Err(format!("{text:?} is not a number of moves/s like 5000")),
    }
}

/// The workspace root (this crate is `crates/oanquan-bench`).
fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn locate_server(args: &Args) -> anyhow::Result<PathBuf> {
    if let Some(bin) = &args.server_bin {
        return Ok(bin.clone());
    }
    let root = workspace_root();
    let bin = root.join("target/release/oanquan-server");
    if !bin.exists() {
        eprintln!(
            "building oanquan-server (release): {} is missing",
            bin.display()
        );
        let status = std::process::Command::new(env!("CARGO"))
            .args(["build", "--release", "-p", "oanquan-server"])
            .current_dir(&root)
            .status()
            .context("running cargo build")?;
        if !status.success() || !bin.exists() {
            bail!("cargo build --release -p oanquan-server failed; pass --server-bin");
        }
    }
    Ok(bin)
}

fn locate_echo(args: &Args) -> anyhow::Result<PathBuf> {
    if let Some(bin) = &args.echo_bin {
        return Ok(bin.clone());
    }
    let exe = std::env::current_exe()?;
    let bin = exe
        .parent()
        .context("no directory of this binary")?
        .join("oanquan-echo-server");
    if !bin.exists() {
        bail!(
            "{} is missing: build it with `cargo build --release -p oanquan-bench` or pass --echo-bin",
            bin.display()
        );
    }
    Ok(bin)
}

/// The server processes of one measurement, and the schema of a PostgreSQL one.
#[derive(Debug)]
struct Deployment {
    servers: Vec<ServerProcess>,
    schema: Option<PgSchema>,
    /// The database's counters before the first node started.
    before: PgCounters,
}

impl Deployment {
    fn addrs(&self) -> Vec<std::net::SocketAddr> {
        self.servers.iter().map(ServerProcess::addr).collect()
    }

    fn pids(&self) -> Vec<u32> {
        self.servers.iter().map(ServerProcess::pid).collect()
    }

    /// Connections to every node, `connections` in all (rounded up to a multiple of the
    /// nodes), interleaved so that consecutive workers go to the nodes in turn.
    async fn pool(&self, connections: usize) -> anyhow::Result<Pool> {
        let per_node = connections.div_ceil(self.servers.len().max(1)).max(1);
        Pool::connect_nodes(&self.addrs(), per_node).await
    }

    /// Peak RSS of the largest node, KiB.
    fn peak_hwm_kib(&self) -> u64 {
        self.servers
            .iter()
            .filter_map(|s| s.sample().ok())
            .map(|s| s.hwm_kib)
            .max()
            .unwrap_or(0)
    }

    /// Stops the nodes and, for PostgreSQL, reads the whole run's counters once their sessions
    /// have ended, then drops the schema.
    async fn finish(
        mut self,
        window: Option<(PgCounters, PgCounters, f64, f64)>,
    ) -> anyhow::Result<Option<PgFigures>> {
        let nodes = self.servers.len();
        self.servers.clear();
        let Some(schema) = self.schema.take() else {
            return Ok(None);
        };
        let ended = schema.wait_for_sessions_to_end().await;
        let after = schema.counters().await;
        let dropped = schema.drop().await;
        if !ended? {
            eprintln!(
                "  note: some node sessions outlived their nodes by 10 s; counts may be short"
            );
        }
        dropped?;
        let after = after?;
        let (start, end, window_s, db_cpu) = window.unwrap_or((after, after, 1.0, 0.0));
        Ok(Some(PgFigures::new(
            nodes,
            [self.before, start, end, after],
            window_s,
            db_cpu,
        )))
    }
}

/// `pg×N` → N.
fn pg_nodes(target: &str) -> Option<usize> {
    target.strip_prefix("pg×").and_then(|n| n.parse().ok())
}

/// What the benchmark starts and how.
#[derive(Debug)]
struct Targets {
    server: PathBuf,
    /// The echo server, or why it is missing: only the scenarios compared with it need it.
    echo: Result<PathBuf, String>,
    durable: bool,
    database: Option<String>,
    tmp: tempfile::TempDir,
    runs: usize,
    pin: bool,
}

impl Targets {
    /// Starts a fresh process of `target` ("echo", "memory" or "durable").
    fn start(&mut self, target: &str) -> anyhow::Result<ServerProcess> {
        self.start_with(target, &[])
    }

    /// [`Targets::start`] with more server flags (not for echo).
    fn start_with(&mut self, target: &str, extra: &[&str]) -> anyhow::Result<ServerProcess> {
        self.runs += 1;
        if target == "echo" {
            let args = [
                "--listen",
                "127.0.0.1:0",
                "--max-concurrent-streams",
                "4096",
            ];
            let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
            let echo = self.echo.clone().map_err(anyhow::Error::msg)?;
            return self.spawn(&echo, args, &[]);
        }
        let mut args: Vec<String> = [
            "--listen",
            "127.0.0.1:0",
            "--max-games",
            "1000000",
            "--max-concurrent-streams",
            "4096",
            "--concurrency-limit-per-connection",
            "4096",
            "--max-spectators-per-game",
            "5000",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        let mut env: Vec<(&str, String)> = Vec::new();
        match target {
            "memory" => args.push("--in-memory".to_owned()),
            // The URL (it may hold a password) through the environment, not the process list.
            url if url.starts_with("postgres") => {
                env.push(("OANQUAN_DATABASE_URL", url.to_owned()))
            }
            "durable" => {
                args.push("--database".to_owned());
                let path = self.tmp.path().join(format!("bench-{}.db", self.runs));
                args.push(path.display().to_string());
            }
            other => bail!("unknown target {other}"),
        }
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        self.spawn(&self.server.clone(), args, &env)
    }

    /// Starts the processes of `target`: one for "echo", "memory" and "durable"; N nodes on a
    /// fresh schema for "pg×N".
    async fn deploy(&mut self, target: &str, extra: &[&str]) -> anyhow::Result<Deployment> {
        let Some(nodes) = pg_nodes(target) else {
            return Ok(Deployment {
                servers: vec![self.start_with(target, extra)?],
                schema: None,
                before: PgCounters::default(),
            });
        };
        let url = self
            .database
            .clone()
            .context("a PostgreSQL target needs --database")?;
        let schema = PgSchema::create(&url).await?;
        let before = schema.counters().await?;
        let mut servers = Vec::with_capacity(nodes);
        for _ in 0..nodes {
            match self.start_with(schema.url(), extra) {
                Ok(server) => servers.push(server),
                Err(error) => {
                    drop(servers);
                    let _ = schema.wait_for_sessions_to_end().await;
                    let _ = schema.drop().await;
                    return Err(error);
                }
            }
        }
        Ok(Deployment {
            servers,
            schema: Some(schema),
            before,
        })
    }

    fn spawn(
        &self,
        bin: &Path,
        args: Vec<String>,
        env: &[(&str, &str)],
    ) -> anyhow::Result<ServerProcess> {
        if self.pin {
            let mut pinned = vec!["-c".to_owned(), "1".to_owned(), bin.display().to_string()];
            pinned.extend(args);
            ServerProcess::start_with_env(Path::new("taskset"), &pinned, env)
        } else {
            ServerProcess::start_with_env(bin, &args, env)
        }
    }
}

/// Samples server and client CPU at the start and end of the measurement window (from a thread,
/// so that a busy runtime does not delay the readings). With several server processes their
/// CPU is summed and the largest peak RSS kept.
fn sample_window(
    pids: Vec<u32>,
    warmup: Duration,
    duration: Duration,
) -> std::thread::JoinHandle<Usage> {
    let servers = move || {
        let mut total = ProcSample::default();
        for pid in &pids {
            let sample = ProcSample::read(*pid).unwrap_or_default();
            total.cpu_seconds += sample.cpu_seconds;
            total.rss_kib = total.rss_kib.max(sample.rss_kib);
            total.hwm_kib = total.hwm_kib.max(sample.hwm_kib);
        }
        total
    };
    std::thread::spawn(move || {
        std::thread::sleep(warmup);
        let start = (servers(), ProcSample::read_self().unwrap_or_default());
        let t0 = Instant::now();
        std::thread::sleep(duration);
        let end = (servers(), ProcSample::read_self().unwrap_or_default());
        Usage {
            server: (start.0, end.0),
            client: (start.1, end.1),
            wall_s: t0.elapsed().as_secs_f64(),
        }
    })
}

/// The database's counters and the `postgres` processes' CPU at the window's start and end:
/// (start, end, seconds between the readings, database CPU seconds).
async fn pg_window(
    schema: &PgSchema,
    warmup: Duration,
    duration: Duration,
) -> anyhow::Result<(PgCounters, PgCounters, f64, f64)> {
    tokio::time::sleep(warmup).await;
    let cpu0 = procs::command_cpu_seconds("postgres");
    let start = schema.counters().await?;
    let t0 = Instant::now();
    tokio::time::sleep(duration).await;
    let end = schema.counters().await?;
    let cpu1 = procs::command_cpu_seconds("postgres");
    Ok((start, end, t0.elapsed().as_secs_f64(), cpu1 - cpu0))
}

/// Samples around a whole run (no window).
fn usage_between(server: &ServerProcess, before: (ProcSample, ProcSample), t0: Instant) -> Usage {
    Usage {
        server: (before.0, server.sample().unwrap_or_default()),
        client: (before.1, ProcSample::read_self().unwrap_or_default()),
        wall_s: t0.elapsed().as_secs_f64(),
    }
}

fn now_samples(server: &ServerProcess) -> (ProcSample, ProcSample) {
    (
        server.sample().unwrap_or_default(),
        ProcSample::read_self().unwrap_or_default(),
    )
}

/// The 10,000-idle-streams measurement.
#[derive(Debug, Clone, Serialize)]
struct IdleResult {
    target: String,
    streams_opened: usize,
    games: usize,
    connections: usize,
    open_seconds: f64,
    errors: u64,
    first_error: Option<String>,
    rss_before_mib: f64,
    rss_with_streams_mib: f64,
    peak_rss_mib: f64,
    kib_per_stream: f64,
    server_cpu_cores_while_idle: f64,
}

/// One clocks run: its variant and load, and what it measured.
#[derive(Debug, Clone, Serialize)]
struct ClockResult {
    variant: ClockVariant,
    target: &'static str,
    spread_s: f64,
    idle_s: f64,
    #[serde(flatten)]
    run: ClockRun,
}

impl ClockResult {
    fn summary(&self) -> String {
        let r = &self.run;
        let opt = |v: Option<f64>, digits: usize| {
            v.map_or_else(|| "?".to_owned(), |v| format!("{v:.digits$}"))
        };
        let mut text = format!(
            "{:<6} {:<7}: {} games, {} clocks ran, {} ended by timeout ({} otherwise, {} not over); \
             deadlines over {:.0} ms (at most {} in 100 ms)\n  \
             lateness (GameOver time − deadline, server clock): p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms, min {:.1} ms; {} at ≥ 100 ms, {} early\n  \
             seen by a lobby watcher: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms ({} games)\n  \
             idle ({:.1} s, nobody calling): server CPU {} cores, RSS {} MiB; flags: {} s of server CPU; peak RSS {} MiB\n  \
             setup {:.1} s, second moves {:.1} s, {} errors",
            format!("{:?}", self.variant).to_lowercase(),
            self.target,
            r.games,
            r.running,
            r.timeouts,
            r.other_endings,
            r.not_over,
            r.deadline_span_ms,
            r.most_deadlines_in_100ms,
            r.lateness.p50_ms,
            r.lateness.p99_ms,
            r.lateness.max_ms,
            r.lateness.min_ms,
            r.lateness.late_100ms,
            r.lateness.early,
            r.observed.p50_ms,
            r.observed.p99_ms,
            r.observed.max_ms,
            r.observed.count,
            r.idle_window_s,
            opt(r.idle_cpu_cores, 4),
            opt(r.idle_rss_mib, 1),
            opt(r.flag_cpu_s, 3),
            opt(r.peak_rss_mib, 1),
            r.setup_s,
            r.second_moves_s,
            r.errors,
        );
        if let Some(error) = &r.first_error {
            text.push_str(&format!(" (first: {error})"));
        }
        for note in &r.notes {
            text.push_str(&format!("\n  note: {note}"));
        }
        text
    }
}

/// Everything one run measured.
#[derive(Debug, Default, Serialize)]
struct Results {
    machine: String,
    server_bin: String,
    durable_available: bool,
    points: Vec<Point>,
    idle: Option<IdleResult>,
    /// The same on one PostgreSQL node (with --database).
    idle_postgres: Option<IdleResult>,
    clocks: Vec<ClockResult>,
    notes: Vec<String>,
}

struct Bench {
    args: Args,
    targets: Targets,
    results: Results,
    /// Mean PlayMove request/response sizes seen so far (for the echo calls).
    sizes: Option<(usize, usize)>,
}

impl Bench {
    /// The single-process server targets asked for (`--storage`).
    fn storages(&self) -> Vec<String> {
        self.args
            .storage
            .iter()
            .filter(|s| **s == StorageKind::Memory || self.targets.durable)
            .map(|s| s.name().to_owned())
            .collect()
    }

    /// The throughput sweep's targets, in row order: [`Bench::storages`], then `pg×N` for each
    /// of --nodes when --database is given.
    fn throughput_targets(&self) -> Vec<String> {
        let mut targets = self.storages();
        if self.targets.database.is_some() {
            targets.extend(self.args.nodes.iter().map(|n| format!("pg×{n}")));
        }
        targets
    }

    fn push(&mut self, point: Point) {
        println!("{}", point.row());
        if let Some(error) = &point.first_error {
            eprintln!("  first error: {error}");
        }
        if let Some(pg) = &point.pg {
            println!("{}", pg_line(pg, point.ops_per_s));
        }
        if point.target != "echo" && point.request_bytes > 0 {
            self.sizes = Some((point.request_bytes, point.response_bytes));
        }
        self.results.points.push(point);
    }

    /// One windowed game load against a fresh `target` process.
    async fn games_point(
        &mut self,
        scenario: &str,
        target: &str,
        load: &GameLoad,
        connections: usize,
    ) -> anyhow::Result<Point> {
        self.games_point_with(scenario, target, &[], load, connections)
            .await
    }

    /// [`Bench::games_point`] with more server flags.
    async fn games_point_with(
        &mut self,
        scenario: &str,
        target: &str,
        extra: &[&str],
        load: &GameLoad,
        connections: usize,
    ) -> anyhow::Result<Point> {
        let deployment = self.targets.deploy(target, extra).await?;
        let pool = deployment.pool(connections).await?;
        self.measure(scenario, target, deployment, (pool, None), load)
            .await
    }

    /// Runs `load` against `deployment` with the players on the first pool and the spectators
    /// on the second (or beside the players), and stops the deployment.
    async fn measure(
        &mut self,
        scenario: &str,
        target: &str,
        deployment: Deployment,
        (pool, watchers): (Pool, Option<Pool>),
        load: &GameLoad,
    ) -> anyhow::Result<Point> {
        let sampler = sample_window(deployment.pids(), load.warmup, load.duration);
        let run = async {
            match &watchers {
                Some(watchers) => load::run_games_watched(&pool, watchers, load).await,
                None => load::run_games(&pool, load).await,
            }
        };
        let (stats, window) = match &deployment.schema {
            Some(schema) => {
                let (stats, window) =
                    tokio::join!(run, pg_window(schema, load.warmup, load.duration));
                (stats, Some(window?))
            }
            None => (run.await, None),
        };
        let mut usage = sampler
            .join()
            .map_err(|_| anyhow::anyhow!("sampler panicked"))?;
        usage.server.1.hwm_kib = usage.server.1.hwm_kib.max(deployment.peak_hwm_kib());
        let nodes = deployment.servers.len();
        let connections = pool.len();
        drop(pool);
        let pg = deployment.finish(window).await?;
        let mut point = Point::new(
            scenario,
            target,
            (load.workers, load.spectators, connections),
            &stats,
            &usage,
        );
        point.nodes = nodes;
        point.pg = pg;
        Ok(point)
    }

    /// One echo run; `rounds`: each caller's pause between rounds and the calls a round makes
    /// back to back (`None`: single calls back to back).
    async fn echo_point(
        &mut self,
        scenario: &str,
        workers: usize,
        connections: usize,
        rounds: Option<(Duration, usize)>,
    ) -> anyhow::Result<Point> {
        let (request_bytes, response_bytes) = self.sizes.unwrap_or((70, 1500));
        let server = self.targets.start("echo")?;
        let pool = Pool::connect(server.addr(), connections).await?;
        let load = EchoLoad {
            workers,
            warmup: self.args.warmup,
            duration: self.args.duration,
            request_bytes,
            response_bytes,
            round_interval: rounds.map(|(interval, _)| interval),
            calls_per_round: rounds.map_or(1, |(_, calls)| calls),
        };
        let sampler = sample_window(vec![server.pid()], load.warmup, load.duration);
        let stats = load::run_echo(&pool, &load).await;
        let mut usage = sampler
            .join()
            .map_err(|_| anyhow::anyhow!("sampler panicked"))?;
        usage.server.1.hwm_kib = server
            .sample()
            .map_or(usage.server.1.hwm_kib, |s| s.hwm_kib);
        Ok(Point::new(
            scenario,
            "echo",
            (workers, 0, pool.len()),
            &stats,
            &usage,
        ))
    }

    /// Two nodes on one database, each game's players on node A and its spectator on node A or
    /// on node B: what crossing nodes (a NOTIFY, then node B reading the event) adds to the
    /// delivery, paced and back to back.
    async fn cross_node(&mut self) -> anyhow::Result<()> {
        if self.targets.database.is_none() {
            bail!("the cross-node scenario needs --database postgres://…");
        }
        let c = self.args.cross_games;
        println!(
            "\n== cross-node: 2 nodes on one PostgreSQL database, {c} games on node A, one \
             spectator each on node A or B (a move every {:?} per game, then back to back)",
            self.args.cross_interval
        );
        println!("{}", Point::header());
        let connections = self.args.connections.max(1);
        for (scenario, interval) in [
            ("cross-paced", Some(self.args.cross_interval)),
            ("cross-max", None),
        ] {
            for (target, node) in [("pg×2 A→A", 0), ("pg×2 A→B", 1)] {
                let deployment = self.targets.deploy("pg×2", &[]).await?;
                let addrs = deployment.addrs();
                let players = Pool::connect(addrs[0], connections).await?;
                let watchers = Pool::connect(addrs[node], connections).await?;
                let mut load = self.game_load(c, 1);
                load.move_interval = interval;
                let point = self
                    .measure(
                        scenario,
                        target,
                        deployment,
                        (players, Some(watchers)),
                        &load,
                    )
                    .await?;
                self.push(point);
            }
        }
        Ok(())
    }

    fn game_load(&self, workers: usize, spectators: usize) -> GameLoad {
        GameLoad {
            workers,
            spectators,
            warmup: self.args.warmup,
            duration: self.args.duration,
            move_interval: None,
            games_per_worker: None,
            seed: self.args.seed,
        }
    }

    async fn throughput(&mut self) -> anyhow::Result<()> {
        println!("\n== throughput: moves/s and PlayMove latency against concurrency, beside echo");
        println!("{}", Point::header());
        let levels = self.args.concurrency.clone();
        for &c in &levels {
            let connections = self.args.connections.min(c).max(1);
            for target in self.throughput_targets() {
                let load = self.game_load(c, self.args.spectators);
                if self.args.metrics_pairs == 0 {
                    let point = self
                        .games_point("throughput", &target, &load, connections)
                        .await?;
                    self.push(point);
                    continue;
                }
                for _ in 0..self.args.metrics_pairs {
                    for metrics in [false, true] {
                        // Recorded as they would be in production; nobody scrapes during the
                        // window (a scrape every 15 s costs far less than the recording).
                        let extra: &[&str] = if metrics {
                            &["--metrics-listen", "127.0.0.1:0"]
                        } else {
                            &[]
                        };
                        let mut point = self
                            .games_point_with("throughput", &target, extra, &load, connections)
                            .await?;
                        if metrics {
                            point.target = format!("{target}+metrics");
                        }
                        self.push(point);
                    }
                }
            }
            let point = self.echo_point("throughput", c, connections, None).await?;
            self.push(point);
        }
        std::fs::create_dir_all(self.out_dir())?;
        let svg = self.out_dir().join("throughput.svg");
        let points: Vec<Point> = self
            .results
            .points
            .iter()
            .filter(|p| p.scenario == "throughput")
            .cloned()
            .collect();
        chart::throughput_chart(
            &svg,
            &format!(
                "oanquan-server vs bare tonic echo, {} spectators/game, {} connections, 2 shared cores",
                self.args.spectators, self.args.connections
            ),
            &points,
        )?;
        println!("chart: {}", svg.display());
        Ok(())
    }

    async fn spectators(&mut self) -> anyhow::Result<()> {
        let c = self.args.few_concurrency;
        let s = self.args.few_spectators;
        println!("\n== spectators: {c} games at once, {s} spectators each, beside echo");
        println!("{}", Point::header());
        let connections = self.args.connections.min(c * (s + 1)).max(1);
        for target in self.storages() {
            let load = self.game_load(c, s);
            let point = self
                .games_point("spectators", &target, &load, connections)
                .await?;
            self.push(point);
        }
        let point = self.echo_point("spectators", c, connections, None).await?;
        self.push(point);
        Ok(())
    }

    async fn fanout(&mut self) -> anyhow::Result<()> {
        let n = self.args.fanout_spectators;
        println!(
            "\n== fanout: one game at a time with {n} spectators over {} connections ({} games, \
             paced every {:?}, then back to back)",
            self.args.fanout_connections, self.args.fanout_games, self.args.fanout_interval
        );
        println!("{}", Point::header());
        for target in self.storages() {
            for interval in [Some(self.args.fanout_interval), None] {
                let server = self.targets.start(&target)?;
                // Connection 0 for the player, the others for the spectators.
                let pool = Pool::connect(server.addr(), self.args.fanout_connections + 1).await?;
                let load = GameLoad {
                    workers: 1,
                    spectators: n,
                    warmup: Duration::ZERO,
                    // A bound, not a target: the run ends after `fanout_games` games.
                    duration: Duration::from_secs(60),
                    move_interval: interval,
                    games_per_worker: Some(self.args.fanout_games),
                    seed: self.args.seed,
                };
                let before = now_samples(&server);
                let t0 = Instant::now();
                let mut stats: LoadStats = load::run_games(&pool, &load).await;
                let usage = usage_between(&server, before, t0);
                stats.window = t0.elapsed();
                let scenario = if interval.is_some() {
                    "fanout"
                } else {
                    "fanout-max"
                };
                let point = Point::new(scenario, &target, (1, n, pool.len()), &stats, &usage);
                self.push(point);
            }
        }
        Ok(())
    }

    /// Idle streams on a memory server and, with --database, on one PostgreSQL node.
    async fn idle(&mut self) -> anyhow::Result<()> {
        self.results.idle = Some(self.idle_on("memory").await?);
        if self.targets.database.is_some() {
            self.results.idle_postgres = Some(self.idle_on("pg×1").await?);
        }
        Ok(())
    }

    async fn idle_on(&mut self, target: &str) -> anyhow::Result<IdleResult> {
        let streams = self.args.idle_streams;
        let games = self.args.idle_games.max(1);
        let per_game = streams.div_ceil(games);
        println!(
            "\n== idle: {} WatchGame streams ({games} games × {per_game}) over {} connections, {target}",
            games * per_game,
            self.args.idle_connections
        );
        let deployment = self.targets.deploy(target, &[]).await?;
        let server = &deployment.servers[0];
        let pool = Pool::connect(server.addr(), self.args.idle_connections).await?;
        let ids = load::create_games(&pool, games).await?;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let before = server.sample()?;
        let idle = load::open_idle_streams(&pool, &ids, per_game, 256).await;
        // Let the server settle, then read its memory and CPU while the streams sit idle.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let settled = server.sample()?;
        tokio::time::sleep(Duration::from_secs(3)).await;
        let after = server.sample()?;
        let opened = idle.streams.len();
        let result = IdleResult {
            target: target.to_owned(),
            streams_opened: opened,
            games,
            connections: pool.len(),
            open_seconds: idle.elapsed.as_secs_f64(),
            errors: idle.errors,
            first_error: idle.first_error.clone(),
            rss_before_mib: before.rss_kib as f64 / 1024.0,
            rss_with_streams_mib: after.rss_kib as f64 / 1024.0,
            peak_rss_mib: after.hwm_kib as f64 / 1024.0,
            kib_per_stream: (after.rss_kib.saturating_sub(before.rss_kib)) as f64
                / opened.max(1) as f64,
            server_cpu_cores_while_idle: (after.cpu_seconds - settled.cpu_seconds) / 3.0,
        };
        println!(
            "opened {opened} streams in {:.2} s ({} errors{}); server RSS {:.1} MiB before, {:.1} MiB \
             with the streams (peak {:.1} MiB), {:.1} KiB per stream; idle CPU {:.3} cores",
            result.open_seconds,
            result.errors,
            result
                .first_error
                .as_deref()
                .map(|e| format!(", first: {e}"))
                .unwrap_or_default(),
            result.rss_before_mib,
            result.rss_with_streams_mib,
            result.peak_rss_mib,
            result.kib_per_stream,
            result.server_cpu_cores_while_idle,
        );
        drop(idle);
        drop(pool);
        deployment.finish(None).await?;
        Ok(result)
    }

    /// Calls from creating a game to its first move's reply: CreateGame, JoinGame, PlayMove.
    const FIRST_MOVE_CALLS: usize = 3;

    /// The most calls/s the throughput sweep of this run measured for `target`, if it ran.
    fn throughput_peak(&self, target: &str) -> Option<f64> {
        let peak = self
            .results
            .points
            .iter()
            .filter(|p| p.target == target && p.scenario == "throughput")
            .map(|p| p.ops_per_s)
            .fold(0.0, f64::max);
        (peak > 0.0).then_some(peak)
    }

    async fn first_move(&mut self) -> anyhow::Result<()> {
        let c = self.args.first_move_concurrency;
        let connections = self.args.connections.min(c).max(1);
        println!(
            "\n== first-move: create → join → first move at half of the peak moves/s, {c} games at once"
        );
        println!("{}", Point::header());
        for target in self.storages() {
            let peak = match self.args.first_move_rate {
                Some(rate) => rate * 2.0,
                None => {
                    if let Some(measured) = self.throughput_peak(&target) {
                        measured
                    } else {
                        let load = self.game_load(c, 0);
                        let point = self
                            .games_point("peak", &target, &load, connections)
                            .await?;
                        let peak = point.ops_per_s;
                        self.push(point);
                        peak
                    }
                }
            };
            let rate = (peak / 2.0).max(1.0);
            let mut load = self.game_load(c, 0);
            load.move_interval = Some(Duration::from_secs_f64(c as f64 / rate));
            let point = self
                .games_point("first-move", &target, &load, connections)
                .await?;
            println!("  (target rate {rate:.0} moves/s = half of {peak:.0})");
            println!(
                "{}",
                first_calls_line(&point, ["CreateGame", "JoinGame", "PlayMove"])
            );
            self.push(point);
        }
        // The floor under those figures: the same callers and connections making rounds of
        // three echo calls (create, join, first move) at half of the echo's own peak. What the
        // wire, the client and the two processes sharing the machine's cores take for three
        // calls in a row at that load, before any game logic.
        let peak = if let Some(measured) = self.throughput_peak("echo") {
            measured
        } else {
            let point = self.echo_point("peak", c, connections, None).await?;
            let peak = point.ops_per_s;
            self.push(point);
            peak
        };
        let rate = (peak / 2.0).max(1.0);
        let round = Duration::from_secs_f64(c as f64 * Self::FIRST_MOVE_CALLS as f64 / rate);
        let point = self
            .echo_point(
                "first-move",
                c,
                connections,
                Some((round, Self::FIRST_MOVE_CALLS)),
            )
            .await?;
        println!(
            "  (echo: rounds of {} calls, {rate:.0} calls/s = half of {peak:.0}; c→1st p99 is a round's)",
            Self::FIRST_MOVE_CALLS
        );
        println!(
            "{}",
            first_calls_line(&point, ["echo 1", "echo 2", "echo 3"])
        );
        self.push(point);
        Ok(())
    }

    async fn clocks(&mut self) -> anyhow::Result<()> {
        let target = if self.args.durable {
            if !self.targets.durable {
                bail!("--durable: this oanquan-server has no --database flag");
            }
            "durable"
        } else {
            "memory"
        };
        let games = self.args.clock_games;
        println!(
            "\n== clocks: {games} timed games at once on one {target} server, then nobody moves"
        );
        for variant in self.args.clock_variants.clone() {
            let spread = match variant {
                ClockVariant::Spread => self.args.clock_spread,
                ClockVariant::Burst => BURST_SPREAD,
            };
            // Every first move waits for the whole setup: its own limit must not abort a game.
            let server = self.targets.start_with(
                target,
                &[
                    "--first-move-time",
                    "10m",
                    "--max-open-games-per-client",
                    "0",
                ],
            )?;
            let pool = Pool::connect(server.addr(), self.args.connections).await?;
            let load = ClockLoad {
                games,
                parallel: self.args.clock_parallel,
                schedule: self.args.clock_schedule,
                idle: self.args.clock_idle,
                spread,
            };
            let run = clocks::run_clocks(&pool, &load, Some(server.pid())).await;
            let result = ClockResult {
                variant,
                target,
                spread_s: spread.as_secs_f64(),
                idle_s: self.args.clock_idle.as_secs_f64(),
                run,
            };
            println!("{}", result.summary());
            let p99 = result.run.lateness.p99_ms;
            println!(
                "  target (issue #15): every flag by timeout, p99 lateness < 100 ms: {}",
                if result.run.all_flags_fell() && p99 < 100.0 {
                    "reached"
                } else {
                    "NOT reached"
                }
            );
            self.results.clocks.push(result);
        }
        Ok(())
    }

    fn out_dir(&self) -> PathBuf {
        self.args
            .out_dir
            .clone()
            .unwrap_or_else(|| workspace_root().join("target/bench"))
    }

    fn summary(&self) {
        let points = &self.results.points;
        let echo_at = |scenario: &str, c: usize| {
            points
                .iter()
                .find(|p| p.scenario == scenario && p.target == "echo" && p.concurrency == c)
        };
        let mut lines = Vec::new();
        for p in points.iter().filter(|p| p.target != "echo") {
            let Some(echo) = echo_at(&p.scenario, p.concurrency) else {
                continue;
            };
            if p.scenario == "first-move" {
                if p.create_to_first_move_ms.count == 0 || echo.create_to_first_move_ms.count == 0 {
                    // Nothing to compare (no game or round finished its sequence in the window).
                    continue;
                }
                // Paced runs: the rates were set, not measured; what compares is the latency.
                lines.push(format!(
                    "{:<11} {:<8} {:>5}  create → first move p99 {:>6.2} ms / echo's {} calls {:>6.2} ms = {:>4.1}×",
                    p.scenario,
                    p.target,
                    p.concurrency,
                    p.create_to_first_move_ms.p99,
                    Self::FIRST_MOVE_CALLS,
                    echo.create_to_first_move_ms.p99,
                    p.create_to_first_move_ms.p99 / echo.create_to_first_move_ms.p99.max(1e-9),
                ));
            } else {
                lines.push(format!(
                    "{:<11} {:<8} {:>5}  moves/s {:>8.0} / echo {:>8.0} = {:>5.1} %   server CPU per call {:>6.1} µs / {:>5.1} µs = {:>4.1}×",
                    p.scenario,
                    p.target,
                    p.concurrency,
                    p.ops_per_s,
                    echo.ops_per_s,
                    100.0 * p.ops_per_s / echo.ops_per_s.max(1e-9),
                    p.server_cpu_us_per_op,
                    echo.server_cpu_us_per_op,
                    p.server_cpu_us_per_op / echo.server_cpu_us_per_op.max(1e-9),
                ));
            }
        }
        if !lines.is_empty() {
            println!(
                "\n== ratios service / echo (same run, same client, same concurrency and sizes)"
            );
            for line in lines {
                println!("{line}");
            }
        }
    }

    fn write(&self) -> anyhow::Result<()> {
        let dir = self.out_dir();
        std::fs::create_dir_all(&dir)?;
        let json = dir.join("results.json");
        std::fs::write(&json, serde_json::to_string_pretty(&self.results)?)?;
        let mut md = String::from(
            "| scenario | target | conc. | spect. | calls/s | p50 ms | p99 ms | p99.9 ms | create→1st move p99 ms | delivery p50 / p99 / p99.9 / max ms | server CPU (cores) | server µs/call | peak RSS MiB | errors |\n\
             | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
        );
        for p in &self.results.points {
            let first = if p.create_to_first_move_ms.count > 0 {
                format!("{:.2}", p.create_to_first_move_ms.p99)
            } else {
                "–".to_owned()
            };
            let delivery = if p.delivery_ms.count > 0 {
                format!(
                    "{:.2} / {:.2} / {:.2} / {:.2}",
                    p.delivery_ms.p50, p.delivery_ms.p99, p.delivery_ms.p999, p.delivery_ms.max
                )
            } else {
                "–".to_owned()
            };
            md.push_str(&format!(
                "| {} | {} | {} | {} | {:.0} | {:.2} | {:.2} | {:.2} | {} | {} | {:.2} | {:.1} | {:.1} | {} |\n",
                p.scenario,
                p.target,
                p.concurrency,
                p.spectators,
                p.ops_per_s,
                p.latency_ms.p50,
                p.latency_ms.p99,
                p.latency_ms.p999,
                first,
                delivery,
                p.server_cpu_cores,
                p.server_cpu_us_per_op,
                p.server_peak_rss_mib,
                p.errors,
            ));
        }
        if self.results.points.iter().any(|p| p.pg.is_some()) {
            md.push_str(
                "\n| scenario | target | conc. | nodes | moves/s | moves in the run | transactions per move | WAL bytes per move | rows written per move | commits/s (window) | WAL MB/s (window) | database CPU (cores) | database µs per move |\n\
                 | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
            );
            for p in &self.results.points {
                let Some(pg) = &p.pg else { continue };
                md.push_str(&format!(
                    "| {} | {} | {} | {} | {:.0} | {} | {:.2} | {:.0} | {:.2} | {:.0} | {:.2} | {:.2} | {:.0} |\n",
                    p.scenario,
                    p.target,
                    p.concurrency,
                    pg.nodes,
                    p.ops_per_s,
                    pg.moves,
                    pg.xacts_per_move,
                    pg.wal_bytes_per_move,
                    pg.rows_per_move,
                    pg.commits_per_s,
                    pg.wal_bytes_per_s / 1e6,
                    pg.db_cpu_cores,
                    pg.db_cpu_cores * 1e6 / p.ops_per_s.max(1e-9),
                ));
            }
        }
        if self.results.idle.is_some() || self.results.idle_postgres.is_some() {
            md.push_str(
                "\n| idle streams | target | games | streams | RSS before MiB | RSS with streams MiB | KiB per stream | idle CPU (cores) |\n\
                 | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n",
            );
            for idle in [&self.results.idle, &self.results.idle_postgres]
                .into_iter()
                .flatten()
            {
                md.push_str(&format!(
                    "| idle | {} | {} | {} | {:.1} | {:.1} | {:.1} | {:.3} |\n",
                    idle.target,
                    idle.games,
                    idle.streams_opened,
                    idle.rss_before_mib,
                    idle.rss_with_streams_mib,
                    idle.kib_per_stream,
                    idle.server_cpu_cores_while_idle,
                ));
            }
        }
        if !self.results.clocks.is_empty() {
            md.push_str(
                "\n| clocks | target | games | timeouts | deadlines over ms | lateness p50 / p99 / max ms | seen by lobby p99 ms | idle server CPU (cores) | idle RSS MiB |\n\
                 | --- | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: |\n",
            );
            for c in &self.results.clocks {
                let r = &c.run;
                md.push_str(&format!(
                    "| {:?} | {} | {} | {} | {:.0} | {:.1} / {:.1} / {:.1} | {:.1} | {} | {} |\n",
                    c.variant,
                    c.target,
                    r.games,
                    r.timeouts,
                    r.deadline_span_ms,
                    r.lateness.p50_ms,
                    r.lateness.p99_ms,
                    r.lateness.max_ms,
                    r.observed.p99_ms,
                    r.idle_cpu_cores
                        .map_or("?".to_owned(), |v| format!("{v:.4}")),
                    r.idle_rss_mib.map_or("?".to_owned(), |v| format!("{v:.1}")),
                ));
            }
        }
        std::fs::write(dir.join("results.md"), md)?;
        println!("\nresults: {}", json.display());
        Ok(())
    }
}

/// The database's figures of one PostgreSQL point, for the table on stdout.
fn pg_line(pg: &PgFigures, moves_per_s: f64) -> String {
    format!(
        "  └ PostgreSQL, {} node(s): {} moves in the run; per move {:.2} transactions, {:.0} WAL \
         bytes, {:.2} rows written; in the window {:.0} commits/s, {:.2} MB/s of WAL, database \
         CPU {:.2} cores = {:.0} µs per move",
        pg.nodes,
        pg.moves,
        pg.xacts_per_move,
        pg.wal_bytes_per_move,
        pg.rows_per_move,
        pg.commits_per_s,
        pg.wal_bytes_per_s / 1e6,
        pg.db_cpu_cores,
        pg.db_cpu_cores * 1e6 / moves_per_s.max(1e-9),
    )
}

fn machine() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, std::num::NonZero::get);
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|l| l.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_default();
    format!("{cpus} CPUs ({model}), shared with other work")
}

async fn run(args: Args) -> anyhow::Result<()> {
    let server = locate_server(&args)?;
    // `fanout`, `idle`, `clocks` and `cross-node` measure no echo: they run where only the
    // server was shipped
    // (an outside probe's release directory had no echo server, and no scenario would start).
    let echo = locate_echo(&args).map_err(|e| e.to_string());
    let compared = [
        Scenario::All,
        Scenario::Throughput,
        Scenario::Spectators,
        Scenario::FirstMove,
    ];
    if let Err(missing) = &echo
        && args.scenario.iter().any(|s| compared.contains(s))
    {
        bail!("{missing}");
    }
    let help = std::process::Command::new(&server)
        .arg("--help")
        .output()
        .with_context(|| format!("running {} --help", server.display()))?;
    let durable = String::from_utf8_lossy(&help.stdout).contains("--database");
    let mut bench = Bench {
        results: Results {
            machine: machine(),
            server_bin: server.display().to_string(),
            durable_available: durable,
            ..Results::default()
        },
        targets: Targets {
            server,
            echo,
            durable,
            database: args.database.clone(),
            tmp: tempfile::tempdir()?,
            runs: 0,
            pin: args.pin,
        },
        args,
        sizes: None,
    };
    if !durable && bench.args.storage.contains(&StorageKind::Durable) {
        let note = "durable storage skipped: this oanquan-server has no --database flag yet";
        eprintln!("{note}");
        bench.results.notes.push(note.to_owned());
    }
    if bench.args.pin {
        // All threads of this process (the runtime's workers exist already) to CPU 0.
        let status = std::process::Command::new("taskset")
            .args(["-a", "-p", "-c", "0", &std::process::id().to_string()])
            .stdout(std::process::Stdio::null())
            .status()
            .context("running taskset")?;
        if !status.success() {
            bail!("taskset failed");
        }
        bench
            .results
            .notes
            .push("client pinned to CPU 0, servers to CPU 1".to_owned());
    }
    println!("machine: {}", bench.results.machine);
    let scenarios = bench.args.scenario.clone();
    let all = scenarios.contains(&Scenario::All);
    let has = |scenario: Scenario| scenarios.contains(&scenario);
    let started = Instant::now();
    if all || has(Scenario::Throughput) {
        bench.throughput().await?;
    }
    if all || has(Scenario::Spectators) {
        bench.spectators().await?;
    }
    if all || has(Scenario::Fanout) {
        bench.fanout().await?;
    }
    if all || has(Scenario::Idle) {
        bench.idle().await?;
    }
    if all || has(Scenario::FirstMove) {
        bench.first_move().await?;
    }
    if has(Scenario::CrossNode) || (all && bench.targets.database.is_some()) {
        bench.cross_node().await?;
    }
    if has(Scenario::Clocks) {
        bench.clocks().await?;
    }
    bench.summary();
    bench.write()?;
    println!("total time {:.0} s", started.elapsed().as_secs_f64());
    Ok(())
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("oanquan-bench: cannot start the async runtime: {error}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("oanquan-bench: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// The p50 / p99 of each call of a `first-move` point's sequences, in order.
fn first_calls_line(point: &Point, names: [&str; 3]) -> String {
    let calls: Vec<String> = names
        .iter()
        .zip(&point.first_calls_ms)
        .map(|(name, q)| format!("{name} {:.2} / {:.2}", q.p50, q.p99))
        .collect();
    format!("  (each call, p50 / p99 ms: {})", calls.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_the_server_reads_them() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration(" 1.5s "), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert!(parse_duration("fast").is_err());
        assert!(parse_duration("5d").is_err());
        assert!(parse_duration("99999999999999999999h").is_err());
    }

    #[test]
    fn a_rate_is_positive_finite_and_bounded() {
        assert_eq!(parse_rate("5000"), Ok(5000.0));
        assert_eq!(parse_rate(" 0.5 "), Ok(0.5));
        assert_eq!(parse_rate("0.001"), Ok(0.001));
        for bad in [
            "0",
            "-3",
            "nan",
            "inf",
            "1e12",
            "1e-300",
            "0.0009",
            "fast",
            "５０００",
            "",
        ] {
            assert!(parse_rate(bad).is_err(), "{bad:?}");
        }
    }
}
