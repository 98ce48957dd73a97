//! The bearer token that guards `/metrics` (`--metrics-token-file`).
//!
//! The token is read once, at start, from a file (a mounted secret), checked, and kept only as
//! its SHA-256: a request's credential is hashed and the two digests compared in constant time,
//! so neither the token's bytes nor its length show in how long a refusal takes. The token is
//! never printed: not in a refusal at start, not in `Debug`, not in a log.
//!
//! The file is looked at again when a scrape comes ([`MetricsTokenFile`]): when it changed
//! (another size, time, or file, as a rotated Kubernetes secret is), it is read again, and a
//! good token replaces the one in use from that scrape on; a file that no longer reads as a
//! token (missing, half-written, malformed) is warned about once and the token in use is kept.
//!
//! A request is let in when it has exactly one `Authorization` header of the form
//! `Bearer <token>`: the scheme in any case (RFC 7235 § 2.1 makes it case-insensitive, and
//! Prometheus, curl and Go clients all send `Bearer`), then one or more spaces, then the token
//! exactly (it holds no spaces; spaces around it are ignored), read as the gRPC API reads its
//! tokens (`crate::bearer`). Anything else is refused the same way, without saying which part
//! was wrong.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq as _;

/// The shortest token taken: 16 bytes (128 bits when random, as `openssl rand -hex 16` makes
/// 32 characters of).
pub const MIN_TOKEN_BYTES: usize = 16;

/// The longest token taken: well past any generated secret, and far below what an HTTP header
/// may carry. A longer file is refused rather than read to its end.
pub const MAX_TOKEN_BYTES: usize = 4096;

/// A metrics token; see the module docs.
#[derive(Clone)]
pub struct MetricsToken {
    digest: [u8; 32],
}

impl std::fmt::Debug for MetricsToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MetricsToken(..)")
    }
}

impl MetricsToken {
    /// Reads the token from `path`: the file's contents, less one trailing line ending (`\n`
    /// or `\r\n`).
    ///
    /// # Errors
    ///
    /// One line saying why the file cannot be read or is no token (see [`MetricsToken::new`]);
    /// it names the file but never repeats its contents.
    pub fn read(path: &Path) -> Result<MetricsToken, String> {
        let unreadable = |error: std::io::Error| format!("cannot be read: {error}");
        // Looked at before opening: opening a FIFO waits for a writer, with no word, for ever.
        let meta = std::fs::metadata(path).map_err(unreadable)?;
        if meta.is_dir() {
            return Err("is a directory; give the file holding the token".to_owned());
        }
        if !meta.is_file() {
            return Err(
                "is not a regular file (a FIFO, a socket or a device); give the file holding \
                 the token"
                    .to_owned(),
            );
        }
        let mut file = std::fs::File::open(path).map_err(unreadable)?;
        // One byte more than the longest line a token file may hold, to tell it is too long
        // without reading a huge (or endless, such as /dev/zero) file to its end.
        let mut bytes = Vec::new();
        file.by_ref()
            .take(MAX_TOKEN_BYTES as u64 + 3)
            .read_to_end(&mut bytes)
            .map_err(unreadable)?;
        let line = bytes
            .strip_suffix(b"\n")
            .map(|line| line.strip_suffix(b"\r").unwrap_or(line))
            .unwrap_or(&bytes);
        MetricsToken::new(line)
    }

