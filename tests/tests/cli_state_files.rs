//! The `oanquan` CLI's own files, the token file, the account file, their locks and
//! `--ca-cert`, when they are not what the client wrote: a device (`/dev/zero`), a FIFO, a
//! directory, a huge file, a token file that cannot be written once the server has given a
//! seat, or one that repeats a seat. Each run has a deadline: a client that hangs on a FIFO or
//! reads `/dev/zero` for ever fails the test instead of stopping it.

use std::io::Read as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use oanquan_e2e::{CliProcess, Lines, Output, Server, Stream, cli_command, config_dir, run_cli};
use serde_json::Value;

/// Far more than any of these runs takes, far less than "for ever".
const DEADLINE: Duration = Duration::from_secs(20);

/// Runs `command` with empty stdin to its end, killing it (and failing) past [`DEADLINE`].
fn run_by_deadline(mut command: Command, what: &str) -> Output {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run oanquan");
    let read = |mut stream: Box<dyn std::io::Read + Send>| {
        thread::spawn(move || {
            let mut text = Vec::new();
            let _ = stream.read_to_end(&mut text);
            String::from_utf8_lossy(&text).into_owned()
        })
    };
    let stdout = read(Box::new(child.stdout.take().expect("stdout")));
    let stderr = read(Box::new(child.stderr.take().expect("stderr")));
    let deadline = Instant::now() + DEADLINE;
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{what}: still running after {DEADLINE:?} (blocked on a FIFO, or reading an \
                 endless file?)"
            );
        }
        thread::sleep(Duration::from_millis(20));
    };
    Output {
        code: status.code(),
        stdout: stdout.join().expect("stdout reader"),
        stderr: stderr.join().expect("stderr reader"),
    }
}

fn run(url: &str, dir: &Path, args: &[&str]) -> Output {
    run_by_deadline(cli_command(url, dir, args), &format!("oanquan {args:?}"))
}

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("run mkfifo");
    assert!(status.success(), "mkfifo {}", path.display());
}

#[cfg(unix)]
fn symlink_to_dev_zero(path: &Path) {
    std::os::unix::fs::symlink("/dev/zero", path).expect("symlink");
}

/// A refusal that names `file` and says what is wrong with it, with a failing exit code.
fn assert_refused(out: &Output, file: &str, why: &str) {
    assert!(
        matches!(out.code, Some(code) if code != 0),
        "exit code {:?}: {out:?}",
        out.code
    );
    assert!(out.stderr.contains(file), "{file} not named: {out:?}");
    assert!(out.stderr.contains(why), "`{why}` not said: {out:?}");
    assert!(!out.stderr.contains("panicked"), "{out:?}");
}

