//! The PostgreSQL store's own tests; the cases every store passes come from
//! `oanquan_game::store_suite`.
//!
//! They need a PostgreSQL server: `OANQUAN_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/test
//! cargo test -p oanquan-store-postgres`. Without the variable they say so and pass without
//! doing anything; with it, a server that cannot be reached fails them. Each test works in a
//! schema of its own (`oq_test_<random>`, dropped at its end), so they run in parallel.

use std::io::Write as _;
use std::sync::{Arc, Once};
use std::time::{Duration, SystemTime};

use oanquan_game::transition::{self, Mover};
use oanquan_game::{
    GameEventKind, GameManager, Hub, ManagerLimits, NewGame, PlayerToken, TimeControl,
};
use oanquan_rules::{Player, Preset};
use tokio_postgres::AsyncMessage;

use super::*;

/// The variable that names the test database.
const URL_VARIABLE: &str = "OANQUAN_TEST_POSTGRES_URL";

/// The test database's URL, or `None` (said once, past the test harness's capture) when the
/// variable is not set.
pub(crate) fn test_url() -> Option<String> {
    match std::env::var(URL_VARIABLE) {
        Ok(url) if !url.trim().is_empty() => Some(url),
        _ => {
            static SAID: Once = Once::new();
            SAID.call_once(|| {
                let _ = writeln!(
                    std::io::stderr(),
                    "PostgreSQL tests skipped: {URL_VARIABLE} is not set. Run them with \
                     {URL_VARIABLE}=postgres://postgres@127.0.0.1:5432/test cargo test -p \
                     oanquan-store-postgres"
                );
            });
            None
        }
    }
}

/// A schema of its own for one test on the test database, dropped (with everything in it)
/// when this is dropped.
pub(crate) struct TestSchema {
    url: String,
    name: String,
}

impl TestSchema {
    /// A new schema name, or `None` without a test database. The schema itself is made by the
    /// first store that connects to it.
    pub(crate) fn new() -> Option<TestSchema> {
        let url = test_url()?;
        let name = format!("oq_test_{:016x}", rand::random::<u64>());
        Some(TestSchema { url, name })
    }

    pub(crate) fn options(&self) -> PostgresOptions {
        PostgresOptions {
            schema: Some(self.name.clone()),
            ..PostgresOptions::default()
        }
    }

    /// A store (a pool of its own: a node) on this schema. Panics if the database cannot be
    /// reached: with the variable set, the tests must fail rather than pass unseen.
    pub(crate) async fn store(&self) -> PostgresStore {
        self.store_with(self.options()).await
    }

    pub(crate) async fn store_with(&self, options: PostgresOptions) -> PostgresStore {
        PostgresStore::connect(&self.url, options)
            .await
            .unwrap_or_else(|error| panic!("{URL_VARIABLE} is set but: {error}"))
    }

    /// A plain connection with this schema as its search path, for what the store would never
    /// do (damage a row, hold a lock, listen).
    pub(crate) async fn raw(
        &self,
    ) -> (
        tokio_postgres::Client,
        tokio::sync::mpsc::UnboundedReceiver<tokio_postgres::Notification>,
    ) {
        let mut config: tokio_postgres::Config = self.url.parse().unwrap();
        config.options(format!("-c search_path={}", self.name));
        let (client, mut connection) = config.connect(tokio_postgres::NoTls).await.unwrap();
        let (notify, notifications) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
            while let Some(Ok(message)) = futures::StreamExt::next(&mut messages).await {
                if let AsyncMessage::Notification(notification) = message {
                    let _ = notify.send(notification);
                }
            }
        });
        (client, notifications)
    }
}

impl Drop for TestSchema {
    fn drop(&mut self) {
        // On a thread of its own with a runtime of its own: the test's runtime may be the one
        // dropping this, and cannot be blocked on.
        let (url, name) = (self.url.clone(), self.name.clone());
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            runtime.block_on(async move {
                let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                    .await
                    .ok()?;
                tokio::spawn(connection);
                client
                    .batch_execute(&format!("DROP SCHEMA IF EXISTS {name} CASCADE"))
                    .await
                    .ok()
            })
        })
        .join();
        if !matches!(dropped, Ok(Some(()))) {
            let _ = writeln!(
                std::io::stderr(),
                "could not drop the test schema {}",
                self.name
            );
        }
    }
}

/// The cases every store passes, each on a schema of its own.
mod suite {
    use std::sync::Arc;

    use oanquan_game::GameStore;

    use super::TestSchema;

    oanquan_game::store_suite!({
        let Some(schema) = TestSchema::new() else {
            return;
        };
        let store: Arc<dyn GameStore> = Arc::new(schema.store().await);
        (store, schema)
    });
}

fn manager(store: Arc<dyn GameStore>) -> (GameManager, Arc<Hub>) {
    let hub = Hub::new(1024);
    (
        GameManager::new(store, Arc::clone(&hub), ManagerLimits::default()),
        hub,
    )
}

fn new_game() -> NewGame {
    NewGame {
        rules: Preset::Standard.rules(),
        preset: Some(Preset::Standard),
        start: None,
        seat: Some(Player::First),
        display_name: "Guest Lan".to_owned(),
        computer: None,
        time_control: TimeControl::Untimed,
        account: None,
        rated: false,
    }
}

/// A game with both seats taken, and the seats' tokens.
async fn started(manager: &GameManager) -> (GameId, [PlayerToken; 2]) {
    let created = manager.create_game(new_game()).await.unwrap();
    let id = created.game.id.clone();
    let joined = manager.join_game(&id, "Guest Minh").await.unwrap();
    (id, [created.token, joined.token])
}

/// `mv_index` (from the end when negative) of the legal moves, played on `state` for the
/// player to move: the commit that would write it.
fn move_commit(state: GameState, tokens: &[PlayerToken; 2], from_end: bool) -> Commit {
    let position = *state.position();
    let moves = position.legal_moves();
    let mv = if from_end {
        moves[moves.len() - 1]
    } else {
        moves[0]
    };
    let token = &tokens[usize::from(position.to_move() == Player::Second)];
    let expected_sequence = state.info().sequence;
    let now = SystemTime::now();
    let (state, decided) = transition::play(
        state,
        Mover::Token(token.hash()),
        mv,
        Some(position.ply()),
        now,
    )
    .unwrap();
    Commit {
        state,
        expected_sequence,
        game_events: decided.game_events,
        lobby_events: decided.lobby_events,
        time: now,
        accounts: Vec::new(),
    }
}

