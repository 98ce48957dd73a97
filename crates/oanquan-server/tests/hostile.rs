//! Hostile input and faults: a bad-input matrix over every RPC, garbage on the wire, abuse
//! limits (rate, open games, idle games), slow consumers and TLS. After each, the server must
//! be healthy and a game running in parallel must be untouched: its moves go on succeeding and
//! its watcher sees every event.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use oanquan_proto::v1 as pb;
use pb::Direction::{Left, Right};
use pb::game_event::Kind;
use prost::Message as _;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Status};
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_types::StatusExt as _;

/// A config with every per-client limit counting loopback clients, but off unless a test
/// turns it on.
fn hostile_config() -> oanquan_server::Config {
    let mut settings = config();
    settings.clients.exempt_loopback = false;
    settings.clients.rate_limit = 0.0;
    settings.games.max_open_games_per_client = 0;
    settings
}

async fn assert_serving(channel: Channel) {
    let mut health = HealthClient::new(channel);
    for service in ["", "oanquan.v1.GameService", "oanquan.v1.RulesService"] {
        let status = health
            .check(tonic_health::pb::HealthCheckRequest {
                service: service.into(),
            })
            .await
            .unwrap()
            .into_inner()
            .status;
        assert_eq!(status, i32::from(ServingStatus::Serving), "{service:?}");
    }
}

/// A client connecting from another loopback address (the server sees a different peer).
async fn channel_from(source: &str, addr: SocketAddr) -> Channel {
    try_channel_from(source, addr).await.unwrap()
}

/// A connection from `source` (any 127.0.0.0/8 address), or the error of making it.
async fn try_channel_from(
    source: &str,
    addr: SocketAddr,
) -> Result<Channel, tonic::transport::Error> {
    let source: std::net::IpAddr = source.parse().unwrap();
    Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(5))
        .connect_with_connector(tower::service_fn(move |_uri: http::Uri| async move {
            let socket = tokio::net::TcpSocket::new_v4()?;
            socket.bind(SocketAddr::new(source, 0))?;
            let stream = socket.connect(addr).await?;
            Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
        }))
        .await
}

/// Whether a new connection from `source` gets an answer.
async fn connection_served(source: &str, addr: SocketAddr) -> bool {
    match try_channel_from(source, addr).await {
        Ok(channel) => pb::rules_service_client::RulesServiceClient::new(channel)
            .list_presets(pb::ListPresetsRequest {})
            .await
            .is_ok(),
        Err(_) => false,
    }
}

/// A game played in parallel with the abuse, with a watcher that must see every event.
struct Bystander {
    client: Games,
    id: String,
    tokens: [String; 2],
    watch: tonic::Streaming<pb::WatchGameResponse>,
    last_sequence: u64,
    moves: u32,
}

impl Bystander {
    async fn new(client: Games) -> Bystander {
        let mut client = client;
        let (id, first, second) = started(&mut client, "standard").await;
        let (watch, snapshot) = watch_snapshot(&mut client, &id).await;
        Bystander {
            client,
            id,
            tokens: [first, second],
            watch,
            last_sequence: snapshot.sequence,
            moves: 0,
        }
    }

