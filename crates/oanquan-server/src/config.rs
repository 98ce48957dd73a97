//! The server's settings, one section per consumer.
//!
//! Each section is a `clap::Args` that `oanquan-server` flattens into its command line, and its
//! [`Default`] is the command line's defaults: every default is written once, in the section's
//! `#[arg(default_value…)]`, and a field has the name of its flag. `--help` shows one heading
//! per section.

use std::time::Duration;

use clap::{Args, Command, FromArgMatches};

use crate::domain::computer::{self, SearchCapacity};
use crate::domain::limits::RateLimit;
use crate::domain::{MemoryLimits, PostgresOptions};

/// The HTTP/2 transport: tonic's server, the accept loop and the shutdown drain.
#[derive(Debug, Clone, Copy, PartialEq, Args)]
#[command(next_help_heading = "Transport")]
pub struct TransportLimits {
    /// Concurrent calls (open watch streams included) per HTTP/2 connection.
    // HTTP/2 `SETTINGS_MAX_CONCURRENT_STREAMS`; tonic leaves it unlimited.
    // 0 would refuse every call; past 65,536 nothing is limited any more.
    #[arg(
        long,
        env = "OANQUAN_MAX_CONCURRENT_STREAMS",
        default_value = "128",
        value_parser = clap::value_parser!(u32).range(1..=65_536)
    )]
    pub max_concurrent_streams: u32,

    /// Requests one connection may have in service at once; more wait their turn.
    // 0 would leave every call waiting; tower's semaphore panics past 2^61.
    #[arg(
        long,
        env = "OANQUAN_CONCURRENCY_LIMIT_PER_CONNECTION",
        default_value = "64",
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=65_536)
    )]
    pub concurrency_limit_per_connection: usize,

    /// Largest message decoded or encoded: a number of bytes, or with a unit (B, KB, KiB, MB,
    /// MiB; KB and MB count 1000s, KiB and MiB 1024s; any case, a space is allowed).
    // Our messages are small (a 300-move history is well under 1 MiB); the bound stops memory
    // blow-ups from hostile input.
    #[arg(allow_hyphen_values = true,
        long,
        env = "OANQUAN_MAX_MESSAGE_SIZE",
        value_name = "SIZE",
        default_value = "4MiB",
        value_parser = parse_message_size
    )]
    pub max_message_size: usize,

    /// Largest request message (at most `--max-message-size`): a request whose length prefix
    /// says more is refused before any of it is read (RESOURCE_EXHAUSTED). Sizes as above, at least
    /// 64KiB.
    // The largest request is a game's whole history (10,000 moves, about 60 KB); responses (a
    // page of games, a long game's moves with their traces) can be far larger. A request's
    // message is held whole until its last byte arrives, so this, not the response bound, is
    // what a client sending many messages all but their last byte can pin, per request in
    // flight.
    #[arg(allow_hyphen_values = true,
        long,
        env = "OANQUAN_MAX_REQUEST_SIZE",
        value_name = "SIZE",
        default_value = "128KiB",
        value_parser = parse_message_size
    )]
    pub max_request_size: usize,

    /// HTTP/2 keepalive PING interval, and the idle time before TCP keepalive probes: at least
    /// 100ms, at most 32767s (about 9h, the kernel's limit for the latter).
    #[arg(allow_hyphen_values = true, long, env = "OANQUAN_KEEPALIVE_INTERVAL", default_value = "30s", value_parser = parse_keepalive)]
    pub keepalive_interval: Duration,

    /// Close a connection whose keepalive PING is not answered within this time.
    #[arg(allow_hyphen_values = true, long, env = "OANQUAN_KEEPALIVE_TIMEOUT", default_value = "10s", value_parser = parse_period)]
    pub keepalive_timeout: Duration,

    /// Deadline of a unary call (a client's shorter grpc-timeout wins).
    #[arg(allow_hyphen_values = true, long, env = "OANQUAN_REQUEST_TIMEOUT", default_value = "30s", value_parser = parse_period)]
    pub request_timeout: Duration,

    /// A new connection that has not finished its TLS handshake (with TLS) and sent its
    /// HTTP/2 preface within this time is closed, so idle or half-open connections cannot
    /// pile up or hold a shutdown.
    #[arg(allow_hyphen_values = true, long, env = "OANQUAN_HANDSHAKE_TIMEOUT", default_value = "5s", value_parser = parse_handshake_timeout)]
    pub handshake_timeout: Duration,

    /// On SIGINT/SIGTERM, how long to let calls finish before exiting anyway.
    #[arg(allow_hyphen_values = true, long, env = "OANQUAN_SHUTDOWN_DRAIN_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    pub shutdown_drain_timeout: Duration,
}

