//! The `oanquan` CLI over TLS against a real `oanquan-server --tls-cert --tls-key`, both as child
//! processes, with a self-signed certificate for `localhost` made by rcgen.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use oanquan_e2e::{
    CliProcess, Lcg, Lines, Output, Proxy, Server, Stream, binaries, config_dir, drive,
    random_move, run_cli,
};
use serde_json::Value;

/// A TLS server and the files its clients need.
struct Tls {
    server: Server,
    /// Holds cert.pem (also the clients' CA: it is self-signed) and key.pem.
    dir: tempfile::TempDir,
}

impl Tls {
    fn start() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let key = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).expect("cert");
        let (cert, key_file) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
        std::fs::write(&cert, key.cert.pem()).expect("write cert");
        std::fs::write(&key_file, key.signing_key.serialize_pem()).expect("write key");
        let server = Server::start_with(&[
            "--tls-cert",
            path_str(&cert),
            "--tls-key",
            path_str(&key_file),
        ]);
        Self { server, dir }
    }

    fn ca(&self) -> PathBuf {
        self.dir.path().join("cert.pem")
    }

    /// The address by the name in the certificate.
    fn url(&self) -> String {
        format!("https://localhost:{}", self.server.addr.port())
    }
}

fn path_str(path: &Path) -> &str {
    path.to_str().expect("UTF-8 temp path")
}

