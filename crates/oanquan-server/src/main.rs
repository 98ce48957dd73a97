//! `oanquan-server`: the Ô Ăn Quan game server.
//!
//! Once the listener is bound it prints exactly one line to stdout,
//! `oanquan-server listening on <ip:port>`, so scripts and tests can start it with
//! `--listen 127.0.0.1:0` and read the port. Logs go to stderr (filter with `RUST_LOG`).
//!
//! The database is opened and checked before the listener is bound: a database that cannot be
//! used is reported on stderr with exit status 1 and nothing is printed on stdout.
//!
//! `oanquan-server backup --database PATH --to FILE` copies a database instead of serving it.

use std::io::{IsTerminal as _, Write as _};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::error::ErrorKind;
use clap::parser::ValueSource;
use clap::{CommandFactory as _, FromArgMatches as _, Parser, Subcommand};
use oanquan_server::domain::limits::RateLimit;
use oanquan_server::{Config, Storage, TlsIdentity};
use tokio::net::TcpListener;

/// Hosts Ô Ăn Quan games over gRPC: games, moves and resumable event streams, plus the
/// stateless RulesService, grpc.health.v1 and server reflection (v1 and v1alpha).
///
/// Every option can also be set through the environment variable shown with it.
/// Durations take a unit: 500ms, 15s, 2m, 1h (a bare number means seconds). Sizes may: 4MiB,
/// 512 KiB, 1MB (a bare number means bytes). Switches take true/false, 1/0, yes/no or on/off,
/// on the command line and in the environment alike.
///
/// Per-client limits (--rate-limit, --max-open-games-per-client, --max-connections-per-client,
/// --max-analyses-per-client, --max-spectators-per-client) count by peer address (IPv6 by /64);
/// behind a reverse proxy enforce them at the proxy instead.
///
/// `oanquan-server backup` copies a database safely while a server runs on it (see STORAGE.md).
#[derive(Debug, Parser)]
#[command(
    name = "oanquan-server",
    version,
    about,
    long_about,
    args_conflicts_with_subcommands = true
)]
struct Args {
    /// Without a subcommand, the server runs.
    #[command(subcommand)]
    command: Option<Command>,

    /// Address to listen on; port 0 picks a free port (printed on stdout).
    #[arg(long, env = "OANQUAN_LISTEN", default_value = "127.0.0.1:50051")]
    listen: SocketAddr,

