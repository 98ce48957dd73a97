//! What a PostgreSQL failure means for the caller: unavailable for now (the database is away,
//! busy or out of room; the same request may succeed later), a bug, or a damaged game.

use oanquan_game::StoreError;
use tokio_postgres::error::SqlState;

// The registry of what was found damaged, shared with the other durable store.
pub(crate) use oanquan_game::damage::{Damage, corrupt};

/// A database error as the store's callers see it.
pub(crate) fn backend(error: tokio_postgres::Error) -> StoreError {
    if is_unavailable(&error) {
        StoreError::Unavailable(format!("postgres: {}", describe(&error)))
    } else {
        StoreError::Backend(format!("postgres: {}", describe(&error)))
    }
}

/// The server's own message where there is one: `Display` of a database error says only
/// "db error".
pub(crate) fn describe(error: &tokio_postgres::Error) -> String {
    match error.as_db_error() {
        Some(db) => format!("{} ({})", db.message(), db.code().code()),
        None => match std::error::Error::source(error) {
            Some(source) => format!("{error}: {source}"),
            None => error.to_string(),
        },
    }
}

/// Errors that say the database cannot take the request now, rather than that the request or
/// the data is wrong.
pub(crate) fn is_unavailable(error: &tokio_postgres::Error) -> bool {
    let Some(db) = error.as_db_error() else {
        // No answer from the server: the connection broke, timed out or never opened. The
        // other errors without one are our own conversions of parameters and columns: bugs.
        let text = error.to_string();
        return ![
            "error serializing",
            "error deserializing",
            "invalid column",
            "expected ",
        ]
        .iter()
        .any(|prefix| text.starts_with(prefix));
    };
    let code = db.code();
    let class = &code.code()[..2];
    matches!(
        class,
        // Connection exceptions; insufficient resources (disk full, out of memory, too many
        // connections); operator intervention (shutdown, statement timeout, cannot connect
        // now); system errors (I/O).
        "08" | "53" | "57" | "58"
    ) || [
        // Concurrent transactions that PostgreSQL broke up: the same request may go through.
        SqlState::T_R_SERIALIZATION_FAILURE,
        SqlState::T_R_DEADLOCK_DETECTED,
        SqlState::LOCK_NOT_AVAILABLE,
        // A standby, or a database switched to read-only.
        SqlState::READ_ONLY_SQL_TRANSACTION,
        SqlState::IDLE_IN_TRANSACTION_SESSION_TIMEOUT,
    ]
    .contains(code)
}

/// A connection the pool could not give: the database is away or every connection is busy.
pub(crate) fn pool(error: deadpool_postgres::PoolError) -> StoreError {
    match error {
        // Opening a connection failed: whatever the database said (an outside probe's
        // `ALTER DATABASE … ALLOW_CONNECTIONS false` answers 55000, which in a query would be
        // a bug), it cannot be used now, and the same call may succeed once it can.
        deadpool_postgres::PoolError::Backend(error) => {
            StoreError::Unavailable(format!("postgres: cannot connect: {}", describe(&error)))
        }
        deadpool_postgres::PoolError::Timeout(kind) => StoreError::Unavailable(format!(
            "postgres: no database connection in time ({kind:?}): the database is slow, away, \
             or every connection of the pool is busy"
        )),
        deadpool_postgres::PoolError::Closed => {
            StoreError::Unavailable("the database is closed (the server is stopping)".to_owned())
        }
        other => StoreError::Unavailable(format!("postgres: {other}")),
    }
}
