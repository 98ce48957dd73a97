//! Wiring: services, limits, health, reflection and graceful shutdown.

use std::fmt;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use oanquan_proto::v1::account_service_server::AccountServiceServer;
use oanquan_proto::v1::rules_service_server::RulesServiceServer;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;
use tonic_health::ServingStatus;
use tonic_web::GrpcWebLayer;
use tracing::{info, warn};

use crate::config::{
    ClientLimits, ComputerLimits, GameLimits, MemoryStoreLimits, StreamLimits, TransportLimits,
};
use crate::domain::computer::{self, Computer, SearchPool};
use crate::domain::limits::{ClientPlaces, RateLimiter};
use crate::domain::seek::{SeekLimits, SeekPool};
use crate::domain::{
    GameManager, GameStore, Hub, ManagerLimits, MemoryStore, OpenError, PostgresOpenError,
    PostgresOptions, PostgresStore, SqliteStore, TimePolicy,
};
use crate::domain::{reaper, timekeeper};
use crate::grpc::accept::{self, Handshake};
use crate::grpc::connections::ConnectionLimit;
use crate::grpc::deadline::DeadlineLayer;
use crate::grpc::health::HealthApi;
use crate::grpc::hosts::HostCheckLayer;
use crate::grpc::reflection::Metered;
use crate::grpc::reflection_index;
use crate::grpc::stalls::Stalls;
use crate::grpc::unread::{Unread, UnreadLayer};
use crate::grpc::{
    AccountApi, GameApi, GameRoutes, ObserveLayer, RateLimitLayer, RulesApi, StreamSettings,
};
use crate::metrics::Metrics;
use crate::readiness::{NotReady, Readiness};
use crate::tls_reload::{self, TlsIdentity, TlsReload};
use crate::web::{self, WebLayer};

/// Descriptor set of `google/rpc/error_details.proto`, for reflection (see `build.rs`).
const GOOGLE_RPC_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/google_rpc_descriptor.bin"));

/// Health-checked service names besides `""` (the whole server).
pub const HEALTH_SERVICES: [&str; 3] = [
    "oanquan.v1.GameService",
    "oanquan.v1.RulesService",
    "oanquan.v1.AccountService",
];

/// Where games are stored.
///
/// The library's default is [`Storage::InMemory`], which suits tests and embedding; the
/// `oanquan-server` binary defaults to [`Storage::Sqlite`] at `./oanquan.db`.
#[derive(Clone, Default)]
pub enum Storage {
    /// In process memory; everything is lost on restart.
    #[default]
    InMemory,
    /// An SQLite database file, created if missing: every acknowledged change survives a crash
    /// or power loss, and a restart resumes games and streams (see `STORAGE.md`).
    Sqlite(PathBuf),
    /// A PostgreSQL database (`postgres://user:password@host:port/database`), which several
    /// server nodes can share; its tables are created or migrated at start (see `STORAGE.md`).
    Postgres {
        /// The connection URL. Never shown: it may hold a password.
        url: String,
        /// The pool's limits and the store's timeouts.
        options: PostgresOptions,
    },
}

impl fmt::Debug for Storage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Storage::InMemory => f.write_str("InMemory"),
            Storage::Sqlite(path) => f.debug_tuple("Sqlite").field(path).finish(),
            // The URL may hold a password: not even in debug output.
            Storage::Postgres { options, .. } => f
                .debug_struct("Postgres")
                .field("options", options)
                .finish_non_exhaustive(),
        }
    }
}

