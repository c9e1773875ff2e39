//! The segments each replica holds for AllocateIds: one `id_client::IdPool` per namespace.
//!
//! A pool holds the segment it hands out and a spare, and refills the spare in the background
//! as soon as it moves into service, sized to last about `ID_SERVICE_SEGMENT_DURATION` at the
//! measured rate. A segment is an ordinary lease in the ledger, held by `@segment/<instance>`
//! (a holder no caller can write: caller names never start with `@`). With every lease request
//! the pool reports its high water, so after a failover of the database the replica's own
//! segments count among the IDs the cursor must pass. IDs left in a pool when the replica stops
//! are a gap, never handed out again.

use crate::domain::Namespace;
use crate::error::Error;
use crate::ledger::{Grant, Ledger};
use crate::logsafe::Escaped;
use crate::metrics::Metrics;
use id_client::{IdPool, Lease, LeaseError, LeaseFuture, LeaseSource, PoolConfig};
use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// How segments are sized.
#[derive(Debug, Clone)]
pub struct SegmentSettings {
    /// The smallest segment.
    pub min: u64,
    /// The largest segment.
    pub max: u64,
    /// How long a segment should last at the measured rate.
    pub duration: Duration,
    /// How long one segment lease may take.
    pub lease_timeout: Duration,
    /// The holder recorded for this replica's segments.
    pub holder: String,
}

/// This replica's pools, created on first use of a namespace.
pub struct Segments {
    ledger: Ledger,
    metrics: Arc<Metrics>,
    settings: SegmentSettings,
    pools: RwLock<HashMap<Namespace, Arc<IdPool>>>,
    /// Serialises creating pools, so two first calls for a namespace start one pool.
    creating: tokio::sync::Mutex<()>,
}

impl Segments {
    /// No pools yet.
    pub fn new(ledger: Ledger, metrics: Arc<Metrics>, settings: SegmentSettings) -> Self {
        Self {
            ledger,
            metrics,
            settings,
            pools: RwLock::new(HashMap::new()),
            creating: tokio::sync::Mutex::new(()),
        }
    }

    fn existing(&self, namespace: &Namespace) -> Option<Arc<IdPool>> {
        self.pools
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(namespace)
            .cloned()
    }

    /// The pool of `namespace`, started on first use once the ledger confirms the namespace
    /// exists (so unknown names never start a pool). The new pool leases its first segment at
    /// once.
    pub async fn pool(&self, namespace: &Namespace) -> Result<Arc<IdPool>, Error> {
        if let Some(pool) = self.existing(namespace) {
            return Ok(pool);
        }
        let _creating = self.creating.lock().await;
        if let Some(pool) = self.existing(namespace) {
            return Ok(pool);
        }
        let limit = self.ledger.segment_limit(namespace).await?;
        let settings = &self.settings;
        let source = LedgerSource {
            ledger: self.ledger.clone(),
            metrics: Arc::clone(&self.metrics),
            namespace: namespace.clone(),
            holder: settings.holder.clone(),
        };
        let pool = Arc::new(IdPool::start(
            Arc::new(source),
            PoolConfig {
                min_block: settings.min.min(limit),
                max_block: settings.max.min(limit),
                initial_block: settings.min.min(limit),
                target_block_duration: settings.duration,
                lease_timeout: settings.lease_timeout,
                backoff_initial: Duration::from_millis(50),
                backoff_max: Duration::from_secs(2),
            },
        ));
        self.pools
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(namespace.clone(), Arc::clone(&pool));
        tracing::info!(%namespace, "segment pool started");
        Ok(pool)
    }

    /// Refreshes `idservice_segment_ids_in_hand` (called before each scrape).
    pub fn report(&self) {
        let pools = self
            .pools
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        for (namespace, pool) in pools.iter() {
            self.metrics
                .set_segment_ids_in_hand(namespace.as_str(), pool.stats().ids_in_hand);
        }
    }

    /// Stops every pool's refill; the IDs they held become a gap.
    pub fn close(&self) {
        self.pools
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clear();
    }
}

/// Leases segments for one namespace straight from the ledger.
struct LedgerSource {
    ledger: Ledger,
    metrics: Arc<Metrics>,
    namespace: Namespace,
    holder: String,
}

impl LeaseSource for LedgerSource {
    fn lease(&self, size: u64) -> LeaseFuture<'_> {
        self.lease_reporting(size, 0)
    }

    fn lease_reporting(&self, size: u64, high_water: u64) -> LeaseFuture<'_> {
        Box::pin(async move {
            let grant = Grant {
                namespace: &self.namespace,
                size,
                holder: &self.holder,
                high_water: (high_water > 0).then_some(high_water),
            };
            match self.ledger.grant(&grant).await {
                Ok((lease, skip)) => {
                    self.metrics.segment(&lease, skip.as_ref());
                    if let Some(skip) = &skip {
                        tracing::warn!(
                            namespace = %self.namespace,
                            from = skip.from,
                            to = skip.to,
                            skipped = skip.ids(),
                            cause = skip.cause(),
                            "the cursor moved forward before a segment was granted"
                        );
                    }
                    tracing::info!(
                        lease_id = lease.lease_id,
                        namespace = %self.namespace,
                        start = lease.block.start,
                        end = lease.block.end,
                        holder = %Escaped(&lease.holder),
                        "segment leased"
                    );
                    Ok(Lease {
                        lease_id: lease.lease_id,
                        block: lease.block,
                    })
                }
                Err(error) => Err(match error {
                    e @ Error::Exhausted { .. } => LeaseError::Exhausted(e.to_string()),
                    e @ Error::NotFound(_) => LeaseError::UnknownNamespace(e.to_string()),
                    e @ Error::InvalidArgument(_) => LeaseError::Invalid(e.to_string()),
                    e @ Error::FailedPrecondition(_) => LeaseError::Refused(e.to_string()),
                    e => LeaseError::Unavailable(e.to_string()),
                }),
            }
        })
    }
}
