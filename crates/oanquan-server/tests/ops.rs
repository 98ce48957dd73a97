//! Health, reflection, graceful shutdown, and the binary's stdout contract.

mod common;

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use oanquan_proto::v1 as pb;
use prost::Message as _;
use tokio_stream::StreamExt as _;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::{HealthCheckRequest, HealthCheckResponse};
use tonic_reflection::pb::{v1, v1alpha};

#[tokio::test]
async fn health_reports_serving() {
    let server = start(config()).await;
    let mut health = HealthClient::new(server.channel().await);
    for service in [
        "",
        "oanquan.v1.GameService",
        "oanquan.v1.RulesService",
        "oanquan.v1.AccountService",
    ] {
        let response = health
            .check(HealthCheckRequest {
                service: service.into(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(response.status(), ServingStatus::Serving, "{service:?}");
    }
    server.stop().await.unwrap();
}

#[tokio::test]
async fn reflection_v1_lists_services_and_error_details() {
    use v1::server_reflection_client::ServerReflectionClient;
    use v1::server_reflection_request::MessageRequest;
    use v1::server_reflection_response::MessageResponse;

    let server = start(config()).await;
    let mut client = ServerReflectionClient::new(server.channel().await);
    let ask = |request| v1::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(request),
    };
    let requests = vec![
        ask(MessageRequest::ListServices(String::new())),
        ask(MessageRequest::FileContainingSymbol(
            "google.rpc.BadRequest".into(),
        )),
        ask(MessageRequest::FileContainingSymbol(
            "oanquan.v1.ErrorReason".into(),
        )),
        ask(MessageRequest::FileContainingSymbol(
            "oanquan.v1.AccountService".into(),
        )),
    ];
    let mut responses = client
        .server_reflection_info(tokio_stream::iter(requests))
        .await
        .unwrap()
        .into_inner();
    let Some(MessageResponse::ListServicesResponse(list)) =
        responses.next().await.unwrap().unwrap().message_response
    else {
        panic!("expected a service list")
    };
    let names: Vec<_> = list.service.into_iter().map(|s| s.name).collect();
    for expected in [
        "oanquan.v1.GameService",
        "oanquan.v1.RulesService",
        "oanquan.v1.AccountService",
        "grpc.health.v1.Health",
        "grpc.reflection.v1.ServerReflection",
    ] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} in {names:?}"
        );
    }
    for _ in 0..3 {
        let response = responses.next().await.unwrap().unwrap().message_response;
        assert!(
            matches!(&response, Some(MessageResponse::FileDescriptorResponse(f)) if !f.file_descriptor_proto.is_empty()),
            "{response:?}"
        );
    }
    server.stop().await.unwrap();
}

/// A lookup that misses is answered in the stream, as the reflection protocol has it, and the
/// stream goes on: tonic-reflection ended it with NOT_FOUND (an outside probe's Python
/// descriptor pool raised on every miss). The name is quoted short, however long it is.
#[tokio::test]
async fn a_reflection_miss_is_answered_in_the_stream_which_goes_on() {
    use v1::server_reflection_client::ServerReflectionClient;
    use v1::server_reflection_request::MessageRequest;
    use v1::server_reflection_response::MessageResponse;

    let server = start(config()).await;
    let mut client = ServerReflectionClient::new(server.channel().await);
    let ask = |request| v1::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(request),
    };
    let requests = vec![
        ask(MessageRequest::FileContainingSymbol("x".repeat(100_000))),
        ask(MessageRequest::FileByFilename("nope.proto".into())),
        ask(MessageRequest::FileContainingExtension(
            v1::ExtensionRequest {
                containing_type: "oanquan.v1.Game".into(),
                extension_number: 1,
            },
        )),
        v1::ServerReflectionRequest {
            host: String::new(),
            message_request: None,
        },
        ask(MessageRequest::ListServices(String::new())),
    ];
    let mut responses = client
        .server_reflection_info(tokio_stream::iter(requests))
        .await
        .unwrap()
        .into_inner();
    for expected in [5, 5, 5, 3] {
        let response = responses.next().await.unwrap().unwrap().message_response;
        let Some(MessageResponse::ErrorResponse(error)) = response else {
            panic!("expected an error response: {response:?}")
        };
        assert_eq!(error.error_code, expected, "{error:?}");
        assert!(
            error.error_message.len() <= 512,
            "{}",
            error.error_message.len()
        );
    }
    assert!(matches!(
        responses.next().await.unwrap().unwrap().message_response,
        Some(MessageResponse::ListServicesResponse(_))
    ));
    assert!(responses.next().await.is_none(), "ends with the requests");
    server.stop().await.unwrap();
}

