//! The `oanquan` CLI on a pseudo-terminal: what ends up on the screen, not only in the lines.

use std::path::Path;

use oanquan_e2e::{CliProcess, Lines, Proxy, Server, config_dir, run_cli};
use serde_json::Value;

fn json_of(stdout: &str) -> Value {
    serde_json::from_str(stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
}

/// Alice (first seat) and `bob` (second seat, named `bob`) in a new untimed game; its id.
fn new_game(server: &str, alice: &Path, bob: &Path, bob_name: &str) -> String {
    let created = run_cli(
        server,
        alice,
        &["create", "--name", "alice", "--seat", "first", "--json"],
    );
    assert_eq!(created.code, Some(0), "{created:?}");
    let id = json_of(&created.stdout)["game"]["id"]
        .as_str()
        .expect("game.id")
        .to_owned();
    let joined = run_cli(server, bob, &["join", &id, "--name", bob_name, "--json"]);
    assert_eq!(joined.code, Some(0), "{joined:?}");
    id
}

/// `text` without its escape sequences (CSI: ESC `[` ... final byte).
fn strip_csi(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            if chars.next_if_eq(&'[').is_some() {
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

/// What a line shows on the screen: a carriage return starts the row over, and the client
/// only writes one after erasing the rest of the row (`\r\x1b[K`), so the text after the
/// last one is what stays.
fn visible(line: &str) -> String {
    strip_csi(line.rsplit('\r').next().unwrap_or(""))
}

/// The animation redraws its frames by moving the cursor up as many rows as it drew lines: on a
/// terminal narrower than a line, the line wraps onto two rows and the redraw lands on the wrong
/// ones. Every row of a frame must fit the width; a terminal too narrow for the board's box gets
/// the steps as text lines instead, with no cursor moved up.
#[test]
fn the_animation_fits_a_narrow_terminal_or_gives_way_to_text() {
    let server = Server::start();
    let url = server.url();
    let (alice_dir, bob_dir, eve_dir) = (config_dir(), config_dir(), config_dir());
    // The players' lines are longer than 40 columns with this name.
    let long_name = "b".repeat(32);
    let id = new_game(&url, alice_dir.path(), bob_dir.path(), &long_name);
    let (tx, mut lines) = Lines::new();
    let watch = ["watch", &id, "--animate-ms", "1"];
    let _narrow =
        CliProcess::spawn_on_terminal_sized("narrow", &url, eve_dir.path(), &watch, Some(40), &tx);
    let _tiny =
        CliProcess::spawn_on_terminal_sized("tiny", &url, eve_dir.path(), &watch, Some(30), &tx);
    // At these widths the players' lines leave out their words (`first: alice  0 pts  <-`).
    for who in ["narrow", "tiny"] {
        lines.follow(who, |l| {
            l.contains("first player: ") || l.contains("first: ")
        });
    }
    let mut alice = CliProcess::spawn("alice", &url, alice_dir.path(), &["play", &id], &tx);
    lines.follow("alice", |l| l == "your move");
    alice.send("1 r");
    for who in ["narrow", "tiny"] {
        lines.follow(who, |l| visible(l).starts_with("turn: second"));
    }
    let after_move = |who: &str| -> Vec<String> {
        let shown = lines.stdout_of(who);
        let at = shown
            .iter()
            .position(|l| visible(l).starts_with("move 1: "))
            .unwrap_or_else(|| panic!("{who}: no move line: {shown:#?}"));
        // The move's own line comes before the frames and is not redrawn: it may wrap.
        shown[at + 1..].to_vec()
    };

    let narrow = after_move("narrow");
    assert!(
        narrow.iter().any(|l| l.contains("\x1b[J")),
        "animated: {narrow:#?}"
    );
    for line in &narrow {
        for row in line.split('\r') {
            let columns = strip_csi(row).chars().count();
            assert!(columns <= 40, "{columns} columns: {row:?}\n{narrow:#?}");
        }
    }

    let tiny = after_move("tiny");
    assert!(
        tiny.iter().any(|l| visible(l).starts_with("  sow ")),
        "the steps as text: {tiny:#?}"
    );
    let moved_up = tiny.iter().any(|l| {
        l.split("\x1b[").skip(1).any(|csi| {
            csi.trim_start_matches(|c: char| c.is_ascii_digit())
                .starts_with('A')
        })
    });
    assert!(!moved_up, "no frames redrawn: {tiny:#?}");
    // The board itself is drawn narrow enough: no row of its box wraps (an outside probe's
    // 30-column terminal broke each into two).
    let boxes: Vec<String> = lines
        .stdout_of("tiny")
        .iter()
        .map(|l| visible(l))
        .filter(|l| l.starts_with("  ") && l.contains(['│', '|', '╭', '+']))
        .collect();
    assert!(boxes.len() >= 5, "{tiny:#?}");
    for row in &boxes {
        let columns = row.chars().count();
        assert!(columns <= 30, "{columns} columns: {row:?}\n{boxes:#?}");
    }
}

/// A message that arrives while the prompt waits for input (here the opponent's draw offer)
/// takes the prompt's row, on its own, and the prompt comes back below it: it is never
/// written after `your move> ` on the prompt's line.
#[test]
fn a_message_during_the_prompt_goes_above_it() {
    let server = Server::start();
    let url = server.url();
    let (alice_dir, bob_dir) = (config_dir(), config_dir());
    let id = new_game(&url, alice_dir.path(), bob_dir.path(), "bob");
    let (tx, mut lines) = Lines::new();
    let _alice =
        CliProcess::spawn_on_terminal("alice", &url, alice_dir.path(), &["play", &id], &tx);
    lines.follow("alice", |l| l.contains("legal moves:"));
    let mut bob = CliProcess::spawn_on_terminal("bob", &url, bob_dir.path(), &["play", &id], &tx);
    lines.follow("bob", |l| l.contains("second player: bob (you)"));
    bob.send("draw");
    let (_, offer) = lines.follow("alice", |l| l.contains("bob offers a draw"));
    assert!(
        visible(&offer).starts_with("bob offers a draw"),
        "the offer on a row of its own: {offer:?}\n{}",
        lines.tail(20)
    );
    // Whatever comes next starts on the prompt, drawn again below the offer.
    let mut alice = _alice;
    // The prompt is written right behind the offer's line, but by a write of its own (stdout
    // is line-buffered): typing at that very moment would echo between the two, as it would
    // for a person.
    std::thread::sleep(std::time::Duration::from_millis(300));
    alice.send("board");
    let (_, next) = lines.follow("alice", |_| true);
    assert!(
        visible(&next).starts_with("your move> "),
        "{next:?}\n{}",
        lines.tail(20)
    );
    // The game ends while alice's prompt waits: no move prompt comes back after the end, not
    // even for a moment before the rematch question.
    lines.follow("alice", |l| l.starts_with("legal moves: "));
    bob.send("resign");
    bob.send("y");
    lines.follow("alice", |l| l.contains("game over: "));
    alice.send("no");
    let (_, asked) = lines.follow("alice", |l| l.contains("rematch? "));
    assert!(
        !asked.contains("your move> "),
        "{asked:?}\n{}",
        lines.tail(20)
    );
}

/// Ctrl-C during a move's animation ends the client at once: an outside probe waited 5.8 s
/// for the frames of one move at `--animate-ms 300` before its Ctrl-C was heard.
#[test]
fn ctrl_c_does_not_wait_for_the_animation() {
    let server = Server::start();
    let url = server.url();
    let (alice_dir, bob_dir, eve_dir) = (config_dir(), config_dir(), config_dir());
    let id = new_game(&url, alice_dir.path(), bob_dir.path(), "bob");
    let (tx, mut lines) = Lines::new();
    // Five stones sown at 500 ms a step: the move's frames take 2.5 s at least.
    let mut eve = CliProcess::spawn_on_terminal_sized(
        "eve",
        &url,
        eve_dir.path(),
        &["watch", &id, "--animate-ms", "500"],
        Some(80),
        &tx,
    );
    lines.follow("eve", |l| l.contains("first player: "));
    let mut alice = CliProcess::spawn("alice", &url, alice_dir.path(), &["play", &id], &tx);
    lines.follow("alice", |l| l == "your move");
    alice.send("1 r");
    lines.follow("eve", |l| visible(l).starts_with("move 1: "));
    std::thread::sleep(std::time::Duration::from_millis(300));
    let pressed = std::time::Instant::now();
    // Ctrl-C typed on the terminal, whose driver sends SIGINT to the client.
    eve.send("\u{3}");
    let status = eve.wait();
    let took = pressed.elapsed();
    assert_eq!(status.code(), Some(130), "{}", lines.tail(20));
    assert!(
        took < std::time::Duration::from_millis(1500),
        "Ctrl-C took {took:?} to end the client"
    );
}

/// On a terminal, the line that says the server is unreachable is replaced by the one that
/// says it is back, not continued by it; and it fits the terminal, since one that wraps left a
/// row behind at every attempt on an outside probe's 80 columns (its erase reaches only the
/// row it is on).
#[test]
fn reconnected_replaces_the_unreachable_line() {
    let server = Server::start();
    let proxy = Proxy::start(server.addr);
    let (alice_dir, bob_dir, eve_dir) = (config_dir(), config_dir(), config_dir());
    let id = new_game(&server.url(), alice_dir.path(), bob_dir.path(), "bob");
    let (tx, mut lines) = Lines::new();
    let _eve = CliProcess::spawn_on_terminal_sized(
        "eve",
        &proxy.url(),
        eve_dir.path(),
        &["watch", &id],
        Some(50),
        &tx,
    );
    lines.follow("eve", |l| l.contains("first"));
    proxy.cut();
    std::thread::sleep(std::time::Duration::from_millis(2500));
    proxy.restore();
    let (_, back) = lines.follow("eve", |l| l.contains("reconnected to "));
    assert!(
        visible(&back).starts_with("reconnected to "),
        "{back:?} shows as {:?}",
        visible(&back)
    );
    let notices: Vec<String> = back
        .split('\r')
        .map(strip_csi)
        .filter(|row| row.contains("unreachable"))
        .collect();
    assert!(!notices.is_empty(), "{back:?}");
    for row in &notices {
        assert!(
            row.chars().count() <= 50,
            "{} columns: {row:?}",
            row.chars().count()
        );
    }
}

/// Holding both seats, `play` asks which; an answer it cannot read says so and how to answer,
/// where it used to ask the same question again with no word (an outside probe's finding).
#[test]
fn an_unreadable_seat_answer_says_how_to_answer() {
    let server = Server::start();
    let url = server.url();
    let dir = config_dir();
    // One config directory holds both seats: two people on one machine.
    let id = new_game(&url, dir.path(), dir.path(), "bob");
    let (tx, mut lines) = Lines::new();
    let mut both = CliProcess::spawn_on_terminal_sized(
        "both",
        &url,
        dir.path(),
        &["play", &id],
        Some(100),
        &tx,
    );
    std::thread::sleep(std::time::Duration::from_millis(500));
    both.send("third");
    lines.follow("both", |l| {
        strip_csi(l).contains("`third` is not a seat: answer first or second")
    });
    both.send("second");
    lines.follow("both", |l| {
        strip_csi(l).contains(&format!("playing {id} as second"))
    });
}

/// Alice and Bob playing on terminals of 100 columns: one move each (a game over before both
/// have moved has no rematch), then Alice resigned; both are at the game's end.
struct AfterResignation {
    _server: Server,
    _dirs: (tempfile::TempDir, tempfile::TempDir),
    alice: CliProcess,
    bob: CliProcess,
    lines: Lines,
}

/// Whether a line shows the legal moves, the start of a turn.
fn legal(line: &str) -> bool {
    strip_csi(line).contains("legal moves: ")
}

/// Alice and bob playing a new game on terminals 100 columns wide, alice's first move (`1r`)
/// played and bob to move.
fn on_terminals_after_a_move() -> AfterResignation {
    let server = Server::start();
    let url = server.url();
    let (alice_dir, bob_dir) = (config_dir(), config_dir());
    let id = new_game(&url, alice_dir.path(), bob_dir.path(), "bob");
    let (tx, mut lines) = Lines::new();
    let on_terminal = |who: &str, dir: &Path| {
        CliProcess::spawn_on_terminal_sized(who, &url, dir, &["play", &id], Some(100), &tx)
    };
    let mut alice = on_terminal("alice", alice_dir.path());
    let bob = on_terminal("bob", bob_dir.path());
    lines.follow("alice", legal);
    alice.send("1r");
    lines.follow("bob", legal);
    AfterResignation {
        _server: server,
        _dirs: (alice_dir, bob_dir),
        alice,
        bob,
        lines,
    }
}

fn after_resignation() -> AfterResignation {
    let AfterResignation {
        _server: server,
        _dirs: dirs,
        mut alice,
        mut bob,
        mut lines,
    } = on_terminals_after_a_move();
    bob.send("3r");
    lines.follow("alice", legal);
    alice.send("resign");
    std::thread::sleep(std::time::Duration::from_millis(300));
    alice.send("y");
    lines.follow("bob", |l| strip_csi(l).contains("game over: "));
    std::thread::sleep(std::time::Duration::from_millis(500));
    AfterResignation {
        _server: server,
        _dirs: dirs,
        alice,
        bob,
        lines,
    }
}

/// When the opponent declines the rematch, the session ends: its last words are the decline,
/// with no `rematch?` prompt drawn again under them (an outside probe found one left above
/// the shell's prompt).
#[test]
fn a_declined_rematch_leaves_no_prompt_behind() {
    // Every field bound: one left to `..` would be dropped here, the server with it.
    let AfterResignation {
        _server,
        _dirs,
        mut alice,
        mut bob,
        mut lines,
    } = after_resignation();
    bob.send("no");
    lines.follow("alice", |l| {
        strip_csi(l).contains("no rematch: bob declined")
    });
    alice.wait();
    lines.settle(std::time::Duration::from_millis(500));
    let after = shown_from(&lines, "alice", "no rematch: bob declined", visible);
    assert!(after.iter().all(|l| !l.contains("rematch?")), "{after:#?}");
}

/// `who`'s lines, each as `read` shows it, from the last that holds `from` on.
fn shown_from(lines: &Lines, who: &str, from: &str, read: fn(&str) -> String) -> Vec<String> {
    let shown: Vec<String> = lines.stdout_of(who).iter().map(|l| read(l)).collect();
    let at = shown
        .iter()
        .rposition(|l| l.contains(from))
        .unwrap_or_else(|| panic!("{who}: no line with {from:?}: {shown:#?}"));
    shown[at..].to_vec()
}

/// When the opponent accepts a rematch, the new game's lines come without the old `rematch?`
/// prompt drawn again before each of them (an outside probe saw it above every header line).
#[test]
fn an_accepted_rematch_leaves_no_prompt_behind() {
    // Every field bound: one left to `..` would be dropped here, the server with it.
    let AfterResignation {
        _server,
        _dirs,
        mut alice,
        mut bob,
        mut lines,
    } = after_resignation();
    let legal = |l: &str| strip_csi(l).contains("legal moves: ");
    // Bob offers first; Alice accepts.
    bob.send("rematch");
    lines.follow("alice", |l| strip_csi(l).contains("rematch"));
    std::thread::sleep(std::time::Duration::from_millis(500));
    alice.send("rematch");
    // The rematch swaps the seats: Bob moves first in it.
    lines.follow("bob", legal);
    lines.settle(std::time::Duration::from_millis(500));
    // Every text written, also what a later `\r` wrote over: the prompt must not be drawn
    // again at all once the rematch has started.
    let shown: Vec<String> = lines
        .stdout_of("bob")
        .iter()
        .map(|l| strip_csi(l))
        .collect();
    let offered = shown
        .iter()
        .position(|l| l.contains("rematch?"))
        .expect("the rematch prompt was shown");
    // The prompt stays while Bob waits, and is taken off by the line that says the rematch
    // started.
    let started = shown
        .iter()
        .position(|l| visible(l).starts_with("rematch: game "))
        .expect("the rematch's start is shown");
    let next = shown
        .iter()
        .rposition(|l| l.contains("legal moves: "))
        .expect("the rematch's first turn");
    assert!(offered < next, "{:#?}", &shown[offered.saturating_sub(3)..]);
    let stale = shown[started + 1..next]
        .iter()
        .filter(|l| l.contains("rematch?"))
        .count();
    assert_eq!(stale, 0, "{:#?}", &shown[offered.saturating_sub(3)..]);
}

/// After offering a rematch, the player is not asked `rematch?` again (an outside probe was),
/// but told what is left to say while the offer waits.
#[test]
fn an_offered_rematch_is_not_asked_again() {
    // Every field bound: one left to `..` would be dropped here, the server with it.
    let AfterResignation {
        _server,
        _dirs,
        mut alice,
        mut bob,
        mut lines,
    } = after_resignation();
    bob.send("rematch");
    lines.follow("bob", |l| {
        strip_csi(l).contains("rematch offered; waiting for alice")
    });
    std::thread::sleep(std::time::Duration::from_millis(500));
    alice.send("no");
    lines.follow("bob", |l| {
        strip_csi(l).contains("no rematch: alice declined")
    });
    bob.wait();
    lines.settle(std::time::Duration::from_millis(500));
    // Every text written, also what a later `\r` wrote over.
    let after = shown_from(
        &lines,
        "bob",
        "rematch offered; waiting for alice",
        strip_csi,
    );
    assert!(
        after.iter().all(|l| !l.contains("rematch? (")),
        "{after:#?}"
    );
    assert!(
        after
            .iter()
            .any(|l| l.contains("(no to call off the rematch")),
        "{after:#?}"
    );
}

/// `TERM=dumb` (Emacs's shell, some logs) takes no escape sequences: the client writes to it
/// as to a pipe. An outside probe counted 40 cursor movements in one short game there, from
/// the clocks redrawn every second and the animation.
#[test]
fn a_dumb_terminal_gets_no_escape_sequences() {
    let server = Server::start();
    let url = server.url();
    let dir = config_dir();
    let (tx, mut lines) = Lines::new();
    let mut me = CliProcess::spawn_on_dumb_terminal(
        "me",
        &url,
        dir.path(),
        &[
            "create",
            "--name",
            "dumbo",
            "--seat",
            "first",
            "--computer",
            "1",
            "--time",
            "5+0",
            "--play",
        ],
        &tx,
    );
    lines.follow("me", |l| l.contains("legal moves:"));
    me.send("1 r");
    lines.follow("me", |l| l.contains("move 2: "));
    // Long enough for the clocks to tick twice where a terminal takes them.
    std::thread::sleep(std::time::Duration::from_millis(2500));
    me.send("quit");
    me.wait();
    let shown = lines.stdout_of("me");
    assert!(shown.iter().any(|l| l.contains("clocks: ")), "{shown:#?}");
    let escaped: Vec<&String> = shown.iter().filter(|l| l.contains('\x1b')).collect();
    assert!(escaped.is_empty(), "{escaped:#?}");
}

/// Accepting the opponent's draw offer ends the game: no `legal moves:` line (which a script
/// reads as its turn) between the acceptance and the end, as an outside probe saw.
#[test]
fn an_accepted_draw_is_followed_by_the_end_not_by_a_turn() {
    // Every field bound: one left to `..` would be dropped here, the server with it.
    let AfterResignation {
        _server,
        _dirs,
        mut alice,
        mut bob,
        mut lines,
    } = on_terminals_after_a_move();
    // Bob offers and moves: the offer stands at alice's turn, and she accepts it there.
    bob.send("draw");
    std::thread::sleep(std::time::Duration::from_millis(300));
    bob.send("3r");
    lines.follow("alice", |l| strip_csi(l).contains("bob offers a draw"));
    lines.follow("alice", legal);
    std::thread::sleep(std::time::Duration::from_millis(300));
    alice.send("draw");
    lines.follow("alice", |l| strip_csi(l).contains("game over: "));
    std::thread::sleep(std::time::Duration::from_millis(300));
    let shown: Vec<String> = lines
        .stdout_of("alice")
        .iter()
        .map(|l| strip_csi(l))
        .collect();
    let accepted = shown
        .iter()
        .position(|l| l.contains("you accept the draw"))
        .expect("the acceptance");
    let over = shown
        .iter()
        .position(|l| l.contains("game over: "))
        .expect("the end");
    assert!(
        !shown[accepted..over]
            .iter()
            .any(|l| l.contains("legal moves:")),
        "{:?}",
        &shown[accepted..=over]
    );
    drop((alice, bob));
}
