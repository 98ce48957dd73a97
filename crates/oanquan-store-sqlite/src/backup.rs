//! `oanquan-server backup`: a consistent copy of a database, safe while a server writes it.
//!
//! SQLite's online backup API copies every page inside one read transaction of its own, so the
//! copy is a snapshot of one moment even while the server commits moves (WAL lets the reader
//! and the writer proceed together). It goes through SQLite's locks, not the server's
//! `.lock` file, which it takes only for a moment at the end, to tidy up after itself beside a
//! stopped server (see [`TidyCompanions`]). The copy is written next to its destination under a
//! temporary name, checked (integrity, application id, schema version), switched out of WAL
//! mode so that the file alone is the whole database, synced, and only then renamed into place.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rusqlite::backup::{Backup, StepResult};
use rusqlite::{Connection, OpenFlags};

use crate::schema::{self, APPLICATION_ID, BUSY_TIMEOUT, OpenError};

/// What a finished backup wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupReport {
    /// The copy.
    pub to: PathBuf,
    /// Its size in bytes.
    pub bytes: u64,
    /// Games it holds.
    pub games: i64,
    /// Its schema version.
    pub schema_version: i32,
    /// Partial copies to the same destination that earlier backups left when they were killed
    /// (their process is gone), removed before this one began.
    pub removed_partials: Vec<PathBuf>,
}

/// Why a backup was not made. The source database is never changed; no partial copy is left.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    /// The destination exists and `force` was not given.
    #[error("{0} exists; nothing was written. Pass --force to replace it, or choose another --to")]
    Exists(PathBuf),
    /// The destination is the database itself: renaming the copy over it would pull the file
    /// from under a running server, whose later moves would be lost. A link to it is refused
    /// too (replacing the link would be harmless, but the backup would not be a second file).
    #[error(
        "{0} is the database itself; nothing was written. Choose another --to: a backup is a \
         second file"
    )]
    SameFile(PathBuf),
    /// The destination exists and is not a regular file (a directory, a device, a FIFO, a
    /// socket): renaming the copy over it would replace, say, `/dev/null` for the whole machine.
    #[error(
        "{0} is not a regular file (a directory, a device, a FIFO or a socket); nothing was \
         written. --force replaces a file only: choose another --to"
    )]
    NotAFile(PathBuf),
    /// A destination SQLite would not read as a file name (a `file:` URI): the copy would go
    /// elsewhere than the path checked and renamed.
    #[error(
        "{path}: SQLite reads this name as {what}, not as a file name; nothing was written. \
         For a file of that name, write ./{path}"
    )]
    SpecialName {
        /// The name given.
        path: PathBuf,
        /// What SQLite would make of it.
        what: &'static str,
    },
    /// No database at the source path.
    #[error("{0}: no such database file; point --database at the server's database")]
    Missing(PathBuf),
    /// The destination's folder does not exist (or is not a folder).
    #[error("{0}: no such folder; nothing was written. Create it, or choose another --to")]
    NoFolder(PathBuf),
    /// The source is not one of our databases (or a damaged one).
    #[error(transparent)]
    Source(#[from] OpenError),
    /// The copy does not pass its checks; it was deleted.
    #[error(
        "the copy failed its check ({0}); it was deleted. The database itself is unchanged: \
         check it (see STORAGE.md) and try again"
    )]
    Verify(String),
    /// SQLite failed.
    #[error("{context}: {source}")]
    Sqlite {
        /// What we were doing.
        context: String,
        /// The error.
        #[source]
        source: rusqlite::Error,
    },
    /// The file system failed.
    #[error("{context}: {source}")]
    Io {
        /// What we were doing.
        context: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

fn sqlite(context: impl Into<String>) -> impl FnOnce(rusqlite::Error) -> BackupError {
    let context = context.into();
    move |source| BackupError::Sqlite { context, source }
}

fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> BackupError {
    let context = context.into();
    move |source| BackupError::Io { context, source }
}

/// Whether both paths name one file: the same path written two ways or a link, symbolic or (on
/// Unix, where device and inode are compared) hard.
fn same_file(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt as _;
        match (std::fs::metadata(a), std::fs::metadata(b)) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    {
        match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        }
    }
}

