//! The in-memory [`GameStore`]: everything behind one mutex, lost on restart.
//!
//! The lock is a `std` mutex held only for map operations, never across an `.await`, so it is
//! cheaper than an async one and cannot deadlock a task.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use futures::FutureExt as _;

use crate::account::{Account, AccountId, ApiKeyRecord};
use crate::model::{GameEvent, GameFilter, GameId, GameInfo, GameState, GameStatus, LobbyEvent};
use crate::rating::Speed;
use crate::store::{
    Commit, Committed, GameStore, LeaderboardAfter, LeaderboardPage, Page, PlayerGameFilter,
    Ranked, Since, StoreError, StoreFuture, leaderboard_after, leaderboard_cursor, page_cursor,
    parse_named_cursor, parse_page_cursor,
};

/// Capacity knobs of the memory store.
#[derive(Debug, Clone, Copy)]
pub struct MemoryLimits {
    /// Games kept at most. When the store is full, a new game takes the place of the game that
    /// ended first (and can no longer be rematched), which is forgotten; creation fails only
    /// while every game kept is unfinished or in its rematch window.
    pub max_games: usize,
    /// Events kept per game; older ones are dropped and resuming before them yields a snapshot.
    pub game_event_retention: usize,
    /// Lobby events kept; same.
    pub lobby_event_retention: usize,
}

impl Default for MemoryLimits {
    fn default() -> Self {
        MemoryLimits {
            max_games: 10_000,
            // A 300-ply game has about 600 events: keep whole games.
            game_event_retention: 1_024,
            lobby_event_retention: 10_000,
        }
    }
}

/// See the module docs.
#[derive(Debug, Default)]
pub struct MemoryStore {
    limits: MemoryLimits,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Keys are ids this server generated, so a fast hasher is safe here.
    games: foldhash::HashMap<GameId, Stored>,
    /// Creation order; the index is the listing key used in cursors. A forgotten game leaves
    /// `None` (16 bytes), so that the indexes of the others stay.
    order: Vec<Option<GameId>>,
    /// Games over, in the order they ended: the first is the next to forget when full.
    ended: VecDeque<GameId>,
    lobby: VecDeque<Arc<LobbyEvent>>,
    lobby_sequence: u64,
    accounts: HashMap<AccountId, StoredAccount>,
    /// Username key → account.
    names: HashMap<String, AccountId>,
    /// Username look (`Username::look`) → account.
    looks: HashMap<String, AccountId>,
    /// API key id → account.
    keys: HashMap<String, AccountId>,
}

#[derive(Debug)]
struct StoredAccount {
    account: Account,
    keys: Vec<ApiKeyRecord>,
}

/// Working API keys one account may have at once.
pub const MAX_API_KEYS: usize = 20;

/// Key records one account keeps, revoked ones included: a bound on what one account can make
/// the store hold. Adding a key beyond it forgets the key revoked first. Revoked keys stay
/// that long because a rematch is refused once a seated account revoked a key after its game
/// began; only the owner, with a working key, can make keys, so a thief cannot push a fresh
/// revocation out.
pub const MAX_API_KEY_RECORDS: usize = 100;

impl Inner {
    /// The game created `index`-th, unless it was forgotten.
    fn game_at(&self, index: usize) -> Option<&Stored> {
        self.games.get(self.order[index].as_ref()?)
    }

    /// Forgets the game that ended first, if it can no longer change (`now` past its rematch
    /// window): its place goes to a new game. Whether one was forgotten.
    fn forget_one(&mut self, now: SystemTime) -> bool {
        while let Some(id) = self.ended.front() {
            let Some(stored) = self.games.get(id) else {
                self.ended.pop_front();
                continue;
            };
            if stored
                .state
                .info()
                .rematch
                .open_until()
                .is_some_and(|until| until > now)
            {
                // Windows are of one length from each game's end, so none that ended later
                // is past its own; one declined or rematched early (no window left) waits
                // its turn behind this one.
                return false;
            }
            let index = stored.index;
            self.games.remove(id);
            self.order[index] = None;
            self.ended.pop_front();
            return true;
        }
        false
    }

