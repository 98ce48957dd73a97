//! What a SQLite failure means for the caller: unavailable for now, a bug, or a damaged game.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Mutex;

use oanquan_game::{GameId, StoreError};
use rusqlite::ErrorCode;
use tracing::{debug, error};

/// Errors that say the file cannot be written (or read) now, rather than that a request or
/// the data is wrong: the same write may succeed once an operator frees disk space or fixes
/// permissions.
pub(crate) fn is_unavailable(error: &rusqlite::Error) -> bool {
    matches!(
        error.sqlite_error_code(),
        Some(
            ErrorCode::DiskFull
                | ErrorCode::ReadOnly
                | ErrorCode::SystemIoFailure
                | ErrorCode::CannotOpen
                | ErrorCode::PermissionDenied
                | ErrorCode::DatabaseBusy
                | ErrorCode::DatabaseLocked
                | ErrorCode::FileLockingProtocolFailed
        )
    )
}

/// Whether `error` says a stored value does not read as the type its column always holds
/// (text that is not UTF-8, a blob where a number was written, a number out of range): a
/// flipped byte inside a row, which SQLite's page checks do not see. An outside probe got
/// INTERNAL, not DATA_LOSS, for such a byte in a move's row on half of its flips.
fn is_undecodable(error: &rusqlite::Error) -> bool {
    matches!(
        error,
        rusqlite::Error::FromSqlConversionFailure(..)
            | rusqlite::Error::Utf8Error(..)
            | rusqlite::Error::InvalidColumnType(..)
            | rusqlite::Error::IntegralValueOutOfRange(..)
    )
}

/// Whether `error` is a `UNIQUE` constraint refusing a row (as opposed to a primary key's or
/// another constraint): a key taken, which the caller may report as such.
pub(crate) fn is_unique_violation(error: &rusqlite::Error) -> bool {
    matches!(
        error,
        rusqlite::Error::SqliteFailure(failure, _)
            if failure.code == ErrorCode::ConstraintViolation
                && failure.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
    )
}

pub(crate) fn backend(error: rusqlite::Error) -> StoreError {
    if is_unavailable(&error) {
        StoreError::Unavailable(format!("sqlite: {error}"))
    } else if matches!(
        error.sqlite_error_code(),
        Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase)
    ) || is_undecodable(&error)
    {
        StoreError::DamagedData(format!("sqlite: {error}"))
    } else {
        StoreError::Backend(format!("sqlite: {error}"))
    }
}

/// `result` with a damaged file where the read for game `id` went counted as that game's
/// damage.
pub(crate) fn of_game<T>(id: &GameId, result: Result<T, StoreError>) -> Result<T, StoreError> {
    result.map_err(|error| match error {
        StoreError::DamagedData(detail) => corrupt(id, detail),
        error => error,
    })
}

pub(crate) fn corrupt(id: &GameId, why: impl fmt::Display) -> StoreError {
    StoreError::Damaged {
        id: id.clone(),
        detail: why.to_string(),
    }
}

/// Games (or lobby events) found damaged, each logged once: a listing that skips a damaged
/// game on every call must not flood the log.
#[derive(Debug, Default)]
pub(crate) struct Damage {
    reported: Mutex<HashSet<String>>,
    /// The games among them: every later read of one answers its damage at once, so that a
    /// game whose log was found damaged (at start, by its replay) does not go on showing its
    /// summary, which still decodes, as a game that can be played.
    games: Mutex<HashMap<GameId, String>>,
}

impl Damage {
    pub(crate) fn report(&self, what: &str, error: &dyn fmt::Display) {
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

    pub(crate) fn contains(&self, what: &str) -> bool {
        self.reported
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains(what)
    }

    /// Reports `result`'s error if it says a game is damaged.
    pub(crate) fn check<T>(&self, result: Result<T, StoreError>) -> Result<T, StoreError> {
        if let Err(error @ StoreError::Damaged { id, detail }) = &result {
            self.games
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .entry(id.clone())
                .or_insert_with(|| detail.clone());
            self.report(&format!("game {id}"), error);
        }
        result
    }

    /// The error for game `id` if it was found damaged before: the same as then.
    pub(crate) fn known(&self, id: &GameId) -> Option<StoreError> {
        let games = self
            .games
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        games.get(id).map(|detail| corrupt(id, detail))
    }
}
