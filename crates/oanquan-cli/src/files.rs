//! Opening the files the client is pointed at (its token and account files, their locks,
//! `--ca-cert`) without trusting what they are: a path may name a FIFO, whose opening waits for
//! a writer for ever, a device such as `/dev/zero`, which never ends, a directory, or a file far
//! larger than any this client writes.
//!
//! Every such file is opened with `O_NONBLOCK` (so that opening a FIFO returns at once), then
//! the opened handle is looked at (`fstat`, not the path: the path could be swapped between a
//! look and the opening) and refused unless it is a regular file; reads stop one byte past a
//! cap, so a huge file is refused, not read into memory.

use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, Read as _};
use std::path::Path;

use crate::error::{CliError, code};

/// The most read of the token file or the account file: some 50,000 seats, far more than a
/// person keeps.
pub const STATE_MAX_BYTES: u64 = 16 << 20;

/// The most read of a `--ca-cert` file: a few thousand certificates (the system's whole bundle
/// is about 200 KiB).
pub const CA_MAX_BYTES: u64 = 4 << 20;

/// Opens `path` with `options` (plus `O_NONBLOCK`, and `O_NOCTTY` so that a terminal named by
/// mistake does not become this process's), and keeps it only if it is a regular file.
///
/// # Errors
///
/// The open's own error (`NotFound` for a missing file), or [`io::ErrorKind::InvalidInput`]
/// saying what the path is instead of a regular file.
pub fn open_regular(options: &mut OpenOptions, path: &Path) -> io::Result<File> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        let flags = rustix::fs::OFlags::NONBLOCK | rustix::fs::OFlags::NOCTTY;
        options.custom_flags(i32::try_from(flags.bits()).unwrap_or(0));
    }
    let file = options.open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(not_regular(&meta));
    }
    Ok(file)
}

/// Reads the whole of the regular file `path`, at most `max_bytes` of it; `None` when there is
/// no such file. The metadata is the opened file's.
///
/// # Errors
///
/// As [`open_regular`]; a read error; [`io::ErrorKind::InvalidData`] for a file larger than
/// `max_bytes`, saying the limit.
pub fn read_regular(path: &Path, max_bytes: u64) -> io::Result<Option<(Vec<u8>, Metadata)>> {
    let mut file = match open_regular(OpenOptions::new().read(true), path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let meta = file.metadata()?;
    let too_large = || {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "larger than {}, far more than such a file holds: refused unread",
                size(max_bytes)
            ),
        )
    };
    if meta.len() > max_bytes {
        return Err(too_large());
    }
    // One byte past the cap tells a file that grew meanwhile from one that fits.
    let mut bytes = Vec::new();
    file.by_ref()
        .take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)?;
    if u64::try_from(bytes.len()).unwrap_or(u64::MAX) > max_bytes {
        return Err(too_large());
    }
    Ok(Some((bytes, meta)))
}

/// `16 MiB`, `512 KiB`, `100 bytes`.
fn size(bytes: u64) -> String {
    if bytes >= 1 << 20 && bytes % (1 << 20) == 0 {
        format!("{} MiB", bytes >> 20)
    } else if bytes >= 1 << 10 && bytes % (1 << 10) == 0 {
        format!("{} KiB", bytes >> 10)
    } else {
        format!("{bytes} bytes")
    }
}

/// What a file is when it is not a regular one.
fn not_regular(meta: &Metadata) -> io::Error {
    let kind = if meta.is_dir() {
        "a directory"
    } else {
        kind_of_special(meta)
    };
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("not a regular file (it is {kind})"),
    )
}

#[cfg(unix)]
fn kind_of_special(meta: &Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt as _;
    let kind = meta.file_type();
    if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_char_device() || kind.is_block_device() {
        "a device, such as /dev/zero"
    } else {
        "neither a file nor a directory"
    }
}

