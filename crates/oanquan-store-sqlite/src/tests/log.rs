//! Schema version 5: one append-only log, and `games` rows written only when a plain move
//! cannot be derived from them.

use oanquan_game::account::AccountId;
use oanquan_game::rating::Speed;
use oanquan_game::store_suite;
use oanquan_game::{GameInfo, PlayerGameFilter};

use super::*;

/// Everything a reader sees of a store, for before/after comparisons.
#[derive(Debug, PartialEq)]
struct Everything {
    games: Vec<GameInfo>,
    lobby: Vec<Arc<LobbyEvent>>,
    leaderboards: Vec<LeaderboardPage>,
    player_games: Vec<Vec<GameInfo>>,
    accounts: Vec<Account>,
}

async fn everything(store: &Arc<dyn GameStore>, accounts: &[AccountId]) -> Everything {
    let mut games = Vec::new();
    let mut cursor = None;
    loop {
        let page = store
            .list(GameFilter::All, 7, cursor.as_deref())
            .await
            .unwrap();
        games.extend(page.games);
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    let Since::Events { events: lobby, .. } = store.lobby_events_since(0).await.unwrap() else {
        panic!("lobby events expected")
    };
    let mut leaderboards = Vec::new();
    for speed in Speed::ALL {
        leaderboards.push(store.leaderboard(speed, 100, None).await.unwrap());
    }
    let mut player_games = Vec::new();
    let mut found = Vec::new();
    for id in accounts {
        let page = store
            .player_games(id, PlayerGameFilter::default(), 100, None)
            .await
            .unwrap();
        player_games.push(page.games);
        found.push(store.account(id).await.unwrap());
    }
    Everything {
        games,
        lobby,
        leaderboards,
        player_games,
        accounts: found,
    }
}

/// Plays the first legal move of `id` as the player to move: the game's info after it.
async fn play_first_legal(games: &GameManager, id: &GameId, tokens: &[PlayerToken; 2]) -> GameInfo {
    let position = games.get_game(id).await.unwrap().position;
    let token = &tokens[usize::from(position.to_move() == Player::Second)];
    let (_, info) = games
        .play_move(id, token, position.legal_moves()[0], Some(position.ply()))
        .await
        .unwrap();
    info
}

/// Games in every state, with accounts, ratings and rated results, and one game half played.
async fn fill(
    store: &Arc<dyn GameStore>,
) -> (Vec<GameId>, Vec<AccountId>, GameId, [PlayerToken; 2]) {
    let mut accounts = Vec::new();
    // Rated games, ratings and results (the suite's other account checks want a store of
    // their own).
    accounts.extend(
        store_suite::account_updates_commit_with_their_game_or_not_at_all(Arc::clone(store)).await,
    );
    let mut ids = Vec::new();
    ids.extend(store_suite::a_timed_game_keeps_its_clock_and_turn_start(Arc::clone(store)).await);
    ids.extend(store_suite::draw_offers_and_their_answers_read_back(Arc::clone(store)).await);
    ids.extend(store_suite::rematch_offers_tokens_and_links_read_back(Arc::clone(store)).await);
    let (games, _hub) = manager(Arc::clone(store));
    let (finished, tokens) = new_game(&games, Preset::Standard.rules()).await;
    play_out(&games, &finished, &tokens, 11).await;
    let (active, tokens) = new_game(&games, Preset::Standard.rules()).await;
    for _ in 0..5 {
        play_first_legal(&games, &active, &tokens).await;
    }
    ids.extend([finished, active.clone()]);
    (ids, accounts, active, tokens)
}

/// Each of `ids` as `store` holds it, and everything else a reader sees.
async fn read_back(
    store: &Arc<dyn GameStore>,
    ids: &[GameId],
    accounts: &[AccountId],
) -> (Vec<Stored>, Everything) {
    let mut games = Vec::new();
    for id in ids {
        games.push(stored(store, id).await);
    }
    (games, everything(store, accounts).await)
}

/// `store` reads back what `read_back` saw, game by game first (so a failure names the game).
async fn reads_as_before(
    store: &Arc<dyn GameStore>,
    ids: &[GameId],
    accounts: &[AccountId],
    before: &[Stored],
    all_before: &Everything,
) {
    for (id, before) in ids.iter().zip(before) {
        assert_eq!(stored(store, id).await, *before, "game {id}");
    }
    assert_eq!(everything(store, accounts).await, *all_before);
}

/// A version 4 file, made with version 4's DDL and holding its rows in version 4's form, is
/// migrated to the log: every game replays as it was, and listings, lobby log, leaderboards,
/// accounts and players' games read the same; its unfinished game goes on.
#[tokio::test]
async fn a_version_4_database_is_migrated_to_one_log() {
    let dir = tempfile::tempdir().unwrap();
    let today = dir.path().join("today.db");
    let store: Arc<dyn GameStore> = Arc::new(SqliteStore::open(&today).unwrap());
    let (ids, accounts, active, tokens) = fill(&store).await;
    let (before, all_before) = read_back(&store, &ids, &accounts).await;
    assert!(all_before.games.len() >= ids.len());
    assert!(
        all_before
            .leaderboards
            .iter()
            .any(|page| !page.players.is_empty())
    );
    assert!(
        all_before
            .player_games
            .iter()
            .any(|games| !games.is_empty())
    );
    drop(store);

    let path = dir.path().join("v4.db");
    copy_as_version_4(&today, &path);
    let store: Arc<dyn GameStore> = Arc::new(SqliteStore::open(&path).unwrap());
    let conn = Connection::open(&path).unwrap();
    let (version, old_tables): (i32, i64) = conn
        .query_row(
            "SELECT (SELECT user_version FROM pragma_user_version),
                    (SELECT count(*) FROM sqlite_schema WHERE name IN ('moves', 'game_events'))",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .unwrap();
    assert_eq!((version, old_tables), (SCHEMA_VERSION, 0));
    // Version 6's column is filled in for the accounts that were there.
    let (accounts_there, unfilled): (i64, i64) = conn
        .query_row(
            "SELECT count(*), count(*) FILTER (WHERE username_look IS NULL) FROM accounts",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .unwrap();
    assert!(accounts_there > 0);
    assert_eq!(unfilled, 0);
    drop(conn);
    reads_as_before(&store, &ids, &accounts, &before, &all_before).await;

    let (games, _hub) = manager(Arc::clone(&store));
    let info = play_first_legal(&games, &active, &tokens).await;
    drop(games);
    drop(store);
    let store: Arc<dyn GameStore> = Arc::new(SqliteStore::open(&path).unwrap());
    assert_eq!(store.info(&active).await.unwrap(), info);
    assert_eq!(store.load(&active).await.unwrap().moves().iter().len(), 6);
}

/// The file as a killed server leaves it (copied while the store runs, so no row was brought
/// up to date at close): plain moves are in the log only, and every game, timed ones with
/// their clocks included, replays to exactly what was acknowledged.
#[tokio::test]
async fn plain_moves_logged_after_their_row_replay_exactly() {
    let (dir, path, store) = fresh_store();
    let (ids, accounts, _, _) = fill(&store).await;
    let (before, all_before) = read_back(&store, &ids, &accounts).await;
    let copy = dir.path().join("copy.db");
    for suffix in ["", "-wal"] {
        let from = format!("{}{suffix}", path.display());
        if Path::new(&from).exists() {
            std::fs::copy(&from, format!("{}{suffix}", copy.display())).unwrap();
        }
    }
    let conn = Connection::open(&copy).unwrap();
    let stale: i64 = conn
        .query_row(
            "SELECT count(*) FROM games
             WHERE sequence < (SELECT max(sequence) FROM game_log WHERE game = games.ord)",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert!(stale >= 2, "plain moves left {stale} rows behind");
    drop(conn);
    let copied: Arc<dyn GameStore> = Arc::new(SqliteStore::open(&copy).unwrap());
    reads_as_before(&copied, &ids, &accounts, &before, &all_before).await;
}

/// What a killed server leaves, copied while the store runs into `to`: the database, its log
/// and its lock file, whose record of the database is made the copy's (as if the server had
/// been killed on the copy itself: a record of another file is not compared).
fn copy_as_killed(path: &Path, to: &Path) {
    for suffix in ["", "-wal", ".lock"] {
        let from = format!("{}{suffix}", path.display());
        if Path::new(&from).exists() {
            std::fs::copy(&from, format!("{}{suffix}", to.display())).unwrap();
        }
    }
    let lock = format!("{}.lock", to.display());
    let content = std::fs::read_to_string(&lock).unwrap();
    let pid: u32 = content.split_whitespace().next().unwrap().parse().unwrap();
    let mut end = schema::parse_log_end(&content).expect("the lock records the commits");
    end.file = schema::file_identity(to);
    std::fs::write(&lock, schema::lock_content(pid, Some(end))).unwrap();
}

/// A killed server's file whose log was lost (emptied, or not copied with it) is refused, and
/// left as it was; with its log back, every game reads as acknowledged. An outside probe
/// emptied the log, and the next server started on an "intact" database without any of the
/// 344 moves it had acknowledged.
#[tokio::test]
async fn a_killed_servers_file_without_its_log_is_refused_until_the_log_is_back() {
    let (dir, path, store) = fresh_store();
    let (ids, accounts, _, _) = fill(&store).await;
    let (before, all_before) = read_back(&store, &ids, &accounts).await;
    let copy = dir.path().join("copy.db");
    copy_as_killed(&path, &copy);
    let wal = dir.path().join("copy.db-wal");
    let kept_log = std::fs::read(&wal).unwrap();
    let cut = |at: usize| {
        move |wal: &Path| std::fs::write(wal, &std::fs::read(wal).unwrap()[..at]).unwrap()
    };
    type Loss = Box<dyn Fn(&Path)>;
    let losses: [Loss; 5] = [
        Box::new(|wal: &Path| std::fs::remove_file(wal).unwrap()),
        Box::new(|wal: &Path| std::fs::write(wal, b"").unwrap()),
        // Only the header: no frame; then cut in half (SQLite replays up to the cut).
        Box::new(cut(32)),
        Box::new(cut(kept_log.len() / 2)),
        // A damaged frame in the middle: SQLite drops it and everything after it.
        Box::new(|wal: &Path| {
            let mut bytes = std::fs::read(wal).unwrap();
            let middle = bytes.len() / 2;
            bytes[middle..middle + 64].fill(0x5a);
            std::fs::write(wal, bytes).unwrap();
        }),
    ];
    for lose in losses {
        std::fs::write(&wal, &kept_log).unwrap();
        lose(&wal);
        let file = std::fs::read(&copy).unwrap();
        for _ in 0..2 {
            match SqliteStore::open(&copy) {
                Err(OpenError::LostLog {
                    found, recorded, ..
                }) => assert!(found < recorded, "{found} {recorded}"),
                other => panic!("expected a lost log, got {other:?}"),
            }
            assert_eq!(
                std::fs::read(&copy).unwrap(),
                file,
                "the file is left alone"
            );
        }
        let said = SqliteStore::open(&copy).unwrap_err().to_string();
        assert!(
            said.contains("copy.db-wal") && said.contains("did not stop cleanly"),
            "{said}"
        );
        // Started again and again, it never rewrites the file.
        assert_eq!(std::fs::read(&copy).unwrap(), file);
    }
    std::fs::write(&wal, &kept_log).unwrap();
    let copied: Arc<dyn GameStore> = Arc::new(SqliteStore::open(&copy).unwrap());
    reads_as_before(&copied, &ids, &accounts, &before, &all_before).await;
}

/// A killed server's database deleted, its log and lock left: refused, and the log kept, until
/// the file is back (an outside probe's next start made a new, empty database there, and its
/// clean stop removed the log). With only the lock's record of commits, the same; with
/// neither, a new database is made.
#[tokio::test]
async fn a_deleted_database_beside_its_log_or_lock_is_refused() {
    let (dir, path, store) = fresh_store();
    let (ids, accounts, _, _) = fill(&store).await;
    let (before, all_before) = read_back(&store, &ids, &accounts).await;
    let copy = dir.path().join("copy.db");
    copy_as_killed(&path, &copy);
    let file = std::fs::read(&copy).unwrap();
    let wal = dir.path().join("copy.db-wal");
    let log = std::fs::read(&wal).unwrap();
    assert!(!log.is_empty(), "the test wants a log with frames");
    std::fs::remove_file(&copy).unwrap();
    // The lock file's time is when its server was last alive: an hour ago, say.
    let lock = dir.path().join("copy.db.lock");
    let an_hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    std::fs::File::options()
        .write(true)
        .open(&lock)
        .unwrap()
        .set_modified(an_hour_ago)
        .unwrap();
    let lock_before = std::fs::read(&lock).unwrap();
    for _ in 0..2 {
        let said = SqliteStore::open(&copy).unwrap_err();
        assert!(matches!(said, OpenError::Missing { .. }), "{said}");
        let said = said.to_string();
        assert!(
            said.contains("does not exist") && said.contains("write-ahead log"),
            "{said}"
        );
        assert!(!copy.exists(), "no new database made");
        assert_eq!(std::fs::read(&wal).unwrap(), log, "the log kept");
        // The lock file too, and its time: the next start charges running clocks up to it.
        assert_eq!(std::fs::read(&lock).unwrap(), lock_before, "the lock kept");
        assert_eq!(
            std::fs::metadata(&lock).unwrap().modified().unwrap(),
            an_hour_ago
        );
    }
    // Put back, it opens with every acknowledged write.
    std::fs::write(&copy, &file).unwrap();
    let copied: Arc<dyn GameStore> = Arc::new(SqliteStore::open(&copy).unwrap());
    reads_as_before(&copied, &ids, &accounts, &before, &all_before).await;
    drop(copied);

    // Only the lock's record left (the log folded in at a clean stop, the file deleted).
    let other = dir.path().join("other.db");
    copy_as_killed(&path, &other);
    std::fs::remove_file(&other).unwrap();
    std::fs::remove_file(dir.path().join("other.db-wal")).unwrap();
    let said = SqliteStore::open(&other).unwrap_err().to_string();
    assert!(said.contains("lock file records"), "{said}");
    // With nothing left of it, a new database.
    std::fs::remove_file(dir.path().join("other.db.lock")).unwrap();
    SqliteStore::open(&other).expect("a new database where nothing was");

    // A link to the deleted database: refused too, not a new file made through it.
    #[cfg(unix)]
    {
        let gone = dir.path().join("gone.db");
        let link = dir.path().join("link.db");
        std::os::unix::fs::symlink(&gone, &link).unwrap();
        let said = SqliteStore::open(&link).unwrap_err();
        assert!(matches!(said, OpenError::DanglingLink { .. }), "{said}");
        assert!(!gone.exists(), "nothing made through the link");
    }
}

/// The check counts every commit, not only games': an account registered or a key revoked
/// after the last checkpoint is lost with the log too, and a revoked key would work again (an
/// outside probe's account came back with its revoked key).
#[tokio::test]
async fn a_lost_log_that_held_only_an_account_change_is_refused() {
    let (dir, path, store) = fresh_store();
    let lan = oanquan_game::account::Account::new(
        oanquan_game::username::Username::parse("Lan").unwrap(),
        std::time::SystemTime::now(),
    );
    let (_, key) = oanquan_game::account::ApiKey::generate(std::time::SystemTime::now());
    store.create_account(lan, key).await.unwrap();
    let copy = dir.path().join("copy.db");
    copy_as_killed(&path, &copy);
    std::fs::remove_file(dir.path().join("copy.db-wal")).unwrap();
    assert!(matches!(
        SqliteStore::open(&copy),
        Err(OpenError::LostLog { .. })
    ));
}

/// A log folded into the file after the kill (whoever opens the file and closes it last does
/// that: `sqlite3`, a script) leaves the file complete: it is accepted, as is a backup put in
/// place of the file.
#[tokio::test]
async fn a_killed_servers_file_with_its_log_folded_in_or_a_backup_opens() {
    let (dir, path, store) = fresh_store();
    let (ids, accounts, _, _) = fill(&store).await;
    let (before, all_before) = read_back(&store, &ids, &accounts).await;
    let copy = dir.path().join("copy.db");
    copy_as_killed(&path, &copy);
    let conn = Connection::open(&copy).unwrap();
    let games: i64 = conn
        .query_row("SELECT count(*) FROM games", [], |row| row.get(0))
        .unwrap();
    assert!(games > 0);
    drop(conn);
    assert!(
        !dir.path().join("copy.db-wal").exists(),
        "folded and removed"
    );
    let copied: Arc<dyn GameStore> = Arc::new(SqliteStore::open(&copy).unwrap());
    reads_as_before(&copied, &ids, &accounts, &before, &all_before).await;
    copied.close().await;
    drop(copied);

    // A backup (complete by itself) in place of a killed server's file, beside its lock file.
    let restored = dir.path().join("restored.db");
    copy_as_killed(&path, &restored);
    std::fs::remove_file(dir.path().join("restored.db-wal")).unwrap();
    std::fs::remove_file(&restored).unwrap();
    crate::backup(&path, &restored, false).unwrap();
    let restored: Arc<dyn GameStore> = Arc::new(SqliteStore::open(&restored).unwrap());
    reads_as_before(&restored, &ids, &accounts, &before, &all_before).await;
}

/// A copy made while a server ran (here `VACUUM INTO`; `sqlite3`'s `.backup` and a crash's files
/// are alike: marked running, fewer commits) put in the database's place, as STORAGE.md's
/// "Restoring" says, opens beside the `.lock` that recorded more commits of the file it
/// replaced: the record is of another file (an outside probe's restores were refused). Copied
/// over the same file instead, it is refused, with the way to accept it.
#[tokio::test]
async fn a_copy_put_in_place_of_the_database_opens_beside_a_newer_lock() {
    let (dir, path, store) = fresh_store();
    let (ids, accounts, _, _) = fill(&store).await;
    let (before, all_before) = read_back(&store, &ids, &accounts).await;
    let snapshot = dir.path().join("snapshot.db");
    Connection::open(&path)
        .unwrap()
        .execute(&format!("VACUUM INTO '{}'", snapshot.display()), [])
        .unwrap();
    // More commits after the copy, then a clean stop: the .lock records them.
    let (games, _hub) = manager(Arc::clone(&store));
    new_game(&games, Preset::Standard.rules()).await;
    drop(games);
    store.close().await;
    drop(store);

    // Over the same file (same inode): refused, the copy's commits being fewer.
    std::fs::write(&path, std::fs::read(&snapshot).unwrap()).unwrap();
    assert!(matches!(
        SqliteStore::open(&path),
        Err(OpenError::LostLog { .. })
    ));
    // Put in place as "Restoring" says: the old file moved aside, the copy a new file.
    std::fs::rename(&path, dir.path().join("old.db")).unwrap();
    std::fs::copy(&snapshot, &path).unwrap();
    let restored: Arc<dyn GameStore> = Arc::new(SqliteStore::open(&path).unwrap());
    reads_as_before(&restored, &ids, &accounts, &before, &all_before).await;
}

/// An SQLite file with no tables that is not empty is not taken for a new database: it is what
/// a server of an older build left of a new database whose log was lost.
#[test]
fn an_sqlite_file_without_tables_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("games.db");
    let conn = Connection::open(&path).unwrap();
    let _: String = conn
        .query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))
        .unwrap();
    drop(conn);
    let file = std::fs::read(&path).unwrap();
    assert!(!file.is_empty());
    match SqliteStore::open(&path) {
        Err(error @ OpenError::NoTables { .. }) => {
            assert!(error.to_string().contains("-wal"), "{error}");
        }
        other => panic!("expected no tables, got {other:?}"),
    }
    assert_eq!(std::fs::read(&path).unwrap(), file);
}

/// A row followed in the log by anything but plain moves is a damaged game, not a guess.
#[tokio::test]
async fn a_log_after_its_row_that_is_not_plain_moves_is_damaged() {
    let (_dir, path, store) = fresh_store();
    let (games, _hub) = manager(Arc::clone(&store));
    let (id, _) = new_game(&games, Preset::Standard.rules()).await;
    drop(games);
    drop(store);
    let conn = Connection::open(&path).unwrap();
    // The row goes back to the game's first event: the join after it is no plain move.
    conn.execute(
        "UPDATE games SET sequence = 1, info = json_set(info, '$.sequence', 1) WHERE id = ?1",
        [id.as_str()],
    )
    .unwrap();
    drop(conn);
    let store = SqliteStore::open(&path).unwrap();
    assert!(matches!(
        store.load(&id).await,
        Err(StoreError::Damaged { id: damaged, detail })
            if damaged == id && detail.contains("is not a move")
    ));
}
