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
    // The API's CreateGameResponse, less the token (kept in the token file only).
    let created = json_of(&created.stdout);
    let id = created["game"]["id"].as_str().expect("game.id").to_owned();
    assert_eq!(created["seat"], "PLAYER_FIRST");
    assert_eq!(created["game"]["status"], "GAME_STATUS_WAITING_FOR_PLAYERS");
    assert!(created.get("playerToken").is_none(), "{created}");

    let joined = run_cli(server, bob, &["join", &id, "--name", "bob", "--json"]);
    assert_eq!(joined.code, Some(0), "{joined:?}");
    let joined = json_of(&joined.stdout);
    assert_eq!(joined["game"]["id"], id.as_str());
    assert_eq!(joined["seat"], "PLAYER_SECOND");
    assert_eq!(joined["game"]["status"], "GAME_STATUS_ACTIVE");
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

/// `move N:` lines of one process; asserts they are numbered with no gap and no repeat, from
/// the first move after those its first state line says were played already (`game X: active,
/// K moves played`: a player whose client came up after the opponent's opening move is told
/// so, and is shown the moves from there).
fn move_lines(lines: &Lines, who: &str) -> Vec<String> {
    let stdout = lines.stdout_of(who);
    let before: usize = stdout
        .iter()
        .find_map(|l| {
            let rest = l.strip_prefix("game ")?;
            let (_, state) = rest.split_once(": ")?;
            let played = state.split(", ").nth(1)?;
            let count = played
                .strip_suffix(" moves played")
                .or_else(|| played.strip_suffix(" move played"))?;
            count.parse().ok()
        })
        .unwrap_or(0);
    let moves: Vec<String> = stdout
        .into_iter()
        .filter(|l| l.starts_with("move "))
        .collect();
    for (i, line) in moves.iter().enumerate() {
        let number = before + i + 1;
        assert!(
            line.starts_with(&format!("move {number}: ")),
            "{who}: expected move {number} at {line:?}\n{}",
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

/// `score F:S` at the end of a stable line.
fn score_of(line: &str) -> (i64, i64) {
    let (first, second) = line
        .rsplit_once("score ")
        .and_then(|(_, s)| s.trim_end_matches(')').split_once(':'))
        .unwrap_or_else(|| panic!("no score: {line}"));
    (
        first.parse().expect("first"),
        second.parse().expect("second"),
    )
}

/// The numbers printed add up, move after move: each move's score is the one before it, plus
/// what the move captured (`captured C`), less what the opponent's refill took from their
/// count (its own `refill:` line), plus what the end-of-game collection gave each player (its
/// own `end of game:` line), so that nobody is left wondering where points came from. Returns
/// how many refills were said.
fn assert_the_scores_add_up(stdout: &[String], who: &str) -> usize {
    let moves: Vec<usize> = (0..stdout.len())
        .filter(|&i| stdout[i].starts_with("move "))
        .collect();
    assert!(
        moves.len() >= 2,
        "{who} played fewer than two moves: {stdout:#?}"
    );
    let mut refills = 0;
    for pair in moves.windows(2) {
        let (before, at) = (pair[0], pair[1]);
        let (first0, second0) = score_of(&stdout[before]);
        let line = &stdout[at];
        let (first, second) = score_of(line);
        let captured: i64 = line
            .split(", captured ")
            .nth(1)
            .and_then(|rest| rest.split(',').next())
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| panic!("no capture count: {line}"));
        let next = moves
            .iter()
            .find(|&&i| i > at)
            .copied()
            .unwrap_or(stdout.len());
        let said = &stdout[at + 1..next];
        let (mut to_first, mut to_second) = (0, 0);
        if let Some(refill) = said.iter().find(|l| l.starts_with("refill: ")) {
            refills += 1;
            assert_eq!(score_of(refill), (first, second), "{refill}");
            if refill.starts_with("refill: first's ") {
                to_first -= 5;
            } else {
                assert!(refill.starts_with("refill: second's "), "{refill}");
                to_second -= 5;
            }
            assert!(refill.contains(" -5"), "{refill}");
        }
        if let Some(collected) = said.iter().find(|l| l.starts_with("end of game: ")) {
            let share = |side: &str| -> i64 {
                collected
                    .split(&format!("{side} +"))
                    .nth(1)
                    .and_then(|rest| rest.split([',', ' ']).next())
                    .and_then(|n| n.parse().ok())
                    .unwrap_or_else(|| panic!("no share of {side}: {collected}"))
            };
            to_first += share("first");
            to_second += share("second");
            assert_eq!(score_of(collected), (first, second), "{collected}");
        }
        let (mover_gain, other_gain) = if line.contains(": first plays ") {
            (first - first0 - to_first, second - second0 - to_second)
        } else {
            (second - second0 - to_second, first - first0 - to_first)
        };
        assert_eq!(
            (mover_gain, other_gain),
            (captured, 0),
            "{who}: the score does not add up:\n{}\n{line}\n{said:#?}",
            stdout[before],
        );
    }
    refills
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
    // Bob sees the same moves, from wherever his client came up (move_lines checks that).
    let bob_moves = move_lines(&lines, "bob");
    assert!(
        !bob_moves.is_empty() && alice_moves.ends_with(&bob_moves),
        "{}",
        lines.tail(40)
    );
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
    assert_eq!(
        json_of(&shown.stdout)["game"]["status"],
        "GAME_STATUS_FINISHED"
    );
    for who in ["alice", "bob"] {
        assert_turn_line_before_each_prompt(&lines, who);
        assert_the_scores_add_up(&lines.stdout_of(who), who);
    }
    let text: Vec<String> = text.stdout.lines().map(str::to_owned).collect();
    assert_the_scores_add_up(&text, "moves");
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
    // Off a terminal: one line when the server is lost, one when it is back, however many
    // attempts in between; no transport error text unless --verbose.
    let count = |needle: &str| {
        eve_notices
            .iter()
            .filter(|l| l.text.contains(needle))
            .count()
    };
    assert_eq!(count("unreachable; reconnecting"), 1, "{eve_notices:#?}");
    assert_eq!(count("reconnected to "), 1, "{eve_notices:#?}");
    assert_eq!(eve_notices.len(), 2, "{eve_notices:#?}");
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
    assert_eq!(
        snapshot["event"]["snapshot"]["game"]["id"],
        id.as_str(),
        "{first}"
    );

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
    lines.expect("bob", |l| l == "resign? (y/N)");
    bob.send("y");
    players.insert("alice".to_owned(), alice);
    players.insert("bob".to_owned(), bob);
    lines.expect("eve", |l| l.contains(r#""gameOver""#));
    // `expect` above skipped eve's other lines; the transcript has them all. Each is a
    // WatchGameResponse in the canonical protobuf JSON mapping, as grpcurl prints it.
    let mut kinds = Vec::new();
    for text in lines.stdout_of("eve").iter().skip(1) {
        let response = json_of(text);
        assert_canonical(&response);
        let event = &response["event"];
        let sequence = event["sequence"].as_str().expect("uint64 as a string");
        assert!(sequence.parse::<u64>().is_ok(), "{text}");
        assert!(is_rfc3339(&event["time"]), "{text}");
        let kind: Vec<&String> = event
            .as_object()
            .expect("event")
            .keys()
            .filter(|k| !matches!(k.as_str(), "sequence" | "time"))
            .collect();
        assert_eq!(kind.len(), 1, "{text}");
        kinds.push(kind[0].clone());
        if let Some(over) = event.get("gameOver") {
            assert_eq!(over["result"]["winner"], "PLAYER_FIRST");
            assert_eq!(over["result"]["endReason"], "END_REASON_RESIGNATION");
        }
    }
    assert_eq!(kinds, ["movePlayed", "turnStarted", "gameOver"]);
    for p in players.values_mut() {
        assert_eq!(p.wait().code(), Some(0));
    }

    // A finished game's stream is its snapshot alone, whose game says how it ended; the game
    // in it is the one GetGame (`show --json`) returns.
    let finished = run_cli(&server.url(), eve_dir.path(), &["watch", &id, "--json"]);
    assert_eq!(finished.code, Some(0), "{finished:?}");
    let stream: Vec<&str> = finished.stdout.lines().collect();
    assert_eq!(stream.len(), 1, "{}", finished.stdout);
    let snapshot = json_of(stream[0]);
    let game = &snapshot["event"]["snapshot"]["game"];
    assert_eq!(game["status"], "GAME_STATUS_FINISHED");
    assert_eq!(game["result"]["endReason"], "END_REASON_RESIGNATION");
    let shown = run_cli(&server.url(), eve_dir.path(), &["show", &id, "--json"]);
    assert_eq!(&json_of(&shown.stdout)["game"], game);
    // The moves before a snapshot are not on the stream: --from-start is text only.
    let from_start = run_cli(
        &server.url(),
        eve_dir.path(),
        &["watch", &id, "--json", "--from-start"],
    );
    assert_eq!(from_start.code, Some(2), "{from_start:?}");
    assert!(
        from_start.stderr.contains("oanquan moves"),
        "{from_start:?}"
    );
    assert!(from_start.stdout.is_empty());
    // In text, the state found comes first, then the moves that led to it.
    let text = run_cli(
        &server.url(),
        eve_dir.path(),
        &["watch", &id, "--from-start"],
    );
    assert_eq!(text.code, Some(0), "{text:?}");
    let text: Vec<&str> = text.stdout.lines().collect();
    assert!(
        text[0].starts_with(&format!("game {id}: finished, 1 move played")),
        "{text:?}"
    );
    assert!(
        text[1].starts_with("move 1: first plays 1 right"),
        "{text:?}"
    );
    assert!(
        text.last()
            .is_some_and(|l| l.starts_with("game over: first wins")),
        "{text:?}"
    );
}

/// Every object key in lowerCamelCase (the canonical mapping's field names), every enum a name.
fn assert_canonical(value: &Value) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                assert!(
                    !key.contains('_') && key.starts_with(|c: char| c.is_ascii_lowercase()),
                    "not a JSON field name of the canonical mapping: {key}"
                );
                assert_canonical(inner);
            }
        }
        Value::Array(items) => items.iter().for_each(assert_canonical),
        _ => {}
    }
}

