//! The `oanquan` CLI against a real `oanquan-server`, both as child processes.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use oanquan_e2e::{
    CliProcess, Lcg, Line, Lines, Proxy, Server, Stream, config_dir, random_move, run_cli,
};
use serde_json::Value;

fn json_of(stdout: &str) -> Value {
    serde_json::from_str(stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
}

/// `create` (first seat) and `join` (second seat) with --json; returns the game id.
fn new_game(server: &str, alice: &Path, bob: &Path) -> String {
    let created = run_cli(
        server,
        alice,
        &["create", "--name", "alice", "--seat", "first", "--json"],
    );
    assert_eq!(created.code, Some(0), "{created:?}");
    let created = json_of(&created.stdout);
    let id = created["game_id"].as_str().expect("game_id").to_owned();
    assert_eq!(created["seat"], "first");
    assert_eq!(created["game"]["status"], "waiting");

    let joined = run_cli(server, bob, &["join", &id, "--name", "bob", "--json"]);
    assert_eq!(joined.code, Some(0), "{joined:?}");
    let joined = json_of(&joined.stdout);
    assert_eq!(joined["game_id"], id.as_str());
    assert_eq!(joined["seat"], "second");
    assert_eq!(joined["game"]["status"], "active");
    id
}

/// Plays the game to its end by answering every `your move` of the `play` processes with one
/// of the moves on their preceding `legal moves:` line. `typos[who]` are sent first, one per
/// prompt, to check that bad input re-prompts. `hook` sees every line (to cut a proxy, ...).
/// Returns when every process in `finishers` has printed `game over:`.
fn drive(
    lines: &mut Lines,
    players: &mut HashMap<String, CliProcess>,
    finishers: &[&str],
    mut typos: HashMap<String, Vec<&str>>,
    hook: impl FnMut(&Line),
) {
    let mut rng = Lcg(7);
    let answer =
        |who: &str, moves: &[String], lines: &Lines| match typos.get_mut(who).and_then(Vec::pop) {
            Some(typo) => typo.to_owned(),
            None => random_move(&mut rng, moves, lines),
        };
    oanquan_e2e::drive(lines, players, finishers, answer, hook);
}

/// `move N:` lines of one process; asserts they are numbered 1, 2, 3, ... with no gap and no
/// repeat.
fn move_lines(lines: &Lines, who: &str) -> Vec<String> {
    let moves: Vec<String> = lines
        .stdout_of(who)
        .into_iter()
        .filter(|l| l.starts_with("move "))
        .collect();
    for (i, line) in moves.iter().enumerate() {
        assert!(
            line.starts_with(&format!("move {}: ", i + 1)),
            "{who}: expected move {} at {line:?}\n{}",
            i + 1,
            moves.join("\n")
        );
    }
    moves
}

fn game_over_line(lines: &Lines, who: &str) -> String {
    lines
        .stdout_of(who)
        .into_iter()
        .find(|l| l.starts_with("game over: "))
        .unwrap_or_else(|| panic!("{who} printed no game over line"))
}

#[test]
fn two_clis_play_a_whole_game_through_stdin() {
    let server = Server::start();
    let (alice_dir, bob_dir) = (config_dir(), config_dir());
    let id = new_game(&server.url(), alice_dir.path(), bob_dir.path());

    let (tx, mut lines) = Lines::new();
    let mut players = HashMap::new();
    for (who, dir) in [("alice", alice_dir.path()), ("bob", bob_dir.path())] {
        players.insert(
            who.to_owned(),
            CliProcess::spawn(who, &server.url(), dir, &["play", &id], &tx),
        );
    }
    let typos = HashMap::from([
        ("alice".to_owned(), vec!["3", "6 r", "board", "hello"]),
        ("bob".to_owned(), vec!["help", "0 left"]),
    ]);
    drive(&mut lines, &mut players, &["alice", "bob"], typos, |_| {});
    for player in players.values_mut() {
        let status = player.wait();
        assert_eq!(
            status.code(),
            Some(0),
            "{}:\n{}",
            player.name,
            lines.tail(30)
        );
    }

    let alice = lines.stdout_of("alice");
    assert_eq!(alice[0], format!("playing {id} as first"));
    assert_eq!(lines.stdout_of("bob")[0], format!("playing {id} as second"));
    // Each typo got an error and a new prompt; `board` and `help` are commands, not errors.
    let errors = |who: &str| {
        lines
            .stdout_of(who)
            .iter()
            .filter(|l| l.starts_with("error: "))
            .count()
    };
    assert_eq!(errors("alice"), 3, "{}", alice.join("\n"));
    assert_eq!(errors("bob"), 1);
    let alice_moves = move_lines(&lines, "alice");
    assert!(!alice_moves.is_empty());
    assert_eq!(alice_moves, move_lines(&lines, "bob"));
    assert_eq!(
        game_over_line(&lines, "alice"),
        game_over_line(&lines, "bob")
    );

    // The finished game as the one-shot commands see it.
    let moves = run_cli(&server.url(), alice_dir.path(), &["moves", &id, "--json"]);
    assert_eq!(moves.code, Some(0), "{moves:?}");
    let moves = json_of(&moves.stdout);
    assert_eq!(
        moves["moves"].as_array().map(Vec::len),
        Some(alice_moves.len())
    );
    let text = run_cli(&server.url(), alice_dir.path(), &["moves", &id]);
    let text_moves: Vec<&str> = text
        .stdout
        .lines()
        .filter(|l| l.starts_with("move "))
        .collect();
    assert_eq!(text_moves, alice_moves);
    let shown = run_cli(&server.url(), bob_dir.path(), &["show", &id, "--json"]);
    assert_eq!(json_of(&shown.stdout)["status"], "finished");
}

#[test]
fn watch_sees_every_move_across_a_dropped_connection() {
    let server = Server::start();
    let proxy = Proxy::start(server.addr);
    let (alice_dir, bob_dir, eve_dir) = (config_dir(), config_dir(), config_dir());
    let id = new_game(&server.url(), alice_dir.path(), bob_dir.path());

    let (tx, mut lines) = Lines::new();
    // The spectator goes through the proxy; the players talk to the server directly.
    let _watcher = CliProcess::spawn("eve", &proxy.url(), eve_dir.path(), &["watch", &id], &tx);
    lines.expect("eve", |l| l.starts_with(&format!("game {id}: active")));
    let mut players = HashMap::new();
    for (who, dir) in [("alice", alice_dir.path()), ("bob", bob_dir.path())] {
        players.insert(
            who.to_owned(),
            CliProcess::spawn(who, &server.url(), dir, &["play", &id], &tx),
        );
    }
    let mut cut_at = None;
    let mut restored = false;
    drive(
        &mut lines,
        &mut players,
        &["alice", "bob", "eve"],
        HashMap::new(),
        |line| {
            let Some(n) = line
                .text
                .strip_prefix("move ")
                .and_then(|r| r.split(':').next())
                .and_then(|n| n.parse::<u32>().ok())
            else {
                return;
            };
            if line.who != "alice" {
                return;
            }
            if n == 3 && cut_at.is_none() {
                proxy.cut();
                cut_at = Some(n);
                // Hold the players so that the watcher's first reconnect attempts hit the dead
                // proxy and back off; moves 4..9 are then played while it is still down.
                std::thread::sleep(std::time::Duration::from_millis(1500));
            } else if n == 9 && !restored {
                proxy.restore();
                restored = true;
            }
        },
    );
    assert!(restored, "the game ended before the proxy was restored");

    let players_view = move_lines(&lines, "alice");
    assert_eq!(
        move_lines(&lines, "eve"),
        players_view,
        "{}",
        lines.tail(40)
    );
    assert_eq!(
        game_over_line(&lines, "eve"),
        game_over_line(&lines, "alice")
    );
    let eve_notices: Vec<&Line> = lines
        .transcript
        .iter()
        .filter(|l| l.who == "eve" && l.stream == Stream::Stderr)
        .collect();
    let lost = eve_notices
        .iter()
        .filter(|l| l.text.contains("connection lost"))
        .count();
    assert!(
        lost >= 2,
        "expected the cut and at least one failed reconnect attempt: {eve_notices:#?}"
    );
    assert!(
        eve_notices.iter().any(|l| l.text.contains("reconnected")),
        "{eve_notices:#?}"
    );
}

#[test]
fn watch_json_prints_one_object_per_event() {
    let server = Server::start();
    let (alice_dir, bob_dir, eve_dir) = (config_dir(), config_dir(), config_dir());
    let id = new_game(&server.url(), alice_dir.path(), bob_dir.path());
    let (tx, mut lines) = Lines::new();
    let _watcher = CliProcess::spawn(
        "eve",
        &server.url(),
        eve_dir.path(),
        &["watch", &id, "--json"],
        &tx,
    );
    let first = lines.expect("eve", |_| true);
    let snapshot = json_of(&first);
    assert_eq!(snapshot["type"], "snapshot");
    assert_eq!(snapshot["game"]["id"], id.as_str());

    // bob resigns at once through `play`, which ends the game.
    let mut players = HashMap::new();
    let mut bob = CliProcess::spawn("bob", &server.url(), bob_dir.path(), &["play", &id], &tx);
    let mut alice = CliProcess::spawn(
        "alice",
        &server.url(),
        alice_dir.path(),
        &["play", &id],
        &tx,
    );
    lines.expect("alice", |l| l == "your move");
    alice.send("1 r");
    lines.expect("bob", |l| l == "your move");
    bob.send("resign");
    players.insert("alice".to_owned(), alice);
    players.insert("bob".to_owned(), bob);
    lines.expect("eve", |l| l.contains(r#""type":"game_over""#));
    // `expect` above skipped eve's other lines; the transcript has them all.
    let mut types = Vec::new();
    for text in lines.stdout_of("eve").iter().skip(1) {
        let event = json_of(text);
        assert!(event["sequence"].as_u64().is_some(), "{text}");
        types.push(event["type"].as_str().expect("type").to_owned());
        if event["type"] == "game_over" {
            assert_eq!(event["result"]["winner"], "first");
            assert_eq!(event["result"]["end_reason"], "resignation");
        }
    }
    assert_eq!(types, ["move_played", "turn_started", "game_over"]);
    for p in players.values_mut() {
        assert_eq!(p.wait().code(), Some(0));
    }
}

#[test]
fn play_resumes_after_the_client_restarts() {
    let server = Server::start();
    let (alice_dir, bob_dir) = (config_dir(), config_dir());
    let id = new_game(&server.url(), alice_dir.path(), bob_dir.path());
    let (tx, mut lines) = Lines::new();

    let mut alice = CliProcess::spawn(
        "alice",
        &server.url(),
        alice_dir.path(),
        &["play", &id],
        &tx,
    );
    lines.expect("alice", |l| l == "your move");
    alice.send("2 l");
    alice.close_stdin();
    let mut bob = CliProcess::spawn("bob", &server.url(), bob_dir.path(), &["play", &id], &tx);
    lines.expect("bob", |l| l == "your move");
    bob.send("4 r");
    // alice's turn comes, her input has ended: exit 6, the game goes on.
    assert_eq!(alice.wait().code(), Some(6), "{}", lines.tail(20));

    let mut alice = CliProcess::spawn(
        "alice2",
        &server.url(),
        alice_dir.path(),
        &["play", &id],
        &tx,
    );
    let legal = lines.expect("alice2", |l| l.starts_with("legal moves: "));
    assert!(legal.len() > "legal moves: ".len());
    lines.expect("alice2", |l| l == "your move");
    alice.send("quit");
    assert_eq!(alice.wait().code(), Some(0));
    let alice2 = lines.stdout_of("alice2");
    assert!(
        alice2
            .iter()
            .any(|l| l.starts_with(&format!("game {id}: active, 2 moves played"))),
        "{alice2:?}"
    );
    // The restarted client does not replay old moves as new ones.
    assert!(!alice2.iter().any(|l| l.starts_with("move ")), "{alice2:?}");
    drop(bob);
}

#[test]
fn exit_codes_and_json_of_the_one_shot_commands() {
    let server = Server::start();
    let url = server.url();
    let (alice_dir, bob_dir, carol_dir) = (config_dir(), config_dir(), config_dir());

    let presets = run_cli(&url, alice_dir.path(), &["presets", "--json"]);
    assert_eq!(presets.code, Some(0), "{presets:?}");
    let presets = json_of(&presets.stdout);
    let names: Vec<&str> = presets["presets"]
        .as_array()
        .expect("presets")
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert_eq!(names.first(), Some(&"standard"), "{names:?}");

    let id = new_game(&url, alice_dir.path(), bob_dir.path());
    let list = run_cli(
        &url,
        carol_dir.path(),
        &["list", "--filter", "active", "--json"],
    );
    assert_eq!(list.code, Some(0));
    let games = json_of(&list.stdout);
    assert!(
        games["games"]
            .as_array()
            .expect("games")
            .iter()
            .any(|g| g["id"] == id.as_str())
    );
    let show = run_cli(&url, carol_dir.path(), &["show", &id, "--json"]);
    assert_eq!(
        json_of(&show.stdout)["position"]["squares"]
            .as_array()
            .map(Vec::len),
        Some(12)
    );
    let show_text = run_cli(&url, bob_dir.path(), &["show", &id]);
    assert_eq!(show_text.code, Some(0));
    assert!(
        show_text.stdout.contains("second player: bob (you)"),
        "{}",
        show_text.stdout
    );
    assert!(show_text.stdout.is_ascii(), "plain output off a terminal");

    let codes: BTreeMap<&str, (Vec<&str>, i32)> = BTreeMap::from([
        ("unknown game", (vec!["show", "no-such-game"], 3)),
        (
            "full game",
            (vec!["join", id.as_str(), "--name", "carol"], 4),
        ),
        ("no token", (vec!["play", id.as_str()], 5)),
        ("bad flag", (vec!["list", "--filter", "sideways"], 2)),
        (
            "unknown preset",
            (vec!["create", "--name", "c", "--preset", "chess"], 2),
        ),
    ]);
    for (what, (args, code)) in &codes {
        let out = run_cli(&url, carol_dir.path(), args);
        assert_eq!(out.code, Some(*code), "{what}: {out:?}");
        assert!(!out.stderr.is_empty(), "{what}: says why");
    }
    let dead = run_cli("http://127.0.0.1:1", carol_dir.path(), &["list"]);
    assert_eq!(dead.code, Some(69), "{dead:?}");
    let help = run_cli(&url, carol_dir.path(), &["--help"]);
    assert!(help.stdout.contains("EXIT CODES:") && help.stdout.contains("EXAMPLES:"));
}