/// Two nodes (two pools) commit the same ply of the same game at the same moment, 1,000
/// times: exactly one wins each time, the loser is told the winner's sequence, and the game is
/// the winner's, with a log without gaps or doubles.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_racing_the_same_ply_never_both_win() {
    let Some(schema) = TestSchema::new() else {
        return;
    };
    let a: Arc<dyn GameStore> = Arc::new(schema.store().await);
    let b: Arc<dyn GameStore> = Arc::new(schema.store().await);
    let (games, _hub) = manager(Arc::clone(&a));
    let (mut id, mut tokens) = started(&games).await;
    let mut wins = [0_u32; 2];
    let mut played_ids = vec![id.clone()];
    for round in 0..1_000 {
        let (state_a, state_b) = tokio::try_join!(a.load(&id), b.load(&id)).unwrap();
        if state_a.info().status.is_over() {
            (id, tokens) = started(&games).await;
            played_ids.push(id.clone());
            continue;
        }
        // Different moves, so that the stored game says whose commit it is.
        let (commit_a, commit_b) = (
            move_commit(state_a, &tokens, false),
            move_commit(state_b, &tokens, true),
        );
        let (won_a, won_b) = (commit_a.state.info().clone(), commit_b.state.info().clone());
        let (first, second) = (Arc::clone(&a), Arc::clone(&b));
        let (ra, rb) = tokio::join!(
            tokio::spawn(async move { first.commit(commit_a).await }),
            tokio::spawn(async move { second.commit(commit_b).await }),
        );
        let (ra, rb) = (ra.unwrap(), rb.unwrap());
        let (winner, loser, index) = match (&ra, &rb) {
            (Ok(winner), Err(loser)) => (winner, loser, 0),
            (Err(loser), Ok(winner)) => (winner, loser, 1),
            _ => panic!("round {round}: exactly one commit must win: {ra:?} / {rb:?}"),
        };
        wins[index] += 1;
        assert_eq!(
            *loser,
            StoreError::Conflict {
                current: winner.info.sequence
            },
            "round {round}"
        );
        let expected = if index == 0 { won_a } else { won_b };
        assert_eq!(winner.info.position, expected.position, "round {round}");
        assert_eq!(b.info(&id).await.unwrap(), winner.info, "round {round}");
    }
    // Both nodes won some: the race was a race.
    assert!(wins[0] > 0 && wins[1] > 0, "{wins:?}");
    for id in &played_ids {
        let info = a.info(id).await.unwrap();
        let Since::Events { events, .. } = b.game_events_since(id, 0).await.unwrap() else {
            panic!("the whole log of {id}")
        };
        let sequences: Vec<u64> = events.iter().map(|e| e.sequence).collect();
        assert_eq!(sequences, (1..=info.sequence).collect::<Vec<_>>(), "{id}");
        let moves = events
            .iter()
            .filter(|e| matches!(e.kind, GameEventKind::MovePlayed { .. }))
            .count();
        assert_eq!(moves, info.move_count as usize, "{id}");
        assert_eq!(b.load(id).await.unwrap().info(), &info);
    }
}

/// Through two managers (two nodes, each with its pool and hub), both players' clients send
/// the same ply at once: one move is played, and the other node, having lost the commit race,
/// retries on the new state and answers as one node would (a stale ply).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_that_loses_a_race_answers_as_one_node_would() {
    let Some(schema) = TestSchema::new() else {
        return;
    };
    let (node_a, _hub_a) = manager(Arc::new(schema.store().await));
    let (node_b, _hub_b) = manager(Arc::new(schema.store().await));
    let (node_a, node_b) = (Arc::new(node_a), Arc::new(node_b));
    let (id, tokens) = started(&node_a).await;
    let mut stale = 0;
    for _ in 0..20 {
        let game = node_b.get_game(&id).await.unwrap();
        if game.status.is_over() {
            break;
        }
        let position = game.position;
        let moves = position.legal_moves();
        let token = tokens[usize::from(position.to_move() == Player::Second)].clone();
        let ply = Some(position.ply());
        let play = |node: &Arc<GameManager>, mv| {
            let (node, id, token) = (Arc::clone(node), id.clone(), token.clone());
            tokio::spawn(async move { node.play_move(&id, &token, mv, ply).await })
        };
        let (a, b) = tokio::join!(
            play(&node_a, moves[0]),
            play(&node_b, moves[moves.len() - 1])
        );
        match (a.unwrap(), b.unwrap()) {
            (Ok(played), Err(error)) | (Err(error), Ok(played)) => {
                // A winning move that ended the game leaves nothing to retry on.
                if played.1.status.is_over() {
                    assert!(
                        matches!(error, oanquan_game::GameError::GameOver),
                        "{error:?}"
                    );
                } else {
                    assert!(
                        matches!(error, oanquan_game::GameError::StalePly { .. }),
                        "{error:?}"
                    );
                    stale += 1;
                }
            }
            other => panic!("exactly one move must be played: {other:?}"),
        }
        let after = node_a.get_game(&id).await.unwrap();
        assert_eq!(after.position.ply(), position.ply() + 1);
    }
    assert!(stale > 0);
}

/// Everything a store gives back about one game, to compare across nodes and reopens.
#[derive(Debug, PartialEq)]
struct Stored {
    info: GameInfo,
    loaded: GameInfo,
    tokens: oanquan_rules::ByPlayer<Option<[u8; 32]>>,
    rematch_tokens: oanquan_rules::ByPlayer<Option<[u8; 32]>>,
    moves: oanquan_game::MoveLog,
    creator: Option<IpAddr>,
    events: Vec<Arc<GameEvent>>,
    done: bool,
}

async fn stored(store: &Arc<dyn GameStore>, id: &GameId) -> Stored {
    let state = store.load(id).await.unwrap();
    let Since::Events { events, done } = store.game_events_since(id, 0).await.unwrap() else {
        panic!("events expected")
    };
    let bytes = |hashes: &oanquan_rules::ByPlayer<Option<oanquan_game::TokenHash>>| {
        hashes.map(|hash| hash.map(oanquan_game::TokenHash::to_bytes))
    };
    Stored {
        info: store.info(id).await.unwrap(),
        loaded: state.info().clone(),
        tokens: bytes(state.token_hashes()),
        rematch_tokens: bytes(state.rematch_tokens()),
        moves: state.moves().clone(),
        creator: state.creator(),
        events,
        done,
    }
}

/// Everything a store gives back about some accounts.
#[derive(Debug, PartialEq)]
struct Accounts {
    accounts: Vec<(Account, Vec<ApiKeyRecord>, Vec<Vec<GameInfo>>)>,
    leaderboards: Vec<LeaderboardPage>,
}