/// What one client address may take, counted at the edge: its request rate and its TCP
/// connections. The other per-client limits belong to their consumers' sections.
#[derive(Debug, Clone, Copy, PartialEq, Args)]
#[command(next_help_heading = "Per-client limits")]
pub struct ClientLimits {
    /// Requests per second one client address may make on average (health checks count apart,
    /// see --health-rate-limit; each request on a reflection stream counts);
    /// more get RESOURCE_EXHAUSTED with a retry delay. 0 turns the limit off.
    #[arg(
        long,
        env = "OANQUAN_RATE_LIMIT",
        value_name = "PER_SECOND",
        default_value = "50",
        value_parser = parse_rate
    )]
    pub rate_limit: f64,

    /// Requests one client address may make at once: the bucket's size, which --rate-limit
    /// refills (so with --rate-limit 5 and a burst of 5, 5 back-to-back calls pass, not 10).
    #[arg(long, env = "OANQUAN_RATE_LIMIT_BURST", default_value = "100", value_parser = parse_burst)]
    pub rate_limit_burst: u32,

    /// Health checks (`grpc.health.v1`) per second one client address may make, in a bucket
    /// of their own (twice this many at once), so other traffic never makes a probe fail;
    /// more get RESOURCE_EXHAUSTED. 0 turns the limit off.
    #[arg(
        long,
        env = "OANQUAN_HEALTH_RATE_LIMIT",
        value_name = "PER_SECOND",
        default_value = "20",
        value_parser = parse_rate
    )]
    pub health_rate_limit: f64,

    /// Accounts one client address may register per hour (a bucket of that many, refilled
    /// over the hour); one more gets RESOURCE_EXHAUSTED with a retry delay. Each account also
    /// takes every look-alike of its name, so without a bound one address could squat names
    /// by the hundred a second. 0 = no limit.
    #[arg(long, env = "OANQUAN_REGISTRATIONS_PER_HOUR", default_value = "10", value_parser = parse_count)]
    pub registrations_per_hour: usize,

    /// TCP connections one client address may have open at once; more are closed as they are
    /// accepted. 0 = no limit.
    #[arg(long, env = "OANQUAN_MAX_CONNECTIONS_PER_CLIENT", default_value = "64", value_parser = parse_count)]
    pub max_connections_per_client: usize,

    /// Exempt loopback clients (127.0.0.0/8, ::1) from the per-client limits (and from
    /// --max-spectators-per-connection), so local tools and benchmarks are not throttled:
    /// `--exempt-loopback false` (or off, no, 0) to count them too.
    #[arg(
        long,
        env = "OANQUAN_EXEMPT_LOOPBACK",
        default_value = "true",
        action = clap::ArgAction::Set,
        num_args = 0..=1,
        default_missing_value = "true",
        value_parser = parse_switch
    )]
    pub exempt_loopback: bool,
}

impl TransportLimits {
    /// The largest request decoded: `--max-request-size`, never above `--max-message-size`.
    #[must_use]
    pub fn max_request(&self) -> usize {
        self.max_request_size.min(self.max_message_size)
    }

    /// The warning for a `--max-request-size` above `--max-message-size`, which then bounds
    /// requests instead (not refused, like the per-client limits that never bind).
    #[must_use]
    pub fn request_bound_warning(&self) -> Option<String> {
        (self.max_request_size > self.max_message_size).then(|| {
            format!(
                "--max-request-size {} is above --max-message-size {}: requests are bounded at \
                 {} bytes",
                self.max_request_size, self.max_message_size, self.max_message_size
            )
        })
    }
}

impl ClientLimits {
    /// The request rate limit, `None` when `--rate-limit` is 0 (or the burst is, which the flag
    /// refuses).
    #[must_use]
    pub fn rate_limit(&self) -> Option<RateLimit> {
        (self.rate_limit > 0.0 && self.rate_limit_burst > 0).then_some(RateLimit {
            per_second: self.rate_limit,
            burst: self.rate_limit_burst,
        })
    }

    /// The registrations' own limit, `None` when `--registrations-per-hour` is 0: that many at
    /// once, refilled over an hour.
    #[must_use]
    pub fn registration_limit(&self) -> Option<RateLimit> {
        let per_hour = u32::try_from(self.registrations_per_hour).unwrap_or(u32::MAX);
        (per_hour > 0).then(|| RateLimit {
            per_second: f64::from(per_hour) / 3600.0,
            burst: per_hour,
        })
    }

    /// The health checks' own limit, `None` when `--health-rate-limit` is 0: a burst of two
    /// seconds' worth (at least 1).
    #[must_use]
    pub fn health_rate_limit(&self) -> Option<RateLimit> {
        (self.health_rate_limit > 0.0).then(|| RateLimit {
            per_second: self.health_rate_limit,
            // Saturating: a rate beyond u32 is no limit in practice.
            burst: ((self.health_rate_limit * 2.0).ceil() as u32).max(1),
        })
    }
}

/// The game manager's own limits, and its idle reaper.
#[derive(Debug, Clone, Copy, PartialEq, Args)]
#[command(next_help_heading = "Games")]
pub struct GameLimits {
    /// Waiting or active games one client address may have created at once; 0 = no limit.
    #[arg(long, env = "OANQUAN_MAX_OPEN_GAMES_PER_CLIENT", default_value = "20", value_parser = parse_count)]
    pub max_open_games_per_client: usize,

    /// A game nobody joins for this long (counted from the server's start at the earliest),
    /// or an untimed game nobody moves in for --abandon-after plus this long, is aborted (watchers get GameOver); timed games end by
    /// their clocks instead. 0 = never.
    #[arg(allow_hyphen_values = true, long, env = "OANQUAN_IDLE_GAME_TIMEOUT", default_value = "1h", value_parser = parse_duration)]
    pub idle_game_timeout: Duration,

    /// Time for each player's first move of a real-time game; a player who misses it aborts the
    /// game (no result). Fixed for a game when it is created.
    #[arg(allow_hyphen_values = true, long, env = "OANQUAN_FIRST_MOVE_TIME", default_value = "30s", value_parser = parse_first_move_time)]
    pub first_move_time: Duration,

    /// In an untimed game, how long the player to move may stay away before the opponent can
    /// claim the win (ClaimVictory).
    #[arg(allow_hyphen_values = true, long, env = "OANQUAN_ABANDON_AFTER", default_value = "24h", value_parser = parse_positive_duration)]
    pub abandon_after: Duration,

