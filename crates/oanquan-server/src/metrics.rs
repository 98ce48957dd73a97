//! Prometheus metrics: one [`Metrics`] per server, served by [`serve`] on a listener of its
//! own (`--metrics-listen`) at `/metrics`, in the OpenMetrics text format that Prometheus
//! scrapes (`application/openmetrics-text`).
//!
//! **Cost on the hot path.** Every series a request touches is created once and kept (a
//! counter is an `Arc` of an atomic): an RPC costs one hash lookup of its path, two atomic
//! increments and one histogram observation (a short mutex); a commit one observation and an
//! increment per move. Nothing is formatted or allocated per call, except a request id when the
//! client sends none (see [`crate::grpc::observe`]). Gauges that a lookup can give (games,
//! search pool) are read at scrape time instead of being kept up to date.
//!
//! The registry is the official `prometheus-client`'s: explicit rather than global, so several
//! servers in one process (the tests) each count their own.
//!
//! With a [`MetricsToken`] (`--metrics-token-file`), `/metrics` answers only requests that
//! carry it (`Authorization: Bearer …`); `/ready` and `/live` stay open to probes.

pub mod token;

use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};
use prost::Message as _;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tracing::{debug, warn};

use crate::domain::computer::SearchPool;
use crate::domain::{
    CommitObserver, Committed, GameEventKind, GameStatus, GameStore, PostgresStore, SqliteStore,
    StoreError, Termination,
};
use crate::readiness::{NotReady, Readiness};
pub use token::{MetricsToken, MetricsTokenFile};

/// Most open games counted at a scrape: the count reads the lobby's snapshot, which is bounded
/// like every other read.
pub const MAX_COUNTED_GAMES: usize = 100_000;

/// Open games are counted at most this often: a count reads up to [`MAX_COUNTED_GAMES`] games
/// from the store, and a client scraping in a loop must not turn that into the store's load.
/// Scrapes in between (and scrapes waiting for a count under way) show the last count.
pub const GAMES_COUNTED_EVERY: Duration = Duration::from_secs(1);

/// The gRPC status codes by number, as Prometheus labels.
const CODES: [&str; 17] = [
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];

/// The label of a gRPC status code number (anything unknown is UNKNOWN, as gRPC reads it).
#[must_use]
pub fn code_name(code: i32) -> &'static str {
    usize::try_from(code)
        .ok()
        .and_then(|code| CODES.get(code))
        .copied()
        .unwrap_or("UNKNOWN")
}

/// The kinds of long-lived server streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamKind {
    /// `GameService.WatchGame`.
    Game,
    /// `GameService.WatchLobby`.
    Lobby,
    /// `GameService.Seek`.
    Seek,
    /// `grpc.health.v1.Health.Watch`.
    Health,
}

impl StreamKind {
    const ALL: [StreamKind; 4] = [
        StreamKind::Game,
        StreamKind::Lobby,
        StreamKind::Seek,
        StreamKind::Health,
    ];