async fn accounts(store: &Arc<dyn GameStore>, ids: &[AccountId]) -> Accounts {
    let filters = [
        PlayerGameFilter::default(),
        PlayerGameFilter {
            result: Some(oanquan_game::PlayerResult::Win),
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
    Accounts {
        accounts,
        leaderboards,
    }
}

/// The suite's games (clocks, offers, rematches, flags, abandonment) and accounts (keys,
/// revocations, ratings, leaderboards, players' games), read again through a new pool after
/// the first one closed: nothing lives only in a node's memory.
#[tokio::test]
async fn a_new_pool_reads_back_everything_another_one_wrote() {
    use oanquan_game::store_suite;
    for case in 0..4 {
        let Some(schema) = TestSchema::new() else {
            return;
        };
        let store: Arc<dyn GameStore> = Arc::new(schema.store().await);
        let copy = || Arc::clone(&store);
        let (mut games, mut ids) = (Vec::new(), Vec::new());
        match case {
            0 => {
                games
                    .extend(store_suite::a_timed_game_keeps_its_clock_and_turn_start(copy()).await);
                games.extend(store_suite::draw_offers_and_their_answers_read_back(copy()).await);
                games.extend(store_suite::rematch_offers_tokens_and_links_read_back(copy()).await);
                games.extend(
                    store_suite::games_ended_by_time_or_abandonment_and_closed_rematches_read_back(
                        copy(),
                    )
                    .await,
                );
                ids.extend(store_suite::api_keys_are_found_listed_and_revoked(copy()).await);
            }
            1 => ids.extend(
                store_suite::account_updates_commit_with_their_game_or_not_at_all(copy()).await,
            ),
            2 => ids.extend(store_suite::leaderboards_rank_established_ratings_only(copy()).await),
            _ => ids.extend(
                store_suite::player_games_list_an_accounts_games_newest_first(copy()).await,
            ),
        }
        let mut before_games = Vec::new();
        for id in &games {
            before_games.push(stored(&store, id).await);
        }
        let before_accounts = accounts(&store, &ids).await;
        let before_lobby = store.lobby_snapshot(100).await.unwrap();
        store.close().await;
        assert!(matches!(
            store.account(&ids[0]).await,
            Err(StoreError::Unavailable(_))
        ));
        drop(store);

        let store: Arc<dyn GameStore> = Arc::new(schema.store().await);
        for (id, before) in games.iter().zip(&before_games) {
            assert_eq!(&stored(&store, id).await, before, "{id}");
        }
        assert_eq!(accounts(&store, &ids).await, before_accounts, "case {case}");
        assert_eq!(store.lobby_snapshot(100).await.unwrap(), before_lobby);
        // What a reopen must keep is there to keep.
        let kept = match case {
            0 => {
                before_games
                    .iter()
                    .any(|game| game.rematch_tokens.first.is_some())
                    && before_games.iter().any(|game| game.info.clock.is_some())
                    && before_accounts.accounts[0]
                        .1
                        .iter()
                        .any(|key| key.revoked.is_some())
            }
            1 => before_accounts.accounts.iter().all(|(a, ..)| a.version > 1),
            2 => before_accounts
                .leaderboards
                .iter()
                .any(|b| b.players.len() > 1),
            _ => before_accounts
                .accounts
                .iter()
                .any(|(_, _, games)| games[1].len() == 1),
        };
        assert!(kept, "case {case}: {before_accounts:?}");
    }
}

/// A commit notifies `oanquan_game` with the game and its new last sequence, and
/// `oanquan_lobby` with the last lobby sequence; a refused commit notifies nobody.
#[tokio::test]
async fn commits_notify_the_game_and_lobby_channels_and_refusals_do_not() {
    let Some(schema) = TestSchema::new() else {
        return;
    };
    let store: Arc<dyn GameStore> = Arc::new(schema.store().await);
    let (listener, mut notifications) = schema.raw().await;
    listener
        .batch_execute(&format!("LISTEN {GAME_CHANNEL}; LISTEN {LOBBY_CHANNEL}"))
        .await
        .unwrap();
    let (games, _hub) = manager(Arc::clone(&store));
    let (id, tokens) = started(&games).await;
    let state = store.load(&id).await.unwrap();
    let committed = store
        .commit(move_commit(state.clone(), &tokens, false))
        .await
        .unwrap();
    let mut seen: Vec<(String, String)> = Vec::new();
    let wanted = (
        GAME_CHANNEL.to_owned(),
        format!("{id}:{}", committed.info.sequence),
    );
    while seen.last() != Some(&wanted) {
        let notification = tokio::time::timeout(Duration::from_secs(5), notifications.recv())
            .await
            .expect("the commit's notification arrives")
            .unwrap();
        seen.push((
            notification.channel().to_owned(),
            notification.payload().to_owned(),
        ));
    }
    // The creation and the join came first, with the lobby's numbers.
    let (_, last) = store.lobby_snapshot(10).await.unwrap();
    assert!(
        seen.contains(&(LOBBY_CHANNEL.to_owned(), last.to_string())),
        "{seen:?}"
    );
    assert!(
        seen.contains(&(GAME_CHANNEL.to_owned(), format!("{id}:1"))),
        "{seen:?}"
    );

    // The same ply again, from the stale state: refused, and silent. (Channels belong to the
    // database, not the schema: other tests' games notify them too.)
    let refused = store.commit(move_commit(state, &tokens, true)).await;
    assert!(
        matches!(refused, Err(StoreError::Conflict { .. })),
        "{refused:?}"
    );
    let ours = format!("{id}:");
    let quiet = tokio::time::timeout(Duration::from_millis(300), async {
        while let Some(notification) = notifications.recv().await {
            if notification.payload().starts_with(&ours) {
                return notification;
            }
        }
        std::future::pending().await
    })
    .await;
    assert!(quiet.is_err(), "a refused commit notified: {quiet:?}");
}

/// The schema version lives in the database: a version newer than this build's is refused
/// and left as it was, and so are tables of another application where ours would go.
#[tokio::test]
async fn a_newer_schema_or_foreign_tables_are_refused_and_left_alone() {
    let Some(schema) = TestSchema::new() else {
        return;
    };
    drop(schema.store().await);
    let (client, _) = schema.raw().await;
    let version = |row: tokio_postgres::Row| row.get::<_, i32>(0);
    assert_eq!(
        version(
            client
                .query_one("SELECT version FROM oanquan_schema", &[])
                .await
                .unwrap()
        ),
        SCHEMA_VERSION
    );
    client
        .execute(
            "UPDATE oanquan_schema SET version = $1",
            &[&(SCHEMA_VERSION + 1)],
        )
        .await
        .unwrap();
    let error = PostgresStore::connect(&schema.url, schema.options())
        .await
        .unwrap_err();
    assert!(
        matches!(error, OpenError::Newer { found, .. } if found == SCHEMA_VERSION + 1),
        "{error}"
    );
    let message = error.to_string();
    assert!(message.contains("newer oanquan-server"), "{message}");
    assert!(!message.contains('@'), "no URL, no password: {message}");
    assert_eq!(
        version(
            client
                .query_one("SELECT version FROM oanquan_schema", &[])
                .await
                .unwrap()
        ),
        SCHEMA_VERSION + 1,
        "left as it was"
    );
    // A negative version, taken as a count of migrations, would have skipped them all.
    client
        .execute("UPDATE oanquan_schema SET version = -1", &[])
        .await
        .unwrap();
    let error = PostgresStore::connect(&schema.url, schema.options())
        .await
        .unwrap_err();
    assert!(
        matches!(error, OpenError::Database { .. }) && error.to_string().contains("version -1"),
        "{error}"
    );

    let Some(foreign) = TestSchema::new() else {
        return;
    };
    let (client, _) = foreign.raw().await;
    client
        .batch_execute(&format!(
            "CREATE SCHEMA {0}; CREATE TABLE {0}.games (x INTEGER)",
            foreign.name
        ))
        .await
        .unwrap();
    let error = PostgresStore::connect(&foreign.url, foreign.options())
        .await
        .unwrap_err();
    assert!(
        matches!(&error, OpenError::Foreign { table, .. } if table == "games"),
        "{error}"
    );
    let tables: i64 = client
        .query_one(
            "SELECT count(*) FROM pg_tables WHERE schemaname = $1",
            &[&foreign.name],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(tables, 1, "nothing was created");
}

/// Nodes starting together on an empty schema: one migrates, the others wait for it and find
/// the work done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_starting_together_migrate_once() {
    let Some(schema) = TestSchema::new() else {
        return;
    };
    let schema = Arc::new(schema);
    let starts: Vec<_> = (0..4)
        .map(|_| {
            let schema = Arc::clone(&schema);
            tokio::spawn(async move { schema.store().await })
        })
        .collect();
    let mut stores = Vec::new();
    for start in starts {
        stores.push(start.await.unwrap());
    }
    let (games, _hub) = manager(Arc::new(stores.pop().unwrap()));
    started(&games).await;
    let (client, _) = schema.raw().await;
    let row = client
        .query_one("SELECT count(*), max(version) FROM oanquan_schema", &[])
        .await
        .unwrap();
    assert_eq!(
        (row.get::<_, i64>(0), row.get::<_, i32>(1)),
        (1, SCHEMA_VERSION)
    );
}

/// A database that cannot be reached is refused at start with a message that names it (never
/// its password) and says what to check; so are a URL that does not parse and a schema name
/// that would need quoting. Needs no database.
#[tokio::test]
async fn an_unreachable_database_or_a_bad_url_is_refused_at_start() {
    // Port 1 on loopback: nothing listens there.
    let error = PostgresStore::connect(
        "postgres://oanquan:secret@127.0.0.1:1/games",
        PostgresOptions {
            connect_timeout: Duration::from_secs(2),
            ..PostgresOptions::default()
        },
    )
    .await
    .unwrap_err();
    assert!(matches!(error, OpenError::Connect { .. }), "{error}");
    let message = error.to_string();
    assert!(message.contains("127.0.0.1:1/games"), "{message}");
    assert!(!message.contains("secret"), "{message}");
    assert!(message.contains("--database"), "{message}");

    let error = PostgresStore::connect("postgres://[oops", PostgresOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(error, OpenError::Config(_)), "{error}");
    for bad in ["Games", "1games", "a-b", "a;drop", ""] {
        let error = PostgresStore::connect(
            "postgres://postgres@127.0.0.1:1/test",
            PostgresOptions {
                schema: Some(bad.to_owned()),
                ..PostgresOptions::default()
            },
        )
        .await
        .unwrap_err();
        assert!(matches!(error, OpenError::Config(_)), "{bad:?}: {error}");
    }
    assert!(is_postgres_url("postgres://h/db"));
    assert!(is_postgres_url("PostgreSQL://h/db"));
    assert!(!is_postgres_url("oanquan.db"));
    assert!(!is_postgres_url("/var/lib/postgres/oanquan.db"));
}

/// A connection the database refuses to open, whatever its reason, is `Unavailable`: an outside
/// probe's `ALTER DATABASE … ALLOW_CONNECTIONS false` (55000) answered every call INTERNAL, "a
/// defect". Here the refusal is a database that does not exist (3D000), which a query could
/// never meet either.
#[tokio::test]
async fn a_connection_the_database_refuses_is_unavailable() {
    let Some(url) = test_url() else { return };
    let mut config: tokio_postgres::Config = url.parse().unwrap();
    config.dbname("oq_test_no_such_database");
    let refused = config
        .connect(tokio_postgres::NoTls)
        .await
        .err()
        .expect("refused");
    assert!(refused.as_db_error().is_some(), "{refused}");
    assert!(
        !crate::fault::is_unavailable(&refused),
        "a query's error of this kind is a bug"
    );
    let error = crate::fault::pool(deadpool_postgres::PoolError::Backend(refused));
    assert!(
        matches!(&error, StoreError::Unavailable(why) if why.contains("cannot connect") && why.contains("3D000")),
        "{error:?}"
    );
}

/// A node frozen inside one of its transactions (SIGSTOP, a paused VM) holds the rows it locked,
/// the lobby's counter among them, which every node's writes to the lobby need: the database
/// ends such a transaction after [`IDLE_IN_TRANSACTION_LIMIT`], within the statement timeout
/// of the writes waiting behind it. An outside probe saw every node's moves fail for 30 s.
#[tokio::test]
async fn a_transaction_left_idle_is_ended_before_other_nodes_writes_time_out() {
    let Some(schema) = TestSchema::new() else {
        return;
    };
    let frozen = schema.store_with(schema.options()).await;
    let store: Arc<dyn GameStore> = Arc::new(schema.store_with(schema.options()).await);
    let (games, _hub) = manager(Arc::clone(&store));
    let (client, _messages) = frozen.dedicated().await.unwrap();
    client
        .batch_execute("BEGIN; UPDATE lobby_counter SET last = last")
        .await
        .unwrap();
    let since = std::time::Instant::now();
    let created = games.create_game(new_game()).await;
    let waited = since.elapsed();
    assert!(created.is_ok(), "{created:?}");
    assert!(
        waited >= IDLE_IN_TRANSACTION_LIMIT - Duration::from_secs(1)
            && waited < IDLE_IN_TRANSACTION_LIMIT + Duration::from_secs(3),
        "the create waited {waited:?} behind the idle transaction"
    );
    assert!(
        client.batch_execute("COMMIT").await.is_err(),
        "the idle transaction was ended"
    );
}

/// A statement that waits past the store's timeout (here for a row another connection holds)
/// is `Unavailable` and changes nothing; the game goes on once the lock is gone. A closed store
/// is `Unavailable` too.
#[tokio::test]
async fn a_commit_that_times_out_is_unavailable_and_changes_nothing() {
    let Some(schema) = TestSchema::new() else {
        return;
    };
    let store: Arc<dyn GameStore> = Arc::new(
        schema
            .store_with(PostgresOptions {
                statement_timeout: Duration::from_millis(300),
                ..schema.options()
            })
            .await,
    );
    let (games, _hub) = manager(Arc::clone(&store));
    let (id, tokens) = started(&games).await;
    let before = store.info(&id).await.unwrap();
    let (mut holder, _) = schema.raw().await;
    let lock = holder.transaction().await.unwrap();
    lock.execute(
        "SELECT 1 FROM games WHERE id = $1 FOR UPDATE",
        &[&id.as_str()],
    )
    .await
    .unwrap();
    let state = store.load(&id).await.unwrap();
    let refused = store
        .commit(move_commit(state.clone(), &tokens, false))
        .await;
    assert!(
        matches!(&refused, Err(StoreError::Unavailable(why)) if why.contains("statement timeout")),
        "{refused:?}"
    );
    assert_eq!(store.info(&id).await.unwrap(), before);
    lock.rollback().await.unwrap();
    let committed = store
        .commit(move_commit(state, &tokens, false))
        .await
        .unwrap();
    assert_eq!(committed.info.move_count, 1);

    store.close().await;
    for result in [
        store.info(&id).await.map(|_| ()),
        store
            .commit(move_commit(games_state(&schema, &id).await, &tokens, false))
            .await
            .map(|_| ()),
        store.lobby_snapshot(1).await.map(|_| ()),
    ] {
        assert!(
            matches!(result, Err(StoreError::Unavailable(_))),
            "{result:?}"
        );
    }
}

/// The game as another node reads it.
async fn games_state(schema: &TestSchema, id: &GameId) -> GameState {
    let store = schema.store().await;
    store.load(id).await.unwrap()
}

/// A game whose stored data does not decode is `Damaged` for its own reads, and skipped by
/// listings and the lobby; every other game reads on.
#[tokio::test]
async fn a_damaged_game_fails_alone() {
    let Some(schema) = TestSchema::new() else {
        return;
    };
    let store: Arc<dyn GameStore> = Arc::new(schema.store().await);
    let (games, _hub) = manager(Arc::clone(&store));
    let creator: IpAddr = "192.0.2.7".parse().unwrap();
    let damaged = games
        .create_game_from(Some(creator), new_game())
        .await
        .unwrap()
        .game
        .id;
    let sound = games
        .create_game_from(Some(creator), new_game())
        .await
        .unwrap()
        .game
        .id;
    let (short_token, _) = started(&games).await;
    let (finished, tokens) = started(&games).await;
    games.resign(&finished, &tokens[0]).await.unwrap();
    let (client, _) = schema.raw().await;
    // Whether a finished game's log is closed comes from its summary: one that does not
    // decode makes the log's reads a damaged game, not a failed query or a guess.
    client
        .execute(
            "UPDATE games SET info = '[]' WHERE id = $1",
            &[&finished.as_str()],
        )
        .await
        .unwrap();
    assert!(matches!(
        store.game_events_since(&finished, 0).await,
        Err(StoreError::Damaged { id, .. }) if id == finished
    ));
    client
        .execute(
            "UPDATE games SET info = '{\"broken' WHERE id = $1",
            &[&damaged.as_str()],
        )
        .await
        .unwrap();
    client
        .execute(
            "UPDATE games SET token_first = '\\x0102' WHERE id = $1",
            &[&short_token.as_str()],
        )
        .await
        .unwrap();
    for id in [&damaged, &short_token] {
        assert!(
            matches!(store.load(id).await, Err(StoreError::Damaged { id: d, .. }) if d == *id),
            "{id}"
        );
    }
    assert!(matches!(
        store.info(&damaged).await,
        Err(StoreError::Damaged { .. })
    ));
    // Found damaged, a game answers its damage from then on, also where the damage is not
    // (its log), and listings leave it out (STORAGE.md, as SQLite does).
    assert!(matches!(
        store.game_events_since(&damaged, 0).await,
        Err(StoreError::Damaged { .. })
    ));
    let listed = listed_ids(&store).await;
    assert_eq!(listed, std::slice::from_ref(&sound));
    let (open, _) = store.lobby_snapshot(10).await.unwrap();
    assert_eq!(open.len(), 1);
    assert_eq!(store.info(&sound).await.unwrap().id, sound);
    // A node started now finds the damaged games at once, and does not count them.
    let other: Arc<dyn GameStore> = Arc::new(schema.store().await);
    assert_eq!(
        other.open_games_by_creator().await.unwrap(),
        [(sound.clone(), creator)]
    );
}

/// The ids of the first ten games `store` lists, newest first.
async fn listed_ids(store: &Arc<dyn GameStore>) -> Vec<GameId> {
    store
        .list(GameFilter::All, 10, None)
        .await
        .unwrap()
        .games
        .into_iter()
        .map(|game| game.id)
        .collect()
}

/// Damage found in an active game's log (for a watcher resuming) fences the whole game: an
/// outside probe's went on answering GetGame as active, stayed listed and took a move.
#[tokio::test]
async fn damage_found_in_a_log_fences_the_game() {
    let Some(schema) = TestSchema::new() else {
        return;
    };
    let store: Arc<dyn GameStore> = Arc::new(schema.store().await);
    let (games, _hub) = manager(Arc::clone(&store));
    let (id, tokens) = started(&games).await;
    let (sound, _) = started(&games).await;
    // Cached on this node: the summary decodes, the log does not.
    store.load(&id).await.unwrap();
    let (client, _) = schema.raw().await;
    client
        .execute(
            "UPDATE game_events SET event = replace(event, '\"type\"', '\"typf\"') \
             WHERE game = (SELECT ord FROM games WHERE id = $1) AND sequence = 2",
            &[&id.as_str()],
        )
        .await
        .unwrap();
    assert!(matches!(
        store.game_events_since(&id, 0).await,
        Err(StoreError::Damaged { .. })
    ));
    assert!(matches!(
        store.load(&id).await,
        Err(StoreError::Damaged { .. })
    ));
    assert!(matches!(
        store.info(&id).await,
        Err(StoreError::Damaged { .. })
    ));
    assert!(matches!(
        games.resign(&id, &tokens[0]).await,
        Err(oanquan_game::GameError::GameDamaged(_))
    ));
    let listed = listed_ids(&store).await;
    assert_eq!(listed, [sound]);
}

/// Listings page past damaged rows as if they were not there: a page is full whenever more
/// games follow, whatever was skipped.
#[tokio::test]
async fn pages_fill_past_damaged_games() {
    let Some(schema) = TestSchema::new() else {
        return;
    };
    let store: Arc<dyn GameStore> = Arc::new(schema.store().await);
    let (games, _hub) = manager(Arc::clone(&store));
    let mut ids = Vec::new();
    for _ in 0..40 {
        ids.push(games.create_game(new_game()).await.unwrap().game.id);
    }
    let (client, _) = schema.raw().await;
    // The 20 newest but one are damaged: more than one round of rows.
    for id in &ids[19..39] {
        client
            .execute(
                "UPDATE games SET info = '{}' WHERE id = $1",
                &[&id.as_str()],
            )
            .await
            .unwrap();
    }
    let page = store.list(GameFilter::Open, 3, None).await.unwrap();
    let want = vec![&ids[39], &ids[18], &ids[17]];
    assert_eq!(page.games.iter().map(|g| &g.id).collect::<Vec<_>>(), want);
    let mut seen = page.games.len();
    let mut cursor = page.next_cursor;
    while let Some(next) = cursor {
        let page = store.list(GameFilter::Open, 3, Some(&next)).await.unwrap();
        assert!(!page.games.is_empty());
        seen += page.games.len();
        cursor = page.next_cursor;
    }
    assert_eq!(seen, 20);
}

/// Receives from a hub channel for up to 10 s, until `done` says the received are enough.
async fn receive_until<E: Clone>(
    rx: &mut tokio::sync::broadcast::Receiver<E>,
    mut done: impl FnMut(&[E]) -> bool,
) -> Vec<E> {
    let mut got = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !done(&got) {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Ok(event)) => got.push(event),
            Ok(Err(error)) => panic!("the hub channel: {error}"),
            Err(_) => break,
        }
    }
    got
}

