//! The load client: many games played through the real API (create, join, moves until the end)
//! with spectators on every game, and the same client shape against the echo baseline.
//!
//! Every loop is bounded: workers stop at the end of the measurement window (or after a game
//! count), every call carries a deadline, and spectators stop when their game ends or when the
//! worker tells them to.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::StreamExt as _;
use hdrhistogram::Histogram;
use oanquan_proto::v1 as pb;
use oanquan_proto::v1::game_service_client::GameServiceClient;
use oanquan_rules::{Direction, Game, Move, Player, Preset};
use prost::Message as _;
use prost::bytes::Bytes;
use rand::rngs::SmallRng;
use rand::{Rng as _, SeedableRng as _};
use tokio::sync::{oneshot, watch};
use tonic::Request;
use tonic::metadata::AsciiMetadataValue;
use tonic::transport::{Channel, Endpoint};

use crate::echo::EchoRequest;
use crate::echo::echo_service_client::EchoServiceClient;

/// Deadline of every unary call.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// A worker gives up after this many failed calls (a dead or refusing server).
const MAX_ERRORS_PER_WORKER: u64 = 100;

/// HTTP/2 connections to one server; callers pick one by index.
#[derive(Debug, Clone)]
pub struct Pool {
    channels: Vec<Channel>,
}

impl Pool {
    /// Opens `connections` HTTP/2 connections (at least one) to `addr`, with `TCP_NODELAY`.
    ///
    /// # Errors
    ///
    /// If a connection cannot be made.
    pub async fn connect(addr: SocketAddr, connections: usize) -> anyhow::Result<Pool> {
        let endpoint = Endpoint::from_shared(format!("http://{addr}"))?
            .tcp_nodelay(true)
            .connect_timeout(Duration::from_secs(5))
            .timeout(CALL_TIMEOUT);
        let mut channels = Vec::with_capacity(connections.max(1));
        for _ in 0..connections.max(1) {
            channels.push(
                endpoint
                    .connect()
                    .await
                    .with_context(|| format!("connecting to {addr}"))?,
            );
        }
        Ok(Pool { channels })
    }

    /// Opens `per_node` connections (at least one) to each of `addrs`, interleaved, so that
    /// callers picked by consecutive indices go to the nodes in turn.
    ///
    /// # Errors
    ///
    /// If a connection cannot be made, or `addrs` is empty.
    pub async fn connect_nodes(addrs: &[SocketAddr], per_node: usize) -> anyhow::Result<Pool> {
        anyhow::ensure!(!addrs.is_empty(), "no node to connect to");
        let mut pools = Vec::with_capacity(addrs.len());
        for addr in addrs {
            pools.push(Pool::connect(*addr, per_node).await?);
        }
        let mut channels = Vec::with_capacity(addrs.len() * per_node.max(1));
        for index in 0..per_node.max(1) {
            for pool in &pools {
                channels.push(pool.channels[index].clone());
            }
        }
        Ok(Pool { channels })
    }

    /// The connection for caller `index` (round robin).
    #[must_use]
    pub fn get(&self, index: usize) -> Channel {
        self.channels[index % self.channels.len()].clone()
    }

    /// Number of connections.
    #[must_use]
    pub fn len(&self) -> usize {
        self.channels.len()
    }

    /// Always false: a pool has at least one connection.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.channels.is_empty()
    }
}

/// A latency histogram in microseconds, 1 µs to 100 s, 3 significant digits.
#[must_use]
pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 100_000_000, 3).expect("valid histogram bounds")
}

fn record(histogram: &mut Histogram<u64>, duration: Duration) {
    let micros = u64::try_from(duration.as_micros()).unwrap_or(u64::MAX);
    histogram.saturating_record(micros.max(1));
}

