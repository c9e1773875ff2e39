//! Click analytics: each visit, as the visits' classifier ([`super::classify`]) sorts it by
//! referrer host, device class and country, is counted in an [`Aggregator`] keyed by (code,
//! hour, dimensions); the visits' flush schedule writes the counters every analytics flush
//! interval in batched additive upserts into the rollup tables (`flush`), and a maintenance
//! task compacts old hours into days and applies retention (`maintain`). Nothing is written
//! per redirect, and no IP address is kept: the client address is looked up in the GeoIP
//! database ([`geo`]) and dropped.
//!
//! A crash loses at most the visits of one flush interval (and of a flush that was writing
//! them), as for the click totals. Those totals ([`super::clicks`]) stay the exact count; the
//! rollups may count less when the aggregator is full (see [`aggregate`]).

pub mod aggregate;
mod flush;
pub mod geo;
mod maintain;
mod stats;
mod tag;

pub use aggregate::{Aggregator, Cell, Referrer};
pub use geo::GeoIp;
pub use stats::{Freshness, StatsService};

use super::clicks::{HandOver, RollupTag, Rollups};
use super::{Visit, VisitKind, classify};
use crate::clock::Clock;
use crate::domain::stats::HOUR;
use crate::metrics::{Sample, Samples};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};

/// How analytics are set up.
#[derive(Debug, Clone)]
pub struct AnalyticsSettings {
    /// Whether visits are classified and counted at all.
    pub enabled: bool,
    /// Most counters held between flushes.
    pub max_entries: usize,
    /// Most distinct referrer hosts per link and hour before the rest fold into "(other)".
    pub referrers_per_hour: usize,
    /// Hours older than this many days are compacted into daily rows.
    pub compact_after_days: u32,
    /// Rollups older than this many days are removed (0: kept forever).
    pub retention_days: u32,
    /// How many ended hours each maintenance run looks back over for `clicks.rollup` events
    /// not yet recorded, so a fleet that was down for up to this long still tells every hour.
    pub rollup_event_hours: u32,
    /// How often the counters are written to the rollups.
    pub flush_interval: std::time::Duration,
}

/// The longest look-back for `clicks.rollup` events.
pub const ROLLUP_EVENT_HOURS: u32 = 48;
// What the events of an hour told is kept past the look-back: an hour asked for is never one
// whose told totals are gone (it would be told again as a revision 0 already recorded).
const _: () =
    assert!(crate::store::webhooks::ROLLUP_TOLD_KEPT_SECONDS > ROLLUP_EVENT_HOURS as i64 * 3600);

/// Cached links whose words a flush hands over before it lets waiting requests run.
const HAND_OVER_PART: usize = 256;

impl AnalyticsSettings {
    /// The look-back for `clicks.rollup` events when delivered events stay in the webhook
    /// log for `log_days` (0: forever): 48 hours, but always shorter than the log, so an
    /// hour's event is never purged while a run could still record it again.
    pub fn rollup_event_hours_for(log_days: u32) -> u32 {
        match log_days {
            0 => ROLLUP_EVENT_HOURS,
            days => ROLLUP_EVENT_HOURS.min(days.saturating_mul(24) - 1),
        }
    }
}

/// The node's analytics: the aggregator, the optional GeoIP database and the clock.
pub struct Analytics {
    settings: AnalyticsSettings,
    aggregator: Aggregator,
    geo: Option<Arc<GeoIp>>,
    clock: Clock,
    /// Visits written to the rollups since start.
    pub flushed: AtomicU64,
    /// Unix seconds at which the last flush that wrote everything it took began taking the
    /// counters (every visit counted before it is in the rollups); the start until the first,
    /// so flushes that fail from the start show as a growing lag.
    pub last_flush: AtomicI64,
    /// Held by the flush in progress (see [`Analytics::flush`]).
    flushing: tokio::sync::Mutex<()>,
    /// The marks of the batches the flush writes ([`crate::store::BatchMark`]).
    batches: crate::store::BatchSequence,
    /// The batch whose write failed, with its mark and the visits it counts: sent again as it
    /// is before anything else (see `flush`).
    in_doubt: std::sync::Mutex<Option<flush::Doubted>>,
    /// Batches sent again after a write in doubt, since start.
    pub resent: AtomicU64,
    /// Bytes of the counters the flush in progress took and has not finished writing.
    taken_bytes: AtomicU64,
    /// The cached links whose words stand for rollup counts
    /// ([`PendingClicks`](super::clicks::PendingClicks)), handed over before each flush.
    held: OnceLock<Weak<dyn HandOver>>,
}

