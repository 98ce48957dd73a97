//! The real binary's Prometheus endpoint (`--metrics-listen`) after a scripted game, and the
//! request ids of its calls.

mod common;

use std::collections::HashMap;
use std::io::Read as _;
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use oanquan_proto::v1 as pb;
use oanquan_proto::v1::game_service_client::GameServiceClient;
use tonic::Code;

/// A started server; killed when dropped.
struct Running {
    child: Child,
    addr: SocketAddr,
    metrics: SocketAddr,
}

impl Running {
    fn start() -> Running {
        Running::start_with(&[])
    }

    fn start_with(extra: &[&str]) -> Running {
        let storage: &[&str] = if extra.contains(&"--database") {
            &[]
        } else {
            &["--in-memory"]
        };
        let mut child = Command::new(env!("CARGO_BIN_EXE_oanquan-server"))
            .args(storage)
            .args(["--listen", "127.0.0.1:0"])
            .args(["--metrics-listen", "127.0.0.1:0", "--node-name", "node-a"])
            .args(extra)
            .env("RUST_LOG", "warn")
            .env_remove("OANQUAN_DATABASE")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn oanquan-server");
        let (addr, metrics) = metered_addresses(&mut child);
        Running {
            child,
            addr,
            metrics,
        }
    }

    async fn games(&self) -> Games {
        GameServiceClient::connect(format!("http://{}", self.addr))
            .await
            .expect("connect")
    }

    /// GETs `path` from the metrics listener: (status line, content type, body).
    fn get(&self, path: &str) -> (String, String, String) {
        let (head, body) = http_get(self.metrics, path);
        let status = head.lines().next().unwrap_or_default().to_owned();
        let content_type = head
            .lines()
            .find_map(|line| {
                line.to_ascii_lowercase()
                    .strip_prefix("content-type: ")
                    .map(str::to_owned)
            })
            .unwrap_or_default();
        (status, content_type, body.to_owned())
    }