/// What grpcurl and buf curl do with no .proto files: the file of a service, then each file it
/// imports by name, until the whole closure is there and builds into descriptors.
#[tokio::test]
async fn reflection_gives_each_service_with_every_file_it_imports() {
    use v1::server_reflection_client::ServerReflectionClient;
    use v1::server_reflection_request::MessageRequest;
    use v1::server_reflection_response::MessageResponse;

    let server = start(config()).await;
    let mut client = ServerReflectionClient::new(server.channel().await);
    let mut files: std::collections::BTreeMap<String, prost_types::FileDescriptorProto> =
        std::collections::BTreeMap::new();
    let mut wanted = vec![MessageRequest::FileContainingSymbol(
        "oanquan.v1.GameService".into(),
    )];
    while let Some(request) = wanted.pop() {
        let mut responses = reflection_stream(&mut client, 1, request).await;
        let Some(MessageResponse::FileDescriptorResponse(found)) =
            responses.next().await.unwrap().unwrap().message_response
        else {
            panic!("expected a file")
        };
        for bytes in found.file_descriptor_proto {
            let file = prost_types::FileDescriptorProto::decode(bytes.as_slice()).unwrap();
            for import in &file.dependency {
                if !files.contains_key(import) {
                    wanted.push(MessageRequest::FileByFilename(import.clone()));
                }
            }
            files.insert(file.name().to_owned(), file);
        }
    }
    let pool =
        prost_reflect::DescriptorPool::from_file_descriptor_set(prost_types::FileDescriptorSet {
            file: files.into_values().collect(),
        })
        .expect("the closure builds");
    let service = pool.get_service_by_name("oanquan.v1.GameService").unwrap();
    assert!(service.methods().any(|m| m.name() == "PlayMove"));
    server.stop().await.unwrap();
}

#[tokio::test]
async fn reflection_v1alpha_answers() {
    use v1alpha::server_reflection_client::ServerReflectionClient;
    use v1alpha::server_reflection_request::MessageRequest;
    use v1alpha::server_reflection_response::MessageResponse;

    let server = start(config()).await;
    let mut client = ServerReflectionClient::new(server.channel().await);
    let request = v1alpha::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut responses = client
        .server_reflection_info(tokio_stream::iter(vec![request]))
        .await
        .unwrap()
        .into_inner();
    let Some(MessageResponse::ListServicesResponse(list)) =
        responses.next().await.unwrap().unwrap().message_response
    else {
        panic!("expected a service list")
    };
    assert!(
        list.service
            .iter()
            .any(|s| s.name == "oanquan.v1.GameService")
    );
    server.stop().await.unwrap();
}