/// Node B of the two-node tests: a hub that only its listener publishes into, and the hub's
/// lobby subscription.
struct NodeB {
    hub: Arc<Hub>,
    lobby: tokio::sync::broadcast::Receiver<Arc<LobbyEvent>>,
    stop: tokio::sync::watch::Sender<bool>,
    listener: tokio::task::JoinHandle<()>,
}

impl NodeB {
    async fn listening(b: &PostgresStore) -> Self {
        let hub = Hub::new(1024);
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let listener = b.spawn_listener(Arc::clone(&hub), stopped);
        let lobby = hub.subscribe_lobby();
        // The listener has no signal for "listening"; it connects in well under this.
        tokio::time::sleep(Duration::from_millis(500)).await;
        NodeB {
            hub,
            lobby,
            stop,
            listener,
        }
    }

    async fn stop(self) {
        self.stop.send(true).unwrap();
        tokio::time::timeout(Duration::from_secs(5), self.listener)
            .await
            .expect("the listener stops when told")
            .unwrap();
    }
}

/// Commits `n` moves of `id` on node `a` and collects the game's events node B's hub publishes,
/// through the last commit's sequence (returned with them).
async fn moves_heard_by(
    hub_b: &Arc<Hub>,
    a: &Arc<dyn GameStore>,
    id: &GameId,
    tokens: &[PlayerToken; 2],
    n: usize,
) -> (Vec<Arc<GameEvent>>, u64) {
    let (mut watch_b, _guard) = hub_b.subscribe_game(id, 10).unwrap();
    for _ in 0..n {
        let state = a.load(id).await.unwrap();
        a.commit(move_commit(state, tokens, false)).await.unwrap();
    }
    let last = a.info(id).await.unwrap().sequence;
    let events = receive_until(&mut watch_b, |got| {
        got.last()
            .is_some_and(|e: &Arc<GameEvent>| e.sequence >= last)
    })
    .await;
    (events, last)
}

