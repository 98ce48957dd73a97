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
        let mut child = Command::new(env!("CARGO_BIN_EXE_oanquan-server"))
            .args([
                "--listen",
                "127.0.0.1:0",
                "--shutdown-drain-timeout",
                "2s",
                "--computer-move-time",
                "10ms",
            ])
            .args(args)
            .current_dir(dir)
            .env_remove("OANQUAN_IN_MEMORY")
            .env_remove("OANQUAN_DATABASE")
            .env("OANQUAN_DATABASE_URL", database)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
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
        Node { child, addr }
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
