//! The node's password checks: a few run at once, a bounded few wait, and the rest are refused
//! at once rather than queued behind a flood.
//!
//! An Argon2 verification is the one thing a stranger can make the node spend real CPU and
//! memory on (tens of milliseconds and 19 MiB each). The limits per client and code do not bound
//! them node-wide: guesses spread over many addresses and many self-made protected links add up.
//! So, per node:
//!
//! - at most `workers` checks run at once, on the blocking pool;
//! - at most `queue` wait, sized so that a waiting check starts within a few checks' time;
//!   past that a check is refused at once (`Busy`);
//! - a check waits `max_wait` at most, unless it is next in line when that time is up: then it
//!   keeps its place, nobody may overtake it, and it takes the next worker that frees, which is
//!   at most one running check's time away. So a machine short of CPU makes the checks slower,
//!   not the ordinary user's right password refused while it stands first in line;
//! - one client (an address, or an IPv6 prefix, as the client policy keys it) holds at most
//!   `share` places, running or waiting;
//! - the waiting are served lightest first: the client that ran the fewest checks in the last
//!   minute and holds the fewest places, weighed at each decision, goes ahead; when the queue
//!   is full a newcomer lighter than the heaviest waiter takes its place (that one is refused). A flood from busy addresses thus never keeps an
//!   ordinary user, who checks once or twice, waiting behind it. Many addresses that each check
//!   as rarely as a user cannot be told from users; they share the bounded pool with them, and
//!   the node's CPU stays bounded either way.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// How long a client's checks count towards its weight: a fixed window.
const WINDOW: Duration = Duration::from_secs(60);

/// Clients whose checks in the window are remembered at most (a check takes tens of
/// milliseconds, so a node runs far fewer in a window than this on any machine it runs on).
const MAX_RECENT: usize = 16_384;

/// The memory one running check takes: Argon2id's default cost (19 MiB).
pub const CHECK_BYTES: u64 = 19 << 20;

/// What one remembered client costs in the pool's maps, estimated: its slot (address and
/// window, one control byte), doubled for the free slots a hash table keeps.
const CLIENT_BYTES: u64 = 2 * (std::mem::size_of::<(IpAddr, Recent)>() as u64 + 1);

/// How the password checks of a node are bounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckBounds {
    /// Checks running at once.
    pub workers: usize,
    /// Checks waiting at most.
    pub queue: usize,
    /// Places, running or waiting, one client may hold.
    pub share: usize,
    /// The longest a check waits for a worker before it is refused.
    pub max_wait: Duration,
}

impl CheckBounds {
    /// One running check per core (at least two), four waiting per worker (a check takes tens
    /// of milliseconds, so a waiting one starts within a few hundred), two places per client,
    /// and a second's wait at most.
    pub fn for_this_machine() -> Self {
        let workers = std::thread::available_parallelism()
            .map_or(2, usize::from)
            .max(2);
        Self {
            workers,
            queue: workers * 4,
            share: 2,
            max_wait: Duration::from_secs(1),
        }
    }
}

/// Why a check did not run to its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CheckRefused {
    /// The pool is full, the client holds its share, or the wait ran out: try again shortly.
    #[error("too many password checks are running or waiting")]
    Busy,
    /// The check itself failed (it panicked).
    #[error("the password check failed")]
    Failed,
}

/// The bounded, fair pool of a node's password checks.
pub struct PasswordChecks {
    inner: Arc<Inner>,
}

struct Inner {
    bounds: CheckBounds,
    state: Mutex<State>,
}

/// Checks a client ran in the current window.
struct Recent {
    since: Instant,
    count: u32,
}

struct Waiter {
    id: u64,
    client: IpAddr,
    /// Its `max_wait` ran out while it was next in line: it goes before every other waiter and
    /// is never pushed out.
    due: bool,
    wake: oneshot::Sender<()>,
}

#[derive(Default)]
struct State {
    running: usize,
    next_id: u64,
    waiting: Vec<Waiter>,
    /// Places held per client, running or waiting.
    held: HashMap<IpAddr, usize>,
    /// Checks run per client in its current window (pruned by `housekeeping`).
    recent: HashMap<IpAddr, Recent>,
}

