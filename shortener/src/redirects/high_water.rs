//! What the store's slot high-water mark says of a code ([`bound`]), and fresh reads of the
//! mark for redirects, coalesced and rate-bounded (docs/design.md, I9).
//!
//! A node that shares its store with others may refuse a code above the mark only after a read
//! of the mark that started after the request arrived (a link another node created a moment
//! ago is then counted). Such reads are one at a time: a request joins the next read that has
//! not started yet (or one that started after it arrived), and a read starts at most once per
//! `1 / rate` seconds. However many codes are asked for, the store sees at most `rate` of these
//! one-row reads a second, and a request waits at most for the one in flight, the interval and
//! its own.

use crate::store::SlotBound;
use codespace::CodeSpace;
use codespace::shape::CodeKind;
use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::time::Instant;

/// One read: the mark (`T`: the store's [`crate::store::Mark`]), or `None` when it bounds
/// nothing (a failed read included).
pub type Read<T> = BoxFuture<'static, Option<T>>;

/// A read of the mark, shared by the requests that joined it.
type Round<T> = Shared<BoxFuture<'static, Option<T>>>;

/// Coalesced, rate-bounded reads of the mark.
pub struct HighWaterReads<T: Clone> {
    read: Arc<dyn Fn() -> Read<T> + Send + Sync>,
    interval: Duration,
    state: Arc<Mutex<State<T>>>,
    reads: Arc<AtomicU64>,
}

struct State<T: Clone> {
    /// The read that has not started yet: every request that comes joins it.
    pending: Option<Round<T>>,
    /// The read under way, and when it started.
    running: Option<(Instant, Round<T>)>,
    /// The last read that finished: when it started, and what it said.
    last: Option<(Instant, Option<T>)>,
    /// When the last read started (the next one starts an interval later at the earliest).
    last_start: Option<Instant>,
}

impl<T: Clone> Default for State<T> {
    fn default() -> Self {
        Self {
            pending: None,
            running: None,
            last: None,
            last_start: None,
        }
    }
}

fn lock<T: Clone>(state: &Mutex<State<T>>) -> MutexGuard<'_, State<T>> {
    // Every critical section leaves the state whole, so a poisoned lock is still consistent.
    state.lock().unwrap_or_else(|p| p.into_inner())
}

impl<T: Clone + Send + Sync + 'static> HighWaterReads<T> {
    /// Reads through `read`, at most `per_second` starts a second.
    pub fn new(read: impl Fn() -> Read<T> + Send + Sync + 'static, per_second: u32) -> Self {
        Self {
            read: Arc::new(read),
            interval: Duration::from_secs(1) / per_second.max(1),
            state: Arc::default(),
            reads: Arc::default(),
        }
    }

    /// How many reads have started.
    pub fn reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }

    /// The mark as read by a read that started at or after `arrived`.
    pub async fn after(&self, arrived: Instant) -> Option<T> {
        let round = {
            let mut state = lock(&self.state);
            match &*state {
                State {
                    last: Some((started, value)),
                    ..
                } if *started >= arrived => return value.clone(),
                State {
                    running: Some((started, round)),
                    ..
                } if *started >= arrived => round.clone(),
                State {
                    pending: Some(round),
                    ..
                } => round.clone(),
                _ => self.next_round(&mut state),
            }
        };
        round.await
    }

    /// Schedules the next read: after the one under way, and an interval after it started.
    fn next_round(&self, state: &mut State<T>) -> Round<T> {
        let previous = state.running.as_ref().map(|(_, round)| round.clone());
        let shared = Arc::clone(&self.state);
        let (read, interval, reads) = (
            Arc::clone(&self.read),
            self.interval,
            Arc::clone(&self.reads),
        );
        let task = tokio::spawn(async move {
            if let Some(previous) = previous {
                previous.await;
            }
            let due = lock(&shared).last_start.map(|at| at + interval);
            if let Some(due) = due {
                tokio::time::sleep_until(due).await;
            }
            let started = {
                let mut state = lock(&shared);
                let now = Instant::now();
                state.last_start = Some(now);
                // From here on a request that arrives needs the next read.
                state.running = state.pending.take().map(|round| (now, round));
                now
            };
            reads.fetch_add(1, Ordering::Relaxed);
            let value = read().await;
            let mut state = lock(&shared);
            state.running = None;
            if state.last.as_ref().is_none_or(|(at, _)| *at <= started) {
                state.last = Some((started, value.clone()));
            }
            value
        });
        let round = async move { task.await.ok().flatten() }.boxed().shared();
        state.pending = Some(round.clone());
        round
    }
}

/// What the slot high-water mark says of a code the cache does not hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Bound {
    /// The store must be asked.
    Ask,
    /// No row can hold it.
    Impossible,
    /// It decodes to this ID, above the mark as last read: a fresh read of the mark decides.
    Above(i64),
    /// It has the shape of a generated code but decodes to no ID, and no named row held such a
    /// code as last read: a fresh read decides.
    Undecodable,
}

