//! In-process fan-out of committed events to watchers.
//!
//! One `tokio::sync::broadcast` channel per watched game (created on the first watcher, removed
//! with the last) plus one for the lobby. Delivery through the hub is best effort: a slow
//! watcher lags, and two commits may publish out of order. Watchers therefore treat the hub as
//! a fast path and fall back to the store's event log whenever a sequence number is missing
//! (see `watch`), which is what makes resume exact.
//!
//! With one node the store's caller publishes right after committing. A multi-node backend
//! (PostgreSQL) would instead feed [`Hub::publish_game`] / [`Hub::publish_lobby`] from a
//! `LISTEN` task reacting to the `NOTIFY` each commit sends; nothing else changes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::broadcast;

use super::model::{GameEvent, GameId, LobbyEvent};
use super::store::Committed;

/// See the module docs.
#[derive(Debug)]
pub struct Hub {
    capacity: usize,
    games: Mutex<HashMap<GameId, Channel>>,
    lobby: broadcast::Sender<Arc<LobbyEvent>>,
}

#[derive(Debug)]
struct Channel {
    tx: broadcast::Sender<Arc<GameEvent>>,
    watchers: usize,
}

/// The game already has its maximum number of watchers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooManyWatchers(pub usize);

/// Counts one watcher of a game while alive.
#[derive(Debug)]
pub struct WatcherGuard {
    hub: Arc<Hub>,
    id: GameId,
}

impl Hub {
    /// A hub whose channels buffer `capacity` events per lagging receiver.
    #[must_use]
    pub fn new(capacity: usize) -> Arc<Hub> {
        let capacity = capacity.max(1);
        Arc::new(Hub {
            capacity,
            games: Mutex::default(),
            lobby: broadcast::channel(capacity).0,
        })
    }

    fn games(&self) -> MutexGuard<'_, HashMap<GameId, Channel>> {
        // Only plain map operations happen under the lock; a poisoned map is still consistent.
        self.games
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Subscribes to a game's events.
    ///
    /// # Errors
    ///
    /// [`TooManyWatchers`] if `max_watchers` already watch it.
    pub fn subscribe_game(
        self: &Arc<Self>,
        id: &GameId,
        max_watchers: usize,
    ) -> Result<(broadcast::Receiver<Arc<GameEvent>>, WatcherGuard), TooManyWatchers> {
        let mut games = self.games();
        let channel = games.entry(id.clone()).or_insert_with(|| Channel {
            tx: broadcast::channel(self.capacity).0,
            watchers: 0,
        });
        if channel.watchers >= max_watchers {
            if channel.watchers == 0 {
                games.remove(id);
            }
            return Err(TooManyWatchers(max_watchers));
        }
        channel.watchers += 1;
        let rx = channel.tx.subscribe();
        Ok((
            rx,
            WatcherGuard {
                hub: Arc::clone(self),
                id: id.clone(),
            },
        ))
    }

    /// Subscribes to lobby events.
    #[must_use]
    pub fn subscribe_lobby(&self) -> broadcast::Receiver<Arc<LobbyEvent>> {
        self.lobby.subscribe()
    }

    /// Number of watchers of a game.
    #[must_use]
    pub fn watchers(&self, id: &GameId) -> usize {
        self.games().get(id).map_or(0, |c| c.watchers)
    }

    /// Publishes what a commit wrote.
    pub fn publish(&self, committed: &Committed) {
        for event in &committed.game_events {
            self.publish_game(event);
        }
        for event in &committed.lobby_events {
            self.publish_lobby(event);
        }
    }

    /// Publishes one game event to the game's watchers, if any.
    pub fn publish_game(&self, event: &Arc<GameEvent>) {
        if let Some(channel) = self.games().get(&event.game_id) {
            // An error only means no receiver is listening right now.
            let _ = channel.tx.send(Arc::clone(event));
        }
    }

    /// Publishes one lobby event.
    pub fn publish_lobby(&self, event: &Arc<LobbyEvent>) {
        let _ = self.lobby.send(Arc::clone(event));
    }
}

impl Drop for WatcherGuard {
    fn drop(&mut self) {
        let mut games = self.hub.games();
        if let Some(channel) = games.get_mut(&self.id) {
            channel.watchers -= 1;
            if channel.watchers == 0 {
                games.remove(&self.id);
            }
        }
    }
}
