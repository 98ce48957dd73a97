//! Opening a database file: checks first (read-only), then migrations (one transaction).
//!
//! A file is ours when its `PRAGMA application_id` is [`APPLICATION_ID`]; its schema version is
//! `PRAGMA user_version`, the number of [`MIGRATIONS`] applied. Both live in the database header
//! and change inside the migration transaction, so a file is never half migrated.
//!
//! Before anything is written the file is opened read-only and must be either ours (at a schema
//! version this build knows) or a blank SQLite database; anything else (not SQLite, corrupt,
//! another application's, a newer server's) is an [`OpenError`] and the file is left as it was.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, ErrorCode, OpenFlags, TransactionBehavior};

/// `PRAGMA application_id` of our files: "OANQ" in ASCII.
pub const APPLICATION_ID: i32 = 0x4F41_4E51;

/// Migration `i` takes a database from schema version `i` to `i + 1`. Append only: a released
/// migration never changes.
pub(super) const MIGRATIONS: &[&str] = &[
    // 1: games, their moves and event logs, and the lobby's event log.
    "
    CREATE TABLE games (
        ord          INTEGER PRIMARY KEY,   -- creation order: listing order and page cursors
        id           TEXT    NOT NULL UNIQUE,
        status       TEXT    NOT NULL,      -- waiting | active | finished | aborted
        sequence     INTEGER NOT NULL,      -- sequence of the game's last event
        move_count   INTEGER NOT NULL,
        token_first  BLOB,                  -- SHA-256 of the seat's token, never the token
        token_second BLOB,
        info         TEXT    NOT NULL       -- JSON, see codec::InfoDto
    ) STRICT;
    CREATE INDEX games_by_status ON games (status, ord);

    CREATE TABLE moves (
        game   INTEGER NOT NULL REFERENCES games (ord),
        number INTEGER NOT NULL,            -- 1-based
        player TEXT    NOT NULL,            -- first | second
        mv     TEXT    NOT NULL,            -- notation: 3-, 10+
        time   INTEGER NOT NULL,            -- nanoseconds since the Unix epoch
        PRIMARY KEY (game, number)
    ) STRICT, WITHOUT ROWID;

    CREATE TABLE game_events (
        game     INTEGER NOT NULL REFERENCES games (ord),
        sequence INTEGER NOT NULL,          -- 1, 2, 3, ... per game
        time     INTEGER NOT NULL,
        event    TEXT    NOT NULL,          -- JSON, see codec::GameEventDto
        PRIMARY KEY (game, sequence)
    ) STRICT, WITHOUT ROWID;

    CREATE TABLE lobby_events (
        sequence INTEGER PRIMARY KEY,       -- 1, 2, 3, ... for the whole server
        time     INTEGER NOT NULL,
        event    TEXT    NOT NULL           -- JSON, see codec::LobbyEventDto
    ) STRICT;
    ",
    // 2: who created each game, so that a restart counts open games per client again.
    "
    ALTER TABLE games ADD COLUMN creator TEXT; -- IP address (IPv6 as its /64), NULL if unknown
    ",
    // 3: clocks, draw offers and rematches. Those live in the `info` JSON, whose new fields
    // read as an untimed game without offers in older rows (see `codec`); only the hashes of
    // the players' rematch tokens need columns, kept out of the JSON like the seat tokens.
    "
    ALTER TABLE games ADD COLUMN rematch_token_first  BLOB; -- SHA-256, NULL until offered
    ALTER TABLE games ADD COLUMN rematch_token_second BLOB;
    ",
    // 4: accounts, ratings, API keys, and which games each account plays. A seat's account
    // and a rated game's rating changes live in the `info` JSON (absent in older rows, which
    // read as anonymous and unrated, see `codec`); no older game has an account to link.
    "
    CREATE TABLE accounts (
        id           TEXT    PRIMARY KEY,
        username     TEXT    NOT NULL,          -- as registered
        username_key TEXT    NOT NULL UNIQUE,   -- Username::key: one account per name, any case
        created      INTEGER NOT NULL,          -- nanoseconds since the Unix epoch
        wins         INTEGER NOT NULL,
        draws        INTEGER NOT NULL,
        losses       INTEGER NOT NULL,
        version      INTEGER NOT NULL           -- bumped by every change (optimistic concurrency)
    ) STRICT;

    CREATE TABLE ratings (
        account     TEXT    NOT NULL REFERENCES accounts (id),
        speed       TEXT    NOT NULL,           -- bullet | blitz | rapid | classical | correspondence
        rating      REAL    NOT NULL,           -- Glicko-2, exactly as computed
        deviation   REAL    NOT NULL,
        volatility  REAL    NOT NULL,
        games       INTEGER NOT NULL,           -- rated games at this speed
        provisional INTEGER NOT NULL,           -- 1 while Rating::is_provisional, as written
        PRIMARY KEY (account, speed)
    ) STRICT, WITHOUT ROWID;
    -- The leaderboard: one range of one index, already in order.
    CREATE INDEX ratings_leaderboard ON ratings (speed, provisional, rating DESC, account);

    CREATE TABLE api_keys (
        id      TEXT    PRIMARY KEY,            -- the key's public id
        account TEXT    NOT NULL REFERENCES accounts (id),
        hash    BLOB    NOT NULL,               -- SHA-256 of the whole key, never the key
        created INTEGER NOT NULL,
        revoked INTEGER                         -- NULL while the key works
    ) STRICT;
    CREATE INDEX api_keys_by_account ON api_keys (account);

    CREATE TABLE game_players (
        account TEXT    NOT NULL REFERENCES accounts (id),
        game    INTEGER NOT NULL REFERENCES games (ord),
        speed   TEXT,                           -- NULL for an untimed game
        result  TEXT,                           -- win | draw | loss once finished (not aborted)
        PRIMARY KEY (account, game)
    ) STRICT, WITHOUT ROWID;
    ",
    // 5: every game's events in one append-only log, each move inside its `MovePlayed` row,
    // and the `games` row written only when more than a plain move changes (see `writer`):
    // a move appends to the end of one table instead of writing three tables' pages. The
    // rows are copied as they are; a move whose `MovePlayed` event is missing (none was ever
    // written without one) would be lost, and its game read as damaged.
    "
    CREATE TABLE game_log (
        game     INTEGER NOT NULL REFERENCES games (ord),
        sequence INTEGER NOT NULL,          -- 1, 2, 3, ... per game
        time     INTEGER NOT NULL,          -- nanoseconds since the Unix epoch
        event    TEXT    NOT NULL,          -- JSON, see codec::GameEventDto
        player   TEXT,                      -- a MovePlayed row: its move's player, first | second
        mv       TEXT,                      -- and notation: 3-, 10+
        mv_time  INTEGER                    -- and time, when not the event's
    ) STRICT;
    CREATE UNIQUE INDEX game_log_by_game ON game_log (game, sequence);
    INSERT INTO game_log (game, sequence, time, event, player, mv, mv_time)
    SELECT e.game, e.sequence, e.time, e.event, m.player, m.mv, NULLIF(m.time, e.time)
    FROM game_events AS e
    LEFT JOIN moves AS m
        ON m.game = e.game
       AND json_valid(e.event)
       AND json_extract(e.event, '$.type') = 'move_played'
       AND m.number = json_extract(e.event, '$.number')
    ORDER BY e.game, e.sequence;
    DROP TABLE game_events;
    DROP TABLE moves;
    ",
    // 6: what each username looks like as written (`Username::look`), beside its key, so that
    // a name alike only in capitals is taken in either order. Filled in for older accounts at
    // open (`accounts::fill_looks`, called by the store), since SQL cannot compute it.
    "
    ALTER TABLE accounts ADD COLUMN username_look TEXT;
    CREATE INDEX accounts_by_look ON accounts (username_look);
    ",
    // 7: whether a server has the file open (1 from its start to its clean stop, put into the
    // file itself, not only its `-wal`, at start) and how many transactions the writer has
    // committed, which it also records in the lock file: a killed server's file whose `-wal`
    // is missing, cut short or damaged reads as fewer and is refused (see
    // `check_log_present`); before, it was read as it stood before the lost commits.
    "
    CREATE TABLE run_state (
        id      INTEGER PRIMARY KEY CHECK (id = 1),
        running INTEGER NOT NULL,               -- 1 while a server has the file open
        commits INTEGER NOT NULL                -- the writer's transactions, ever
    ) STRICT;
    INSERT INTO run_state (id, running, commits) VALUES (1, 0, 0);
    ",
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i32 = MIGRATIONS.len() as i32;

/// Why a database file cannot be used. The file is left untouched in every case.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// Not an SQLite database at all, or one whose header is damaged.
    #[error(
        "{path}: not an SQLite database, or a damaged one ({detail}). \
         Nothing was changed. Restore it from a backup, or point --database at a new file \
         (move this one away) to start fresh"
    )]
    NotADatabase {
        /// The file.
        path: PathBuf,
        /// SQLite's words.
        detail: String,
    },
    /// An SQLite database of another application.
    #[error(
        "{path}: this SQLite database belongs to another application \
         (application_id {application_id:#010x}, {tables} tables; ours is {APPLICATION_ID:#010x}). \
         Nothing was changed. Point --database at a different file"
    )]
    Foreign {
        /// The file.
        path: PathBuf,
        /// Its `PRAGMA application_id`.
        application_id: i32,
        /// Objects in its schema.
        tables: i64,
    },
    /// Written by a newer server.
    #[error(
        "{path}: schema version {found} was written by a newer oanquan-server (this one knows \
         versions up to {SCHEMA_VERSION}). Nothing was changed. Run a newer oanquan-server, or \
         point --database at another file"
    )]
    Newer {
        /// The file.
        path: PathBuf,
        /// Its schema version.
        found: i32,
    },
    /// Ours, but SQLite's integrity check fails.
    #[error(
        "{path}: the database is corrupt (integrity check: {detail}). Nothing was changed. \
         Restore it from a backup (see STORAGE.md), or move it away to start fresh"
    )]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// The first problems reported.
        detail: String,
    },
    /// A symbolic link to nothing: SQLite would create the file it names, beside that file's
    /// own `-wal` and lock, which this server would not look at (it looks beside the name the
    /// database resolves to, and a link to nothing resolves to nothing).
    #[error(
        "{path} is a symbolic link to {target}, which does not exist. Nothing was changed. Put \
         the database back at {target}, or point --database at the file itself (see STORAGE.md)"
    )]
    DanglingLink {
        /// The link.
        path: PathBuf,
        /// What it points to.
        target: PathBuf,
    },
    /// No database file, but beside its name a write-ahead log with something in it, or a lock
    /// file that records commits: the database was deleted or moved away, and a new one would
    /// have taken its place without a word (and folded the old log away at its first stop).
    #[error(
        "{path} does not exist, but {evidence}: a database was there and has been deleted or \
         moved. Nothing was changed. Put it back (with its -wal beside it), or point --database \
         at where it is now. To start a new database here instead, move {path}-wal, {path}-shm \
         and {path}.lock away first (see STORAGE.md)"
    )]
    Missing {
        /// The file.
        path: PathBuf,
        /// What shows that a database was there.
        evidence: String,
    },
    /// An existing file of zero bytes: not a database, and not taken for a new one (a new
    /// database is made only where no file is), since it may be a database truncated by
    /// accident or a path mistyped onto another file.
    #[error(
        "{path} is an empty file (0 bytes), not a database. Nothing was changed. If it is left \
         over, delete it and the server creates a new database there; otherwise point \
         --database at the right file (see STORAGE.md)"
    )]
    Empty {
        /// The file.
        path: PathBuf,
    },
    /// An SQLite file with nothing in it (no tables, no application id) that is not empty: a
    /// new database is made only where no file is, and this is what a killed server of an
    /// older build left of a new database whose `-wal` is missing.
    #[error(
        "{path} is an SQLite database with no tables in it ({size} bytes), not one of ours. \
         Nothing was changed. If a server was killed and this file's {path}-wal is missing, \
         the games are in that file: put it back beside this one. If the file is left over, \
         delete it and the server creates a new database there (see STORAGE.md)"
    )]
    NoTables {
        /// The file.
        path: PathBuf,
        /// Its size.
        size: u64,
    },
    /// The last server on the file did not stop cleanly, and the write-ahead log it left,
    /// which holds every change since its last checkpoint, is missing, cut short or damaged:
    /// read as it is, the file would lose those changes without a word (see
    /// `check_log_present`).
    #[error(
        "{path}: the last server on this file did not stop cleanly, and what it committed after \
         its last checkpoint is not all there: its write-ahead log {wal} is missing, empty, cut \
         short or damaged, and the database reads as {found} commits where the lock file \
         records {recorded}. Nothing was changed. Put the whole {wal} back beside the database \
         (copy a database with its -wal, or with `oanquan-server backup`). If it is gone for \
         good, or this file is a copy made while a server ran, accept the loss with \
         `sqlite3 {path} \"UPDATE run_state SET running = 0\"` and start again (see STORAGE.md)"
    )]
    LostLog {
        /// The file.
        path: PathBuf,
        /// Its write-ahead log's name.
        wal: PathBuf,
        /// The commits the database holds.
        found: i64,
        /// The commits the lock file records.
        recorded: i64,
    },
    /// Something that is not a regular file where SQLite keeps the database's `-wal` or `-shm`.
    #[error(
        "{path}: {companion} is {kind}, where SQLite keeps the database's {what}. Nothing was \
         changed. Move it away (SQLite makes no such thing), then start again"
    )]
    CompanionNotAFile {
        /// The database.
        path: PathBuf,
        /// The companion's name.
        companion: PathBuf,
        /// What is there.
        kind: &'static str,
        /// "write-ahead log" or "shared-memory index of its log".
        what: &'static str,
    },
    /// The folder the database would be made in does not exist: the server makes a new
    /// database file, never the folders on its way (a mistyped path would grow a tree).
    #[error(
        "{path}: its folder {folder} does not exist. Nothing was changed. Create the folder \
         (`mkdir -p {folder}`), or point --database at a file in a folder that exists (see \
         STORAGE.md)"
    )]
    NoFolder {
        /// The database.
        path: PathBuf,
        /// Its folder.
        folder: PathBuf,
    },
    /// A file stands where the path wants a folder (`games.db/x.db` with `games.db` a file).
    #[error(
        "{path}: a part of this path that should be a folder is a file. Nothing was changed. \
         Point --database at a file in a folder (see STORAGE.md)"
    )]
    NotAFolder {
        /// The database.
        path: PathBuf,
    },
    /// Something that is not a regular file (a directory, a device, a pipe): SQLite only says
    /// "disk I/O error" of it.
    #[error(
        "{path} is {kind}, not a database file. Nothing was changed. Point --database at a \
         file (a new database is created where no file is; see STORAGE.md)"
    )]
    NotAFile {
        /// The path.
        path: PathBuf,
        /// What is there: "a directory", "a special file (...)".
        kind: &'static str,
    },
    /// The file (or its folder, where SQLite keeps its `-wal` and `-shm` files) cannot be
    /// written, or the disk is full: refused at start rather than failing every move later.
    #[error(
        "{path}: the database cannot be written ({detail}). Nothing was changed. Give this user \
         write permission on the file and on its folder (SQLite writes {path}-wal and \
         {path}-shm next to it), or free disk space, then start again (see STORAGE.md)"
    )]
    NotWritable {
        /// The file.
        path: PathBuf,
        /// What failed.
        detail: String,
    },
    /// Anything else: permissions, a missing directory, a locked file, a full disk.
    #[error("{path}: {context}")]
    Sqlite {
        /// The file.
        path: PathBuf,
        /// What we were doing.
        context: &'static str,
        /// The error.
        #[source]
        source: rusqlite::Error,
    },
    /// A name SQLite reads as something other than a file: `:memory:` (a database that
    /// would lose every game at a stop) or a `file:` URI (whose file is not the path the lock
    /// guards, so two servers could write one database).
    #[error(
        "{path}: SQLite reads this name as {what}, not as a file name. Nothing was created.          Use --in-memory for a throwaway server, or give --database a file path (for a file          whose name starts like this, write ./{path})"
    )]
    SpecialName {
        /// The name given.
        path: PathBuf,
        /// What SQLite would make of it.
        what: &'static str,
    },
    /// The operating system refused something (a thread, a file).
    #[error(
        "{path}: another oanquan-server{holder} is using this database (it holds {lock}). \
         Nothing was changed. Stop that server first, or point --database at another file"
    )]
    Locked {
        path: PathBuf,
        lock: PathBuf,
        /// " (pid N)" when the holder wrote its pid, else empty.
        holder: String,
    },
    /// The lock file's name holds something that is not a lock file of ours: taking it would
    /// empty it (a link to another file or to the database, a database named like it).
    #[error(
        "{path}: the lock file {lock} {what}. Nothing was changed: the server writes its pid \
         into that file, which would destroy what is there. Move it away (or give --database \
         another name), then start again"
    )]
    BadLockFile {
        path: PathBuf,
        lock: PathBuf,
        /// What is there instead, as "is …" / "has …".
        what: String,
    },
    #[error("{path}: {context}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What we were doing.
        context: &'static str,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