/// What one load run measured (merged over its workers).
#[derive(Debug, Clone)]
pub struct LoadStats {
    /// Length of the measurement window.
    pub window: Duration,
    /// Calls (moves, or echo calls) completed inside the window.
    pub ops: u64,
    /// Games played to their end (whole games, started at any time).
    pub games_finished: u64,
    /// Failed calls, streams or checks.
    pub errors: u64,
    /// The first failure, for the report.
    pub first_error: Option<String>,
    /// Latency of each call counted in `ops`, µs.
    pub latency: Histogram<u64>,
    /// CreateGame sent → first PlayMove acknowledged (create, join, move; minus the wait for the
    /// spectators' streams to open), µs.
    pub create_to_first_move: Histogram<u64>,
    /// Each call of those counted in `create_to_first_move`, µs: CreateGame, JoinGame, the
    /// first PlayMove (an echo round: its calls in order), to tell which one its tail is.
    pub first_calls: [Histogram<u64>; 3],
    /// PlayMove acknowledged → the last spectator of the game has the MovePlayed event, µs
    /// (0 when every spectator had it before the player had the acknowledgement).
    pub delivery: Histogram<u64>,
    /// Moves counted in `ops` that some spectator never received.
    pub delivery_missing: u64,
    /// Encoded request bytes of the calls counted in `ops` (protobuf, without framing).
    pub request_bytes: u64,
    /// Encoded response bytes of the calls counted in `ops`.
    pub response_bytes: u64,
}

impl LoadStats {
    fn new(window: Duration) -> LoadStats {
        LoadStats {
            window,
            ops: 0,
            games_finished: 0,
            errors: 0,
            first_error: None,
            latency: histogram(),
            create_to_first_move: histogram(),
            first_calls: [histogram(), histogram(), histogram()],
            delivery: histogram(),
            delivery_missing: 0,
            request_bytes: 0,
            response_bytes: 0,
        }
    }

    fn error(&mut self, what: impl std::fmt::Display) {
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(what.to_string());
        }
    }

    fn merge(&mut self, other: LoadStats) {
        self.ops += other.ops;
        self.games_finished += other.games_finished;
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
        self.latency.add(&other.latency).expect("same bounds");
        self.create_to_first_move
            .add(&other.create_to_first_move)
            .expect("same bounds");
        for (mine, theirs) in self.first_calls.iter_mut().zip(&other.first_calls) {
            mine.add(theirs).expect("same bounds");
        }
        self.delivery.add(&other.delivery).expect("same bounds");
        self.delivery_missing += other.delivery_missing;
        self.request_bytes += other.request_bytes;
        self.response_bytes += other.response_bytes;
    }

    /// Calls per second in the window.
    #[must_use]
    pub fn ops_per_second(&self) -> f64 {
        self.ops as f64 / self.window.as_secs_f64().max(1e-9)
    }

    /// Mean encoded request size, bytes.
    #[must_use]
    pub fn mean_request_bytes(&self) -> Option<usize> {
        (self.ops > 0).then(|| (self.request_bytes / self.ops) as usize)
    }

    /// Mean encoded response size, bytes.
    #[must_use]
    pub fn mean_response_bytes(&self) -> Option<usize> {
        (self.ops > 0).then(|| (self.response_bytes / self.ops) as usize)
    }
}

/// The measurement window shared by the workers of one run.
#[derive(Debug, Clone, Copy)]
struct Window {
    start: Instant,
    end: Instant,
}

impl Window {
    fn new(warmup: Duration, duration: Duration) -> Window {
        let start = Instant::now() + warmup;
        Window {
            start,
            end: start + duration,
        }
    }

    fn counts(&self, sent: Instant, done: Instant) -> bool {
        sent >= self.start && done <= self.end
    }

    fn over(&self) -> bool {
        Instant::now() >= self.end
    }

    /// Waits for `ticker`'s next tick; `false` if the window closes first (a slow pace must
    /// not keep a worker waiting past the run).
    async fn tick(&self, ticker: &mut tokio::time::Interval) -> bool {
        tokio::select! {
            _ = ticker.tick() => true,
            () = tokio::time::sleep_until(self.end.into()) => false,
        }
    }
}

/// How to drive the game API.
#[derive(Debug, Clone)]
pub struct GameLoad {
    /// Games in play at once (each with its two players in one task).
    pub workers: usize,
    /// Spectators (WatchGame streams) per game.
    pub spectators: usize,
    /// Run before the window opens (not counted).
    pub warmup: Duration,
    /// The measurement window.
    pub duration: Duration,
    /// Pause between a worker's moves (`None`: back to back).
    pub move_interval: Option<Duration>,
    /// Stop each worker after this many games (`None`: play until the window closes).
    pub games_per_worker: Option<usize>,
    /// Seed of the move choices.
    pub seed: u64,
}

/// Plays games through `pool` as `load` says and returns what was measured.
pub async fn run_games(pool: &Pool, load: &GameLoad) -> LoadStats {
    run_games_watched(pool, pool, load).await
}

