//! The account file: the API key that `oanquan register` receives, one account per server, so
//! that `create`, `join`, `seek` and `accept` play as the account and `me`, `games` and `keys`
//! know who is asking.
//!
//! It is `account.json` in the token file's directory (see [`crate::tokens`]), written the same
//! way: mode 0600 from the first byte, through a temporary file renamed over the old one, under
//! an exclusive lock (`account.json.lock`) from reading the file to renaming the new one in. It is
//! a file of its own rather than a part of `tokens.json` because an older client rewrites the
//! token file with the fields it knows: it would drop the key, which the server shows only once.
//!
//! The key is a password for the account: [`Account`]'s `Debug` leaves it out, and nothing here
//! prints it.

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{CliError, code};
use crate::files::{STATE_MAX_BYTES, read_regular, read_state};
use crate::output::note;
use crate::tokens::{lock, normalize_server, save_private};

const FILE_NAME: &str = "account.json";

/// The file format written.
const VERSION: u32 = 1;

/// The account used on one server.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Account {
    /// Server address, normalised by [`normalize_server`].
    pub server: String,
    /// The username as registered.
    pub username: String,
    /// The secret API key (`oqk_…`).
    pub api_key: String,
    /// The key's public id (`ApiKey.id`), to tell it apart in `oanquan keys`.
    #[serde(default)]
    pub key_id: String,
    /// A registration begun with this key (made here) whose answer has not come: the account
    /// may or may not exist. `oanquan register` with the same name finishes it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pending: bool,
}

impl fmt::Debug for Account {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Account")
            .field("server", &self.server)
            .field("username", &self.username)
            .field("api_key", &"<secret>")
            .field("key_id", &self.key_id)
            .field("pending", &self.pending)
            .finish()
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    version: u32,
    #[serde(default)]
    accounts: Vec<Account>,
}

/// An API key's parts, `oqk_<id>_<secret>`: (id, secret), either possibly empty.
fn key_parts(key: &str) -> Option<(&str, &str)> {
    key.strip_prefix("oqk_")?.split_once('_')
}

/// The public id of an API key, as `oanquan keys` lists it; `None` without an id. `login` reads
/// it before asking the server about the key.
pub fn key_id(key: &str) -> Option<&str> {
    key_parts(key).map(|(id, _)| id).filter(|id| !id.is_empty())
}

/// Whether a stored `key` has a whole API key's form: an id, a secret, visible ASCII.
fn looks_like_key(key: &str) -> bool {
    key_parts(key).is_some_and(|(id, secret)| !id.is_empty() && !secret.is_empty())
        && key.bytes().all(|b| b.is_ascii_graphic())
}

/// Handle on the account file in one directory.
#[derive(Debug, Clone)]
pub struct AccountFile {
    dir: PathBuf,
}

impl AccountFile {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    pub fn path(&self) -> PathBuf {
        self.dir.join(FILE_NAME)
    }

    fn load(&self) -> Result<File, CliError> {
        let path = self.path();
        let (bytes, meta) = match read_regular(&path, STATE_MAX_BYTES) {
            Ok(Some(read)) => read,
            Ok(None) => return Ok(File::default()),
            Err(e) => return Err(CliError::io(&format!("reading {}", path.display()), &e)),
        };
        warn_if_shared(&path, &meta);
        let mut file: File = read_state(&bytes, VERSION, "account", &path)?;
        for account in &mut file.accounts {
            account.server = normalize_server(&account.server);
        }
        Ok(file)
    }

    /// The account for `server`, if one is stored.
    pub fn get(&self, server: &str) -> Result<Option<Account>, CliError> {
        let account = self.stored(server)?;
        if let Some(account) = &account
            && account.pending
        {
            return Err(CliError::new(
                code::AUTH,
                format!(
                    "the registration of {} on {} did not finish (its answer never came): run \
                     `oanquan register {}` again to finish it",
                    crate::shown::shown_name(&account.username),
                    account.server,
                    crate::shown::shown_name(&account.username),
                ),
            ));
        }
        // A key edited into something else would otherwise be left off every request, and
        // the commands would play anonymously under the account's name.
        if let Some(account) = &account
            && !looks_like_key(&account.api_key)
        {
            return Err(CliError::new(
                code::AUTH,
                format!(
                    "the API key stored in {} for {} is not an API key (keys look like \
                     oqk_...): store a good one with `oanquan login --force`",
                    self.path().display(),
                    account.server
                ),
            ));
        }
        Ok(account)
    }

    /// The account stored for `server`, its key unchecked (for replacing it).
    pub fn stored(&self, server: &str) -> Result<Option<Account>, CliError> {
        let server = normalize_server(server);
        Ok(self
            .load()?
            .accounts
            .into_iter()
            .find(|a| a.server == server))
    }

