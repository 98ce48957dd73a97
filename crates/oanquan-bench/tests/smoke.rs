//! A tiny run of the load client: two games with one spectator each against an in-process
//! server, and a few echo calls against the echo binary. Checks that the client plays games to
//! their end and measures what it should; the real benchmark is `oanquan-bench all`.

use std::time::Duration;

use oanquan_bench::load::{self, EchoLoad, GameLoad, Pool};
use oanquan_bench::procs::ServerProcess;
use oanquan_server::{Config, Storage};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_games_with_a_spectator_each() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("address");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let config = Config {
        storage: Storage::InMemory,
        ..Config::default()
    };
    let server = tokio::spawn(oanquan_server::run(listener, config, async {
        let _ = stopped.await;
    }));

    let pool = Pool::connect(addr, 2).await.expect("connect");
    let stats = load::run_games(
        &pool,
        &GameLoad {
            workers: 2,
            spectators: 1,
            warmup: Duration::ZERO,
            duration: Duration::from_secs(20),
            move_interval: None,
            games_per_worker: Some(1),
            seed: 7,
        },
    )
    .await;
    assert_eq!(stats.errors, 0, "{:?}", stats.first_error);
    assert_eq!(stats.games_finished, 2);
    assert!(stats.ops >= 2);
    assert_eq!(stats.latency.len(), stats.ops);
    assert_eq!(
        stats.delivery.len(),
        stats.ops,
        "every move reached the spectator"
    );
    assert_eq!(stats.create_to_first_move.len(), 2);
    assert!(stats.mean_response_bytes().unwrap_or(0) > stats.mean_request_bytes().unwrap_or(0));

    let _ = stop.send(());
    server.await.expect("server task").expect("server");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echo_server_replies_with_the_requested_size() {
    let echo = ServerProcess::start(
        std::path::Path::new(env!("CARGO_BIN_EXE_oanquan-echo-server")),
        &["--listen".to_owned(), "127.0.0.1:0".to_owned()],
    )
    .expect("echo server starts");
    let pool = Pool::connect(echo.addr(), 1).await.expect("connect");
    let stats = load::run_echo(
        &pool,
        &EchoLoad {
            workers: 2,
            warmup: Duration::ZERO,
            duration: Duration::from_millis(200),
            request_bytes: 60,
            response_bytes: 900,
        },
    )
    .await;
    assert_eq!(stats.errors, 0, "{:?}", stats.first_error);
    assert!(stats.ops > 0);
    assert_eq!(stats.mean_request_bytes(), Some(60));
    assert_eq!(stats.mean_response_bytes(), Some(900));
    assert!(echo.sample().expect("/proc").hwm_kib > 0);
}
