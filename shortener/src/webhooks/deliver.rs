//! The delivery worker: claims due deliveries (a lease keeps other nodes off them), sends
//! each as `{"id", "type", "created_at", "data"}` signed with its endpoint's secret, and
//! records the outcome: a 2xx answer delivers it; anything else (another status, a refused
//! connection, no answer within the timeout) schedules a retry after
//! `retry_base * 2^attempts` (at most an hour), spread by up to half that again at random.

use super::resolve::PublicOnly;
use super::sign::{ID_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER, signature};
use super::{Outcome, Webhooks};
use crate::store::{Attempt, Delivery, LinkStore};
use chrono::{SecondsFormat, Utc};
use rand::Rng;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Deliveries claimed at once.
const BATCH: i64 = 32;
/// The longest delay between two attempts.
const MAX_DELAY: Duration = Duration::from_secs(3600);
/// The outbox backlog is measured for the metrics every this many polls.
const BACKLOG_EVERY_POLLS: u32 = 10;
/// How often the outbox is purged of deliveries older than the log's retention.
const PURGE_EVERY: chrono::Duration = chrono::Duration::hours(1);
/// Rows a purge removes per statement (it repeats until fewer are left).
const PURGE_BATCH: i64 = 10_000;

/// The delay before attempt `attempts + 1` after a failure: the base doubled per attempt
/// made, capped, plus up to half of it at random (so retries of many deliveries spread out).
pub fn backoff(base: Duration, attempts: u32) -> Duration {
    let delay = base
        .saturating_mul(2u32.saturating_pow(attempts.min(20)))
        .min(MAX_DELAY);
    let jitter = rand::rng().random_range(0.0..0.5);
    delay + delay.mul_f64(jitter)
}

/// An HTTP client for deliveries: rustls on ring with the system's roots, no redirects
/// followed (a redirect is an answer that is not 2xx), no proxy from the environment (a
/// proxy would resolve the names itself), and, unless `allow_private`, names resolved to
/// public addresses only ([`PublicOnly`]).
fn client(timeout: Duration, allow_private: bool) -> reqwest::Result<reqwest::Client> {
    let builder = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .timeout(timeout);
    if allow_private {
        builder.build()
    } else {
        builder.dns_resolver(Arc::new(PublicOnly)).build()
    }
}

impl Webhooks {
    /// Delivers due events every poll interval until `stop` (an attempt in flight finishes
    /// first, within its timeout).
    pub async fn run(self: Arc<Self>, stop: CancellationToken) {
        let client = match client(self.settings.timeout, self.settings.allow_private) {
            Ok(client) => client,
            Err(error) => {
                tracing::error!(%error, "cannot make the webhook HTTP client; no webhooks are delivered");
                return;
            }
        };
        let mut measured: Option<tokio::time::Instant> = None;
        let mut purged: Option<chrono::DateTime<chrono::Utc>> = None;
        while tokio::time::timeout(self.settings.poll, stop.cancelled())
            .await
            .is_err()
        {
            self.deliver_due(&client).await;
            if measured.is_none_or(|at| at.elapsed() >= self.settings.poll * BACKLOG_EVERY_POLLS) {
                self.measure_backlog().await;
                measured = Some(tokio::time::Instant::now());
            }
            let now = self.clock.now();
            if purged.is_none_or(|at| now - at >= PURGE_EVERY) {
                self.purge(now).await;
                purged = Some(now);
            }
        }
    }

    /// Reads the outbox backlog into the metrics.
    async fn measure_backlog(&self) {
        match self.store.outbox_backlog().await {
            Ok(backlog) => self.counters.set_backlog(backlog),
            Err(error) => tracing::debug!(%error, "measuring the webhook outbox backlog failed"),
        }
    }

    /// Removes deliveries delivered more than the log's retention before `now`, and the events
    /// left without deliveries, in bounded batches.
    async fn purge(&self, now: chrono::DateTime<chrono::Utc>) {
        let Some(keep) = self.settings.log_retention else {
            return;
        };
        let before = now - keep;
        loop {
            match self.store.purge_outbox(before, PURGE_BATCH).await {
                Ok((deliveries, events)) => {
                    self.counters.purged(deliveries, events);
                    if deliveries < PURGE_BATCH as u64 && events < PURGE_BATCH as u64 {
                        return;
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, "purging the webhook outbox failed; will retry in an hour");
                    return;
                }
            }
        }
    }

