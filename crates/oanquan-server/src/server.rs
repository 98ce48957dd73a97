//! Wiring: services, limits, health, reflection and graceful shutdown.

use std::fmt;
use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use oanquan_proto::v1::rules_service_server::RulesServiceServer;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject as _;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;
use tonic_health::ServingStatus;
use tracing::{info, warn};

use crate::domain::computer::{self, Computer, SearchCapacity, SearchPool};
use crate::domain::limits::{RateLimit, RateLimiter};
use crate::domain::reaper;
use crate::domain::{
    GameManager, GameStore, Hub, ManagerLimits, MemoryLimits, MemoryStore, OpenError, SqliteStore,
};
use crate::grpc::accept::{self, Handshake};
use crate::grpc::connections::ConnectionLimit;
use crate::grpc::health::HealthApi;
use crate::grpc::{GameApi, GameRoutes, RateLimitLayer, RulesApi, StreamSettings};

/// Descriptor set of `google/rpc/error_details.proto`, for reflection (see `build.rs`).
const GOOGLE_RPC_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/google_rpc_descriptor.bin"));

/// Health-checked service names besides `""` (the whole server).
pub const HEALTH_SERVICES: [&str; 2] = ["oanquan.v1.GameService", "oanquan.v1.RulesService"];

/// Where games are stored.
///
/// The library's default is [`Storage::InMemory`], which suits tests and embedding; the
/// `oanquan-server` binary defaults to [`Storage::Sqlite`] at `./oanquan.db`.
#[derive(Debug, Clone, Default)]
pub enum Storage {
    /// In process memory; everything is lost on restart.
    #[default]
    InMemory,
    /// An SQLite database file, created if missing: every acknowledged change survives a crash
    /// or power loss, and a restart resumes games and streams (see `STORAGE.md`).
    Sqlite(PathBuf),
}

/// A TLS certificate chain and private key, PEM-encoded. `Debug` does not show the key.
#[derive(Clone)]
pub struct TlsIdentity {
    /// The certificate chain, leaf first.
    pub cert_pem: Vec<u8>,
    /// The private key (PKCS#8, PKCS#1 or SEC1).
    pub key_pem: Vec<u8>,
}

impl fmt::Debug for TlsIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsIdentity")
            .field("cert_pem", &format_args!("{} bytes", self.cert_pem.len()))
            .finish_non_exhaustive()
    }
}

impl TlsIdentity {
    /// Reads both files and checks that they make a usable TLS configuration.
    ///
    /// # Errors
    ///
    /// [`ServeError::Tls`] naming the file or the problem.
    pub fn read(cert: &Path, key: &Path) -> Result<TlsIdentity, ServeError> {
        let read = |path: &Path, what: &str| {
            std::fs::read(path).map_err(|e| {
                ServeError::Tls(format!(
                    "cannot read the TLS {what} {}: {e}",
                    path.display()
                ))
            })
        };
        let identity = TlsIdentity {
            cert_pem: read(cert, "certificate")?,
            key_pem: read(key, "private key")?,
        };
        identity.acceptor()?;
        Ok(identity)
    }

    /// The TLS side of the server: rustls with the ring provider, TLS 1.2 and 1.3, ALPN `h2`.
    fn acceptor(&self) -> Result<TlsAcceptor, ServeError> {
        let unusable =
            |what: &str, e: &dyn fmt::Display| ServeError::Tls(format!("unusable TLS {what}: {e}"));
        let chain = CertificateDer::pem_slice_iter(&self.cert_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| unusable("certificate (not a PEM certificate chain)", &e))?;
        if chain.is_empty() {
            return Err(ServeError::Tls(
                "unusable TLS certificate: no PEM certificate in the file".to_owned(),
            ));
        }
        let key = PrivateKeyDer::from_pem_slice(&self.key_pem)
            .map_err(|e| unusable("private key (not a PEM PKCS#8, PKCS#1 or SEC1 key)", &e))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| unusable("configuration", &e))?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(|e| unusable("certificate or key", &e))?;
        config.alpn_protocols = vec![b"h2".to_vec()];
        Ok(TlsAcceptor::from(Arc::new(config)))
    }
}

