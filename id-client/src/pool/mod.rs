//! The in-memory ID pool: one block being handed out, one spare, refilled in the background.
//!
//! The state's invariants live here with the state: IDs are taken only from a granted block, in
//! order, and a block is accepted only at or above every block seen before
//! ([`State::accept`]). The refill task (`refill`) decides when to lease, how large a block to
//! ask for and how long to wait after a failure; every lease it receives goes through `accept`.

mod refill;

use crate::rate::RateEstimator;
use crate::source::{Lease, LeaseError, LeaseSource};
use refill::refill;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// How a pool sizes and fetches its blocks.
#[derive(Debug, Clone)]
pub struct PoolConfig {
    /// The smallest block to ask for.
    pub min_block: u64,
    /// The largest block to ask for.
    pub max_block: u64,
    /// The block size to ask for before any consumption has been measured.
    pub initial_block: u64,
    /// How long a block should last at the measured consumption rate.
    pub target_block_duration: Duration,
    /// How long one lease call may take before it counts as failed.
    pub lease_timeout: Duration,
    /// The first retry delay after a failed lease; doubles up to `backoff_max`.
    pub backoff_initial: Duration,
    /// The longest retry delay.
    pub backoff_max: Duration,
}

impl Default for PoolConfig {
    fn default() -> Self {
        Self {
            min_block: 100,
            max_block: 1_000_000,
            initial_block: 1_000,
            target_block_duration: Duration::from_secs(300),
            lease_timeout: Duration::from_secs(5),
            backoff_initial: Duration::from_millis(100),
            backoff_max: Duration::from_secs(5),
        }
    }
}

/// Why no ID could be handed out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    /// Both blocks are used up and no new lease has arrived yet (the lease source is slow or
    /// unreachable). Callers should fail fast and suggest retrying after `retry_after`.
    #[error("no IDs in hand; the lease source is unavailable")]
    Exhausted {
        /// A reasonable delay before retrying.
        retry_after: Duration,
    },
}

/// A snapshot of a pool's state, for metrics and readiness.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolStats {
    /// IDs left in the current block and the spare.
    pub ids_in_hand: u64,
    /// Seconds the IDs in hand last at the current consumption rate (infinite while idle): how
    /// long an outage of the lease source the pool can ride out.
    pub runway_seconds: f64,
    /// The measured consumption rate, IDs per second.
    pub rate_per_second: f64,
    /// IDs handed out since the pool started.
    pub issued: u64,
    /// Leases received and accepted.
    pub leases: u64,
    /// Lease attempts that failed (timeouts, unavailable source, refusals).
    pub lease_errors: u64,
    /// Leases refused because they started below a block already seen (alarm: should be 0).
    pub rewinds: u64,
    /// The size of the last block received.
    pub last_block_size: u64,
    /// The last lease error, if the most recent attempt failed.
    pub last_error: Option<String>,
    /// One past the highest ID of any block received (0 before the first lease).
    pub high_water: u64,
}

struct Cursor {
    next: u64,
    end: u64,
}

struct State {
    current: Option<Cursor>,
    spare: Option<Lease>,
    /// One past the highest ID of any block received: a new block must start at or above it.
    high_water: u64,
    issued: u64,
    leases: u64,
    lease_errors: u64,
    rewinds: u64,
    last_block_size: u64,
    last_error: Option<String>,
    /// The error of the most recent lease attempt, if it failed.
    last_lease_error: Option<LeaseError>,
    rate: RateEstimator,
}

impl State {
    fn in_hand(&self) -> u64 {
        self.current.as_ref().map_or(0, |c| c.end - c.next)
            + self.spare.as_ref().map_or(0, |l| l.block.len())
    }

    /// Takes up to `n` IDs from the current block, moving to the spare when it runs out, and
    /// hands each contiguous run to `emit`; returns how many were taken.
    fn take(&mut self, n: u64, mut emit: impl FnMut(std::ops::Range<u64>)) -> u64 {
        let mut taken = 0;
        while taken < n {
            match &mut self.current {
                Some(c) if c.next < c.end => {
                    let k = (n - taken).min(c.end - c.next);
                    emit(c.next..c.next + k);
                    c.next += k;
                    self.issued += k;
                    taken += k;
                }
                _ => match self.spare.take() {
                    Some(lease) => {
                        self.current = Some(Cursor {
                            next: lease.block.start,
                            end: lease.block.end,
                        })
                    }
                    None => {
                        self.current = None;
                        break;
                    }
                },
            }
        }
        taken
    }

