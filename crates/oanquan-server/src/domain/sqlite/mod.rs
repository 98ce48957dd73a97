//! The SQLite [`GameStore`]: games, moves and both event logs in one file, SQLite compiled in.
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
//! takes every commit waiting (up to [`MAX_BATCH`]), runs them in one transaction, each inside
//! its own `SAVEPOINT` (so a commit that fails its optimistic-concurrency check is rolled back
//! alone), commits once, and then answers every caller. Under load, many moves share one fsync;
//! when idle, a lone move is written at once. Nothing waits for a timer.
//!
//! Reads run on a small pool of read-only connections in `spawn_blocking`; WAL lets them read a
//! consistent snapshot while the writer writes. Nothing here blocks the async runtime. The
//! latest state of each game being played is also kept in memory by the writer (see [`Cache`]),
//! so a move does not start by reading and replaying its whole game.
//!
//! # Faults
//!
//! * A game whose stored data does not decode is [`StoreError::Damaged`] for its own reads,
//!   and skipped (logged once, see [`Damage`]) by listings, lobby snapshots and lobby logs: one
//!   damaged row must not hide every other game. A commit is decoded again before it is written
//!   and refused if it would not read back as accepted.
//! * A write that fails for a lasting reason of the file or the disk (full, read-only, I/O) is
//!   [`StoreError::Unavailable`] and turns [`GameStore::writable`] `false`; the writer then
//!   probes with backoff ([`probe`]) and turns it `true` at the first write that succeeds.
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

mod backup;
mod codec;
mod schema;

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, mpsc};
use std::thread;
use std::time::Duration;

use futures::FutureExt as _;
use futures::future::BoxFuture;
use oanquan_rules::{ByPlayer, Game, Move, Position};
use rusqlite::{Connection, ErrorCode, OptionalExtension as _, TransactionBehavior, params};
use tokio::sync::{oneshot, watch};
use tracing::{debug, error, info, warn};

pub use self::backup::{BackupError, BackupReport, backup};
use self::codec::{
    GameEventDto, History, InfoDto, LobbyEventDto, parse_player, player_name, status_name,
    time_from_db, time_to_db,
};
pub use self::schema::{APPLICATION_ID, OpenError, SCHEMA_VERSION};
use super::model::{
    GameEvent, GameEventKind, GameFilter, GameId, GameInfo, GameState, GameStatus, LobbyEvent,
    LobbyEventKind, MoveRecord,
};
use super::store::{
    Commit, Committed, GameStore, Page, Since, StoreError, StoreFuture, page_cursor,
    parse_page_cursor,
};
use super::token::TokenHash;

/// Most commits in one transaction. Bounds the latency one batch adds to its last member.
pub const MAX_BATCH: usize = 256;

/// A lobby resume missing more events than this gets a snapshot instead (like the memory
/// store's retention): replaying thousands of lobby events is slower than a fresh list.
const LOBBY_REPLAY_LIMIT: u64 = 10_000;

/// Idle read connections kept open.
const MAX_IDLE_READERS: usize = 8;

/// Unfinished games whose latest state is kept in memory for [`GameStore::load`].
const MAX_CACHED_GAMES: usize = 4_096;

/// The latest committed state of recently changed, unfinished games, so that playing a move does
/// not read and replay the whole game first. Only the writer thread changes it, after its
/// transaction commits and before it answers, so it never holds a state older than one already
/// acknowledged; readers only look. A game missing from it is read from the database.
type Cache = Arc<Mutex<HashMap<GameId, GameState>>>;

fn lock(cache: &Cache) -> std::sync::MutexGuard<'_, HashMap<GameId, GameState>> {
    // Only whole entries are inserted or removed under the lock: a poisoned map is consistent.
    cache
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The first wait before the writer tries a write again after a lasting failure; it doubles
/// up to [`MAX_PROBE_BACKOFF`].
const FIRST_PROBE_BACKOFF: Duration = Duration::from_millis(100);

/// The longest wait between two tries of a writer that cannot write.
const MAX_PROBE_BACKOFF: Duration = Duration::from_secs(5);

/// Games (or lobby events) found damaged, each logged once: a listing that skips a damaged
/// game on every call must not flood the log.
#[derive(Debug, Default)]
struct Damage {
    reported: Mutex<HashSet<String>>,
}

impl Damage {
    fn report(&self, what: &str, error: &dyn fmt::Display) {
        let first = self
            .reported
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(what.to_owned());
        if first {
            error!(
                damaged = %what,
                %error,
                "stored data does not load; it is skipped in listings and the lobby, and the \
                 game's own calls answer DATA_LOSS (see STORAGE.md)"
            );
        } else {
            debug!(damaged = %what, "skipping damaged stored data");
        }
    }

    fn contains(&self, what: &str) -> bool {
        self.reported
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains(what)
    }

    /// Reports `result`'s error if it says a game is damaged.
    fn check<T>(&self, result: Result<T, StoreError>) -> Result<T, StoreError> {
        if let Err(error @ StoreError::Damaged { id, .. }) = &result {
            self.report(&format!("game {id}"), error);
        }
        result
    }
}

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
    /// Held until the store is dropped, so it outlives every write.
    _lock: schema::FileLock,
}

impl fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// One commit for the writer thread.
struct Job {
    create: bool,
    commit: Commit,
    reply: oneshot::Sender<Result<Committed, StoreError>>,
}

/// What the writer thread is asked to do.
// Commits, the hot path, travel unboxed; the small variant is for tests only.
#[allow(clippy::large_enum_variant)]
enum Message {
    Commit(Job),
    /// Run on the writing connection (tests: fault injection).
    Call(Box<dyn FnOnce(&mut Connection) + Send>),
}

/// Errors that say the file cannot be written (or read) now, rather than that a request or
/// the data is wrong: the same write may succeed once an operator frees disk space or fixes
/// permissions.
fn is_unavailable(error: &rusqlite::Error) -> bool {
    matches!(
        error.sqlite_error_code(),
        Some(
            ErrorCode::DiskFull
                | ErrorCode::ReadOnly
                | ErrorCode::SystemIoFailure
                | ErrorCode::CannotOpen
                | ErrorCode::PermissionDenied
                | ErrorCode::DatabaseBusy
                | ErrorCode::DatabaseLocked
                | ErrorCode::FileLockingProtocolFailed
        )
    )
}