/// Server configuration: where games live, TLS, and one section of limits per consumer (see
/// [`crate::config`]). Every limit is deliberate: tonic's defaults leave streams per connection
/// unlimited and requests without a deadline.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// Where games live.
    pub storage: Storage,
    /// Serve TLS with this certificate instead of cleartext HTTP/2.
    pub tls: Option<TlsIdentity>,
    /// Where `tls` was read from, to reload it on SIGHUP or when the files change.
    pub tls_reload: Option<TlsReload>,
    /// HTTP/2, the accept loop and the shutdown drain.
    pub transport: TransportLimits,
    /// Request rate and connections per client address, and the loopback exemption (which
    /// every per-client limit follows).
    pub clients: ClientLimits,
    /// The game manager's limits and the idle reaper.
    pub games: GameLimits,
    /// Spectator caps and stream behaviour of `WatchGame`, and the cap on health `Watch` streams.
    pub streams: StreamLimits,
    /// The computer opponent and `RulesService.Analyze`.
    pub computer: ComputerLimits,
    /// The in-memory store's capacity.
    pub memory: MemoryStoreLimits,
    /// Where to count what the server does (served by [`crate::metrics::serve`]); `None`
    /// counts nothing.
    pub metrics: Option<Arc<Metrics>>,
    /// The web page and browsers' access (gRPC-Web is always on).
    pub web: crate::web::WebSettings,
    /// Set as health is: ready once serving, not while the store cannot write nor once
    /// draining (served at `/ready`, kept as `--ready-file`).
    pub readiness: Readiness,
    /// Endgame tables for the computer player and `RulesService.Analyze` (`--endgame-tables`).
    pub endgame_tables: Option<Arc<oanquan_ai::egtb::Tablebase>>,
}

