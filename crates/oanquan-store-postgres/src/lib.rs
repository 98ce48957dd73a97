//! The PostgreSQL [`GameStore`]: games, moves, both event logs, and accounts with their ratings
//! and API keys, in one PostgreSQL database that several server nodes share.
//!
//! It behaves as the memory and SQLite stores do (the same `store_suite` passes on all
//! three), and is shaped as [`GameStore`]'s docs describe:
//!
//! * **One transaction per call**, but for game commits (`create`, `commit`), which are
//!   grouped: each node's writer tasks take every commit pending and write them in one
//!   transaction, statements pipelined, and acknowledge each after `COMMIT` (see `batch`; a
//!   batch that fails is written again commit by commit, so each gets its own answer). A
//!   commit updates the game's row only if it is still at the expected sequence
//!   (`UPDATE … WHERE id = $1 AND sequence = $2`; a node that loses the race changes nothing
//!   and gets [`StoreError::Conflict`]), checks and writes the accounts it changes (a stale
//!   version is a conflict too), appends the moves and the numbered events, and takes lobby
//!   numbers from a counter row it locks until `COMMIT` (so the lobby is numbered in commit
//!   order, without gaps). A creation whose id exists is a conflict; a username whose key is
//!   taken is [`StoreError::AlreadyExists`].
//! * **Notifications** (`NOTIFY oanquan_game, '<id>:<sequence>'` and
//!   `NOTIFY oanquan_lobby, '<sequence>'`) are sent once the commits are durable, in a
//!   transaction of their own that does not wait for the disk: inside the durable commit they
//!   held PostgreSQL's notification-queue lock through its WAL flush, and commits could not
//!   group. One lost in a crash delays delivery by at most the listener's catch-up period
//!   (`nodes`), never loses an event.
//! * **Reads** of more than one statement run at `REPEATABLE READ`, so that a lobby snapshot
//!   and its sequence, or a log and the game's state, agree.
//! * **Nothing in memory is needed for correctness**: the node's cache of unfinished games
//!   (see `cache`) is checked against the row's sequence and `xmin` on every load, so any node
//!   reads what any other node committed, and commits stay optimistic.
//! * **Faults.** A connection that fails, a database that is away, a pool with no free
//!   connection in time, or a statement over its timeout is [`StoreError::Unavailable`]:
//!   nothing was changed (or, for a commit cut off after `COMMIT` was sent, the outcome is
//!   the database's, as for any client). A game whose row does not decode is
//!   [`StoreError::Damaged`] for its own reads and skipped by listings.
//! * **Several nodes**: [`PostgresStore::spawn_listener`] publishes every node's commits into
//!   this node's hub, [`PostgresStore::spawn_lease`] names the one node that runs the
//!   background agents (see `nodes`), and [`PostgresStore::spawn_seeks`] shares the open seeks
//!   (see `seeks`).
//! * **Durability** is the database's: a commit is acknowledged after `COMMIT` returns, and
//!   the session asks for `synchronous_commit = on` unless the URL says otherwise.
//!
//! # The client
//!
//! `tokio-postgres` with `deadpool-postgres`, chosen over `sqlx` and `diesel`:
//!
//! * it is async on the runtime the server already runs (tokio), so no thread pool of
//!   blocking connections as SQLite needs;
//! * queries are plain strings checked by the tests against a real database, not at compile
//!   time: building the workspace needs no database (the README's `cargo test` on a machine
//!   without PostgreSQL still builds and passes);
//! * it pipelines statements on one connection, caches prepared statements per connection,
//!   and speaks `LISTEN`/`NOTIFY`, which events across nodes need;
//! * `deadpool-postgres` is a small pool with exactly the limits we want (size, wait, connect
//!   and recycle timeouts) and nothing else; together they add few crates to the build.
//!
//! TLS to the database is not supported yet: connect over a local socket or a trusted network.
//!
//! # The JSON codec
//!
//! Games and events are stored as the SQLite store stores them: the same serde mirrors of the
//! domain types (`codec`, compiled from the SQLite crate's source file, so both stores write
//! and read the same JSON and a change to it is a change to both). The JSON is kept as `TEXT`,
//! exactly as written and checked to read back, rather than `JSONB`, which would parse and
//! re-encode every row on the way in for queries the store never makes
//! (`info::jsonb` works when an operator wants to look inside).

