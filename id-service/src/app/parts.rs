//! Wiring: every long-lived part of a replica, made once from its configuration, and the state
//! each server is given.

use crate::allocator::Allocator;
use crate::auth::{Gate, SharedQuotas};
use crate::config::Config;
use crate::domain::{BlockBounds, Holder};
use crate::grpc::Shared;
use crate::http_api::HttpApi;
use crate::ledger::Ledger;
use crate::metrics::Metrics;
use crate::ops::OpsState;
use crate::segments::{SegmentSettings, Segments};
use anyhow::Context;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The parts of a running replica, shared by the servers that need them.
pub(super) struct Parts {
    /// This replica's name (its segments' holder is `@segment/<instance>`).
    pub(super) instance: Holder,
    /// The lease ledger.
    pub(super) ledger: Ledger,
    /// The metrics.
    pub(super) metrics: Arc<Metrics>,
    /// The one admission check.
    pub(super) gate: Arc<Gate>,
    /// The replica's segments for AllocateIds.
    pub(super) segments: Arc<Segments>,
    /// AllocateIds, over the segments.
    pub(super) allocator: Arc<Allocator>,
    /// What the gRPC handlers share.
    pub(super) shared: Arc<Shared>,
}

impl Parts {
    /// Wires the parts of a replica for `config` over `ledger`.
    pub(super) fn wire(
        config: &Config,
        ledger: Ledger,
        metrics: Arc<Metrics>,
        gate: Arc<Gate>,
    ) -> anyhow::Result<Parts> {
        let instance = config.instance_name().context("name this replica")?;
        let segments = Arc::new(Segments::new(
            ledger.clone(),
            Arc::clone(&metrics),
            segment_settings(config, &instance),
        ));
        let quotas = Arc::new(SharedQuotas::new(ledger.clone()));
        let allocator = Arc::new(Allocator::new(
            Arc::clone(&segments),
            Arc::clone(&metrics),
            Arc::clone(&quotas),
            config.request_timeout,
        ));
        let shared = Arc::new(Shared {
            ledger: ledger.clone(),
            gate: Arc::clone(&gate),
            allocator: Arc::clone(&allocator),
            bounds: BlockBounds {
                min: config.min_block,
                max: config.max_block,
            },
            max_count: config.allocate_max_count,
            namespace_max: config.namespace_max,
            metrics: Arc::clone(&metrics),
            quotas,
            cut_off: CancellationToken::new(),
        });
        Ok(Parts {
            instance,
            ledger,
            metrics,
            gate,
            segments,
            allocator,
            shared,
        })
    }

    /// What the JSON endpoint's handlers share.
    pub(super) fn http_api(&self, config: &Config) -> Arc<HttpApi> {
        Arc::new(HttpApi {
            gate: Arc::clone(&self.gate),
            allocator: Arc::clone(&self.allocator),
            max_count: config.allocate_max_count,
            timeout: config.request_timeout,
        })
    }

    /// What the admin handlers read; `draining` turns `/readyz` off.
    pub(super) fn ops_state(&self, draining: CancellationToken) -> OpsState {
        OpsState {
            ledger: self.ledger.clone(),
            metrics: Arc::clone(&self.metrics),
            segments: Arc::clone(&self.segments),
            draining,
        }
    }

    /// Cuts off the calls still running: they end with UNAVAILABLE.
    pub(super) fn cut_off(&self) {
        self.shared.cut_off.cancel();
    }

    /// Stops the segments' refills and closes the connection pool.
    pub(super) fn close(&self) {
        self.segments.close();
        self.ledger.pool().close();
    }
}

/// How segments are sized. Segments are leases: never above the largest block (nor, per
/// namespace, its own limit; see `Segments::pool`).
fn segment_settings(config: &Config, instance: &Holder) -> SegmentSettings {
    SegmentSettings {
        min: config.segment_min.min(config.max_block),
        max: config.segment_max.min(config.max_block),
        duration: config.segment_duration,
        lease_timeout: config.request_timeout,
        holder: format!("@segment/{}", instance.as_str()),
    }
}