impl State {
    /// How heavy `client` is now: the checks it ran in its window and the places it holds,
    /// running or waiting. Read at each decision, not when a check joined the queue: a flood's
    /// first waiters, queued before any of its checks ran, weigh by the places they hold, so a
    /// newcomer holding none is lighter than every one of them.
    fn weight(&self, client: IpAddr, now: Instant) -> u32 {
        let ran = self
            .recent
            .get(&client)
            .filter(|r| now.duration_since(r.since) < WINDOW)
            .map_or(0, |r| r.count);
        let held = self.held.get(&client).copied().unwrap_or(0);
        ran.saturating_add(u32::try_from(held).unwrap_or(u32::MAX))
    }

    /// The order of the waiting: those due first (earliest first), then the lightest client
    /// now, the earliest among equals.
    fn order(&self, waiter: &Waiter, now: Instant) -> (bool, u32, u64) {
        let weight = if waiter.due {
            0
        } else {
            self.weight(waiter.client, now)
        };
        (!waiter.due, weight, waiter.id)
    }

    fn charge(&mut self, client: IpAddr, now: Instant) {
        if self.recent.len() >= MAX_RECENT && !self.recent.contains_key(&client) {
            self.recent
                .retain(|_, r| now.duration_since(r.since) < WINDOW);
            if self.recent.len() >= MAX_RECENT {
                // Past the bound a newcomer's checks are not weighed (it counts as light).
                return;
            }
        }
        let recent = self.recent.entry(client).or_insert(Recent {
            since: now,
            count: 0,
        });
        if now.duration_since(recent.since) >= WINDOW {
            *recent = Recent {
                since: now,
                count: 0,
            };
        }
        recent.count = recent.count.saturating_add(1);
    }

    fn hold(&mut self, client: IpAddr) {
        *self.held.entry(client).or_default() += 1;
    }

    fn unhold(&mut self, client: IpAddr) {
        if let Some(held) = self.held.get_mut(&client) {
            *held -= 1;
            if *held == 0 {
                self.held.remove(&client);
            }
        }
    }

    /// The waiter that takes the next free worker.
    fn next(&self) -> Option<usize> {
        let now = Instant::now();
        (0..self.waiting.len()).min_by_key(|&i| self.order(&self.waiting[i], now))
    }

    /// Starts waiting checks while workers are free, in [`Waiter::order`].
    fn dispatch(&mut self, workers: usize) {
        let now = Instant::now();
        while self.running < workers {
            let Some(index) = self.next() else {
                break;
            };
            let waiter = self.waiting.swap_remove(index);
            self.running += 1;
            self.charge(waiter.client, now);
            if waiter.wake.send(()).is_err() {
                // Its request went away meanwhile: the place is free again.
                self.running -= 1;
                self.unhold(waiter.client);
            }
        }
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A running check's place; frees it, and starts the next waiting check, when dropped.
struct Permit {
    inner: Arc<Inner>,
    client: IpAddr,
}

impl Drop for Permit {
    fn drop(&mut self) {
        let mut state = self.inner.lock();
        state.running -= 1;
        state.unhold(self.client);
        state.dispatch(self.inner.bounds.workers);
    }
}

/// A waiting check; if its request goes away before it starts, its place is given back.
struct Waiting {
    inner: Arc<Inner>,
    id: u64,
    client: IpAddr,
    wake: oneshot::Receiver<()>,
    settled: bool,
}

impl Waiting {
    /// At the end of its `max_wait`: if this check is next in line, it becomes due (keeps its
    /// place before every other waiter) and `true` is returned; otherwise `false`.
    fn keep_if_next(&self) -> bool {
        let mut state = self.inner.lock();
        let Some(next) = state.next() else {
            return false;
        };
        if state.waiting[next].id != self.id {
            return false;
        }
        state.waiting[next].due = true;
        true
    }

    /// Leaves the queue: `true` if a worker was handed over meanwhile (now held by the caller).
    fn leave(&mut self) -> bool {
        self.settled = true;
        let mut state = self.inner.lock();
        if let Some(index) = state.waiting.iter().position(|w| w.id == self.id) {
            state.waiting.swap_remove(index);
            state.unhold(self.client);
            return false;
        }
        // Not waiting any more: either started (a worker is ours) or pushed out (nothing held).
        self.wake.try_recv().is_ok()
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if !self.settled && self.leave() {
            let mut state = self.inner.lock();
            state.running -= 1;
            state.unhold(self.client);
            state.dispatch(self.inner.bounds.workers);
        }
    }
}

impl PasswordChecks {
    /// An empty pool with `bounds`.
    pub fn new(bounds: CheckBounds) -> Self {
        Self {
            inner: Arc::new(Inner {
                bounds,
                state: Mutex::new(State::default()),
            }),
        }
    }

    /// Bytes the pool holds now, estimated: [`CHECK_BYTES`] per running check, and the
    /// clients it remembers.
    pub fn bytes(&self) -> u64 {
        let state = self.inner.lock();
        let clients = (state.recent.len() + state.held.len()) as u64;
        state.running as u64 * CHECK_BYTES + clients * CLIENT_BYTES
    }

    /// [`PasswordChecks::bytes`] at its bounds: every worker running, every client remembered.
    pub fn budget(&self) -> u64 {
        let bounds = self.inner.bounds;
        bounds.workers as u64 * CHECK_BYTES
            + (MAX_RECENT + bounds.workers + bounds.queue) as u64 * CLIENT_BYTES
    }

    /// The pool's bounds.
    pub fn bounds(&self) -> CheckBounds {
        self.inner.bounds
    }

    /// Runs `check` for `client` on the blocking pool once a worker is free, or refuses at
    /// once (or after `max_wait`, unless it is next in line by then) with
    /// [`CheckRefused::Busy`]. The place is held until
    /// `check` returns, even if the caller stops waiting for it.
    pub async fn run<T: Send + 'static>(
        &self,
        client: IpAddr,
        check: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, CheckRefused> {
        let permit = self.acquire(client).await?;
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            check()
        })
        .await
        .map_err(|_| CheckRefused::Failed)
    }

