//! The computer opponent and analysis searches, on top of [`oanquan_ai`].
//!
//! * [`SearchPool`] runs every search (computer moves and `RulesService.Analyze`) on tokio's
//!   blocking pool, so searches never occupy the async workers that answer people's calls.
//!   Computer moves and analyses have separate slots ([`SearchCapacity`]): an analysis runs for
//!   up to 5 s, a computer move for its move time, and a hosted game must not wait for
//!   strangers' analyses. A computer move waits for a slot of its own kind; an analysis waits
//!   briefly and is then refused with a retry delay, as is a client with too many analyses.
//!   Each search has its own cancel flag: set when its caller goes away (a drop guard), when
//!   its game ends ([`SearchPool::cancel_game`]) and when the server stops
//!   ([`SearchPool::stop`]).
//! * [`Computer`] plays the computer's seats as a client of the [`GameManager`], which knows
//!   nothing of it: its driver task ([`spawn_driver`]) listens to the hub's feed of commits;
//!   when the computer is to move it searches and commits the move through
//!   `GameManager::play_computer_move` — the same validated path, events and traces as a
//!   person's `PlayMove` — and when a game ends it cancels that game's searches. In a timed
//!   game it plays on the clock: each move thinks a share of its remaining time
//!   ([`think_time`]), never more than the server's move time, and it waits for a slot no
//!   longer than that share ([`slot_wait`]): then it plays the greedy move without one. On start the driver resumes every active game where the computer is to
//!   move (games reloaded from SQLite after a restart).
//!
//! A computer move is never committed from a cancelled search: after a shutdown the turn is
//! simply played again by the next server.

use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use oanquan_ai::egtb::Tablebase;
use oanquan_ai::{Engine, Level, MAX_DEPTH, SearchLimits, SearchResult};
use oanquan_rules::{Game, Player};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, TryAcquireError, watch};
use tokio::task::{JoinHandle, JoinSet};
use tracing::{debug, info, warn};

use crate::clock::TimeControl;
use crate::error::GameError;
use crate::limits::{self, ClientPlace, ClientPlaces};
use crate::manager::{GameManager, MAX_PAGE_SIZE};
use crate::model::{GameFilter, GameId, GameInfo, GameState};
pub use crate::model::{computer_name, computer_to_move};
use crate::timing;

/// Default thinking time of a computer move.
pub const DEFAULT_MOVE_TIME: Duration = Duration::from_millis(300);
/// `RulesService.Analyze` thinking time when the request leaves it at 0.
pub const DEFAULT_ANALYSIS_TIME: Duration = Duration::from_millis(1000);
/// Longest `RulesService.Analyze` thinking time a request may ask for, in milliseconds.
pub const MAX_ANALYSIS_TIME_MS: u32 = 5000;

/// Searches at once by default: one per core.
#[must_use]
pub fn default_max_searches() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
}

/// The search limits of an Analyze request, checked: `time_ms` 0 means
/// [`DEFAULT_ANALYSIS_TIME`], at most [`MAX_ANALYSIS_TIME_MS`]; `nodes` at least 1; `depth`
/// 1 to [`MAX_DEPTH`].
///
/// # Errors
///
/// [`GameError::InvalidArgument`] naming `time_limit_ms`, `node_limit` or `depth_limit`.
pub fn analysis_limits(
    time_ms: u32,
    nodes: Option<u64>,
    depth: Option<u32>,
) -> Result<SearchLimits, GameError> {
    let time = match time_ms {
        0 => DEFAULT_ANALYSIS_TIME,
        ms if ms > MAX_ANALYSIS_TIME_MS => {
            return Err(GameError::invalid(
                "time_limit_ms",
                format!("at most {MAX_ANALYSIS_TIME_MS} ms, got {ms}; 0 means the default 1000"),
            ));
        }
        ms => Duration::from_millis(u64::from(ms)),
    };
    let mut limits = SearchLimits::time(time);
    if let Some(nodes) = nodes {
        if nodes == 0 {
            return Err(GameError::invalid(
                "node_limit",
                "must be at least 1; leave it unset for no node limit",
            ));
        }
        limits = limits.with_nodes(nodes);
    }
    if let Some(depth) = depth {
        if !(1..=MAX_DEPTH).contains(&depth) {
            return Err(GameError::invalid(
                "depth_limit",
                format!("must be 1 to {MAX_DEPTH}, got {depth}; leave it unset for no depth limit"),
            ));
        }
        limits = limits.with_depth(depth);
    }
    Ok(limits)
}

/// `limits` with a time that ends before `deadline` (seen at `now`) by a margin for the
/// answer's way back: a tenth of the time left, at least [`ANSWER_MARGIN`]. A caller whose
/// deadline comes before the time it asked for gets the deepest search that fits, rather than
/// DEADLINE_EXCEEDED after a search it never sees, which held a slot others waited for. A
/// deadline that leaves no time still gets a millisecond: a search answers at depth 1 first.
#[must_use]
pub fn within_deadline(
    limits: SearchLimits,
    deadline: Option<std::time::Instant>,
    now: std::time::Instant,
) -> SearchLimits {
    let Some(deadline) = deadline else {
        return limits;
    };
    let left = deadline.saturating_duration_since(now);
    let room = left
        .saturating_sub((left / 10).max(ANSWER_MARGIN))
        .max(Duration::from_millis(1));
    SearchLimits {
        time: Some(limits.time.map_or(room, |time| time.min(room))),
        ..limits
    }
}

/// The least time kept between an analysis's end and its call's deadline.
pub const ANSWER_MARGIN: Duration = Duration::from_millis(20);

/// How many searches run at once, and how Analyze calls are admitted. Computer moves and
/// analyses have separate slots, so a hosted game's computer never waits behind analyses (which
/// run up to [`MAX_ANALYSIS_TIME_MS`] each, while a computer move takes at most its move time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SearchCapacity {
    /// Computer moves searching at once (at least 1).
    pub computer_moves: usize,
    /// `RulesService.Analyze` searches at once (at least 1), apart from computer moves.
    pub analyses: usize,
    /// Analyze calls one client address may have running or waiting; 0 = no cap.
    pub analyses_per_client: usize,
    /// How long an Analyze call may wait for a free slot before it is refused. Waiting longer
    /// helps nobody: the caller's deadline runs meanwhile, and a queue only grows under load.
    pub analysis_wait: Duration,
    /// Loopback clients (127.0.0.0/8, ::1) skip the per-client cap.
    pub exempt_loopback: bool,
}

/// [`SearchCapacity::analysis_wait`] by default.
pub const DEFAULT_ANALYSIS_WAIT: Duration = Duration::from_millis(500);
/// [`SearchCapacity::analyses_per_client`] by default where there are more than 2 analysis
/// slots: a hint and a second opinion (see [`default_analyses_per_client`]).
pub const DEFAULT_ANALYSES_PER_CLIENT: usize = 2;

/// [`SearchCapacity::analyses_per_client`] by default with `analyses` slots: 2, but 1 where
/// there are at most 2 slots (a machine of 2 or 3 cores). With a single slot, an address
/// allowed two calls keeps it busy with one and waits with the next, which then takes the slot
/// ahead of every other client's call: an outside probe's second client got no analysis in 13
/// tries while the first looped.
#[must_use]
pub fn default_analyses_per_client(analyses: usize) -> usize {
    if analyses <= 2 {
        1
    } else {
        DEFAULT_ANALYSES_PER_CLIENT
    }
}

/// Analyses at once by default: one per core but one, at least 1, so that long analyses leave
/// a core to the async workers, the store and the computer's moves.
#[must_use]
pub fn default_max_analyses() -> usize {
    default_max_searches().saturating_sub(1).max(1)
}

impl Default for SearchCapacity {
    /// One computer move per core, [`default_max_analyses`], [`default_analyses_per_client`],
    /// [`DEFAULT_ANALYSIS_WAIT`], loopback exempt.
    fn default() -> Self {
        SearchCapacity {
            computer_moves: default_max_searches(),
            analyses: default_max_analyses(),
            analyses_per_client: default_analyses_per_client(default_max_analyses()),
            analysis_wait: DEFAULT_ANALYSIS_WAIT,
            exempt_loopback: true,
        }
    }
}

/// Why an Analyze call was refused before it searched. The gRPC layer answers
/// `RESOURCE_EXHAUSTED` with a `google.rpc.RetryInfo` of [`Refused::retry_after`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Every analysis slot stayed taken for the whole wait.
    Busy {
        /// The cap on analyses at once.
        max: usize,
        /// When the soonest running analysis reaches its time limit.
        retry_after: Duration,
    },
    /// The client's address already has its maximum of analyses running or waiting.
    PerClient {
        /// The cap per client address.
        max: usize,
        /// When the soonest of that client's analyses reaches its time limit.
        retry_after: Duration,
    },
}

impl Refused {
    /// When the client should try again.
    #[must_use]
    pub fn retry_after(&self) -> Duration {
        match *self {
            Refused::Busy { retry_after, .. } | Refused::PerClient { retry_after, .. } => {
                retry_after
            }
        }
    }
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let retry = self.retry_after().as_millis();
        match *self {
            Refused::Busy { max, .. } => write!(
                f,
                "the server is running its maximum of {max} {} at once; retry in {retry} ms",
                if max == 1 { "analysis" } else { "analyses" }
            ),
            Refused::PerClient { max, .. } => write!(
                f,
                "your address already has {max} {} running or waiting (the limit per client); \
                 wait for one to finish, retry in {retry} ms",
                if max == 1 { "analysis" } else { "analyses" }
            ),
        }
    }
}

