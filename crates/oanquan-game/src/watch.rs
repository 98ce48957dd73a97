//! Resumable event streams: exactly the missed events, in order, without duplicates, or a fresh
//! snapshot when the log no longer has them. Never a silent gap.
//!
//! A watch subscribes to the hub *before* reading the store, so nothing committed in between is
//! lost; anything seen twice is dropped by sequence number. Whenever the next expected sequence
//! does not arrive through the hub (lag, out-of-order publishing, another node), the watch reads
//! the store's log instead.

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;

use futures::FutureExt as _;
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::RecvError;

use crate::error::GameError;
use crate::hub::WatcherGuard;
use crate::model::{GameEvent, GameEventKind, GameId, GameInfo, LobbyEvent, RematchAction};
use crate::store::{GameStore, Since, StoreFuture};

/// An event with a sequence number.
pub trait Sequenced {
    /// Its sequence number.
    fn sequence(&self) -> u64;
    /// Whether it is the last event of its stream.
    fn is_final(&self) -> bool;
}

impl Sequenced for GameEvent {
    fn sequence(&self) -> u64 {
        self.sequence
    }
    fn is_final(&self) -> bool {
        match &self.kind {
            GameEventKind::GameOver { rematch_until, .. } => rematch_until.is_none(),
            GameEventKind::Rematch { action, .. } => !matches!(action, RematchAction::Offered),
            _ => false,
        }
    }
}

impl Sequenced for LobbyEvent {
    fn sequence(&self) -> u64 {
        self.sequence
    }
    fn is_final(&self) -> bool {
        false
    }
}

/// Where a watch reads its log and snapshots.
pub trait Feed: Send + Sync + 'static {
    /// The events.
    type Event: Sequenced + fmt::Debug + Send + Sync + 'static;
    /// The snapshot.
    type Snapshot: fmt::Debug + Send + 'static;
    /// Events after `after`.
    fn since(&self, after: u64) -> StoreFuture<'_, Since<Self::Event>>;
    /// The current state, the sequence it reflects, and whether no event can follow.
    fn snapshot(&self) -> StoreFuture<'_, (Self::Snapshot, u64, bool)>;
}

/// A game's feed.
#[derive(Debug)]
pub struct GameFeed {
    pub(crate) store: Arc<dyn GameStore>,
    pub(crate) id: GameId,
}

impl Feed for GameFeed {
    type Event = GameEvent;
    type Snapshot = GameInfo;
    fn since(&self, after: u64) -> StoreFuture<'_, Since<GameEvent>> {
        self.store.game_events_since(&self.id, after)
    }
    fn snapshot(&self) -> StoreFuture<'_, (GameInfo, u64, bool)> {
        self.store
            .info(&self.id)
            .map(|info| {
                info.map(|info| {
                    let (sequence, over) = (info.sequence, info.log_closed());
                    (info, sequence, over)
                })
            })
            .boxed()
    }
}

/// The lobby's feed.
#[derive(Debug)]
pub struct LobbyFeed {
    pub(crate) store: Arc<dyn GameStore>,
    pub(crate) snapshot_limit: usize,
}

impl Feed for LobbyFeed {
    type Event = LobbyEvent;
    type Snapshot = Vec<GameInfo>;
    fn since(&self, after: u64) -> StoreFuture<'_, Since<LobbyEvent>> {
        self.store.lobby_events_since(after)
    }
    fn snapshot(&self) -> StoreFuture<'_, (Vec<GameInfo>, u64, bool)> {
        self.store
            .lobby_snapshot(self.snapshot_limit)
            .map(|r| r.map(|(games, sequence)| (games, sequence, false)))
            .boxed()
    }
}

/// One item of a watch.
#[derive(Debug)]
pub enum WatchItem<F: Feed> {
    /// Replaces all state the client holds; reflects events up to `sequence`.
    Snapshot {
        /// The state.
        snapshot: F::Snapshot,
        /// The last event it includes.
        sequence: u64,
    },
    /// A real event.
    Event(Arc<F::Event>),
}

/// A resumable stream of a [`Feed`]'s events. See the module docs.
pub struct Watch<F: Feed> {
    feed: F,
    rx: broadcast::Receiver<Arc<F::Event>>,
    last: u64,
    queue: VecDeque<WatchItem<F>>,
    /// Set before reading the store and cleared after, so that a `next` cancelled mid-read
    /// (e.g. by a heartbeat in a `select!`) reads again instead of waiting for the hub.
    stale: bool,
    finished: bool,
    /// Times the hub dropped events for this watch because it fell behind (for metrics).
    lagged: u64,
    // Declared last: dropped after the receiver.
    _guard: Option<WatcherGuard>,
}