impl OpenError {
    pub(crate) fn not_a_file(path: &Path, metadata: &std::fs::Metadata) -> OpenError {
        OpenError::NotAFile {
            path: path.to_owned(),
            kind: kind_of(metadata),
        }
    }

    fn sqlite(path: &Path, context: &'static str) -> impl FnOnce(rusqlite::Error) -> OpenError {
        let path = path.to_owned();
        move |source| {
            if matches!(source.sqlite_error_code(), Some(ErrorCode::NotADatabase)) {
                OpenError::NotADatabase {
                    path,
                    detail: source.to_string(),
                }
            } else if matches!(source.sqlite_error_code(), Some(ErrorCode::DatabaseCorrupt)) {
                OpenError::Corrupt {
                    path,
                    detail: source.to_string(),
                }
            } else {
                OpenError::Sqlite {
                    path,
                    context,
                    source,
                }
            }
        }
    }
}

/// What a path that is not a regular file is, for a message.
fn kind_of(metadata: &std::fs::Metadata) -> &'static str {
    if metadata.is_dir() {
        "a directory"
    } else {
        "a special file (a pipe, socket or device)"
    }
}

/// An exclusive lock on `<database>.lock`, held for as long as the store is open (given up at
/// close, even if the store value lives on).
///
/// Two servers on one file would not corrupt it (every commit checks its expected sequence in
/// its transaction) but each would tell only its own watchers about its own moves, so a second
/// server is refused at start instead. `flock` locks belong to the open file, so the kernel
/// releases this one when the process dies, even by SIGKILL: a stale lock file is harmless and
/// is never deleted (deleting lock files races with the next server taking them). A separate
/// file rather than the database itself, because closing any descriptor of the database would
/// drop SQLite's own POSIX locks on it.
///
/// The lock file is also the server's sign of life: while the store is open its modification
/// time is set every [`HEARTBEAT`], so the next server on the file knows when the last one was
/// last alive (see [`FileLock::previous_alive`]), even after a SIGKILL.
#[derive(Debug)]
pub(super) struct FileLock {
    file: std::fs::File,
    /// The lock file, when this start made it: a refused start removes it again.
    made: Option<PathBuf>,
    previous_alive: Option<std::time::SystemTime>,
    previous_log_end: Option<LogEnd>,
    /// What the lock file held before this server wrote its pid in it.
    previous_content: String,
    /// Whether this server has resumed the running turns ([`FileLock::turns_resumed`]): until
    /// then the file's time stays the last server's sign of life, whatever is written in it.
    resumed: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

/// What a lock file records of its database: how many transactions the writer had committed,
/// and which file they were committed to (its device and inode).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LogEnd {
    pub(crate) commits: i64,
    /// `None` where files have no such identity.
    pub(crate) file: Option<(u64, u64)>,
}

