//! Clients whose 404 budget is spent, each until its next token.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{PoisonError, RwLock};
use std::time::{Duration, Instant};

/// Clients remembered at most: a client enters only by spending a whole 404 burst, and leaves
/// at its next token (or the next housekeeping). Past this many, a newly spent client is not
/// remembered and its requests are looked up and refused as before (each 404 still costs it a
/// token it does not have).
const MAX_REMEMBERED: usize = 65_536;

/// What one remembered client costs (see [`Spent::bytes`]).
const ENTRY_BYTES: u64 = 2 * (std::mem::size_of::<(IpAddr, Instant)>() as u64 + 1);

/// The clients past their 404 budget, for the redirect edge's check before any lookup.
#[derive(Default)]
pub(super) struct Spent {
    /// How many are remembered: read without the lock on every redirect, so a node nobody
    /// scans pays one atomic load.
    count: AtomicUsize,
    until: RwLock<HashMap<IpAddr, Instant>>,
}

impl Spent {
    /// `client` has no 404 token before `until`.
    pub(super) fn mark(&self, client: IpAddr, until: Instant) {
        let mut map = self.until.write().unwrap_or_else(PoisonError::into_inner);
        if map.len() < MAX_REMEMBERED || map.contains_key(&client) {
            map.insert(client, until);
            self.count.store(map.len(), Ordering::Relaxed);
        }
    }

    /// Whether any client is remembered.
    pub(super) fn any(&self) -> bool {
        self.count.load(Ordering::Relaxed) > 0
    }

    /// How long `client` still waits for a 404 token at `now`, if it is remembered and its
    /// time has not come.
    pub(super) fn wait(&self, client: IpAddr, now: Instant) -> Option<Duration> {
        if !self.any() {
            return None;
        }
        let map = self.until.read().unwrap_or_else(PoisonError::into_inner);
        map.get(&client)
            .and_then(|until| until.checked_duration_since(now))
            .filter(|wait| !wait.is_zero())
    }

    /// Bytes the remembered clients take, estimated: each client's slot (address and time, one
    /// control byte), doubled for the free slots a hash table keeps.
    pub(super) fn bytes(&self) -> u64 {
        self.count.load(Ordering::Relaxed) as u64 * ENTRY_BYTES
    }

    /// [`Spent::bytes`] with as many clients as are ever remembered.
    pub(super) fn budget() -> u64 {
        MAX_REMEMBERED as u64 * ENTRY_BYTES
    }

    /// Forgets the clients whose time has come.
    pub(super) fn housekeeping(&self, now: Instant) {
        let mut map = self.until.write().unwrap_or_else(PoisonError::into_inner);
        map.retain(|_, until| *until > now);
        map.shrink_to_fit();
        self.count.store(map.len(), Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spent_client_waits_until_its_time_and_is_then_forgotten() {
        let spent = Spent::default();
        let (now, client, other) = (
            Instant::now(),
            IpAddr::from([192, 0, 2, 1]),
            IpAddr::from([192, 0, 2, 2]),
        );
        assert!(!spent.any());
        assert_eq!(spent.wait(client, now), None);
        spent.mark(client, now + Duration::from_millis(300));
        assert!(spent.any());
        assert_eq!(spent.bytes(), ENTRY_BYTES, "the gauge moves");
        assert_eq!(spent.wait(client, now), Some(Duration::from_millis(300)));
        assert_eq!(
            spent.wait(other, now),
            None,
            "only the client that spent it"
        );
        let later = now + Duration::from_millis(300);
        assert_eq!(spent.wait(client, later), None, "its token has come");
        spent.housekeeping(later);
        assert!(!spent.any());
        assert_eq!(spent.bytes(), 0);
    }

    #[test]
    fn the_remembered_clients_are_bounded() {
        let spent = Spent::default();
        let until = Instant::now() + Duration::from_secs(60);
        for i in 0..(MAX_REMEMBERED as u32 + 10) {
            spent.mark(IpAddr::from(i.to_be_bytes()), until);
        }
        assert_eq!(spent.count.load(Ordering::Relaxed), MAX_REMEMBERED);
        assert_eq!(spent.bytes(), Spent::budget(), "the gauge is at its bound");
        // One already remembered is still updated.
        spent.mark(
            IpAddr::from(0u32.to_be_bytes()),
            until + Duration::from_secs(1),
        );
        assert_eq!(spent.count.load(Ordering::Relaxed), MAX_REMEMBERED);
    }
}