/// Why an Analyze call gave no result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnalysisError {
    /// Refused for lack of capacity, before searching.
    Refused(Refused),
    /// Anything else: a finished position, a shutdown, a failed search.
    Failed(GameError),
}

impl From<GameError> for AnalysisError {
    fn from(error: GameError) -> AnalysisError {
        AnalysisError::Failed(error)
    }
}

/// See the module docs.
#[derive(Debug)]
pub struct SearchPool {
    capacity: SearchCapacity,
    moves: Arc<Semaphore>,
    analyses: Arc<Semaphore>,
    /// Engines not in use (their transposition tables are reused; at most one per slot).
    engines: Mutex<Vec<Engine>>,
    /// Endgame tables every search probes (computer moves and analyses alike).
    tables: Mutex<Option<Arc<Tablebase>>>,
    running: Mutex<HashMap<u64, Running>>,
    /// Analyze calls running or waiting, per client (counted from before a call waits for a
    /// slot until its search ends, or it is refused, so waiting calls count towards the cap).
    clients: Arc<ClientPlaces>,
    /// Computer turns waiting or running, per client key of their game's creator: each client
    /// holds at most `computer_moves` places in the queue for a slot (see
    /// [`SearchPool::turn_of`]).
    turn_clients: Mutex<HashMap<IpAddr, Arc<Semaphore>>>,
    next_id: AtomicU64,
    stopping: AtomicBool,
    /// Callers waiting for a slot (computer moves and analyses), for the server's metrics.
    queued: AtomicUsize,
}

#[derive(Debug)]
struct Running {
    game: Option<GameId>,
    cancel: Arc<AtomicBool>,
    /// An analysis: its client key if counted, and when its time limit ends.
    analysis: Option<(Option<IpAddr>, Instant)>,
    /// When the search started (for an analysis, when it may be asked to give way).
    started: Instant,
    /// Set with `cancel` when an analysis gives way to a waiting call (see
    /// [`SearchPool::reserve_analysis`]); never set for a computer move.
    gave_way: Arc<AtomicBool>,
}

/// An analysis asked to give way to a waiting call: at `at`, its search is ended.
struct GiveWay {
    at: Instant,
    cancel: Arc<AtomicBool>,
    gave_way: Arc<AtomicBool>,
}

impl GiveWay {
    fn now(self) {
        self.gave_way.store(true, Ordering::Relaxed);
        self.cancel.store(true, Ordering::Relaxed);
    }
}

/// What `Analyze` found: the search's result, and whether the search gave way to another call
/// before its limits (see [`SearchPool::reserve_analysis`]).
#[derive(Debug, Clone)]
pub struct Analysis {
    pub result: SearchResult,
    pub cut_short: bool,
}

/// A reserved search slot: see [`SearchPool::reserve`].
#[derive(Debug)]
pub struct Slot<'a> {
    permit: OwnedSemaphorePermit,
    registered: Registered<'a>,
    gave_way: Arc<AtomicBool>,
}

impl Slot<'_> {
    /// Set (with the cancel flag) once the search has given way to a waiting analysis.
    fn gave_way(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.gave_way)
    }

    /// Whether the search was cancelled already.
    #[must_use]
    pub fn cancelled(&self) -> bool {
        self.registered.cancel.load(Ordering::Relaxed)
    }

    /// Runs `search` on the blocking pool with an engine and the slot's cancel flag. If the
    /// returned future is dropped, the flag is set and the search ends at its next check (well
    /// under a millisecond); the slot stays taken until it has.
    ///
    /// # Errors
    ///
    /// [`GameError::Internal`] if the search panicked.
    pub async fn search<T, F>(self, search: F) -> Result<T, GameError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Engine, &AtomicBool) -> T + Send + 'static,
    {
        let Slot {
            permit, registered, ..
        } = self;
        let pool = registered.pool;
        let cancel = Arc::clone(&registered.cancel);
        let mut engine = lock(&pool.engines).pop().unwrap_or_default();
        engine.set_tablebase(lock(&pool.tables).clone());
        let (engine, output) = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let output = search(&mut engine, &cancel);
            (engine, output)
        })
        .await
        .map_err(|e| GameError::Internal(format!("search task: {e}")))?;
        lock(&pool.engines).push(engine);
        drop(registered);
        Ok(output)
    }
}

/// Unregisters a search and sets its cancel flag when its caller is done or goes away.
#[derive(Debug)]
struct Registered<'a> {
    pool: &'a SearchPool,
    id: u64,
    cancel: Arc<AtomicBool>,
    /// Held until the search is over, so that it counts towards its client's cap.
    _client: ClientPlace,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.cancel.store(true, Ordering::Relaxed);
        self.pool.running().remove(&self.id);
    }
}

/// A client's place among computer turns: see [`SearchPool::turn_of`].
#[derive(Debug)]
pub struct TurnPlace<'a> {
    pool: &'a SearchPool,
    key: IpAddr,
    _permit: Option<OwnedSemaphorePermit>,
}

