//! The real server on a real database file: what a clean stop leaves, and the online backup.

use std::collections::HashMap;
use std::path::Path;

use oanquan_e2e::{CliProcess, Lcg, Lines, Server, binaries, config_dir, random_move, run_cli};
use serde_json::Value;

fn json_of(stdout: &str) -> Value {
    serde_json::from_str(stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
}

/// The files in `dir`, sorted.
fn files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// What the one-shot commands see of the server's games: every game's status and moves, by id.
fn games_seen(url: &str) -> HashMap<String, (String, Value)> {
    let dir = config_dir();
    let list = run_cli(url, dir.path(), &["list", "--filter", "all", "--json"]);
    assert_eq!(list.code, Some(0), "{list:?}");
    json_of(&list.stdout)["games"]
        .as_array()
        .expect("games")
        .iter()
        .map(|game| {
            let id = game["id"].as_str().unwrap().to_owned();
            let moves = run_cli(url, dir.path(), &["moves", &id, "--json"]);
            assert_eq!(moves.code, Some(0), "{moves:?}");
            let status = game["status"].as_str().unwrap().to_owned();
            (id, (status, json_of(&moves.stdout)["moves"].clone()))
        })
        .collect()
}

/// A finished game against the computer, an active one and a waiting one.
fn play_some_games(url: &str) {
    let (alice, bob) = (config_dir(), config_dir());
    let created = run_cli(url, alice.path(), &["create", "--name", "alice", "--json"]);
    assert_eq!(created.code, Some(0), "{created:?}");
    let id = json_of(&created.stdout)["game"]["id"]
        .as_str()
        .expect("game.id")
        .to_owned();
    let joined = run_cli(url, bob.path(), &["join", &id, "--name", "bob"]);
    assert_eq!(joined.code, Some(0), "{joined:?}");
    let waiting = run_cli(url, bob.path(), &["create", "--name", "bob"]);
    assert_eq!(waiting.code, Some(0), "{waiting:?}");

    let lan = config_dir();
    let (tx, mut lines) = Lines::new();
    let mut players = HashMap::from([(
        "lan".to_owned(),
        CliProcess::spawn(
            "lan",
            url,
            lan.path(),
            &["create", "--name", "lan", "--computer", "random", "--play"],
            &tx,
        ),
    )]);
    let mut rng = Lcg(5);
    oanquan_e2e::drive(
        &mut lines,
        &mut players,
        &["lan"],
        |_, moves, lines| random_move(&mut rng, moves, lines),
        |_| {},
    );
}

/// After SIGTERM only the database file (and the harmless lock file) is left: the write-ahead
/// log is folded in, so the file copied alone holds every game and move.
#[test]
fn a_clean_stop_leaves_one_file_that_holds_every_game() {
    let dir = tempfile::tempdir().unwrap();
    let database = dir.path().join("oanquan.db");
    let server = Server::start_on(&database, &["--computer-move-time", "5ms"]);
    play_some_games(&server.url());
    let before = games_seen(&server.url());
    assert_eq!(before.len(), 3, "{before:?}");
    assert!(
        before
            .values()
            .any(|(_, moves)| moves.as_array().is_some_and(|moves| !moves.is_empty()))
    );
    assert!(server.terminate().success());
    assert_eq!(files(dir.path()), ["oanquan.db", "oanquan.db.lock"]);

    let copy = tempfile::tempdir().unwrap();
    std::fs::copy(&database, copy.path().join("oanquan.db")).unwrap();
    let server = Server::start_on(&copy.path().join("oanquan.db"), &[]);
    assert_eq!(games_seen(&server.url()), before);
}

#[test]
fn a_clean_stop_without_any_request_leaves_no_log_either() {
    let dir = tempfile::tempdir().unwrap();
    for _ in 0..2 {
        // Once on a new file, once on the existing one.
        let server = Server::start_on(&dir.path().join("oanquan.db"), &[]);
        assert!(server.terminate().success());
        assert_eq!(files(dir.path()), ["oanquan.db", "oanquan.db.lock"]);
    }
}

/// The server started on `database`, expected to refuse it: its exit status and what it said.
fn refused_start(database: &Path) -> (Option<i32>, String) {
    let mut child = std::process::Command::new(&binaries().server)
        .args(["--listen", "127.0.0.1:0", "--database"])
        .arg(database)
        .env_remove("OANQUAN_IN_MEMORY")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start oanquan-server");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the server") {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("the server started instead of refusing the file");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let mut said = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut said).unwrap();
    (status.code(), said)
}