/// The device and inode of the file at `path` (its target, through links).
pub(crate) fn file_identity(path: &Path) -> Option<(u64, u64)> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt as _;
        std::fs::metadata(path)
            .ok()
            .map(|meta| (meta.dev(), meta.ino()))
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        None
    }
}

/// Writes into the lock file, after each batch, how many transactions the writer has committed
/// (`run_state.commits`, counted in each one): the lock file outlives a killed server, and the
/// next one compares it with the database to tell a log folded into the file by whoever opened
/// it since (every commit there) from a log lost, cut short or damaged (commits missing; see
/// [`check_log_present`]). Not synced: after a power cut it may say less than was committed,
/// never more. The record names the database file by its device and inode: a copy put in its
/// place (a restored backup, made while a server ran, with fewer commits) is another file, and
/// the record says nothing of it (an outside probe's restores were refused as lost logs).
#[derive(Debug)]
pub(super) struct LogEndMark {
    file: std::fs::File,
    pid: u32,
    database: Option<(u64, u64)>,
    held: HeldMark,
}

/// The last server's sign of life, put back on the lock file after each write into it until
/// this server has resumed the running turns: a start killed before its resume must not pass
/// for time the turns ran (an outside probe's start killed after 0.3 s had the next one charge
/// every running clock the whole outage before it).
#[derive(Debug, Clone)]
struct HeldMark {
    previous_alive: Option<std::time::SystemTime>,
    resumed: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl HeldMark {
    fn hold(&self, file: &std::fs::File) {
        if let Some(alive) = self.previous_alive
            && !self.resumed.load(std::sync::atomic::Ordering::SeqCst)
        {
            let _ = file.set_modified(alive);
        }
    }
}

impl LogEndMark {
    /// Records `commits` (one `pwrite` of the whole content, the same length every time).
    pub(super) fn record(&self, commits: i64) {
        #[cfg(unix)]
        {
            use std::os::unix::fs::FileExt as _;
            let end = LogEnd {
                commits,
                file: self.database,
            };
            let _ = self
                .file
                .write_at(lock_content(self.pid, Some(end)).as_bytes(), 0);
            self.held.hold(&self.file);
        }
    }
}

/// What a server writes into its lock file: its pid (for the message of a server refused by
/// the lock) and, once known, its [`LogEnd`], padded so that every write has one length.
pub(crate) fn lock_content(pid: u32, log_end: Option<LogEnd>) -> String {
    match log_end {
        Some(LogEnd { commits, file }) => {
            let file = file.map_or_else(String::new, |(dev, ino)| format!(" {dev} {ino}"));
            let line = format!("{pid} {commits}{file}");
            format!("{line:<width$}\n", width = LOCK_CONTENT_MAX as usize - 1)
        }
        None => format!("{pid}\n"),
    }
}

/// Reads a lock file's [`LogEnd`]: `PID COMMITS [DEV INO]`. Digits past i64 (the file holds
/// only digits and spaces, see `open_lock_file`) say more than any database holds: an edited
/// lock cannot switch the check off that way.
pub(crate) fn parse_log_end(content: &str) -> Option<LogEnd> {
    let mut words = content.split_ascii_whitespace().skip(1);
    let commits = words.next()?.parse::<i64>().unwrap_or(i64::MAX);
    let file = match (words.next(), words.next()) {
        (Some(dev), Some(ino)) => Some((dev.parse().ok()?, ino.parse().ok()?)),
        _ => None,
    };
    Some(LogEnd { commits, file })
}

/// How often an open store marks its lock file: the most of a running turn a restart can give
/// back (see `GameStore::last_alive`). Short, so that a server that keeps dying soon after it
/// starts cannot stop the running clock by giving back its whole run each time; a mark is one
/// metadata update of a small file.
pub(super) const HEARTBEAT: std::time::Duration = std::time::Duration::from_millis(100);

impl FileLock {
    /// Puts back what the lock file held, and when it was written, for a start that is refused:
    /// "nothing was changed" holds for the lock too. Its time is when the last server was alive,
    /// which the next start charges running clocks up to: an outside probe's refused start
    /// moved it, and the 30 s the server was down were taken from a player's clock.
    pub(super) fn restore(&self) {
        use std::io::{Seek as _, Write as _};
        // Made by this start: "nothing was changed" leaves no lock file either (an outside
        // probe found an empty one beside each refused file). Unlinked while still locked, so
        // a start racing this one is refused by the lock, or makes a file of its own.
        if let Some(made) = &self.made {
            let _ = std::fs::remove_file(made);
            return;
        }
        let mut file = &self.file;
        let _ = file
            .set_len(0)
            .and_then(|()| file.rewind())
            .and_then(|()| file.write_all(self.previous_content.as_bytes()));
        if let Some(alive) = self.previous_alive {
            let _ = self.file.set_modified(alive);
        }
    }
    /// When the server that had the file before this one was last known alive: the lock
    /// file's modification time as this store found it. `None` for a new lock file.
    pub(super) fn previous_alive(&self) -> Option<std::time::SystemTime> {
        self.previous_alive
    }

