//! Online play through the real `oanquan` CLI and `oanquan-server`: time controls, clocks,
//! seeks, draw offers, a flag falling, first moves not made, claims and rematches.

use std::path::Path;
use std::time::Duration;

use oanquan_e2e::{CliProcess, Lines, Proxy, Server, Stream, config_dir, run_cli};
use serde_json::Value;

fn json_of(stdout: &str) -> Value {
    serde_json::from_str(stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
}

/// `create` (first seat, with `extra` options) and `join` (second seat); returns the game id.
fn new_game(server: &str, alice: &Path, bob: &Path, extra: &[&str]) -> String {
    let mut args = vec!["create", "--name", "alice", "--seat", "first", "--json"];
    args.extend_from_slice(extra);
    let created = run_cli(server, alice, &args);
    assert_eq!(created.code, Some(0), "{created:?}");
    let id = json_of(&created.stdout)["game"]["id"]
        .as_str()
        .expect("game.id")
        .to_owned();
    let joined = run_cli(server, bob, &["join", &id, "--name", "bob"]);
    assert_eq!(joined.code, Some(0), "{joined:?}");
    id
}

/// Waits for `who`'s next prompt and answers it with the first move of the `legal moves:`
/// line before it.
fn play_first_legal(lines: &mut Lines, who: &str, player: &mut CliProcess) {
    let (at, _) = lines.follow(who, |l| l == "your move");
    let legal = lines
        .last_before(who, at, |l| l.starts_with("legal moves: "))
        .unwrap_or_else(|| panic!("{who}: a prompt without legal moves\n{}", lines.tail(30)));
    let first = legal
        .strip_prefix("legal moves: ")
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("no legal move in {legal:?}"));
    player.send(first);
}

/// `lines.follow`, the line only.
fn follow(lines: &mut Lines, who: &str, pred: impl Fn(&str) -> bool) -> String {
    lines.follow(who, pred).1
}

#[test]
fn create_takes_a_time_control_and_refuses_bad_ones() {
    let server = Server::start();
    let dir = config_dir();
    let url = server.url();

    let created = run_cli(
        &url,
        dir.path(),
        &["create", "--name", "alice", "--time", "5+3", "--json"],
    );
    assert_eq!(created.code, Some(0), "{created:?}");
    let game = &json_of(&created.stdout)["game"];
    let real_time = &game["timeControl"]["realTime"];
    assert_eq!(real_time["initial"], "300s", "{game}");
    assert_eq!(real_time["increment"], "3s", "{game}");
    assert_eq!(game["clocks"]["firstRemaining"], "300s", "{game}");
    assert_eq!(game["clocks"]["secondRemaining"], "300s", "{game}");
    let id = game["id"].as_str().expect("id").to_owned();

    let text = run_cli(
        &url,
        dir.path(),
        &["create", "--name", "alice", "--time", "90s+0"],
    );
    assert_eq!(text.code, Some(0), "{text:?}");
    assert!(
        text.stdout.lines().any(|l| l == "time control: 90s+0"),
        "{}",
        text.stdout
    );

    let correspondence = run_cli(
        &url,
        dir.path(),
        &[
            "create",
            "--name",
            "alice",
            "--correspondence",
            "2d",
            "--json",
        ],
    );
    assert_eq!(correspondence.code, Some(0), "{correspondence:?}");
    let game = &json_of(&correspondence.stdout)["game"];
    assert_eq!(
        game["timeControl"]["correspondence"]["perMove"], "172800s",
        "{game}"
    );

    // `show` and `list` say which time control a game has.
    let shown = run_cli(&url, dir.path(), &["show", &id]);
    assert!(
        shown.stdout.starts_with(&format!(
            "game {id}: waiting, standard, 5+3, 0 moves played"
        )),
        "{}",
        shown.stdout
    );
    assert!(shown.stdout.contains("clock 5:00"), "{}", shown.stdout);
    let list = run_cli(&url, dir.path(), &["list"]);
    let header = list.stdout.lines().next().unwrap_or_default();
    assert!(header.contains(" TIME "), "{}", list.stdout);
    assert!(list.stdout.contains("2d/move"), "{}", list.stdout);
    assert!(list.stdout.contains("90s+0"), "{}", list.stdout);

    // Refused before any request, with the reason, as usage errors.
    for (args, needle) in [
        (
            &["create", "--name", "x", "--time", "0+3"][..],
            "between 1 second and 3 hours",
        ),
        (&["create", "--name", "x", "--time", "-1+0"][..], "negative"),
        (
            &["create", "--name", "x", "--time", "181+0"][..],
            "between 1 second and 3 hours",
        ),
        (
            &["create", "--name", "x", "--time", "5+999"][..],
            "at most 180 seconds",
        ),
        (
            &["create", "--name", "x", "--time", "soon"][..],
            "MINUTES+SECONDS",
        ),
        (
            &["create", "--name", "x", "--correspondence", "2"][..],
            "needs a unit",
        ),
        (
            &[
                "create",
                "--name",
                "x",
                "--time",
                "1+0",
                "--correspondence",
                "1d",
            ][..],
            "cannot be used with",
        ),
    ] {
        let out = run_cli(&url, dir.path(), args);
        assert_eq!(out.code, Some(2), "{args:?}: {out:?}");
        assert!(out.stderr.contains(needle), "{args:?}: {}", out.stderr);
    }
}

