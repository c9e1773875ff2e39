//! The one owner of the visits' background work: the totals' and the rollups' flushes, each
//! at its own interval (`SHORTENER_CLICK_FLUSH_INTERVAL_MS`,
//! `SHORTENER_ANALYTICS_FLUSH_INTERVAL_MS`) and both once more at stop; the rollups'
//! maintenance; and the GeoIP file's re-reads. They run side by side, so a long flush of one
//! never holds up the other. The totals also flush at once when their pending codes reach
//! their bound (`SHORTENER_CLICK_MAX_PENDING`), so their memory stays bounded without dropping
//! a visit. The last flushes at stop are tried again while the store refuses them, for a few
//! seconds.

use super::Visits;
use super::clicks::ClickRecorder;
use crate::store::Store;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How often the visits' background work runs.
#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    /// Between flushes of the totals.
    pub clicks: Duration,
    /// Between flushes of the rollups.
    pub analytics: Duration,
    /// Between checks of the GeoIP file for changes.
    pub geo_reload: Duration,
}

impl Visits {
    /// Runs the visits' background work on `store` until `stop` (after the listeners have
    /// drained); returns once both accumulators have been flushed one last time, side by side.
    /// Before those, the rollup counts cached links' words stand for are handed to the rollups'
    /// aggregator ([`super::clicks::PendingClicks`]), so that the totals' last take, running
    /// beside the rollups' last flush, has none left to hand over after it.
    pub async fn run(self: Arc<Self>, store: Store, every: Schedule, stop: CancellationToken) {
        let analytics = &self.analytics;
        let totals = async {
            flush_every(every.clicks, &stop, Some(&self.clicks), || {
                self.clicks.flush(&store)
            })
            .await;
        };
        let rollups = async {
            if analytics.settings().enabled {
                flush_every(every.analytics, &stop, None, || async {
                    analytics.flush(&store).await;
                })
                .await;
            }
        };
        let maintenance = analytics.run_maintenance(&store, &stop);
        let geo = async {
            if let Some(geo) = analytics.geo() {
                Arc::clone(geo).watch(every.geo_reload, stop.clone()).await;
            }
        };
        tokio::join!(
            async {
                tokio::join!(totals, rollups);
                analytics.take_every_held().await;
                self.last_flushes(&store).await;
                // A request the drain's bound let through after the hand-over leaves its
                // rollup count in a word that the totals' last take hands to the aggregator,
                // after the rollups' last flush took it: one more flush writes those.
                if analytics.settings().enabled {
                    analytics.take_every_held().await;
                    analytics.flush(&store).await;
                }
            },
            maintenance,
            geo
        );
    }
}

impl Visits {
    /// The totals' and the rollups' last flushes, side by side, tried again after a pause
    /// while either leaves something unwritten (the store refused it: a PostgreSQL switchover
    /// pauses writes for seconds), for up to [`LAST_FLUSH_WINDOW`]. What is still unwritten
    /// then is lost with the process, and the node says so when it stops.
    async fn last_flushes(&self, store: &Store) {
        let analytics = &self.analytics;
        let until = Instant::now() + LAST_FLUSH_WINDOW;
        let mut pause = LAST_FLUSH_PAUSE;
        loop {
            let rollups = async { !analytics.settings().enabled || analytics.flush(store).await };
            let (clicks, rollups) = tokio::join!(self.clicks.flush_last(store), rollups);
            if (clicks && rollups) || Instant::now() + pause > until {
                return;
            }
            // A pause between tries, so that a store that refuses at once is not asked again
            // in a tight loop.
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(LAST_FLUSH_PAUSE_MAX);
        }
    }
}

/// How long the last flushes at stop go on trying a store that refuses them: within the
/// node's bound on stopping a background task (5 s), with room for the tries' own time.
const LAST_FLUSH_WINDOW: Duration = Duration::from_millis(3500);

/// The first pause between two tries of the last flushes, doubled after each.
const LAST_FLUSH_PAUSE: Duration = Duration::from_millis(100);

/// The longest pause between two tries of the last flushes.
const LAST_FLUSH_PAUSE_MAX: Duration = Duration::from_secs(1);

/// Runs `flush` every `interval` (a late tick waits, it does not catch up) until `stop` (the
/// caller flushes once more).
async fn flush_every<F, Fut>(
    interval: Duration,
    stop: &CancellationToken,
    early: Option<&ClickRecorder>,
    mut flush: F,
) where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticker.tick() => flush().await,
            () = full(early) => {
                flush().await;
                ticker.reset();
            }
            () = stop.cancelled() => break,
        }
    }
}

/// Completes when `recorder` holds its bound of pending codes; never without one.
async fn full(recorder: Option<&ClickRecorder>) {
    match recorder {
        Some(recorder) => recorder.full().await,
        None => std::future::pending().await,
    }
}
