//! In-process fan-out of committed events to watchers.
//!
//! One `tokio::sync::broadcast` channel per watched game (created on the first watcher, removed
//! with the last), one for the lobby, and one of committed game states for the background
//! agents (the computer player), which are woken by it instead of being called by the manager. Delivery through the hub is best effort: a slow
//! watcher lags, and two commits may publish out of order. Watchers therefore treat the hub as
//! a fast path and fall back to the store's event log whenever a sequence number is missing
//! (see `watch`), which is what makes resume exact.
//!
//! With one node the store's caller publishes right after committing. A multi-node backend
//! (PostgreSQL) would instead feed [`Hub::publish_game`] / [`Hub::publish_lobby`] from a
//! `LISTEN` task reacting to the `NOTIFY` each commit sends; nothing else changes.

use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard};

use oanquan_rules::{ByPlayer, Player};
use tokio::sync::broadcast;

use crate::model::{GameEvent, GameId, GameInfo, LobbyEvent};
use crate::store::Committed;

/// See the module docs.
#[derive(Debug)]
pub struct Hub {
    capacity: usize,
    /// Keyed by ids of existing games, not by what a client sends: a fast hasher is safe.
    games: Mutex<foldhash::HashMap<GameId, Channel>>,
    lobby: broadcast::Sender<Arc<LobbyEvent>>,
    /// Lobby watchers per connection and per client, for those that are limited: a lobby
    /// stream carries a snapshot of the lobby and every open seek, so one client must not open
    /// thousands of them.
    lobby_watchers: Mutex<Counts>,
    commits: broadcast::Sender<Arc<GameInfo>>,
}

#[derive(Debug)]
struct Channel {
    tx: broadcast::Sender<Arc<GameEvent>>,
    spectators: usize,
    seats: ByPlayer<usize>,
    /// Spectators per connection and per client, for those that are limited.
    per_connection: HashMap<SocketAddr, usize>,
    per_client: HashMap<IpAddr, usize>,
}

/// Watchers per connection and per client.
#[derive(Debug, Default)]
struct Counts {
    per_connection: HashMap<SocketAddr, usize>,
    per_client: HashMap<IpAddr, usize>,
}

impl Channel {
    fn is_empty(&self) -> bool {
        self.spectators == 0 && self.seats[Player::First] == 0 && self.seats[Player::Second] == 0
    }
}

/// Who opens a watch of a game, for the per-game limits ([`WatchLimits`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Watcher {
    /// The seat whose player token came with the watch: its own streams have places that
    /// spectators cannot take. `None`: a spectator.
    pub seat: Option<Player>,
    /// The connection a spectator watches on, if its connections are limited. The peer's
    /// socket address names a connection: no two open connections to one listener share it.
    pub connection: Option<SocketAddr>,
    /// The client (see [`crate::limits::client_key`]) a spectator watches from, if its
    /// clients are limited.
    pub client: Option<IpAddr>,
}

/// Streams one game may have. A seat's own streams are counted apart from spectators, so
/// however many spectators come, each player still gets its stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchLimits {
    /// Spectators of the game.
    pub spectators: usize,
    /// Streams of one seat (its player's devices and reconnections).
    pub per_seat: usize,
    /// Spectators on one connection; 0 = no limit.
    pub per_connection: usize,
    /// Spectators from one client; 0 = no limit.
    pub per_client: usize,
}

/// Which limit a new watch would go over. The number is the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TooManyWatchers {
    /// The game's spectators.
    Game(usize),
    /// The streams of one seat.
    Seat(usize),
    /// The spectators on one connection.
    Connection(usize),
    /// The spectators from one client.
    Client(usize),
    /// The lobby streams on one connection.
    LobbyConnection(usize),
    /// The lobby streams from one client.
    LobbyClient(usize),
}

impl fmt::Display for TooManyWatchers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TooManyWatchers::Game(max) => {
                write!(f, "this game already has {max} spectators (the limit)")
            }
            TooManyWatchers::Seat(max) => write!(
                f,
                "your seat already has {max} streams open on this game (the limit); close one first"
            ),
            TooManyWatchers::Connection(max) => write!(
                f,
                "this connection already has {max} streams watching this game (the limit per connection)"
            ),
            TooManyWatchers::Client(max) => write!(
                f,
                "your address already has {max} streams watching this game (the limit per client)"
            ),
            TooManyWatchers::LobbyConnection(max) => write!(
                f,
                "this connection already has {max} streams watching the lobby (the limit per connection)"
            ),
            TooManyWatchers::LobbyClient(max) => write!(
                f,
                "your address already has {max} streams watching the lobby (the limit per client)"
            ),
        }
    }
}

