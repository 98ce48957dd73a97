//! The timekeeper: applies each game's [`deadline`](crate::clock::deadline) when it passes,
//! whether or not anyone is connected (a flag falls, a first move not made aborts the game, a
//! rematch window closes). A client of the [`GameManager`] like any caller: it learns deadlines
//! from the hub's feed of commits, keeps them in a heap, and sleeps until the next one.
//!
//! A deadline that a move beat is harmless: the manager re-decides on the current state and
//! finds nothing due. The feed can lag under a burst of commits; the keeper then reads every
//! active game again, so no deadline is lost.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::broadcast::error::RecvError;
use tokio::sync::watch;
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
}

/// When a failed deadline (the store unavailable) is tried again.
const RETRY: Duration = Duration::from_secs(1);

#[derive(Default)]
struct Deadlines {
    heap: BinaryHeap<Reverse<(SystemTime, GameId)>>,
    current: HashMap<GameId, SystemTime>,
}

impl Deadlines {
    fn set(&mut self, info: &GameInfo) {
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

    /// Every live deadline at or before `now`, removed.
    fn due(&mut self, now: SystemTime) -> Vec<GameId> {
        let mut due = Vec::new();
        while let Some(at) = self.next() {
            if at > now {
                break;
            }
            if let Some(Reverse((_, id))) = self.heap.pop() {
                self.current.remove(&id);
                due.push(id);
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

/// Gives every active timed game its running turn back from now (see
/// [`GameManager::resume_clock`]). Returns how many were resumed. A server calls it once at
/// start, before it takes requests: a move arriving earlier would be charged the outage.
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
        ids.extend(
            page.games
                .iter()
                .filter(|g| g.clock.is_some())
                .map(|g| g.id.clone()),
        );
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    let mut resumed = 0;
    for id in ids {
        match manager.resume_clock(&id).await {
            Ok(true) => resumed += 1,
            Ok(false) => {}
            Err(error) => warn!(game_id = %id, %error, "cannot resume a game's clock"),
        }
    }
    Ok(resumed)
}

/// Runs the timekeeper until `stop` turns `true`. With `resume`, first restarts the running
/// turn of every active timed game (a server calls it so at start: the time it was down is not
/// charged to anyone).
pub fn spawn_timekeeper(
    manager: Arc<GameManager>,
    resume: bool,
    mut stop: watch::Receiver<bool>,
) -> JoinHandle<()> {
    // Subscribed before anything is read, so no commit falls in between.
    let mut commits = manager.subscribe_commits();
    tokio::spawn(async move {
        if resume {
            match resume_clocks(&manager).await {
                Ok(0) => {}
                Ok(count) => info!(count, "resumed the clocks of timed games"),
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
                        .duration_since(SystemTime::now())
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
                    for id in deadlines.due(SystemTime::now()) {
                        // Each in a task of its own: a slow store does not delay the others.
                        tokio::spawn(apply(Arc::clone(&manager), id));
                    }
                }
            }
        }
    })
}

async fn apply(manager: Arc<GameManager>, id: GameId) {
    match manager.apply_deadline(&id).await {
        Ok(_) => {}
        Err(GameError::GameNotFound(_) | GameError::GameDamaged(_)) => {}
        Err(error) => {
            warn!(game_id = %id, %error, "cannot apply a game's deadline; retrying");
            tokio::time::sleep(RETRY).await;
            if let Err(error) = manager.apply_deadline(&id).await {
                warn!(game_id = %id, %error, "cannot apply a game's deadline");
            }
        }
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
        assert_eq!(deadlines.due(t(15)), vec![b]);
        assert_eq!(deadlines.next(), Some(t(20)));
        assert!(deadlines.due(t(19)).is_empty());
        assert_eq!(deadlines.due(t(20)), vec![a]);
        assert_eq!(deadlines.next(), None);
    }
}