impl Drop for TurnPlace<'_> {
    fn drop(&mut self) {
        // The permit goes back first (it is dropped after this body, so count it as back).
        let mut clients = lock(&self.pool.turn_clients);
        if let Some(places) = clients.get(&self.key) {
            // Only the map and this place's permit hold it (a waiter holds it too), and every
            // permit is back: nothing left to share.
            let ours = usize::from(self._permit.is_some());
            let back = places.available_permits() + ours;
            if Arc::strong_count(places) == 1 + ours && back >= self.pool.capacity.computer_moves {
                clients.remove(&self.key);
            }
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Only plain container operations happen under these locks.
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn stopping_error() -> GameError {
    GameError::Unavailable("the server is shutting down; retry on the next one".to_owned())
}

/// A retry delay is never below this, so that refused clients do not spin.
const MIN_RETRY: Duration = Duration::from_millis(10);

/// A running analysis gives way to a waiting call once it has searched this part of
/// [`SearchCapacity::analysis_wait`], so the waiter is served within its wait.
const GIVE_WAY_SHARE: u32 = 2;
/// ... and never before this: enough for the first iterations of any search, so that an
/// analysis that gives way still has a move to answer with.
const MIN_SEARCH_BEFORE_GIVING_WAY: Duration = Duration::from_millis(50);

/// How often a waiting analysis looks for a search to ask to give way when it has none.
const LOOK_AGAIN: Duration = Duration::from_millis(10);

impl SearchPool {
    /// A pool with `capacity` (each count at least 1).
    #[must_use]
    pub fn new(capacity: SearchCapacity) -> Arc<SearchPool> {
        let capacity = SearchCapacity {
            computer_moves: capacity.computer_moves.max(1),
            analyses: capacity.analyses.max(1),
            ..capacity
        };
        Arc::new(SearchPool {
            capacity,
            moves: Arc::new(Semaphore::new(capacity.computer_moves)),
            analyses: Arc::new(Semaphore::new(capacity.analyses)),
            engines: Mutex::default(),
            tables: Mutex::default(),
            running: Mutex::default(),
            clients: ClientPlaces::new(capacity.analyses_per_client, capacity.exempt_loopback),
            turn_clients: Mutex::default(),
            next_id: AtomicU64::new(0),
            stopping: AtomicBool::new(false),
            queued: AtomicUsize::new(0),
        })
    }

    /// The pool's capacity.
    #[must_use]
    pub fn capacity(&self) -> SearchCapacity {
        self.capacity
    }

    /// Endgame tables for every search from now on (computer moves and `Analyze`), or `None`.
    /// The engine uses them only for positions of their own rule set.
    pub fn set_endgame_tables(&self, tables: Option<Arc<Tablebase>>) {
        *lock(&self.tables) = tables;
    }

    /// The endgame tables in use, if any.
    #[must_use]
    pub fn endgame_tables(&self) -> Option<Arc<Tablebase>> {
        lock(&self.tables).clone()
    }

    /// Searches running or registered now.
    #[must_use]
    pub fn running_searches(&self) -> usize {
        self.running().len()
    }

    /// Callers waiting for a free slot now.
    #[must_use]
    pub fn queued(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }

    /// Counts a caller as queued until the returned guard is dropped (also when its wait is
    /// cancelled).
    fn queue(&self) -> impl Drop + '_ {
        struct Queued<'a>(&'a AtomicUsize);
        impl Drop for Queued<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::Relaxed);
            }
        }
        self.queued.fetch_add(1, Ordering::Relaxed);
        Queued(&self.queued)
    }

    fn running(&self) -> MutexGuard<'_, HashMap<u64, Running>> {
        lock(&self.running)
    }

    /// Whether [`SearchPool::stop`] was called.
    #[must_use]
    pub fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Relaxed)
    }

    /// Cancels every search of game `id` (the game ended).
    pub fn cancel_game(&self, id: &GameId) {
        for running in self.running().values() {
            if running.game.as_ref() == Some(id) {
                running.cancel.store(true, Ordering::Relaxed);
            }
        }
    }

    /// Cancels every search and refuses new ones (the server stops).
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::Relaxed);
        self.moves.close();
        self.analyses.close();
        for running in self.running().values() {
            running.cancel.store(true, Ordering::Relaxed);
        }
    }

    /// Waits for a free computer-move slot and registers a search for game `game`. From then
    /// on the search's cancel flag is set when the game ends or the pool stops, even before
    /// [`Slot::search`] runs: a caller that reserves first and then checks its game cannot
    /// miss the end of the game.
    ///
    /// # Errors
    ///
    /// [`GameError::Unavailable`] once the pool is stopping.
    pub async fn reserve(&self, game: GameId) -> Result<Slot<'_>, GameError> {
        if self.is_stopping() {
            return Err(stopping_error());
        }
        let queued = self.queue();
        let permit = Arc::clone(&self.moves)
            .acquire_owned()
            .await
            .map_err(|_| stopping_error())?;
        drop(queued);
        self.register(permit, Some(game), None, ClientPlace::uncounted())
    }

    /// Waits until `client` (the creator of a game whose computer is to move) has fewer than
    /// the pool's slots of computer turns waiting or running, and holds one of its places until
    /// the returned guard is dropped (after [`SearchPool::reserve`] and the search). The slots
    /// themselves are handed out in arrival order, so without this one client with many
    /// computer games would queue ahead of every other player's computer, whose clock runs
    /// meanwhile; with it, a turn waits behind at most that many searches of each client.
    /// `None` (a game without a known creator) waits for nothing.
    pub async fn turn_of(&self, client: Option<IpAddr>) -> Option<TurnPlace<'_>> {
        let key = limits::client_key(client?);
        let places = Arc::clone(
            lock(&self.turn_clients)
                .entry(key)
                .or_insert_with(|| Arc::new(Semaphore::new(self.capacity.computer_moves))),
        );
        // Closed only by `stop`: then the reserve after it refuses anyway.
        let permit = places.acquire_owned().await.ok();
        Some(TurnPlace {
            pool: self,
            key,
            _permit: permit,
        })
    }

    fn register<'a>(
        &'a self,
        permit: OwnedSemaphorePermit,
        game: Option<GameId>,
        analysis: Option<(Option<IpAddr>, Instant)>,
        place: ClientPlace,
    ) -> Result<Slot<'a>, GameError> {
        let cancel = Arc::new(AtomicBool::new(false));
        let gave_way = Arc::new(AtomicBool::new(false));
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.running().insert(
            id,
            Running {
                game,
                cancel: Arc::clone(&cancel),
                analysis,
                started: Instant::now(),
                gave_way: Arc::clone(&gave_way),
            },
        );
        let registered = Registered {
            pool: self,
            id,
            cancel,
            _client: place,
        };
        // `stop` may have run between the acquire and the insert, missing this search.
        if self.is_stopping() {
            return Err(stopping_error());
        }
        Ok(Slot {
            permit,
            registered,
            gave_way,
        })
    }

    /// Counts an Analyze call of `client` (unless exempt), or refuses it when the client is at
    /// its cap.
    fn admit_client(&self, client: Option<IpAddr>) -> Result<ClientPlace, Refused> {
        self.clients.take(client).ok_or_else(|| Refused::PerClient {
            max: self.capacity.analyses_per_client,
            // Refused, so counted: the client has an address.
            retry_after: self.soonest_end(client.map(limits::client_key)),
        })
    }

    /// How long until the soonest running analysis (of client `key` if given) reaches its time
    /// limit; the whole wait if none is running yet.
    fn soonest_end(&self, key: Option<IpAddr>) -> Duration {
        let now = Instant::now();
        self.running()
            .values()
            .filter_map(|running| running.analysis)
            .filter(|(client, _)| key.is_none() || *client == key)
            .map(|(_, ends)| ends.saturating_duration_since(now))
            .min()
            .unwrap_or(self.capacity.analysis_wait)
            .max(MIN_RETRY)
    }

    /// The longest-running analysis that has not given way yet, to end once it has searched
    /// its share of the wait ([`GIVE_WAY_SHARE`] of [`SearchCapacity::analysis_wait`], at least
    /// [`MIN_SEARCH_BEFORE_GIVING_WAY`]).
    fn oldest_analysis(&self) -> Option<GiveWay> {
        let share =
            (self.capacity.analysis_wait / GIVE_WAY_SHARE).max(MIN_SEARCH_BEFORE_GIVING_WAY);
        self.running()
            .values()
            .filter(|running| running.analysis.is_some())
            .filter(|running| !running.gave_way.load(Ordering::Relaxed))
            .min_by_key(|running| running.started)
            .map(|running| GiveWay {
                at: running.started + share,
                cancel: Arc::clone(&running.cancel),
                gave_way: Arc::clone(&running.gave_way),
            })
    }

    /// Admits an Analyze call of `client` that may search for up to `time`: counts it towards
    /// the client's cap, then waits at most [`SearchCapacity::analysis_wait`] for an analysis
    /// slot.
    ///
    /// While it waits, the analysis that has run longest is ended once it has searched half
    /// that wait, and answers with what it found ([`Analysis::cut_short`]): with few slots,
    /// one address sending long analyses back to back would otherwise hold them all, and every
    /// other caller would wait out its queue time and be refused (an outside probe's second
    /// address got 3 analyses of 11 on a 2-core server).
    ///
    /// # Errors
    ///
    /// [`AnalysisError::Refused`] when the client is at its cap or no slot came free in time;
    /// [`GameError::Unavailable`] once the pool is stopping.
    pub async fn reserve_analysis(
        &self,
        client: Option<IpAddr>,
        time: Duration,
    ) -> Result<Slot<'_>, AnalysisError> {
        self.reserve_analysis_by(client, time, None).await
    }

    /// [`SearchPool::reserve_analysis`] for a call cut at `deadline`: it waits for a slot only
    /// while an answer could still come before it, and is refused as busy (with the retry
    /// delay) after that, rather than left to its deadline (an outside probe's call queued
    /// with 0.9 s left got DEADLINE_EXCEEDED).
    async fn reserve_analysis_by(
        &self,
        client: Option<IpAddr>,
        time: Duration,
        deadline: Option<Instant>,
    ) -> Result<Slot<'_>, AnalysisError> {
        if self.is_stopping() {
            return Err(stopping_error().into());
        }
        let place = self.admit_client(client).map_err(AnalysisError::Refused)?;
        let analyses = Arc::clone(&self.analyses);
        // Room for the shortest search and the answer's way back after the slot comes.
        let wait = deadline.map_or(self.capacity.analysis_wait, |deadline| {
            let left = deadline.saturating_duration_since(Instant::now());
            self.capacity
                .analysis_wait
                .min(left.saturating_sub(ANSWER_MARGIN * 3))
        });
        let acquired = if wait.is_zero() {
            analyses.try_acquire_owned().map_err(|e| match e {
                TryAcquireError::Closed => Some(stopping_error()),
                TryAcquireError::NoPermits => None,
            })
        } else {
            let _queued = self.queue();
            let acquire = analyses.acquire_owned();
            let give_up = tokio::time::sleep(wait);
            tokio::pin!(acquire, give_up);
            // Only a call that has to wait asks another to give way: a free slot is taken first
            // (`biased`), before any search asked is ended.
            let mut give_way = self.oldest_analysis();
            loop {
                // With no search to ask (none found, or the one asked has given way and the
                // slot went to another caller) look again shortly: the slot's next holder must
                // give way too. An outside probe's call that came as the slot changed hands was
                // refused while the new holder searched on for twice its share.
                let at = give_way
                    .as_ref()
                    .map_or_else(|| Instant::now() + LOOK_AGAIN, |g| g.at);
                tokio::select! {
                    biased;
                    permit = &mut acquire => break permit.map_err(|_| Some(stopping_error())),
                    () = &mut give_up => break Err(None),
                    () = tokio::time::sleep_until(at.into()) => match give_way.take() {
                        Some(asked) => asked.now(),
                        None => give_way = self.oldest_analysis(),
                    },
                }
            }
        };
        let permit = match acquired {
            Ok(permit) => permit,
            Err(Some(stopping)) => return Err(stopping.into()),
            Err(None) => {
                // A retry is served once a running analysis has searched its share and can be
                // asked to give way, long before it reaches its own limit.
                let retry_after = match self.oldest_analysis() {
                    Some(oldest) => oldest
                        .at
                        .saturating_duration_since(Instant::now())
                        .clamp(MIN_RETRY, self.soonest_end(None)),
                    // Every running analysis has been asked to give way already: a slot comes
                    // free in moments (an outside probe was told to wait 4.75 s).
                    None if self.running().values().any(|r| r.analysis.is_some()) => {
                        MIN_SEARCH_BEFORE_GIVING_WAY
                    }
                    None => self.soonest_end(None),
                };
                return Err(AnalysisError::Refused(Refused::Busy {
                    max: self.capacity.analyses,
                    retry_after,
                }));
            }
        };
        let ends = Instant::now() + time;
        let key = place.client();
        Ok(self.register(permit, None, Some((key, ends)), place)?)
    }

    /// Searches the current position of `game` for `RulesService.Analyze` on behalf of
    /// `client`, from a cleared engine (so a node or depth limit without a time limit gives the
    /// same answer every time). The repetition rule counts every position of `game`; a game of
    /// no moves (a bare position) searches exactly as [`Engine::search`] does. `for_mistakes`
    /// lets the engine play for the opponent's mistakes ([`Engine::set_play_for_mistakes`]).
    ///
    /// A search cut short by a shutdown gives no result: a partial search looks like a
    /// complete one (same fields, smaller depth), so the caller gets
    /// [`GameError::Unavailable`] and asks the next server.
    ///
    /// # Errors
    ///
    /// [`GameError::GameOver`] if the position is over, [`GameError::Unavailable`] if the
    /// server stops before or during the search, else as [`SearchPool::reserve_analysis`].
    pub async fn analyze(
        &self,
        game: Game,
        limits: SearchLimits,
        client: Option<IpAddr>,
        for_mistakes: bool,
    ) -> Result<Analysis, AnalysisError> {
        self.analyze_by(game, limits, client, for_mistakes, None)
            .await
    }

    /// [`SearchPool::analyze`] for a call that is cut at `deadline`: the search, once it has
    /// its slot, ends in time to answer before it ([`within_deadline`]).
    ///
    /// # Errors
    ///
    /// As [`SearchPool::analyze`].
    pub async fn analyze_by(
        &self,
        game: Game,
        limits: SearchLimits,
        client: Option<IpAddr>,
        for_mistakes: bool,
        deadline: Option<std::time::Instant>,
    ) -> Result<Analysis, AnalysisError> {
        if game.is_over() {
            return Err(GameError::GameOver.into());
        }
        // The book's answer is a lookup, not a search: it takes no slot, so a hint from the
        // book answers even while every slot is busy (the request's limits do not apply).
        if let Some(result) = oanquan_ai::book_analysis(game.position()) {
            return Ok(Analysis {
                result,
                cut_short: false,
            });
        }
        let time = limits.time.unwrap_or(DEFAULT_ANALYSIS_TIME);
        let slot = self.reserve_analysis_by(client, time, deadline).await?;
        // After the wait for the slot, which took some of the time left.
        let limits = within_deadline(limits, deadline, std::time::Instant::now());
        let gave_way = slot.gave_way();
        let (result, cancelled) = slot
            .search(move |engine, cancel| {
                engine.clear();
                engine.set_play_for_mistakes(for_mistakes);
                // A depth the caller asked for holds in endgames too, where the engine would
                // otherwise lift it to solve the game (an outside probe's depth 1 searched 24).
                let threshold = engine.endgame_threshold();
                if limits.depth.is_some() {
                    engine.set_endgame_threshold(None);
                }
                let result = engine.analyze_game(&game, limits, cancel);
                engine.set_endgame_threshold(threshold);
                // The pool's engines also play the hosted games, which always may.
                engine.set_play_for_mistakes(true);
                (result, cancel.load(Ordering::Relaxed))
            })
            .await?;
        // Analyses belong to no game and their caller is still here, so only `stop` or a
        // waiting call can have set the flag; a shutdown wins.
        let cut_short = cancelled && gave_way.load(Ordering::Relaxed) && !self.is_stopping();
        if cancelled && !cut_short {
            return Err(GameError::Unavailable(
                "the server is shutting down and stopped this analysis before its limit; \
                 retry on the next one"
                    .to_owned(),
            )
            .into());
        }
        if result.best_move.is_none() {
            return Err(GameError::Internal(
                "the search found no move in a position that is not over".to_owned(),
            )
            .into());
        }
        Ok(Analysis { result, cut_short })
    }
}