    /// SQLite database file holding every game, move and event; created only where no file is.
    /// While the server runs SQLite keeps `-wal` and `-shm` files next to it (and the server a
    /// `.lock`); a clean stop folds the WAL in and removes both, so the file alone holds every
    /// game. A move is acknowledged only once it is on disk, and a restart resumes games and
    /// watch streams. A file that is empty, corrupt, read-only, another application's or from a
    /// newer server is refused and left untouched. See STORAGE.md for backups.
    // Not `conflicts_with = "in_memory"`: clap would count OANQUAN_IN_MEMORY=0 as present and
    // refuse every database; Args::try_parse_checked refuses the combination only when on.
    #[arg(
        long,
        env = "OANQUAN_DATABASE",
        value_name = "PATH",
        default_value = "oanquan.db"
    )]
    database: PathBuf,

    /// Keep games in memory instead of a database: for throwaway runs, everything is lost when
    /// the server stops.
    #[arg(long, env = "OANQUAN_IN_MEMORY", value_parser = parse_switch)]
    in_memory: bool,

    /// Concurrent calls (open watch streams included) per HTTP/2 connection.
    #[arg(long, env = "OANQUAN_MAX_CONCURRENT_STREAMS", default_value_t = 128)]
    max_concurrent_streams: u32,

    /// Requests one connection may have in service at once; more wait their turn.
    #[arg(
        long,
        env = "OANQUAN_CONCURRENCY_LIMIT_PER_CONNECTION",
        default_value_t = 64
    )]
    concurrency_limit_per_connection: usize,

    /// Largest message decoded or encoded: a number of bytes, or with a unit (B, KB, KiB, MB,
    /// MiB; KB and MB count 1000s, KiB and MiB 1024s; any case, a space is allowed).
    #[arg(
        long,
        env = "OANQUAN_MAX_MESSAGE_SIZE",
        value_name = "SIZE",
        default_value = "4MiB",
        value_parser = parse_byte_size
    )]
    max_message_size: usize,

    /// HTTP/2 keepalive PING interval.
    #[arg(long, env = "OANQUAN_KEEPALIVE_INTERVAL", default_value = "30s", value_parser = parse_duration)]
    keepalive_interval: Duration,

    /// Close a connection whose keepalive PING is not answered within this time.
    #[arg(long, env = "OANQUAN_KEEPALIVE_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    keepalive_timeout: Duration,

    /// Deadline of a unary call (a client's shorter grpc-timeout wins).
    #[arg(long, env = "OANQUAN_REQUEST_TIMEOUT", default_value = "30s", value_parser = parse_duration)]
    request_timeout: Duration,

    /// Concurrent spectators of one game; more get RESOURCE_EXHAUSTED. A seated player's own
    /// streams (WatchGame with its token, up to 4 per seat) come on top and are never refused
    /// because spectators took the places.
    #[arg(long, env = "OANQUAN_MAX_SPECTATORS_PER_GAME", default_value_t = 100)]
    max_spectators_per_game: usize,

    /// Spectator streams of one game on one connection; more get RESOURCE_EXHAUSTED. 0 = no
    /// limit.
    #[arg(
        long,
        env = "OANQUAN_MAX_SPECTATORS_PER_CONNECTION",
        default_value_t = 4
    )]
    max_spectators_per_connection: usize,

    /// Spectator streams of one game from one client address; more get RESOURCE_EXHAUSTED.
    /// 0 = no limit.
    #[arg(long, env = "OANQUAN_MAX_SPECTATORS_PER_CLIENT", default_value_t = 8)]
    max_spectators_per_client: usize,

    /// Games kept at most with --in-memory (a database has no limit of its own).
    #[arg(long, env = "OANQUAN_MAX_GAMES", default_value_t = 10_000)]
    max_games: usize,

    /// Idle time after which a stream sends a Heartbeat event.
    #[arg(long, env = "OANQUAN_HEARTBEAT_INTERVAL", default_value = "15s", value_parser = parse_duration)]
    heartbeat_interval: Duration,

    /// On SIGINT/SIGTERM, how long to let calls finish before exiting anyway.
    #[arg(long, env = "OANQUAN_SHUTDOWN_DRAIN_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    shutdown_drain_timeout: Duration,

    /// Serve TLS with this PEM certificate chain (needs --tls-key). Without it the server
    /// speaks cleartext HTTP/2 (h2c).
    #[arg(
        long,
        env = "OANQUAN_TLS_CERT",
        value_name = "PATH",
        requires = "tls_key"
    )]
    tls_cert: Option<PathBuf>,

    /// The PEM private key of --tls-cert.
    #[arg(
        long,
        env = "OANQUAN_TLS_KEY",
        value_name = "PATH",
        requires = "tls_cert"
    )]
    tls_key: Option<PathBuf>,

    /// Requests per second one client address may make on average (health checks excluded);
    /// more get RESOURCE_EXHAUSTED with a retry delay. 0 turns the limit off.
    #[arg(
        long,
        env = "OANQUAN_RATE_LIMIT",
        value_name = "PER_SECOND",
        default_value_t = 50.0
    )]
    rate_limit: f64,

    /// Requests one client address may make in a burst above --rate-limit.
    #[arg(long, env = "OANQUAN_RATE_LIMIT_BURST", default_value_t = 100)]
    rate_limit_burst: u32,

    /// Waiting or active games one client address may have created at once; 0 = no limit.
    #[arg(long, env = "OANQUAN_MAX_OPEN_GAMES_PER_CLIENT", default_value_t = 20)]
    max_open_games_per_client: usize,

    /// TCP connections one client address may have open at once; more are closed as they are
    /// accepted. 0 = no limit.
    #[arg(long, env = "OANQUAN_MAX_CONNECTIONS_PER_CLIENT", default_value_t = 64)]
    max_connections_per_client: usize,

    /// A new connection that has not finished its TLS handshake (with TLS) and sent its
    /// HTTP/2 preface within this time is closed, so idle or half-open connections cannot
    /// pile up or hold a shutdown.
    #[arg(long, env = "OANQUAN_HANDSHAKE_TIMEOUT", default_value = "5s", value_parser = parse_duration)]
    handshake_timeout: Duration,

    /// A game nobody joins, or nobody moves in, for this long is aborted (watchers get
    /// GameOver); 0 = never.
    #[arg(long, env = "OANQUAN_IDLE_GAME_TIMEOUT", default_value = "1h", value_parser = parse_duration)]
    idle_game_timeout: Duration,

    /// A watch stream whose client reads nothing for this long is dropped with
    /// RESOURCE_EXHAUSTED (it may resume with after_sequence).
    #[arg(long, env = "OANQUAN_STREAM_STALL_TIMEOUT", default_value = "30s", value_parser = parse_duration)]
    stream_stall_timeout: Duration,

    /// Exempt loopback clients (127.0.0.0/8, ::1) from the per-client limits (and from
    /// --max-spectators-per-connection), so local tools and benchmarks are not throttled:
    /// `--exempt-loopback false` (or off, no, 0) to count them too.
    #[arg(
        long,
        env = "OANQUAN_EXEMPT_LOOPBACK",
        default_value_t = true,
        action = clap::ArgAction::Set,
        value_parser = parse_switch
    )]
    exempt_loopback: bool,

    /// Thinking time of the computer opponent per move (games created with a computer level).
    /// Its weaker levels stop earlier, at their depth.
    #[arg(long, env = "OANQUAN_COMPUTER_MOVE_TIME", default_value = "300ms", value_parser = parse_duration)]
    computer_move_time: Duration,

    /// Computer moves searching at once; more wait for a free slot. 0 = one per CPU core.
    /// RulesService.Analyze calls have slots of their own (--max-analyses), so a computer
    /// opponent never waits behind them.
    #[arg(long, env = "OANQUAN_MAX_SEARCHES", default_value_t = 0)]
    max_searches: usize,

    /// RulesService.Analyze calls searching at once (each up to 5 s), apart from computer
    /// moves. 0 = one per CPU core but one, at least 1.
    #[arg(long, env = "OANQUAN_MAX_ANALYSES", default_value_t = 0)]
    max_analyses: usize,

    /// Analyze calls one client address may have running or waiting; one more gets
    /// RESOURCE_EXHAUSTED with a retry delay. 0 = no limit.
    #[arg(
        long,
        env = "OANQUAN_MAX_ANALYSES_PER_CLIENT",
        default_value_t = oanquan_server::domain::computer::DEFAULT_ANALYSES_PER_CLIENT
    )]
    max_analyses_per_client: usize,

    /// How long an Analyze call waits for a free slot when all --max-analyses are taken; then
    /// it gets RESOURCE_EXHAUSTED with a retry delay. 0 = refuse at once.
    #[arg(long, env = "OANQUAN_ANALYSIS_QUEUE_TIMEOUT", default_value = "500ms", value_parser = parse_duration)]
    analysis_queue_timeout: Duration,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Copy a database to a new file, safely while a server runs on it.
    ///
    /// Uses SQLite's online backup: the copy is one consistent moment of the database, taken
    /// through SQLite's own locking while the server keeps writing (it does not need the
    /// server's .lock). The copy is a single file (no -wal), checked (integrity check,
    /// application id, schema version) before it is renamed into place; start a server on it
    /// with --database to restore. Prints one line on success; exits 1 on any error, leaving
    /// no partial file. See STORAGE.md.
    Backup(BackupArgs),
}