/// The game id and seat from `paired into game ID as the SEAT player`.
fn paired(line: &str) -> (String, String) {
    let rest = line
        .strip_prefix("paired into game ")
        .expect("a paired line");
    let (id, seat) = rest.split_once(" as the ").expect("as the");
    (id.to_owned(), seat.trim_end_matches(" player").to_owned())
}

/// The seek id from `seek ID: TIME, RULES; waiting for an opponent ...`.
fn seek_id(line: &str) -> String {
    line.strip_prefix("seek ")
        .and_then(|l| l.split(':').next())
        .unwrap_or_else(|| panic!("not a waiting seek line: {line}"))
        .to_owned()
}

#[test]
fn two_seeks_pair_into_one_game() {
    let server = Server::start();
    let url = server.url();
    let (alice_dir, bob_dir, carol_dir) = (config_dir(), config_dir(), config_dir());
    let (tx, mut lines) = Lines::new();

    let mut alice = CliProcess::spawn(
        "alice",
        &url,
        alice_dir.path(),
        &["seek", "1+0", "--name", "alice"],
        &tx,
    );
    let waiting = follow(&mut lines, "alice", |l| l.starts_with("seek "));
    assert!(
        waiting.contains(": 1+0, standard; waiting for an opponent"),
        "{waiting}"
    );
    let id = seek_id(&waiting);

    // The open seek is listed, in text and as the API's ListSeeksResponse.
    let listed = run_cli(&url, carol_dir.path(), &["seeks"]);
    assert_eq!(listed.code, Some(0), "{listed:?}");
    assert!(
        listed
            .stdout
            .lines()
            .any(|l| l.starts_with(&id) && l.contains("alice") && l.contains("1+0")),
        "{}",
        listed.stdout
    );
    let listed = json_of(&run_cli(&url, carol_dir.path(), &["seeks", "--json"]).stdout);
    assert_eq!(listed["seeks"][0]["id"], id.as_str(), "{listed}");
    assert_eq!(
        listed["seeks"][0]["timeControl"]["realTime"]["initial"],
        "60s"
    );

    let mut bob = CliProcess::spawn(
        "bob",
        &url,
        bob_dir.path(),
        &["seek", "1+0", "--name", "bob"],
        &tx,
    );
    let (alice_game, alice_seat) = paired(&follow(&mut lines, "alice", |l| {
        l.starts_with("paired into game ")
    }));
    let (bob_game, bob_seat) = paired(&follow(&mut lines, "bob", |l| {
        l.starts_with("paired into game ")
    }));
    assert_eq!(alice_game, bob_game, "{}", lines.tail(30));
    assert_ne!(alice_seat, bob_seat);
    for who in ["alice", "bob"] {
        follow(&mut lines, who, |l| {
            l.starts_with(&format!("playing {alice_game} as "))
        });
    }
    // Both play on the clock; the seek is gone from the list.
    let seeks = run_cli(&url, carol_dir.path(), &["seeks"]);
    assert!(!seeks.stdout.contains(&id), "{}", seeks.stdout);

    // The first player resigns at the prompt: both see the end and exit 0.
    let (first, first_name) = if alice_seat == "first" {
        (&mut alice, "alice")
    } else {
        (&mut bob, "bob")
    };
    follow(&mut lines, first_name, |l| l == "your move");
    first.send("resign");
    follow(&mut lines, first_name, |l| l == "resign? (y/N)");
    first.send("y");
    for who in ["alice", "bob"] {
        follow(&mut lines, who, |l| {
            l.starts_with("game over: ") && l.ends_with("(resignation by first)")
        });
    }
    assert_eq!(alice.wait().code(), Some(0), "{}", lines.tail(30));
    assert_eq!(bob.wait().code(), Some(0), "{}", lines.tail(30));
    // Each pairing stored its seat, as `create` and `join` do.
    for dir in [alice_dir.path(), bob_dir.path()] {
        let tokens = std::fs::read_to_string(dir.join("tokens.json")).expect("token file");
        assert!(tokens.contains(&alice_game), "{tokens}");
    }
}

