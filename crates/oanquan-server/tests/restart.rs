//! The SQLite store across restarts: games resume, tokens still work, streams resume by
//! sequence number; unusable database files are refused and left untouched.

mod common;

use std::path::Path;
use std::process::Command;

use common::*;
use oanquan_proto::v1 as pb;
use oanquan_rules::{Game, Move, Preset};
use oanquan_server::domain::{APPLICATION_ID, OpenError};
use oanquan_server::grpc::convert;
use oanquan_server::{Config, ServeError, Storage};
use pb::game_event::Kind;
use tokio::net::TcpListener;
use tonic::Code;

fn on_disk(path: &Path) -> Config {
    let mut settings = config();
    settings.storage = Storage::Sqlite(path.to_owned());
    settings
}

/// The sequence a fresh snapshot reflects: the game's last event.
async fn last_sequence(client: &mut Games, id: &str) -> u64 {
    watch_snapshot(client, id).await.1.sequence
}

/// Plays up to `count` moves (the first legal one each time); returns the game after them.
async fn play_moves(
    client: &mut Games,
    id: &str,
    tokens: (&str, &str),
    count: usize,
    rules: oanquan_rules::Rules,
) -> pb::Game {
    let mut game = get_game(client, id).await;
    for _ in 0..count {
        if game.status != i32::from(pb::GameStatus::Active) {
            break;
        }
        let position = convert::position(game.position.as_ref(), rules, "position").unwrap();
        let moves = position.legal_moves();
        // Alternate between the first and the last legal move for some variety.
        let mv = if position.ply() % 2 == 0 {
            moves[0]
        } else {
            moves[moves.len() - 1]
        };
        game = play_move(client, id, tokens, &position, mv).await;
    }
    game
}

