//! What a PostgreSQL failure means for the caller: unavailable for now (the database is away,
//! busy or out of room; the same request may succeed later), a bug, or a damaged game.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Mutex;

use oanquan_game::{GameId, StoreError};
use tokio_postgres::error::SqlState;
use tracing::{debug, error};

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
    /// The games among them: every later read or write of one answers its damage at once, so
    /// that a game whose log was found damaged (at start, by its replay, or for a watcher)
    /// does not go on showing its summary, which still decodes, as a game that can be played,
    /// nor stay listed (an outside probe's did both, and took a move).
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
        if let Err(error @ StoreError::Damaged { .. }) = &result {
            self.game(error);
        }
        result
    }

    /// Records and reports a game's damage (`error` is [`StoreError::Damaged`]; any other is
    /// only reported).
    pub(crate) fn game(&self, error: &StoreError) {
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
    pub(crate) fn known(&self, id: &GameId) -> Option<StoreError> {
        let games = self
            .games
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        games.get(id).map(|detail| corrupt(id, detail))
    }
}