    fn label(self) -> &'static str {
        match self {
            StreamKind::Game => "game",
            StreamKind::Lobby => "lobby",
            StreamKind::Seek => "seek",
            StreamKind::Health => "health",
        }
    }

    fn of(path: &str) -> Option<StreamKind> {
        match path {
            "/oanquan.v1.GameService/WatchGame" => Some(StreamKind::Game),
            "/oanquan.v1.GameService/WatchLobby" => Some(StreamKind::Lobby),
            "/oanquan.v1.GameService/Seek" => Some(StreamKind::Seek),
            "/grpc.health.v1.Health/Watch" => Some(StreamKind::Health),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct MethodLabels {
    service: String,
    method: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct RpcLabels {
    service: String,
    method: String,
    code: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct KindLabels {
    kind: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ReasonLabels {
    reason: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct StatusLabels {
    status: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct StateLabels {
    state: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct BuildLabels {
    version: &'static str,
    node: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct OperationLabels {
    operation: &'static str,
}

/// One method's series: its latency, and a counter per status code made on first use.
#[derive(Debug)]
pub struct MethodMetrics {
    labels: MethodLabels,
    seconds: Histogram,
    codes: [OnceLock<Counter>; 17],
    stream: Option<StreamKind>,
}

impl MethodMetrics {
    /// The kind of stream this method opens, if it is one of the counted streams.
    #[must_use]
    pub fn stream(&self) -> Option<StreamKind> {
        self.stream
    }
}

/// A server's metrics. See the module docs.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// A fixed set of keys, built at start: a client's path only looks up, so a fast hasher is safe.
    methods: foldhash::HashMap<String, Arc<MethodMetrics>>,
    unknown_method: Arc<MethodMetrics>,
    rpcs: Family<RpcLabels, Counter>,
    streams_open: [Gauge; 4],
    events_sent: [Counter; 2],
    streams_dropped_stalled: Counter,
    streams_lagged: [Counter; 2],
    moves: Counter,
    games_created: Counter,
    games_finished: Family<ReasonLabels, Counter>,
    commit_seconds: [Histogram; 2],
    commit_failures: Counter,
    commit_batch_size: Histogram,
    rate_limited: Counter,
    undecodable: Counter,
    /// By state, as scraped: `handshake` is kept live; `serving` and `draining` are set at
    /// each scrape from [`Metrics::serving`] and whether the node drains.
    connections: Family<StateLabels, Gauge>,
    /// Connections past their handshake (serving or draining), kept live.
    serving: Gauge,
    connections_refused: Counter,
    ready: Gauge,
    /// Set by [`serve`]: what the `ready` gauge and the draining connections follow.
    readiness: OnceLock<Readiness>,
    games: Family<StatusLabels, Gauge>,
    search_busy: Gauge,
    search_queued: Gauge,
    sources: Mutex<Option<Sources>>,
    /// When the open games were last counted (see [`GAMES_COUNTED_EVERY`]); held across the
    /// count, so that concurrent scrapes wait for one count instead of each making theirs.
    games_counted: tokio::sync::Mutex<Option<Instant>>,
}

/// What a scrape reads the gauges from, once the server has them.
#[derive(Debug, Clone)]
struct Sources {
    store: Arc<dyn GameStore>,
    searches: Arc<SearchPool>,
}

/// The gRPC methods the server serves, as `/package.Service/Method` paths, from the
/// descriptor sets it is built with.
fn method_paths() -> Vec<(String, String)> {
    let mut paths = Vec::new();
    for set in [
        oanquan_proto::FILE_DESCRIPTOR_SET,
        tonic_health::pb::FILE_DESCRIPTOR_SET,
    ] {
        let Ok(set) = prost_types::FileDescriptorSet::decode(set) else {
            continue;
        };
        for file in set.file {
            for service in &file.service {
                let name = format!("{}.{}", file.package(), service.name());
                for method in &service.method {
                    paths.push((name.clone(), method.name().to_owned()));
                }
            }
        }
    }
    for service in [
        "grpc.reflection.v1.ServerReflection",
        "grpc.reflection.v1alpha.ServerReflection",
    ] {
        paths.push((service.to_owned(), "ServerReflectionInfo".to_owned()));
    }
    paths
}

impl Metrics {
    /// Registers every metric, with `node` naming this server in `oanquan_build_info`.
    #[must_use]
    pub fn new(node: &str) -> Arc<Metrics> {
        let mut registry = Registry::with_prefix("oanquan");

        let build = Family::<BuildLabels, Gauge>::default();
        build
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION"),
                node: node.to_owned(),
            })
            .set(1);
        registry.register(
            "build_info",
            "The server's version and node name (always 1)",
            build,
        );

        // 0.5 ms to about 16 s: unary calls are milliseconds, computer analyses seconds.
        let latency = || Histogram::new(exponential_buckets(0.0005, 2.0, 16));
        let seconds = Family::<MethodLabels, Histogram>::new_with_constructor(latency);
        registry.register_with_unit(
            "rpc_duration",
            "Time from request to final status, per gRPC method (for streams: how long they \
             stayed open)",
            Unit::Seconds,
            seconds.clone(),
        );
        let rpcs = Family::<RpcLabels, Counter>::default();
        registry.register(
            "rpcs",
            "Completed gRPC calls by method and status code",
            rpcs.clone(),
        );
        let method = |service: &str, method: &str| {
            let labels = MethodLabels {
                service: service.to_owned(),
                method: method.to_owned(),
            };
            Arc::new(MethodMetrics {
                seconds: seconds.get_or_create_owned(&labels),
                labels,
                codes: Default::default(),
                stream: StreamKind::of(&format!("/{service}/{method}")),
            })
        };
        let methods = method_paths()
            .into_iter()
            .map(|(service, name)| (format!("/{service}/{name}"), method(&service, &name)))
            .collect();
        // Paths that name no method share one series, so a client cannot add series at will.
        let unknown_method = method("unknown", "unknown");

        let kinds = Family::<KindLabels, Gauge>::default();
        registry.register(
            "streams_open",
            "Server streams open now, by kind",
            kinds.clone(),
        );
        let streams_open = StreamKind::ALL
            .map(|kind| kinds.get_or_create_owned(&KindLabels { kind: kind.label() }));
        let sent = Family::<KindLabels, Counter>::default();
        registry.register(
            "stream_events_sent",
            "Events handed to server streams (heartbeats not counted), by kind",
            sent.clone(),
        );
        // Only watch streams carry events (seeks and health send their own messages).
        let watches = [StreamKind::Game, StreamKind::Lobby];
        let events_sent =
            watches.map(|kind| sent.get_or_create_owned(&KindLabels { kind: kind.label() }));
        let lagged = Family::<KindLabels, Counter>::default();
        registry.register(
            "stream_lags",
            "Times a watch stream fell behind the live feed and caught up from the store (it is \
             not dropped for it), by kind",
            lagged.clone(),
        );
        let streams_lagged =
            watches.map(|kind| lagged.get_or_create_owned(&KindLabels { kind: kind.label() }));
        let dropped = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "streams_dropped",
            "Streams the server ended because their client did not read them",
            dropped.clone(),
        );
        let streams_dropped_stalled =
            dropped.get_or_create_owned(&ReasonLabels { reason: "stall" });

        let moves = Counter::default();
        registry.register("moves", "Moves committed by this node", moves.clone());
        let games_created = Counter::default();
        registry.register(
            "games_created",
            "Games created by this node",
            games_created.clone(),
        );
        let games_finished = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "games_finished",
            "Games that ended on this node, by reason",
            games_finished.clone(),
        );
        // 0.1 ms (memory) to about 3 s (a stalled disk or database).
        let commit = Family::<OperationLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.0001, 2.0, 15))
        });
        registry.register_with_unit(
            "store_commit_duration",
            "Time for the store to create or commit a game's change, failed attempts included",
            Unit::Seconds,
            commit.clone(),
        );
        let commit_seconds = ["create", "commit"]
            .map(|operation| commit.get_or_create_owned(&OperationLabels { operation }));
        let commit_failures = Counter::default();
        registry.register(
            "store_commit_failures",
            "Creates and commits the store refused or failed (concurrency conflicts included)",
            commit_failures.clone(),
        );

        // Powers of two up to the writers' largest batch (SQLite's 256; PostgreSQL's
        // --database-batch, 64 by default).
        let commit_batch_size = Histogram::new(exponential_buckets(1.0, 2.0, 9));
        registry.register(
            "store_commit_batch_size",
            "Writes committed together in one database transaction by group commit: on SQLite \
             game commits and account writes, on PostgreSQL game commits (up to \
             --database-batch). Empty in memory",
            commit_batch_size.clone(),
        );

        let rate_limited = Counter::default();
        registry.register(
            "rate_limited",
            "Requests refused by the per-client rate limit",
            rate_limited.clone(),
        );
        // Answered INTERNAL, as the gRPC spec has it, but the client's fault: an alert on the
        // server's INTERNAL answers subtracts these, or one client sending junk pages someone.
        let undecodable = Counter::default();
        registry.register(
            "rpcs_undecodable",
            "Calls answered INTERNAL because their request was not valid protobuf (also counted \
             in oanquan_rpcs_total)",
            undecodable.clone(),
        );
        let connections = Family::<StateLabels, Gauge>::default();
        registry.register(
            "connections_open",
            "TCP connections open now, by state: handshake (accepted, TLS and the HTTP/2 \
             preface not done yet), serving, draining (open while the node shuts down)",
            connections.clone(),
        );
        for state in ["handshake", "serving", "draining"] {
            connections.get_or_create_owned(&StateLabels { state });
        }
        let ready = Gauge::default();
        registry.register(
            "ready",
            "1 while this node is ready for traffic (what /ready says), else 0",
            ready.clone(),
        );
        let connections_refused = Counter::default();
        registry.register(
            "connections_refused",
            "Connections closed at once because their address had the most allowed",
            connections_refused.clone(),
        );

        let games = Family::<StatusLabels, Gauge>::default();
        registry.register(
            "games",
            "Unfinished games in the store, by status (read at each scrape)",
            games.clone(),
        );
        let search_busy = Gauge::default();
        registry.register(
            "search_pool_busy",
            "Searches running (computer moves and analyses)",
            search_busy.clone(),
        );
        let search_queued = Gauge::default();
        registry.register(
            "search_pool_queued",
            "Computer moves and analyses waiting for a search slot",
            search_queued.clone(),
        );

        Arc::new(Metrics {
            registry,
            methods,
            unknown_method,
            rpcs,
            streams_open,
            events_sent,
            streams_dropped_stalled,
            streams_lagged,
            moves,
            games_created,
            games_finished,
            commit_seconds,
            commit_failures,
            commit_batch_size,
            rate_limited,
            undecodable,
            connections,
            serving: Gauge::default(),
            connections_refused,
            ready,
            readiness: OnceLock::new(),
            games,
            search_busy,
            search_queued,
            sources: Mutex::new(None),
            games_counted: tokio::sync::Mutex::new(None),
        })
    }

    /// Gives a scrape the store and the search pool to read its gauges from, and has a SQLite
    /// or PostgreSQL store report the size of its batches.
    pub fn observe_sources(self: &Arc<Self>, store: Arc<dyn GameStore>, searches: Arc<SearchPool>) {
        // Weak: these metrics hold the store (for the scrape's gauges), and an `Arc` back
        // would keep both, and the database's lock, alive for ever.
        let metrics = Arc::downgrade(self);
        let observe = move |size: usize| {
            if let Some(metrics) = Weak::upgrade(&metrics) {
                metrics.commit_batch_size.observe(size as f64);
            }
        };
        let any = store.as_any();
        if let Some(sqlite) = any.and_then(|store| store.downcast_ref::<SqliteStore>()) {
            sqlite.observe_batches(observe);
        } else if let Some(postgres) = any.and_then(|store| store.downcast_ref::<PostgresStore>()) {
            postgres.observe_batches(observe);
        }
        *self.sources.lock().unwrap_or_else(PoisonError::into_inner) =
            Some(Sources { store, searches });
    }

    /// The series of the method at `path` (one shared series for unknown paths).
    #[must_use]
    pub fn method(&self, path: &str) -> &Arc<MethodMetrics> {
        self.methods.get(path).unwrap_or(&self.unknown_method)
    }

    /// Counts a completed call of `method` with status `code` that took `elapsed`.
    pub fn rpc_done(&self, method: &MethodMetrics, code: i32, elapsed: Duration) {
        method.seconds.observe(elapsed.as_secs_f64());
        let index = usize::try_from(code)
            .ok()
            .filter(|code| *code < CODES.len())
            .unwrap_or(2);
        method.codes[index]
            .get_or_init(|| {
                self.rpcs.get_or_create_owned(&RpcLabels {
                    service: method.labels.service.clone(),
                    method: method.labels.method.clone(),
                    code: CODES[index],
                })
            })
            .inc();
    }

    /// The open-streams gauge of `kind`.
    #[must_use]
    pub fn streams_open(&self, kind: StreamKind) -> &Gauge {
        &self.streams_open[kind as usize]
    }

    /// Counts an event handed to a stream of `kind`.
    pub fn event_sent(&self, kind: StreamKind) {
        if let Some(counter) = self.events_sent.get(kind as usize) {
            counter.inc();
        }
    }

    /// Counts `times` a stream of `kind` fell behind the live feed.
    pub fn stream_lagged(&self, kind: StreamKind, times: u64) {
        if let Some(counter) = self.streams_lagged.get(kind as usize) {
            counter.inc_by(times);
        }
    }

    /// Counts a stream dropped because its client stopped reading.
    pub fn stream_stalled(&self) {
        self.streams_dropped_stalled.inc();
    }

    /// Counts a request refused by the rate limit.
    pub fn rate_limited(&self) {
        self.rate_limited.inc();
    }

    /// Counts a call answered INTERNAL because its request was not valid protobuf.
    pub fn undecodable(&self) {
        self.undecodable.inc();
    }

    /// The live gauges of open connections: those in their handshake, and those past it.
    #[must_use]
    pub fn connection_gauges(&self) -> (Gauge, Gauge) {
        let handshake = self
            .connections
            .get_or_create_owned(&StateLabels { state: "handshake" });
        (handshake, self.serving.clone())
    }

    /// Counts a connection refused by the per-client limit.
    pub fn connection_refused(&self) {
        self.connections_refused.inc();
    }

    /// The text of a scrape: the gauges read from their sources, then every metric.
    pub async fn render(&self) -> String {
        let readiness = self.readiness.get().map(Readiness::get);
        self.ready.set(i64::from(readiness == Some(Ok(()))));
        let past_handshake = self.serving.get();
        let draining = readiness == Some(Err(NotReady::Draining));
        for (state, count) in [
            ("serving", if draining { 0 } else { past_handshake }),
            ("draining", if draining { past_handshake } else { 0 }),
        ] {
            self.connections
                .get_or_create(&StateLabels { state })
                .set(count);
        }
        let sources = self
            .sources
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some(Sources { store, searches }) = sources {
            self.search_busy
                .set(i64::try_from(searches.running_searches()).unwrap_or(i64::MAX));
            self.search_queued
                .set(i64::try_from(searches.queued()).unwrap_or(i64::MAX));
            let mut counted = self.games_counted.lock().await;
            if counted.is_none_or(|at| at.elapsed() >= GAMES_COUNTED_EVERY) {
                match store.lobby_snapshot(MAX_COUNTED_GAMES).await {
                    Ok((games, _)) => {
                        let count = |status| games.iter().filter(|g| g.status == status).count();
                        let waiting = count(GameStatus::WaitingForPlayers);
                        let active = count(GameStatus::Active);
                        for (status, count) in [("waiting", waiting), ("active", active)] {
                            self.games
                                .get_or_create(&StatusLabels { status })
                                .set(i64::try_from(count).unwrap_or(i64::MAX));
                        }
                    }
                    // The gauges keep their last values; the scrape still answers.
                    Err(error) => warn!(%error, "metrics: cannot count the open games"),
                }
                // A failed count waits its turn too: a store that is down is not asked faster.
                *counted = Some(Instant::now());
            }
        }
        let mut text = String::new();
        if let Err(error) = prometheus_client::encoding::text::encode(&mut text, &self.registry) {
            warn!(%error, "metrics: cannot encode");
        }
        text
    }
}

