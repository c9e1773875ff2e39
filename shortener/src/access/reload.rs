//! The keys in force, and their reload: a changed keys file (or SIGHUP) replaces the whole set
//! at once, and a file that does not parse changes nothing.

use super::keyfile;
use super::keys::{KeyEntry, KeySet};
use crate::domain::{Caller, Error};
use crate::metrics::ReloadCounters;
use arc_swap::ArcSwap;
use chrono::Utc;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};
use tokio_util::sync::CancellationToken;

/// The accepted API keys: those given directly, plus those of the keys file, which is re-read
/// when it changes. Readers take no lock.
pub struct ApiKeys {
    current: ArcSwap<KeySet>,
    fixed: Vec<KeyEntry>,
    file: Option<PathBuf>,
    reloads: Arc<ReloadCounters>,
}

impl ApiKeys {
    /// Keys from `fixed` entries and, if given, `file`; refused if the file cannot be read or
    /// parsed, or the set is empty.
    pub fn load(fixed: Vec<KeyEntry>, file: Option<PathBuf>) -> Result<Self, String> {
        let keys = Self {
            current: ArcSwap::from_pointee(KeySet::default()),
            fixed,
            file,
            reloads: Arc::default(),
        };
        let set = keys.read()?;
        if set.is_empty() {
            return Err(
                "no API keys configured (SHORTENER_API_KEYS or SHORTENER_API_KEYS_FILE)".into(),
            );
        }
        keys.current.store(Arc::new(set));
        Ok(keys)
    }

    /// A fixed set (for tests and tools).
    pub fn fixed(entries: Vec<KeyEntry>) -> Result<Self, String> {
        Self::load(entries, None)
    }

    fn read(&self) -> Result<KeySet, String> {
        let mut entries = self.fixed.clone();
        if let Some(path) = &self.file {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("read API keys file {}: {e}", path.display()))?;
            let from_file = keyfile::parse(&text)
                .map_err(|e| format!("API keys file {}: {e}", path.display()))?;
            entries.extend(from_file);
        }
        KeySet::new(entries)
    }

    /// Re-reads the keys file; the new set replaces the old one only if it parses and is not
    /// empty. Returns how many keys are now in force.
    pub fn reload(&self) -> Result<usize, String> {
        let set = self.read()?;
        if set.is_empty() {
            return Err("the new set has no keys".into());
        }
        let count = set.len();
        self.current.store(Arc::new(set));
        Ok(count)
    }

    /// The counts of reloads applied and refused.
    pub fn reloads(&self) -> Arc<ReloadCounters> {
        Arc::clone(&self.reloads)
    }

    /// The caller of an `Authorization` header value, against the keys in force now.
    pub fn authenticate(&self, header: Option<&str>) -> Result<Caller, Error> {
        self.current.load().authenticate(header, Utc::now())
    }

    /// The tenants that hold keys now.
    pub fn tenants(&self) -> Vec<String> {
        self.current.load().tenants().into_iter().collect()
    }

    /// Re-reads the keys file whenever its metadata changes (checked every `every`) or the
    /// process gets SIGHUP, until `stop`. A refused file is logged once per change and the keys
    /// in force stay.
    pub async fn watch(self: Arc<Self>, every: Duration, stop: CancellationToken) {
        let Some(path) = self.file.clone() else {
            return;
        };
        let mut hangups = hangups();
        let mut seen = stamp(&path);
        loop {
            tokio::select! {
                () = tokio::time::sleep(every) => {
                    let now = stamp(&path);
                    if now == seen {
                        continue;
                    }
                    seen = now;
                }
                _ = recv(&mut hangups) => {}
                () = stop.cancelled() => return,
            }
            match self.reload() {
                Ok(count) => {
                    self.reloads.applied.fetch_add(1, Ordering::Relaxed);
                    tracing::info!(file = %path.display(), keys = count, "reloaded the API keys");
                }
                Err(error) => {
                    self.reloads.refused.fetch_add(1, Ordering::Relaxed);
                    tracing::error!(%error, "refused the new API keys file; the keys in force stay");
                }
            }
        }
    }
}

/// What tells a file changed: its modification time, length and inode (a Secret volume swaps
/// a symlink, which changes the inode).
fn stamp(path: &std::path::Path) -> Option<(SystemTime, u64, u64)> {
    let meta = std::fs::metadata(path).ok()?;
    #[cfg(unix)]
    let inode = std::os::unix::fs::MetadataExt::ino(&meta);
    #[cfg(not(unix))]
    let inode = 0;
    Some((meta.modified().ok()?, meta.len(), inode))
}

#[cfg(unix)]
type Hangups = Option<tokio::signal::unix::Signal>;
#[cfg(not(unix))]
type Hangups = ();

#[cfg(unix)]
fn hangups() -> Hangups {
    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok()
}
#[cfg(not(unix))]
fn hangups() -> Hangups {}

/// The next SIGHUP (never, where none can be received).
async fn recv(hangups: &mut Hangups) {
    #[cfg(unix)]
    if let Some(signal) = hangups {
        signal.recv().await;
        return;
    }
    std::future::pending::<()>().await
}
