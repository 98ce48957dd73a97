//! Several real `oanquan-server` binaries on one PostgreSQL database, each test on a schema of
//! its own (the `nodes*` tests).
#![allow(dead_code)]

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};

use oanquan_proto::v1 as pb;

use super::Games;

pub const URL_VARIABLE: &str = "OANQUAN_TEST_POSTGRES_URL";

/// A schema of its own in the test database, dropped by [`Schema::drop`]; `None` (after saying
/// so) without the variable.
pub struct Schema {
    pub client: tokio_postgres::Client,
    pub name: String,
    /// The test database's URL.
    pub url: String,
    /// The URL with `search_path` set to the schema: what the nodes are given.
    pub database: String,
}

impl Schema {
    pub async fn new(test: &str) -> Option<Schema> {
        let Ok(url) = std::env::var(URL_VARIABLE) else {
            let _ = writeln!(
                std::io::stderr(),
                "PostgreSQL test skipped: {URL_VARIABLE} is not set. Run it with \
                 {URL_VARIABLE}=postgres://postgres@127.0.0.1:5432/test cargo test -p \
                 oanquan-server --test {test}"
            );
            return None;
        };
        let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .unwrap_or_else(|e| panic!("{URL_VARIABLE} is set but: {e}"));
        tokio::spawn(connection);
        let name = format!("oq_test_{:016x}", rand::random::<u64>());
        client
            .batch_execute(&format!("CREATE SCHEMA {name}"))
            .await
            .unwrap();
        let database = with_schema(&url, &name);
        Some(Schema {
            client,
            name,
            url,
            database,
        })
    }

    /// The rows of `table` in the schema.
    pub async fn count(&self, table: &str) -> i64 {
        self.client
            .query_one(&format!("SELECT count(*) FROM {}.{table}", self.name), &[])
            .await
            .unwrap()
            .get(0)
    }

    pub async fn drop(self) {
        self.client
            .batch_execute(&format!("DROP SCHEMA {} CASCADE", self.name))
            .await
            .unwrap();
    }
}

/// `url` with the session's `search_path` set to `schema`.
pub fn with_schema(url: &str, schema: &str) -> String {
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}options=-csearch_path%3D{schema}")
}

/// A running `oanquan-server` node, killed (SIGKILL) if dropped.
pub struct Node {
    pub child: Child,
    pub addr: SocketAddr,
}

impl Node {
    /// A node on `database` (a PostgreSQL URL) with `args` after the test's usual ones.
    pub fn start(database: &str, dir: &std::path::Path, args: &[&str]) -> Node {
        Node::spawn(dir, |command| {
            command
                .args(["--computer-move-time", "10ms"])
                .args(args)
                .env("OANQUAN_DATABASE_URL", database);
        })
    }

    /// [`Node::start`] with its system clock set `offset` away (`+5s`, `-3s`) by libfaketime
    /// (Debian's `faketime`), as a node whose time source drifted; `None` (said on stderr)
    /// without it. The library is preloaded into the server itself: the `faketime` command
    /// would run it as a child that outlives a kill of the command.
    pub fn start_skewed(
        database: &str,
        dir: &std::path::Path,
        offset: &str,
        args: &[&str],
    ) -> Option<Node> {
        let library = ["x86_64-linux-gnu", "aarch64-linux-gnu"]
            .iter()
            .map(|arch| format!("/usr/lib/{arch}/faketime/libfaketimeMT.so.1"))
            .find(|path| std::path::Path::new(path).exists());
        let Some(library) = library else {
            eprintln!("libfaketime is not installed (Debian's faketime): skipped");
            return None;
        };
        Some(Node::spawn(dir, |command| {
            command
                .args(["--computer-move-time", "10ms"])
                .args(args)
                .env("OANQUAN_DATABASE_URL", database)
                .env("LD_PRELOAD", library)
                .env("FAKETIME", offset)
                // Only the wall clock: tokio's timers keep the real monotonic one.
                .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
        }))
    }

    /// A server with the usual test flags and no storage chosen, then what `configure` adds.
    pub fn spawn(dir: &std::path::Path, configure: impl FnOnce(&mut Command)) -> Node {
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
        Node { child, addr }
    }

    /// SIGTERM, and a clean exit within a few seconds.
    pub fn stop(mut self) {
        let killed = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "{status:?}");
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the server did not stop"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    pub async fn channel(&self) -> tonic::transport::Channel {
        tonic::transport::Channel::from_shared(format!("http://{}", self.addr))
            .unwrap()
            .connect()
            .await
            .unwrap()
    }

    pub async fn games(&self) -> Games {
        pb::game_service_client::GameServiceClient::new(self.channel().await)
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
