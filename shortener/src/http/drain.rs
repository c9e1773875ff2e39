//! A listener's live connections: its drain and its header-timeout sweep.
//!
//! When the listener stops, every live connection is asked to finish the request it is
//! answering and close, and the listener waits (bounded) for the last one to end. Twice per
//! header timeout, one sweep over the connections marks those that waited for a request head
//! through a whole timeout ([`Drain::sweep`]), and wakes them to close.
//!
//! Each connection's task checks a flag or two when it is woken, and lists its waker once, when
//! it first runs, for the drain and the sweep to wake it. A shared shutdown signal polled as a
//! future (a watch channel's `changed`, as hyper-util's `GracefulShutdown` does) would take a
//! lock on every wake of every connection: on a keep-alive connection, once per request; and a
//! timer per connection would be polled on every wake and kept in the runtime's timer wheel,
//! which every park of the runtime walks.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Waker};

/// Sweeps per header timeout: a connection waiting for a head through this many sweeps in a
/// row is expired, between one timeout and one and a half after its wait began.
pub(super) const SWEEPS: u32 = 2;

/// What the sweep reads of a connection, and tells it.
pub(super) trait Watched: Send + Sync + 'static {
    /// Request heads received plus responses written: even while the connection waits for a
    /// request head, odd while it answers one.
    fn progress(&self) -> u64;

    /// Tells the connection that it has waited for a request head since `progress` was read
    /// one sweep ago, and still has that progress.
    fn expire(&self, progress: u64);
}

/// A listed connection: its task's waker, and its progress at the last sweep.
struct Listing {
    waker: Waker,
    watched: Arc<dyn Watched>,
    /// Its progress at the last sweep, and through how many sweeps before that it had not
    /// moved; `None` until the first sweep after the connection was listed.
    seen: Option<(u64, u32)>,
}

/// The drain of one listener's connections.
#[derive(Default)]
pub(super) struct Drain {
    began: AtomicBool,
    /// The task of every live connection that has run, by its number.
    tasks: Mutex<HashMap<u64, Listing>>,
    next: AtomicU64,
    live: AtomicUsize,
    /// Woken when the last live connection ends.
    ended: tokio::sync::Notify,
}

fn lock<T>(tasks: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    tasks.lock().unwrap_or_else(|p| p.into_inner())
}

/// One live connection's place in the [`Drain`]: its task is woken when the drain begins, and
/// it counts as ended when this is dropped.
pub(super) struct Listed {
    drain: Arc<Drain>,
    number: u64,
    watched: Arc<dyn Watched>,
    /// The waker listed for this connection, if any yet.
    waker: Option<Waker>,
}

impl Drain {
    /// Counts a new live connection (from its accept, so that a drain waits for a connection
    /// whose task has yet to run); the sweep watches it through `watched`.
    pub(super) fn enlist(self: &Arc<Self>, watched: Arc<dyn Watched>) -> Listed {
        self.live.fetch_add(1, Ordering::AcqRel);
        Listed {
            drain: Arc::clone(self),
            number: self.next.fetch_add(1, Ordering::Relaxed),
            watched,
            waker: None,
        }
    }

    /// Begins the drain: every listed connection is woken to see it.
    pub(super) fn begin(&self) {
        self.began.store(true, Ordering::SeqCst);
        for listing in lock(&self.tasks).values() {
            listing.waker.wake_by_ref();
        }
    }

    /// One sweep of the header timeout, run [`SWEEPS`] times per timeout: a listed connection
    /// whose progress is even (waiting for a request head) and has not moved through `SWEEPS`
    /// sweeps is told to expire and woken; the others have their progress noted. A connection
    /// that begins to wait is thus expired between one and one and a half timeouts later, never
    /// sooner than one; the count of those expired. The wakes come after the list is unlocked,
    /// so the tasks woken (and the ones listing or leaving) never wait on the sweep.
    pub(super) fn sweep(&self) -> usize {
        let mut woken = Vec::new();
        for listing in lock(&self.tasks).values_mut() {
            let progress = listing.watched.progress();
            let unmoved = match listing.seen {
                Some((seen, sweeps)) if seen == progress => sweeps + 1,
                _ => 0,
            };
            listing.seen = Some((progress, unmoved));
            if unmoved >= SWEEPS && progress.is_multiple_of(2) {
                listing.watched.expire(progress);
                woken.push(listing.waker.clone());
            }
        }
        let expired = woken.len();
        woken.into_iter().for_each(Waker::wake);
        expired
    }

    /// Completes once no connection is live.
    pub(super) async fn ended(&self) {
        loop {
            let ended = self.ended.notified();
            let mut ended = std::pin::pin!(ended);
            ended.as_mut().enable();
            if self.live.load(Ordering::Acquire) == 0 {
                return;
            }
            ended.await;
        }
    }
}

impl Listed {
    /// Whether the drain has begun, as seen by the connection's task polled with `cx`; lists
    /// the task's waker, if it is not listed already, so that the drain and the sweep wake it.
    pub(super) fn began(&mut self, cx: &Context<'_>) -> bool {
        let drain = &self.drain;
        if drain.began.load(Ordering::Acquire) {
            return true;
        }
        if self.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            return false;
        }
        let waker = cx.waker().clone();
        let mut tasks = lock(&drain.tasks);
        match tasks.get_mut(&self.number) {
            Some(listing) => listing.waker = waker.clone(),
            None => {
                let listing = Listing {
                    waker: waker.clone(),
                    watched: Arc::clone(&self.watched),
                    seen: None,
                };
                tasks.insert(self.number, listing);
            }
        }
        drop(tasks);
        self.waker = Some(waker);
        // Checked again after listing: a drain that began meanwhile may have missed the waker.
        drain.began.load(Ordering::SeqCst)
    }
}