/// Node B hears what node A commits: its listener publishes the game's events into B's hub, in
/// order and without gaps, and the lobby's, although A never told B's hub anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_on_one_node_reaches_the_other_nodes_hub_in_order() {
    let Some(schema) = TestSchema::new() else {
        return;
    };
    let a: Arc<dyn GameStore> = Arc::new(schema.store().await);
    let b = schema.store().await;
    let (games, _hub_a) = manager(Arc::clone(&a));
    let mut node_b = NodeB::listening(&b).await;

    let (id, tokens) = started(&games).await;
    let lobby = receive_until(&mut node_b.lobby, |got| got.len() >= 2).await;
    assert!(
        lobby.len() >= 2,
        "created and joined reach node B's lobby: {lobby:?}"
    );
    let sequences: Vec<u64> = lobby.iter().map(|e| e.sequence).collect();
    assert!(sequences.windows(2).all(|w| w[0] < w[1]), "{sequences:?}");

    let (events, last) = moves_heard_by(&node_b.hub, &a, &id, &tokens, 6).await;
    let sequences: Vec<u64> = events.iter().map(|e| e.sequence).collect();
    let first = sequences.first().copied().unwrap_or(0);
    assert_eq!(sequences, (first..=last).collect::<Vec<_>>());
    let moves = events
        .iter()
        .filter(|e| matches!(e.kind, GameEventKind::MovePlayed { .. }))
        .count();
    assert!(moves >= 6, "every move reached node B: {sequences:?}");

    node_b.stop().await;
}

