//! For tests: a memory store with the faults and gates the tests of the timekeeper and of the
//! accounts need, each off until a test turns it on: commits of some games refused as
//! unavailable (a full disk), account reads failing (the database down), the first two reads
//! of one account held until both are made (two games reading one version of it), commits
//! delayed as a group commit delays them. It counts
//! what the tests check: refused commits, loads, commits refused as conflicts, gated reads.

use std::collections::HashSet;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use futures::future::BoxFuture;
use tokio::sync::{Barrier, watch};

use crate::account::{Account, AccountId, ApiKeyRecord};
use crate::hub::Hub;
use crate::manager::{GameManager, ManagerLimits};
use crate::memory::{MemoryLimits, MemoryStore};
use crate::model::{GameEvent, GameFilter, GameId, GameInfo, GameState, LobbyEvent};
use crate::rating::Speed;
use crate::store::{
    Commit, Committed, GameStore, LeaderboardPage, Page, PlayerGameFilter, Since, StoreError,
    StoreFuture,
};

/// See the module docs.
#[derive(Debug)]
pub(crate) struct FaultyStore {
    pub(crate) inner: MemoryStore,
    /// Games whose commits are refused as unavailable.
    refused: Mutex<HashSet<GameId>>,
    refusals: AtomicUsize,
    loads: AtomicUsize,
    /// Account reads fail as unavailable.
    pub(crate) accounts_down: AtomicBool,
    /// Account reads fail as damaged data (a broken page where the account is).
    pub(crate) accounts_damaged: AtomicBool,
    /// The account whose first two reads wait for each other.
    pub(crate) gate: Mutex<Option<AccountId>>,
    pub(crate) gated: AtomicUsize,
    barrier: Barrier,
    pub(crate) conflicts: AtomicUsize,
    /// Each commit lets every other task run before it writes, as a group commit gathers a
    /// batch: commits that read the same version of an account meet in one batch. So does a
    /// look for an account by name.
    pub(crate) batched: AtomicBool,
    /// The games written, in order: (created, game).
    pub(crate) writes: Mutex<Vec<(bool, GameId)>>,
}

impl Default for FaultyStore {
    fn default() -> Self {
        FaultyStore {
            inner: MemoryStore::new(MemoryLimits::default()),
            refused: Mutex::new(HashSet::new()),
            refusals: AtomicUsize::new(0),
            loads: AtomicUsize::new(0),
            accounts_down: AtomicBool::new(false),
            accounts_damaged: AtomicBool::new(false),
            gate: Mutex::new(None),
            gated: AtomicUsize::new(0),
            barrier: Barrier::new(2),
            conflicts: AtomicUsize::new(0),
            batched: AtomicBool::new(false),
            writes: Mutex::new(Vec::new()),
        }
    }
}

impl FaultyStore {
    /// A store with every fault off, and a manager over it with the default limits.
    pub(crate) fn with_manager() -> (Arc<FaultyStore>, Arc<GameManager>) {
        let store = Arc::new(FaultyStore::default());
        let manager = Arc::new(GameManager::new(
            Arc::clone(&store) as Arc<dyn GameStore>,
            Hub::new(1024),
            ManagerLimits::default(),
        ));
        (store, manager)
    }

    /// Refuses the commits of game `id` from now on.
    pub(crate) fn refuse(&self, id: &GameId) {
        self.refused.lock().unwrap().insert(id.clone());
    }

    /// Takes game `id`'s commits again.
    pub(crate) fn heal(&self, id: &GameId) {
        self.refused.lock().unwrap().remove(id);
    }

    /// Commits refused so far.
    pub(crate) fn refusals(&self) -> usize {
        self.refusals.load(Ordering::SeqCst)
    }

    /// Games loaded so far.
    pub(crate) fn loads(&self) -> usize {
        self.loads.load(Ordering::SeqCst)
    }
}

