//! Connections and descriptors: what keeps one listener, or one client, from using up what the
//! others need.
//!
//! At start the node raises its soft limit of open files to the hard limit ([`fd`]) and splits
//! it: the internal listeners (gRPC, admin) share a cap that leaves a reserve, so the public
//! redirect port keeps accepting when they are full. Every listener caps its connections in
//! total and per client address ([`ConnectionGate`]); a connection over a cap is accepted and
//! closed at once, so it neither queues nor holds a descriptor. gRPC connections that stay idle
//! are closed ([`idle`]), and so are HTTP connections whose client stops reading ([`stall`]).

pub mod fd;
mod gate;
pub mod idle;
pub mod stall;

pub use gate::{Admitted, ConnectionGate, GateSnapshot};

use crate::metrics::{Sample, Samples};
use std::sync::Arc;

/// The connection gates of a node's three listeners.
#[derive(Clone)]
pub struct Gates {
    /// The public listener.
    pub public: Arc<ConnectionGate>,
    /// The gRPC listener.
    pub grpc: Arc<ConnectionGate>,
    /// The admin listener.
    pub admin: Arc<ConnectionGate>,
}

impl Gates {
    /// Gates for `budget`, each admitting at most `per_client` connections from one client
    /// (IPv6 clients keyed by `ipv6_prefix` bits).
    pub fn new(budget: fd::Budget, per_client: usize, ipv6_prefix: u8) -> Self {
        Self {
            public: ConnectionGate::new("http", budget.public, per_client, ipv6_prefix),
            grpc: ConnectionGate::new("grpc", budget.grpc, per_client, ipv6_prefix),
            admin: ConnectionGate::new("admin", budget.admin, per_client, ipv6_prefix),
        }
    }

    /// What each gate holds now.
    pub fn snapshots(&self) -> [GateSnapshot; 3] {
        [
            self.public.snapshot(),
            self.grpc.snapshot(),
            self.admin.snapshot(),
        ]
    }
}

/// The listeners' part of `/metrics`: connections open, admitted and refused, by listener.
impl Sample for Gates {
    fn sample(&self, out: &mut Samples<'_, '_>) -> std::fmt::Result {
        let gates = self.snapshots();
        out.gauges(
            "shortener_connections",
            "Connections open on a listener",
            gates.map(|gate| ([("listener", gate.name)], gate.open as f64)),
        )?;
        out.counters(
            "shortener_connections_accepted",
            "Connections a listener admitted",
            gates.map(|gate| ([("listener", gate.name)], gate.accepted)),
        )?;
        out.counters(
            "shortener_connections_refused",
            "Connections closed at once because their listener or their client was at its cap",
            gates.map(|gate| ([("listener", gate.name)], gate.refused)),
        )
    }
}