/// Server configuration. Every limit is deliberate: tonic's defaults leave streams per
/// connection unlimited and requests without a deadline.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where games live.
    pub storage: Storage,
    /// HTTP/2 `SETTINGS_MAX_CONCURRENT_STREAMS`: calls in flight on one connection, open watch
    /// streams included. Bounds what one client can hold open.
    pub max_concurrent_streams: u32,
    /// Requests one connection may have in service at once (tower concurrency limit); further
    /// requests wait. Protects the server from a single busy client.
    pub concurrency_limit_per_connection: usize,
    /// Largest protobuf message decoded or encoded, in bytes. Our messages are small (a full
    /// 300-move history is well under 1 MiB); a bound stops memory blow-ups from hostile input.
    pub max_message_size: usize,
    /// HTTP/2 PING interval: finds dead peers (and keeps NATs open) on idle connections.
    pub keepalive_interval: Duration,
    /// How long a PING may go unanswered before the connection is closed.
    pub keepalive_timeout: Duration,
    /// Deadline for a unary call (and for a stream to start); a client's shorter
    /// `grpc-timeout` wins.
    pub request_timeout: Duration,
    /// Spectators of one game. Each seated player's own streams (watches with its token, up
    /// to [`crate::domain::DEFAULT_MAX_STREAMS_PER_SEAT`]) have places of their own on top.
    pub max_watchers_per_game: usize,
    /// Spectator streams of one game on one connection (one connection must not take every
    /// place of a game); 0 = no limit. Loopback peers are exempt with `exempt_loopback`.
    pub max_watchers_per_connection: usize,
    /// Spectator streams of one game from one client address; 0 = no limit. Loopback peers
    /// are exempt with `exempt_loopback`.
    pub max_watchers_per_client: usize,
    /// Games the in-memory store holds (the SQLite store has no limit of its own).
    pub max_games: usize,
    /// Idle time before a stream sends a Heartbeat.
    pub heartbeat_interval: Duration,
    /// On shutdown, how long to wait for in-flight calls before exiting anyway.
    pub drain_timeout: Duration,
    /// Events buffered per watcher in the hub before it lags (and catches up from the log).
    pub broadcast_capacity: usize,
    /// Events the in-memory store keeps per game (older ones force a snapshot on resume).
    pub game_event_retention: usize,
    /// Lobby events the in-memory store keeps.
    pub lobby_event_retention: usize,
    /// Serve TLS with this certificate instead of cleartext HTTP/2.
    pub tls: Option<TlsIdentity>,
    /// Requests per client address (token bucket); `None` = unlimited. Health checks are not
    /// counted. See [`crate::domain::limits`].
    pub rate_limit: Option<RateLimit>,
    /// Waiting or active games one client address may have created; 0 = unlimited.
    pub max_open_games_per_client: usize,
    /// TCP connections one client address may have open; more are closed as they are
    /// accepted. 0 = unlimited. See [`crate::grpc::connections`].
    pub max_connections_per_client: usize,
    /// Time a new connection has to finish its TLS handshake (with TLS) and send its HTTP/2
    /// preface; a connection that has not is closed. See [`crate::grpc::accept`].
    pub handshake_timeout: Duration,
    /// Games waiting for a player or a move for longer than this are aborted; `None` = never.
    pub idle_game_timeout: Option<Duration>,
    /// A watch stream its client does not read for this long is dropped (RESOURCE_EXHAUSTED).
    pub stream_stall_timeout: Duration,
    /// Loopback peers (127.0.0.0/8, ::1) are exempt from the per-client limits above (and from
    /// `max_watchers_per_connection`), so local tools, tests and benchmarks are not throttled.
    /// Turn off when clients are local, e.g. the limits are tested.
    pub exempt_loopback: bool,
    /// Thinking time of the computer opponent per move (`CreateGameRequest.computer`).
    pub computer_move_time: Duration,
    /// Computer moves searching at once; more wait for a free slot. 0 = one per core.
    /// Searches run on tokio's blocking pool, never on the async workers that answer calls.
    /// `Analyze` calls have slots of their own (below), so they never delay a computer move.
    pub max_searches: usize,
    /// `RulesService.Analyze` calls searching at once; 0 = one per core but one (at least 1).
    pub max_analyses: usize,
    /// `Analyze` calls one client address may have running or waiting; 0 = unlimited.
    /// Loopback is exempt with `exempt_loopback`, like the per-client limits above.
    pub max_analyses_per_client: usize,
    /// How long an `Analyze` call waits for a free slot before RESOURCE_EXHAUSTED (with a
    /// retry delay); zero = refuse at once when every slot is taken.
    pub analysis_queue_timeout: Duration,
}

