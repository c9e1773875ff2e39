//! Keys a node does not hold, looked up in the store before they are refused, so a key made on
//! another node since this node's last read works here at once.
//!
//! A refused key must not cost the store much, however often it comes:
//! - a digest the node knows the answer for is not asked again: one the store said no live key
//!   has (a secret is made by a node and a revoked or expired key never comes back, so the
//!   answer stays true), and one the last read found live but left out of force (its maker
//!   holds no role, the keys file has its name) until the next read;
//! - at most [`LOOKUPS_PER_SECOND`] lookups a second and [`LOOKUPS_IN_FLIGHT`] at once; a key
//!   that comes past either is refused as unknown without one;
//! - a read of the stored keys a lookup causes comes at least [`LOOKUP_READ_GAP`] after the
//!   previous one, and the lookup with its read gives up after [`LOOKUP_DEADLINE`].

use super::KeyService;
use crate::access::Looked;
use crate::store::{KeyStore, StoreError};
use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

/// How many lookups may run at once on a node.
pub const LOOKUPS_IN_FLIGHT: usize = 4;

/// How many lookups a node starts in a second.
pub const LOOKUPS_PER_SECOND: u32 = 20;

/// How long a lookup, and the read of the stored keys after it, may take before the key is
/// refused as unknown.
pub const LOOKUP_DEADLINE: Duration = Duration::from_secs(2);

/// The least time between the start of a read of the stored keys and a read a lookup causes.
pub const LOOKUP_READ_GAP: Duration = Duration::from_millis(250);

/// The most digests kept of keys the store said it does not keep live (32 bytes each); the
/// set is emptied when it is full.
const REFUSED_KEPT: usize = 1024;

/// When reads of the stored keys began (kept under the service's `syncing` lock).
#[derive(Debug, Default)]
pub(super) struct Reads {
    /// The last read, whether or not it put the keys in force.
    pub(super) attempted: Option<Instant>,
    /// The last read that put the keys in force.
    pub(super) succeeded: Option<Instant>,
}

/// The bounds of lookups, and what reads and lookups taught the node.
pub(super) struct Lookups {
    in_flight: tokio::sync::Semaphore,
    learnt: Mutex<Learnt>,
}

struct Learnt {
    /// The digests of the live keys the last read found.
    live: HashSet<[u8; 32]>,
    /// Digests no live key has, as the store said.
    refused: HashSet<[u8; 32]>,
    /// The second lookups are counted in, and how many it has had.
    window: (Instant, u32),
}

impl Default for Lookups {
    fn default() -> Self {
        Self {
            in_flight: tokio::sync::Semaphore::new(LOOKUPS_IN_FLIGHT),
            learnt: Mutex::new(Learnt {
                live: HashSet::new(),
                refused: HashSet::new(),
                window: (Instant::now(), 0),
            }),
        }
    }
}

impl Lookups {
    /// Notes the digests of the live keys a read found.
    pub(super) fn read(&self, live: HashSet<[u8; 32]>) {
        self.learnt.lock().expect("learnt").live = live;
    }

    /// Whether `digest`, which the node holds in neither set, may be asked of the store now.
    fn may_ask(&self, digest: &[u8; 32]) -> bool {
        let mut learnt = self.learnt.lock().expect("learnt");
        if learnt.live.contains(digest) || learnt.refused.contains(digest) {
            return false;
        }
        let now = Instant::now();
        if now.duration_since(learnt.window.0) >= Duration::from_secs(1) {
            learnt.window = (now, 0);
        }
        if learnt.window.1 >= LOOKUPS_PER_SECOND {
            return false;
        }
        learnt.window.1 += 1;
        true
    }

    /// Notes that no live key has `digest`.
    fn refuse(&self, digest: [u8; 32]) {
        let mut learnt = self.learnt.lock().expect("learnt");
        if learnt.refused.len() >= REFUSED_KEPT {
            learnt.refused.clear();
        }
        learnt.refused.insert(digest);
    }
}

impl crate::access::KeyLookup for KeyService {
    fn look_up(&self, digest: [u8; 32]) -> Pin<Box<dyn Future<Output = Looked> + Send + '_>> {
        Box::pin(self.look_up_unheld(digest))
    }
}

impl KeyService {
    /// Whether a live key of `digest`, which this node holds in neither set, is kept; when it
    /// is, the stored keys have been read again since, so the key is in force if it may be.
    /// False without asking past the bounds (see the module's notes).
    async fn look_up_unheld(&self, digest: [u8; 32]) -> Looked {
        if !self.lookups.may_ask(&digest) {
            return Looked::Unasked;
        }
        let Ok(_permit) = self.lookups.in_flight.try_acquire() else {
            return Looked::Unasked;
        };
        match tokio::time::timeout(LOOKUP_DEADLINE, self.find(digest)).await {
            Ok(Ok(true)) => Looked::Kept,
            Ok(Ok(false)) => Looked::NotKept,
            Ok(Err(error)) => {
                tracing::debug!(%error, "looking up an API key this node does not hold failed; refused as unknown");
                Looked::Failed
            }
            Err(_) => Looked::Failed,
        }
    }

    /// Asks the store for `digest`; when a live key has it, reads the stored keys again unless
    /// a read that began after the answer put them in force already. The lock is not held
    /// while waiting out the gap, so creates, revocations and the periodic read go first.
    async fn find(&self, digest: [u8; 32]) -> Result<bool, StoreError> {
        if !self.store.api_key_live(digest).await? {
            self.lookups.refuse(digest);
            return Ok(false);
        }
        let kept = Instant::now();
        loop {
            let mut reads = self.syncing.lock().await;
            if reads.succeeded.is_some_and(|began| began >= kept) {
                return Ok(true);
            }
            let due = reads.attempted.map(|began| began + LOOKUP_READ_GAP);
            if let Some(due) = due.filter(|due| *due > Instant::now()) {
                drop(reads);
                tokio::time::sleep_until(due).await;
                continue;
            }
            self.read_noted(&mut reads).await?;
            return Ok(true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn known_answers_are_not_asked_again_and_lookups_keep_to_their_rate() {
        let lookups = Lookups::default();
        let (a, b, c) = ([1u8; 32], [2u8; 32], [3u8; 32]);
        lookups.read([a].into_iter().collect());
        assert!(
            !lookups.may_ask(&a),
            "live at the last read, yet not in force"
        );
        assert!(lookups.may_ask(&b));
        lookups.refuse(b);
        assert!(!lookups.may_ask(&b), "the store said no live key has it");
        // The rest of this second's lookups, then none until the next second.
        for i in 1..LOOKUPS_PER_SECOND {
            assert!(lookups.may_ask(&[i as u8 + 10; 32]), "lookup {i}");
        }
        assert!(!lookups.may_ask(&c), "past the rate");
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(lookups.may_ask(&c), "a new second");
        // A read replaces what the last one found.
        lookups.read(HashSet::new());
        assert!(lookups.may_ask(&a));
        // The refused digests are bounded.
        for i in 0..=REFUSED_KEPT as u64 {
            let mut digest = [7u8; 32];
            digest[..8].copy_from_slice(&i.to_le_bytes());
            lookups.refuse(digest);
        }
        assert!(lookups.learnt.lock().expect("learnt").refused.len() <= REFUSED_KEPT);
    }
}