#[tokio::test]
async fn shutdown_ends_streams_with_unavailable_within_the_drain_limit() {
    let mut server = start(config()).await;
    let mut client = server.games().await;
    let (game, _) = create(&mut client, "standard").await;
    let mut game_watch = client
        .watch_game(pb::WatchGameRequest {
            game_id: game.id.clone(),
            after_sequence: None,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let snapshot = next_game_event(&mut game_watch).await.unwrap();
    let mut lobby = client
        .watch_lobby(pb::WatchLobbyRequest::default())
        .await
        .unwrap()
        .into_inner();
    next(&mut lobby).await.unwrap().unwrap();

    let mut health = HealthClient::new(server.channel().await)
        .watch(HealthCheckRequest::default())
        .await
        .unwrap()
        .into_inner();
    let serving = next(&mut health).await.unwrap().unwrap();
    assert_eq!(serving.status(), ServingStatus::Serving);

    let started = Instant::now();
    server.trigger_shutdown();
    let not_serving = next(&mut health).await.unwrap().unwrap();
    assert_eq!(not_serving.status(), ServingStatus::NotServing);
    let status = loop {
        match next(&mut game_watch).await {
            Ok(Some(_)) => {}
            Ok(None) => panic!("stream ended OK instead of UNAVAILABLE"),
            Err(status) => break status,
        }
    };
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    assert!(
        status
            .message()
            .contains(&format!("after_sequence={}", snapshot.sequence)),
        "{status:?}"
    );
    let lobby_status = loop {
        match next(&mut lobby).await {
            Ok(Some(_)) => {}
            Ok(None) => panic!("lobby stream ended OK"),
            Err(status) => break status,
        }
    };
    assert_eq!(lobby_status.code(), tonic::Code::Unavailable);
    server.stop().await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(2) + Duration::from_millis(500));
}

#[tokio::test]
async fn an_open_health_watch_does_not_hold_shutdown() {
    // A drain far longer than the test may take: only streams that end promptly let it pass.
    let mut settings = config();
    settings.transport.shutdown_drain_timeout = Duration::from_secs(30);
    let mut server = start(settings).await;
    let mut watches = Vec::new();
    for service in ["", "oanquan.v1.GameService"] {
        let mut watch = HealthClient::new(server.channel().await)
            .watch(HealthCheckRequest {
                service: service.into(),
            })
            .await
            .unwrap()
            .into_inner();
        let serving = next(&mut watch).await.unwrap().unwrap();
        assert_eq!(serving.status(), ServingStatus::Serving);
        watches.push(watch);
    }

    let started = Instant::now();
    server.trigger_shutdown();
    // Each watcher hears NOT_SERVING, then its stream ends like the other streams, while the
    // client keeps it open.
    for watch in &mut watches {
        let not_serving = next(watch).await.unwrap().unwrap();
        assert_eq!(not_serving.status(), ServingStatus::NotServing);
        let status = next(watch).await.expect_err("the watch ends");
        assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
        assert!(status.message().contains("shutting down"), "{status:?}");
    }
    server.stop().await.unwrap();
    let took = started.elapsed();
    assert!(took < Duration::from_secs(3), "shutdown took {took:?}");
    drop(watches);
}

/// Health `Watch` streams are capped server-wide (`--max-health-watches`), loopback clients
/// included: the health rate limit exempts them, the cap does not. A stream its client drops,
/// or whose client vanishes with its connection, gives its place back; `Check` is never
/// refused by the cap.
#[tokio::test]
async fn health_watches_are_capped_and_a_closed_one_frees_its_place() {
    let mut settings = config();
    settings.streams.max_health_watches = 3;
    // One health check a second from a counted address: every call below beyond the first two
    // would be refused if loopback were not exempt, so only the cap can refuse them.
    settings.clients.health_rate_limit = 1.0;
    assert!(settings.clients.exempt_loopback);
    let server = start(settings).await;
    let channel = server.channel().await;
    let watch = || health_watch(&channel);
    let opened = opened_health_watch;
    let watch_when_free = || health_watch_when_free(&channel);
    let refused = || health_watch_refused(&channel, "this server has 3 health watches open");

    let mut open = Vec::new();
    for _ in 0..2 {
        open.push(opened(watch().await.unwrap()).await);
    }
    let vanishing = health_watch_on_its_own_connection(server.addr).await;
    refused().await;
    refused().await;
    for _ in 0..5 {
        assert_health_check_serving(&channel).await;
    }

    // A stream the client drops (RST_STREAM) frees its place, for one watch only.
    drop(open.pop());
    open.push(watch_when_free().await);
    refused().await;

    // So does one whose client vanishes: its connection closed without a word.
    vanishing.abort();
    open.push(watch_when_free().await);
    refused().await;

    // Those held all along still work.
    assert_eq!(open.len(), 3);
    drop(open);
    let mut again = Vec::new();
    for _ in 0..3 {
        again.push(watch_when_free().await);
    }
}

/// One client address holds at most `--max-health-watches-per-client` health `Watch` streams,
/// so that it cannot take every place under the server-wide cap; loopback is exempt unless
/// `--exempt-loopback false` (as here). A dropped stream gives its client's place back.
#[tokio::test]
async fn one_address_holds_at_most_its_share_of_health_watches() {
    let mut settings = config();
    settings.streams.max_health_watches = 10;
    settings.streams.max_health_watches_per_client = 2;
    settings.clients.exempt_loopback = false;
    let server = start(settings).await;
    let channel = server.channel().await;
    let watch = || health_watch(&channel);
    let mut open = Vec::new();
    for _ in 0..2 {
        open.push(opened_health_watch(watch().await.unwrap()).await);
    }
    health_watch_refused(&channel, "your address has 2 health watches open").await;
    assert_health_check_serving(&channel).await;

    // A dropped stream gives the place back.
    drop(open.pop());
    open.push(health_watch_when_free(&channel).await);
    assert!(watch().await.is_err(), "the place was taken again");
}

/// A loopback client is not held to `--max-health-watches-per-client` by default (only to the
/// server-wide cap), like the other per-client limits.
#[tokio::test]
async fn loopback_is_not_held_to_the_per_address_share_of_health_watches() {
    let mut settings = config();
    settings.streams.max_health_watches_per_client = 1;
    let server = start(settings).await;
    let channel = server.channel().await;
    let mut open = Vec::new();
    for _ in 0..4 {
        open.push(opened_health_watch(health_watch(&channel).await.unwrap()).await);
    }
}

/// A health `Watch` of the whole server on `channel`.
async fn health_watch(
    channel: &tonic::transport::Channel,
) -> Result<tonic::Response<tonic::Streaming<HealthCheckResponse>>, tonic::Status> {
    HealthClient::new(channel.clone())
        .watch(HealthCheckRequest::default())
        .await
}

/// Checks that a health `Check` on `channel` answers SERVING (caps on watches never refuse it).
async fn assert_health_check_serving(channel: &tonic::transport::Channel) {
    let checked = HealthClient::new(channel.clone())
        .check(HealthCheckRequest::default())
        .await
        .unwrap();
    assert_eq!(checked.into_inner().status(), ServingStatus::Serving);
}

/// Checks that a health `Watch` on `channel` is refused as over a cap, with `saying` (and "its
/// limit") in the message.
async fn health_watch_refused(channel: &tonic::transport::Channel, saying: &str) {
    let status = health_watch(channel)
        .await
        .expect_err("a watch over the cap is refused");
    assert_reason(
        &status,
        tonic::Code::ResourceExhausted,
        "ERROR_REASON_LIMIT_EXCEEDED",
    );
    let message = status.message();
    assert!(
        message.contains(saying) && message.contains("its limit"),
        "{status:?}"
    );
}

/// The stream of an accepted watch, after its first status (SERVING).
async fn opened_health_watch(
    response: tonic::Response<tonic::Streaming<HealthCheckResponse>>,
) -> tonic::Streaming<HealthCheckResponse> {
    let mut stream = response.into_inner();
    let serving = next(&mut stream).await.unwrap().unwrap();
    assert_eq!(serving.status(), ServingStatus::Serving);
    stream
}

/// Watches until a watch gets a place (for at most 5 s): a place comes back once the server
/// has seen the stream end, a moment after the client let go of it.
async fn health_watch_when_free(
    channel: &tonic::transport::Channel,
) -> tonic::Streaming<HealthCheckResponse> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match health_watch(channel).await {
            Ok(response) => return opened_health_watch(response).await,
            Err(status) if status.code() == tonic::Code::ResourceExhausted => {
                assert!(Instant::now() < deadline, "no place came back: {status:?}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(status) => panic!("{status:?}"),
        }
    }
}

/// Opens a health `Watch` over raw HTTP/2 on a connection of its own and waits for its first
/// status; aborting the returned task drops the TCP connection at once, as a client that
/// vanishes would (no RST_STREAM, no GOAWAY).
async fn health_watch_on_its_own_connection(
    addr: std::net::SocketAddr,
) -> tokio::task::JoinHandle<()> {
    let (opened, open) = tokio::sync::oneshot::channel::<bool>();
    let task = tokio::spawn(async move {
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (client, connection) = h2::client::handshake(tcp).await.unwrap();
        let watching = async move {
            let mut client = client.ready().await.unwrap();
            let request = http::Request::post(format!("http://{addr}/grpc.health.v1.Health/Watch"))
                .header("content-type", "application/grpc")
                .header("te", "trailers")
                .body(())
                .unwrap();
            let (response, mut send) = client.send_request(request, false).unwrap();
            // An empty HealthCheckRequest: the whole server.
            send.send_data(grpc_frame(false, 0, &[]), true).unwrap();
            let mut body = response.await.unwrap().into_body();
            let first = body.data().await;
            let _ = opened.send(first.is_some_and(|data| data.is_ok()));
            std::future::pending::<()>().await;
        };
        tokio::select! {
            _ = connection => {}
            () = watching => {}
        }
    });
    assert!(open.await.unwrap(), "the raw watch got its first status");
    task
}

/// A channel to the server at `addr`.
async fn connect_to(addr: std::net::SocketAddr) -> tonic::transport::Channel {
    tonic::transport::Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

/// Starts `command` (the server binary) in memory on a free loopback port; returns the child
/// and the address its first line announces.
fn spawn_binary(mut command: Command) -> (std::process::Child, std::net::SocketAddr) {
    let mut child = command
        .args(["--listen", "127.0.0.1:0", "--in-memory"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("oanquan-server listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .parse()
        .unwrap();
    (child, addr)
}

#[test]
fn binary_prints_its_address_and_exits_cleanly_on_sigterm() {
    let mut command = Command::new(env!("CARGO_BIN_EXE_oanquan-server"));
    command
        .args(["--shutdown-drain-timeout", "2s"])
        .env("RUST_LOG", "warn")
        .stderr(Stdio::null());
    let (mut child, addr) = spawn_binary(command);
    assert_ne!(addr.port(), 0);

    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let channel = connect_to(addr).await;
        let mut health = HealthClient::new(channel);
        let status = health
            .check(HealthCheckRequest::default())
            .await
            .unwrap()
            .into_inner();
        assert_eq!(status.status(), ServingStatus::Serving);
    });

    let status = terminate(&mut child);
    assert!(status.success(), "{status:?}");
}

/// Sends SIGTERM to `child` and waits up to 5 s for it to exit; its status.
fn terminate(child: &mut std::process::Child) -> std::process::ExitStatus {
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "server did not exit after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A log shipper (or `| tee`) that dies closes the server's stderr. Logging then failed with a
/// panic in every call that logged: an outside probe's CreateGame made its game but was
/// answered CANCELLED, its seat token lost, and SIGTERM exited 101.
#[test]
fn a_closed_stderr_loses_the_logs_and_nothing_else() {
    let mut command = Command::new(env!("CARGO_BIN_EXE_oanquan-server"));
    command
        .args(["--shutdown-drain-timeout", "2s"])
        .env("RUST_LOG", "info")
        .stderr(Stdio::piped());
    let (mut child, addr) = spawn_binary(command);
    drop(child.stderr.take());

    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let channel = connect_to(addr).await;
        let mut games = Games::new(channel);
        for _ in 0..3 {
            let created = games
                .create_game(lan_creates("standard"))
                .await
                .expect("answered, although its log line is lost")
                .into_inner();
            assert!(!created.player_token.is_empty());
        }
    });
    let status = terminate(&mut child);
    assert!(status.success(), "{status:?}");
}

/// Reflection clients that leave with answers still to send end their calls and nothing else:
/// tonic-reflection's stream task panicked then (`expect("send")`), a line on stderr each (with
/// a backtrace under `RUST_BACKTRACE`) that a client could repeat at will.
#[test]
fn reflection_clients_that_leave_mid_stream_print_no_panics() {
    use v1::server_reflection_client::ServerReflectionClient;
    use v1::server_reflection_request::MessageRequest;

    let log = tempfile::NamedTempFile::new().unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_oanquan-server"));
    command
        .env("RUST_LOG", "warn,oanquan_server=debug")
        .env("RUST_BACKTRACE", "1")
        .env("NO_COLOR", "1")
        .stderr(log.reopen().unwrap());
    let (mut child, addr) = spawn_binary(command);

    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let channel = connect_to(addr).await;
        // Whether a client leaves while its answers are being sent is a race; a few hundred
        // clients make it sure.
        for _ in 0..400 {
            let mut client = ServerReflectionClient::new(channel.clone());
            // More requests than the task can answer into its one-message channel: it is
            // waiting to send when the client goes.
            let mut responses =
                reflection_stream(&mut client, 50, MessageRequest::ListServices(String::new()))
                    .await;
            responses.next().await.unwrap().unwrap();
            drop(responses);
        }
        // Still serving.
        let status = HealthClient::new(channel)
            .check(HealthCheckRequest::default())
            .await
            .unwrap()
            .into_inner();
        assert_eq!(status.status(), ServingStatus::Serving);
        tokio::time::sleep(Duration::from_millis(200)).await;
    });
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    child.wait().unwrap();
    let stderr = std::fs::read_to_string(log.path()).unwrap();
    // The default hook's line: "thread 'tokio-runtime-worker' (123) panicked at ...".
    assert!(
        !stderr.lines().any(|l| l.starts_with("thread '")),
        "{stderr}"
    );
    assert!(!stderr.contains("stack backtrace"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}