impl Analytics {
    /// Analytics as `settings` say, with countries from `geo` if given, on `clock`.
    pub fn new(settings: AnalyticsSettings, geo: Option<Arc<GeoIp>>, clock: Clock) -> Self {
        Self {
            aggregator: Aggregator::new(settings.max_entries, settings.referrers_per_hour),
            settings,
            geo,
            last_flush: AtomicI64::new(clock.unix_seconds()),
            clock,
            flushed: AtomicU64::new(0),
            flushing: tokio::sync::Mutex::new(()),
            batches: crate::store::BatchSequence::new(crate::store::FlushStream::Rollups),
            in_doubt: std::sync::Mutex::new(None),
            resent: AtomicU64::new(0),
            taken_bytes: AtomicU64::new(0),
            held: OnceLock::new(),
        }
    }

    /// Bytes the counters hold now: those the aggregator holds ([`Aggregator::bytes`]) and
    /// those a flush in progress took and is still writing.
    pub fn bytes(&self) -> u64 {
        self.aggregator.bytes() + self.taken_bytes.load(Ordering::Relaxed)
    }

    /// [`Analytics::bytes`] at the bound: the aggregator at its ceiling, and as many counters
    /// again in a flush's hands, each with a short referrer host (the aggregator fills up
    /// again while a flush writes what it took; the flush lets go of each batch as it is
    /// written, and of what it puts back).
    pub fn budget(&self) -> u64 {
        self.aggregator.budget() + self.settings.max_entries as u64 * flush::TAKEN_BUDGET_BYTES
    }

    /// Takes the rollup counts of the links `held` lists into the aggregator before every
    /// flush. Set once; a second set is ignored. Held weakly: the list's owner (the redirect
    /// resolver) keeps it, and its take of the click totals hands the counts over too.
    pub fn hold(&self, held: Weak<dyn HandOver>) {
        let _ = self.held.set(held);
    }

    /// Hands the rollup counts held by cached links to the aggregator (the start of a flush,
    /// and at stop before the last flushes), [`HAND_OVER_PART`] links at a time: a node's
    /// hundred thousand cached links take tens of milliseconds, which the requests waiting on
    /// the same thread would otherwise wait through.
    pub(in crate::visits) async fn take_every_held(&self) {
        let Some(held) = self.held.get().and_then(Weak::upgrade) else {
            return;
        };
        for shard in 0..held.shards() {
            let mut from = 0;
            while held.hand_over_listed(shard, from, HAND_OVER_PART) {
                from += HAND_OVER_PART;
                tokio::task::yield_now().await;
            }
            tokio::task::yield_now().await;
        }
    }

    /// The settings in force.
    pub fn settings(&self) -> &AnalyticsSettings {
        &self.settings
    }

    /// The clock analytics run on.
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// Seconds since the last flush that wrote everything it took (since the start before
    /// the first), on the analytics clock.
    pub fn flush_lag_seconds(&self) -> i64 {
        (self.clock.unix_seconds() - self.last_flush.load(Ordering::Relaxed)).max(0)
    }

    /// The aggregator (for metrics and tests).
    pub fn aggregator(&self) -> &Aggregator {
        &self.aggregator
    }

    /// The GeoIP database, if one is configured.
    pub fn geo(&self) -> Option<&Arc<GeoIp>> {
        self.geo.as_ref()
    }

