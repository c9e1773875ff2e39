//! The delivery worker: claims endpoints with due deliveries (a lease keeps other nodes off
//! them), in turns across tenants, and delivers to each claimed endpoint on its own, its
//! deliveries one after another: a slow or hanging endpoint holds up only its own queue, and
//! the worker claims the next endpoint as soon as one is done. Each delivery is sent as
//! `{"id", "type", "created_at", "data"}` signed with its endpoint's secret, and its outcome
//! recorded: a 2xx answer delivers it; anything else (another status, a refused connection, no
//! answer within the timeout) schedules a retry after `retry_base * 2^attempts` (at most an
//! hour), spread by up to half that again at random, until the delivery's last attempt
//! (`max_attempts`): that one's failure ends it `failed`. An endpoint disabled meanwhile (by
//! its run of failures or by hand) gets no further attempt.

use super::resolve::{PublicOnly, connect_failure, names_refused_address};
use super::sign::{ID_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER, signature};
use super::{Outcome, Webhooks};
use crate::store::{Attempt, Delivery, OutboxStore};
use chrono::{SecondsFormat, Utc};
use rand::Rng;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// Endpoints one node delivers to at once.
const ENDPOINTS_AT_ONCE: usize = 32;
/// Deliveries of one endpoint claimed at once (sent one after another).
const PER_ENDPOINT: i64 = 16;
/// How long an attempt in flight when the node stops may still take: less than the node's
/// bound on stopping a task (5 s), with room to let the endpoint go after it.
const STOP_GRACE: Duration = Duration::from_secs(2);
/// The longest delay between two attempts.
const MAX_DELAY: Duration = Duration::from_secs(3600);
/// The outbox backlog and its per-tenant bound are measured every this many polls.
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

