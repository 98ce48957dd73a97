//! The per-user token file: the secret player tokens that `create` and `join` receive, so that
//! `play GAME` can pick a game up again after the client (or the server connection) restarts.
//!
//! Location: `$OANQUAN_CONFIG_DIR/tokens.json`, else `$XDG_CONFIG_HOME/oanquan/tokens.json`,
//! else `~/.config/oanquan/tokens.json`. The file is created with mode 0600 (the directory 0700)
//! because a token is a password for a seat. Entries are keyed by server address, game id and
//! seat: the same game id on two servers is two different games, and one user may hold both
//! seats of a game (two terminals on one machine), so storing one seat never replaces the other.
//! Server addresses are stored in one canonical form ([`normalize_server`]), so that
//! `127.0.0.1:50051` and `http://127.0.0.1:50051/` find the same seats.
//!
//! Version 1 files kept one entry per server and game, under the address as typed; they are
//! read as they are (their addresses normalised) and written back as version 2.
//!
//! Writes go to a temporary file that is then renamed over the old one (and the directory
//! synced), so a crash never leaves a half-written file. A write holds an exclusive lock
//! (`flock` on `tokens.json.lock` next to the file, see [`lock`]) from reading the file to
//! renaming the new one in: two clients sharing the directory (`create` in one terminal, `join`
//! in another) take turns, and neither drops the seat the other just stored. Readers need no
//! lock: a rename replaces the whole file at once.

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use crate::error::{CliError, code};
use crate::files::{STATE_MAX_BYTES, open_regular, read_regular, read_state};

const FILE_NAME: &str = "tokens.json";

/// One stored seat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// Server address, normalised by [`normalize_server`].
    pub server: String,
    pub game_id: String,
    /// "first" or "second".
    pub seat: String,
    pub token: String,
    #[serde(default)]
    pub display_name: String,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenFile {
    #[serde(default)]
    version: u32,
    #[serde(default)]
    entries: Vec<Entry>,
}

/// Handle on the token file in one directory.
#[derive(Debug, Clone)]
pub struct TokenStore {
    dir: PathBuf,
}

/// The file format written; see the module docs for what older versions held.
const VERSION: u32 = 2;

/// One spelling per server: `scheme://host:port`, scheme and host in lower case, the scheme's
/// default port written out, no trailing slash. A bare `host:port` is `http://` (what it
/// connects with unless `--ca-cert` says TLS; the caller then passes `https://` itself). So
/// `127.0.0.1:50051`, `http://127.0.0.1:50051/` and `HTTP://127.0.0.1:50051` are one key.
/// Text that is no address is only trimmed: it can never match a working server's key.
pub fn normalize_server(server: &str) -> String {
    let text = server.trim();
    let (scheme, rest) = match text.split_once("://") {
        Some((scheme, rest)) => (scheme.to_ascii_lowercase(), rest),
        None => ("http".to_owned(), text),
    };
    let default_port = match scheme.as_str() {
        "http" => "80",
        "https" => "443",
        _ => return text.trim_end_matches('/').to_owned(),
    };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let path = path.trim_end_matches('/');
    // An IPv6 literal keeps its brackets; its colons are not the port's.
    let (host, port) = match authority.rfind(':') {
        Some(i) if !authority[i..].contains(']') => (&authority[..i], &authority[i + 1..]),
        _ => (authority, ""),
    };
    let port = if port.is_empty() { default_port } else { port };
    format!("{scheme}://{}:{port}{path}", host.to_ascii_lowercase())
}

/// `err` from a check made before asking the server, with what to do about it.
fn refused(err: CliError, advice: &str) -> CliError {
    CliError::new(
        err.code,
        format!("{}; nothing was asked of the server. {advice}", err.message),
    )
}