    /// How long after a game ends its players can offer a rematch; 0 = no rematches; at most
    /// 30 days (720h).
    #[arg(allow_hyphen_values = true, long, env = "OANQUAN_REMATCH_WINDOW", default_value = "2m", value_parser = parse_rematch_window)]
    pub rematch_window: Duration,

    /// Rated games between the same two accounts at one speed that change their ratings, among
    /// games created within 24 hours of each other; later ones count in both records only, so
    /// that one person's two accounts cannot farm points. 0 = no limit.
    #[arg(long, env = "OANQUAN_RATED_GAMES_PER_PAIR", default_value = "5", value_parser = parse_count)]
    pub rated_games_per_pair: usize,

    /// Open seeks in all (of every node, on PostgreSQL); more get RESOURCE_EXHAUSTED.
    #[arg(long, env = "OANQUAN_MAX_SEEKS", default_value = "10000", value_parser = parse_at_least_one)]
    pub max_seeks: usize,

    /// Open seeks of one client address on this node; 0 = no limit.
    #[arg(long, env = "OANQUAN_MAX_SEEKS_PER_CLIENT", default_value = "4", value_parser = parse_count)]
    pub max_seeks_per_client: usize,
}

/// `WatchGame` streams: how many a game takes (counted by the manager) and how each behaves;
/// and how many health `Watch` streams the server holds open.
#[derive(Debug, Clone, Copy, PartialEq, Args)]
#[command(next_help_heading = "Watch streams")]
pub struct StreamLimits {
    /// Concurrent spectators of one game; more get RESOURCE_EXHAUSTED. A seated player's own
    /// streams (WatchGame with its token, up to 4 per seat) come on top and are never refused
    /// because spectators took the places.
    /// 0 = no spectators: only the players watch, each with their seat's token.
    #[arg(long, env = "OANQUAN_MAX_SPECTATORS_PER_GAME", default_value = "100", value_parser = parse_count)]
    pub max_spectators_per_game: usize,

    /// Spectator streams of one game on one connection; more get RESOURCE_EXHAUSTED. 0 = no
    /// limit.
    #[arg(
        long,
        env = "OANQUAN_MAX_SPECTATORS_PER_CONNECTION",
        default_value = "4",
        value_parser = parse_count
    )]
    pub max_spectators_per_connection: usize,

    /// Spectator streams of one game from one client address; more get RESOURCE_EXHAUSTED.
    /// 0 = no limit.
    #[arg(long, env = "OANQUAN_MAX_SPECTATORS_PER_CLIENT", default_value = "8", value_parser = parse_count)]
    pub max_spectators_per_client: usize,

    /// Open grpc.health.v1 Health.Watch streams on this node, from every client together; one
    /// more gets RESOURCE_EXHAUSTED until one closes. Health.Check is never refused by it.
    // Each watch keeps its HTTP/2 stream and a status receiver for as long as its client holds
    // it open; the health rate limit bounds how fast they come, not how many stay (and loopback
    // is exempt from it), so without this only connections × streams per connection bound them.
    #[arg(
        long,
        env = "OANQUAN_MAX_HEALTH_WATCHES",
        default_value = "1024",
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=MAX_HEALTH_WATCHES)
    )]
    pub max_health_watches: usize,

    /// Health.Watch streams one client address may hold open at once (loopback not counted
    /// unless --exempt-loopback false); one more gets RESOURCE_EXHAUSTED until one of them
    /// closes. 0 = no limit.
    // Without it one address could take every place under --max-health-watches, and nobody
    // else could watch until it let go.
    #[arg(
        long,
        env = "OANQUAN_MAX_HEALTH_WATCHES_PER_CLIENT",
        default_value = "16",
        value_parser = parse_count
    )]
    pub max_health_watches_per_client: usize,

    /// Idle time after which a stream sends a Heartbeat event.
    #[arg(allow_hyphen_values = true, long, env = "OANQUAN_HEARTBEAT_INTERVAL", default_value = "15s", value_parser = parse_period)]
    pub heartbeat_interval: Duration,

    /// A watch stream whose client reads nothing for this long is dropped with
    /// RESOURCE_EXHAUSTED (it may resume with after_sequence).
    #[arg(allow_hyphen_values = true, long, env = "OANQUAN_STREAM_STALL_TIMEOUT", default_value = "30s", value_parser = parse_period)]
    pub stream_stall_timeout: Duration,

    /// Events buffered per watcher in the hub before it lags (and catches up from the log).
    /// Not a flag: only the library's tests need another value.
    #[arg(skip = 256_usize)]
    pub broadcast_capacity: usize,
}

/// The search pool: the computer opponent's moves and `RulesService.Analyze`.
#[derive(Debug, Clone, Copy, PartialEq, Args)]
#[command(next_help_heading = "Computer player and analysis")]
pub struct ComputerLimits {
    /// Thinking time of the computer opponent per move (games created with a computer level),
    /// at most 60s. Its weaker levels stop earlier, at their depth.
    #[arg(allow_hyphen_values = true, long, env = "OANQUAN_COMPUTER_MOVE_TIME", default_value = "300ms", value_parser = parse_computer_move_time)]
    pub computer_move_time: Duration,

