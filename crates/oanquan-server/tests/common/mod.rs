//! An in-process server on 127.0.0.1:0 and helpers shared by the integration tests.
#![allow(dead_code)]

pub mod nodes;

use std::net::SocketAddr;
use std::time::Duration;

use oanquan_proto::v1 as pb;
use oanquan_proto::v1::game_service_client::GameServiceClient;
use oanquan_proto::v1::rules_service_client::RulesServiceClient;
use oanquan_server::{Config, ServeError, Storage};
use reflection::server_reflection_client::ServerReflectionClient;
use reflection::server_reflection_request::MessageRequest;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::transport::Channel;
use tonic::{Code, Request, Status};
use tonic_reflection::pb::v1 as reflection;
use tonic_types::StatusExt as _;

pub type Games = GameServiceClient<Channel>;

/// A running server; dropped = aborted.
pub struct TestServer {
    pub addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    handle: Option<JoinHandle<Result<(), ServeError>>>,
    /// The database's directory when the suite runs on SQLite; removed on drop.
    _database: Option<tempfile::TempDir>,
}

/// A config for tests: short heartbeats and drain.
pub fn config() -> Config {
    let mut settings = Config::default();
    settings.streams.heartbeat_interval = Duration::from_millis(200);
    settings.transport.shutdown_drain_timeout = Duration::from_secs(2);
    // Requests up to the response bound, as before `--max-request-size`: the hostile-input
    // tests send megabyte names and ids to check what the services make of them, which an
    // operator who raises the request bound gets. The default bound has its own test
    // (`flags.rs`, through the binary).
    settings.transport.max_request_size = settings.transport.max_message_size;
    settings
}

/// Starts a server. With `OANQUAN_TEST_STORAGE=sqlite`, a test that asks for the in-memory
/// store gets a fresh SQLite database instead, so the whole suite can run on both stores
/// (except the tests of the memory store's event retention: SQLite keeps whole logs).
pub async fn start(mut config: Config) -> TestServer {
    let defaults = Config::default();
    let memory_only = config.memory.game_event_retention != defaults.memory.game_event_retention
        || config.memory.lobby_event_retention != defaults.memory.lobby_event_retention;
    let database = match config.storage {
        Storage::InMemory
            if !memory_only && std::env::var("OANQUAN_TEST_STORAGE").as_deref() == Ok("sqlite") =>
        {
            let dir = tempfile::tempdir().unwrap();
            config.storage = Storage::Sqlite(dir.path().join("oanquan.db"));
            Some(dir)
        }
        _ => None,
    };
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let handle = tokio::spawn(oanquan_server::run(listener, config, async {
        let _ = stopped.await;
    }));
    TestServer {
        addr,
        stop: Some(stop),
        handle: Some(handle),
        _database: database,
    }
}

impl TestServer {
    pub async fn channel(&self) -> Channel {
        Channel::from_shared(format!("http://{}", self.addr))
            .unwrap()
            .connect()
            .await
            .unwrap()
    }

    pub async fn games(&self) -> Games {
        GameServiceClient::new(self.channel().await)
    }

    pub async fn rules(&self) -> RulesServiceClient<Channel> {
        RulesServiceClient::new(self.channel().await)
    }

    /// Triggers shutdown without waiting.
    pub fn trigger_shutdown(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }

    /// Shuts down and waits for `run` to return.
    pub async fn stop(mut self) -> Result<(), ServeError> {
        self.trigger_shutdown();
        self.handle.take().unwrap().await.unwrap()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(handle) = &self.handle {
            handle.abort();
        }
    }
}

pub fn authed<T>(message: T, token: &str) -> Request<T> {
    let mut request = Request::new(message);
    request
        .metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    request
}

pub fn preset(name: &str) -> Option<pb::RulesSpec> {
    Some(pb::RulesSpec {
        kind: Some(pb::rules_spec::Kind::Preset(name.to_owned())),
    })
}

/// The open seeks, as ListSeeks lists them.
pub async fn list_seeks(client: &mut Games) -> Vec<pb::Seek> {
    client
        .list_seeks(pb::ListSeeksRequest {})
        .await
        .unwrap()
        .into_inner()
        .seeks
}

