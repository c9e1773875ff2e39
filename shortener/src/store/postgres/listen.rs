//! The change feed: every node learns of link and domain changes made by any node
//! (`LISTEN`/`NOTIFY`), so its redirect and domain caches drop them at once instead of at the end
//! of their lifetime.

use super::domains::DOMAIN_NOTIFY_CHANNEL;
use super::replica::Replica;
use crate::store::ChangeEvent;
use pgtls::MakeRustlsConnect;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The channel changes are announced on, in the transaction that makes them.
pub const NOTIFY_CHANNEL: &str = "shortener_link_changes";

/// The listening session's `application_name`, which tells it apart in `pg_stat_activity`.
pub const APPLICATION_NAME: &str = "shortener-change-feed";

/// The start of the channel each listening session sends its probes on (see [`Probes`]); its
/// backend process ID follows, so that each session hears its own probes and no other's.
pub const PROBE_CHANNEL_PREFIX: &str = "shortener_feed_probe_";

/// How often a listening connection sends a probe: how far behind the present the cache's
/// confirmation of changes runs while the feed is healthy.
const PROBE_EVERY: Duration = Duration::from_secs(1);

/// Probes a connection leaves unanswered before it stops sending more.
const MAX_PROBES_OUT: usize = 8;

/// Notifications heard and not yet acted on, at most (a burst of changes elsewhere while the
/// listening task waits on its probe): past it they are dropped and the caches told to forget
/// everything ([`ChangeEvent::Reset`]), rather than queued without a bound.
const MAX_HEARD: usize = 16_384;

/// How to listen for changes: the pool's connection settings and TLS. Cheap to clone.
#[derive(Clone)]
pub struct ChangeFeed {
    pub(super) config: Arc<tokio_postgres::Config>,
    pub(super) tls: MakeRustlsConnect,
    /// The read replica, told of every change so that it is not read for the changed code
    /// until it has replayed the change.
    pub(super) replica: Option<Arc<Replica>>,
}

impl ChangeFeed {
    /// Reports changes made by any node to `on_event` until `stop`: [`ChangeEvent::Changed`]
    /// per changed code, [`ChangeEvent::DomainChanged`] per claimed, changed or removed host,
    /// and [`ChangeEvent::Reset`] whenever the listening connection is (re)established, since
    /// changes may have been missed meanwhile. Reconnects with backoff.
    ///
    /// Losing the connection resets nothing: what the caches hold stays as fresh as the last
    /// [`ChangeEvent::CaughtUp`] made it and ages out from there, so a database that is away
    /// leaves cached links answering for their lifetime rather than every redirect failing
    /// at once. The read replica is told at once, as it is on the reset.
    pub async fn run(
        self,
        on_event: impl Fn(ChangeEvent) + Send + 'static,
        stop: CancellationToken,
    ) {
        let replica = self.replica.clone();
        let lost = self.replica.clone();
        let on_event = move |event: ChangeEvent| {
            if let Some(replica) = &replica {
                match &event {
                    ChangeEvent::Changed(code) => replica.changed_elsewhere(code),
                    ChangeEvent::Reset => replica.missed_changes(),
                    // Domains are read on the primary.
                    ChangeEvent::DomainChanged(_) | ChangeEvent::CaughtUp(_) => {}
                }
            }
            on_event(event)
        };
        let mut backoff = Duration::from_millis(100);
        while !stop.is_cancelled() {
            match self.listen_once(&on_event, &stop).await {
                Ok(()) => backoff = Duration::from_millis(100),
                Err(error) => {
                    tracing::warn!(%error, retry_in = ?backoff, "link change listener disconnected")
                }
            }
            if let Some(replica) = &lost {
                replica.missed_changes();
            }
            tokio::select! {
                () = tokio::time::sleep(backoff) => {}
                () = stop.cancelled() => return,
            }
            backoff = (backoff * 2).min(Duration::from_secs(5));
        }
    }

