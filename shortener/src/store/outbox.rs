//! The webhook outbox interface: endpoints, the deliveries owed to them, and the rollup events
//! recorded into the outbox (link events are recorded by the link writes themselves, in their
//! own transaction).

use super::{
    Attempt, Backlog, Delivery, DeliveryRecord, Endpoint, Finished, NewEndpoint, OutboxBound,
    Retried, Store, StoreError,
};
use chrono::{DateTime, Utc};
use std::future::Future;
use std::time::Duration;

/// What a store does with the webhook outbox. Both backends implement it; [`Store`]
/// dispatches.
pub trait OutboxStore: Send + Sync {
    /// Registers a webhook endpoint; `None` when its tenant already has `endpoint.most`.
    fn create_endpoint(
        &self,
        endpoint: NewEndpoint,
    ) -> impl Future<Output = Result<Option<Endpoint>, StoreError>> + Send;

    /// The endpoints of `tenant` (every tenant's for `None`), oldest first.
    fn endpoints(
        &self,
        tenant: Option<&str>,
    ) -> impl Future<Output = Result<Vec<Endpoint>, StoreError>> + Send;

    /// Removes an endpoint (of `tenant`, if given) and its deliveries; false if there was none.
    fn delete_endpoint(
        &self,
        id: i64,
        tenant: Option<&str>,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// The latest `limit` deliveries of an endpoint (of `tenant`, if given), newest first;
    /// `None` when there is no such endpoint.
    fn delivery_log(
        &self,
        id: i64,
        tenant: Option<&str>,
        limit: i64,
    ) -> impl Future<Output = Result<Option<Vec<DeliveryRecord>>, StoreError>> + Send;

    /// Claims up to `endpoints` enabled endpoints with due deliveries that no worker holds, in
    /// turns across tenants (every tenant's longest-waiting endpoint before any tenant's
    /// second), each with up to `per_endpoint` of its due deliveries, oldest due first; the
    /// endpoints and deliveries are held for `lease` (no other worker takes them meanwhile).
    /// The deliveries come grouped by endpoint, each endpoint's in the order to send them.
    fn claim_deliveries(
        &self,
        lease: Duration,
        endpoints: i64,
        per_endpoint: i64,
    ) -> impl Future<Output = Result<Vec<Delivery>, StoreError>> + Send;

    /// Records how a claimed delivery's attempt went (and the endpoint's run of failures,
    /// disabling it at the limit), and whether the endpoint is to get no further attempts.
    fn finish_delivery(
        &self,
        attempt: Attempt,
    ) -> impl Future<Output = Result<Finished, StoreError>> + Send;

    /// Lets go of a claimed endpoint and of its claimed deliveries `unsent` (not attempted), so
    /// any worker may claim them again: at once, or after `hold` (an endpoint that just failed
    /// waits out its backoff before its next attempt, whichever delivery that is). Only while
    /// the claim's `lease` ([`Delivery::lease`]) is still the one they hold: a release that
    /// comes after another claim took them over lets go of nothing.
    fn release_endpoint(
        &self,
        endpoint_id: i64,
        lease: i64,
        unsent: Vec<i64>,
        hold: Option<Duration>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Measures each tenant's pending deliveries (of enabled endpoints) against `max_pending`:
    /// the tenants at or over it have their events dropped from now on, the others recorded
    /// again; and takes the counts of events dropped since the last measurement.
    fn bound_outbox(
        &self,
        max_pending: u64,
    ) -> impl Future<Output = Result<OutboxBound, StoreError>> + Send;

    /// Enables an endpoint (of `tenant`, if given): its run of failures starts again at 0 and
    /// its pending deliveries are due at once; or disables it by hand. `None` when there is no
    /// such endpoint.
    fn set_endpoint_enabled(
        &self,
        id: i64,
        tenant: Option<&str>,
        enabled: bool,
    ) -> impl Future<Output = Result<Option<Endpoint>, StoreError>> + Send;

    /// The deliveries waiting for enabled endpoints, and how long the oldest due one has been
    /// due.
    fn outbox_backlog(&self) -> impl Future<Output = Result<Backlog, StoreError>> + Send;

    /// Removes up to `limit` deliveries delivered before `before` and up to `limit` that ended
    /// `failed` before it, then events recorded before `before` that no delivery refers to any
    /// more; returns how many deliveries and events it removed.
    fn purge_outbox(
        &self,
        before: DateTime<Utc>,
        limit: i64,
    ) -> impl Future<Output = Result<(u64, u64), StoreError>> + Send;

    /// Makes deliveries of endpoint `endpoint_id` due now from their first attempt again: that
    /// of event `event_id` if it ended (delivered or failed), or (`None`) up to `limit` of
    /// those that failed, oldest event first; never so many that the endpoint's tenant passes
    /// `max_pending` pending deliveries over its enabled endpoints. A pending delivery is left
    /// as it is. When it makes any due, the endpoint's backoff and run of failures start
    /// over, as when it is enabled by hand.
    fn retry_deliveries(
        &self,
        endpoint_id: i64,
        event_id: Option<i64>,
        limit: i64,
        max_pending: u64,
    ) -> impl Future<Output = Result<Retried, StoreError>> + Send;

    /// Records a `clicks.rollup` event for each tenant with enabled webhook endpoints and
    /// clicks in the hour starting at `hour` (Unix seconds) whose totals its last event of the
    /// hour did not tell (none yet: revision 0; late clicks since: the next revision), once
    /// whatever the number of nodes asking; returns how many were recorded now.
    fn record_rollup_events(
        &self,
        hour: i64,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send;
}

impl OutboxStore for Store {
    async fn create_endpoint(&self, endpoint: NewEndpoint) -> Result<Option<Endpoint>, StoreError> {
        traced!(self, "INSERT", "webhook_endpoints", s => s.create_endpoint(endpoint))
    }

    async fn endpoints(&self, tenant: Option<&str>) -> Result<Vec<Endpoint>, StoreError> {
        traced!(self, "SELECT", "webhook_endpoints", s => s.endpoints(tenant))
    }

    async fn delete_endpoint(&self, id: i64, tenant: Option<&str>) -> Result<bool, StoreError> {
        traced!(self, "DELETE", "webhook_endpoints", s => s.delete_endpoint(id, tenant))
    }

    async fn delivery_log(
        &self,
        id: i64,
        tenant: Option<&str>,
        limit: i64,
    ) -> Result<Option<Vec<DeliveryRecord>>, StoreError> {
        traced!(self, "SELECT", "webhook_deliveries", s => s.delivery_log(id, tenant, limit))
    }

    async fn claim_deliveries(
        &self,
        lease: Duration,
        endpoints: i64,
        per_endpoint: i64,
    ) -> Result<Vec<Delivery>, StoreError> {
        traced!(self, "UPDATE", "webhook_deliveries", s => s.claim_deliveries(lease, endpoints, per_endpoint))
    }

    async fn finish_delivery(&self, attempt: Attempt) -> Result<Finished, StoreError> {
        traced!(self, "UPDATE", "webhook_deliveries", s => s.finish_delivery(attempt))
    }

    async fn release_endpoint(
        &self,
        endpoint_id: i64,
        lease: i64,
        unsent: Vec<i64>,
        hold: Option<Duration>,
    ) -> Result<(), StoreError> {
        traced!(self, "UPDATE", "webhook_endpoints", s => s.release_endpoint(endpoint_id, lease, unsent, hold))
    }

    async fn bound_outbox(&self, max_pending: u64) -> Result<OutboxBound, StoreError> {
        traced!(self, "SELECT", "webhook_deliveries", s => s.bound_outbox(max_pending))
    }

    async fn set_endpoint_enabled(
        &self,
        id: i64,
        tenant: Option<&str>,
        enabled: bool,
    ) -> Result<Option<Endpoint>, StoreError> {
        traced!(self, "UPDATE", "webhook_endpoints", s => s.set_endpoint_enabled(id, tenant, enabled))
    }

    async fn outbox_backlog(&self) -> Result<Backlog, StoreError> {
        traced!(self, "SELECT", "webhook_deliveries", s => s.outbox_backlog())
    }

    async fn purge_outbox(
        &self,
        before: DateTime<Utc>,
        limit: i64,
    ) -> Result<(u64, u64), StoreError> {
        traced!(self, "DELETE", "webhook_deliveries", s => s.purge_outbox(before, limit))
    }

    async fn record_rollup_events(&self, hour: i64) -> Result<u64, StoreError> {
        traced!(self, "INSERT", "webhook_events", s => s.record_rollup_events(hour))
    }

    async fn retry_deliveries(
        &self,
        endpoint_id: i64,
        event_id: Option<i64>,
        limit: i64,
        max_pending: u64,
    ) -> Result<Retried, StoreError> {
        traced!(self, "UPDATE", "webhook_deliveries", s => s.retry_deliveries(endpoint_id, event_id, limit, max_pending))
    }
}