    /// Plays one legal move and checks that the watcher sees it, with no gap.
    async fn advance(&mut self) {
        let game = self
            .client
            .get_game(pb::GetGameRequest {
                game_id: self.id.clone(),
            })
            .await
            .unwrap()
            .into_inner()
            .game
            .unwrap();
        assert_eq!(game.status, i32::from(pb::GameStatus::Active), "{game:?}");
        let position = game.position.unwrap();
        let seat = usize::from(position.to_move != i32::from(pb::Player::First));
        let first_own = if seat == 0 { 1 } else { 7 };
        let square = (first_own..first_own + 5)
            .find(|&s| position.squares[s as usize] > 0)
            .expect("a square to play");
        let response = play(
            &mut self.client,
            &self.id,
            &self.tokens[seat],
            square,
            // Always sowing left from the first non-empty square lasts the full 300 plies.
            Left,
            Some(position.ply),
        )
        .await
        .unwrap();
        self.moves += 1;
        // MovePlayed, then TurnStarted or GameOver.
        let mut saw_move = false;
        loop {
            let event = next_game_event(&mut self.watch).await.expect("stream open");
            assert_eq!(event.sequence, self.last_sequence + 1, "gap: {event:?}");
            self.last_sequence = event.sequence;
            match event.kind {
                Some(Kind::MovePlayed(_)) => saw_move = true,
                Some(Kind::TurnStarted(_)) if saw_move => break,
                Some(Kind::GameOver(_)) => {
                    // Over by the rules: start another one.
                    let fresh = Bystander::new(self.client.clone()).await;
                    *self = fresh;
                    return;
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        assert!(response.record.is_some());
    }
}

/// What a refused call must carry besides its code.
#[derive(Debug, Clone, Copy)]
enum Detail {
    /// A `google.rpc.BadRequest` with a violation on this field.
    Field(&'static str),
    /// A `google.rpc.ErrorInfo` with this reason.
    Reason(&'static str),
    /// The code alone.
    None,
}

use Detail::{Field, Reason};

/// One bad call of an RPC: what it tries, the request, and how it must be refused.
struct Row<R> {
    name: &'static str,
    request: tonic::Request<R>,
    code: Code,
    detail: Detail,
}

fn row<R>(
    name: &'static str,
    request: impl tonic::IntoRequest<R>,
    code: Code,
    detail: Detail,
) -> Row<R> {
    Row {
        name,
        request: request.into_request(),
        code,
        detail,
    }
}

/// An RPC of `client` (cloned for each call), as [`Matrix::check`] takes it.
macro_rules! rpc {
    ($client:expr, $method:ident) => {{
        let client = $client.clone();
        move |request| {
            let mut client = client.clone();
            async move { client.$method(request).await }
        }
    }};
}

/// A server with a game in every state for bad calls to aim at, and a game played beside them
/// that they must not touch.
struct Matrix {
    server: TestServer,
    bystander: Bystander,
    games: Games,
    rules: pb::rules_service_client::RulesServiceClient<Channel>,
    /// Waiting for its second player.
    waiting: String,
    waiting_token: String,
    /// Started, the first player to move.
    id: String,
    first: String,
    second: String,
    /// Resigned.
    over: String,
    over_first: String,
}

const UNKNOWN_ID: &str = "no-such-game";

impl Matrix {
    async fn new() -> Matrix {
        let server = start(hostile_config()).await;
        let bystander = Bystander::new(server.games().await).await;
        let mut games = server.games().await;
        let rules = server.rules().await;
        let (waiting, waiting_token) = create(&mut games, "standard").await;
        let (id, first, second) = started(&mut games, "standard").await;
        let (over, over_first, _) = started(&mut games, "standard").await;
        games
            .resign(authed(
                pb::ResignRequest {
                    game_id: over.clone(),
                },
                &over_first,
            ))
            .await
            .unwrap();
        Matrix {
            server,
            bystander,
            games,
            rules,
            waiting: waiting.id,
            waiting_token,
            id,
            first,
            second,
            over,
            over_first,
        }
    }

    /// Makes every call of `rows` with `call`: each must fail with its code and detail, and a
    /// useful message that repeats no player token.
    async fn check<R, T, Fut>(&self, rows: Vec<Row<R>>, call: impl Fn(tonic::Request<R>) -> Fut)
    where
        Fut: Future<Output = Result<tonic::Response<T>, Status>>,
    {
        assert!(!rows.is_empty());
        let tokens = [
            &self.first,
            &self.second,
            &self.waiting_token,
            &self.over_first,
        ];
        let mut failures = Vec::new();
        for Row {
            name,
            request,
            code,
            detail,
        } in rows
        {
            let status = match call(request).await {
                Ok(_) => {
                    failures.push(format!("{name}: the call must fail"));
                    continue;
                }
                Err(status) => status,
            };
            if status.message().len() <= 10 {
                failures.push(format!("{name}: a useful message is expected: {status:?}"));
            }
            if tokens.iter().any(|t| status.message().contains(t.as_str())) {
                failures.push(format!("{name}: a token in {status:?}"));
            }
            let detail_ok = match detail {
                Detail::Field(field) => status
                    .get_details_bad_request()
                    .is_some_and(|b| b.field_violations.iter().any(|v| v.field == field)),
                Detail::Reason(reason) => status
                    .get_details_error_info()
                    .is_some_and(|i| i.reason == reason),
                Detail::None => true,
            };
            if status.code() != code || !detail_ok {
                failures.push(format!(
                    "{name}: expected {code:?} with {detail:?}, got {status:?}"
                ));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    /// Nothing the bad calls did touched the bystander's game or the server's health.
    async fn finish(mut self) {
        for _ in 0..4 {
            self.bystander.advance().await;
        }
        assert_serving(self.server.channel().await).await;
    }
}

fn huge() -> String {
    "x".repeat(64 * 1024)
}

fn create_req(f: impl FnOnce(&mut pb::CreateGameRequest)) -> pb::CreateGameRequest {
    let mut r = pb::CreateGameRequest {
        rules: preset("standard"),
        start_position: None,
        seat: 0,
        display_name: "Lan".into(),
        computer: None,
        ..Default::default()
    };
    f(&mut r);
    r
}

fn standard_set() -> pb::RuleSet {
    pb::RuleSet {
        mandarin_setup: pb::MandarinSetup::Stones.into(),
        quan_value: 0,
        empty_mandarin: pb::EmptyMandarinRule::EndsTurn.into(),
        protected_plies: 1,
        immature_mandarin_min_stones: 0,
        end_condition: pb::EndCondition::MandarinSquaresEmpty.into(),
        repetition_limit: 0,
        max_plies: 300,
    }
}

fn custom(set: pb::RuleSet) -> Option<pb::RulesSpec> {
    Some(pb::RulesSpec {
        kind: Some(pb::rules_spec::Kind::RuleSet(set)),
    })
}

fn position(squares: Vec<u32>) -> pb::Position {
    pb::Position {
        squares,
        to_move: pb::Player::First.into(),
        ..Default::default()
    }
}

#[tokio::test]
async fn bad_create_game_requests() {
    let m = Matrix::new().await;
    let invalid = Code::InvalidArgument;
    let rows = vec![
        row(
            "unknown preset",
            create_req(|r| r.rules = preset("chess")),
            invalid,
            Field("rules.preset"),
        ),
        row(
            "unknown seat enum",
            create_req(|r| r.seat = 99),
            invalid,
            Field("seat"),
        ),
        row(
            "negative seat enum",
            create_req(|r| r.seat = -1),
            invalid,
            Field("seat"),
        ),
        row(
            "empty name",
            create_req(|r| r.display_name = "  ".into()),
            invalid,
            Field("display_name"),
        ),
        row(
            "oversized name",
            create_req(|r| r.display_name = huge()),
            invalid,
            Field("display_name"),
        ),
        row(
            "control characters in name",
            create_req(|r| r.display_name = "a\u{0}b".into()),
            invalid,
            Field("display_name"),
        ),
        row(
            "unknown enum in rule set",
            create_req(|r| {
                r.rules = custom(pb::RuleSet {
                    end_condition: 42,
                    ..standard_set()
                })
            }),
            invalid,
            Field("rules.rule_set.end_condition"),
        ),
        row(
            "out-of-range rule knob",
            create_req(|r| {
                r.rules = custom(pb::RuleSet {
                    immature_mandarin_min_stones: 1 << 20,
                    ..standard_set()
                })
            }),
            invalid,
            Field("rules.rule_set.immature_mandarin_min_stones"),
        ),
        row(
            "zero max plies",
            create_req(|r| {
                r.rules = custom(pb::RuleSet {
                    max_plies: 0,
                    ..standard_set()
                })
            }),
            invalid,
            Field("rules.rule_set.max_plies"),
        ),
        row(
            "a game without end: 4 billion plies, no repetition rule",
            create_req(|r| {
                r.rules = custom(pb::RuleSet {
                    max_plies: u32::MAX,
                    repetition_limit: 0,
                    ..standard_set()
                })
            }),
            invalid,
            Field("rules.rule_set.max_plies"),
        ),
        row(
            "11 squares",
            create_req(|r| r.start_position = Some(position(vec![5; 11]))),
            invalid,
            Field("start_position.squares"),
        ),
        row(
            "100000 squares",
            create_req(|r| r.start_position = Some(position(vec![5; 100_000]))),
            invalid,
            Field("start_position.squares"),
        ),
        row(
            "stone counts out of range",
            create_req(|r| r.start_position = Some(position(vec![u32::MAX; 12]))),
            invalid,
            Field("start_position.squares[0]"),
        ),
        row(
            "more stones in a square than the board may hold",
            create_req(|r| r.start_position = Some(position(vec![1_000_000; 12]))),
            invalid,
            Field("start_position.squares[0]"),
        ),
        row(
            "stones do not add up",
            create_req(|r| {
                r.start_position = Some(position(vec![10, 6, 5, 5, 5, 5, 10, 5, 5, 5, 5, 5]))
            }),
            invalid,
            Field("start_position"),
        ),
        row(
            "start position without a player to move",
            create_req(|r| {
                r.start_position = Some(pb::Position {
                    to_move: 0,
                    ..position(vec![10, 5, 5, 5, 5, 5, 10, 5, 5, 5, 5, 5])
                })
            }),
            invalid,
            Field("start_position.to_move"),
        ),
    ];
    m.check(rows, rpc!(m.games, create_game)).await;

    // Oversized requests: refused by the transport's message limit, before decoding.
    let mut big = m
        .server
        .games()
        .await
        .max_encoding_message_size(64 * 1024 * 1024);
    let status = big
        .create_game(create_req(|r| r.display_name = "x".repeat(5 * 1024 * 1024)))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(
        status.message().contains("too large") && status.message().contains("--max-request-size"),
        "{status:?}"
    );
    // Every RESOURCE_EXHAUSTED carries its reason (errors.proto); an outside probe found this
    // one without details.
    assert_eq!(
        status.get_details_error_info().map(|info| info.reason),
        Some("ERROR_REASON_LIMIT_EXCEEDED".to_owned()),
        "{status:?}"
    );
    // The same request is refused again: no "retry later" (an outside probe's read so).
    assert!(!status.message().contains("retry"), "{status:?}");
    m.finish().await;
}

#[tokio::test]
async fn bad_join_game_requests() {
    let m = Matrix::new().await;
    let join = |game_id: &str, display_name: &str| pb::JoinGameRequest {
        game_id: game_id.to_owned(),
        display_name: display_name.to_owned(),
    };
    let over = Code::FailedPrecondition;
    let rows = vec![
        row(
            "empty id",
            join("", "Minh"),
            Code::InvalidArgument,
            Field("game_id"),
        ),
        row(
            "oversized id",
            join(&huge(), "Minh"),
            Code::InvalidArgument,
            Field("game_id"),
        ),
        row(
            "unknown game",
            join(UNKNOWN_ID, "Minh"),
            Code::NotFound,
            Reason("ERROR_REASON_GAME_NOT_FOUND"),
        ),
        row(
            "full game",
            join(&m.id, "Minh"),
            over,
            Reason("ERROR_REASON_SEAT_TAKEN"),
        ),
        row(
            "finished game",
            join(&m.over, "Minh"),
            over,
            Reason("ERROR_REASON_GAME_OVER"),
        ),
        row(
            "bad name",
            join(&m.waiting, &huge()),
            Code::InvalidArgument,
            Field("display_name"),
        ),
    ];
    m.check(rows, rpc!(m.games, join_game)).await;
    m.finish().await;
}

#[tokio::test]
async fn bad_get_game_requests() {
    let m = Matrix::new().await;
    let get = |game_id: &str| pb::GetGameRequest {
        game_id: game_id.to_owned(),
    };
    let rows = vec![
        row(
            "bad id",
            get("../../etc/passwd"),
            Code::InvalidArgument,
            Field("game_id"),
        ),
        row(
            "unknown id",
            get(UNKNOWN_ID),
            Code::NotFound,
            Reason("ERROR_REASON_GAME_NOT_FOUND"),
        ),
    ];
    m.check(rows, rpc!(m.games, get_game)).await;
    m.finish().await;
}

#[tokio::test]
async fn bad_list_games_requests() {
    let m = Matrix::new().await;
    let list = |filter: i32, page_token: &str| pb::ListGamesRequest {
        filter,
        page_size: 10,
        page_token: page_token.to_owned(),
    };
    let invalid = Code::InvalidArgument;
    let rows = vec![
        row(
            "unknown filter enum",
            list(77, ""),
            invalid,
            Field("filter"),
        ),
        row(
            "forged page token",
            list(0, "'; DROP TABLE games; --"),
            invalid,
            Field("page_token"),
        ),
        row(
            "oversized page token",
            list(0, &huge()),
            invalid,
            Field("page_token"),
        ),
    ];
    m.check(rows, rpc!(m.games, list_games)).await;
    m.finish().await;
}

#[tokio::test]
async fn bad_list_moves_requests() {
    let m = Matrix::new().await;
    let rows = vec![row(
        "bad id",
        pb::ListMovesRequest {
            game_id: String::new(),
            ..Default::default()
        },
        Code::InvalidArgument,
        Field("game_id"),
    )];
    m.check(rows, rpc!(m.games, list_moves)).await;
    m.finish().await;
}

#[tokio::test]
async fn bad_play_move_requests() {
    let m = Matrix::new().await;
    let play = |game: &str, m: Option<pb::Move>| pb::PlayMoveRequest {
        game_id: game.to_owned(),
        r#move: m,
        expected_ply: None,
    };
    let mut basic = tonic::Request::new(play(&m.id, mv(1, Right)));
    basic
        .metadata_mut()
        .insert("authorization", "Basic dXNlcjpwYXNz".parse().unwrap());
    let (id, first) = (m.id.as_str(), m.first.as_str());
    let invalid = Code::InvalidArgument;
    let refused = Code::FailedPrecondition;
    let rows = vec![
        row(
            "no token",
            play(id, mv(1, Right)),
            Code::Unauthenticated,
            Reason("ERROR_REASON_MISSING_TOKEN"),
        ),
        row(
            "not a bearer token",
            basic,
            Code::Unauthenticated,
            Reason("ERROR_REASON_MISSING_TOKEN"),
        ),
        row(
            "garbage token",
            authed(play(id, mv(1, Right)), "garbage"),
            Code::PermissionDenied,
            Reason("ERROR_REASON_WRONG_TOKEN"),
        ),
        row(
            "oversized token",
            authed(play(id, mv(1, Right)), &"t".repeat(8000)),
            Code::PermissionDenied,
            Reason("ERROR_REASON_WRONG_TOKEN"),
        ),
        row(
            "another game's token",
            authed(play(id, mv(1, Right)), &m.waiting_token),
            Code::PermissionDenied,
            Reason("ERROR_REASON_WRONG_TOKEN"),
        ),
        row(
            "other seat's turn",
            authed(play(id, mv(7, Right)), &m.second),
            refused,
            Reason("ERROR_REASON_NOT_YOUR_TURN"),
        ),
        row(
            "missing move",
            authed(play(id, None), first),
            invalid,
            Field("move"),
        ),
        row(
            "square out of range",
            authed(play(id, mv(12, Right)), first),
            invalid,
            Field("move.square"),
        ),
        row(
            "square u32::MAX",
            authed(play(id, mv(u32::MAX, Right)), first),
            invalid,
            Field("move.square"),
        ),
        row(
            "unknown direction",
            authed(
                play(
                    id,
                    Some(pb::Move {
                        square: Some(1),
                        direction: 9,
                    }),
                ),
                first,
            ),
            invalid,
            Field("move.direction"),
        ),
        row(
            "opponent's square",
            authed(play(id, mv(8, Right)), first),
            refused,
            Reason("ERROR_REASON_ILLEGAL_MOVE"),
        ),
        row(
            "mandarin square",
            authed(play(id, mv(0, Left)), first),
            refused,
            Reason("ERROR_REASON_ILLEGAL_MOVE"),
        ),
        row(
            "stale ply",
            authed(
                pb::PlayMoveRequest {
                    expected_ply: Some(u32::MAX),
                    ..play(id, mv(1, Right))
                },
                first,
            ),
            refused,
            Reason("ERROR_REASON_STALE_PLY"),
        ),
        row(
            "waiting game",
            authed(play(&m.waiting, mv(1, Right)), &m.waiting_token),
            refused,
            Reason("ERROR_REASON_GAME_NOT_STARTED"),
        ),
        row(
            "finished game",
            authed(play(&m.over, mv(1, Right)), &m.over_first),
            refused,
            Reason("ERROR_REASON_GAME_OVER"),
        ),
        row(
            "unknown game",
            authed(play(UNKNOWN_ID, mv(1, Right)), first),
            Code::NotFound,
            Reason("ERROR_REASON_GAME_NOT_FOUND"),
        ),
    ];
    m.check(rows, rpc!(m.games, play_move)).await;
    m.finish().await;
}

#[tokio::test]
async fn bad_resign_requests() {
    let m = Matrix::new().await;
    let resign = |game_id: &str| pb::ResignRequest {
        game_id: game_id.to_owned(),
    };
    let rows = vec![
        row(
            "no token",
            resign(&m.id),
            Code::Unauthenticated,
            Reason("ERROR_REASON_MISSING_TOKEN"),
        ),
        row(
            "another game's token",
            authed(resign(&m.id), &m.over_first),
            Code::PermissionDenied,
            Reason("ERROR_REASON_WRONG_TOKEN"),
        ),
        row(
            "finished game",
            authed(resign(&m.over), &m.over_first),
            Code::FailedPrecondition,
            Reason("ERROR_REASON_GAME_OVER"),
        ),
        row(
            "waiting game",
            authed(resign(&m.waiting), &m.waiting_token),
            Code::FailedPrecondition,
            Reason("ERROR_REASON_GAME_NOT_STARTED"),
        ),
    ];
    m.check(rows, rpc!(m.games, resign)).await;
    m.finish().await;
}

#[tokio::test]
async fn bad_abort_game_requests() {
    let m = Matrix::new().await;
    let abort = |game_id: &str| pb::AbortGameRequest {
        game_id: game_id.to_owned(),
    };
    let rows = vec![
        row(
            "wrong token",
            authed(abort(&m.id), &m.waiting_token),
            Code::PermissionDenied,
            Reason("ERROR_REASON_WRONG_TOKEN"),
        ),
        row(
            "finished game",
            authed(abort(&m.over), &m.over_first),
            Code::FailedPrecondition,
            Reason("ERROR_REASON_GAME_OVER"),
        ),
        row(
            "bad id",
            authed(abort("bad id!"), &m.first),
            Code::InvalidArgument,
            Field("game_id"),
        ),
    ];
    m.check(rows, rpc!(m.games, abort_game)).await;
    m.finish().await;
}

#[tokio::test]
async fn bad_watch_game_requests() {
    let m = Matrix::new().await;
    let watch = |game_id: &str, after_sequence: Option<u64>| pb::WatchGameRequest {
        game_id: game_id.to_owned(),
        after_sequence,
        ..Default::default()
    };
    let rows = vec![
        row(
            "unknown game",
            watch(UNKNOWN_ID, None),
            Code::NotFound,
            Reason("ERROR_REASON_GAME_NOT_FOUND"),
        ),
        row(
            "bad id",
            watch("", None),
            Code::InvalidArgument,
            Field("game_id"),
        ),
        row(
            "sequence far ahead",
            watch(&m.id, Some(u64::MAX)),
            Code::OutOfRange,
            Detail::None,
        ),
    ];
    m.check(rows, rpc!(m.games, watch_game)).await;
    m.finish().await;
}

#[tokio::test]
async fn bad_watch_lobby_requests() {
    let m = Matrix::new().await;
    let rows = vec![row(
        "sequence far ahead",
        pb::WatchLobbyRequest {
            after_sequence: Some(u64::MAX),
        },
        Code::OutOfRange,
        Detail::None,
    )];
    m.check(rows, rpc!(m.games, watch_lobby)).await;
    m.finish().await;
}

#[tokio::test]
async fn bad_legal_moves_requests() {
    let m = Matrix::new().await;
    let invalid = Code::InvalidArgument;
    let rows = vec![
        row(
            "unknown preset",
            pb::LegalMovesRequest {
                game: None,
                rules: preset(""),
                position: None,
            },
            invalid,
            Field("rules.preset"),
        ),
        row(
            "13 squares",
            pb::LegalMovesRequest {
                game: None,
                rules: preset("standard"),
                position: Some(position(vec![5; 13])),
            },
            invalid,
            Field("position.squares"),
        ),
        row(
            "pieces on citizen squares",
            pb::LegalMovesRequest {
                game: None,
                rules: preset("mancala-world"),
                position: Some(pb::Position {
                    pieces: vec![1; 12],
                    ..position(vec![5; 12])
                }),
            },
            invalid,
            Field("position.pieces[1]"),
        ),
    ];
    m.check(rows, rpc!(m.rules, legal_moves)).await;
    m.finish().await;
}

#[tokio::test]
async fn bad_apply_move_requests() {
    let m = Matrix::new().await;
    let rows = vec![
        row(
            "empty square",
            pb::ApplyMoveRequest {
                game: None,
                rules: preset("standard"),
                position: Some(position(vec![10, 0, 5, 5, 5, 5, 10, 5, 5, 5, 5, 10])),
                r#move: mv(1, Right),
            },
            Code::FailedPrecondition,
            Reason("ERROR_REASON_ILLEGAL_MOVE"),
        ),
        row(
            "missing move",
            pb::ApplyMoveRequest {
                game: None,
                rules: None,
                position: None,
                r#move: None,
            },
            Code::InvalidArgument,
            Field("move"),
        ),
    ];
    m.check(rows, rpc!(m.rules, apply_move)).await;
    m.finish().await;
}

/// Writes `bytes` on a raw connection and waits until the server closes it.
async fn raw_junk(addr: SocketAddr, bytes: &[u8]) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    // The server may close while we are still writing: that is fine.
    let _ = stream.write_all(bytes).await;
    let mut sink = vec![0; 64 * 1024];
    let closed = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match stream.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "the server kept a junk connection open");
}

/// A unary gRPC call over raw HTTP/2 with an arbitrary body: (grpc-status, grpc-message).
async fn raw_grpc(addr: SocketAddr, path: &str, body: Bytes) -> (String, String) {
    raw_grpc_call(addr, path, None, body, Duration::from_secs(10))
        .await
        .expect("trailers")
}

#[tokio::test]
async fn a_reflection_request_that_cannot_be_decoded_ends_with_an_error_not_ok() {
    let server = start(hostile_config()).await;
    let path = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo";
    let list = [0x3a, 0x00]; // list_services = ""
    let mut unknown_flag = grpc_frame(false, 2, &list).to_vec();
    unknown_flag[0] = 7;
    // file_containing_symbol = "a<RLO>b<LF>": tonic-reflection would quote it back raw.
    let hidden = [0x22, 0x06, b'a', 0xe2, 0x80, 0xae, b'b', b'\n'];
    let cases: [(&str, Bytes, Code, &str); 7] = [
        (
            "a symbol with invisible characters",
            grpc_frame(false, 8, &hidden),
            Code::InvalidArgument,
            "U+202E",
        ),
        (
            "not protobuf",
            grpc_frame(false, 6, &[0xff, 0xff, 0xff, 0xff, 0x0f, 0x12]),
            Code::Internal,
            "failed to decode",
        ),
        (
            "a good request, then one that is not protobuf",
            Bytes::from(
                [
                    grpc_frame(false, 2, &list).to_vec(),
                    grpc_frame(false, 3, &[0x0d, 0x01, 0x02]).to_vec(),
                ]
                .concat(),
            ),
            Code::Internal,
            "failed to decode",
        ),
        (
            "cut short",
            grpc_frame(false, 1000, &[0x3a, 0x00, 0x3a, 0x00]),
            Code::InvalidArgument,
            "ended inside a message",
        ),
        (
            "too long",
            grpc_frame(false, u32::MAX, &list),
            Code::ResourceExhausted,
            "the limit is",
        ),
        (
            "compressed",
            grpc_frame(true, 2, &list),
            Code::InvalidArgument,
            "compressed",
        ),
        (
            "unknown flag",
            Bytes::from(unknown_flag),
            Code::InvalidArgument,
            "flag is 7",
        ),
    ];
    for (what, body, code, words) in cases {
        for path in [path, &path.replace(".v1.", ".v1alpha.")] {
            let (status, message) = raw_grpc(server.addr, path, body.clone()).await;
            let message = percent_decode(&message);
            assert_eq!(
                status,
                (code as i32).to_string(),
                "{what} on {path}: {message}"
            );
            assert!(message.contains(words), "{what} on {path}: {message}");
        }
    }
    // A good request on the same path still ends OK.
    let (status, message) = raw_grpc(server.addr, path, grpc_frame(false, 2, &list)).await;
    assert_eq!(status, "0", "{message}");
    assert_serving(server.channel().await).await;
}

#[tokio::test]
async fn garbage_on_the_wire_does_not_hurt_the_server() {
    let server = start(hostile_config()).await;
    let addr = server.addr;
    let mut bystander = Bystander::new(server.games().await).await;

    // Raw TCP: a request line no HTTP/1 parser takes (a valid HTTP/1.1 GET is the web page's
    // now), random bytes, a valid HTTP/2 preface followed by junk frames.
    raw_junk(addr, b"GET / HTTP/7.1 junk\r\nHost: localhost\r\n\r\n").await;
    let noise: Vec<u8> = (0..100_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    raw_junk(addr, &noise).await;
    let mut preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    preface.extend_from_slice(&[0xff; 4096]);
    raw_junk(addr, &preface).await;
    bystander.advance().await;

    // gRPC frames with bad payloads.
    let get_game = "/oanquan.v1.GameService/GetGame";
    let garbage = [0xff, 0xff, 0xff, 0xff, 0x0f, 0x12];
    let (code, message) = raw_grpc(addr, get_game, grpc_frame(false, 6, &garbage)).await;
    assert_eq!(code, (Code::Internal as i32).to_string(), "{message}");
    assert!(message.to_lowercase().contains("decode"), "{message}");
    // Wrong wire type for a field.
    let (code, _) = raw_grpc(
        addr,
        "/oanquan.v1.RulesService/ApplyMove",
        grpc_frame(false, 3, &[0x0d, 0x01, 0x02]),
    )
    .await;
    assert_eq!(code, (Code::Internal as i32).to_string());
    // Compressed flag without an encoding; a length prefix beyond the message limit; a
    // truncated frame.
    let (code, _) = raw_grpc(addr, get_game, grpc_frame(true, 0, &[])).await;
    assert_ne!(code, "0");
    let (code, message) = raw_grpc(addr, get_game, grpc_frame(false, u32::MAX, &[1, 2, 3])).await;
    assert_eq!(
        code,
        (Code::ResourceExhausted as i32).to_string(),
        "{message}"
    );
    // A body that ends cleanly before its message is whole, or with none: not a request, and
    // nobody reset or closed anything.
    for body in [
        grpc_frame(false, 100, &[1, 2, 3]),
        Bytes::new(),
        Bytes::from_static(&[0, 0]),
    ] {
        let (code, message) = raw_grpc(addr, get_game, body.clone()).await;
        assert_eq!(
            code,
            (Code::InvalidArgument as i32).to_string(),
            "{body:?}: {message}"
        );
        assert!(message.contains("ended%20before"), "{message}");
    }
    // A valid message with unknown fields is accepted (forward compatibility) and still
    // validated.
    let mut payload = pb::GetGameRequest {
        game_id: "no-such-game".into(),
    }
    .encode_to_vec();
    payload.extend_from_slice(&[0xf8, 0x07, 0x01]); // field 127, varint 1
    let (code, _) = raw_grpc(
        addr,
        get_game,
        grpc_frame(false, payload.len() as u32, &payload),
    )
    .await;
    assert_eq!(code, (Code::NotFound as i32).to_string());
    // An unknown method.
    let (code, _) = raw_grpc(
        addr,
        "/oanquan.v1.GameService/DropTables",
        grpc_frame(false, 0, &[]),
    )
    .await;
    assert_eq!(code, (Code::Unimplemented as i32).to_string());

    for _ in 0..3 {
        bystander.advance().await;
    }
    assert_serving(server.channel().await).await;
}

/// Raw connections that stop before the end of their handshake: silent, half a preface, the
/// fixed preface without the SETTINGS frame that must follow it; HTTP/1 (slowloris): one byte
/// of a method, a request head without its blank line.
async fn unfinished_handshakes(addr: SocketAddr, each: usize) -> Vec<TcpStream> {
    let mut streams = Vec::new();
    for sent in [
        &b""[..],
        b"PRI * HTTP/2.0\r\n",
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
        b"G",
        b"GET / HTTP/1.1\r\nHost: localhost\r\n",
    ] {
        for _ in 0..each {
            let mut stream = TcpStream::connect(addr).await.unwrap();
            stream.write_all(sent).await.unwrap();
            streams.push(stream);
        }
    }
    streams
}

#[tokio::test]
async fn connections_that_never_finish_their_handshake_are_closed_and_do_not_hold_shutdown() {
    let handshake = Duration::from_millis(300);
    let mut settings = hostile_config();
    settings.transport.handshake_timeout = handshake;
    // Far longer than the test may take: only a prompt shutdown passes.
    settings.transport.shutdown_drain_timeout = Duration::from_secs(30);
    let mut server = start(settings).await;
    let mut bystander = Bystander::new(server.games().await).await;

    let stalled = unfinished_handshakes(server.addr, 10).await;
    let closed = futures::future::join_all(stalled.into_iter().map(closed_after)).await;
    for after in closed {
        let after = after.expect("a connection without a handshake was kept open");
        assert!(
            after < handshake + Duration::from_secs(2),
            "closed only after {after:?}"
        );
    }
    // A client that finished its handshake long ago is not affected.
    bystander.advance().await;

    // Connections in their handshake at shutdown do not hold it.
    let stalled = unfinished_handshakes(server.addr, 5).await;
    let started = Instant::now();
    server.trigger_shutdown();
    let status = loop {
        match next(&mut bystander.watch).await {
            Ok(Some(_)) => {}
            Ok(None) => panic!("the watch ended OK instead of UNAVAILABLE"),
            Err(status) => break status,
        }
    };
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    server.stop().await.unwrap();
    let took = started.elapsed();
    assert!(took < Duration::from_secs(3), "shutdown took {took:?}");
    for after in futures::future::join_all(stalled.into_iter().map(closed_after)).await {
        assert!(after.is_some(), "a connection outlived the server");
    }
}

#[tokio::test]
async fn a_client_over_the_request_rate_is_refused_and_others_carry_on() {
    let mut settings = hostile_config();
    settings.clients.rate_limit = 2.0;
    settings.clients.rate_limit_burst = 10;
    let server = start(settings).await;
    // The bystander plays from another address, so it has a bucket of its own.
    let mut bystander =
        Bystander::new(Games::new(channel_from("127.0.0.2", server.addr).await)).await;
    let mut flooder = server.rules().await;
    let mut refused = None;
    let mut allowed = 0;
    for _ in 0..40 {
        match flooder.list_presets(pb::ListPresetsRequest {}).await {
            Ok(_) => allowed += 1,
            Err(status) => {
                refused = Some(status);
                break;
            }
        }
    }
    let status = refused.expect("the flood was never refused");
    assert!((10..=13).contains(&allowed), "{allowed} allowed");
    assert_reason(
        &status,
        Code::ResourceExhausted,
        "ERROR_REASON_LIMIT_EXCEEDED",
    );
    let retry = status
        .get_details_retry_info()
        .and_then(|r| r.retry_delay)
        .expect("RetryInfo");
    assert!(
        retry > Duration::ZERO && retry <= Duration::from_secs(1),
        "{retry:?}"
    );
    assert!(status.message().contains("too many requests"), "{status:?}");
    // Health checks are not counted: a load balancer on the same address still sees SERVING.
    assert_serving(server.channel().await).await;
    // Others carry on (within their own bucket: 3 calls to start, 2 per move).
    for _ in 0..3 {
        bystander.advance().await;
    }
    // After the retry delay, the flooder may call again.
    tokio::time::sleep(retry + Duration::from_millis(50)).await;
    flooder
        .list_presets(pb::ListPresetsRequest {})
        .await
        .unwrap();
}

#[tokio::test]
async fn a_health_check_flood_is_refused_in_a_bucket_of_its_own() {
    let mut settings = hostile_config();
    settings.clients.rate_limit = 2.0;
    settings.clients.rate_limit_burst = 10;
    settings.clients.health_rate_limit = 5.0;
    let server = start(settings).await;
    let mut health = HealthClient::new(server.channel().await);
    let check = || tonic_health::pb::HealthCheckRequest {
        service: String::new(),
    };
    let mut allowed = 0;
    let status = loop {
        match health.check(check()).await {
            Ok(_) => allowed += 1,
            Err(status) => break status,
        }
        assert!(allowed < 100, "the flood was never refused");
    };
    // A burst of two seconds' worth, refilling at 5 a second while the loop runs.
    assert!((10..=14).contains(&allowed), "{allowed} allowed");
    assert!(
        status.message().contains("too many health checks"),
        "{status:?}"
    );
    assert_reason(
        &status,
        Code::ResourceExhausted,
        "ERROR_REASON_LIMIT_EXCEEDED",
    );
    // The flood took nothing from the same address's other calls, nor from another address.
    let mut rules = server.rules().await;
    rules.list_presets(pb::ListPresetsRequest {}).await.unwrap();
    assert_serving(channel_from("127.0.0.2", server.addr).await).await;
    // And an ordinary prober's pace is never refused.
    tokio::time::sleep(Duration::from_secs(2)).await;
    for _ in 0..5 {
        health.check(check()).await.unwrap();
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test]
async fn reflection_requests_inside_one_stream_count_against_the_rate() {
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;

    let mut settings = hostile_config();
    settings.clients.rate_limit = 2.0;
    settings.clients.rate_limit_burst = 10;
    let server = start(settings).await;
    let mut client = ServerReflectionClient::new(server.channel().await);
    // 200 requests on one stream: before, one call for the limiter, and every one answered.
    let mut responses = reflection_stream(
        &mut client,
        200,
        MessageRequest::FileContainingSymbol("oanquan.v1.GameService".into()),
    )
    .await;
    let mut answered = 0;
    let status = loop {
        match responses.message().await {
            Ok(Some(_)) => answered += 1,
            Ok(None) => panic!("the stream ended OK after {answered} answers"),
            Err(status) => break status,
        }
    };
    // The bucket holds 10, refilling at 2 a second while the stream runs.
    assert!((9..=14).contains(&answered), "{answered} answered");
    assert_reason(
        &status,
        Code::ResourceExhausted,
        "ERROR_REASON_LIMIT_EXCEEDED",
    );
    assert!(status.message().contains("too many requests"), "{status:?}");
    // A stream within the rate is answered whole and ends OK; so does another address's.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut other = ServerReflectionClient::new(channel_from("127.0.0.2", server.addr).await);
    for client in [&mut client, &mut other] {
        let mut responses =
            reflection_stream(client, 4, MessageRequest::ListServices(String::new())).await;
        let mut answered = 0;
        while let Some(response) = responses.message().await.unwrap() {
            assert!(response.message_response.is_some());
            answered += 1;
        }
        assert_eq!(answered, 4);
    }
    assert_serving(server.channel().await).await;
}

#[tokio::test]
async fn connections_per_client_are_limited() {
    let mut settings = hostile_config();
    settings.clients.max_connections_per_client = 2;
    let server = start(settings).await;
    let mut kept = Vec::new();
    for _ in 0..2 {
        let mut rules = pb::rules_service_client::RulesServiceClient::new(
            channel_from("127.0.0.2", server.addr).await,
        );
        rules.list_presets(pb::ListPresetsRequest {}).await.unwrap();
        kept.push(rules);
    }
    // A third from the same address is closed as it is accepted; the two open ones carry on,
    // and so does another address.
    let started = Instant::now();
    assert!(!connection_served("127.0.0.2", server.addr).await);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "refused at once"
    );
    for rules in &mut kept {
        rules.list_presets(pb::ListPresetsRequest {}).await.unwrap();
    }
    assert!(connection_served("127.0.0.3", server.addr).await);
    // A closed connection gives its place back (once the server has seen it close).
    drop(kept.pop());
    let deadline = Instant::now() + Duration::from_secs(5);
    while !connection_served("127.0.0.2", server.addr).await {
        assert!(Instant::now() < deadline, "the place was not given back");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_serving(server.channel().await).await;
}

#[tokio::test]
async fn open_games_per_client_are_limited() {
    let mut settings = hostile_config();
    settings.games.max_open_games_per_client = 2;
    let server = start(settings).await;
    let mut c = server.games().await;
    let (a, a_token) = create(&mut c, "standard").await;
    let (b, _) = create(&mut c, "standard").await;
    let status = c
        .create_game(pb::CreateGameRequest {
            rules: preset("standard"),
            start_position: None,
            seat: 0,
            display_name: "Lan".into(),
            computer: None,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_reason(
        &status,
        Code::ResourceExhausted,
        "ERROR_REASON_LIMIT_EXCEEDED",
    );
    assert!(status.message().contains("open games"), "{status:?}");
    // Another client is not affected, and joining is not creating.
    let mut other = Games::new(channel_from("127.0.0.3", server.addr).await);
    let (_, _) = create(&mut other, "standard").await;
    let joined = other
        .join_game(pb::JoinGameRequest {
            game_id: b.id.clone(),
            display_name: "Minh".into(),
        })
        .await
        .unwrap()
        .into_inner();
    // A game that ends frees its place: abort one, resign the other.
    c.abort_game(authed(
        pb::AbortGameRequest {
            game_id: a.id.clone(),
        },
        &a_token,
    ))
    .await
    .unwrap();
    let (_, _) = create(&mut c, "standard").await;
    assert!(
        c.create_game(pb::CreateGameRequest {
            rules: preset("standard"),
            start_position: None,
            seat: 0,
            display_name: "Lan".into(),
            computer: None,
            ..Default::default()
        })
        .await
        .is_err()
    );
    other
        .resign(authed(
            pb::ResignRequest {
                game_id: b.id.clone(),
            },
            &joined.player_token,
        ))
        .await
        .unwrap();
    let (_, _) = create(&mut c, "standard").await;
    assert_serving(server.channel().await).await;
}

#[tokio::test]
async fn idle_games_expire_with_events_and_busy_ones_do_not() {
    let idle = Duration::from_millis(800);
    let mut settings = hostile_config();
    settings.games.idle_game_timeout = idle;
    // Active untimed games are reaped once idle past the abandonment time: make that nothing.
    settings.games.abandon_after = Duration::from_millis(1);
    let server = start(settings).await;
    let mut c = server.games().await;
    let (waiting, _) = create(&mut c, "standard").await;
    let (active, first, _) = started(&mut c, "standard").await;
    let mut watch = c
        .watch_game(pb::WatchGameRequest {
            game_id: active.clone(),
            after_sequence: None,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let mut busy = Bystander::new(server.games().await).await;
    // The busy game moves every 100 ms for twice the idle time.
    let until = Instant::now() + idle * 2;
    while Instant::now() < until {
        busy.advance().await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The idle active game ends with GameOver(aborted, no one ended it) for its watchers.
    let game_over = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let event = next_game_event(&mut watch).await.expect("stream open");
            if let Some(Kind::GameOver(over)) = event.kind {
                return over;
            }
        }
    })
    .await
    .expect("no GameOver for an idle game");
    let result = game_over.result.unwrap();
    assert_eq!(result.end_reason, i32::from(pb::EndReason::Aborted));
    assert_eq!(result.ended_by, i32::from(pb::Player::Unspecified));
    assert!(next(&mut watch).await.unwrap().is_none(), "stream ends OK");
    for id in [&waiting.id, &active] {
        let game = c
            .get_game(pb::GetGameRequest {
                game_id: id.clone(),
            })
            .await
            .unwrap()
            .into_inner()
            .game
            .unwrap();
        assert_eq!(game.status, i32::from(pb::GameStatus::Aborted), "{id}");
    }
    let status = play(&mut c, &active, &first, 1, Right, None)
        .await
        .unwrap_err();
    assert_reason(&status, Code::FailedPrecondition, "ERROR_REASON_GAME_OVER");
    // The busy game is still going.
    busy.advance().await;
}

/// A raw HTTP/2 watcher whose connection window is 0: it never reads a byte of the stream.
struct StuckWatcher {
    response: h2::RecvStream,
    open_window: tokio::sync::mpsc::Sender<u32>,
}

async fn stuck_watcher(addr: SocketAddr, game_id: &str) -> StuckWatcher {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (client, mut connection) = h2::client::Builder::new()
        .initial_window_size(0)
        .handshake::<_, Bytes>(tcp)
        .await
        .unwrap();
    let (open_window, mut opened) = tokio::sync::mpsc::channel::<u32>(1);
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = &mut connection => break,
                Some(size) = opened.recv() => connection.set_initial_window_size(size).unwrap(),
            }
        }
    });
    let mut client = client.ready().await.unwrap();
    let payload = pb::WatchGameRequest {
        game_id: game_id.to_owned(),
        after_sequence: None,
        ..Default::default()
    }
    .encode_to_vec();
    let request = http::Request::post(format!("http://{addr}/oanquan.v1.GameService/WatchGame"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .unwrap();
    let (response, mut send) = client.send_request(request, false).unwrap();
    send.send_data(grpc_frame(false, payload.len() as u32, &payload), true)
        .unwrap();
    let response = tokio::time::timeout(Duration::from_secs(5), response)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(response.status(), 200);
    StuckWatcher {
        response: response.into_body(),
        open_window,
    }
}

#[tokio::test]
async fn spectators_that_never_read_do_not_slow_moves_or_other_spectators() {
    const MOVES: usize = 24;
    const STUCK: usize = 6;
    let mut settings = hostile_config();
    settings.streams.max_spectators_per_game = STUCK + 2;
    // Every watcher here is on 127.0.0.1, most on one connection: only the game's limit
    // is under test.
    settings.streams.max_spectators_per_connection = 0;
    settings.streams.max_spectators_per_client = 0;
    settings.streams.stream_stall_timeout = Duration::from_millis(500);
    let server = start(settings).await;

    // Baseline: moves with one reading watcher.
    let mut game = Bystander::new(server.games().await).await;
    let started = Instant::now();
    for _ in 0..MOVES {
        game.advance().await;
    }
    let baseline = started.elapsed();

    // The same with STUCK watchers that never read a byte (they take every free slot but one).
    let mut stuck = Vec::new();
    for _ in 0..STUCK {
        stuck.push(stuck_watcher(server.addr, &game.id).await);
    }
    let started = Instant::now();
    for _ in 0..MOVES {
        game.advance().await;
    }
    let with_stuck = started.elapsed();
    assert!(
        with_stuck < baseline * 5 + Duration::from_secs(1),
        "moves slowed down by watchers that do not read: {baseline:?} → {with_stuck:?}"
    );

    // The stuck streams are dropped after the stall timeout: their slots are free again.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut c = server.games().await;
    let mut fresh = Vec::new();
    for _ in 0..STUCK {
        let mut watch = c
            .watch_game(pb::WatchGameRequest {
                game_id: game.id.clone(),
                after_sequence: None,
                ..Default::default()
            })
            .await
            .expect("a slot freed by a stuck watcher")
            .into_inner();
        next_game_event(&mut watch).await.unwrap();
        fresh.push(watch);
    }
    // When a stuck client finally reads, it gets what was buffered, then a clear status.
    let mut stuck = stuck.remove(0);
    stuck.open_window.send(1 << 20).await.unwrap();
    let drained = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(data) = stuck.response.data().await {
            let data = data.unwrap();
            let _ = stuck.response.flow_control().release_capacity(data.len());
        }
        stuck.response.trailers().await.unwrap().expect("trailers")
    })
    .await
    .expect("the dropped stream did not end");
    assert_eq!(
        drained["grpc-status"],
        (Code::ResourceExhausted as i32).to_string()
    );
    let message = drained["grpc-message"].to_str().unwrap();
    assert!(message.contains("after_sequence"), "{message}");
    game.advance().await;
    assert_serving(server.channel().await).await;
}

/// An HTTP/2 frame: length, type, flags, stream 0 (connection-level frames only here).
fn h2_frame(kind: u8, flags: u8, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).unwrap().to_be_bytes();
    let mut frame = vec![len[1], len[2], len[3], kind, flags, 0, 0, 0, 0];
    frame.extend_from_slice(payload);
    frame
}

/// A raw HTTP/2 connection from `source` that has sent its preface and empty SETTINGS.
async fn raw_h2(source: &str, addr: SocketAddr) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket
        .bind(SocketAddr::new(source.parse().unwrap(), 0))
        .unwrap();
    let mut tcp = socket.connect(addr).await.unwrap();
    let mut hello = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    hello.extend(h2_frame(4, 0, &[]));
    tcp.write_all(&hello).await.unwrap();
    tcp
}

#[tokio::test]
async fn a_ping_flood_closes_its_connection_and_a_steady_pinger_stays() {
    let server = start(hostile_config()).await;
    let addr = server.addr;
    let mut game = Bystander::new(Games::new(channel_from("127.0.0.2", addr).await)).await;

    // 30,000 pings at once (the budget is 10,000 at once, 1,000 a second).
    let tcp = raw_h2("127.0.0.3", addr).await;
    let (mut reader, mut writer) = tcp.into_split();
    let flood: Vec<u8> = (0..30_000u32)
        .flat_map(|i| h2_frame(6, 0, &u64::from(i).to_be_bytes()))
        .collect();
    let writing = tokio::spawn(async move {
        // The server may close before it has read everything.
        let _ = writer.write_all(&flood).await;
        writer
    });
    let mut answered = 0_usize;
    let mut chunk = vec![0; 64 * 1024];
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match reader.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => answered += n,
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the flooding connection stayed open");
    // Each pong is 17 bytes: the server answered part of the flood, not all of it.
    assert!(answered < 30_000 * 17, "{answered} bytes answered");
    drop(writing.await);

    // A client pinging steadily (200 pings over a second) keeps its connection.
    let mut steady = raw_h2("127.0.0.4", addr).await;
    for i in 0..200_u64 {
        steady
            .write_all(&h2_frame(6, 0, &i.to_be_bytes()))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut pongs = 0;
    let mut read = Vec::new();
    let answered = tokio::time::timeout(Duration::from_secs(5), async {
        while pongs < 200 {
            let n = steady.read(&mut chunk).await.unwrap();
            assert!(n > 0, "the steady pinger's connection closed");
            read.extend_from_slice(&chunk[..n]);
            // Walk whole frames: count the PING acks (type 6, flag 1).
            pongs = 0;
            let mut at = 0;
            while at + 9 <= read.len() {
                let len = usize::from(read[at]) << 16
                    | usize::from(read[at + 1]) << 8
                    | usize::from(read[at + 2]);
                if read[at + 3] == 6 && read[at + 4] & 1 == 1 {
                    pongs += 1;
                }
                at += 9 + len;
            }
        }
    })
    .await;
    assert!(answered.is_ok(), "{pongs} of 200 pings answered");
    game.advance().await;
    assert_serving(server.channel().await).await;
}

/// A stream's WINDOW_UPDATE or RST_STREAM, sent in a flood to a stream already closed, asks
/// nothing of the service either: an outside probe sent millions on one connection, at a
/// quarter of a core, never closed.
#[tokio::test]
async fn a_flood_of_frames_to_a_closed_stream_closes_its_connection() {
    let server = start(hostile_config()).await;
    let addr = server.addr;
    let mut game = Bystander::new(Games::new(channel_from("127.0.0.2", addr).await)).await;
    for (source, kind, payload) in [
        ("127.0.0.3", 8_u8, [0_u8, 0, 0, 1]),
        ("127.0.0.4", 3, [0, 0, 0, 8]),
    ] {
        let tcp = raw_h2(source, addr).await;
        let (mut reader, mut writer) = tcp.into_split();
        // Stream 1: a whole GetGame call (HPACK literals: POST, http, its path, gRPC's
        // content type and `te: trailers`), answered and closed.
        let path = b"/oanquan.v1.GameService/GetGame";
        let mut block = vec![0x83, 0x86, 0x04, path.len() as u8];
        block.extend_from_slice(path);
        block.extend([0x0f, 0x10, 16]);
        block.extend_from_slice(b"application/grpc");
        block.extend([0x00, 2, b't', b'e', 8]);
        block.extend_from_slice(b"trailers");
        let mut call = on_stream_frame(1, 1, 0x4, &block);
        call.extend(on_stream_frame(1, 0, 0x1, &[0, 0, 0, 0, 0]));
        let flood: Vec<u8> = (0..30_000)
            .flat_map(|_| on_stream_frame(1, kind, 0, &payload))
            .collect();
        let writing = tokio::spawn(async move {
            writer.write_all(&call).await.unwrap();
            tokio::time::sleep(Duration::from_millis(300)).await;
            let _ = writer.write_all(&flood).await;
            writer
        });
        let mut chunk = vec![0; 64 * 1024];
        let ended = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                match reader.read(&mut chunk).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
            }
        })
        .await;
        assert!(
            ended.is_ok(),
            "frame {kind}: the flooding connection stayed open"
        );
        drop(writing.await);
    }
    game.advance().await;
    assert_serving(server.channel().await).await;
}

/// A frame on stream `stream`.
fn on_stream_frame(stream: u8, kind: u8, flags: u8, payload: &[u8]) -> Vec<u8> {
    let mut frame = h2_frame(kind, flags, payload);
    frame[8] = stream;
    frame
}

#[tokio::test]
async fn a_connection_that_leaves_its_streams_unread_is_closed() {
    let mut settings = hostile_config();
    settings.streams.max_spectators_per_connection = 2;
    settings.streams.max_spectators_per_client = 0;
    // Heartbeats fill a stuck stream's buffer quickly; it is dropped soon after.
    settings.streams.heartbeat_interval = Duration::from_millis(20);
    settings.streams.stream_stall_timeout = Duration::from_millis(100);
    let server = start(settings).await;
    let addr = server.addr;
    let game = Bystander::new(Games::new(channel_from("127.0.0.2", addr).await)).await;

    // Without the close, the connection would take its 2 places again after every stall
    // timeout and keep the dropped HTTP/2 streams open: rounds without end.
    let mut abuser = stuck_connection("127.0.0.3", addr).await;
    let mut held = Vec::new();
    let mut closed_after = None;
    for round in 1..=10 {
        let mut opened = 0;
        for _ in 0..2 {
            match try_open_stuck_stream(&mut abuser, addr, &game.id).await {
                Some(head) => {
                    assert_eq!(refusal(&head.0), None, "{:?}", head.0);
                    held.push(head);
                    opened += 1;
                }
                None => break,
            }
        }
        if opened == 0 {
            closed_after = Some(round);
            break;
        }
        // The stream's buffer fills (16 heartbeats) and the stall timeout passes.
        tokio::time::sleep(Duration::from_millis(1_000)).await;
    }
    let rounds = closed_after.expect("the connection was never closed");
    // Two streams a round, closed at the 4th dropped stream: the third round finds it closed.
    assert_eq!(rounds, 3, "closed after {} streams", held.len());
    // Other connections, from that address too, and the game are untouched.
    let mut again = stuck_connection("127.0.0.3", addr).await;
    let _served = try_open_stuck_stream(&mut again, addr, &game.id)
        .await
        .expect("a new connection is served");
    let mut game = game;
    game.advance().await;
    assert_serving(server.channel().await).await;
}

/// A watch stream whose client stops reading is dropped after the unread limit; when the
/// client reads again, the stream is reset with ENHANCE_YOUR_CALM, which gRPC clients report
/// as RESOURCE_EXHAUSTED (a limit), not with INTERNAL_ERROR (INTERNAL: a server fault).
#[tokio::test]
async fn a_dropped_unread_stream_is_reset_as_a_limit_not_a_fault() {
    let mut settings = hostile_config();
    settings.streams.heartbeat_interval = Duration::from_millis(20);
    settings.streams.stream_stall_timeout = Duration::from_millis(100);
    // The unread limit is the longer of these two.
    settings.transport.request_timeout = Duration::from_millis(300);
    let server = start(settings).await;
    let addr = server.addr;
    let game = Bystander::new(Games::new(channel_from("127.0.0.2", addr).await)).await;

    // A window of 0 until told to open it: the connection is driven here, where its settings
    // can change.
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (client, mut connection) = h2::client::Builder::new()
        .initial_window_size(0)
        .handshake::<_, Bytes>(tcp)
        .await
        .unwrap();
    let (open, mut opened) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        tokio::select! {
            _ = &mut connection => return,
            _ = &mut opened => {}
        }
        connection.set_target_window_size(1 << 20);
        connection.set_initial_window_size(1 << 20).unwrap();
        let _ = connection.await;
    });
    let mut client = client;
    let (_, mut body) = try_open_stuck_stream(&mut client, addr, &game.id)
        .await
        .expect("a stream");
    // Not read for well past the limit (and its sweeps).
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    open.send(()).unwrap();
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match body.data().await {
                Some(Ok(data)) => {
                    let _ = body.flow_control().release_capacity(data.len());
                }
                Some(Err(error)) => return Err(error),
                None => return Ok(body.trailers().await),
            }
        }
    })
    .await
    .expect("the stream ends");
    match ended {
        Err(error) => assert_eq!(
            error.reason(),
            Some(h2::Reason::ENHANCE_YOUR_CALM),
            "{error:?}"
        ),
        Ok(trailers) => panic!("the stream was not dropped: {trailers:?}"),
    }
    let mut game = game;
    game.advance().await;
    assert_serving(server.channel().await).await;
}

