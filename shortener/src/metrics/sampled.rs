//! Values owned elsewhere (ID pool, cache, store, service counters), read at scrape time; parts
//! that report their own series ([`Sample`]) are asked for them.

use super::{CreateCounters, LookupCounters, ReloadCounters, Sample, Samples};
use crate::store::{Capabilities, Store};
use id_client::IdPool;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// The handles the collector reads, each owned by the part of the node that updates it.
pub struct Sources {
    /// The ID pool (IDs in hand, runway, leases).
    pub ids: Arc<IdPool>,
    /// Redirect lookups.
    pub lookups: Arc<LookupCounters>,
    /// The create path's alarms.
    pub creates: Arc<CreateCounters>,
    /// How many entries the redirect cache holds.
    pub cache_entries: Box<dyn Fn() -> u64 + Send + Sync>,
    /// The visit counts (click totals and the analytics aggregator), which report their own
    /// series.
    pub visits: Arc<dyn Sample>,
    /// The webhook delivery worker.
    pub webhooks: Arc<crate::webhooks::Webhooks>,
    /// The store (batching and, embedded, group-commit counts).
    pub store: Store,
    /// Reloads of the API keys file.
    pub key_reloads: Arc<ReloadCounters>,
    /// Reloads of the blocklist.
    pub blocklist_reloads: Arc<ReloadCounters>,
    /// The listeners' connection gates.
    pub gates: crate::net::Gates,
    /// The size of the L-character code space, 62^L.
    pub capacity: u128,
}

impl std::fmt::Debug for Sources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sources").finish_non_exhaustive()
    }
}

fn counter(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: u64,
) -> Result<(), std::fmt::Error> {
    let metric = ConstCounter::new(value);
    metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)
}

fn gauge(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: f64,
) -> Result<(), std::fmt::Error> {
    let metric = ConstGauge::new(value);
    metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)
}

impl Sources {
    fn webhooks(&self, e: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        use crate::webhooks::Outcome;
        let counters = self.webhooks.counters();
        let mut family = e.encode_descriptor(
            "shortener_webhook_deliveries",
            "Webhook delivery attempts by outcome (delivered: a 2xx answer; refused: another status; timeout: no answer in time; unreachable: no connection; failed: anything else)",
            None,
            prometheus_client::metrics::MetricType::Counter,
        )?;
        for outcome in Outcome::ALL {
            let labels = [("outcome", outcome.label())];
            ConstCounter::new(counters.attempts(outcome)).encode(family.encode_family(&labels)?)?;
        }
        counter(
            e,
            "shortener_webhook_endpoints_disabled",
            "Webhook endpoints this node disabled for failing too many deliveries in a row",
            counters.endpoints_disabled(),
        )?;
        let (deliveries, events) = counters.purged_total();
        counter(
            e,
            "shortener_webhook_purged_deliveries",
            "Delivered webhook deliveries removed from the log after its retention",
            deliveries,
        )?;
        counter(
            e,
            "shortener_webhook_purged_events",
            "Webhook events removed once no delivery referred to them",
            events,
        )?;
        let mut family = e.encode_descriptor(
            "shortener_webhook_events_dropped",
            "Webhook events not recorded because their tenant's outbox was at its bound (SHORTENER_WEBHOOK_MAX_PENDING), by tenant, as this node counted them",
            None,
            prometheus_client::metrics::MetricType::Counter,
        )?;
        for (tenant, dropped) in counters.dropped() {
            let labels = [("tenant", tenant.as_str())];
            ConstCounter::new(dropped).encode(family.encode_family(&labels)?)?;
        }
        if let Some(full) = counters.full_tenants() {
            gauge(
                e,
                "shortener_webhook_outbox_full_tenants",
                "Tenants whose webhook outbox was at its bound at the last measurement (their events are dropped)",
                full as f64,
            )?;
        }
        if let Some(backlog) = counters.backlog() {
            gauge(
                e,
                "shortener_webhook_outbox_pending",
                "Webhook deliveries waiting for enabled endpoints (due or waiting for a retry), measured every ten delivery polls",
                backlog.pending as f64,
            )?;
            gauge(
                e,
                "shortener_webhook_outbox_oldest_due_seconds",
                "How long the oldest due webhook delivery has waited past its time (0: none due)",
                backlog.oldest_due_seconds as f64,
            )?;
        }
        Ok(())
    }
}