/// See the module docs. Shared by the driver task and whoever reads its settings.
#[derive(Debug)]
pub struct Computer {
    pool: Arc<SearchPool>,
    move_time: Duration,
    driven: AtomicBool,
}

impl Computer {
    /// Computer players thinking `move_time` per move, searching in `pool`.
    #[must_use]
    pub fn new(pool: Arc<SearchPool>, move_time: Duration) -> Arc<Computer> {
        Arc::new(Computer {
            pool,
            move_time,
            driven: AtomicBool::new(false),
        })
    }

    /// The search pool.
    #[must_use]
    pub fn pool(&self) -> &Arc<SearchPool> {
        &self.pool
    }

    /// Thinking time per move.
    #[must_use]
    pub fn move_time(&self) -> Duration {
        self.move_time
    }
}

/// A timed computer move thinks at most this part of its remaining time (plus half the
/// increment): the clock then lasts for many more moves than a game usually has.
const REMAINING_TIME_SHARE: u32 = 30;
/// A computer's first move of a real-time game thinks at most this part of the first-move
/// limit: missing it would abort the game.
const FIRST_MOVE_SHARE: u32 = 10;
/// Left between the end of a timed search and the deadline, for the commit and a busy
/// machine; with less time than this left the computer plays its first-ordered move at once.
const DEADLINE_MARGIN: Duration = Duration::from_millis(100);
/// What each move costs the clock besides thinking (the commit, its wake-up), kept in reserve
/// for every move the computer may still have to make: a thirtieth of what is left shrinks
/// towards nothing over a long game, and without the reserve an outside probe's 3+0 games of
/// 550 plies ran the computer's clock out on these costs alone, a millisecond a move, against
/// a client that spent two or three.
const MOVE_OVERHEAD: Duration = Duration::from_millis(5);
/// Moves reserved for at most: rules may allow up to 10,000 plies, and 5 s of a clock is
/// reserve enough for any game anyone plays on one.
const MAX_MOVES_RESERVED: u32 = 1000;

/// A timed move's share of the mover's `remaining` time with `increment`, when it may have
/// `moves_left` more moves to make (this one included): a [`REMAINING_TIME_SHARE`] of what is
/// left beyond their [`MOVE_OVERHEAD`]s, plus half the increment.
fn clock_share(remaining: Duration, increment: Duration, moves_left: u32) -> Duration {
    let reserve = MOVE_OVERHEAD * moves_left.min(MAX_MOVES_RESERVED);
    remaining.saturating_sub(reserve) / REMAINING_TIME_SHARE + increment / 2
}

/// How long the computer may think about the move to play in `info` at `now`: the server's
/// `move_time`, and in a timed game no more than its share of the clock (see
/// [`REMAINING_TIME_SHARE`], [`FIRST_MOVE_SHARE`]), never closer than [`DEADLINE_MARGIN`] to
/// the deadline.
#[must_use]
pub fn think_time(move_time: Duration, info: &GameInfo, now: SystemTime) -> Duration {
    let (Some(clock), Some(reading)) = (info.clock, timing::reading(info, now)) else {
        return move_time;
    };
    let Some(deadline) = reading.deadline else {
        return move_time;
    };
    let left = deadline.duration_since(now).unwrap_or(Duration::ZERO);
    let share = if timing::is_first_move(info) {
        clock.first_move / FIRST_MOVE_SHARE
    } else {
        let increment = match info.time_control {
            TimeControl::RealTime { increment, .. } => increment,
            TimeControl::Untimed | TimeControl::Correspondence { .. } => Duration::ZERO,
        };
        // The mover's own moves until the ply limit, this one included.
        let moves_left = info
            .rules
            .max_plies
            .saturating_sub(info.position.ply())
            .div_ceil(2);
        clock_share(
            reading.remaining[info.position.to_move()],
            increment,
            moves_left,
        )
    };
    move_time
        .min(share)
        .min(left.saturating_sub(DEADLINE_MARGIN))
}

/// How long a computer turn may wait for a search slot before it plays a quick move instead:
/// in a timed game the share of the clock it would think for (as [`think_time`] without the
/// server's move time), so that a busy server never makes it lose on time or miss its first
/// move; `None` (no limit) when no clock runs.
#[must_use]
pub fn slot_wait(info: &GameInfo, now: SystemTime) -> Option<Duration> {
    let reading = timing::reading(info, now)?;
    reading.deadline?;
    Some(think_time(Duration::MAX, info, now))
}

/// Game `id` as stored, with the computer's seat and level if it is the computer's turn.
async fn computer_turn(manager: &GameManager, id: &GameId) -> Option<(GameState, Player, Level)> {
    let state = match manager.load_state(id).await {
        Ok(state) => state,
        Err(error) => {
            warn!(game_id = %id, %error, "cannot load the game for the computer's turn");
            return None;
        }
    };
    let (seat, level) = computer_to_move(state.info())?;
    Some((state, seat, level))
}

/// Levels whose move costs a few microseconds (a random move, the best immediate gain): they
/// never wait for a search slot behind other games' searches (an outside probe saw random
/// moves wait half a second behind sixteen master games).
fn needs_no_slot(level: Level) -> bool {
    matches!(level, Level::Random | Level::Greedy)
}

/// Which move [`play_without_slot`] plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chosen {
    /// The seat's own level's, for a level that [`needs_no_slot`].
    ByItsLevel,
    /// The greedy move, for a timed turn that waited its share of the clock for a slot.
    Greedy,
}

/// Plays the computer's turn in game `id` without a search slot, on the caller's thread: a
/// move that costs a few microseconds.
async fn play_without_slot(
    manager: &GameManager,
    computer: &Computer,
    id: &GameId,
    chosen: Chosen,
) {
    let Some((state, seat, level)) = computer_turn(manager, id).await else {
        return;
    };
    let position = &state.info().position;
    let ply = position.ply();
    let played = match chosen {
        Chosen::ByItsLevel if needs_no_slot(level) => level,
        Chosen::ByItsLevel | Chosen::Greedy => Level::Greedy,
    };
    let Some(mv) = oanquan_ai::choose_move(
        played,
        position,
        seed(id, ply),
        SearchLimits::default(),
        &AtomicBool::new(false),
    ) else {
        return;
    };
    if computer.pool.is_stopping() {
        return;
    }
    if chosen == Chosen::Greedy {
        info!(game_id = %id, ?seat, %level, %mv, "no search slot within the computer's share of its clock: it played the greedy move");
    }
    match manager.play_computer_move(id, mv, ply).await {
        Ok(_) => {}
        Err(GameError::GameOver | GameError::StalePly { .. } | GameError::NotYourTurn { .. }) => {}
        Err(error) => warn!(game_id = %id, %error, "cannot commit the computer's move"),
    }
}