    /// Stores `account` for its server, replacing the one stored there, if any.
    pub fn put(&self, mut account: Account) -> Result<(), CliError> {
        account.server = normalize_server(&account.server);
        let _lock = lock(&self.dir, FILE_NAME)?;
        let mut file = self.load()?;
        file.version = VERSION;
        file.accounts.retain(|a| a.server != account.server);
        file.accounts.push(account);
        self.save(&file)
    }

    /// Holds this directory's accounts for one `register` or `login` from its first look at
    /// the file to its last write (a lock of its own, beside the file's: `put` and `remove`
    /// take the file's for each write).
    pub fn exclusive(&self) -> Result<crate::tokens::FileLock, CliError> {
        lock(&self.dir, "account.json.register")
    }

    /// Forgets the account of `server`; true if there was one.
    pub fn remove(&self, server: &str) -> Result<bool, CliError> {
        let server = normalize_server(server);
        let _lock = lock(&self.dir, FILE_NAME)?;
        let mut file = self.load()?;
        let before = file.accounts.len();
        file.accounts.retain(|a| a.server != server);
        if file.accounts.len() == before {
            return Ok(false);
        }
        if file.accounts.is_empty() {
            // Nothing left to keep: as before the first account was stored (a registration
            // refused leaves no file behind).
            let path = self.path();
            fs::remove_file(&path)
                .map_err(|e| CliError::io(&format!("removing {}", path.display()), &e))?;
            return Ok(true);
        }
        file.version = VERSION;
        self.save(&file)?;
        Ok(true)
    }

    fn save(&self, file: &File) -> Result<(), CliError> {
        let json = serde_json::to_vec_pretty(file)
            .map_err(|e| CliError::new(code::FAILURE, format!("encoding the account: {e}")))?;
        save_private(&self.dir, FILE_NAME, &json)
    }
}

/// The file is written 0600, but a person may have copied it or changed its mode: anyone who
/// can read it can play as the account, so say so (the next write makes it private again).
#[cfg(unix)]
fn warn_if_shared(path: &Path, meta: &fs::Metadata) {
    use std::os::unix::fs::PermissionsExt as _;
    if meta.permissions().mode() & 0o077 != 0 {
        note(format!(
            "warning: {} holds your API key and can be read by other users: chmod 600 it",
            path.display()
        ));
    }
}

#[cfg(not(unix))]
fn warn_if_shared(_path: &Path, _meta: &fs::Metadata) {}

#[cfg(test)]
mod tests {
    use super::*;

    fn account(server: &str, username: &str, key: &str) -> Account {
        Account {
            server: server.into(),
            username: username.into(),
            api_key: key.into(),
            key_id: format!("id-{username}"),
            pending: false,
        }
    }