    /// Every sample of a scrape, by `name{labels}` as printed.
    fn scrape(&self) -> Samples {
        let (status, content_type, body) = self.get("/metrics");
        assert!(status.contains(" 200 "), "{status}");
        assert!(
            content_type.starts_with("application/openmetrics-text"),
            "{content_type}"
        );
        assert!(body.ends_with("# EOF\n"), "{body}");
        Samples::parse(&body)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The samples of a scrape.
#[derive(Debug)]
struct Samples(HashMap<String, f64>);

impl Samples {
    fn parse(text: &str) -> Samples {
        let samples = text
            .lines()
            .filter(|line| !line.starts_with('#') && !line.is_empty())
            .map(|line| {
                let (series, value) = line.rsplit_once(' ').expect("name and value");
                let value = value.parse().unwrap_or_else(|_| panic!("{line}"));
                (series.to_owned(), value)
            })
            .collect();
        Samples(samples)
    }

    /// The value of the series `name` whose labels include every one of `labels`
    /// (`key="value"`), summed over the series that match; 0 if none does.
    fn sum(&self, name: &str, labels: &[&str]) -> f64 {
        self.0
            .iter()
            .filter(|(series, _)| {
                let (series_name, series_labels) =
                    series.split_once('{').unwrap_or((series.as_str(), ""));
                series_name == name && labels.iter().all(|label| series_labels.contains(label))
            })
            .map(|(_, value)| value)
            .sum()
    }
}

fn rpc<'a>(method: &'a str, code: &'a str) -> [String; 3] {
    [
        r#"service="oanquan.v1.GameService""#.to_owned(),
        format!(r#"method="{method}""#),
        format!(r#"code="{code}""#),
    ]
}

fn labels(owned: &[String]) -> Vec<&str> {
    owned.iter().map(String::as_str).collect()
}

/// Polls the scrape until `done` holds of it (bounded: gauges follow streams that close on
/// their own time).
fn wait_for(server: &Running, what: &str, done: impl Fn(&Samples) -> bool) -> Samples {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let samples = server.scrape();
        if done(&samples) {
            return samples;
        }
        assert!(Instant::now() < deadline, "{what}: {samples:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scripted_game_shows_in_the_metrics() {
    let server = Running::start();
    let mut games = server.games().await;

    // Ready once the server has started serving (the listener opens a little before); this
    // client's connection past its handshake once the server has read its preface.
    let before = wait_for(&server, "ready, and a connection serving", |samples| {
        samples.sum("oanquan_ready", &[]) == 1.0
            && samples.sum("oanquan_connections_open", &[r#"state="serving""#]) == 1.0
    });
    assert_eq!(
        before.sum(
            "oanquan_build_info",
            &[
                r#"node="node-a""#,
                &format!(r#"version="{}""#, env!("CARGO_PKG_VERSION"))
            ]
        ),
        1.0
    );
    assert_eq!(before.sum("oanquan_moves_total", &[]), 0.0);
    assert_eq!(
        before.sum("oanquan_connections_open", &[r#"state="draining""#]),
        0.0
    );

    // A connection that sends nothing stays in its handshake until it closes.
    let silent = TcpStream::connect(server.addr).unwrap();
    wait_for(&server, "a silent connection in its handshake", |samples| {
        samples.sum("oanquan_connections_open", &[r#"state="handshake""#]) == 1.0
    });
    drop(silent);
    wait_for(&server, "the silent connection closes", |samples| {
        samples.sum("oanquan_connections_open", &[r#"state="handshake""#]) == 0.0
    });

    // The open games are counted at most once a second, so the gauges may lag that much.
    let (game, first) = create(&mut games, "standard").await;
    wait_for(&server, "the waiting game counted", |samples| {
        samples.sum("oanquan_games", &[r#"status="waiting""#]) == 1.0
    });
    let joined = games
        .join_game(pb::JoinGameRequest {
            game_id: game.id.clone(),
            display_name: "Minh".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let second = joined.player_token;
    wait_for(&server, "the game counted as active", |samples| {
        samples.sum("oanquan_games", &[r#"status="active""#]) == 1.0
            && samples.sum("oanquan_games", &[r#"status="waiting""#]) == 0.0
    });

    // A stream open while the game is played: it counts as open, and its events as sent.
    let mut watch = games
        .watch_game(pb::WatchGameRequest {
            game_id: game.id.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    next(&mut watch).await.unwrap();
    let open = server.scrape();
    assert_eq!(open.sum("oanquan_streams_open", &[r#"kind="game""#]), 1.0);

    // One failing call: the second player moves out of turn.
    let refused = play(&mut games, &game.id, &second, 1, pb::Direction::Right, None)
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::FailedPrecondition, "{refused:?}");
    // And one for a game that does not exist.
    let missing = games
        .get_game(pb::GetGameRequest {
            game_id: "g_doesnotexist".into(),
        })
        .await
        .unwrap_err();

    let mut moves = 0;
    let mut state = get_game(&mut games, &game.id).await;
    while state.status() == pb::GameStatus::Active {
        state = play_one(&mut games, &game.id, (&first, &second)).await;
        moves += 1;
        assert!(moves < 2000, "the game does not end");
    }
    assert_eq!(state.status(), pb::GameStatus::Finished);
    drop(watch);

    let after = wait_for(&server, "the game stream closes", |samples| {
        samples.sum("oanquan_streams_open", &[r#"kind="game""#]) == 0.0
            && samples.sum("oanquan_games", &[r#"status="active""#]) == 0.0
    });
    assert_eq!(after.sum("oanquan_moves_total", &[]), f64::from(moves));
    assert_eq!(after.sum("oanquan_games_created_total", &[]), 1.0);
    assert_eq!(after.sum("oanquan_games_finished_total", &[]), 1.0);
    assert_eq!(after.sum("oanquan_games", &[r#"status="active""#]), 0.0);
    let ok_moves = rpc("PlayMove", "OK");
    assert_eq!(
        after.sum("oanquan_rpcs_total", &labels(&ok_moves)),
        f64::from(moves)
    );
    let denied = rpc("PlayMove", "FAILED_PRECONDITION");
    assert_eq!(after.sum("oanquan_rpcs_total", &labels(&denied)), 1.0);
    assert_eq!(missing.code(), Code::NotFound, "{missing:?}");
    let not_found = rpc("GetGame", "NOT_FOUND");
    assert_eq!(after.sum("oanquan_rpcs_total", &labels(&not_found)), 1.0);
    for (method, calls) in [("CreateGame", 1), ("JoinGame", 1), ("WatchGame", 1)] {
        let all = [
            r#"service="oanquan.v1.GameService""#.to_owned(),
            format!(r#"method="{method}""#),
        ];
        assert_eq!(
            after.sum("oanquan_rpcs_total", &labels(&all)),
            f64::from(calls),
            "{method}"
        );
    }
    assert_eq!(
        after.sum(
            "oanquan_rpc_duration_seconds_count",
            &[r#"method="PlayMove""#]
        ),
        f64::from(moves + 1)
    );
    assert!(after.sum("oanquan_stream_events_sent_total", &[r#"kind="game""#]) >= f64::from(moves));
    // Every create and commit: the create, the join, each move (the ending one included).
    assert!(
        after.sum(
            "oanquan_store_commit_duration_seconds_count",
            &[r#"operation="commit""#]
        ) >= f64::from(moves + 1)
    );
    assert_eq!(
        after.sum(
            "oanquan_store_commit_duration_seconds_count",
            &[r#"operation="create""#]
        ),
        1.0
    );
    assert!(after.sum("oanquan_connections_open", &[]) >= 1.0);

    let (status, _, _) = server.get("/");
    assert!(status.contains(" 404 "), "{status}");

    // Every series the Grafana dashboard queries exists, under that name, after a game.
    let queried = dashboard_metric_names();
    assert!(queried.len() >= 15, "{queried:?}");
    for name in &queried {
        assert!(
            after.0.keys().any(|series| series
                .split_once('{')
                .map_or(series.as_str(), |(name, _)| name)
                == name),
            "docs/grafana-dashboard.json queries {name}, which the server does not export"
        );
    }
}

/// The metric names in the `expr` of every panel of docs/grafana-dashboard.json (which must be
/// valid JSON).
fn dashboard_metric_names() -> std::collections::BTreeSet<String> {
    let text = include_str!("../../../docs/grafana-dashboard.json");
    let dashboard: serde_json::Value = serde_json::from_str(text).expect("the dashboard is JSON");
    let mut names = std::collections::BTreeSet::new();
    let mut exprs = Vec::new();
    let mut pending = vec![&dashboard];
    while let Some(value) = pending.pop() {
        match value {
            serde_json::Value::Object(map) => {
                if let Some(serde_json::Value::String(expr)) = map.get("expr") {
                    exprs.push(expr.as_str());
                }
                pending.extend(map.values());
            }
            serde_json::Value::Array(values) => pending.extend(values),
            _ => {}
        }
    }
    for expr in exprs {
        let mut rest = expr;
        while let Some(start) = rest.find("oanquan_") {
            let tail = &rest[start..];
            let end = tail
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(tail.len());
            names.insert(tail[..end].to_owned());
            rest = &tail[end..];
        }
    }
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scrapes_in_a_loop_count_the_open_games_once_a_second() {
    let server = Running::start();
    let mut games = server.games().await;
    create(&mut games, "standard").await;
    wait_for(&server, "the waiting game counted", |samples| {
        samples.sum("oanquan_games", &[r#"status="waiting""#]) == 1.0
    });
    // That count was made after this instant; scrapes that end within the second after it
    // show it and not a new count, however many there are. (A scrape that ends later proves
    // nothing either way and is not checked, so a slow machine cannot fail this.)
    let counted = Instant::now();
    create(&mut games, "standard").await;
    let mut checked = 0;
    loop {
        let samples = server.scrape();
        if counted.elapsed() >= Duration::from_millis(900) {
            break;
        }
        assert_eq!(
            samples.sum("oanquan_games", &[r#"status="waiting""#]),
            1.0,
            "counted again within a second: {samples:?}"
        );
        checked += 1;
    }
    assert!(checked > 0, "no scrape within the second");
    wait_for(&server, "both waiting games counted", |samples| {
        samples.sum("oanquan_games", &[r#"status="waiting""#]) == 2.0
    });
}
#[tokio::test]
async fn every_response_carries_a_request_id() {
    let server = Running::start();
    let mut games = server.games().await;
    let id_of = |metadata: &tonic::metadata::MetadataMap| {
        metadata
            .get("x-request-id")
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
            .expect("an x-request-id")
    };
    let request = |id: Option<&str>| {
        let mut request = tonic::Request::new(pb::ListGamesRequest::default());
        if let Some(id) = id {
            request
                .metadata_mut()
                .insert("x-request-id", id.parse().unwrap());
        }
        request
    };

    // Given: returned as it is.
    let response = games.list_games(request(Some("req-42.abc"))).await.unwrap();
    assert_eq!(id_of(response.metadata()), "req-42.abc");
    // Not given, or unusable (too long): a fresh one each time.
    let fresh = id_of(games.list_games(request(None)).await.unwrap().metadata());
    assert_eq!(fresh.len(), 32, "{fresh}");
    let long = "x".repeat(200);
    let replaced = id_of(
        games
            .list_games(request(Some(&long)))
            .await
            .unwrap()
            .metadata(),
    );
    assert_eq!(replaced.len(), 32);
    assert_ne!(replaced, fresh);

    // On an error.
    let mut failing = tonic::Request::new(pb::GetGameRequest {
        game_id: "g_doesnotexist".into(),
    });
    failing
        .metadata_mut()
        .insert("x-request-id", "lost-game".parse().unwrap());
    let status = games.get_game(failing).await.unwrap_err();
    assert_eq!(status.code(), Code::NotFound);
    assert_eq!(id_of(status.metadata()), "lost-game");

    // On a stream.
    let (game, _) = create(&mut games, "standard").await;
    let mut watch = tonic::Request::new(pb::WatchGameRequest {
        game_id: game.id,
        ..Default::default()
    });
    watch
        .metadata_mut()
        .insert("x-request-id", "watching".parse().unwrap());
    let stream = games.watch_game(watch).await.unwrap();
    assert_eq!(id_of(stream.metadata()), "watching");
}

#[tokio::test]
async fn limits_count_their_refusals() {
    let server = Running::start_with(&[
        "--exempt-loopback",
        "false",
        "--rate-limit",
        "1",
        "--rate-limit-burst",
        "2",
        "--max-connections-per-client",
        "1",
    ]);
    let mut games = server.games().await;
    let mut limited = 0;
    for _ in 0..6 {
        match games.list_games(pb::ListGamesRequest::default()).await {
            Ok(_) => {}
            Err(status) if status.code() == Code::ResourceExhausted => limited += 1,
            Err(status) => panic!("{status:?}"),
        }
    }
    assert!(limited >= 3, "{limited} of 6 limited");

    // A second connection from the same address is closed as soon as it is accepted.
    let mut second = TcpStream::connect(server.addr).unwrap();
    second
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut byte = [0; 1];
    assert_eq!(second.read(&mut byte).unwrap_or(0), 0, "closed");

    let samples = wait_for(&server, "the refused connection is counted", |samples| {
        samples.sum("oanquan_connections_refused_total", &[]) == 1.0
    });
    assert_eq!(
        samples.sum("oanquan_rate_limited_total", &[]),
        f64::from(limited)
    );
    let refused = [
        r#"method="ListGames""#.to_owned(),
        r#"code="RESOURCE_EXHAUSTED""#.to_owned(),
    ];
    assert_eq!(
        samples.sum("oanquan_rpcs_total", &labels(&refused)),
        f64::from(limited)
    );
    assert_eq!(samples.sum("oanquan_connections_open", &[]), 1.0);
}

/// A request that is not protobuf is answered INTERNAL, as the gRPC spec has it, and counted
/// apart as well, so that an alert on the server's INTERNAL answers can leave out what one
/// client's junk causes (an outside probe's tripped it).
#[tokio::test]
async fn undecodable_requests_are_counted_apart() {
    let server = Running::start();
    let mut frames = vec![common::grpc_frame(false, 4, &[0x0a, 0xff, 0xfe, 0xc0])];
    // A frame marked compressed with no `grpc-encoding`, and a flag that is neither 0 nor 1:
    // INTERNAL as gRPC's compression spec has it, the client's fault as well (an outside
    // probe's counted as the server's failures).
    let mut compressed = common::grpc_frame(true, 2, &[0x0a, 0x00]).to_vec();
    frames.push(compressed.clone().into());
    compressed[0] = 7;
    frames.push(compressed.into());
    let sent = frames.len();
    for junk in frames {
        let (code, message) = common::raw_grpc_call(
            server.addr,
            "/oanquan.v1.GameService/GetGame",
            None,
            junk,
            Duration::from_secs(10),
        )
        .await
        .expect("an answer");
        assert_eq!(code, "13", "{message}");
    }
    let mut games = server.games().await;
    let missing = games
        .get_game(pb::GetGameRequest {
            game_id: "nosuchgame".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(missing.code(), Code::NotFound);
    let samples = wait_for(&server, "the undecodable calls are counted", |samples| {
        samples.sum("oanquan_rpcs_undecodable_total", &[]) == sent as f64
    });
    let internal = [
        r#"method="GetGame""#.to_owned(),
        r#"code="INTERNAL""#.to_owned(),
    ];
    assert_eq!(
        samples.sum("oanquan_rpcs_total", &labels(&internal)),
        sent as f64
    );
}

/// SQLite's group commit: every write lands in exactly one counted batch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_commit_batches_are_counted() {
    let dir = tempfile::tempdir().unwrap();
    let database = dir.path().join("oanquan.db");
    let server = Running::start_with(&["--database", database.to_str().unwrap()]);
    commit_batches_are_counted(&server).await;
}

/// PostgreSQL's group commit (`--database-batch`): the same, for game creates and commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_commit_batches_are_counted() {
    let Some(schema) = common::nodes::Schema::new("metrics").await else {
        return;
    };
    let server = Running::start_with(&["--database", &schema.database]);
    commit_batches_are_counted(&server).await;
    drop(server);
    schema.drop().await;
}

/// Plays 4 games of 5 moves at once on `server` (so that some commits may share a
/// transaction) and checks that its batches count every write once.
async fn commit_batches_are_counted(server: &Running) {
    let mut games = server.games().await;
    // Several games at once, so that some commits may share a transaction.
    let mut played = Vec::new();
    for _ in 0..4 {
        played.push(started(&mut games, "standard").await);
    }
    for _ in 0..5 {
        let moves = played.iter().map(|(id, first, second)| {
            let mut games = games.clone();
            async move { play_one(&mut games, id, (first, second)).await }
        });
        futures::future::join_all(moves).await;
    }
    let samples = server.scrape();
    let writes = samples.sum("oanquan_store_commit_duration_seconds_count", &[]);
    assert!(writes >= 4.0 * 2.0 + 4.0 * 5.0, "{samples:?}");
    // Sizes sum to the writes (no write uncounted or counted twice); at most one batch each.
    assert_eq!(
        samples.sum("oanquan_store_commit_batch_size_sum", &[]),
        writes,
        "{samples:?}"
    );
    let batches = samples.sum("oanquan_store_commit_batch_size_count", &[]);
    assert!(batches >= 1.0 && batches <= writes, "{samples:?}");
    assert_eq!(
        samples.sum("oanquan_store_commit_batch_size_bucket", &[r#"le="+Inf""#]),
        batches
    );
}

/// In process, for a hub buffer of one event (not a flag): each commit of a move publishes
/// more than that, so the watch lags, catches up from the store, and is counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_that_falls_behind_counts_as_lagged() {
    let metrics = oanquan_server::metrics::Metrics::new("lag");
    let mut settings = config();
    settings.streams.broadcast_capacity = 1;
    settings.metrics = Some(std::sync::Arc::clone(&metrics));
    let server = start(settings).await;
    let mut games = server.games().await;
    let (id, first, second) = started(&mut games, "standard").await;
    let mut watch = games
        .watch_game(pb::WatchGameRequest {
            game_id: id.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    next(&mut watch).await.unwrap();
    let lags = || async {
        Samples::parse(&metrics.render().await)
            .sum("oanquan_stream_lags_total", &[r#"kind="game""#])
    };
    while lags().await == 0.0 {
        let game = play_one(&mut games, &id, (&first, &second)).await;
        if game.status() != pb::GameStatus::Active {
            assert!(
                lags().await >= 1.0,
                "a whole game and the watch never lagged"
            );
            break;
        }
    }
    // It still delivers every move, in order.
    let moves = get_game(&mut games, &id).await.position.unwrap().ply;
    let mut seen = 0;
    while seen < moves {
        let event = next_game_event(&mut watch).await.expect("an event");
        if let Some(pb::game_event::Kind::MovePlayed(_)) = event.kind {
            seen += 1;
        }
    }
}

/// The token of the tests of `--metrics-token-file`.
const TOKEN: &str = "s3cr3t-metrics-token-0123456789";

/// A header's value in a response head, by its name in any case.
fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.eq_ignore_ascii_case(name).then(|| value.trim())
    })
}

/// With `--metrics-token-file`, `/metrics` answers only `Authorization: Bearer <token>`
/// (the scheme in any case, as RFC 7235 has it); `/ready` and `/live` stay open.
#[test]
fn a_metrics_token_guards_the_metrics_and_not_the_probes() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("metrics-token");
    std::fs::write(&file, format!("{TOKEN}\n")).unwrap();
    let server = Running::start_with(&["--metrics-token-file", file.to_str().unwrap()]);
    let get = |method: &str, path: &str, headers: &[u8]| {
        let (head, body) = http_request_with(server.metrics, method, path, headers);
        let status = head.lines().next().unwrap_or_default().to_owned();
        (status, head, body)
    };
    let bearer = |credential: &[u8]| {
        let mut line = b"Authorization: ".to_vec();
        line.extend_from_slice(credential);
        line.extend_from_slice(b"\r\n");
        line
    };
    let right = bearer(format!("Bearer {TOKEN}").as_bytes());

    // Without a header: 401 and the challenge, and nothing of the metrics.
    let (status, head, body) = get("GET", "/metrics", b"");
    assert!(status.contains(" 401 "), "{status}");
    assert_eq!(
        header(&head, "www-authenticate"),
        Some(r#"Bearer realm="metrics""#)
    );
    assert!(!body.contains("oanquan_"), "{body}");
    let (status, head, body) = get("HEAD", "/metrics", b"");
    assert!(status.contains(" 401 "), "{status}");
    assert!(header(&head, "www-authenticate").is_some(), "{head}");
    assert!(body.is_empty(), "{body}");

    // With the token: the metrics.
    for scheme in ["Bearer", "bearer", "BEARER"] {
        let (status, head, body) = get(
            "GET",
            "/metrics",
            &bearer(format!("{scheme} {TOKEN}").as_bytes()),
        );
        assert!(status.contains(" 200 "), "{scheme}: {status}");
        assert!(
            header(&head, "content-type")
                .is_some_and(|value| value.starts_with("application/openmetrics-text")),
            "{head}"
        );
        assert!(body.ends_with("# EOF\n"), "{body}");
        let samples = Samples::parse(&body);
        assert_eq!(
            samples.sum("oanquan_build_info", &[r#"node="node-a""#]),
            1.0
        );
    }

    // Anything else: the same 401, saying the credentials are not valid.
    let wrong: Vec<Vec<u8>> = vec![
        bearer(b"Bearer not-the-token-0123456789"),
        bearer(format!("Bearer {}", &TOKEN[..TOKEN.len() - 1]).as_bytes()),
        bearer(format!("Bearer {TOKEN}0").as_bytes()),
        bearer(format!("Bearer {}", TOKEN.to_uppercase()).as_bytes()),
        bearer(format!("Basic {TOKEN}").as_bytes()),
        bearer(format!("Bearer{TOKEN}").as_bytes()),
        bearer(TOKEN.as_bytes()),
        bearer(b"Bearer"),
        bearer(b"Bearer "),
        // Bytes that are not ASCII (HTTP's obs-text), and not UTF-8 either.
        bearer(b"Bearer \xc3\xa9\xff\xfe-s3cr3t-metrics-token"),
        bearer(&[format!("Bearer {TOKEN}").as_bytes(), "é".as_bytes()].concat()),
        // Two headers: which one would count is a guess, so neither does.
        [right.clone(), bearer(b"Bearer not-the-token-0123456789")].concat(),
        [right.clone(), right.clone()].concat(),
    ];
    for headers in &wrong {
        let shown = String::from_utf8_lossy(headers);
        let (status, head, body) = get("GET", "/metrics", headers);
        assert!(status.contains(" 401 "), "{shown}: {status}");
        assert_eq!(
            header(&head, "www-authenticate"),
            Some(r#"Bearer realm="metrics", error="invalid_token""#),
            "{shown}"
        );
        assert!(!body.contains("oanquan_"), "{shown}: {body}");
    }

    // A 1 MB header is refused by the HTTP parser before it is looked at (431, or the
    // connection closed under the client while it still writes), and the listener serves on.
    let huge = bearer(format!("Bearer {}", "a".repeat(1 << 20)).as_bytes());
    let answer = raw_http(server.metrics, "/metrics", &huge);
    assert!(!answer.contains(" 200 "), "{answer}");
    assert!(!answer.contains("oanquan_"), "{answer}");
    let (status, _, _) = get("GET", "/metrics", &right);
    assert!(status.contains(" 200 "), "{status}");

    // The probes need no token.
    let (status, _, body) = get("GET", "/ready", b"");
    assert!(status.contains(" 200 "), "{status}");
    assert_eq!(body, "ready\n");
    let (status, _, body) = get("GET", "/live", b"");
    assert!(status.contains(" 200 "), "{status}");
    assert_eq!(body, "live\n");
    let (status, _, _) = get("GET", "/ready", &bearer(b"Bearer nonsense"));
    assert!(status.contains(" 200 "), "{status}");

    // Rotated without a restart (a new file renamed over the old, as Kubernetes does): the
    // next scrape needs the new token. A file that then stops holding a token keeps it.
    let rotated = "fedcba9876543210-rotated";
    let staged = dir.path().join("staged");
    std::fs::write(&staged, format!("{rotated}\n")).unwrap();
    std::fs::rename(&staged, &file).unwrap();
    let new = bearer(format!("Bearer {rotated}").as_bytes());
    let (status, _, body) = get("GET", "/metrics", &new);
    assert!(status.contains(" 200 "), "{status}");
    assert!(body.ends_with("# EOF\n"), "{body}");
    let (status, _, _) = get("GET", "/metrics", &right);
    assert!(status.contains(" 401 "), "{status}");
    std::fs::write(&file, b"half").unwrap();
    let (status, _, _) = get("GET", "/metrics", &new);
    assert!(status.contains(" 200 "), "{status}");
    let (status, _, _) = get("GET", "/metrics", &bearer(b"Bearer half"));
    assert!(status.contains(" 401 "), "{status}");
}

/// What a GET of `path` with the raw header lines `headers` gets back, as far as it gets: the
/// writes and the read may fail when the server closes the connection first.
fn raw_http(addr: SocketAddr, path: &str, headers: &[u8]) -> String {
    use std::io::Write as _;
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n").into_bytes();
    request.extend_from_slice(headers);
    request.extend_from_slice(b"Connection: close\r\n\r\n");
    let _ = stream.write_all(&request);
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    String::from_utf8_lossy(&response).into_owned()
}

/// A token file that is missing, empty or malformed stops the server at start (exit 1, nothing
/// on stdout) with one line saying why, which never shows the file's contents.
#[test]
fn bad_metrics_token_files_stop_the_server_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, contents: &[u8]| {
        let path = dir.path().join(name);
        std::fs::write(&path, contents).unwrap();
        path
    };
    let cases = [
        (dir.path().join("missing"), "cannot be read: No such file"),
        (dir.path().to_path_buf(), "is a directory"),
        (write("empty", b""), "is empty"),
        (write("newline", b"\n"), "is empty"),
        (
            write("short", b"s3cr3t-fifteen!\n"),
            "holds a token of 15 bytes; give at least 16",
        ),
        (
            write("latin1", b"s3cr3t-caf\xe9-0123456789"),
            "is not UTF-8 (at byte 10)",
        ),
        (
            write("space", b"s3cr3t token-0123456789\n"),
            "has whitespace at byte 6",
        ),
        (
            write("lines", b"s3cr3t-token-0123456789\n\n"),
            "has a line break at byte 23",
        ),
        (
            write("control", b"s3cr3t\x1b[31m-0123456789"),
            "has a control character at byte 6",
        ),
    ];
    for (path, why) in &cases {
        for through_env in [false, true] {
            let mut command = Command::new(env!("CARGO_BIN_EXE_oanquan-server"));
            command
                .args(["--in-memory", "--listen", "127.0.0.1:0"])
                .args(["--metrics-listen", "127.0.0.1:0"])
                .env("RUST_LOG", "warn")
                .env_remove("OANQUAN_DATABASE")
                .stdin(Stdio::null());
            if through_env {
                command.env("OANQUAN_METRICS_TOKEN_FILE", path);
            } else {
                command
                    .env_remove("OANQUAN_METRICS_TOKEN_FILE")
                    .arg("--metrics-token-file")
                    .arg(path);
            }
            let output = command.output().expect("run oanquan-server");
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert_eq!(output.status.code(), Some(1), "{path:?}: {stderr}");
            assert!(output.stdout.is_empty(), "{path:?}: nothing listens");
            assert_eq!(stderr.trim_end().lines().count(), 1, "one line: {stderr}");
            assert!(
                stderr.contains(&format!(
                    "--metrics-token-file (OANQUAN_METRICS_TOKEN_FILE) {path:?} {why}"
                )),
                "{path:?}: {stderr}"
            );
            assert!(!stderr.contains("s3cr3t"), "the token shows: {stderr}");
        }
    }

    // Without a metrics listener a token file guards nothing: refused as a usage error.
    let good = write("good", format!("{TOKEN}\n").as_bytes());
    let output = Command::new(env!("CARGO_BIN_EXE_oanquan-server"))
        .args([
            "--in-memory",
            "--listen",
            "127.0.0.1:0",
            "--metrics-token-file",
        ])
        .arg(&good)
        .env_remove("OANQUAN_METRICS_LISTEN")
        .stdin(Stdio::null())
        .output()
        .expect("run oanquan-server");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--metrics-listen"), "{stderr}");
}

/// A client that leaves halfway through sending its request (resets the stream, or closes the
/// connection) broke the call: CANCELLED, not the INTERNAL tonic answers for a message cut
/// short, which the server-error alert counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_cut_short_by_its_client_counts_as_cancelled() {
    let server = Running::start();
    let half = |tcp| async move {
        let (client, connection) = h2::client::handshake(tcp).await.unwrap();
        let connection = tokio::spawn(connection);
        let mut client = client.ready().await.unwrap();
        let request = http::Request::builder()
            .method("POST")
            .uri("/oanquan.v1.GameService/GetGame")
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(())
            .unwrap();
        let (response, mut stream) = client.send_request(request, false).unwrap();
        // 16 bytes announced, 4 sent.
        stream
            .send_data(bytes::Bytes::from_static(b"\0\0\0\0\x10half"), false)
            .unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        (response, stream, connection)
    };
    let tcp = || async { tokio::net::TcpStream::connect(server.addr).await.unwrap() };

    let (_response, mut stream, _connection) = half(tcp().await).await;
    stream.send_reset(h2::Reason::CANCEL);
    let (_response, _stream, connection) = half(tcp().await).await;
    connection.abort();

    let samples = wait_for(&server, "two cancelled calls", |s| {
        s.sum("oanquan_rpcs_total", &labels(&rpc("GetGame", "CANCELLED"))) >= 2.0
    });
    assert_eq!(
        samples.sum("oanquan_rpcs_total", &labels(&rpc("GetGame", "INTERNAL")))
            + samples.sum("oanquan_rpcs_total", &labels(&rpc("GetGame", "UNKNOWN"))),
        0.0,
        "{samples:?}"
    );
}

/// A GET of `path` on `addr` naming `host` in its `Host` header: the status line and body.
fn get_naming(addr: SocketAddr, path: &str, host: &str) -> (String, String) {
    use std::io::Write as _;
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_owned(), body.to_owned())
}

/// A page of another site that has its name resolve to 127.0.0.1 (DNS rebinding) names that
/// site in `Host`: the metrics listener does not answer it unless told to.
#[test]
fn metrics_answer_only_the_names_this_server_has() {
    let server = Running::start();
    let (status, body) = get_naming(server.metrics, "/metrics", "rebind.example:9464");
    assert!(status.contains(" 403 "), "{status}");
    assert!(body.contains("--allowed-host rebind.example"), "{body}");
    assert!(!body.contains("oanquan_"), "{body}");
    for host in ["127.0.0.1:9464", "localhost", "[::1]:9464"] {
        let (status, body) = get_naming(server.metrics, "/metrics", host);
        assert!(status.contains(" 200 "), "{host}: {status}");
        assert!(body.contains("oanquan_build_info"), "{body}");
    }
    drop(server);

    let server = Running::start_with(&["--allowed-host", "rebind.example"]);
    let (status, _) = get_naming(server.metrics, "/live", "Rebind.Example:9464");
    assert!(status.contains(" 200 "), "{status}");
    let (status, _) = get_naming(server.metrics, "/live", "other.example");
    assert!(status.contains(" 403 "), "{status}");
}
