//! The SQLite [`GameStore`]: games, moves, both event logs, and accounts with their ratings and
//! API keys, in one file, SQLite compiled in.
//!
//! # Durability
//!
//! A commit's future resolves only after its transaction is committed, in WAL mode with
//! `synchronous = FULL`: the WAL is fsynced before the answer, so an acknowledged change
//! survives the process being killed (SIGKILL) and the machine losing power, as far as the disk
//! honours fsync. The event logs are kept whole, so resuming by sequence number works across
//! restarts; unfinished games load on demand (and are all replayed once at start as a check).
//!
//! # Group commit
//!
//! One writer thread owns the only writing connection. Commits reach it through a channel; it
//! takes every commit waiting (up to [`MAX_BATCH`]), runs them in one transaction (a commit that
//! fails its optimistic-concurrency check has written nothing; one that fails after writing
//! makes the batch run again with each commit in its own `SAVEPOINT`, so that it is rolled back
//! alone), commits once, and then answers every caller. Under load, many moves share one fsync;
//! when idle, a lone move is written at once. Nothing waits for a timer. Registrations and API
//! key changes join the same batches, each in its own savepoint too; a commit's account updates
//! (a rated game's new ratings) are checked and written inside the commit (inside its own
//! savepoint when its batch reruns one commit at a time), so a stale account refuses that
//! commit whole and nothing else.
//!
//! Reads run on a small pool of read-only connections in `spawn_blocking`, at most
//! `reads::MAX_READERS` at once (the others wait their turn without a thread); WAL lets them
//! read a consistent snapshot while the writer writes. Nothing here blocks the async runtime. The
//! latest state of each game being played is also kept in memory by the writer (see `writer::Cache`),
//! so a move does not start by reading and replaying its whole game.
//!
//! # What a move writes
//!
//! Since schema version 5 a game's events are rows of one append-only table, `game_log`, in
//! commit order, and each move lives in its `MovePlayed` row: a move appends two rows at the
//! end of one table (and one index entry each) instead of rewriting pages of three. A plain
//! move (a `MovePlayed` and a `TurnStarted`, nothing else) does not rewrite its game's `games`
//! row when that row, replayed forward with the move (`plain::after_plain_move`), gives exactly
//! the state being committed; the writer checks this on every move and writes the row
//! otherwise. Loads replay the moves logged after the row; a clean close brings every row up
//! to date.
//!
//! # Faults
//!
//! * A game whose stored data does not decode is [`StoreError::Damaged`] for its own reads,
//!   and skipped (logged once, see `fault::Damage`) by listings, lobby snapshots and lobby logs: one
//!   damaged row must not hide every other game. A commit is decoded again before it is written
//!   and refused if it would not read back as accepted.
//! * A write that fails for a lasting reason of the file or the disk (full, read-only, I/O) is
//!   [`StoreError::Unavailable`] and turns [`GameStore::writable`] `false`; the writer then
//!   probes with backoff (`writer::probe`) and turns it `true` at the first write that succeeds.
//!
//! # Closing
//!
//! [`GameStore::close`] (or dropping the store) closes the readers first and the writer last:
//! SQLite folds the WAL into the file and removes the `-wal` and `-shm` files only when its
//! last connection closes, and a read-only connection cannot. The writer checkpoints with
//! `TRUNCATE` before it closes, so a clean stop leaves the database file alone, complete.
//!
//! # One server per file
//!
//! A store holds an exclusive lock on `<database>.lock` while it is open (see
//! `schema::lock`): a second server on the same file is refused at start. Optimistic
//! concurrency is also checked inside every transaction, so even without the lock (a filesystem
//! without `flock`) two processes could not corrupt the file, but each would tell only its own
//! watchers; a shared, multi-node deployment is what the PostgreSQL seam in [`GameStore`]'s
//! docs is for.

mod accounts;
mod backup;
mod codec;
mod fault;
mod full_check;
mod plain;
mod reads;
mod schema;
mod writer;

use std::fmt;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::SystemTime;

