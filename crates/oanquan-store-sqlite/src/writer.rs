//! The writer thread: the only writing connection, group commit, the cache of unfinished
//! games, and the probes of a writer that cannot write.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use oanquan_game::{
    ClockReading, Commit, Committed, GameEvent, GameEventKind, GameId, GameInfo, GameState,
    LobbyEvent, LobbyEventKind, StoreError,
};
use oanquan_rules::{ByPlayer, Move};
use rusqlite::{Connection, OptionalExtension as _, TransactionBehavior, params};
use tokio::sync::{oneshot, watch};
use tracing::{debug, error, info, warn};

use crate::accounts;
use crate::codec::{
    GameEventDto, InfoDto, LobbyEventDto, player_name, status_name, time_to_db, token_columns,
};
use crate::fault::{backend, is_unique_violation};
use crate::plain::after_plain_move;
use crate::schema::{self, LogEndMark};

/// Most commits in one transaction. Bounds the latency one batch adds to its last member.
pub const MAX_BATCH: usize = 256;

/// Told the size of each batch the writer commits (commits and other writes in one
/// transaction), once it is set: how full group commits run, for metrics. Set at most once.
pub(crate) type BatchObserver = Arc<std::sync::OnceLock<Box<dyn Fn(usize) + Send + Sync>>>;

/// Unfinished games whose latest state is kept in memory for [`GameStore::load`](oanquan_game::GameStore::load).
pub(crate) const MAX_CACHED_GAMES: usize = 4_096;

/// The latest committed state of recently changed, unfinished games, so that playing a move does
/// not read and replay the whole game first. Only the writer thread changes it, after its
/// transaction commits and before it answers, so it never holds a state older than one already
/// acknowledged; readers only look. A game missing from it is read from the database.
pub(crate) type Cache = Arc<Mutex<HashMap<GameId, GameState>>>;

pub(crate) fn lock(cache: &Cache) -> std::sync::MutexGuard<'_, HashMap<GameId, GameState>> {
    // Only whole entries are inserted or removed under the lock: a poisoned map is consistent.
    cache
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The first wait before the writer tries a write again after a lasting failure; it doubles
/// up to [`MAX_PROBE_BACKOFF`].
pub(crate) const FIRST_PROBE_BACKOFF: Duration = Duration::from_millis(100);

/// The longest wait between two tries of a writer that cannot write.
pub(crate) const MAX_PROBE_BACKOFF: Duration = Duration::from_secs(5);

/// One commit for the writer thread.
pub(crate) struct Job {
    pub(crate) create: bool,
    pub(crate) commit: Commit,
    pub(crate) reply: Reply,
}

/// Where a commit's outcome goes.
pub(crate) type Reply = oneshot::Sender<Result<Committed, StoreError>>;

/// A write other than a game's commit (an account, an API key): run in a batch like a commit,
/// in its own savepoint, and answered once the batch is durable.
pub(crate) trait Write: Send {
    /// Writes; on error the savepoint is rolled back.
    fn apply(&mut self, conn: &Connection) -> Result<(), StoreError>;
    /// Answers the caller with the batch's outcome for this write.
    fn answer(self: Box<Self>, outcome: Result<(), StoreError>);
}

/// A [`Write`] made of a closure, which keeps the closure's value until the batch commits.
pub(crate) struct WriteJob<T, F> {
    pub(crate) run: Option<F>,
    pub(crate) value: Option<T>,
    pub(crate) reply: oneshot::Sender<Result<T, StoreError>>,
}

impl<T, F> Write for WriteJob<T, F>
where
    T: Send,
    F: FnOnce(&Connection) -> Result<T, StoreError> + Send,
{
    fn apply(&mut self, conn: &Connection) -> Result<(), StoreError> {
        let run = self
            .run
            .take()
            .ok_or_else(|| StoreError::Backend("a write ran twice".to_owned()))?;
        self.value = Some(run(conn)?);
        Ok(())
    }

    fn answer(self: Box<Self>, outcome: Result<(), StoreError>) {
        let WriteJob { value, reply, .. } = *self;
        let result = outcome.and_then(|()| {
            value.ok_or_else(|| StoreError::Backend("a write was not run".to_owned()))
        });
        // The caller may have gone away; what it wrote stays written.
        let _ = reply.send(result);
    }
}

/// What the writer thread is asked to do.
// Commits, the hot path, travel unboxed; the small variant is for tests only.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Message {
    Commit(Job),
    /// An account write.
    Write(Box<dyn Write>),
    /// Run on the writing connection (tests: fault injection).
    Call(Box<dyn FnOnce(&mut Connection) + Send>),
}

/// The database file as the store opened it, to notice it deleted, moved or replaced under a
/// running server: SQLite goes on writing the open file, which is gone at the stop (an outside
/// probe removed the files of a running server: its moves kept being acknowledged, and the
/// next start made an empty database). One `stat` per batch.
#[derive(Debug)]
pub(crate) struct FileIdentity {
    path: std::path::PathBuf,
    #[cfg(unix)]
    id: Option<(u64, u64)>,
}