impl Default for Config {
    fn default() -> Self {
        let memory = MemoryLimits::default();
        Config {
            storage: Storage::InMemory,
            max_concurrent_streams: 128,
            concurrency_limit_per_connection: 64,
            max_message_size: 4 * 1024 * 1024,
            keepalive_interval: Duration::from_secs(30),
            keepalive_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            max_watchers_per_game: 100,
            max_watchers_per_connection: 4,
            max_watchers_per_client: 8,
            max_games: memory.max_games,
            heartbeat_interval: Duration::from_secs(15),
            drain_timeout: Duration::from_secs(10),
            broadcast_capacity: 256,
            game_event_retention: memory.game_event_retention,
            lobby_event_retention: memory.lobby_event_retention,
            tls: None,
            rate_limit: Some(RateLimit {
                per_second: 50.0,
                burst: 100,
            }),
            max_open_games_per_client: 20,
            max_connections_per_client: 64,
            handshake_timeout: Duration::from_secs(5),
            idle_game_timeout: Some(Duration::from_secs(3600)),
            stream_stall_timeout: Duration::from_secs(30),
            exempt_loopback: true,
            computer_move_time: computer::DEFAULT_MOVE_TIME,
            max_searches: 0,
            max_analyses: 0,
            max_analyses_per_client: computer::DEFAULT_ANALYSES_PER_CLIENT,
            analysis_queue_timeout: computer::DEFAULT_ANALYSIS_WAIT,
        }
    }
}