#[derive(Debug, clap::Args)]
struct BackupArgs {
    /// The database to copy.
    #[arg(
        long,
        env = "OANQUAN_DATABASE",
        value_name = "PATH",
        default_value = "oanquan.db"
    )]
    database: PathBuf,

    /// The file to write. Refused if it exists, unless --force.
    #[arg(long, value_name = "FILE")]
    to: PathBuf,

    /// Replace FILE if it exists (only once the new copy is complete and checked).
    #[arg(long)]
    force: bool,
}

/// Runs `oanquan-server backup`.
fn backup(args: &BackupArgs) -> ExitCode {
    match oanquan_server::domain::backup(&args.database, &args.to, args.force) {
        Ok(report) => {
            println!(
                "backed up {} to {}: {} games, {} bytes, schema version {}, integrity ok",
                args.database.display(),
                report.to.display(),
                report.games,
                report.bytes,
                report.schema_version,
            );
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("oanquan-server backup: {error}");
            ExitCode::FAILURE
        }
    }
}

/// `500ms`, `15s`, `2m`, or a bare number of seconds.
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

/// A switch's value, on the command line or from the environment (`OANQUAN_IN_MEMORY=1`).
fn parse_switch(text: &str) -> Result<bool, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err(format!(
            "{text:?} is neither on nor off; use true/false, 1/0, yes/no or on/off"
        )),
    }
}

