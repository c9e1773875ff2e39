//! The embedded store's one writer: a process holds an exclusive lock on a file beside the
//! database (`shortener.db-lock`) from the store's opening until the node stops, so a second node or a tool
//! (`shortener preload`, `shortener layout`) started on the same data directory is refused
//! instead of writing beside it. Two writers would break what the node knows exactly of its
//! file: the highest ID stored ([`super::HighWater`], which refuses codes above it unread,
//! docs/design.md I9) and the lease ledger it alone advances.
//!
//! The lock is the operating system's (`flock` on Unix), taken on a file of its own so that it
//! never meets SQLite's own locks on the database; it ends with the process however it ends.

use crate::store::StoreError;
use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long an open waits for the lock before it is refused: long enough for a store of this
/// process, or a process just stopped, to let go.
const WAIT: Duration = Duration::from_secs(3);

/// The lock file of the database at `path`.
pub fn lock_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push("-lock");
    PathBuf::from(name)
}

/// Takes the exclusive lock of the database at `path`, waiting up to [`WAIT`] for a holder
/// that is letting go; the lock is held while the returned file is open.
pub fn take(path: &Path) -> Result<File, StoreError> {
    let lock = lock_path(path);
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock)
        .map_err(|e| StoreError::Internal(format!("open {}: {e}", lock.display())))?;
    let deadline = Instant::now() + WAIT;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(TryLockError::WouldBlock) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(TryLockError::WouldBlock) => {
                return Err(StoreError::Unavailable(format!(
                    "{} is open in another process (a node or a tool on the same data \
                     directory); stop it first: the embedded store has one writer",
                    path.display()
                )));
            }
            Err(TryLockError::Error(e)) => {
                return Err(StoreError::Internal(format!(
                    "lock {}: {e}",
                    lock.display()
                )));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_until_the_first_lets_go() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("links.db");
        let first = take(&path).expect("the first holder");
        let began = Instant::now();
        let refused = take(&path).expect_err("a second holder is refused");
        assert!(began.elapsed() >= WAIT, "it waited for the first to let go");
        assert!(
            matches!(&refused, StoreError::Unavailable(m) if m.contains("another process")),
            "{refused:?}"
        );
        drop(first);
        take(&path).expect("free once the first let go");
        assert_eq!(lock_path(&path), dir.path().join("links.db-lock"));
    }
}
