//! The computer opponent and analysis searches, on top of [`oanquan_ai`].
//!
//! * [`SearchPool`] runs every search (computer moves and `RulesService.Analyze`) on tokio's
//!   blocking pool, at most `max_searches` at once (a semaphore, by default one per core), so
//!   searches never occupy the async workers that answer people's calls. Each search has its own
//!   cancel flag: set when its caller goes away (a drop guard), when its game ends
//!   ([`SearchPool::cancel_game`]) and when the server stops ([`SearchPool::stop`]).
//! * [`Computer`] plays the computer's seats. The manager calls [`Computer::on_commit`] after
//!   every commit; when the computer is to move, the game's id goes to the driver task
//!   ([`spawn_driver`]), which searches and commits the move through
//!   [`GameManager::play_computer_move`] — the same validated path, events and traces as a
//!   person's `PlayMove`. On start the driver resumes every active game where the computer is to
//!   move (games reloaded from SQLite after a restart).
//!
//! A computer move is never committed from a cancelled search: after a shutdown the turn is
//! simply played again by the next server.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use oanquan_ai::{Engine, Level, MAX_DEPTH, SearchLimits, SearchResult};
use oanquan_rules::{Player, Position};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, watch};
use tokio::task::{JoinHandle, JoinSet};
use tracing::{debug, info, warn};

use super::error::GameError;
use super::manager::GameManager;
use super::model::{GameFilter, GameId, GameInfo, GameStatus, PlayerKind};

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

/// The display name of a computer seat: `Computer (club)`.
#[must_use]
pub fn computer_name(level: Level) -> String {
    format!("Computer ({level})")
}

/// The computer's seat and level if the game is active and the computer is to move.
#[must_use]
pub fn computer_to_move(info: &GameInfo) -> Option<(Player, Level)> {
    if info.status != GameStatus::Active || info.position.is_over() {
        return None;
    }
    let seat = info.position.to_move();
    match info.seats[seat].as_ref()?.kind {
        PlayerKind::Computer { level } => Some((seat, level)),
        PlayerKind::Human => None,
    }
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

/// See the module docs.
#[derive(Debug)]
pub struct SearchPool {
    max_searches: usize,
    permits: Arc<Semaphore>,
    /// Engines not in use (their transposition tables are reused; at most `max_searches`).
    engines: Mutex<Vec<Engine>>,
    running: Mutex<HashMap<u64, Running>>,
    next_id: AtomicU64,
    stopping: AtomicBool,
}

#[derive(Debug)]
struct Running {
    game: Option<GameId>,
    cancel: Arc<AtomicBool>,
}

/// A reserved search slot: see [`SearchPool::reserve`].
#[derive(Debug)]
pub struct Slot<'a> {
    permit: OwnedSemaphorePermit,
    registered: Registered<'a>,
}

impl Slot<'_> {
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
        let Slot { permit, registered } = self;
        let pool = registered.pool;
        let cancel = Arc::clone(&registered.cancel);
        let mut engine = lock(&pool.engines).pop().unwrap_or_default();
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
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.cancel.store(true, Ordering::Relaxed);
        self.pool.running().remove(&self.id);
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

impl SearchPool {
    /// A pool running at most `max_searches` (at least 1) searches at once.
    #[must_use]
    pub fn new(max_searches: usize) -> Arc<SearchPool> {
        let max_searches = max_searches.max(1);
        Arc::new(SearchPool {
            max_searches,
            permits: Arc::new(Semaphore::new(max_searches)),
            engines: Mutex::default(),
            running: Mutex::default(),
            next_id: AtomicU64::new(0),
            stopping: AtomicBool::new(false),
        })
    }

    /// The cap on simultaneous searches.
    #[must_use]
    pub fn max_searches(&self) -> usize {
        self.max_searches
    }

    /// Searches running or registered now.
    #[must_use]
    pub fn running_searches(&self) -> usize {
        self.running().len()
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
        self.permits.close();
        for running in self.running().values() {
            running.cancel.store(true, Ordering::Relaxed);
        }
    }

    /// Waits for a free search slot and registers a search for game `game` if any. From then
    /// on the search's cancel flag is set when the game ends or the pool stops, even before
    /// [`Slot::search`] runs: a caller that reserves first and then checks its game cannot
    /// miss the end of the game.
    ///
    /// # Errors
    ///
    /// [`GameError::Unavailable`] once the pool is stopping.
    pub async fn reserve(&self, game: Option<GameId>) -> Result<Slot<'_>, GameError> {
        if self.is_stopping() {
            return Err(stopping_error());
        }
        let permit = Arc::clone(&self.permits)
            .acquire_owned()
            .await
            .map_err(|_| stopping_error())?;
        let cancel = Arc::new(AtomicBool::new(false));
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.running().insert(
            id,
            Running {
                game,
                cancel: Arc::clone(&cancel),
            },
        );
        let registered = Registered {
            pool: self,
            id,
            cancel,
        };
        if self.is_stopping() {
            return Err(stopping_error());
        }
        Ok(Slot { permit, registered })
    }

    /// [`SearchPool::reserve`], then [`Slot::search`].
    ///
    /// # Errors
    ///
    /// As those two.
    pub async fn run<T, F>(&self, game: Option<GameId>, search: F) -> Result<T, GameError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Engine, &AtomicBool) -> T + Send + 'static,
    {
        self.reserve(game).await?.search(search).await
    }

    /// Searches `position` for `RulesService.Analyze`, from a cleared engine (so a node or depth
    /// limit without a time limit gives the same answer every time).
    ///
    /// # Errors
    ///
    /// [`GameError::GameOver`] if the position is over, else as [`SearchPool::run`].
    pub async fn analyze(
        &self,
        position: Position,
        limits: SearchLimits,
    ) -> Result<SearchResult, GameError> {
        if position.is_over() {
            return Err(GameError::GameOver);
        }
        let result = self
            .run(None, move |engine, cancel| {
                engine.clear();
                engine.search(&position, limits, cancel)
            })
            .await?;
        if result.best_move.is_none() {
            return Err(GameError::Internal(
                "the search found no move in a position that is not over".to_owned(),
            ));
        }
        Ok(result)
    }
}