/// [`run_games`] with the players on `players` and the spectators on `watchers`: with the two
/// on different server nodes of one database, the delivery figures are those of events that
/// crossed from one node to the other.
pub async fn run_games_watched(players: &Pool, watchers: &Pool, load: &GameLoad) -> LoadStats {
    let window = Window::new(load.warmup, load.duration);
    // On one pool the spectators' connections follow the players'; on a pool of their own they
    // start at its first.
    let spectator_base = if std::ptr::eq(players, watchers) {
        load.workers
    } else {
        0
    };
    let mut handles = Vec::with_capacity(load.workers);
    for worker in 0..load.workers {
        let pools = (players.clone(), watchers.clone());
        let load = load.clone();
        handles.push(tokio::spawn(async move {
            game_worker(&pools, &load, worker, spectator_base, window).await
        }));
    }
    let mut total = LoadStats::new(load.duration);
    for handle in handles {
        match handle.await {
            Ok(stats) => total.merge(stats),
            Err(error) => total.error(format!("worker panicked: {error}")),
        }
    }
    total
}

fn to_pb(mv: Move) -> pb::Move {
    pb::Move {
        square: Some(u32::from(mv.square)),
        direction: match mv.direction {
            Direction::Left => pb::Direction::Left,
            Direction::Right => pb::Direction::Right,
        }
        .into(),
    }
}

fn bearer(token: &str) -> anyhow::Result<AsciiMetadataValue> {
    Ok(format!("Bearer {token}").parse()?)
}

/// A request carrying the player's token.
fn authorized<T>(message: T, token: &AsciiMetadataValue) -> Request<T> {
    let mut request = Request::new(message);
    request
        .metadata_mut()
        .insert("authorization", token.clone());
    request
}

/// What a spectator saw: each MovePlayed event's move number and arrival time.
type Seen = Result<Vec<(u32, Instant)>, String>;

/// One game's spectators: their tasks and the signal that stops them early.
struct Spectators {
    handles: Vec<tokio::task::JoinHandle<Seen>>,
    stop: watch::Sender<bool>,
}

impl Spectators {
    /// Opens `count` WatchGame streams on `game_id` (resuming after sequence 1, so that no
    /// event is missed however late a stream opens) and waits until each has its response
    /// headers.
    async fn open(pool: &Pool, first_connection: usize, game_id: &str, count: usize) -> Spectators {
        let (stop, stop_rx) = watch::channel(false);
        let mut handles = Vec::with_capacity(count);
        let mut ready = Vec::with_capacity(count);
        for index in 0..count {
            let mut client = GameServiceClient::new(pool.get(first_connection + index))
                .max_decoding_message_size(16 * 1024 * 1024);
            let request = pb::WatchGameRequest {
                game_id: game_id.to_owned(),
                after_sequence: Some(1),
                ..Default::default()
            };
            let mut stop_rx = stop_rx.clone();
            let (ready_tx, ready_rx) = oneshot::channel::<()>();
            ready.push(ready_rx);
            handles.push(tokio::spawn(async move {
                let mut stream = client
                    .watch_game(request)
                    .await
                    .map_err(|status| format!("WatchGame: {status}"))?
                    .into_inner();
                let _ = ready_tx.send(());
                let mut seen = Vec::new();
                loop {
                    tokio::select! {
                        message = stream.message() => match message {
                            Ok(Some(message)) => {
                                if let Some(pb::game_event::Kind::MovePlayed(played)) =
                                    message.event.and_then(|event| event.kind)
                                {
                                    let number = played.record.map_or(0, |r| r.number);
                                    seen.push((number, Instant::now()));
                                }
                            }
                            Ok(None) => break,
                            Err(status) => return Err(format!("WatchGame stream: {status}")),
                        },
                        _ = stop_rx.changed() => break,
                    }
                }
                Ok(seen)
            }));
        }
        for ready_rx in ready {
            if ready_rx.await.is_err() {
                // The task ended before its headers: its error is collected in `finish`.
            }
        }
        Spectators { handles, stop }
    }