impl FileIdentity {
    /// The file at `path` now.
    pub(crate) fn of(path: &std::path::Path) -> FileIdentity {
        FileIdentity {
            path: path.to_owned(),
            #[cfg(unix)]
            id: Self::read(path),
        }
    }

    #[cfg(unix)]
    fn read(path: &std::path::Path) -> Option<(u64, u64)> {
        schema::file_identity(path)
    }

    /// Whether the file system the database is on has [`MIN_ROOM`] free for this process. A
    /// [`probe`] alone said a full disk could be written again: its rolled-back page never
    /// reaches the disk, and its one-page commit lands in log space the file already has. An
    /// outside probe saw health back to SERVING 100 ms after a write failed on a full disk,
    /// every write still failing, again and again.
    fn has_room(&self) -> bool {
        #[cfg(unix)]
        {
            let Ok(stat) = rustix::fs::statvfs(&self.path) else {
                // Not known: the probe decides, as before.
                return true;
            };
            // Root may use the blocks kept back from other users.
            let blocks = if rustix::process::geteuid().is_root() {
                stat.f_bfree
            } else {
                stat.f_bavail
            };
            enough_room(blocks, stat.f_frsize)
        }
        #[cfg(not(unix))]
        true
    }

    /// Why nothing may be written any more, if the file at the path is not the one opened.
    fn gone(&self) -> Option<StoreError> {
        #[cfg(unix)]
        {
            let now = Self::read(&self.path);
            if self.id.is_some() && now != self.id {
                return Some(StoreError::Unavailable(format!(
                    "the database file {} was deleted, moved or replaced while the server ran; \
                     nothing more is written, since it would be lost at the stop. Stop the \
                     server and put the database back (or restore a backup) before starting \
                     it again",
                    self.path.display()
                )));
            }
        }
        None
    }
}

/// The free space a file system must have before a store that found it full writes again: a
/// commit's pages, and a checkpoint's growth of the file, need room beyond the log's.
const MIN_ROOM: u64 = 1 << 20;

/// Whether `blocks` free blocks of `block_size` bytes are [`MIN_ROOM`].
fn enough_room(blocks: u64, block_size: u64) -> bool {
    blocks.saturating_mul(block_size) >= MIN_ROOM
}

