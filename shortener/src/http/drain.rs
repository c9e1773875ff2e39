//! A listener's drain: when it stops, every live connection is asked to finish the request it
//! is answering and close, and the listener waits (bounded) for the last one to end.
//!
//! Each connection's task checks one flag when it is woken, and lists its waker once, when it
//! first runs, for the drain to wake it. A shared shutdown signal polled as a future (a watch
//! channel's `changed`, as hyper-util's `GracefulShutdown` does) would take a lock on every
//! wake of every connection: on a keep-alive connection, once per request.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Waker};

/// The drain of one listener's connections.
#[derive(Default)]
pub(super) struct Drain {
    began: AtomicBool,
    /// The task of every live connection that has run, by its number.
    tasks: Mutex<HashMap<u64, Waker>>,
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
    /// The waker listed for this connection, if any yet.
    waker: Option<Waker>,
}

impl Drain {
    /// Counts a new live connection (from its accept, so that a drain waits for a connection
    /// whose task has yet to run).
    pub(super) fn enlist(self: &Arc<Self>) -> Listed {
        self.live.fetch_add(1, Ordering::AcqRel);
        Listed {
            drain: Arc::clone(self),
            number: self.next.fetch_add(1, Ordering::Relaxed),
            waker: None,
        }
    }

    /// Begins the drain: every listed connection is woken to see it.
    pub(super) fn begin(&self) {
        self.began.store(true, Ordering::SeqCst);
        for waker in lock(&self.tasks).values() {
            waker.wake_by_ref();
        }
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
    /// the task's waker, if it is not listed already, so that the drain wakes it.
    pub(super) fn began(&mut self, cx: &Context<'_>) -> bool {
        let drain = &self.drain;
        if drain.began.load(Ordering::Acquire) {
            return true;
        }
        if self.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            return false;
        }
        let waker = cx.waker().clone();
        lock(&drain.tasks).insert(self.number, waker.clone());
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

    #[tokio::test]
    async fn a_drain_wakes_every_listed_connection_and_ends_with_the_last() {
        let drain = Arc::new(Drain::default());
        let mut tasks = Vec::new();
        for _ in 0..3 {
            let mut listed = drain.enlist();
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
        let mut late = drain.enlist();
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
}