impl CommitObserver for Metrics {
    fn committed(&self, create: bool, elapsed: Duration, result: Result<&Committed, &StoreError>) {
        self.commit_seconds[usize::from(!create)].observe(elapsed.as_secs_f64());
        let committed = match result {
            Ok(committed) => committed,
            Err(_) => {
                self.commit_failures.inc();
                return;
            }
        };
        if create {
            self.games_created.inc();
        }
        for event in &committed.game_events {
            match &event.kind {
                GameEventKind::MovePlayed { .. } => {
                    self.moves.inc();
                }
                GameEventKind::GameOver { result, .. } => {
                    self.games_finished
                        .get_or_create(&ReasonLabels {
                            reason: termination_label(result.termination),
                        })
                        .inc();
                }
                _ => {}
            }
        }
    }
}

fn termination_label(termination: Termination) -> &'static str {
    use oanquan_rules::EndReason;
    match termination {
        Termination::Rules(EndReason::Mandarins) => "mandarins",
        Termination::Rules(EndReason::Repetition) => "repetition",
        Termination::Rules(EndReason::PlyLimit) => "ply_limit",
        Termination::Resignation => "resignation",
        Termination::Aborted => "aborted",
        Termination::Timeout => "timeout",
        Termination::Agreement => "agreement",
        Termination::Abandonment => "abandonment",
    }
}