/// Why the server stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Reflection could not load a descriptor set (a build problem).
    #[error("building the reflection service")]
    Reflection(#[from] prost::DecodeError),
    /// The transport failed.
    #[error("serving gRPC")]
    Transport(#[from] tonic::transport::Error),
    /// The listener has no local address.
    #[error("the listener has no local address")]
    Listener(#[source] std::io::Error),
    /// The database cannot be used; the message says why and what to do.
    #[error(transparent)]
    Storage(#[from] OpenError),
    /// The PostgreSQL database cannot be used; the message says why and what to do.
    #[error(transparent)]
    Postgres(#[from] PostgresOpenError),
    /// Opening the store stopped before it could say why: its thread panicked or was
    /// cancelled.
    #[error("opening the store failed")]
    StoreOpen(#[source] tokio::task::JoinError),
    /// The TLS certificate or key cannot be used.
    #[error("{0}")]
    Tls(String),
    /// Another start-up step failed.
    #[error("starting up: {0}")]
    Startup(String),
}

impl From<tls_reload::TlsError> for ServeError {
    fn from(error: tls_reload::TlsError) -> Self {
        ServeError::Tls(error.0)
    }
}

/// Opens the store `config.storage` names: for SQLite, checks and migrates the file (on a
/// blocking thread) and replays the unfinished games; for PostgreSQL, connects, checks and
/// migrates the schema, and replays the unfinished games.
///
/// # Errors
///
/// [`ServeError::Storage`] for a database file that is corrupt, another application's, from a
/// newer server, empty, unreadable or not writable; such a file is left untouched.
/// [`ServeError::Postgres`] for a PostgreSQL database that cannot be reached, holds another
/// application's tables, or was migrated by a newer server.
pub async fn open_store(config: &Config) -> Result<Arc<dyn GameStore>, ServeError> {
    Ok(match &config.storage {
        Storage::InMemory => Arc::new(MemoryStore::new(config.memory.memory_limits())),
        Storage::Sqlite(path) => {
            let path = path.clone();
            let store = tokio::task::spawn_blocking(move || SqliteStore::open(path))
                .await
                .map_err(ServeError::StoreOpen)??;
            Arc::new(store)
        }
        Storage::Postgres { url, options } => {
            Arc::new(PostgresStore::connect(url, options.clone()).await?)
        }
    })
}

/// Opens the store ([`open_store`]) and serves with it ([`run_with_store`]).
///
/// # Errors
///
/// [`ServeError`] if the store cannot be opened or the transport fails.
pub async fn run(
    listener: TcpListener,
    config: Config,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServeError> {
    let store = open_store(&config).await?;
    run_with_store(listener, config, store, shutdown).await
}

/// Serves the API on `listener` from `store` until `shutdown` resolves, then drains: health
/// turns NOT_SERVING, every open stream ends with UNAVAILABLE (telling the client the sequence
/// to resume from), calls still running after `config.transport.shutdown_drain_timeout` are
/// abandoned, and `store` is closed ([`GameStore::close`]). While it serves, health is
/// NOT_SERVING whenever the store says it cannot write ([`GameStore::writable`]).
/// `config.storage` is not looked at: `store` is used as it is.
///
/// # Errors
///
/// [`ServeError`] if the transport fails.
pub async fn run_with_store(
    listener: TcpListener,
    config: Config,
    store: Arc<dyn GameStore>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServeError> {
    let local: SocketAddr = listener.local_addr().map_err(ServeError::Listener)?;
    let (stop_tx, stop_rx) = watch::channel(false);

    let exempt_loopback = config.clients.exempt_loopback;
    let hub = Hub::with_commit_capacity(
        config.streams.broadcast_capacity,
        config
            .streams
            .broadcast_capacity
            .max(crate::domain::COMMIT_FEED_CAPACITY),
    );
    let searches = SearchPool::new(config.computer.search_capacity(exempt_loopback));
    searches.set_endgame_tables(config.endgame_tables.clone());
    let writable = store.writable();
    // Several nodes may share a PostgreSQL database: each hears the others' commits, and one
    // at a time runs the background agents.
    let postgres = store
        .as_any()
        .and_then(|store| store.downcast_ref::<PostgresStore>());
    let node_listener = postgres
        .map(|postgres| AbortOnDrop(postgres.spawn_listener(Arc::clone(&hub), stop_rx.clone())));
    let metrics = config.metrics.clone();
    let mut manager = GameManager::new(Arc::clone(&store), hub, manager_limits(&config));
    if let Some(metrics) = &metrics {
        manager = manager.with_observer(Arc::clone(metrics) as _);
        metrics.observe_sources(Arc::clone(&store), Arc::clone(&searches));
    }
    let manager = Arc::new(manager);
    // Before anything can end a game (the idle reaper, the computer): each restored game must
    // be counted before its release can come.
    let restored = manager
        .restore_open_games()
        .await
        .map_err(|e| ServeError::Startup(e.to_string()))?;
    if restored > 0 {
        tracing::info!(
            games = restored,
            "open games counted towards their creators' limits"
        );
    }
    // A restart gives each running turn its time back (the outage is not charged), before any
    // request can come; then flags fall, first moves expire and rematch windows close without
    // anyone calling.
    // With other nodes serving (one of them leads), there was no outage to give back. Nodes
    // starting together take turns, each from where the one before left the clocks.
    let resumption = match postgres {
        Some(postgres) => Some(
            postgres
                .clock_resumption()
                .await
                .map_err(|e| ServeError::Startup(format!("asking for the other nodes: {e}")))?,
        ),
        None => None,
    };
    let resumed = if resumption.as_ref().is_some_and(|r| r.others_serve()) {
        0
    } else {
        timekeeper::resume_clocks(&manager)
            .await
            .map_err(|e| ServeError::Startup(format!("resuming the turns of active games: {e}")))?
    };
    if let Some(resumption) = resumption {
        let others_serve = resumption.others_serve();
        if let Err(error) = resumption.resumed().await {
            // The next node then charges from the last sign of life before this one: the
            // time since this node resumed is given back a second time, no more.
            warn!(%error, others_serve, "cannot mark the clocks as resumed");
        }
    }
    if resumed > 0 {
        tracing::info!(games = resumed, "turns of active games resumed");
    }
    let stalls = Stalls::new();
    let streams = StreamSettings {
        heartbeat: config.streams.heartbeat_interval,
        stall_timeout: config.streams.stream_stall_timeout,
        shutdown: stop_rx.clone(),
        metrics: metrics.clone(),
        stalls: Arc::clone(&stalls),
    };
    let rate_limiter = Arc::new(RateLimiter::new(
        config.clients.rate_limit(),
        exempt_loopback,
    ));
    let agents = AgentSettings {
        manager: Arc::clone(&manager),
        searches: Arc::clone(&searches),
        computer_move_time: config.computer.computer_move_time,
        idle_game_timeout: config.games.idle_game_timeout,
        drain_timeout: config.transport.shutdown_drain_timeout,
        stop: stop_rx.clone(),
    };
    // Aborted if `run_with_store` itself is dropped, which cancels the computer's searches.
    let agents = match postgres {
        None => RunningAgents::Here(agents.spawn()),
        Some(postgres) => {
            let (held, lease) = postgres.spawn_lease(stop_rx.clone());
            RunningAgents::WhileLeading {
                agents: AbortOnDrop(tokio::spawn(agents.while_leading(held))),
                _lease: AbortOnDrop(lease),
            }
        }
    };
    let seek_limits = SeekLimits {
        max_seeks: config.games.max_seeks,
        max_per_client: config.games.max_seeks_per_client,
        exempt_loopback,
    };
    // On PostgreSQL the open seeks are every node's, on the database.
    let (seeks, seek_board) = match postgres {
        None => (SeekPool::new(Arc::clone(&manager), seek_limits), None),
        Some(postgres) => {
            let (board, task) = postgres
                .spawn_seeks(stop_rx.clone())
                .await
                .map_err(|e| ServeError::Startup(format!("sharing the seeks: {e}")))?;
            let pool = SeekPool::shared(Arc::clone(&manager), seek_limits, board);
            (pool, Some(AbortOnDrop(task)))
        }
    };

    let transport = &config.transport;
    let (max_request, max) = (transport.max_request(), transport.max_message_size);
    let health = tonic_health::server::HealthReporter::new();
    let health_service = HealthApi::server(
        health.clone(),
        config.streams.max_health_watches,
        ClientPlaces::new(
            config.streams.max_health_watches_per_client,
            config.clients.exempt_loopback,
        ),
        stop_rx.clone(),
    )
    .max_decoding_message_size(max_request);
    for name in HEALTH_SERVICES {
        health
            .set_service_status(name, ServingStatus::Serving)
            .await;
    }
    // NOT_SERVING while the store cannot write (a full disk, a read-only file), SERVING again
    // once it can; until shutdown, which has the last word.
    let readiness = config.readiness.clone();
    let storage_health = match writable {
        Some(writable) => Some(AbortOnDrop(tokio::spawn(follow_storage(
            writable,
            health.clone(),
            readiness.clone(),
            stop_rx.clone(),
        )))),
        None => {
            readiness.set(Ok(()));
            None
        }
    };

    let reflection = Arc::new(reflection_index::Index::new(&[
        oanquan_proto::FILE_DESCRIPTOR_SET,
        tonic_health::pb::FILE_DESCRIPTOR_SET,
        GOOGLE_RPC_DESCRIPTOR_SET,
        tonic_reflection::pb::v1::FILE_DESCRIPTOR_SET,
        tonic_reflection::pb::v1alpha::FILE_DESCRIPTOR_SET,
    ])?);
    // One stream carries any number of reflection requests: each counts against the rate limit.
    let reflection_v1 = Metered::new(
        reflection_index::ReflectionV1::server(Arc::clone(&reflection))
            .max_decoding_message_size(max_request),
        Arc::clone(&rate_limiter),
        metrics.clone(),
    );
    let reflection_v1alpha = Metered::new(
        reflection_index::ReflectionV1Alpha::server(reflection)
            .max_decoding_message_size(max_request),
        Arc::clone(&rate_limiter),
        metrics.clone(),
    );

    let registrations = Arc::new(RateLimiter::new(
        config.clients.registration_limit(),
        exempt_loopback,
    ));
    let account_service = AccountServiceServer::new(
        AccountApi::new(Arc::clone(&manager))
            .with_registrations(registrations)
            .with_max_response(max),
    )
    .max_decoding_message_size(max_request)
    .max_encoding_message_size(max);
    // Reads the hosted games that requests name by id, for their histories.
    let rules_api = RulesApi::new(Arc::clone(&searches)).with_games(Arc::clone(&manager));
    let rules_service = RulesServiceServer::new(rules_api)
        .max_decoding_message_size(max_request)
        .max_encoding_message_size(max);
    // The generated GameService, with WatchGame events encoded once for all watchers.
    let game_service = GameRoutes::new(
        GameApi::new(manager, seeks, streams).with_max_response(max),
        max_request,
        max,
    );

    // `TcpIncoming` rather than `TcpListenerStream`: it sets TCP_NODELAY (small
    // request/response messages must not wait for Nagle) and TCP keepalive on each socket.
    let accepted = TcpIncoming::from(listener)
        .with_nodelay(Some(true))
        .with_keepalive(Some(transport.keepalive_interval));
    let tls = match &config.tls {
        Some(identity) => Some((identity, watch::Sender::new(identity.acceptor()?))),
        None => None,
    };
    let _tls_reload = match (&tls, &config.tls_reload) {
        (Some((identity, acceptor)), Some(files)) => {
            Some(AbortOnDrop(tokio::spawn(tls_reload::run(
                files.clone(),
                (*identity).clone(),
                acceptor.clone(),
                stop_rx.clone(),
            ))))
        }
        _ => None,
    };
    let handshake = Handshake {
        limit: ConnectionLimit::observed(
            config.clients.max_connections_per_client,
            exempt_loopback,
            metrics.clone(),
        ),
        tls: tls.as_ref().map(|(_, acceptor)| acceptor.subscribe()),
        timeout: transport.handshake_timeout,
        // A request's head and body arrive within about a handshake's time, and the answer
        // within a call's deadline; a stream writes at least every heartbeat.
        answer_within: transport.handshake_timeout.saturating_add(
            transport
                .request_timeout
                .max(config.streams.heartbeat_interval),
        ),
        stalls,
        exempt_loopback,
    };
    let (incoming, accepting) = accept::spawn(accepted, handshake, stop_rx.clone());
    let _accepting = AbortOnDrop(accepting);

    // A response parked by its client (HTTP/2 flow control) goes when a call or a stream
    // would have ended: past the call's deadline, or the stall timeout of a stream.
    let unread = Unread::new(
        transport
            .request_timeout
            .max(config.streams.stream_stall_timeout),
    );
    let _sweeping = AbortOnDrop(tokio::spawn(Arc::clone(&unread).run(stop_rx.clone())));
    let mut stop_serving = stop_rx.clone();
    let serve = Server::builder()
        // HTTP/1.1 for browsers: gRPC-Web and the page.
        .accept_http1(true)
        .max_concurrent_streams(transport.max_concurrent_streams)
        .concurrency_limit_per_connection(transport.concurrency_limit_per_connection)
        .http2_keepalive_interval(Some(transport.keepalive_interval))
        .http2_keepalive_timeout(Some(transport.keepalive_timeout))
        // No `.timeout()`: tonic's sits outside gRPC-Web's translation (see `DeadlineLayer`).
        .trace_fn(|request| {
            tracing::info_span!(
                "rpc",
                method = %request.uri().path(),
                request_id = tracing::field::Empty,
                game_id = tracing::field::Empty,
            )
        })
        // Outermost: every response body, the page's too.
        .layer(UnreadLayer::new(unread))
        // GET and HEAD are the page's; CORS answers preflights; gRPC-Web becomes gRPC here,
        // so that everything inside sees gRPC calls only.
        .layer(WebLayer::new(&config.web))
        .layer(web::cors_layer(&config.web))
        .layer(GrpcWebLayer::new())
        // Outermost of the gRPC layers, so that it counts the rate limit's refusals as calls.
        .layer(ObserveLayer::new(metrics.clone()).with_max_request(transport.max_request()))
        // Before the rate limit, so that a page that reached the server through DNS rebinding
        // takes nothing from the limits of the address it came from.
        .layer(HostCheckLayer::new(web::HostCheck::new(&config.web)))
        .layer(
            RateLimitLayer::new(rate_limiter)
                .with_health(Arc::new(RateLimiter::new(
                    config.clients.health_rate_limit(),
                    exempt_loopback,
                )))
                .with_metrics(metrics),
        )
        // Inside gRPC-Web's translation, so that a call cut by it is answered in the caller's
        // protocol; inside the count, which sees its DEADLINE_EXCEEDED like any answer.
        .layer(DeadlineLayer::new(transport.request_timeout))
        .add_service(health_service)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .add_service(game_service)
        .add_service(rules_service)
        .add_service(account_service)
        .serve_with_incoming_shutdown(incoming, async move {
            let _ = stop_serving.wait_for(|stopping| *stopping).await;
        });
    tokio::pin!(serve);

    info!(%local, tls = config.tls.is_some(), "serving");
    tokio::select! {
        result = &mut serve => {
            drop(agents);
            return result.map_err(ServeError::from);
        }
        () = shutdown => {}
    }

    let drain_timeout = transport.shutdown_drain_timeout;
    info!(?drain_timeout, "shutting down");
    if let Some(follower) = storage_health {
        // Stopped (not just told to) before NOT_SERVING is set, so it cannot undo it.
        follower.0.abort();
        follower.join().await;
    }
    readiness.set(Err(NotReady::Draining));
    for name in std::iter::once("").chain(HEALTH_SERVICES) {
        health
            .set_service_status(name, ServingStatus::NotServing)
            .await;
    }
    // Ends every open stream (health watches included, after they have seen NOT_SERVING) with
    // UNAVAILABLE, and tells tonic to stop accepting and drain.
    let _ = stop_tx.send(true);
    // Cancels every search: computer moves end without committing, Analyze calls in progress
    // with UNAVAILABLE.
    searches.stop();
    match tokio::time::timeout(drain_timeout, serve).await {
        Ok(result) => result?,
        Err(_) => warn!("drain timeout reached; abandoning the remaining calls"),
    }
    // Handing the node's work over (the agents' last commits, its seeks withdrawn, the lease
    // given up) waits on the database; one that went silent would hold the stop for as long
    // as it stays so (an outside probe's node was still there a minute after its SIGTERM).
    // Whatever is left then, other nodes take over when this one's heartbeat and lease lapse.
    let hand_over = async {
        match agents {
            RunningAgents::Here(agents) => agents.join(drain_timeout).await,
            // Joins its agents (each within the drain timeout) once stopped.
            RunningAgents::WhileLeading { agents, _lease } => agents.join().await,
        }
        if let Some(node_listener) = node_listener {
            node_listener.join().await;
        }
        // Withdraws this node's seeks before the store closes.
        if let Some(seek_board) = seek_board {
            seek_board.join().await;
        }
    };
    if tokio::time::timeout(drain_timeout, hand_over)
        .await
        .is_err()
    {
        warn!(
            "the database did not answer within the drain timeout; stopping without handing \
             the rest over (other nodes take it once this one's lease and heartbeat lapse)"
        );
    }
    // Tasks that outlived the drain may still hold the store: close it explicitly, so that
    // the database file alone holds every game once the process exits.
    store.close().await;
    info!("stopped");
    Ok(())
}

/// What the manager enforces itself, from the sections that hold those limits.
fn manager_limits(config: &Config) -> ManagerLimits {
    let streams = &config.streams;
    ManagerLimits {
        max_watchers_per_game: streams.max_spectators_per_game,
        max_watchers_per_connection: streams.max_spectators_per_connection,
        max_watchers_per_client: streams.max_spectators_per_client,
        max_open_games_per_client: config.games.max_open_games_per_client,
        exempt_loopback: config.clients.exempt_loopback,
        rated_games_per_pair: config.games.rated_games_per_pair,
        time: TimePolicy {
            first_move: config.games.first_move_time,
            abandon_after: config.games.abandon_after,
            rematch_window: config.games.rematch_window,
        },
        // Not flags: the domain's own defaults.
        ..ManagerLimits::default()
    }
}

/// Sets every health service and `readiness` from the store's `writable` until `stop` turns
/// `true`.
async fn follow_storage(
    mut writable: watch::Receiver<bool>,
    health: tonic_health::server::HealthReporter,
    readiness: Readiness,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        let status = if *writable.borrow_and_update() {
            readiness.set(Ok(()));
            ServingStatus::Serving
        } else {
            readiness.set(Err(NotReady::StoreUnwritable));
            ServingStatus::NotServing
        };
        for name in std::iter::once("").chain(HEALTH_SERVICES) {
            health.set_service_status(name, status).await;
        }
        tokio::select! {
            changed = writable.changed() => if changed.is_err() { return },
            _ = stop.wait_for(|stopping| *stopping) => return,
        }
    }
}

/// What the background agents need to start.
struct AgentSettings {
    manager: Arc<GameManager>,
    searches: Arc<SearchPool>,
    computer_move_time: std::time::Duration,
    idle_game_timeout: std::time::Duration,
    drain_timeout: std::time::Duration,
    stop: watch::Receiver<bool>,
}

/// The background agents of this node: the computer player, the timekeeper and the idle
/// reaper.
struct Agents {
    computer: AbortOnDrop,
    timekeeper: AbortOnDrop,
    reaper: Option<AbortOnDrop>,
}

enum RunningAgents {
    /// The only node: always.
    Here(Agents),
    /// One of several nodes: while it holds the leader lease.
    WhileLeading {
        agents: AbortOnDrop,
        _lease: AbortOnDrop,
    },
}

impl AgentSettings {
    /// Starts the agents; each begins with a scan of the store for the work due, so a node
    /// that takes over from another finds the games it left.
    fn spawn(&self) -> Agents {
        let reaper = Some(self.idle_game_timeout)
            .filter(|idle| !idle.is_zero())
            .map(|idle| {
                AbortOnDrop(reaper::spawn_idle_reaper(
                    Arc::clone(&self.manager),
                    idle,
                    self.stop.clone(),
                ))
            });
        // A computer of its own each time: a driver runs once per computer.
        let computer = Computer::new(Arc::clone(&self.searches), self.computer_move_time);
        let computer = AbortOnDrop(computer::spawn_driver(
            Arc::clone(&self.manager),
            computer,
            self.stop.clone(),
        ));
        let timekeeper = AbortOnDrop(timekeeper::spawn_timekeeper(
            Arc::clone(&self.manager),
            false,
            self.stop.clone(),
        ));
        Agents {
            computer,
            timekeeper,
            reaper,
        }
    }

    /// Runs the agents while `held` is true, until stopped; then lets them finish as
    /// [`Agents::join`] does. Losing the lease aborts them at once: another node may be
    /// starting its own, and what they were doing is either committed or not (optimistic
    /// concurrency keeps a move or a flag from being applied twice).
    async fn while_leading(self, mut held: watch::Receiver<bool>) {
        let mut stop = self.stop.clone();
        loop {
            tokio::select! {
                leading = async { held.wait_for(|held| *held).await.is_ok() } => if !leading { return },
                _ = stop.wait_for(|stopping| *stopping) => return,
            }
            info!("leading: running the computer player, the timekeeper and the idle reaper");
            let agents = self.spawn();
            tokio::select! {
                _ = async { held.wait_for(|held| !*held).await.is_ok() } => {
                    // The lease also ends at shutdown: then the agents finish their work.
                    if *stop.borrow() {
                        agents.join(self.drain_timeout).await;
                        return;
                    }
                    warn!("no longer leading: the background agents stop here");
                    drop(agents);
                }
                _ = async { stop.wait_for(|stopping| *stopping).await.is_ok() } => {
                    agents.join(self.drain_timeout).await;
                    return;
                }
            }
        }
    }
}

impl Agents {
    /// Waits for the agents, told to stop, to finish what they are doing, for up to `timeout`
    /// each.
    async fn join(self, timeout: std::time::Duration) {
        if tokio::time::timeout(timeout, self.computer.join())
            .await
            .is_err()
        {
            warn!("the computer player did not stop in time");
        }
        // Stops with the stop signal; a deadline being applied finishes its commit first.
        if tokio::time::timeout(timeout, self.timekeeper.join())
            .await
            .is_err()
        {
            warn!("the timekeeper did not stop in time");
        }
        if let Some(reaper) = self.reaper
            && tokio::time::timeout(timeout, reaper.join()).await.is_err()
        {
            warn!("the idle reaper did not stop in time");
        }
    }
}

/// Aborts a task when dropped.
#[derive(Debug)]
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl AbortOnDrop {
    async fn join(mut self) {
        let _ = (&mut self.0).await;
    }
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