    /// Computer moves searching at once; more wait for a free slot. 0 = one per CPU core.
    /// RulesService.Analyze calls have slots of their own (--max-analyses), so a computer
    /// opponent never waits behind them.
    // Searches run on tokio's blocking pool, never on the async workers that answer calls.
    #[arg(
        long,
        env = "OANQUAN_MAX_SEARCHES",
        default_value = "0",
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=MAX_SLOTS)
    )]
    pub max_searches: usize,

    /// RulesService.Analyze calls searching at once (each up to 5 s), apart from computer
    /// moves. 0 = one per CPU core but one, at least 1.
    #[arg(
        long,
        env = "OANQUAN_MAX_ANALYSES",
        default_value = "0",
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=MAX_SLOTS)
    )]
    pub max_analyses: usize,

    /// Analyze calls one client address may have running or waiting; one more gets
    /// RESOURCE_EXHAUSTED with a retry delay. 0 = no limit. Default: 2, or 1 where there are
    /// at most 2 analysis slots, so that one address cannot keep every slot busy and queue its
    /// next call ahead of everyone else's.
    #[arg(long, env = "OANQUAN_MAX_ANALYSES_PER_CLIENT", value_parser = parse_count)]
    pub max_analyses_per_client: Option<usize>,

    /// How long an Analyze call waits for a free slot when all --max-analyses are taken; then
    /// it gets RESOURCE_EXHAUSTED with a retry delay. 0 = refuse at once.
    #[arg(allow_hyphen_values = true, long, env = "OANQUAN_ANALYSIS_QUEUE_TIMEOUT", default_value = "500ms", value_parser = parse_duration)]
    pub analysis_queue_timeout: Duration,
}

/// Per-client limits set above the server-wide limit over them, one warning each: such a
/// limit never binds, so one address can take every place (a typo more often than a choice,
/// and not refused: the server-wide limit still holds).
#[must_use]
pub fn per_client_limits_that_never_bind(
    games: &GameLimits,
    streams: &StreamLimits,
) -> Vec<String> {
    let pairs = [
        (
            "--max-seeks-per-client",
            games.max_seeks_per_client,
            "--max-seeks",
            games.max_seeks,
        ),
        (
            "--max-health-watches-per-client",
            streams.max_health_watches_per_client,
            "--max-health-watches",
            streams.max_health_watches,
        ),
    ];
    pairs
        .into_iter()
        .filter(|&(_, per_client, _, total)| per_client > total)
        .map(|(name, per_client, total_name, total)| {
            format!(
                "{name} {per_client} is above {total_name} {total}: it never binds, and one \
                 client address can take all {total} places"
            )
        })
        .collect()
}

impl ComputerLimits {
    /// The warning for a `--max-analyses-per-client` set at or above the analysis slots: one
    /// client address can then keep every slot busy and queue its next call ahead of everyone
    /// else's (not refused, like the other per-client limits that never bind). The default,
    /// and 0 (no limit, said so), warn of nothing.
    #[must_use]
    pub fn analyses_warning(&self) -> Option<String> {
        let per_client = self.max_analyses_per_client.filter(|&n| n > 0)?;
        let slots = self.search_capacity(false).analyses;
        (per_client >= slots && slots > 1 || per_client > slots).then(|| {
            format!(
                "--max-analyses-per-client {per_client} is not below the {slots} analysis \
                 slot(s) (--max-analyses): one client address can keep every slot busy and \
                 queue its next call ahead of everyone else's"
            )
        })
    }

    /// The search pool's capacity, with the 0s (one per core) resolved on this machine.
    #[must_use]
    pub fn search_capacity(&self, exempt_loopback: bool) -> SearchCapacity {
        let analyses = match self.max_analyses {
            0 => computer::default_max_analyses(),
            n => n,
        };
        SearchCapacity {
            computer_moves: match self.max_searches {
                0 => computer::default_max_searches(),
                n => n,
            },
            analyses,
            analyses_per_client: self
                .max_analyses_per_client
                .unwrap_or_else(|| computer::default_analyses_per_client(analyses)),
            analysis_wait: self.analysis_queue_timeout,
            exempt_loopback,
        }
    }
}

/// The in-memory store's capacity (`--in-memory`; the SQLite store has no limit of its own).
#[derive(Debug, Clone, Copy, PartialEq, Args)]
#[command(next_help_heading = "Storage")]
pub struct MemoryStoreLimits {
    /// Games kept at most with --in-memory (a database has no limit of its own).
    #[arg(long, env = "OANQUAN_MAX_GAMES", default_value = "10000", value_parser = parse_at_least_one)]
    pub max_games: usize,

    /// Events kept per game (older ones force a snapshot on resume). Not a flag.
    #[arg(skip = MemoryLimits::default().game_event_retention)]
    pub game_event_retention: usize,

    /// Lobby events kept. Not a flag.
    #[arg(skip = MemoryLimits::default().lobby_event_retention)]
    pub lobby_event_retention: usize,
}

impl MemoryStoreLimits {
    /// The memory store's limits; a retention of 0 is taken as 1.
    #[must_use]
    pub fn memory_limits(&self) -> MemoryLimits {
        MemoryLimits {
            max_games: self.max_games,
            game_event_retention: self.game_event_retention.max(1),
            lobby_event_retention: self.lobby_event_retention.max(1),
        }
    }
}

/// The PostgreSQL store's connection pool, timeouts and group commit (with a `postgres://`
/// database; the other stores ignore them, and the server warns at start that they do).
#[derive(Debug, Clone, Copy, PartialEq, Args)]
#[command(next_help_heading = "Storage")]
pub struct DatabaseLimits {
    /// PostgreSQL connections of this node at most (1 to 1000). Each call holds one for its
    /// transaction; mind the database's max_connections across all nodes.
    #[arg(long, env = "OANQUAN_DATABASE_POOL_SIZE", default_value = "16", value_parser = parse_pool_size)]
    pub database_pool_size: usize,

    /// How long opening a PostgreSQL connection may take (1ms to 1h).
    #[arg(allow_hyphen_values = true, long, env = "OANQUAN_DATABASE_CONNECT_TIMEOUT", default_value = "5s", value_parser = parse_database_timeout)]
    pub database_connect_timeout: Duration,