/// Reads which of the given leases are held.
fn holders(leases: &[tokio::sync::watch::Receiver<bool>]) -> Vec<usize> {
    (0..leases.len()).filter(|&i| *leases[i].borrow()).collect()
}

/// Waits up to `within` for exactly one holder, checking that never two hold at once.
async fn one_holder(leases: &[tokio::sync::watch::Receiver<bool>], within: Duration) -> usize {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let held = holders(leases);
        assert!(held.len() <= 1, "two leaders at once: {held:?}");
        if let [holder] = held[..] {
            return holder;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no node took the lease within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits up to 5 s for a holder to notice it no longer holds the lease.
async fn released(lease: &tokio::sync::watch::Receiver<bool>) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while *lease.borrow() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the holder did not notice"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Of three nodes one holds the leader lease; when its session dies another takes over within
/// a few seconds, and when a holder stops, too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_node_holds_the_lease_and_another_takes_over() {
    let Some(schema) = TestSchema::new() else {
        return;
    };
    let mut stops = Vec::new();
    let mut leases = Vec::new();
    let mut tasks = Vec::new();
    for _ in 0..3 {
        let store = schema.store().await;
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let (held, task) = store.spawn_lease(stopped);
        stops.push(stop);
        leases.push(held);
        tasks.push(task);
    }
    let observer = schema.store().await;
    let first = one_holder(&leases, Duration::from_secs(5)).await;
    assert!(observer.leader_running().await.unwrap());
    // Stays alone for a while.
    for _ in 0..50 {
        assert_eq!(holders(&leases), vec![first]);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // The holder's session is killed (as if its node died): someone holds it again.
    let (raw, _) = schema.raw().await;
    let killed: i64 = raw
        .query_one(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_locks \
             WHERE locktype = 'advisory' AND granted AND classid = $1::int::oid \
             AND objid = hashtext(current_schema())::oid AND objsubid = 2",
            &[&crate::nodes::LEASE_KEY],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(killed, 1, "the lease is one session's lock");
    released(&leases[first]).await;
    let second = one_holder(&leases, Duration::from_secs(5)).await;

    // A holder that stops gives it up to one of the others.
    stops[second].send(true).unwrap();
    released(&leases[second]).await;
    let third = one_holder(&leases, Duration::from_secs(5)).await;
    assert_ne!(third, second);
    for stop in &stops {
        let _ = stop.send(true);
    }
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .unwrap()
            .unwrap();
    }
    // The lock goes when PostgreSQL sees the session end, a moment after the task ends.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while observer.leader_running().await.unwrap() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no leader is left 5 s after every holder stopped"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The `xmin` of each game's row: the transaction that last wrote it.
async fn writers_of(schema: &TestSchema, ids: &[GameId]) -> Vec<i64> {
    let (client, _) = schema.raw().await;
    let mut xmins = Vec::new();
    for id in ids {
        let row = client
            .query_one(
                "SELECT xmin::text::int8 FROM games WHERE id = $1",
                &[&id.as_str()],
            )
            .await
            .unwrap();
        xmins.push(row.get(0));
    }
    xmins
}

/// `n` started games, one after another.
async fn started_many(games: &GameManager, n: usize) -> Vec<(GameId, [PlayerToken; 2])> {
    let mut started_games = Vec::new();
    for _ in 0..n {
        started_games.push(started(games).await);
    }
    started_games
}

/// A move commit for each game, made from its state as `store` loads it now.
async fn first_moves(
    store: &Arc<dyn GameStore>,
    started_games: &[(GameId, [PlayerToken; 2])],
) -> Vec<Commit> {
    let mut commits = Vec::new();
    for (id, tokens) in started_games {
        let state = store.load(id).await.unwrap();
        commits.push(move_commit(state, tokens, false));
    }
    commits
}

/// Eight games' moves sent together are written in one transaction (every row has the same
/// writer), each answered with its own game's new sequence, and read back as committed.
#[tokio::test]
async fn commits_sent_together_are_written_in_one_transaction() {
    let Some(schema) = TestSchema::new() else {
        return;
    };
    let store: Arc<dyn GameStore> = Arc::new(schema.store().await);
    let (games, _hub) = manager(Arc::clone(&store));
    let started_games = started_many(&games, 8).await;
    let commits = first_moves(&store, &started_games).await;
    let expected: Vec<GameInfo> = commits.iter().map(|c| c.state.info().clone()).collect();
    // All queued before the writer runs: this runtime has one thread, busy here.
    let pending: Vec<_> = commits.into_iter().map(|c| store.commit(c)).collect();
    let answers = futures::future::join_all(pending).await;
    let ids: Vec<GameId> = started_games.iter().map(|(id, _)| id.clone()).collect();
    for ((answer, expected), id) in answers.iter().zip(&expected).zip(&ids) {
        let committed = answer.as_ref().unwrap();
        assert_eq!(&committed.info.id, id);
        assert_eq!(committed.info.position, expected.position);
        assert_eq!(
            committed.game_events.last().map(|e| e.sequence),
            Some(committed.info.sequence)
        );
        assert_eq!(store.load(id).await.unwrap().info(), &committed.info);
    }
    let xmins = writers_of(&schema, &ids).await;
    assert!(xmins.windows(2).all(|w| w[0] == w[1]), "{xmins:?}");
}

/// A batch with one commit that must be refused (a stale state) is written again commit by
/// commit: the others succeed, the stale one is a conflict, and no game holds a move twice.
#[tokio::test]
async fn a_refused_commit_does_not_take_its_batch_down() {
    let Some(schema) = TestSchema::new() else {
        return;
    };
    let store: Arc<dyn GameStore> = Arc::new(schema.store().await);
    let (games, _hub) = manager(Arc::clone(&store));
    let started_games = started_many(&games, 4).await;
    let mut commits = first_moves(&store, &started_games).await;
    // The first game again, from the state both commits were made from.
    let (stale_id, stale_tokens) = &started_games[0];
    let stale_state = games_state(&schema, stale_id).await;
    commits.push(move_commit(stale_state, stale_tokens, true));
    // All queued before the writer runs, as one batch: this runtime has one thread.
    let pending: Vec<_> = commits.into_iter().map(|c| store.commit(c)).collect();
    let mut answers = futures::future::join_all(pending).await;
    let stale = answers.pop().unwrap();
    let won = answers[0].as_ref().unwrap().info.sequence;
    assert_eq!(stale.unwrap_err(), StoreError::Conflict { current: won });
    for ((id, _), answer) in started_games.iter().zip(&answers) {
        let committed = answer.as_ref().unwrap();
        let Since::Events { events, .. } = store.game_events_since(id, 0).await.unwrap() else {
            panic!("the log of {id}");
        };
        let sequences: Vec<u64> = events.iter().map(|e| e.sequence).collect();
        assert_eq!(sequences, (1..=committed.info.sequence).collect::<Vec<_>>());
        assert_eq!(committed.info.move_count, 1, "{id}");
    }
}

/// A node's cached game is never stale: another node's commit, and a change to the row behind
/// the servers' backs, are both seen by its next load; an unchanged row is served from the
/// cache (here shown by moves removed behind its back, which a full load would miss).
#[tokio::test]
async fn a_cached_game_is_checked_against_its_row() {
    let Some(schema) = TestSchema::new() else {
        return;
    };
    let a: Arc<dyn GameStore> = Arc::new(schema.store().await);
    let b: Arc<dyn GameStore> = Arc::new(schema.store().await);
    let (games, _hub) = manager(Arc::clone(&a));
    let (id, tokens) = started(&games).await;
    let state = a.load(&id).await.unwrap();
    let mine = a.commit(move_commit(state, &tokens, false)).await.unwrap();
    assert_eq!(a.load(&id).await.unwrap().info(), &mine.info);

    let theirs = b
        .commit(move_commit(b.load(&id).await.unwrap(), &tokens, false))
        .await
        .unwrap();
    assert_eq!(a.load(&id).await.unwrap().info(), &theirs.info);

    let (client, _) = schema.raw().await;
    client
        .execute(
            "DELETE FROM moves WHERE game = (SELECT ord FROM games WHERE id = $1)",
            &[&id.as_str()],
        )
        .await
        .unwrap();
    assert_eq!(
        a.load(&id).await.unwrap().info(),
        &theirs.info,
        "served from the cache"
    );
    // A fresh node reads the rows: the moves are missing.
    assert!(matches!(
        games_state_result(&schema, &id).await,
        Err(StoreError::Damaged { .. })
    ));
    client
        .execute(
            "UPDATE games SET info = '[]' WHERE id = $1",
            &[&id.as_str()],
        )
        .await
        .unwrap();
    assert!(matches!(a.load(&id).await, Err(StoreError::Damaged { .. })));
}

async fn games_state_result(schema: &TestSchema, id: &GameId) -> Result<GameState, StoreError> {
    schema.store().await.load(id).await
}

/// A store of `schema` whose commits send no notification, as if its node stopped between
/// the commit and the NOTIFY every time.
async fn silent_store(schema: &TestSchema) -> Arc<dyn GameStore> {
    let silent = schema.store().await;
    silent
        .writers
        .notify
        .store(false, std::sync::atomic::Ordering::Relaxed);
    Arc::new(silent)
}

/// A commit whose notification is lost (the node stops between the two) still reaches the
/// other node's hub, from its listener's catch-up reads: the game's events in order, and the
/// lobby's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_notification_only_delays_delivery() {
    let Some(schema) = TestSchema::new() else {
        return;
    };
    let a = silent_store(&schema).await;
    let b = schema.store().await;
    let (games, _hub_a) = manager(Arc::clone(&a));
    let mut node_b = NodeB::listening(&b).await;

    let (id, tokens) = started(&games).await;
    let lobby = receive_until(&mut node_b.lobby, |got| got.len() >= 2).await;
    assert!(lobby.len() >= 2, "the lobby catches up: {lobby:?}");

    // Node B runs no agents: its catch-up reads only the games watched there, this one.
    let began = tokio::time::Instant::now();
    let (events, last) = moves_heard_by(&node_b.hub, &a, &id, &tokens, 3).await;
    let sequences: Vec<u64> = events.iter().map(|e| e.sequence).collect();
    assert_eq!(sequences, (1..=last).collect::<Vec<_>>());
    // One catch-up period (1 s) after the last commit, with room for a busy machine.
    let took = began.elapsed();
    assert!(
        took < Duration::from_secs(4),
        "the watcher waited {took:?} for moves whose notifications were lost"
    );

    node_b.stop().await;
}

/// A node that runs the background agents still catches up every unfinished game, watched or
/// not: a timed game moved on another node whose notification is lost reaches its agents'
/// commit feed within a couple of seconds, with the new deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_notification_reaches_the_agents_of_an_unwatched_game() {
    let Some(schema) = TestSchema::new() else {
        return;
    };
    let a = silent_store(&schema).await;
    let b = schema.store().await;
    let (games, _hub_a) = manager(Arc::clone(&a));
    let node_b = NodeB::listening(&b).await;
    let mut agents = node_b.hub.subscribe_commits();

    let created = games
        .create_game(NewGame {
            time_control: TimeControl::RealTime {
                initial: Duration::from_secs(600),
                increment: Duration::ZERO,
            },
            ..new_game()
        })
        .await
        .unwrap();
    let id = created.game.id.clone();
    let joined = games.join_game(&id, "Minh").await.unwrap();
    let tokens = [created.token, joined.token];
    let state = a.load(&id).await.unwrap();
    let began = tokio::time::Instant::now();
    let moved = a.commit(move_commit(state, &tokens, false)).await.unwrap();
    let heard = receive_until(&mut agents, |got: &[Arc<GameInfo>]| {
        got.iter()
            .any(|info| info.id == id && info.sequence >= moved.info.sequence)
    })
    .await;
    let took = began.elapsed();
    assert!(
        heard
            .iter()
            .any(|info| info.id == id && info.sequence == moved.info.sequence),
        "the agents never heard of the move: {heard:?}"
    );
    assert!(took < Duration::from_secs(4), "the agents waited {took:?}");
    assert_eq!(node_b.hub.watchers(&id), 0);

    drop(agents);
    node_b.stop().await;
}

/// A node without the agents reads, each second, the sequences of the games watched there and
/// of no other game, and forgets the games it stopped watching; a node with them reads every
/// unfinished game.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_catch_up_reads_only_the_games_watched_here_unless_the_agents_run_here() {
    let Some(schema) = TestSchema::new() else {
        return;
    };
    let a: Arc<dyn GameStore> = Arc::new(schema.store().await);
    let (games, _hub_a) = manager(Arc::clone(&a));
    let started_games = started_many(&games, 3).await;
    let ids: Vec<GameId> = started_games.iter().map(|(id, _)| id.clone()).collect();
    let hub = Hub::new(16);
    let mut listener = nodes::Listener::new(schema.store().await, Arc::clone(&hub));

    assert_eq!(listener.scope(), nodes::Scope::Watched(Vec::new()));
    assert!(
        listener
            .sequences(listener.scope())
            .await
            .unwrap()
            .is_empty()
    );

    let (_rx, guard) = hub.subscribe_game(&ids[1], 4).unwrap();
    assert_eq!(
        listener.scope(),
        nodes::Scope::Watched(vec![ids[1].clone()])
    );
    let read = listener.sequences(listener.scope()).await.unwrap();
    let read_ids: Vec<&GameId> = read.iter().map(|(id, _)| id).collect();
    assert_eq!(read_ids, vec![&ids[1]]);
    assert_eq!(read[0].1, a.info(&ids[1]).await.unwrap().sequence);

    // Remembered while watched (the first catch-up notes where each game is), forgotten once
    // nobody watches it here.
    listener.catch_up().await;
    assert_eq!(listener.tracked(), 1);
    drop(guard);
    listener.catch_up().await;
    assert_eq!(listener.tracked(), 0);

    // More watched games than one statement takes are read in pages, all of them.
    let many: Vec<GameId> = (0..nodes::CATCH_UP_PAGE + 1)
        .map(|i| GameId::parse(&format!("absent{i}")).unwrap())
        .chain(std::iter::once(ids[2].clone()))
        .collect();
    let read = listener
        .sequences(nodes::Scope::Watched(many))
        .await
        .unwrap();
    assert_eq!(read.len(), 1);
    assert_eq!(read[0].0, ids[2]);

    let _agents = hub.subscribe_commits();
    assert_eq!(listener.scope(), nodes::Scope::Unfinished);
    let mut read: Vec<GameId> = listener
        .sequences(listener.scope())
        .await
        .unwrap()
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    read.sort_by(|x, y| x.as_str().cmp(y.as_str()));
    let mut all = ids.clone();
    all.sort_by(|x, y| x.as_str().cmp(y.as_str()));
    assert_eq!(read, all);
}