use futures::FutureExt as _;
use futures::future::BoxFuture;
use oanquan_game::account::{Account, AccountId, ApiKeyRecord};
use oanquan_game::rating::Speed;
use oanquan_game::{
    Commit, Committed, GameEvent, GameFilter, GameId, GameInfo, GameState, GameStatus, GameStore,
    LeaderboardPage, LobbyEvent, Page, PlayerGameFilter, Since, StoreError, StoreFuture,
    leaderboard_after, page_cursor, parse_named_cursor, parse_page_cursor,
};
use rusqlite::{Connection, OptionalExtension as _, params};
use tokio::sync::{oneshot, watch};
use tracing::{info, warn};

use crate::codec::{GameEventDto, History, InfoDto, LobbyEventDto, status_name, time_from_db};
use crate::fault::{Damage, backend, corrupt};
use crate::plain::{PlainPart, plain_part};
use crate::reads::{Lazy, Readers, check_unfinished, list_games, load_state, read_info, statuses};
use crate::writer::{
    BatchObserver, Cache, Job, Message, WriteJob, last_lobby_sequence, lock, run_writer,
};

pub use crate::backup::{BackupError, BackupReport, backup};
pub use crate::full_check::Outcome as FullCheckOutcome;
pub use crate::schema::{APPLICATION_ID, OpenError, SCHEMA_VERSION};
pub use crate::writer::MAX_BATCH;

/// A lobby resume missing more events than this gets a snapshot instead (like the memory
/// store's retention): replaying thousands of lobby events is slower than a fresh list.
const LOBBY_REPLAY_LIMIT: u64 = 10_000;

/// See the module docs.
pub struct SqliteStore {
    path: PathBuf,
    /// `None` once closed.
    writer: Mutex<Option<mpsc::Sender<Message>>>,
    thread: Mutex<Option<thread::JoinHandle<()>>>,
    readers: Arc<Readers>,
    cache: Cache,
    damage: Arc<Damage>,
    writable: watch::Receiver<bool>,
    batches: BatchObserver,
    /// Held until the store is closed (after its last write) or dropped.
    lock: schema::FileLock,
    /// The lock file's heartbeat, stopped at close (or when the store is dropped).
    heartbeat: Mutex<Option<schema::Heartbeat>>,
    /// The full integrity check started after the open; `None` once waited for or stopped.
    full_check: Mutex<Option<full_check::FullCheck>>,
}

/// What `slot` holds, leaving it empty (a poisoned lock is still read: closing must go on).
fn taken<T>(slot: &Mutex<Option<T>>) -> Option<T> {
    slot.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take()
}