/// A seed per game and ply: the same game replays the same way under node limits, and the
/// random levels do not repeat one pattern.
fn seed(id: &GameId, ply: u32) -> u64 {
    // FNV-1a: stable across runs and platforms, unlike `DefaultHasher`.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in id.as_str().bytes().chain(ply.to_le_bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// Starts the task that plays `computer`'s turns in `manager`'s games until `shutdown` turns
/// true (or its sender goes away); then it stops the search pool and waits for the turns in
/// progress, which end at once. It listens to the manager's commits and resumes the games where
/// the computer is to move first (and again whenever it lagged behind the commits). Does
/// nothing if a driver was already started for this [`Computer`].
pub fn spawn_driver(
    manager: Arc<GameManager>,
    computer: Arc<Computer>,
    mut shutdown: watch::Receiver<bool>,
) -> JoinHandle<()> {
    let already_driven = computer.driven.swap(true, Ordering::Relaxed);
    // Subscribed before the resume lists the games, so no commit falls in between.
    let mut commits = manager.subscribe_commits();
    tokio::spawn(async move {
        if already_driven {
            return;
        }
        let mut turns = JoinSet::new();
        match resume(&manager, &computer, &mut turns).await {
            Ok(0) => {}
            Ok(count) => info!(count, "resuming computer turns"),
            Err(error) => warn!(%error, "cannot list the games to resume computer turns"),
        }
        loop {
            let commit = tokio::select! {
                commit = commits.recv() => commit,
                Some(_) = turns.join_next(), if !turns.is_empty() => continue,
                _ = shutdown.wait_for(|stopping| *stopping) => break,
            };
            match commit {
                Ok(info) => {
                    if info.status.is_over() {
                        computer.pool.cancel_game(&info.id);
                    } else if computer_to_move(&info).is_some() {
                        turns.spawn(play_turn(
                            Arc::clone(&manager),
                            Arc::clone(&computer),
                            info.id.clone(),
                        ));
                    }
                }
                // Commits were missed: the store knows which games wait for the computer.
                Err(RecvError::Lagged(missed)) => {
                    warn!(
                        missed,
                        "the computer player lagged behind the commits; looking again"
                    );
                    if let Err(error) = resume(&manager, &computer, &mut turns).await {
                        warn!(%error, "cannot list the games to resume computer turns");
                    }
                }
                Err(RecvError::Closed) => break,
            }
        }
        computer.pool.stop();
        while turns.join_next().await.is_some() {}
        debug!("computer driver stopped");
    })
}

/// Starts a turn in every active game where the computer is to move; returns how many.
async fn resume(
    manager: &Arc<GameManager>,
    computer: &Arc<Computer>,
    turns: &mut JoinSet<()>,
) -> Result<usize, GameError> {
    let mut count = 0;
    let mut cursor: Option<String> = None;
    loop {
        let page = manager
            .list_games(GameFilter::Active, MAX_PAGE_SIZE, cursor.as_deref())
            .await?;
        for info in &page.games {
            if computer_to_move(info).is_some() {
                turns.spawn(play_turn(
                    Arc::clone(manager),
                    Arc::clone(computer),
                    info.id.clone(),
                ));
                count += 1;
            }
        }
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return Ok(count),
        }
    }
}

/// Plays the computer's move in game `id`, if it is still the computer's turn.
async fn play_turn(manager: Arc<GameManager>, computer: Arc<Computer>, id: GameId) {
    // The creator's share of the queue first (its game may have ended meanwhile: the load
    // after the slot sees it).
    let (creator, wait, cheap) = match manager.load_state(&id).await {
        Ok(state) => (
            state.creator(),
            slot_wait(state.info(), crate::service_clock::now()),
            computer_to_move(state.info()).is_some_and(|(_, level)| needs_no_slot(level)),
        ),
        Err(error) => {
            warn!(game_id = %id, %error, "cannot load the game for the computer's turn");
            return;
        }
    };
    if cheap {
        return play_without_slot(&manager, &computer, &id, Chosen::ByItsLevel).await;
    }
    let waiting = async {
        let place = computer.pool.turn_of(creator).await;
        // Reserved before loading: a game that ends after the load cancels this search.
        let slot = computer.pool.reserve(id.clone()).await;
        (place, slot)
    };
    let waited = match wait {
        Some(wait) => tokio::time::timeout(wait, waiting).await,
        None => Ok(waiting.await),
    };
    let (_place, slot) = match waited {
        Ok((place, Ok(slot))) => (place, slot),
        Ok((_, Err(_))) => return,
        Err(_) => return play_without_slot(&manager, &computer, &id, Chosen::Greedy).await,
    };
    let Some((state, seat, level)) = computer_turn(&manager, &id).await else {
        return;
    };
    // Measured after the slot and the load: the time they took is the computer's too.
    let limits = SearchLimits::time(think_time(
        computer.move_time,
        state.info(),
        crate::service_clock::now(),
    ));
    let game = state.into_engine();
    let ply = game.position().ply();
    let seed = seed(&id, ply);
    let searched = slot
        .search(move |engine, cancel| {
            let mv = engine.choose_move_in_game(level, &game, seed, limits, cancel);
            (mv, cancel.load(Ordering::Relaxed))
        })
        .await;
    let mv = match searched {
        Ok((Some(mv), false)) => mv,
        // Cancelled: the game ended or the server is stopping.
        Ok((_, true)) => return,
        Ok((None, false)) => {
            warn!(game_id = %id, "the computer found no move in a game that is not over");
            return;
        }
        Err(error) => {
            warn!(game_id = %id, %error, "the computer's search failed");
            return;
        }
    };
    if computer.pool.is_stopping() {
        return;
    }
    match manager.play_computer_move(&id, mv, ply).await {
        Ok(_) => debug!(game_id = %id, ?seat, %level, %mv, "computer played"),
        // The game moved on meanwhile (ended, or another turn task got there first).
        Err(GameError::GameOver | GameError::StalePly { .. } | GameError::NotYourTurn { .. }) => {}
        Err(error) => warn!(game_id = %id, %error, "cannot commit the computer's move"),
    }
}

#[cfg(test)]
mod tests {
    use oanquan_ai::Level;
    use oanquan_rules::{Player, Position};

    use super::*;
    use crate::model::GameInfo;

    /// An endgame with few points on the board: the engine lifts a depth limit there to solve
    /// the game, but not one an analysis asks for (an outside probe's depth 1 searched 24).
    #[tokio::test]
    async fn an_analysis_keeps_its_depth_limit_in_an_endgame() {
        let setup: oanquan_rules::Setup = "5,0,1,0,2,0,0,1,0,4,1,0 41:15 2 11".parse().unwrap();
        let endgame = Position::from_setup(setup, oanquan_rules::Preset::Standard.rules()).unwrap();
        let pool = SearchPool::new(capacity(1, 1, 0));
        for depth in [1, 2, 5] {
            let limits = SearchLimits::time(Duration::from_secs(3)).with_depth(depth);
            let analysis = pool
                .analyze(Game::from_position(endgame), limits, None, true)
                .await
                .unwrap();
            assert!(
                analysis.result.depth <= depth,
                "{depth}: {:?}",
                analysis.result
            );
        }
        // Without one, the endgame is still solved.
        let solved = pool
            .analyze(
                Game::from_position(endgame),
                SearchLimits::time(Duration::from_secs(3)),
                None,
                true,
            )
            .await
            .unwrap();
        assert!(solved.result.depth > 5, "{:?}", solved.result);
    }

    #[test]
    fn an_analysis_ends_before_its_calls_deadline_by_a_margin() {
        let now = std::time::Instant::now();
        let ms = Duration::from_millis;
        let five = SearchLimits::time(ms(5000)).with_nodes(7);
        let at = |left: Duration| within_deadline(five, Some(now + left), now);
        assert_eq!(within_deadline(five, None, now), five);
        // A tenth of the time left, at least 20 ms; the node limit stays.
        assert_eq!(at(ms(1000)).time, Some(ms(900)));
        assert_eq!(at(ms(1000)).nodes, Some(7));
        assert_eq!(at(ms(100)).time, Some(ms(80)));
        // A deadline past, or too near, still lets the search find a move.
        assert_eq!(at(ms(10)).time, Some(ms(1)));
        assert_eq!(
            within_deadline(five, Some(now), now + ms(50)).time,
            Some(ms(1))
        );
        // A time limit shorter than the room is kept; none gets the room.
        assert_eq!(at(ms(60_000)).time, Some(ms(5000)));
        assert_eq!(
            within_deadline(SearchLimits::NONE, Some(now + ms(1000)), now).time,
            Some(ms(900))
        );
    }

    #[test]
    fn one_address_cannot_hold_every_slot_and_queue_by_default() {
        assert_eq!(default_analyses_per_client(1), 1);
        assert_eq!(default_analyses_per_client(2), 1);
        assert_eq!(default_analyses_per_client(3), 2);
        assert_eq!(default_analyses_per_client(4096), 2);
    }