    /// The token `bytes`.
    ///
    /// # Errors
    ///
    /// Why `bytes` is no token: empty, not UTF-8, holding a space, a line break or another
    /// control character, holding a character an HTTP header cannot carry as it is (anything
    /// but printable ASCII), shorter than [`MIN_TOKEN_BYTES`] or longer than
    /// [`MAX_TOKEN_BYTES`]. The message gives the offending byte's position, never the token.
    pub fn new(bytes: &[u8]) -> Result<MetricsToken, String> {
        if bytes.is_empty() {
            return Err("is empty; write a token of at least 16 bytes in it".to_owned());
        }
        let text = std::str::from_utf8(bytes)
            .map_err(|error| format!("is not UTF-8 (at byte {})", error.valid_up_to()))?;
        if let Some((at, bad)) = text.char_indices().find(|&(_, c)| !c.is_ascii_graphic()) {
            let plain = "a token is printable ASCII without spaces (as `openssl rand -hex 32` \
                         writes)";
            let (what, rule) = if bad == '\n' || bad == '\r' {
                (
                    "a line break",
                    "a token is one line (one line break at its end is taken off)",
                )
            } else if bad.is_whitespace() {
                ("whitespace", plain)
            } else if bad.is_control() {
                ("a control character", plain)
            } else {
                ("a character that is not ASCII", plain)
            };
            return Err(format!("has {what} at byte {at}; {rule}"));
        }
        if bytes.len() < MIN_TOKEN_BYTES {
            return Err(format!(
                "holds a token of {} bytes; give at least {MIN_TOKEN_BYTES}",
                bytes.len()
            ));
        }
        if bytes.len() > MAX_TOKEN_BYTES {
            return Err(format!(
                "holds more than {MAX_TOKEN_BYTES} bytes; give a shorter token"
            ));
        }
        Ok(MetricsToken {
            digest: Sha256::digest(bytes).into(),
        })
    }

    /// Whether `headers` carry exactly one `Authorization: Bearer <this token>`.
    #[must_use]
    pub fn admits(&self, headers: &http::HeaderMap) -> bool {
        let mut values = headers.get_all(http::header::AUTHORIZATION).iter();
        let (Some(value), None) = (values.next(), values.next()) else {
            return false;
        };
        // A value that is not visible ASCII cannot carry a token (which is printable ASCII).
        let credential = value
            .to_str()
            .ok()
            .and_then(crate::bearer::credential)
            .unwrap_or_default();
        // Longer than any token: no need to hash (the length of a token is no secret past
        // MAX_TOKEN_BYTES, which is public).
        if credential.len() > MAX_TOKEN_BYTES {
            return false;
        }
        let digest: [u8; 32] = Sha256::digest(credential.as_bytes()).into();
        digest.ct_eq(&self.digest).into()
    }
}

/// What tells that a token file changed without reading it: its size, modification time and,
/// on Unix, which file it is (a secret rotated by a symlink swap is another inode).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
    file: (u64, u64),
}

impl Stamp {
    /// `None` when the file cannot be looked at (removed, say).
    fn of(path: &Path) -> Option<Stamp> {
        let meta = std::fs::metadata(path).ok()?;
        #[cfg(unix)]
        let file = {
            use std::os::unix::fs::MetadataExt as _;
            (meta.dev(), meta.ino())
        };
        #[cfg(not(unix))]
        let file = (0, 0);
        Some(Stamp {
            len: meta.len(),
            modified: meta.modified().ok(),
            file,
        })
    }
}

/// The token of `--metrics-token-file`, read again when the file changes (see the module
/// docs), so that rotating the secret needs no restart.
#[derive(Debug)]
pub struct MetricsTokenFile {
    path: PathBuf,
    loaded: Mutex<(Option<Stamp>, MetricsToken)>,
}

impl MetricsTokenFile {
    /// Reads the token from `path`, as [`MetricsToken::read`].
    ///
    /// # Errors
    ///
    /// As [`MetricsToken::read`]: the server does not start without a good token.
    pub fn open(path: &Path) -> Result<MetricsTokenFile, String> {
        let stamp = Stamp::of(path);
        let token = MetricsToken::read(path)?;
        Ok(MetricsTokenFile {
            path: path.to_owned(),
            loaded: Mutex::new((stamp, token)),
        })
    }

    /// Whether `headers` carry the token in use, once the file was looked at for a change.
    #[must_use]
    pub fn admits(&self, headers: &http::HeaderMap) -> bool {
        self.current().admits(headers)
    }