    /// What the server that had the file before recorded of its database, as its lock file
    /// says (see [`LogEndMark`]). `None` for a new lock file or an older server's.
    pub(super) fn previous_log_end(&self) -> Option<LogEnd> {
        self.previous_log_end
    }

    /// A handle for the writer to record its commits to the database at `path`.
    pub(super) fn log_end_mark(&self, path: &Path) -> std::io::Result<LogEndMark> {
        Ok(LogEndMark {
            file: self.file.try_clone()?,
            pid: std::process::id(),
            database: file_identity(path),
            held: self.held(),
        })
    }

    fn held(&self) -> HeldMark {
        HeldMark {
            previous_alive: self.previous_alive,
            resumed: std::sync::Arc::clone(&self.resumed),
        }
    }

    /// The server has resumed the running turns: from now on the file's time is this server's
    /// sign of life. Returns whether it was the first call.
    pub(super) fn turns_resumed(&self) -> bool {
        !self.resumed.swap(true, std::sync::atomic::Ordering::SeqCst)
    }

    /// Puts the last server's sign of life back on the file if this one has not resumed the
    /// turns (see [`HeldMark`]).
    pub(super) fn hold_mark(&self) {
        self.held().hold(&self.file);
    }

    /// Marks the lock file now: the last mark of a clean close, so that the next server
    /// charges running turns up to the stop exactly; or, before this server resumed them, puts
    /// the last server's mark back.
    pub(super) fn mark_alive(&self) {
        if self.resumed.load(std::sync::atomic::Ordering::SeqCst) {
            let _ = self.file.set_modified(std::time::SystemTime::now());
        } else {
            self.hold_mark();
        }
    }

    /// Marks the lock file every [`HEARTBEAT`] on a thread of its own until the returned
    /// [`Heartbeat`] is stopped or dropped. A failed mark is not an error worth stopping for:
    /// the next server would only charge less of a running turn.
    pub(super) fn heartbeat(&self) -> std::io::Result<Heartbeat> {
        let file = self.file.try_clone()?;
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("oanquan-sqlite-heartbeat".to_owned())
            .spawn(move || {
                loop {
                    let _ = file.set_modified(std::time::SystemTime::now());
                    match stopped.recv_timeout(HEARTBEAT) {
                        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                        _ => break,
                    }
                }
            })?;
        Ok(Heartbeat { stop, thread })
    }

    /// Gives the lock up while the store may still be referenced (by a task that outlived the
    /// server's drain): a closed store writes nothing more, and the next store on the file, in
    /// this process or another, must not be refused because of it.
    pub(super) fn unlock(&self) {
        #[cfg(unix)]
        {
            let _ = rustix::fs::flock(&self.file, rustix::fs::FlockOperation::Unlock);
        }
    }
}

/// Puts the lock file back as it was found ([`FileLock::restore`]) when dropped before
/// [`RefusalRestores::opened`]: every refusal of a start, one added later too, changes
/// nothing. (No heartbeat runs during an open: it starts once the server has resumed the
/// running turns, see [`FileLock::turns_resumed`].)
pub(super) struct RefusalRestores<'a> {
    lock: &'a FileLock,
    opened: bool,
}

impl<'a> RefusalRestores<'a> {
    pub(super) fn new(lock: &'a FileLock) -> Self {
        RefusalRestores {
            lock,
            opened: false,
        }
    }

    /// The open succeeded: the lock file stays this server's.
    pub(super) fn opened(mut self) {
        self.opened = true;
    }
}

impl Drop for RefusalRestores<'_> {
    fn drop(&mut self) {
        if !self.opened {
            self.lock.restore();
        }
    }
}