fn backend(error: rusqlite::Error) -> StoreError {
    if is_unavailable(&error) {
        StoreError::Unavailable(format!("sqlite: {error}"))
    } else {
        StoreError::Backend(format!("sqlite: {error}"))
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
        let lock = schema::lock(&path)?;
        let conn = schema::open_writer(&path)?;
        let damage = Arc::new(Damage::default());
        check_unfinished(&conn, &path, &damage)?;
        let (writer, jobs) = mpsc::channel();
        let cache = Cache::default();
        let writer_cache = Arc::clone(&cache);
        let (health, writable) = watch::channel(true);
        let thread = thread::Builder::new()
            .name("oanquan-sqlite-writer".to_owned())
            .spawn(move || run_writer(conn, &jobs, &writer_cache, &health))
            .map_err(|source| OpenError::Io {
                path: path.clone(),
                context: "starting the writer thread",
                source,
            })?;
        Ok(SqliteStore {
            readers: Arc::new(Readers {
                path: path.clone(),
                state: Mutex::default(),
                returned: Condvar::new(),
            }),
            path,
            writer: Mutex::new(Some(writer)),
            thread: Mutex::new(Some(thread)),
            cache,
            damage,
            writable,
            _lock: lock,
        })
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

    /// See [`GameStore::close`]; blocking.
    fn close_now(&self) {
        // Readers first: SQLite removes the WAL only when its last connection closes, and a
        // read-only connection cannot; so the writer must be the last one.
        self.readers.close();
        drop(
            self.writer
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take(),
        );
        let thread = self
            .thread
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(thread) = thread {
            if thread.join().is_err() {
                warn!("the database writer thread panicked");
            }
            let mut wal = self.path.as_os_str().to_owned();
            wal.push("-wal");
            if Path::new(&wal).exists() {
                warn!(
                    path = %self.path.display(),
                    "the write-ahead log is still there after closing the database; it is part \
                     of the database: keep it next to the file (see STORAGE.md)"
                );
            } else {
                info!(path = %self.path.display(), "database closed; the write-ahead log is folded in");
            }
        }
    }

    /// The database file.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn submit(&self, create: bool, commit: Commit) -> StoreFuture<'_, Committed> {
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

    fn read<T: Send + 'static>(
        &self,
        query: impl FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> StoreFuture<'_, T> {
        let readers = Arc::clone(&self.readers);
        async move {
            tokio::task::spawn_blocking(move || readers.with(query))
                .await
                .map_err(|e| StoreError::Backend(format!("database reader task: {e}")))?
        }
        .boxed()
    }

    /// [`SqliteStore::read`] of one game's data: a damaged game is logged (once).
    fn read_game<T: Send + 'static>(
        &self,
        query: impl FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> StoreFuture<'_, T> {
        let damage = Arc::clone(&self.damage);
        self.read(query)
            .map(move |result| damage.check(result))
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

/// Replays every unfinished game once at start: a game that no longer loads is reported now,
/// by id, rather than when its players come back.
fn check_unfinished(conn: &Connection, path: &Path, damage: &Damage) -> Result<(), OpenError> {
    let error = |source| OpenError::Sqlite {
        path: path.to_owned(),
        context: "listing unfinished games",
        source,
    };
    let ids: Vec<String> = conn
        .prepare("SELECT id FROM games WHERE status IN ('waiting', 'active') ORDER BY ord")
        .and_then(|mut statement| {
            statement
                .query_map([], |row| {
                    // Lossy: a damaged id is one broken game below, not a refused database.
                    Ok(
                        String::from_utf8_lossy(row.get_ref(0)?.as_bytes().unwrap_or_default())
                            .into_owned(),
                    )
                })?
                .collect::<Result<_, _>>()
        })
        .map_err(error)?;
    let mut broken = 0;
    for id in &ids {
        let loaded = GameId::parse(id)
            .map_err(|e| StoreError::Backend(e.to_string()))
            .and_then(|id| load_state(conn, &id));
        if let Err(error) = loaded {
            broken += 1;
            damage.report(&format!("game {id}"), &error);
        }
    }
    info!(
        path = %path.display(),
        unfinished = ids.len() - broken,
        broken,
        "database open; unfinished games resume"
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Writing

fn run_writer(
    mut conn: Connection,
    messages: &mpsc::Receiver<Message>,
    cache: &Cache,
    health: &watch::Sender<bool>,
) {
    // `Some(wait)` while the file cannot be written: try a probe write after `wait`.
    let mut backoff: Option<Duration> = None;
    let mut next = None;
    loop {
        let message = match next.take() {
            Some(message) => message,
            None => match backoff {
                None => match messages.recv() {
                    Ok(message) => message,
                    Err(_) => break,
                },
                Some(wait) => match messages.recv_timeout(wait) {
                    Ok(message) => message,
                    Err(mpsc::RecvTimeoutError::Timeout) => {
                        backoff = match probe(&mut conn) {
                            Ok(()) => {
                                set_writable(health, true, None);
                                None
                            }
                            Err(_) => Some((wait * 2).min(MAX_PROBE_BACKOFF)),
                        };
                        continue;
                    }
                    Err(mpsc::RecvTimeoutError::Disconnected) => break,
                },
            },
        };
        let first = match message {
            Message::Commit(job) => job,
            Message::Call(call) => {
                call(&mut conn);
                continue;
            }
        };
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match messages.try_recv() {
                Ok(Message::Commit(job)) => batch.push(job),
                // Runs after this batch, in order.
                Ok(call) => {
                    next = Some(call);
                    break;
                }
                Err(_) => break,
            }
        }
        let (work, replies): (Vec<_>, Vec<_>) = batch
            .into_iter()
            .map(|job| ((job.create, job.commit), job.reply))
            .unzip();
        let results = write_batch(&mut conn, work);
        // Any commit refused for want of space or permission means the store cannot write
        // now, even if smaller commits of the same batch fitted.
        let unavailable = results.iter().find_map(|result| match result {
            Err((_, error @ StoreError::Unavailable(_))) => Some(error.clone()),
            _ => None,
        });
        if let Some(error) = unavailable {
            set_writable(health, false, Some(&error));
            backoff.get_or_insert(FIRST_PROBE_BACKOFF);
        } else if results.iter().any(Result::is_ok) {
            set_writable(health, true, None);
            backoff = None;
        }
        // The states move into the cache (no copy): only the `Committed` part goes back.
        let mut answers = Vec::with_capacity(results.len());
        {
            let mut cache = lock(cache);
            for result in results {
                answers.push(match result {
                    Ok((committed, state)) => {
                        if state.info.status.is_over() {
                            cache.remove(&state.info.id);
                        } else {
                            if cache.len() >= MAX_CACHED_GAMES
                                && !cache.contains_key(&state.info.id)
                            {
                                cache.clear();
                            }
                            cache.insert(state.info.id.clone(), state);
                        }
                        Ok(committed)
                    }
                    Err((id, error)) => {
                        // Another process may have written the game: read it afresh next time.
                        if let (Some(id), StoreError::Conflict { .. }) = (&id, &error) {
                            cache.remove(id);
                        }
                        Err(error)
                    }
                });
            }
        }
        // Answered only now: every result in the batch is durable (or failed) at this point.
        for (reply, result) in replies.into_iter().zip(answers) {
            // The caller may have gone away; what it committed stays committed.
            let _ = reply.send(result);
        }
    }
    // Every sender dropped: the store is closing, and the readers are closed already. Fold the
    // whole WAL into the file so that the file alone holds every game, then close: as the last
    // connection, closing removes the -wal and -shm files.
    if let Err(error) = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| {
        row.get::<_, i64>(0)
    }) {
        warn!(%error, "folding the write-ahead log into the database");
    }
    if let Err((_, error)) = conn.close() {
        warn!(%error, "closing the database");
    }
}

/// Publishes whether the store can write, logging each change once.
fn set_writable(health: &watch::Sender<bool>, writable: bool, error: Option<&StoreError>) {
    let changed = health.send_if_modified(|now| std::mem::replace(now, writable) != writable);
    match (changed, writable) {
        (true, false) => error!(
            error = %error.map(ToString::to_string).unwrap_or_default(),
            "the database cannot be written: writes answer UNAVAILABLE and health is NOT_SERVING \
             until a write succeeds (free disk space, or make the file writable)"
        ),
        (true, true) => info!("the database can be written again; health is SERVING"),
        _ => {}
    }
}

/// Tries what a commit needs without changing any data: a page beyond the free ones (a full
/// disk or `max_page_count` refuses it; rolled back), then a committed rewrite of the header
/// (the log takes writes and fsyncs).
fn probe(conn: &mut Connection) -> rusqlite::Result<()> {
    {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let (free, page_size): (i64, i64) = tx.query_row(
            "SELECT (SELECT freelist_count FROM pragma_freelist_count),
                    (SELECT page_size FROM pragma_page_size)",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )?;
        // Text of (free + 2) pages, so that it cannot fit in the pages already there. The
        // sequence is one no event has; the insert is rolled back when `tx` drops.
        tx.execute(
            "INSERT INTO lobby_events (sequence, time, event) VALUES (-1, 0, hex(zeroblob(?1)))",
            [(free + 2) * page_size / 2],
        )?;
    }
    schema::probe_write(conn)
}

/// One commit's outcome in a batch: what it wrote and the state to cache, or the error and the
/// game it was for.
type BatchResult = Result<(Committed, GameState), (Option<GameId>, StoreError)>;

/// Runs a batch of commits in one transaction, each in its own savepoint.
fn write_batch(conn: &mut Connection, work: Vec<(bool, Commit)>) -> Vec<BatchResult> {
    let count = work.len();
    let mut tx = match conn.transaction_with_behavior(TransactionBehavior::Immediate) {
        Ok(tx) => tx,
        Err(error) => return vec![Err((None, backend(error))); count],
    };
    let mut results = Vec::with_capacity(count);
    for (create, commit) in work {
        let id = commit.state.info.id.clone();
        let result = tx.savepoint().map_err(backend).and_then(|savepoint| {
            // Dropping the savepoint on error rolls back this commit only.
            let committed = apply(&savepoint, create, commit)?;
            savepoint.commit().map_err(backend)?;
            Ok(committed)
        });
        results.push(result.map_err(|e| (Some(id), e)));
    }
    if let Err(error) = tx.commit() {
        let error = backend(error);
        warn!(%error, commits = count, "database commit failed");
        if !conn.is_autocommit() {
            let _ = conn.execute_batch("ROLLBACK");
        }
        for result in &mut results {
            if result.is_ok() {
                *result = Err((None, error.clone()));
            }
        }
    }
    results
}

/// Writes one commit. Runs inside a savepoint.
fn apply(
    conn: &Connection,
    create: bool,
    mut commit: Commit,
) -> Result<(Committed, GameState), StoreError> {
    let expected = commit.expected_sequence;
    let tokens = commit
        .state
        .token_hashes
        .map(|hash| hash.map(TokenHash::to_bytes));
    let (stored, stored_moves) = if create {
        let exists = conn
            .prepare_cached("SELECT 1 FROM games WHERE id = ?1")
            .and_then(|mut s| s.exists([commit.state.info.id.as_str()]))
            .map_err(backend)?;
        if expected != 0 || exists {
            return Err(StoreError::Conflict { current: 0 });
        }
        (None, 0)
    } else {
        let (ord, current, moves, same_columns): (i64, i64, i64, bool) = conn
            .prepare_cached(
                "SELECT ord, sequence, move_count, status, token_first, token_second
                 FROM games WHERE id = ?1",
            )
            .and_then(|mut s| {
                s.query_row([commit.state.info.id.as_str()], |row| {
                    // Whether the indexed status and the tokens stay as they are: then the
                    // update leaves them (and the status index) alone.
                    let same_token = |column, token: Option<[u8; 32]>| {
                        row.get_ref(column)
                            .map(|value| value.as_blob_or_null().ok().flatten())
                            .map(|stored| stored == token.as_ref().map(<[u8; 32]>::as_slice))
                    };
                    let same_columns = row.get_ref(3)?.as_str().ok()
                        == Some(status_name(commit.state.info.status))
                        && same_token(4, tokens.first)?
                        && same_token(5, tokens.second)?;
                    Ok((row.get(0)?, row.get(1)?, row.get(2)?, same_columns))
                })
                .optional()
            })
            .map_err(backend)?
            .ok_or(StoreError::NotFound)?;
        let current = current as u64;
        if current != expected {
            return Err(StoreError::Conflict { current });
        }
        (Some((ord, same_columns)), moves as usize)
    };

    let sequence = expected + commit.game_events.len() as u64;
    commit.state.info.sequence = sequence;
    let state = &commit.state;
    let id = &state.info.id;
    let new_moves = state.moves.since(stored_moves).ok_or_else(|| {
        StoreError::Backend(format!(
            "a commit to game {id} removes moves; they only append"
        ))
    })?;
    let info_json = encode_json(&InfoDto::new(&state.info))
        .map_err(|e| StoreError::Backend(format!("encoding game {id}: {e}")))?;
    check_info_reads_back(&state.info, &info_json).map_err(unreadable(id))?;
    let status = status_name(state.info.status);
    let move_count = i64::from(state.info.move_count);
    let ord = match stored {
        None => {
            conn.prepare_cached(
                "INSERT INTO games (id, status, sequence, move_count, token_first, token_second, info,
                                    creator)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )
            .and_then(|mut s| {
                s.execute(params![
                    id.as_str(),
                    status,
                    sequence as i64,
                    move_count,
                    tokens.first,
                    tokens.second,
                    info_json,
                    state.creator.map(|ip| ip.to_string()),
                ])
            })
            .map_err(backend)?;
            conn.last_insert_rowid()
        }
        // A move: only the changing columns, by primary key.
        Some((ord, true)) => {
            conn.prepare_cached(
                "UPDATE games SET sequence = ?2, move_count = ?3, info = ?4 WHERE ord = ?1",
            )
            .and_then(|mut s| s.execute(params![ord, sequence as i64, move_count, info_json]))
            .map_err(backend)?;
            ord
        }
        Some((ord, false)) => {
            conn.prepare_cached(
                "UPDATE games SET status = ?2, sequence = ?3, move_count = ?4, token_first = ?5,
                 token_second = ?6, info = ?7 WHERE ord = ?1",
            )
            .and_then(|mut s| {
                s.execute(params![
                    ord,
                    status,
                    sequence as i64,
                    move_count,
                    tokens.first,
                    tokens.second,
                    info_json,
                ])
            })
            .map_err(backend)?;
            ord
        }
    };

    for (index, record) in new_moves.into_iter().enumerate() {
        if record.mv.to_string().parse::<Move>().ok() != Some(record.mv) {
            return Err(unreadable(id)(format!(
                "move {} does not read back",
                record.number
            )));
        }
        if record.number as usize != stored_moves + index + 1 {
            return Err(StoreError::Backend(format!(
                "game {id}: move number {} out of order",
                record.number
            )));
        }
        conn.prepare_cached(
            "INSERT INTO moves (game, number, player, mv, time) VALUES (?1, ?2, ?3, ?4, ?5)",
        )
        .and_then(|mut s| {
            s.execute(params![
                ord,
                record.number,
                player_name(record.player),
                record.mv.to_string(),
                time_to_db(record.time),
            ])
        })
        .map_err(backend)?;
    }

    let time = time_to_db(commit.time);
    let mut game_events = Vec::with_capacity(commit.game_events.len());
    for (sequence, kind) in (expected + 1..).zip(commit.game_events) {
        if let GameEventKind::GameStarted { game } = &kind {
            check_game_reads_back(game).map_err(unreadable(id))?;
        }
        let json = encode_json(&GameEventDto::new(&kind))
            .map_err(|e| StoreError::Backend(format!("encoding an event of game {id}: {e}")))?;
        conn.prepare_cached(
            "INSERT INTO game_events (game, sequence, time, event) VALUES (?1, ?2, ?3, ?4)",
        )
        .and_then(|mut s| s.execute(params![ord, sequence as i64, time, json]))
        .map_err(backend)?;
        game_events.push(Arc::new(GameEvent {
            game_id: id.clone(),
            sequence,
            time: commit.time,
            kind,
        }));
    }

    let mut lobby_events = Vec::with_capacity(commit.lobby_events.len());
    if !commit.lobby_events.is_empty() {
        let last = last_lobby_sequence(conn)?;
        for (sequence, kind) in (last + 1..).zip(commit.lobby_events) {
            if let LobbyEventKind::GameCreated { game } = &kind {
                check_game_reads_back(game).map_err(unreadable(id))?;
            }
            let json = encode_json(&LobbyEventDto::new(&kind))
                .map_err(|e| StoreError::Backend(format!("encoding a lobby event: {e}")))?;
            conn.prepare_cached(
                "INSERT INTO lobby_events (sequence, time, event) VALUES (?1, ?2, ?3)",
            )
            .and_then(|mut s| s.execute(params![sequence as i64, time, json]))
            .map_err(backend)?;
            lobby_events.push(Arc::new(LobbyEvent {
                sequence,
                time: commit.time,
                kind,
            }));
        }
    }

    let committed = Committed {
        info: commit.state.info.clone(),
        game_events,
        lobby_events,
    };
    Ok((committed, commit.state))
}

/// A commit refused because what it would store does not decode back to what was accepted:
/// storing it would leave a game nobody can load.
fn unreadable(id: &GameId) -> impl Fn(String) -> StoreError + '_ {
    move |why| {
        StoreError::Backend(format!(
            "game {id} would be stored in a form that does not read back ({why}); refused"
        ))
    }
}