impl fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// Opens (creating if missing) the database at `path`, checks it, migrates it, replays every
    /// unfinished game once, and starts the writer thread. Blocking: call it before serving or
    /// from `spawn_blocking`.
    ///
    /// # Errors
    ///
    /// [`OpenError`] for a file that is not ours, from a newer server, corrupt, or unusable; such
    /// a file is left unchanged.
    pub fn open(path: impl AsRef<Path>) -> Result<SqliteStore, OpenError> {
        let path = path.as_ref().to_owned();
        schema::refuse_at_sight(&path)?;
        let lock = schema::lock(&path)?;
        let companions = schema::NewCompanions::note(&path);
        // A refused file leaves the lock file as it found it, too, whichever check refuses it.
        let refusal = schema::RefusalRestores::new(&lock);
        let conn = schema::open_writer(&path, lock.previous_log_end())
            .inspect_err(|_| companions.remove())?;
        let log_end = lock
            .log_end_mark(&path)
            .inspect_err(|error| warn!(%error, "cannot record the log's end in the lock file"))
            .ok();
        if let Some(mark) = &log_end {
            writer::record_log_end(&conn, mark);
        }
        // Accounts from before schema version 6 get their look (a no-op once filled in).
        accounts::fill_looks(&conn).map_err(|e| OpenError::Corrupt {
            path: path.clone(),
            detail: format!("filling in the usernames' looks: {e}"),
        })?;
        let damage = Arc::new(Damage::default());
        check_unfinished(&conn, &path, &damage)?;
        let (writer, jobs) = mpsc::channel();
        let cache = Cache::default();
        let writer_cache = Arc::clone(&cache);
        let (health, writable) = watch::channel(true);
        let batches = BatchObserver::default();
        let writer_batches = Arc::clone(&batches);
        let thread = thread::Builder::new()
            .name("oanquan-sqlite-writer".to_owned())
            .spawn({
                let file = writer::FileIdentity::of(&path);
                move || {
                    run_writer(
                        conn,
                        &jobs,
                        &writer_cache,
                        &health,
                        &writer_batches,
                        &file,
                        log_end.as_ref(),
                    );
                }
            })
            .map_err(|source| OpenError::Io {
                path: path.clone(),
                context: "starting the writer thread",
                source,
            })?;
        refusal.opened();
        let full_check = full_check::FullCheck::start(&path);
        Ok(SqliteStore {
            full_check: Mutex::new(full_check),
            readers: Arc::new(Readers::new(path.clone())),
            path,
            writer: Mutex::new(Some(writer)),
            thread: Mutex::new(Some(thread)),
            cache,
            damage,
            writable,
            batches,
            lock,
            heartbeat: Mutex::new(None),
        })
    }

    /// Calls `observe` with the number of writes (commits, account writes) in each transaction
    /// the writer commits from now on: how many commits group commit puts together. Only the
    /// first observer set is kept; returns `false` for a later one.
    pub fn observe_batches(&self, observe: impl Fn(usize) + Send + Sync + 'static) -> bool {
        self.batches.set(Box::new(observe)).is_ok()
    }

    /// Runs `call` on the writing connection, between two batches, and returns its result
    /// (`None` once the store is closed). For tests that inject faults, such as
    /// `PRAGMA max_page_count` to fill the "disk".
    #[doc(hidden)]
    pub async fn on_writer_for_tests<T: Send + 'static>(
        &self,
        call: impl FnOnce(&mut Connection) -> T + Send + 'static,
    ) -> Option<T> {
        let (reply, answer) = oneshot::channel();
        let message = Message::Call(Box::new(move |conn| {
            let _ = reply.send(call(conn));
        }));
        if !self.send(message) {
            return None;
        }
        answer.await.ok()
    }

    fn send(&self, message: Message) -> bool {
        self.writer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .is_some_and(|writer| writer.send(message).is_ok())
    }

    /// Waits for the full integrity check started at open (see `full_check`) and returns what
    /// it found; `None` if it did not start or was already waited for. For tests.
    #[doc(hidden)]
    pub fn wait_full_check(&self) -> Option<FullCheckOutcome> {
        taken(&self.full_check).map(full_check::FullCheck::wait)
    }

    /// Whether the store is still open (not closed).
    fn writer_open(&self) -> bool {
        self.writer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_some()
    }

    /// See [`GameStore::close`]; blocking.
    fn close_now(&self) {
        // Readers first: SQLite removes the WAL only when its last connection closes, and a
        // read-only connection cannot; so the writer must be the last one. The full check's
        // connection is a reader too.
        if let Some(check) = taken(&self.full_check) {
            check.stop();
        }
        self.readers.close();
        drop(taken(&self.writer));
        let thread = taken(&self.thread);
        // The last sign of life, after the last write: a clean stop is charged to running
        // turns up to here (see `GameStore::last_alive`).
        if let Some(heartbeat) = taken(&self.heartbeat) {
            heartbeat.stop();
        }
        if let Some(thread) = thread {
            if thread.join().is_err() {
                warn!("the database writer thread panicked");
            }
            self.lock.mark_alive();
            if schema::companion(&self.path, "-wal").exists() {
                warn!(
                    path = %self.path.display(),
                    "the write-ahead log is still there after closing the database; it is part \
                     of the database: keep it next to the file (see STORAGE.md)"
                );
            } else {
                info!(path = %self.path.display(), "database closed; the write-ahead log is folded in");
            }
            self.lock.unlock();
        }
    }

    /// The database file.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn submit(&self, create: bool, commit: Commit) -> StoreFuture<'_, Committed> {
        // A game found damaged takes no more writes: its state, the base of the change, may be
        // what the damage made of it (an outside probe's move on a game whose log had failed).
        if let Some(known) = self.damage.known(&commit.state.info().id) {
            return futures::future::ready(Err(known)).boxed();
        }
        let (reply, answer) = oneshot::channel();
        let job = Job {
            create,
            commit,
            reply,
        };
        let sent = self.send(Message::Commit(job));
        async move {
            if !sent {
                return Err(StoreError::Unavailable(
                    "the database is closed (the server is stopping)".to_owned(),
                ));
            }
            answer.await.map_err(|_| {
                StoreError::Backend("the database writer stopped before answering".to_owned())
            })?
        }
        .boxed()
    }

    /// Runs `run` on the writer thread in the next batch, in its own savepoint; answers once
    /// the batch is durable.
    fn write<T: Send + 'static>(
        &self,
        run: impl FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> StoreFuture<'_, T> {
        let (reply, answer) = oneshot::channel();
        let job = WriteJob {
            run: Some(run),
            value: None,
            reply,
        };
        let sent = self.send(Message::Write(Box::new(job)));
        async move {
            if !sent {
                return Err(StoreError::Unavailable(
                    "the database is closed (the server is stopping)".to_owned(),
                ));
            }
            answer.await.map_err(|_| {
                StoreError::Backend("the database writer stopped before answering".to_owned())
            })?
        }
        .boxed()
    }

    fn read<T: Send + 'static>(
        &self,
        query: impl FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> StoreFuture<'_, T> {
        Arc::clone(&self.readers).read(query).boxed()
    }

    /// [`SqliteStore::read`] of game `id`'s data: damage SQLite finds in the file where it read
    /// counts as that game's, and a damaged game is logged (once).
    fn read_game<T: Send + 'static>(
        &self,
        id: &GameId,
        query: impl FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> StoreFuture<'_, T> {
        if let Some(known) = self.damage.known(id) {
            return futures::future::ready(Err(known)).boxed();
        }
        let damage = Arc::clone(&self.damage);
        let id = id.clone();
        self.read(query)
            .map(move |result| damage.check(fault::of_game(&id, result)))
            .boxed()
    }
}