impl<F: Feed> fmt::Debug for Watch<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Watch")
            .field("last", &self.last)
            .field("queued", &self.queue.len())
            .field("finished", &self.finished)
            .finish_non_exhaustive()
    }
}

impl<F: Feed> Watch<F> {
    /// Starts a watch: a snapshot without `after` (or with 0), else the events after it.
    /// `rx` must have been subscribed before this call reads the store.
    ///
    /// # Errors
    ///
    /// [`GameError::SequenceAhead`] if `after` is beyond the last event; store failures.
    pub(crate) async fn start(
        feed: F,
        rx: broadcast::Receiver<Arc<F::Event>>,
        guard: Option<WatcherGuard>,
        after: Option<u64>,
    ) -> Result<Watch<F>, GameError> {
        let mut watch = Watch {
            feed,
            rx,
            last: 0,
            queue: VecDeque::new(),
            stale: false,
            finished: false,
            lagged: 0,
            _guard: guard,
        };
        match after {
            None | Some(0) => watch.resync().await?,
            Some(after) => {
                watch.last = after;
                match watch.feed.since(after).await.map_err(GameError::from)? {
                    Since::Ahead { last } => {
                        return Err(GameError::SequenceAhead {
                            requested: after,
                            last,
                        });
                    }
                    since => watch.absorb(since).await?,
                }
            }
        }
        Ok(watch)
    }

    /// The sequence of the last event delivered (or reflected by the last snapshot): what a
    /// client passes as `after_sequence` to resume.
    #[must_use]
    pub fn last_sequence(&self) -> u64 {
        self.last
    }

    /// Whether the watch has nothing to deliver yet: it resumed with every event up to now
    /// already delivered, so its stream would be silent until the next event.
    #[must_use]
    pub fn is_up_to_date(&self) -> bool {
        self.queue.is_empty() && !self.finished && !self.stale
    }

    /// Ends the watch after what it has queued: for a client that wants nothing more of a
    /// game whose end it has already been sent (a resumed watch of a finished game).
    pub fn close(&mut self) {
        self.finished = true;
    }

    /// How many times this watch fell behind the hub's buffer and had to catch up from the
    /// store.
    #[must_use]
    pub fn times_lagged(&self) -> u64 {
        self.lagged
    }

    /// The next item; `None` once the stream is complete (the game is over and its last event
    /// was delivered). Cancel-safe.
    ///
    /// # Errors
    ///
    /// Store failures; [`GameError::Unavailable`] if the hub went away.
    pub async fn next(&mut self) -> Result<Option<WatchItem<F>>, GameError> {
        loop {
            if let Some(item) = self.queue.pop_front() {
                return Ok(Some(item));
            }
            if self.finished {
                return Ok(None);
            }
            if self.stale {
                self.catch_up().await?;
                continue;
            }
            match self.rx.recv().await {
                Ok(event) => {
                    let sequence = event.sequence();
                    if sequence <= self.last {
                        // Already delivered (read from the log before the hub caught up).
                    } else if sequence == self.last + 1 {
                        self.accept(event);
                    } else {
                        self.stale = true;
                    }
                }
                Err(RecvError::Lagged(_)) => {
                    self.lagged += 1;
                    self.stale = true;
                }
                Err(RecvError::Closed) => {
                    return Err(GameError::Unavailable(format!(
                        "event feed closed; reconnect with after_sequence={}",
                        self.last
                    )));
                }
            }
        }
    }

    fn accept(&mut self, event: Arc<F::Event>) {
        self.last = event.sequence();
        self.finished |= event.is_final();
        self.queue.push_back(WatchItem::Event(event));
    }

    async fn catch_up(&mut self) -> Result<(), GameError> {
        self.stale = true;
        let since = self.feed.since(self.last).await?;
        self.absorb(since).await?;
        self.stale = false;
        Ok(())
    }

    async fn absorb(&mut self, since: Since<F::Event>) -> Result<(), GameError> {
        match since {
            Since::Events { events, done } => {
                for event in events {
                    if event.sequence() > self.last {
                        self.accept(event);
                    }
                }
                self.finished |= done;
                Ok(())
            }
            // Ahead cannot happen after start (sequences only grow); resync to be safe.
            Since::Gone | Since::Ahead { .. } => self.resync().await,
        }
    }

    async fn resync(&mut self) -> Result<(), GameError> {
        let (snapshot, sequence, done) = self.feed.snapshot().await?;
        self.queue.clear();
        self.last = sequence;
        self.finished = done;
        self.queue
            .push_back(WatchItem::Snapshot { snapshot, sequence });
        Ok(())
    }
}