/// Lan's request for a game of `preset_name` in the first seat, waiting for an opponent.
pub fn lan_creates(preset_name: &str) -> pb::CreateGameRequest {
    pb::CreateGameRequest {
        rules: preset(preset_name),
        seat: pb::Player::First.into(),
        display_name: "Lan".into(),
        ..Default::default()
    }
}

/// Creates a game as PLAYER_FIRST: (game, token).
pub async fn create(client: &mut Games, preset_name: &str) -> (pb::Game, String) {
    let response = client
        .create_game(lan_creates(preset_name))
        .await
        .unwrap()
        .into_inner();
    (response.game.unwrap(), response.player_token)
}

/// `after` is `before` with its turn resumed by a restart: the same game but for a
/// `turn_start_time` moved later by the outage.
pub fn assert_resumed(before: &pb::Game, after: &pb::Game) {
    let start = |game: &pb::Game| game.turn_start_time.map(|t| (t.seconds, t.nanos));
    assert!(start(after) >= start(before), "{before:?}\n{after:?}");
    let unmoved = pb::Game {
        turn_start_time: before.turn_start_time,
        ..after.clone()
    };
    assert_eq!(&unmoved, before);
}

/// A started game: (id, first player's token, second player's token).
pub async fn started(client: &mut Games, preset_name: &str) -> (String, String, String) {
    let (game, first) = create(client, preset_name).await;
    let joined = client
        .join_game(pb::JoinGameRequest {
            game_id: game.id.clone(),
            display_name: "Minh".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(joined.seat, i32::from(pb::Player::Second));
    (game.id, first, joined.player_token)
}

/// Creates the game `request` asks for and joins it as "Minh": (id, creator's token, joiner's
/// token).
pub async fn create_and_join(
    client: &mut Games,
    request: pb::CreateGameRequest,
) -> (String, String, String) {
    let created = client.create_game(request).await.unwrap().into_inner();
    let id = created.game.unwrap().id;
    let joined = client
        .join_game(pb::JoinGameRequest {
            game_id: id.clone(),
            display_name: "Minh".into(),
        })
        .await
        .unwrap()
        .into_inner();
    (id, created.player_token, joined.player_token)
}

pub fn mv(square: u32, direction: pb::Direction) -> Option<pb::Move> {
    Some(pb::Move {
        square: Some(square),
        direction: direction.into(),
    })
}

pub async fn play(
    client: &mut Games,
    id: &str,
    token: &str,
    square: u32,
    direction: pb::Direction,
    expected_ply: Option<u32>,
) -> Result<pb::PlayMoveResponse, Status> {
    client
        .play_move(authed(
            pb::PlayMoveRequest {
                game_id: id.to_owned(),
                r#move: mv(square, direction),
                expected_ply,
            },
            token,
        ))
        .await
        .map(tonic::Response::into_inner)
}

/// Asserts a status code and ErrorInfo reason (domain oanquan.v1).
pub fn assert_reason(status: &Status, code: Code, reason: &str) {
    assert_eq!(status.code(), code, "{status:?}");
    let info = status
        .get_details_error_info()
        .unwrap_or_else(|| panic!("no ErrorInfo in {status:?}"));
    assert_eq!(info.reason, reason, "{status:?}");
    assert_eq!(info.domain, "oanquan.v1");
}

/// Asserts INVALID_ARGUMENT with a BadRequest violation on `field`.
pub fn assert_field(status: &Status, field: &str) {
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    let bad = status
        .get_details_bad_request()
        .unwrap_or_else(|| panic!("no BadRequest in {status:?}"));
    assert!(
        bad.field_violations.iter().any(|v| v.field == field),
        "expected a violation on {field}: {status:?}"
    );
}

/// The next stream message within 5 s.
pub async fn next<T>(stream: &mut tonic::Streaming<T>) -> Result<Option<T>, Status> {
    tokio::time::timeout(Duration::from_secs(5), stream.message())
        .await
        .expect("stream stalled")
}

/// Opens a server-reflection (v1) stream on `client` that sends `request` `n` times, and
/// returns its answers.
pub async fn reflection_stream(
    client: &mut ServerReflectionClient<Channel>,
    n: usize,
    request: MessageRequest,
) -> tonic::Streaming<reflection::ServerReflectionResponse> {
    let requests = (0..n).map(move |_| reflection::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(request.clone()),
    });
    client
        .server_reflection_info(tokio_stream::iter(requests))
        .await
        .unwrap()
        .into_inner()
}

/// The next game event that is not a heartbeat.
pub async fn next_game_event(
    stream: &mut tonic::Streaming<pb::WatchGameResponse>,
) -> Option<pb::GameEvent> {
    loop {
        let event = next(stream).await.unwrap()?.event.unwrap();
        if !matches!(event.kind, Some(pb::game_event::Kind::Heartbeat(_))) {
            return Some(event);
        }
    }
}

/// Starts watching `id` without `after_sequence`; returns the stream and its first event, which
/// must be the snapshot.
pub async fn watch_snapshot(
    client: &mut Games,
    id: &str,
) -> (tonic::Streaming<pb::WatchGameResponse>, pb::GameEvent) {
    let mut watch = client
        .watch_game(pb::WatchGameRequest {
            game_id: id.to_owned(),
            after_sequence: None,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let snapshot = next_game_event(&mut watch).await.unwrap();
    assert!(
        matches!(snapshot.kind, Some(pb::game_event::Kind::Snapshot(_))),
        "{snapshot:?}"
    );
    (watch, snapshot)
}

/// `GetGame`, which must succeed.
pub async fn get_game(games: &mut Games, id: &str) -> pb::Game {
    games
        .get_game(pb::GetGameRequest {
            game_id: id.to_owned(),
        })
        .await
        .unwrap()
        .into_inner()
        .game
        .unwrap()
}

/// Resigns game `id` with the seat `token`.
pub async fn resign(client: &mut Games, id: &str, token: &str) {
    client
        .resign(authed(
            pb::ResignRequest {
                game_id: id.to_owned(),
            },
            token,
        ))
        .await
        .unwrap();
}

/// Plays the first legal move for the player to move, with whichever of `tokens` is theirs;
/// returns the game after it.
pub async fn play_one(client: &mut Games, id: &str, tokens: (&str, &str)) -> pb::Game {
    let game = get_game(client, id).await;
    let rules = oanquan_rules::Preset::Standard.rules();
    let position =
        oanquan_server::grpc::convert::position(game.position.as_ref(), rules, "position").unwrap();
    let mv = position.legal_moves()[0];
    play_move(client, id, tokens, &position, mv).await
}

/// Plays `mv` in `position` (the game's current one) with whichever of `tokens` belongs to the
/// player to move, at the position's ply; returns the game after it.
pub async fn play_move(
    client: &mut Games,
    id: &str,
    tokens: (&str, &str),
    position: &oanquan_rules::Position,
    mv: oanquan_rules::Move,
) -> pb::Game {
    let token = match position.to_move() {
        oanquan_rules::Player::First => tokens.0,
        oanquan_rules::Player::Second => tokens.1,
    };
    let direction = match mv.direction {
        oanquan_rules::Direction::Right => pb::Direction::Right,
        oanquan_rules::Direction::Left => pb::Direction::Left,
    };
    play(
        client,
        id,
        token,
        u32::from(mv.square),
        direction,
        Some(position.ply()),
    )
    .await
    .unwrap()
    .game
    .unwrap()
}

/// A self-signed certificate for `localhost`: (certificate PEM, key PEM).
pub fn certificate() -> (String, String) {
    let key = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    (key.cert.pem(), key.signing_key.serialize_pem())
}

/// A TLS connection to `addr` trusting only `ca`, for the name `localhost`.
pub async fn tls_channel(addr: SocketAddr, ca: &str) -> Result<Channel, tonic::transport::Error> {
    use tonic::transport::{Certificate, ClientTlsConfig, Endpoint};
    Endpoint::from_shared(format!("https://{addr}"))
        .unwrap()
        .tls_config(
            ClientTlsConfig::new()
                .ca_certificate(Certificate::from_pem(ca))
                .domain_name("localhost"),
        )
        .unwrap()
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(10))
        .connect()
        .await
}

/// The gRPC and metrics addresses a server started with `--metrics-listen` prints first, in
/// that order, on its piped stdout.
pub fn metered_addresses(child: &mut std::process::Child) -> (SocketAddr, SocketAddr) {
    use std::io::BufRead as _;
    let mut lines = std::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut address = |prefix: &str| -> SocketAddr {
        let line = lines.next().expect("a line").expect("readable");
        line.strip_prefix(prefix)
            .unwrap_or_else(|| panic!("expected {prefix:?}, got {line:?}"))
            .parse()
            .expect("an address")
    };
    let addr = address("oanquan-server listening on ");
    let metrics = address("oanquan-server metrics listening on ");
    (addr, metrics)
}

/// A plain HTTP/1.1 GET of `path` from `addr` that closes the connection: (head, body).
pub fn http_get(addr: SocketAddr, path: &str) -> (String, String) {
    http_request(addr, "GET", path)
}

/// A plain HTTP/1.1 request of `method` without a body that closes the connection: (head,
/// body).
pub fn http_request(addr: SocketAddr, method: &str, path: &str) -> (String, String) {
    http_request_with(addr, method, path, b"")
}

/// [`http_request`] with more header lines, as raw bytes (any bytes, each line ending in
/// `\r\n`).
pub fn http_request_with(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[u8],
) -> (String, String) {
    use std::io::{Read as _, Write as _};
    let mut stream = std::net::TcpStream::connect(addr).expect("connect over HTTP");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut request = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\n").into_bytes();
    request.extend_from_slice(headers);
    request.extend_from_slice(b"Content-Length: 0\r\nConnection: close\r\n\r\n");
    stream.write_all(&request).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("a response");
    let (head, body) = response.split_once("\r\n\r\n").expect("headers end");
    (head.to_owned(), body.to_owned())
}

/// A gRPC message frame as it goes on the wire: the compressed flag, the length it declares
/// (which a hostile test may set to anything) and the payload.
pub fn grpc_frame(compressed: bool, declared: u32, payload: &[u8]) -> bytes::Bytes {
    use bytes::BufMut as _;
    let mut frame = bytes::BytesMut::with_capacity(5 + payload.len());
    frame.put_u8(u8::from(compressed));
    frame.put_u32(declared);
    frame.put_slice(payload);
    frame.freeze()
}

/// A gRPC call over raw HTTP/2 on a connection of its own, with any body and any
/// `authorization`: the `grpc-status` and `grpc-message` it ends with, or `None` for a stream
/// still open after `wait` (its messages are read and dropped). Panics if no response comes
/// within 10 s or the server resets the stream: neither is an answer a client can act on.
pub async fn raw_grpc_call(
    addr: SocketAddr,
    path: &str,
    authorization: Option<&str>,
    body: bytes::Bytes,
    wait: Duration,
) -> Option<(String, String)> {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (client, connection) = h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(connection);
    let mut client = client.ready().await.unwrap();
    let mut request = http::Request::post(format!("http://{addr}{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    if let Some(value) = authorization {
        request = request.header("authorization", value);
    }
    let (response, mut send) = client
        .send_request(request.body(()).unwrap(), false)
        .unwrap();
    send.send_data(body, true).unwrap();
    let response = tokio::time::timeout(Duration::from_secs(10), response)
        .await
        .unwrap_or_else(|_| panic!("{path}: no response within 10 s"))
        .unwrap_or_else(|error| panic!("{path}: the stream was reset: {error}"));
    let status = |map: &http::HeaderMap| {
        let header = |name| {
            map.get(name)
                .map(|v: &http::HeaderValue| v.to_str().unwrap().to_owned())
                .unwrap_or_default()
        };
        map.contains_key("grpc-status")
            .then(|| (header("grpc-status"), header("grpc-message")))
    };
    let (parts, mut body) = response.into_parts();
    if let Some(answer) = status(&parts.headers) {
        return Some(answer);
    }
    let ended = tokio::time::timeout(wait, async {
        while let Some(data) = body.data().await {
            let data = data.unwrap_or_else(|error| panic!("{path}: body reset: {error}"));
            let _ = body.flow_control().release_capacity(data.len());
        }
        body.trailers().await
    })
    .await
    .ok()?;
    let trailers = ended
        .unwrap_or_else(|error| panic!("{path}: trailers reset: {error}"))
        .unwrap_or_else(|| panic!("{path}: a response without trailers"));
    Some(status(&trailers).unwrap_or_else(|| panic!("{path}: trailers without grpc-status")))
}

/// The real binary on a database file; killed (SIGKILL) when dropped or by [`Self::kill`].
pub struct ServerBinary {
    child: std::process::Child,
    pub addr: SocketAddr,
}

impl ServerBinary {
    pub fn start(database: &std::path::Path) -> Self {
        use std::io::BufRead as _;
        use std::process::{Command, Stdio};
        let mut child = Command::new(env!("CARGO_BIN_EXE_oanquan-server"))
            .args(["--listen", "127.0.0.1:0", "--database"])
            .arg(database)
            .env("RUST_LOG", "warn")
            .env_remove("OANQUAN_IN_MEMORY")
            .env_remove("OANQUAN_DATABASE")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn oanquan-server");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("read the first line");
        let addr = line
            .trim()
            .strip_prefix("oanquan-server listening on ")
            .unwrap_or_else(|| panic!("the server did not start; first line {line:?}"))
            .parse()
            .expect("an address");
        Self { child, addr }
    }

    pub async fn channel(&self) -> Channel {
        Channel::from_shared(format!("http://{}", self.addr))
            .unwrap()
            .connect()
            .await
            .unwrap()
    }

    /// SIGKILL: no drain, no close, no checkpoint.
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for ServerBinary {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How long until the server closes the connection `read` reads from (reading and dropping
/// anything it sends); `None` if it is still open after 5 s.
pub async fn closed_after(mut read: impl tokio::io::AsyncRead + Unpin) -> Option<Duration> {
    use tokio::io::AsyncReadExt as _;
    let started = std::time::Instant::now();
    let mut sink = [0; 4096];
    tokio::time::timeout(Duration::from_secs(5), async {
        while let Ok(1..) = read.read(&mut sink).await {}
    })
    .await
    .ok()
    .map(|()| started.elapsed())
}

/// A standard game with a real-time clock of one minute and no increment, created as the
/// first player ("Lan") and joined: (id, first token, second token).
pub async fn minute_game(client: &mut Games) -> (String, String, String) {
    create_and_join(
        client,
        pb::CreateGameRequest {
            rules: preset("standard"),
            seat: pb::Player::First.into(),
            display_name: "Lan".into(),
            time_control: Some(pb::TimeControl {
                kind: Some(pb::time_control::Kind::RealTime(
                    pb::time_control::RealTime {
                        initial: Some(prost_types::Duration {
                            seconds: 60,
                            nanos: 0,
                        }),
                        increment: Some(prost_types::Duration::default()),
                    },
                )),
            }),
            ..Default::default()
        },
    )
    .await
}

/// A `WatchLobby` stream, resumed after `after` if given.
pub async fn watch_lobby(
    client: &mut Games,
    after: Option<u64>,
) -> tonic::Streaming<pb::WatchLobbyResponse> {
    client
        .watch_lobby(pb::WatchLobbyRequest {
            after_sequence: after,
        })
        .await
        .expect("WatchLobby answers")
        .into_inner()
}

/// The time `player` has left in a timed `game`, as its clocks read.
pub fn remaining_of(game: &pb::Game, player: pb::Player) -> Duration {
    let clocks = game.clocks.as_ref().expect("a timed game has clocks");
    let left = match player {
        pb::Player::First => clocks.first_remaining,
        _ => clocks.second_remaining,
    };
    Duration::try_from(left.expect("a remaining time")).unwrap()
}