mod accounts;
mod batch;
mod cache;
#[path = "../../oanquan-store-sqlite/src/codec.rs"]
mod codec;
mod fault;
mod health;
mod nodes;
mod reads;
mod schema;
mod seeks;
mod writer;

use std::fmt;
use std::future::Future;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use futures::FutureExt as _;
use futures::future::BoxFuture;
use oanquan_game::account::{Account, AccountId, ApiKeyRecord};
use oanquan_game::rating::Speed;
use oanquan_game::{
    Commit, Committed, GameEvent, GameFilter, GameId, GameInfo, GameState, GameStatus, GameStore,
    LeaderboardPage, LobbyEvent, Page, PlayerGameFilter, Since, StoreError, StoreFuture,
    leaderboard_after, page_cursor, parse_named_cursor, parse_page_cursor,
};
use tokio::sync::{mpsc, watch};
use tokio_postgres::IsolationLevel;
use tracing::{info, warn};

use crate::cache::GameCache;
use crate::codec::status_name;
use crate::fault::{Damage, backend, pool};
use crate::reads::{
    list_games, load_state, load_versioned, query, read_info, row_version, statuses,
};
use crate::schema::Target;

pub use crate::nodes::ClockResumption;
pub use crate::schema::{OpenError, SCHEMA_VERSION};
pub use crate::seeks::{PostgresSeeks, SEEK_CHANNEL};
pub use crate::writer::{GAME_CHANNEL, LOBBY_CHANNEL};

/// The longest a transaction of this store may wait on its own node between statements
/// before the database ends it (`idle_in_transaction_session_timeout`, at most three statement
/// timeouts). The store sends a transaction's statements back to back, so only a node that
/// stopped running (a frozen process, a paused VM) comes near it; meanwhile its transaction
/// holds row locks that every node's writes need (the lobby's counter), and an outside probe
/// saw every node's moves fail for as long as the idle limit then (30 s).
pub const IDLE_IN_TRANSACTION_LIMIT: Duration = Duration::from_secs(5);

/// How the store uses the database: the pool's limits and the store's own timeouts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostgresOptions {
    /// Connections of this node at most. Every call holds one for one transaction; a call
    /// that finds none free waits up to `wait_timeout`.
    pub max_connections: usize,
    /// How long a call waits for a free connection before it fails with
    /// [`StoreError::Unavailable`].
    pub wait_timeout: Duration,
    /// How long opening a connection may take.
    pub connect_timeout: Duration,
    /// The longest a statement may run (PostgreSQL's `statement_timeout`, also the bound on
    /// waiting for a row lock); past it the call fails with [`StoreError::Unavailable`].
    pub statement_timeout: Duration,
    /// The schema to keep the tables in (created if missing), instead of the URL's
    /// `search_path` (by default `public`). Letters, digits and `_`, starting with a letter or
    /// `_`, at most 63 bytes.
    pub schema: Option<String>,
    /// Writer tasks of this node's group commit: each takes every game commit pending and
    /// writes it in one transaction on one pooled connection (see `batch`). At least 1.
    pub writers: usize,
    /// Game commits in one transaction at most; 1 writes each commit in a transaction of its
    /// own. At least 1.
    pub max_batch: usize,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        PostgresOptions {
            // PostgreSQL's default max_connections is 100: a few nodes fit, with room for
            // operators.
            max_connections: 16,
            wait_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(5),
            statement_timeout: Duration::from_secs(10),
            schema: None,
            // Measured (BENCHMARKS.md, "Issue 20: group commit on PostgreSQL"): one batch
            // being written while the next one gathers.
            writers: 2,
            max_batch: 64,
        }
    }
}