    /// Collects what the spectators saw. With `complete`, waits (bounded) for the streams to
    /// end on their own after GameOver; otherwise gives late events a short grace and stops
    /// them.
    async fn finish(self, complete: bool, acks: &[Option<Instant>], stats: &mut LoadStats) {
        if !complete {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let _ = self.stop.send(true);
        }
        let mut last: Vec<Option<Instant>> = vec![None; acks.len()];
        let mut received = vec![0_usize; acks.len()];
        let spectators = self.handles.len();
        for handle in self.handles {
            let outcome = tokio::time::timeout(Duration::from_secs(10), handle).await;
            let seen = match outcome {
                Ok(Ok(Ok(seen))) => seen,
                Ok(Ok(Err(error))) => {
                    stats.error(error);
                    continue;
                }
                Ok(Err(error)) => {
                    stats.error(format!("spectator panicked: {error}"));
                    continue;
                }
                Err(_) => {
                    let _ = self.stop.send(true);
                    stats.error("spectator stream did not end within 10 s of the game");
                    continue;
                }
            };
            for (number, at) in seen {
                let Some(index) = (number as usize).checked_sub(1) else {
                    continue;
                };
                if index < last.len() {
                    received[index] += 1;
                    last[index] = Some(last[index].map_or(at, |prev| prev.max(at)));
                }
            }
        }
        if spectators == 0 {
            return;
        }
        for (index, ack) in acks.iter().enumerate() {
            let Some(ack) = ack else { continue };
            match last[index] {
                Some(at) if received[index] == spectators => {
                    record(&mut stats.delivery, at.saturating_duration_since(*ack));
                }
                _ => stats.delivery_missing += 1,
            }
        }
    }
}

async fn game_worker(
    (pool, watchers): &(Pool, Pool),
    load: &GameLoad,
    worker: usize,
    spectator_base: usize,
    window: Window,
) -> LoadStats {
    let mut stats = LoadStats::new(load.duration);
    let mut rng = SmallRng::seed_from_u64(load.seed ^ (worker as u64).wrapping_mul(0x9E37_79B9));
    let mut client = GameServiceClient::new(pool.get(worker));
    let mut ticker = pacer(load.move_interval, worker, load.workers);
    let mut games = 0;
    while !window.over()
        && stats.errors < MAX_ERRORS_PER_WORKER
        && load.games_per_worker.is_none_or(|max| games < max)
    {
        games += 1;
        if let Some(ticker) = ticker.as_mut()
            && !window.tick(ticker).await
        {
            break;
        }
        if let Err(error) = play_one_game(
            watchers,
            load,
            &mut client,
            &mut rng,
            &mut ticker,
            spectator_base + worker * load.spectators,
            window,
            &mut stats,
        )
        .await
        {
            stats.error(format!("{error:#}"));
        }
    }
    stats
}

