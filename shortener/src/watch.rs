//! Files the node re-reads while it runs (the API keys, the blocklist): checked for a change
//! every interval, and re-read at once on SIGHUP. A reload that fails leaves what was in force.

use crate::metrics::{Sample, Samples};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};
use tokio_util::sync::CancellationToken;

/// How a watched file's reloads are named in `/metrics`: `name` counts those applied,
/// `{name}_refused` those refused.
#[derive(Debug, Clone, Copy)]
pub struct ReloadSeries {
    /// The series of reloads applied.
    pub name: &'static str,
    /// Its help text.
    pub applied_help: &'static str,
    /// The help text of `{name}_refused`.
    pub refused_help: &'static str,
}

/// Reloads of a file the node re-reads while it runs (bumped by [`watch_file`]), reported
/// under the names its owner gave them.
#[derive(Debug)]
pub struct ReloadCounters {
    series: ReloadSeries,
    applied: AtomicU64,
    refused: AtomicU64,
}

impl ReloadCounters {
    /// No reloads yet, to be reported as `series`.
    pub fn new(series: ReloadSeries) -> Self {
        Self {
            series,
            applied: AtomicU64::new(0),
            refused: AtomicU64::new(0),
        }
    }

    /// Reloads that replaced what was in force.
    pub fn applied(&self) -> u64 {
        self.applied.load(Ordering::Relaxed)
    }

    /// Reloads refused (the file did not parse); what was in force stayed.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }
}

impl Sample for ReloadCounters {
    fn sample(&self, out: &mut Samples<'_, '_>) -> std::fmt::Result {
        let series = &self.series;
        out.counter(series.name, series.applied_help, self.applied())?;
        out.counter(
            &format!("{}_refused", series.name),
            series.refused_help,
            self.refused(),
        )
    }
}

/// Re-reads `path` with `reload` whenever its metadata changes (checked every `every`) or the
/// process gets SIGHUP, until `stop`; counts each outcome in `counters` and logs it as `what`.
/// `reload` returns a summary of what is now in force, or why the file was refused.
pub async fn watch_file(
    path: PathBuf,
    what: &'static str,
    every: Duration,
    counters: &ReloadCounters,
    reload: impl Fn() -> Result<String, String>,
    stop: CancellationToken,
) {
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
        match reload() {
            Ok(summary) => {
                counters.applied.fetch_add(1, Ordering::Relaxed);
                tracing::info!(file = %path.display(), %summary, "reloaded the {what}");
            }
            Err(error) => {
                counters.refused.fetch_add(1, Ordering::Relaxed);
                tracing::error!(%error, "refused the new {what} file; what was in force stays");
            }
        }
    }
}

/// What tells a file changed: its modification time, length and inode (a Secret or ConfigMap
/// volume swaps a symlink, which changes the inode).
fn stamp(path: &Path) -> Option<(SystemTime, u64, u64)> {
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