/// Counts one watcher of a game, or of the lobby, while alive.
#[derive(Debug)]
pub struct WatcherGuard {
    hub: Arc<Hub>,
    /// The game watched; `None` for the lobby.
    id: Option<GameId>,
    watcher: Watcher,
}

fn below<K: Eq + Hash>(counts: &HashMap<K, usize>, key: Option<K>, max: usize) -> bool {
    max == 0 || key.is_none_or(|key| counts.get(&key).copied().unwrap_or(0) < max)
}

fn count<K: Eq + Hash>(counts: &mut HashMap<K, usize>, key: Option<K>) {
    if let Some(key) = key {
        *counts.entry(key).or_insert(0) += 1;
    }
}

fn uncount<K: Eq + Hash>(counts: &mut HashMap<K, usize>, key: Option<K>) {
    if let Some(key) = key {
        if let Some(n) = counts.get_mut(&key) {
            *n -= 1;
            if *n == 0 {
                counts.remove(&key);
            }
        }
    }
}

/// Least commits the agents' feed buffers: a burst of deadlines (thousands of flags falling in
/// the same 100 ms) commits as many games at once, and an agent that lags behind the feed must
/// read every game again. The feed holds one `Arc` per slot, so this costs a few megabytes at
/// most, and only while the games it names are not dropped otherwise.
pub const COMMIT_FEED_CAPACITY: usize = 16_384;

impl Hub {
    /// A hub whose channels buffer `capacity` events per lagging receiver, the commit feed
    /// included.
    #[must_use]
    pub fn new(capacity: usize) -> Arc<Hub> {
        Hub::with_commit_capacity(capacity, capacity)
    }

    /// A hub whose game and lobby channels buffer `capacity` events, and whose commit feed
    /// `commits` (a server gives it [`COMMIT_FEED_CAPACITY`]).
    #[must_use]
    pub fn with_commit_capacity(capacity: usize, commits: usize) -> Arc<Hub> {
        let capacity = capacity.max(1);
        Arc::new(Hub {
            capacity,
            games: Mutex::default(),
            lobby: broadcast::channel(capacity).0,
            lobby_watchers: Mutex::default(),
            commits: broadcast::channel(commits.max(1)).0,
        })
    }

    fn games(&self) -> MutexGuard<'_, foldhash::HashMap<GameId, Channel>> {
        // Only plain map operations happen under the lock; a poisoned map is still consistent.
        self.games
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Subscribes a spectator, limited only by the number of spectators, to a game's events.
    ///
    /// # Errors
    ///
    /// [`TooManyWatchers`] if `max_watchers` already watch it.
    pub fn subscribe_game(
        self: &Arc<Self>,
        id: &GameId,
        max_watchers: usize,
    ) -> Result<(broadcast::Receiver<Arc<GameEvent>>, WatcherGuard), TooManyWatchers> {
        let limits = WatchLimits {
            spectators: max_watchers,
            per_seat: 0,
            per_connection: 0,
            per_client: 0,
        };
        self.subscribe_game_as(id, Watcher::default(), limits)
    }

    /// Subscribes `watcher` to a game's events, within `limits`.
    ///
    /// # Errors
    ///
    /// [`TooManyWatchers`] naming the limit the watch would go over.
    pub fn subscribe_game_as(
        self: &Arc<Self>,
        id: &GameId,
        watcher: Watcher,
        limits: WatchLimits,
    ) -> Result<(broadcast::Receiver<Arc<GameEvent>>, WatcherGuard), TooManyWatchers> {
        let mut games = self.games();
        let channel = games.entry(id.clone()).or_insert_with(|| Channel {
            tx: broadcast::channel(self.capacity).0,
            spectators: 0,
            seats: ByPlayer::default(),
            per_connection: HashMap::new(),
            per_client: HashMap::new(),
        });
        let refused = match watcher.seat {
            Some(seat) if channel.seats[seat] >= limits.per_seat => {
                Some(TooManyWatchers::Seat(limits.per_seat))
            }
            Some(_) => None,
            None if channel.spectators >= limits.spectators => {
                Some(TooManyWatchers::Game(limits.spectators))
            }
            None if !below(
                &channel.per_connection,
                watcher.connection,
                limits.per_connection,
            ) =>
            {
                Some(TooManyWatchers::Connection(limits.per_connection))
            }
            None if !below(&channel.per_client, watcher.client, limits.per_client) => {
                Some(TooManyWatchers::Client(limits.per_client))
            }
            None => None,
        };
        if let Some(refused) = refused {
            if channel.is_empty() {
                games.remove(id);
            }
            return Err(refused);
        }
        let watcher = match watcher.seat {
            Some(seat) => {
                channel.seats[seat] += 1;
                // Seats are not counted per connection or client: they have their own bound.
                Watcher {
                    seat: Some(seat),
                    connection: None,
                    client: None,
                }
            }
            None => {
                channel.spectators += 1;
                count(&mut channel.per_connection, watcher.connection);
                count(&mut channel.per_client, watcher.client);
                watcher
            }
        };
        let rx = channel.tx.subscribe();
        Ok((
            rx,
            WatcherGuard {
                hub: Arc::clone(self),
                id: Some(id.clone()),
                watcher,
            },
        ))
    }