    #[test]
    fn analysis_limits_are_checked() {
        assert_eq!(
            analysis_limits(0, None, None),
            Ok(SearchLimits::time(DEFAULT_ANALYSIS_TIME))
        );
        assert_eq!(
            analysis_limits(5000, Some(10), Some(3)),
            Ok(SearchLimits::time(Duration::from_secs(5))
                .with_nodes(10)
                .with_depth(3))
        );
        for (bad, field) in [
            (analysis_limits(5001, None, None), "time_limit_ms"),
            (analysis_limits(10, Some(0), None), "node_limit"),
            (analysis_limits(10, None, Some(0)), "depth_limit"),
            (
                analysis_limits(10, None, Some(MAX_DEPTH + 1)),
                "depth_limit",
            ),
        ] {
            match bad {
                Err(GameError::InvalidArgument { field: f, .. }) => assert_eq!(f, field),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn seeds_differ_by_game_and_ply() {
        let a = GameId::parse("abc").unwrap();
        let b = GameId::parse("abd").unwrap();
        assert_eq!(seed(&a, 3), seed(&a, 3));
        assert_ne!(seed(&a, 3), seed(&a, 4));
        assert_ne!(seed(&a, 3), seed(&b, 3));
    }

    fn capacity(computer_moves: usize, analyses: usize, per_client: usize) -> SearchCapacity {
        SearchCapacity {
            computer_moves,
            analyses,
            analyses_per_client: per_client,
            analysis_wait: Duration::from_millis(20),
            exempt_loopback: true,
        }
    }

    fn start() -> Position {
        Position::new(oanquan_rules::Preset::Standard.rules()).unwrap()
    }

    /// A position of the standard game the opening book does not hold (its answers take no
    /// slot): the start, then the first legal move until the book has no answer.
    fn past_the_book() -> Position {
        let mut position = start();
        while oanquan_ai::book_analysis(&position).is_some() {
            let first = *position.legal_moves().iter().next().unwrap();
            position = position.play(first).unwrap().0;
        }
        assert!(!position.is_over());
        position
    }

    /// One client's computer turns take at most the pool's slots of the queue at once; another
    /// client's turn does not wait behind the rest of them.
    #[tokio::test]
    async fn a_client_s_computer_turns_hold_at_most_the_slots_of_the_queue() {
        use futures::FutureExt as _;
        let pool = SearchPool::new(capacity(2, 1, 0));
        let (a, b) = (ip("203.0.113.7"), ip("198.51.100.9"));
        let first = pool.turn_of(a).await.expect("a place");
        let second = pool.turn_of(a).await.expect("a place");
        // A third turn of the same client waits; another client's does not.
        let mut third = Box::pin(pool.turn_of(a));
        assert!((&mut third).now_or_never().is_none(), "waits for a place");
        let other = pool
            .turn_of(b)
            .now_or_never()
            .expect("not behind a")
            .expect("a place");
        assert!(
            pool.turn_of(None)
                .now_or_never()
                .expect("no creator")
                .is_none()
        );
        drop(first);
        let third = third.await.expect("a place once one is back");
        drop((second, third, other));
        assert!(
            lock(&pool.turn_clients).is_empty(),
            "nothing kept for clients gone"
        );
    }

    fn ip(text: &str) -> Option<IpAddr> {
        Some(text.parse().unwrap())
    }

    #[tokio::test]
    async fn analyses_and_computer_moves_probe_the_pool_s_endgame_tables() {
        let cancel = AtomicBool::new(false);
        let (tables, _) =
            Tablebase::generate(oanquan_rules::Preset::Standard.rules(), 4, 1, &cancel).unwrap();
        let tables = Arc::new(tables);
        let proved = (0..)
            .filter_map(|seed| tables.sample(seed, true))
            .find(|p| p.legal_moves().len() > 1)
            .unwrap();
        let limits = SearchLimits::nodes(1000);
        let pool = SearchPool::new(capacity(1, 1, 0));
        let plain = pool
            .analyze(Game::from_position(proved), limits, None, true)
            .await
            .unwrap();
        assert!(!plain.result.tablebase);
        pool.set_endgame_tables(Some(Arc::clone(&tables)));
        let analysis = pool
            .analyze(Game::from_position(proved), limits, None, true)
            .await
            .unwrap();
        assert!(
            analysis.result.tablebase && analysis.result.exact,
            "{proved:?}"
        );
        let game = GameId::parse("abc").unwrap();
        let slot = pool.reserve(game).await.unwrap();
        let has_tables = slot
            .search(|engine, _| engine.tablebase().is_some())
            .await
            .unwrap();
        assert!(has_tables);
        pool.set_endgame_tables(None);
        assert!(pool.endgame_tables().is_none());
        assert!(
            !pool
                .analyze(Game::from_position(proved), limits, None, true)
                .await
                .unwrap()
                .result
                .tablebase
        );
    }

    #[tokio::test]
    async fn callers_waiting_for_a_slot_are_counted_until_served_or_gone() {
        let pool = SearchPool::new(capacity(1, 1, 0));
        let game = GameId::parse("abc").unwrap();
        let held = pool.reserve(game.clone()).await.unwrap();
        assert_eq!((pool.running_searches(), pool.queued()), (1, 0));
        let mut waiting = Box::pin(pool.reserve(game.clone()));
        assert!(futures::poll!(waiting.as_mut()).is_pending());
        assert_eq!(pool.queued(), 1);
        // A waiter that gives up leaves the queue.
        let mut gone = Box::pin(pool.reserve(game));
        assert!(futures::poll!(gone.as_mut()).is_pending());
        assert_eq!(pool.queued(), 2);
        drop(gone);
        assert_eq!(pool.queued(), 1);
        drop(held);
        let served = waiting.await.unwrap();
        assert_eq!((pool.running_searches(), pool.queued()), (1, 0));
        drop(served);
        assert_eq!(pool.running_searches(), 0);
    }

    #[tokio::test]
    async fn a_dropped_search_is_cancelled_and_frees_its_slot() {
        let pool = SearchPool::new(capacity(1, 1, 0));
        let long = SearchLimits::time(Duration::from_secs(60));
        let search = pool.analyze(Game::from_position(past_the_book()), long, None, true);
        // Dropped after a moment: the slot must come back quickly.
        let _ = tokio::time::timeout(Duration::from_millis(50), search).await;
        let quick = SearchLimits::nodes(1000);
        let analysis = async {
            loop {
                // The cancelled search may still hold the slot for a moment.
                match pool
                    .analyze(Game::from_position(past_the_book()), quick, None, true)
                    .await
                {
                    Err(AnalysisError::Refused(Refused::Busy { .. })) => {}
                    other => return other,
                }
            }
        };
        let result = tokio::time::timeout(Duration::from_secs(5), analysis)
            .await
            .expect("the cancelled search freed its slot")
            .unwrap();
        assert!(result.result.best_move.is_some());
        pool.stop();
        assert!(matches!(
            pool.analyze(Game::from_position(past_the_book()), quick, None, true)
                .await,
            Err(AnalysisError::Failed(GameError::Unavailable(_)))
        ));
    }

    #[tokio::test]
    async fn a_long_analysis_gives_way_to_a_waiting_one_and_answers_with_what_it_found() {
        let pool = Arc::new(SearchPool::new(SearchCapacity {
            analysis_wait: Duration::from_millis(500),
            ..capacity(1, 1, 1)
        }));
        let long = SearchLimits::time(Duration::from_secs(60));
        let hog = tokio::spawn({
            let pool = Arc::clone(&pool);
            async move {
                pool.analyze(
                    Game::from_position(past_the_book()),
                    long,
                    ip("10.0.0.1"),
                    true,
                )
                .await
            }
        });
        while pool.running_searches() == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let asked = Instant::now();
        let quick = SearchLimits::nodes(1000);
        let other = pool
            .analyze(
                Game::from_position(past_the_book()),
                quick,
                ip("10.0.0.2"),
                true,
            )
            .await
            .expect("the waiting call is served within its wait");
        assert!(!other.cut_short);
        assert!(
            asked.elapsed() < Duration::from_millis(500),
            "{:?}",
            asked.elapsed()
        );
        let hogged = tokio::time::timeout(Duration::from_secs(5), hog)
            .await
            .expect("the long analysis ended")
            .unwrap()
            .expect("and answered");
        assert!(hogged.cut_short);
        assert!(hogged.result.best_move.is_some() && hogged.result.depth > 0);
        assert!(
            hogged.result.time < Duration::from_secs(5),
            "{:?}",
            hogged.result.time
        );
        // Alone, an analysis runs to its limit.
        let alone = pool
            .analyze(
                Game::from_position(past_the_book()),
                SearchLimits::time(Duration::from_millis(600)),
                ip("10.0.0.1"),
                true,
            )
            .await
            .unwrap();
        assert!(!alone.cut_short);
    }

    #[tokio::test]
    async fn a_call_that_comes_as_the_slot_changes_hands_is_served_too() {
        let pool = Arc::new(SearchPool::new(SearchCapacity {
            analysis_wait: Duration::from_millis(500),
            ..capacity(1, 1, 0)
        }));
        let long = SearchLimits::time(Duration::from_secs(60));
        let analyze = |client: &'static str| {
            let pool = Arc::clone(&pool);
            tokio::spawn(async move {
                pool.analyze(Game::from_position(past_the_book()), long, ip(client), true)
                    .await
            })
        };
        let first = analyze("10.0.0.1");
        while pool.running_searches() == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let began = Instant::now();
        // The second asks the first to give way at 250 ms and takes the slot; the third comes
        // just before that, asks the first too, and must then ask the second.
        let second = analyze("10.0.0.2");
        tokio::time::sleep(Duration::from_millis(230)).await;
        let third = analyze("10.0.0.3");
        for (which, call) in [("first", first), ("second", second)] {
            let answer = tokio::time::timeout(Duration::from_secs(5), call)
                .await
                .unwrap_or_else(|_| panic!("the {which} never answered"))
                .unwrap()
                .unwrap();
            assert!(answer.cut_short, "the {which} gave way");
        }
        // Past the third's wait, it has not been refused: it holds the slot, searching.
        tokio::time::sleep_until((began + Duration::from_millis(900)).into()).await;
        assert!(!third.is_finished(), "the third was refused");
        pool.stop();
        let stopped = third.await.unwrap();
        assert!(
            matches!(
                &stopped,
                Err(AnalysisError::Failed(GameError::Unavailable(_)))
            ),
            "{stopped:?}"
        );
    }

    #[tokio::test]
    async fn computer_moves_do_not_wait_for_analyses() {
        let pool = SearchPool::new(capacity(1, 1, 0));
        let analysis = pool
            .reserve_analysis(None, Duration::from_secs(5))
            .await
            .unwrap();
        // The analysis slot is taken: another analysis is refused after the short wait...
        let refused = pool
            .reserve_analysis(None, Duration::from_secs(5))
            .await
            .unwrap_err();
        match refused {
            AnalysisError::Refused(Refused::Busy { max, retry_after }) => {
                assert_eq!(max, 1);
                // A retry is served once the running analysis has searched its share (50 ms
                // at this wait of 20 ms) and gives way to it, not at its own 5 s limit.
                assert!(retry_after >= MIN_RETRY, "{retry_after:?}");
                assert!(retry_after <= Duration::from_millis(50), "{retry_after:?}");
            }
            other => panic!("{other:?}"),
        }
        // Past its share, the holder is asked to give way (it holds a reservation and does not
        // search, so it does not): the next refusal says to retry in moments, not at its limit.
        tokio::time::sleep(Duration::from_millis(60)).await;
        match pool.reserve_analysis(None, Duration::from_secs(5)).await {
            Err(AnalysisError::Refused(Refused::Busy { retry_after, .. })) => {
                assert!(retry_after <= Duration::from_millis(50), "{retry_after:?}");
            }
            other => panic!("{other:?}"),
        }
        // ...while a computer move gets its own slot at once.
        let game = GameId::parse("abc").unwrap();
        let turn = tokio::time::timeout(Duration::from_secs(5), pool.reserve(game))
            .await
            .expect("a computer move never waits behind analyses")
            .unwrap();
        assert_eq!(pool.running_searches(), 2);
        drop((analysis, turn));
        assert_eq!(pool.running_searches(), 0);
    }

    #[tokio::test]
    async fn analyses_are_capped_per_client_address() {
        let pool = SearchPool::new(capacity(1, 8, 2));
        let time = Duration::from_secs(3);
        let a = ip("192.0.2.1");
        let first = pool.reserve_analysis(a, time).await.unwrap();
        let second = pool.reserve_analysis(a, time).await.unwrap();
        let refused = pool.reserve_analysis(a, time).await.unwrap_err();
        let AnalysisError::Refused(refused @ Refused::PerClient { max: 2, .. }) = refused else {
            panic!("{refused:?}");
        };
        assert!(refused.retry_after() > Duration::from_secs(2));
        assert!(refused.to_string().contains("your address"), "{refused}");
        // The same /64 is the same client; another address and loopback are not limited.
        let v6 = pool
            .reserve_analysis(ip("2001:db8::1"), time)
            .await
            .unwrap();
        let v6_again = pool
            .reserve_analysis(ip("2001:db8::2"), time)
            .await
            .unwrap();
        assert!(
            pool.reserve_analysis(ip("2001:db8::3"), time)
                .await
                .is_err()
        );
        let other = pool.reserve_analysis(ip("192.0.2.2"), time).await.unwrap();
        let mut locals = Vec::new();
        for _ in 0..3 {
            locals.push(pool.reserve_analysis(ip("127.0.0.1"), time).await.unwrap());
        }
        // A finished analysis gives its place back.
        drop(first);
        let third = pool.reserve_analysis(a, time).await.unwrap();
        drop((second, third, v6, v6_again, other, locals));
        assert!(pool.clients.is_empty());
        // Without the exemption loopback counts like any address.
        let strict = SearchPool::new(SearchCapacity {
            exempt_loopback: false,
            ..capacity(1, 8, 1)
        });
        let held = strict
            .reserve_analysis(ip("127.0.0.1"), time)
            .await
            .unwrap();
        let refused = strict.reserve_analysis(ip("127.0.0.1"), time).await;
        let Err(AnalysisError::Refused(refused @ Refused::PerClient { max: 1, .. })) = refused
        else {
            panic!("{refused:?}");
        };
        assert!(
            refused
                .to_string()
                .contains("already has 1 analysis running"),
            "{refused}"
        );
        drop(held);
    }

    fn computer_first(level: Level) -> crate::manager::NewGame {
        crate::manager::NewGame {
            rules: oanquan_rules::Preset::Standard.rules(),
            preset: None,
            start: None,
            // The computer takes the first seat, which moves first.
            seat: Some(Player::Second),
            display_name: "Lan".to_owned(),
            computer: Some(level),
            time_control: crate::clock::TimeControl::Untimed,
            account: None,
            rated: false,
        }
    }

    fn timed_against_computer(time_control: TimeControl) -> crate::manager::NewGame {
        crate::manager::NewGame {
            time_control,
            ..computer_first(Level::Master)
        }
    }

    /// A 3+0 or 1+0 game of 550 plies (rules that never take a mandarin), each computer move
    /// costing 2 ms besides its thinking: the clock lasts, where a plain thirtieth of what is
    /// left ran out.
    #[test]
    fn a_long_game_leaves_the_computer_time_for_every_move() {
        let overhead = Duration::from_millis(2);
        let run = |clock: Duration, reserve_for: Option<u32>| -> Option<u32> {
            let mut remaining = clock;
            for ply in (0..550u32).step_by(2) {
                let moves_left = reserve_for.map_or(0, |max_plies| (max_plies - ply).div_ceil(2));
                let think = clock_share(remaining, Duration::ZERO, moves_left)
                    .min(remaining.saturating_sub(DEADLINE_MARGIN));
                remaining = remaining.checked_sub(think + overhead)?;
            }
            Some(550)
        };
        for clock in [Duration::from_secs(3), Duration::from_secs(1)] {
            assert_eq!(run(clock, Some(10_000)), Some(550), "{clock:?}");
            assert_eq!(run(clock, Some(600)), Some(550), "{clock:?}");
            assert_eq!(run(clock, None), None, "{clock:?}: without the reserve");
        }
        // A standard game (300 plies) keeps nearly all of a blitz clock to think with.
        let share = clock_share(Duration::from_secs(180), Duration::ZERO, 150);
        assert_eq!(share, Duration::from_millis(5_975));
    }

    #[tokio::test]
    async fn a_timed_computer_thinks_a_share_of_its_clock_and_stops_short_of_the_deadline() {
        let manager = GameManager::new(
            Arc::new(crate::memory::MemoryStore::new(
                crate::memory::MemoryLimits::default(),
            )),
            crate::hub::Hub::new(16),
            crate::manager::ManagerLimits::default(),
        );
        let ms = Duration::from_millis;
        let secs = Duration::from_secs;
        let three_plus_two = TimeControl::real_time(secs(180), secs(2)).unwrap();
        let info = manager
            .create_game(timed_against_computer(three_plus_two))
            .await
            .unwrap()
            .game;
        let start = info.turn_started.unwrap();
        // First move: a tenth of the 30 s first-move limit, within the server's move time.
        assert_eq!(think_time(ms(300), &info, start), ms(300));
        assert_eq!(think_time(secs(60), &info, start), secs(3));
        assert_eq!(think_time(secs(60), &info, start + secs(28)), ms(1900));
        assert_eq!(
            think_time(secs(60), &info, start + ms(29_950)),
            Duration::ZERO
        );
        // Past the first moves the clock runs: a 30th of what is left beyond 5 ms for each of
        // the 150 moves the ply limit allows, plus half the increment.
        let mut running = info.clone();
        running.move_count = 2;
        assert_eq!(think_time(ms(300), &running, start), ms(300));
        assert_eq!(think_time(secs(60), &running, start), ms(6_975));
        assert_eq!(think_time(secs(60), &running, start + secs(150)), ms(1_975));
        assert_eq!(think_time(secs(60), &running, start + ms(179_000)), ms(900));
        assert_eq!(
            think_time(secs(60), &running, start + ms(179_950)),
            Duration::ZERO
        );
        assert_eq!(
            think_time(secs(60), &running, start + secs(200)),
            Duration::ZERO
        );
        // Correspondence: a day per move leaves the server's move time alone.
        let daily = TimeControl::correspondence(secs(86_400)).unwrap();
        let info = manager
            .create_game(timed_against_computer(daily))
            .await
            .unwrap()
            .game;
        assert_eq!(
            think_time(ms(300), &info, info.turn_started.unwrap()),
            ms(300)
        );
        // Untimed: the move time.
        let info = manager
            .create_game(timed_against_computer(TimeControl::Untimed))
            .await
            .unwrap()
            .game;
        assert_eq!(think_time(ms(300), &info, SystemTime::now()), ms(300));
    }

    /// A manager in memory whose real-time games give `first_move` for each first move.
    fn manager_with_first_move(first_move: Duration) -> Arc<GameManager> {
        Arc::new(GameManager::new(
            Arc::new(crate::memory::MemoryStore::new(
                crate::memory::MemoryLimits::default(),
            )),
            crate::hub::Hub::new(1024),
            crate::manager::ManagerLimits {
                time: crate::clock::TimePolicy {
                    first_move,
                    ..crate::clock::TimePolicy::default()
                },
                ..crate::manager::ManagerLimits::default()
            },
        ))
    }

    /// Against an opponent who answers at once, in a 1+0 game with a half-second first-move
    /// limit, a computer set to think 2 s a move (so that without its clock it would abort its
    /// first move and flag the next) finishes the game without losing on time.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_computer_in_a_one_second_game_does_not_lose_on_time() {
        let manager = manager_with_first_move(Duration::from_millis(500));
        let computer = Computer::new(SearchPool::new(capacity(1, 1, 0)), Duration::from_secs(2));
        let (stop_tx, stop_rx) = watch::channel(false);
        let keeper =
            crate::timekeeper::spawn_timekeeper(Arc::clone(&manager), false, stop_rx.clone());
        let mut commits = manager.subscribe_commits();
        let driver = spawn_driver(Arc::clone(&manager), Arc::clone(&computer), stop_rx);
        let one_second = TimeControl::real_time(Duration::from_secs(1), Duration::ZERO).unwrap();
        let human = manager
            .create_game(timed_against_computer(one_second))
            .await
            .unwrap();
        let id = human.game.id.clone();
        let over = tokio::time::timeout(Duration::from_secs(30), async {
            let mut info = human.game.clone();
            loop {
                if info.status.is_over() {
                    return info;
                }
                if info.position.to_move() == human.seat {
                    let mv = info.position.legal_moves()[0];
                    match manager
                        .play_move(&id, &human.token, mv, Some(info.position.ply()))
                        .await
                    {
                        Ok((_, next)) => info = next,
                        Err(GameError::GameOver) => info = manager.get_game(&id).await.unwrap(),
                        Err(error) => panic!("{error}"),
                    }
                    continue;
                }
                info = match commits.recv().await {
                    Ok(commit) if commit.id == id => (*commit).clone(),
                    Ok(_) => continue,
                    Err(RecvError::Lagged(_)) => manager.get_game(&id).await.unwrap(),
                    Err(RecvError::Closed) => panic!("the hub went away"),
                };
            }
        })
        .await
        .expect("the game ended");
        let result = over.result.unwrap();
        assert_ne!(
            result.termination,
            crate::model::Termination::Timeout,
            "{result:?} after {} moves",
            over.move_count
        );
        assert_ne!(
            result.termination,
            crate::model::Termination::Aborted,
            "{result:?}"
        );
        assert!(over.move_count > 10, "{} moves", over.move_count);
        stop_tx.send(true).unwrap();
        driver.await.unwrap();
        keeper.await.unwrap();
    }

    /// With every computer slot taken, a timed computer turn waits its share of the clock and
    /// then plays the greedy move instead of missing its first move (or flagging later).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_computer_with_no_free_slot_plays_a_quick_move_before_its_deadline() {
        let manager = manager_with_first_move(Duration::from_millis(1_000));
        let pool = SearchPool::new(capacity(1, 1, 0));
        // Another game's search holds the only slot for the whole test.
        let _taken = pool
            .reserve(GameId::parse("someone-else").unwrap())
            .await
            .unwrap();
        let computer = Computer::new(Arc::clone(&pool), Duration::from_millis(300));
        let (stop_tx, stop_rx) = watch::channel(false);
        let mut commits = manager.subscribe_commits();
        let driver = spawn_driver(Arc::clone(&manager), Arc::clone(&computer), stop_rx);
        let one_minute = TimeControl::real_time(Duration::from_secs(60), Duration::ZERO).unwrap();
        let created = manager
            .create_game(timed_against_computer(one_minute))
            .await
            .unwrap();
        let info = &created.game;
        // A tenth of the first-move limit.
        assert_eq!(
            slot_wait(info, info.turn_started.unwrap()),
            Some(Duration::from_millis(100))
        );
        tokio::time::timeout(
            Duration::from_millis(900),
            first_move(&manager, &mut commits, &info.id),
        )
        .await
        .expect("the computer waited for a slot past its first-move limit");
        let played = manager.get_game(&info.id).await.unwrap();
        assert!(!played.status.is_over(), "{:?}", played.result);
        // The greedy move, as the greedy level would have played it.
        let expected = oanquan_ai::choose_move(
            Level::Greedy,
            &info.position,
            seed(&info.id, 0),
            SearchLimits::default(),
            &AtomicBool::new(false),
        );
        let moves = manager.list_moves(&info.id).await.unwrap().1;
        assert_eq!(moves.get(0).map(|record| record.mv), expected);
        // Untimed games have no clock to protect: they wait.
        let untimed = manager
            .create_game(computer_first(Level::Master))
            .await
            .unwrap();
        assert_eq!(slot_wait(&untimed.game, SystemTime::now()), None);
        stop_tx.send(true).unwrap();
        driver.await.unwrap();
    }