/// The thread that marks the lock file (see [`FileLock::heartbeat`]).
#[derive(Debug)]
pub(super) struct Heartbeat {
    stop: std::sync::mpsc::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl Heartbeat {
    /// Stops the thread and waits for it: its copy of the lock file's descriptor is closed
    /// and it marks the file no more.
    pub(super) fn stop(self) {
        drop(self.stop);
        let _ = self.thread.join();
    }
}

/// Why the lock file beside `path` could not be opened: a file system that cannot be written
/// (read-only, no permission, full) is the database's refusal with its advice, as when SQLite
/// finds it so; anything else is told as it is.
fn lock_file_refused(path: &Path, lock: &Path, source: std::io::Error) -> OpenError {
    use std::io::ErrorKind;
    match source.kind() {
        ErrorKind::ReadOnlyFilesystem | ErrorKind::PermissionDenied | ErrorKind::StorageFull => {
            OpenError::NotWritable {
                path: path.to_owned(),
                detail: format!(
                    "its lock file {} cannot be created: {source}",
                    lock.display()
                ),
            }
        }
        // The lock file is made beside the database: its folder is not there (an outside
        // probe read "opening the lock file: No such file or directory" of a mistyped folder),
        // or a file stands where a folder of the path should be.
        ErrorKind::NotADirectory => OpenError::NotAFolder {
            path: path.to_owned(),
        },
        ErrorKind::NotFound
            if lock
                .parent()
                .is_some_and(|folder| !folder.as_os_str().is_empty() && !folder.exists()) =>
        {
            OpenError::NoFolder {
                path: path.to_owned(),
                folder: lock.parent().unwrap_or(lock).to_owned(),
            }
        }
        _ => OpenError::Io {
            path: path.to_owned(),
            context: "opening the lock file",
            source,
        },
    }
}

/// The lock file of the database at `path`: `<database>.lock` beside the file the name
/// resolves to (so that a symbolic link to a database shares its lock), opened without
/// following a link, created if missing, and checked to be a lock file of ours before anyone
/// writes to it: a plain file with one name, not the database, holding nothing or a pid. An
/// outside probe made a server empty `/etc/passwd` through a `.lock` link, and a database
/// through a `.lock` hard link or a database named `games.lock` beside `--database games`.
///
/// # Errors
///
/// [`OpenError::BadLockFile`] for anything else there, [`OpenError::Io`].
pub(super) fn open_lock_file(path: &Path) -> Result<(std::fs::File, PathBuf), OpenError> {
    use std::io::Read as _;
    let lock_path = lock_path_of(path);
    let bad = |what: String| OpenError::BadLockFile {
        path: path.to_owned(),
        lock: lock_path.clone(),
        what,
    };
    let mut options = std::fs::OpenOptions::new();
    options.read(true).write(true).create(true).truncate(false);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32);
    }
    let mut file = match options.open(&lock_path) {
        Ok(file) => file,
        Err(_)
            if std::fs::symlink_metadata(&lock_path)
                .is_ok_and(|meta| meta.file_type().is_symlink()) =>
        {
            return Err(bad("is a symbolic link".to_owned()));
        }
        Err(source) => return Err(lock_file_refused(path, &lock_path, source)),
    };
    let meta = file.metadata().map_err(|source| OpenError::Io {
        path: path.to_owned(),
        context: "reading the lock file's metadata",
        source,
    })?;
    if !meta.is_file() {
        return Err(bad("is not a regular file".to_owned()));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt as _;
        if meta.nlink() > 1 {
            return Err(bad(format!(
                "has {} names (hard links): it is another file's too",
                meta.nlink()
            )));
        }
        if let Ok(database) = std::fs::metadata(path)
            && database.dev() == meta.dev()
            && database.ino() == meta.ino()
        {
            return Err(bad("is the database itself".to_owned()));
        }
    }
    // What a server writes: its pid, its record of the database, a newline (digits and spaces).
    // Anything longer or else is someone's file.
    let mut head = Vec::new();
    let _ = (&mut file)
        .take(LOCK_CONTENT_MAX + 1)
        .read_to_end(&mut head);
    let ours = head.len() as u64 <= LOCK_CONTENT_MAX
        && head
            .iter()
            .all(|b| b.is_ascii_digit() || b.is_ascii_whitespace());
    if !ours {
        let what = if head.starts_with(b"SQLite format 3\0") {
            "is an SQLite database, not a lock file".to_owned()
        } else {
            format!("holds {} bytes that are not a server's pid", meta.len())
        };
        return Err(bad(what));
    }
    std::io::Seek::rewind(&mut file).map_err(|source| OpenError::Io {
        path: path.to_owned(),
        context: "reading the lock file",
        source,
    })?;
    Ok((file, lock_path))
}

/// The lock file of the database at `path`: beside the name the database resolves to, when it
/// exists (else the name as given: a new file), with `.lock` added.
fn lock_path_of(path: &Path) -> PathBuf {
    let resolved = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
    let mut lock_path = resolved.into_os_string();
    lock_path.push(".lock");
    PathBuf::from(lock_path)
}

/// The most a lock file of ours holds: a pid and its [`LogEnd`] (padded to this), a newline.
const LOCK_CONTENT_MAX: u64 = 96;

/// Takes the database's lock without waiting.
///
/// # Errors
///
/// [`OpenError::Locked`] if another store (in this process or another) holds it.
pub(super) fn lock(path: &Path) -> Result<FileLock, OpenError> {
    let new_file = std::fs::symlink_metadata(lock_path_of(path)).is_err();
    let (mut file, lock_path) = open_lock_file(path)?;
    let io = |context| {
        let path = path.to_owned();
        move |source| OpenError::Io {
            path,
            context,
            source,
        }
    };
    // A lock file with a pid in it was marked by a server (it may have been killed); only a
    // holder of the lock writes it, so what is read here stays the last server's if it is ours.
    let previous_alive = file
        .metadata()
        .ok()
        .filter(|meta| meta.len() > 0)
        .and_then(|meta| meta.modified().ok());
    // The last server's record of its log, kept until this one has checked the database
    // against it and records its own: a start refused for a lost log refuses the next too.
    let previous_content = {
        use std::io::{Read as _, Seek as _};
        let mut previous = String::new();
        let _ = (&file).read_to_string(&mut previous);
        let _ = file.rewind();
        previous
    };
    let previous_log_end = parse_log_end(&previous_content);
    #[cfg(unix)]
    {
        use rustix::fs::{FlockOperation, flock};
        use std::io::{Read as _, Seek as _, Write as _};
        if let Err(errno) = flock(&file, FlockOperation::NonBlockingLockExclusive) {
            if errno != rustix::io::Errno::WOULDBLOCK {
                return Err(io("locking the lock file")(errno.into()));
            }
            let mut content = String::new();
            let _ = file.read_to_string(&mut content);
            return Err(OpenError::Locked {
                path: path.to_owned(),
                lock: lock_path,
                holder: lock_holder(&content),
            });
        }
        // The pid is for the message above only; the lock is what counts.
        let _ = file.set_len(0).and_then(|()| file.rewind()).and_then(|()| {
            write!(
                file,
                "{}",
                lock_content(std::process::id(), previous_log_end)
            )
        });
    }
    let lock = FileLock {
        file,
        made: new_file.then_some(lock_path),
        previous_alive,
        previous_log_end,
        previous_content,
        resumed: std::sync::Arc::default(),
    };
    // Writing the pid moved the file's time: it is still the last server's sign of life.
    lock.hold_mark();
    Ok(lock)
}