    /// Checks every account update of a commit before anything is written.
    fn check_accounts(&self, commit: &Commit) -> Result<(), StoreError> {
        for update in &commit.accounts {
            let stored = self
                .accounts
                .get(&update.account.id)
                .ok_or(StoreError::NotFound)?;
            if stored.account.version != update.expected_version {
                return Err(StoreError::Conflict {
                    current: stored.account.version,
                });
            }
        }
        Ok(())
    }

    fn write_accounts(&mut self, commit: &mut Commit) {
        for update in commit.accounts.drain(..) {
            if let Some(stored) = self.accounts.get_mut(&update.account.id) {
                stored.account = update.account;
            }
        }
    }
}

#[derive(Debug)]
struct Stored {
    state: GameState,
    index: usize,
    events: VecDeque<Arc<GameEvent>>,
}

impl MemoryStore {
    /// An empty store.
    #[must_use]
    pub fn new(limits: MemoryLimits) -> MemoryStore {
        MemoryStore {
            limits,
            inner: Mutex::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave a half-written game (every write below is
        // prepared first and then moved in), so a poisoned lock is still consistent.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self, inner: &mut Inner, mut commit: Commit, index: usize) -> Committed {
        let id = commit.state.info().id.clone();
        let mut sequence = commit.expected_sequence;
        let game_events: Vec<Arc<GameEvent>> = commit
            .game_events
            .drain(..)
            .map(|kind| {
                sequence += 1;
                Arc::new(GameEvent {
                    game_id: id.clone(),
                    sequence,
                    time: commit.time,
                    kind,
                })
            })
            .collect();
        let lobby_events: Vec<Arc<LobbyEvent>> = commit
            .lobby_events
            .drain(..)
            .map(|kind| {
                inner.lobby_sequence += 1;
                Arc::new(LobbyEvent {
                    sequence: inner.lobby_sequence,
                    time: commit.time,
                    kind,
                })
            })
            .collect();
        commit.state.set_sequence(sequence);
        let info = commit.state.info().clone();
        let ends = info.status.is_over()
            && inner
                .games
                .get(&id)
                .is_none_or(|stored| !stored.state.info().status.is_over());
        if ends {
            inner.ended.push_back(id.clone());
        }
        let stored = match inner.games.entry(id) {
            Entry::Occupied(entry) => {
                let stored = entry.into_mut();
                stored.state = commit.state;
                stored
            }
            Entry::Vacant(entry) => entry.insert(Stored {
                state: commit.state,
                index,
                events: VecDeque::new(),
            }),
        };
        for event in &game_events {
            if stored.events.len() == self.limits.game_event_retention {
                stored.events.pop_front();
            }
            stored.events.push_back(Arc::clone(event));
        }
        for event in &lobby_events {
            if inner.lobby.len() == self.limits.lobby_event_retention {
                inner.lobby.pop_front();
            }
            inner.lobby.push_back(Arc::clone(event));
        }
        Committed {
            info,
            game_events,
            lobby_events,
        }
    }
}

/// Events after `after` from a log holding a suffix of `1..=last`.
fn since<E>(log: &VecDeque<Arc<E>>, last: u64, after: u64, done: bool) -> Since<E> {
    if after > last {
        return Since::Ahead { last };
    }
    let missing = (last - after) as usize;
    if missing > log.len() {
        return Since::Gone;
    }
    Since::Events {
        events: log.iter().skip(log.len() - missing).cloned().collect(),
        done,
    }
}

impl GameStore for MemoryStore {
    fn create(&self, commit: Commit) -> StoreFuture<'_, Committed> {
        let result = (|| {
            let mut inner = self.lock();
            if inner.games.len() >= self.limits.max_games && !inner.forget_one(commit.time) {
                return Err(StoreError::Full(format!(
                    "the server holds its maximum of {} games, none of them over",
                    self.limits.max_games
                )));
            }
            if commit.expected_sequence != 0 || inner.games.contains_key(&commit.state.info().id) {
                return Err(StoreError::Conflict { current: 0 });
            }
            inner.check_accounts(&commit)?;
            let mut commit = commit;
            inner.write_accounts(&mut commit);
            let index = inner.order.len();
            inner.order.push(Some(commit.state.info().id.clone()));
            Ok(self.write(&mut inner, commit, index))
        })();
        futures::future::ready(result).boxed()
    }

    fn commit(&self, commit: Commit) -> StoreFuture<'_, Committed> {
        let result = (|| {
            let mut inner = self.lock();
            let stored = inner
                .games
                .get(&commit.state.info().id)
                .ok_or(StoreError::NotFound)?;
            let current = stored.state.info().sequence;
            if current != commit.expected_sequence {
                return Err(StoreError::Conflict { current });
            }
            let index = stored.index;
            inner.check_accounts(&commit)?;
            let mut commit = commit;
            inner.write_accounts(&mut commit);
            Ok(self.write(&mut inner, commit, index))
        })();
        futures::future::ready(result).boxed()
    }

