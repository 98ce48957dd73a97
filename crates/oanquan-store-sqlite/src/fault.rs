//! What a SQLite failure means for the caller: unavailable for now, a bug, or a damaged game.

use oanquan_game::{GameId, StoreError};
use rusqlite::ErrorCode;

// The registry of what was found damaged, shared with the other durable store.
pub(crate) use oanquan_game::damage::{Damage, corrupt};

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