    /// How long a call waits for a free pooled connection before it fails with UNAVAILABLE
    /// (1ms to 1h).
    #[arg(allow_hyphen_values = true, long, env = "OANQUAN_DATABASE_POOL_WAIT", default_value = "5s", value_parser = parse_database_timeout)]
    pub database_pool_wait: Duration,

    /// The longest one SQL statement may run, row-lock waits included (1ms to 1h); past it the
    /// call fails with UNAVAILABLE.
    #[arg(allow_hyphen_values = true, long, env = "OANQUAN_DATABASE_STATEMENT_TIMEOUT", default_value = "10s", value_parser = parse_database_timeout)]
    pub database_statement_timeout: Duration,

    /// PostgreSQL game commits written in one transaction at most (group commit; 1 to 1000, 1
    /// writes each in a transaction of its own).
    #[arg(long, env = "OANQUAN_DATABASE_BATCH", default_value = "64", value_parser = parse_batch)]
    pub database_batch: usize,

    /// PostgreSQL writer tasks of the group commit (1 to 64); each holds one pooled
    /// connection while it writes a batch.
    #[arg(long, env = "OANQUAN_DATABASE_WRITERS", default_value = "2", value_parser = parse_writers)]
    pub database_writers: usize,
}

impl DatabaseLimits {
    /// The PostgreSQL store's options from these flags.
    #[must_use]
    pub fn postgres_options(&self) -> PostgresOptions {
        PostgresOptions {
            max_connections: self.database_pool_size,
            wait_timeout: self.database_pool_wait,
            connect_timeout: self.database_connect_timeout,
            statement_timeout: self.database_statement_timeout,
            max_batch: self.database_batch,
            writers: self.database_writers,
            ..PostgresOptions::default()
        }
    }
}

/// Each section's `Default` is what its flags give when none is set, the environment left out
/// (a library's defaults must not change with `OANQUAN_*` variables).
macro_rules! default_from_flags {
    ($($section:ty),*) => {$(
        impl Default for $section {
            fn default() -> Self {
                flag_defaults()
            }
        }
    )*};
}

default_from_flags!(
    TransportLimits,
    ClientLimits,
    GameLimits,
    StreamLimits,
    ComputerLimits,
    MemoryStoreLimits,
    DatabaseLimits
);

// The defaults are constants, and `tests::help_shows_the_defaults_of_the_code` parses every one,
// so the `expect`s cannot fire in a build whose tests pass.
fn flag_defaults<T: Args + FromArgMatches>() -> T {
    let command = T::augment_args(Command::new("defaults").no_binary_name(true))
        .mut_args(|arg| arg.env(None));
    let matches = command
        .try_get_matches_from(std::iter::empty::<&str>())
        .expect("the flags' defaults parse");
    T::from_arg_matches(&matches).expect("the flags' defaults make a section")
}

/// `500ms`, `15s`, `2m`, `1h`, or a bare number of seconds; at most a year.
///
/// # Errors
///
/// A message for `--help` readers when `text` is not such a duration, is negative or is
/// longer than a year.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    at_most_a_year(text, any_duration(text)?)
}

/// [`parse_duration`] without its maximum, for options with a smaller one of their own.
fn any_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if negative_number(text) {
        return Err(format!("{text:?} is negative; a duration is 0 or more"));
    }
    let split = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration like 500ms, 15s or 2m"))?;
    // `5 s` and `5S` as sizes take `4 MiB` and `4mib`.
    let seconds = match unit.trim_start().to_ascii_lowercase().as_str() {
        "ms" => value / 1000.0,
        "" | "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        _ => return Err(format!("unknown unit {unit:?}; use ms, s, m or h")),
    };
    Duration::try_from_secs_f64(seconds)
        .map_err(|_| format!("{text:?} is longer than any duration this server can keep"))
}

/// Whether `text` is a negative number (a size or a duration, unit or not). Only a number is:
/// `-s`, a flag's name taken as the value, is not a duration, let alone a negative one.
fn negative_number(text: &str) -> bool {
    text.strip_prefix('-')
        .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit() || c == '.'))
}

/// No option wants more than a year: a larger value is a slip (a unit missed or wrong).
fn at_most_a_year(text: &str, duration: Duration) -> Result<Duration, String> {
    if duration > MAX_DURATION {
        return Err(format!(
            "{:?} is longer than a year (8760h), the most any option takes",
            text.trim()
        ));
    }
    Ok(duration)
}

/// The longest duration any option takes.
const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

/// The largest `--max-health-watches`: a million open streams is past what one node serves, and
/// the count must stay far below tokio's semaphore limit (2^61 permits).
const MAX_HEALTH_WATCHES: u64 = 1_000_000;

/// Most search slots of either kind: each is a thread searching, and tokio's semaphore panics
/// past 2^61 permits.
const MAX_SLOTS: u64 = 4096;

/// The smallest `--max-message-size`: a game with its moves or a page of games must fit.
const MIN_MESSAGE_SIZE: usize = 64 * 1024;

/// `--max-message-size`: [`parse_byte_size`], at least [`MIN_MESSAGE_SIZE`].
///
/// # Errors
///
/// As [`parse_byte_size`], and below the minimum.
pub fn parse_message_size(text: &str) -> Result<usize, String> {
    // 0 is below the minimum like any small size, and gets the minimum's message.
    let size = byte_count(text)?;
    if size < MIN_MESSAGE_SIZE {
        return Err(format!(
            "{size} bytes would refuse ordinary calls (a game with its moves); give at least 64KiB"
        ));
    }
    if size > MAX_MESSAGE_SIZE {
        // Each call may buffer a message this large before it is refused.
        return Err(format!(
            "{size} bytes is over the most a message may be here, 1024MiB"
        ));
    }
    Ok(size)
}