/// See the module docs. Shared by the manager (which calls [`Computer::on_commit`]) and the
/// driver task.
#[derive(Debug)]
pub struct Computer {
    pool: Arc<SearchPool>,
    move_time: Duration,
    turns: mpsc::UnboundedSender<GameId>,
    receiver: Mutex<Option<mpsc::UnboundedReceiver<GameId>>>,
    driven: AtomicBool,
}

impl Computer {
    /// Computer players thinking `move_time` per move, searching in `pool`.
    #[must_use]
    pub fn new(pool: Arc<SearchPool>, move_time: Duration) -> Arc<Computer> {
        let (turns, receiver) = mpsc::unbounded_channel();
        Arc::new(Computer {
            pool,
            move_time,
            turns,
            receiver: Mutex::new(Some(receiver)),
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

    /// After every commit: cancels the searches of a game that ended, and hands a game where
    /// the computer is now to move to the driver.
    pub(super) fn on_commit(&self, info: &GameInfo) {
        if info.status.is_over() {
            self.pool.cancel_game(&info.id);
        } else if self.driven.load(Ordering::Relaxed) && computer_to_move(info).is_some() {
            let _ = self.turns.send(info.id.clone());
        }
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

/// Starts the task that plays the computer's turns of `manager`'s games until `shutdown` turns
/// true (or its sender goes away); then it stops the search pool and waits for the turns in
/// progress, which end at once. Resumes the games where the computer is to move first. Does
/// nothing if a driver was already started for this manager's [`Computer`].
pub fn spawn_driver(
    manager: Arc<GameManager>,
    mut shutdown: watch::Receiver<bool>,
) -> JoinHandle<()> {
    let computer = Arc::clone(manager.computer());
    let receiver = lock(&computer.receiver).take();
    computer.driven.store(true, Ordering::Relaxed);
    tokio::spawn(async move {
        let Some(mut receiver) = receiver else {
            return;
        };
        let mut turns = JoinSet::new();
        match resume(&manager, &computer).await {
            Ok(0) => {}
            Ok(count) => info!(count, "resuming computer turns"),
            Err(error) => warn!(%error, "cannot list the games to resume computer turns"),
        }
        loop {
            tokio::select! {
                Some(id) = receiver.recv() => {
                    turns.spawn(play_turn(Arc::clone(&manager), id));
                }
                Some(_) = turns.join_next(), if !turns.is_empty() => {}
                _ = shutdown.wait_for(|stopping| *stopping) => break,
            }
        }
        computer.pool.stop();
        while turns.join_next().await.is_some() {}
        debug!("computer driver stopped");
    })
}

/// Queues every active game where the computer is to move; returns how many.
async fn resume(manager: &GameManager, computer: &Computer) -> Result<usize, GameError> {
    let mut count = 0;
    let mut cursor: Option<String> = None;
    loop {
        let page = manager
            .list_games(
                GameFilter::Active,
                super::manager::MAX_PAGE_SIZE,
                cursor.as_deref(),
            )
            .await?;
        for info in &page.games {
            if computer_to_move(info).is_some() {
                let _ = computer.turns.send(info.id.clone());
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
async fn play_turn(manager: Arc<GameManager>, id: GameId) {
    let computer = Arc::clone(manager.computer());
    // Reserved before loading: a game that ends after the load cancels this search.
    let Ok(slot) = computer.pool.reserve(Some(id.clone())).await else {
        return;
    };
    let state = match manager.load_state(&id).await {
        Ok(state) => state,
        Err(error) => {
            warn!(game_id = %id, %error, "cannot load the game for the computer's turn");
            return;
        }
    };
    let Some((seat, level)) = computer_to_move(&state.info) else {
        return;
    };
    let game = state.engine;
    let ply = game.position().ply();
    let seed = seed(&id, ply);
    let limits = SearchLimits::time(computer.move_time);
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
    use super::*;

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

    #[tokio::test]
    async fn a_dropped_search_is_cancelled_and_frees_its_slot() {
        let pool = SearchPool::new(1);
        let position = Position::new(oanquan_rules::Preset::Standard.rules()).unwrap();
        let long = SearchLimits::time(Duration::from_secs(60));
        let search = pool.analyze(position, long);
        // Dropped after a moment: the slot must come back quickly.
        let _ = tokio::time::timeout(Duration::from_millis(50), search).await;
        let quick = SearchLimits::nodes(1000);
        let result = tokio::time::timeout(Duration::from_secs(5), pool.analyze(position, quick))
            .await
            .expect("the cancelled search freed its slot")
            .unwrap();
        assert!(result.best_move.is_some());
        pool.stop();
        assert!(matches!(
            pool.analyze(position, quick).await,
            Err(GameError::Unavailable(_))
        ));
    }
}