/// Why the server stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Reflection could not load a descriptor set (a build problem).
    #[error("building the reflection service")]
    Reflection(#[from] tonic_reflection::server::Error),
    /// The transport failed.
    #[error("serving gRPC")]
    Transport(#[from] tonic::transport::Error),
    /// The listener has no local address.
    #[error("listener address")]
    Io(#[from] std::io::Error),
    /// The database cannot be used; the message says why and what to do.
    #[error(transparent)]
    Storage(#[from] OpenError),
    /// The TLS certificate or key cannot be used.
    #[error("{0}")]
    Tls(String),
    /// Another start-up step failed.
    #[error("starting up: {0}")]
    Startup(String),
}

/// Opens the store `config.storage` names: for SQLite, checks and migrates the file (on a
/// blocking thread) and replays the unfinished games.
///
/// # Errors
///
/// [`ServeError::Storage`] for a database that is corrupt, another application's, from a newer
/// server, empty, unreadable or not writable; such a file is left untouched.
pub async fn open_store(config: &Config) -> Result<Arc<dyn GameStore>, ServeError> {
    Ok(match &config.storage {
        Storage::InMemory => Arc::new(MemoryStore::new(MemoryLimits {
            max_games: config.max_games,
            game_event_retention: config.game_event_retention.max(1),
            lobby_event_retention: config.lobby_event_retention.max(1),
        })),
        Storage::Sqlite(path) => {
            let path = path.clone();
            let store = tokio::task::spawn_blocking(move || SqliteStore::open(path))
                .await
                .map_err(|e| std::io::Error::other(e.to_string()))??;
            Arc::new(store)
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
/// to resume from), calls still running after `config.drain_timeout` are abandoned, and
/// `store` is closed ([`GameStore::close`]). While it serves, health is NOT_SERVING whenever
/// the store says it cannot write ([`GameStore::writable`]). `config.storage` is not looked
/// at: `store` is used as it is.
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
    let local: SocketAddr = listener.local_addr()?;
    let (stop_tx, stop_rx) = watch::channel(false);

    let hub = Hub::new(config.broadcast_capacity);
    let searches = SearchPool::new(SearchCapacity {
        computer_moves: match config.max_searches {
            0 => computer::default_max_searches(),
            n => n,
        },
        analyses: match config.max_analyses {
            0 => computer::default_max_analyses(),
            n => n,
        },
        analyses_per_client: config.max_analyses_per_client,
        analysis_wait: config.analysis_queue_timeout,
        exempt_loopback: config.exempt_loopback,
    });
    let computer = Computer::new(Arc::clone(&searches), config.computer_move_time);
    let writable = store.writable();
    let manager = Arc::new(GameManager::new(
        Arc::clone(&store),
        hub,
        ManagerLimits {
            max_watchers_per_game: config.max_watchers_per_game,
            max_watchers_per_connection: config.max_watchers_per_connection,
            max_watchers_per_client: config.max_watchers_per_client,
            max_open_games_per_client: config.max_open_games_per_client,
            exempt_loopback: config.exempt_loopback,
            ..ManagerLimits::default()
        },
    ));
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
    let streams = StreamSettings {
        heartbeat: config.heartbeat_interval,
        stall_timeout: config.stream_stall_timeout,
        shutdown: stop_rx.clone(),
    };
    let rate_limiter = Arc::new(RateLimiter::new(config.rate_limit, config.exempt_loopback));
    let reaper = config
        .idle_game_timeout
        .filter(|idle| !idle.is_zero())
        .map(|idle| reaper::spawn_idle_reaper(Arc::clone(&manager), idle, stop_rx.clone()));
    // Plays the computer's turns (resuming those of reloaded games) until shutdown. Aborted if
    // `run_with_store` itself is dropped, which cancels its searches.
    let computer_driver = AbortOnDrop(computer::spawn_driver(
        Arc::clone(&manager),
        computer,
        stop_rx.clone(),
    ));

    let health = tonic_health::server::HealthReporter::new();
    let health_service = HealthApi::server(health.clone(), stop_rx.clone());
    for name in HEALTH_SERVICES {
        health
            .set_service_status(name, ServingStatus::Serving)
            .await;
    }
    // NOT_SERVING while the store cannot write (a full disk, a read-only file), SERVING again
    // once it can; until shutdown, which has the last word.
    let storage_health = writable.map(|writable| {
        AbortOnDrop(tokio::spawn(follow_storage(
            writable,
            health.clone(),
            stop_rx.clone(),
        )))
    });

    let reflection = || {
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(oanquan_proto::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(GOOGLE_RPC_DESCRIPTOR_SET)
    };
    let reflection_v1 = reflection().build_v1()?;
    let reflection_v1alpha = reflection().build_v1alpha()?;

    let max = config.max_message_size;
    // The generated GameService, with WatchGame events encoded once for all watchers.
    let game_service = GameRoutes::new(GameApi::new(manager, streams), max);
    let rules_service = RulesServiceServer::new(RulesApi::new(Arc::clone(&searches)))
        .max_decoding_message_size(max)
        .max_encoding_message_size(max);

    // `TcpIncoming` rather than `TcpListenerStream`: it sets TCP_NODELAY (small
    // request/response messages must not wait for Nagle) and TCP keepalive on each socket.
    let accepted = TcpIncoming::from(listener)
        .with_nodelay(Some(true))
        .with_keepalive(Some(config.keepalive_interval));
    let handshake = Handshake {
        limit: ConnectionLimit::new(config.max_connections_per_client, config.exempt_loopback),
        tls: config.tls.as_ref().map(TlsIdentity::acceptor).transpose()?,
        timeout: config.handshake_timeout,
    };
    let (incoming, accepting) = accept::spawn(accepted, handshake, stop_rx.clone());
    let _accepting = AbortOnDrop(accepting);

    let mut stop_serving = stop_rx.clone();
    let serve = Server::builder()
        .max_concurrent_streams(config.max_concurrent_streams)
        .concurrency_limit_per_connection(config.concurrency_limit_per_connection)
        .http2_keepalive_interval(Some(config.keepalive_interval))
        .http2_keepalive_timeout(Some(config.keepalive_timeout))
        .timeout(config.request_timeout)
        .trace_fn(|request| {
            tracing::info_span!(
                "rpc",
                method = %request.uri().path(),
                game_id = tracing::field::Empty,
            )
        })
        .layer(RateLimitLayer::new(rate_limiter))
        .add_service(health_service)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .add_service(game_service)
        .add_service(rules_service)
        .serve_with_incoming_shutdown(incoming, async move {
            let _ = stop_serving.wait_for(|stopping| *stopping).await;
        });
    tokio::pin!(serve);

    info!(%local, tls = config.tls.is_some(), "serving");
    tokio::select! {
        result = &mut serve => {
            if let Some(reaper) = reaper {
                reaper.abort();
            }
            return result.map_err(ServeError::from);
        }
        () = shutdown => {}
    }

    info!(drain_timeout = ?config.drain_timeout, "shutting down");
    if let Some(follower) = storage_health {
        // Stopped (not just told to) before NOT_SERVING is set, so it cannot undo it.
        follower.0.abort();
        follower.join().await;
    }
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
    match tokio::time::timeout(config.drain_timeout, serve).await {
        Ok(result) => result?,
        Err(_) => warn!("drain timeout reached; abandoning the remaining calls"),
    }
    if tokio::time::timeout(config.drain_timeout, computer_driver.join())
        .await
        .is_err()
    {
        warn!("the computer player did not stop in time");
    }
    // Tasks that outlived the drain may still hold the store: close it explicitly, so that
    // the database file alone holds every game once the process exits.
    store.close().await;
    info!("stopped");
    Ok(())
}

/// Sets every health service from the store's `writable` until `stop` turns `true`.
async fn follow_storage(
    mut writable: watch::Receiver<bool>,
    health: tonic_health::server::HealthReporter,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        let status = if *writable.borrow_and_update() {
            ServingStatus::Serving
        } else {
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