fn games_on(url: &str) -> usize {
    let dir = config_dir();
    let out = run(url, dir.path(), &["list", "--json"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let games: Value = serde_json::from_str(&out.stdout).expect("list --json");
    games["games"].as_array().map_or(0, Vec::len)
}

/// Defect 2: `/dev/zero` or a FIFO as the token file, its lock or the account file, and a
/// directory or a huge file as the token file: refused by name, quickly, with nothing asked of
/// the server.
#[cfg(unix)]
#[test]
fn state_files_that_are_no_regular_files_are_refused_at_once() {
    let server = Server::start();
    let url = server.url();

    // (what to put where, the file named, what is said)
    type Setup = fn(&Path);
    let cases: [(&str, Setup, &str, &str); 7] = [
        (
            "tokens.json -> /dev/zero",
            |d| symlink_to_dev_zero(&d.join("tokens.json")),
            "tokens.json",
            "not a regular file",
        ),
        (
            "tokens.json a FIFO",
            |d| mkfifo(&d.join("tokens.json")),
            "tokens.json",
            "a FIFO",
        ),
        (
            "tokens.json.lock a FIFO",
            |d| mkfifo(&d.join("tokens.json.lock")),
            "tokens.json.lock",
            "a FIFO",
        ),
        (
            "tokens.json.lock -> /dev/zero",
            |d| symlink_to_dev_zero(&d.join("tokens.json.lock")),
            "tokens.json.lock",
            "not a regular file",
        ),
        (
            "tokens.json a directory",
            |d| std::fs::create_dir(d.join("tokens.json")).expect("mkdir"),
            "tokens.json",
            "a directory",
        ),
        (
            "tokens.json of 17 MiB",
            |d| {
                let file = std::fs::File::create(d.join("tokens.json")).expect("create");
                file.set_len(17 << 20).expect("set_len");
            },
            "tokens.json",
            "larger than 16 MiB",
        ),
        (
            "account.json -> /dev/zero",
            |d| symlink_to_dev_zero(&d.join("account.json")),
            "account.json",
            "not a regular file",
        ),
    ];
    for (what, setup, file, why) in cases {
        let dir = config_dir();
        setup(dir.path());
        let out = run(&url, dir.path(), &["create", "--name", "Carol"]);
        assert_refused(&out, file, why);
        if file == "tokens.json" || file == "tokens.json.lock" {
            assert!(
                out.stderr.contains("nothing was asked of the server"),
                "{what}: {out:?}"
            );
        }
        if file == "tokens.json" {
            // A command that only reads the seats says the same (it takes no lock).
            let out = run(&url, dir.path(), &["resign", "q03rj1wb85wee4d8"]);
            assert_refused(&out, file, why);
        }
    }
    // The account file, read by a command that is not about seats either.
    let dir = config_dir();
    mkfifo(&dir.path().join("account.json"));
    let out = run(&url, dir.path(), &["me"]);
    assert_refused(&out, "account.json", "a FIFO");
    assert_eq!(games_on(&url), 0, "a game was created");
}

/// Defect 2, `--ca-cert`: a device, a FIFO or a directory is a usage error naming it.
#[cfg(unix)]
#[test]
fn a_ca_cert_that_is_no_regular_file_is_refused_at_once() {
    let dir = config_dir();
    let fifo = dir.path().join("ca.pem");
    mkfifo(&fifo);
    let fifo = fifo.to_str().expect("utf-8 path").to_owned();
    let folder = dir.path().to_str().expect("utf-8 path").to_owned();
    for (ca, why) in [
        ("/dev/zero", "not a regular file"),
        (fifo.as_str(), "a FIFO"),
        (folder.as_str(), "a directory"),
    ] {
        let out = run(
            "https://127.0.0.1:9",
            dir.path(),
            &["--ca-cert", ca, "list"],
        );
        assert_eq!(out.code, Some(2), "{ca}: {out:?}");
        assert_refused(&out, &format!("--ca-cert {ca}"), why);
    }
}

/// Defect 1: the token file becomes unwritable after the check `seek` makes before asking the
/// server (a directory takes its place while the seek waits): the server pairs the seek, and
/// the client, unable to save the token, says it on stderr with the game, the seat and how to
/// use it, then exits 1. The token printed does work.
#[test]
fn a_token_that_cannot_be_saved_is_shown_with_how_to_use_it() {
    let server = Server::start();
    let url = server.url();
    let (lan, minh) = (config_dir(), config_dir());
    let (tx, mut lines) = Lines::new();
    let mut lan_seek = CliProcess::spawn("lan", &url, lan.path(), &["seek", "--name", "Lan"], &tx);
    lines.follow("lan", |l| l.starts_with("seek "));
    // After the check, before the pairing: tokens.json is now a directory (not empty, so no
    // rename could replace it either).
    let tokens = lan.path().join("tokens.json");
    let _ = std::fs::remove_file(&tokens);
    std::fs::create_dir(&tokens).expect("mkdir tokens.json");
    std::fs::write(tokens.join("keep"), b"x").expect("write");
    let _minh_seek = CliProcess::spawn("minh", &url, minh.path(), &["seek", "--name", "Minh"], &tx);
    let status = lan_seek.wait();
    assert_eq!(status.code(), Some(1), "{}", lines.tail(40));
    // Its last lines may still be on their way.
    let lan_stderr = |lines: &Lines| -> Vec<String> {
        lines
            .transcript
            .iter()
            .filter(|l| l.who == "lan" && l.stream == Stream::Stderr)
            .map(|l| l.text.clone())
            .collect()
    };
    while !lan_stderr(&lines)
        .iter()
        .any(|l| l.contains("was not saved"))
    {
        lines.next_line();
    }
    let stderr = lan_stderr(&lines);
    let text = stderr.join("\n");
    assert!(
        text.contains("could not save the token of your seat"),
        "{text}"
    );
    assert!(text.contains("tokens.json"), "{text}");
    // `you hold the SEAT seat of game ID on URL`
    let held = stderr
        .iter()
        .find_map(|l| l.split_once("you hold the "))
        .map(|(_, rest)| rest.to_owned())
        .unwrap_or_else(|| panic!("no seat said: {text}"));
    let (seat, rest) = held.split_once(" seat of game ").expect("seat of game");
    let game = rest.split_whitespace().next().expect("game id").to_owned();
    let token = stderr
        .iter()
        .find_map(|l| l.strip_prefix("    "))
        .unwrap_or_else(|| panic!("no token line: {text}"))
        .to_owned();
    assert!(!token.is_empty(), "{text}");
    assert!(
        text.contains(&format!(
            "OANQUAN_TOKEN='{token}' oanquan --server {url} play {game} --seat {seat}"
        )),
        "{text}"
    );
    assert!(
        stderr.last().is_some_and(|l| l.contains("was not saved")),
        "the error comes last: {text}"
    );

    // What is not a token is refused before anything is sent, saying which flag (an outside
    // probe's token with a control character was called "the stored token", and a 100 KB one
    // "the server is busy").
    for bad in ["abc\u{1}def", &"x".repeat(100_000), "two words"] {
        let mut abort = cli_command(&url, lan.path(), &["abort", &game, "--seat", seat]);
        abort.env("OANQUAN_TOKEN", bad);
        let out = run_by_deadline(abort, "abort with a bad token");
        assert_eq!(out.code, Some(2), "{out:?}");
        assert!(out.stderr.contains("--token or OANQUAN_TOKEN"), "{out:?}");
    }

    // The token is not lost: the seat can be aborted with it (the token file is still broken),
    // read from a file with its newline too.
    let token = format!("{token}\n");
    let mut abort = cli_command(&url, lan.path(), &["abort", &game]);
    abort.env("OANQUAN_TOKEN", &token);
    let out = run_by_deadline(abort, "abort without --seat");
    assert_eq!(out.code, Some(2), "a token needs --seat: {out:?}");
    let mut abort = cli_command(&url, lan.path(), &["abort", &game, "--seat", seat]);
    abort.env("OANQUAN_TOKEN", &token);
    let out = run_by_deadline(abort, "abort with the token");
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        out.stdout.contains(&format!("aborted game {game}")),
        "{out:?}"
    );
}

/// `chattr -i` again when dropped, so that the directory can be removed after a failed test.
struct Immutable<'a>(Vec<&'a Path>);