/// The largest `--max-message-size`: gRPC frames a message in at most 4 GiB, protobuf
/// decoders stop at 2 GiB, and every call may buffer this much before it is refused.
const MAX_MESSAGE_SIZE: usize = 1 << 30;

/// The keepalive times, `--request-timeout` and the streams' heartbeat and stall timeout: at
/// least 100 ms. None of them is turned off by 0: a heartbeat of 0 sent one every few
/// milliseconds on every stream, a keepalive of 0 is refused by the kernel, a call deadline or
/// stall timeout of 0 fails what merely has to wait.
///
/// # Errors
///
/// As [`parse_duration`], and below 100 ms.
pub fn parse_period(text: &str) -> Result<Duration, String> {
    at_most_a_year(text, period(text)?)
}

/// [`parse_period`] without its maximum, for `--keepalive-interval`'s smaller one.
fn period(text: &str) -> Result<Duration, String> {
    let duration = any_duration(text)?;
    if duration < Duration::from_millis(100) {
        return Err(format!(
            "{text:?} is too short; give at least 100ms (0 does not turn it off)"
        ));
    }
    Ok(duration)
}

/// `--handshake-timeout`: at least 100 ms, or a client on a slow link could never connect.
///
/// # Errors
///
/// As [`parse_duration`], and below 100 ms.
pub fn parse_handshake_timeout(text: &str) -> Result<Duration, String> {
    let duration = parse_duration(text)?;
    if duration < Duration::from_millis(100) {
        return Err(format!(
            "{text:?} is too short for a client to connect; give at least 100ms"
        ));
    }
    Ok(duration)
}

/// `--first-move-time`: 1 ms to 30 days (a correspondence move's longest): a deadline further
/// away does not fit a protobuf timestamp or a stored game.
///
/// # Errors
///
/// As [`parse_positive_duration`], and over 30 days.
pub fn parse_first_move_time(text: &str) -> Result<Duration, String> {
    let duration = positive_duration(text)?;
    if duration > Duration::from_secs(30 * 86_400) {
        return Err(format!("{text:?} is too long; give at most 30 days (720h)"));
    }
    Ok(duration)
}

/// `--keepalive-interval`: as [`parse_period`], and at most 32767 s, Linux's largest
/// `TCP_KEEPIDLE`: above it every accepted connection failed to set TCP keepalive and logged a
/// warning (an outside probe gave 10h), so any client could write to the log by connecting.
///
/// # Errors
///
/// As [`parse_period`], and over 32767 s.
pub fn parse_keepalive(text: &str) -> Result<Duration, String> {
    let duration = period(text)?;
    if duration > Duration::from_secs(32_767) {
        return Err(format!(
            "{text:?} is too long; give at most 32767s (about 9h), the longest TCP keepalive \
             idle time the kernel takes"
        ));
    }
    Ok(duration)
}

/// `--rematch-window`: 0 (no rematches) to 30 days. Its deadline is stored with the finished
/// game: an outside probe's 2,500,000h put it past what a stored time can hold (the year
/// 2262), and every game's end then failed with INTERNAL.
///
/// # Errors
///
/// As [`parse_duration`], and over 30 days.
pub fn parse_rematch_window(text: &str) -> Result<Duration, String> {
    let duration = any_duration(text)?;
    if duration > Duration::from_secs(30 * 86_400) {
        return Err(format!("{text:?} is too long; give at most 30 days (720h)"));
    }
    Ok(duration)
}

/// The longest `--computer-move-time`: each move holds a search slot that long, and with a few
/// slots (one per core) a longer time would let a few computer games keep every other one
/// waiting (an outside probe gave 100h and saw no move).
pub const MAX_COMPUTER_MOVE_TIME: Duration = Duration::from_secs(60);

/// `--computer-move-time`: 0 (as fast as each level goes) to [`MAX_COMPUTER_MOVE_TIME`].
///
/// # Errors
///
/// As [`parse_duration`], and over the maximum.
pub fn parse_computer_move_time(text: &str) -> Result<Duration, String> {
    let duration = any_duration(text)?;
    if duration > MAX_COMPUTER_MOVE_TIME {
        return Err(format!(
            "{text:?} is too long; give at most {}s: each computer move holds a search slot \
             that long",
            MAX_COMPUTER_MOVE_TIME.as_secs()
        ));
    }
    Ok(duration)
}

/// `--rate-limit`: requests per second, a finite number from 0 (off) up.
///
/// # Errors
///
/// For what is not such a number: negative, NaN, infinite; and for a rate so small (below
/// [`MIN_RATE`]) that a refusal would ask to wait hours and print dozens of digits.
pub fn parse_rate(text: &str) -> Result<f64, String> {
    let rate: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number of requests per second like 50"))?;
    if !rate.is_finite() || rate < 0.0 {
        return Err(format!(
            "{text:?} is not a rate: give a number of requests per second, 0 for no limit"
        ));
    }
    if rate > 0.0 && rate < MIN_RATE {
        return Err(format!(
            "{text:?} is too small a rate: give at least {MIN_RATE} per second, or 0 for no limit"
        ));
    }
    Ok(rate)
}

/// The smallest request rate a flag takes (one request every 1,000 s), besides 0 (no limit).
pub const MIN_RATE: f64 = 0.001;

/// A duration that must not be zero (or round to zero).
///
/// # Errors
///
/// As [`parse_duration`], and for zero.
pub fn parse_positive_duration(text: &str) -> Result<Duration, String> {
    at_most_a_year(text, positive_duration(text)?)
}