/// Keeps the last entry of each server, game and seat: [`TokenStore::put`] appends the newest,
/// and a file edited or merged by hand may repeat one (many copies of one seat are one seat,
/// not "both seats").
fn dedup_seats(entries: &mut Vec<Entry>) {
    let mut seen = std::collections::HashSet::new();
    let mut kept: Vec<Entry> = entries
        .drain(..)
        .rev()
        .filter(|e| seen.insert((e.server.clone(), e.game_id.clone(), e.seat.clone())))
        .collect();
    kept.reverse();
    *entries = kept;
}

impl TokenStore {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The default directory from the environment (see the module docs); `explicit` is
    /// `--config-dir` / `OANQUAN_CONFIG_DIR`.
    pub fn locate(explicit: Option<&Path>) -> Result<Self, CliError> {
        if let Some(dir) = explicit {
            return Ok(Self::new(dir));
        }
        // XDG says to ignore relative values.
        if let Some(xdg) = std::env::var_os("XDG_CONFIG_HOME").map(PathBuf::from)
            && xdg.is_absolute()
        {
            return Ok(Self::new(xdg.join("oanquan")));
        }
        match std::env::var_os("HOME").map(PathBuf::from) {
            Some(home) if home.is_absolute() => Ok(Self::new(home.join(".config").join("oanquan"))),
            _ => Err(CliError::new(
                code::FAILURE,
                "cannot find a config directory: set OANQUAN_CONFIG_DIR, XDG_CONFIG_HOME or HOME",
            )),
        }
    }

    pub fn path(&self) -> PathBuf {
        self.dir.join(FILE_NAME)
    }

    /// The config directory the file is in (the account file sits next to it).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn load(&self) -> Result<TokenFile, CliError> {
        let path = self.path();
        match read_regular(&path, STATE_MAX_BYTES) {
            Ok(None) => Ok(TokenFile::default()),
            Ok(Some((bytes, _))) => {
                let mut file: TokenFile = read_state(&bytes, VERSION, "token", &path)?;
                // Version 1 stored addresses as typed (minus a trailing slash).
                for entry in &mut file.entries {
                    entry.server = normalize_server(&entry.server);
                }
                dedup_seats(&mut file.entries);
                Ok(file)
            }
            Err(e) => Err(CliError::io(&format!("reading {}", path.display()), &e)),
        }
    }

    /// This store, once its file reads back: checked before a command takes a seat on the
    /// server, so that a damaged file stops it before the seat exists (a seat whose token
    /// cannot be kept can be neither played nor aborted).
    pub fn checked(self) -> Result<Self, CliError> {
        self.load().map_err(|e| {
            refused(
                e,
                "Move the file aside (a new one is started; the seats it held are lost) or \
                 repair it",
            )
        })?;
        Ok(self)
    }

    /// [`TokenStore::checked`], and the file can be written as far as can be told (its lock
    /// taken, [`writable`]): what `create`, `join`, `seek`, `accept` and a rematch check
    /// before they ask the server for a seat. The file may still change before the token
    /// arrives: the caller then says the token ([`crate::commands::keep_seat`]).
    pub fn ready_to_store(self) -> Result<Self, CliError> {
        let _lock = lock(&self.dir, FILE_NAME).map_err(|e| {
            refused(
                e,
                "The config directory must be writable, its lock file a file (pass another \
                 --config-dir, or move it aside)",
            )
        })?;
        let store = self.checked()?;
        writable(&store.dir, FILE_NAME).map_err(|e| {
            refused(
                e,
                "Make it writable (or pass another --config-dir): a seat's token must be saved \
                 to play the seat",
            )
        })?;
        Ok(store)
    }

    /// The stored seats of a game on a server: none, one, or both (first seat first); a seat
    /// stored more than once (a file edited by hand) counts once, as its last entry.
    pub fn seats(&self, server: &str, game_id: &str) -> Result<Vec<Entry>, CliError> {
        let server = normalize_server(server);
        let mut seats: Vec<Entry> = self
            .load()?
            .entries
            .into_iter()
            .filter(|e| e.server == server && e.game_id == game_id)
            .collect();
        seats.sort_by(|a, b| a.seat.cmp(&b.seat));
        Ok(seats)
    }

    /// The servers other than `server` for which a seat of `game_id` is stored: the usual reason
    /// for finding none is another `--server` (or a game joined on another machine).
    pub fn other_servers(&self, server: &str, game_id: &str) -> Result<Vec<String>, CliError> {
        let server = normalize_server(server);
        let mut others: Vec<String> = self
            .load()?
            .entries
            .into_iter()
            .filter(|e| e.server != server && e.game_id == game_id)
            .map(|e| e.server)
            .collect();
        others.sort();
        others.dedup();
        Ok(others)
    }

    /// Stores (or replaces) the token of one seat: `entry.server` + `entry.game_id` +
    /// `entry.seat`. The other seat of the same game, if stored, is kept, and so is every entry
    /// another client stores meanwhile (the file is locked from load to save).
    pub fn put(&self, mut entry: Entry) -> Result<(), CliError> {
        entry.server = normalize_server(&entry.server);
        let _lock = lock(&self.dir, FILE_NAME)?;
        let mut file = self.load()?;
        file.version = VERSION;
        file.entries.retain(|e| {
            !(e.server == entry.server && e.game_id == entry.game_id && e.seat == entry.seat)
        });
        file.entries.push(entry);
        self.save(&file)
    }

    fn save(&self, file: &TokenFile) -> Result<(), CliError> {
        let json = serde_json::to_vec_pretty(file)
            .map_err(|e| CliError::new(code::FAILURE, format!("encoding tokens: {e}")))?;
        save_private(&self.dir, FILE_NAME, &json)
    }
}