/// `2026-11-30T23:31:16.123456789Z`: the canonical form of a google.protobuf.Timestamp.
fn is_rfc3339(value: &Value) -> bool {
    let Some(text) = value.as_str() else {
        return false;
    };
    let bytes = text.as_bytes();
    bytes.len() >= 20
        && text.ends_with('Z')
        && bytes[4] == b'-'
        && bytes[7] == b'-'
        && bytes[10] == b'T'
        && bytes[13] == b':'
        && bytes[16] == b':'
        && text[..4].bytes().all(|b| b.is_ascii_digit())
}

/// The seat of a `play` session, from its `playing GAME as SEAT` line.
fn seat_played(out: &[String]) -> String {
    out.iter()
        .find_map(|l| l.strip_prefix("playing ")?.rsplit(" as ").next())
        .expect("playing ... as SEAT")
        .to_owned()
}

/// `turn: SEAT` comes before each `your move`: of the `move N:` and `turn:` lines, the last one
/// before a prompt announces the prompting player's turn (a resumed client's first prompt may
/// follow the snapshot alone).
fn assert_turn_line_before_each_prompt(lines: &Lines, who: &str) {
    let out = lines.stdout_of(who);
    let seat = seat_played(&out);
    let mut last = None;
    for line in &out {
        if line.starts_with("move ") || line.starts_with("turn: ") {
            last = Some(line.as_str());
        } else if line == "your move" {
            if let Some(last) = last {
                assert_eq!(last, format!("turn: {seat}"), "{who}:\n{}", out.join("\n"));
            }
        }
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

/// Moves pasted at once at a terminal, the board animating the computer's reply meanwhile: the
/// lines read then were typed before the next turn, and are refused, not played on a position
/// their player never saw (an outside probe's paste of four moves played two of them).
#[test]
fn on_a_terminal_moves_pasted_ahead_are_not_played_at_later_turns() {
    let server = Server::start();
    let url = server.url();
    let dir = config_dir();
    let (tx, mut lines) = Lines::new();
    let mut alice = CliProcess::spawn_on_terminal(
        "alice",
        &url,
        dir.path(),
        &[
            "create",
            "--name",
            "Alice",
            "--computer",
            "2",
            "--play",
            "--animate-ms",
            "150",
        ],
        &tx,
    );
    lines.follow("alice", |l| l.contains("legal moves:"));
    for mv in ["1 r", "3 r", "4 r", "5 r"] {
        alice.send(mv);
    }
    // The computer's reply, animated (its line drawn after the board's escape codes), then her
    // turn again, with the lines read meanwhile.
    // Whether each extra line is read during the computer's turn ("not your turn") or after
    // it, at her next turn ("typed before your turn"), depends on the machine's load: either
    // way it is refused.
    lines.follow("alice", |l| l.contains("move 2: second plays"));
    lines.follow("alice", |l| l.contains("legal moves:"));
    lines.settle(std::time::Duration::from_secs(1));
    alice.send("quit");
    let status = alice.wait();
    assert!(status.success(), "{status:?}\n{}", lines.tail(40));
    let out = lines.stdout_of("alice");
    let id = out
        .iter()
        .find_map(|l| {
            let (_, rest) = l.split_once("created game ")?;
            rest.split(' ').next()
        })
        .expect("the game's id")
        .to_owned();
    let show = run_cli(&url, dir.path(), &["show", &id, "--json"]);
    assert_eq!(show.code, Some(0), "{id:?}: {}", show.stderr);
    let shown = json_of(&show.stdout);
    assert_eq!(shown["game"]["moveCount"], 2, "{shown}\n{}", lines.tail(40));
    let refused = out
        .iter()
        .filter(|l| l.contains("typed before your turn") || l.contains("it is not your turn"))
        .count();
    assert_eq!(refused, 3, "{}", lines.tail(40));
}

/// A script's move that meets a server that is down is sent again once the server is back,
/// and no further line is read meanwhile: the script's next line is for its next turn, and
/// was read (and refused) a second at a time during the outage.
#[test]
fn a_piped_move_waits_for_a_server_that_is_down() {
    let data = tempfile::tempdir().expect("tempdir");
    let database = data.path().join("oanquan.db");
    let server = Server::start_on(&database, &[]);
    let (addr, url) = (server.addr, server.url());
    let (alice_dir, bob_dir) = (config_dir(), config_dir());
    let id = new_game(&url, alice_dir.path(), bob_dir.path());
    let (tx, mut lines) = Lines::new();
    let mut alice = CliProcess::spawn("alice", &url, alice_dir.path(), &["play", &id], &tx);
    lines.expect("alice", |l| l == "your move");
    drop(server);
    // Her move, and what she means to do at her next turn.
    alice.send("2 l");
    alice.send("quit");
    lines.follow("alice", |l| {
        l.starts_with("error: move 2l: ")
            && l.ends_with("; the move is sent again once the server is back")
    });
    let server = Server::start_on_at(&database, addr);
    lines.follow("alice", |l| l.starts_with("move 1: first plays 2 left"));
    let mut bob = CliProcess::spawn("bob", &server.url(), bob_dir.path(), &["play", &id], &tx);
    lines.expect("bob", |l| l == "your move");
    bob.send("4 r");
    assert_eq!(alice.wait().code(), Some(0), "{}", lines.tail(30));
    let shown = json_of(&run_cli(&url, bob_dir.path(), &["show", &id, "--json"]).stdout);
    assert_eq!(shown["game"]["moveCount"], 2, "{shown}");
    let errors = lines
        .stdout_of("alice")
        .into_iter()
        .filter(|l| l.starts_with("error:"))
        .count();
    assert_eq!(errors, 1, "said once: {}", lines.tail(30));
    drop(bob);
}

/// On a terminal a line is read at any time (for `help`, `board`, `draw`...), so a second
/// move typed right behind the first meets the window between the first's answer and its
/// event: it must be refused by the client as out of turn, not sent for a position already left.
#[test]
fn on_a_terminal_a_move_typed_ahead_is_out_of_turn_not_sent() {
    let server = Server::start();
    let url = server.url();
    let (alice_dir, bob_dir) = (config_dir(), config_dir());
    let id = new_game(&url, alice_dir.path(), bob_dir.path());
    let (tx, mut lines) = Lines::new();
    let mut alice =
        CliProcess::spawn_on_terminal("alice", &url, alice_dir.path(), &["play", &id], &tx);
    lines.follow("alice", |l| l.contains("legal moves:"));
    // Both lines at once: the second is read as soon as the first move's answer is back.
    alice.send("1 r");
    alice.send("2 r");
    lines.follow("alice", |l| {
        l.contains("error: it is not your turn; wait for the opponent's move")
    });
    alice.send("quit");
    let status = alice.wait();
    assert!(status.success(), "{status:?}\n{}", lines.tail(30));
    let errors: Vec<String> = lines
        .stdout_of("alice")
        .into_iter()
        .filter(|l| l.contains("error:"))
        .collect();
    assert_eq!(errors.len(), 1, "only the client's own refusal: {errors:?}");
    // Bob never moved: the game holds alice's one move.
    let shown = json_of(&run_cli(&url, bob_dir.path(), &["show", &id, "--json"]).stdout);
    assert_eq!(shown["game"]["moveCount"], 1, "{shown}");
}

/// A game id with no stored seat is quoted as the server quotes input: 64 characters at
/// most, escaped, then an ellipsis. One that is not an id at all is a usage error (exit 2)
/// for every command, as for `show`, not a missing seat.
#[test]
fn play_quotes_an_unknown_game_id_shortened_and_escaped() {
    let server = Server::start();
    let dir = config_dir();
    for command in ["play", "resign", "abort", "claim", "show"] {
        for id in ["", "../../etc/passwd"] {
            let out = run_cli(&server.url(), dir.path(), &[command, id]);
            assert_eq!(out.code, Some(2), "{command} {id:?}: {out:?}");
            assert!(out.stderr.contains("the game id is"), "{out:?}");
        }
    }
    let out = run_cli(&server.url(), dir.path(), &["play", "abc"]);
    assert_eq!(out.code, Some(3), "no such game: {out:?}");
    let long = "é".repeat(5_000);
    let out = run_cli(&server.url(), dir.path(), &["play", &long]);
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(
        out.stderr.contains(&format!("{}…", "é".repeat(64))),
        "{}",
        out.stderr
    );
    assert!(out.stderr.len() < 500, "{}", out.stderr);
    let out = run_cli(&server.url(), dir.path(), &["play", "a\u{1b}[2Jb"]);
    assert!(
        out.stderr.contains(r"a\u{1b}[2Jb"),
        "escaped: {}",
        out.stderr
    );
}

/// A display name is checked before any request: an empty one says so, a long one says its
/// length without echoing it back.
#[test]
fn display_names_out_of_range_are_refused_before_connecting() {
    let dir = config_dir();
    // Nothing listens there: a refusal that needed the server would say it cannot reach it.
    let url = "127.0.0.1:1";
    let long = "é".repeat(10_000);
    for (name, says) in [
        ("", "--name is empty"),
        (long.as_str(), "--name: 10000 characters"),
    ] {
        let out = run_cli(url, dir.path(), &["create", "--name", name]);
        assert_eq!(out.code, Some(2), "{out:?}");
        assert!(out.stderr.contains(says), "{}", out.stderr);
        assert!(
            out.stderr.len() < 200,
            "the name is not echoed: {}",
            out.stderr
        );
    }
    // Without --name the default is $USER, which the user did not type: the message says so.
    let out = oanquan_e2e::cli_command(url, dir.path(), &["create"])
        .env("USER", "u".repeat(40))
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run oanquan");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("$USER (40 characters) is too long") && stderr.contains("pass --name"),
        "{stderr}"
    );
}

/// clap's own "invalid value" and "unexpected argument" messages quote what was typed as the
/// client's messages do: cut at 64 characters, control characters escaped.
#[test]
fn invalid_values_are_quoted_shortened_and_escaped() {
    let dir = config_dir();
    let long = "9".repeat(10_000);
    let escape = "5+3\u{1b}[2J";
    for (args, says) in [
        (vec!["create", "--time", long.as_str()], "…"),
        (vec!["create", "--time", escape], r"\u{1b}[2J"),
        (vec!["create", "--time", "5+3\u{7}\r"], r"\u{7}\r"),
        (vec!["list", "--limit", long.as_str()], "…"),
        (vec!["presets", long.as_str()], "…"),
    ] {
        let out = run_cli("127.0.0.1:1", dir.path(), &args);
        assert_eq!(out.code, Some(2), "{args:?}: {out:?}");
        assert!(out.stderr.contains(says), "{args:?}: {}", out.stderr);
        assert!(
            !out.stderr.contains(|c: char| c.is_control() && c != '\n'),
            "{args:?}: {}",
            out.stderr
        );
        assert!(out.stderr.len() < 1_000, "{args:?}: {}", out.stderr);
    }
    // A short, plain value is clap's message as it was.
    let out = run_cli("127.0.0.1:1", dir.path(), &["create", "--time", "soon"]);
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(out.stderr.contains("'soon'"), "{}", out.stderr);
}

#[test]
fn exit_codes_and_json_of_the_one_shot_commands() {
    let server = Server::start();
    let url = server.url();
    let (alice_dir, bob_dir, carol_dir) = (config_dir(), config_dir(), config_dir());

    let presets = run_cli(&url, alice_dir.path(), &["presets", "--json"]);
    assert_eq!(presets.code, Some(0), "{presets:?}");
    let presets = json_of(&presets.stdout);
    assert_canonical(&presets);
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
    assert_canonical(&games);
    let listed = games["games"]
        .as_array()
        .expect("games")
        .iter()
        .find(|g| g["id"] == id.as_str())
        .expect("the game is listed")
        .clone();
    let show = run_cli(&url, carol_dir.path(), &["show", &id, "--json"]);
    let shown = json_of(&show.stdout);
    assert_canonical(&shown);
    assert_eq!(shown["game"], listed, "one message, one JSON");
    assert_eq!(
        shown["game"]["position"]["squares"]
            .as_array()
            .map(Vec::len),
        Some(12)
    );
    assert_eq!(shown["game"]["position"]["toMove"], "PLAYER_FIRST");
    assert!(is_rfc3339(&shown["game"]["createTime"]), "{shown}");
    // Defaults are left out, as in every protobuf JSON: no move yet, no moveCount.
    assert!(shown["game"].get("moveCount").is_none(), "{shown}");
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
        // People read the game's words, not the API's.
        for api in [
            "ListGames",
            "GetGame",
            "RulesService",
            "ERROR_REASON",
            "rules.preset",
        ] {
            assert!(!out.stderr.contains(api), "{what}: {}", out.stderr);
        }
    }
    // --verbose keeps the API's words available.
    let verbose = run_cli(
        &url,
        carol_dir.path(),
        &["show", "no-such-game", "--verbose"],
    );
    assert_eq!(verbose.code, Some(3));
    assert!(
        verbose.stderr.contains("ERROR_REASON_GAME_NOT_FOUND"),
        "{}",
        verbose.stderr
    );
    // A started game has no free seat: never suggest `join` for it.
    let no_token = run_cli(&url, carol_dir.path(), &["play", &id]);
    assert!(
        no_token
            .stderr
            .contains(&format!("no seat of game {id} is saved")),
        "{}",
        no_token.stderr
    );
    assert!(
        !no_token.stderr.contains("oanquan join"),
        "{}",
        no_token.stderr
    );
    let dead = run_cli("http://127.0.0.1:1", carol_dir.path(), &["list"]);
    assert_eq!(dead.code, Some(69), "{dead:?}");
    let help = run_cli(&url, carol_dir.path(), &["--help"]);
    assert!(help.stdout.contains("EXIT CODES:") && help.stdout.contains("EXAMPLES:"));
}

