//! What a durable store found damaged, for the life of the process: each damaged thing logged
//! once, and each damaged game answered as damaged from then on.
//!
//! A listing that skips a damaged game on every call must not flood the log; and a game whose
//! log was found damaged (at start, by its replay, or for a watcher resuming) must not go on
//! showing its summary, which still decodes, as a game that can be played, nor stay listed,
//! nor take a move (outside probes saw all three). The SQLite and PostgreSQL stores share this.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Mutex;

use tracing::{debug, error};

use crate::{GameId, StoreError};

/// Game `id`'s damage, as a store reports it.
pub fn corrupt(id: &GameId, why: impl fmt::Display) -> StoreError {
    StoreError::Damaged {
        id: id.clone(),
        detail: why.to_string(),
    }
}

/// The damage a store found; see the module docs.
#[derive(Debug, Default)]
pub struct Damage {
    reported: Mutex<HashSet<String>>,
    /// The games among them, with what was found.
    games: Mutex<HashMap<GameId, String>>,
}

impl Damage {
    /// Logs `what` (a game, a lobby event, an account) with `error`, at ERROR the first time
    /// and at debug after.
    pub fn report(&self, what: &str, error: &dyn fmt::Display) {
        let first = self
            .reported
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(what.to_owned());
        if first {
            error!(
                damaged = %what,
                %error,
                "stored data does not load; the calls that read it answer DATA_LOSS, and listings \
                 and the lobby skip what of it they cannot read (see STORAGE.md)"
            );
        } else {
            debug!(damaged = %what, "skipping damaged stored data");
        }
    }

    /// Whether `what` was reported.
    pub fn contains(&self, what: &str) -> bool {
        self.reported
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains(what)
    }

    /// `result`, with its error recorded and reported if it says a game is damaged.
    ///
    /// # Errors
    ///
    /// `result`'s.
    pub fn check<T>(&self, result: Result<T, StoreError>) -> Result<T, StoreError> {
        if let Err(error) = &result {
            self.game(error);
        }
        result
    }

    /// Records and reports a game's damage (nothing for an error of another kind).
    pub fn game(&self, error: &StoreError) {
        if let StoreError::Damaged { id, detail } = error {
            self.games
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .entry(id.clone())
                .or_insert_with(|| detail.clone());
            self.report(&format!("game {id}"), error);
        }
    }

    /// The error for game `id` if it was found damaged before: the same as then.
    pub fn known(&self, id: &GameId) -> Option<StoreError> {
        let games = self
            .games
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        games.get(id).map(|detail| corrupt(id, detail))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_damaged_game_is_known_from_then_on_and_other_errors_are_not() {
        let damage = Damage::default();
        let id = GameId::generate();
        assert!(damage.known(&id).is_none());
        let _ = damage.check::<()>(Err(StoreError::NotFound));
        assert!(damage.known(&id).is_none());
        let _ = damage.check::<()>(Err(corrupt(&id, "a move out of order")));
        assert_eq!(damage.known(&id), Some(corrupt(&id, "a move out of order")));
        assert!(damage.contains(&format!("game {id}")));
        // The first finding stands.
        damage.game(&corrupt(&id, "something else"));
        assert_eq!(damage.known(&id), Some(corrupt(&id, "a move out of order")));
    }
}