/// The content type of the OpenMetrics text format.
const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Serves `metrics` over HTTP/1.1 on `listener` until `stop` turns `true`: `GET /metrics`
/// (with `token`, only to requests that carry it: others get 401), `GET /ready` (200 `ready`,
/// or 503 with the reason from `readiness`) and `GET /live` (200 while the process answers);
/// anything else is 404. A request naming a host that `hosts` refuses gets 403 (a page
/// elsewhere must not read the metrics through DNS rebinding).
pub async fn serve(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    readiness: Readiness,
    token: Option<Arc<MetricsTokenFile>>,
    hosts: crate::web::HostCheck,
    mut stop: watch::Receiver<bool>,
) {
    // The first listener's readiness is the node's (a process serves one).
    let _ = metrics.readiness.set(readiness.clone());
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stop.wait_for(|stopping| *stopping) => return,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                // Out of file descriptors and the like: wait a little rather than spin.
                debug!(%error, "metrics: accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let metrics = Arc::clone(&metrics);
        let readiness = readiness.clone();
        let token = token.clone();
        let hosts = hosts.clone();
        let local = stream.local_addr().ok().map(|addr| addr.ip());
        let mut stop = stop.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request: http::Request<_>| {
                let metrics = Arc::clone(&metrics);
                let readiness = readiness.clone();
                let token = token.clone();
                let admitted =
                    hosts.admit(Some(peer.ip()), local, request.uri(), request.headers());
                async move {
                    let response =
                        respond(&metrics, &readiness, token.as_deref(), admitted, &request).await;
                    match response.status() {
                        http::StatusCode::UNAUTHORIZED => {
                            debug!(%peer, "metrics: a scrape without the token refused");
                        }
                        http::StatusCode::FORBIDDEN => {
                            debug!(%peer, "metrics: a request naming a host not allowed refused");
                        }
                        _ => {}
                    }
                    Ok::<_, std::convert::Infallible>(response)
                }
            });
            let connection = http1::Builder::new()
                .header_read_timeout(Duration::from_secs(10))
                .timer(hyper_util::rt::TokioTimer::new())
                .serve_connection(TokioIo::new(stream), service);
            tokio::pin!(connection);
            tokio::select! {
                result = connection.as_mut() => if let Err(error) = result {
                    debug!(%error, %peer, "metrics: connection ended");
                },
                _ = stop.wait_for(|stopping| *stopping) => {}
            }
        });
    }
}