/// How long a connection waits for another one's lock before failing.
pub(super) const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// What the header of a database file says.
pub(super) struct Header {
    /// No application id, no schema version, no tables: a new file, ours to set up.
    pub(super) blank: bool,
    /// `user_version`: our schema version (0 when blank).
    pub(super) version: i32,
    /// How many tables, indexes and views it has.
    pub(super) tables: i64,
}

/// Reads the header and refuses a file that is another application's or from a newer server.
pub(super) fn vet_header(conn: &Connection, path: &Path) -> Result<Header, OpenError> {
    let (application_id, version, tables): (i32, i32, i64) = conn
        .query_row(
            "SELECT (SELECT application_id FROM pragma_application_id),
                    (SELECT user_version FROM pragma_user_version),
                    (SELECT count(*) FROM sqlite_schema)",
            [],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )
        .map_err(OpenError::sqlite(path, "reading the header"))?;
    let blank = application_id == 0 && version == 0 && tables == 0;
    if !blank && application_id != APPLICATION_ID {
        return Err(OpenError::Foreign {
            path: path.to_owned(),
            application_id,
            tables,
        });
    }
    if version > SCHEMA_VERSION {
        return Err(OpenError::Newer {
            path: path.to_owned(),
            found: version,
        });
    }
    // No server writes one; taken as a count of migrations it would skip them all.
    if version < 0 {
        return Err(OpenError::Corrupt {
            path: path.to_owned(),
            detail: format!("schema version {version}, which no oanquan-server writes"),
        });
    }
    Ok(Header {
        blank,
        version,
        tables,
    })
}

/// Checks an existing file without writing to it: blank, or ours at a known version and intact.
fn check(path: &Path, previous_log_end: Option<LogEnd>) -> Result<(), OpenError> {
    let error = |context| OpenError::sqlite(path, context);
    check_format_versions(path)?;
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(error("opening read-only to check it"))?;
    conn.busy_timeout(BUSY_TIMEOUT)
        .map_err(error("setting the busy timeout"))?;
    let header = vet_header(&conn, path)?;
    if header.blank {
        return Err(OpenError::NoTables {
            path: path.to_owned(),
            size: std::fs::metadata(path).map_or(0, |meta| meta.len()),
        });
    }
    // Our header and nothing else: every version's tables are made with it, in one
    // transaction. An outside probe's file had them only, and the server switched it to WAL
    // before failing on a missing table, with a message that blamed permissions.
    if header.tables == 0 {
        return Err(OpenError::Corrupt {
            path: path.to_owned(),
            detail: format!(
                "it carries oanquan-server's application id and schema version {}, but holds \
                 no tables",
                header.version
            ),
        });
    }
    // Reads every page once: fast for our sizes, and a damaged file is refused at start rather
    // than half way through a game.
    let mut problems = Vec::new();
    let mut statement = conn
        .prepare("PRAGMA quick_check(5)")
        .map_err(error("checking integrity"))?;
    let rows = statement
        .query_map([], |row| row.get::<_, String>(0))
        .map_err(error("checking integrity"))?;
    for row in rows {
        problems.push(row.map_err(error("checking integrity"))?);
    }
    if problems != ["ok"] {
        return Err(OpenError::Corrupt {
            path: path.to_owned(),
            detail: problems.join("; "),
        });
    }
    check_log_present(&conn, path, header.version, previous_log_end)
}

/// The name of one of `path`'s companion files: `-wal`, `-shm`, `-journal`.
pub(crate) fn companion(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// The first schema version with `run_state` (see [`check_log_present`]).
const RUN_STATE_VERSION: i32 = 7;

/// Refuses a file whose last server did not stop cleanly (`run_state.running` is 1) and which,
/// read with its `-wal` as SQLite reads it, holds fewer commits than that server recorded in
/// the lock file ([`LogEndMark`]): its log is missing, empty, cut short or damaged (SQLite
/// replays a log up to its first bad frame and drops the rest without a word). An outside probe
/// emptied the log of a killed server, and the next one started on an "intact" database
/// without any of the 344 moves it had acknowledged; another truncated it, and an account's
/// revoked key worked again. A log folded into the file since (any connection that closes last
/// does that: `sqlite3`, a backup) leaves every commit there, and is accepted.
fn check_log_present(
    conn: &Connection,
    path: &Path,
    version: i32,
    previous_log_end: Option<LogEnd>,
) -> Result<(), OpenError> {
    if version < RUN_STATE_VERSION {
        return Ok(());
    }
    let (running, found): (i64, i64) = conn
        .query_row(
            "SELECT running, commits FROM run_state WHERE id = 1",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .map_err(OpenError::sqlite(path, "reading the run state"))?;
    // No record of this file's commits: a `.lock` deleted, or the file copied or moved
    // without it (and perhaps without its `-wal`). Nothing to compare with, so it opens; but a
    // file its last server did not close is said to be unchecked (an outside probe's copy of a
    // killed server's file, made without its log, opened without a word, 43 moves short).
    let recorded = match previous_log_end {
        Some(LogEnd { commits, file }) if file.is_none() || file == file_identity(path) => commits,
        // A record of another file: this one is a copy (`cp -a` of a crashed server's
        // directory, `.lock` and all, is a new file) or was put in place of the one recorded.
        // Its commits cannot be told from that file's, so it is not compared either; the
        // warning says which (an outside probe's copy was told there was no `.lock`).
        other => {
            if running != 0 {
                let record = if other.is_some() {
                    "the .lock beside it records the commits of another file (this one was \
                     copied or moved, or put in its place), so its own are not checked"
                } else {
                    "no .lock beside it records how many commits it made"
                };
                tracing::warn!(
                    path = %path.display(),
                    "the last server on this file did not stop cleanly, and {record}: if the \
                     file was copied or moved without its -wal, or the -wal was cut short, the \
                     changes since its last checkpoint are not in it (see STORAGE.md, \"A lost \
                     or damaged write-ahead log\"); copy a database with `oanquan-server \
                     backup`"
                );
            }
            return Ok(());
        }
    };
    if running == 0 || found >= recorded {
        return Ok(());
    }
    Err(OpenError::LostLog {
        path: path.to_owned(),
        wal: companion(path, "-wal"),
        found,
        recorded,
    })
}

/// Marks the file as open by a server (`run_state.running = 1`) and folds the log into it, so
/// that the mark is in the file itself: see [`check_log_present`]; or, at a clean stop, as
/// closed (the writer's last checkpoint then folds that in).
pub(super) fn mark_running(conn: &Connection, running: bool) -> rusqlite::Result<()> {
    conn.execute(
        "UPDATE run_state SET running = ?1 WHERE id = 1",
        [i64::from(running)],
    )?;
    if running {
        conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| {
            row.get::<_, i64>(0)
        })?;
    }
    Ok(())
}

/// The `-wal` and `-shm` files beside a database that were not there before an open: if the open
/// fails, SQLite made them (even a read-only look does), and left beside a refused file they
/// would look like a crash's log, which STORAGE.md says never to delete.
#[derive(Debug)]
pub(super) struct NewCompanions {
    wal: Option<PathBuf>,
    shm: Option<PathBuf>,
}

impl NewCompanions {
    /// Notes which of `path`'s companions are missing now.
    pub(super) fn note(path: &Path) -> NewCompanions {
        let missing = |suffix: &str| {
            let companion = companion(path, suffix);
            (!companion.exists()).then_some(companion)
        };
        NewCompanions {
            wal: missing("-wal"),
            shm: missing("-shm"),
        }
    }

    /// Whether any companion missing at [`NewCompanions::note`] is there now.
    pub(super) fn any_made(&self) -> bool {
        [&self.wal, &self.shm]
            .into_iter()
            .flatten()
            .any(|companion| companion.exists())
    }

    /// Removes the companions made since [`NewCompanions::note`], once no connection is open:
    /// the `-wal` only while empty (nothing was committed to it), and the `-shm` (an index of
    /// the `-wal`, rebuilt by SQLite when missing) only once no `-wal` is left.
    pub(super) fn remove(self) {
        let mut wal_left = false;
        if let Some(wal) = &self.wal {
            match std::fs::metadata(wal) {
                Ok(meta) if meta.len() == 0 => wal_left = std::fs::remove_file(wal).is_err(),
                Ok(_) => wal_left = true,
                Err(_) => {}
            }
        }
        if let Some(shm) = &self.shm
            && !wal_left
        {
            let _ = std::fs::remove_file(shm);
        }
    }
}

/// Refuses an SQLite header whose file format versions (bytes 18 and 19: 1 for a rollback
/// journal, 2 for WAL) are anything else (SQLite would open such a file read-only, or not at
/// all, and the server would call a damaged header a file it cannot write), and a file that is
/// not a whole number of pages.
fn check_format_versions(path: &Path) -> Result<(), OpenError> {
    use std::io::Read as _;
    let mut header = [0_u8; 20];
    let read = std::fs::File::open(path).and_then(|mut file| file.read_exact(&mut header));
    if read.is_err() || !header.starts_with(b"SQLite format 3\0") {
        // Not SQLite's at all, or too short: SQLite's own check says so.
        return Ok(());
    }
    let (write, read) = (header[18], header[19]);
    if ![write, read]
        .iter()
        .all(|version| (1..=2).contains(version))
    {
        return Err(OpenError::Corrupt {
            path: path.to_owned(),
            detail: format!(
                "its header gives file format versions {write} (write) and {read} (read), \
                 where SQLite writes 1 or 2: the header is damaged"
            ),
        });
    }
    // SQLite writes whole pages only, so any other size is a file cut short (or added to) by
    // something else. SQLite would read what is there, and the server would write to it: an
    // outside probe cut one byte off, and the file passed the start's checks.
    let page = match u16::from_be_bytes([header[16], header[17]]) {
        1 => 65_536,
        size => u64::from(size),
    };
    let size = std::fs::metadata(path).map_or(0, |meta| meta.len());
    if page.is_power_of_two() && (512..=65_536).contains(&page) && size % page != 0 {
        return Err(OpenError::Corrupt {
            path: path.to_owned(),
            detail: format!(
                "its size, {size} bytes, is not a whole number of its {page}-byte pages: the \
                 file was cut short, or something was added to it"
            ),
        });
    }
    Ok(())
}

/// What SQLite makes of `path` when it does not read it as a file name: `:memory:` and
/// `file:` URIs (`./:memory:` and `./file:x` are plain files).
pub(crate) fn not_a_file_name(path: &Path) -> Option<&'static str> {
    match path.to_str() {
        Some(":memory:") => Some("a database kept in memory"),
        Some(name) if name.starts_with("file:") => Some("a URI"),
        _ => None,
    }
}