/// A killed server whose write-ahead log is then lost (emptied, or the file copied without it):
/// the next start refuses, says why and what to do, and leaves the file alone; with the log
/// back, every game and move is there. An outside probe emptied the log: the next start said
/// the database was intact and served none of the 344 moves it had acknowledged.
#[test]
fn a_killed_servers_database_without_its_log_is_refused_until_the_log_is_back() {
    let dir = tempfile::tempdir().unwrap();
    let database = dir.path().join("oanquan.db");
    let server = Server::start_on(&database, &["--computer-move-time", "5ms"]);
    play_some_games(&server.url());
    let before = games_seen(&server.url());
    drop(server); // SIGKILL
    let wal = dir.path().join("oanquan.db-wal");
    let log = std::fs::read(&wal).expect("a killed server leaves its log");
    assert!(!log.is_empty());
    std::fs::write(&wal, b"").unwrap();
    let file = std::fs::read(&database).unwrap();
    let (code, said) = refused_start(&database);
    assert_eq!(code, Some(1), "{said}");
    assert!(
        said.contains("did not stop cleanly") && said.contains("oanquan.db-wal"),
        "{said}"
    );
    assert_eq!(
        std::fs::read(&database).unwrap(),
        file,
        "the file is left alone"
    );
    std::fs::write(&wal, &log).unwrap();
    let server = Server::start_on(&database, &[]);
    assert_eq!(games_seen(&server.url()), before);
}

/// What a server started on `database` logs at WARN before it listens (it is then killed).
fn warnings_at_start(database: &Path) -> String {
    let log = database.with_extension("log");
    let mut child = std::process::Command::new(&binaries().server)
        .args(["--listen", "127.0.0.1:0", "--database"])
        .arg(database)
        .env_remove("OANQUAN_IN_MEMORY")
        .env("RUST_LOG", "warn")
        .env("NO_COLOR", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("start oanquan-server");
    let mut first = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut first,
    )
    .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(first.starts_with("oanquan-server listening on"), "{first}");
    std::fs::read_to_string(&log).unwrap()
}

/// A killed server's file copied alone (no `-wal`, no `.lock`) cannot be checked against
/// the commits its server made: it opens with what it holds, and the server says so at start.
/// An outside probe's such copy opened without a word, a whole game short. Copied with its
/// `-wal` and `.lock` (`cp -a` of the directory), the copy is another file than the one the
/// `.lock` records: not checked either, and the warning says so (a later probe's was told
/// there was no `.lock`, beside the one it had copied).
#[test]
fn a_killed_servers_file_copied_alone_opens_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let database = dir.path().join("oanquan.db");
    let server = Server::start_on(&database, &["--computer-move-time", "5ms"]);
    play_some_games(&server.url());
    drop(server); // SIGKILL
    let alone = tempfile::tempdir().unwrap();
    let copy = alone.path().join("oanquan.db");
    std::fs::copy(&database, &copy).unwrap();
    let said = warnings_at_start(&copy);
    assert!(
        said.contains("did not stop cleanly") && said.contains("no .lock beside it"),
        "{said}"
    );
    let whole = tempfile::tempdir().unwrap();
    for suffix in ["", "-wal", ".lock"] {
        let name = format!("oanquan.db{suffix}");
        std::fs::copy(dir.path().join(&name), whole.path().join(&name)).unwrap();
    }
    let said = warnings_at_start(&whole.path().join("oanquan.db"));
    assert!(
        said.contains("did not stop cleanly")
            && said.contains("records the commits of another file")
            && !said.contains("no .lock"),
        "{said}"
    );
    // The killed server's own file, with its log and `.lock`, still starts.
    let server = Server::start_on(&database, &[]);
    drop(server);
}

/// `oanquan-server backup`, run to completion.
fn backup(args: &[&str]) -> std::process::Output {
    std::process::Command::new(&binaries().server)
        .arg("backup")
        .args(args)
        .env_remove("OANQUAN_DATABASE")
        .env_remove("OANQUAN_IN_MEMORY")
        .output()
        .expect("run oanquan-server backup")
}

