//! Several real `oanquan-server` binaries on one PostgreSQL database, each test on a schema of
//! its own (used by the `nodes` and `nodes_seeks` tests).

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};

use oanquan_proto::v1 as pb;

use super::Games;

const URL_VARIABLE: &str = "OANQUAN_TEST_POSTGRES_URL";

/// The database URL with a schema of its own, dropped at the end; `None` without the variable.
pub struct Schema {
    pub client: tokio_postgres::Client,
    name: String,
    database: String,
}

impl Schema {
    pub async fn new() -> Option<Schema> {
        let Ok(url) = std::env::var(URL_VARIABLE) else {
            let _ = writeln!(
                std::io::stderr(),
                "PostgreSQL test skipped: {URL_VARIABLE} is not set. Run it with \
                 {URL_VARIABLE}=postgres://postgres@127.0.0.1:5432/test cargo test -p \
                 oanquan-server --test nodes (or nodes_seeks)"
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
        let separator = if url.contains('?') { '&' } else { '?' };
        let database = format!("{url}{separator}options=-csearch_path%3D{name}");
        Some(Schema {
            client,
            name,
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

/// A running `oanquan-server` node, killed (SIGKILL) if dropped.
pub struct Node {
    child: Child,
    pub addr: SocketAddr,
}

impl Node {
    pub fn start(schema: &Schema, dir: &std::path::Path) -> Node {
        Node::start_with(schema, dir, &[])
    }

    /// [`Node::start`] with more flags.
    pub fn start_with(schema: &Schema, dir: &std::path::Path, flags: &[&str]) -> Node {
        let mut child = Command::new(env!("CARGO_BIN_EXE_oanquan-server"))
            .args([
                "--listen",
                "127.0.0.1:0",
                "--shutdown-drain-timeout",
                "2s",
                "--computer-move-time",
                "10ms",
            ])
            .args(flags)
            .current_dir(dir)
            .env_remove("OANQUAN_IN_MEMORY")
            .env_remove("OANQUAN_DATABASE")
            .env("OANQUAN_DATABASE_URL", &schema.database)
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

    pub async fn games(&self) -> Games {
        let channel = tonic::transport::Channel::from_shared(format!("http://{}", self.addr))
            .unwrap()
            .connect()
            .await
            .unwrap();
        pb::game_service_client::GameServiceClient::new(channel)
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