    /// Takes `lease` as the next block if it starts at or above every block received before
    /// (a block below would repeat IDs: the ledger went back, say by a restore), else refuses
    /// and counts it, handing it back so that the caller logs it once the lock is released.
    fn accept(&mut self, lease: Lease) -> Result<(), Lease> {
        if lease.block.start < self.high_water {
            self.rewinds += 1;
            let message = format!(
                "lease {} starts at {}, below IDs already received (up to {})",
                lease.lease_id, lease.block.start, self.high_water
            );
            self.last_lease_error = Some(LeaseError::Unavailable(message.clone()));
            self.last_error = Some(message);
            return Err(lease);
        }
        self.high_water = lease.block.end;
        self.leases += 1;
        self.last_block_size = lease.block.len();
        self.last_error = None;
        self.last_lease_error = None;
        tracing::debug!(
            lease_id = lease.lease_id,
            start = lease.block.start,
            end = lease.block.end,
            "lease received"
        );
        if self.current.as_ref().is_none_or(|c| c.next >= c.end) {
            self.current = Some(Cursor {
                next: lease.block.start,
                end: lease.block.end,
            });
        } else {
            self.spare = Some(lease);
        }
        Ok(())
    }

    /// Records a failed lease attempt.
    fn failed(&mut self, error: &LeaseError) {
        self.lease_errors += 1;
        self.last_error = Some(error.to_string());
        self.last_lease_error = Some(error.clone());
    }
}

struct Inner {
    state: Mutex<State>,
    /// Wakes the refill task when the spare slot is empty.
    wake: Notify,
    /// Wakes waiters of [`IdPool::wait_ready`] after each lease, accepted or failed.
    filled: Notify,
    /// The trace of the request that emptied the spare slot, when tracing is on: the lease it
    /// triggers is traced as its follow-up, so that one trace spans the node and the id-service.
    trigger: Mutex<Option<otel::Parent>>,
    config: PoolConfig,
    source: Arc<dyn LeaseSource>,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding this lock cannot leave the counters half-updated in a way that
        // could repeat an ID (each update is a single assignment), so a poisoned lock is usable.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Hands out unique IDs from leased blocks; see the crate documentation for its guarantees.
///
/// Dropping the pool stops its refill task; IDs it still held are abandoned (a gap).
pub struct IdPool {
    inner: Arc<Inner>,
    task: JoinHandle<()>,
}

impl IdPool {
    /// Starts a pool over `source` and begins leasing its first block at once.
    /// Must be called within a tokio runtime.
    pub fn start(source: Arc<dyn LeaseSource>, config: PoolConfig) -> Self {
        let inner = Arc::new(Inner {
            state: Mutex::new(State {
                current: None,
                spare: None,
                high_water: 0,
                issued: 0,
                leases: 0,
                lease_errors: 0,
                rewinds: 0,
                last_block_size: 0,
                last_error: None,
                last_lease_error: None,
                rate: RateEstimator::new(config.target_block_duration / 20, Instant::now()),
            }),
            wake: Notify::new(),
            filled: Notify::new(),
            trigger: Mutex::new(None),
            config,
            source,
        });
        let task = tokio::spawn(refill(Arc::clone(&inner)));
        Self { inner, task }
    }

    /// The next unique ID. Never waits on the network (fails fast when nothing is in hand) and
    /// never allocates.
    pub fn next_id(&self) -> Result<u64, IdError> {
        let mut id = 0;
        self.take(1, |run| id = run.start)?;
        Ok(id)
    }

    /// Up to `n` unique IDs (at least one), in ascending order within each block. Fewer than
    /// `n` come back only when the pool runs dry part-way.
    pub fn next_ids(&self, n: usize) -> Result<Vec<u64>, IdError> {
        let mut out = Vec::with_capacity(n);
        self.take(n as u64, |run| out.extend(run))?;
        Ok(out)
    }