/// Whether `json` (the encoding of `info`) decodes to `info` again.
fn check_info_reads_back(info: &GameInfo, json: &str) -> Result<(), String> {
    let dto: InfoDto = serde_json::from_str(json).map_err(|e| e.to_string())?;
    let decoded = dto.decode()?;
    let mut back = decoded.info;
    if !decoded.position_known {
        // Taken from the replay of the stored moves on load, which is checked on its own.
        back.position = info.position;
    }
    if back == *info {
        Ok(())
    } else {
        Err("it decodes to a different game".to_owned())
    }
}

fn check_game_reads_back(info: &GameInfo) -> Result<(), String> {
    let json = encode_json(&InfoDto::new(info)).map_err(|e| e.to_string())?;
    check_info_reads_back(info, &json)
}

/// `serde_json::to_string` into a buffer sized for our rows up front, rather than one grown
/// (and copied) several times per row.
fn encode_json(value: &impl serde::Serialize) -> serde_json::Result<String> {
    let mut buffer = Vec::with_capacity(1024);
    serde_json::to_writer(&mut buffer, value)?;
    // serde_json writes UTF-8 only.
    Ok(String::from_utf8(buffer)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
}

fn last_lobby_sequence(conn: &Connection) -> Result<u64, StoreError> {
    conn.prepare_cached("SELECT COALESCE(MAX(sequence), 0) FROM lobby_events")
        .and_then(|mut s| s.query_row([], |row| row.get::<_, i64>(0)))
        .map(|last| last as u64)
        .map_err(backend)
}

// ---------------------------------------------------------------------------------------------
// Reading

#[derive(Debug)]
struct Readers {
    path: PathBuf,
    state: Mutex<ReaderState>,
    /// Signalled whenever a busy connection is given back.
    returned: Condvar,
}

#[derive(Debug, Default)]
struct ReaderState {
    idle: Vec<Connection>,
    /// Connections out on a query.
    busy: usize,
    closed: bool,
}

impl Readers {
    fn state(&self) -> std::sync::MutexGuard<'_, ReaderState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Runs `query` in a read transaction (one consistent snapshot) on a pooled connection.
    fn with<T>(
        &self,
        query: impl FnOnce(&Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let pooled = {
            let mut state = self.state();
            if state.closed {
                return Err(StoreError::Unavailable(
                    "the database is closed (the server is stopping)".to_owned(),
                ));
            }
            state.busy += 1;
            state.idle.pop()
        };
        let give_back = |conn: Option<Connection>| {
            let mut state = self.state();
            state.busy -= 1;
            if let Some(conn) = conn {
                if !state.closed && state.idle.len() < MAX_IDLE_READERS {
                    state.idle.push(conn);
                } else {
                    drop(conn);
                }
            }
            drop(state);
            self.returned.notify_all();
        };
        let mut conn = match pooled.map_or_else(|| schema::open_reader(&self.path), Ok) {
            Ok(conn) => conn,
            Err(error) => {
                give_back(None);
                return Err(backend(error));
            }
        };
        let result = conn
            .transaction()
            .map_err(backend)
            .and_then(|tx| query(&tx));
        give_back(conn.is_autocommit().then_some(conn));
        result
    }

    /// Closes the idle connections and waits (a few seconds at most) for the busy ones, which
    /// close as they come back; later reads fail.
    fn close(&self) {
        let mut state = self.state();
        state.closed = true;
        state.idle.clear();
        let (state, timeout) = self
            .returned
            .wait_timeout_while(state, schema::BUSY_TIMEOUT, |state| state.busy > 0)
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if timeout.timed_out() {
            warn!(
                busy = state.busy,
                "database reads still running at close; the write-ahead log may stay"
            );
        }
    }
}

fn corrupt(id: &GameId, why: impl fmt::Display) -> StoreError {
    StoreError::Damaged {
        id: id.clone(),
        detail: why.to_string(),
    }
}

fn token(id: &GameId, bytes: Option<Vec<u8>>) -> Result<Option<TokenHash>, StoreError> {
    bytes
        .map(|bytes| {
            <[u8; 32]>::try_from(bytes.as_slice())
                .map(TokenHash::from_bytes)
                .map_err(|_| corrupt(id, "a token hash is not 32 bytes"))
        })
        .transpose()
}

/// Loads a whole game and replays it, cross-checking the stored position.
fn load_state(conn: &Connection, id: &GameId) -> Result<GameState, StoreError> {
    type Row = (
        i64,
        Option<Vec<u8>>,
        Option<Vec<u8>>,
        String,
        Option<String>,
    );
    let (ord, first, second, json, creator): Row = conn
        .prepare_cached(
            "SELECT ord, token_first, token_second, info, creator FROM games WHERE id = ?1",
        )
        .and_then(|mut s| {
            s.query_row([id.as_str()], |row| {
                Ok((
                    row.get(0)?,
                    row.get(1)?,
                    row.get(2)?,
                    row.get(3)?,
                    row.get(4)?,
                ))
            })
            .optional()
        })
        .map_err(backend)?
        .ok_or(StoreError::NotFound)?;
    let creator = creator
        .map(|text| {
            text.parse()
                .map_err(|e| corrupt(id, format_args!("creator: {e}")))
        })
        .transpose()?;
    let dto: InfoDto = serde_json::from_str(&json).map_err(|e| corrupt(id, e))?;
    let decoded = dto.decode().map_err(|e| corrupt(id, e))?;
    let mut info = decoded.info;
    let token_hashes = ByPlayer::new(token(id, first)?, token(id, second)?);

    let mut engine = Game::from_position(info.start);
    let mut moves: Vec<MoveRecord> = Vec::with_capacity(info.move_count as usize);
    let mut statement = conn
        .prepare_cached(
            "SELECT number, player, mv, time FROM moves WHERE game = ?1 ORDER BY number",
        )
        .map_err(backend)?;
    let rows = statement
        .query_map([ord], |row| {
            Ok((
                row.get::<_, i64>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, String>(2)?,
                row.get::<_, i64>(3)?,
            ))
        })
        .map_err(backend)?;
    for row in rows {
        let (number, player, mv, time) = row.map_err(backend)?;
        if number != moves.len() as i64 + 1 {
            return Err(corrupt(id, format_args!("move {number} out of order")));
        }
        let player = parse_player(&player).map_err(|e| corrupt(id, e))?;
        let mv: Move = mv.parse().map_err(|e| corrupt(id, e))?;
        if engine.position().to_move() != player {
            return Err(corrupt(
                id,
                format_args!("move {number} by the wrong player"),
            ));
        }
        let steps = engine
            .play(mv)
            .map_err(|e| corrupt(id, format_args!("move {number} ({mv}): {e}")))?;
        moves.push(MoveRecord {
            number: number as u32,
            player,
            mv,
            steps,
            position: *engine.position(),
            time: time_from_db(time),
        });
    }
    if moves.len() != info.move_count as usize {
        return Err(corrupt(
            id,
            format_args!("{} moves stored, {} expected", moves.len(), info.move_count),
        ));
    }
    let replayed = *engine.position();
    if decoded.position_known && info.position != replayed {
        return Err(corrupt(id, "the stored position differs from the replay"));
    }
    info.position = replayed;
    Ok(GameState {
        info,
        token_hashes,
        moves: moves.into_iter().collect(),
        engine,
        creator,
    })
}

/// A game's start position and moves for decoding its events, loaded on first use.
struct Lazy<'a> {
    conn: &'a Connection,
    id: &'a GameId,
    state: Option<(Position, Vec<MoveRecord>)>,
}

impl Lazy<'_> {
    fn state(&mut self) -> Result<&(Position, Vec<MoveRecord>), String> {
        if self.state.is_none() {
            let state = load_state(self.conn, self.id).map_err(|e| e.to_string())?;
            // Indexed by number below: one copy into a vector rather than a walk per lookup.
            self.state = Some((state.info.start, state.moves.to_vec()));
        }
        Ok(self.state.as_ref().expect("just loaded"))
    }
}