    async fn listen_once(
        &self,
        on_event: &impl Fn(ChangeEvent),
        stop: &CancellationToken,
    ) -> Result<(), tokio_postgres::Error> {
        use futures::StreamExt;
        let mut config = (*self.config).clone();
        config.application_name(APPLICATION_NAME);
        let (client, mut connection) = config.connect(self.tls.clone()).await?;
        let (tx, mut rx) = heard_queue(MAX_HEARD);
        let driver = tokio::spawn(async move {
            let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
            while let Some(message) = messages.next().await {
                match message {
                    Ok(tokio_postgres::AsyncMessage::Notification(n)) => {
                        let payload = n.payload().to_string();
                        let heard = match n.channel() {
                            DOMAIN_NOTIFY_CHANNEL => {
                                Heard::Event(ChangeEvent::DomainChanged(payload))
                            }
                            // Only this session's own probe channel is listened to.
                            channel if channel.starts_with(PROBE_CHANNEL_PREFIX) => {
                                Heard::Probe(payload)
                            }
                            _ => Heard::Event(ChangeEvent::Changed(payload)),
                        };
                        if !tx.offer(heard) {
                            return;
                        }
                    }
                    Ok(_) => {}
                    Err(error) => {
                        tracing::warn!(%error, "link change listener connection failed");
                        break;
                    }
                }
            }
            tx.close().await;
        });
        let own: i32 = client
            .query_one("SELECT pg_backend_pid()", &[])
            .await?
            .get(0);
        let probe_channel = format!("{PROBE_CHANNEL_PREFIX}{own}");
        client
            .batch_execute(&format!(
                "LISTEN {NOTIFY_CHANNEL}; LISTEN {DOMAIN_NOTIFY_CHANNEL}; LISTEN {probe_channel}"
            ))
            .await?;
        // Anything that changed before LISTEN took effect is unknown to us.
        on_event(ChangeEvent::Reset);
        let mut probes = Probes::default();
        let mut every = tokio::time::interval(PROBE_EVERY);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                heard = rx.recv(on_event) => match heard {
                    Some(Heard::Event(event)) => on_event(event),
                    Some(Heard::Probe(payload)) => {
                        if let Some(sent) = probes.back(&payload) {
                            on_event(ChangeEvent::CaughtUp(sent));
                        }
                    }
                    Some(Heard::Closed) | None => break,
                },
                _ = every.tick() => {
                    if let Some(payload) = probes.send() {
                        client
                            .execute("SELECT pg_notify($1, $2)", &[&probe_channel, &payload])
                            .await?;
                    }
                }
                () = stop.cancelled() => break,
            }
        }
        driver.abort();
        Ok(())
    }
}

/// What the listening connection heard.
enum Heard {
    /// A change.
    Event(ChangeEvent),
    /// One of this session's probes, with this payload.
    Probe(String),
    /// The connection ended.
    Closed,
}

/// The sending end of [`heard_queue`], on the task that reads the connection.
struct HeardSender {
    tx: tokio::sync::mpsc::Sender<Heard>,
    dropped: Arc<std::sync::atomic::AtomicBool>,
}

/// The receiving end of [`heard_queue`], on the task that acts on what was heard.
struct HeardReceiver {
    rx: tokio::sync::mpsc::Receiver<Heard>,
    dropped: Arc<std::sync::atomic::AtomicBool>,
}

/// A queue of at most `capacity` notifications from the connection's reader to the task that
/// acts on them. The reader never waits on it (a reader that stopped reading would leave the
/// notifications queued in PostgreSQL, whose queue is the whole cluster's): a notification past
/// the bound is dropped, and the receiver announces [`ChangeEvent::Reset`] before the next one
/// it hands out, so that nothing is taken as caught up past a change it never heard.
fn heard_queue(capacity: usize) -> (HeardSender, HeardReceiver) {
    let (tx, rx) = tokio::sync::mpsc::channel(capacity);
    let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
    (
        HeardSender {
            tx,
            dropped: Arc::clone(&dropped),
        },
        HeardReceiver { rx, dropped },
    )
}

impl HeardSender {
    /// Queues `heard`, or drops it when the queue is full; `false` once the receiver is gone.
    fn offer(&self, heard: Heard) -> bool {
        use tokio::sync::mpsc::error::TrySendError;
        match self.tx.try_send(heard) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) => {
                self.dropped
                    .store(true, std::sync::atomic::Ordering::SeqCst);
                true
            }
            Err(TrySendError::Closed(_)) => false,
        }
    }

    /// Tells the receiver the connection ended (waiting for room: nothing follows it).
    async fn close(self) {
        let _ = self.tx.send(Heard::Closed).await;
    }
}

