//! Storage faults: a damaged game fails alone, a store that cannot write answers UNAVAILABLE
//! and turns health NOT_SERVING until it can again, and files the server cannot use are
//! refused at start.

mod common;

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use oanquan_proto::v1 as pb;
use oanquan_server::domain::{GameStore, OpenError, SqliteStore};
use oanquan_server::{Config, ServeError, Storage};
use pb::lobby_event::Kind as LobbyKind;
use tokio::net::TcpListener;
use tokio_stream::StreamExt as _;
use tonic::Code;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

fn on_disk(path: &Path) -> Config {
    let mut settings = config();
    settings.storage = Storage::Sqlite(path.to_owned());
    settings.games.idle_game_timeout = Duration::ZERO;
    settings
}

async fn list(client: &mut Games, filter: pb::GameFilter) -> Vec<String> {
    client
        .list_games(pb::ListGamesRequest {
            filter: filter.into(),
            page_size: 0,
            page_token: String::new(),
        })
        .await
        .expect("ListGames answers")
        .into_inner()
        .games
        .into_iter()
        .map(|game| game.id)
        .collect()
}

/// The next lobby event that is not a heartbeat.
async fn next_lobby_event(stream: &mut tonic::Streaming<pb::WatchLobbyResponse>) -> pb::LobbyEvent {
    loop {
        let event = next(stream)
            .await
            .expect("the lobby stream goes on")
            .expect("the lobby stream does not end")
            .event
            .unwrap();
        if !matches!(event.kind, Some(LobbyKind::Heartbeat(_))) {
            return event;
        }
    }
}

/// The games of one server run, before anything is damaged.
struct Played {
    /// Waiting for a second player.
    open: String,
    /// Active, one move played.
    active: String,
    /// Against the computer, which is to move.
    computer: String,
    /// The one to damage.
    victim: (String, String, String),
}