#[tokio::test]
async fn a_game_half_played_before_a_restart_is_finished_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("oanquan.db");
    let rules = Preset::Standard.rules();

    // Before: a game with 6 moves, a watcher that saw some events, a lobby watcher.
    let server = start(on_disk(&path)).await;
    let mut client = server.games().await;
    let mut lobby = client
        .watch_lobby(pb::WatchLobbyRequest {
            after_sequence: None,
        })
        .await
        .unwrap()
        .into_inner();
    let lobby_snapshot = next(&mut lobby).await.unwrap().unwrap().event.unwrap();
    let (id, first, second) = started(&mut client, "standard").await;
    let before = play_moves(&mut client, &id, (&first, &second), 6, rules).await;
    assert_eq!(before.move_count, 6);
    let last_before = last_sequence(&mut client, &id).await;
    let mut watch = client
        .watch_game(pb::WatchGameRequest {
            game_id: id.clone(),
            after_sequence: Some(2),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let seen = next_game_event(&mut watch).await.unwrap();
    assert_eq!(seen.sequence, 3);
    let mut lobby_seen = Vec::new();
    for _ in 0..3 {
        let event = next(&mut lobby).await.unwrap().unwrap().event.unwrap();
        if !matches!(event.kind, Some(pb::lobby_event::Kind::Heartbeat(_))) {
            lobby_seen.push(event);
        }
    }
    server.stop().await.unwrap();

    // After: the same game, the same tokens, the streams resume where they were.
    let server = start(on_disk(&path)).await;
    let mut client = server.games().await;
    // The turn was resumed at the start: its start moved later by the outage (it counts towards
    // a victory claim, see online.rs), announced by a TurnStarted for the same ply.
    assert_resumed(&before, &get_game(&mut client, &id).await);
    let last_before = last_before + 1;

    let mut watch = client
        .watch_game(pb::WatchGameRequest {
            game_id: id.clone(),
            after_sequence: Some(seen.sequence),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let mut expected = seen.sequence + 1;
    let mut moves_seen = 0;
    let mut last_kind = None;
    assert_eq!(last_sequence(&mut client, &id).await, last_before);
    while expected <= last_before {
        let event = next_game_event(&mut watch).await.unwrap();
        assert_eq!(event.sequence, expected, "no gap, no duplicate");
        if matches!(event.kind, Some(Kind::MovePlayed(_))) {
            moves_seen += 1;
        }
        last_kind = event.kind;
        expected += 1;
    }
    assert_eq!(moves_seen, 6);
    assert!(
        matches!(last_kind, Some(Kind::TurnStarted(_))),
        "the resumed turn is announced: {last_kind:?}"
    );

    let resumed_lobby = lobby_seen.last().map_or(0, |e| e.sequence);
    assert!(resumed_lobby > 0, "{lobby_snapshot:?} {lobby_seen:?}");
    let mut lobby = client
        .watch_lobby(pb::WatchLobbyRequest {
            after_sequence: Some(resumed_lobby - 1),
        })
        .await
        .unwrap()
        .into_inner();
    let again = next(&mut lobby).await.unwrap().unwrap().event.unwrap();
    assert_eq!(&again, lobby_seen.last().unwrap());

    // The old tokens finish the game; the restarted watcher sees every move live.
    let done = play_moves(&mut client, &id, (&first, &second), 1_000, rules).await;
    assert_eq!(done.status, i32::from(pb::GameStatus::Finished));
    loop {
        let event = next_game_event(&mut watch).await.unwrap();
        assert_eq!(event.sequence, expected, "no gap, no duplicate");
        expected += 1;
        if matches!(event.kind, Some(Kind::GameOver(_))) {
            break;
        }
    }
    assert_eq!(expected - 1, last_sequence(&mut client, &id).await);

    // The stored history replays to the stored position.
    let moves = client
        .list_moves(pb::ListMovesRequest {
            game_id: id.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .moves;
    let moves: Vec<Move> = moves
        .iter()
        .map(|m| convert::mv(m.r#move.as_ref(), "move").unwrap())
        .collect();
    let start = oanquan_rules::Position::new(rules).unwrap();
    let replayed = Game::replay(start, &moves).unwrap();
    let stored = convert::position(done.position.as_ref(), rules, "position").unwrap();
    assert_eq!(replayed.position().to_setup(), stored.to_setup());
    server.stop().await.unwrap();
}

/// Runs the server on `path` and expects it to refuse the file.
async fn refused(path: &Path) -> OpenError {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    match oanquan_server::run(listener, on_disk(path), std::future::pending()).await {
        Err(ServeError::Storage(error)) => error,
        other => panic!("expected a storage error, got {other:?}"),
    }
}

fn assert_untouched(path: &Path, bytes: &[u8]) {
    assert_eq!(std::fs::read(path).unwrap(), bytes, "the file was changed");
}

#[tokio::test]
async fn a_file_that_is_not_a_database_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.txt");
    let bytes = b"these are my notes, not a database\n".repeat(200);
    std::fs::write(&path, &bytes).unwrap();
    let error = refused(&path).await;
    assert!(matches!(error, OpenError::NotADatabase { .. }), "{error}");
    assert!(
        error.to_string().contains("not an SQLite database"),
        "{error}"
    );
    assert_untouched(&path, &bytes);
}

#[tokio::test]
async fn another_applications_database_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    for (name, setup) in [
        (
            "tables.db",
            "CREATE TABLE notes (text TEXT); INSERT INTO notes VALUES ('hi');",
        ),
        ("app-id.db", "PRAGMA application_id = 42;"),
    ] {
        let path = dir.path().join(name);
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(setup).unwrap();
        conn.close().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let error = refused(&path).await;
        assert!(
            matches!(error, OpenError::Foreign { .. }),
            "{name}: {error}"
        );
        assert!(error.to_string().contains("another application"), "{error}");
        assert_untouched(&path, &bytes);
    }
}

#[tokio::test]
async fn a_newer_schema_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("future.db");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(&format!(
        "PRAGMA application_id = {APPLICATION_ID}; PRAGMA user_version = 999;
         CREATE TABLE games_v999 (id TEXT);"
    ))
    .unwrap();
    conn.close().unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let error = refused(&path).await;
    assert!(
        matches!(error, OpenError::Newer { found: 999, .. }),
        "{error}"
    );
    assert!(
        error.to_string().contains("newer oanquan-server"),
        "{error}"
    );
    assert_untouched(&path, &bytes);
}

/// A negative version, taken as a count of migrations, would have skipped them all.
#[tokio::test]
async fn a_negative_schema_version_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("negative.db");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(&format!(
        "PRAGMA application_id = {APPLICATION_ID}; PRAGMA user_version = -1;
         CREATE TABLE games (id TEXT);"
    ))
    .unwrap();
    conn.close().unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let error = refused(&path).await;
    assert!(matches!(error, OpenError::Corrupt { .. }), "{error}");
    assert!(error.to_string().contains("schema version -1"), "{error}");
    assert_untouched(&path, &bytes);
}

#[tokio::test]
async fn a_corrupt_database_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("damaged.db");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(&format!(
        "PRAGMA application_id = {APPLICATION_ID}; PRAGMA user_version = 1;
         CREATE TABLE filler (n INTEGER PRIMARY KEY, text TEXT);
         CREATE INDEX filler_text ON filler (text);
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
         INSERT INTO filler SELECT i, printf('row %d with some padding text', i) FROM n;"
    ))
    .unwrap();
    conn.close().unwrap();
    // Scribble over the middle of the file, past the header and the schema page.
    let mut bytes = std::fs::read(&path).unwrap();
    let middle = bytes.len() / 2;
    for byte in &mut bytes[middle..middle + 4096] {
        *byte = 0xA5;
    }
    std::fs::write(&path, &bytes).unwrap();
    let error = refused(&path).await;
    assert!(matches!(error, OpenError::Corrupt { .. }), "{error}");
    assert!(error.to_string().contains("corrupt"), "{error}");
    assert_untouched(&path, &bytes);
}

#[test]
fn the_binary_refuses_a_bad_database_before_listening() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.db");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch("CREATE TABLE notes (text TEXT);")
        .unwrap();
    conn.close().unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_oanquan-server"))
        .args(["--listen", "127.0.0.1:0", "--database"])
        .arg(&path)
        .env_remove("OANQUAN_IN_MEMORY")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(output.stdout.is_empty(), "nothing listens: {output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("another application"), "{stderr}");
    assert!(stderr.contains("--database"), "says what to do: {stderr}");
    assert_eq!(
        stderr.matches("another application").count(),
        1,
        "said once, not once more as its own cause: {stderr}"
    );
    assert_untouched(&path, &bytes);
}

#[tokio::test]
async fn a_second_server_on_the_same_database_is_refused_until_the_first_stops() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.db");
    let first = start(on_disk(&path)).await;
    let mut client = first.games().await;
    let (game, _) = create(&mut client, "standard").await;
    let bytes = std::fs::read(&path).unwrap();

    let error = refused(&path).await;
    assert!(matches!(error, OpenError::Locked { .. }), "{error}");
    let message = error.to_string();
    assert!(
        message.contains("another oanquan-server")
            && message.contains(&format!("(pid {})", std::process::id())),
        "{message}"
    );
    assert_untouched(&path, &bytes);
    // The first server carries on.
    assert_eq!(get_game(&mut client, &game.id).await.id, game.id);

    first.stop().await.unwrap();
    let second = start(on_disk(&path)).await;
    let mut client = second.games().await;
    assert_eq!(get_game(&mut client, &game.id).await.id, game.id);
    second.stop().await.unwrap();
}

#[tokio::test]
async fn open_games_still_count_towards_their_creators_limit_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("limits.db");
    let limited = || {
        let mut settings = on_disk(&path);
        settings.games.max_open_games_per_client = 2;
        settings.clients.exempt_loopback = false;
        settings.clients.rate_limit = 0.0;
        settings
    };
    let new_game = pb::CreateGameRequest {
        rules: preset("standard"),
        start_position: None,
        seat: 0,
        display_name: "Lan".into(),
        computer: None,
        ..Default::default()
    };

    let server = start(limited()).await;
    let mut client = server.games().await;
    let (first, first_token) = create(&mut client, "standard").await;
    let (_second, _) = create(&mut client, "standard").await;
    let refused = client.create_game(new_game.clone()).await.unwrap_err();
    assert_reason(
        &refused,
        Code::ResourceExhausted,
        "ERROR_REASON_LIMIT_EXCEEDED",
    );
    server.stop().await.unwrap();

    let server = start(limited()).await;
    let mut client = server.games().await;
    let refused = client.create_game(new_game.clone()).await.unwrap_err();
    assert_reason(
        &refused,
        Code::ResourceExhausted,
        "ERROR_REASON_LIMIT_EXCEEDED",
    );
    assert!(refused.message().contains("2 open games"), "{refused:?}");
    // Ending a game from before the restart frees its place.
    client
        .abort_game(authed(
            pb::AbortGameRequest {
                game_id: first.id.clone(),
            },
            &first_token,
        ))
        .await
        .unwrap();
    client.create_game(new_game).await.unwrap();
    server.stop().await.unwrap();
}