/// Refuses what is plainly not a database file (a folder, a device, an empty file, a name SQLite
/// reads as no file) from its name and metadata alone: cheap enough to come before the lock, which would otherwise leave a `.lock`
/// next to a path that was never ours. `Ok(true)` if a file is there (to be checked), `Ok(false)`
/// if nothing is (SQLite makes it; other problems, such as permissions, are SQLite's to report).
///
/// # Errors
///
/// [`OpenError::NotAFile`], [`OpenError::Empty`], [`OpenError::SpecialName`].
pub(super) fn refuse_at_sight(path: &Path) -> Result<bool, OpenError> {
    if let Some(what) = not_a_file_name(path) {
        return Err(OpenError::SpecialName {
            path: path.to_owned(),
            what,
        });
    }
    // The companions SQLite keeps beside the file: something else in their place is refused by
    // its own name (SQLite only said "unable to open database file" of a `-wal` folder, and took
    // a `-wal` pipe for no log and the database for a new one).
    for (suffix, what) in [
        ("-wal", "write-ahead log"),
        ("-shm", "shared-memory index of its log"),
    ] {
        let companion = companion(path, suffix);
        if let Ok(metadata) = std::fs::metadata(&companion)
            && !metadata.is_file()
        {
            return Err(OpenError::CompanionNotAFile {
                path: path.to_owned(),
                companion,
                kind: kind_of(&metadata),
                what,
            });
        }
    }
    // An outside probe linked a new name to a killed server's deleted database: SQLite made an
    // empty one through the link, beside the old log, and the old log went at the next stop.
    if std::fs::symlink_metadata(path).is_ok_and(|meta| meta.file_type().is_symlink())
        && std::fs::metadata(path).is_err()
    {
        return Err(OpenError::DanglingLink {
            path: path.to_owned(),
            target: std::fs::read_link(path).unwrap_or_default(),
        });
    }
    match std::fs::metadata(path) {
        Ok(metadata) if !metadata.is_file() => Err(OpenError::not_a_file(path, &metadata)),
        // A server starting on a new path holds the lock while SQLite makes the file, empty
        // for a moment: that is a running server's database, never one to delete. An outside
        // probe started two servers at once and the second said to delete the first's.
        Ok(metadata) if metadata.len() == 0 => Err(held_lock(path).unwrap_or(OpenError::Empty {
            path: path.to_owned(),
        })),
        Ok(_) => Ok(true),
        Err(_) => Ok(false),
    }
}

/// " (pid N)" from a lock file's content, for [`OpenError::Locked`]; empty without a pid.
fn lock_holder(content: &str) -> String {
    let pid = content.split_ascii_whitespace().next().unwrap_or_default();
    if !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()) {
        format!(" (pid {pid})")
    } else {
        String::new()
    }
}

/// [`OpenError::Locked`] when another process holds the lock of the database at `path`; found
/// without creating, changing or keeping the lock file (a shared lock, let go at once).
fn held_lock(path: &Path) -> Option<OpenError> {
    #[cfg(unix)]
    {
        use rustix::fs::{FlockOperation, flock};
        use std::io::Read as _;
        let lock_path = lock_path_of(path);
        let mut file = std::fs::File::open(&lock_path).ok()?;
        if flock(&file, FlockOperation::NonBlockingLockShared) != Err(rustix::io::Errno::WOULDBLOCK)
        {
            return None;
        }
        let mut content = String::new();
        let _ = file.read_to_string(&mut content);
        Some(OpenError::Locked {
            path: path.to_owned(),
            lock: lock_path,
            holder: lock_holder(&content),
        })
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        None
    }
}

