//! The node's cache of unfinished games: the state it last wrote or read of each, with the
//! version of the row that state is ([`RowVersion`]).
//!
//! A hit is checked against the database before it is used (one small statement: the row's
//! sequence and `xmin`), so another node's commit, or an operator's repair of the row, is
//! always seen: the cache saves loading every move and replaying them, never a read of the
//! row. Commits stay optimistic whatever the cache says: the `UPDATE … WHERE sequence = $2`
//! decides.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use oanquan_game::{GameId, GameState};

use crate::reads::RowVersion;

/// Games cached at most; past it the cache starts again empty (a miss costs one load).
pub(crate) const MAX_CACHED_GAMES: usize = 4096;

#[derive(Debug, Default)]
pub(crate) struct GameCache {
    games: Mutex<HashMap<GameId, (RowVersion, GameState)>>,
}

impl GameCache {
    fn games(&self) -> std::sync::MutexGuard<'_, HashMap<GameId, (RowVersion, GameState)>> {
        // Every change is one map operation: a panic elsewhere leaves the map consistent.
        self.games.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn contains(&self, id: &GameId) -> bool {
        self.games().contains_key(id)
    }

    /// The cached state of `id` if it is the state of the row at `version`; otherwise forgets
    /// it.
    pub(crate) fn get(&self, id: &GameId, version: RowVersion) -> Option<GameState> {
        let mut games = self.games();
        match games.get(id) {
            Some((cached, state)) if *cached == version => Some(state.clone()),
            Some(_) => {
                games.remove(id);
                None
            }
            None => None,
        }
    }

    /// Remembers `state` as the row at `version`. A game that is over is forgotten instead: it
    /// takes no more moves (a rematch offer, if any, loads it once more).
    pub(crate) fn put(&self, state: &GameState, version: RowVersion) {
        let id = &state.info().id;
        let mut games = self.games();
        if state.info().status.is_over() {
            games.remove(id);
            return;
        }
        if games.len() >= MAX_CACHED_GAMES && !games.contains_key(id) {
            games.clear();
        }
        games.insert(id.clone(), (version, state.clone()));
    }
}