/// [`parse_positive_duration`] without its maximum, for options with a smaller one.
fn positive_duration(text: &str) -> Result<Duration, String> {
    let duration = any_duration(text)?;
    if duration < Duration::from_millis(1) {
        return Err(format!("{text:?} is too short; give at least 1ms"));
    }
    Ok(duration)
}

/// A count where 0 has a meaning of its own (no limit, or for spectators none): a whole number.
///
/// # Errors
///
/// A message for what is not a whole number (a negative one, say).
pub fn parse_count(text: &str) -> Result<usize, String> {
    text.trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a whole number (0 or more)"))
}

/// A limit that 0 would turn into a refusal of everything it counts, for ever (no seek, no game,
/// no spectator, no request past the first): at least 1. The off switch, where there is one,
/// is another flag's (`--rate-limit 0`).
///
/// # Errors
///
/// A message for what is not a whole number, or 0.
pub fn parse_at_least_one(text: &str) -> Result<usize, String> {
    let count: usize = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a whole number of at least 1"))?;
    if count == 0 {
        return Err("0 would refuse every request it counts, for ever; give at least 1".to_owned());
    }
    Ok(count)
}

/// `--rate-limit-burst`: as [`parse_at_least_one`], within `u32`; `--rate-limit 0` turns the
/// limit off.
///
/// # Errors
///
/// A message for what is not a whole number, 0, or over `u32::MAX`.
pub fn parse_burst(text: &str) -> Result<u32, String> {
    let burst = parse_at_least_one(text)
        .map_err(|why| format!("{why} (to turn the rate limit off, give --rate-limit 0)"))?;
    u32::try_from(burst).map_err(|_| format!("{burst} is more than {} requests", u32::MAX))
}

/// A PostgreSQL pool size: at least one connection, and no more than a database would take
/// (PostgreSQL's own default is 100 connections in all).
///
/// # Errors
///
/// A message for a number that is not one, 0, or over 1000.
pub fn parse_pool_size(text: &str) -> Result<usize, String> {
    let size: usize = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number of connections like 16"))?;
    match size {
        0 => Err("the pool needs at least 1 connection".to_owned()),
        1..=1000 => Ok(size),
        _ => Err(format!(
            "{size} connections is more than a database takes; give at most 1000"
        )),
    }
}

/// `--database-batch`: commits per transaction, 1 to 1000.
///
/// # Errors
///
/// The reason, for a value that is not a number in range.
pub fn parse_batch(text: &str) -> Result<usize, String> {
    let size: usize = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number of commits like 64"))?;
    match size {
        0 => Err("a batch holds at least 1 commit".to_owned()),
        1..=1000 => Ok(size),
        _ => Err(format!(
            "{size} commits in one transaction; give at most 1000"
        )),
    }
}

/// `--database-writers`: writer tasks, 1 to 64.
///
/// # Errors
///
/// The reason, for a value that is not a number in range.
pub fn parse_writers(text: &str) -> Result<usize, String> {
    let count: usize = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number of writers like 2"))?;
    match count {
        0 => Err("the group commit needs at least 1 writer".to_owned()),
        1..=64 => Ok(count),
        _ => Err(format!("{count} writers; give at most 64")),
    }
}

/// A database timeout: at least 1ms (0 would fail every call, not turn the limit off) and at
/// most an hour (longer is a typo, and PostgreSQL's own limits are in milliseconds of an
/// `int`).
///
/// # Errors
///
/// As [`parse_duration`], and for durations out of that range.
pub fn parse_database_timeout(text: &str) -> Result<Duration, String> {
    let duration = positive_duration(text)?;
    if duration > Duration::from_secs(3600) {
        return Err(format!("{text:?} is too long; give at most 1h"));
    }
    Ok(duration)
}

/// A switch's value, on the command line or from the environment (`OANQUAN_IN_MEMORY=1`).
///
/// # Errors
///
/// A message naming the accepted spellings.
pub fn parse_switch(text: &str) -> Result<bool, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err(format!(
            "{text:?} is neither on nor off; use true/false, 1/0, yes/no or on/off"
        )),
    }
}

/// `4MiB`, `4 MiB`, `512kb`, or a bare number of bytes; at least 1 byte.
///
/// # Errors
///
/// A message for `--help` readers when `text` is not such a size, is 0 or overflows.
pub fn parse_byte_size(text: &str) -> Result<usize, String> {
    let bytes = byte_count(text)?;
    if bytes == 0 {
        return Err("the size must be at least 1 byte".to_owned());
    }
    Ok(bytes)
}

/// [`parse_byte_size`] with 0 allowed.
fn byte_count(text: &str) -> Result<usize, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let unit = unit.trim_start();
    let not_a_size = || format!("{text:?} is not a size like 4MiB, 512 KiB or 65536");
    if negative_number(text) {
        return Err(format!("{text:?} is negative; a size cannot be"));
    }
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
    Ok(bytes)
}