pub(crate) fn run_writer(
    mut conn: Connection,
    messages: &mpsc::Receiver<Message>,
    cache: &Cache,
    health: &watch::Sender<bool>,
    batches: &BatchObserver,
    file: &FileIdentity,
    log_end: Option<&LogEndMark>,
) {
    // `Some(wait)` while the file cannot be written: try a probe write after `wait`.
    let mut backoff: Option<Duration> = None;
    let mut next = None;
    let mut checkpoints = Checkpoints::new();
    let mut heads = Heads::new();
    // A batch's buffers, kept from one batch to the next: allocated afresh, their sizes vary
    // with every batch, and the allocator kept taking new pages for them (each first touch a
    // page fault; 5 % of this thread in a profile of durable moves, BENCHMARKS.md).
    let mut work: Vec<(bool, Commit)> = Vec::with_capacity(MAX_BATCH);
    let mut replies = Vec::with_capacity(MAX_BATCH);
    let mut writes: Vec<Box<dyn Write>> = Vec::with_capacity(MAX_BATCH);
    let mut answers = Vec::with_capacity(MAX_BATCH);
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
                        let probed = match file.gone() {
                            Some(_) => Err(rusqlite::Error::InvalidQuery),
                            None if !file.has_room() => Err(rusqlite::Error::InvalidQuery),
                            None => probe(&mut conn),
                        };
                        backoff = match probed {
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
        match message {
            Message::Commit(job) => queue(job, &mut work, &mut replies),
            Message::Write(write) => writes.push(write),
            Message::Call(call) => {
                call(&mut conn);
                // It may have written anything: read every game afresh.
                heads.clear();
                continue;
            }
        }
        while work.len() + writes.len() < MAX_BATCH {
            match messages.try_recv() {
                Ok(Message::Commit(job)) => queue(job, &mut work, &mut replies),
                Ok(Message::Write(write)) => writes.push(write),
                // Runs after this batch, in order.
                Ok(call) => {
                    next = Some(call);
                    break;
                }
                Err(_) => break,
            }
        }
        if let Some(observe) = batches.get() {
            observe(work.len() + writes.len());
        }
        let (results, outcomes) = match file.gone() {
            Some(error) => {
                let (results, outcomes) = all_failed(work.len(), writes.len(), &error);
                (self::answers(&mut work, results), outcomes)
            }
            None => write_batch(&mut conn, &mut work, &mut writes, (&checkpoints, &heads)),
        };
        // Any commit refused for want of space or permission means the store cannot write
        // now, even if smaller commits of the same batch fitted.
        let unavailable = results
            .iter()
            .filter_map(|result| result.as_ref().err().map(|(_, error)| error))
            .chain(outcomes.iter().filter_map(|outcome| outcome.as_ref().err()))
            .find(|error| matches!(error, StoreError::Unavailable(_)));
        if let Some(error) = unavailable {
            set_writable(health, false, Some(error));
            backoff.get_or_insert(FIRST_PROBE_BACKOFF);
        } else if results.iter().any(Result::is_ok) || outcomes.iter().any(Result::is_ok) {
            set_writable(health, true, None);
            backoff = None;
        }
        if let Some(mark) = log_end {
            record_log_end(&conn, mark);
        }
        for (write, outcome) in writes.drain(..).zip(outcomes) {
            write.answer(outcome);
        }
        // The states move into the cache (no copy): only the `Committed` part goes back.
        {
            let mut cache = lock(cache);
            for result in results {
                answers.push(match result {
                    Ok(answer) => {
                        let Answer {
                            committed,
                            state,
                            checkpoint,
                            head,
                        } = *answer;
                        // A finished game stays while a rematch can still be offered: offers
                        // and the window's end are commits too.
                        if state.info().log_closed() {
                            cache.remove(&state.info().id);
                            checkpoints.remove(&state.info().id);
                            heads.remove(&state.info().id);
                        } else {
                            let id = state.info().id.clone();
                            if let Some(checkpoint) = checkpoint {
                                insert_bounded(&mut checkpoints, id.clone(), *checkpoint);
                            }
                            insert_bounded(&mut heads, id.clone(), head);
                            insert_bounded(&mut cache, id, state);
                        }
                        Ok(committed)
                    }
                    Err((id, error)) => {
                        if let Some(id) = &id {
                            // Whatever refused it, the next commit reads where the game stands.
                            heads.remove(id);
                            // Another process may have written the game: read it afresh next time.
                            if let StoreError::Conflict { .. } = &error {
                                cache.remove(id);
                                checkpoints.remove(id);
                            }
                        }
                        Err(error)
                    }
                });
            }
        }
        // Answered only now: every result in the batch is durable (or failed) at this point.
        for (reply, result) in replies.drain(..).zip(answers.drain(..)) {
            // The caller may have gone away; what it committed stays committed.
            let _ = reply.send(result);
        }
    }
    // Every sender dropped: the store is closing. Rows left behind by plain moves are brought
    // up to date, so that the file at rest has every game's summary in its row (loads do not
    // need it: they replay the log from any row).
    write_current_rows(&mut conn, cache, &checkpoints);
    // A clean stop: the next server need not look for a log (see `schema::check_log_present`).
    if let Err(error) = crate::schema::mark_running(&conn, false) {
        warn!(%error, "marking the database as stopped cleanly");
    }
    // The readers are closed already. Fold the
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

/// Records in the lock file how many transactions the database holds now (see
/// `schema::LogEndMark`): after a batch, before its callers are answered. Read back rather
/// than counted here, so that a commit that failed cannot make the record say more.
pub(crate) fn record_log_end(conn: &Connection, mark: &LogEndMark) {
    let commits = conn
        .prepare_cached("SELECT commits FROM run_state WHERE id = 1")
        .and_then(|mut statement| statement.query_row([], |row| row.get::<_, i64>(0)));
    if let Ok(commits) = commits {
        mark.record(commits);
    }
}

/// Adds a commit to the batch being gathered.
fn queue(job: Job, work: &mut Vec<(bool, Commit)>, replies: &mut Vec<Reply>) {
    work.push((job.create, job.commit));
    replies.push(job.reply);
}

/// Inserts into a per-game map of the writer's, which starts again empty when it holds
/// [`MAX_CACHED_GAMES`] others: a game missing from it costs one read or one row write.
fn insert_bounded<V>(map: &mut HashMap<GameId, V>, id: GameId, value: V) {
    if map.len() >= MAX_CACHED_GAMES && !map.contains_key(&id) {
        map.clear();
    }
    map.insert(id, value);
}

/// Rewrites the `games` row of every cached game whose row is older than its log, in one
/// transaction; a failure is logged and changes nothing (the log holds every move anyway).
fn write_current_rows(conn: &mut Connection, cache: &Cache, checkpoints: &Checkpoints) {
    let stale: Vec<GameState> = lock(cache)
        .values()
        .filter(|state| {
            checkpoints
                .get(&state.info().id)
                .is_some_and(|row| row.info.sequence < state.info().sequence)
        })
        .cloned()
        .collect();
    if stale.is_empty() {
        return;
    }
    let result = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(backend)
        .and_then(|tx| {
            for state in &stale {
                let ord: i64 = tx
                    .prepare_cached("SELECT ord FROM games WHERE id = ?1")
                    .and_then(|mut s| s.query_row([state.info().id.as_str()], |row| row.get(0)))
                    .map_err(backend)?;
                let (tokens, rematch_tokens) = token_columns(state);
                write_row(
                    &tx,
                    state,
                    Some(ord),
                    state.info().sequence,
                    tokens,
                    rematch_tokens,
                )?;
            }
            tx.commit().map_err(backend)
        });
    if let Err(error) = result {
        warn!(%error, games = stale.len(), "bringing game rows up to date at close");
    }
}

/// Publishes whether the store can write, logging each change once.
pub(crate) fn set_writable(
    health: &watch::Sender<bool>,
    writable: bool,
    error: Option<&StoreError>,
) {
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
pub(crate) fn probe(conn: &mut Connection) -> rusqlite::Result<()> {
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

/// What the `games` row of a game holds, as this writer last wrote it: a plain move leaves the
/// row alone when it can be derived from this (see [`after_plain_move`]).
#[derive(Debug, Clone)]
pub(crate) struct Checkpoint {
    info: GameInfo,
    tokens: ByPlayer<Option<[u8; 32]>>,
    rematch_tokens: ByPlayer<Option<[u8; 32]>>,
}

/// The [`Checkpoint`]s of recently written games, the writer's own. A game missing from it gets
/// its row written by its next commit, which puts it back.
pub(crate) type Checkpoints = HashMap<GameId, Checkpoint>;

/// Where a game's stored rows stand as this writer last left them: its `ord`, the sequence its
/// `games` row was written at and the last sequence of its log. A commit on a game found here
/// is checked against it instead of reading both back (a profile of durable moves had that
/// read at 13 % of the writer thread). Only this writer appends to the log (the file's lock
/// keeps other servers off it), and a head is kept only for commits that are in the file; even
/// if another process did append, the log's unique `(game, sequence)` index refuses the stale
/// commit's rows, and the game's head is then dropped and read afresh.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Head {
    ord: i64,
    row_sequence: u64,
    log_sequence: u64,
}

/// The [`Head`]s of recently written games, the writer's own; bounded like [`Checkpoints`].
pub(crate) type Heads = HashMap<GameId, Head>;

/// What a written commit leaves: its answer, the state to cache, the game's row if it was
/// written and where its rows stand.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) committed: Committed,
    pub(crate) state: GameState,
    pub(crate) checkpoint: Option<Box<Checkpoint>>,
    pub(crate) head: Head,
}

/// One commit's outcome in a batch, or the error and the game it was for. Boxed: a batch's
/// outcomes stay a small allocation whatever the batch's size.
pub(crate) type BatchResult = Result<Box<Answer>, (Option<GameId>, StoreError)>;

/// The outcome of a [`Write`] in a batch.
type WriteOutcome = Result<(), StoreError>;

/// What a commit's writes leave for its answer, built once the transaction holding them has
/// committed.
pub(crate) struct Applied {
    /// The game's row, if this commit wrote it.
    checkpoint: Option<Box<Checkpoint>>,
    /// Where the game's rows stand after this commit.
    head: Head,
    /// The lobby sequence before the commit's first lobby event.
    lobby_before: u64,
}

/// How far a commit got when it failed.
enum Failed {
    /// Refused before it wrote anything (a conflict, an unknown game): nothing to undo.
    Checked(StoreError),
    /// Refused after some of its rows were written: they must be undone.
    Writing(StoreError),
}

impl Failed {
    fn into_error(self) -> StoreError {
        match self {
            Failed::Checked(error) | Failed::Writing(error) => error,
        }
    }
}

/// How a batch's commits are kept apart inside its transaction.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Isolation {
    /// None: a commit that fails after writing rolls back the whole batch.
    Batch,
    /// Each commit and each other write in its own savepoint, rolled back alone if it fails.
    Savepoints,
}