/// The notifications of a batch: one per game with its new sequence, and the lobby's highest
/// sequence once; a quote in a payload cannot end the literal.
#[test]
fn notifications_are_one_statement_outside_the_commit() {
    let id = |text: &str| GameId::parse(text).unwrap();
    let notices = [
        writer::Notice {
            game: Some((id("abc"), 4)),
            lobby: Some(7),
        },
        writer::Notice {
            game: Some((id("d-e_f"), 9)),
            lobby: None,
        },
        writer::Notice {
            game: None,
            lobby: Some(8),
        },
    ];
    assert_eq!(
        writer::notify_sql(&notices).unwrap(),
        "BEGIN; SET LOCAL synchronous_commit = off; NOTIFY oanquan_game, 'abc:4';\
         NOTIFY oanquan_game, 'd-e_f:9';NOTIFY oanquan_lobby, '8'; COMMIT"
    );
    assert_eq!(writer::notify_sql(&[writer::Notice::default()]), None);
    assert_eq!(writer::quote("a'b"), "'a''b'");
}

/// This process's CPU time (user + system), from `/proc/self/stat`; `None` elsewhere.
fn process_cpu() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name, which ends with the last ')'.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // USER_HZ is 100 on every Linux the server runs on.
    Some(Duration::from_millis(ticks * 10))
}