/// `4MiB`, `4 MiB`, `512kb`, or a bare number of bytes; at least 1 byte.
fn parse_byte_size(text: &str) -> Result<usize, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let unit = unit.trim_start();
    let not_a_size = || format!("{text:?} is not a size like 4MiB, 512 KiB or 65536");
    if number.is_empty() || !unit.chars().all(|c| c.is_ascii_alphabetic()) {
        return Err(not_a_size());
    }
    let multiplier: usize = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" => 1000,
        "kib" => 1 << 10,
        "mb" => 1_000_000,
        "mib" => 1 << 20,
        _ => return Err(format!("unknown unit {unit:?}; use B, KB, KiB, MB or MiB")),
    };
    // `number` is all digits, so parsing fails only on overflow.
    let bytes = number
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(multiplier))
        .ok_or_else(|| format!("{text:?} is too large"))?;
    if bytes == 0 {
        return Err("the size must be at least 1 byte".to_owned());
    }
    Ok(bytes)
}

impl Args {
    /// [`Parser::parse`], plus the rule clap cannot express: `--database` contradicts
    /// `--in-memory` only when in-memory is on (env `OANQUAN_IN_MEMORY=0` leaves it off).
    fn parse_checked() -> Self {
        Self::try_parse_checked(std::env::args_os()).unwrap_or_else(|error| error.exit())
    }

    fn try_parse_checked<I, T>(args: I) -> Result<Self, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let matches = Self::command().try_get_matches_from(args)?;
        let args = Self::from_arg_matches(&matches)?;
        let database_given = matches
            .value_source("database")
            .is_some_and(|source| source != ValueSource::DefaultValue);
        if args.in_memory && database_given {
            return Err(Self::command().error(
                ErrorKind::ArgumentConflict,
                "--database (OANQUAN_DATABASE) and --in-memory (OANQUAN_IN_MEMORY) contradict \
                 each other: keep one",
            ));
        }
        Ok(args)
    }

    fn config(&self) -> Config {
        let storage = if self.in_memory {
            Storage::InMemory
        } else {
            Storage::Sqlite(self.database.clone())
        };
        Config {
            storage,
            max_concurrent_streams: self.max_concurrent_streams,
            concurrency_limit_per_connection: self.concurrency_limit_per_connection,
            max_message_size: self.max_message_size,
            keepalive_interval: self.keepalive_interval,
            keepalive_timeout: self.keepalive_timeout,
            request_timeout: self.request_timeout,
            max_watchers_per_game: self.max_spectators_per_game,
            max_watchers_per_connection: self.max_spectators_per_connection,
            max_watchers_per_client: self.max_spectators_per_client,
            max_games: self.max_games,
            heartbeat_interval: self.heartbeat_interval,
            drain_timeout: self.shutdown_drain_timeout,
            rate_limit: (self.rate_limit > 0.0 && self.rate_limit_burst > 0).then_some(RateLimit {
                per_second: self.rate_limit,
                burst: self.rate_limit_burst,
            }),
            max_open_games_per_client: self.max_open_games_per_client,
            max_connections_per_client: self.max_connections_per_client,
            handshake_timeout: self.handshake_timeout,
            idle_game_timeout: Some(self.idle_game_timeout).filter(|t| !t.is_zero()),
            stream_stall_timeout: self.stream_stall_timeout,
            exempt_loopback: self.exempt_loopback,
            computer_move_time: self.computer_move_time,
            max_searches: self.max_searches,
            max_analyses: self.max_analyses,
            max_analyses_per_client: self.max_analyses_per_client,
            analysis_queue_timeout: self.analysis_queue_timeout,
            ..Config::default()
        }
    }
}