/// Whether an attempt started at `now` ends, with the record of its answer, before the lease
/// that ends at `leased_until`: it may take `timeout`, and the record as long again.
fn within_lease(
    now: tokio::time::Instant,
    leased_until: tokio::time::Instant,
    timeout: Duration,
) -> bool {
    now + timeout * 2 <= leased_until
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
    /// Delivers due events until `stop`: claims endpoints every poll interval and whenever an
    /// endpoint it delivers to is done. At `stop`, an attempt in flight may finish within
    /// [`STOP_GRACE`]; one that takes longer is given up unrecorded (its receiver may still get
    /// it, and get it again from the next node: deliveries are at least once), and it and the
    /// deliveries claimed but not yet attempted are let go, due at once for the next claim.
    pub async fn run(self: Arc<Self>, stop: CancellationToken) {
        let client = match client(self.settings.timeout, self.settings.allow_private) {
            Ok(client) => client,
            Err(error) => {
                tracing::error!(%error, "cannot make the webhook HTTP client; no webhooks are delivered");
                return;
            }
        };
        let mut busy: JoinSet<()> = JoinSet::new();
        let mut measured: Option<tokio::time::Instant> = None;
        let mut purged: Option<chrono::DateTime<chrono::Utc>> = None;
        let mut purging = false;
        let mut next_poll = tokio::time::Instant::now() + self.settings.poll;
        loop {
            tokio::select! {
                () = stop.cancelled() => break,
                () = tokio::time::sleep_until(next_poll) => {
                    next_poll = tokio::time::Instant::now() + self.settings.poll;
                }
                // An endpoint is done: its place goes to the next one at once.
                Some(_) = busy.join_next(), if !busy.is_empty() => {}
            }
            let free = ENDPOINTS_AT_ONCE.saturating_sub(busy.len());
            if free > 0 {
                let (leased_until, claimed) = self.claim(free).await;
                for deliveries in claimed {
                    let (worker, client, stop) = (Arc::clone(&self), client.clone(), stop.clone());
                    busy.spawn(async move {
                        worker
                            .deliver_to(&client, deliveries, leased_until, &stop)
                            .await;
                    });
                }
            }
            if measured.is_none_or(|at| at.elapsed() >= self.settings.poll * BACKLOG_EVERY_POLLS) {
                self.measure_backlog().await;
                measured = Some(tokio::time::Instant::now());
            }
            // One batch a pass: a purge of millions of rows (a retention shortened, a fleet back
            // after an outage) goes on between claims and a stop, not in their place.
            let now = self.clock.now();
            if purging || purged.is_none_or(|at| now - at >= PURGE_EVERY) {
                purging = self.purge(now).await;
                if !purging {
                    purged = Some(now);
                }
            }
        }
        while busy.join_next().await.is_some() {}
    }

    /// Reads the outbox backlog into the metrics, and applies the per-tenant bound.
    async fn measure_backlog(&self) {
        match self.store.outbox_backlog().await {
            Ok(backlog) => self.counters.set_backlog(backlog),
            Err(error) => tracing::debug!(%error, "measuring the webhook outbox backlog failed"),
        }
        match self.store.bound_outbox(self.settings.max_pending).await {
            Ok(bound) => {
                for (tenant, dropped) in &bound.dropped {
                    tracing::warn!(
                        %tenant,
                        dropped,
                        max_pending = self.settings.max_pending,
                        "webhook events dropped: the tenant's outbox is full"
                    );
                }
                self.counters.set_bound(bound);
            }
            Err(error) => tracing::warn!(%error, "bounding the webhook outbox failed; will retry"),
        }
    }

    /// Removes one batch of the deliveries delivered (or ended `failed`) more than the log's
    /// retention before `now`, and of the events left without deliveries; whether there may be
    /// more to remove.
    async fn purge(&self, now: chrono::DateTime<chrono::Utc>) -> bool {
        let Some(keep) = self.settings.log_retention else {
            return false;
        };
        match self.store.purge_outbox(now - keep, PURGE_BATCH).await {
            Ok((deliveries, events)) => {
                self.counters.purged(deliveries, events);
                deliveries >= PURGE_BATCH as u64 || events >= PURGE_BATCH as u64
            }
            Err(error) => {
                tracing::warn!(%error, "purging the webhook outbox failed; will retry in an hour");
                false
            }
        }
    }

    /// Claims up to `endpoints` endpoints with due deliveries: each one's deliveries, in order,
    /// and when the claim's lease ends at the latest (measured from before it was asked for).
    async fn claim(&self, endpoints: usize) -> (tokio::time::Instant, Vec<Vec<Delivery>>) {
        // Long enough for every claimed delivery of an endpoint to be tried one after another.
        let lease = self.settings.timeout * (PER_ENDPOINT as u32 + 1);
        let leased_until = tokio::time::Instant::now() + lease;
        let claimed = match self
            .store
            .claim_deliveries(lease, endpoints as i64, PER_ENDPOINT)
            .await
        {
            Ok(claimed) => claimed,
            Err(error) => {
                tracing::warn!(%error, "claiming webhook deliveries failed; will retry");
                return (leased_until, Vec::new());
            }
        };
        let mut by_endpoint: Vec<Vec<Delivery>> = Vec::new();
        for delivery in claimed {
            match by_endpoint.last_mut() {
                Some(last) if last[0].endpoint_id == delivery.endpoint_id => last.push(delivery),
                _ => by_endpoint.push(vec![delivery]),
            }
        }
        (leased_until, by_endpoint)
    }

    /// Sends one endpoint's claimed deliveries one after another (so a receiver sees a link's
    /// events in order unless a retry intervenes), stopping at the first failure, when the
    /// endpoint is disabled or at `stop`, then lets the endpoint and what was not sent go. After
    /// a failure the endpoint is held for a backoff that doubles with its failures in a row, so
    /// a receiver that is down for a moment gets one attempt per backoff, not the claim's
    /// whole batch at once, and is disabled only after failing for a while.
    ///
    /// No attempt starts that could outlast the claim's lease (`leased_until`), its answer's
    /// record included: past it another node (or this one) may claim the endpoint and its
    /// unsent deliveries, and would send them beside this one.
    async fn deliver_to(
        &self,
        client: &reqwest::Client,
        deliveries: Vec<Delivery>,
        leased_until: tokio::time::Instant,
        stop: &CancellationToken,
    ) {
        let Some((endpoint, lease)) = deliveries.first().map(|d| (d.endpoint_id, d.lease)) else {
            return;
        };
        let mut going = true;
        let mut hold = None;
        let mut unsent = Vec::new();
        for delivery in deliveries {
            going = going
                && within_lease(
                    tokio::time::Instant::now(),
                    leased_until,
                    self.settings.timeout,
                );
            if !going || stop.is_cancelled() {
                unsent.push(delivery.event_id);
                continue;
            }
            let stopped = async {
                stop.cancelled().await;
                tokio::time::sleep(STOP_GRACE).await;
            };
            let (attempt, outcome) = tokio::select! {
                done = self.attempt(client, &delivery) => done,
                () = stopped => {
                    unsent.push(delivery.event_id);
                    going = false;
                    continue;
                }
            };
            let attempt_delivered = attempt.delivered;
            self.counters.attempted(outcome);
            match self.store.finish_delivery(attempt).await {
                Ok(finished) => {
                    if finished.given_up {
                        self.counters.gave_up();
                    }
                    if finished.disabled_now {
                        self.counters.disabled();
                        tracing::warn!(
                            endpoint,
                            failures = self.settings.max_failures,
                            "webhook endpoint disabled after failed deliveries in a row"
                        );
                    }
                    going = !finished.stopped && attempt_delivered;
                    if !attempt_delivered && !finished.stopped {
                        let failures = finished.failures.saturating_sub(1);
                        hold = Some(backoff(self.settings.retry_base, failures));
                    }
                }
                // This delivery's lease runs out and it is tried again then; the rest are let
                // go now (the store may be back by the next claim).
                Err(error) => {
                    tracing::warn!(%error, event = delivery.event_id, "recording a webhook delivery failed");
                    going = false;
                }
            }
        }
        if let Err(error) = self
            .store
            .release_endpoint(endpoint, lease, unsent, hold)
            .await
        {
            // Its lease runs out and it is claimed again then.
            tracing::warn!(%error, endpoint, "letting go of a webhook endpoint failed");
        }
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
        let span = delivery_span(delivery);
        let sent = if !self.settings.allow_private && names_refused_address(&delivery.url) {
            // A literal address is never resolved, so the resolver's rule is applied here (to
            // an endpoint registered before registration refused it).
            None
        } else {
            // The receiver gets a `traceparent` when the event's trace is known.
            let mut traced = reqwest::header::HeaderMap::new();
            span.in_scope(|| otel::inject_headers(&mut traced));
            let request = client
                .post(&delivery.url)
                .headers(traced)
                .header("content-type", "application/json")
                .header(ID_HEADER, delivery.event_id.to_string())
                .header(TIMESTAMP_HEADER, timestamp.to_string())
                .header(
                    SIGNATURE_HEADER,
                    signature(&delivery.secret, timestamp, body.as_bytes()),
                )
                .body(body)
                .send();
            Some(tracing::Instrument::instrument(request, span.clone()).await)
        };
        if let Some(Ok(answer)) = &sent {
            otel::record_http_status(&span, answer.status().as_u16(), true);
        }
        let (outcome, status, error) = match sent {
            None => (
                Outcome::Unreachable,
                None,
                Some("the endpoint's address is not public, or is the node's own".into()),
            ),
            Some(Ok(answer)) if answer.status().is_success() => {
                (Outcome::Delivered, Some(answer.status().as_u16()), None)
            }
            Some(Ok(answer)) => (
                Outcome::Refused,
                Some(answer.status().as_u16()),
                Some(format!("answered {}", answer.status())),
            ),
            Some(Err(e)) if e.is_timeout() => (
                Outcome::Timeout,
                None,
                Some("no answer within the timeout".into()),
            ),
            Some(Err(e)) if e.is_connect() => {
                (Outcome::Unreachable, None, Some(connect_failure(&e)))
            }
            Some(Err(_)) => (Outcome::Failed, None, Some("the request failed".into())),
        };
        let delivered = outcome == Outcome::Delivered;
        let last = !delivered && delivery.attempts.saturating_add(1) >= self.settings.max_attempts;
        if last {
            tracing::warn!(
                event = delivery.event_id,
                endpoint = delivery.endpoint_id,
                ?status,
                attempts = self.settings.max_attempts,
                "webhook delivery failed for the last time; it will not be retried"
            );
        } else if !delivered {
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
            last,
            lease: delivery.lease,
        };
        (attempt, outcome)
    }
}