impl History for Lazy<'_> {
    fn record(&mut self, number: u32) -> Result<MoveRecord, String> {
        let (_, moves) = self.state()?;
        (number as usize)
            .checked_sub(1)
            .and_then(|index| moves.get(index))
            .cloned()
            .ok_or_else(|| format!("an event refers to move {number}, which is not stored"))
    }

    fn position_after(&mut self, moves: u32) -> Result<Position, String> {
        let (start, records) = self.state()?;
        match moves {
            0 => Ok(*start),
            n => records
                .get(n as usize - 1)
                .map(|record| record.position)
                .ok_or_else(|| format!("an event refers to move {n}, which is not stored")),
        }
    }
}

/// Decodes the `games.info` column of game `id`, replaying the game only if the position needs
/// it.
fn decode_info(conn: &Connection, id: &GameId, json: &str) -> Result<GameInfo, StoreError> {
    let dto: InfoDto = serde_json::from_str(json).map_err(|e| corrupt(id, e))?;
    let decoded = dto.decode().map_err(|e| corrupt(id, e))?;
    if decoded.info.id != *id {
        return Err(corrupt(
            id,
            format_args!("its data is that of game {}", decoded.info.id),
        ));
    }
    if decoded.position_known {
        Ok(decoded.info)
    } else {
        Ok(load_state(conn, id)?.info)
    }
}

