//! Keeps the gate's callers in step with the tokens file: re-read when its content changes
//! (polled) or on SIGHUP, and swapped in whole. A file that does not pass every check is not
//! used: the previous callers stay, and the log and `idservice_tokens_reloads_total{outcome}`
//! say why.

use super::Gate;
use super::tokens_file;
use crate::logsafe::Escaped;
use crate::metrics::Metrics;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// What is done with the text of a tokens file once its callers are in force (the warnings
/// of callers whose namespaces do not exist).
pub type Reloaded = Box<dyn Fn(&str) + Send + Sync>;

/// Watches `path` every `interval` and on SIGHUP until `stop` is cancelled. `loaded` is the
/// text the gate's callers came from, so an unchanged file is not parsed again; `reloaded` is
/// given each text put in force.
pub async fn watch(
    gate: Arc<Gate>,
    (path, loaded): (PathBuf, String),
    interval: Duration,
    metrics: Arc<Metrics>,
    reloaded: Reloaded,
    stop: CancellationToken,
) {
    let mut hangup = hangups();
    let mut last = loaded;
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let forced = tokio::select! {
            _ = stop.cancelled() => return,
            _ = ticks.tick() => false,
            Some(()) = next_hangup(&mut hangup) => true,
        };
        let text = match tokens_file::read_text(&path) {
            Ok(text) => text,
            Err(error) => {
                // A missing file mid-swap (a Secret volume updates by renaming) is normal for
                // a moment; report it once per change of state, not on every tick.
                if forced || !last.is_empty() {
                    metrics.tokens_reload("error");
                    tracing::warn!(error = %Escaped(&error.to_string()), "tokens file not reloaded; keeping the current callers");
                }
                last.clear();
                continue;
            }
        };
        if text == last && !forced {
            continue;
        }
        match tokens_file::parse(&text) {
            Ok(specs) => {
                let callers = gate.replace(specs);
                metrics.tokens_reload("ok");
                tracing::info!(callers, path = %path.display(), "tokens file reloaded");
                reloaded(&text);
            }
            Err(error) => {
                metrics.tokens_reload("error");
                tracing::warn!(error = %Escaped(&error.to_string()), "tokens file refused; keeping the current callers");
            }
        }
        last = text;
    }
}

#[cfg(unix)]
type Hangups = Option<tokio::signal::unix::Signal>;
#[cfg(not(unix))]
type Hangups = Option<()>;

#[cfg(unix)]
fn hangups() -> Hangups {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::hangup()) {
        Ok(stream) => Some(stream),
        Err(error) => {
            tracing::warn!(%error, "cannot listen for SIGHUP; the tokens file is still polled");
            None
        }
    }
}

#[cfg(not(unix))]
fn hangups() -> Hangups {
    None
}

/// The next SIGHUP; never completes when there is no stream.
async fn next_hangup(hangups: &mut Hangups) -> Option<()> {
    #[cfg(unix)]
    if let Some(stream) = hangups {
        return stream.recv().await;
    }
    let _ = hangups;
    std::future::pending().await
}