/// Plays a first server on `path` and stops it cleanly.
async fn games_on(path: &Path) -> Played {
    // The computer thinks for a minute: it is still to move when the server stops.
    let mut settings = on_disk(path);
    settings.computer.computer_move_time = Duration::from_secs(60);
    let server = start(settings).await;
    let mut client = server.games().await;
    let (open, _) = create(&mut client, "standard").await;
    let (active, first, _) = started(&mut client, "standard").await;
    play(
        &mut client,
        &active,
        &first,
        1,
        pb::Direction::Right,
        Some(0),
    )
    .await
    .unwrap();
    let computer = client
        .create_game(pb::CreateGameRequest {
            rules: preset("standard"),
            start_position: None,
            seat: pb::Player::Second.into(),
            display_name: "Lan".into(),
            computer: Some(pb::ComputerOpponent { level: 7 }),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .game
        .unwrap()
        .id;
    let victim = started(&mut client, "standard").await;
    server.stop().await.unwrap();
    Played {
        open: open.id,
        active,
        computer,
        victim,
    }
}

/// Sets the field at `pointer` of the victim's data (in its `games` row, and under `/game` in
/// its lobby `GameCreated` event, which holds the same data) to `value`: valid JSON, a damaged
/// game.
fn rewrite_the_victim(path: &Path, victim: &str, pointer: &str, value: serde_json::Value) {
    let conn = rusqlite::Connection::open(path).unwrap();
    let rewrite = |json: &str, pointer: &str| {
        let mut data: serde_json::Value = serde_json::from_str(json).unwrap();
        *data.pointer_mut(pointer).expect(pointer) = value.clone();
        data.to_string()
    };
    let info: String = conn
        .query_row("SELECT info FROM games WHERE id = ?1", [victim], |row| {
            row.get(0)
        })
        .unwrap();
    conn.execute(
        "UPDATE games SET info = ?2 WHERE id = ?1",
        [victim, &rewrite(&info, pointer)],
    )
    .unwrap();
    let (sequence, event): (i64, String) = conn
        .query_row(
            "SELECT sequence, event FROM lobby_events
             WHERE event LIKE '%game_created%' AND instr(event, ?1) > 0",
            [victim],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .unwrap();
    conn.execute(
        "UPDATE lobby_events SET event = ?2 WHERE sequence = ?1",
        rusqlite::params![sequence, rewrite(&event, &format!("/game{pointer}"))],
    )
    .unwrap();
}

/// The victim's start position as the clamped row had it: a square at 255 stones, so
/// that the stones no longer add up and the game does not decode.
fn clamp_a_square(path: &Path, victim: &str) {
    rewrite_the_victim(path, victim, "/start/squares/1", 255.into());
}

/// The victim's move count, the largest a row can say.
fn inflate_the_move_count(path: &Path, victim: &str) {
    rewrite_the_victim(path, victim, "/move_count", u32::MAX.into());
}

/// Damages bytes of the file itself, below SQLite: the `:` after each `"id"` key holding the
/// victim's id (in its row and in the events that copy its data) becomes `#`. The pages stay
/// well-formed, so SQLite's integrity check passes and only that JSON is broken.
fn flip_bytes(path: &Path, victim: &str) {
    let wal = path.with_extension("db-wal");
    assert!(!wal.exists(), "a clean stop leaves everything in the file");
    let mut bytes = std::fs::read(path).unwrap();
    let pattern = format!("\"id\":\"{victim}\"");
    let mut flipped = 0;
    let mut from = 0;
    while let Some(at) = bytes[from..]
        .windows(pattern.len())
        .position(|window| window == pattern.as_bytes())
    {
        bytes[from + at + 4] = b'#';
        flipped += 1;
        from += at + pattern.len();
    }
    assert!(flipped > 0, "the victim's data is in the file");
    std::fs::write(path, &bytes).unwrap();
}

/// Everything but the damaged game goes on: listings, the lobby (snapshot and resume), the
/// computer's turn resumed at start and the idle reaper; the damaged game's own calls answer
/// DATA_LOSS naming it.
async fn one_damaged_game_fails_alone(damage: fn(&Path, &str)) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("oanquan.db");
    let games = games_on(&path).await;
    let (victim, victim_token, _) = &games.victim;
    damage(&path, victim);

    let mut settings = on_disk(&path);
    settings.computer.computer_move_time = Duration::from_millis(10);
    let server = start(settings).await;
    let mut client = server.games().await;
    let all = list(&mut client, pb::GameFilter::All).await;
    assert_eq!(
        all,
        [
            games.computer.clone(),
            games.active.clone(),
            games.open.clone()
        ]
    );
    assert_eq!(
        list(&mut client, pb::GameFilter::Open).await,
        std::slice::from_ref(&games.open)
    );
    assert!(
        !list(&mut client, pb::GameFilter::Active)
            .await
            .contains(victim)
    );

    // The damaged game's own calls.
    let mut refusals = vec![
        client
            .get_game(pb::GetGameRequest {
                game_id: victim.clone(),
            })
            .await
            .unwrap_err(),
        client
            .list_moves(pb::ListMovesRequest {
                game_id: victim.clone(),
                ..Default::default()
            })
            .await
            .unwrap_err(),
        client
            .watch_game(pb::WatchGameRequest {
                game_id: victim.clone(),
                after_sequence: None,
                ..Default::default()
            })
            .await
            .unwrap_err(),
    ];
    refusals.push(
        play(
            &mut client,
            victim,
            victim_token,
            1,
            pb::Direction::Left,
            None,
        )
        .await
        .unwrap_err(),
    );
    for status in refusals {
        assert_eq!(status.code(), Code::DataLoss, "{status:?}");
        assert!(status.message().contains(victim.as_str()), "{status:?}");
        assert!(status.message().contains("damaged"), "{status:?}");
    }

    // The lobby: a snapshot without the damaged game, and a resume that steps over its event.
    let mut lobby = watch_lobby(&mut client, None).await;
    let snapshot = next_lobby_event(&mut lobby).await;
    let Some(LobbyKind::Snapshot(games_now)) = snapshot.kind else {
        panic!("a snapshot first: {snapshot:?}")
    };
    let listed: HashSet<_> = games_now.games.into_iter().map(|game| game.id).collect();
    assert_eq!(
        listed,
        HashSet::from([
            games.open.clone(),
            games.active.clone(),
            games.computer.clone()
        ])
    );
    let mut resumed = watch_lobby(&mut client, Some(1)).await;
    loop {
        let event = next_lobby_event(&mut resumed).await;
        if let Some(LobbyKind::GameCreated(created)) = &event.kind {
            assert_ne!(&created.game.as_ref().unwrap().id, victim);
        }
        if event.sequence >= snapshot.sequence {
            break;
        }
    }

    // The computer's turn, resumed at start.
    let (mut watch, first) = watch_snapshot(&mut client, &games.computer).await;
    let Some(pb::game_event::Kind::Snapshot(state)) = first.kind else {
        unreachable!()
    };
    if state.game.unwrap().move_count == 0 {
        let event = next_game_event(&mut watch).await.unwrap();
        assert!(
            matches!(event.kind, Some(pb::game_event::Kind::MovePlayed(_))),
            "{event:?}"
        );
    }
    let mut health = HealthClient::new(server.channel().await);
    let status = health
        .check(HealthCheckRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status.status(), ServingStatus::Serving);
    let mut lobby = watch_lobby(&mut client, None).await;
    let last = next_lobby_event(&mut lobby).await.sequence;
    server.stop().await.unwrap();

    // The idle reaper aborts the other games.
    let mut settings = on_disk(&path);
    settings.games.idle_game_timeout = Duration::from_millis(200);
    // Active untimed games are reaped once idle past the abandonment time: make that nothing.
    settings.games.abandon_after = Duration::from_millis(1);
    let server = start(settings).await;
    let mut client = server.games().await;
    let mut lobby = watch_lobby(&mut client, Some(last)).await;
    let mut waiting = HashSet::from([games.open, games.active, games.computer]);
    while !waiting.is_empty() {
        if let Some(LobbyKind::GameFinished(finished)) = next_lobby_event(&mut lobby).await.kind {
            assert!(waiting.remove(&finished.game_id), "{finished:?}");
        }
    }
    server.stop().await.unwrap();
}

#[tokio::test]
async fn a_game_stored_with_a_clamped_square_fails_alone() {
    one_damaged_game_fails_alone(clamp_a_square).await;
}

#[tokio::test]
async fn a_game_whose_row_claims_four_billion_moves_fails_alone() {
    one_damaged_game_fails_alone(inflate_the_move_count).await;
}

#[tokio::test]
async fn bytes_damaged_inside_a_page_break_only_their_game() {
    one_damaged_game_fails_alone(flip_bytes).await;
}

/// The position: a square over what a square can hold, balanced by a negative capture.
/// Whatever refuses it (request validation, or the store's read-back check before the commit),
/// it must not be stored, and the lobby must stay readable.
#[tokio::test]
async fn a_game_that_would_not_read_back_is_not_stored() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("oanquan.db");
    let server = start(on_disk(&path)).await;
    let mut client = server.games().await;
    let status = client
        .create_game(pb::CreateGameRequest {
            rules: preset("standard"),
            start_position: Some(pb::Position {
                squares: vec![10, 1000, 5, 5, 5, 5, 10, 5, 5, 5, 5, 5],
                captured: Some(pb::PlayerPair {
                    first: -995,
                    second: 0,
                }),
                to_move: pb::Player::First.into(),
                ..Default::default()
            }),
            seat: pb::Player::First.into(),
            display_name: "Lan".into(),
            computer: None,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert!(
        matches!(status.code(), Code::InvalidArgument | Code::Internal),
        "{status:?}"
    );
    assert!(list(&mut client, pb::GameFilter::All).await.is_empty());
    server.stop().await.unwrap();
    let server = start(on_disk(&path)).await;
    let mut client = server.games().await;
    assert!(list(&mut client, pb::GameFilter::All).await.is_empty());
    let mut lobby = watch_lobby(&mut client, None).await;
    assert!(matches!(
        next_lobby_event(&mut lobby).await.kind,
        Some(LobbyKind::Snapshot(_))
    ));
    server.stop().await.unwrap();
}

/// A server on a store the test keeps a handle to.
struct Served {
    addr: std::net::SocketAddr,
    stop: tokio::sync::oneshot::Sender<()>,
    handle: tokio::task::JoinHandle<Result<(), ServeError>>,
}

async fn serve(store: Arc<dyn GameStore>) -> Served {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let handle = tokio::spawn(oanquan_server::run_with_store(
        listener,
        config(),
        store,
        async {
            let _ = stopped.await;
        },
    ));
    Served { addr, stop, handle }
}

async fn wait_for_health(
    statuses: &mut tonic::Streaming<tonic_health::pb::HealthCheckResponse>,
    wanted: ServingStatus,
) {
    let seen = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(response) = statuses.next().await {
            if response.unwrap().status() == wanted {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(seen, Ok(true), "health never turned {wanted:?}");
}

/// A fault of the writing connection, and its cure.
type Fault = fn(&mut rusqlite::Connection);

/// `max_page_count` at the current size: SQLite refuses to grow the file with SQLITE_FULL,
/// "database or disk is full", as on a full disk.
fn fill_the_disk(conn: &mut rusqlite::Connection) {
    let pages: i64 = conn
        .query_row("PRAGMA page_count", [], |row| row.get(0))
        .unwrap();
    conn.pragma_update(None, "max_page_count", pages).unwrap();
}

fn free_the_disk(conn: &mut rusqlite::Connection) {
    conn.pragma_update(None, "max_page_count", 1_073_741_823)
        .unwrap();
}

/// `query_only`: every write fails with SQLITE_READONLY, as when the file turns read-only.
fn make_read_only(conn: &mut rusqlite::Connection) {
    conn.pragma_update(None, "query_only", true).unwrap();
}

fn make_writable(conn: &mut rusqlite::Connection) {
    conn.pragma_update(None, "query_only", false).unwrap();
}

/// While `fault` lasts: UNAVAILABLE with a message to retry, health NOT_SERVING on every
/// service, reads still served. After `cure`: SERVING again by itself, with no request, and
/// writes work.
async fn writes_fail_then_recover(fault: Fault, cure: Fault) {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(dir.path().join("oanquan.db")).unwrap());
    let served = serve(Arc::clone(&store) as Arc<dyn GameStore>).await;
    let channel = tonic::transport::Channel::from_shared(format!("http://{}", served.addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut client = Games::new(channel.clone());
    let mut health = HealthClient::new(channel);
    let mut watches = Vec::new();
    for service in ["", "oanquan.v1.GameService", "oanquan.v1.RulesService"] {
        let mut statuses = health
            .watch(HealthCheckRequest {
                service: service.into(),
            })
            .await
            .unwrap()
            .into_inner();
        wait_for_health(&mut statuses, ServingStatus::Serving).await;
        watches.push(statuses);
    }
    let (kept, _) = create(&mut client, "standard").await;

    assert!(store.on_writer_for_tests(fault).await.is_some());
    let mut refused = None;
    // A full "disk" refuses the first commit that needs a new page, a few games in.
    for _ in 0..200 {
        let created = client
            .create_game(pb::CreateGameRequest {
                rules: preset("standard"),
                start_position: None,
                seat: pb::Player::First.into(),
                display_name: "Lan".into(),
                computer: None,
                ..Default::default()
            })
            .await;
        if let Err(status) = created {
            refused = Some(status);
            break;
        }
    }
    let status = refused.expect("writes fail");
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert!(
        status.message().contains("storage unavailable"),
        "{status:?}"
    );
    assert!(status.message().contains("retry later"), "{status:?}");
    for statuses in &mut watches {
        wait_for_health(statuses, ServingStatus::NotServing).await;
    }
    client
        .get_game(pb::GetGameRequest {
            game_id: kept.id.clone(),
        })
        .await
        .expect("reads go on");

    assert!(store.on_writer_for_tests(cure).await.is_some());
    for statuses in &mut watches {
        wait_for_health(statuses, ServingStatus::Serving).await;
    }
    create(&mut client, "standard").await;
    drop(watches);
    let _ = served.stop.send(());
    served.handle.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_answers_unavailable_and_health_recovers_by_itself() {
    writes_fail_then_recover(fill_the_disk, free_the_disk).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_turned_read_only_answers_unavailable_and_recovers_by_itself() {
    writes_fail_then_recover(make_read_only, make_writable).await;
}

async fn refused(path: &Path) -> OpenError {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    match oanquan_server::run(listener, on_disk(path), std::future::pending()).await {
        Err(ServeError::Storage(error)) => error,
        other => panic!("expected a storage error, got {other:?}"),
    }
}

#[tokio::test]
async fn an_empty_file_is_refused_not_taken_for_a_new_database() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("oanquan.db");
    std::fs::write(&path, b"").unwrap();
    let error = refused(&path).await;
    assert!(matches!(error, OpenError::Empty { .. }), "{error}");
    assert!(error.to_string().contains("empty file"), "{error}");
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 0, "untouched");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "no .lock left beside it"
    );
}

#[tokio::test]
async fn a_directory_is_refused_by_name_not_as_a_disk_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("oanquan.db");
    std::fs::create_dir(&path).unwrap();
    let error = refused(&path).await;
    assert!(matches!(error, OpenError::NotAFile { .. }), "{error}");
    assert!(error.to_string().contains("is a directory"), "{error}");
    assert_eq!(std::fs::read_dir(&path).unwrap().count(), 0, "untouched");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "no .lock left beside it"
    );
}

/// An outside probe's mistyped folder read "opening the lock file: No such file or directory",
/// naming a file it never gave.
#[tokio::test]
async fn a_missing_folder_is_named_and_not_made() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("nodir");
    let path = folder.join("oanquan.db");
    let error = refused(&path).await;
    assert!(matches!(error, OpenError::NoFolder { .. }), "{error}");
    let message = error.to_string();
    assert!(
        message.contains(&format!("its folder {} does not exist", folder.display())),
        "{message}"
    );
    assert!(message.contains("Nothing was changed"), "{message}");
    assert!(
        !message.contains("  "),
        "one space between words: {message}"
    );
    assert!(!folder.exists(), "no folder made");
    // A file where the path wants a folder.
    let file = dir.path().join("afile");
    std::fs::write(&file, b"x").unwrap();
    let error = refused(&file.join("x.db")).await;
    assert!(matches!(error, OpenError::NotAFolder { .. }), "{error}");
    assert!(
        error.to_string().contains("should be a folder is a file"),
        "{error}"
    );
    assert_eq!(std::fs::read(&file).unwrap(), b"x", "untouched");
}

/// Runs the server, which must exit by itself: one that starts serving instead is killed, so
/// that the test fails rather than hangs.
fn refused_by_binary(command: &mut std::process::Command) -> std::process::Output {
    let mut child = command
        .env_remove("OANQUAN_IN_MEMORY")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            break;
        }
        // std has no wait with a timeout.
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// A database file its user cannot write (its folder writable) is refused before listening,
/// saying what to fix. Permissions do not bind root, so as root the server runs as `nobody`
/// (through `setpriv`) on files owned by `nobody`.
#[cfg(unix)]
#[test]
fn the_binary_refuses_a_read_only_database_before_listening() {
    use std::os::unix::fs::{PermissionsExt as _, chown};
    const NOBODY: u32 = 65_534;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("oanquan.db");
    drop(SqliteStore::open(&path).unwrap());
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).unwrap();
    let privileged = std::fs::OpenOptions::new().write(true).open(&path).is_ok();
    let server = env!("CARGO_BIN_EXE_oanquan-server");
    let mut command = if privileged {
        for entry in std::fs::read_dir(dir.path()).unwrap() {
            chown(entry.unwrap().path(), Some(NOBODY), Some(NOBODY)).unwrap();
        }
        chown(dir.path(), Some(NOBODY), Some(NOBODY)).unwrap();
        let mut command = std::process::Command::new("setpriv");
        command.args([
            &format!("--reuid={NOBODY}"),
            &format!("--regid={NOBODY}"),
            "--clear-groups",
            server,
        ]);
        command
    } else {
        std::process::Command::new(server)
    };
    let bytes = std::fs::read(&path).unwrap();
    let output = refused_by_binary(
        command
            .args(["--listen", "127.0.0.1:0", "--database"])
            .arg(&path),
    );
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(output.stdout.is_empty(), "nothing listens: {output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("cannot be written"), "{stderr}");
    assert!(
        stderr.contains("write permission"),
        "says what to do: {stderr}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), bytes, "untouched");
}

#[test]
fn the_binary_refuses_an_empty_file_before_listening() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("oanquan.db");
    std::fs::write(&path, b"").unwrap();
    let output = refused_by_binary(
        std::process::Command::new(env!("CARGO_BIN_EXE_oanquan-server"))
            .args(["--listen", "127.0.0.1:0", "--database"])
            .arg(&path),
    );
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(output.stdout.is_empty(), "nothing listens: {output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("empty file"), "{stderr}");
    assert!(stderr.contains("delete it"), "says what to do: {stderr}");
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 0, "untouched");
    let mut left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .collect();
    left.sort();
    assert_eq!(left, ["oanquan.db"], "no -wal, -shm or .lock made");
}