/// The outcome of each commit and each other write of a batch.
type Outcomes = (Vec<Result<Applied, StoreError>>, Vec<WriteOutcome>);

/// Runs a batch of commits and other writes in one transaction.
///
/// A batch of commits alone runs first without savepoints: a savepoint per commit (its
/// `SAVEPOINT` and `RELEASE` statements and the pages it journals) cost about a tenth of the
/// writer's time (BENCHMARKS.md, issue 20), and almost every commit succeeds. A commit refused
/// before it writes (a conflict) leaves nothing to undo there. Only when one fails halfway
/// through its writes is the whole transaction rolled back and the batch run again with each
/// commit (and each other write) in its own savepoint, so that one that fails (a conflict, a
/// taken name) is rolled back alone, with everything it wrote.
pub(crate) fn write_batch(
    conn: &mut Connection,
    work: &mut Vec<(bool, Commit)>,
    writes: &mut [Box<dyn Write>],
    (checkpoints, heads): (&Checkpoints, &Heads),
) -> (Vec<BatchResult>, Vec<WriteOutcome>) {
    let known = (checkpoints, heads);
    // Other writes run once only (they consume their closure): they always take savepoints.
    let first = if writes.is_empty() {
        write_transaction(conn, work, writes, known, Isolation::Batch)
    } else {
        None
    };
    let (results, outcomes) = first
        .or_else(|| write_transaction(conn, work, writes, known, Isolation::Savepoints))
        // With savepoints every failure is rolled back alone, so there is always an outcome.
        .unwrap_or_else(|| {
            let error = StoreError::Backend("a batch could not be written".to_owned());
            all_failed(work.len(), writes.len(), &error)
        });
    (answers(work, results), outcomes)
}