/// What shows that a database lived at `path`, which is not there: a `-wal` with frames in it,
/// or the lock file's record of commits. An outside probe deleted a killed server's database;
/// the next start made a new one beside the old log and lock, and its clean stop removed the
/// log, the last copy of the newest moves.
fn traces_of_a_database(path: &Path, previous_log_end: Option<LogEnd>) -> Option<String> {
    let wal = companion(path, "-wal");
    match std::fs::metadata(&wal) {
        Ok(metadata) if metadata.len() > 0 => {
            return Some(format!(
                "its write-ahead log {} holds {} bytes",
                wal.display(),
                metadata.len()
            ));
        }
        _ => {}
    }
    previous_log_end
        .filter(|end| end.commits > 0)
        .map(|end| format!("its lock file records {} commits to it", end.commits))
}

/// Opens the writer connection: checks the file, switches it to WAL and migrates it.
///
/// # Errors
///
/// [`OpenError`]; the file is unchanged unless it was ours or blank.
pub(super) fn open_writer(
    path: &Path,
    previous_log_end: Option<LogEnd>,
) -> Result<Connection, OpenError> {
    let error = |context| OpenError::sqlite(path, context);
    if refuse_at_sight(path)? {
        check(path, previous_log_end)?;
    } else if let Some(evidence) = traces_of_a_database(path, previous_log_end) {
        return Err(OpenError::Missing {
            path: path.to_owned(),
            evidence,
        });
    }
    let mut conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(error("opening for writing"))?;
    // Without write permission SQLite quietly opens the file read-only.
    if conn
        .is_readonly(rusqlite::MAIN_DB)
        .map_err(error("opening for writing"))?
    {
        return Err(OpenError::NotWritable {
            path: path.to_owned(),
            detail: "the file is read-only for this user".to_owned(),
        });
    }
    conn.busy_timeout(BUSY_TIMEOUT)
        .map_err(error("setting the busy timeout"))?;
    // The mode found, put back if the file is refused below: a refused file is left as it was.
    let found: String = conn
        .query_row("PRAGMA journal_mode", [], |row| row.get(0))
        .map_err(error("reading the journal mode"))?;
    // WAL: readers never block the writer nor each other, and a commit appends to one file.
    let mode: String = conn
        .query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))
        .map_err(error("switching to WAL"))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(OpenError::Sqlite {
            path: path.to_owned(),
            context: "switching to WAL",
            source: rusqlite::Error::InvalidQuery,
        });
    }
    // FULL: every commit fsyncs the WAL before returning, so an acknowledged move survives a
    // power loss, not only a killed process. Group commit (see the writer) keeps that affordable.
    conn.pragma_update(None, "synchronous", "FULL")
        .map_err(error("setting synchronous"))?;
    if let Err(refused) = migrate(&mut conn, path) {
        if !found.eq_ignore_ascii_case("wal") {
            // Only a known mode name goes into the statement.
            let back = match found.to_ascii_lowercase().as_str() {
                "delete" => "DELETE",
                "truncate" => "TRUNCATE",
                "persist" => "PERSIST",
                "memory" => "MEMORY",
                "off" => "OFF",
                _ => "DELETE",
            };
            let _ = conn.query_row(&format!("PRAGMA journal_mode = {back}"), [], |row| {
                row.get::<_, String>(0)
            });
        }
        return Err(refused);
    }
    probe_write(&mut conn).map_err(|source| OpenError::NotWritable {
        path: path.to_owned(),
        detail: source.to_string(),
    })?;
    mark_running(&conn, true).map_err(|source| OpenError::NotWritable {
        path: path.to_owned(),
        detail: source.to_string(),
    })?;
    Ok(conn)
}

/// One committed write that changes nothing (the schema version, rewritten): it goes through
/// the WAL and its fsync like every commit, so a file, folder or disk that cannot take writes
/// is found now.
pub(super) fn probe_write(conn: &mut Connection) -> rusqlite::Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let version: i64 = tx.query_row("PRAGMA user_version", [], |row| row.get(0))?;
    tx.pragma_update(None, "user_version", version)?;
    tx.commit()
}

/// Applies the missing migrations in one transaction, re-checking under the write lock.
fn migrate(conn: &mut Connection, path: &Path) -> Result<(), OpenError> {
    let error = |context| OpenError::sqlite(path, context);
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(error("starting the migration"))?;
    let version = vet_header(&tx, path)?.version;
    if version == SCHEMA_VERSION {
        return Ok(());
    }
    tx.pragma_update(None, "application_id", APPLICATION_ID)
        .map_err(error("setting the application id"))?;
    for (from, migration) in MIGRATIONS.iter().enumerate().skip(version as usize) {
        // A migration fails on tables that are not what the recorded version says (the version
        // was edited, or a table is someone else's): damage, not a defect, and nothing of the
        // migration stays (the transaction rolls back).
        tx.execute_batch(migration)
            .map_err(|e| OpenError::Corrupt {
                path: path.to_owned(),
                detail: format!(
                    "its tables do not match its schema version {version} (user_version): \
                 migrating to version {} failed with \"{}\"; the version was changed by \
                 hand, or the tables are not the ones this server made",
                    from + 1,
                    sqlite_message(&e)
                ),
            })?;
        tx.pragma_update(None, "user_version", from as i32 + 1)
            .map_err(error("recording the schema version"))?;
    }
    tx.commit().map_err(error("committing the migration"))?;
    if version == 0 {
        tracing::info!(path = %path.display(), version = SCHEMA_VERSION, "database created");
    } else {
        tracing::info!(path = %path.display(), from = version, to = SCHEMA_VERSION, "database migrated");
    }
    Ok(())
}

/// What SQLite said, without the statement it said it of: rusqlite quotes a failed batch
/// whole, and a migration's is every table of the schema (an outside probe's refusal was one
/// line of several kilobytes).
fn sqlite_message(error: &rusqlite::Error) -> String {
    match error {
        rusqlite::Error::SqlInputError { msg, .. }
        | rusqlite::Error::SqliteFailure(_, Some(msg)) => msg.clone(),
        other => other.to_string(),
    }
}

/// A read-only connection for queries (WAL lets it read while the writer writes).
pub(super) fn open_reader(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    Ok(conn)
}

#[cfg(test)]
mod lock_file_tests {
    use super::*;

    /// A lock file that a read-only, unwritable or full file system will not take is the
    /// database's refusal to be written, with its advice: an outside probe's read-only mount
    /// got the bare "Read-only file system (os error 30)". (As root, which CI and the probes
    /// run as, permissions do not refuse anything, so the errors are made here.)
    #[test]
    fn an_unwritable_place_for_the_lock_file_is_told_with_advice() {
        let path = Path::new("/data/oanquan.db");
        let lock = Path::new("/data/oanquan.db.lock");
        for errno in [
            rustix::io::Errno::ROFS,
            rustix::io::Errno::ACCESS,
            rustix::io::Errno::NOSPC,
        ] {
            let source = std::io::Error::from_raw_os_error(errno.raw_os_error());
            let message = lock_file_refused(path, lock, source).to_string();
            assert!(message.contains("cannot be written"), "{message}");
            assert!(message.contains("Nothing was changed"), "{message}");
            assert!(message.contains("/data/oanquan.db.lock"), "{message}");
            assert!(message.contains("write permission"), "{message}");
        }
        let other = std::io::Error::from_raw_os_error(rustix::io::Errno::IO.raw_os_error());
        let message = lock_file_refused(path, lock, other).to_string();
        assert_eq!(message, "/data/oanquan.db: opening the lock file");
    }
}