/// Copies the database at `from` to `to` (see the module docs). Blocking.
///
/// # Errors
///
/// [`BackupError`]: `to` exists without `force`, `from` is not one of our databases, the copy
/// fails its check, or I/O fails.
pub fn backup(from: &Path, to: &Path, force: bool) -> Result<BackupReport, BackupError> {
    if let Some(what) = schema::not_a_file_name(from) {
        return Err(OpenError::SpecialName {
            path: from.to_owned(),
            what,
        }
        .into());
    }
    // `:memory:` is a plain name once `.partial-N` is added to it: only URIs go elsewhere.
    if let Some(what) = schema::not_a_file_name(to).filter(|_| to.to_str() != Some(":memory:")) {
        return Err(BackupError::SpecialName {
            path: to.to_owned(),
            what,
        });
    }
    if same_file(from, to) {
        return Err(BackupError::SameFile(to.to_owned()));
    }
    if !force && to.exists() {
        return Err(BackupError::Exists(to.to_owned()));
    }
    // A link is replaced itself (its target is untouched), like a file.
    if let Ok(metadata) = std::fs::symlink_metadata(to)
        && !(metadata.is_file() || metadata.file_type().is_symlink())
    {
        return Err(BackupError::NotAFile(to.to_owned()));
    }
    // Before the copy is made: otherwise SQLite's error would name the partial copy's path.
    let folder = match to.parent() {
        Some(folder) if !folder.as_os_str().is_empty() => folder,
        _ => Path::new("."),
    };
    if !folder.is_dir() {
        return Err(BackupError::NoFolder(folder.to_owned()));
    }
    match std::fs::metadata(from) {
        Ok(metadata) if !metadata.is_file() => {
            return Err(OpenError::not_a_file(from, &metadata).into());
        }
        Ok(metadata) if metadata.len() == 0 => {
            return Err(OpenError::Empty {
                path: from.to_owned(),
            }
            .into());
        }
        Ok(_) => {}
        Err(_) => return Err(BackupError::Missing(from.to_owned())),
    }
    // Declared before `source`, so that it runs once the connection is closed.
    let _tidy = TidyCompanions {
        database: from,
        made: Some(schema::NewCompanions::note(from)),
    };
    let source = Connection::open_with_flags(
        from,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(sqlite(format!("{}: opening read-only", from.display())))?;
    source
        .busy_timeout(BUSY_TIMEOUT)
        .map_err(sqlite("setting the busy timeout"))?;
    let header = schema::vet_header(&source, from)?;
    if header.blank {
        return Err(BackupError::Source(OpenError::Foreign {
            path: from.to_owned(),
            application_id: 0,
            tables: 0,
        }));
    }

    let removed_partials = remove_stale_partials(to);
    let mut partial = to.as_os_str().to_owned();
    partial.push(format!(".partial-{}", std::process::id()));
    let partial = PathBuf::from(partial);
    let result = copy_and_check(&source, &partial, header.version);
    drop(source);
    let games = match result {
        Ok(games) => games,
        Err(error) => {
            remove_quietly(&partial);
            return Err(error);
        }
    };
    let bytes = std::fs::metadata(&partial)
        .map_err(io(format!("{}: reading its size", partial.display())))?
        .len();
    std::fs::rename(&partial, to).map_err(|error| {
        remove_quietly(&partial);
        io(format!("renaming the copy to {}", to.display()))(error)
    })?;
    // The rename itself is durable only once the folder is synced.
    if let Some(folder) = to.parent().filter(|p| !p.as_os_str().is_empty()) {
        if let Ok(folder) = std::fs::File::open(folder) {
            let _ = folder.sync_all();
        }
    }
    Ok(BackupReport {
        to: to.to_owned(),
        bytes,
        games,
        schema_version: header.version,
        removed_partials,
    })
}

/// Copies `source` into a new file at `path` and checks it; returns its number of games.
fn copy_and_check(source: &Connection, path: &Path, version: i32) -> Result<i64, BackupError> {
    remove_quietly(path);
    let mut copy =
        Connection::open(path).map_err(sqlite(format!("{}: creating", path.display())))?;
    {
        let backup = Backup::new(source, &mut copy).map_err(sqlite("starting the backup"))?;
        // All pages in one step: one read transaction, so one consistent moment. The server's
        // writer never holds a lock that blocks a WAL reader for long; retry briefly if it does.
        let deadline = Instant::now() + BUSY_TIMEOUT;
        loop {
            match backup.step(-1).map_err(sqlite("copying the pages"))? {
                StepResult::Done => break,
                StepResult::More => {}
                _ if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
                _ => {
                    return Err(BackupError::Verify(
                        "the database stayed locked; is a process other than oanquan-server \
                         holding it?"
                            .to_owned(),
                    ));
                }
            }
        }
    }
    // One file, not a WAL database: the copy is complete by itself, and opens read-only
    // anywhere.
    let mode: String = copy
        .query_row("PRAGMA journal_mode = DELETE", [], |row| row.get(0))
        .map_err(sqlite("taking the copy out of WAL mode"))?;
    if !mode.eq_ignore_ascii_case("delete") {
        return Err(BackupError::Verify(format!("journal mode {mode}")));
    }
    // The copy is complete by itself: no log of it can be missing (`run_state` came with the
    // server's "running" mark, which would refuse the restored copy as a file without its log).
    if version >= 7 {
        schema::mark_running(&copy, false).map_err(sqlite("marking the copy as complete"))?;
    }
    let integrity: Vec<String> = copy
        .prepare("PRAGMA integrity_check(5)")
        .and_then(|mut statement| {
            statement
                .query_map([], |row| row.get(0))?
                .collect::<Result<_, _>>()
        })
        .map_err(sqlite("checking the copy"))?;
    if integrity != ["ok"] {
        return Err(BackupError::Verify(format!(
            "integrity check: {}",
            integrity.join("; ")
        )));
    }
    let (application_id, copied_version, games): (i32, i32, i64) = copy
        .query_row(
            "SELECT (SELECT application_id FROM pragma_application_id),
                    (SELECT user_version FROM pragma_user_version),
                    (SELECT count(*) FROM games)",
            [],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )
        .map_err(sqlite("reading the copy's header"))?;
    if application_id != APPLICATION_ID || copied_version != version {
        return Err(BackupError::Verify(format!(
            "application_id {application_id:#010x}, schema version {copied_version}"
        )));
    }
    copy.close()
        .map_err(|(_, error)| sqlite("closing the copy")(error))?;
    std::fs::File::open(path)
        .and_then(|file| file.sync_all())
        .map_err(io(format!("{}: syncing", path.display())))?;
    Ok(games)
}

/// Removes the partial copies to `to` (`TO.partial-PID` and their journals) whose backup process
/// is gone: a backup killed mid-copy cannot remove its own, and a job killed again and again
/// would fill the disk with them. Where processes cannot be looked up (no `/proc`), none are
/// removed: a live backup's copy must never be pulled from under it.
fn remove_stale_partials(to: &Path) -> Vec<PathBuf> {
    let proc = Path::new("/proc");
    let (Some(name), true) = (to.file_name(), proc.join("self").exists()) else {
        return Vec::new();
    };
    let folder = match to.parent() {
        Some(folder) if !folder.as_os_str().is_empty() => folder,
        _ => Path::new("."),
    };
    let prefix = format!("{}.partial-", name.to_string_lossy());
    let Ok(entries) = std::fs::read_dir(folder) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(pid) = file_name
            .to_str()
            .and_then(|n| n.strip_prefix(&prefix))
            .filter(|pid| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        if pid != std::process::id().to_string() && !proc.join(pid).exists() {
            let path = folder.join(&file_name);
            remove_quietly(&path);
            removed.push(path);
        }
    }
    removed.sort();
    removed
}

/// Removes the `-wal` and `-shm` that the backup's read-only look made beside a database no
/// server is running on. A read-only connection cannot remove them at close as the last
/// writer does, and an empty `-wal` left beside a stopped server's database looks like a
/// crash's log, which STORAGE.md says never to delete. Whether a server runs is what its
/// `.lock` says: they are removed only while holding that lock (taken without waiting and
/// given up at once), so never from under a server that started meanwhile.
struct TidyCompanions<'a> {
    database: &'a Path,
    made: Option<schema::NewCompanions>,
}

impl Drop for TidyCompanions<'_> {
    fn drop(&mut self) {
        let Some(made) = self.made.take().filter(schema::NewCompanions::any_made) else {
            return;
        };
        #[cfg(unix)]
        {
            use rustix::fs::{FlockOperation, flock};
            // Opened as the server opens it (and refused where it would refuse), so a server
            // starting now waits on the same lock; nothing is written to it (its content and
            // time are the last server's).
            let Ok((lock, _)) = schema::open_lock_file(self.database) else {
                return;
            };
            if flock(&lock, FlockOperation::NonBlockingLockExclusive).is_ok() {
                made.remove();
                let _ = flock(&lock, FlockOperation::Unlock);
            }
        }
        #[cfg(not(unix))]
        let _ = (made, self.database);
    }
}

fn remove_quietly(path: &Path) {
    let _ = std::fs::remove_file(path);
    for suffix in ["-journal", "-wal", "-shm"] {
        let _ = std::fs::remove_file(schema::companion(path, suffix));
    }
}