    /// Subscribes to lobby events.
    #[must_use]
    pub fn subscribe_lobby(&self) -> broadcast::Receiver<Arc<LobbyEvent>> {
        self.lobby.subscribe()
    }

    /// Subscribes `watcher` to lobby events, within the per-connection and per-client limits
    /// of `limits` (the others do not apply to the lobby).
    ///
    /// # Errors
    ///
    /// [`TooManyWatchers::LobbyConnection`] or [`TooManyWatchers::LobbyClient`].
    pub fn subscribe_lobby_as(
        self: &Arc<Self>,
        watcher: Watcher,
        limits: WatchLimits,
    ) -> Result<(broadcast::Receiver<Arc<LobbyEvent>>, WatcherGuard), TooManyWatchers> {
        let mut counts = self
            .lobby_watchers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !below(
            &counts.per_connection,
            watcher.connection,
            limits.per_connection,
        ) {
            return Err(TooManyWatchers::LobbyConnection(limits.per_connection));
        }
        if !below(&counts.per_client, watcher.client, limits.per_client) {
            return Err(TooManyWatchers::LobbyClient(limits.per_client));
        }
        count(&mut counts.per_connection, watcher.connection);
        count(&mut counts.per_client, watcher.client);
        let watcher = Watcher {
            seat: None,
            ..watcher
        };
        Ok((
            self.lobby.subscribe(),
            WatcherGuard {
                hub: Arc::clone(self),
                id: None,
                watcher,
            },
        ))
    }

    /// Subscribes to the state of every game with a computer seat after each commit (the only
    /// games an agent acts on today). Best effort like every hub
    /// channel: a receiver that lags must look at the store again.
    #[must_use]
    pub fn subscribe_commits(&self) -> broadcast::Receiver<Arc<GameInfo>> {
        self.commits.subscribe()
    }

    /// Number of watchers of a game, spectators and seats.
    #[must_use]
    pub fn watchers(&self, id: &GameId) -> usize {
        self.games().get(id).map_or(0, |c| {
            c.spectators + c.seats[Player::First] + c.seats[Player::Second]
        })
    }

    /// The games with at least one watcher here: what a multi-node listener must keep exact.
    #[must_use]
    pub fn watched_games(&self) -> Vec<GameId> {
        self.games().keys().cloned().collect()
    }

    /// Whether anything (the background agents) takes the commit feed now: only then is a
    /// game's state after another node's commit worth reading.
    #[must_use]
    pub fn feeds_commits(&self) -> bool {
        self.commits.receiver_count() > 0
    }

    /// Publishes what a commit wrote.
    pub fn publish(&self, committed: &Committed) {
        for event in &committed.game_events {
            self.publish_game(event);
        }
        for event in &committed.lobby_events {
            self.publish_lobby(event);
        }
        // Only games with a computer seat concern the agent on this feed: skipping the others
        // keeps every move between people from cloning its game and waking the agent
        // (measured: about 1-2 µs of server CPU per move, see BENCHMARKS.md).
        if self.commits.receiver_count() > 0 && crate::timing::needs_agents(&committed.info) {
            self.publish_commit(Arc::new(committed.info.clone()));
        }
    }

