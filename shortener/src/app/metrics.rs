//! The ID pool's part of `/metrics`. The pool belongs to another crate (`id_client`), which
//! knows nothing of this node's metrics, so the wiring reports it: IDs in hand, runway, leases,
//! and how much of the code space the leased IDs use.

use crate::metrics::{Sample, Samples};
use id_client::IdPool;
use std::fmt;
use std::sync::Arc;

/// The ID pool, with the size of the code space its IDs are drawn from.
pub(super) struct IdSupply {
    ids: Arc<IdPool>,
    /// The size of the L-character code space, 62^L.
    capacity: u128,
}

impl IdSupply {
    /// `ids`, drawing from a code space of `capacity` codes.
    pub(super) fn new(ids: Arc<IdPool>, capacity: u128) -> Self {
        Self { ids, capacity }
    }
}

impl Sample for IdSupply {
    fn sample(&self, out: &mut Samples<'_, '_>) -> fmt::Result {
        let stats = self.ids.stats();
        out.gauge(
            "shortener_ids_in_hand",
            "IDs left in the current and spare blocks",
            stats.ids_in_hand as f64,
        )?;
        let runway = if stats.runway_seconds.is_finite() {
            stats.runway_seconds
        } else {
            f64::MAX
        };
        out.gauge(
            "shortener_runway_seconds",
            "Seconds of id-service outage the node can ride out at its current create rate",
            runway,
        )?;
        out.gauge(
            "shortener_id_rate_per_second",
            "IDs handed out per second (moving average)",
            stats.rate_per_second,
        )?;
        out.counter("shortener_leases", "ID blocks leased", stats.leases)?;
        out.counter(
            "shortener_lease_errors",
            "Failed lease attempts",
            stats.lease_errors,
        )?;
        out.counter(
            "shortener_lease_rewinds",
            "Leases refused for starting below a block already seen (alarm)",
            stats.rewinds,
        )?;
        out.gauge(
            "shortener_code_space_utilisation",
            "Share of the L-character code space used by leased IDs (n / 62^L)",
            stats.high_water as f64 / self.capacity as f64,
        )
    }
}
