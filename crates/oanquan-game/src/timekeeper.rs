//! The timekeeper: applies each game's [`deadline`](crate::clock::deadline) when it passes,
//! whether or not anyone is connected (a flag falls, a first move not made aborts the game, a
//! rematch window closes). A client of the [`GameManager`] like any caller: it learns deadlines
//! from the hub's feed of commits, keeps them in a heap, and sleeps until the next one.
//!
//! A deadline that a move beat is harmless: the manager re-decides on the current state and
//! finds nothing due. The feed can lag under a burst of commits; the keeper then reads every
//! active game again, so no deadline is lost. A deadline the store could not apply (it was
//! unavailable) goes back into the heap and is tried again, less and less often, until it is
//! applied or no longer due: a flag that falls while the database is down still ends the game
//! once it is back.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::StreamExt as _;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

use crate::error::GameError;
use crate::manager::{GameManager, MAX_PAGE_SIZE};
use crate::model::{GameFilter, GameId, GameInfo};
use crate::timing::deadline;

/// Finished games read at start for open rematch windows, newest first: windows are minutes
/// long, so the games that still have one are among the newest.
const FINISHED_SCAN: usize = 1_000;

/// How long after lagging behind the commit feed the keeper reads every game again.
const RESCAN_DELAY: Duration = Duration::from_millis(50);

/// What woke the keeper.
enum Woke {
    Commit(Result<Arc<GameInfo>, RecvError>),
    Due,
    Rescan,
    /// A deadline's application failed for the `n`th time in a row, and may succeed later.
    Failed(GameId, u32),
}

/// How long the keeper waits before trying again a deadline that failed (the store
/// unavailable): `first` after the first failure, twice as long after each further one, at
/// most `most`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Backoff {
    pub(crate) first: Duration,
    pub(crate) most: Duration,
}

impl Backoff {
    /// 1 s, 2 s, 4 s, … 30 s.
    const DEFAULT: Backoff = Backoff {
        first: Duration::from_secs(1),
        most: Duration::from_secs(30),
    };

    /// The wait after `failures` (at least 1) failures in a row.
    fn after(self, failures: u32) -> Duration {
        let factor = 1_u32
            .checked_shl(failures.saturating_sub(1))
            .unwrap_or(u32::MAX);
        self.first.saturating_mul(factor).min(self.most)
    }
}

#[derive(Default)]
struct Deadlines {
    heap: BinaryHeap<Reverse<(SystemTime, GameId)>>,
    current: HashMap<GameId, SystemTime>,
    /// For the current deadlines that are retries: how many times in a row they failed.
    failures: HashMap<GameId, u32>,
}

impl Deadlines {
    /// The game's deadline as `info` says (a commit or a listing: fresher than any retry).
    fn set(&mut self, info: &GameInfo) {
        self.failures.remove(&info.id);
        match deadline(info) {
            Some(deadline) => self.insert(info.id.clone(), deadline.at),
            None => {
                self.current.remove(&info.id);
            }
        }
    }

    fn insert(&mut self, id: GameId, at: SystemTime) {
        if self.current.insert(id.clone(), at) != Some(at) {
            self.heap.push(Reverse((at, id)));
        }
    }

    /// The next live deadline, dropping entries that were replaced.
    fn next(&mut self) -> Option<SystemTime> {
        while let Some(Reverse((at, id))) = self.heap.peek() {
            if self.current.get(id) == Some(at) {
                return Some(*at);
            }
            self.heap.pop();
        }
        None
    }

    /// Puts back a deadline of game `id` whose application failed `failures` times in a row,
    /// due at `at`; `false` (and nothing changes) if the game already has a deadline again: a
    /// commit since told the keeper the game's state, which decides.
    fn retry(&mut self, id: GameId, failures: u32, at: SystemTime) -> bool {
        if self.current.contains_key(&id) {
            return false;
        }
        self.insert(id.clone(), at);
        self.failures.insert(id, failures);
        true
    }

    /// Every live deadline at or before `now`, removed, with how many times in a row it
    /// failed before (0 for a first try).
    fn due(&mut self, now: SystemTime) -> Vec<(GameId, u32)> {
        let mut due = Vec::new();
        while let Some(at) = self.next() {
            if at > now {
                break;
            }
            if let Some(Reverse((_, id))) = self.heap.pop() {
                self.current.remove(&id);
                let failures = self.failures.remove(&id).unwrap_or(0);
                due.push((id, failures));
            }
        }
        due
    }

    fn len(&self) -> usize {
        self.current.len()
    }
}

/// Reads the deadlines of every active game, and of the newest finished ones (rematch windows).
async fn scan(manager: &GameManager, deadlines: &mut Deadlines) -> Result<(), GameError> {
    for (filter, most) in [
        (GameFilter::Active, usize::MAX),
        (GameFilter::Finished, FINISHED_SCAN),
    ] {
        let mut cursor: Option<String> = None;
        let mut seen = 0;
        loop {
            let page = manager
                .list_games(filter, MAX_PAGE_SIZE, cursor.as_deref())
                .await?;
            seen += page.games.len();
            for game in &page.games {
                deadlines.set(game);
            }
            match page.next_cursor {
                Some(next) if seen < most => cursor = Some(next),
                _ => break,
            }
        }
    }
    Ok(())
}