impl Drop for Listed {
    fn drop(&mut self) {
        if self.waker.is_some() {
            lock(&self.drain.tasks).remove(&self.number);
        }
        if self.drain.live.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.drain.ended.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::poll_fn;
    use std::task::Poll;
    use std::time::Duration;

    /// A connection whose progress a test sets, and which notes what the sweep told it.
    #[derive(Default)]
    struct Fake {
        progress: AtomicU64,
        expired: Mutex<Vec<u64>>,
    }

    impl Watched for Fake {
        fn progress(&self) -> u64 {
            self.progress.load(Ordering::Relaxed)
        }

        fn expire(&self, progress: u64) {
            lock(&self.expired).push(progress);
        }
    }

    fn fake() -> Arc<Fake> {
        Arc::new(Fake::default())
    }

    #[tokio::test]
    async fn a_drain_wakes_every_listed_connection_and_ends_with_the_last() {
        let drain = Arc::new(Drain::default());
        let mut tasks = Vec::new();
        for _ in 0..3 {
            let mut listed = drain.enlist(fake());
            tasks.push(tokio::spawn(async move {
                poll_fn(|cx| {
                    if listed.began(cx) {
                        Poll::Ready(())
                    } else {
                        Poll::Pending
                    }
                })
                .await;
            }));
        }
        tokio::task::yield_now().await;
        let waiting = tokio::time::timeout(Duration::from_millis(50), drain.ended()).await;
        assert!(waiting.is_err(), "ended while connections were live");
        drain.begin();
        tokio::time::timeout(Duration::from_secs(5), drain.ended())
            .await
            .expect("every connection saw the drain and ended");
        for task in tasks {
            task.await.expect("a connection task");
        }
        assert!(lock(&drain.tasks).is_empty(), "no waker left listed");
        // A connection that arrives after the drain began sees it at once.
        let mut late = drain.enlist(fake());
        let began = poll_fn(|cx| Poll::Ready(late.began(cx))).await;
        assert!(began);
    }

    #[tokio::test]
    async fn with_no_connection_the_drain_ends_at_once() {
        let drain = Arc::new(Drain::default());
        drain.begin();
        tokio::time::timeout(Duration::from_secs(1), drain.ended())
            .await
            .expect("nothing to wait for");
    }

    /// Lists `watched` as a connection whose task was polled once with a waker that counts its
    /// wakes.
    fn listed(drain: &Arc<Drain>, watched: &Arc<Fake>, wakes: &Arc<Wakes>) -> Listed {
        let mut listed = drain.enlist(Arc::clone(watched) as Arc<dyn Watched>);
        let waker = Waker::from(Arc::clone(wakes));
        assert!(!listed.began(&Context::from_waker(&waker)));
        listed
    }

    #[derive(Default)]
    struct Wakes(AtomicUsize);

    impl std::task::Wake for Wakes {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn the_sweep_expires_a_connection_that_waited_for_a_head_through_a_whole_timeout() {
        assert_eq!(SWEEPS, 2, "the test counts two sweeps to a timeout");
        let drain = Arc::new(Drain::default());
        let (waiting, busy, answering) = (fake(), fake(), fake());
        let wakes: [Arc<Wakes>; 3] = Default::default();
        let listed = [
            listed(&drain, &waiting, &wakes[0]),
            listed(&drain, &busy, &wakes[1]),
            listed(&drain, &answering, &wakes[2]),
        ];
        answering.progress.store(3, Ordering::Relaxed);
        // The first sweep after a connection is listed only notes its progress, and the next
        // sees it unmoved for half a timeout: neither closes it.
        assert_eq!(drain.sweep(), 0, "expired at the first sweep");
        assert_eq!(drain.sweep(), 0, "expired after half a timeout");
        busy.progress.store(2, Ordering::Relaxed);
        assert_eq!(drain.sweep(), 1, "a whole timeout unmoved");
        assert_eq!(*lock(&waiting.expired), [0], "the waiting connection");
        assert_eq!(wakes[0].0.load(Ordering::Relaxed), 1, "woken to close");
        // Progress within the timeout, or a request being answered, keeps a connection.
        assert!(lock(&busy.expired).is_empty(), "a connection with progress");
        assert!(
            lock(&answering.expired).is_empty(),
            "a connection answering"
        );
        assert_eq!(wakes[1].0.load(Ordering::Relaxed), 0);
        assert_eq!(wakes[2].0.load(Ordering::Relaxed), 0);
        // Once the busy connection stops moving, it is expired a whole timeout later.
        assert_eq!(drain.sweep(), 1, "the waiting one again");
        assert_eq!(drain.sweep(), 2, "the waiting one, and the busy one");
        assert_eq!(*lock(&busy.expired), [2]);
        // A connection that ended is no longer swept.
        drop(listed);
        assert_eq!(drain.sweep(), 0);
    }
}
