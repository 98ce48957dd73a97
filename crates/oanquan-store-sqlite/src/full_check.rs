//! The full integrity check, once, in the background after start.
//!
//! The start-up check is `PRAGMA quick_check`: it reads every page but does not compare the
//! indexes with their tables. An index that no longer agrees with its table (one flipped byte
//! in a key) passes it and then hides a game from the lookups that use the index, with no
//! error: `GetGame` says the game does not exist. `PRAGMA integrity_check` finds it, at about
//! 2.4 times the cost (0.65 s against 0.27 s on a 213 MB file), which is why it does not hold
//! the start up: it runs on its own read-only connection while the server serves, and says at
//! ERROR what it found. It is interrupted at close, so that the writer stays the last
//! connection (SQLite folds the WAL in only then).

use std::path::Path;
use std::thread;
use std::time::Instant;

use rusqlite::InterruptHandle;
use tracing::{debug, error, info, warn};

use crate::schema;

/// How many problems the check lists at most: enough to say what is wrong, short enough for a
/// log line.
const MAX_PROBLEMS: u32 = 20;

/// What the check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Nothing wrong.
    Intact,
    /// SQLite's words for each problem (at most 20).
    Damaged(Vec<String>),
    /// Stopped at close before it ended.
    Interrupted,
    /// It could not run (the file could not be opened, say); logged.
    NotRun(String),
}

/// The check running in its thread.
pub(crate) struct FullCheck {
    interrupt: InterruptHandle,
    thread: thread::JoinHandle<Outcome>,
}

impl FullCheck {
    /// Starts the check of `path`; `None` (logged) when its connection or thread cannot start.
    pub(crate) fn start(path: &Path) -> Option<FullCheck> {
        let conn = match schema::open_reader(path) {
            Ok(conn) => conn,
            Err(error) => {
                warn!(path = %path.display(), %error, "cannot start the full integrity check");
                return None;
            }
        };
        let interrupt = conn.get_interrupt_handle();
        let shown = path.to_owned();
        let thread = thread::Builder::new()
            .name("oanquan-sqlite-check".to_owned())
            .spawn(move || {
                let started = Instant::now();
                let outcome = run(&conn);
                report(&shown, &outcome, started);
                outcome
            })
            .inspect_err(|error| {
                warn!(path = %path.display(), %error, "cannot start the full integrity check");
            })
            .ok()?;
        Some(FullCheck { interrupt, thread })
    }

    /// Stops the check where it is and waits for its thread.
    pub(crate) fn stop(self) -> Outcome {
        self.interrupt.interrupt();
        self.wait()
    }

    /// Waits for the check to end by itself.
    pub(crate) fn wait(self) -> Outcome {
        self.thread
            .join()
            .unwrap_or_else(|_| Outcome::NotRun("the check's thread panicked".to_owned()))
    }
}

fn run(conn: &rusqlite::Connection) -> Outcome {
    let rows = conn
        .prepare(&format!("PRAGMA integrity_check({MAX_PROBLEMS})"))
        .and_then(|mut statement| {
            statement
                .query_map([], |row| row.get::<_, String>(0))?
                .collect::<Result<Vec<_>, _>>()
        });
    match rows {
        Ok(rows) if rows == ["ok"] => match statuses_disagree(conn) {
            Ok(problems) if problems.is_empty() => Outcome::Intact,
            Ok(problems) => Outcome::Damaged(problems),
            Err(error) => Outcome::NotRun(error.to_string()),
        },
        Ok(rows) => Outcome::Damaged(rows),
        Err(error)
            if error.sqlite_error_code() == Some(rusqlite::ErrorCode::OperationInterrupted) =>
        {
            Outcome::Interrupted
        }
        // A page too broken to walk stops the check itself: that is damage too.
        Err(error)
            if matches!(
                error.sqlite_error_code(),
                Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase)
            ) =>
        {
            Outcome::Damaged(vec![error.to_string()])
        }
        Err(error) => Outcome::NotRun(error.to_string()),
    }
}

/// Games whose `status` column (what listings filter by) is not the status in their own record:
/// a flipped byte there passes every page check, and an outside probe saw a finished game
/// listed as open, or (`finishec`) under no filter at all, with nothing said.
fn statuses_disagree(conn: &rusqlite::Connection) -> rusqlite::Result<Vec<String>> {
    let mut statement = conn.prepare(&format!(
        "SELECT id, status FROM games
         WHERE NOT json_valid(info) OR status IS NOT json_extract(info, '$.status')
         LIMIT {MAX_PROBLEMS}"
    ))?;
    statement
        .query_map([], |row| {
            let id: String = row.get(0)?;
            let status: String = row.get(1)?;
            Ok(format!(
                "game {id}: its status column says {status:?}, not what its record says \
                 (listings filter by the column)"
            ))
        })?
        .collect()
}

fn report(path: &Path, outcome: &Outcome, started: Instant) {
    let path = path.display();
    let seconds = started.elapsed().as_secs_f64();
    match outcome {
        Outcome::Intact => info!(%path, seconds, "full integrity check: the database is intact"),
        Outcome::Damaged(problems) => error!(
            %path,
            problems = %problems.join("; "),
            "full integrity check: the database file is damaged. Games or accounts may be \
             missing from lookups and listings (an index that no longer agrees with its table). \
             Stop the server, keep a copy of the file with its -wal, and repair the copy with \
             `sqlite3 FILE REINDEX` or restore a backup (see STORAGE.md)"
        ),
        Outcome::Interrupted => debug!(%path, seconds, "full integrity check stopped at close"),
        Outcome::NotRun(why) => warn!(%path, why, "the full integrity check could not run"),
    }
}