    /// Whether a visit's client address is asked for: when analytics are on and a GeoIP
    /// database is in force (the address is looked up, then dropped).
    pub fn locates_clients(&self) -> bool {
        self.settings.enabled && self.geo.as_ref().is_some_and(|geo| geo.loaded())
    }

    /// Counts a `kind` visit of `code` (a link of `tenant`) under the dimensions the classifier
    /// gives it, unless analytics are off.
    pub(super) fn record(&self, code: &str, tenant: &Arc<str>, visit: &Visit<'_>, kind: VisitKind) {
        if !self.settings.enabled {
            return;
        }
        let cell = classify::cell(visit, kind, self.geo.as_deref());
        let hour = self.clock.unix_seconds().div_euclid(HOUR) * HOUR;
        self.aggregator
            .add(code, tenant, hour, cell, aggregate::one(kind), true);
    }

    /// What a visit is counted under: its cell and hour, and the tag a cached link's word
    /// holds it under if it can; `None` when analytics are off.
    pub(super) fn prepare(&self, visit: &Visit<'_>, kind: VisitKind) -> Option<Prepared> {
        if !self.settings.enabled {
            return None;
        }
        let cell = classify::cell(visit, kind, self.geo.as_deref());
        let hour = self.clock.unix_seconds().div_euclid(HOUR) * HOUR;
        let tag = tag::Tag::of(&cell, hour).map(RollupTag::from);
        Some(Prepared { cell, hour, tag })
    }

    /// Counts one visit of `kind` of `code` (a link of `tenant`) as `prepared`, in the
    /// aggregator.
    pub(super) fn count_prepared(
        &self,
        code: &str,
        tenant: &Arc<str>,
        prepared: Prepared,
        kind: VisitKind,
    ) {
        let Prepared { cell, hour, .. } = prepared;
        self.aggregator
            .add(code, tenant, hour, cell, aggregate::one(kind), true);
    }

    /// Counts the rollup counts a cached link's word (of `code`, of `tenant`) stood for, in
    /// the aggregator.
    pub fn add_taken(&self, code: &str, tenant: &Arc<str>, (tag, counts): Rollups) {
        let tag = tag::Tag::from(tag);
        let hour = tag.hour(self.clock.unix_seconds());
        self.aggregator
            .add(code, tenant, hour, tag.cell(), counts, true);
    }
}

/// A visit's rollup cell and hour, and its tag if a word can hold it ([`Analytics::prepare`]).
pub(super) struct Prepared {
    cell: Cell,
    hour: i64,
    /// The tag a cached link's word holds the visit under, if it can.
    pub(super) tag: Option<RollupTag>,
}

