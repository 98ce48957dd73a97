//! `oanquan-server`: the Ô Ăn Quan game server.
//!
//! Once the listener is bound it prints exactly one line to stdout,
//! `oanquan-server listening on <ip:port>`, so scripts and tests can start it with
//! `--listen 127.0.0.1:0` and read the port. With `--metrics-listen` a second line follows,
//! `oanquan-server metrics listening on <ip:port>`. Logs go to stderr (filter with `RUST_LOG`;
//! `--log-format json` for one JSON object per line).
//!
//! The database is opened and checked before the listener is bound: a database that cannot be
//! used is reported on stderr with exit status 1 and nothing is printed on stdout.
//!
//! `oanquan-server backup --database PATH --to FILE` copies a database instead of serving it.

use std::io::{IsTerminal as _, Write as _};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use clap::error::ErrorKind;
use clap::parser::ValueSource;
use clap::{CommandFactory as _, FromArgMatches as _, Parser, Subcommand};
use oanquan_ai::egtb::Tablebase;
use oanquan_server::config::{
    ClientLimits, ComputerLimits, DatabaseLimits, GameLimits, MemoryStoreLimits, StreamLimits,
    TransportLimits, parse_duration, parse_switch,
};
use oanquan_server::domain::is_postgres_url;
use oanquan_server::metrics::{Metrics, MetricsTokenFile};
use oanquan_server::readiness::{Readiness, ready_file_problem, remove_ready_file};
use oanquan_server::{Config, Storage, TlsIdentity, TlsReload};

/// mimalloc instead of glibc's malloc: a move makes ~85 allocations (protobuf strings and
/// vectors, the game's info, tonic's and hyper's own), and glibc's malloc/free cost ~17,000
/// instructions a move under callgrind (BENCHMARKS.md, issue 20). The echo baseline uses the
/// same allocator so that the comparison stays like for like.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Hosts Ô Ăn Quan games over gRPC: games, moves and resumable event streams, plus the
/// stateless RulesService, grpc.health.v1 and server reflection (v1 and v1alpha).
///
/// Every option can also be set through the environment variable shown with it.
/// Durations take a unit: 500ms, 15s, 2m, 1h (a bare number means seconds), at most a year.
/// Sizes may: 4MiB, 512 KiB, 1MB (a bare number means bytes). Switches (--in-memory, --no-web,
/// --exempt-loopback) take true/false, 1/0, yes/no or on/off, on the command line and in the
/// environment alike; a bare switch means true.
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
    args_conflicts_with_subcommands = true,
    // `--rate-limit -1` reaches the flag's parser, which says why; clap alone would call `-1`
    // an unknown flag.
    allow_negative_numbers = true
)]
struct Args {
    /// Without a subcommand, the server runs.
    #[command(subcommand)]
    command: Option<Command>,

    /// Address to listen on; port 0 picks a free port (printed on stdout).
    #[arg(long, env = "OANQUAN_LISTEN", default_value = "127.0.0.1:50051", value_parser = parse_listen)]
    listen: SocketAddr,

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