#[cfg(not(unix))]
fn kind_of_special(_meta: &Metadata) -> &'static str {
    "neither a file nor a directory"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_file_is_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        std::fs::write(&path, b"hello").expect("write");
        let (bytes, meta) = read_regular(&path, 5).expect("read").expect("found");
        assert_eq!(bytes, b"hello");
        assert!(meta.is_file());
        assert!(
            read_regular(&dir.path().join("none"), 5)
                .expect("read")
                .is_none()
        );
    }

    #[test]
    fn a_file_over_the_cap_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        std::fs::write(&path, b"hello!").expect("write");
        let err = read_regular(&path, 5).expect_err("too large");
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert!(err.to_string().contains("larger than 5 bytes"), "{err}");
        assert_eq!(size(16 << 20), "16 MiB");
        assert_eq!(size(4 << 10), "4 KiB");
    }

    #[test]
    fn a_directory_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let err = read_regular(dir.path(), 5).expect_err("a directory");
        assert!(err.to_string().contains("a directory"), "{err}");
    }

    #[cfg(unix)]
    #[test]
    fn devices_and_fifos_are_refused_without_waiting() {
        let err = read_regular(Path::new("/dev/zero"), 5).expect_err("a device");
        assert!(err.to_string().contains("not a regular file"), "{err}");
        let dir = tempfile::tempdir().expect("tempdir");
        let fifo = dir.path().join("fifo");
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR,
        )
        .expect("mkfifo");
        let err = read_regular(&fifo, 5).expect_err("a FIFO");
        assert!(err.to_string().contains("a FIFO"), "{err}");
        let err =
            open_regular(OpenOptions::new().read(true).write(true), &fifo).expect_err("a FIFO");
        assert!(err.to_string().contains("a FIFO"), "{err}");
    }
}

/// Why a state file (the token or the account file) was not read.
#[derive(Debug)]
enum StateError {
    /// Not JSON, not an object, or a field this client does not know or a value of the wrong
    /// type: a damaged file, or one edited by hand.
    Invalid(String),
    /// Written by a newer client, in format `found` (this one writes up to `known`): rewriting
    /// it here would drop what this build does not know of it.
    Newer { found: u64, known: u32 },
}

/// Reads a state file's bytes as `T`, a format this client writes up to `version`, strictly.
///
/// A file whose key was damaged (`"entriez"`) would otherwise read as holding nothing under the
/// real key, and the next write would replace it, losing every seat or key it held: so `T`
/// should deny unknown fields, and the top level must be an object (a bare `[]` is not a file
/// this client wrote). A newer client's file may carry fields this one does not know: its
/// version is read first, so it is refused as newer, not as damaged.
///
/// # Errors
///
/// [`StateError`].
fn parse_state<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
    version: u32,
) -> Result<T, StateError> {
    let value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| StateError::Invalid(e.to_string()))?;
    let Some(object) = value.as_object() else {
        return Err(StateError::Invalid("it is not a JSON object".to_owned()));
    };
    if let Some(found) = object.get("version").and_then(serde_json::Value::as_u64)
        && found > u64::from(version)
    {
        return Err(StateError::Newer {
            found,
            known: version,
        });
    }
    serde_json::from_value(value).map_err(|e| StateError::Invalid(e.to_string()))
}

/// A state file's bytes (`what`: "token" or "account", at `path`) as `T`, read by
/// [`parse_state`]. A file refused is not rewritten: what it holds may be the only copy of a
/// seat's token or an account's key.
///
/// # Errors
///
/// The refusal, saying what is wrong and that the file is left as it is.
pub fn read_state<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
    version: u32,
    what: &str,
    path: &Path,
) -> Result<T, CliError> {
    parse_state(bytes, version).map_err(|error| {
        let message = match error {
            StateError::Invalid(why) => format!(
                "{what} file {} is not valid: {why}; it is left as it is",
                path.display()
            ),
            StateError::Newer { found, known } => format!(
                "{what} file {} was written by a newer oanquan (format {found}; this one knows \
                 up to {known}): use that oanquan, or move the file aside",
                path.display(),
            ),
        };
        CliError::new(code::FAILURE, message)
    })
}