#[test]
fn accept_takes_an_open_seek_and_ctrl_c_withdraws_one() {
    let server = Server::start();
    let url = server.url();
    let (dave_dir, erin_dir, frank_dir) = (config_dir(), config_dir(), config_dir());
    let (tx, mut lines) = Lines::new();

    let mut dave = CliProcess::spawn(
        "dave",
        &url,
        dave_dir.path(),
        &["seek", "3+2", "--name", "dave"],
        &tx,
    );
    let id = seek_id(&follow(&mut lines, "dave", |l| l.starts_with("seek ")));
    let mut erin = CliProcess::spawn(
        "erin",
        &url,
        erin_dir.path(),
        &["accept", &id, "--name", "erin"],
        &tx,
    );
    let joined = follow(&mut lines, "erin", |l| l.starts_with("joined game "));
    let (dave_game, dave_seat) = paired(&follow(&mut lines, "dave", |l| {
        l.starts_with("paired into game ")
    }));
    assert!(
        joined.starts_with(&format!("joined game {dave_game} as the ")),
        "{joined}"
    );
    assert!(
        !joined.contains(&format!("the {dave_seat} player")),
        "{joined}"
    );
    follow(&mut lines, "erin", |l| l == "time control: 3+2");
    follow(&mut lines, "erin", |l| l == "opponent: dave");
    // Both boards show the clocks; the first moves' limit is on the clocks line.
    for who in ["dave", "erin"] {
        let clocks = follow(&mut lines, who, |l| l.starts_with("clocks: "));
        assert!(
            clocks.starts_with(
                "clocks: first 3:00, second 3:00; first to make their first move within 0:"
            ),
            "{clocks}"
        );
    }
    // The first player calls the game off (the other reads nothing on the first player's
    // turn): both are done.
    let (first, first_name) = if dave_seat == "first" {
        (&mut dave, "dave")
    } else {
        (&mut erin, "erin")
    };
    follow(&mut lines, first_name, |l| l == "your move");
    first.send("abort");
    for who in ["dave", "erin"] {
        follow(&mut lines, who, |l| l.starts_with("game over: aborted"));
    }
    for (who, player) in [("dave", &mut dave), ("erin", &mut erin)] {
        assert_eq!(player.wait().code(), Some(0), "{who}:\n{}", lines.tail(30));
    }

    // A seek that is not open any more: exit 3, said plainly.
    let gone = run_cli(&url, erin_dir.path(), &["accept", &id, "--name", "erin"]);
    assert_eq!(gone.code, Some(3), "{gone:?}");
    assert!(gone.stderr.contains("not open any more"), "{gone:?}");

    // Ctrl-C while waiting withdraws the seek.
    let frank = CliProcess::spawn(
        "frank",
        &url,
        frank_dir.path(),
        &["seek", "--name", "frank"],
        &tx,
    );
    let waiting = follow(&mut lines, "frank", |l| l.starts_with("seek "));
    assert!(waiting.contains(": untimed, standard;"), "{waiting}");
    let id = seek_id(&waiting);
    frank.interrupt();
    follow(&mut lines, "frank", |l| l == format!("seek {id} withdrawn"));
    let mut frank = frank;
    assert_eq!(frank.wait().code(), Some(130), "{}", lines.tail(10));
    let seeks = run_cli(&url, frank_dir.path(), &["seeks"]);
    assert!(!seeks.stdout.contains(&id), "{}", seeks.stdout);
}