/// Whether `text` is a PostgreSQL URL (`postgres://` or `postgresql://`) rather than a file.
#[must_use]
pub fn is_postgres_url(text: &str) -> bool {
    let lower = text.trim_start().to_ascii_lowercase();
    lower.starts_with("postgres://") || lower.starts_with("postgresql://")
}

/// See the module docs.
pub struct PostgresStore {
    pool: Pool,
    target: String,
    damage: Arc<Damage>,
    /// How to open a connection of its own, outside the pool (see `nodes`).
    config: tokio_postgres::Config,
    /// Whether writes work (see `health`), and the probe that keeps it current.
    health: Arc<watch::Sender<bool>>,
    writable: watch::Receiver<bool>,
    probe: Arc<AbortOnDrop>,
    /// The group commit's queue (see `batch`); its writer tasks end with the last sender.
    commits: mpsc::UnboundedSender<batch::Job>,
    writers: Arc<batch::Writers>,
    /// The unfinished games this node wrote or read (see `cache`).
    cache: Arc<GameCache>,
    /// When the last node was last alive, as found at connect and again when this node takes
    /// its turn at resuming the clocks (see `GameStore::last_alive`, `nodes::ClockResumption`).
    last_alive: Arc<std::sync::Mutex<Option<std::time::SystemTime>>>,
}

/// A task that ends with its last owner.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The target, never the URL: it may hold a password.
        f.debug_struct("PostgresStore")
            .field("database", &self.target)
            .finish_non_exhaustive()
    }
}