/// What the store's mark (`store`, as known without a read) says of `segment`, of shape
/// `kind`, in `space`.
///
/// Only a code of generated shape is bounded: one that decodes to an ID (as a slot, `i64`)
/// by the mark, one that decodes to none by whether a named row holds such a code (only an
/// imported legacy code can). Every other code (an alias, a private code) is found by its
/// text, so the store is asked.
pub(super) fn bound(store: SlotBound, space: &CodeSpace, segment: &str, kind: CodeKind) -> Bound {
    let (mark, exact) = match store {
        _ if kind != CodeKind::Generated => return Bound::Ask,
        SlotBound::None => return Bound::Ask,
        SlotBound::Exact(mark) => (mark, true),
        SlotBound::Stale(mark) => (mark, false),
    };
    let id = space
        .decode(segment)
        .ok()
        .and_then(|id| i64::try_from(id).ok());
    match id {
        Some(id) if id <= mark.slot => Bound::Ask,
        Some(_) if exact => Bound::Impossible,
        Some(id) => Bound::Above(id),
        None if mark.undecodable => Bound::Ask,
        None if exact => Bound::Impossible,
        None => Bound::Undecodable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicI64;

    /// A fake store: each read takes `took`, returns how many reads started before it, and
    /// records when it started.
    struct Fake {
        started: Mutex<Vec<Instant>>,
        took: Duration,
    }

    fn reads(fake: &Arc<Fake>, per_second: u32) -> HighWaterReads<i64> {
        let fake = Arc::clone(fake);
        HighWaterReads::new(
            move || {
                let fake = Arc::clone(&fake);
                async move {
                    let n = {
                        let mut started = fake.started.lock().expect("lock");
                        started.push(Instant::now());
                        started.len() as i64 - 1
                    };
                    tokio::time::sleep(fake.took).await;
                    Some(n)
                }
                .boxed()
            },
            per_second,
        )
    }

    fn fake(took: Duration) -> Arc<Fake> {
        Arc::new(Fake {
            started: Mutex::default(),
            took,
        })
    }

    /// Requests that arrive while a read is under way all share the one read after it, which
    /// starts after every one of them arrived.
    #[tokio::test(start_paused = true)]
    async fn requests_during_a_read_share_the_next_one() {
        let fake = fake(Duration::from_millis(30));
        let reads = Arc::new(reads(&fake, 1000));
        let first = tokio::spawn({
            let reads = Arc::clone(&reads);
            async move { reads.after(Instant::now()).await }
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        let mut later = Vec::new();
        // Ten each millisecond (the timer's step), from 10 to 19 ms.
        for _ in 0..10 {
            for _ in 0..10 {
                let arrived = Instant::now();
                let reads = Arc::clone(&reads);
                later.push(tokio::spawn(async move {
                    (arrived, reads.after(arrived).await)
                }));
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert_eq!(first.await.expect("first"), Some(0));
        let started = |n: i64| fake.started.lock().expect("lock")[n as usize];
        for request in later {
            let (arrived, value) = request.await.expect("request");
            assert_eq!(value, Some(1), "every later request shares the second read");
            assert!(
                started(1) >= arrived,
                "a read that started before it arrived"
            );
        }
        assert_eq!(reads.reads(), 2);
    }

    /// Requests arriving without pause for two seconds start at most `rate` reads a second,
    /// one at a time, and each gets a read that started after it arrived.
    #[tokio::test(start_paused = true)]
    async fn reads_are_bounded_by_the_rate_whatever_the_request_rate() {
        let fake = fake(Duration::from_millis(2));
        let reads = Arc::new(reads(&fake, 20));
        let begun = Instant::now();
        let mut requests = Vec::new();
        while begun.elapsed() < Duration::from_secs(2) {
            let arrived = Instant::now();
            let reads = Arc::clone(&reads);
            requests.push(tokio::spawn(async move {
                (arrived, reads.after(arrived).await)
            }));
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        for request in requests {
            let (arrived, value) = request.await.expect("request");
            let n = value.expect("a value");
            let started = fake.started.lock().expect("lock")[n as usize];
            assert!(
                started >= arrived,
                "read {n} started before its request arrived"
            );
            assert!(
                started - arrived <= Duration::from_millis(60),
                "waited too long"
            );
        }
        let started = fake.started.lock().expect("lock").clone();
        assert!(
            (39..=42).contains(&started.len()),
            "{} reads in 2 s at 20 a second",
            started.len()
        );
        for pair in started.windows(2) {
            assert!(pair[1] - pair[0] >= Duration::from_millis(50), "{pair:?}");
        }
    }

    /// A request that arrives after a read started and finished gets that read's answer only
    /// if the read started after it arrived; otherwise it waits for a new one.
    #[tokio::test(start_paused = true)]
    async fn a_finished_read_answers_only_requests_that_arrived_before_it_started() {
        let fake = fake(Duration::from_millis(1));
        let reads = reads(&fake, 1000);
        let arrived = Instant::now();
        assert_eq!(reads.after(arrived).await, Some(0));
        assert_eq!(reads.after(arrived).await, Some(0), "the same arrival");
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert_eq!(reads.after(Instant::now()).await, Some(1), "a later one");
        assert_eq!(reads.reads(), 2);
    }

    /// A failed read bounds nothing, and the next request reads again.
    #[tokio::test(start_paused = true)]
    async fn a_failed_read_bounds_nothing() {
        let calls = Arc::new(AtomicI64::new(0));
        let reads = HighWaterReads::new(
            {
                let calls = Arc::clone(&calls);
                move || {
                    let n = calls.fetch_add(1, Ordering::SeqCst);
                    async move { (n > 0).then_some(7) }.boxed()
                }
            },
            1000,
        );
        assert_eq!(reads.after(Instant::now()).await, None);
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert_eq!(reads.after(Instant::now()).await, Some(7));
    }
}