    fn load<'a>(&'a self, id: &'a GameId) -> StoreFuture<'a, GameState> {
        let result = self
            .lock()
            .games
            .get(id)
            .map(|stored| stored.state.clone())
            .ok_or(StoreError::NotFound);
        futures::future::ready(result).boxed()
    }

    fn info<'a>(&'a self, id: &'a GameId) -> StoreFuture<'a, GameInfo> {
        let result = self
            .lock()
            .games
            .get(id)
            .map(|stored| stored.state.info().clone())
            .ok_or(StoreError::NotFound);
        futures::future::ready(result).boxed()
    }

    fn list<'a>(
        &'a self,
        filter: GameFilter,
        limit: usize,
        cursor_text: Option<&'a str>,
    ) -> StoreFuture<'a, Page> {
        let result = (|| {
            let inner = self.lock();
            // Cursor = index of the last game returned; the next page starts below it.
            let end = match cursor_text {
                Some(text) => usize::try_from(parse_page_cursor(filter, text)?)
                    .map_err(|_| StoreError::BadCursor)?
                    .min(inner.order.len()),
                None => inner.order.len(),
            };
            let mut games = Vec::with_capacity(limit.min(end));
            let mut next_cursor = None;
            for index in (0..end).rev() {
                let Some(stored) = inner.game_at(index) else {
                    continue;
                };
                if !filter.accepts(stored.state.info().status) {
                    continue;
                }
                if games.len() == limit {
                    // One more exists: resume just above it.
                    next_cursor = Some(page_cursor(filter, index as u64 + 1));
                    break;
                }
                games.push(stored.state.info().clone());
            }
            Ok(Page { games, next_cursor })
        })();
        futures::future::ready(result).boxed()
    }

    fn game_events_since<'a>(
        &'a self,
        id: &'a GameId,
        after: u64,
    ) -> StoreFuture<'a, Since<GameEvent>> {
        let result = self
            .lock()
            .games
            .get(id)
            .map(|stored| {
                let info = stored.state.info();
                since(&stored.events, info.sequence, after, info.log_closed())
            })
            .ok_or(StoreError::NotFound);
        futures::future::ready(result).boxed()
    }

    fn lobby_events_since(&self, after: u64) -> StoreFuture<'_, Since<LobbyEvent>> {
        let inner = self.lock();
        let result = Ok(since(&inner.lobby, inner.lobby_sequence, after, false));
        futures::future::ready(result).boxed()
    }

    fn lobby_snapshot(&self, limit: usize) -> StoreFuture<'_, (Vec<GameInfo>, u64)> {
        let inner = self.lock();
        let (mut waiting, mut active) = (0, 0);
        let games = inner
            .order
            .iter()
            .rev()
            .filter_map(|id| inner.games.get(id.as_ref()?))
            .map(|stored| stored.state.info())
            .filter(|info| {
                let count = match info.status {
                    GameStatus::WaitingForPlayers => &mut waiting,
                    GameStatus::Active => &mut active,
                    _ => return false,
                };
                *count += 1;
                *count <= limit
            })
            .cloned()
            .collect();
        let result = Ok((games, inner.lobby_sequence));
        futures::future::ready(result).boxed()
    }

    fn create_account(&self, account: Account, key: ApiKeyRecord) -> StoreFuture<'_, ()> {
        let result = (|| {
            let mut inner = self.lock();
            let (name, look) = (account.username.key(), account.username.look());
            // Alike in small letters is one key; alike only in capitals a key meeting a look.
            if [&name, &look]
                .iter()
                .any(|k| inner.names.contains_key(*k) || inner.looks.contains_key(*k))
                // A key its owner chose may carry another's id.
                || inner.keys.contains_key(&key.id)
            {
                return Err(StoreError::AlreadyExists);
            }
            inner.names.insert(name, account.id.clone());
            inner.looks.insert(look, account.id.clone());
            inner.keys.insert(key.id.clone(), account.id.clone());
            inner.accounts.insert(
                account.id.clone(),
                StoredAccount {
                    account,
                    keys: vec![key],
                },
            );
            Ok(())
        })();
        futures::future::ready(result).boxed()
    }

    fn account<'a>(&'a self, id: &'a AccountId) -> StoreFuture<'a, Account> {
        let result = self
            .lock()
            .accounts
            .get(id)
            .map(|stored| stored.account.clone())
            .ok_or(StoreError::NotFound);
        futures::future::ready(result).boxed()
    }

    fn account_by_name<'a>(&'a self, key: &'a str) -> StoreFuture<'a, Account> {
        let inner = self.lock();
        let result = inner
            .names
            .get(key)
            .or_else(|| inner.looks.get(key))
            .and_then(|id| inner.accounts.get(id))
            .map(|stored| stored.account.clone())
            .ok_or(StoreError::NotFound);
        futures::future::ready(result).boxed()
    }

    fn account_by_api_key<'a>(
        &'a self,
        key_id: &'a str,
    ) -> StoreFuture<'a, (Account, ApiKeyRecord)> {
        let inner = self.lock();
        let result = inner
            .keys
            .get(key_id)
            .and_then(|id| inner.accounts.get(id))
            .and_then(|stored| {
                let key = stored.keys.iter().find(|k| k.id == key_id)?;
                Some((stored.account.clone(), key.clone()))
            })
            .ok_or(StoreError::NotFound);
        futures::future::ready(result).boxed()
    }

    fn add_api_key<'a>(&'a self, id: &'a AccountId, key: ApiKeyRecord) -> StoreFuture<'a, ()> {
        let result = (|| {
            let mut inner = self.lock();
            let stored = inner.accounts.get_mut(id).ok_or(StoreError::NotFound)?;
            let working = stored.keys.iter().filter(|k| k.revoked.is_none()).count();
            if working >= MAX_API_KEYS {
                return Err(StoreError::Full(format!(
                    "an account has at most {MAX_API_KEYS} working API keys"
                )));
            }
            let mut forgotten = Vec::new();
            while stored.keys.len() >= MAX_API_KEY_RECORDS {
                // Fewer than MAX_API_KEYS work, so most of the records are revoked ones.
                let Some(oldest) = stored
                    .keys
                    .iter()
                    .enumerate()
                    .filter_map(|(at, k)| Some((k.revoked?, at)))
                    .min()
                    .map(|(_, at)| at)
                else {
                    break;
                };
                forgotten.push(stored.keys.remove(oldest).id);
            }
            stored.keys.push(key.clone());
            for old in forgotten {
                inner.keys.remove(&old);
            }
            inner.keys.insert(key.id, id.clone());
            Ok(())
        })();
        futures::future::ready(result).boxed()
    }

    fn revoke_api_key<'a>(
        &'a self,
        id: &'a AccountId,
        key_id: &'a str,
        now: std::time::SystemTime,
    ) -> StoreFuture<'a, bool> {
        let mut inner = self.lock();
        let found = inner
            .accounts
            .get_mut(id)
            .and_then(|stored| stored.keys.iter_mut().find(|k| k.id == key_id))
            .map(|key| {
                key.revoked.get_or_insert(now);
            })
            .is_some();
        futures::future::ready(Ok(found)).boxed()
    }

    fn api_keys<'a>(&'a self, id: &'a AccountId) -> StoreFuture<'a, Vec<ApiKeyRecord>> {
        let keys = self
            .lock()
            .accounts
            .get(id)
            .map(|stored| stored.keys.clone())
            .unwrap_or_default();
        futures::future::ready(Ok(keys)).boxed()
    }

    fn leaderboard<'a>(
        &'a self,
        speed: Speed,
        limit: usize,
        cursor: Option<&'a str>,
    ) -> StoreFuture<'a, LeaderboardPage> {
        let result = (|| {
            let after = cursor
                .map(|text| leaderboard_after(speed, text))
                .transpose()?;
            let inner = self.lock();
            let mut rated: Vec<&Account> = inner
                .accounts
                .values()
                .map(|stored| &stored.account)
                .filter(|a| a.ratings.get(&speed).is_some_and(|r| !r.is_provisional()))
                .filter(|a| {
                    after
                        .as_ref()
                        .is_none_or(|after| after.is_before(a.rating(speed).rating, &a.id))
                })
                .collect();
            rated.sort_by(|a, b| {
                b.rating(speed)
                    .rating
                    .total_cmp(&a.rating(speed).rating)
                    .then_with(|| a.id.cmp(&b.id))
            });
            let listed = after.map_or(0, |after| after.listed);
            let limit = limit.max(1);
            let players: Vec<Ranked> = rated
                .iter()
                .take(limit)
                .zip(listed + 1..)
                .map(|(account, rank)| Ranked {
                    account: (*account).clone(),
                    rank,
                })
                .collect();
            let next_cursor = (rated.len() > limit).then(|| {
                let last = rated[limit - 1];
                leaderboard_cursor(
                    speed,
                    &LeaderboardAfter {
                        rating: last.rating(speed).rating,
                        account: last.id.clone(),
                        listed: listed + limit as u64,
                    },
                )
            });
            Ok(LeaderboardPage {
                players,
                next_cursor,
            })
        })();
        futures::future::ready(result).boxed()
    }

    fn player_games<'a>(
        &'a self,
        id: &'a AccountId,
        filter: PlayerGameFilter,
        limit: usize,
        cursor: Option<&'a str>,
    ) -> StoreFuture<'a, Page> {
        let result = (|| {
            let inner = self.lock();
            let name = format!("player-{}", filter.name());
            let end = match cursor {
                Some(text) => usize::try_from(parse_named_cursor(&name, text)?)
                    .map_err(|_| StoreError::BadCursor)?
                    .min(inner.order.len()),
                None => inner.order.len(),
            };
            let mut games = Vec::new();
            let mut next_cursor = None;
            for index in (0..end).rev() {
                let Some(info) = inner.game_at(index).map(|stored| stored.state.info()) else {
                    continue;
                };
                if crate::model::seat_of_account(info, id).is_none() || !filter.accepts(info, id) {
                    continue;
                }
                if games.len() == limit {
                    next_cursor = Some(format!("{name}.{}", index + 1));
                    break;
                }
                games.push(info.clone());
            }
            Ok(Page { games, next_cursor })
        })();
        futures::future::ready(result).boxed()
    }

    fn open_games_by_creator(&self) -> StoreFuture<'_, Vec<(GameId, IpAddr)>> {
        let inner = self.lock();
        let games = inner
            .games
            .iter()
            .filter(|(_, stored)| !stored.state.info().status.is_over())
            .filter_map(|(id, stored)| stored.state.creator().map(|ip| (id.clone(), ip)))
            .collect();
        futures::future::ready(Ok(games)).boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_reports_events_gaps_and_the_future() {
        let log: VecDeque<Arc<u64>> = (3..=5).map(Arc::new).collect();
        let Since::Events { events, done } = since(&log, 5, 3, true) else {
            panic!("events expected")
        };
        assert_eq!(events.iter().map(|e| **e).collect::<Vec<_>>(), [4, 5]);
        assert!(done);
        assert!(
            matches!(since(&log, 5, 2, false), Since::Events { events, .. } if events.len() == 3)
        );
        assert!(matches!(since(&log, 5, 1, false), Since::Gone));
        assert!(
            matches!(since(&log, 5, 5, false), Since::Events { events, .. } if events.is_empty())
        );
        assert!(matches!(since(&log, 5, 6, false), Since::Ahead { last: 5 }));
    }
}