impl Drop for SqliteStore {
    /// Closes the store if [`GameStore::close`] has not: blocks until the queued commits are
    /// written and the WAL is folded in, once, at shutdown.
    fn drop(&mut self) {
        self.close_now();
    }
}

impl GameStore for SqliteStore {
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }

    fn create(&self, commit: Commit) -> StoreFuture<'_, Committed> {
        self.submit(true, commit)
    }

    fn commit(&self, commit: Commit) -> StoreFuture<'_, Committed> {
        self.submit(false, commit)
    }

    fn load<'a>(&'a self, id: &'a GameId) -> StoreFuture<'a, GameState> {
        // Damage found since the game was cached (its log, read for a watcher) is answered
        // before the cached state: a damaged game is not one to play.
        if let Some(known) = self.damage.known(id) {
            return futures::future::ready(Err(known)).boxed();
        }
        if let Some(state) = lock(&self.cache).get(id) {
            return futures::future::ready(Ok(state.clone())).boxed();
        }
        let owned = id.clone();
        self.read_game(id, move |conn| load_state(conn, &owned))
    }

    fn info<'a>(&'a self, id: &'a GameId) -> StoreFuture<'a, GameInfo> {
        // As `load` answers: a commit is visible in the file a moment before the writer puts
        // its state in the cache, and in that moment GetGame showed an outside probe a move
        // that PlayMove (whose `expected_ply` it refused) and LegalMoves did not see yet.
        if let Some(known) = self.damage.known(id) {
            return futures::future::ready(Err(known)).boxed();
        }
        if let Some(state) = lock(&self.cache).get(id) {
            return futures::future::ready(Ok(state.info().clone())).boxed();
        }
        let owned = id.clone();
        self.read_game(id, move |conn| read_info(conn, &owned))
    }

    fn list<'a>(
        &'a self,
        filter: GameFilter,
        limit: usize,
        cursor_text: Option<&'a str>,
    ) -> StoreFuture<'a, Page> {
        let end = match cursor_text {
            // Cursors hold an `ord` bound, which SQLite keeps as an i64.
            Some(text) => match parse_page_cursor(filter, text)
                .and_then(|end| i64::try_from(end).map_err(|_| StoreError::BadCursor))
            {
                Ok(end) => end,
                Err(error) => return futures::future::ready(Err(error)).boxed(),
            },
            None => i64::MAX,
        };
        let damage = Arc::clone(&self.damage);
        self.read(move |conn| {
            let (games, next) = list_games(conn, statuses(filter), limit, end, &damage)?;
            Ok(Page {
                games,
                // Resume just above the first game not returned (rowids are positive).
                next_cursor: next.map(|ord| page_cursor(filter, ord.unsigned_abs() + 1)),
            })
        })
    }

    fn game_events_since<'a>(
        &'a self,
        id: &'a GameId,
        after: u64,
    ) -> StoreFuture<'a, Since<GameEvent>> {
        let key = id;
        let id = id.clone();
        self.read_game(key, move |conn| {
            // The log's last sequence: the row's may be older (see `writer`).
            let (ord, last, status, info): (i64, i64, String, Option<String>) = conn
                .prepare_cached(
                    "SELECT ord,
                            max(sequence, (SELECT coalesce(max(sequence), 0) FROM game_log
                                           WHERE game = games.ord)),
                            status, info
                     FROM games WHERE id = ?1",
                )
                .and_then(|mut s| {
                    s.query_row([id.as_str()], |row| {
                        // Text that is not UTF-8 is a damaged game, not a failed query.
                        let info = row.get_ref(3)?.as_str().ok().map(str::to_owned);
                        Ok((row.get(0)?, row.get(1)?, row.get(2)?, info))
                    })
                    .optional()
                })
                .map_err(backend)?
                .ok_or(StoreError::NotFound)?;
            let last = last as u64;
            if after > last {
                return Ok(Since::Ahead { last });
            }
            // Over is not enough: a finished game's log goes on while a rematch can be offered.
            // The summary is decoded only then; the position it may lack does not matter here.
            let over = status == status_name(GameStatus::Finished)
                || status == status_name(GameStatus::Aborted);
            let done = over && {
                let info = info.ok_or_else(|| corrupt(&id, "its data is not UTF-8 text"))?;
                let dto: InfoDto = serde_json::from_str(&info).map_err(|e| corrupt(&id, e))?;
                dto.decode().map_err(|e| corrupt(&id, e))?.info.log_closed()
            };
            let rows: Vec<(i64, i64, String, bool)> = conn
                .prepare_cached(
                    "SELECT sequence, time, event, mv IS NOT NULL FROM game_log
                     WHERE game = ?1 AND sequence > ?2 ORDER BY sequence",
                )
                .and_then(|mut s| {
                    s.query_map(params![ord, after as i64], |row| {
                        Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
                    })?
                    .collect()
                })
                .map_err(backend)?;
            // A move event names its move by number, and its row holds that move: the two must
            // agree, or a number changed in the text would show another move than ListMoves.
            let mut moves: i64 = conn
                .prepare_cached(
                    "SELECT count(*) FROM game_log
                     WHERE game = ?1 AND sequence <= ?2 AND mv IS NOT NULL",
                )
                .and_then(|mut s| s.query_row(params![ord, after as i64], |row| row.get(0)))
                .map_err(backend)?;
            let mut history = Lazy {
                conn,
                id: &id,
                state: None,
            };
            let mut events = Vec::with_capacity(rows.len());
            for (sequence, time, json, holds_move) in rows {
                let dto: GameEventDto = serde_json::from_str(&json).map_err(|e| corrupt(&id, e))?;
                moves += i64::from(holds_move);
                let number = match plain_part(&dto) {
                    Some(PlainPart::Move { number, .. }) => Some(i64::from(number)),
                    _ => None,
                };
                if (holds_move && number != Some(moves)) || (!holds_move && number.is_some()) {
                    return Err(corrupt(
                        &id,
                        format_args!("event {sequence} does not hold the move it names"),
                    ));
                }
                let kind = dto.decode(&mut history).map_err(|e| corrupt(&id, e))?;
                events.push(Arc::new(GameEvent {
                    game_id: id.clone(),
                    sequence: sequence as u64,
                    time: time_from_db(time),
                    kind,
                }));
            }
            if events.len() as u64 != last - after {
                return Err(corrupt(&id, "its event log has gaps"));
            }
            Ok(Since::Events { events, done })
        })
    }

    fn lobby_events_since(&self, after: u64) -> StoreFuture<'_, Since<LobbyEvent>> {
        let damage = Arc::clone(&self.damage);
        self.read(move |conn| {
            let last = last_lobby_sequence(conn)?;
            if after > last {
                return Ok(Since::Ahead { last });
            }
            if last - after > LOBBY_REPLAY_LIMIT {
                return Ok(Since::Gone);
            }
            // The event as text only if it is UTF-8: anything else is one damaged event.
            let rows: Vec<(i64, i64, Option<String>)> = conn
                .prepare_cached(
                    "SELECT sequence, time, event FROM lobby_events
                     WHERE sequence > ?1 ORDER BY sequence",
                )
                .and_then(|mut s| {
                    s.query_map([after as i64], |row| {
                        let event = row.get_ref(2)?.as_str().ok().map(str::to_owned);
                        Ok((row.get(0)?, row.get(1)?, event))
                    })?
                    .collect()
                })
                .map_err(backend)?;
            let mut position = |id: &GameId, moves: u32| {
                Lazy {
                    conn,
                    id,
                    state: None,
                }
                .position_after(moves)
            };
            let mut events = Vec::with_capacity(rows.len());
            for (sequence, time, json) in rows {
                // An event that does not decode (of a damaged game, or damaged itself) is left
                // out: watchers skip over its sequence number rather than lose the lobby.
                let kind = json
                    .ok_or_else(|| "not UTF-8 text".to_owned())
                    .and_then(|json| {
                        serde_json::from_str::<LobbyEventDto>(&json).map_err(|e| e.to_string())
                    })
                    .and_then(|dto| dto.decode(&mut position));
                match kind {
                    Ok(kind) => events.push(Arc::new(LobbyEvent {
                        sequence: sequence as u64,
                        time: time_from_db(time),
                        kind,
                    })),
                    Err(error) => damage.report(&format!("lobby event {sequence}"), &error),
                }
            }
            Ok(Since::Events {
                events,
                done: false,
            })
        })
    }

    fn lobby_snapshot(&self, limit: usize) -> StoreFuture<'_, (Vec<GameInfo>, u64)> {
        let damage = Arc::clone(&self.damage);
        self.read(move |conn| {
            // One read transaction: the list and the sequence describe the same moment.
            // At most `limit` of each status, merged newest first.
            let mut games = Vec::new();
            for status in [GameStatus::WaitingForPlayers, GameStatus::Active] {
                let (some, _) =
                    list_games(conn, [status_name(status); 4], limit, i64::MAX, &damage)?;
                games.extend(some);
            }
            games.sort_by_key(|game| std::cmp::Reverse(game.created));
            Ok((games, last_lobby_sequence(conn)?))
        })
    }

    fn create_account(&self, account: Account, key: ApiKeyRecord) -> StoreFuture<'_, ()> {
        self.write(move |conn| accounts::create(conn, &account, &key))
    }

    fn account<'a>(&'a self, id: &'a AccountId) -> StoreFuture<'a, Account> {
        let id = id.clone();
        self.read(move |conn| accounts::read(conn, id.as_str())?.ok_or(StoreError::NotFound))
    }

    fn account_by_name<'a>(&'a self, key: &'a str) -> StoreFuture<'a, Account> {
        let key = key.to_owned();
        self.read(move |conn| accounts::read_by_name(conn, &key)?.ok_or(StoreError::NotFound))
    }

    fn account_by_api_key<'a>(
        &'a self,
        key_id: &'a str,
    ) -> StoreFuture<'a, (Account, ApiKeyRecord)> {
        let key_id = key_id.to_owned();
        self.read(move |conn| accounts::read_by_key(conn, &key_id)?.ok_or(StoreError::NotFound))
    }

    fn add_api_key<'a>(&'a self, id: &'a AccountId, key: ApiKeyRecord) -> StoreFuture<'a, ()> {
        let id = id.clone();
        self.write(move |conn| accounts::add_key(conn, &id, &key))
    }

    fn revoke_api_key<'a>(
        &'a self,
        id: &'a AccountId,
        key_id: &'a str,
        now: SystemTime,
    ) -> StoreFuture<'a, bool> {
        let (id, key_id) = (id.clone(), key_id.to_owned());
        self.write(move |conn| accounts::revoke_key(conn, &id, &key_id, now))
    }

    fn api_keys<'a>(&'a self, id: &'a AccountId) -> StoreFuture<'a, Vec<ApiKeyRecord>> {
        let id = id.clone();
        self.read(move |conn| accounts::keys(conn, &id))
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
        self.read(move |conn| accounts::leaderboard(conn, speed, limit, after.as_ref(), &damage))
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
            // Cursors hold an `ord` bound, which SQLite keeps as an i64.
            Some(text) => match parse_named_cursor(&name, text)
                .and_then(|end| i64::try_from(end).map_err(|_| StoreError::BadCursor))
            {
                Ok(end) => end,
                Err(error) => return futures::future::ready(Err(error)).boxed(),
            },
            None => i64::MAX,
        };
        let (id, damage) = (id.clone(), Arc::clone(&self.damage));
        self.read(move |conn| {
            let rows = accounts::player_games(conn, &id, filter, limit, end, &damage)?;
            Ok(accounts::player_page(rows, |position| {
                format!("{name}.{position}")
            }))
        })
    }

    fn writable(&self) -> Option<watch::Receiver<bool>> {
        Some(self.writable.clone())
    }

    fn last_alive(&self) -> Option<SystemTime> {
        self.lock.previous_alive()
    }

    fn turns_resumed(&self) {
        // The heartbeat starts here, not at the open: until the turns are resumed, the lock
        // file's time stays the last server's sign of life (see `schema::HeldMark`).
        if !self.lock.turns_resumed() {
            return;
        }
        let mut heartbeat = self
            .heartbeat
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if heartbeat.is_none() && self.writer_open() {
            *heartbeat = self
                .lock
                .heartbeat()
                .inspect_err(|error| warn!(%error, "cannot mark the lock file as alive"))
                .ok();
        }
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        // Joins the writer (blocking) on this thread: the runtime is about to stop and nothing
        // else is left to run; `block_in_place` keeps other tasks moving where it can.
        async move {
            if tokio::runtime::Handle::current().runtime_flavor()
                == tokio::runtime::RuntimeFlavor::MultiThread
            {
                tokio::task::block_in_place(|| self.close_now());
            } else {
                self.close_now();
            }
        }
        .boxed()
    }

    fn open_games_by_creator(&self) -> StoreFuture<'_, Vec<(GameId, IpAddr)>> {
        let damage = Arc::clone(&self.damage);
        self.read(move |conn| {
            let mut statement = conn
                .prepare_cached(
                    "SELECT id, creator FROM games
                     WHERE status IN ('waiting', 'active') AND creator IS NOT NULL",
                )
                .map_err(backend)?;
            // Lossy text: a damaged byte must cost one row, not the server's start.
            let rows: Vec<(String, String)> = statement
                .query_map([], |row| {
                    let text = |index| {
                        row.get_ref(index)
                            .map(|value| String::from_utf8_lossy(value.as_bytes().unwrap_or_default()).into_owned())
                    };
                    Ok((text(0)?, text(1)?))
                })
                .and_then(Iterator::collect)
                .map_err(backend)?;
            // A row that does not parse is skipped with a warning: it only loosens a limit. A
            // damaged game is not counted either: nothing can end it, so it would hold its
            // creator's slot for ever.
            Ok(rows
                .into_iter()
                .filter_map(|(id, creator)| {
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
}

#[cfg(test)]
mod tests;
