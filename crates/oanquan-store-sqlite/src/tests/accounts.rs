//! Accounts, ratings and API keys in the file: across a reopen, from a version 3 file, in one
//! batch with games, and when a row is damaged.

use std::collections::BTreeMap;

use oanquan_game::account::{Account, AccountId, AccountUpdate, ApiKey, ApiKeyRecord, Record};
use oanquan_game::rating::{Rating, Speed};
use oanquan_game::store_suite;
use oanquan_game::username::Username;
use oanquan_game::{LeaderboardPage, PlayerGameFilter, PlayerResult};

use super::*;
use crate::writer::{Write, WriteJob};

/// Everything a store gives back about some accounts, to compare across a reopen.
#[derive(Debug, PartialEq)]
struct Snapshot {
    accounts: Vec<(Account, Vec<ApiKeyRecord>, Vec<Vec<GameInfo>>)>,
    leaderboards: Vec<LeaderboardPage>,
}

async fn snapshot(store: &Arc<dyn GameStore>, ids: &[AccountId]) -> Snapshot {
    let filters = [
        PlayerGameFilter::default(),
        PlayerGameFilter {
            result: Some(PlayerResult::Win),
            speed: Some(Speed::Blitz),
        },
    ];
    let mut accounts = Vec::new();
    for id in ids {
        let mut games = Vec::new();
        for filter in filters {
            games.push(
                store
                    .player_games(id, filter, 100, None)
                    .await
                    .unwrap()
                    .games,
            );
        }
        accounts.push((
            store.account(id).await.unwrap(),
            store.api_keys(id).await.unwrap(),
            games,
        ));
    }
    let mut leaderboards = Vec::new();
    for speed in Speed::ALL {
        leaderboards.push(store.leaderboard(speed, 100, None).await.unwrap());
    }
    Snapshot {
        accounts,
        leaderboards,
    }
}

/// The suite's account cases, each read again from its file alone: accounts with their exact
/// ratings and records, keys with their revocations, leaderboards and players' games.
#[tokio::test]
async fn accounts_ratings_and_keys_read_back_exactly_after_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    for case in 0..4 {
        let path = dir.path().join(format!("case{case}.db"));
        let store: Arc<dyn GameStore> = Arc::new(SqliteStore::open(&path).unwrap());
        let copy = Arc::clone(&store);
        let ids = match case {
            0 => store_suite::api_keys_are_found_listed_and_revoked(copy).await,
            1 => store_suite::account_updates_commit_with_their_game_or_not_at_all(copy).await,
            2 => store_suite::leaderboards_rank_established_ratings_only(copy).await,
            _ => store_suite::player_games_list_an_accounts_games_newest_first(copy).await,
        };
        let before = snapshot(&store, &ids).await;
        drop(store);
        let store: Arc<dyn GameStore> = Arc::new(SqliteStore::open(&path).unwrap());
        assert_eq!(snapshot(&store, &ids).await, before, "case {case}");
        // What the reopen must keep is there to keep.
        let kept = match case {
            0 => before.accounts[0].1.iter().any(|key| key.revoked.is_some()),
            1 => before
                .accounts
                .iter()
                .all(|(a, ..)| a.record != Record::default()),
            2 => before
                .leaderboards
                .iter()
                .any(|page| page.players.len() > 1),
            _ => before.accounts[0].2[0].len() > 1,
        };
        assert!(kept, "case {case}");
    }
}