impl Sample for Analytics {
    fn sample(&self, out: &mut Samples<'_, '_>) -> std::fmt::Result {
        let aggregator = &self.aggregator;
        out.gauge(
            "shortener_analytics_entries",
            "Analytics counters held in memory, waiting for the next flush (one with a referrer host longer than 32 bytes counts as two)",
            aggregator.entries() as f64,
        )?;
        out.gauge(
            "shortener_analytics_max_entries",
            "The ceiling of analytics counters held in memory",
            self.settings.max_entries as f64,
        )?;
        out.counter(
            "shortener_analytics_batches_resent",
            "Rollup batches sent again, with the same mark, after a write whose outcome was unknown (the store adds each once)",
            self.resent.load(Ordering::Relaxed),
        )?;
        out.counter(
            "shortener_analytics_folded",
            "Visits whose referrer host was counted as (other): past the per-link, per-hour limit",
            aggregator.folded.load(Ordering::Relaxed),
        )?;
        out.counter(
            "shortener_analytics_dropped",
            "Visits left out of the rollups because the aggregator was full or their tenant held its share of it (the link totals count them)",
            aggregator.dropped.load(Ordering::Relaxed),
        )?;
        let dropped = aggregator.dropped_by_tenant();
        out.counters(
            "shortener_analytics_dropped_by_tenant",
            "Visits left out of the rollups, by the link's tenant and why: tenant_share (the tenant held its fair share of a ceiling more than half full) or full (the ceiling was reached)",
            dropped.iter().map(|(tenant, reason, n)| {
                ([("tenant", &**tenant), ("reason", reason.label())], *n)
            }),
        )?;
        out.counter(
            "shortener_analytics_flushed",
            "Visits written to the rollups",
            self.flushed.load(Ordering::Relaxed),
        )?;
        out.gauge(
            "shortener_analytics_flush_lag_seconds",
            "Seconds since the last analytics flush that wrote everything it took",
            self.flush_lag_seconds() as f64,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> AnalyticsSettings {
        AnalyticsSettings {
            enabled: true,
            max_entries: 100,
            referrers_per_hour: 10,
            compact_after_days: 30,
            retention_days: 400,
            rollup_event_hours: ROLLUP_EVENT_HOURS,
            flush_interval: std::time::Duration::from_secs(30),
        }
    }

    #[test]
    fn the_flush_lag_counts_from_the_start_until_a_flush_succeeds() {
        let start = chrono::DateTime::parse_from_rfc3339("2026-01-10T10:00:00Z")
            .expect("time")
            .to_utc();
        let clock = Clock::manual(start);
        let analytics = Analytics::new(settings(), None, clock.clone());
        assert_eq!(analytics.flush_lag_seconds(), 0);
        // No flush has written anything yet (they all failed, say): the lag grows.
        clock.advance(chrono::Duration::seconds(90));
        assert_eq!(analytics.flush_lag_seconds(), 90);
    }

    #[tokio::test]
    async fn a_flush_begun_beside_another_waits_for_it() {
        use crate::store::{Capabilities, Store};
        let dir = tempfile::tempdir().expect("tempdir");
        let space =
            codespace::CodeSpace::new(&codespace::CodeKey::generate(), codespace::DEFAULT_LENGTH)
                .expect("space");
        let sqlite =
            crate::store::SqliteStore::open(&dir.path().join("a.db"), Arc::new(space), 256)
                .expect("open");
        sqlite.migrate().await.expect("migrate");
        let store = Store::Sqlite(sqlite);
        let analytics = Arc::new(Analytics::new(settings(), None, Clock::system()));
        let cell = aggregate::Cell {
            referrer: aggregate::Referrer::Host("a.com".into()),
            device: crate::domain::Device::Desktop,
            country: None,
            route: crate::domain::Route::Url,
        };
        let visit = crate::domain::ClickCounts {
            human: 1,
            head: 0,
            bot: 0,
        };
        let tenant: Arc<str> = "t".into();
        analytics
            .aggregator
            .add("code1", &tenant, 0, cell, visit, true);
        // Another flush is in progress.
        let other = analytics.flushing.lock().await;
        let flush = tokio::spawn({
            let (analytics, store) = (Arc::clone(&analytics), store.clone());
            async move { analytics.flush(&store).await }
        });
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
        assert_eq!(
            analytics.aggregator.entries(),
            1,
            "nothing is taken meanwhile"
        );
        assert!(!flush.is_finished());
        drop(other);
        assert!(flush.await.expect("flush"));
        assert_eq!(analytics.aggregator.entries(), 0);
        assert_eq!(
            analytics.flushed.load(std::sync::atomic::Ordering::Relaxed),
            1
        );
    }

    #[test]
    fn rollup_events_look_back_two_days_but_never_past_the_webhook_log() {
        assert_eq!(AnalyticsSettings::rollup_event_hours_for(0), 48);
        assert_eq!(AnalyticsSettings::rollup_event_hours_for(30), 48);
        assert_eq!(AnalyticsSettings::rollup_event_hours_for(2), 47);
        assert_eq!(AnalyticsSettings::rollup_event_hours_for(1), 23);
    }
}