/// Writes `bytes` as `dir/file_name`, readable by the owner only (the directory too): through a
/// temporary file renamed over the old one, so that a crash never leaves half a file, then the
/// directory synced, so that the rename itself survives a crash. For every file that holds a
/// secret (seat tokens, the account's API key). A caller that read the file to change it holds
/// its [`lock`] across both.
pub fn save_private(dir: &Path, file_name: &str, bytes: &[u8]) -> Result<(), CliError> {
    let what = |p: &Path| format!("writing {}", p.display());
    create_private_dir(dir).map_err(|e| CliError::io(&what(dir), &e))?;
    let path = dir.join(file_name);
    // One temporary file per write, also between threads of one process.
    static WRITES: AtomicU64 = AtomicU64::new(0);
    let n = WRITES.fetch_add(1, Ordering::Relaxed);
    let tmp = dir.join(format!(".{file_name}.{}.{n}.tmp", std::process::id()));
    let result = write_private(&tmp, bytes).and_then(|()| fs::rename(&tmp, &path));
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
        .and_then(|()| sync_dir(dir))
        .map_err(|e| CliError::io(&what(&path), &e))
}

/// Whether [`save_private`] can write `dir/file_name`, as far as can be told without writing:
/// the directory writable (permissions, a read-only file system) and, on Linux, neither it nor
/// the file immutable or append-only (`chattr +i`, which stops root too). Does not create
/// anything.
///
/// # Errors
///
/// Names the directory or the file and what stops the write.
pub fn writable(dir: &Path, file_name: &str) -> Result<(), CliError> {
    let what = |p: &Path| format!("{} cannot be written", p.display());
    #[cfg(unix)]
    {
        use rustix::fs::{Access, access};
        if let Err(errno) = access(dir, Access::WRITE_OK | Access::EXEC_OK) {
            return Err(CliError::io(&what(dir), &errno.into()));
        }
    }
    #[cfg(target_os = "linux")]
    {
        use rustix::fs::{IFlags, ioctl_getflags};
        let path = dir.join(file_name);
        let file = match open_regular(fs::OpenOptions::new().read(true), &path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            file => Some(file.map_err(|e| CliError::io(&what(&path), &e))?),
        };
        let dir_handle = open_dir(dir).map_err(|e| CliError::io(&what(dir), &e))?;
        for (shown, handle) in [(dir, Some(&dir_handle)), (path.as_path(), file.as_ref())] {
            // A file system without these flags (tmpfs, NFS) answers with an error: nothing to
            // say then.
            if let Some(flags) = handle.and_then(|h| ioctl_getflags(h).ok())
                && flags.intersects(IFlags::IMMUTABLE | IFlags::APPEND)
            {
                return Err(CliError::new(
                    code::FAILURE,
                    format!(
                        "{}: it is marked immutable or append-only (chattr -i -a clears it)",
                        what(shown)
                    ),
                ));
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = file_name;
    Ok(())
}

/// Opens the directory `dir` itself (to sync it or read its flags); `O_DIRECTORY` and
/// `O_NONBLOCK` make anything else, a FIFO put in its place included, an error at once.
fn open_dir(dir: &Path) -> std::io::Result<fs::File> {
    let mut options = fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        let flags = rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::NONBLOCK;
        options.custom_flags(i32::try_from(flags.bits()).unwrap_or(0));
    }
    options.open(dir)
}

/// Makes a rename in `dir` durable (fsync of the directory).
#[cfg(unix)]
fn sync_dir(dir: &Path) -> std::io::Result<()> {
    open_dir(dir)?.sync_all()
}

/// Windows offers no fsync of a directory; the rename is as durable as the system makes it.
#[cfg(not(unix))]
fn sync_dir(_dir: &Path) -> std::io::Result<()> {
    Ok(())
}

/// An exclusive lock on one file of the config directory, held until dropped (closing the lock
/// file releases it, also when the process dies).
#[derive(Debug)]
pub struct FileLock {
    _file: fs::File,
}

/// Takes the exclusive lock of `dir/file_name` (an advisory `flock` on `dir/file_name.lock`,
/// created 0600 and left in place: deleting a lock file lets two holders lock two files),
/// waiting while another client holds it; held from reading the file to renaming its new
/// version in, so that concurrent writers take turns instead of each renaming in a copy without
/// the other's change. `flock` locks belong to the open file, so threads of one process (each
/// opening the file) exclude each other too. Elsewhere than Unix the file is only created: the
/// standard library's locks need a newer Rust than this crate's minimum.
pub fn lock(dir: &Path, file_name: &str) -> Result<FileLock, CliError> {
    let path = dir.join(format!("{file_name}.lock"));
    let what = || format!("locking {}", path.display());
    create_private_dir(dir).map_err(|e| CliError::io(&what(), &e))?;
    let mut options = fs::OpenOptions::new();
    // Read and write: opening a FIFO so never waits (nor fails for want of a reader), and
    // [`open_regular`] then refuses it by name.
    options.read(true).write(true).create(true).truncate(false);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let file = open_regular(&mut options, &path).map_err(|e| CliError::io(&what(), &e))?;
    #[cfg(unix)]
    loop {
        use rustix::fs::{FlockOperation, flock};
        match flock(&file, FlockOperation::LockExclusive) {
            Ok(()) => break,
            // A signal arrived while waiting: wait again.
            Err(rustix::io::Errno::INTR) => {}
            Err(errno) => return Err(CliError::io(&what(), &errno.into())),
        }
    }
    Ok(FileLock { _file: file })
}

#[cfg(unix)]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

#[cfg(not(unix))]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    fs::create_dir_all(dir)
}

/// Creates `path` readable by the owner only, from the first byte on (no window in which the
/// token sits in a world-readable file).
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut options = fs::OpenOptions::new();
    options.read(true).write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let mut f = open_regular(&mut options, path)?;
    // A leftover temp file from a crashed run may have other bits; mode() only applies on create.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        f.set_permissions(fs::Permissions::from_mode(0o600))?;
    }
    f.write_all(bytes)?;
    f.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(server: &str, game: &str, seat: &str, token: &str) -> Entry {
        Entry {
            server: server.into(),
            game_id: game.into(),
            seat: seat.into(),
            token: token.into(),
            display_name: "alice".into(),
        }
    }

    fn tokens(store: &TokenStore, server: &str, game: &str) -> Vec<(String, String)> {
        store
            .seats(server, game)
            .expect("seats")
            .into_iter()
            .map(|e| (e.seat, e.token))
            .collect()
    }

    fn pair(seat: &str, token: &str) -> (String, String) {
        (seat.to_owned(), token.to_owned())
    }

    #[test]
    fn stores_and_finds_by_server_and_game() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = TokenStore::new(dir.path().join("nested/oanquan"));
        assert!(tokens(&store, "http://a:1", "g1").is_empty());
        store
            .put(entry("http://a:1/", "g1", "first", "t1"))
            .expect("put");
        store
            .put(entry("http://b:1", "g1", "first", "t2"))
            .expect("put");
        store
            .put(entry("http://a:1", "g2", "first", "t3"))
            .expect("put");
        assert_eq!(tokens(&store, "http://a:1", "g1"), [pair("first", "t1")]);
        assert_eq!(tokens(&store, "http://b:1/", "g1"), [pair("first", "t2")]);
        // Replacing a seat keeps one entry per seat.
        store
            .put(entry("http://a:1", "g1", "first", "t4"))
            .expect("put");
        assert_eq!(tokens(&store, "http://a:1", "g1"), [pair("first", "t4")]);
        let raw = fs::read_to_string(store.path()).expect("read");
        assert_eq!(raw.matches("\"g1\"").count(), 2, "{raw}");
        // A fresh handle (a restarted client) sees the same data.
        let again = TokenStore::new(dir.path().join("nested/oanquan"));
        assert_eq!(tokens(&again, "http://a:1", "g2"), [pair("first", "t3")]);
        assert_eq!(
            again.other_servers("http://a:1", "g1").expect("others"),
            ["http://b:1"]
        );
    }

    #[test]
    fn both_seats_of_one_game_are_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = TokenStore::new(dir.path());
        store
            .put(entry("http://a:1", "g", "first", "creator"))
            .expect("put");
        store
            .put(entry("a:1", "g", "second", "joiner"))
            .expect("put");
        assert_eq!(
            tokens(&store, "http://a:1", "g"),
            [pair("first", "creator"), pair("second", "joiner")]
        );
    }

    #[test]
    fn one_key_per_server_however_it_is_spelt() {
        for same in [
            "127.0.0.1:50051",
            "http://127.0.0.1:50051",
            " HTTP://127.0.0.1:50051/ ",
        ] {
            assert_eq!(normalize_server(same), "http://127.0.0.1:50051", "{same}");
        }
        assert_eq!(normalize_server("Games.Example"), "http://games.example:80");
        assert_eq!(
            normalize_server("https://Games.Example/"),
            "https://games.example:443"
        );
        assert_eq!(normalize_server("http://[::1]:7"), "http://[::1]:7");
        assert_eq!(normalize_server("https://[::1]"), "https://[::1]:443");
        assert_eq!(normalize_server("http://h:1/api/"), "http://h:1/api");
        assert_eq!(normalize_server("ftp://h:1/"), "ftp://h:1");
    }

    #[test]
    fn version_1_files_are_read_and_upgraded() {
        let dir = tempfile::tempdir().expect("tempdir");
        let old = r#"{"version": 1, "entries": [
            {"server": "127.0.0.1:50051/", "game_id": "g", "seat": "first", "token": "t1",
             "display_name": "Lan"}]}"#;
        fs::write(dir.path().join(FILE_NAME), old).expect("write");
        let store = TokenStore::new(dir.path());
        assert_eq!(
            tokens(&store, "http://127.0.0.1:50051", "g"),
            [pair("first", "t1")]
        );
        store
            .put(entry("127.0.0.1:50051", "g", "second", "t2"))
            .expect("put");
        let raw: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(store.path()).expect("read")).expect("json");
        assert_eq!(raw["version"], VERSION);
        assert_eq!(raw["entries"][0]["server"], "http://127.0.0.1:50051");
        assert_eq!(
            tokens(&store, "127.0.0.1:50051", "g"),
            [pair("first", "t1"), pair("second", "t2")]
        );
    }

    #[cfg(unix)]
    #[test]
    fn file_is_private() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().expect("tempdir");
        let store = TokenStore::new(dir.path().join("cfg"));
        store.put(entry("s", "g", "first", "t")).expect("put");
        let mode = fs::metadata(store.path())
            .expect("stat")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let dir_mode = fs::metadata(dir.path().join("cfg"))
            .expect("stat")
            .permissions()
            .mode();
        assert_eq!(dir_mode & 0o777, 0o700);
    }

    /// Many clients storing seats at once in one directory (threads here: each `put` opens the
    /// lock file itself, and flock locks belong to the open file): every seat is kept.
    #[test]
    fn concurrent_puts_keep_every_seat() {
        const WRITERS: usize = 8;
        const EACH: usize = 10;
        let dir = tempfile::tempdir().expect("tempdir");
        let start = std::sync::Barrier::new(WRITERS);
        std::thread::scope(|scope| {
            for writer in 0..WRITERS {
                let (dir, start) = (dir.path(), &start);
                scope.spawn(move || {
                    let store = TokenStore::new(dir);
                    start.wait();
                    for game in 0..EACH {
                        store
                            .put(entry(
                                "http://a:1",
                                &format!("g{writer}-{game}"),
                                "first",
                                "t",
                            ))
                            .expect("put");
                    }
                });
            }
        });
        let store = TokenStore::new(dir.path());
        let mut missing = Vec::new();
        for writer in 0..WRITERS {
            for game in 0..EACH {
                let id = format!("g{writer}-{game}");
                if store.seats("http://a:1", &id).expect("seats").is_empty() {
                    missing.push(id);
                }
            }
        }
        assert!(missing.is_empty(), "seats lost: {missing:?}");
        // Only the file and its lock are left: no temporary file.
        let mut names: Vec<_> = fs::read_dir(dir.path())
            .expect("read_dir")
            .map(|e| e.expect("entry").file_name())
            .collect();
        names.sort();
        assert_eq!(names, [FILE_NAME, "tokens.json.lock"], "{names:?}");
    }

    #[test]
    fn corrupt_file_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(dir.path().join(FILE_NAME), b"{not json").expect("write");
        let store = TokenStore::new(dir.path());
        let err = store.seats("s", "g").expect_err("corrupt");
        assert_eq!(err.code, code::FAILURE);
        assert!(err.message.contains("not valid"));
    }

    #[test]
    fn a_newer_format_is_refused_not_rewritten() {
        let dir = tempfile::tempdir().expect("tempdir");
        let newer = r#"{"version":3,"entries":[],"future":"kept"}"#;
        fs::write(dir.path().join(FILE_NAME), newer).expect("write");
        let store = TokenStore::new(dir.path());
        let err = store.seats("s", "g").expect_err("newer");
        assert!(err.message.contains("newer oanquan"), "{}", err.message);
        assert_eq!(
            fs::read_to_string(dir.path().join(FILE_NAME)).unwrap(),
            newer
        );
    }

    /// A damaged key, or a top level that is no object, read as a file with no seats: the next
    /// write replaced it, and every seat it held was gone.
    #[test]
    fn a_damaged_file_is_refused_and_left_as_it_is() {
        let good = r#"{"version":2,"entries":[{"server":"http://s:1","game_id":"g","seat":"first","token":"t"}]}"#;
        for damaged in [
            good.replace("entries", "entriez"),
            good.replace("\"token\"", "\"tokeN\""),
            "[]".to_owned(),
            "[2,[]]".to_owned(),
            "null".to_owned(),
        ] {
            let dir = tempfile::tempdir().expect("tempdir");
            fs::write(dir.path().join(FILE_NAME), &damaged).expect("write");
            let store = TokenStore::new(dir.path());
            let err = store.seats("s:1", "g").expect_err(&damaged);
            assert_eq!(err.code, code::FAILURE);
            assert!(
                err.message.contains("is not valid"),
                "{damaged}: {}",
                err.message
            );
            assert!(
                err.message.contains("left as it is"),
                "{damaged}: {}",
                err.message
            );
            let entry = Entry {
                server: "s:1".to_owned(),
                game_id: "h".to_owned(),
                seat: "second".to_owned(),
                token: "u".to_owned(),
                display_name: String::new(),
            };
            assert!(store.put(entry).is_err(), "{damaged}");
            assert_eq!(
                fs::read_to_string(dir.path().join(FILE_NAME)).unwrap(),
                damaged
            );
        }
        // The good file reads, so the refusals above are the damage's.
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(dir.path().join(FILE_NAME), good).expect("write");
        assert_eq!(
            TokenStore::new(dir.path()).seats("s:1", "g").unwrap().len(),
            1
        );
    }

    /// A file edited or merged by hand may repeat a seat: the copies are one seat (the last),
    /// and the next write keeps one.
    #[test]
    fn copies_of_one_seat_are_one_seat() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut entries: Vec<Entry> = (0..20)
            .map(|n| entry("http://a:1", "g", "first", &format!("t{n}")))
            .collect();
        entries.push(entry("a:1", "other", "first", "o"));
        let file = TokenFile {
            version: VERSION,
            entries,
        };
        fs::write(
            dir.path().join(FILE_NAME),
            serde_json::to_vec(&file).expect("json"),
        )
        .expect("write");
        let store = TokenStore::new(dir.path());
        assert_eq!(tokens(&store, "http://a:1", "g"), [pair("first", "t19")]);
        store
            .put(entry("http://a:1", "g", "second", "s"))
            .expect("put");
        assert_eq!(
            tokens(&store, "http://a:1", "g"),
            [pair("first", "t19"), pair("second", "s")]
        );
        let raw = fs::read_to_string(store.path()).expect("read");
        assert_eq!(raw.matches("\"g\"").count(), 2, "{raw}");
        assert_eq!(tokens(&store, "http://a:1", "other"), [pair("first", "o")]);
    }

    /// What `create` checks before asking the server: a token file that is no file, or a lock
    /// that is none, stops it; a missing file does not (and is not created).
    #[test]
    fn ready_to_store_refuses_what_could_not_be_written() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = TokenStore::new(dir.path().join("cfg"));
        store.clone().ready_to_store().expect("a fresh directory");
        assert!(!store.path().exists());
        fs::create_dir(store.path()).expect("mkdir");
        let err = store.clone().ready_to_store().expect_err("a directory");
        assert!(
            err.message.contains("not a regular file"),
            "{}",
            err.message
        );
        assert!(err.message.contains("nothing was asked"), "{}", err.message);
        fs::remove_dir(store.path()).expect("rmdir");
        let lock = dir.path().join("cfg/tokens.json.lock");
        fs::remove_file(&lock).expect("rm lock");
        fs::create_dir(&lock).expect("mkdir");
        // Reading needs no lock; storing does.
        store.clone().checked().expect("read without the lock");
        let err = store.ready_to_store().expect_err("a directory as the lock");
        assert!(err.message.contains("tokens.json.lock"), "{}", err.message);
    }

    #[test]
    fn explicit_dir_wins() {
        let store = TokenStore::locate(Some(Path::new("/x/y"))).expect("locate");
        assert_eq!(store.path(), Path::new("/x/y/tokens.json"));
    }
}