/// As [`open_stuck_stream`], or `None` once the connection is closed.
async fn try_open_stuck_stream(
    client: &mut h2::client::SendRequest<Bytes>,
    addr: SocketAddr,
    game_id: &str,
) -> Option<(http::response::Parts, h2::RecvStream)> {
    let payload = pb::WatchGameRequest {
        game_id: game_id.to_owned(),
        after_sequence: None,
        ..Default::default()
    }
    .encode_to_vec();
    let request = http::Request::post(format!("http://{addr}/oanquan.v1.GameService/WatchGame"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .unwrap();
    let mut ready = client.clone().ready().await.ok()?;
    let (response, mut send) = ready.send_request(request, false).ok()?;
    send.send_data(grpc_frame(false, payload.len() as u32, &payload), true)
        .ok()?;
    let response = tokio::time::timeout(Duration::from_secs(5), response)
        .await
        .expect("no response")
        .ok()?;
    assert_eq!(response.status(), 200);
    Some(response.into_parts())
}

/// A raw HTTP/2 connection from `source` whose window is 0: none of its streams reads a byte.
async fn stuck_connection(source: &str, addr: SocketAddr) -> h2::client::SendRequest<Bytes> {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket
        .bind(SocketAddr::new(source.parse().unwrap(), 0))
        .unwrap();
    let tcp = socket.connect(addr).await.unwrap();
    let (client, connection) = h2::client::Builder::new()
        .initial_window_size(0)
        .handshake::<_, Bytes>(tcp)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
}

/// Opens a WatchGame stream on `client` and returns its response head: a stream that is
/// being served has no grpc-status yet; a refused one answers with headers only.
async fn open_stuck_stream(
    client: &mut h2::client::SendRequest<Bytes>,
    addr: SocketAddr,
    game_id: &str,
) -> (http::response::Parts, h2::RecvStream) {
    try_open_stuck_stream(client, addr, game_id)
        .await
        .expect("the connection is open")
}

/// The grpc-status and message of a refused stream's head.
fn refusal(head: &http::response::Parts) -> Option<(String, String)> {
    let status = head
        .headers
        .get("grpc-status")?
        .to_str()
        .unwrap()
        .to_owned();
    let message = head
        .headers
        .get("grpc-message")
        .map_or(String::new(), |m| percent_decode(m.to_str().unwrap()));
    Some((status, message))
}

/// grpc-message is percent-encoded.
fn percent_decode(text: &str) -> String {
    let mut out = Vec::with_capacity(text.len());
    let mut rest = text.as_bytes();
    while let Some((&byte, tail)) = rest.split_first() {
        let escaped = (byte == b'%')
            .then(|| tail.get(..2))
            .flatten()
            .and_then(|hex| u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok());
        match escaped {
            Some(decoded) => {
                out.push(decoded);
                rest = &tail[2..];
            }
            None => {
                out.push(byte);
                rest = tail;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test]
async fn one_connection_or_client_cannot_take_every_watcher_place_of_a_game() {
    const SPECTATORS: usize = 6;
    const PER_CONNECTION: usize = 3;
    const PER_CLIENT: usize = 5;
    let mut settings = hostile_config();
    settings.streams.max_spectators_per_game = SPECTATORS;
    settings.streams.max_spectators_per_connection = PER_CONNECTION;
    settings.streams.max_spectators_per_client = PER_CLIENT;
    let server = start(settings).await;
    let addr = server.addr;
    let mut players = Games::new(channel_from("127.0.0.2", addr).await);
    let (id, first, second) = started(&mut players, "standard").await;
    let exhausted = (Code::ResourceExhausted as i32).to_string();

    // One connection that never reads: its streams up to the cap are served, the next is
    // refused with a message naming the limit, and the connection itself stays usable.
    let mut abuser = stuck_connection("127.0.0.3", addr).await;
    let mut held = Vec::new();
    for _ in 0..PER_CONNECTION {
        let head = open_stuck_stream(&mut abuser, addr, &id).await;
        assert_eq!(refusal(&head.0), None, "{:?}", head.0);
        held.push(head);
    }
    for _ in 0..3 {
        let (head, _) = open_stuck_stream(&mut abuser, addr, &id).await;
        let (code, message) = refusal(&head).expect("refused past the connection's cap");
        assert_eq!(code, exhausted, "{message}");
        assert!(message.contains("per connection"), "{message}");
    }
    // A second connection from the same address gets the rest of the client's share.
    let mut abuser_again = stuck_connection("127.0.0.3", addr).await;
    for _ in PER_CONNECTION..PER_CLIENT {
        let head = open_stuck_stream(&mut abuser_again, addr, &id).await;
        assert_eq!(refusal(&head.0), None, "{:?}", head.0);
        held.push(head);
    }
    let (head, _) = open_stuck_stream(&mut abuser_again, addr, &id).await;
    let (code, message) = refusal(&head).expect("refused past the client's cap");
    assert_eq!(code, exhausted, "{message}");
    assert!(message.contains("per client"), "{message}");

    // Another client still watches, and takes the game's last spectator place.
    let mut honest = Games::new(channel_from("127.0.0.4", addr).await);
    let (mut honest_watch, _) = watch_snapshot(&mut honest, &id).await;
    let mut late = Games::new(channel_from("127.0.0.5", addr).await);
    let status = late
        .watch_game(pb::WatchGameRequest {
            game_id: id.clone(),
            after_sequence: None,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_reason(
        &status,
        Code::ResourceExhausted,
        "ERROR_REASON_LIMIT_EXCEEDED",
    );
    assert!(status.message().contains("spectators"), "{status:?}");

    // The game is full of spectators, yet each seated player gets its own stream with its
    // token, within a bound of its own; a token of no seat of this game is refused.
    let seat_watch = |token: &str| {
        authed(
            pb::WatchGameRequest {
                game_id: id.clone(),
                after_sequence: None,
                ..Default::default()
            },
            token,
        )
    };
    let mut own = Vec::new();
    for token in [&first, &second] {
        let mut watch = players
            .watch_game(seat_watch(token))
            .await
            .unwrap()
            .into_inner();
        let snapshot = next_game_event(&mut watch).await.unwrap();
        assert!(
            matches!(snapshot.kind, Some(Kind::Snapshot(_))),
            "{snapshot:?}"
        );
        own.push(watch);
    }
    for _ in 1..oanquan_server::domain::DEFAULT_MAX_STREAMS_PER_SEAT {
        own.push(
            players
                .watch_game(seat_watch(&first))
                .await
                .unwrap()
                .into_inner(),
        );
    }
    let status = players.watch_game(seat_watch(&first)).await.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(status.message().contains("your seat"), "{status:?}");
    let (_, other_token) = create(&mut late, "standard").await;
    let status = players
        .watch_game(seat_watch(&other_token))
        .await
        .unwrap_err();
    assert_reason(&status, Code::PermissionDenied, "ERROR_REASON_WRONG_TOKEN");

    // Play goes on and the streams that read see it.
    play(&mut players, &id, &first, 1, Right, Some(0))
        .await
        .unwrap();
    for watch in [&mut own[0], &mut honest_watch] {
        let event = next_game_event(watch).await.unwrap();
        assert!(matches!(event.kind, Some(Kind::MovePlayed(_))), "{event:?}");
    }
    // Places come back when streams end: the abuser's connection closes.
    drop(held);
    drop(abuser);
    drop(abuser_again);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match late
            .watch_game(pb::WatchGameRequest {
                game_id: id.clone(),
                after_sequence: None,
                ..Default::default()
            })
            .await
        {
            Ok(_) => break,
            Err(status) => {
                assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
                assert!(Instant::now() < deadline, "the places were not given back");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    assert_serving(server.channel().await).await;
}

// ---------------------------------------------------------------------------------------------
// TLS.

#[tokio::test]
async fn tls_clients_play_and_plaintext_clients_fail_cleanly() {
    let (cert, key) = certificate();
    let dir = tempfile::tempdir().unwrap();
    let (cert_path, key_path) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert_path, &cert).unwrap();
    std::fs::write(&key_path, &key).unwrap();
    let identity = oanquan_server::TlsIdentity::read(&cert_path, &key_path).unwrap();
    assert!(!format!("{identity:?}").contains("PRIVATE KEY"));
    let mut settings = hostile_config();
    settings.tls = Some(identity);
    let server = start(settings).await;

    // A TLS client plays a game and watches it.
    let channel = tls_channel(server.addr, &cert).await.unwrap();
    let mut game = Bystander::new(Games::new(channel.clone())).await;
    for _ in 0..3 {
        game.advance().await;
    }
    assert_serving(channel.clone()).await;

    // A cleartext HTTP/2 client fails quickly instead of hanging.
    let plaintext = Endpoint::from_shared(format!("http://{}", server.addr))
        .unwrap()
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(5))
        .connect_lazy();
    let started = Instant::now();
    let status = Games::new(plaintext)
        .get_game(pb::GetGameRequest {
            game_id: game.id.clone(),
        })
        .await
        .unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(6),
        "took {:?}",
        started.elapsed()
    );
    assert!(
        matches!(status.code(), Code::Unavailable | Code::Unknown),
        "{status:?}"
    );
    // A client that does not trust the certificate is refused.
    let (other_cert, _) = certificate();
    assert!(
        HealthClient::new(match tls_channel(server.addr, &other_cert).await {
            Ok(channel) => channel,
            Err(_) => return finish_tls(game).await,
        })
        .check(tonic_health::pb::HealthCheckRequest::default())
        .await
        .is_err()
    );
    // Junk on the TLS port is dropped.
    raw_junk(server.addr, b"GET / HTTP/1.1\r\n\r\n").await;
    finish_tls(game).await;
}

#[tokio::test]
async fn tls_connections_that_never_send_their_preface_are_closed() {
    use tokio_rustls::rustls;
    use tokio_rustls::rustls::pki_types::pem::PemObject as _;

    let (cert, key) = certificate();
    let handshake = Duration::from_millis(300);
    let mut settings = hostile_config();
    settings.tls = Some(oanquan_server::TlsIdentity {
        cert_pem: cert.clone().into_bytes(),
        key_pem: key.into_bytes(),
    });
    settings.transport.handshake_timeout = handshake;
    let server = start(settings).await;
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls::pki_types::CertificateDer::from_pem_slice(cert.as_bytes()).unwrap())
        .unwrap();
    let mut client = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    client.alpn_protocols = vec![b"h2".to_vec()];
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(client));

    // The TLS handshake done, then nothing: closed once the handshake time is up.
    let tcp = TcpStream::connect(server.addr).await.unwrap();
    let mut tls = connector
        .connect("localhost".try_into().unwrap(), tcp)
        .await
        .expect("the TLS handshake itself succeeds");
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let started = Instant::now();
    let mut sink = [0; 4096];
    let closed = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match tls.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    })
    .await;
    assert!(
        closed.is_ok(),
        "a TLS connection without a preface was kept open"
    );
    assert!(started.elapsed() < handshake + Duration::from_secs(2));
    // No TLS handshake at all: closed as well.
    let silent = TcpStream::connect(server.addr).await.unwrap();
    let after = closed_after(silent)
        .await
        .expect("a silent connection was kept open");
    assert!(after < handshake + Duration::from_secs(2), "{after:?}");
    // A real client is served.
    assert_serving(tls_channel(server.addr, &cert).await.unwrap()).await;
}

async fn finish_tls(mut game: Bystander) {
    game.advance().await;
}

#[test]
fn unusable_tls_files_are_refused_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.pem");
    let error = oanquan_server::TlsIdentity::read(&missing, &missing).unwrap_err();
    assert!(error.to_string().contains("missing.pem"), "{error}");
    let junk = dir.path().join("junk.pem");
    std::fs::write(&junk, "not a certificate").unwrap();
    let error = oanquan_server::TlsIdentity::read(&junk, &junk).unwrap_err();
    assert!(error.to_string().contains("TLS"), "{error}");
    // A certificate with another certificate's key.
    let (cert, _) = certificate();
    let (_, key) = certificate();
    let (cert_path, key_path) = (dir.path().join("c.pem"), dir.path().join("k.pem"));
    std::fs::write(&cert_path, cert).unwrap();
    std::fs::write(&key_path, key).unwrap();
    assert!(oanquan_server::TlsIdentity::read(&cert_path, &key_path).is_err());
}

/// The first message of a seek stream: `Ok(true)` paired, `Ok(false)` waiting.
async fn seek_once(
    client: &mut Games,
    name: &str,
) -> Result<
    (
        tonic::Streaming<pb::SeekResponse>,
        Option<pb::seek_response::Paired>,
    ),
    Status,
> {
    let mut stream = client
        .seek(pb::SeekRequest {
            display_name: name.into(),
            ..Default::default()
        })
        .await?
        .into_inner();
    let first = stream.message().await?.expect("a first message");
    match first.kind {
        Some(pb::seek_response::Kind::Waiting(_)) => Ok((stream, None)),
        Some(pb::seek_response::Kind::Paired(paired)) => Ok((stream, Some(paired))),
        other => panic!("unexpected first seek message {other:?}"),
    }
}

/// Games made by seeks and by rematches count among their creator's open games: two seeks of
/// one client paired with each other, or rematch after rematch, gave one address as many open
/// games as it liked. A client at its limit is refused before it takes anyone's waiting seek.
#[tokio::test]
async fn seeks_and_rematches_count_towards_open_games() {
    let mut settings = hostile_config();
    settings.games.max_open_games_per_client = 2;
    let server = start(settings).await;
    let mut c = server.games().await;
    // Two pairings of the client with itself: the one that completes each creates its game.
    let mut paired = Vec::new();
    for round in 0..2 {
        let (_waiting, none) = seek_once(&mut c, "Lan").await.unwrap();
        assert!(none.is_none(), "round {round}: the first seek waits");
        let (_, game) = seek_once(&mut c, "Lan").await.unwrap();
        paired.push(game.expect("the second seek pairs"));
    }
    let over_limit = |status: &Status| {
        assert_reason(
            status,
            Code::ResourceExhausted,
            "ERROR_REASON_LIMIT_EXCEEDED",
        );
        assert!(status.message().contains("open games"), "{status:?}");
    };
    over_limit(&seek_once(&mut c, "Lan").await.unwrap_err());
    over_limit(
        &c.create_game(pb::CreateGameRequest {
            display_name: "Lan".into(),
            ..Default::default()
        })
        .await
        .unwrap_err(),
    );
    // Another client's waiting seek is not taken by the refused one.
    let mut other = Games::new(channel_from("127.0.0.3", server.addr).await);
    let (_minh_waits, none) = seek_once(&mut other, "Minh").await.unwrap();
    assert!(none.is_none());
    over_limit(&seek_once(&mut c, "Lan").await.unwrap_err());
    let open = other
        .list_seeks(pb::ListSeeksRequest::default())
        .await
        .unwrap()
        .into_inner()
        .seeks;
    assert_eq!(open.len(), 1, "{open:?}");
    assert_eq!(open[0].display_name, "Minh");

    // A game that ends frees its place; a created game takes it; when that one ends, its
    // rematch takes the place again.
    let first = paired[0].game.as_ref().unwrap().id.clone();
    c.resign(authed(
        pb::ResignRequest { game_id: first },
        &paired[0].player_token,
    ))
    .await
    .unwrap();
    let (game, first_token) = create(&mut c, "standard").await;
    let joined = c
        .join_game(pb::JoinGameRequest {
            game_id: game.id.clone(),
            display_name: "Minh".into(),
        })
        .await
        .unwrap()
        .into_inner();
    over_limit(&seek_once(&mut c, "Lan").await.unwrap_err());
    c.resign(authed(
        pb::ResignRequest {
            game_id: game.id.clone(),
        },
        &first_token,
    ))
    .await
    .unwrap();
    let offer = |c: &mut Games, id: &str, token: &str| {
        let request = authed(
            pb::OfferRematchRequest {
                game_id: id.to_owned(),
            },
            token,
        );
        let mut c = c.clone();
        async move { c.offer_rematch(request).await.map(|r| r.into_inner()) }
    };
    let mut next_tokens = Vec::new();
    for token in [&first_token, &joined.player_token] {
        next_tokens.push(offer(&mut c, &game.id, token).await.unwrap().player_token);
    }
    let finished = get_game(&mut c, &game.id).await;
    let next = finished.rematch.clone();
    assert!(!next.is_empty(), "the rematch started: {finished:?}");
    assert_eq!(
        get_game(&mut c, &next).await.status,
        i32::from(pb::GameStatus::Active)
    );
    over_limit(
        &c.create_game(pb::CreateGameRequest {
            display_name: "Lan".into(),
            ..Default::default()
        })
        .await
        .unwrap_err(),
    );

    // A rematch past the limit is refused like any other game: the rematch ends, a created
    // game fills the place, and the offer that would start the rematch's rematch waits.
    c.resign(authed(
        pb::ResignRequest {
            game_id: next.clone(),
        },
        &next_tokens[0],
    ))
    .await
    .unwrap();
    let (filler, filler_token) = create(&mut c, "standard").await;
    offer(&mut c, &next, &next_tokens[0]).await.unwrap();
    let refused = offer(&mut c, &next, &next_tokens[1]).await.unwrap_err();
    over_limit(&refused);
    assert!(refused.message().contains("rematch"), "{refused:?}");
    assert!(get_game(&mut c, &next).await.rematch.is_empty());
    // Once a place is free, the same offer starts it.
    c.abort_game(authed(
        pb::AbortGameRequest {
            game_id: filler.id.clone(),
        },
        &filler_token,
    ))
    .await
    .unwrap();
    let started = offer(&mut c, &next, &next_tokens[1]).await.unwrap();
    assert!(started.rematch.is_some(), "{started:?}");
    assert_serving(server.channel().await).await;
}

/// A seek asks for the rules of the game it makes: a rule set without end is refused there as
/// in CreateGame.
#[tokio::test]
async fn a_seek_for_a_game_without_end_is_refused() {
    let server = start(hostile_config()).await;
    let mut c = server.games().await;
    let status = c
        .seek(pb::SeekRequest {
            display_name: "Lan".into(),
            rules: custom(pb::RuleSet {
                max_plies: u32::MAX,
                repetition_limit: 0,
                ..standard_set()
            }),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert_field(&status, "rules.rule_set.max_plies");
    assert!(status.message().contains("10000"), "{status:?}");
}

/// A lobby stream carries the lobby's snapshot and every open seek: one connection or client
/// gets the spectators' limits for it too, and a place comes back when a stream closes.
#[tokio::test]
async fn lobby_streams_are_limited_per_connection_and_client() {
    let mut settings = hostile_config();
    settings.streams.max_spectators_per_connection = 2;
    settings.streams.max_spectators_per_client = 3;
    let server = start(settings).await;
    let addr = server.addr;
    let lobby = |client: &mut Games| {
        let mut client = client.clone();
        async move {
            client
                .watch_lobby(pb::WatchLobbyRequest::default())
                .await
                .map(tonic::Response::into_inner)
        }
    };
    let refused = |result: Result<tonic::Streaming<pb::WatchLobbyResponse>, Status>, per: &str| {
        let status = result.expect_err("over the limit");
        assert_reason(
            &status,
            Code::ResourceExhausted,
            "ERROR_REASON_LIMIT_EXCEEDED",
        );
        assert!(
            status.message().contains("the lobby") && status.message().contains(per),
            "{status:?}"
        );
    };
    let mut one = Games::new(channel_from("127.0.0.3", addr).await);
    let mut held = vec![
        lobby(&mut one).await.unwrap(),
        lobby(&mut one).await.unwrap(),
    ];
    refused(lobby(&mut one).await, "per connection");
    let mut two = Games::new(channel_from("127.0.0.3", addr).await);
    held.push(lobby(&mut two).await.unwrap());
    refused(lobby(&mut two).await, "per client");
    // Another client is not affected.
    let mut other = Games::new(channel_from("127.0.0.4", addr).await);
    let _other = lobby(&mut other).await.unwrap();
    // A closed stream gives its place back.
    drop(held.pop());
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        match lobby(&mut two).await {
            Ok(stream) => {
                held.push(stream);
                break;
            }
            Err(status) if std::time::Instant::now() < deadline => {
                assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(status) => panic!("the place never came back: {status:?}"),
        }
    }
    assert_serving(server.channel().await).await;
}

/// Every method but reflection's takes one request message. tonic reads a unary request's first
/// and drops the rest unseen: two `CreateGame`s in one body made one game and answered OK.
/// Over gRPC and gRPC-Web alike, a second message now fails the call, and nothing is done.
/// Asserts that the server lists no game: a refused call made none.
async fn assert_no_games(games: &mut Games) {
    let listed = games
        .list_games(pb::ListGamesRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert!(listed.games.is_empty(), "{:?}", listed.games);
}

/// A gRPC-Web `CreateGame` over HTTP/1.1 with `body` and the header lines `extra` (each ending
/// in CRLF): the whole answer, as text.
async fn create_over_grpc_web(addr: SocketAddr, extra: &str, body: &[u8]) -> String {
    create_over_grpc_web_as(addr, "application/grpc-web+proto", extra, body).await
}

/// [`create_over_grpc_web`] with the body's content type.
async fn create_over_grpc_web_as(
    addr: SocketAddr,
    content_type: &str,
    extra: &str,
    body: &[u8],
) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /oanquan.v1.GameService/CreateGame HTTP/1.1\r\nHost: localhost\r\n\
         Content-Type: {content_type}\r\nX-Grpc-Web: 1\r\n{extra}\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer))
        .await
        .unwrap()
        .unwrap();
    String::from_utf8_lossy(&answer).into_owned()
}

#[tokio::test]
async fn a_call_with_two_request_messages_is_refused_and_does_nothing() {
    let server = start(config()).await;
    let mut games = server.games().await;
    let create = |name: &str| {
        pb::CreateGameRequest {
            rules: preset("standard"),
            seat: pb::Player::First.into(),
            display_name: name.into(),
            ..Default::default()
        }
        .encode_to_vec()
    };
    let mut body = grpc_frame(false, create("Lan").len() as u32, &create("Lan")).to_vec();
    body.extend_from_slice(&grpc_frame(
        false,
        create("Minh").len() as u32,
        &create("Minh"),
    ));
    let (code, message) = raw_grpc_call(
        server.addr,
        "/oanquan.v1.GameService/CreateGame",
        None,
        Bytes::from(body.clone()),
        Duration::from_secs(10),
    )
    .await
    .expect("an answer");
    assert_eq!(code, "3", "{message}");
    assert!(message.contains("one%20request%20message"), "{message}");

    // gRPC-Web over HTTP/1.1, as the probe sent it.
    let answer = create_over_grpc_web(server.addr, "", &body).await;
    assert!(answer.contains("grpc-status: 3\r\n"), "{answer}");

    assert_no_games(&mut games).await;
    // One message is still a call.
    games
        .create_game(pb::CreateGameRequest::decode(&create("Lan")[..]).unwrap())
        .await
        .unwrap();
}

/// `bytes` in standard base64, padded (as gRPC-Web text sends them).
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut text = String::new();
    for chunk in bytes.chunks(3) {
        let group = chunk
            .iter()
            .enumerate()
            .fold(0u32, |group, (i, &b)| group | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                text.push(char::from(ALPHABET[(group >> (18 - 6 * i) & 63) as usize]));
            } else {
                text.push('=');
            }
        }
    }
    text
}