fn read_info(conn: &Connection, id: &GameId) -> Result<GameInfo, StoreError> {
    let json: Option<String> = conn
        .prepare_cached("SELECT info FROM games WHERE id = ?1")
        .and_then(|mut s| {
            s.query_row([id.as_str()], |row| {
                // Not as a `String`: text that is not UTF-8 is a damaged game, not a failed query.
                Ok(row.get_ref(0)?.as_str().ok().map(str::to_owned))
            })
            .optional()
        })
        .map_err(backend)?
        .ok_or(StoreError::NotFound)?;
    let json = json.ok_or_else(|| corrupt(id, "its data is not UTF-8 text"))?;
    decode_info(conn, id, &json)
}

/// Decodes one `(ord, id, info)` row of `games`.
fn decode_row(
    conn: &Connection,
    row: &rusqlite::Row<'_>,
) -> Result<GameInfo, (String, StoreError)> {
    let text = |index| {
        row.get_ref(index)
            .ok()
            .and_then(|value| value.as_str().ok())
    };
    let raw_id = text(1).unwrap_or("(not text)").to_owned();
    let id = GameId::parse(&raw_id).map_err(|e| {
        let error = StoreError::Backend(format!("a stored game id does not parse: {e}"));
        (format!("game {raw_id}"), error)
    })?;
    let info = text(2)
        .ok_or_else(|| corrupt(&id, "its data is not UTF-8 text"))
        .and_then(|json| decode_info(conn, &id, json));
    info.map_err(|error| (format!("game {id}"), error))
}