/// Installs the SIGINT and SIGTERM handlers now and returns a future that resolves on either.
///
/// Installing eagerly matters: a handler registered on first poll leaves a window after the
/// address is announced in which SIGTERM still kills the process outright.
fn shutdown_signal() -> std::io::Result<impl std::future::Future<Output = ()>> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        Ok(async move {
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
            tracing::info!("shutdown signal received");
        })
    }
    #[cfg(not(unix))]
    {
        Ok(async {
            let _ = tokio::signal::ctrl_c().await;
            tracing::info!("shutdown signal received");
        })
    }
}

async fn serve(args: Args) -> anyhow::Result<()> {
    let mut config = args.config();
    if let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) {
        config.tls = Some(TlsIdentity::read(cert, key)?);
    }
    // Before listening: a bad database must stop the server before clients can connect.
    let store = oanquan_server::open_store(&config).await?;
    let listener = TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let local = listener.local_addr()?;
    let shutdown = shutdown_signal().context("cannot install the SIGINT/SIGTERM handlers")?;
    // The one line on stdout, flushed at once: the end-to-end tests' contract.
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "oanquan-server listening on {local}")?;
    stdout.flush()?;
    drop(stdout);
    oanquan_server::run_with_store(listener, config, store, shutdown).await?;
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse_checked();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    if let Some(Command::Backup(backup_args)) = &args.command {
        return backup(backup_args);
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("oanquan-server: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("oanquan-server: {error:#}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("15s"), Ok(Duration::from_secs(15)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert!(parse_duration("fast").is_err());
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert!(parse_duration("5d").is_err());
    }

    #[test]
    fn byte_sizes_parse_with_units() {
        assert_eq!(parse_byte_size("4MiB"), Ok(4 * 1024 * 1024));
        assert_eq!(parse_byte_size("4 MiB"), Ok(4 * 1024 * 1024));
        assert_eq!(parse_byte_size(" 4mib "), Ok(4 * 1024 * 1024));
        assert_eq!(parse_byte_size("512KiB"), Ok(512 * 1024));
        assert_eq!(parse_byte_size("512 kb"), Ok(512_000));
        assert_eq!(parse_byte_size("2MB"), Ok(2_000_000));
        assert_eq!(parse_byte_size("100B"), Ok(100));
        assert_eq!(parse_byte_size("65536"), Ok(65_536));
        let refused = |text: &str, why: &str| {
            let error = parse_byte_size(text).expect_err(text);
            assert!(error.contains(why), "{text:?}: {error}");
        };
        refused("0", "at least 1 byte");
        refused("0MiB", "at least 1 byte");
        refused("4GiB", "unknown unit \"GiB\"");
        refused("4 M", "unknown unit");
        refused("99999999999999999999999", "too large");
        refused(&format!("{}MiB", usize::MAX / 1024), "too large");
        refused("", "not a size");
        refused("MiB", "not a size");
        refused("-4MiB", "not a size");
        refused("4.5MiB", "not a size");
        refused("4 MiB 2", "not a size");
        refused("four", "not a size");
    }

    #[test]
    fn switches_take_the_usual_spellings() {
        let memory = |args: &[&str]| {
            let args = Args::try_parse_checked(
                std::iter::once("oanquan-server").chain(args.iter().copied()),
            );
            args.map(|args| matches!(args.config().storage, Storage::InMemory))
        };
        assert_eq!(memory(&[]).ok(), Some(false));
        assert_eq!(memory(&["--in-memory"]).ok(), Some(true));
        let loopback = |value: &str| {
            Args::try_parse_checked(["oanquan-server", "--exempt-loopback", value])
                .map(|args| args.config().exempt_loopback)
                .ok()
        };
        for value in ["false", "FALSE", "0", "no", "No", "off"] {
            assert_eq!(loopback(value), Some(false), "{value}");
        }
        for value in ["true", "True", "1", "yes", "YES", "on"] {
            assert_eq!(loopback(value), Some(true), "{value}");
        }
        assert_eq!(loopback("maybe"), None);
        assert!(parse_switch("maybe").unwrap_err().contains("yes/no"));
        let size = Args::try_parse_checked(["oanquan-server", "--max-message-size", "4 MiB"])
            .map(|args| args.config().max_message_size);
        assert_eq!(size.ok(), Some(4 * 1024 * 1024));
        assert_eq!(
            Args::try_parse_checked(["oanquan-server"])
                .map(|args| args.config().max_message_size)
                .ok(),
            Some(Config::default().max_message_size)
        );
    }

    #[test]
    fn storage_defaults_to_a_database_file() {
        let args = Args::try_parse_from(["oanquan-server"]).unwrap();
        assert!(
            matches!(args.config().storage, Storage::Sqlite(path) if path == Path::new("oanquan.db"))
        );
        let args = Args::try_parse_from(["oanquan-server", "--in-memory"]).unwrap();
        assert!(matches!(args.config().storage, Storage::InMemory));
        let args = Args::try_parse_from(["oanquan-server", "--database", "/tmp/x.db"]).unwrap();
        assert!(
            matches!(args.config().storage, Storage::Sqlite(path) if path == Path::new("/tmp/x.db"))
        );
        assert!(
            Args::try_parse_checked(["oanquan-server", "--in-memory", "--database", "x.db"])
                .is_err()
        );
    }

    #[test]
    fn flag_defaults_are_the_library_defaults() {
        let config = Args::try_parse_from(["oanquan-server"]).unwrap().config();
        let library = Config::default();
        assert_eq!(config.rate_limit, library.rate_limit);
        assert_eq!(
            config.max_open_games_per_client,
            library.max_open_games_per_client
        );
        assert_eq!(
            config.max_connections_per_client,
            library.max_connections_per_client
        );
        assert_eq!(config.max_watchers_per_game, library.max_watchers_per_game);
        assert_eq!(
            config.max_watchers_per_connection,
            library.max_watchers_per_connection
        );
        assert_eq!(
            config.max_watchers_per_client,
            library.max_watchers_per_client
        );
        assert_eq!(config.handshake_timeout, library.handshake_timeout);
        assert_eq!(config.idle_game_timeout, library.idle_game_timeout);
        assert_eq!(config.stream_stall_timeout, library.stream_stall_timeout);
        assert_eq!(config.exempt_loopback, library.exempt_loopback);
        assert_eq!(config.computer_move_time, library.computer_move_time);
        assert_eq!(config.max_searches, library.max_searches);
        assert_eq!(config.max_analyses, library.max_analyses);
        assert_eq!(
            config.max_analyses_per_client,
            library.max_analyses_per_client
        );
        assert_eq!(
            config.analysis_queue_timeout,
            library.analysis_queue_timeout
        );
        assert!(config.tls.is_none());
        let off = Args::try_parse_from([
            "oanquan-server",
            "--rate-limit",
            "0",
            "--idle-game-timeout",
            "0",
            "--exempt-loopback",
            "false",
        ])
        .unwrap()
        .config();
        assert_eq!(off.rate_limit, None);
        assert_eq!(off.idle_game_timeout, None);
        assert!(!off.exempt_loopback);
        assert!(Args::try_parse_from(["oanquan-server", "--tls-cert", "c.pem"]).is_err());
    }

    #[test]
    fn backup_is_a_subcommand_and_the_server_flags_stay_top_level() {
        let args = Args::try_parse_from([
            "oanquan-server",
            "backup",
            "--database",
            "a.db",
            "--to",
            "b.db",
        ])
        .unwrap();
        assert!(matches!(
            args.command,
            Some(Command::Backup(BackupArgs { ref database, ref to, force: false }))
                if database == Path::new("a.db") && to == Path::new("b.db")
        ));
        let args = Args::try_parse_from([
            "oanquan-server",
            "--listen",
            "127.0.0.1:0",
            "--database",
            "a.db",
        ])
        .unwrap();
        assert!(args.command.is_none());
        assert!(
            Args::try_parse_from(["oanquan-server", "backup"]).is_err(),
            "--to is needed"
        );
        assert!(
            Args::try_parse_from(["oanquan-server", "--in-memory", "backup", "--to", "b"]).is_err(),
            "server flags do not mix with backup"
        );
    }

    #[test]
    fn cli_is_well_formed() {
        use clap::CommandFactory as _;
        Args::command().debug_assert();
    }
}