/// A seek whose connection breaks while it waits (a laptop that slept through its keepalives,
/// a network change) says the seek is gone and to seek again, not that the address may be no
/// oanquan server or need TLS, as a connection that never worked does.
#[test]
fn a_seek_whose_connection_breaks_says_it_was_withdrawn() {
    let server = Server::start();
    let proxy = Proxy::start(server.addr);
    let dir = config_dir();
    let (tx, mut lines) = Lines::new();
    let mut gina = CliProcess::spawn(
        "gina",
        &proxy.url(),
        dir.path(),
        &["seek", "--name", "gina"],
        &tx,
    );
    let id = seek_id(&follow(&mut lines, "gina", |l| l.starts_with("seek ")));
    proxy.cut();
    assert_eq!(gina.wait().code(), Some(69), "{}", lines.tail(10));
    lines.settle(Duration::from_millis(200));
    let said: Vec<&str> = lines
        .transcript
        .iter()
        .filter(|l| l.who == "gina" && l.stream == Stream::Stderr)
        .map(|l| l.text.as_str())
        .collect();
    let said = said.join("\n");
    assert!(
        said.starts_with(&format!(
            "oanquan: seek {id}: the connection to the server broke ("
        )),
        "{said}"
    );
    assert!(
        said.ends_with(
            "so the server has withdrawn it (as after a sleep or a network change): seek again"
        ),
        "{said}"
    );
    assert!(!said.contains("not an oanquan server"), "{said}");
    // And so it has.
    let seeks = run_cli(&server.url(), dir.path(), &["seeks"]);
    assert!(!seeks.stdout.contains(&id), "{}", seeks.stdout);
}

/// On a terminal the clocks tick on `watch`'s last line; after a reconnect with nothing missed
/// (no event comes to redraw them) they must tick again at once, not wait for the next move.
#[test]
fn watch_clocks_tick_again_after_a_reconnect() {
    let server = Server::start();
    let proxy = Proxy::start(server.addr);
    let (alice_dir, bob_dir, eve_dir) = (config_dir(), config_dir(), config_dir());
    let id = new_game(
        &server.url(),
        alice_dir.path(),
        bob_dir.path(),
        &["--time", "5+0"],
    );
    let (tx, mut lines) = Lines::new();
    let _eve = CliProcess::spawn_on_terminal(
        "eve",
        &proxy.url(),
        eve_dir.path(),
        &["watch", &id, "--no-animate"],
        &tx,
    );
    follow(&mut lines, "eve", |l| l.contains("first player: alice"));
    // The first move's time is counted down by the status line only (not a line of its own, so
    // not read here): no line under the board standing still beside it.
    assert!(
        !lines
            .stdout_of("eve")
            .iter()
            .any(|l| l.contains("must make their first move")),
        "{:#?}",
        lines.stdout_of("eve")
    );
    let mut alice = CliProcess::spawn(
        "alice",
        &server.url(),
        alice_dir.path(),
        &["play", &id],
        &tx,
    );
    follow(&mut lines, "alice", |l| l == "your move");
    proxy.cut();
    // On a terminal the `unreachable` notice is redrawn in place: its line ends with the
    // `reconnected` one.
    std::thread::sleep(std::time::Duration::from_millis(500));
    proxy.restore();
    follow(&mut lines, "eve", |l| l.contains("reconnected to "));
    // Two ticks' time with nothing new on the stream, then a move ends the line the clocks
    // were redrawn on (a status line has no newline of its own).
    std::thread::sleep(std::time::Duration::from_millis(2500));
    alice.send("1 r");
    let moved = follow(&mut lines, "eve", |l| l.contains("move 1: "));
    let before_move = &moved[..moved.find("move 1: ").unwrap_or(0)];
    assert!(
        before_move.matches("clocks: ").count() >= 2,
        "no ticking clocks between the reconnect and the move: {moved:?}\n{}",
        lines.tail(20)
    );
}

