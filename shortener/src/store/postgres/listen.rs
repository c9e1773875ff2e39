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
    /// per changed code, [`ChangeEvent::DomainChanged`] per claimed, changed or removed host, and [`ChangeEvent::Reset`] whenever the listening connection is
    /// (re)established, since changes may have been missed meanwhile. Reconnects with backoff.
    pub async fn run(
        self,
        on_event: impl Fn(ChangeEvent) + Send + 'static,
        stop: CancellationToken,
    ) {
        let replica = self.replica.clone();
        let on_event = move |event: ChangeEvent| {
            if let Some(replica) = &replica {
                match &event {
                    ChangeEvent::Changed(code) => replica.changed_elsewhere(code),
                    ChangeEvent::Reset => replica.missed_changes(),
                    // Domains are read on the primary.
                    ChangeEvent::DomainChanged(_) => {}
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
            on_event(ChangeEvent::Reset);
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
        let (client, mut connection) = self.config.connect(self.tls.clone()).await?;
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let driver = tokio::spawn(async move {
            let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
            while let Some(message) = messages.next().await {
                match message {
                    Ok(tokio_postgres::AsyncMessage::Notification(n)) => {
                        let payload = n.payload().to_string();
                        let event = if n.channel() == DOMAIN_NOTIFY_CHANNEL {
                            ChangeEvent::DomainChanged(payload)
                        } else {
                            ChangeEvent::Changed(payload)
                        };
                        if tx.send(Some(event)).is_err() {
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
            let _ = tx.send(None);
        });
        client
            .batch_execute(&format!(
                "LISTEN {NOTIFY_CHANNEL}; LISTEN {DOMAIN_NOTIFY_CHANNEL}"
            ))
            .await?;
        // Anything that changed before LISTEN took effect is unknown to us.
        on_event(ChangeEvent::Reset);
        loop {
            tokio::select! {
                message = rx.recv() => match message {
                    Some(Some(event)) => on_event(event),
                    _ => break,
                },
                () = stop.cancelled() => break,
            }
        }
        driver.abort();
        Ok(())
    }
}