    /// How often to look whether the --tls-cert and --tls-key files changed, to serve the new
    /// pair to new connections (SIGHUP reloads at once); 0 reloads on SIGHUP only.
    #[arg(allow_hyphen_values = true,
        long,
        env = "OANQUAN_TLS_RELOAD_INTERVAL",
        value_name = "DURATION",
        default_value = "5s",
        value_parser = parse_duration
    )]
    tls_reload_interval: std::time::Duration,

    /// SQLite database file holding every game, move and event; created only where no file is.
    /// While the server runs SQLite keeps `-wal` and `-shm` files next to it (and the server a
    /// `.lock`); a clean stop folds the WAL in and removes both, so the file alone holds every
    /// game. A move is acknowledged only once it is on disk, and a restart resumes games and
    /// watch streams. A file that is empty, corrupt, read-only, another application's or from a
    /// newer server is refused and left untouched. See STORAGE.md for backups.
    ///
    /// Or a PostgreSQL URL (postgres://user:password@host:port/database, or postgresql://),
    /// which several servers can share: the tables are created or migrated at start, and a
    /// schema from a newer server is refused. Prefer OANQUAN_DATABASE_URL for a URL with a
    /// password, which the command line would show to other users of the machine.
    // Not `conflicts_with = "in_memory"`: clap would count OANQUAN_IN_MEMORY=0 as present and
    // refuse every database; Args::try_parse_checked refuses the combination only when on.
    #[arg(
        long,
        env = "OANQUAN_DATABASE",
        hide_env_values = true,
        value_name = "PATH|URL",
        default_value = DEFAULT_DATABASE,
        help_heading = "Storage"
    )]
    database: PathBuf,

    /// PostgreSQL URL to use instead of --database, from the environment only (so that its
    /// password stays out of the process list).
    #[arg(
        long = "database-url",
        env = "OANQUAN_DATABASE_URL",
        hide = true,
        hide_env_values = true,
        value_parser = parse_postgres_url,
    )]
    database_url: Option<String>,

    /// Keep games in memory instead of a database: for throwaway runs, everything is lost when
    /// the server stops.
    #[arg(
        long,
        env = "OANQUAN_IN_MEMORY",
        value_parser = parse_switch,
        action = clap::ArgAction::Set,
        num_args = 0..=1,
        default_value = "false",
        default_missing_value = "true",
        help_heading = "Storage"
    )]
    in_memory: bool,

    #[command(flatten)]
    memory: MemoryStoreLimits,

    #[command(flatten)]
    database_limits: DatabaseLimits,

    /// The PostgreSQL-only flags given (on the command line or in the environment), for the
    /// warning that another store ignores them. Not a flag.
    #[arg(skip)]
    postgres_flags_given: Vec<String>,

    #[command(flatten)]
    transport: TransportLimits,

    #[command(flatten)]
    clients: ClientLimits,

    #[command(flatten)]
    games: GameLimits,

    #[command(flatten)]
    streams: StreamLimits,

    #[command(flatten)]
    computer: ComputerLimits,

    #[command(flatten)]
    web: oanquan_server::web::WebSettings,

    /// Serve Prometheus metrics (OpenMetrics text) at http://ADDR/metrics; port 0 picks a free
    /// port (printed on stdout). Off when not given. Bind it where only your monitoring can
    /// reach it, or guard /metrics with --metrics-token-file.
    #[arg(
        long,
        env = "OANQUAN_METRICS_LISTEN",
        value_name = "ADDR",
        help_heading = "Operations",
        value_parser = parse_listen
    )]
    metrics_listen: Option<SocketAddr>,

    /// Answer /metrics only to requests with `Authorization: Bearer TOKEN`, TOKEN being this
    /// file's contents less one trailing line break: 16 to 4096 bytes of printable ASCII (as
    /// `openssl rand -hex 32` writes). A missing, empty or malformed file stops the server at
    /// start; later it is read again when it changes (a bad change keeps the token in use).
    /// /ready and /live stay open to probes. Off when not given.
    #[arg(
        long,
        env = "OANQUAN_METRICS_TOKEN_FILE",
        value_name = "PATH",
        help_heading = "Operations",
        requires = "metrics_listen"
    )]
    metrics_token_file: Option<PathBuf>,

    /// This server's name in the metrics (`oanquan_build_info{node=…}`), to tell nodes apart:
    /// at most 64 bytes of letters, digits and - _ . : @ / [ ]. Defaults to $HOSTNAME, else the
    /// machine's host name (if it is such a name), else the --listen address.
    #[arg(
        long,
        env = "OANQUAN_NODE_NAME",
        value_name = "NAME",
        help_heading = "Operations"
    )]
    node_name: Option<String>,

    /// Keep this file present exactly while the server is ready for traffic (as /ready says):
    /// created once serving, removed while the store cannot be written, when draining starts
    /// and on exit. For orchestrators that probe files rather than HTTP or gRPC health.
    #[arg(
        long,
        env = "OANQUAN_READY_FILE",
        value_name = "PATH",
        help_heading = "Operations"
    )]
    ready_file: Option<PathBuf>,

    /// Log format on stderr: `text` for people, `json` for one JSON object per line (with the
    /// fields of the enclosing spans: method, request_id, game_id).
    #[arg(
        long,
        env = "OANQUAN_LOG_FORMAT",
        value_enum,
        default_value_t = LogFormat::Text,
        help_heading = "Operations"
    )]
    log_format: LogFormat,

    /// Endgame tables for the computer player and RulesService.Analyze: a file written by
    /// `cargo run --release -p oanquan-ai --example egtb -- generate` (see the README). Read at
    /// start (logged with its rule set and size); a missing, damaged or unreadable file stops
    /// the server. Positions of other rule sets are searched as without tables.
    #[arg(
        long,
        env = "OANQUAN_ENDGAME_TABLES",
        value_name = "PATH",
        help_heading = "Computer player and analysis"
    )]
    endgame_tables: Option<PathBuf>,
}

/// See `--log-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