/// A `CreateGame` for Lan in the first seat, framed as one gRPC message.
fn framed_create() -> bytes::Bytes {
    let create = pb::CreateGameRequest {
        rules: preset("standard"),
        seat: pb::Player::First.into(),
        display_name: "Lan".into(),
        ..Default::default()
    }
    .encode_to_vec();
    grpc_frame(false, create.len() as u32, &create)
}

/// A gRPC-Web text body that is not base64 is the client's mistake, INVALID_ARGUMENT saying so:
/// an outside probe's `%%%%` was answered CANCELLED, as if the connection had broken.
#[tokio::test]
async fn a_grpc_web_text_body_that_is_not_base64_is_invalid() {
    let server = start(config()).await;
    let mut games = server.games().await;
    let framed = framed_create();
    let text = "application/grpc-web-text";
    let encoded = base64(&framed);
    for bad in [
        "%%%%".to_owned(),
        "AA==AAAA".to_owned(),
        format!("{encoded}%"),
        encoded[..encoded.len() - 1].to_owned(),
    ] {
        let answer = create_over_grpc_web_as(server.addr, text, "", bad.as_bytes()).await;
        assert!(answer.contains("grpc-status: 3\r\n"), "{bad:?}: {answer}");
        assert!(answer.contains("not%20valid%20base64"), "{bad:?}: {answer}");
    }
    assert_no_games(&mut games).await;
    // The same call in good base64 makes its game.
    let answer = create_over_grpc_web_as(server.addr, text, "", encoded.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(!answer.contains("grpc-status: 3"), "{answer}");
}

/// A gRPC-Web text call is answered in text whatever its `Accept` says, unless that asks for
/// binary gRPC-Web: an outside probe's text request without `Accept` got bytes back, which a
/// text client cannot decode.
#[tokio::test]
async fn a_grpc_web_text_call_is_answered_in_text() {
    let server = start(config()).await;
    let encoded = base64(&framed_create());
    let text = "application/grpc-web-text";
    for (accept, answered_in) in [
        ("", "application/grpc-web-text"),
        ("Accept: */*\r\n", "application/grpc-web-text"),
        (
            "Accept: application/grpc-web-text\r\n",
            "application/grpc-web-text",
        ),
        (
            "Accept: application/grpc-web+proto\r\n",
            "application/grpc-web+proto",
        ),
        (
            "Accept: Application/GRPC-WEB\r\n",
            "application/grpc-web+proto",
        ),
        (
            "Accept: application/grpc-web;q=0, application/grpc-web-text\r\n",
            "application/grpc-web-text",
        ),
        (
            "Accept: application/grpc-web, application/grpc-web-text+proto\r\n",
            "application/grpc-web-text",
        ),
        (
            "Accept: application/grpc-web+json\r\n",
            "application/grpc-web-text",
        ),
    ] {
        let answer = create_over_grpc_web_as(server.addr, text, accept, encoded.as_bytes()).await;
        let (head, body) = answer.split_once("\r\n\r\n").unwrap();
        let content_type = head
            .lines()
            .find_map(|line| line.strip_prefix("content-type: "))
            .unwrap_or_else(|| panic!("{accept:?}: {head}"));
        assert!(content_type.starts_with(answered_in), "{accept:?}: {head}");
        if answered_in == text {
            assert!(
                body.bytes()
                    .all(|b| b.is_ascii_graphic() || b.is_ascii_whitespace()),
                "{accept:?}: {body:?}"
            );
        }
    }
}

/// A call whose `grpc-timeout` has run out before it starts is answered with the timeout and
/// not run: an outside probe's `CreateGame` with `grpc-timeout: 1n` made a game that its client
/// was told had timed out.
#[tokio::test]
async fn a_call_out_of_time_before_it_starts_makes_no_game() {
    let server = start(config()).await;
    let mut games = server.games().await;
    let body = framed_create();
    for _ in 0..20 {
        let answer = create_over_grpc_web(server.addr, "grpc-timeout: 1n\r\n", &body).await;
        assert!(answer.contains("grpc-status: 4\r\n"), "{answer}");
    }
    assert_no_games(&mut games).await;
}