impl Drop for Immutable<'_> {
    fn drop(&mut self) {
        for path in &self.0 {
            let _ = Command::new("chattr").arg("-i").arg(path).status();
        }
    }
}

/// `chattr +i` on `path`, where this machine allows it (root, on ext4 and the like).
fn make_immutable(path: &Path) -> bool {
    Command::new("chattr")
        .arg("+i")
        .arg(path)
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Defect 1, the common case: a token file that could not be written stops `create` before the
/// server is asked, so that no seat is left without its token: an immutable token file (which
/// stops root too) or directory, where `chattr` works, and a config directory where nothing can
/// be made (`/proc/sys`, on Linux), and a directory in the token file's place.
#[test]
fn create_checks_the_token_file_before_asking_the_server() {
    let server = Server::start();
    let url = server.url();

    let dir = config_dir();
    std::fs::create_dir(dir.path().join("tokens.json")).expect("mkdir");
    let out = run(&url, dir.path(), &["create", "--name", "Carol"]);
    assert_refused(&out, "tokens.json", "nothing was asked of the server");

    #[cfg(target_os = "linux")]
    {
        let out = run(&url, Path::new("/proc/sys"), &["create", "--name", "Carol"]);
        assert_refused(&out, "/proc/sys", "nothing was asked of the server");
    }

    let file = config_dir();
    let tokens = file.path().join("tokens.json");
    let made = run(&url, file.path(), &["create", "--name", "Carol"]);
    assert_eq!(made.code, Some(0), "{made:?}");
    let games = games_on(&url);
    let folder = config_dir();
    let _undo = Immutable(vec![&tokens, folder.path()]);
    if make_immutable(&tokens) && make_immutable(folder.path()) {
        // The file: said to be immutable.
        let out = run(&url, file.path(), &["create", "--name", "Carol"]);
        assert_refused(&out, &tokens.display().to_string(), "immutable");
        assert!(
            out.stderr.contains("nothing was asked of the server"),
            "{out:?}"
        );
        // The directory: its lock file cannot be made.
        let out = run(&url, folder.path(), &["create", "--name", "Carol"]);
        assert_refused(
            &out,
            &folder.path().display().to_string(),
            "nothing was asked of the server",
        );
    } else {
        eprintln!("chattr +i is not available here: the immutable files are not tried");
    }
    assert_eq!(games_on(&url), games, "a game was created");
}

/// Defect 3: a token file repeating one seat of a game (edited or merged by hand) holds one
/// seat, not both: commands act for it without asking for --seat.
#[test]
fn copies_of_one_seat_are_one_seat() {
    let server = Server::start();
    let url = server.url();
    let dir = config_dir();
    let out = run_cli(
        &url,
        dir.path(),
        &["create", "--name", "Lan", "--seat", "first"],
    );
    assert_eq!(out.code, Some(0), "{out:?}");
    let path = dir.path().join("tokens.json");
    let mut file: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("json");
    let entry = file["entries"][0].clone();
    let game = entry["game_id"].as_str().expect("game_id").to_owned();
    file["entries"] = Value::Array(vec![entry; 50]);
    std::fs::write(&path, serde_json::to_vec(&file).expect("json")).expect("write");

    let out = run(&url, dir.path(), &["abort", &game]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(!out.stderr.contains("both seats"), "{out:?}");
    let out = run(&url, dir.path(), &["resign", &game]);
    assert!(!out.stderr.contains("both seats"), "{out:?}");
    // Storing a seat again writes the file without the copies.
    let out = run(&url, dir.path(), &["create", "--name", "Lan"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let raw = std::fs::read_to_string(&path).expect("read");
    assert_eq!(raw.matches(&format!("\"{game}\"")).count(), 1, "{raw}");
}