/// Gives every active game its running turn back from now (see
/// [`GameManager::resume_clock`]): a timed game's clock, an untimed game's abandonment time.
/// Returns how many were resumed. A server calls it once at start, before it takes requests:
/// a move or a claim arriving earlier would be charged the outage.
///
/// # Errors
///
/// Store failures while listing.
pub async fn resume_clocks(manager: &GameManager) -> Result<usize, GameError> {
    let mut ids = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let page = manager
            .list_games(GameFilter::Active, MAX_PAGE_SIZE, cursor.as_deref())
            .await?;
        ids.extend(page.games.iter().map(|g| g.id.clone()));
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    // Many at once, so that a store's group commit takes them together: one after the other,
    // 3,000 idle untimed games held a start for 1.3 s (a commit each).
    let outcomes: Vec<bool> = futures::stream::iter(ids)
        .map(|id| async move {
            match manager.resume_clock(&id).await {
                Ok(resumed) => resumed,
                Err(error) => {
                    warn!(game_id = %id, %error, "cannot resume a game's turn");
                    false
                }
            }
        })
        .buffer_unordered(RESUMING_AT_ONCE)
        .collect()
        .await;
    manager.turns_resumed();
    Ok(outcomes.into_iter().filter(|&resumed| resumed).count())
}

/// Games [`resume_clocks`] resumes at once.
const RESUMING_AT_ONCE: usize = 64;

/// Runs the timekeeper until `stop` turns `true`. With `resume`, first restarts the running
/// turn of every active game (a server calls it so at start: the time it was down is not
/// charged to anyone).
pub fn spawn_timekeeper(
    manager: Arc<GameManager>,
    resume: bool,
    stop: watch::Receiver<bool>,
) -> JoinHandle<()> {
    spawn_with_backoff(manager, resume, stop, Backoff::DEFAULT)
}

/// [`spawn_timekeeper`], retrying failed deadlines after `backoff` (tests shorten it).
pub(crate) fn spawn_with_backoff(
    manager: Arc<GameManager>,
    resume: bool,
    mut stop: watch::Receiver<bool>,
    backoff: Backoff,
) -> JoinHandle<()> {
    // Subscribed before anything is read, so no commit falls in between.
    let mut commits = manager.subscribe_commits();
    // The deadlines that failed come back here to be tried again. The keeper holds a sender
    // itself, so the channel never closes while it runs.
    let (failed_tx, mut failed) = mpsc::unbounded_channel::<(GameId, u32)>();
    tokio::spawn(async move {
        if resume {
            match resume_clocks(&manager).await {
                Ok(0) => {}
                Ok(count) => info!(count, "resumed the turns of active games"),
                Err(error) => warn!(%error, "cannot list the games to resume their clocks"),
            }
        }
        let mut deadlines = Deadlines::default();
        if let Err(error) = scan(&manager, &mut deadlines).await {
            warn!(%error, "cannot list the games to keep their time");
        }
        debug!(count = deadlines.len(), "timekeeper started");
        let mut rescan_at: Option<tokio::time::Instant> = None;
        loop {
            let sleep = match deadlines.next() {
                Some(at) => {
                    let wait = at
                        .duration_since(crate::service_clock::now())
                        .unwrap_or(Duration::ZERO);
                    tokio::time::sleep(wait)
                }
                // Nothing to wait for: sleep long, a commit wakes us.
                None => tokio::time::sleep(Duration::from_secs(3600)),
            };
            let rescan_wait = rescan_at.map(tokio::time::sleep_until);
            let woke = tokio::select! {
                _ = stop.wait_for(|stopping| *stopping) => break,
                commit = commits.recv() => Woke::Commit(commit),
                Some((id, failures)) = failed.recv() => Woke::Failed(id, failures),
                () = sleep => Woke::Due,
                Some(()) = async move { match rescan_wait { Some(wait) => { wait.await; Some(()) } None => None } } => Woke::Rescan,
            };
            match woke {
                Woke::Commit(Ok(info)) => deadlines.set(&info),
                Woke::Commit(Err(RecvError::Lagged(missed))) => {
                    // Read every game again, once the burst that made us lag is over: reading
                    // at each lag would fall behind further. Deadlines already known still fire
                    // meanwhile (a stale one does nothing).
                    debug!(missed, "timekeeper lagged; reading the games again shortly");
                    rescan_at.get_or_insert_with(|| tokio::time::Instant::now() + RESCAN_DELAY);
                }
                Woke::Commit(Err(RecvError::Closed)) => break,
                Woke::Rescan => {
                    rescan_at = None;
                    let mut fresh = Deadlines::default();
                    match scan(&manager, &mut fresh).await {
                        Ok(()) => deadlines = fresh,
                        Err(error) => warn!(%error, "cannot list the games to keep their time"),
                    }
                }
                Woke::Due => {
                    for (id, failures) in deadlines.due(crate::service_clock::now()) {
                        // Each in a task of its own: a slow store does not delay the others.
                        tokio::spawn(apply(Arc::clone(&manager), id, failures, failed_tx.clone()));
                    }
                }
                Woke::Failed(id, failures) => {
                    let wait = backoff.after(failures);
                    if deadlines.retry(id.clone(), failures, crate::service_clock::now() + wait) {
                        debug!(game_id = %id, failures, ?wait, "deadline to be tried again");
                    }
                }
            }
        }
    })
}