#[cfg(test)]
mod tests {
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
        assert_eq!(
            parse_duration("8760h"),
            Ok(Duration::from_secs(365 * 24 * 3600))
        );
        for text in ["8761h", "1000000h", "9999999999"] {
            let error = parse_duration(text).unwrap_err();
            assert!(error.contains("longer than a year"), "{text}: {error}");
        }
        for text in ["-5s", "-0.5", "-1h", "-.5s"] {
            let error = parse_duration(text).unwrap_err();
            assert!(error.contains("is negative"), "{text}: {error}");
        }
        // A flag's name taken as the value is not a number, let alone a negative one.
        for text in ["-s", "--request-timeout", "-"] {
            let error = parse_duration(text).unwrap_err();
            assert!(error.contains("is not a duration"), "{text}: {error}");
        }
    }

    #[test]
    fn durations_take_a_space_and_capital_units_as_sizes_do() {
        assert_eq!(parse_duration("5 s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("5S"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration(" 250 MS "), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2 M"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("5 s 2").is_err());
        assert!(parse_duration("5 d").is_err());
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
        refused("-4MiB", "is negative; a size cannot be");
        refused("4.5MiB", "not a size");
        refused("4 MiB 2", "not a size");
        refused("four", "not a size");
    }

    #[test]
    fn sections_default_to_their_flags_defaults() {
        let transport = TransportLimits::default();
        assert_eq!(transport.max_message_size, 4 * 1024 * 1024);
        assert_eq!(transport.max_request(), 128 * 1024);
        let small = TransportLimits {
            max_message_size: 64 * 1024,
            ..transport
        };
        assert_eq!(small.max_request(), 64 * 1024);
        assert_eq!(transport.request_bound_warning(), None);
        assert!(
            small
                .request_bound_warning()
                .is_some_and(|w| w.contains("bounded at 65536 bytes")),
        );
        assert_eq!(transport.shutdown_drain_timeout, Duration::from_secs(10));
        assert_eq!(
            ClientLimits::default().rate_limit(),
            Some(RateLimit {
                per_second: 50.0,
                burst: 100
            })
        );
        assert_eq!(
            ClientLimits::default().health_rate_limit(),
            Some(RateLimit {
                per_second: 20.0,
                burst: 40
            })
        );
        let tiny = ClientLimits {
            health_rate_limit: 0.1,
            ..ClientLimits::default()
        };
        assert_eq!(tiny.health_rate_limit().map(|l| l.burst), Some(1));
        let huge = ClientLimits {
            health_rate_limit: f64::MAX,
            ..ClientLimits::default()
        };
        assert_eq!(huge.health_rate_limit().map(|l| l.burst), Some(u32::MAX));
        let off = ClientLimits {
            health_rate_limit: 0.0,
            ..ClientLimits::default()
        };
        assert_eq!(off.health_rate_limit(), None);
        assert!(ClientLimits::default().exempt_loopback);
        assert_eq!(
            GameLimits::default().idle_game_timeout,
            Duration::from_secs(3600)
        );
        let streams = StreamLimits::default();
        assert_eq!(streams.max_spectators_per_game, 100);
        assert_eq!(streams.broadcast_capacity, 256);
        assert_eq!(streams.max_health_watches, 1024);
        assert_eq!(streams.max_health_watches_per_client, 16);
        assert!(per_client_limits_that_never_bind(&GameLimits::default(), &streams).is_empty());
        let analyses = |slots, per_client| ComputerLimits {
            max_analyses: slots,
            max_analyses_per_client: per_client,
            ..ComputerLimits::default()
        };
        assert_eq!(ComputerLimits::default().analyses_warning(), None);
        assert_eq!(analyses(1, Some(1)).analyses_warning(), None);
        assert_eq!(analyses(4, Some(2)).analyses_warning(), None);
        assert_eq!(analyses(4, Some(0)).analyses_warning(), None);
        assert!(
            analyses(1, Some(5))
                .analyses_warning()
                .is_some_and(|w| w.contains("--max-analyses-per-client 5"))
        );
        assert!(analyses(2, Some(2)).analyses_warning().is_some());
        let wide = StreamLimits {
            max_health_watches: 8,
            max_health_watches_per_client: 9,
            ..streams
        };
        let zero = GameLimits {
            max_seeks_per_client: 0,
            ..GameLimits::default()
        };
        assert_eq!(
            per_client_limits_that_never_bind(&zero, &wide),
            [
                "--max-health-watches-per-client 9 is above --max-health-watches 8: it never binds, \
              and one client address can take all 8 places"
            ]
        );
        let equal = StreamLimits {
            max_health_watches_per_client: 8,
            ..wide
        };
        assert!(per_client_limits_that_never_bind(&GameLimits::default(), &equal).is_empty());
        assert_eq!(
            ComputerLimits::default().computer_move_time,
            Duration::from_millis(300)
        );
        assert_eq!(
            DatabaseLimits::default().postgres_options(),
            PostgresOptions::default()
        );
        assert_eq!(parse_computer_move_time("0"), Ok(Duration::ZERO));
        assert_eq!(parse_computer_move_time("60s"), Ok(MAX_COMPUTER_MOVE_TIME));
        for long in ["61s", "100h"] {
            assert!(
                parse_computer_move_time(long)
                    .unwrap_err()
                    .contains("at most 60s"),
                "{long}"
            );
        }
        assert!(parse_pool_size("0").is_err());
        assert!(parse_pool_size("1001").is_err());
        assert_eq!(parse_batch("1"), Ok(1));
        assert!(parse_batch("0").unwrap_err().contains("at least 1 commit"));
        assert!(parse_batch("1001").is_err());
        assert!(parse_batch("many").is_err());
        assert_eq!(parse_writers("64"), Ok(64));
        assert!(
            parse_writers("0")
                .unwrap_err()
                .contains("at least 1 writer")
        );
        assert!(parse_writers("65").is_err());
        assert!(parse_database_timeout("0").is_err());
        assert!(parse_database_timeout("2h").is_err());
        let memory = MemoryStoreLimits::default();
        assert_eq!(memory.max_games, 10_000);
        assert_eq!(
            memory.game_event_retention,
            MemoryLimits::default().game_event_retention
        );
    }
}