/// Every commit and write of a batch failed with `error`.
fn all_failed(commits: usize, writes: usize, error: &StoreError) -> Outcomes {
    (
        (0..commits).map(|_| Err(error.clone())).collect(),
        vec![Err(error.clone()); writes],
    )
}

/// The batch in one transaction; `None` (everything rolled back) if, with
/// [`Isolation::Batch`], a commit failed after it had written something.
fn write_transaction(
    conn: &mut Connection,
    work: &mut [(bool, Commit)],
    writes: &mut [Box<dyn Write>],
    (checkpoints, heads): (&Checkpoints, &Heads),
    isolation: Isolation,
) -> Option<Outcomes> {
    let mut tx = match conn.transaction_with_behavior(TransactionBehavior::Immediate) {
        Ok(tx) => tx,
        Err(error) => return Some(all_failed(work.len(), writes.len(), &backend(error))),
    };
    // Rows written earlier in this batch: a later commit of the same game compares with them.
    let mut written: HashMap<GameId, Checkpoint> = HashMap::new();
    // Heads moved by this transaction: they hold only if it commits.
    let mut moved: Heads = HashMap::new();
    let mut results = Vec::with_capacity(work.len());
    for (create, commit) in work.iter_mut() {
        let id = commit.state.info().id.clone();
        let known = written.get(&id).or_else(|| checkpoints.get(&id));
        let head = moved.get(&id).or_else(|| heads.get(&id)).copied();
        let result = match isolation {
            // Dropping the savepoint on error rolls back this commit only.
            Isolation::Savepoints => tx.savepoint().map_err(backend).and_then(|savepoint| {
                let applied =
                    apply(&savepoint, *create, commit, known, head).map_err(Failed::into_error)?;
                savepoint.commit().map_err(backend)?;
                Ok(applied)
            }),
            Isolation::Batch => match apply(&tx, *create, commit, known, head) {
                // Dropping `tx` rolls the whole batch back.
                Err(Failed::Writing(_)) => return None,
                result => result.map_err(Failed::into_error),
            },
        };
        if let Ok(applied) = &result {
            moved.insert(id.clone(), applied.head);
            if let Some(checkpoint) = &applied.checkpoint {
                written.insert(id, Checkpoint::clone(checkpoint));
            }
        }
        results.push(result);
    }
    let mut outcomes = Vec::with_capacity(writes.len());
    for write in writes.iter_mut() {
        outcomes.push(tx.savepoint().map_err(backend).and_then(|savepoint| {
            write.apply(&savepoint)?;
            savepoint.commit().map_err(backend)
        }));
    }
    // Counted in the file itself, for a start after a crash to tell a log lost or cut short
    // from a whole one (see `schema::check_log_present`). Failing, it fails the commit.
    let committed = tx
        .prepare_cached("UPDATE run_state SET commits = commits + 1 WHERE id = 1")
        .and_then(|mut statement| statement.execute([]))
        .and_then(|_| tx.commit());
    let results = commit_transaction(committed, conn, results, &mut outcomes);
    Some((results, outcomes))
}

/// After the transaction's `COMMIT`: if it failed, every result that had succeeded fails with
/// its error (nothing of the batch is stored).
fn commit_transaction<T>(
    committed: rusqlite::Result<()>,
    conn: &Connection,
    mut results: Vec<Result<T, StoreError>>,
    outcomes: &mut [WriteOutcome],
) -> Vec<Result<T, StoreError>> {
    if let Err(error) = committed {
        let error = backend(error);
        let commits = results.len() + outcomes.len();
        if matches!(error, StoreError::Unavailable(_)) {
            // A full disk or a read-only file: `set_writable` logs it once per outage, and a
            // line per failed commit would grow with the clients' retries (thousands a
            // second), filling the disk that is already full.
            debug!(%error, commits, "database commit failed");
        } else {
            warn!(%error, commits, "database commit failed");
        }
        if !conn.is_autocommit() {
            let _ = conn.execute_batch("ROLLBACK");
        }
        for result in &mut results {
            if result.is_ok() {
                *result = Err(error.clone());
            }
        }
        for outcome in outcomes {
            if outcome.is_ok() {
                *outcome = Err(error.clone());
            }
        }
    }
    results
}

/// Each commit's answer, once its transaction has committed (or failed).
fn answers(
    work: &mut Vec<(bool, Commit)>,
    results: Vec<Result<Applied, StoreError>>,
) -> Vec<BatchResult> {
    work.drain(..)
        .zip(results)
        .map(|((_, commit), result)| match result {
            Ok(applied) => {
                let (committed, state) = committed(commit, applied.lobby_before);
                Ok(Box::new(Answer {
                    committed,
                    state,
                    checkpoint: applied.checkpoint,
                    head: applied.head,
                }))
            }
            Err(error) => Err((Some(commit.state.info().id.clone()), error)),
        })
        .collect()
}