/// Ctrl-C during `play` ends the client, not the game: it says that the game goes on with its
/// clocks running and how to come back (exit 130).
#[test]
fn ctrl_c_in_play_says_the_game_goes_on() {
    let server = Server::start();
    let url = server.url();
    let (alice_dir, bob_dir) = (config_dir(), config_dir());
    let id = new_game(&url, alice_dir.path(), bob_dir.path(), &["--time", "5+0"]);
    let (tx, mut lines) = Lines::new();
    let mut alice = CliProcess::spawn("alice", &url, alice_dir.path(), &["play", &id], &tx);
    follow(&mut lines, "alice", |l| l == "your move");
    alice.interrupt();
    assert_eq!(alice.wait().code(), Some(130), "{}", lines.tail(20));
    // Whatever alice wrote is in by the time both of her pipes have closed.
    let said =
        loop {
            if let Some(line) = lines.transcript.iter().find(|l| {
                l.who == "alice" && l.stream == Stream::Stderr && l.text.contains("goes on")
            }) {
                break line.text.clone();
            }
            lines.next_line();
        };
    for needle in ["clocks running", &format!("`oanquan play {id}`")] {
        assert!(said.contains(needle), "{needle}: {said}");
    }
}

#[test]
fn a_draw_offered_at_the_prompt_is_accepted_and_watched() {
    let server = Server::start();
    let url = server.url();
    let (alice_dir, bob_dir, eve_dir) = (config_dir(), config_dir(), config_dir());
    let id = new_game(&url, alice_dir.path(), bob_dir.path(), &[]);
    let (tx, mut lines) = Lines::new();
    let _eve = CliProcess::spawn("eve", &url, eve_dir.path(), &["watch", &id], &tx);
    follow(&mut lines, "eve", |l| {
        l.starts_with(&format!("game {id}: active"))
    });
    let mut alice = CliProcess::spawn("alice", &url, alice_dir.path(), &["play", &id], &tx);
    let mut bob = CliProcess::spawn("bob", &url, bob_dir.path(), &["play", &id], &tx);

    // alice offers, then moves: the offer stands until bob moves or answers.
    follow(&mut lines, "alice", |l| l == "your move");
    alice.send("draw");
    play_first_legal(&mut lines, "alice", &mut alice);
    follow(&mut lines, "bob", |l| {
        l == "alice offers a draw — type draw to accept, decline to refuse"
    });
    follow(&mut lines, "eve", |l| l == "alice offers a draw");
    follow(&mut lines, "bob", |l| l == "your move");
    bob.send("draw");
    for who in ["alice", "bob", "eve"] {
        follow(&mut lines, who, |l| l == "drawn by agreement");
        let over = follow(&mut lines, who, |l| l.starts_with("game over: "));
        assert!(
            over.starts_with("game over: draw ") && over.ends_with("(agreement)"),
            "{over}"
        );
    }
    assert_eq!(alice.wait().code(), Some(0), "{}", lines.tail(30));
    assert_eq!(bob.wait().code(), Some(0), "{}", lines.tail(30));
    let bob_lines = lines.stdout_of("bob");
    assert!(
        bob_lines.iter().any(|l| l == "you accept the draw"),
        "{bob_lines:?}"
    );
    let alice_lines = lines.stdout_of("alice");
    assert!(
        alice_lines
            .iter()
            .any(|l| l == "you offer a draw; it stands until bob moves or answers"),
        "{alice_lines:?}"
    );
}

