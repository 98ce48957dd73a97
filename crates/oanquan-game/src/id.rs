//! Game ids: opaque, URL-safe, checked in shape when they come from a client or a store.

use std::fmt;
use std::sync::Arc;

use crate::token::random_game_id;

/// Longest game id accepted from a client; ours are 16 characters.
const MAX_GAME_ID_LEN: usize = 64;

/// An opaque, URL-safe game id. Shared rather than owned: a move clones its game's id several
/// times (its state's load and commit, its events), each a reference count instead of an
/// allocation (BENCHMARKS.md, issue 20).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GameId(Arc<str>);

/// Why a client-supplied game id is malformed (as opposed to unknown).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum GameIdError {
    /// Empty string.
    #[error("game_id is empty; pass the id returned by CreateGame or ListGames")]
    Empty,
    /// Too long or not URL-safe: cannot be one of ours.
    #[error("game_id is not a valid id (at most {MAX_GAME_ID_LEN} characters of A-Z a-z 0-9 - _)")]
    Malformed,
}

impl GameId {
    /// A fresh random id.
    #[must_use]
    pub fn generate() -> GameId {
        GameId(random_game_id().into())
    }

    /// Checks the shape of an id from a client or a store.
    ///
    /// # Errors
    ///
    /// [`GameIdError`] if it is empty, too long or not URL-safe.
    pub fn parse(s: &str) -> Result<GameId, GameIdError> {
        if s.is_empty() {
            Err(GameIdError::Empty)
        } else if s.len() > MAX_GAME_ID_LEN
            || !s
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
        {
            Err(GameIdError::Malformed)
        } else {
            Ok(GameId(s.into()))
        }
    }

    /// The id's text.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for GameId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
