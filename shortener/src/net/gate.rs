//! A listener's connection caps: in total, and per client address (IPv6 clients by prefix).

use crate::limits::client_key;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// What one client with connections open costs the gate (see [`ConnectionGate::memory`]).
const CLIENT_BYTES: u64 = 2 * (std::mem::size_of::<(IpAddr, usize)>() as u64 + 1);

/// The caps of one listener and the connections it holds now.
pub struct ConnectionGate {
    name: &'static str,
    max_total: usize,
    max_per_client: usize,
    ipv6_prefix: u8,
    per_client: Mutex<HashMap<IpAddr, usize>>,
    total: AtomicUsize,
    accepted: AtomicU64,
    refused: AtomicU64,
}

/// A connection the gate admitted; dropping it frees its place.
pub struct Admitted {
    gate: Arc<ConnectionGate>,
    client: IpAddr,
}

/// What a gate holds and has refused, for metrics.
#[derive(Debug, Clone, Copy)]
pub struct GateSnapshot {
    /// The listener's name (`http`, `grpc`, `admin`).
    pub name: &'static str,
    /// Connections open now.
    pub open: usize,
    /// The cap on them.
    pub max: usize,
    /// Connections admitted since start.
    pub accepted: u64,
    /// Connections refused since start.
    pub refused: u64,
}

impl ConnectionGate {
    /// A gate named `name` admitting at most `max_total` connections, and at most
    /// `max_per_client` from one client (IPv6 clients keyed by their first `ipv6_prefix` bits).
    pub fn new(
        name: &'static str,
        max_total: usize,
        max_per_client: usize,
        ipv6_prefix: u8,
    ) -> Arc<Self> {
        Arc::new(Self {
            name,
            max_total: max_total.max(1),
            max_per_client: max_per_client.max(1),
            ipv6_prefix,
            per_client: Mutex::new(HashMap::new()),
            total: AtomicUsize::new(0),
            accepted: AtomicU64::new(0),
            refused: AtomicU64::new(0),
        })
    }

    /// A place for a connection from `peer`, or `None` when the listener or the client is at
    /// its cap (counted as refused).
    pub fn admit(self: &Arc<Self>, peer: IpAddr) -> Option<Admitted> {
        let client = client_key(peer, self.ipv6_prefix);
        let mut per_client = self.per_client.lock().unwrap_or_else(|p| p.into_inner());
        let mine = per_client.get(&client).copied().unwrap_or(0);
        if mine >= self.max_per_client || self.total.load(Ordering::Relaxed) >= self.max_total {
            drop(per_client);
            self.refused.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        per_client.insert(client, mine + 1);
        self.total.fetch_add(1, Ordering::Relaxed);
        self.accepted.fetch_add(1, Ordering::Relaxed);
        Some(Admitted {
            gate: Arc::clone(self),
            client,
        })
    }

    /// Bytes the per-client counts hold now, and at most, estimated: each client's slot
    /// (address, count, one control byte), doubled for the free slots a hash table keeps. A
    /// client is held only while it has a connection open, so there are never more than the
    /// listener's cap.
    pub fn memory(&self) -> (u64, u64) {
        let clients = self
            .per_client
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len();
        (
            clients as u64 * CLIENT_BYTES,
            self.max_total as u64 * CLIENT_BYTES,
        )
    }

    /// What the gate holds now.
    pub fn snapshot(&self) -> GateSnapshot {
        GateSnapshot {
            name: self.name,
            open: self.total.load(Ordering::Relaxed),
            max: self.max_total,
            accepted: self.accepted.load(Ordering::Relaxed),
            refused: self.refused.load(Ordering::Relaxed),
        }
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut per_client = self
            .gate
            .per_client
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(count) = per_client.get_mut(&self.client) {
            *count -= 1;
            if *count == 0 {
                per_client.remove(&self.client);
            }
        }
        self.gate.total.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gate_caps_each_client_and_the_total_and_frees_places_on_drop() {
        let gate = ConnectionGate::new("test", 3, 2, 64);
        let a: IpAddr = "192.0.2.1".parse().expect("ip");
        let b: IpAddr = "192.0.2.2".parse().expect("ip");
        let first = gate.admit(a).expect("a 1");
        let _second = gate.admit(a).expect("a 2");
        assert!(gate.admit(a).is_none(), "a third from one client");
        let third = gate.admit(b).expect("b 1");
        assert!(gate.admit(b).is_none(), "over the total");
        drop(first);
        assert!(gate.admit(a).is_some(), "a place came free");
        assert_eq!(gate.snapshot().refused, 2);
        assert_eq!(
            gate.memory(),
            (2 * CLIENT_BYTES, 3 * CLIENT_BYTES),
            "a and b"
        );
        drop(third);
        assert_eq!(gate.memory().0, CLIENT_BYTES, "b left: the gauge moves");
        // IPv6 clients share a /64.
        let gate = ConnectionGate::new("v6", 10, 1, 64);
        let _one = gate
            .admit("2001:db8::1".parse().expect("ip"))
            .expect("first");
        assert!(gate.admit("2001:db8::ffff".parse().expect("ip")).is_none());
        assert!(gate.admit("2001:db8:0:1::1".parse().expect("ip")).is_some());
    }
}