/// Whether a deadline that failed with `error` may succeed if tried again: the store was
/// unavailable, full, or failed otherwise. Not when the game is gone, damaged, or anything
/// else the game's state decides: trying again would fail the same way forever.
fn retryable(error: &GameError) -> bool {
    matches!(
        error,
        GameError::Unavailable(_) | GameError::LimitExceeded(_) | GameError::Internal(_)
    )
}

/// Applies game `id`'s deadline, which failed `failures` times in a row before. On a failure
/// that may pass, sends the game back to the keeper through `failed`, to be tried again later.
async fn apply(
    manager: Arc<GameManager>,
    id: GameId,
    failures: u32,
    failed: mpsc::UnboundedSender<(GameId, u32)>,
) {
    match manager.apply_deadline(&id).await {
        Ok(Some(kind)) if failures > 0 => {
            warn!(game_id = %id, ?kind, failures, "applied a game's deadline after failing");
        }
        Ok(Some(_)) => {}
        Ok(None) if failures > 0 => {
            debug!(game_id = %id, failures, "a failed deadline is no longer due");
        }
        Ok(None) => {}
        Err(error) if retryable(&error) => {
            let failures = failures.saturating_add(1);
            if failures == 1 {
                warn!(game_id = %id, %error, "cannot apply a game's deadline; retrying until it can");
            } else {
                debug!(game_id = %id, %error, failures, "cannot apply a game's deadline yet");
            }
            // Closed only once the keeper stopped: nothing is kept any more.
            let _ = failed.send((id, failures));
        }
        Err(GameError::GameNotFound(_) | GameError::GameDamaged(_)) => {}
        Err(error) => warn!(game_id = %id, %error, "cannot apply a game's deadline"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replaced_deadline_is_skipped_and_due_ones_come_out_in_order() {
        let t = |s| SystemTime::UNIX_EPOCH + Duration::from_secs(s);
        let (a, b) = (GameId::parse("a").unwrap(), GameId::parse("b").unwrap());
        let mut deadlines = Deadlines::default();
        deadlines.insert(a.clone(), t(10));
        deadlines.insert(b.clone(), t(5));
        deadlines.insert(a.clone(), t(20));
        assert_eq!(deadlines.next(), Some(t(5)));
        assert_eq!(deadlines.due(t(15)), vec![(b, 0)]);
        assert_eq!(deadlines.next(), Some(t(20)));
        assert!(deadlines.due(t(19)).is_empty());
        assert_eq!(deadlines.due(t(20)), vec![(a, 0)]);
        assert_eq!(deadlines.next(), None);
    }

    #[test]
    fn a_failed_deadline_comes_back_with_its_failures_unless_the_game_has_a_deadline_again() {
        let t = |s| SystemTime::UNIX_EPOCH + Duration::from_secs(s);
        let (a, b) = (GameId::parse("a").unwrap(), GameId::parse("b").unwrap());
        let mut deadlines = Deadlines::default();
        deadlines.insert(a.clone(), t(10));
        assert_eq!(deadlines.due(t(10)), vec![(a.clone(), 0)]);
        // It failed: back, due later, with its count.
        assert!(deadlines.retry(a.clone(), 1, t(11)));
        assert!(deadlines.due(t(10)).is_empty());
        assert_eq!(deadlines.due(t(11)), vec![(a.clone(), 1)]);
        assert!(deadlines.retry(a.clone(), 2, t(13)));
        assert_eq!(deadlines.due(t(13)), vec![(a.clone(), 2)]);
        // A commit came in between: the game's own deadline stands, the retry is dropped.
        deadlines.insert(b.clone(), t(100));
        assert!(!deadlines.retry(b.clone(), 1, t(14)));
        assert_eq!(deadlines.next(), Some(t(100)));
        assert_eq!(deadlines.due(t(100)), vec![(b, 0)]);
        assert_eq!(deadlines.next(), None);
    }

    #[test]
    fn retries_back_off_to_a_cap_and_only_for_failures_that_may_pass() {
        let backoff = Backoff::DEFAULT;
        let waits: Vec<u64> = (1..=7).map(|n| backoff.after(n).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 30, 30]);
        assert_eq!(backoff.after(u32::MAX), Duration::from_secs(30));
        assert!(retryable(&GameError::Unavailable("down".to_owned())));
        assert!(retryable(&GameError::Internal("broken".to_owned())));
        let gone = GameError::GameNotFound(GameId::parse("a").unwrap());
        for error in [gone, GameError::NotDue, GameError::GameOver] {
            assert!(!retryable(&error), "{error}");
        }
    }
}