impl GameStore for FaultyStore {
    fn create(&self, commit: Commit) -> StoreFuture<'_, Committed> {
        let id = commit.state.info().id.clone();
        Box::pin(async move {
            let result = self.inner.create(commit).await;
            if result.is_ok() {
                self.writes.lock().unwrap().push((true, id));
            }
            result
        })
    }

    fn commit(&self, commit: Commit) -> StoreFuture<'_, Committed> {
        let id = commit.state.info().id.clone();
        if self.refused.lock().unwrap().contains(&id) {
            self.refusals.fetch_add(1, Ordering::SeqCst);
            return Box::pin(async { Err(StoreError::Unavailable("the disk is full".to_owned())) });
        }
        Box::pin(async move {
            if self.batched.load(Ordering::SeqCst) {
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
            let result = self.inner.commit(commit).await;
            match &result {
                Ok(_) => self.writes.lock().unwrap().push((false, id)),
                Err(StoreError::Conflict { .. }) => {
                    self.conflicts.fetch_add(1, Ordering::SeqCst);
                }
                Err(_) => {}
            }
            result
        })
    }

    fn load<'a>(&'a self, id: &'a GameId) -> StoreFuture<'a, GameState> {
        self.loads.fetch_add(1, Ordering::SeqCst);
        self.inner.load(id)
    }

    fn info<'a>(&'a self, id: &'a GameId) -> StoreFuture<'a, GameInfo> {
        self.inner.info(id)
    }

    fn list<'a>(
        &'a self,
        filter: GameFilter,
        limit: usize,
        cursor: Option<&'a str>,
    ) -> StoreFuture<'a, Page> {
        self.inner.list(filter, limit, cursor)
    }

    fn game_events_since<'a>(
        &'a self,
        id: &'a GameId,
        after: u64,
    ) -> StoreFuture<'a, Since<GameEvent>> {
        self.inner.game_events_since(id, after)
    }

    fn lobby_events_since(&self, after: u64) -> StoreFuture<'_, Since<LobbyEvent>> {
        self.inner.lobby_events_since(after)
    }

    fn lobby_snapshot(&self, limit: usize) -> StoreFuture<'_, (Vec<GameInfo>, u64)> {
        self.inner.lobby_snapshot(limit)
    }

    fn open_games_by_creator(&self) -> StoreFuture<'_, Vec<(GameId, IpAddr)>> {
        self.inner.open_games_by_creator()
    }

    fn writable(&self) -> Option<watch::Receiver<bool>> {
        self.inner.writable()
    }

    fn create_account(&self, account: Account, key: ApiKeyRecord) -> StoreFuture<'_, ()> {
        self.inner.create_account(account, key)
    }

    fn account<'a>(&'a self, id: &'a AccountId) -> StoreFuture<'a, Account> {
        Box::pin(async move {
            if self.accounts_down.load(Ordering::SeqCst) {
                return Err(StoreError::Unavailable("the database is down".to_owned()));
            }
            if self.accounts_damaged.load(Ordering::SeqCst) {
                return Err(StoreError::DamagedData(
                    "database disk image is malformed".to_owned(),
                ));
            }
            let gated = self.gate.lock().unwrap().as_ref() == Some(id);
            // Read first, then wait: neither reader goes on (to commit) before both have read.
            let account = self.inner.account(id).await;
            if gated && self.gated.fetch_add(1, Ordering::SeqCst) < 2 {
                self.barrier.wait().await;
            }
            account
        })
    }

    fn account_by_name<'a>(&'a self, key: &'a str) -> StoreFuture<'a, Account> {
        Box::pin(async move {
            let found = self.inner.account_by_name(key).await;
            // Answered late, as read: two registrations of one name both find it free.
            if self.batched.load(Ordering::SeqCst) {
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
            found
        })
    }

    fn account_by_api_key<'a>(
        &'a self,
        key_id: &'a str,
    ) -> StoreFuture<'a, (Account, ApiKeyRecord)> {
        self.inner.account_by_api_key(key_id)
    }

    fn add_api_key<'a>(&'a self, id: &'a AccountId, key: ApiKeyRecord) -> StoreFuture<'a, ()> {
        self.inner.add_api_key(id, key)
    }

    fn revoke_api_key<'a>(
        &'a self,
        id: &'a AccountId,
        key_id: &'a str,
        now: SystemTime,
    ) -> StoreFuture<'a, bool> {
        self.inner.revoke_api_key(id, key_id, now)
    }

    fn api_keys<'a>(&'a self, id: &'a AccountId) -> StoreFuture<'a, Vec<ApiKeyRecord>> {
        self.inner.api_keys(id)
    }

    fn leaderboard<'a>(
        &'a self,
        speed: Speed,
        limit: usize,
        cursor: Option<&'a str>,
    ) -> StoreFuture<'a, LeaderboardPage> {
        self.inner.leaderboard(speed, limit, cursor)
    }

    fn player_games<'a>(
        &'a self,
        id: &'a AccountId,
        filter: PlayerGameFilter,
        limit: usize,
        cursor: Option<&'a str>,
    ) -> StoreFuture<'a, Page> {
        self.inner.player_games(id, filter, limit, cursor)
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        self.inner.close()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::TimeControl;
    use crate::manager::NewGame;
    use oanquan_rules::{Player, Preset};

    /// The second rematch offer creates the rematch before it commits the event that names
    /// it: a client that opens the rematch as soon as it hears of it finds it.
    #[tokio::test]
    async fn a_rematch_exists_before_the_event_that_names_it() {
        let (store, manager) = FaultyStore::with_manager();
        let created = manager
            .create_game(NewGame {
                rules: Preset::Standard.rules(),
                preset: Some(Preset::Standard),
                start: None,
                seat: Some(Player::First),
                display_name: "Lan".to_owned(),
                computer: None,
                time_control: TimeControl::Untimed,
                account: None,
                rated: false,
            })
            .await
            .unwrap();
        let id = created.game.id.clone();
        let joined = manager.join_game(&id, "Minh").await.unwrap();
        manager.resign(&id, &created.token).await.unwrap();
        manager.offer_rematch(&id, &created.token).await.unwrap();
        let started = manager.offer_rematch(&id, &joined.token).await.unwrap();
        let next = started.rematch.expect("both asked").id;
        let writes = store.writes.lock().unwrap().clone();
        let created_at = writes
            .iter()
            .position(|(create, game)| *create && *game == next)
            .expect("the rematch was created");
        let linked_at = writes
            .iter()
            .rposition(|(create, game)| !*create && *game == id)
            .expect("the old game was written");
        assert!(created_at < linked_at, "{writes:?}");
    }
}