/// The database of `oanquan-server` and of `oanquan-server backup` when none is named.
const DEFAULT_DATABASE: &str = "oanquan.db";

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
        default_value = DEFAULT_DATABASE
    )]
    database: PathBuf,

    /// The file to write. Refused if it exists, unless --force.
    #[arg(long, value_name = "FILE")]
    to: PathBuf,

    /// Replace FILE if it exists (only once the new copy is complete and checked).
    #[arg(long)]
    force: bool,
}

/// The PostgreSQL store's flags (clap ids): other stores ignore them.
const POSTGRES_FLAGS: [&str; 6] = [
    "database_pool_size",
    "database_connect_timeout",
    "database_pool_wait",
    "database_statement_timeout",
    "database_batch",
    "database_writers",
];

/// Longest `--node-name`: a label on every metric, and a name to read on a dashboard.
const MAX_NODE_NAME: usize = 64;

/// Why `name` cannot be a node's name, or `None`. Host names, addresses with their port and pod
/// names fit; whatever could break a metric's label or a log line (quotes, control characters,
/// spaces) does not, nor a length that would be copied into every scrape. The value itself is
/// not repeated: it may be huge, or hold a line break.
fn node_name_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("is empty; give a name, or leave the option out".to_owned());
    }
    if name.len() > MAX_NODE_NAME {
        return Some(format!(
            "is {} bytes long; give at most {MAX_NODE_NAME}",
            name.len()
        ));
    }
    let allowed = |c: char| c.is_ascii_alphanumeric() || "-_.:@/[]".contains(c);
    let (at, bad) = name.char_indices().find(|&(_, c)| !allowed(c))?;
    let what = if bad.is_control() {
        "a control character".to_owned()
    } else if bad.is_whitespace() {
        "a space".to_owned()
    } else {
        format!("{bad:?}")
    };
    Some(format!(
        "has {what} at byte {at}; use only letters, digits and - _ . : @ / [ ]"
    ))
}

/// A PostgreSQL URL, for OANQUAN_DATABASE_URL.
/// An address to listen on: an IP address and a port. A host name is not one (it may resolve
/// to several addresses), and the message says so rather than "invalid socket address syntax".
fn parse_listen(text: &str) -> Result<SocketAddr, String> {
    text.trim().parse().map_err(|_| {
        "give an IP address and a port, like 127.0.0.1:50051, 0.0.0.0:50051 or [::]:50051 \
         (not a host name; port 0 picks a free one)"
            .to_owned()
    })
}

fn parse_postgres_url(text: &str) -> Result<String, String> {
    if is_postgres_url(text) {
        Ok(text.trim().to_owned())
    } else {
        Err(
            "not a PostgreSQL URL: write postgres://user:password@host:port/database (an \
             SQLite file goes in --database or OANQUAN_DATABASE)"
                .to_owned(),
        )
    }
}