/// Whether `name` can be used as a schema without quoting surprises.
fn valid_schema(name: &str) -> bool {
    let mut chars = name.chars();
    name.len() <= 63
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

impl PostgresStore {
    /// Has `observe` told the number of game commits in every transaction the writers write
    /// (the group commit of `--database-batch`), from now on. Only the first observer set is
    /// kept; returns whether this one was.
    pub fn observe_batches(&self, observe: impl Fn(usize) + Send + Sync + 'static) -> bool {
        self.writers.batches.set(Box::new(observe)).is_ok()
    }

    /// Connects to the database at `url`, checks and migrates its schema (under an advisory
    /// lock, so that nodes starting together do not race), and replays every unfinished game
    /// once, reporting those that no longer load.
    ///
    /// # Errors
    ///
    /// [`OpenError`] for a URL that does not parse, a database that cannot be reached, tables
    /// of another application, or a schema written by a newer server; nothing is changed then.
    pub async fn connect(url: &str, options: PostgresOptions) -> Result<PostgresStore, OpenError> {
        let mut config: tokio_postgres::Config = url.parse().map_err(|e| {
            OpenError::Config(format!(
                "the PostgreSQL URL does not parse ({e}); write it as \
                 postgres://user:password@host:port/database"
            ))
        })?;
        if let Some(schema) = &options.schema
            && !valid_schema(schema)
        {
            return Err(OpenError::Config(format!(
                "{schema:?} is not a usable schema name: use lowercase letters, digits and _, \
                 starting with a letter or _, at most 63 bytes"
            )));
        }
        if options.writers == 0 || options.max_batch == 0 {
            return Err(OpenError::Config(
                "the PostgreSQL store needs at least one writer and batches of at least one \
                 commit"
                    .to_owned(),
            ));
        }
        if options.max_connections == 0 {
            return Err(OpenError::Config(
                "the PostgreSQL pool needs at least one connection".to_owned(),
            ));
        }
        let target = Target::of(&config);
        // Ours first, so that options given in the URL win; the schema last, since it was
        // asked for explicitly.
        let mut session = format!(
            "-c statement_timeout={} -c idle_in_transaction_session_timeout={} \
             -c synchronous_commit=on",
            options.statement_timeout.as_millis().max(1),
            options
                .statement_timeout
                .saturating_mul(3)
                .min(IDLE_IN_TRANSACTION_LIMIT)
                .as_millis()
                .max(1),
        );
        if let Some(given) = config.get_options() {
            session.push(' ');
            session.push_str(given);
        }
        if let Some(schema) = &options.schema {
            session.push_str(&format!(" -c search_path={schema}"));
        }
        config.options(session);
        if config.get_application_name().is_none() {
            config.application_name("oanquan-server");
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(options.connect_timeout);
        }
        config.keepalives(true);
        let manager = Manager::from_config(
            config.clone(),
            tokio_postgres::NoTls,
            ManagerConfig {
                // A connection that broke is found by the next statement, which then fails with
                // `Unavailable`; checking each one out with a query would cost every call a
                // round trip.
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(options.max_connections)
            .wait_timeout(Some(options.wait_timeout))
            .create_timeout(Some(options.connect_timeout))
            .recycle_timeout(Some(options.connect_timeout))
            .runtime(Runtime::Tokio1)
            .build()
            .map_err(|e| OpenError::Config(format!("building the connection pool: {e}")))?;
        let connect_error = |error: deadpool_postgres::PoolError| OpenError::Connect {
            target: target.0.clone(),
            detail: match error {
                deadpool_postgres::PoolError::Backend(error) => fault::describe(&error),
                other => other.to_string(),
            },
        };
        let mut client = pool.get().await.map_err(connect_error)?;
        if let Some(schema) = &options.schema {
            // Two nodes creating it at once: one of them finds it made.
            if let Err(error) = client
                .batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {schema}"))
                .await
            {
                let exists = client
                    .query_one(
                        "SELECT count(*) FROM pg_namespace WHERE nspname = $1",
                        &[schema],
                    )
                    .await
                    .is_ok_and(|row| row.get::<_, i64>(0) == 1);
                if !exists {
                    return Err(OpenError::Database {
                        target: target.0.clone(),
                        context: "creating the schema",
                        detail: fault::describe(&error),
                    });
                }
            }
        }
        let current: Option<String> = client
            .query_one("SELECT current_schema()", &[])
            .await
            .map_err(|error| OpenError::Database {
                target: target.0.clone(),
                context: "reading the current schema",
                detail: fault::describe(&error),
            })?
            .get(0);
        if current.is_none() {
            return Err(OpenError::Config(format!(
                "the PostgreSQL database {target} has no schema to keep the tables in: its \
                 search_path names none that exists; create one, or fix the search_path"
            )));
        }
        schema::migrate(&mut client, &target).await?;
        // Accounts from before schema version 4 get their look (a no-op once filled in; two
        // nodes doing it at once write the same values).
        accounts::fill_looks(&client)
            .await
            .map_err(|error| OpenError::Database {
                target: target.0.clone(),
                context: "filling in the usernames' looks",
                detail: error.to_string(),
            })?;
        nodes::measure_clock_at_start(&client).await;
        // Before this node's first heartbeat: the last sign of life of the nodes before it.
        let last_alive: Option<std::time::SystemTime> = client
            .query_one("SELECT max(coalesce(left_at, seen)) FROM seek_nodes", &[])
            .await
            .and_then(|row| row.try_get(0))
            .map_err(|error| OpenError::Database {
                target: target.0.clone(),
                context: "reading when the last node was alive",
                detail: fault::describe(&error),
            })?;
        drop(client);
        let (health, writable) = watch::channel(true);
        let health = Arc::new(health);
        let probe = Arc::new(AbortOnDrop(tokio::spawn(health::probe(
            pool.clone(),
            Arc::clone(&health),
        ))));
        let cache = Arc::new(GameCache::default());
        let (commits, queue) = mpsc::unbounded_channel();
        let writers = Arc::new(batch::Writers {
            queue: tokio::sync::Mutex::new(queue),
            pool: pool.clone(),
            health: Arc::clone(&health),
            cache: Arc::clone(&cache),
            max_batch: options.max_batch,
            notify: std::sync::atomic::AtomicBool::new(true),
            batches: std::sync::OnceLock::new(),
        });
        for _ in 0..options.writers {
            tokio::spawn(Arc::clone(&writers).run());
        }
        let store = PostgresStore {
            pool,
            target: target.0,
            damage: Arc::new(Damage::default()),
            config,
            health,
            writable,
            probe,
            commits,
            writers,
            cache,
            last_alive: Arc::new(std::sync::Mutex::new(last_alive)),
        };
        store
            .check_unfinished()
            .await
            .map_err(|error| OpenError::Database {
                target: store.target.clone(),
                context: "replaying the unfinished games",
                detail: error.to_string(),
            })?;
        Ok(store)
    }

    /// Replays every unfinished game once: a game that no longer loads is reported now, by id,
    /// rather than when its players come back.
    async fn check_unfinished(&self) -> Result<(), StoreError> {
        let client = self.pool.get().await.map_err(pool)?;
        let rows = query(
            &client,
            "SELECT id FROM games WHERE status IN ('waiting', 'active') ORDER BY ord",
            &[],
        )
        .await?;
        let mut broken = 0;
        for row in &rows {
            let id: String = row.try_get(0).unwrap_or_default();
            let loaded = match GameId::parse(&id) {
                Ok(id) => load_state(&client, &id).await,
                Err(e) => Err(StoreError::Backend(e.to_string())),
            };
            match loaded {
                Ok(_) => {}
                Err(error @ StoreError::Unavailable(_)) => return Err(error),
                Err(error @ StoreError::Damaged { .. }) => {
                    broken += 1;
                    self.damage.game(&error);
                }
                Err(error) => {
                    broken += 1;
                    self.damage.report(&format!("game {id}"), &error);
                }
            }
        }
        info!(
            database = %self.target,
            unfinished = rows.len() - broken,
            broken,
            "database open; unfinished games resume"
        );
        Ok(())
    }

    /// Host, port, database and user (never the password).
    #[must_use]
    pub fn target(&self) -> &str {
        &self.target
    }

    /// Queues a game commit for the group commit (see `batch`), answered once it is durable
    /// (or refused). A caller that goes away does not withdraw it: its outcome is the same as
    /// if it had waited.
    fn submit(&self, create: bool, commit: Commit) -> StoreFuture<'_, Committed> {
        // A game found damaged takes no more writes: its state, the base of the change, may be
        // what the damage made of it.
        if let Some(known) = self.damage.known(&commit.state.info().id) {
            return futures::future::ready(Err(known)).boxed();
        }
        let (reply, answer) = tokio::sync::oneshot::channel();
        let queued = self.commits.send(batch::Job {
            create,
            commit,
            reply,
        });
        async move {
            queued.map_err(|_| StoreError::Backend("the database writers stopped".to_owned()))?;
            answer
                .await
                .map_err(|_| StoreError::Backend("the database writers stopped".to_owned()))?
        }
        .boxed()
    }

    /// Runs `write` in one transaction of its own and commits it, on a task of its own: a
    /// caller that goes away (a cancelled request) does not cut a commit in half, and its
    /// outcome is the same as if it had waited.
    fn write<T, F>(&self, write: F) -> StoreFuture<'_, T>
    where
        T: Send + 'static,
        F: for<'t> FnOnce(
                &'t deadpool_postgres::Transaction<'t>,
            ) -> BoxFuture<'t, Result<T, StoreError>>
            + Send
            + 'static,
    {
        let pool = self.pool.clone();
        let health = Arc::clone(&self.health);
        let task = tokio::spawn(async move {
            let mut client = match pool.get().await {
                Ok(client) => client,
                Err(error) => {
                    let error = fault::pool(error);
                    if !pool.is_closed() {
                        health::set(&health, false, &error);
                    }
                    return Err(error);
                }
            };
            let result = async {
                let tx = client.transaction().await.map_err(backend)?;
                let value = write(&tx).await?;
                tx.commit().await.map_err(backend)?;
                Ok(value)
            }
            .await;
            // A broken connection says the database is away; a conflict, a busy row or a
            // damaged game says nothing about writes in general (the probe sees a read-only
            // database within a second).
            match &result {
                Ok(_) => health::set(&health, true, &""),
                Err(error @ StoreError::Unavailable(_)) if client.is_closed() => {
                    health::set(&health, false, error);
                }
                Err(_) => {}
            }
            result
        });
        async move {
            task.await
                .map_err(|e| StoreError::Backend(format!("database write task: {e}")))?
        }
        .boxed()
    }

    /// Runs `read` in one read-only `REPEATABLE READ` transaction: every statement sees the
    /// same snapshot.
    fn read<'a, T, F>(&'a self, read: F) -> StoreFuture<'a, T>
    where
        T: Send + 'a,
        F: for<'t> FnOnce(
                &'t deadpool_postgres::Transaction<'t>,
            ) -> BoxFuture<'t, Result<T, StoreError>>
            + Send
            + 'a,
    {
        async move {
            let mut client = self.pool.get().await.map_err(pool)?;
            let tx = client
                .build_transaction()
                .isolation_level(IsolationLevel::RepeatableRead)
                .read_only(true)
                .start()
                .await
                .map_err(backend)?;
            let value = read(&tx).await?;
            // Nothing to keep; ending it now returns a clean connection to the pool.
            tx.rollback().await.map_err(backend)?;
            Ok(value)
        }
        .boxed()
    }

    /// Runs `read`, of one statement (consistent on its own), on a pooled connection.
    fn read_one<'a, T, F, Fut>(&'a self, read: F) -> StoreFuture<'a, T>
    where
        T: Send + 'a,
        F: FnOnce(deadpool_postgres::Object) -> Fut + Send + 'a,
        Fut: Future<Output = Result<T, StoreError>> + Send + 'a,
    {
        async move {
            let client = self.pool.get().await.map_err(pool)?;
            read(client).await
        }
        .boxed()
    }

    /// [`PostgresStore::read_one`] of one game's data: a damaged game is logged (once).
    fn read_game<'a, T, F, Fut>(&'a self, read: F) -> StoreFuture<'a, T>
    where
        T: Send + 'a,
        F: FnOnce(deadpool_postgres::Object) -> Fut + Send + 'a,
        Fut: Future<Output = Result<T, StoreError>> + Send + 'a,
    {
        let damage = Arc::clone(&self.damage);
        self.read_one(read)
            .map(move |result| damage.check(result))
            .boxed()
    }
}

