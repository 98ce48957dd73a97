//! The per-user token file: the secret player tokens that `create` and `join` receive, so that
//! `play GAME` can pick a game up again after the client (or the server connection) restarts.
//!
//! Location: `$OANQUAN_CONFIG_DIR/tokens.json`, else `$XDG_CONFIG_HOME/oanquan/tokens.json`,
//! else `~/.config/oanquan/tokens.json`. The file is created with mode 0600 (the directory 0700)
//! because a token is a password for a seat. Entries are keyed by server address and game id:
//! the same game id on two servers is two different games.
//!
//! Writes go to a temporary file that is then renamed over the old one, so a crash never leaves
//! a half-written file. Two clients writing at the very same moment can still lose one entry
//! (last rename wins); that is acceptable for a per-user file written once per game.

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{CliError, code};

const FILE_NAME: &str = "tokens.json";

/// One stored seat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// Server address as given to `--server`, normalised by [`normalize_server`].
    pub server: String,
    pub game_id: String,
    /// "first" or "second".
    pub seat: String,
    pub token: String,
    #[serde(default)]
    pub display_name: String,
}

#[derive(Debug, Default, Serialize, Deserialize)]
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

/// `http://host:1/` and `http://host:1` are the same server.
pub fn normalize_server(server: &str) -> String {
    server.trim().trim_end_matches('/').to_owned()
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

    fn load(&self) -> Result<TokenFile, CliError> {
        let path = self.path();
        match fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                CliError::new(
                    code::FAILURE,
                    format!("token file {} is not valid: {e}", path.display()),
                )
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(TokenFile::default()),
            Err(e) => Err(CliError::io(&format!("reading {}", path.display()), &e)),
        }
    }

    /// The stored seat for a game on a server, if any.
    pub fn get(&self, server: &str, game_id: &str) -> Result<Option<Entry>, CliError> {
        let server = normalize_server(server);
        Ok(self
            .load()?
            .entries
            .into_iter()
            .find(|e| e.server == server && e.game_id == game_id))
    }

    /// Stores (or replaces) the seat for `entry.server` + `entry.game_id`.
    pub fn put(&self, mut entry: Entry) -> Result<(), CliError> {
        entry.server = normalize_server(&entry.server);
        let mut file = self.load()?;
        file.version = 1;
        file.entries
            .retain(|e| !(e.server == entry.server && e.game_id == entry.game_id));
        file.entries.push(entry);
        self.save(&file)
    }

    fn save(&self, file: &TokenFile) -> Result<(), CliError> {
        let what = |p: &Path| format!("writing {}", p.display());
        create_private_dir(&self.dir).map_err(|e| CliError::io(&what(&self.dir), &e))?;
        let path = self.path();
        let tmp = self
            .dir
            .join(format!(".{FILE_NAME}.{}.tmp", std::process::id()));
        let json = serde_json::to_vec_pretty(file)
            .map_err(|e| CliError::new(code::FAILURE, format!("encoding tokens: {e}")))?;
        let result = write_private(&tmp, &json).and_then(|()| fs::rename(&tmp, &path));
        if result.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        result.map_err(|e| CliError::io(&what(&path), &e))
    }
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
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let mut f = options.open(path)?;
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

    fn entry(server: &str, game: &str, token: &str) -> Entry {
        Entry {
            server: server.into(),
            game_id: game.into(),
            seat: "first".into(),
            token: token.into(),
            display_name: "alice".into(),
        }
    }

    #[test]
    fn stores_and_finds_by_server_and_game() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = TokenStore::new(dir.path().join("nested/oanquan"));
        assert_eq!(store.get("http://a:1", "g1").expect("get"), None);
        store.put(entry("http://a:1/", "g1", "t1")).expect("put");
        store.put(entry("http://b:1", "g1", "t2")).expect("put");
        store.put(entry("http://a:1", "g2", "t3")).expect("put");
        assert_eq!(
            store.get("http://a:1", "g1").expect("get").map(|e| e.token),
            Some("t1".into())
        );
        assert_eq!(
            store
                .get("http://b:1/", "g1")
                .expect("get")
                .map(|e| e.token),
            Some("t2".into())
        );
        // Replacing keeps one entry per key.
        store.put(entry("http://a:1", "g1", "t4")).expect("put");
        assert_eq!(
            store.get("http://a:1", "g1").expect("get").map(|e| e.token),
            Some("t4".into())
        );
        let raw = fs::read_to_string(store.path()).expect("read");
        assert_eq!(raw.matches("\"g1\"").count(), 2, "{raw}");
        // A fresh handle (a restarted client) sees the same data.
        let again = TokenStore::new(dir.path().join("nested/oanquan"));
        assert!(again.get("http://a:1", "g2").expect("get").is_some());
    }

    #[cfg(unix)]
    #[test]
    fn file_is_private() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().expect("tempdir");
        let store = TokenStore::new(dir.path().join("cfg"));
        store.put(entry("s", "g", "t")).expect("put");
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

    #[test]
    fn corrupt_file_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(dir.path().join(FILE_NAME), b"{not json").expect("write");
        let store = TokenStore::new(dir.path());
        let err = store.get("s", "g").expect_err("corrupt");
        assert_eq!(err.code, code::FAILURE);
        assert!(err.message.contains("not valid"));
    }

    #[test]
    fn explicit_dir_wins() {
        let store = TokenStore::locate(Some(Path::new("/x/y"))).expect("locate");
        assert_eq!(store.path(), Path::new("/x/y/tokens.json"));
    }
}