/// Runs `oanquan-server backup`.
fn backup(args: &BackupArgs) -> ExitCode {
    if args.database.to_str().is_some_and(is_postgres_url) {
        eprintln!(
            "oanquan-server backup: copies SQLite files only; back up a PostgreSQL database \
             with its own tools (pg_dump, or continuous archiving; see STORAGE.md)"
        );
        return ExitCode::FAILURE;
    }
    match oanquan_server::domain::backup(&args.database, &args.to, args.force) {
        Ok(report) => {
            for partial in &report.removed_partials {
                println!(
                    "removed {}, left by a backup that did not finish",
                    partial.display()
                );
            }
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
        let mut args = Self::from_arg_matches(&matches)?;
        let command = Self::command();
        args.postgres_flags_given = POSTGRES_FLAGS
            .iter()
            .filter(|id| {
                matches
                    .value_source(id)
                    .is_some_and(|source| source != ValueSource::DefaultValue)
            })
            .filter_map(|id| command.get_arguments().find(|arg| arg.get_id() == id))
            .filter_map(|arg| arg.get_long().map(|long| format!("--{long}")))
            .collect();
        let database_given = matches
            .value_source("database")
            .is_some_and(|source| source != ValueSource::DefaultValue);
        if args.in_memory && (database_given || args.database_url.is_some()) {
            return Err(Self::command().error(
                ErrorKind::ArgumentConflict,
                "--database (OANQUAN_DATABASE, OANQUAN_DATABASE_URL) and --in-memory \
                 (OANQUAN_IN_MEMORY) contradict each other: keep one",
            ));
        }
        if let Some(problem) = args.node_name.as_deref().and_then(node_name_problem) {
            return Err(Self::command().error(
                ErrorKind::ValueValidation,
                format!("--node-name (OANQUAN_NODE_NAME) {problem}"),
            ));
        }
        if let Some(problem) = args.ready_file.as_deref().and_then(ready_file_problem) {
            return Err(Self::command().error(
                ErrorKind::ValueValidation,
                format!("--ready-file (OANQUAN_READY_FILE): {problem}"),
            ));
        }
        if database_given && args.database_url.is_some() {
            return Err(Self::command().error(
                ErrorKind::ArgumentConflict,
                "--database (OANQUAN_DATABASE) and OANQUAN_DATABASE_URL both name a database: \
                 keep one",
            ));
        }
        Ok(args)
    }

    /// The warning for PostgreSQL-only flags given to a server on another store, or `None`.
    fn ignored_postgres_flags(&self, storage: &Storage) -> Option<String> {
        if matches!(storage, Storage::Postgres { .. }) || self.postgres_flags_given.is_empty() {
            return None;
        }
        let (verb, pronoun) = match self.postgres_flags_given.len() {
            1 => ("applies", "it"),
            _ => ("apply", "them"),
        };
        Some(format!(
            "{} {verb} only to PostgreSQL (a postgres:// --database); this server's store \
             ignores {pronoun}",
            self.postgres_flags_given.join(", ")
        ))
    }

    fn config(&self) -> Config {
        let database = self.database.to_str().filter(|text| is_postgres_url(text));
        let storage = if self.in_memory {
            Storage::InMemory
        } else if let Some(url) = self.database_url.as_deref().or(database) {
            Storage::Postgres {
                url: url.to_owned(),
                options: self.database_limits.postgres_options(),
            }
        } else {
            Storage::Sqlite(self.database.clone())
        };
        Config {
            storage,
            tls: None,
            tls_reload: None,
            transport: self.transport,
            clients: self.clients,
            games: self.games,
            streams: self.streams,
            computer: self.computer,
            memory: self.memory,
            metrics: None,
            web: self.web.clone(),
            readiness: Readiness::default(),
            endgame_tables: None,
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
    // Not refused: one environment for every node (and the same flags on a test's SQLite or
    // in-memory server) is a normal setup; but a setting that does nothing is said once.
    if let Some(ignored) = args.ignored_postgres_flags(&config.storage) {
        tracing::warn!("{ignored}");
    }
    for unbound in
        oanquan_server::config::per_client_limits_that_never_bind(&config.games, &config.streams)
    {
        tracing::warn!("{unbound}");
    }
    if let Some(capped) = config.transport.request_bound_warning() {
        tracing::warn!("{capped}");
    }
    if let Some(unbound) = config.computer.analyses_warning() {
        tracing::warn!("{unbound}");
    }
    if let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) {
        config.tls = Some(TlsIdentity::read(cert, key)?);
        config.tls_reload = Some(TlsReload {
            cert: cert.clone(),
            key: key.clone(),
            poll_interval: args.tls_reload_interval,
        });
    }
    if let Some(path) = &args.endgame_tables {
        config.endgame_tables = Some(load_endgame_tables(path)?);
    }
    let metrics_token = match &args.metrics_token_file {
        Some(path) => Some(std::sync::Arc::new(MetricsTokenFile::open(path).map_err(
            |why| {
                anyhow::anyhow!("--metrics-token-file (OANQUAN_METRICS_TOKEN_FILE) {path:?} {why}")
            },
        )?)),
        None => None,
    };
    // The ports first, so that a port in use stops the server before it opens (or creates) a
    // database; but no listening before the store is open, so that a bad database stops the
    // server before a client can connect.
    let socket =
        reserve(args.listen).with_context(|| format!("cannot listen on {}", args.listen))?;
    let metrics_socket = match args.metrics_listen {
        Some(addr) => Some((
            addr,
            reserve(addr).with_context(|| format!("cannot listen for metrics on {addr}"))?,
        )),
        None => None,
    };
    let store = oanquan_server::open_store(&config).await?;
    let listener = socket
        .listen(LISTEN_BACKLOG)
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let local = listener.local_addr()?;
    let metrics = match metrics_socket {
        Some((addr, socket)) => {
            let listener = socket
                .listen(LISTEN_BACKLOG)
                .with_context(|| format!("cannot listen for metrics on {addr}"))?;
            let node = args
                .node_name
                .clone()
                .or_else(|| {
                    // Shells keep $HOSTNAME without exporting it: an outside probe started from
                    // bash was named by its address. The kernel's host name next.
                    std::env::var("HOSTNAME")
                        .ok()
                        .or_else(|| {
                            std::fs::read_to_string("/proc/sys/kernel/hostname")
                                .ok()
                                .map(|name| name.trim().to_owned())
                        })
                        .filter(|name| node_name_problem(name).is_none())
                })
                .unwrap_or_else(|| local.to_string());
            let metrics = Metrics::new(&node);
            config.metrics = Some(Arc::clone(&metrics));
            Some((listener, metrics))
        }
        None => None,
    };
    let shutdown = shutdown_signal().context("cannot install the SIGINT/SIGTERM handlers")?;
    // The first line on stdout, flushed at once: the end-to-end tests' contract.
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "oanquan-server listening on {local}")?;
    if let Some((listener, _)) = &metrics {
        writeln!(
            stdout,
            "oanquan-server metrics listening on {}",
            listener.local_addr()?
        )?;
    }
    stdout.flush()?;
    drop(stdout);
    // Scrapes go on while the server drains, and end with the process.
    let (_stop_metrics, stopped) = tokio::sync::watch::channel(false);
    if let Some((listener, metrics)) = metrics {
        tokio::spawn(oanquan_server::metrics::serve(
            listener,
            metrics,
            config.readiness.clone(),
            metrics_token,
            oanquan_server::web::HostCheck::new(&config.web),
            stopped,
        ));
    }
    if let Some(path) = &args.ready_file {
        // A file left by a process that was killed must not say this one is ready.
        remove_ready_file(path);
        tokio::spawn(config.readiness.clone().follow_file(path.clone()));
    }
    let served = oanquan_server::run_with_store(listener, config, store, shutdown).await;
    if let Some(path) = &args.ready_file {
        remove_ready_file(path);
    }
    served?;
    Ok(())
}

/// Connections the kernel queues for the accept loop (what `TcpListener::bind` asks for).
const LISTEN_BACKLOG: u32 = 1024;

/// A socket bound to `addr` (with `SO_REUSEADDR`, as `TcpListener::bind` sets it) but not
/// listening yet: the port is taken, and nobody can connect.
fn reserve(addr: std::net::SocketAddr) -> std::io::Result<tokio::net::TcpSocket> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    Ok(socket)
}

