//! Whether this node should be sent traffic, for orchestrators that ask over HTTP (`/ready` on
//! the metrics listener) or look for a file (`--ready-file`) rather than speak gRPC health.
//!
//! It follows what gRPC health says: not ready while starting (the open games are being
//! replayed), while the store cannot be written, and from the moment a drain begins. Liveness
//! (`/live`) is separate on purpose: a node whose disk is full is not ready, but restarting it
//! would not help.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::watch;
use tracing::warn;

/// Why the node is not ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotReady {
    /// The server has not started serving yet.
    Starting,
    /// The store refuses writes (a full disk, a read-only file, an unreachable database).
    StoreUnwritable,
    /// The server is shutting down.
    Draining,
}

impl fmt::Display for NotReady {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NotReady::Starting => "starting",
            NotReady::StoreUnwritable => "the store cannot be written",
            NotReady::Draining => "draining",
        })
    }
}

/// This node's readiness; clones share it. Starts [`NotReady::Starting`].
#[derive(Debug, Clone)]
pub struct Readiness(Arc<watch::Sender<Result<(), NotReady>>>);

impl Default for Readiness {
    fn default() -> Self {
        Readiness(Arc::new(watch::Sender::new(Err(NotReady::Starting))))
    }
}

impl Readiness {
    /// Now: `Ok` when ready, else why not.
    pub fn get(&self) -> Result<(), NotReady> {
        *self.0.borrow()
    }

    /// Sets it; a drain has the last word (nothing makes a draining node ready again).
    pub fn set(&self, state: Result<(), NotReady>) {
        self.0.send_if_modified(|now| {
            let changed = *now != state && *now != Err(NotReady::Draining);
            if changed {
                *now = state;
            }
            changed
        });
    }

    /// Keeps `path` present exactly while ready, until the last clone of this readiness is
    /// dropped; call [`remove_ready_file`] on exit too, since a task may not get to run then.
    pub async fn follow_file(self, path: PathBuf) {
        let mut changes = self.0.subscribe();
        drop(self);
        loop {
            let ready = changes.borrow_and_update().is_ok();
            // Blocking, but a tiny file on a rare change; and with no await between reading
            // the state and writing the file, a drain cannot slip in between.
            let written = if ready {
                std::fs::write(&path, READY)
            } else {
                remove(&path)
            };
            if let Err(error) = written {
                warn!(%error, path = %path.display(), ready, "cannot update the ready file");
            }
            if changes.changed().await.is_err() {
                return;
            }
        }
    }
}

fn remove(path: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(path) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(error),
        _ => Ok(()),
    }
}

/// What the ready file holds while the server is ready.
const READY: &[u8] = b"ready\n";

/// Why `path` cannot be the ready file, if it cannot. The server removes the file at start (a
/// killed server's may be there) and writes and removes it as it goes: it must be one it wrote
/// (or an empty one) or nothing yet, in a folder that exists. Anything else, a file of other
/// data, a folder, a link or a device (`/dev/null`, as root), would be destroyed.
#[must_use]
pub fn ready_file_problem(path: &Path) -> Option<String> {
    let shown = path.display();
    match std::fs::symlink_metadata(path) {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            let folder = path
                .parent()
                .filter(|folder| !folder.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            (!folder.is_dir()).then(|| format!("{shown}: its folder does not exist"))
        }
        Err(error) => Some(format!("{shown}: {error}")),
        Ok(metadata) if !metadata.is_file() => Some(format!(
            "{shown} is not a regular file (a folder, a link or a device): the server removes \
             and rewrites its ready file, so give it a path of its own"
        )),
        Ok(metadata) => {
            let ours = metadata.len() <= READY.len() as u64
                && std::fs::read(path).is_ok_and(|bytes| bytes.is_empty() || bytes == READY);
            (!ours).then(|| {
                format!(
                    "{shown} holds something other than a ready file: the server would remove \
                     it; give it a path of its own"
                )
            })
        }
    }
}

/// Removes the ready file if it is there, on exit.
pub fn remove_ready_file(path: &Path) {
    if let Err(error) = remove(path) {
        warn!(%error, path = %path.display(), "cannot remove the ready file");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_ready_file_or_a_free_path_can_be_the_ready_file() {
        let dir = tempfile::tempdir().unwrap();
        let free = dir.path().join("ready");
        assert_eq!(ready_file_problem(&free), None);
        std::fs::write(&free, READY).unwrap();
        assert_eq!(ready_file_problem(&free), None, "a killed server's");
        std::fs::write(&free, b"").unwrap();
        assert_eq!(ready_file_problem(&free), None, "touched by an operator");
        let notes = dir.path().join("notes");
        std::fs::write(&notes, b"important\n").unwrap();
        let folder = dir.path().join("folder");
        std::fs::create_dir(&folder).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&free, &link).unwrap();
        for (path, says) in [
            (notes.as_path(), "holds something other"),
            (&folder, "not a regular file"),
            (&link, "not a regular file"),
            (Path::new("/dev/null"), "not a regular file"),
            (&dir.path().join("none/ready"), "folder does not exist"),
        ] {
            let problem = ready_file_problem(path).unwrap_or_else(|| panic!("{path:?}"));
            assert!(problem.contains(says), "{problem}");
        }
    }

    #[test]
    fn a_drain_has_the_last_word() {
        let readiness = Readiness::default();
        assert_eq!(readiness.get(), Err(NotReady::Starting));
        readiness.set(Ok(()));
        assert_eq!(readiness.get(), Ok(()));
        readiness.set(Err(NotReady::Draining));
        readiness.set(Ok(()));
        readiness.set(Err(NotReady::StoreUnwritable));
        assert_eq!(readiness.get(), Err(NotReady::Draining));
    }
}
