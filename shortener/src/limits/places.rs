//! Places for long-running or heavy work on a node (exports, imports, audit exports, stats
//! reads): a few at once on the node, fewer per tenant and per API key, so one tenant's work never takes every place and another
//! tenant's is answered 429 for as long as the first one likes.

use crate::domain::{Caller, Error};
use std::collections::HashMap;
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// How many of one kind of work run at once.
#[derive(Debug, Clone, Copy)]
pub struct Places {
    /// On the node.
    pub per_node: NonZeroUsize,
    /// For one tenant (all its keys together).
    pub per_tenant: NonZeroUsize,
    /// For one API key.
    pub per_key: NonZeroUsize,
}

/// Who holds places now: counts by tenant and by key.
#[derive(Debug, Default)]
struct Holders {
    tenants: HashMap<String, usize>,
    keys: HashMap<String, usize>,
}

/// Admits work within [`Places`]; a caller past one of the bounds is refused at once,
/// `RateLimited` with `retry_after`, never queued.
pub struct Gate {
    places: Places,
    retry_after: Duration,
    node: Arc<Semaphore>,
    holders: Arc<Mutex<Holders>>,
}

impl Gate {
    /// A gate with nothing running.
    pub fn new(places: Places, retry_after: Duration) -> Self {
        Self {
            places,
            retry_after,
            node: Arc::new(Semaphore::new(places.per_node.get())),
            holders: Arc::default(),
        }
    }

    /// A place for `caller`, held until the [`Place`] is dropped.
    pub fn admit(&self, caller: &Caller) -> Result<Place, Error> {
        let busy = || Error::RateLimited {
            retry_after: self.retry_after,
        };
        let node = Arc::clone(&self.node)
            .try_acquire_owned()
            .map_err(|_| busy())?;
        let (tenant, key) = (caller.tenant.to_string(), caller.key_id());
        let mut holders = lock(&self.holders);
        let in_tenant = holders.tenants.get(&tenant).copied().unwrap_or(0);
        let of_key = holders.keys.get(&key).copied().unwrap_or(0);
        if in_tenant >= self.places.per_tenant.get() || of_key >= self.places.per_key.get() {
            return Err(busy());
        }
        holders.tenants.insert(tenant.clone(), in_tenant + 1);
        holders.keys.insert(key.clone(), of_key + 1);
        Ok(Place {
            _node: node,
            holders: Arc::clone(&self.holders),
            tenant,
            key,
        })
    }

    /// Waits up to `within` for every place to be given back (the work holding them has
    /// ended); whether they were. A stopping node uses it once no new work is admitted.
    pub async fn settled(&self, within: Duration) -> bool {
        let all = u32::try_from(self.places.per_node.get()).unwrap_or(u32::MAX);
        matches!(
            tokio::time::timeout(within, self.node.acquire_many(all)).await,
            Ok(Ok(_))
        )
    }
}

fn lock(holders: &Mutex<Holders>) -> std::sync::MutexGuard<'_, Holders> {
    // Counts stay consistent whatever panicked while holding the lock.
    holders.lock().unwrap_or_else(|p| p.into_inner())
}

/// One running piece of work's place in the node's, its tenant's and its key's counts, given
/// back when dropped.
pub struct Place {
    _node: OwnedSemaphorePermit,
    holders: Arc<Mutex<Holders>>,
    tenant: String,
    key: String,
}

impl std::fmt::Debug for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Place")
            .field("tenant", &self.tenant)
            .field("key", &self.key)
            .finish()
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut guard = lock(&self.holders);
        let holders = &mut *guard;
        for (counts, name) in [
            (&mut holders.tenants, &self.tenant),
            (&mut holders.keys, &self.key),
        ] {
            if let Some(running) = counts.get_mut(name) {
                *running -= 1;
                if *running == 0 {
                    counts.remove(name);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Scopes;

    fn caller(tenant: &str, name: &str) -> Caller {
        Caller::of_key(
            Arc::from(tenant),
            Arc::from(name),
            Scopes::parse_list("links:read").expect("scopes"),
        )
    }

    fn places(node: usize, tenant: usize, key: usize) -> Places {
        let n = |v| NonZeroUsize::new(v).expect("non-zero");
        Places {
            per_node: n(node),
            per_tenant: n(tenant),
            per_key: n(key),
        }
    }

    /// One tenant with many keys fills its share, not the node: another tenant still gets a
    /// place; each bound refuses at once, and a place given back is free again.
    #[test]
    fn a_tenant_takes_its_share_and_leaves_the_rest() {
        let gate = Gate::new(places(4, 2, 1), Duration::from_secs(5));
        let a1 = gate.admit(&caller("a", "k1")).expect("a/k1");
        assert!(
            matches!(
                gate.admit(&caller("a", "k1")),
                Err(Error::RateLimited { .. })
            ),
            "the key's bound"
        );
        let a2 = gate.admit(&caller("a", "k2")).expect("a/k2");
        assert!(
            gate.admit(&caller("a", "k3")).is_err(),
            "the tenant's bound, whatever the key"
        );
        let b1 = gate.admit(&caller("b", "k1")).expect("another tenant");
        let c1 = gate.admit(&caller("c", "k1")).expect("a third");
        assert!(gate.admit(&caller("d", "k1")).is_err(), "the node's bound");
        drop(a1);
        let a3 = gate.admit(&caller("a", "k3")).expect("a place given back");
        drop((a2, a3, b1, c1));
        let holders = lock(&gate.holders);
        assert!(holders.tenants.is_empty() && holders.keys.is_empty());
    }

    /// A gate is settled once the last place is given back, not before.
    #[tokio::test(start_paused = true)]
    async fn settled_waits_for_the_last_place() {
        let gate = Gate::new(places(4, 2, 1), Duration::from_secs(5));
        assert!(gate.settled(Duration::ZERO).await, "nothing running");
        let held = gate.admit(&caller("a", "k1")).expect("a place");
        assert!(
            !gate.settled(Duration::from_secs(1)).await,
            "a place is held"
        );
        // Given back while the wait is under way (the wait is polled first, and registers).
        let (settled, ()) = tokio::join!(gate.settled(Duration::from_secs(3)), async move {
            tokio::task::yield_now().await;
            drop(held);
        });
        assert!(settled, "given back");
    }
}