    /// Waits until game `id` has a move, as `manager` commits it.
    async fn first_move(
        manager: &GameManager,
        commits: &mut tokio::sync::broadcast::Receiver<Arc<GameInfo>>,
        id: &GameId,
    ) {
        loop {
            match commits.recv().await {
                Ok(info) if info.id == *id && info.position.ply() > 0 => return,
                Ok(_) => {}
                // Commits this receiver missed: the store has the answer.
                Err(RecvError::Lagged(_)) => {
                    if manager.get_game(id).await.unwrap().position.ply() > 0 {
                        return;
                    }
                }
                Err(RecvError::Closed) => panic!("the hub went away"),
            }
        }
    }

    /// The random and greedy levels play at once even when every search slot is taken by
    /// other games' searches: their moves need none (an outside probe saw random moves wait
    /// half a second behind sixteen master games).
    #[tokio::test]
    async fn the_levels_that_need_no_search_do_not_wait_for_a_slot() {
        let store: Arc<dyn crate::store::GameStore> = Arc::new(crate::memory::MemoryStore::new(
            crate::memory::MemoryLimits::default(),
        ));
        let manager = Arc::new(GameManager::new(
            store,
            crate::hub::Hub::new(64),
            crate::manager::ManagerLimits::default(),
        ));
        let computer = Computer::new(
            SearchPool::new(capacity(1, 1, 1)),
            Duration::from_millis(10),
        );
        // The one slot, held for the whole test.
        let held = computer
            .pool()
            .reserve(GameId::parse("someone-else").unwrap())
            .await
            .unwrap();
        let (stop_tx, stop_rx) = watch::channel(false);
        let mut commits = manager.subscribe_commits();
        let driver = spawn_driver(Arc::clone(&manager), Arc::clone(&computer), stop_rx);
        for level in [Level::Random, Level::Greedy] {
            let game = manager.create_game(computer_first(level)).await.unwrap();
            tokio::time::timeout(
                Duration::from_secs(5),
                first_move(&manager, &mut commits, &game.game.id),
            )
            .await
            .unwrap_or_else(|_| panic!("{level} waited for the held slot"));
        }
        drop(held);
        stop_tx.send(true).unwrap();
        driver.await.unwrap();
    }