#[test]
fn a_declined_draw_and_a_claim_too_early() {
    let server = Server::start();
    let url = server.url();
    let (alice_dir, bob_dir) = (config_dir(), config_dir());
    let id = new_game(&url, alice_dir.path(), bob_dir.path(), &[]);
    let (tx, mut lines) = Lines::new();
    let mut alice = CliProcess::spawn("alice", &url, alice_dir.path(), &["play", &id], &tx);
    let mut bob = CliProcess::spawn("bob", &url, bob_dir.path(), &["play", &id], &tx);

    follow(&mut lines, "alice", |l| l == "your move");
    alice.send("draw");
    play_first_legal(&mut lines, "alice", &mut alice);
    follow(&mut lines, "bob", |l| l == "your move");
    bob.send("decline");
    follow(&mut lines, "alice", |l| l == "bob declines the draw");
    // Nothing to decline any more.
    bob.send("decline");
    follow(&mut lines, "bob", |l| {
        l == "error: decline: there is no draw offer to decline"
    });
    play_first_legal(&mut lines, "bob", &mut bob);
    // `claim` on one's own turn (and in an untimed game not abandoned): the server's reason.
    follow(&mut lines, "alice", |l| l == "your move");
    alice.send("claim");
    let refused = follow(&mut lines, "alice", |l| l.starts_with("error: "));
    assert!(refused.starts_with("error: claim: "), "{refused}");
    alice.send("quit");
    assert_eq!(alice.wait().code(), Some(0), "{}", lines.tail(30));
    let bob_lines = lines.stdout_of("bob");
    assert!(
        bob_lines.iter().any(|l| l == "you decline the draw"),
        "{bob_lines:?}"
    );
    // The game goes on without alice's client: not over.
    let shown = run_cli(&url, bob_dir.path(), &["show", &id]);
    assert!(
        shown.stdout.starts_with(&format!("game {id}: active")),
        "{}",
        shown.stdout
    );
}

/// A 1-second game: both first moves are made at once (they have their own limit), then the
/// first player stops and their flag falls on the server. Both players and a spectator are
/// told; the players then agree on a rematch at the prompt and go on with it, seats swapped.
#[test]
fn a_flag_falls_and_a_rematch_follows() {
    let server = Server::start();
    let url = server.url();
    let (alice_dir, bob_dir, eve_dir) = (config_dir(), config_dir(), config_dir());
    let id = new_game(&url, alice_dir.path(), bob_dir.path(), &["--time", "1s+0"]);
    let (tx, mut lines) = Lines::new();
    let _eve = CliProcess::spawn("eve", &url, eve_dir.path(), &["watch", &id], &tx);
    follow(&mut lines, "eve", |l| {
        l.starts_with(&format!("game {id}: active"))
    });
    let mut alice = CliProcess::spawn(
        "alice",
        &url,
        alice_dir.path(),
        &["play", &id, "--rematch"],
        &tx,
    );
    let mut bob = CliProcess::spawn(
        "bob",
        &url,
        bob_dir.path(),
        &["play", &id, "--rematch"],
        &tx,
    );
    play_first_legal(&mut lines, "alice", &mut alice);
    play_first_legal(&mut lines, "bob", &mut bob);
    // alice's clock runs now; she does not move.
    let clocks = follow(&mut lines, "alice", |l| {
        l.starts_with("clocks: ") && l.contains("(running)")
    });
    // Counted down from the server's second, the moment the line is printed.
    assert!(
        clocks.starts_with("clocks: first 0:0") && clocks.ends_with(" (running), second 0:01.0"),
        "{clocks}"
    );
    for who in ["alice", "bob", "eve"] {
        follow(&mut lines, who, |l| {
            l == "alice ran out of time — bob wins on time"
        });
        follow(&mut lines, who, |l| {
            l.starts_with("game over: second wins ") && l.ends_with("(timeout by first)")
        });
    }
    let eve_lines = lines.stdout_of("eve");
    assert!(
        eve_lines
            .iter()
            .any(|l| l.starts_with("clocks: ") && l.contains("(running)")),
        "{eve_lines:?}"
    );

    follow(&mut lines, "alice", |l| l == "rematch? (rematch/no)");
    follow(&mut lines, "bob", |l| l == "rematch? (rematch/no)");
    alice.send("rematch");
    follow(&mut lines, "alice", |l| {
        l == "rematch offered; waiting for bob"
    });
    follow(&mut lines, "bob", |l| {
        l == "alice offers a rematch — type rematch to accept, no to decline"
    });
    bob.send("rematch");
    let started = follow(&mut lines, "alice", |l| l.starts_with("rematch: game "));
    let rematch = started.trim_start_matches("rematch: game ").to_owned();
    assert_ne!(rematch, id);
    // Seats swapped: bob moves first in the rematch.
    follow(&mut lines, "alice", |l| {
        l == format!("playing {rematch} as second")
    });
    follow(&mut lines, "bob", |l| {
        l == format!("playing {rematch} as first")
    });
    follow(&mut lines, "bob", |l| l == "your move");
    bob.send("abort");
    for who in ["alice", "bob"] {
        follow(&mut lines, who, |l| l.starts_with("game over: aborted"));
    }
    // An aborted game has no rematch: both are done.
    assert_eq!(alice.wait().code(), Some(0), "{}", lines.tail(30));
    assert_eq!(bob.wait().code(), Some(0), "{}", lines.tail(30));
    // The rematch's token was stored: the one-shot commands find the seat.
    let shown = run_cli(&url, alice_dir.path(), &["show", &rematch]);
    assert!(shown.stdout.contains("alice (you)"), "{}", shown.stdout);
}