/// Reads `--endgame-tables` and logs what was loaded.
fn load_endgame_tables(path: &std::path::Path) -> anyhow::Result<Arc<Tablebase>> {
    let started = std::time::Instant::now();
    let tables = Tablebase::load(path).map_err(anyhow::Error::msg)?;
    tracing::info!(
        path = %path.display(),
        rules = ?tables.rules(),
        max_stones = tables.max_stones(),
        entries = tables.len(),
        proved = tables.resolved(),
        millis = started.elapsed().as_millis() as u64,
        "endgame tables loaded"
    );
    Ok(Arc::new(tables))
}

/// `info`, but h2's own warnings only from `error` up: it warns once per connection that a
/// client resets too many streams, which a flood of such clients turns into thousands of lines
/// a second (its GOAWAY already deals with them).
const DEFAULT_LOG_FILTER: &str = "info,h2=error";

fn main() -> ExitCode {
    let args = Args::parse_checked();
    let logs = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG_FILTER)),
        )
        .with_writer(std::io::stderr)
        // A closed stderr (a log shipper gone) loses the logs, nothing else: reporting the
        // failed write would `eprintln!`, which panics in every call that logs.
        .log_internal_errors(false);
    match args.log_format {
        LogFormat::Text => logs.with_ansi(std::io::stderr().is_terminal()).init(),
        // The current span's fields at the top (`span`) and every enclosing span's (`spans`).
        LogFormat::Json => logs
            .json()
            .with_current_span(true)
            .with_span_list(true)
            .init(),
    }
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
    let log_format = args.log_format;
    let served = runtime.block_on(serve(args));
    // A blocking task still waiting then (a read of a database gone silent) must not keep the
    // process from exiting.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            let text = escape_controls(&format!("{error:#}"));
            match log_format {
                LogFormat::Text => {
                    let _ = writeln!(std::io::stderr(), "oanquan-server: {text}");
                }
                // One JSON object, as every other line of a JSON log.
                LogFormat::Json => tracing::error!(error = %text, "the server stopped"),
            }
            ExitCode::FAILURE
        }
    }
}