/// The game id from `created game ID as the first player`.
fn created_id(line: &str) -> String {
    line.strip_prefix("created game ")
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("not a `created game` line: {line}"))
        .to_owned()
}

/// The README's two-terminal demo with one shared config directory: the joiner's token does not
/// replace the creator's, and the creator comes back to the first seat.
#[test]
fn readme_demo_on_one_machine_keeps_both_seats() {
    let server = Server::start();
    let url = server.url();
    let shared = config_dir();
    let (tx, mut lines) = Lines::new();
    let mut lan = CliProcess::spawn(
        "lan",
        &url,
        shared.path(),
        &[
            "create", "--preset", "standard", "--seat", "first", "--name", "Lan", "--play",
        ],
        &tx,
    );
    let id = created_id(&lines.expect("lan", |l| l.starts_with("created game ")));
    lines.expect("lan", |l| l == "waiting for an opponent to join");
    let minh = CliProcess::spawn(
        "minh",
        &url,
        shared.path(),
        &["join", &id, "--name", "Minh", "--play"],
        &tx,
    );
    lines.expect("lan", |l| l == "your move");
    lan.send("quit");
    assert_eq!(lan.wait().code(), Some(0), "{}", lines.tail(20));
    // Minh's seat is saved before `join` says so; Lan may have been prompted before that.
    let joined = |l: &str| l.starts_with(&format!("joined game {id} as the second player"));
    if !lines.stdout_of("minh").iter().any(|l| joined(l)) {
        lines.expect("minh", joined);
    }

    let raw = std::fs::read_to_string(shared.path().join("tokens.json")).expect("token file");
    let file = json_of(&raw);
    let seats: Vec<(&str, &str)> = file["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter(|e| e["game_id"] == id.as_str())
        .map(|e| {
            (
                e["seat"].as_str().unwrap_or(""),
                e["token"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(seats.len(), 2, "{raw}");
    assert_ne!(seats[0].0, seats[1].0, "{raw}");
    assert_ne!(seats[0].1, seats[1].1, "{raw}");

    // Holding both seats, a script must say which.
    let ambiguous = run_cli(&url, shared.path(), &["play", &id]);
    assert_eq!(ambiguous.code, Some(2), "{ambiguous:?}");
    assert!(ambiguous.stderr.contains("--seat first"), "{ambiguous:?}");

    let lan = CliProcess::spawn(
        "lan2",
        &url,
        shared.path(),
        &["play", &id, "--seat", "first"],
        &tx,
    );
    let mut players = HashMap::from([("lan2".to_owned(), lan), ("minh".to_owned(), minh)]);
    drive(
        &mut lines,
        &mut players,
        &["lan2", "minh"],
        HashMap::new(),
        |_| {},
    );
    for player in players.values_mut() {
        assert_eq!(player.wait().code(), Some(0), "{}", lines.tail(30));
    }
    assert_eq!(lines.stdout_of("lan2")[0], format!("playing {id} as first"));
    assert!(
        lines
            .stdout_of("minh")
            .contains(&format!("playing {id} as second")),
        "{}",
        lines.tail(40)
    );
    assert_eq!(
        move_lines(&lines, "lan2").last(),
        move_lines(&lines, "minh").last()
    );
    for who in ["lan2", "minh"] {
        assert_turn_line_before_each_prompt(&lines, who);
    }
}

/// `127.0.0.1:PORT`, `http://127.0.0.1:PORT` and `HTTP://127.0.0.1:PORT/` are one server in the
/// token file; when no seat is found, the message says what is likely wrong.
#[test]
fn one_server_however_it_is_written() {
    let server = Server::start();
    let (alice_dir, bob_dir, carol_dir) = (config_dir(), config_dir(), config_dir());
    let id = new_game(&server.url(), alice_dir.path(), bob_dir.path());
    let bare = server.addr.to_string();
    for spelling in [bare.clone(), format!("HTTP://{bare}/")] {
        // alice's turn, and her input is empty: the seat was found, then input ended (6).
        let out = run_cli(&spelling, alice_dir.path(), &["play", &id]);
        assert_eq!(out.code, Some(6), "{spelling}: {out:?}");
        assert!(
            out.stdout.starts_with(&format!("playing {id} as first")),
            "{spelling}: {out:?}"
        );
    }
    // Another name for the same server is another key: say which one holds the seat.
    let localhost = format!("http://localhost:{}", server.addr.port());
    let other = run_cli(&localhost, alice_dir.path(), &["play", &id]);
    assert_eq!(other.code, Some(5), "{other:?}");
    assert!(
        other
            .stderr
            .contains(&format!("pass --server {}", server.url())),
        "{other:?}"
    );
    // A waiting game has a free seat: `join` is the advice there, and only there.
    let created = run_cli(&server.url(), alice_dir.path(), &["create", "--name", "a"]);
    let waiting = created_id(created.stdout.lines().next().unwrap_or_default());
    let out = run_cli(&server.url(), carol_dir.path(), &["play", &waiting]);
    assert_eq!(out.code, Some(5), "{out:?}");
    assert!(
        out.stderr.contains(&format!("oanquan join {waiting}")),
        "{out:?}"
    );
    let out = run_cli(&server.url(), carol_dir.path(), &["play", "no-such-game"]);
    assert_eq!(out.code, Some(3), "{out:?}");
}

#[test]
fn resign_and_abort_from_the_command_line_and_the_prompt() {
    let server = Server::start();
    let url = server.url();
    let (alice_dir, bob_dir) = (config_dir(), config_dir());
    let (tx, mut lines) = Lines::new();

    // `oanquan abort` before the first move.
    let id = new_game(&url, alice_dir.path(), bob_dir.path());
    let aborted = run_cli(&url, bob_dir.path(), &["abort", &id]);
    assert_eq!(aborted.code, Some(0), "{aborted:?}");
    assert!(aborted.stdout.contains("game over: aborted"), "{aborted:?}");

    // `abort` at the prompt before the first move.
    let id = new_game(&url, alice_dir.path(), bob_dir.path());
    let mut alice = CliProcess::spawn("a1", &url, alice_dir.path(), &["play", &id], &tx);
    lines.expect("a1", |l| l == "your move");
    alice.send("abort");
    lines.expect("a1", |l| l.starts_with("game over: aborted"));
    assert_eq!(alice.wait().code(), Some(0));

    // After a move, abort is refused in plain words; `oanquan resign` ends the game.
    let id = new_game(&url, alice_dir.path(), bob_dir.path());
    let mut alice = CliProcess::spawn("a2", &url, alice_dir.path(), &["play", &id], &tx);
    lines.expect("a2", |l| l == "your move");
    alice.send("2 r");
    lines.expect("a2", |l| l.starts_with("move 1: "));
    let refused = run_cli(&url, bob_dir.path(), &["abort", &id]);
    assert_eq!(refused.code, Some(4), "{refused:?}");
    assert!(refused.stderr.contains("resign instead"), "{refused:?}");
    assert!(!refused.stderr.contains("ERROR_REASON"), "{refused:?}");
    let resigned = run_cli(&url, bob_dir.path(), &["resign", &id, "--json"]);
    assert_eq!(resigned.code, Some(0), "{resigned:?}");
    let resigned = json_of(&resigned.stdout);
    assert_eq!(
        resigned["game"]["result"]["endReason"],
        "END_REASON_RESIGNATION"
    );
    assert_eq!(resigned["game"]["result"]["winner"], "PLAYER_FIRST");
    lines.expect("a2", |l| l.starts_with("game over: first wins"));
    assert_eq!(alice.wait().code(), Some(0));

    // `resign` at the prompt asks first; anything but y keeps playing.
    let id = new_game(&url, alice_dir.path(), bob_dir.path());
    let mut alice = CliProcess::spawn("a3", &url, alice_dir.path(), &["play", &id], &tx);
    lines.expect("a3", |l| l == "your move");
    alice.send("resign");
    lines.expect("a3", |l| l == "resign? (y/N)");
    alice.send("n");
    lines.expect("a3", |l| l == "not resigned; the game goes on");
    lines.expect("a3", |l| l == "your move");
    alice.send("resign");
    lines.expect("a3", |l| l == "resign? (y/N)");
    alice.send("y");
    let over = lines.expect("a3", |l| l.starts_with("game over: "));
    assert_eq!(over, "game over: second wins 0:0 (resignation by first)");
    assert_eq!(alice.wait().code(), Some(0));
}

/// `OANQUAN_SERVER` and `OANQUAN_CONFIG_DIR` set (as here) must not make the usage line show
/// `--server` and `--config-dir` as required.
#[test]
fn usage_lines_show_the_global_options_as_optional() {
    let config = config_dir();
    let out = run_cli("127.0.0.1:9", config.path(), &["play"]);
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(
        out.stderr.contains("Usage: oanquan play [OPTIONS] <GAME>"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("--server <URL>"), "{}", out.stderr);
    assert!(!out.stderr.contains("--config-dir <DIR>"), "{}", out.stderr);
}

/// A move from an empty square is refused with the reason, in the squares the player typed
/// (the server's own refusal names ring squares), and the prompt comes back.
#[test]
fn a_move_from_an_empty_square_says_why() {
    let server = Server::start();
    let url = server.url();
    let (alice_dir, bob_dir) = (config_dir(), config_dir());
    let (tx, mut lines) = Lines::new();
    let id = new_game(&url, alice_dir.path(), bob_dir.path());
    let mut alice = CliProcess::spawn("alice", &url, alice_dir.path(), &["play", &id], &tx);
    let mut bob = CliProcess::spawn("bob", &url, bob_dir.path(), &["play", &id], &tx);
    lines.follow("alice", |l| l == "your move");
    // (1, +1) empties square 1 (RULES.md example 2).
    alice.send("1 r");
    lines.follow("bob", |l| l == "your move");
    bob.send("2 l");
    lines.follow("alice", |l| l.starts_with("move 2: "));
    lines.follow("alice", |l| l == "your move");
    alice.send("1 l");
    let (_, refused) = lines.follow("alice", |l| l.starts_with("error: "));
    assert!(
        refused.starts_with("error: square 1 is empty: choose a square of yours that holds stones"),
        "{refused}\n{}",
        lines.tail(30)
    );
    lines.follow("alice", |l| l == "your move");
    alice.send("resign");
    alice.send("y");
    lines.follow("alice", |l| l.starts_with("game over: "));
    assert_eq!(alice.wait().code(), Some(0));
    drop(bob);
}

/// In piped mode a seat's own move is read only after its turn was announced: between its
/// previous `move N:` line and each of its own, `turn: SEAT` (unless the board found on
/// connecting came instead), `legal moves: ...` and `your move` come in that order, as
/// `play --help` documents.
fn assert_each_own_move_follows_its_prompt(lines: &Lines, who: &str) {
    let out = lines.stdout_of(who);
    let seat = seat_played(&out);
    let turn = format!("turn: {seat}");
    let own = format!(": {seat} plays ");
    let mut since_last_move: Vec<&str> = Vec::new();
    for line in &out {
        if line.starts_with("move ") {
            if line.contains(&own) {
                // The first prompt may follow the snapshot found on connecting alone.
                let snapshot = since_last_move.iter().any(|l| l.starts_with("game "));
                let wanted: &[&str] = if snapshot {
                    &["legal moves:", "your move"]
                } else {
                    &[turn.as_str(), "legal moves:", "your move"]
                };
                let mut at = 0;
                for seen in &since_last_move {
                    if at < wanted.len() && seen.starts_with(wanted[at]) {
                        at += 1;
                    }
                }
                assert_eq!(
                    at,
                    wanted.len(),
                    "{who}: {line:?} came before its prompt; lines since the last move: \
                     {since_last_move:?}\n{}",
                    out.join("\n")
                );
            }
            since_last_move.clear();
        } else {
            since_last_move.push(line);
        }
    }
}

/// A script pipes all its moves at once: each line is read at the seat's turn, also the one
/// that arrives while the seat's last move is accepted but its event not yet back (that line
/// was once read at once, sent for the position just left, refused, and lost). Both players
/// pipe a whole line of play before the first move; every move must be played, in order, with
/// no error.
#[test]
fn moves_piped_ahead_are_played_each_at_its_turn() {
    use oanquan_rules::{Direction, Game, Player, Preset};
    // A line of play from the standard start (each side's first legal move), in each seat's
    // own terms: its square 1-5 and `l`/`r`.
    let mut game = Game::new(Preset::Standard.rules()).expect("standard rules");
    let mut scripts: [Vec<String>; 2] = [Vec::new(), Vec::new()];
    let plies = 12;
    for _ in 0..plies {
        let position = game.position();
        assert!(!position.is_over(), "the line ends before {plies} plies");
        let (seat, offset) = match position.to_move() {
            Player::First => (0, 0),
            Player::Second => (1, 6),
        };
        let mv = *position.legal_moves().iter().next().expect("a legal move");
        let side = match mv.direction {
            Direction::Right => "r",
            Direction::Left => "l",
        };
        scripts[seat].push(format!("{} {side}", mv.square - offset));
        game.play(mv).expect("a legal move");
    }

    let server = Server::start();
    let url = server.url();
    let (alice_dir, bob_dir) = (config_dir(), config_dir());
    let id = new_game(&url, alice_dir.path(), bob_dir.path());
    let (tx, mut lines) = Lines::new();
    let mut alice = CliProcess::spawn("alice", &url, alice_dir.path(), &["play", &id], &tx);
    let mut bob = CliProcess::spawn("bob", &url, bob_dir.path(), &["play", &id], &tx);
    for (process, script) in [(&mut alice, &scripts[0]), (&mut bob, &scripts[1])] {
        for line in script {
            process.send(line);
        }
    }
    for who in ["alice", "bob"] {
        lines.follow(who, |l| l.starts_with(&format!("move {plies}: ")));
    }
    for who in ["alice", "bob"] {
        let out = lines.stdout_of(who);
        assert!(
            !out.iter().any(|l| l.starts_with("error: ")),
            "{who}:\n{}",
            out.join("\n")
        );
        // A seat that attached after the first moves starts its list later (its header says
        // how many were played); move_lines checks the numbers run on from there to the last.
        let moves = move_lines(&lines, who);
        assert!(
            moves
                .last()
                .is_some_and(|l| l.starts_with(&format!("move {plies}: "))),
            "{who}: {}",
            lines.tail(30)
        );
        assert_each_own_move_follows_its_prompt(&lines, who);
    }
    // Alice's input is used up: at her next turn the session ends as unfinished, and says how
    // to resume.
    alice.close_stdin();
    let status = alice.wait();
    assert_ne!(status.code(), Some(0), "{}", lines.tail(20));
    while !lines
        .transcript
        .iter()
        .any(|l| l.who == "alice" && l.text.contains("resume with `oanquan play"))
    {
        lines.next_line();
    }
}

/// A game with a refill that ends with stones left on the board: a move's `captured` counts
/// only its captures, its score the opponent's refill and the end-of-game collection too, and
/// the `refill:` and `end of game:` lines after it say what each player lost or collected, so
/// that the numbers add up move after move (for both seats and for `oanquan moves`).
#[test]
fn refills_and_the_end_of_game_collection_are_said_and_the_scores_add_up() {
    use oanquan_rules::{Direction, Game, Player, Preset, Step};
    // A line of play from the standard start, found by trying seeds: short, with a refill, and
    // ending with stones to collect.
    let scripts = (0..500u64)
        .find_map(|seed| {
            let mut rng = Lcg(seed);
            let mut game = Game::new(Preset::Standard.rules()).expect("standard rules");
            let mut scripts: [Vec<String>; 2] = [Vec::new(), Vec::new()];
            let mut last = Vec::new();
            let mut refilled = false;
            while !game.is_over() && scripts[0].len() + scripts[1].len() < 80 {
                let position = game.position();
                let (seat, offset) = match position.to_move() {
                    Player::First => (0, 0),
                    Player::Second => (1, 6),
                };
                let legal: Vec<_> = position.legal_moves().iter().copied().collect();
                let mv = *rng.pick(&legal)?;
                let side = match mv.direction {
                    Direction::Right => "r",
                    Direction::Left => "l",
                };
                scripts[seat].push(format!("{} {side}", mv.square - offset));
                last = game.play(mv).ok()?;
                refilled |= last.iter().any(|step| matches!(step, Step::Refill { .. }));
            }
            let collected = last.iter().find_map(|step| match step {
                Step::GameOver { collected, .. } => Some(collected.first + collected.second),
                _ => None,
            })?;
            (game.is_over() && collected > 0 && refilled).then_some(scripts)
        })
        .expect("a seed whose game has a refill and ends with stones to collect");

    let server = Server::start();
    let url = server.url();
    let (alice_dir, bob_dir) = (config_dir(), config_dir());
    let id = new_game(&url, alice_dir.path(), bob_dir.path());
    let (tx, mut lines) = Lines::new();
    let mut alice = CliProcess::spawn("alice", &url, alice_dir.path(), &["play", &id], &tx);
    let mut bob = CliProcess::spawn("bob", &url, bob_dir.path(), &["play", &id], &tx);
    for (process, script) in [(&mut alice, &scripts[0]), (&mut bob, &scripts[1])] {
        for line in script {
            process.send(line);
        }
    }
    for who in ["alice", "bob"] {
        lines.follow(who, |l| l.starts_with("game over: "));
    }
    for who in ["alice", "bob"] {
        let out = lines.stdout_of(who);
        assert!(
            out.iter().any(|l| l.starts_with("end of game: ")),
            "{who}:\n{}",
            out.join("\n")
        );
        assert!(
            assert_the_scores_add_up(&lines.stdout_of(who), who) > 0,
            "{who}:\n{}",
            out.join("\n")
        );
    }
    let listed = run_cli(&url, alice_dir.path(), &["moves", &id]);
    let owned: Vec<String> = listed.stdout.lines().map(str::to_owned).collect();
    assert!(assert_the_scores_add_up(&owned, "moves") > 0, "{owned:#?}");
    let listed: Vec<&str> = listed.stdout.lines().collect();
    let end = listed
        .iter()
        .position(|l| l.starts_with("end of game: "))
        .unwrap_or_else(|| panic!("{listed:#?}"));
    assert!(listed[end - 1].starts_with("move "), "{listed:#?}");
}

/// A game created by `a`, and `oanquan watch` of it with its stdout on a pipe: the watcher,
/// the pipe's reading end after the first line (checked), and the game's id.
fn watched_through_a_pipe(
    server: &Server,
    creator: &std::path::Path,
    spectator: &std::path::Path,
) -> (
    std::process::Child,
    std::io::BufReader<std::process::ChildStdout>,
    String,
) {
    use std::io::BufRead as _;
    use std::process::Stdio;

    let created = run_cli(&server.url(), creator, &["create", "--name", "a"]);
    let id = created_id(created.stdout.lines().next().unwrap_or_default());
    let mut watcher = oanquan_e2e::cli_command(&server.url(), spectator, &["watch", &id])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn oanquan watch");
    let mut stdout = std::io::BufReader::new(watcher.stdout.take().expect("stdout"));
    let mut first = String::new();
    stdout.read_line(&mut first).expect("first line");
    assert!(first.starts_with(&format!("game {id}: waiting")), "{first}");
    (watcher, stdout, id)
}

/// `oanquan watch G | head -1`: the reader goes away, the client ends quietly with 0.
#[test]
fn a_closed_pipe_ends_quietly() {
    let server = Server::start();
    let (alice_dir, bob_dir, eve_dir) = (config_dir(), config_dir(), config_dir());
    let (watcher, stdout, id) = watched_through_a_pipe(&server, alice_dir.path(), eve_dir.path());
    drop(stdout);
    // The next event has nowhere to go.
    let joined = run_cli(&server.url(), bob_dir.path(), &["join", &id, "--name", "b"]);
    assert_eq!(joined.code, Some(0), "{joined:?}");
    let out = watcher.wait_with_output().expect("watch ends");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}

/// The same on a game where nothing happens: with no event to write, the client still sees
/// its reader gone (an outside probe's `watch G | head -1` on a quiet game ran on for good).
#[test]
fn a_closed_pipe_ends_quietly_on_a_quiet_game_too() {
    use std::time::{Duration, Instant};

    let server = Server::start();
    let (alice_dir, eve_dir) = (config_dir(), config_dir());
    let (mut watcher, stdout, _) =
        watched_through_a_pipe(&server, alice_dir.path(), eve_dir.path());
    // Everything the client had to say is in the pipe by now; then the reader goes.
    std::thread::sleep(Duration::from_millis(1500));
    drop(stdout);
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = watcher.try_wait().expect("wait for watch") {
            break status;
        }
        assert!(Instant::now() < deadline, "watch still runs with no reader");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(0));
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut watcher.stderr.take().expect("stderr"), &mut stderr)
        .expect("stderr");
    assert_eq!(stderr, "");
}

/// Columns follow their widest cell, "Computer (random)" included.
#[test]
fn list_columns_line_up() {
    let server = Server::start();
    let dir = config_dir();
    for args in [
        &["create", "--name", "Lân", "--computer", "random"][..],
        &["create", "--name", "x"][..],
        &["create", "--name", "Lan 🐉"][..],
    ] {
        let out = run_cli(&server.url(), dir.path(), args);
        assert_eq!(out.code, Some(0), "{out:?}");
    }
    // The newest game is listed first: call off the dragon's.
    let listed = json_of(&run_cli(&server.url(), dir.path(), &["list", "--json"]).stdout);
    let newest = listed["games"][0]["id"].as_str().expect("an id").to_owned();
    let aborted = run_cli(&server.url(), dir.path(), &["abort", &newest]);
    assert_eq!(aborted.code, Some(0), "{aborted:?}");
    let list = run_cli(&server.url(), dir.path(), &["list"]);
    assert_eq!(list.code, Some(0), "{list:?}");
    assert!(list.stdout.contains("Computer (random)"), "{}", list.stdout);
    // Terminal columns: the dragon takes two, every other character here one.
    let columns =
        |text: &str| -> usize { text.chars().map(|c| if c == '🐉' { 2 } else { 1 }).sum() };
    let widths: Vec<usize> = list.stdout.lines().map(columns).collect();
    assert_eq!(widths.len(), 4, "{}", list.stdout);
    // The last column is right-aligned: aligned columns make every line as long.
    assert!(widths.iter().all(|w| *w == widths[0]), "{}", list.stdout);
    let header = list.stdout.lines().next().unwrap_or_default();
    let result = header.find("RESULT").expect("RESULT column");
    let dragon = list.stdout.lines().nth(1).unwrap_or_default();
    let cell: String = dragon.chars().skip(result - 1).collect();
    assert!(cell.starts_with("aborted"), "{}", list.stdout);
    let second = header.find("SECOND").expect("SECOND column");
    for line in list.stdout.lines().skip(1) {
        let cut = line.char_indices().scan(0, |at, (i, c)| {
            let here = *at;
            *at += columns(&c.to_string());
            Some((here, i))
        });
        let start = cut
            .filter(|(at, _)| *at == second)
            .map(|(_, i)| i)
            .next()
            .unwrap_or(0);
        let at = &line[start..];
        assert!(
            !at.starts_with(' ') || at.trim_start().starts_with('-'),
            "{}",
            list.stdout
        );
    }
}

/// Players send their seat's token on their event stream, so a game whose spectator places are
/// all taken (here: none at all) still streams to both players, while a spectator is refused.
#[test]
fn players_stream_their_game_when_no_spectator_may() {
    let server = Server::start_with(&["--max-spectators-per-game", "0"]);
    let (alice_dir, bob_dir, eve_dir) = (config_dir(), config_dir(), config_dir());
    let id = new_game(&server.url(), alice_dir.path(), bob_dir.path());

    let watched = run_cli(&server.url(), eve_dir.path(), &["watch", &id]);
    assert_ne!(watched.code, Some(0), "{watched:?}");
    assert!(
        watched.stderr.contains("takes no spectators") && !watched.stderr.contains("retry"),
        "{watched:?}"
    );

    let (tx, mut lines) = Lines::new();
    let mut players = HashMap::new();
    for (who, dir) in [("alice", alice_dir.path()), ("bob", bob_dir.path())] {
        players.insert(
            who.to_owned(),
            CliProcess::spawn(who, &server.url(), dir, &["play", &id], &tx),
        );
    }
    drive(
        &mut lines,
        &mut players,
        &["alice", "bob"],
        HashMap::new(),
        |_| {},
    );
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
}

/// Many `create`s at once in one config directory (one user, several terminals): each keeps its
/// seat in the token file, none is lost to another client's rewrite (the file is locked from
/// reading it to renaming the new one in).
#[test]
fn concurrent_creates_in_one_config_dir_keep_every_seat() {
    const CLIENTS: usize = 12;
    let server = Server::start_with(&["--max-open-games-per-client", "0"]);
    let url = server.url();
    let shared = config_dir();
    let children: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let name = format!("P{i}");
            oanquan_e2e::cli_command(&url, shared.path(), &["create", "--name", &name])
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("run oanquan")
        })
        .collect();
    let mut ids = Vec::new();
    for child in children {
        let out = child.wait_with_output().expect("wait");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        ids.push(created_id(stdout.lines().next().unwrap_or("")));
    }
    let raw = std::fs::read_to_string(shared.path().join("tokens.json")).expect("token file");
    let file = json_of(&raw);
    let stored: Vec<&str> = file["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter_map(|e| e["game_id"].as_str())
        .collect();
    let missing: Vec<&String> = ids
        .iter()
        .filter(|id| !stored.contains(&id.as_str()))
        .collect();
    assert!(missing.is_empty(), "seats lost: {missing:?}\n{raw}");
    assert_eq!(stored.len(), CLIENTS, "{raw}");
    // No temporary file is left behind: only the file and its lock.
    let mut names: Vec<String> = std::fs::read_dir(shared.path())
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["tokens.json", "tokens.json.lock"], "{names:?}");
}

/// `oanquan play` with all of its input piped at once: what the pipe holds, as a script sends it.
fn play_piped(url: &str, config: &Path, id: &str, input: &[u8]) -> (Option<i32>, String, String) {
    use std::io::Write as _;
    use std::process::Stdio;
    let mut child = oanquan_e2e::cli_command(url, config, &["play", id])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn oanquan play");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(input).expect("write the input");
    drop(stdin);
    let out = child.wait_with_output().expect("wait for oanquan play");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Input that ends right after `resign` / `y`: the resignation is the game's end, whichever
/// comes first, its GameOver event or the end of input (it raced: 2 runs in 5 said "input
/// ended before the game did" with exit 6).
#[test]
fn resigning_as_the_last_line_of_input_ends_the_game_cleanly() {
    let server = Server::start();
    let url = server.url();
    for run in 0..5 {
        let (alice, bob) = (config_dir(), config_dir());
        let id = new_game(&url, alice.path(), bob.path());
        let (code, stdout, stderr) = play_piped(&url, alice.path(), &id, b"resign\ny\n");
        assert_eq!(code, Some(0), "run {run}: {stdout}\n{stderr}");
        assert!(stdout.contains("game over:"), "run {run}: {stdout}");
        assert!(!stderr.contains("input ended"), "run {run}: {stderr}");
    }
}

/// A line that is not UTF-8 is a line the prompt refuses, not the end of input; a huge line
/// (200 KB here, 200 times the kept length) is refused without being echoed whole.
#[test]
fn bytes_that_are_not_utf8_and_huge_lines_are_refused_lines() {
    let server = Server::start();
    let url = server.url();
    let (alice, bob) = (config_dir(), config_dir());
    let id = new_game(&url, alice.path(), bob.path());
    let mut input = b"\xff\xfe\n".to_vec();
    input.extend(std::iter::repeat_n(b'1', 200_000));
    input.extend_from_slice(b"r\nresign\ny\n");
    let (code, stdout, stderr) = play_piped(&url, alice.path(), &id, &input);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("is not a move"), "{stdout}");
    assert!(
        stdout.contains("game over:"),
        "the lines after were read: {stdout}"
    );
    assert!(stdout.len() < 20_000, "{} bytes of output", stdout.len());
}

/// Ctrl-D at the prompt ends `play` with its message on a line of its own, and no prompt drawn
/// again after it (the shell's prompt would land on that line).
#[cfg(target_os = "linux")]
#[test]
fn ctrl_d_at_the_prompt_leaves_no_prompt_behind() {
    let server = Server::start();
    let (alice_dir, bob_dir) = (config_dir(), config_dir());
    let created = run_cli(
        &server.url(),
        alice_dir.path(),
        &["create", "--name", "a", "--seat", "first"],
    );
    let id = created_id(created.stdout.lines().next().unwrap_or_default());
    let joined = run_cli(&server.url(), bob_dir.path(), &["join", &id, "--name", "b"]);
    assert_eq!(joined.code, Some(0), "{joined:?}");
    let mut alice = Terminal::play(&server.url(), alice_dir.path(), &id);
    alice.wait_for("your move> ");
    {
        use std::io::Write as _;
        alice.master.write_all(&[4]).expect("Ctrl-D");
    }
    alice.wait_for("input ended before the game did");
    let status = alice.child.wait().expect("play ends");
    assert_eq!(status.code(), Some(6), "{status:?}");
    // What it wrote after the message, until it exited.
    std::thread::sleep(std::time::Duration::from_millis(200));
    while let Ok(bytes) = alice.output.try_recv() {
        alice.seen.push_str(&String::from_utf8_lossy(&bytes));
    }
    assert!(
        !alice.seen.contains("your move>"),
        "a prompt after the message: {:?}",
        alice.seen
    );
}

/// `login` at a terminal does not show the key typed: on screen it would stay in the
/// scrollback (an outside probe found it there).
#[cfg(target_os = "linux")]
#[test]
fn login_at_a_terminal_does_not_show_the_key() {
    let server = Server::start();
    let (home, laptop) = (config_dir(), config_dir());
    let registered = run_cli(&server.url(), home.path(), &["register", "Lan"]);
    assert_eq!(registered.code, Some(0), "{registered:?}");
    let made = run_cli(&server.url(), home.path(), &["keys", "new"]);
    let key = made
        .stdout
        .lines()
        .find(|l| l.starts_with("oqk_"))
        .unwrap_or_else(|| panic!("no key in {made:?}"))
        .to_owned();
    let mut terminal = Terminal::run(&server.url(), laptop.path(), &["login"]);
    terminal.wait_for("API key: ");
    terminal.type_line(&key);
    let shown = terminal.wait_for("logged in as Lan");
    let secret = &key[key.len() - 16..];
    assert!(!shown.contains(secret), "the key is on screen: {shown:?}");
    let me = run_cli(&server.url(), laptop.path(), &["me"]);
    assert!(me.stdout.contains("Lan"), "{me:?}");
}

/// A token file that does not read back stops `create`, `join` and `seek` before they ask the
/// server for a seat: a seat whose token cannot be kept could be neither played nor aborted.
#[test]
fn a_damaged_token_file_stops_a_seat_before_the_server_makes_it() {
    let server = Server::start();
    let url = server.url();
    let (lan, other) = (config_dir(), config_dir());
    let damaged = b"{\"version\": 2, \"entries\": [";
    std::fs::write(lan.path().join("tokens.json"), damaged).unwrap();
    let waiting =
        json_of(&run_cli(&url, other.path(), &["create", "--name", "Minh", "--json"]).stdout);
    let waiting_id = waiting["game"]["id"].as_str().expect("an id").to_owned();
    for args in [
        vec!["create", "--name", "Lan"],
        vec!["join", waiting_id.as_str(), "--name", "Lan"],
        vec!["seek", "3+2", "--name", "Lan"],
    ] {
        let refused = run_cli(&url, lan.path(), &args);
        assert_eq!(refused.code, Some(1), "{args:?}: {refused:?}");
        assert!(
            refused.stderr.contains("tokens.json is not valid")
                && refused.stderr.contains("nothing was asked of the server")
                && refused.stderr.contains("Move the file aside"),
            "{args:?}: {}",
            refused.stderr
        );
    }
    // Only the other client's game is there, still waiting; the file is as it was.
    let games = json_of(&run_cli(&url, other.path(), &["list", "--json"]).stdout);
    let games = games["games"].as_array().expect("games");
    assert_eq!(games.len(), 1, "{games:?}");
    assert_eq!(
        games[0]["status"], "GAME_STATUS_WAITING_FOR_PLAYERS",
        "{games:?}"
    );
    assert_eq!(
        std::fs::read(lan.path().join("tokens.json")).unwrap(),
        damaged
    );
}

/// `oanquan play` running on a terminal (a pseudo-terminal's slave as its stdin, stdout and
/// stderr): what it writes is read from the master, and lines written there are typed.
#[cfg(target_os = "linux")]
struct Terminal {
    master: std::fs::File,
    output: std::sync::mpsc::Receiver<Vec<u8>>,
    seen: String,
    child: std::process::Child,
}

#[cfg(target_os = "linux")]
impl Terminal {
    fn play(server: &str, config: &std::path::Path, id: &str) -> Terminal {
        Terminal::run(server, config, &["play", id])
    }

    fn run(server: &str, config: &std::path::Path, args: &[&str]) -> Terminal {
        use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
        use std::io::Read as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).expect("a pseudo-terminal");
        grantpt(&master).expect("grantpt");
        unlockpt(&master).expect("unlockpt");
        let name = ptsname(&master, Vec::new()).expect("ptsname");
        // Never this test process's controlling terminal.
        let slave = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(rustix::fs::OFlags::NOCTTY.bits() as i32)
            .open(std::path::Path::new(name.to_str().expect("a path")))
            .expect("the terminal's slave");
        let child = oanquan_e2e::cli_command(server, config, args)
            .stdin(slave.try_clone().expect("dup"))
            .stdout(slave.try_clone().expect("dup"))
            .stderr(slave)
            .spawn()
            .expect("spawn oanquan");
        let master = std::fs::File::from(master);
        // One reader for the whole session: a read blocks, so it runs on a thread of its own.
        let (tx, output) = std::sync::mpsc::channel();
        let mut reader = master.try_clone().expect("dup");
        std::thread::spawn(move || {
            let mut buffer = [0; 4096];
            while let Ok(n) = reader.read(&mut buffer) {
                if n == 0 || tx.send(buffer[..n].to_vec()).is_err() {
                    break;
                }
            }
        });
        Terminal {
            master,
            output,
            seen: String::new(),
            child,
        }
    }

    /// Waits until `text` has appeared since the last wait (panics after 20 s, with what came);
    /// returns what came up to it, `text` included.
    fn wait_for(&mut self, text: &str) -> String {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !self.seen.contains(text) {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.output.recv_timeout(left) {
                Ok(bytes) => self.seen.push_str(&String::from_utf8_lossy(&bytes)),
                Err(_) => panic!("no {text:?} on the terminal; it shows:\n{}", self.seen),
            }
        }
        let end = self.seen.find(text).unwrap_or(0) + text.len();
        self.seen.drain(..end).collect()
    }

    fn type_line(&mut self, line: &str) {
        use std::io::Write as _;
        self.master
            .write_all(format!("{line}\n").as_bytes())
            .expect("type");
    }
}

#[cfg(target_os = "linux")]
impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// At a terminal, `moves` when there are none to make says why, instead of printing nothing.
#[cfg(target_os = "linux")]
#[test]
fn moves_off_turn_says_why_at_a_terminal() {
    let server = Server::start();
    let (alice_dir, bob_dir) = (config_dir(), config_dir());
    let created = run_cli(&server.url(), alice_dir.path(), &["create", "--name", "a"]);
    let id = created_id(created.stdout.lines().next().unwrap_or_default());
    let mut alice = Terminal::play(&server.url(), alice_dir.path(), &id);
    alice.wait_for("waiting for an opponent");
    alice.type_line("moves");
    alice.wait_for("no moves yet: the game waits for an opponent to join");
    // A move typed before anyone joins: why it is not played, not "not your turn".
    alice.type_line("1r");
    alice.wait_for("error: the game has not started: it waits for an opponent to join");
    let joined = run_cli(&server.url(), bob_dir.path(), &["join", &id, "--name", "b"]);
    assert_eq!(joined.code, Some(0), "{joined:?}");
    alice.wait_for("your move> ");
    alice.type_line("2 l");
    alice.wait_for("move 1:");
    alice.type_line("moves");
    alice.wait_for("no moves for you now: it is the opponent's turn");
}

/// A script's `play` prompts once per turn, also across a dropped connection: an outside
/// probe's pipe got a second `your move` after the client reconnected while it still waited
/// for the first answer, and the extra line it wrote was played turns later.
#[test]
fn a_piped_player_is_prompted_once_per_turn_across_a_dropped_connection() {
    let server = Server::start();
    let proxy = Proxy::start(server.addr);
    let (alice_dir, bob_dir) = (config_dir(), config_dir());
    // Both go through the proxy (their seats are saved for its address), moves and streams.
    let id = new_game(&proxy.url(), alice_dir.path(), bob_dir.path());
    let (tx, mut lines) = Lines::new();
    let mut players = HashMap::new();
    for (who, dir) in [("alice", alice_dir.path()), ("bob", bob_dir.path())] {
        players.insert(
            who.to_owned(),
            CliProcess::spawn(who, &proxy.url(), dir, &["play", &id], &tx),
        );
    }
    let mut prompts = 0;
    drive(
        &mut lines,
        &mut players,
        &["alice", "bob"],
        HashMap::new(),
        |line| {
            if line.who != "alice" || line.text != "your move" {
                return;
            }
            prompts += 1;
            if prompts == 2 {
                // Cut while Alice waits for her answer, and let her reconnect before it comes.
                proxy.cut();
                std::thread::sleep(std::time::Duration::from_millis(1500));
                proxy.restore();
                std::thread::sleep(std::time::Duration::from_millis(4000));
            }
        },
    );
    let stderr: Vec<&Line> = lines
        .transcript
        .iter()
        .filter(|l| l.who == "alice" && l.stream == Stream::Stderr)
        .collect();
    assert!(
        stderr.iter().any(|l| l.text.contains("reconnected to ")),
        "the connection was not dropped and restored: {stderr:#?}"
    );
    for who in ["alice", "bob"] {
        let mut waiting = false;
        for line in &lines.stdout_of(who) {
            if line == "your move" {
                assert!(
                    !waiting,
                    "{who} prompted twice for one turn:\n{}",
                    lines.tail(60)
                );
                waiting = true;
            } else if line.starts_with("move ") || line.starts_with("error:") {
                // The line was used: by a move, or by an error that says what became of it (a
                // move sent while the connection was still down is sent again once it is back).
                waiting = false;
            }
        }
    }
    // Bob's client may come up after Alice's first move, and is shown the moves from there.
    let (alice_moves, bob_moves) = (move_lines(&lines, "alice"), move_lines(&lines, "bob"));
    assert!(
        !bob_moves.is_empty() && alice_moves.ends_with(&bob_moves),
        "{}",
        lines.tail(40)
    );
}

/// A server that moved to another address: the seats saved for the old one are found with
/// `--seat-from OLD` (and saved for the new one), where before the only advice was to pass the
/// old, dead address (an outside probe had to edit tokens.json by hand).
#[test]
fn seats_saved_for_a_server_that_moved_are_taken_with_seat_from() {
    let server = Server::start();
    let old = Proxy::start(server.addr);
    let (alice_dir, bob_dir) = (config_dir(), config_dir());
    let id = new_game(&old.url(), alice_dir.path(), bob_dir.path());
    let new = server.url();
    let refused = run_cli(&new, alice_dir.path(), &["resign", &id]);
    assert_eq!(refused.code, Some(5), "{refused:?}");
    assert!(
        refused
            .stderr
            .contains(&format!("--seat-from {}", old.url())),
        "{refused:?}"
    );
    let resigned = run_cli(
        &new,
        alice_dir.path(),
        &["resign", &id, "--seat-from", &old.url()],
    );
    assert_eq!(resigned.code, Some(0), "{resigned:?}");
    let shown = run_cli(&new, alice_dir.path(), &["show", &id, "--json"]);
    assert_eq!(
        json_of(&shown.stdout)["game"]["status"],
        "GAME_STATUS_FINISHED"
    );
    // Saved for the new address now: no --seat-from needed; the game is over.
    let again = run_cli(&new, alice_dir.path(), &["resign", &id]);
    assert!(!again.stderr.contains("no seat"), "{again:?}");
}

/// The CLI's own errors quote what the user gave (flags, environment variables, paths): control
/// sequences in them are escaped, so that a variable set by someone else cannot write to the
/// terminal. An outside probe's `OANQUAN_SERVER` held an OSC sequence that reached it raw.
#[test]
fn control_sequences_in_the_users_own_input_are_escaped_in_errors() {
    let config = config_dir();
    let hostile = "http://a\u{1b}]0;pwn\u{7}:1";
    let cases: [(&str, Vec<&str>); 3] = [
        (hostile, vec!["list"]),
        (
            "127.0.0.1:1",
            vec!["--ca-cert", "/nonexistent/\u{1b}[31mX", "list"],
        ),
        ("127.0.0.1:1", vec!["create", "--name", ""]),
    ];
    for (server, args) in cases {
        let out = run_cli(server, config.path(), &args);
        assert_ne!(out.code, Some(0), "{args:?}");
        assert!(
            !out.stderr.contains('\u{1b}') && !out.stderr.contains('\u{7}'),
            "{args:?}: {:?}",
            out.stderr
        );
        assert!(!out.stderr.trim().is_empty(), "{args:?}");
    }
    let out = run_cli(hostile, config.path(), &["list"]);
    assert!(out.stderr.contains("\\u{1b}]0;pwn"), "{}", out.stderr);
    let out = run_cli("127.0.0.1:1", config.path(), &["create", "--name", "  "]);
    assert!(out.stderr.contains("--name is empty"), "{}", out.stderr);
    // An empty value in a usage error is not quoted between every two characters.
    let out = run_cli("127.0.0.1:1", config.path(), &["--config-dir", "", "list"]);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("a value is required for '--config-dir <DIR>'")
            && !out.stderr.contains("\"\""),
        "{}",
        out.stderr
    );
}