    /// Up to `n` unique IDs (at least one) as ascending half-open ranges, adjacent runs merged:
    /// one range unless the IDs span two blocks. Fewer than `n` come back only when the pool
    /// runs dry part-way. Like [`IdPool::next_id`], never waits and allocates only the result.
    pub fn next_ranges(&self, n: u64) -> Result<Vec<std::ops::Range<u64>>, IdError> {
        let mut out: Vec<std::ops::Range<u64>> = Vec::with_capacity(2);
        self.take(n, |run| match out.last_mut() {
            Some(last) if last.end == run.start => last.end = run.end,
            _ => out.push(run),
        })?;
        Ok(out)
    }

    /// Why the most recent lease attempt failed, if it did (`None` once a lease succeeds).
    pub fn last_lease_error(&self) -> Option<LeaseError> {
        self.inner.lock().last_lease_error.clone()
    }

    /// Why nothing is in hand, for a client, a readiness probe or a log line: the last lease
    /// error in the source's own words, or that a lease is awaited.
    pub fn shortage(&self) -> String {
        match self.last_lease_error() {
            Some(error) => format!("no IDs in hand: {}", error.detail()),
            None => "no IDs in hand: waiting for a lease; retry shortly".to_string(),
        }
    }

    /// Takes up to `n` IDs under the lock and wakes the refill task if the spare slot is empty;
    /// fails when not even one ID is in hand.
    fn take(&self, n: u64, emit: impl FnMut(std::ops::Range<u64>)) -> Result<(), IdError> {
        let (taken, spare_missing) = {
            let mut state = self.inner.lock();
            let taken = state.take(n, emit);
            (taken, state.spare.is_none())
        };
        if spare_missing {
            // One flag read while tracing is off.
            if let Some(parent) = otel::current_parent() {
                *self
                    .inner
                    .trigger
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(parent);
            }
            self.inner.wake.notify_one();
        }
        if taken == 0 {
            return Err(IdError::Exhausted {
                retry_after: Duration::from_secs(1),
            });
        }
        Ok(())
    }

    /// Whether at least one ID is in hand.
    pub fn is_ready(&self) -> bool {
        self.inner.lock().in_hand() > 0
    }

    /// Waits until at least one ID is in hand, or `timeout` passes; returns whether it is ready.
    pub async fn wait_ready(&self, timeout: Duration) -> bool {
        self.wait(timeout, false).await
    }

    /// Waits until at least one ID is in hand (`true`), or a lease attempt fails, or `timeout`
    /// passes (`false`): for a caller that answers a failure at once, with
    /// [`IdPool::last_lease_error`], rather than after its whole wait.
    pub async fn wait_ready_or_failure(&self, timeout: Duration) -> bool {
        self.wait(timeout, true).await
    }

    /// Waits for IDs in hand, within `timeout`; with `until_failure`, only until a lease fails.
    async fn wait(&self, timeout: Duration, until_failure: bool) -> bool {
        let deadline = Instant::now() + timeout;
        let failures = |pool: &Self| {
            let state = pool.inner.lock();
            state.lease_errors + state.rewinds
        };
        let before = failures(self);
        loop {
            let notified = self.inner.filled.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.is_ready() {
                return true;
            }
            if until_failure && failures(self) != before {
                return false;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.is_ready();
            }
        }
    }

    /// A snapshot of the pool's counters.
    pub fn stats(&self) -> PoolStats {
        let mut state = self.inner.lock();
        let issued = state.issued;
        state.rate.observe(issued, Instant::now());
        let rate = state.rate.rate();
        let in_hand = state.in_hand();
        PoolStats {
            ids_in_hand: in_hand,
            runway_seconds: if rate > 1e-9 {
                in_hand as f64 / rate
            } else {
                f64::INFINITY
            },
            rate_per_second: rate,
            issued,
            leases: state.leases,
            lease_errors: state.lease_errors,
            rewinds: state.rewinds,
            last_block_size: state.last_block_size,
            last_error: state.last_error.clone(),
            high_water: state.high_water,
        }
    }
}

impl Drop for IdPool {
    fn drop(&mut self) {
        self.task.abort();
    }
}
