//! The real server binary on PostgreSQL: a game created and played, the server stopped and
//! started again, the game found as it was and played on.
//!
//! Needs a PostgreSQL server: `OANQUAN_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/test
//! cargo test -p oanquan-server --test postgres`. Without the variable the test says so and
//! passes without doing anything; with it, a server that cannot be reached fails it.

mod common;

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use oanquan_proto::v1 as pb;

const URL_VARIABLE: &str = "OANQUAN_TEST_POSTGRES_URL";

/// A schema of its own on the test database, dropped at the end.
struct Schema {
    client: tokio_postgres::Client,
    name: String,
}

impl Schema {
    async fn new(url: &str) -> Schema {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .unwrap_or_else(|e| panic!("{URL_VARIABLE} is set but: {e}"));
        tokio::spawn(connection);
        let name = format!("oq_test_{:016x}", rand::random::<u64>());
        client
            .batch_execute(&format!("CREATE SCHEMA {name}"))
            .await
            .unwrap();
        Schema { client, name }
    }

    async fn count(&self, table: &str) -> i64 {
        self.client
            .query_one(&format!("SELECT count(*) FROM {}.{table}", self.name), &[])
            .await
            .unwrap()
            .get(0)
    }

    async fn drop(self) {
        self.client
            .batch_execute(&format!("DROP SCHEMA {} CASCADE", self.name))
            .await
            .unwrap();
    }
}

/// A running `oanquan-server`, killed if dropped.
struct Server {
    child: Child,
    addr: SocketAddr,
}

impl Server {
    fn start(dir: &std::path::Path, configure: impl FnOnce(&mut Command)) -> Server {
        let mut command = Command::new(env!("CARGO_BIN_EXE_oanquan-server"));
        command
            .args(["--listen", "127.0.0.1:0", "--shutdown-drain-timeout", "2s"])
            .current_dir(dir)
            .env_remove("OANQUAN_IN_MEMORY")
            .env_remove("OANQUAN_DATABASE")
            .env_remove("OANQUAN_DATABASE_URL")
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        configure(&mut command);
        let mut child = command.spawn().unwrap();
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
        Server { child, addr }
    }

    async fn games(&self) -> Games {
        let channel = tonic::transport::Channel::from_shared(format!("http://{}", self.addr))
            .unwrap()
            .connect()
            .await
            .unwrap();
        pb::game_service_client::GameServiceClient::new(channel)
    }

    /// SIGTERM, and a clean exit within a few seconds.
    fn stop(mut self) {
        let killed = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "{status:?}");
                return;
            }
            assert!(Instant::now() < deadline, "the server did not stop");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn a_game_played_on_postgres_is_there_after_a_restart() {
    let Ok(url) = std::env::var(URL_VARIABLE) else {
        let _ = writeln!(
            std::io::stderr(),
            "PostgreSQL test skipped: {URL_VARIABLE} is not set. Run it with \
             {URL_VARIABLE}=postgres://postgres@127.0.0.1:5432/test cargo test -p \
             oanquan-server --test postgres"
        );
        return;
    };
    let schema = Schema::new(&url).await;
    let separator = if url.contains('?') { '&' } else { '?' };
    let database = format!("{url}{separator}options=-csearch_path%3D{}", schema.name);
    let dir = tempfile::tempdir().unwrap();

    // First run: the URL from the environment, as an operator would keep a password out of
    // the process list.
    let server = Server::start(dir.path(), |command| {
        command.env("OANQUAN_DATABASE_URL", &database);
    });
    let mut client = server.games().await;
    let (id, first, second) = started(&mut client, "standard").await;
    for _ in 0..3 {
        play_one(&mut client, &id, (&first, &second)).await;
    }
    let before = get_game(&mut client, &id).await;
    assert_eq!(before.move_count, 3);
    server.stop();

    // The rows are in PostgreSQL, and no SQLite file was made on the side.
    assert_eq!(schema.count("games").await, 1);
    assert_eq!(schema.count("moves").await, 3);
    assert!(schema.count("game_events").await >= 5);
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "nothing written to the working directory"
    );

    // Second run: the same database through --database.
    let server = Server::start(dir.path(), |command| {
        command.args(["--database", &database]);
    });
    let mut client = server.games().await;
    assert_eq!(get_game(&mut client, &id).await, before);
    let listed = client
        .list_games(pb::ListGamesRequest {
            filter: pb::GameFilter::Active.into(),
            page_size: 0,
            page_token: String::new(),
        })
        .await
        .unwrap()
        .into_inner()
        .games;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].id, id);
    // The tokens still work: the game goes on.
    let after = play_one(&mut client, &id, (&first, &second)).await;
    assert_eq!(after.move_count, 4);
    server.stop();
    assert_eq!(schema.count("moves").await, 4);
    schema.drop().await;
}