impl GameStore for PostgresStore {
    fn last_alive(&self) -> Option<std::time::SystemTime> {
        *self
            .last_alive
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn create(&self, commit: Commit) -> StoreFuture<'_, Committed> {
        self.submit(true, commit)
    }

    fn commit(&self, commit: Commit) -> StoreFuture<'_, Committed> {
        self.submit(false, commit)
    }

    fn load<'a>(&'a self, id: &'a GameId) -> StoreFuture<'a, GameState> {
        if let Some(known) = self.damage.known(id) {
            return futures::future::ready(Err(known)).boxed();
        }
        let cache = Arc::clone(&self.cache);
        self.read_game(move |client| async move {
            if cache.contains(id) {
                let version = row_version(&client, id).await?;
                if let Some(state) = cache.get(id, version) {
                    return Ok(state);
                }
            }
            let (state, version) = load_versioned(&client, id).await?;
            cache.put(&state, version);
            Ok(state)
        })
    }

    fn info<'a>(&'a self, id: &'a GameId) -> StoreFuture<'a, GameInfo> {
        if let Some(known) = self.damage.known(id) {
            return futures::future::ready(Err(known)).boxed();
        }
        self.read_game(move |client| async move { read_info(&client, id).await })
    }

    fn list<'a>(
        &'a self,
        filter: GameFilter,
        limit: usize,
        cursor_text: Option<&'a str>,
    ) -> StoreFuture<'a, Page> {
        let end = match cursor_text {
            // Cursors hold an `ord` bound, a BIGINT.
            Some(text) => match parse_page_cursor(filter, text)
                .and_then(|end| i64::try_from(end).map_err(|_| StoreError::BadCursor))
            {
                Ok(end) => end,
                Err(error) => return futures::future::ready(Err(error)).boxed(),
            },
            None => i64::MAX,
        };
        let damage = Arc::clone(&self.damage);
        self.read(move |tx| {
            async move {
                let (games, next) = list_games(tx, &statuses(filter), limit, end, &damage).await?;
                Ok(Page {
                    games,
                    // Resume just above the first game not returned (ords are positive).
                    next_cursor: next.map(|ord| page_cursor(filter, ord.unsigned_abs() + 1)),
                })
            }
            .boxed()
        })
    }

    fn game_events_since<'a>(
        &'a self,
        id: &'a GameId,
        after: u64,
    ) -> StoreFuture<'a, Since<GameEvent>> {
        if let Some(known) = self.damage.known(id) {
            return futures::future::ready(Err(known)).boxed();
        }
        let (id, damage) = (id.clone(), Arc::clone(&self.damage));
        self.read(move |tx| async move { reads::game_events_since(tx, &id, after).await }.boxed())
            .map(move |result| damage.check(result))
            .boxed()
    }

    fn lobby_events_since(&self, after: u64) -> StoreFuture<'_, Since<LobbyEvent>> {
        let damage = Arc::clone(&self.damage);
        self.read(move |tx| {
            async move { reads::lobby_events_since(tx, after, &damage).await }.boxed()
        })
    }

    fn lobby_snapshot(&self, limit: usize) -> StoreFuture<'_, (Vec<GameInfo>, u64)> {
        let damage = Arc::clone(&self.damage);
        self.read(move |tx| {
            async move {
                // One snapshot: the list and the sequence describe the same moment.
                // At most `limit` of each status, merged newest first.
                let mut games = Vec::new();
                for status in [GameStatus::WaitingForPlayers, GameStatus::Active] {
                    let (some, _) =
                        list_games(tx, &[status_name(status)], limit, i64::MAX, &damage).await?;
                    games.extend(some);
                }
                games.sort_by_key(|game| std::cmp::Reverse(game.created));
                Ok((games, reads::last_lobby_sequence(tx).await?))
            }
            .boxed()
        })
    }

    fn open_games_by_creator(&self) -> StoreFuture<'_, Vec<(GameId, IpAddr)>> {
        let damage = Arc::clone(&self.damage);
        self.read_one(move |client| async move {
            let rows = query(
                &client,
                "SELECT id, creator FROM games
                 WHERE status IN ('waiting', 'active') AND creator IS NOT NULL",
                &[],
            )
            .await?;
            // A row that does not parse is skipped with a warning: it only loosens a limit. A
            // damaged game is not counted either: nothing can end it, so it would hold its
            // creator's slot for ever.
            Ok(rows
                .iter()
                .filter_map(|row| {
                    let id: String = row.try_get(0).ok()?;
                    let creator: String = row.try_get(1).ok()?;
                    match (GameId::parse(&id), creator.parse::<IpAddr>()) {
                        (Ok(id), _) if damage.contains(&format!("game {id}")) => None,
                        (Ok(id), Ok(ip)) => Some((id, ip)),
                        _ => {
                            warn!(game_id = %id, %creator, "unreadable creator address; not counted");
                            None
                        }
                    }
                })
                .collect())
        })
    }

    fn create_account(&self, account: Account, key: ApiKeyRecord) -> StoreFuture<'_, ()> {
        self.write(move |tx| async move { accounts::create(tx, &account, &key).await }.boxed())
    }

    fn account<'a>(&'a self, id: &'a AccountId) -> StoreFuture<'a, Account> {
        self.read_one(move |client| async move {
            accounts::read(&client, id.as_str())
                .await?
                .ok_or(StoreError::NotFound)
        })
    }

    fn account_by_name<'a>(&'a self, key: &'a str) -> StoreFuture<'a, Account> {
        self.read_one(move |client| async move {
            accounts::read_by_name(&client, key)
                .await?
                .ok_or(StoreError::NotFound)
        })
    }

    fn account_by_api_key<'a>(
        &'a self,
        key_id: &'a str,
    ) -> StoreFuture<'a, (Account, ApiKeyRecord)> {
        let key_id = key_id.to_owned();
        self.read(move |tx| {
            async move {
                accounts::read_by_key(tx, &key_id)
                    .await?
                    .ok_or(StoreError::NotFound)
            }
            .boxed()
        })
    }

    fn add_api_key<'a>(&'a self, id: &'a AccountId, key: ApiKeyRecord) -> StoreFuture<'a, ()> {
        let id = id.clone();
        self.write(move |tx| async move { accounts::add_key(tx, &id, &key).await }.boxed())
    }

    fn revoke_api_key<'a>(
        &'a self,
        id: &'a AccountId,
        key_id: &'a str,
        now: SystemTime,
    ) -> StoreFuture<'a, bool> {
        let (id, key_id) = (id.clone(), key_id.to_owned());
        self.write(move |tx| {
            async move { accounts::revoke_key(tx, &id, &key_id, now).await }.boxed()
        })
    }

    fn api_keys<'a>(&'a self, id: &'a AccountId) -> StoreFuture<'a, Vec<ApiKeyRecord>> {
        self.read_one(move |client| async move { accounts::keys(&client, id).await })
    }

    fn leaderboard<'a>(
        &'a self,
        speed: Speed,
        limit: usize,
        cursor: Option<&'a str>,
    ) -> StoreFuture<'a, LeaderboardPage> {
        let after = match cursor
            .map(|text| leaderboard_after(speed, text))
            .transpose()
        {
            Ok(after) => after,
            Err(error) => return futures::future::ready(Err(error)).boxed(),
        };
        let damage = Arc::clone(&self.damage);
        self.read(move |tx| {
            async move { accounts::leaderboard(tx, speed, limit, after.as_ref(), &damage).await }
                .boxed()
        })
    }

    fn player_games<'a>(
        &'a self,
        id: &'a AccountId,
        filter: PlayerGameFilter,
        limit: usize,
        cursor: Option<&'a str>,
    ) -> StoreFuture<'a, Page> {
        let name = format!("player-{}", filter.name());
        let end = match cursor {
            Some(text) => match parse_named_cursor(&name, text)
                .and_then(|end| i64::try_from(end).map_err(|_| StoreError::BadCursor))
            {
                Ok(end) => end,
                Err(error) => return futures::future::ready(Err(error)).boxed(),
            },
            None => i64::MAX,
        };
        let (id, damage) = (id.clone(), Arc::clone(&self.damage));
        self.read(move |tx| {
            async move {
                let (games, next) =
                    accounts::player_games(tx, &id, filter, limit, end, &damage).await?;
                Ok(Page {
                    games,
                    // Resume just above the first game not returned (ords are positive).
                    next_cursor: next.map(|ord| format!("{name}.{}", ord.unsigned_abs() + 1)),
                })
            }
            .boxed()
        })
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }

    fn writable(&self) -> Option<watch::Receiver<bool>> {
        Some(self.writable.clone())
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        // Later calls fail with `Unavailable`; connections close as they come back.
        async move {
            self.pool.close();
            info!(database = %self.target, "database connections closed");
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod seek_tests;