/// The client span of a delivery attempt, in the trace of the request that recorded its event
/// (kept in the outbox row, so whichever node delivers continues it); disabled when that
/// request was not traced or tracing is off.
fn delivery_span(delivery: &Delivery) -> tracing::Span {
    let Some(cause) = delivery
        .trace
        .as_deref()
        .and_then(otel::Parent::from_traceparent)
    else {
        return tracing::Span::none();
    };
    otel::http_client_span("POST", Some(&cause))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An attempt starts only while it and the record of its answer fit in what is left of
    /// the lease: a batch of slow answers stops before another claim could take its endpoint.
    #[test]
    fn an_attempt_starts_only_while_it_fits_in_the_lease() {
        let timeout = Duration::from_secs(1);
        let claimed = tokio::time::Instant::now();
        let until = claimed + timeout * (PER_ENDPOINT as u32 + 1);
        assert!(within_lease(claimed, until, timeout));
        // Fifteen answers that each took nearly the whole timeout: the next still fits.
        assert!(within_lease(claimed + timeout * 15, until, timeout));
        // A few records slow on top of them: it would not, so it waits for the next claim.
        assert!(!within_lease(
            claimed + timeout * 15 + Duration::from_millis(1),
            until,
            timeout
        ));
        assert!(!within_lease(until, until, timeout));
    }

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