impl HeardReceiver {
    /// The next notification heard, after `on_event(Reset)` if any was dropped before it.
    async fn recv(&mut self, on_event: &impl Fn(ChangeEvent)) -> Option<Heard> {
        let heard = self.rx.recv().await;
        if self
            .dropped
            .swap(false, std::sync::atomic::Ordering::SeqCst)
        {
            on_event(ChangeEvent::Reset);
        }
        heard
    }
}

/// The probes one listening connection has sent and not yet heard back: each is a notification
/// from the listening session to itself (on its [`PROBE_CHANNEL_PREFIX`] channel), and PostgreSQL delivers notifications
/// in the order their transactions committed, so when one comes back every change committed
/// before it was sent has been heard.
#[derive(Default)]
struct Probes {
    sent: std::collections::VecDeque<(u64, std::time::Instant)>,
    next: u64,
}

impl Probes {
    /// The payload of the next probe, sent now; `None` while [`MAX_PROBES_OUT`] are unanswered
    /// (the feed has stalled: the cache's links then age from the last probe that came back).
    fn send(&mut self) -> Option<String> {
        if self.sent.len() >= MAX_PROBES_OUT {
            return None;
        }
        self.next += 1;
        self.sent.push_back((self.next, std::time::Instant::now()));
        Some(self.next.to_string())
    }

    /// When the probe `payload` was sent, if it is unanswered; it and every earlier probe are
    /// answered.
    fn back(&mut self, payload: &str) -> Option<std::time::Instant> {
        let number: u64 = payload.parse().ok()?;
        let mut sent = None;
        while let Some(&(n, at)) = self.sent.front() {
            if n > number {
                break;
            }
            self.sent.pop_front();
            if n == number {
                sent = Some(at);
            }
        }
        sent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_confirms_when_it_was_sent_and_answers_every_earlier_one() {
        let mut probes = Probes::default();
        let first = probes.send().expect("room");
        let before_second = std::time::Instant::now();
        let second = probes.send().expect("room");
        // A payload that is no probe of ours confirms nothing.
        assert_eq!(probes.back("not a number"), None);
        assert_eq!(probes.back("0"), None);
        let sent = probes.back(&second).expect("the second probe is ours");
        assert!(sent >= before_second);
        // The first was answered with it.
        assert_eq!(probes.back(&first), None);
        assert!(probes.sent.is_empty());
    }

    /// Past its bound the queue drops what it hears, and the receiver forgets everything
    /// before it hands out the next: a probe heard after a dropped change confirms nothing the
    /// caches still hold.
    #[tokio::test]
    async fn a_full_queue_drops_and_resets_before_the_next() {
        let (tx, mut rx) = heard_queue(2);
        for code in ["a", "b", "c", "d"] {
            assert!(tx.offer(Heard::Event(ChangeEvent::Changed(code.into()))));
        }
        let told = std::sync::Mutex::new(Vec::new());
        let on_event = |event: ChangeEvent| told.lock().expect("told").push(event);
        let first = rx.recv(&on_event).await;
        assert!(matches!(first, Some(Heard::Event(ChangeEvent::Changed(c))) if c == "a"));
        assert!(
            matches!(told.lock().expect("told").as_slice(), [ChangeEvent::Reset]),
            "the dropped changes are announced as a reset"
        );
        let second = rx.recv(&on_event).await;
        assert!(matches!(second, Some(Heard::Event(ChangeEvent::Changed(c))) if c == "b"));
        assert_eq!(told.lock().expect("told").len(), 1, "once");
        tx.close().await;
        assert!(matches!(rx.recv(&on_event).await, Some(Heard::Closed)));
        drop(rx);
        let (tx, rx) = heard_queue(1);
        drop(rx);
        assert!(!tx.offer(Heard::Probe("1".into())), "the receiver is gone");
    }

    #[test]
    fn a_stalled_feed_sends_no_more_probes() {
        let mut probes = Probes::default();
        for _ in 0..MAX_PROBES_OUT {
            assert!(probes.send().is_some());
        }
        assert_eq!(probes.send(), None);
        let last = MAX_PROBES_OUT.to_string();
        assert!(probes.back(&last).is_some());
        assert!(probes.send().is_some());
    }
}