/// What the cache of games saves a node per load (BENCHMARKS.md, "Issue 20"): a game of 30
/// moves loaded 2,000 times from the checked cache, and 2,000 times in full (its row and moves
/// read, decoded and replayed), one after the other on one connection; wall time and this
/// process's CPU per load. Run with `--release -- --ignored --nocapture`.
#[tokio::test]
#[ignore = "a measurement; run by hand"]
async fn cached_load_cost() {
    let Some(schema) = TestSchema::new() else {
        return;
    };
    let store = schema.store().await;
    let shared: Arc<dyn GameStore> = Arc::new(store.handle());
    let (games, _hub) = manager(Arc::clone(&shared));
    let (id, tokens) = started(&games).await;
    for _ in 0..30 {
        let state = shared.load(&id).await.unwrap();
        if state.info().status.is_over() {
            break;
        }
        shared
            .commit(move_commit(state, &tokens, false))
            .await
            .unwrap();
    }
    let moves = shared.load(&id).await.unwrap().info().move_count;
    const LOADS: u32 = 2_000;
    let client = store.pool.get().await.unwrap();
    let mut report = Vec::new();
    for cached in [true, false, true, false] {
        let (wall, cpu) = (std::time::Instant::now(), process_cpu().unwrap_or_default());
        for _ in 0..LOADS {
            if cached {
                shared.load(&id).await.unwrap();
            } else {
                reads::load_versioned(&client, &id).await.unwrap();
            }
        }
        let cpu = process_cpu().unwrap_or_default().saturating_sub(cpu);
        report.push(format!(
            "{}: {:.0} µs wall, {:.0} µs CPU per load",
            if cached { "cached" } else { "full" },
            wall.elapsed().as_secs_f64() * 1e6 / f64::from(LOADS),
            cpu.as_secs_f64() * 1e6 / f64::from(LOADS),
        ));
    }
    println!(
        "game of {moves} moves, {LOADS} loads each:\n{}",
        report.join("\n")
    );
}