/// An error as one line of plain text: it may quote what an operator gave (a database URL
/// whose name decodes to a newline and an escape sequence), which must not forge log lines or
/// drive the terminal. Invisible characters as display names know them (controls, format
/// characters such as bidirectional overrides, line and paragraph separators) are written
/// escaped.
fn escape_controls(text: &str) -> String {
    text.chars()
        .map(|c| {
            if oanquan_game::is_invisible(c) {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_error_is_printed_on_one_line_without_control_characters() {
        let shown =
            super::escape_controls("db \"x\n2026 ERROR forged\u{1b}[31mRED\0\u{202e}\" ok: ă");
        assert_eq!(
            shown,
            "db \"x\\u{a}2026 ERROR forged\\u{1b}[31mRED\\u{0}\\u{202e}\" ok: ă"
        );
        // A line separator starts a new line in some log viewers; a soft hyphen and a word
        // joiner hide.
        assert_eq!(
            super::escape_controls("a\u{2028}b\u{ad}c\u{2060}d"),
            "a\\u{2028}b\\u{ad}c\\u{2060}d"
        );
    }

    #[test]
    fn endgame_tables_load_and_damaged_ones_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let cancel = std::sync::atomic::AtomicBool::new(false);
        let rules = oanquan_rules::Preset::Standard.rules();
        let (tables, _) = Tablebase::generate(rules, 3, 1, &cancel).unwrap();
        let good = dir.path().join("good.egtb");
        let mut bytes = tables.to_bytes();
        std::fs::write(&good, &bytes).unwrap();
        let args =
            Args::try_parse_checked(["oanquan-server", "--endgame-tables", good.to_str().unwrap()])
                .unwrap();
        let loaded = load_endgame_tables(args.endgame_tables.as_deref().unwrap()).unwrap();
        assert_eq!(*loaded, tables);

        let damaged = dir.path().join("damaged.egtb");
        let middle = bytes.len() / 2;
        bytes[middle] ^= 1;
        std::fs::write(&damaged, &bytes).unwrap();
        let error = load_endgame_tables(&damaged).unwrap_err().to_string();
        assert!(
            error.contains("damaged") && error.contains("damaged.egtb"),
            "{error}"
        );
        let error = load_endgame_tables(&dir.path().join("none.egtb"))
            .unwrap_err()
            .to_string();
        assert!(error.contains("cannot read endgame tables"), "{error}");
        // A FIFO is refused, not waited on for a writer that never comes.
        let fifo = dir.path().join("fifo.egtb");
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        let error = load_endgame_tables(&fifo).unwrap_err().to_string();
        assert!(error.contains("not a regular file"), "{error}");
    }

    use std::path::Path;

    use super::*;

    #[test]
    fn postgres_only_flags_given_to_another_store_are_named_once() {
        // Every id names a flag (a renamed one would drop out of the warning unseen).
        let command = Args::command();
        for id in POSTGRES_FLAGS {
            assert!(
                command
                    .get_arguments()
                    .any(|arg| arg.get_id() == id && arg.get_long().is_some()),
                "{id}"
            );
        }
        let ignored = |argv: &[&str]| {
            let args = Args::try_parse_checked(argv.iter().copied()).unwrap();
            args.ignored_postgres_flags(&args.config().storage)
        };
        assert_eq!(ignored(&["oanquan-server", "--in-memory"]), None);
        assert_eq!(
            ignored(&[
                "oanquan-server",
                "--in-memory",
                "--database-batch",
                "8",
                "--database-writers",
                "4"
            ])
            .as_deref(),
            Some(
                "--database-batch, --database-writers apply only to PostgreSQL (a postgres:// \
                 --database); this server's store ignores them"
            )
        );
        let sqlite = ignored(&[
            "oanquan-server",
            "--database",
            "x.db",
            "--database-pool-size",
            "4",
        ]);
        assert_eq!(
            sqlite.as_deref(),
            Some(
                "--database-pool-size applies only to PostgreSQL (a postgres:// --database); \
                 this server's store ignores it"
            )
        );
        assert_eq!(
            ignored(&[
                "oanquan-server",
                "--database",
                "postgres://nobody@127.0.0.1:1/none",
                "--database-batch",
                "8"
            ]),
            None
        );
    }

    #[test]
    fn node_names_are_short_and_plain() {
        for good in [
            "node-a",
            "web-7f9c_2.example.org",
            "10.0.0.1:50051",
            "[::1]:50051",
        ] {
            assert_eq!(node_name_problem(good), None, "{good}");
        }
        assert_eq!(node_name_problem(&"a".repeat(64)), None);
        let too_long = node_name_problem(&"a".repeat(65)).unwrap();
        assert!(
            too_long.contains("65 bytes long; give at most 64"),
            "{too_long}"
        );
        let control = node_name_problem("node\nfake_metric 1").unwrap();
        assert!(
            control.contains("a control character at byte 4"),
            "{control}"
        );
        assert!(!control.contains('\n'));
        assert!(
            node_name_problem("a b")
                .unwrap()
                .contains("a space at byte 1")
        );
        assert!(
            node_name_problem("a\"b")
                .unwrap()
                .contains("'\"' at byte 1")
        );
        assert!(node_name_problem("").unwrap().contains("empty"));
        let error = Args::try_parse_checked(["oanquan-server", "--node-name", "a\u{7}b"])
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("--node-name (OANQUAN_NODE_NAME) has a control character at byte 1"),
            "{error}"
        );
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
        // Every switch takes a value or none, with a space or `=`, as the help says.
        assert_eq!(memory(&["--in-memory", "true"]).ok(), Some(true));
        assert_eq!(memory(&["--in-memory=yes"]).ok(), Some(true));
        assert_eq!(
            memory(&["--in-memory", "off", "--listen", "127.0.0.1:0"]).ok(),
            Some(false)
        );
        let web_off = |args: &[&str]| {
            Args::try_parse_checked(std::iter::once("oanquan-server").chain(args.iter().copied()))
                .map(|args| args.web.no_web)
                .ok()
        };
        assert_eq!(web_off(&[]), Some(false));
        assert_eq!(web_off(&["--no-web"]), Some(true));
        assert_eq!(web_off(&["--no-web", "false"]), Some(false));
        assert_eq!(web_off(&["--no-web=1"]), Some(true));
        let bare = Args::try_parse_checked(["oanquan-server", "--exempt-loopback"])
            .map(|args| args.config().clients.exempt_loopback);
        assert_eq!(bare.ok(), Some(true));
        let loopback = |value: &str| {
            Args::try_parse_checked(["oanquan-server", "--exempt-loopback", value])
                .map(|args| args.config().clients.exempt_loopback)
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
            .map(|args| args.config().transport.max_message_size);
        assert_eq!(size.ok(), Some(4 * 1024 * 1024));
        assert_eq!(
            Args::try_parse_checked(["oanquan-server"])
                .map(|args| args.config().transport.max_message_size)
                .ok(),
            Some(Config::default().transport.max_message_size)
        );
    }

    #[test]
    fn storage_defaults_to_a_database_file() {
        let args = Args::try_parse_from(["oanquan-server"]).unwrap();
        assert!(
            matches!(args.config().storage, Storage::Sqlite(path) if path == Path::new(DEFAULT_DATABASE))
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
    fn a_postgres_url_in_database_selects_postgres_and_a_path_stays_sqlite() {
        for url in [
            "postgres://oanquan:secret@db.internal:5432/games",
            "postgresql://db.internal/games",
        ] {
            let args = Args::try_parse_checked(["oanquan-server", "--database", url]).unwrap();
            let storage = args.config().storage;
            assert!(
                matches!(&storage, Storage::Postgres { url: given, .. } if given == url),
                "{storage:?}"
            );
            assert!(!format!("{storage:?}").contains("secret"), "{storage:?}");
        }
        // A file whose name merely mentions postgres is a file.
        let args =
            Args::try_parse_checked(["oanquan-server", "--database", "postgres.db"]).unwrap();
        assert!(
            matches!(args.config().storage, Storage::Sqlite(path) if path == Path::new("postgres.db"))
        );
        // The pool and timeout flags reach the store's options.
        let args = Args::try_parse_checked([
            "oanquan-server",
            "--database",
            "postgres://h/games",
            "--database-pool-size",
            "4",
            "--database-pool-wait",
            "250ms",
            "--database-connect-timeout",
            "2s",
            "--database-statement-timeout",
            "1m",
            "--database-batch",
            "8",
            "--database-writers",
            "3",
        ])
        .unwrap();
        let Storage::Postgres { options, .. } = args.config().storage else {
            panic!("not postgres");
        };
        assert_eq!((options.max_batch, options.writers), (8, 3));
        assert_eq!(
            (
                options.max_connections,
                options.wait_timeout,
                options.connect_timeout,
                options.statement_timeout
            ),
            (
                4,
                std::time::Duration::from_millis(250),
                std::time::Duration::from_secs(2),
                std::time::Duration::from_secs(60)
            )
        );
        // OANQUAN_DATABASE_URL's flag: a URL only, and not together with another database.
        let url = "postgres://h/games";
        let args = Args::try_parse_checked(["oanquan-server", "--database-url", url]).unwrap();
        assert!(
            matches!(args.config().storage, Storage::Postgres { url: given, .. } if given == url)
        );
        assert!(Args::try_parse_checked(["oanquan-server", "--database-url", "x.db"]).is_err());
        assert!(
            Args::try_parse_checked([
                "oanquan-server",
                "--database-url",
                url,
                "--database",
                "x.db"
            ])
            .is_err()
        );
        assert!(
            Args::try_parse_checked(["oanquan-server", "--database-url", url, "--in-memory"])
                .is_err()
        );
    }

    /// `--help` is read as the documentation of the defaults: every `[default: …]` it shows,
    /// given back as a flag, must make the library's `Config::default()` (and the binary's
    /// database), section by section.
    #[test]
    fn help_shows_the_defaults_of_the_code() {
        // Without the environment, so an OANQUAN_* variable cannot show up as a default.
        let mut command = Args::command().mut_args(|arg| arg.env(None));
        let help = command.render_long_help().to_string();
        let mut argv = vec!["oanquan-server".to_owned()];
        let mut flag = None;
        let mut shown = Vec::new();
        for line in help.lines() {
            if let Some(rest) = line.strip_prefix("      --") {
                flag = rest.split_whitespace().next().map(str::to_owned);
            }
            let default = line
                .trim()
                .strip_prefix("[default: ")
                .and_then(|rest| rest.strip_suffix(']'));
            if let Some(default) = default {
                let flag = flag.clone().expect("a default follows its flag");
                argv.extend([format!("--{flag}"), default.to_owned()]);
                shown.push(flag);
            }
        }
        let mut with_defaults: Vec<String> = command
            .get_arguments()
            .filter(|arg| arg.get_action().takes_values() && !arg.get_default_values().is_empty())
            .filter_map(|arg| arg.get_long().map(str::to_owned))
            .collect();
        with_defaults.sort();
        shown.sort();
        assert_eq!(shown, with_defaults, "--help shows every default");

        let config = Args::try_parse_checked(&argv)
            .unwrap_or_else(|error| panic!("{argv:?}: {error}"))
            .config();
        let code = Config::default();
        assert_eq!(config.transport, code.transport);
        assert_eq!(config.clients, code.clients);
        assert_eq!(config.games, code.games);
        assert_eq!(config.streams, code.streams);
        assert_eq!(config.computer, code.computer);
        assert_eq!(config.memory, code.memory);
        assert!(
            matches!(config.storage, Storage::Sqlite(path) if path == Path::new(DEFAULT_DATABASE))
        );
        assert!(config.tls.is_none());
        // And with no flag at all the binary runs on the same defaults.
        let bare = Args::try_parse_checked(["oanquan-server"])
            .unwrap()
            .config();
        assert_eq!(bare.transport, code.transport);
        assert_eq!(bare.games, code.games);
    }

    /// The README's flag tables (`| `--flag` … | default | why |`) show the defaults
    /// `--help` shows.
    #[test]
    fn readme_tables_show_the_defaults_of_the_code() {
        let command = Args::command().mut_args(|arg| arg.env(None));
        let default_of = |long: &str| {
            command
                .get_arguments()
                .find(|arg| arg.get_long() == Some(long))
                .map(|arg| {
                    let shown = arg.get_action().takes_values() && !arg.is_hide_default_value_set();
                    let values = arg.get_default_values();
                    (shown && !values.is_empty()).then(|| values[0].to_string_lossy().into_owned())
                })
        };
        let mut checked = 0;
        for row in include_str!("../../../README.md").lines() {
            if !row.starts_with("| `--") {
                continue;
            }
            let cells: Vec<String> = row
                .split('|')
                .skip(1)
                .map(|cell| cell.replace(['`', ' '], ""))
                .collect();
            let (Some(flags), Some(defaults)) = (cells.first(), cells.get(1)) else {
                continue;
            };
            // The storage table's second column is the environment variable, not a default.
            if defaults.starts_with("OANQUAN_") {
                continue;
            }
            let flags: Vec<&str> = flags
                .split('/')
                .filter_map(|flag| flag.strip_prefix("--"))
                .collect();
            let parts: Vec<&str> = defaults.split('/').collect();
            for (index, flag) in flags.iter().enumerate() {
                let Some(default) = default_of(flag).unwrap_or_else(|| {
                    panic!("README row {row:?}: oanquan-server has no --{flag}")
                }) else {
                    continue;
                };
                let documented = if parts.len() == flags.len() {
                    parts[index].starts_with(default.as_str())
                } else {
                    parts.iter().any(|part| part.starts_with(default.as_str()))
                };
                assert!(
                    documented,
                    "README says --{flag} defaults to {defaults:?}; --help says {default:?}"
                );
                checked += 1;
            }
        }
        assert!(checked >= 30, "only {checked} README defaults found");
    }

    #[test]
    fn zero_turns_the_optional_limits_off() {
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
        assert_eq!(off.clients.rate_limit(), None);
        assert!(off.games.idle_game_timeout.is_zero());
        assert!(!off.clients.exempt_loopback);
        assert!(Config::default().clients.rate_limit().is_some());
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
