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
    // Create, join and the first move, each timed: together no longer than the whole.
    for call in &stats.first_calls {
        assert_eq!(call.len(), 2);
        assert!(call.max() <= stats.create_to_first_move.max());
    }
    assert!(stats.mean_response_bytes().unwrap_or(0) > stats.mean_request_bytes().unwrap_or(0));

    let _ = stop.send(());
    server.await.expect("server task").expect("server");
}

/// Two callers against a fresh echo server for `duration`, asking for 60-byte requests and
/// 900-byte replies; the server is returned so that it can be sampled.
async fn against_echo(
    duration: Duration,
    round_interval: Option<Duration>,
    calls_per_round: usize,
) -> (ServerProcess, load::LoadStats) {
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
            duration,
            request_bytes: 60,
            response_bytes: 900,
            round_interval,
            calls_per_round,
        },
    )
    .await;
    (echo, stats)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echo_server_replies_with_the_requested_size() {
    let (echo, stats) = against_echo(Duration::from_millis(200), None, 1).await;
    assert_eq!(stats.errors, 0, "{:?}", stats.first_error);
    assert!(stats.ops > 0);
    assert_eq!(stats.mean_request_bytes(), Some(60));
    assert_eq!(stats.mean_response_bytes(), Some(900));
    assert!(echo.sample().expect("/proc").hwm_kib > 0);
}

/// A tiny clocks run against an in-process server: every flag falls by timeout, after its
/// deadline and not long after, and a lobby watcher sees each game finish.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_timed_games_all_lose_on_time() {
    use oanquan_bench::clocks::{self, ClockLoad};

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("address");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let mut config = Config {
        storage: Storage::InMemory,
        ..Config::default()
    };
    config.games.first_move_time = Duration::from_secs(600);
    let server = tokio::spawn(oanquan_server::run(listener, config, async {
        let _ = stopped.await;
    }));

    let pool = Pool::connect(addr, 2).await.expect("connect");
    let load = ClockLoad {
        games: 20,
        parallel: 8,
        schedule: Duration::from_millis(200),
        idle: Duration::from_millis(500),
        spread: Duration::from_millis(300),
    };
    let run = clocks::run_clocks(&pool, &load, None).await;
    assert_eq!(run.errors, 0, "{:?}", run.first_error);
    assert!(run.all_flags_fell(), "{run:?}");
    assert_eq!((run.other_endings, run.not_over), (0, 0));
    assert_eq!(run.lateness.count, 20);
    assert_eq!(run.lateness.early, 0, "a flag fell before its deadline");
    // Loose: a shared test machine may be slow, but not by a second.
    assert!(run.lateness.max_ms < 1000.0, "{:?}", run.lateness);
    assert_eq!(run.observed.count, 20, "the lobby saw every game finish");
    assert_eq!(
        run.observed.early, 0,
        "a watcher learnt of a flag before its deadline"
    );
    // The deadlines cover the asked spread (the scheduling adds jitter, not hundreds of ms).
    assert!(
        run.deadline_span_ms > 150.0 && run.deadline_span_ms < 900.0,
        "{run:?}"
    );
    assert!(run.idle_cpu_cores.is_none(), "no server pid, no CPU figure");

    let _ = stop.send(());
    server.await.expect("server task").expect("server");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paced_echo_rounds_hold_their_rate_and_time_each_round() {
    let (_echo, stats) = against_echo(
        Duration::from_millis(500),
        Some(Duration::from_millis(50)),
        3,
    )
    .await;
    assert_eq!(stats.errors, 0, "{:?}", stats.first_error);
    // Two callers, a round each 50 ms over 500 ms: about 10 rounds each, never many more.
    let rounds = stats.create_to_first_move.len();
    assert!((6..=22).contains(&rounds), "{rounds} rounds");
    assert!(
        stats.ops >= rounds * 3,
        "{} calls in {rounds} rounds",
        stats.ops
    );
    assert!(stats.ops <= 22 * 3, "{} calls: not paced", stats.ops);
    // A round is three calls: longer than any one call, and each is timed on its own.
    assert!(stats.create_to_first_move.min() > stats.latency.min());
    for call in &stats.first_calls {
        assert_eq!(call.len(), rounds);
        assert!(call.max() <= stats.create_to_first_move.max());
    }
}