    #[test]
    fn a_stored_key_that_is_not_a_key_is_refused_not_left_off() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = AccountFile::new(dir.path());
        file.put(account("bad:1", "Hoa", "hello world"))
            .expect("put");
        let err = file.get("bad:1").expect_err("not a key");
        assert_eq!(err.code, code::AUTH);
        assert!(err.message.contains("login --force"), "{}", err.message);
        assert!(!err.message.contains("hello world"), "{}", err.message);
        assert_eq!(file.stored("bad:1").unwrap().unwrap().username, "Hoa");
    }

    /// A damaged key read as a file with no accounts, and the next write lost the key, which
    /// the server shows only once.
    #[test]
    fn a_damaged_file_is_refused_and_left_as_it_is() {
        let good = r#"{"version":1,"accounts":[{"server":"http://a:1","username":"Lan","api_key":"oqk_a_1"}]}"#;
        for damaged in [
            good.replace("accounts", "accountz"),
            good.replace("api_key", "api_kez"),
            "[]".to_owned(),
        ] {
            let dir = tempfile::tempdir().expect("tempdir");
            let file = AccountFile::new(dir.path());
            std::fs::write(file.path(), &damaged).expect("write");
            let err = file.get("a:1").expect_err(&damaged);
            assert!(
                err.message.contains("is not valid"),
                "{damaged}: {}",
                err.message
            );
            assert!(file.put(account("b:1", "Minh", "oqk_b_1")).is_err());
            assert_eq!(std::fs::read_to_string(file.path()).unwrap(), damaged);
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let file = AccountFile::new(dir.path());
        std::fs::write(file.path(), good).expect("write");
        assert_eq!(file.get("a:1").unwrap().unwrap().username, "Lan");
    }

    #[test]
    fn a_newer_format_is_refused_not_rewritten() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = AccountFile::new(dir.path());
        let newer = r#"{"version":99,"accounts":[],"future":"kept"}"#;
        std::fs::write(file.path(), newer).expect("write");
        let err = file.get("a:1").expect_err("newer");
        assert!(err.message.contains("newer oanquan"), "{}", err.message);
        assert!(file.put(account("a:1", "Lan", "oqk_a_1")).is_err());
        assert_eq!(std::fs::read_to_string(file.path()).unwrap(), newer);
    }

    #[test]
    fn one_account_per_server() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = AccountFile::new(dir.path().join("cfg"));
        assert_eq!(file.get("http://a:1").expect("get"), None);
        file.put(account("a:1", "Lan", "oqk_a_1")).expect("put");
        file.put(account("https://b:2/", "Minh", "oqk_b_2"))
            .expect("put");
        // However the server is spelt.
        let lan = file.get("http://A:1/").expect("get").expect("stored");
        assert_eq!(lan.username, "Lan");
        assert_eq!(lan.api_key, "oqk_a_1");
        assert_eq!(lan.server, "http://a:1");
        // Replacing keeps one entry per server.
        file.put(account("http://a:1", "Lan2", "oqk_c_3"))
            .expect("put");
        assert_eq!(
            file.get("a:1").expect("get").map(|a| a.username),
            Some("Lan2".to_owned())
        );
        let raw: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(file.path()).expect("read")).expect("json");
        assert_eq!(raw["version"], VERSION);
        assert_eq!(raw["accounts"].as_array().map(Vec::len), Some(2), "{raw}");
        assert_eq!(raw["accounts"][1]["api_key"], "oqk_c_3", "{raw}");
        assert_eq!(raw["accounts"][1]["key_id"], "id-Lan2", "{raw}");
        assert!(file.remove("http://a:1").expect("remove"));
        assert!(!file.remove("http://a:1").expect("remove"));
        assert_eq!(file.get("a:1").expect("get"), None);
        assert!(file.get("https://b:2").expect("get").is_some());
    }

    #[cfg(unix)]
    #[test]
    fn file_is_private() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().expect("tempdir");
        let file = AccountFile::new(dir.path().join("cfg"));
        file.put(account("s", "Lan", "oqk_s_secret")).expect("put");
        let mode = |p: &Path| fs::metadata(p).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode(&file.path()), 0o600);
        assert_eq!(mode(&dir.path().join("cfg")), 0o700);
        // A file made readable by others is private again after the next write.
        fs::set_permissions(file.path(), fs::Permissions::from_mode(0o644)).expect("chmod");
        file.put(account("t", "Minh", "oqk_o_other")).expect("put");
        assert_eq!(mode(&file.path()), 0o600);
        // No temporary file is left behind; the lock file stays (private too).
        let mut names: Vec<_> = fs::read_dir(dir.path().join("cfg"))
            .expect("read_dir")
            .map(|e| e.expect("entry").file_name())
            .collect();
        names.sort();
        assert_eq!(names, [FILE_NAME, "account.json.lock"], "{names:?}");
        assert_eq!(mode(&dir.path().join("cfg/account.json.lock")), 0o600);
    }

    /// `register` on one server while `keys new --store` runs for another: both accounts stay.
    #[test]
    fn concurrent_puts_keep_every_account() {
        const WRITERS: usize = 8;
        const EACH: usize = 8;
        let dir = tempfile::tempdir().expect("tempdir");
        let start = std::sync::Barrier::new(WRITERS);
        std::thread::scope(|scope| {
            for writer in 0..WRITERS {
                let (dir, start) = (dir.path(), &start);
                scope.spawn(move || {
                    let file = AccountFile::new(dir);
                    start.wait();
                    for n in 0..EACH {
                        let server = format!("http://s{writer}-{n}:1");
                        file.put(account(&server, "Lan", "oqk_x_x")).expect("put");
                    }
                });
            }
        });
        let file = AccountFile::new(dir.path());
        let missing: Vec<String> = (0..WRITERS)
            .flat_map(|w| (0..EACH).map(move |n| format!("http://s{w}-{n}:1")))
            .filter(|server| file.get(server).expect("get").is_none())
            .collect();
        assert!(missing.is_empty(), "accounts lost: {missing:?}");
    }

    #[test]
    fn the_key_stays_out_of_debug_output() {
        let text = format!("{:?}", account("s", "Lan", "oqk_supersecret"));
        assert!(!text.contains("supersecret"), "{text}");
        assert!(text.contains("Lan"), "{text}");
    }

    #[test]
    fn corrupt_file_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(dir.path().join(FILE_NAME), b"[1, 2").expect("write");
        let err = AccountFile::new(dir.path()).get("s").expect_err("corrupt");
        assert_eq!(err.code, code::FAILURE);
        assert!(err.message.contains("not valid"), "{}", err.message);
    }
}