async fn respond<B>(
    metrics: &Metrics,
    readiness: &Readiness,
    token: Option<&MetricsTokenFile>,
    admitted: Result<(), crate::web::HostRefused>,
    request: &http::Request<B>,
) -> http::Response<Full<Bytes>> {
    let response = |status: http::StatusCode, content_type: &str, body: String| {
        let mut response = http::Response::new(Full::new(Bytes::from(body)));
        *response.status_mut() = status;
        if let Ok(value) = http::HeaderValue::from_str(content_type) {
            response
                .headers_mut()
                .insert(http::header::CONTENT_TYPE, value);
        }
        response
    };
    if let Err(refused) = admitted {
        return response(
            http::StatusCode::FORBIDDEN,
            "text/plain",
            format!("{refused}\n"),
        );
    }
    // HEAD as GET: hyper sends the headers only. Some probes use it.
    let read = matches!(*request.method(), http::Method::GET | http::Method::HEAD);
    match (read, request.uri().path()) {
        (true, "/metrics") if token.is_some_and(|token| !token.admits(request.headers())) => {
            let mut refused = response(
                http::StatusCode::UNAUTHORIZED,
                "text/plain",
                "unauthorized: send the metrics token as `Authorization: Bearer <token>`\n"
                    .to_owned(),
            );
            // RFC 6750 § 3: a request that sent credentials is told they are not valid.
            let challenge = if request.headers().contains_key(http::header::AUTHORIZATION) {
                r#"Bearer realm="metrics", error="invalid_token""#
            } else {
                r#"Bearer realm="metrics""#
            };
            refused.headers_mut().insert(
                http::header::WWW_AUTHENTICATE,
                http::HeaderValue::from_static(challenge),
            );
            refused
        }
        (true, "/metrics") => response(http::StatusCode::OK, CONTENT_TYPE, metrics.render().await),
        (true, "/ready") => match readiness.get() {
            Ok(()) => response(http::StatusCode::OK, "text/plain", "ready\n".to_owned()),
            Err(why) => response(
                http::StatusCode::SERVICE_UNAVAILABLE,
                "text/plain",
                format!("not ready: {why}\n"),
            ),
        },
        (true, "/live") => response(http::StatusCode::OK, "text/plain", "live\n".to_owned()),
        (false, "/metrics" | "/ready" | "/live") => {
            let mut refused = response(
                http::StatusCode::METHOD_NOT_ALLOWED,
                "text/plain",
                "GET only\n".to_owned(),
            );
            refused.headers_mut().insert(
                http::header::ALLOW,
                http::HeaderValue::from_static("GET, HEAD"),
            );
            refused
        }
        _ => response(
            http::StatusCode::NOT_FOUND,
            "text/plain",
            "not found: try /metrics, /ready or /live\n".to_owned(),
        ),
    }
}