    async fn acquire(&self, client: IpAddr) -> Result<Permit, CheckRefused> {
        let bounds = self.inner.bounds;
        let now = Instant::now();
        let (id, wake) = {
            let mut state = self.inner.lock();
            if state.held.get(&client).copied().unwrap_or(0) >= bounds.share {
                return Err(CheckRefused::Busy);
            }
            if state.running < bounds.workers && state.waiting.is_empty() {
                state.running += 1;
                state.hold(client);
                state.charge(client, now);
                return Ok(Permit {
                    inner: Arc::clone(&self.inner),
                    client,
                });
            }
            let weight = state.weight(client, now);
            if state.waiting.len() >= bounds.queue {
                // The heaviest waiter, the latest among equals, gives way to a lighter newcomer;
                // one that is due keeps its place.
                let heaviest = (0..state.waiting.len())
                    .filter(|&i| !state.waiting[i].due)
                    .map(|i| {
                        (
                            state.weight(state.waiting[i].client, now),
                            state.waiting[i].id,
                            i,
                        )
                    })
                    .max();
                match heaviest {
                    Some((heavier, _, index)) if heavier > weight => {
                        // Dropping its sender tells it so.
                        let pushed_out = state.waiting.swap_remove(index);
                        state.unhold(pushed_out.client);
                    }
                    _ => return Err(CheckRefused::Busy),
                }
            }
            let id = state.next_id;
            state.next_id += 1;
            let (sender, wake) = oneshot::channel();
            state.waiting.push(Waiter {
                id,
                client,
                due: false,
                wake: sender,
            });
            state.hold(client);
            (id, wake)
        };
        let mut waiting = Waiting {
            inner: Arc::clone(&self.inner),
            id,
            client,
            wake,
            settled: false,
        };
        let started = match tokio::time::timeout(bounds.max_wait, &mut waiting.wake).await {
            Ok(woken) => {
                waiting.settled = true;
                woken.is_ok()
            }
            // Next in line: the next free worker is its own, one running check away at most.
            Err(_) if waiting.keep_if_next() => {
                let woken = (&mut waiting.wake).await;
                waiting.settled = true;
                woken.is_ok()
            }
            Err(_) => waiting.leave(),
        };
        if started {
            Ok(Permit {
                inner: Arc::clone(&self.inner),
                client,
            })
        } else {
            Err(CheckRefused::Busy)
        }
    }

    /// Forgets clients whose window has passed, so memory stays bounded (call periodically).
    pub fn housekeeping(&self) {
        let now = Instant::now();
        let mut state = self.inner.lock();
        state
            .recent
            .retain(|_, r| now.duration_since(r.since) < WINDOW);
        state.recent.shrink_to_fit();
    }
}

#[cfg(test)]
mod tests;