impl Collector for Sources {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let stats = self.ids.stats();
        let e = &mut encoder;
        self.visits.sample(&mut Samples::new(e))?;
        self.webhooks(e)?;
        gauge(
            e,
            "shortener_ids_in_hand",
            "IDs left in the current and spare blocks",
            stats.ids_in_hand as f64,
        )?;
        let runway = if stats.runway_seconds.is_finite() {
            stats.runway_seconds
        } else {
            f64::MAX
        };
        gauge(
            e,
            "shortener_runway_seconds",
            "Seconds of id-service outage the node can ride out at its current create rate",
            runway,
        )?;
        gauge(
            e,
            "shortener_id_rate_per_second",
            "IDs handed out per second (moving average)",
            stats.rate_per_second,
        )?;
        counter(e, "shortener_leases", "ID blocks leased", stats.leases)?;
        counter(
            e,
            "shortener_lease_errors",
            "Failed lease attempts",
            stats.lease_errors,
        )?;
        counter(
            e,
            "shortener_lease_rewinds",
            "Leases refused for starting below a block already seen (alarm)",
            stats.rewinds,
        )?;
        counter(
            e,
            "shortener_generated_code_conflicts",
            "Generated codes found already taken (must stay 0: alarm)",
            self.creates.generated_conflicts.load(Ordering::Relaxed),
        )?;
        counter(
            e,
            "shortener_generated_codes_skipped_imported",
            "Generated codes stepped over because an imported legacy code holds them (expected)",
            self.creates.imported_skips.load(Ordering::Relaxed),
        )?;
        counter(
            e,
            "shortener_cache_hits",
            "Redirect lookups answered from the cache",
            self.lookups.cache_hits.load(Ordering::Relaxed),
        )?;
        counter(
            e,
            "shortener_cache_misses",
            "Redirect lookups that went to the store",
            self.lookups.cache_misses.load(Ordering::Relaxed),
        )?;
        gauge(
            e,
            "shortener_cache_entries",
            "Entries held in the redirect cache (links and recently unknown codes)",
            (self.cache_entries)() as f64,
        )?;
        let writer = self.store.writer_stats();
        counter(
            e,
            "shortener_write_batches",
            "Batched inserts committed or attempted (one commit each)",
            writer.batches.load(Ordering::Relaxed),
        )?;
        counter(
            e,
            "shortener_write_batch_rows",
            "Rows carried by batched inserts (divide by shortener_write_batches for the mean batch size)",
            writer.rows.load(Ordering::Relaxed),
        )?;
        if let Some(replica) = self.store.replica_stats() {
            counter(
                e,
                "shortener_replica_reads",
                "Reads answered by the read replica",
                replica.reads.load(Ordering::Relaxed),
            )?;
            let mut family = e.encode_descriptor(
                "shortener_replica_fallbacks",
                "Reads that could have gone to the read replica and went to the primary, by reason (unknown: the replica lacked the row; fresh: changed and not yet replayed; down; error; refused)",
                None,
                prometheus_client::metrics::MetricType::Counter,
            )?;
            for reason in crate::store::Fallback::ALL {
                let labels = [("reason", reason.label())];
                ConstCounter::new(replica.fallbacks(reason))
                    .encode(family.encode_family(&labels)?)?;
            }
            gauge(
                e,
                "shortener_replica_available",
                "Whether the read replica answers and is verified (1) or reads go to the primary (0)",
                f64::from(u8::from(replica.available.load(Ordering::Relaxed))),
            )?;
            gauge(
                e,
                "shortener_replica_lag_bytes",
                "WAL bytes the read replica had not replayed at the last measurement (-1: not measured yet)",
                replica.lag_bytes.load(Ordering::Relaxed) as f64,
            )?;
        }
        if let Some(d) = self.store.durability() {
            counter(
                e,
                "shortener_sqlite_wal_syncs",
                "Fsyncs of the SQLite write-ahead log (each makes every write before it durable)",
                d.wal_syncs,
            )?;
            counter(
                e,
                "shortener_sqlite_writes",
                "Rounds of durable writes on the SQLite writer connection (each one or more transactions, one fsync; click-count chunks committed without one are not counted)",
                d.writes,
            )?;
        }
        counter(
            e,
            "shortener_api_keys_reloads",
            "Reloads of the API keys file that replaced the keys in force",
            self.key_reloads.applied.load(Ordering::Relaxed),
        )?;
        counter(
            e,
            "shortener_api_keys_reloads_refused",
            "Reloads of the API keys file refused because it did not parse (the keys in force stayed)",
            self.key_reloads.refused.load(Ordering::Relaxed),
        )?;
        counter(
            e,
            "shortener_blocklist_reloads",
            "Reloads of the blocklist that replaced the one in force",
            self.blocklist_reloads.applied.load(Ordering::Relaxed),
        )?;
        counter(
            e,
            "shortener_blocklist_reloads_refused",
            "Reloads of the blocklist refused because it did not parse (the one in force stayed)",
            self.blocklist_reloads.refused.load(Ordering::Relaxed),
        )?;
        let gates = self.gates.snapshots();
        let mut family = e.encode_descriptor(
            "shortener_connections",
            "Connections open on a listener",
            None,
            prometheus_client::metrics::MetricType::Gauge,
        )?;
        for gate in &gates {
            let labels = [("listener", gate.name)];
            ConstGauge::new(gate.open as f64).encode(family.encode_family(&labels)?)?;
        }
        let mut family = e.encode_descriptor(
            "shortener_connections_accepted",
            "Connections a listener admitted",
            None,
            prometheus_client::metrics::MetricType::Counter,
        )?;
        for gate in &gates {
            let labels = [("listener", gate.name)];
            ConstCounter::new(gate.accepted).encode(family.encode_family(&labels)?)?;
        }
        let mut family = e.encode_descriptor(
            "shortener_connections_refused",
            "Connections closed at once because their listener or their client was at its cap",
            None,
            prometheus_client::metrics::MetricType::Counter,
        )?;
        for gate in &gates {
            let labels = [("listener", gate.name)];
            ConstCounter::new(gate.refused).encode(family.encode_family(&labels)?)?;
        }
        let utilisation = stats.high_water as f64 / self.capacity as f64;
        gauge(
            e,
            "shortener_code_space_utilisation",
            "Share of the L-character code space used by leased IDs (n / 62^L)",
            utilisation,
        )?;
        Ok(())
    }
}