/// A backup taken while the server runs (it holds the database's lock) is one checked file;
/// a server started on it finds every game and move. An existing file is replaced only with
/// --force.
#[test]
fn an_online_backup_restores_every_game() {
    let dir = tempfile::tempdir().unwrap();
    let database = dir.path().join("oanquan.db");
    let server = Server::start_on(&database, &["--computer-move-time", "5ms"]);
    play_some_games(&server.url());
    let before = games_seen(&server.url());

    let shelf = tempfile::tempdir().unwrap();
    let copy = shelf.path().join("backup.db");
    let (from, to) = (database.to_str().unwrap(), copy.to_str().unwrap());
    let made = backup(&["--database", from, "--to", to]);
    assert!(made.status.success(), "{made:?}");
    let said = String::from_utf8_lossy(&made.stdout);
    assert!(
        said.starts_with("backed up ") && said.contains("3 games"),
        "{said}"
    );
    assert_eq!(files(shelf.path()), ["backup.db"], "one file, nothing else");

    let bytes = std::fs::read(&copy).unwrap();
    let again = backup(&["--database", from, "--to", to]);
    assert_eq!(again.status.code(), Some(1), "{again:?}");
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("--force"),
        "{again:?}"
    );
    assert_eq!(std::fs::read(&copy).unwrap(), bytes, "left as it was");
    // Partial copies that killed backups left (their processes are gone; no pid reaches
    // 999999999) are removed and named; one of a live process (this test's) stays.
    for stale in [
        "backup.db.partial-999999999",
        "backup.db.partial-999999999-journal",
        "backup.db.partial-999999998",
    ] {
        std::fs::write(shelf.path().join(stale), b"half a copy").unwrap();
    }
    let live = format!("backup.db.partial-{}", std::process::id());
    std::fs::write(shelf.path().join(&live), b"being written").unwrap();
    let forced = backup(&["--database", from, "--to", to, "--force"]);
    assert!(forced.status.success(), "{forced:?}");
    let said = String::from_utf8_lossy(&forced.stdout);
    assert!(
        said.contains("backup.db.partial-999999998, left by a backup that did not finish")
            && said.contains("backup.db.partial-999999999, left by a backup that did not finish"),
        "{said}"
    );
    assert_eq!(files(shelf.path()), ["backup.db".to_owned(), live.clone()]);
    std::fs::remove_file(shelf.path().join(&live)).unwrap();
    // Onto the database itself, even written another way or through a hard link and with
    // --force: refused, since the rename would pull the file from under the running server.
    let hard_link = dir.path().join("hard-link.db");
    std::fs::hard_link(&database, &hard_link).unwrap();
    for itself in [dir.path().join(".").join("oanquan.db"), hard_link.clone()] {
        let refused = backup(&[
            "--database",
            from,
            "--to",
            itself.to_str().unwrap(),
            "--force",
        ]);
        assert_eq!(refused.status.code(), Some(1), "{itself:?}: {refused:?}");
        assert!(
            String::from_utf8_lossy(&refused.stderr).contains("is the database itself"),
            "{refused:?}"
        );
    }
    std::fs::remove_file(&hard_link).unwrap();
    // Onto something that is not a file, with --force: refused, and left as it was (as root,
    // `--to /dev/null --force` would have replaced the machine's /dev/null).
    let fifo = shelf.path().join("fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let folder = shelf.path().join("folder");
    std::fs::create_dir(&folder).unwrap();
    for special in [&fifo, &folder] {
        let refused = backup(&[
            "--database",
            from,
            "--to",
            special.to_str().unwrap(),
            "--force",
        ]);
        assert_eq!(refused.status.code(), Some(1), "{special:?}: {refused:?}");
        assert!(
            String::from_utf8_lossy(&refused.stderr).contains("is not a regular file"),
            "{refused:?}"
        );
    }
    use std::os::unix::fs::FileTypeExt as _;
    assert!(
        std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo()
    );
    assert_eq!(files(shelf.path()), ["backup.db", "fifo", "folder"]);
    // Into a folder that does not exist: said so, naming the folder, not a temporary file.
    let nowhere = shelf.path().join("no-such-folder");
    let refused = backup(&[
        "--database",
        from,
        "--to",
        nowhere.join("copy.db").to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{refused:?}");
    assert!(
        stderr.contains(&format!("{}: no such folder", nowhere.display()))
            && !stderr.contains("partial"),
        "{stderr}"
    );
    assert!(!nowhere.exists());

    // The running server did not notice.
    assert_eq!(games_seen(&server.url()), before);
    drop(server);
    let restored = Server::start_on(&copy, &[]);
    assert_eq!(games_seen(&restored.url()), before);
}

/// A backup of a stopped server's database leaves its folder as the clean stop left it: no
/// empty `-wal` (which would read as a crash's log) or `-shm` from the backup's look at it.
/// While a server runs, its own `-wal` and `-shm` are never touched (the test above).
#[test]
fn a_backup_of_a_stopped_database_leaves_its_folder_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let database = dir.path().join("oanquan.db");
    let server = Server::start_on(&database, &["--computer-move-time", "5ms"]);
    play_some_games(&server.url());
    let before = games_seen(&server.url());
    assert!(server.terminate().success());
    assert_eq!(files(dir.path()), ["oanquan.db", "oanquan.db.lock"]);
    let lock = std::fs::read(dir.path().join("oanquan.db.lock")).unwrap();

    let shelf = tempfile::tempdir().unwrap();
    let copy = shelf.path().join("backup.db");
    let made = backup(&[
        "--database",
        database.to_str().unwrap(),
        "--to",
        copy.to_str().unwrap(),
    ]);
    assert!(made.status.success(), "{made:?}");
    assert_eq!(files(dir.path()), ["oanquan.db", "oanquan.db.lock"]);
    assert_eq!(
        std::fs::read(dir.path().join("oanquan.db.lock")).unwrap(),
        lock,
        "the last server's pid stays in its lock file"
    );
    // A backup is a single file out of WAL mode: reading it makes no companions at all.
    let again = shelf.path().join("backup-of-backup.db");
    let made = backup(&[
        "--database",
        copy.to_str().unwrap(),
        "--to",
        again.to_str().unwrap(),
    ]);
    assert!(made.status.success(), "{made:?}");
    assert_eq!(files(shelf.path()), ["backup-of-backup.db", "backup.db"]);
    let restored = Server::start_on(&again, &[]);
    assert_eq!(games_seen(&restored.url()), before);
}

#[test]
fn backup_refuses_what_is_not_a_database_of_ours() {
    let dir = tempfile::tempdir().unwrap();
    let notes = dir.path().join("notes.txt");
    std::fs::write(&notes, "not a database\n".repeat(300)).unwrap();
    let to = dir.path().join("copy.db");
    let folder = dir.path().join("folder.db");
    std::fs::create_dir(&folder).unwrap();
    for source in [notes.as_path(), &dir.path().join("missing.db"), &folder] {
        let refused = backup(&[
            "--database",
            source.to_str().unwrap(),
            "--to",
            to.to_str().unwrap(),
        ]);
        assert_eq!(refused.status.code(), Some(1), "{refused:?}");
        assert!(!refused.stderr.is_empty());
        assert!(!to.exists());
    }
    assert_eq!(
        files(dir.path()),
        ["folder.db", "notes.txt"],
        "no partial copy left"
    );

    // Names SQLite does not read as files: an in-memory source, URIs either way.
    for (from, to) in [
        (":memory:", "copy.db"),
        ("file:notes.txt", "copy.db"),
        ("notes.txt", "file:copy.db"),
        ("notes.txt", "file:copy.db?mode=memory"),
    ] {
        let refused = std::process::Command::new(&binaries().server)
            .current_dir(dir.path())
            .args(["backup", "--database", from, "--to", to])
            .env_remove("OANQUAN_DATABASE")
            .env_remove("OANQUAN_IN_MEMORY")
            .output()
            .expect("run oanquan-server backup");
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert_eq!(refused.status.code(), Some(1), "{from} → {to}: {stderr}");
        assert!(
            stderr.contains("not as a file name"),
            "{from} → {to}: {stderr}"
        );
        assert_eq!(
            files(dir.path()),
            ["folder.db", "notes.txt"],
            "{from} → {to}"
        );
    }
}
