//! The real binary reloads its TLS certificate without a restart: new connections get the new
//! one (a client trusting only the new certificate connects), streams open over the old one go
//! on, and a pair that cannot be used is refused with a log line while the old one is kept.

mod common;

use std::io::{BufRead as _, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use tonic::transport::Channel;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

/// A server started with a certificate in `dir`; killed when dropped.
struct Running {
    child: Child,
    addr: SocketAddr,
    cert: PathBuf,
    key: PathBuf,
    stderr: Arc<Mutex<String>>,
}

impl Running {
    fn start(dir: &Path, (cert, key): &(String, String), interval: &str) -> Running {
        let (cert_path, key_path) = (dir.join("cert.pem"), dir.join("key.pem"));
        std::fs::write(&cert_path, cert).unwrap();
        std::fs::write(&key_path, key).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_oanquan-server"))
            .args(["--in-memory", "--listen", "127.0.0.1:0"])
            .arg("--tls-cert")
            .arg(&cert_path)
            .arg("--tls-key")
            .arg(&key_path)
            .args(["--tls-reload-interval", interval])
            .env("RUST_LOG", "info")
            .env_remove("OANQUAN_DATABASE")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn oanquan-server");
        let stderr = Arc::new(Mutex::new(String::new()));
        let lines = BufReader::new(child.stderr.take().unwrap());
        let log = Arc::clone(&stderr);
        std::thread::spawn(move || {
            for line in lines.lines().map_while(Result::ok) {
                eprintln!("{line}");
                log.lock().unwrap().push_str(&line);
                log.lock().unwrap().push('\n');
            }
        });
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let line = lines.next().expect("a line").expect("readable");
        let addr = line
            .strip_prefix("oanquan-server listening on ")
            .unwrap_or_else(|| panic!("{line:?}"))
            .parse()
            .unwrap();
        Running {
            child,
            addr,
            cert: cert_path,
            key: key_path,
            stderr,
        }
    }

    /// Writes a new pair over the files, the certificate first, as a tool without atomic
    /// renames would (a poll may see the new certificate with the old key in between).
    fn replace(&self, (cert, key): &(String, String)) {
        std::fs::write(&self.cert, cert).unwrap();
        std::fs::write(&self.key, key).unwrap();
    }

    fn sighup(&self) {
        let sent = Command::new("kill")
            .args(["-HUP", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
    }

    /// Polls (bounded) until the log has a line containing `text`.
    fn wait_for_log(&self, text: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.stderr.lock().unwrap().contains(text) {
            assert!(Instant::now() < deadline, "no log line with {text:?}");
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

/// A new connection trusting only `ca`, checked with a health call.
async fn connect(addr: SocketAddr, ca: &str) -> Option<Channel> {
    let channel = tls_channel(addr, ca).await.ok()?;
    let checked = HealthClient::new(channel.clone())
        .check(HealthCheckRequest::default())
        .await
        .ok()?;
    assert_eq!(checked.into_inner().status(), ServingStatus::Serving);
    Some(channel)
}

/// Polls (bounded) until a new connection trusting only `ca` succeeds.
async fn wait_served(addr: SocketAddr, ca: &str) -> Channel {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(channel) = connect(addr, ca).await {
            return channel;
        }
        assert!(
            Instant::now() < deadline,
            "the new certificate is not served"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Starts with A, watches a game over A, moves to B by `reload`; then checks that only B is
/// served to new connections while the watch over A goes on.
async fn reloads(interval: &str, reload: impl Fn(&Running, &(String, String))) {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (certificate(), certificate());
    let server = Running::start(dir.path(), &a, interval);
    let old = connect(server.addr, &a.0).await.expect("A is served");
    let mut games = Games::new(old.clone());
    let (id, first, second) = started(&mut games, "standard").await;
    let (mut watch, _) = watch_snapshot(&mut games, &id).await;

    // A key that is not the certificate's: refused, A kept.
    let (c, _) = certificate();
    reload(&server, &(c, b.1.clone()));
    server.wait_for_log("TLS certificate not reloaded");
    assert!(connect(server.addr, &a.0).await.is_some(), "A is kept");

    reload(&server, &b);
    wait_served(server.addr, &b.0).await;
    server.wait_for_log("TLS certificate reloaded");
    assert!(
        connect(server.addr, &a.0).await.is_none(),
        "a client trusting only A is refused now"
    );

    // The stream and connection opened over A go on.
    play_one(&mut games, &id, (&first, &second)).await;
    let event = next_game_event(&mut watch)
        .await
        .expect("the watch goes on");
    assert!(
        matches!(
            event.kind,
            Some(oanquan_proto::v1::game_event::Kind::MovePlayed(_))
        ),
        "{event:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changed_files_are_served_to_new_connections_and_streams_go_on() {
    reloads("100ms", Running::replace).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_the_certificate() {
    // No polling: only the signal can have reloaded it.
    reloads("0", |server, pair| {
        server.replace(pair);
        server.sighup();
    })
    .await;
}

/// A key file deleted under the server keeps the pair in use, and the log says so once (an
/// outside probe saw nothing logged); put back, it is served again without a word more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_key_file_is_logged_once_and_the_pair_kept() {
    let dir = tempfile::tempdir().unwrap();
    let a = certificate();
    let server = Running::start(dir.path(), &a, "50ms");
    std::fs::remove_file(&server.key).unwrap();
    server.wait_for_log("TLS certificate or key file cannot be read");
    std::thread::sleep(Duration::from_millis(300));
    let log = server.stderr.lock().unwrap().clone();
    assert_eq!(
        log.matches("TLS certificate or key file cannot be read")
            .count(),
        1,
        "{log}"
    );
    assert!(log.contains("key.pem"), "{log}");
    assert!(connect(server.addr, &a.0).await.is_some(), "A is kept");
}
