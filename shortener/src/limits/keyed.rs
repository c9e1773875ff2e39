//! A token bucket per key whose keys are bounded: a client (or a client and code) is
//! remembered while its bucket is not full again, and never more than `max_keys` at once.
//!
//! When a new check finds the limiter at its bound, the keys whose buckets are full again are
//! forgotten first (they would start full anyway); if that frees nothing below the bound, every
//! key is forgotten at once and each bucket starts full again. Only a flood from more clients
//! than the bound can reach that, and such a flood is past what a per-client limit can stop;
//! the clients remembered as having spent their 404 budget (`spent`) are kept apart and stay
//! refused.
//!
//! The bound is looked at every [`LOOK_EVERY`] checks, not on each (counting a sharded map's
//! keys takes every shard's lock), so it may be passed by that many keys between two looks.

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota};
use std::hash::Hash;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{PoisonError, RwLock};
use std::time::Duration;

/// Checks between two looks at the number of keys.
pub(super) const LOOK_EVERY: usize = 32;

/// A bounded keyed token bucket.
pub(super) struct Keyed<K: Hash + Eq + Clone> {
    quota: Quota,
    max_keys: usize,
    /// Heap bytes one key holds beyond its slot (a code's text, say), estimated.
    key_heap: u64,
    limiter: RwLock<DefaultKeyedRateLimiter<K>>,
    clock: DefaultClock,
    /// Times every key was forgotten at once.
    resets: AtomicU64,
    /// Checks made, for [`LOOK_EVERY`].
    checks: AtomicUsize,
}

impl<K: Hash + Eq + Clone> Keyed<K> {
    /// Buckets of `quota`, for at most `max_keys` keys each holding about `key_heap` bytes
    /// on the heap.
    pub(super) fn new(quota: Quota, max_keys: usize, key_heap: u64) -> Self {
        Self {
            quota,
            max_keys: max_keys.max(1),
            key_heap,
            limiter: RwLock::new(DefaultKeyedRateLimiter::keyed(quota)),
            clock: DefaultClock::default(),
            resets: AtomicU64::new(0),
            checks: AtomicUsize::new(0),
        }
    }

    /// Takes one token for `key`; `Err(wait)` until its next token.
    pub(super) fn check(&self, key: &K) -> Result<(), Duration> {
        self.make_room();
        self.read()
            .check_key(key)
            .map_err(|nu| nu.wait_time_from(self.clock.now()))
    }

    /// Takes `n` tokens for `key`; `Err(wait)` until they are there (a nominal second when `n`
    /// is more than the burst can ever hold).
    pub(super) fn check_n(&self, key: &K, n: NonZeroU32) -> Result<(), Duration> {
        self.make_room();
        match self.read().check_key_n(key, n) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(nu)) => Err(nu.wait_time_from(self.clock.now())),
            Err(_) => Err(Duration::from_secs(1)),
        }
    }

    /// Keys remembered now.
    pub(super) fn len(&self) -> usize {
        self.read().len()
    }

    /// Times every key was forgotten at once because the bound was reached.
    #[cfg(test)]
    pub(super) fn resets(&self) -> u64 {
        self.resets.load(Ordering::Relaxed)
    }

    /// Bytes the keys take, estimated: each key's slot and state, doubled for the free slots a
    /// hash table keeps (it grows by doubling), plus the key's heap bytes.
    pub(super) fn bytes(&self) -> u64 {
        self.len() as u64 * self.entry_bytes()
    }

    /// [`Keyed::bytes`] at the bound (and the few keys that may pass it between two looks).
    pub(super) fn budget(&self) -> u64 {
        (self.max_keys + LOOK_EVERY) as u64 * self.entry_bytes()
    }

    fn entry_bytes(&self) -> u64 {
        // The key, its state (one u64) and one control byte.
        let slot = std::mem::size_of::<(K, u64)>() as u64 + 1;
        2 * slot + self.key_heap
    }

    /// Forgets the keys whose buckets are full again.
    pub(super) fn housekeeping(&self) {
        let limiter = self.read();
        limiter.retain_recent();
        limiter.shrink_to_fit();
    }

    /// Makes room for one more key when the bound is reached (see the module's notes).
    fn make_room(&self) {
        if !self
            .checks
            .fetch_add(1, Ordering::Relaxed)
            .is_multiple_of(LOOK_EVERY)
            || self.read().len() < self.max_keys
        {
            return;
        }
        self.housekeeping();
        let mut limiter = self.limiter.write().unwrap_or_else(PoisonError::into_inner);
        if limiter.len() >= self.max_keys {
            *limiter = DefaultKeyedRateLimiter::keyed(self.quota);
            self.resets.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, DefaultKeyedRateLimiter<K>> {
        self.limiter.read().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::IpAddr;

    fn client(i: u32) -> IpAddr {
        IpAddr::from(i.to_be_bytes())
    }

    #[test]
    fn the_keys_never_pass_their_bound_and_the_bytes_follow_them() {
        // A slow bucket: every client stays remembered for a minute after one token.
        let quota = Quota::per_minute(NonZeroU32::new(1).expect("1"));
        let keyed = Keyed::<IpAddr>::new(quota, 100, 0);
        assert_eq!(keyed.bytes(), 0);
        for i in 0..50 {
            assert!(keyed.check(&client(i)).is_ok());
        }
        assert_eq!(keyed.len(), 50);
        assert_eq!(
            keyed.bytes(),
            50 * keyed.entry_bytes(),
            "the gauge follows the keys"
        );
        assert!(
            keyed.check(&client(0)).is_err(),
            "a spent client is refused"
        );
        for i in 50..350 {
            let _ = keyed.check(&client(i));
            let most = 100 + LOOK_EVERY;
            assert!(keyed.len() <= most, "{} keys past the bound", keyed.len());
        }
        assert!(keyed.resets() >= 2, "the bound was reached and kept");
        assert!(keyed.bytes() <= keyed.budget());
    }

    #[test]
    fn full_buckets_are_forgotten_before_anyone_is_reset() {
        // A fast bucket: full again a microsecond after a token.
        let quota = Quota::per_second(NonZeroU32::new(1_000_000).expect("n"));
        let keyed = Keyed::<IpAddr>::new(quota, 10, 0);
        for i in 0..10 {
            assert!(keyed.check(&client(i)).is_ok());
        }
        std::thread::sleep(Duration::from_millis(5));
        // The next check looks at the bound.
        keyed.checks.store(0, Ordering::Relaxed);
        assert!(keyed.check(&client(99)).is_ok());
        assert_eq!(keyed.resets(), 0, "the full buckets made room");
        assert_eq!(keyed.len(), 1);
        keyed
            .check_n(&client(1), NonZeroU32::new(5).expect("5"))
            .expect("room");
        assert!(
            keyed
                .check_n(&client(1), NonZeroU32::new(2_000_000).expect("n"))
                .is_err(),
            "more than the burst"
        );
    }
}