#[test]
fn a_first_move_not_made_aborts_the_game() {
    let server = Server::start_with(&["--first-move-time", "1s"]);
    let url = server.url();
    let (alice_dir, bob_dir) = (config_dir(), config_dir());
    let id = new_game(&url, alice_dir.path(), bob_dir.path(), &["--time", "1+0"]);
    let (tx, mut lines) = Lines::new();
    let mut alice = CliProcess::spawn("alice", &url, alice_dir.path(), &["play", &id], &tx);
    let clocks = follow(&mut lines, "alice", |l| l.starts_with("clocks: "));
    assert!(
        clocks.contains("; first to make their first move within 0:0"),
        "{clocks}"
    );
    follow(&mut lines, "alice", |l| {
        l == "the game was aborted: you did not make your first move in time"
    });
    follow(&mut lines, "alice", |l| l.starts_with("game over: aborted"));
    assert_eq!(alice.wait().code(), Some(0), "{}", lines.tail(30));
}

#[test]
fn an_abandoned_untimed_game_is_claimed() {
    let server = Server::start_with(&["--abandon-after", "1s"]);
    let url = server.url();
    let (alice_dir, bob_dir) = (config_dir(), config_dir());
    // alice claims as soon as the server allows it.
    let claim = |id: &str| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let out = run_cli(&url, alice_dir.path(), &["claim", id]);
            if out.code == Some(0) {
                break out;
            }
            assert_eq!(out.code, Some(4), "{out:?}");
            assert!(out.stderr.contains("claim"), "{out:?}");
            assert!(std::time::Instant::now() < deadline, "{out:?}");
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    };
    // bob joins and never moves: a game that never started counts for nobody.
    let unplayed = new_game(&url, alice_dir.path(), bob_dir.path(), &[]);
    let (tx, mut lines) = Lines::new();
    let mut alice = CliProcess::spawn("alice", &url, alice_dir.path(), &["play", &unplayed], &tx);
    play_first_legal(&mut lines, "alice", &mut alice);
    follow(&mut lines, "alice", |l| l == "turn: second");
    let aborted = claim(&unplayed);
    assert!(
        aborted
            .stdout
            .starts_with("the game was aborted: bob did not make their first move in time\n"),
        "{aborted:?}"
    );
    assert_eq!(alice.wait().code(), Some(0), "{}", lines.tail(30));

    // bob moves once and goes.
    let id = new_game(&url, alice_dir.path(), bob_dir.path(), &[]);
    let (tx, mut lines) = Lines::new();
    let mut alice = CliProcess::spawn("alice", &url, alice_dir.path(), &["play", &id], &tx);
    let mut bob = CliProcess::spawn("bob", &url, bob_dir.path(), &["play", &id], &tx);
    play_first_legal(&mut lines, "alice", &mut alice);
    play_first_legal(&mut lines, "bob", &mut bob);
    play_first_legal(&mut lines, "alice", &mut alice);
    follow(&mut lines, "bob", |l| l == "your move");
    bob.send("quit");
    assert_eq!(bob.wait().code(), Some(0), "{}", lines.tail(30));
    let claimed = claim(&id);
    assert!(
        claimed
            .stdout
            .starts_with("bob abandoned the game — alice wins by claim\n"),
        "{claimed:?}"
    );
    follow(&mut lines, "alice", |l| {
        l == "bob abandoned the game — alice wins by claim"
    });
    follow(&mut lines, "alice", |l| {
        l.starts_with("game over: first wins ") && l.ends_with("(abandonment by second)")
    });
    assert_eq!(alice.wait().code(), Some(0), "{}", lines.tail(30));
}
