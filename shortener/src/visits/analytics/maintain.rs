//! The rollup maintenance: compaction of hours older than the compaction age into days,
//! retention, and (on PostgreSQL) partitions made ahead. Driven by the analytics clock, so a
//! test moves time instead of waiting.

use super::Analytics;
use crate::domain::stats::{DAY, HOUR};
use crate::store::rollups::day_start;
use crate::store::{OutboxStore, RollupOutcome, RollupPlan, Store, StoreError, VisitStore};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How often maintenance runs (it also runs at start).
const EVERY: Duration = Duration::from_secs(3600);

impl Analytics {
    /// The plan of a maintenance run at the clock's time: hours of days that ended more than
    /// the compaction age ago are compacted; rollups older than retention are removed.
    pub fn plan(&self) -> RollupPlan {
        let now = self.clock.unix_seconds();
        let days = |n: u32| i64::from(n) * DAY;
        RollupPlan {
            now,
            compact_before: day_start(now - days(self.settings.compact_after_days)),
            expire_before: (self.settings.retention_days > 0)
                .then(|| now - days(self.settings.retention_days)),
        }
    }

    /// Runs maintenance once, now, records the `clicks.rollup` webhook events of the hours
    /// that have ended, and forgets the flush marks of writers gone for a week.
    pub async fn maintain(&self, store: &Store) -> Result<RollupOutcome, StoreError> {
        let plan = self.plan();
        let outcome = store.maintain_rollups(plan).await?;
        forget_flush_marks(store).await?;
        // The hours that ended a minute or more ago (every regular flush of them is in),
        // looking back far enough that hours ended while every node was down are told too:
        // each is told once, whatever the number of runs and nodes, and told again as its next
        // revision when late clicks changed its totals. Oldest first, so a consumer receives a
        // fleet's catch-up in order.
        let ended = (plan.now - 60).div_euclid(HOUR) * HOUR;
        let back = i64::from(self.settings.rollup_event_hours.max(1));
        for hour in (1..=back).rev().map(|n| ended - n * HOUR) {
            let told = store.record_rollup_events(hour).await?;
            if told > 0 {
                tracing::debug!(
                    hour,
                    tenants = told,
                    "hourly click rollups recorded for webhooks"
                );
            }
        }
        if outcome != RollupOutcome::default() {
            tracing::info!(
                compacted = outcome.compacted,
                expired = outcome.expired,
                "rollup maintenance"
            );
        }
        Ok(outcome)
    }

    /// Runs maintenance at start and every hour until `stop`. With analytics off there are no
    /// rollups to keep, but the click flush still leaves a flush mark per process, so the
    /// marks of writers gone for a week are forgotten on the same schedule. A run under way at
    /// `stop` is let go (on PostgreSQL a transaction it had open rolls back; what it had not
    /// finished, the next run does), so that the visits' task ends with its last flushes (on
    /// SQLite the writer thread still finishes the step it is on, and the flushes queue behind
    /// it).
    pub async fn run_maintenance(&self, store: &Store, stop: &CancellationToken) {
        loop {
            let run = async {
                if self.settings.enabled {
                    self.maintain(store).await.map(drop)
                } else {
                    forget_flush_marks(store).await
                }
            };
            let ran = tokio::select! {
                ran = run => ran,
                () = stop.cancelled() => return,
            };
            if let Err(error) = ran {
                tracing::warn!(%error, "rollup maintenance failed; will retry");
            }
            if tokio::time::timeout(EVERY, stop.cancelled()).await.is_ok() {
                return;
            }
        }
    }
}

/// Forgets the flush marks of writers that wrote nothing for a week (`MARKS_KEPT_DAYS`).
async fn forget_flush_marks(store: &Store) -> Result<(), StoreError> {
    let forgotten = store.forget_flush_marks().await?;
    if forgotten > 0 {
        tracing::info!(forgotten, "flush marks of writers gone for a week removed");
    }
    Ok(())
}