/// A written commit's events, numbered, and its state.
fn committed(commit: Commit, lobby_before: u64) -> (Committed, GameState) {
    let Commit {
        state,
        expected_sequence,
        game_events,
        lobby_events,
        time,
        ..
    } = commit;
    let id = &state.info().id;
    let game_events = (expected_sequence + 1..)
        .zip(game_events)
        .map(|(sequence, kind)| {
            Arc::new(GameEvent {
                game_id: id.clone(),
                sequence,
                time,
                kind,
            })
        })
        .collect();
    let lobby_events = (lobby_before + 1..)
        .zip(lobby_events)
        .map(|(sequence, kind)| {
            Arc::new(LobbyEvent {
                sequence,
                time,
                kind,
            })
        })
        .collect();
    let committed = Committed {
        info: state.info().clone(),
        game_events,
        lobby_events,
    };
    (committed, state)
}

/// A failed insert into the log. A row already at that sequence means the game moved on
/// after this writer last read it (another process wrote the file): a conflict, as the check
/// against a freshly read head would have said, so that the caller reads the game again and
/// retries, rather than an internal error.
fn log_refused(conn: &Connection, ord: i64, error: rusqlite::Error) -> StoreError {
    if !is_unique_violation(&error) {
        return backend(error);
    }
    match conn.query_row(
        "SELECT max(sequence) FROM game_log WHERE game = ?1",
        [ord],
        |row| row.get::<_, i64>(0),
    ) {
        Ok(current) => StoreError::Conflict {
            current: current as u64,
        },
        Err(error) => backend(error),
    }
}

/// The number and clocks of a plain move's commit (a `MovePlayed` and a `TurnStarted`, nothing
/// else), or `None`.
fn plain_move(commit: &Commit) -> Option<(u32, Option<&ClockReading>)> {
    if !commit.lobby_events.is_empty() || !commit.accounts.is_empty() {
        return None;
    }
    match commit.game_events.as_slice() {
        [
            GameEventKind::MovePlayed { record, clock },
            GameEventKind::TurnStarted { .. },
        ] => Some((record.number, clock.as_ref())),
        _ => None,
    }
}

/// Writes one commit, inside the batch's transaction (or a savepoint of it). `known` is the
/// game's row as this writer last wrote it, if it remembers. Its events are numbered, and
/// its state's sequence set, as they will be stored.
fn apply(
    conn: &Connection,
    create: bool,
    commit: &mut Commit,
    known: Option<&Checkpoint>,
    head: Option<Head>,
) -> Result<Applied, Failed> {
    let stored = stored_game(conn, create, commit, head).map_err(Failed::Checked)?;
    write_commit(conn, commit, stored, known).map_err(Failed::Writing)
}

/// The stored game a commit applies to: its `ord` and the sequence its row was written at
/// (`None` for a game the commit creates), from its `head` if this writer knows it, else read;
/// a conflict if it has moved on.
fn stored_game(
    conn: &Connection,
    create: bool,
    commit: &Commit,
    head: Option<Head>,
) -> Result<Option<(i64, u64)>, StoreError> {
    let expected = commit.expected_sequence;
    if let (false, Some(head)) = (create, head) {
        let current = head.log_sequence.max(head.row_sequence);
        if current != expected {
            return Err(StoreError::Conflict { current });
        }
        return Ok(Some((head.ord, head.row_sequence)));
    }
    if create {
        let exists = conn
            .prepare_cached("SELECT 1 FROM games WHERE id = ?1")
            .and_then(|mut s| s.exists([commit.state.info().id.as_str()]))
            .map_err(backend)?;
        if expected != 0 || exists {
            return Err(StoreError::Conflict { current: 0 });
        }
        Ok(None)
    } else {
        // The log's last sequence is the game's; the row's may be older (plain moves).
        let (ord, row_sequence, current): (i64, i64, Option<i64>) = conn
            .prepare_cached(
                "SELECT ord, sequence,
                        (SELECT max(sequence) FROM game_log WHERE game = games.ord)
                 FROM games WHERE id = ?1",
            )
            .and_then(|mut s| {
                s.query_row([commit.state.info().id.as_str()], |row| {
                    Ok((row.get(0)?, row.get(1)?, row.get(2)?))
                })
                .optional()
            })
            .map_err(backend)?
            .ok_or(StoreError::NotFound)?;
        // The row is written at one of its log's events, never past the last: a row that says
        // otherwise is damaged, and would refuse every commit as a race lost to a game that is
        // far ahead (an outside probe's edited row answered "changing too fast; retry" forever).
        if row_sequence < 0 || current.is_some_and(|last| row_sequence > last) {
            return Err(crate::fault::corrupt(
                &commit.state.info().id,
                format_args!(
                    "its row says event {row_sequence}, past its log's last ({})",
                    current.unwrap_or(0)
                ),
            ));
        }
        let current = current.unwrap_or(row_sequence).max(row_sequence) as u64;
        if current != expected {
            return Err(StoreError::Conflict { current });
        }
        Ok(Some((ord, row_sequence as u64)))
    }
}

