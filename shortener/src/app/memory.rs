//! The structures of a node that grow with traffic, registered in its memory gauges
//! (`shortener_memory_bytes` and `shortener_memory_budget_bytes`, by `structure`), each with
//! the bound its settings give it. The redirect cache registers itself where it is made.

use crate::domains::DomainService;
use crate::limits::Limits;
use crate::metrics::MemoryGauges;
use crate::net::{GateSnapshot, Gates};
use crate::visits::Visits;
use std::sync::Arc;

/// What one open connection holds, estimated: hyper's 8 KiB read buffer and a write buffer
/// about as large, the connection's task and state (an HTTP/2 connection's frame buffers are
/// of the same order while it is idle; a gRPC call in flight holds at most its flow-control
/// window more, which this figure does not count).
pub const CONNECTION_BYTES: u64 = 20 << 10;

/// The request head [`CONNECTION_BYTES`] allows for: a connection of an HTTP listener whose
/// head bound is larger may grow its read buffer by the difference (a client sending a head
/// that long).
const HEAD_ALLOWED: u64 = 16 << 10;

/// The parts whose structures are accounted.
pub(super) struct Accounted<'a> {
    /// The rate limits and the password-check pool.
    pub limits: &'a Arc<Limits>,
    /// The click and analytics accumulators.
    pub visits: &'a Arc<Visits>,
    /// The branded-domain cache.
    pub domains: &'a Arc<DomainService>,
    /// The listeners' connection gates.
    pub gates: &'a Gates,
    /// The HTTP listeners' bound on a request head, in bytes (`ServeSettings::max_head`).
    pub max_head: usize,
}

/// Registers every structure of `parts` in `gauges`.
pub(super) fn account(gauges: &MemoryGauges, parts: Accounted<'_>) {
    for (index, (name, _, budget)) in parts.limits.memory().into_iter().enumerate() {
        let limits = Arc::clone(parts.limits);
        gauges.register(name, budget, move || limits.memory()[index].1);
    }
    let limits = Arc::clone(parts.limits);
    gauges.register(
        "password_checks",
        limits.password_checks().budget(),
        move || limits.password_checks().bytes(),
    );
    let (_, budget) = crate::visits::classify::profile_cache_memory();
    gauges.register("agent_profiles", budget, || {
        crate::visits::classify::profile_cache_memory().0
    });
    let visits = Arc::clone(parts.visits);
    gauges.register("click_counts", visits.clicks().budget(), move || {
        visits.clicks().bytes()
    });
    let visits = Arc::clone(parts.visits);
    let budget = visits.analytics().budget();
    gauges.register("analytics_counters", budget, move || {
        visits.analytics().bytes()
    });
    let domains = Arc::clone(parts.domains);
    gauges.register("domain_cache", domains.cache().memory().1, move || {
        domains.cache().memory().0
    });
    if let Some(traces) = otel::stats() {
        let budget = traces.budget_bytes();
        gauges.register("trace_queue", budget, move || traces.held_bytes());
    }
    let gates = parts.gates.clone();
    let budget = gate_memory(&gates).1;
    gauges.register("connection_gates", budget, move || gate_memory(&gates).0);
    let gates = parts.gates.clone();
    let budget = connection_budget(&gates.snapshots(), parts.max_head);
    gauges.register("connection_buffers", budget, move || {
        gates
            .snapshots()
            .iter()
            .map(|g| g.open as u64 * CONNECTION_BYTES)
            .sum()
    });
}

/// What the listeners' connections may hold at most: [`CONNECTION_BYTES`] each, and on the
/// HTTP listeners (the public and the admin one; gRPC reads no request head) the room a head
/// of up to `max_head` bytes takes past [`HEAD_ALLOWED`].
fn connection_budget(gates: &[GateSnapshot], max_head: usize) -> u64 {
    let head_past = (max_head as u64).saturating_sub(HEAD_ALLOWED);
    gates
        .iter()
        .map(|gate| {
            let each = match gate.name {
                "grpc" => CONNECTION_BYTES,
                _ => CONNECTION_BYTES + head_past,
            };
            gate.max as u64 * each
        })
        .sum()
}

/// The three gates' per-client counts, in use and at most.
fn gate_memory(gates: &Gates) -> (u64, u64) {
    [&gates.public, &gates.grpc, &gates.admin]
        .iter()
        .map(|gate| gate.memory())
        .fold((0, 0), |(a, b), (c, d)| (a + c, b + d))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(name: &'static str, max: usize) -> GateSnapshot {
        GateSnapshot {
            name,
            open: 0,
            max,
            accepted: 0,
            refused: 0,
        }
    }

    /// The budget follows the head bound: unchanged at the default, and a connection of an
    /// HTTP listener counted with its longest head when the URL setting allows more.
    #[test]
    fn the_connection_budget_follows_the_head_bound() {
        let gates = [gate("http", 100), gate("grpc", 10), gate("admin", 5)];
        let default =
            crate::http::serve::ServeSettings::head_for(crate::domain::DEFAULT_MAX_URL_LENGTH);
        assert_eq!(
            connection_budget(&gates, default),
            115 * CONNECTION_BYTES,
            "the default head fits the estimate"
        );
        let long = crate::http::serve::ServeSettings::head_for(65_536);
        let past = long as u64 - HEAD_ALLOWED;
        assert_eq!(
            connection_budget(&gates, long),
            115 * CONNECTION_BYTES + 105 * past
        );
    }
}