/// The `games.status` values a filter accepts, padded to four for one prepared statement.
fn statuses(filter: GameFilter) -> [&'static str; 4] {
    let [waiting, active, finished, aborted] = [
        GameStatus::WaitingForPlayers,
        GameStatus::Active,
        GameStatus::Finished,
        GameStatus::Aborted,
    ]
    .map(status_name);
    match filter {
        GameFilter::Open => [waiting; 4],
        GameFilter::Active => [active; 4],
        GameFilter::Finished => [finished, aborted, finished, aborted],
        GameFilter::All => [waiting, active, finished, aborted],
    }
}

/// Games with `ord < end` whose status is one of `statuses`, newest first, at most `limit`,
/// plus the `ord` of the next one if there is one. A game that does not decode is skipped (and
/// reported): one damaged row must not hide every other game.
fn list_games(
    conn: &Connection,
    statuses: [&str; 4],
    limit: usize,
    end: i64,
    damage: &Damage,
) -> Result<(Vec<GameInfo>, Option<i64>), StoreError> {
    let [a, b, c, d] = statuses;
    // No LIMIT: rows are stepped through lazily, as many as it takes to fill the page.
    let mut statement = conn
        .prepare_cached(
            "SELECT ord, id, info FROM games WHERE ord < ?1 AND status IN (?2, ?3, ?4, ?5)
             ORDER BY ord DESC",
        )
        .map_err(backend)?;
    let mut rows = statement.query(params![end, a, b, c, d]).map_err(backend)?;
    let mut games = Vec::new();
    while let Some(row) = rows.next().map_err(backend)? {
        let ord: i64 = row.get(0).map_err(backend)?;
        if games.len() == limit {
            return Ok((games, Some(ord)));
        }
        match decode_row(conn, row) {
            Ok(info) => games.push(info),
            Err((what, error)) => damage.report(&what, &error),
        }
    }
    Ok((games, None))
}