/// Writes a commit whose stored game [`stored_game`] found.
fn write_commit(
    conn: &Connection,
    commit: &mut Commit,
    stored: Option<(i64, u64)>,
    known: Option<&Checkpoint>,
) -> Result<Applied, StoreError> {
    let expected = commit.expected_sequence;
    let (tokens, rematch_tokens) = token_columns(&commit.state);
    // Before anything of the game: a stale account refuses the whole commit (what came first
    // is undone with it: see `write_batch`).
    accounts::apply_updates(conn, &commit.accounts)?;

    let sequence = expected + commit.game_events.len() as u64;
    commit.state.set_sequence(sequence);
    let state = &commit.state;
    let id = &state.info().id;
    // Each move comes with its `MovePlayed` event (checked below), so the moves stored before
    // are those the commit has no event for.
    let played = commit
        .game_events
        .iter()
        .filter(|kind| matches!(kind, GameEventKind::MovePlayed { .. }))
        .count();
    let stored_moves = state.moves().len().checked_sub(played).ok_or_else(|| {
        StoreError::Backend(format!(
            "game {id}: a commit plays more moves than its state has"
        ))
    })?;
    // Whether the row can stay: this writer wrote it, and replaying the log from it gives
    // exactly the state being committed.
    let derived = match (stored, known, plain_move(commit)) {
        (Some((_, row_sequence)), Some(known), Some((number, clock)))
            if known.info.sequence == row_sequence
                && known.tokens == tokens
                && known.rematch_tokens == rematch_tokens =>
        {
            let mut info = known.info.clone();
            after_plain_move(&mut info, number, clock, commit.time);
            info.sequence = sequence;
            info.position = state.info().position;
            info == *state.info()
        }
        _ => false,
    };
    let (ord, checkpoint) = if derived {
        (stored.map_or(0, |(ord, _)| ord), None)
    } else {
        let ord = write_row(
            conn,
            state,
            stored.map(|(ord, _)| ord),
            sequence,
            tokens,
            rematch_tokens,
        )?;
        accounts::link_players(conn, ord, state.info())?;
        let checkpoint = Box::new(Checkpoint {
            info: state.info().clone(),
            tokens,
            rematch_tokens,
        });
        (ord, Some(checkpoint))
    };

    // Moves go into their `MovePlayed` rows; any other move would have no row to go in.
    let time = time_to_db(commit.time);
    let mut new_moves = state
        .moves()
        .since(stored_moves)
        .ok_or_else(|| {
            StoreError::Backend(format!(
                "a commit to game {id} removes moves; they only append"
            ))
        })?
        .into_iter()
        .peekable();
    let mut played_so_far = 0;
    for (sequence, kind) in (expected + 1..).zip(&commit.game_events) {
        if let GameEventKind::GameStarted { game } = kind {
            check_game_reads_back(game).map_err(unreadable(id))?;
        }
        let mv = match kind {
            GameEventKind::MovePlayed { record, .. } => {
                let Some(stored) = new_moves.next() else {
                    return Err(StoreError::Backend(format!(
                        "game {id}: event {sequence} plays move {}, which the state does not have",
                        record.number
                    )));
                };
                if stored.number != record.number
                    || stored.number as usize != stored_moves + played_so_far + 1
                {
                    return Err(StoreError::Backend(format!(
                        "game {id}: move number {} out of order",
                        record.number
                    )));
                }
                if stored.mv.to_string().parse::<Move>().ok() != Some(stored.mv) {
                    return Err(unreadable(id)(format!(
                        "move {} does not read back",
                        stored.number
                    )));
                }
                played_so_far += 1;
                let mv_time = time_to_db(stored.time);
                Some((
                    player_name(stored.player),
                    stored.mv.to_string(),
                    (mv_time != time).then_some(mv_time),
                ))
            }
            _ => None,
        };
        let json = encode_json(&GameEventDto::new(kind))
            .map_err(|e| StoreError::Backend(format!("encoding an event of game {id}: {e}")))?;
        let (player, mv, mv_time) = match mv {
            Some((player, mv, mv_time)) => (Some(player), Some(mv), mv_time),
            None => (None, None, None),
        };
        conn.prepare_cached(
            "INSERT INTO game_log (game, sequence, time, event, player, mv, mv_time)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )
        .and_then(|mut s| {
            s.execute(params![
                ord,
                sequence as i64,
                time,
                json,
                player,
                mv,
                mv_time
            ])
        })
        .map_err(|error| log_refused(conn, ord, error))?;
    }
    if let Some(extra) = new_moves.next() {
        return Err(StoreError::Backend(format!(
            "game {id}: move {} comes without its MovePlayed event; refused",
            extra.number
        )));
    }

    let mut lobby_before = 0;
    if !commit.lobby_events.is_empty() {
        lobby_before = last_lobby_sequence(conn)?;
        for (sequence, kind) in (lobby_before + 1..).zip(&commit.lobby_events) {
            if let LobbyEventKind::GameCreated { game } = kind {
                check_game_reads_back(game).map_err(unreadable(id))?;
            }
            let json = encode_json(&LobbyEventDto::new(kind))
                .map_err(|e| StoreError::Backend(format!("encoding a lobby event: {e}")))?;
            conn.prepare_cached(
                "INSERT INTO lobby_events (sequence, time, event) VALUES (?1, ?2, ?3)",
            )
            .and_then(|mut s| s.execute(params![sequence as i64, time, json]))
            .map_err(backend)?;
        }
    }
    let row_sequence = match (&checkpoint, stored) {
        (None, Some((_, row_sequence))) => row_sequence,
        _ => sequence,
    };
    Ok(Applied {
        checkpoint,
        head: Head {
            ord,
            row_sequence,
            log_sequence: sequence,
        },
        lobby_before,
    })
}

/// Writes the `games` row of a game (inserts it for a new one) and returns its `ord`.
fn write_row(
    conn: &Connection,
    state: &GameState,
    ord: Option<i64>,
    sequence: u64,
    tokens: ByPlayer<Option<[u8; 32]>>,
    rematch_tokens: ByPlayer<Option<[u8; 32]>>,
) -> Result<i64, StoreError> {
    let id = &state.info().id;
    let info_json = encode_json(&InfoDto::new(state.info()))
        .map_err(|e| StoreError::Backend(format!("encoding game {id}: {e}")))?;
    check_info_reads_back(state.info(), &info_json).map_err(unreadable(id))?;
    let status = status_name(state.info().status);
    let move_count = i64::from(state.info().move_count);
    match ord {
        None => {
            conn.prepare_cached(
                "INSERT INTO games (id, status, sequence, move_count, token_first, token_second, info,
                                    creator, rematch_token_first, rematch_token_second)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
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
                    state.creator().map(|ip| ip.to_string()),
                    rematch_tokens.first,
                    rematch_tokens.second,
                ])
            })
            .map_err(backend)?;
            Ok(conn.last_insert_rowid())
        }
        Some(ord) => {
            // Only what changes, so that the status index is written only when the status is.
            conn.prepare_cached(
                "UPDATE games SET status = ?2, sequence = ?3, move_count = ?4, token_first = ?5,
                 token_second = ?6, info = ?7, rematch_token_first = ?8,
                 rematch_token_second = ?9
                 WHERE ord = ?1",
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
                    rematch_tokens.first,
                    rematch_tokens.second,
                ])
            })
            .map_err(backend)?;
            Ok(ord)
        }
    }
}