fn json_of(stdout: &str) -> Value {
    serde_json::from_str(stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
}

/// `oanquan ARGS` with `--ca-cert CA` in front.
fn run_with_ca(server: &str, ca: &Path, config: &Path, args: &[&str]) -> Output {
    let mut all = vec!["--ca-cert", path_str(ca)];
    all.extend_from_slice(args);
    run_cli(server, config, &all)
}

#[test]
fn the_cli_plays_and_watches_over_tls_across_a_dropped_connection() {
    let tls = Tls::start();
    let ca = tls.ca();
    let (alice_dir, bob_dir, eve_dir) = (config_dir(), config_dir(), config_dir());

    let presets = run_with_ca(&tls.url(), &ca, alice_dir.path(), &["presets"]);
    assert_eq!(presets.code, Some(0), "{presets:?}");
    assert!(presets.stdout.contains("standard"), "{presets:?}");
    // The environment variable works as the flag; a bare host:port with a CA means TLS.
    let env = Command::new(&binaries().cli)
        .args(["list", "--json"])
        .env(
            "OANQUAN_SERVER",
            format!("localhost:{}", tls.server.addr.port()),
        )
        .env("OANQUAN_CA_CERT", &ca)
        .env("OANQUAN_CONFIG_DIR", alice_dir.path())
        .stdin(Stdio::null())
        .output()
        .expect("run oanquan");
    assert_eq!(env.status.code(), Some(0), "{env:?}");

    let created = run_with_ca(
        &tls.url(),
        &ca,
        alice_dir.path(),
        &["create", "--name", "alice", "--seat", "first", "--json"],
    );
    assert_eq!(created.code, Some(0), "{created:?}");
    let id = json_of(&created.stdout)["game"]["id"]
        .as_str()
        .expect("game.id")
        .to_owned();
    let joined = run_with_ca(
        &tls.url(),
        &ca,
        bob_dir.path(),
        &["join", &id, "--name", "bob", "--json"],
    );
    assert_eq!(joined.code, Some(0), "{joined:?}");
    assert_eq!(
        json_of(&joined.stdout)["game"]["status"],
        "GAME_STATUS_ACTIVE"
    );

    // The spectator goes through a TCP proxy that the test cuts: its reconnects must speak TLS
    // again (the proxy forwards bytes; the certificate is still for localhost).
    let proxy = Proxy::start(tls.server.addr);
    let proxied = format!("https://localhost:{}", proxy.addr.port());
    let ca_arg = path_str(&ca);
    let (tx, mut lines) = Lines::new();
    let _eve = CliProcess::spawn(
        "eve",
        &proxied,
        eve_dir.path(),
        &["--ca-cert", ca_arg, "watch", &id],
        &tx,
    );
    lines.expect("eve", |l| l.starts_with(&format!("game {id}: active")));
    let mut players = HashMap::new();
    for (who, dir) in [("alice", &alice_dir), ("bob", &bob_dir)] {
        let args = ["--ca-cert", ca_arg, "play", &id];
        let process = CliProcess::spawn(who, &tls.url(), dir.path(), &args, &tx);
        players.insert(who.to_owned(), process);
    }

    // A few moves, the proxy cut after the 2nd and restored after the 5th, then a resignation.
    let mut rng = Lcg(3);
    let mut sent = 0;
    let answer = |_: &str, moves: &[String], lines: &Lines| {
        sent += 1;
        if sent == 3 {
            proxy.cut();
            // Let the watcher notice and fail a reconnect attempt or two.
            std::thread::sleep(Duration::from_millis(1500));
        } else if sent == 6 {
            proxy.restore();
        }
        if sent > 7 {
            "resign".to_owned()
        } else {
            random_move(&mut rng, moves, lines)
        }
    };
    drive(
        &mut lines,
        &mut players,
        &["alice", "bob", "eve"],
        answer,
        |_| {},
    );
    for player in players.values_mut() {
        assert_eq!(player.wait().code(), Some(0), "{}", lines.tail(30));
    }

    let move_lines = |who: &str| -> Vec<String> {
        lines
            .stdout_of(who)
            .into_iter()
            .filter(|l| l.starts_with("move ") || l.starts_with("game over: "))
            .collect()
    };
    assert!(move_lines("alice").len() >= 6, "{}", lines.tail(40));
    assert_eq!(move_lines("eve"), move_lines("alice"), "{}", lines.tail(40));
    let eve_notices: Vec<&str> = lines
        .transcript
        .iter()
        .filter(|l| l.who == "eve" && l.stream == Stream::Stderr)
        .map(|l| l.text.as_str())
        .collect();
    assert!(
        eve_notices.iter().any(|l| l.contains("unreachable")),
        "{eve_notices:#?}"
    );
    // Standard output and standard error are read by separate threads, so under load the
    // notice can arrive after the moves that followed it: wait for it rather than sample.
    if !eve_notices.iter().any(|l| l.contains("reconnected")) {
        loop {
            let line = lines.next_line();
            if line.who == "eve"
                && line.stream == Stream::Stderr
                && line.text.contains("reconnected")
            {
                break;
            }
        }
    }
}

#[test]
fn tls_failures_are_clear_and_quick() {
    let tls = Tls::start();
    let dir = config_dir();
    let port = tls.server.addr.port();

    // Not trusted: exit 69, naming the certificate and the fix.
    let untrusted = run_cli(&tls.url(), dir.path(), &["presets"]);
    assert_eq!(untrusted.code, Some(69), "{untrusted:?}");
    assert!(untrusted.stderr.contains("certificate"), "{untrusted:?}");
    assert!(untrusted.stderr.contains("--ca-cert"), "{untrusted:?}");

    // Trusted, but reached by a name the certificate does not list.
    let by_ip = format!("https://127.0.0.1:{port}");
    let wrong_name = run_with_ca(&by_ip, &tls.ca(), dir.path(), &["presets"]);
    assert_eq!(wrong_name.code, Some(69), "{wrong_name:?}");
    assert!(
        wrong_name.stderr.contains("not valid for name"),
        "{wrong_name:?}"
    );

    // Cleartext against the TLS server: fails within the client's own bounds (5 s to connect,
    // 15 s per request), with a pointer to https://.
    for server in [
        format!("http://localhost:{port}"),
        format!("localhost:{port}"),
    ] {
        let started = Instant::now();
        let cleartext = run_cli(&server, dir.path(), &["presets"]);
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "took {:?}",
            started.elapsed()
        );
        assert_eq!(cleartext.code, Some(69), "{cleartext:?}");
        assert!(cleartext.stderr.contains("https://"), "{cleartext:?}");
    }

    // --ca-cert contradicts http://, and must hold a certificate: usage errors.
    let http = format!("http://localhost:{port}");
    let contradiction = run_with_ca(&http, &tls.ca(), dir.path(), &["presets"]);
    assert_eq!(contradiction.code, Some(2), "{contradiction:?}");
    assert!(
        contradiction
            .stderr
            .contains(&format!("https://localhost:{port}")),
        "{contradiction:?}"
    );
    let key = tls.dir.path().join("key.pem");
    let not_a_cert = run_with_ca(&tls.url(), &key, dir.path(), &["presets"]);
    assert_eq!(not_a_cert.code, Some(2), "{not_a_cert:?}");
    assert!(
        not_a_cert.stderr.contains("no PEM certificate"),
        "{not_a_cert:?}"
    );
    let missing = tls.dir.path().join("missing.pem");
    let unreadable = run_with_ca(&tls.url(), &missing, dir.path(), &["presets"]);
    assert_eq!(unreadable.code, Some(2), "{unreadable:?}");
    assert!(unreadable.stderr.contains("cannot read"), "{unreadable:?}");
}