/// `worker`'s pacing: a tick every `period`, the first at its [`phase`]; `None` (back to back)
/// without a period, or with a zero one (a rate too high to pace), which `interval_at` would
/// refuse with a panic.
fn pacer(period: Option<Duration>, worker: usize, workers: usize) -> Option<tokio::time::Interval> {
    let period = period.filter(|p| !p.is_zero())?;
    let start = tokio::time::Instant::now() + phase(period, worker, workers);
    let mut ticker = tokio::time::interval_at(start, period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    Some(ticker)
}

/// When `worker`'s first paced call is due, as an offset into the first period.
///
/// Each worker's ticks are offset by its share of the period: started together, 64 workers
/// would all call in the same instant, a burst of 64 calls every period, which is the peak
/// load for a moment and idle the rest of the time, not the steady rate asked for.
fn phase(period: Duration, worker: usize, workers: usize) -> Duration {
    period.mul_f64(worker as f64 / workers.max(1) as f64)
}

#[allow(clippy::too_many_arguments)]
async fn play_one_game(
    watchers: &Pool,
    load: &GameLoad,
    client: &mut GameServiceClient<Channel>,
    rng: &mut SmallRng,
    ticker: &mut Option<tokio::time::Interval>,
    first_spectator_connection: usize,
    window: Window,
    stats: &mut LoadStats,
) -> anyhow::Result<()> {
    let created_at = Instant::now();
    let created = client
        .create_game(pb::CreateGameRequest {
            rules: None,
            start_position: None,
            seat: pb::Player::First.into(),
            display_name: "bench-first".to_owned(),
            computer: None,
            ..Default::default()
        })
        .await
        .context("CreateGame")?
        .into_inner();
    let created_done = Instant::now();
    let game_id = created.game.context("CreateGame: no game")?.id;
    let spectators = Spectators::open(
        watchers,
        first_spectator_connection,
        &game_id,
        load.spectators,
    );
    let join = async {
        let joined = client
            .join_game(pb::JoinGameRequest {
                game_id: game_id.clone(),
                display_name: "bench-second".to_owned(),
            })
            .await;
        (joined, Instant::now())
    };
    // Spectators subscribe while the second player joins; the first move waits for both.
    let (spectators, (joined, joined_at)) = tokio::join!(spectators, join);
    let joined = joined.context("JoinGame")?.into_inner();
    let tokens = [
        bearer(&created.player_token)?,
        bearer(&joined.player_token)?,
    ];

    let mut game = Game::new(Preset::Standard.rules()).context("standard rules")?;
    let mut acks: Vec<Option<Instant>> = Vec::new();
    let mut complete = false;
    let mut first = true;
    let mut outcome = Ok(());
    while !window.over() {
        if !first
            && let Some(ticker) = ticker.as_mut()
            && !window.tick(ticker).await
        {
            break;
        }
        let position = *game.position();
        let moves = position.legal_moves();
        let mv = moves[rng.random_range(0..moves.len())];
        let token = match position.to_move() {
            Player::First => &tokens[0],
            Player::Second => &tokens[1],
        };
        let message = pb::PlayMoveRequest {
            game_id: game_id.clone(),
            r#move: Some(to_pb(mv)),
            expected_ply: Some(position.ply()),
        };
        let request_bytes = message.encoded_len() as u64;
        let sent = Instant::now();
        let response = match client.play_move(authorized(message, token)).await {
            Ok(response) => response.into_inner(),
            Err(status) => {
                outcome = Err(anyhow::anyhow!("PlayMove: {status}"));
                break;
            }
        };
        let done = Instant::now();
        if window.counts(sent, done) {
            stats.ops += 1;
            record(&mut stats.latency, done - sent);
            stats.request_bytes += request_bytes;
            stats.response_bytes += response.encoded_len() as u64;
            acks.push(Some(done));
        } else {
            acks.push(None);
        }
        if first {
            first = false;
            if window.counts(created_at, done) {
                // Create and join, then the first move, without the time spent waiting for the
                // spectators' streams (the benchmark's wait, not the player's).
                record(
                    &mut stats.create_to_first_move,
                    (joined_at - created_at) + (done - sent),
                );
                let [create, join, play] = &mut stats.first_calls;
                record(create, created_done - created_at);
                record(join, joined_at - created_done);
                record(play, done - sent);
            }
        }
        if let Err(error) = game.play(mv) {
            outcome = Err(anyhow::anyhow!("local engine refused {mv:?}: {error}"));
            break;
        }
        let server_over = response
            .game
            .as_ref()
            .is_some_and(|g| g.status == i32::from(pb::GameStatus::Finished));
        if server_over != game.is_over() {
            outcome = Err(anyhow::anyhow!(
                "server and local engine disagree on the end of game {game_id}"
            ));
            break;
        }
        if server_over {
            complete = true;
            break;
        }
    }
    if complete {
        stats.games_finished += 1;
    }
    spectators.finish(complete, &acks, stats).await;
    outcome
}

/// How to drive the echo baseline: the same workers and connections as a [`GameLoad`], each
/// calling back to back, with request and reply sized like PlayMove's.
#[derive(Debug, Clone)]
pub struct EchoLoad {
    /// Concurrent callers.
    pub workers: usize,
    /// Run before the window opens (not counted).
    pub warmup: Duration,
    /// The measurement window.
    pub duration: Duration,
    /// Encoded size of each request (as a PlayMoveRequest), bytes.
    pub request_bytes: usize,
    /// Encoded size of each reply (as a PlayMoveResponse), bytes.
    pub response_bytes: usize,
    /// Pause between a caller's rounds (`None`: back to back), spread like [`GameLoad`]'s.
    pub round_interval: Option<Duration>,
    /// Calls a round makes back to back; a round's time (first call sent to last reply) goes
    /// into [`LoadStats::create_to_first_move`], the wire's share of a create → join → first
    /// move sequence when a round is 3 calls.
    pub calls_per_round: usize,
}

/// An echo request whose encoding is `size` bytes (or as near as the length varint allows) and that
/// asks for a reply whose encoding is `reply_bytes` bytes.
#[must_use]
pub fn echo_request(size: usize, reply_bytes: usize) -> EchoRequest {
    // The reply is one bytes field: tag, length varint, payload.
    let mut reply_size = reply_bytes;
    while reply_size > 0 && 1 + prost::length_delimiter_len(reply_size) + reply_size > reply_bytes {
        reply_size -= 1;
    }
    let mut request = EchoRequest {
        payload: Bytes::new(),
        reply_size: u32::try_from(reply_size).unwrap_or(u32::MAX),
    };
    let mut payload = size.saturating_sub(request.encoded_len() + 2);
    let with = |request: &mut EchoRequest, payload: usize| {
        request.payload = Bytes::from(vec![b'x'; payload]);
        request.encoded_len()
    };
    while with(&mut request, payload) < size {
        payload += 1;
    }
    while payload > 0 && with(&mut request, payload) > size {
        payload -= 1;
    }
    request
}

/// Calls the echo server through `pool` as `load` says and returns what was measured.
pub async fn run_echo(pool: &Pool, load: &EchoLoad) -> LoadStats {
    let window = Window::new(load.warmup, load.duration);
    // The same authorization header as a PlayMove call (a token is 43 characters).
    let token = bearer(&"t".repeat(43)).expect("ASCII token");
    let message = echo_request(load.request_bytes, load.response_bytes);
    let mut handles = Vec::with_capacity(load.workers);
    for worker in 0..load.workers {
        let mut client = EchoServiceClient::new(pool.get(worker));
        let message = message.clone();
        let token = token.clone();
        let duration = load.duration;
        let (round_interval, calls) = (load.round_interval, load.calls_per_round.max(1));
        let workers = load.workers;
        handles.push(tokio::spawn(async move {
            let mut stats = LoadStats::new(duration);
            let request_bytes = message.encoded_len() as u64;
            let mut ticker = pacer(round_interval, worker, workers);
            while !window.over() && stats.errors < MAX_ERRORS_PER_WORKER {
                if let Some(ticker) = ticker.as_mut()
                    && !window.tick(ticker).await
                {
                    break;
                }
                let round_sent = Instant::now();
                let mut whole_round = true;
                let mut took = [Duration::ZERO; 3];
                for call in 0..calls {
                    let sent = Instant::now();
                    match client.echo(authorized(message.clone(), &token)).await {
                        Ok(response) => {
                            let done = Instant::now();
                            if let Some(slot) = took.get_mut(call) {
                                *slot = done - sent;
                            }
                            if window.counts(sent, done) {
                                stats.ops += 1;
                                record(&mut stats.latency, done - sent);
                                stats.request_bytes += request_bytes;
                                stats.response_bytes += response.get_ref().encoded_len() as u64;
                            }
                        }
                        Err(status) => {
                            stats.error(format!("Echo: {status}"));
                            whole_round = false;
                            break;
                        }
                    }
                }
                let done = Instant::now();
                if whole_round && calls > 1 && window.counts(round_sent, done) {
                    record(&mut stats.create_to_first_move, done - round_sent);
                    for (histogram, took) in stats.first_calls.iter_mut().zip(took).take(calls) {
                        record(histogram, took);
                    }
                }
            }
            stats
        }));
    }
    let mut total = LoadStats::new(load.duration);
    for handle in handles {
        match handle.await {
            Ok(stats) => total.merge(stats),
            Err(error) => total.error(format!("worker panicked: {error}")),
        }
    }
    total
}

/// Creates `games` waiting games (one CreateGame each) and returns their ids.
///
/// # Errors
///
/// The first failed call.
pub async fn create_games(pool: &Pool, games: usize) -> anyhow::Result<Vec<String>> {
    let mut ids = Vec::with_capacity(games);
    for index in 0..games {
        let mut client = GameServiceClient::new(pool.get(index));
        let created = client
            .create_game(pb::CreateGameRequest {
                rules: None,
                start_position: None,
                seat: pb::Player::First.into(),
                display_name: "bench-idle".to_owned(),
                computer: None,
                ..Default::default()
            })
            .await
            .context("CreateGame")?
            .into_inner();
        ids.push(created.game.context("CreateGame: no game")?.id);
    }
    Ok(ids)
}

/// Open WatchGame streams, held until dropped.
#[derive(Debug)]
pub struct IdleStreams {
    /// The streams, each past its first message (the Snapshot).
    pub streams: Vec<tonic::Streaming<pb::WatchGameResponse>>,
    /// Streams that failed to open.
    pub errors: u64,
    /// The first failure.
    pub first_error: Option<String>,
    /// Time to open them all.
    pub elapsed: Duration,
}

/// Opens `per_game` WatchGame streams on each game of `game_ids`, spread over the pool's
/// connections, `parallel` at a time, and waits for each stream's Snapshot.
pub async fn open_idle_streams(
    pool: &Pool,
    game_ids: &[String],
    per_game: usize,
    parallel: usize,
) -> IdleStreams {
    let started = Instant::now();
    let game_ids: Arc<[String]> = game_ids.into();
    let total = game_ids.len() * per_game;
    let results: Vec<Result<tonic::Streaming<pb::WatchGameResponse>, String>> =
        futures::stream::iter(0..total)
            .map(|index| {
                let mut client = GameServiceClient::new(pool.get(index));
                let game_id = game_ids[index % game_ids.len()].clone();
                async move {
                    let mut stream = client
                        .watch_game(pb::WatchGameRequest {
                            game_id,
                            after_sequence: None,
                            ..Default::default()
                        })
                        .await
                        .map_err(|status| format!("WatchGame: {status}"))?
                        .into_inner();
                    match tokio::time::timeout(CALL_TIMEOUT, stream.message()).await {
                        Ok(Ok(Some(_snapshot))) => Ok(stream),
                        Ok(Ok(None)) => Err("WatchGame ended at once".to_owned()),
                        Ok(Err(status)) => Err(format!("WatchGame stream: {status}")),
                        Err(_) => Err("no Snapshot within 10 s".to_owned()),
                    }
                }
            })
            .buffer_unordered(parallel.max(1))
            .collect()
            .await;
    let mut idle = IdleStreams {
        streams: Vec::with_capacity(total),
        errors: 0,
        first_error: None,
        elapsed: Duration::ZERO,
    };
    for result in results {
        match result {
            Ok(stream) => idle.streams.push(stream),
            Err(error) => {
                idle.errors += 1;
                if idle.first_error.is_none() {
                    idle.first_error = Some(error);
                }
            }
        }
    }
    idle.elapsed = started.elapsed();
    idle
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paced_workers_start_spread_over_one_period() {
        let period = Duration::from_millis(6);
        let phases: Vec<_> = (0..64).map(|w| phase(period, w, 64)).collect();
        assert_eq!(phases[0], Duration::ZERO);
        assert!(phases.windows(2).all(|p| p[0] < p[1]), "{phases:?}");
        assert!(phases[63] < period);
        // Evenly: 64 workers, one every 6 ms / 64.
        assert_eq!(phases[32], period / 2);
    }

    /// `workers` callers making rounds of three echo calls `round_interval` apart, for
    /// `duration`, to a port where nothing listens: every call fails at once.
    async fn echo_nowhere(
        workers: usize,
        duration: Duration,
        round_interval: Duration,
    ) -> LoadStats {
        let pool = Pool {
            channels: vec![Channel::from_static("http://127.0.0.1:9").connect_lazy()],
        };
        let load = EchoLoad {
            workers,
            warmup: Duration::ZERO,
            duration,
            request_bytes: 60,
            response_bytes: 60,
            round_interval: Some(round_interval),
            calls_per_round: 3,
        };
        run_echo(&pool, &load).await
    }

    #[tokio::test]
    async fn a_zero_period_plays_back_to_back_instead_of_panicking() {
        // Every call fails, and the worker ends on its error limit.
        let stats = echo_nowhere(1, Duration::from_millis(50), Duration::ZERO).await;
        assert!(stats.errors > 0);
        assert!(
            stats
                .first_error
                .as_deref()
                .is_some_and(|e| e.starts_with("Echo:")),
            "{:?}",
            stats.first_error
        );
    }

    #[tokio::test]
    async fn a_slow_pace_ends_with_the_window() {
        // A round an hour: the second caller's first is half an hour away.
        let run = tokio::time::timeout(
            Duration::from_secs(10),
            echo_nowhere(2, Duration::from_millis(100), Duration::from_secs(3600)),
        )
        .await;
        assert!(run.is_ok(), "a paced caller waited past the window");
    }

    #[test]
    fn one_worker_or_none_starts_at_once() {
        let period = Duration::from_millis(6);
        assert_eq!(phase(period, 0, 1), Duration::ZERO);
        assert_eq!(phase(period, 0, 0), Duration::ZERO);
    }
}
