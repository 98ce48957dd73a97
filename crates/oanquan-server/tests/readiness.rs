//! Readiness through the real binary: `/ready` and `/live` on the metrics listener,
//! `--ready-file`, and gRPC health, during a drain and while the store cannot be written.

mod common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::{BufMut as _, Bytes, BytesMut};
use common::*;
use oanquan_proto::v1 as pb;
use prost::Message as _;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

/// A started server; killed when dropped.
struct Running {
    child: Child,
    addr: SocketAddr,
    metrics: SocketAddr,
    ready_file: PathBuf,
}

impl Running {
    fn start(dir: &Path, storage: &[&str]) -> Running {
        let ready_file = dir.join("ready");
        let mut child = Command::new(env!("CARGO_BIN_EXE_oanquan-server"))
            .args(["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"])
            .arg("--ready-file")
            .arg(&ready_file)
            // Far longer than the test: only the open call may hold the drain.
            .args(["--shutdown-drain-timeout", "60s"])
            .args(storage)
            .env("RUST_LOG", "warn")
            .env_remove("OANQUAN_DATABASE")
            .env_remove("OANQUAN_IN_MEMORY")
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
            ready_file,
        }
    }

    async fn channel(&self) -> tonic::transport::Channel {
        tonic::transport::Channel::from_shared(format!("http://{}", self.addr))
            .unwrap()
            .connect()
            .await
            .expect("connect")
    }

    /// GETs `path` from the metrics listener: (status code, body).
    fn get(&self, path: &str) -> (u16, String) {
        let (head, body) = http_get(self.metrics, path);
        let code = head
            .split(' ')
            .nth(1)
            .and_then(|code| code.parse().ok())
            .unwrap_or_else(|| panic!("a status line: {head}"));
        (code, body.to_owned())
    }

    /// The value of the sample `series` (as printed, labels included) in a scrape of
    /// `/metrics`.
    fn sample(&self, series: &str) -> Option<f64> {
        let (code, body) = self.get("/metrics");
        assert_eq!(code, 200, "{body}");
        body.lines()
            .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
    }

    /// Polls `/ready`, the ready file and the `oanquan_ready` gauge until they say `ready`,
    /// or not and why (bounded).
    fn wait_ready(&self, ready: bool, why: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let (code, body) = self.get("/ready");
            let file = self.ready_file.exists();
            let gauge = self.sample("oanquan_ready");
            let matches = if ready {
                code == 200 && body == "ready\n" && file && gauge == Some(1.0)
            } else {
                code == 503 && body.contains(why) && !file && gauge == Some(0.0)
            };
            if matches {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "wanted ready={ready} ({why}), got {code} {body:?}, file present: {file}, \
                 oanquan_ready {gauge:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn sigterm(&self) {
        let killed = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
    }

    /// Waits (bounded) for the process to exit: its status.
    fn exit(&mut self) -> std::process::ExitStatus {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "the server did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A `GetGame` call over raw HTTP/2 whose request body is held back: it keeps one stream of
/// the connection open (and so the drain going) until [`HeldCall::finish`] sends it.
struct HeldCall {
    response: h2::client::ResponseFuture,
    send: h2::SendStream<Bytes>,
    body: Bytes,
}

impl HeldCall {
    async fn open(addr: SocketAddr, game_id: &str) -> HeldCall {
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (client, mut connection) = h2::client::handshake(tcp).await.unwrap();
        let mut ping_pong = connection.ping_pong().expect("the connection's ping_pong");
        tokio::spawn(connection);
        let mut client = client.ready().await.unwrap();
        let request = http::Request::post(format!("http://{addr}/oanquan.v1.GameService/GetGame"))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(())
            .unwrap();
        let (response, send) = client.send_request(request, false).unwrap();
        // The call counts as open only once the server has read its HEADERS: a SIGTERM before
        // that refuses it. Two PING round trips: after the first, the client has written the
        // HEADERS queued before it; the second follows them on the wire, and the server reads
        // frames in order.
        for _ in 0..2 {
            ping_pong.ping(h2::Ping::opaque()).await.unwrap();
        }
        let message = pb::GetGameRequest {
            game_id: game_id.to_owned(),
        }
        .encode_to_vec();
        let mut body = BytesMut::new();
        body.put_u8(0);
        body.put_u32(u32::try_from(message.len()).unwrap());
        body.put_slice(&message);
        HeldCall {
            response,
            send,
            body: body.freeze(),
        }
    }

    /// Sends the body: the call's grpc-status.
    async fn finish(mut self) -> String {
        self.send.send_data(self.body, true).unwrap();
        let response = tokio::time::timeout(Duration::from_secs(10), self.response)
            .await
            .expect("a response")
            .unwrap();
        let (parts, mut body) = response.into_parts();
        if let Some(status) = parts.headers.get("grpc-status") {
            return status.to_str().unwrap().to_owned();
        }
        while let Some(data) = body.data().await {
            let data = data.unwrap();
            let _ = body.flow_control().release_capacity(data.len());
        }
        let trailers = body.trailers().await.unwrap().expect("trailers");
        trailers["grpc-status"].to_str().unwrap().to_owned()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_turns_readiness_off_while_open_calls_are_still_served() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Running::start(dir.path(), &["--in-memory"]);
    server.wait_ready(true, "");
    assert_eq!(server.get("/live"), (200, "live\n".to_owned()));
    // HEAD for probes that use it: the headers only. Other methods: 405 saying what is allowed.
    let (head, body) = http_request(server.metrics, "HEAD", "/live");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(body, "");
    let (head, _) = http_request(server.metrics, "POST", "/ready");
    assert!(head.starts_with("HTTP/1.1 405"), "{head}");
    assert!(head.to_lowercase().contains("allow: get, head"), "{head}");
    let channel = server.channel().await;
    let (game, _) = create(&mut Games::new(channel.clone()), "standard").await;
    let mut health = HealthClient::new(channel.clone())
        .watch(HealthCheckRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        next(&mut health).await.unwrap().unwrap().status(),
        ServingStatus::Serving
    );
    // A service the server does not know is SERVICE_UNKNOWN and the watch stays open, as
    // the health spec has it (an outside probe's ended at once with NOT_FOUND).
    let mut unknown = HealthClient::new(channel)
        .watch(HealthCheckRequest {
            service: "oanquan.v1.Nope".to_owned(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        next(&mut unknown).await.unwrap().unwrap().status(),
        ServingStatus::ServiceUnknown
    );
    assert!(
        tokio::time::timeout(Duration::from_millis(300), unknown.message())
            .await
            .is_err(),
        "still open"
    );
    let held = HeldCall::open(server.addr, &game.id).await;

    server.sigterm();
    assert_eq!(
        next(&mut health).await.unwrap().unwrap().status(),
        ServingStatus::NotServing
    );
    // It ends with the server, as every watch does.
    let ended = next(&mut unknown).await.unwrap_err();
    assert_eq!(ended.code(), tonic::Code::Unavailable, "{ended:?}");
    server.wait_ready(false, "not ready: draining");
    assert_eq!(server.get("/live").0, 200, "alive while it drains");
    // The held call's connection, at least, is open and draining.
    let state = |state: &str| {
        server
            .sample(&format!(r#"oanquan_connections_open{{state="{state}"}}"#))
            .expect("a connections sample")
    };
    assert!(state("draining") >= 1.0);
    assert_eq!(state("serving"), 0.0);
    assert!(
        server.child.try_wait().unwrap().is_none(),
        "the open call holds the drain"
    );
    // The call opened before the drain is still served.
    assert_eq!(held.finish().await, "0");
    assert!(server.exit().success());
    assert!(!server.ready_file.exists(), "removed on exit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_cannot_be_written_is_not_ready_until_it_can() {
    let dir = tempfile::tempdir().unwrap();
    let database = dir.path().join("oanquan.db");
    let server = Running::start(dir.path(), &["--database", database.to_str().unwrap()]);
    server.wait_ready(true, "");
    let channel = server.channel().await;
    let mut games = Games::new(channel.clone());
    let mut health = HealthClient::new(channel);

    // Another process holding the write lock: the server's writes wait out the busy timeout
    // and fail, as on a file that cannot be written.
    let blocker = rusqlite::Connection::open(&database).unwrap();
    blocker.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let refused = games
        .create_game(pb::CreateGameRequest {
            rules: preset("standard"),
            seat: pb::Player::First.into(),
            display_name: "Lan".into(),
            ..Default::default()
        })
        .await
        .expect_err("the write is refused");
    assert_eq!(refused.code(), tonic::Code::Unavailable, "{refused:?}");
    server.wait_ready(false, "not ready: the store cannot be written");
    let checked = health
        .check(HealthCheckRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(checked.status(), ServingStatus::NotServing);
    assert_eq!(
        server.get("/live").0,
        200,
        "alive: a restart would not help"
    );

    blocker.execute_batch("ROLLBACK").unwrap();
    drop(blocker);
    server.wait_ready(true, "");
    let checked = health
        .check(HealthCheckRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(checked.status(), ServingStatus::Serving);
    create(&mut games, "standard").await;
}