/// The schema objects of a database, to compare two files' schemas.
fn schema_of(conn: &Connection) -> Vec<(String, String, Option<String>)> {
    conn.prepare("SELECT type, name, sql FROM sqlite_schema ORDER BY type, name")
        .unwrap()
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// A version 3 file (today's games are anonymous and unrated, which version 3 wrote the same
/// way) is migrated: its games read back as they were, and accounts work on it at once.
#[tokio::test]
async fn a_version_3_database_is_migrated_to_accounts() {
    let dir = tempfile::tempdir().unwrap();
    let today = dir.path().join("today.db");
    let store: Arc<dyn GameStore> = Arc::new(SqliteStore::open(&today).unwrap());
    let (games, _hub) = manager(Arc::clone(&store));
    let (finished, tokens) = new_game(&games, Preset::Standard.rules()).await;
    play_out(&games, &finished, &tokens, 7).await;
    let (active, tokens) = new_game(&games, Preset::Standard.rules()).await;
    games
        .play_move(
            &active,
            &tokens[0],
            store.info(&active).await.unwrap().position.legal_moves()[0],
            None,
        )
        .await
        .unwrap();
    let ids = [finished, active];
    let mut before = Vec::new();
    for id in &ids {
        before.push(stored(&store, id).await);
    }
    let Since::Events { events: lobby, .. } = store.lobby_events_since(0).await.unwrap() else {
        panic!("lobby events expected")
    };
    drop(games);
    drop(store);
    let path = dir.path().join("v3.db");
    copy_as_version_4(&today, &path);

    let conn = Connection::open(&path).unwrap();
    // Version 4 keys are written only for accounts and rated games: these rows are as
    // version 3 wrote them.
    let new_keys: i64 = conn
        .query_row(
            "SELECT (SELECT count(*) FROM games
                     WHERE info LIKE '%\"rated\"%' OR info LIKE '%\"account\"%')
                  + (SELECT count(*) FROM game_events
                     WHERE event LIKE '%\"rated\"%' OR event LIKE '%\"account\"%'
                        OR event LIKE '%\"ratings\"%')
                  + (SELECT count(*) FROM lobby_events
                     WHERE event LIKE '%\"rated\"%' OR event LIKE '%\"account\"%'
                        OR event LIKE '%\"ratings\"%')",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(new_keys, 0);
    conn.execute_batch(
        "DROP TABLE game_players;
         DROP TABLE api_keys;
         DROP TABLE ratings;
         DROP TABLE accounts;
         PRAGMA user_version = 3;",
    )
    .unwrap();
    // Exactly the schema of version 3.
    let v3 = Connection::open_in_memory().unwrap();
    for migration in &schema::MIGRATIONS[..3] {
        v3.execute_batch(migration).unwrap();
    }
    assert_eq!(schema_of(&conn), schema_of(&v3));
    drop(conn);

    let store: Arc<dyn GameStore> = Arc::new(SqliteStore::open(&path).unwrap());
    let version: i32 = Connection::open(&path)
        .unwrap()
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
    for (id, before) in ids.iter().zip(before) {
        assert_eq!(stored(&store, id).await, before, "game {id}");
        assert!(!before.info.rated);
        assert!(Player::ALL.into_iter().all(|p| {
            before.info.seats[p]
                .as_ref()
                .is_some_and(|s| s.account.is_none())
        }));
    }
    let Since::Events { events: again, .. } = store.lobby_events_since(0).await.unwrap() else {
        panic!("lobby events expected")
    };
    assert_eq!(again, lobby);
    store_suite::player_games_list_an_accounts_games_newest_first(Arc::clone(&store)).await;
}

fn job<T, F>(run: F) -> Box<dyn Write>
where
    T: Send + 'static,
    F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
{
    // Answered through `write_batch`'s outcomes here, not the channel.
    let (reply, _) = tokio::sync::oneshot::channel();
    Box::new(WriteJob {
        run: Some(run),
        value: None,
        reply,
    })
}

fn account(name: &str) -> Account {
    Account::new(Username::parse(name).unwrap(), SystemTime::now())
}

fn key() -> ApiKeyRecord {
    ApiKey::generate(SystemTime::now()).1
}

/// In one batch, a commit whose account moved on under it (by an earlier commit of the same
/// batch) and a registration of a taken name fail alone; the other commit and registration are
/// written, each whole.
#[tokio::test]
async fn account_writes_in_one_batch_fail_alone() {
    let (_dir, path, store) = fresh_store();
    let (manager, _hub) = manager(Arc::clone(&store));
    let lan = account("lan");
    store.create_account(lan.clone(), key()).await.unwrap();
    let (a, _) = new_game(&manager, Preset::Standard.rules()).await;
    let (b, _) = new_game(&manager, Preset::Standard.rules()).await;
    let (state_a, state_b) = (store.load(&a).await.unwrap(), store.load(&b).await.unwrap());
    let (seq_a, seq_b) = (state_a.info().sequence, state_b.info().sequence);
    let (events_b, _) = match store.game_events_since(&b, 0).await.unwrap() {
        Since::Events { events, done } => (events, done),
        other => panic!("{other:?}"),
    };
    let won = AccountUpdate {
        account: Account {
            version: 2,
            record: Record {
                wins: 1,
                ..Record::default()
            },
            ratings: BTreeMap::from([(
                Speed::Rapid,
                Rating {
                    rating: 1_523.5,
                    ..Rating::INITIAL
                },
            )]),
            ..lan.clone()
        },
        expected_version: 1,
    };
    let commit =
        |state, expected_sequence| turn_started(state, expected_sequence, vec![won.clone()]);
    let (hoa, twin) = (account("hoa"), account("LAN"));
    let (hoa_key, twin_key) = (key(), key());
    let mut writes = {
        let (hoa, twin) = (hoa.clone(), twin.clone());
        let (hoa_key, twin_key) = (hoa_key.clone(), twin_key.clone());
        vec![
            job(move |conn| crate::accounts::create(conn, &twin, &twin_key)),
            job(move |conn| crate::accounts::create(conn, &hoa, &hoa_key)),
        ]
    };
    let mut conn = schema::open_writer(&path, None).unwrap();
    let (results, outcomes) = write_batch(
        &mut conn,
        &mut vec![
            (false, commit(state_a, seq_a)),
            (false, commit(state_b, seq_b)),
        ],
        &mut writes,
        (&Checkpoints::new(), &Heads::new()),
    );
    assert_eq!(
        results[0].as_ref().unwrap().committed.info.sequence,
        seq_a + 1
    );
    assert_eq!(
        results[1].as_ref().unwrap_err().1,
        StoreError::Conflict { current: 2 }
    );
    assert_eq!(outcomes, [Err(StoreError::AlreadyExists), Ok(())]);

    assert_eq!(file_info(&path, &a).sequence, seq_a + 1);
    assert_eq!(file_info(&path, &b).sequence, seq_b);
    let Since::Events { events, .. } = store.game_events_since(&b, 0).await.unwrap() else {
        panic!("events expected")
    };
    assert_eq!(events, events_b, "the failed commit wrote nothing");
    assert_eq!(store.account(&lan.id).await.unwrap(), won.account);
    assert_eq!(store.account_by_name("lan").await.unwrap(), won.account);
    assert_eq!(store.account(&twin.id).await, Err(StoreError::NotFound));
    assert_eq!(
        store.account_by_api_key(&twin_key.id).await.unwrap_err(),
        StoreError::NotFound
    );
    assert_eq!(
        store.account_by_api_key(&hoa_key.id).await.unwrap(),
        (hoa, hoa_key)
    );
}

/// A damaged account row is an error naming the account, never a panic nor a key that works;
/// a leaderboard leaves a damaged account out rather than failing.
#[tokio::test]
async fn damaged_account_rows_are_errors_and_leaderboards_skip_them() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("games.db")).unwrap();
    let established = |rating| Rating {
        rating,
        deviation: 60.0,
        volatility: 0.06,
        games: 20,
    };
    let (mut alpha, mut bravo) = (account("alpha"), account("bravo"));
    alpha.ratings.insert(Speed::Blitz, established(1_800.0));
    bravo.ratings.insert(Speed::Blitz, established(1_700.0));
    let (alpha_key, bravo_key) = (key(), key());
    store
        .create_account(alpha.clone(), alpha_key.clone())
        .await
        .unwrap();
    store
        .create_account(bravo.clone(), bravo_key.clone())
        .await
        .unwrap();
    let (alpha_id, bravo_key_id) = (alpha.id.to_string(), bravo_key.id.clone());
    store
        .on_writer_for_tests(move |conn| {
            conn.execute(
                "INSERT INTO ratings VALUES (?1, 'warp', 1500.0, 350.0, 0.06, 0, 1)",
                [&alpha_id],
            )
            .unwrap();
            conn.execute(
                "UPDATE api_keys SET hash = X'0102' WHERE id = ?1",
                [&bravo_key_id],
            )
            .unwrap();
        })
        .await
        .unwrap();

    let damaged = |result: Result<_, StoreError>, what: &str| match result {
        Err(StoreError::DamagedData(why)) => assert!(why.contains(what), "{why}"),
        other => panic!("a damaged account expected: {other:?}"),
    };
    damaged(store.account(&alpha.id).await.map(drop), alpha.id.as_str());
    damaged(
        store.account_by_name("alpha").await.map(drop),
        "unknown speed",
    );
    damaged(
        store.account_by_api_key(&alpha_key.id).await.map(drop),
        alpha.id.as_str(),
    );
    damaged(
        store.account_by_api_key(&bravo_key.id).await.map(drop),
        "no valid hash",
    );
    damaged(store.api_keys(&bravo.id).await.map(drop), "no valid hash");

    let board = store.leaderboard(Speed::Blitz, 10, None).await.unwrap();
    assert_eq!(
        board
            .players
            .iter()
            .map(|ranked| (&ranked.account.id, ranked.rank))
            .collect::<Vec<_>>(),
        [(&bravo.id, 2)],
        "alpha's rank stays taken"
    );
    assert_eq!(board.next_cursor, None);
}