    /// Publishes a game's state after a commit to the agents.
    pub fn publish_commit(&self, info: Arc<GameInfo>) {
        let _ = self.commits.send(info);
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
        let Some(id) = &self.id else {
            let mut counts = self
                .hub
                .lobby_watchers
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            uncount(&mut counts.per_connection, self.watcher.connection);
            uncount(&mut counts.per_client, self.watcher.client);
            return;
        };
        let mut games = self.hub.games();
        if let Some(channel) = games.get_mut(id) {
            match self.watcher.seat {
                Some(seat) => channel.seats[seat] -= 1,
                None => {
                    channel.spectators -= 1;
                    uncount(&mut channel.per_connection, self.watcher.connection);
                    uncount(&mut channel.per_client, self.watcher.client);
                }
            }
            if channel.is_empty() {
                games.remove(id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: WatchLimits = WatchLimits {
        spectators: 4,
        per_seat: 2,
        per_connection: 2,
        per_client: 3,
    };

    fn spectator(connection: &str) -> Watcher {
        let connection: SocketAddr = connection.parse().unwrap();
        Watcher {
            seat: None,
            connection: Some(connection),
            client: Some(connection.ip()),
        }
    }

    fn seat(player: Player) -> Watcher {
        Watcher {
            seat: Some(player),
            ..Watcher::default()
        }
    }

    /// The watched games are those with a watcher now, and the commit feed counts as fed only
    /// while someone takes it.
    #[test]
    fn watched_games_and_the_commit_feed_follow_their_subscribers() {
        let hub = Hub::new(4);
        let a = GameId::parse("a").unwrap();
        let b = GameId::parse("b").unwrap();
        assert!(hub.watched_games().is_empty());
        let (_rx_a, guard_a) = hub.subscribe_game(&a, 4).unwrap();
        let (_rx_b, guard_b) = hub.subscribe_game(&b, 4).unwrap();
        let mut watched = hub.watched_games();
        watched.sort_by(|x, y| x.as_str().cmp(y.as_str()));
        assert_eq!(watched, vec![a.clone(), b]);
        drop(guard_b);
        assert_eq!(hub.watched_games(), vec![a]);
        drop(guard_a);
        assert!(hub.watched_games().is_empty());

        assert!(!hub.feeds_commits());
        let commits = hub.subscribe_commits();
        assert!(hub.feeds_commits());
        drop(commits);
        assert!(!hub.feeds_commits());
    }

    #[test]
    fn spectators_are_limited_per_connection_client_and_game_and_seats_apart() {
        let hub = Hub::new(4);
        let id = GameId::parse("g").unwrap();
        let watch = |watcher| hub.subscribe_game_as(&id, watcher, LIMITS).map(|(_, g)| g);
        let a1 = "192.0.2.1:1000";
        let mut held = vec![watch(spectator(a1)).unwrap(), watch(spectator(a1)).unwrap()];
        assert_eq!(
            watch(spectator(a1)).unwrap_err(),
            TooManyWatchers::Connection(2)
        );
        held.push(watch(spectator("192.0.2.1:1001")).unwrap());
        assert_eq!(
            watch(spectator("192.0.2.1:1002")).unwrap_err(),
            TooManyWatchers::Client(3)
        );
        held.push(watch(spectator("192.0.2.2:1000")).unwrap());
        assert_eq!(
            watch(spectator("192.0.2.3:1000")).unwrap_err(),
            TooManyWatchers::Game(4)
        );
        // Unlimited spectators (no connection or client) still count towards the game.
        assert_eq!(
            watch(Watcher::default()).unwrap_err(),
            TooManyWatchers::Game(4)
        );
        // Seats get in whatever spectators do, up to their own bound.
        for player in Player::ALL {
            held.push(watch(seat(player)).unwrap());
            held.push(watch(seat(player)).unwrap());
        }
        assert_eq!(
            watch(seat(Player::First)).unwrap_err(),
            TooManyWatchers::Seat(2)
        );
        assert_eq!(hub.watchers(&id), 8);
        // Places come back with the guards.
        held.remove(0);
        watch(spectator(a1)).unwrap();
        drop(held);
        assert_eq!(hub.watchers(&id), 0);
        assert!(hub.games().is_empty(), "an unwatched game keeps no channel");
    }

    #[test]
    fn no_connection_or_client_limit_when_zero() {
        let hub = Hub::new(4);
        let id = GameId::parse("g").unwrap();
        let limits = WatchLimits {
            per_connection: 0,
            per_client: 0,
            ..LIMITS
        };
        let held: Vec<_> = (0..4)
            .map(|_| {
                hub.subscribe_game_as(&id, spectator("192.0.2.1:1"), limits)
                    .unwrap()
            })
            .collect();
        assert_eq!(held.len(), 4);
        let refused = hub.subscribe_game(&id, 4).unwrap_err();
        assert_eq!(refused, TooManyWatchers::Game(4));
        assert!(refused.to_string().contains("4 spectators"));
    }
}
