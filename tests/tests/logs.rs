//! The server's log never contains a player token or an API key, at any log level: both are
//! bearer secrets, and logs are read by more people (and systems) than the database is.

use std::path::Path;

use oanquan_e2e::{CliProcess, Lines, Server, config_dir, run_cli};
use serde_json::Value;

fn json_of(stdout: &str) -> Value {
    serde_json::from_str(stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
}

/// Every token in a CLI token file.
fn tokens_in(config: &Path) -> Vec<String> {
    let file = std::fs::read(config.join("tokens.json")).expect("token file");
    let file: Value = serde_json::from_slice(&file).expect("token file is JSON");
    file["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|entry| entry["token"].as_str().expect("token").to_owned())
        .collect()
}

/// Replaces every stored token with `token` (for the wrong-token attempt).
fn overwrite_tokens(config: &Path, token: &str) {
    let path = config.join("tokens.json");
    let mut file: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    for entry in file["entries"].as_array_mut().unwrap() {
        entry["token"] = Value::from(token);
    }
    std::fs::write(&path, serde_json::to_vec(&file).unwrap()).unwrap();
}

/// The API key in `config`'s account file.
fn stored_key(config: &Path) -> String {
    let file: Value =
        serde_json::from_slice(&std::fs::read(config.join("account.json")).expect("account file"))
            .expect("account file is JSON");
    file["accounts"][0]["api_key"]
        .as_str()
        .expect("api_key")
        .to_owned()
}

fn set_stored_key(config: &Path, key: &str) {
    let path = config.join("account.json");
    let mut file: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    file["accounts"][0]["api_key"] = Value::from(key);
    std::fs::write(&path, serde_json::to_vec(&file).unwrap()).unwrap();
}

/// The account RPCs with the CLI: registers (the server makes a key and answers it), reads the
/// profile, lists and makes keys, uses a new key, a wrong one and a revoked one; returns every
/// key that went over the wire.
fn use_accounts(server: &Server) -> Vec<String> {
    let url = server.url();
    let (lan, copy) = (config_dir(), config_dir());
    let run = |config: &Path, args: &[&str], ok: bool| {
        let out = run_cli(&url, config, args);
        assert_eq!(out.code == Some(0), ok, "{args:?}: {out:?}");
        out
    };
    run(lan.path(), &["register", "Lan"], true);
    let first = stored_key(lan.path());
    run(lan.path(), &["me"], true);
    let listed = run(lan.path(), &["keys", "--json"], true);
    let first_id = json_of(&listed.stdout)["keys"][0]["id"]
        .as_str()
        .expect("a key id")
        .to_owned();
    let made = run(lan.path(), &["keys", "new"], true);
    let second = made
        .stdout
        .lines()
        .find(|line| line.starts_with("oqk_"))
        .unwrap_or_else(|| panic!("no key in {}", made.stdout))
        .to_owned();
    // The new key, then a wrong one, from another config directory.
    std::fs::copy(
        lan.path().join("account.json"),
        copy.path().join("account.json"),
    )
    .unwrap();
    set_stored_key(copy.path(), &second);
    run(copy.path(), &["me"], true);
    let wrong = format!("{first}x");
    set_stored_key(copy.path(), &wrong);
    run(copy.path(), &["me"], false);
    // A revoked key, refused.
    run(lan.path(), &["keys", "revoke", &first_id], true);
    set_stored_key(copy.path(), &first);
    run(copy.path(), &["me"], false);
    vec![first, second, wrong]
}

/// Creates and joins a game with the CLI, plays a move, then uses a wrong token twice; returns
/// the game id and every token used (the wrong one included).
fn play_and_refuse(server: &Server) -> (String, Vec<String>) {
    let url = server.url();
    let (alice, bob) = (config_dir(), config_dir());

    let created = run_cli(
        &url,
        alice.path(),
        &["create", "--name", "alice", "--seat", "first", "--json"],
    );
    assert_eq!(created.code, Some(0), "{created:?}");
    let id = json_of(&created.stdout)["game"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let joined = run_cli(&url, bob.path(), &["join", &id, "--name", "bob", "--json"]);
    assert_eq!(joined.code, Some(0), "{joined:?}");
    let mut tokens = tokens_in(alice.path());
    tokens.extend(tokens_in(bob.path()));
    assert_eq!(tokens.len(), 2);

    // One move with the right token, through the authorised PlayMove path.
    let (tx, mut lines) = Lines::new();
    let mut play = CliProcess::spawn("alice", &url, alice.path(), &["play", &id], &tx);
    let legal = lines.expect("alice", |l| l.starts_with("legal moves: "));
    let first = legal
        .strip_prefix("legal moves: ")
        .and_then(|l| l.split_whitespace().next())
        .expect("a legal move")
        .to_owned();
    lines.expect("alice", |l| l == "your move");
    play.send(&first);

    lines.expect("alice", |l| l.starts_with("move 1: "));

    // Bob with a token that is not his: his event stream (which carries the token) and his
    // resignation are both refused, and the refusals are logged without the token.
    let wrong = format!("{}x", tokens[1]);
    overwrite_tokens(bob.path(), &wrong);
    tokens.push(wrong);
    let refused = run_cli(&url, bob.path(), &["play", &id]);
    assert_ne!(refused.code, Some(0), "{refused:?}");
    let refused = run_cli(&url, bob.path(), &["resign", &id]);
    assert_ne!(refused.code, Some(0), "{refused:?}");
    drop(play);
    (id, tokens)
}

#[test]
fn no_token_reaches_the_log_even_at_trace_level() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("server.log");
    let server = Server::start_logged(&[], "trace", &log);
    let (id, mut tokens) = play_and_refuse(&server);
    tokens.extend(use_accounts(&server));
    drop(server);
    let text = std::fs::read_to_string(&log).unwrap();
    // The log level took effect (so this test would see a token if one were logged).
    assert!(
        text.lines().count() > 50 && text.contains("TRACE") && text.contains(&id),
        "expected a trace-level log mentioning the game:\n{}",
        &text[..text.len().min(2000)]
    );
    for token in &tokens {
        assert!(
            !text.contains(token.as_str()),
            "a token is in the server log at line {:?}",
            text.lines().find(|l| l.contains(token.as_str()))
        );
    }
}

/// `--log-format json`: every line is one JSON object; the lines of a call carry its span's
/// method, request id and game id; and still no token, at trace level.
#[test]
fn json_logs_parse_line_by_line_and_hold_no_token() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("server.log");
    let server = Server::start_logged(&["--log-format", "json"], "trace", &log);
    let (id, mut tokens) = play_and_refuse(&server);
    tokens.extend(use_accounts(&server));
    drop(server);
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|line| {
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"))
        })
        .collect();
    assert!(lines.len() > 50, "a trace-level log: {} lines", lines.len());
    assert!(
        lines
            .iter()
            .all(|line| line["level"].is_string() && line["timestamp"].is_string())
    );
    // The span of a PlayMove call: method, a request id and the game's id.
    let span = lines
        .iter()
        .filter_map(|line| line["span"].as_object())
        .find(|span| {
            span.get("name").and_then(Value::as_str) == Some("rpc")
                && span.get("method").and_then(Value::as_str)
                    == Some("/oanquan.v1.GameService/PlayMove")
                && span.get("game_id").and_then(Value::as_str) == Some(id.as_str())
        })
        .unwrap_or_else(|| {
            panic!(
                "no line in a PlayMove span of {id}:\n{}",
                &text[..text.len().min(3000)]
            )
        });
    let request_id = span["request_id"].as_str().expect("a request id");
    for method in ["Register", "CreateApiKey", "RevokeApiKey", "GetMe"] {
        let path = format!("/oanquan.v1.AccountService/{method}");
        assert!(
            lines
                .iter()
                .any(|line| line["span"]["method"].as_str() == Some(&path)),
            "no line in a {method} span"
        );
    }
    assert_eq!(request_id.len(), 32, "{request_id}");
    for token in &tokens {
        assert!(
            !text.contains(token.as_str()),
            "a token is in the JSON log at line {:?}",
            text.lines().find(|l| l.contains(token.as_str()))
        );
    }
}