impl GameStore for SqliteStore {
    fn create(&self, commit: Commit) -> StoreFuture<'_, Committed> {
        self.submit(true, commit)
    }

    fn commit(&self, commit: Commit) -> StoreFuture<'_, Committed> {
        self.submit(false, commit)
    }

    fn load<'a>(&'a self, id: &'a GameId) -> StoreFuture<'a, GameState> {
        if let Some(state) = lock(&self.cache).get(id) {
            return futures::future::ready(Ok(state.clone())).boxed();
        }
        let id = id.clone();
        self.read_game(move |conn| load_state(conn, &id))
    }

    fn info<'a>(&'a self, id: &'a GameId) -> StoreFuture<'a, GameInfo> {
        let id = id.clone();
        self.read_game(move |conn| read_info(conn, &id))
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
        let id = id.clone();
        self.read_game(move |conn| {
            let (ord, last, status): (i64, i64, String) = conn
                .prepare_cached("SELECT ord, sequence, status FROM games WHERE id = ?1")
                .and_then(|mut s| {
                    s.query_row([id.as_str()], |row| {
                        Ok((row.get(0)?, row.get(1)?, row.get(2)?))
                    })
                    .optional()
                })
                .map_err(backend)?
                .ok_or(StoreError::NotFound)?;
            let last = last as u64;
            if after > last {
                return Ok(Since::Ahead { last });
            }
            let done = status == status_name(GameStatus::Finished)
                || status == status_name(GameStatus::Aborted);
            let rows: Vec<(i64, i64, String)> = conn
                .prepare_cached(
                    "SELECT sequence, time, event FROM game_events
                     WHERE game = ?1 AND sequence > ?2 ORDER BY sequence",
                )
                .and_then(|mut s| {
                    s.query_map(params![ord, after as i64], |row| {
                        Ok((row.get(0)?, row.get(1)?, row.get(2)?))
                    })?
                    .collect()
                })
                .map_err(backend)?;
            let mut history = Lazy {
                conn,
                id: &id,
                state: None,
            };
            let mut events = Vec::with_capacity(rows.len());
            for (sequence, time, json) in rows {
                let dto: GameEventDto = serde_json::from_str(&json).map_err(|e| corrupt(&id, e))?;
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
            let [waiting, active] =
                [GameStatus::WaitingForPlayers, GameStatus::Active].map(status_name);
            let statuses = [waiting, active, waiting, active];
            let (games, _) = list_games(conn, statuses, limit, i64::MAX, &damage)?;
            Ok((games, last_lobby_sequence(conn)?))
        })
    }

    fn writable(&self) -> Option<watch::Receiver<bool>> {
        Some(self.writable.clone())
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
mod tests {
    use std::time::SystemTime;

    use oanquan_rules::{Player, Preset};

    use super::*;
    use crate::domain::model::GameEventKind;
    use crate::domain::{GameManager, Hub, ManagerLimits, NewGame, PlayerToken};

    fn manager(store: Arc<dyn GameStore>) -> (GameManager, Arc<Hub>) {
        let hub = Hub::new(1024);
        (
            GameManager::new(store, Arc::clone(&hub), ManagerLimits::default()),
            hub,
        )
    }

    async fn new_game(
        manager: &GameManager,
        rules: oanquan_rules::Rules,
    ) -> (GameId, [PlayerToken; 2]) {
        let created = manager
            .create_game(NewGame {
                rules,
                preset: None,
                start: None,
                seat: Some(Player::First),
                display_name: "Lan".to_owned(),
                computer: None,
            })
            .await
            .unwrap();
        let id = created.game.id.clone();
        let joined = manager.join_game(&id, "Minh").await.unwrap();
        (id, [created.token, joined.token])
    }

    /// Plays random legal moves until the game ends.
    async fn play_out(manager: &GameManager, id: &GameId, tokens: &[PlayerToken; 2], seed: u64) {
        let mut seed = seed;
        loop {
            let info = manager.get_game(id).await.unwrap();
            if info.status.is_over() {
                return;
            }
            let position = info.position;
            let moves = position.legal_moves();
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let mv = moves[(seed >> 33) as usize % moves.len()];
            let token = &tokens[usize::from(position.to_move() == Player::Second)];
            manager
                .play_move(id, token, mv, Some(position.ply()))
                .await
                .unwrap();
        }
    }

    #[tokio::test]
    async fn games_and_logs_read_back_exactly_as_committed_across_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("games.db");
        let store: Arc<dyn GameStore> = Arc::new(SqliteStore::open(&path).unwrap());
        let (manager, hub) = manager(Arc::clone(&store));
        let mut lobby = hub.subscribe_lobby();
        // Short games, so that some end by the ply limit and some by the mandarins.
        let rules = oanquan_rules::Rules {
            repetition_limit: 2,
            max_plies: 40,
            ..Preset::Standard.rules()
        };
        let mut games = Vec::new();
        let mut endings = std::collections::HashSet::new();
        for seed in 0..8 {
            let (id, tokens) = new_game(&manager, rules).await;
            let (mut rx, _guard) = hub.subscribe_game(&id, 10).unwrap();
            play_out(&manager, &id, &tokens, seed).await;
            endings.insert(store.info(&id).await.unwrap().result.unwrap().termination);
            let Since::Events { events, done } = store.game_events_since(&id, 0).await.unwrap()
            else {
                panic!("events expected")
            };
            assert!(done);
            // Created, joined, started, turn: published before the subscription.
            for event in &events[4..] {
                assert_eq!(**event, *rx.try_recv().unwrap(), "as published");
            }
            assert!(rx.try_recv().is_err());
            let state = store.load(&id).await.unwrap();
            assert_eq!(state.info, store.info(&id).await.unwrap());
            games.push((id, state, events));
        }
        assert!(endings.len() > 1, "{endings:?}");
        let mut published = Vec::new();
        while let Ok(event) = lobby.try_recv() {
            published.push(event);
        }
        let Since::Events { events, .. } = store.lobby_events_since(0).await.unwrap() else {
            panic!("lobby events expected")
        };
        assert_eq!(events, published);

        drop(manager);
        drop(store);
        let store = SqliteStore::open(&path).unwrap();
        for (id, before, events) in games {
            let after = store.load(&id).await.unwrap();
            assert_eq!(after.info, before.info);
            assert_eq!(after.moves, before.moves);
            assert_eq!(after.token_hashes, before.token_hashes);
            assert_eq!(after.engine.position(), before.engine.position());
            let Since::Events { events: again, .. } =
                store.game_events_since(&id, 0).await.unwrap()
            else {
                panic!("events expected")
            };
            assert_eq!(again, events);
        }
        let Since::Events { events: again, .. } = store.lobby_events_since(0).await.unwrap() else {
            panic!("lobby events expected")
        };
        assert_eq!(again, published);
    }

    #[tokio::test]
    async fn a_failed_commit_in_a_batch_rolls_back_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("games.db");
        let store: Arc<dyn GameStore> = Arc::new(SqliteStore::open(&path).unwrap());
        let (manager, _hub) = manager(Arc::clone(&store));
        let (a, _) = new_game(&manager, Preset::Standard.rules()).await;
        let (b, _) = new_game(&manager, Preset::Standard.rules()).await;
        let commit = |state: GameState, expected_sequence| Commit {
            state,
            expected_sequence,
            game_events: vec![GameEventKind::TurnStarted {
                player: Player::First,
                ply: 0,
                refill: None,
            }],
            lobby_events: Vec::new(),
            time: SystemTime::now(),
        };
        let (state_a, state_b) = (store.load(&a).await.unwrap(), store.load(&b).await.unwrap());
        let (seq_a, seq_b) = (state_a.info.sequence, state_b.info.sequence);
        // A second writing connection, driven by hand to control the batch.
        let mut conn = schema::open_writer(&path).unwrap();
        let results = write_batch(
            &mut conn,
            vec![
                (false, commit(state_a.clone(), seq_a)),
                (false, commit(state_a, seq_a)),
                (false, commit(state_b, seq_b)),
            ],
        );
        assert_eq!(results[0].as_ref().unwrap().0.info.sequence, seq_a + 1);
        assert_eq!(
            results[1].as_ref().unwrap_err().1,
            StoreError::Conflict { current: seq_a + 1 }
        );
        assert_eq!(results[2].as_ref().unwrap().0.info.sequence, seq_b + 1);
        assert_eq!(store.info(&a).await.unwrap().sequence, seq_a + 1);
        assert_eq!(store.info(&b).await.unwrap().sequence, seq_b + 1);
        let Since::Events { events, .. } = store.game_events_since(&a, seq_a).await.unwrap() else {
            panic!("events expected")
        };
        assert_eq!(events.len(), 1, "the failed commit wrote nothing");
    }

    #[tokio::test]
    async fn listing_pages_newest_first_and_filters() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn GameStore> =
            Arc::new(SqliteStore::open(dir.path().join("games.db")).unwrap());
        let (manager, _hub) = manager(Arc::clone(&store));
        let mut ids = Vec::new();
        for _ in 0..5 {
            ids.push(new_game(&manager, Preset::Standard.rules()).await.0);
        }
        let page = store.list(GameFilter::All, 2, None).await.unwrap();
        assert_eq!(
            page.games.iter().map(|g| &g.id).collect::<Vec<_>>(),
            [&ids[4], &ids[3]]
        );
        let cursor = page.next_cursor.unwrap();
        let page = store.list(GameFilter::All, 3, Some(&cursor)).await.unwrap();
        assert_eq!(page.games.len(), 3);
        assert!(page.next_cursor.is_none());
        assert_eq!(
            store
                .list(GameFilter::Open, 2, Some(&cursor))
                .await
                .unwrap_err(),
            StoreError::BadCursor
        );
        assert!(
            store
                .list(GameFilter::Finished, 10, None)
                .await
                .unwrap()
                .games
                .is_empty()
        );
        let (snapshot, sequence) = store.lobby_snapshot(3).await.unwrap();
        assert_eq!(snapshot.len(), 3);
        assert_eq!(sequence, 5 * 3, "created, seat taken, started per game");
    }

    #[tokio::test]
    async fn a_version_1_database_is_migrated_and_keeps_its_games() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v1.db");
        let store: Arc<dyn GameStore> = Arc::new(SqliteStore::open(&path).unwrap());
        let (before, _hub) = manager(Arc::clone(&store));
        let id = new_game(&before, Preset::Standard.rules()).await.0;
        drop(before);
        drop(store);
        // Back to version 1, as the first release wrote it: no `creator` column.
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch("ALTER TABLE games DROP COLUMN creator; PRAGMA user_version = 1;")
            .unwrap();
        drop(conn);

        let store = SqliteStore::open(&path).unwrap();
        let version: i32 = Connection::open(&path)
            .unwrap()
            .query_row("PRAGMA user_version", [], |row| row.get(0))
            .unwrap();
        assert_eq!(version, SCHEMA_VERSION);
        let store: Arc<dyn GameStore> = Arc::new(store);
        assert_eq!(store.load(&id).await.unwrap().creator, None);
        assert!(store.open_games_by_creator().await.unwrap().is_empty());
        // New games record their creator in the new column.
        let (games, _hub) = manager(Arc::clone(&store));
        let ip: IpAddr = "192.0.2.7".parse().unwrap();
        let created = games
            .create_game_from(
                Some(ip),
                NewGame {
                    rules: Preset::Standard.rules(),
                    preset: None,
                    start: None,
                    seat: Some(Player::First),
                    display_name: "Lan".to_owned(),
                    computer: None,
                },
            )
            .await
            .unwrap();
        assert_eq!(
            store.open_games_by_creator().await.unwrap(),
            [(created.game.id, ip)]
        );
    }

    #[tokio::test]
    async fn a_commit_that_would_not_read_back_is_refused_and_leaves_the_game_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn GameStore> =
            Arc::new(SqliteStore::open(dir.path().join("games.db")).unwrap());
        let (manager, _hub) = manager(Arc::clone(&store));
        let (id, _) = new_game(&manager, Preset::Standard.rules()).await;
        let before = store.load(&id).await.unwrap();
        let mut state = before.clone();
        // Past 2262 the stored nanoseconds saturate: it would load with another time.
        state.info.updated = SystemTime::UNIX_EPOCH + Duration::from_secs(400 * 366 * 86_400);
        let error = store
            .commit(Commit {
                expected_sequence: state.info.sequence,
                state,
                game_events: Vec::new(),
                lobby_events: Vec::new(),
                time: SystemTime::now(),
            })
            .await
            .unwrap_err();
        assert!(
            matches!(&error, StoreError::Backend(why) if why.contains("does not read back")),
            "{error:?}"
        );
        assert_eq!(store.load(&id).await.unwrap().info, before.info);
        drop(manager);
        drop(store);
        let store = SqliteStore::open(dir.path().join("games.db")).unwrap();
        assert_eq!(store.info(&id).await.unwrap(), before.info);
    }

    #[tokio::test]
    async fn a_damaged_open_game_does_not_hold_its_creators_slot() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("games.db");
        let store: Arc<dyn GameStore> = Arc::new(SqliteStore::open(&path).unwrap());
        let (games, _hub) = manager(Arc::clone(&store));
        let ip: IpAddr = "192.0.2.7".parse().unwrap();
        let mut ids = Vec::new();
        for _ in 0..2 {
            let created = games
                .create_game_from(
                    Some(ip),
                    NewGame {
                        rules: Preset::Standard.rules(),
                        preset: None,
                        start: None,
                        seat: Some(Player::First),
                        display_name: "Lan".to_owned(),
                        computer: None,
                    },
                )
                .await
                .unwrap();
            ids.push(created.game.id);
        }
        drop(games);
        drop(store);
        Connection::open(&path)
            .unwrap()
            .execute(
                "UPDATE games SET info = '{\"broken' WHERE id = ?1",
                [ids[0].as_str()],
            )
            .unwrap();
        let store = SqliteStore::open(&path).unwrap();
        assert_eq!(
            store.open_games_by_creator().await.unwrap(),
            [(ids[1].clone(), ip)]
        );
        assert!(matches!(
            store.info(&ids[0]).await,
            Err(StoreError::Damaged { id, .. }) if id == ids[0]
        ));
    }

    #[test]
    fn every_status_has_a_filter_slot() {
        assert_eq!(
            statuses(GameFilter::All),
            ["waiting", "active", "finished", "aborted"]
        );
        assert!(statuses(GameFilter::Finished).contains(&"aborted"));
    }
}