    fn current(&self) -> MetricsToken {
        let stamp = Stamp::of(&self.path);
        let mut loaded = self
            .loaded
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if stamp != loaded.0 {
            // Remembered whatever the outcome, so that a bad file is warned about once, and a
            // file caught half-written is read again when its writer finishes (which changes
            // it again).
            loaded.0 = stamp;
            match MetricsToken::read(&self.path) {
                Ok(token) => {
                    if token.digest != loaded.1.digest {
                        tracing::info!(
                            path = %self.path.display(),
                            "metrics token reloaded: the file changed"
                        );
                    }
                    loaded.1 = token;
                }
                Err(why) => tracing::warn!(
                    path = %self.path.display(),
                    "the metrics token file {why}; the token in use is kept"
                ),
            }
        }
        loaded.1.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "0123456789abcdef-metrics";

    fn headers(values: &[&[u8]]) -> http::HeaderMap {
        let mut headers = http::HeaderMap::new();
        for value in values {
            headers.append(
                http::header::AUTHORIZATION,
                http::HeaderValue::from_bytes(value).unwrap(),
            );
        }
        headers
    }

    #[test]
    fn only_the_bearer_token_is_admitted() {
        let token = MetricsToken::new(TOKEN.as_bytes()).unwrap();
        let admits = |values: &[&[u8]]| token.admits(&headers(values));
        assert!(admits(&[format!("Bearer {TOKEN}").as_bytes()]));
        // RFC 7235: the scheme is case-insensitive; spaces before the token are allowed.
        assert!(admits(&[format!("bearer {TOKEN}").as_bytes()]));
        assert!(admits(&[format!("BEARER   {TOKEN}").as_bytes()]));

        assert!(!admits(&[]));
        assert!(!admits(&[b"Bearer"]));
        assert!(!admits(&[b"Bearer "]));
        assert!(!admits(&[TOKEN.as_bytes()]));
        assert!(!admits(&[format!("Basic {TOKEN}").as_bytes()]));
        assert!(!admits(&[format!("Bearer{TOKEN}").as_bytes()]));
        assert!(!admits(&[format!("Bearer {TOKEN}x").as_bytes()]));
        assert!(!admits(&[format!("Bearer {}", &TOKEN[1..]).as_bytes()]));
        assert!(!admits(&[format!("Bearer {TOKEN} {TOKEN}").as_bytes()]));
        assert!(!admits(&[
            format!("Bearer {}", TOKEN.to_uppercase()).as_bytes()
        ]));
        assert!(!admits(&[b"Bearer \xff\xfe0123456789abcdef"]));
        let huge = format!("Bearer {}", "a".repeat(1 << 20));
        assert!(!admits(&[huge.as_bytes()]));
        // Two headers, even with the right one among them: which one counts would be a guess.
        let right = format!("Bearer {TOKEN}");
        assert!(!admits(&[right.as_bytes(), right.as_bytes()]));
        assert!(!admits(&[
            b"Bearer wrong-token-0123456789",
            right.as_bytes()
        ]));
    }

    #[test]
    fn bad_tokens_are_refused_with_a_reason_that_does_not_show_them() {
        let refused = |bytes: &[u8], why: &str| {
            let error = MetricsToken::new(bytes).expect_err(why);
            assert!(error.contains(why), "{error}");
            assert!(!error.contains("secret"), "{error}");
        };
        refused(b"", "is empty");
        refused(b"secret", "6 bytes; give at least 16");
        refused(b"secret-but-not-\xffutf8", "not UTF-8 (at byte 15)");
        refused(b"secret with-a-space-inside", "whitespace at byte 6");
        refused(b"secret-with-a-tab\t-inside", "whitespace at byte 17");
        refused(b"secret-two-lines\nsecret-two", "a line break");
        refused(
            b"secret-with-a-bell\x07-in-it",
            "a control character at byte 18",
        );
        refused(
            b"secret-with-a-DEL\x7f-in-it",
            "a control character at byte 17",
        );
        refused(
            "secret-với-dấu-tiếng-việt".as_bytes(),
            "not ASCII at byte 8",
        );
        refused(&[b'a'; MAX_TOKEN_BYTES + 1], "more than 4096 bytes");
        assert!(MetricsToken::new(&[b'a'; MAX_TOKEN_BYTES]).is_ok());
        assert!(MetricsToken::new(&[b'a'; MIN_TOKEN_BYTES]).is_ok());
        assert_eq!(
            format!("{:?}", MetricsToken::new(TOKEN.as_bytes()).unwrap()),
            "MetricsToken(..)"
        );
    }

    #[test]
    fn a_token_file_loses_one_line_ending() {
        let dir = tempfile::tempdir().unwrap();
        let file = |name: &str, contents: &[u8]| {
            let path = dir.path().join(name);
            std::fs::write(&path, contents).unwrap();
            MetricsToken::read(&path)
        };
        let bearer = http::HeaderValue::from_str(&format!("Bearer {TOKEN}")).unwrap();
        let mut right = http::HeaderMap::new();
        right.insert(http::header::AUTHORIZATION, bearer);
        for contents in [
            TOKEN.to_owned(),
            format!("{TOKEN}\n"),
            format!("{TOKEN}\r\n"),
        ] {
            assert!(file("t", contents.as_bytes()).unwrap().admits(&right));
        }
        assert!(file("t", format!("{TOKEN}\n\n").as_bytes()).is_err());
        assert!(file("t", format!("{TOKEN} \n").as_bytes()).is_err());
        assert!(file("t", b"\n").unwrap_err().contains("is empty"));
        let long = file("t", &[b'a'; 1 << 20]).unwrap_err();
        assert!(long.contains("more than 4096 bytes"), "{long}");
        let missing = MetricsToken::read(&dir.path().join("missing")).unwrap_err();
        assert!(
            missing.starts_with("cannot be read: No such file"),
            "{missing}"
        );
        let folder = MetricsToken::read(dir.path()).unwrap_err();
        assert!(folder.contains("is a directory"), "{folder}");
        // A device, and a FIFO no one writes to (opening it would wait for ever).
        let device = MetricsToken::read(Path::new("/dev/zero")).unwrap_err();
        assert!(device.contains("not a regular file"), "{device}");
        #[cfg(unix)]
        {
            let fifo = dir.path().join("fifo");
            let made = std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap();
            assert!(made.success());
            let refused = MetricsToken::read(&fifo).unwrap_err();
            assert!(refused.contains("not a regular file"), "{refused}");
        }
    }

    /// A changed file is read again at the next request: a good token replaces the old one at
    /// once; a file that no longer holds a token (half-written, removed, malformed) keeps the
    /// token in use, and a later good write is taken.
    #[test]
    fn a_changed_token_file_is_read_again_and_a_bad_one_keeps_the_old_token() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metrics-token");
        let with = |token: &str| {
            let mut headers = http::HeaderMap::new();
            headers.insert(
                http::header::AUTHORIZATION,
                http::HeaderValue::from_str(&format!("Bearer {token}")).unwrap(),
            );
            headers
        };
        const NEXT: &str = "fedcba9876543210-rotated";
        std::fs::write(&path, format!("{TOKEN}\n")).unwrap();
        let file = MetricsTokenFile::open(&path).unwrap();
        assert!(file.admits(&with(TOKEN)));
        assert!(!file.admits(&with(NEXT)));

        // Rotated as Kubernetes does: a new file renamed over the old one.
        let staged = dir.path().join("staged");
        std::fs::write(&staged, format!("{NEXT}\n")).unwrap();
        std::fs::rename(&staged, &path).unwrap();
        assert!(file.admits(&with(NEXT)));
        assert!(!file.admits(&with(TOKEN)));

        // Caught half-written (too short), then emptied, then removed: the token in use stays.
        for bad in [&b"fedcba"[..], b""] {
            std::fs::write(&path, bad).unwrap();
            assert!(file.admits(&with(NEXT)));
            assert!(!file.admits(&with("fedcba")));
        }
        std::fs::remove_file(&path).unwrap();
        assert!(file.admits(&with(NEXT)));

        // Written again in full: taken.
        std::fs::write(&path, TOKEN).unwrap();
        assert!(file.admits(&with(TOKEN)));
        assert!(!file.admits(&with(NEXT)));

        // A bad file at start is still refused.
        std::fs::write(&path, b"short").unwrap();
        assert!(MetricsTokenFile::open(&path).is_err());
    }
}