/// A commit refused because what it would store does not decode back to what was accepted:
/// storing it would leave a game nobody can load.
pub(crate) fn unreadable(id: &GameId) -> impl Fn(String) -> StoreError + '_ {
    move |why| {
        StoreError::Backend(format!(
            "game {id} would be stored in a form that does not read back ({why}); refused"
        ))
    }
}

/// Whether `json` (the encoding of `info`) decodes to `info` again.
pub(crate) fn check_info_reads_back(info: &GameInfo, json: &str) -> Result<(), String> {
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

pub(crate) fn check_game_reads_back(info: &GameInfo) -> Result<(), String> {
    let json = encode_json(&InfoDto::new(info)).map_err(|e| e.to_string())?;
    check_info_reads_back(info, &json)
}

/// `serde_json::to_string` into a buffer sized for our rows up front, rather than one grown
/// (and copied) several times per row.
pub(crate) fn encode_json(value: &impl serde::Serialize) -> serde_json::Result<String> {
    let mut buffer = Vec::with_capacity(1024);
    serde_json::to_writer(&mut buffer, value)?;
    // serde_json writes UTF-8 only.
    Ok(String::from_utf8(buffer)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
}

pub(crate) fn last_lobby_sequence(conn: &Connection) -> Result<u64, StoreError> {
    conn.prepare_cached("SELECT COALESCE(MAX(sequence), 0) FROM lobby_events")
        .and_then(|mut s| s.query_row([], |row| row.get::<_, i64>(0)))
        .map(|last| last as u64)
        .map_err(backend)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_file_system_is_not_written_again_until_it_has_room() {
        assert!(!enough_room(0, 4096));
        assert!(!enough_room(255, 4096));
        assert!(enough_room(256, 4096));
        assert!(enough_room(u64::MAX, u64::MAX));
        // This test's own folder has room; a path that is not there is left to the probe.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("oanquan.db");
        std::fs::write(&path, b"").unwrap();
        assert!(FileIdentity::of(&path).has_room());
        assert!(FileIdentity::of(&dir.path().join("gone")).has_room());
    }
}
