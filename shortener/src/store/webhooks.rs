//! Webhook endpoints and their outbox, the same for both backends: what is registered, what a
//! delivery worker claims, and how it reports back.
//!
//! An event is recorded by the write that causes it, in its transaction, with one delivery
//! row for each enabled endpoint of its tenant (none when the tenant has no endpoint, so a
//! tenant without webhooks pays one index probe per write). Deliveries are claimed per
//! endpoint with a lease on the endpoint and on each delivery taken, so several nodes sharing a
//! store never deliver to one endpoint at once, and a node that dies mid-delivery leaves its
//! endpoint to be taken over when the lease runs out. Endpoints are claimed in turns across
//! tenants: each tenant's endpoint that has waited longest first, then each one's second...
//!
//! Each tenant's outbox is bounded: while the worker's last measurement found a tenant with at
//! least its bound of pending deliveries, that tenant's events are not recorded (the change
//! itself commits) and are counted as dropped instead (see [`OutboxBound`]).

use crate::domain::Link;
use chrono::{DateTime, Utc};

/// `link.created`.
pub const LINK_CREATED: &str = "link.created";
/// `link.updated`.
pub const LINK_UPDATED: &str = "link.updated";
/// `link.deleted`.
pub const LINK_DELETED: &str = "link.deleted";

/// `clicks.rollup`: a tenant's clicks of one hour.
pub const CLICKS_ROLLUP: &str = "clicks.rollup";

/// How long the store keeps what an hour's `clicks.rollup` events told (counted from the hour,
/// in seconds): well past the hours the maintenance looks back over, after which an hour is
/// never asked for again.
pub const ROLLUP_TOLD_KEPT_SECONDS: i64 = 7 * 24 * 3600;

/// The RFC 3339 form of the hour starting at `hour` (Unix seconds), as rollup events name it.
pub fn hour_name(hour: i64) -> String {
    DateTime::from_timestamp(hour, 0)
        .unwrap_or(DateTime::UNIX_EPOCH)
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// The data of a link event: the link as it is after the change.
pub fn link_data(link: &Link) -> String {
    serde_json::json!({
        "code": link.shown_code(),
        "domain": link.domain,
        "tenant": link.tenant,
        "url": link.url,
        "tags": link.tags,
        "disabled": link.disabled_at.is_some(),
        "deleted": link.deleted_at.is_some(),
    })
    .to_string()
}

/// An endpoint to register.
#[derive(Debug, Clone)]
pub struct NewEndpoint {
    /// Whose events it receives.
    pub tenant: String,
    /// Where they are sent (checked by the target rules).
    pub url: String,
    /// The HMAC key of the signatures.
    pub secret: String,
    /// The key that registered it (`tenant/name`).
    pub created_by: String,
    /// The most endpoints its tenant may have: at that many, nothing is registered.
    pub most: u32,
}

/// A registered endpoint (its secret is never read back out of the store by the API).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// Its number.
    pub id: i64,
    /// Whose events it receives.
    pub tenant: String,
    /// Where they are sent.
    pub url: String,
    /// When it was registered.
    pub created_at: DateTime<Utc>,
    /// The key that registered it.
    pub created_by: String,
    /// Consecutive failed deliveries.
    pub failures: u32,
    /// When it was disabled for too many failures in a row.
    pub disabled_at: Option<DateTime<Utc>>,
}

/// A delivery claimed by a worker.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// The endpoint.
    pub endpoint_id: i64,
    /// Where to send it.
    pub url: String,
    /// The endpoint's HMAC key.
    pub secret: String,
    /// The event's number (the same for every endpoint it goes to).
    pub event_id: i64,
    /// `link.created`, ...
    pub kind: String,
    /// The event's data, JSON.
    pub data: String,
    /// When the event was recorded.
    pub created_at: DateTime<Utc>,
    /// Attempts made before this one.
    pub attempts: u32,
    /// The `traceparent` of the traced request that recorded the event, if it was traced.
    pub trace: Option<String>,
    /// The claim's lease as the store wrote it on the endpoint and its deliveries (its end, in
    /// the store's own units): the token the attempt's record and the release present, so a
    /// worker whose lease ran out and was claimed again changes nothing the new claim holds.
    pub lease: i64,
}

/// How an attempt went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// The endpoint.
    pub endpoint_id: i64,
    /// The event.
    pub event_id: i64,
    /// Whether the endpoint took it (a 2xx answer).
    pub delivered: bool,
    /// The answer's status, if there was one.
    pub status: Option<u16>,
    /// What went wrong, if anything.
    pub error: Option<String>,
    /// When to try again after a failure.
    pub retry_at: DateTime<Utc>,
    /// After this many failures in a row the endpoint is disabled.
    pub max_failures: u32,
    /// The delivery's last attempt (`SHORTENER_WEBHOOK_MAX_ATTEMPTS`): a failure ends it
    /// `failed`, and it is not tried again.
    pub last: bool,
    /// The claim's lease ([`Delivery::lease`]): a failure recorded after another claim took
    /// the delivery over leaves the delivery to that claim (its attempts, its next try).
    pub lease: i64,
}

/// What recording an attempt found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Finished {
    /// This attempt's failure disabled the endpoint.
    pub disabled_now: bool,
    /// The endpoint is disabled (by this failure, an earlier one or by hand) or gone: nothing
    /// more is sent to it.
    pub stopped: bool,
    /// The endpoint's failures in a row, this attempt's counted (0 after a delivery).
    pub failures: u32,
    /// This attempt was the delivery's last, and its failure ended it `failed` (not when the
    /// delivery was no longer pending: delivered meanwhile by a node that took it over).
    pub given_up: bool,
}

/// What a measurement of the per-tenant outbox bound found.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OutboxBound {
    /// The tenants at the bound now (their events are dropped until the next measurement).
    pub full: Vec<String>,
    /// Events dropped per tenant since the last measurement (by any node).
    pub dropped: Vec<(String, u64)>,
}

/// One line of an endpoint's delivery log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryRecord {
    /// The event.
    pub event_id: i64,
    /// Its kind.
    pub kind: String,
    /// `pending`, `delivered` or `failed` (its last attempt failed: not tried again).
    pub state: String,
    /// Attempts made.
    pub attempts: u32,
    /// The last answer's status.
    pub last_status: Option<u16>,
    /// The last failure.
    pub last_error: Option<String>,
    /// When it was delivered.
    pub delivered_at: Option<DateTime<Utc>>,
    /// When its last attempt failed, if it ended `failed`.
    pub failed_at: Option<DateTime<Utc>>,
}

/// What a retry of deliveries did ([`super::OutboxStore::retry_deliveries`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Retried {
    /// Deliveries made due again.
    pub retried: u64,
    /// The endpoint's tenant had no room under its pending bound, so nothing was made due.
    pub full: bool,
}

impl Retried {
    /// How many deliveries a retry may make pending in a tenant with `pending` already, under a
    /// bound of `max_pending`; the outcome of a retry that found no room when there is none.
    pub(crate) fn room(max_pending: u64, pending: i64) -> Result<i64, Retried> {
        let room = i64::try_from(max_pending)
            .unwrap_or(i64::MAX)
            .saturating_sub(pending);
        if room > 0 {
            Ok(room)
        } else {
            Err(Retried {
                retried: 0,
                full: true,
            })
        }
    }
}

/// The deliveries waiting to be made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Backlog {
    /// Pending deliveries of enabled endpoints (due now or waiting for a retry).
    pub pending: u64,
    /// Seconds since the oldest pending delivery that is due now became due (0: none due).
    pub oldest_due_seconds: u64,
}