    /// The driver learns of turns only from the commit feed; when it lags behind the feed
    /// (its commit is lost), it must find the game in the store instead of never playing.
    #[tokio::test]
    async fn a_driver_that_lags_behind_the_commits_still_plays_every_turn() {
        let store: Arc<dyn crate::store::GameStore> = Arc::new(crate::memory::MemoryStore::new(
            crate::memory::MemoryLimits::default(),
        ));
        // One commit of buffer: two unread commits make the driver lag.
        let hub = crate::hub::Hub::new(1);
        let manager = Arc::new(GameManager::new(
            Arc::clone(&store),
            Arc::clone(&hub),
            crate::manager::ManagerLimits::default(),
        ));
        // The same store behind another hub: its commits never reach the driver's feed.
        let elsewhere = GameManager::new(
            Arc::clone(&store),
            crate::hub::Hub::new(16),
            crate::manager::ManagerLimits::default(),
        );
        let computer = Computer::new(
            SearchPool::new(capacity(2, 1, 1)),
            Duration::from_millis(10),
        );
        let (stop_tx, stop_rx) = watch::channel(false);
        let mut commits = manager.subscribe_commits();

        // Played from the driver's first look at the store; once it is, the driver is
        // listening to the feed.
        let first = manager
            .create_game(computer_first(Level::Random))
            .await
            .unwrap();
        let driver = spawn_driver(Arc::clone(&manager), Arc::clone(&computer), stop_rx);
        first_move(&manager, &mut commits, &first.game.id).await;

        let second = elsewhere
            .create_game(computer_first(Level::Random))
            .await
            .unwrap();
        let stale = Arc::new(manager.get_game(&first.game.id).await.unwrap());
        hub.publish_commit(Arc::clone(&stale));
        hub.publish_commit(stale);
        tokio::time::timeout(
            Duration::from_secs(10),
            first_move(&manager, &mut commits, &second.game.id),
        )
        .await
        .expect("the lagging driver never played the second game");

        stop_tx.send(true).unwrap();
        driver.await.unwrap();
    }
}
