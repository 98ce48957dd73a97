//! The `oanquan` CLI against the server's computer opponent, both real binaries.

use std::path::Path;
use std::sync::mpsc::Sender;

use oanquan_e2e::{CliProcess, Lcg, Line, Lines, Server, Stream, config_dir, run_cli};
use serde_json::Value;

/// `lan` creating a game with the `club` computer as first player and playing it.
fn seated_against_club(url: &str, dir: &Path, tx: &Sender<Line>) -> CliProcess {
    CliProcess::spawn(
        "lan",
        url,
        dir,
        &[
            "create",
            "--name",
            "lan",
            "--seat",
            "second",
            "--computer",
            "club",
            "--play",
        ],
        tx,
    )
}

/// A quick computer, so that a whole game takes a few seconds.
fn server() -> Server {
    Server::start_with(&["--computer-move-time", "20ms"])
}

#[test]
fn the_cli_plays_a_whole_game_against_the_computer_with_a_hint() {
    let server = server();
    let dir = config_dir();
    let (tx, mut lines) = Lines::new();
    let mut player = seated_against_club(&server.url(), dir.path(), &tx);
    let mut rng = Lcg(11);
    let mut legal: Vec<String> = Vec::new();
    let mut hinted = false;
    let mut hint = None;
    let mut prompts = 0;
    loop {
        let line = lines.next_line();
        if line.stream != Stream::Stdout {
            continue;
        }
        let text = line.text.as_str();
        if let Some(list) = text.strip_prefix("legal moves: ") {
            legal = list.split_whitespace().map(str::to_owned).collect();
        } else if text.starts_with("hint: ") {
            hint = Some(text.to_owned());
        } else if text == "your move" {
            prompts += 1;
            assert!(prompts < 1000, "game does not end:\n{}", lines.tail(60));
            if hinted {
                let choice = rng
                    .pick(&legal)
                    .unwrap_or_else(|| panic!("prompt without legal moves:\n{}", lines.tail(30)));
                player.send(choice);
            } else {
                hinted = true;
                player.send("hint");
            }
        } else if text.starts_with("game over: ") {
            break;
        }
    }
    let status = player.wait();
    assert_eq!(status.code(), Some(0), "{}", lines.tail(30));

    let out = lines.stdout_of("lan");
    assert!(
        out.iter()
            .any(|l| l == "playing against the computer, level 5 (club)"),
        "{}",
        out.join("\n")
    );
    // The computer joined, the game started at once, and the computer (first seat) moved
    // first, printed like any move.
    assert!(out.iter().any(|l| l.starts_with("move 1: first plays ")));
    assert!(out.iter().any(|l| l.starts_with("move 2: second plays ")));
    // The hint is one of the legal moves, in the player's own terms.
    let hint = hint.unwrap_or_else(|| panic!("no hint line:\n{}", out.join("\n")));
    let short = hint
        .split_once('(')
        .and_then(|(_, rest)| rest.split_once(')'))
        .map(|(short, _)| short.to_owned())
        .unwrap_or_else(|| panic!("{hint}"));
    let before_hint: Vec<&String> = out
        .iter()
        .take_while(|l| !l.starts_with("hint: "))
        .filter(|l| l.starts_with("legal moves: "))
        .collect();
    let legal_then = before_hint.last().expect("legal moves before the hint");
    assert!(
        legal_then.split_whitespace().any(|m| m == short),
        "{hint} not in {legal_then}"
    );
    assert!(
        hint.contains(", eval ") && hint.contains(", depth "),
        "{hint}"
    );

    // The game as the one-shot commands see it.
    let id = out
        .iter()
        .find_map(|l| l.strip_prefix("playing ")?.strip_suffix(" as second"))
        .expect("playing line")
        .to_owned();
    let shown = run_cli(&server.url(), dir.path(), &["show", &id, "--json"]);
    let shown: Value = serde_json::from_str(&shown.stdout).expect("json");
    let game = &shown["game"];
    assert_eq!(game["status"], "GAME_STATUS_FINISHED");
    assert_eq!(game["firstSeat"]["kind"], "PLAYER_KIND_COMPUTER");
    assert_eq!(game["firstSeat"]["computerLevel"], 5);
    assert_eq!(game["secondSeat"]["kind"], "PLAYER_KIND_HUMAN");
}

#[test]
fn bad_computer_levels_are_usage_errors() {
    let server = server();
    let dir = config_dir();
    let created = run_cli(
        &server.url(),
        dir.path(),
        &["create", "--name", "lan", "--computer", "grandmaster"],
    );
    assert_eq!(created.code, Some(2), "{created:?}");
    assert!(created.stderr.contains("master"), "{created:?}");
}

/// A hint analyzes the hosted game by its id, so the engine knows the moves that led to the
/// position (the repetition rule, the ply limit), not the bare position: the server's log says
/// what each analysis was given and how many moves of history it counted.
#[test]
fn a_hint_sends_the_game_so_the_engine_knows_its_history() {
    let log_dir = tempfile::tempdir().expect("temp dir");
    let log = log_dir.path().join("server.log");
    let server = Server::start_logged(
        &["--computer-move-time", "20ms"],
        "info,oanquan_server::grpc::rules_service=debug",
        &log,
    );
    let dir = config_dir();
    let (tx, mut lines) = Lines::new();
    let mut player = seated_against_club(&server.url(), dir.path(), &tx);
    let mut legal: Vec<String> = Vec::new();
    let mut prompts = 0;
    loop {
        let line = lines.next_line();
        if line.stream != Stream::Stdout {
            continue;
        }
        let text = line.text.as_str();
        if let Some(list) = text.strip_prefix("legal moves: ") {
            legal = list.split_whitespace().map(str::to_owned).collect();
        } else if text.starts_with("hint: ") {
            break;
        } else if text == "your move" {
            prompts += 1;
            // The computer's move, ours, the computer's: three moves of history.
            if prompts == 1 {
                let first = legal
                    .first()
                    .unwrap_or_else(|| panic!("{}", lines.tail(30)));
                player.send(first);
            } else {
                player.send("hint");
            }
        } else if text.starts_with("game over: ") || text.starts_with("error: ") {
            panic!("before the hint:\n{}", lines.tail(30));
        }
    }
    player.send("quit");
    player.wait();
    drop(server);

    let log = std::fs::read_to_string(&log).expect("the server log");
    let analyses: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("analysis requested"))
        .collect();
    assert_eq!(analyses.len(), 1, "{log}");
    assert!(
        analyses[0].contains("given=\"game_id\"") && analyses[0].contains("history_plies=3"),
        "{}",
        analyses[0]
    );
}
