//! The bench's PostgreSQL parts against a real database: two server nodes on a fresh schema,
//! games played on node A and watched from node B (every move crosses), the load spread over
//! both nodes, and the database's counters read around it.
//!
//! Needs `OANQUAN_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/test`; without it the
//! test says so and passes without doing anything.

use std::io::Write as _;
use std::time::Duration;

use oanquan_bench::load::{self, GameLoad, Pool};
use oanquan_bench::pg::{PgFigures, PgSchema};
use oanquan_server::domain::PostgresOptions;
use oanquan_server::{Config, Storage};

const URL_VARIABLE: &str = "OANQUAN_TEST_POSTGRES_URL";

/// An in-process server node on `url`, and the sender that stops it.
async fn node(
    url: &str,
) -> (
    std::net::SocketAddr,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<Result<(), oanquan_server::ServeError>>,
) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("address");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let config = Config {
        storage: Storage::Postgres {
            url: url.to_owned(),
            options: PostgresOptions::default(),
        },
        ..Config::default()
    };
    let server = tokio::spawn(oanquan_server::run(listener, config, async {
        let _ = stopped.await;
    }));
    (addr, stop, server)
}

fn games(workers: usize, spectators: usize) -> GameLoad {
    GameLoad {
        workers,
        spectators,
        warmup: Duration::ZERO,
        duration: Duration::from_secs(30),
        move_interval: None,
        games_per_worker: Some(1),
        seed: 11,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn games_on_one_node_watched_from_another() {
    let Ok(url) = std::env::var(URL_VARIABLE) else {
        let _ = writeln!(
            std::io::stderr(),
            "PostgreSQL test skipped: {URL_VARIABLE} is not set. Run it with \
             {URL_VARIABLE}=postgres://postgres@127.0.0.1:5432/test cargo test -p oanquan-bench \
             --test postgres_nodes"
        );
        return;
    };
    let schema = PgSchema::create(&url).await.expect("a fresh schema");
    let before = schema.counters().await.expect("counters");
    assert_eq!(before.moves, 0, "no tables yet");
    let (a, stop_a, server_a) = node(schema.url()).await;
    let (b, stop_b, server_b) = node(schema.url()).await;

    // Players on A, spectators on B: each move reaches B through the database.
    let players = Pool::connect(a, 2).await.expect("node A");
    let watchers = Pool::connect(b, 2).await.expect("node B");
    let start = schema.counters().await.expect("counters");
    let crossed = load::run_games_watched(&players, &watchers, &games(2, 1)).await;
    let end = schema.counters().await.expect("counters");
    assert_eq!(crossed.errors, 0, "{:?}", crossed.first_error);
    assert_eq!(crossed.games_finished, 2);
    assert_eq!(crossed.delivery_missing, 0);
    assert_eq!(
        crossed.delivery.len(),
        crossed.ops,
        "every move made on A reached its watcher on B"
    );

    // One pool over both nodes: consecutive workers alternate between them.
    let spread = Pool::connect_nodes(&[a, b], 2).await.expect("both nodes");
    assert_eq!(spread.len(), 4);
    let both = load::run_games(&spread, &games(4, 0)).await;
    assert_eq!(both.errors, 0, "{:?}", both.first_error);
    assert_eq!(both.games_finished, 4);

    drop((players, watchers, spread));
    let _ = stop_a.send(());
    let _ = stop_b.send(());
    server_a.await.expect("node A task").expect("node A");
    server_b.await.expect("node B task").expect("node B");
    assert!(
        schema
            .wait_for_sessions_to_end()
            .await
            .expect("pg_stat_activity"),
        "the nodes' sessions carry the schema's application_name and end with the nodes"
    );
    let after = schema.counters().await.expect("counters");
    let figures = PgFigures::new(2, [before, start, end, after], 1.0, 0.0);
    schema.drop().await.expect("DROP SCHEMA");

    let moves = i64::try_from(crossed.ops + both.ops).expect("a small count");
    assert_eq!(
        after.moves, moves,
        "the moves table holds every move played"
    );
    assert_eq!(figures.moves, moves);
    // A move updates the game and appends the move and its events.
    assert!(figures.rows_per_move >= 3.0, "{figures:?}");
    assert!(figures.wal_bytes_per_move > 0.0, "{figures:?}");
    assert!(figures.xacts_per_move >= 1.0, "{figures:?}");
    assert!(end.xact_commit >= start.xact_commit);
}