    /// Claims and sends what is due now.
    async fn deliver_due(&self, client: &reqwest::Client) {
        // Long enough for every claimed delivery to be tried one after another.
        let lease = self.settings.timeout * (BATCH as u32 + 1);
        let claimed = match self.store.claim_deliveries(lease, BATCH).await {
            Ok(claimed) => claimed,
            Err(error) => {
                tracing::warn!(%error, "claiming webhook deliveries failed; will retry");
                return;
            }
        };
        // One endpoint's deliveries go one after another, oldest event first (so a receiver
        // sees a link's events in order unless a retry intervenes); endpoints in parallel.
        let mut by_endpoint: std::collections::BTreeMap<i64, Vec<Delivery>> = Default::default();
        for delivery in claimed {
            by_endpoint
                .entry(delivery.endpoint_id)
                .or_default()
                .push(delivery);
        }
        let attempts = by_endpoint.into_values().map(|deliveries| async move {
            for delivery in deliveries {
                let (attempt, outcome) = self.attempt(client, &delivery).await;
                self.counters.attempted(outcome);
                match self.store.finish_delivery(attempt).await {
                    Ok(disabled) => {
                        if disabled {
                            self.counters.disabled();
                            tracing::warn!(
                                endpoint = delivery.endpoint_id,
                                failures = self.settings.max_failures,
                                "webhook endpoint disabled after failed deliveries in a row"
                            );
                        }
                    }
                    // The lease runs out and the delivery is tried again.
                    Err(error) => {
                        tracing::warn!(%error, event = delivery.event_id, "recording a webhook delivery failed");
                    }
                }
            }
        });
        futures::future::join_all(attempts).await;
    }

    async fn attempt(&self, client: &reqwest::Client, delivery: &Delivery) -> (Attempt, Outcome) {
        let data: serde_json::Value =
            serde_json::from_str(&delivery.data).unwrap_or(serde_json::Value::Null);
        let body = serde_json::json!({
            "id": delivery.event_id,
            "type": delivery.kind,
            "created_at": delivery.created_at.to_rfc3339_opts(SecondsFormat::Millis, true),
            "data": data,
        })
        .to_string();
        let timestamp = Utc::now().timestamp();
        let sent = client
            .post(&delivery.url)
            .header("content-type", "application/json")
            .header(ID_HEADER, delivery.event_id.to_string())
            .header(TIMESTAMP_HEADER, timestamp.to_string())
            .header(
                SIGNATURE_HEADER,
                signature(&delivery.secret, timestamp, body.as_bytes()),
            )
            .body(body)
            .send()
            .await;
        let (outcome, status, error) = match sent {
            Ok(answer) if answer.status().is_success() => {
                (Outcome::Delivered, Some(answer.status().as_u16()), None)
            }
            Ok(answer) => (
                Outcome::Refused,
                Some(answer.status().as_u16()),
                Some(format!("answered {}", answer.status())),
            ),
            Err(e) if e.is_timeout() => (
                Outcome::Timeout,
                None,
                Some("no answer within the timeout".into()),
            ),
            Err(e) if e.is_connect() => {
                (Outcome::Unreachable, None, Some("could not connect".into()))
            }
            Err(_) => (Outcome::Failed, None, Some("the request failed".into())),
        };
        let delivered = outcome == Outcome::Delivered;
        if !delivered {
            tracing::info!(
                event = delivery.event_id,
                endpoint = delivery.endpoint_id,
                ?status,
                "webhook delivery failed; will retry"
            );
        }
        let delay = backoff(self.settings.retry_base, delivery.attempts);
        let attempt = Attempt {
            endpoint_id: delivery.endpoint_id,
            event_id: delivery.event_id,
            delivered,
            status,
            error,
            retry_at: Utc::now() + chrono::Duration::from_std(delay).unwrap_or_default(),
            max_failures: self.settings.max_failures,
        };
        (attempt, outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_back_off_exponentially_with_jitter_up_to_an_hour() {
        let base = Duration::from_secs(1);
        for attempts in 0..6 {
            let delay = backoff(base, attempts);
            let plain = base * 2u32.pow(attempts);
            assert!(
                delay >= plain && delay <= plain.mul_f64(1.5),
                "{attempts}: {delay:?}"
            );
        }
        assert!(backoff(base, 40) <= MAX_DELAY.mul_f64(1.5));
        assert!(backoff(base, 40) >= MAX_DELAY);
    }
}
