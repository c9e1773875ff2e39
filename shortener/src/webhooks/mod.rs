//! Webhooks for internal consumers: an admin key registers an endpoint URL and a secret per
//! tenant; `link.created`, `link.updated` and `link.deleted` are recorded in the store's
//! outbox in the transaction of their change ([`crate::store::webhooks`]), and a worker on
//! every node delivers them as signed JSON ([`sign`]), retrying with exponential backoff and
//! jitter and disabling an endpoint after a configured run of failures (`deliver`). Endpoints
//! are delivered to each on their own, in turns across tenants, so one tenant's slow receiver
//! or burst of events does not hold up another's; each tenant's outbox is bounded
//! ([`WebhookSettings::max_pending`]).
//!
//! Delivery is at least once: a node that dies after the receiver answered but before the
//! answer was recorded sends that event again (same `Webhook-Id`).

mod counters;
mod deliver;
mod resolve;
pub mod sign;

pub use counters::{DeliveryCounters, Outcome};

use crate::audit::{Action, AuditLog, ObjectKind, Subject};
use crate::clock::Clock;
use crate::domain::{Caller, Error, TargetUrl, UrlError};
pub use crate::store::{DeliveryRecord, Endpoint};

use crate::store::{NewEndpoint, OutboxStore, Store};
use crate::targets::TargetRules;
use resolve::Refused;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

/// The shortest secret accepted.
pub const MIN_SECRET: usize = 16;
/// The longest secret accepted.
pub const MAX_SECRET: usize = 256;

/// The most endpoints one tenant may register: each of its link changes is written once per
/// endpoint (a delivery each), and its list is read whole.
pub const MAX_ENDPOINTS_PER_TENANT: u32 = 25;
/// How many lines of a delivery log are shown.
pub const LOG_LINES: i64 = 100;
/// The most failed deliveries one retry of an endpoint's makes due again (a call answers how
/// many it took; the next call takes the next ones).
pub const RETRY_BATCH: i64 = 1000;

/// How deliveries are made.
#[derive(Debug, Clone)]
pub struct WebhookSettings {
    /// Each attempt's bound (connect, send and answer).
    pub timeout: Duration,
    /// The first retry's delay; each further one doubles it (up to an hour), with jitter.
    pub retry_base: Duration,
    /// After this many failures in a row an endpoint is disabled.
    pub max_failures: u32,
    /// Attempts a delivery gets: a failure of the last ends it `failed`.
    pub max_attempts: u32,
    /// Whether endpoint URLs may name (or resolve to) loopback, private, link-local or
    /// metadata hosts.
    pub allow_private: bool,
    /// How often the worker looks for due deliveries.
    pub poll: Duration,
    /// How long delivered deliveries stay in the log before they are purged (`None`: kept).
    pub log_retention: Option<chrono::Duration>,
    /// The pending deliveries a tenant may have (over its enabled endpoints); while the last
    /// measurement found it at this bound, its events are dropped and counted, and the changes
    /// that cause them still commit.
    pub max_pending: u64,
}

/// The longest a registration waits for its URL's host name to resolve.
const REGISTRATION_LOOKUP: Duration = Duration::from_secs(3);

/// Registering endpoints and delivering to them.
pub struct Webhooks {
    store: Store,
    targets: Arc<TargetRules>,
    settings: WebhookSettings,
    /// The purge's time (tests set it by hand).
    clock: Clock,
    counters: DeliveryCounters,
    audit: Arc<AuditLog>,
}

/// What a registration asks for.
#[derive(Debug, Clone)]
pub struct Registration {
    /// Whose events; an admin key may name any tenant.
    pub tenant: String,
    /// Where to send them.
    pub url: String,
    /// The HMAC key.
    pub secret: String,
}

impl Webhooks {
    /// Webhooks over `store`, with endpoint URLs checked by `targets`, purging the log by
    /// `clock`.
    pub fn new(
        store: Store,
        targets: Arc<TargetRules>,
        settings: WebhookSettings,
        clock: Clock,
        audit: Arc<AuditLog>,
    ) -> Self {
        Self {
            store,
            targets,
            settings,
            clock,
            counters: DeliveryCounters::default(),
            audit,
        }
    }

    /// What the delivery worker has done (for metrics).
    pub fn counters(&self) -> &DeliveryCounters {
        &self.counters
    }

    /// The settings in force.
    pub fn settings(&self) -> &WebhookSettings {
        &self.settings
    }

    /// Checks `url` by the webhook target rules ([`TargetRules::for_webhooks`]): no own or
    /// blocked hosts, and no loopback, private, link-local or metadata hosts unless the
    /// operator allows them. Names are checked again when a delivery resolves them.
    fn check_url(&self, url: &str) -> Result<String, Error> {
        let policy = self.targets.for_webhooks(self.settings.allow_private);
        let checked = TargetUrl::parse(url, 2048, &policy).map_err(|e| match e {
            UrlError::PrivateAddress => Error::invalid(
                "invalid_webhook_url",
                "a webhook URL may not name a private, loopback, link-local or metadata host \
                 (SHORTENER_WEBHOOK_ALLOW_PRIVATE=true on the nodes allows receivers inside the \
                 network)",
            ),
            e => Error::invalid("invalid_webhook_url", e.to_string()),
        })?;
        Ok(checked.as_str().to_string())
    }

    /// Refuses a URL whose host deliveries would refuse (unless the operator allows private
    /// endpoints): a literal 6to4, Teredo or NAT64 address or one of the node's own, or a name
    /// that resolves now to any address deliveries may not reach. A name that does not resolve
    /// yet is accepted: each delivery resolves it again and keeps only public addresses.
    async fn check_host(&self, url: &str) -> Result<(), Error> {
        if self.settings.allow_private {
            return Ok(());
        }
        let Ok(parsed) = url::Url::parse(url) else {
            return Ok(());
        };
        let literal: IpAddr = match parsed.host() {
            Some(url::Host::Ipv4(v4)) => v4.into(),
            Some(url::Host::Ipv6(v6)) => v6.into(),
            Some(url::Host::Domain(name)) => {
                let wait = self.settings.timeout.min(REGISTRATION_LOOKUP);
                return match resolve::refused_addresses_of(name, wait).await.first() {
                    Some((ip, Refused::Own)) => Err(Error::invalid(
                        "invalid_webhook_url",
                        format!("{name} resolves to {ip}, an address of this node's own"),
                    )),
                    Some((ip, Refused::NotPublic)) => Err(Error::invalid(
                        "invalid_webhook_url",
                        format!(
                            "{name} resolves to {ip}, a private, loopback, link-local, metadata or relayed (6to4, Teredo, NAT64) address (SHORTENER_WEBHOOK_ALLOW_PRIVATE=true on the nodes allows receivers inside the network)"
                        ),
                    )),
                    None => Ok(()),
                };
            }
            None => return Ok(()),
        };
        if resolve::refused_literal(literal) {
            return Err(Error::invalid(
                "invalid_webhook_url",
                "a webhook URL may not name a translated (6to4, Teredo or NAT64) address",
            ));
        }
        if resolve::is_own(literal, &resolve::own_addresses()) {
            return Err(Error::invalid(
                "invalid_webhook_url",
                format!("{literal} is an address of this node's own"),
            ));
        }
        Ok(())
    }

    /// Registers an endpoint for `caller` (an admin key), for a tenant among `tenants` (those
    /// that hold keys now).
    pub async fn register(
        &self,
        caller: &Caller,
        registration: Registration,
        tenants: &[String],
    ) -> Result<Endpoint, Error> {
        crate::access::check_name("tenant", &registration.tenant, false)
            .map_err(|m| Error::invalid("invalid_tenant", m))?;
        if !tenants.contains(&registration.tenant) {
            return Err(Error::invalid(
                "unknown_tenant",
                format!(
                    "no API key belongs to tenant {:?}: webhooks are registered for tenants that hold keys",
                    registration.tenant
                ),
            ));
        }
        let secret_len = registration.secret.chars().count();
        if !(MIN_SECRET..=MAX_SECRET).contains(&secret_len) {
            return Err(Error::invalid(
                "invalid_secret",
                format!("a webhook secret has {MIN_SECRET} to {MAX_SECRET} characters"),
            ));
        }
        let url = self.check_url(&registration.url)?;
        self.check_host(&url).await?;
        let endpoint = self
            .store
            .create_endpoint(NewEndpoint {
                tenant: registration.tenant,
                url,
                secret: registration.secret,
                created_by: caller.key_id(),
                most: MAX_ENDPOINTS_PER_TENANT,
            })
            .await?
            .ok_or_else(|| {
                Error::conflict(
                    "too_many_webhooks",
                    format!(
                        "a tenant has at most {MAX_ENDPOINTS_PER_TENANT} webhooks: delete one \
                         first"
                    ),
                )
            })?;
        // The secret is never part of the record.
        let change = serde_json::json!({ "url": &endpoint.url, "tenant": &endpoint.tenant });
        self.audit_endpoint(caller, &endpoint, Action::WebhookCreate, change)
            .await;
        Ok(endpoint)
    }

    async fn audit_endpoint(
        &self,
        caller: &Caller,
        endpoint: &Endpoint,
        action: Action,
        change: serde_json::Value,
    ) {
        let id = endpoint.id.to_string();
        let subject = Subject {
            tenant: &endpoint.tenant,
            action,
            kind: ObjectKind::Webhook,
            id: &id,
        };
        self.audit.record(caller, subject, change).await;
    }

    /// The endpoints `caller` sees.
    pub async fn list(&self, caller: &Caller) -> Result<Vec<Endpoint>, Error> {
        Ok(self.store.endpoints(caller.tenant_scope()).await?)
    }

    /// Removes an endpoint; an unknown one is [`Error::NotFound`].
    pub async fn delete(&self, caller: &Caller, id: i64) -> Result<(), Error> {
        let endpoint = self.list(caller).await?.into_iter().find(|e| e.id == id);
        if let Some(endpoint) = endpoint
            && self
                .store
                .delete_endpoint(id, caller.tenant_scope())
                .await?
        {
            let change = serde_json::json!({ "url": &endpoint.url });
            self.audit_endpoint(caller, &endpoint, Action::WebhookDelete, change)
                .await;
            Ok(())
        } else {
            Err(Error::NotFound(format!("webhook {id}")))
        }
    }

    /// Enables an endpoint again (its run of failures starts at 0, its pending deliveries are
    /// due at once) or disables it by hand; an unknown one is [`Error::NotFound`].
    pub async fn set_enabled(
        &self,
        caller: &Caller,
        id: i64,
        enabled: bool,
    ) -> Result<Endpoint, Error> {
        let endpoint = self
            .store
            .set_endpoint_enabled(id, caller.tenant_scope(), enabled)
            .await?
            .ok_or_else(|| Error::NotFound(format!("webhook {id}")))?;
        let change = serde_json::json!({ "enabled": enabled });
        self.audit_endpoint(caller, &endpoint, Action::WebhookUpdate, change)
            .await;
        Ok(endpoint)
    }

    /// Makes deliveries of endpoint `id` due again, from their first attempt: that of event
    /// `event_id` (delivered or failed: sent once more), or (`None`) up to [`RETRY_BATCH`] of
    /// those that failed, oldest event first. Returns how many. An unknown endpoint (or another
    /// tenant's) is [`Error::NotFound`]; a disabled one, or an event with no ended delivery to
    /// it, or a tenant at its pending bound (`max_pending`), a conflict, with nothing changed.
    /// Making any due starts the endpoint's backoff and run of failures over.
    pub async fn retry(
        &self,
        caller: &Caller,
        id: i64,
        event_id: Option<i64>,
    ) -> Result<u64, Error> {
        let endpoint = self
            .list(caller)
            .await?
            .into_iter()
            .find(|e| e.id == id)
            .ok_or_else(|| Error::NotFound(format!("webhook {id}")))?;
        if endpoint.disabled_at.is_some() {
            return Err(Error::conflict(
                "endpoint_disabled",
                format!(
                    "webhook {id} is disabled: enable it (PATCH {{\"enabled\": true}}) first; its \
                     pending deliveries are then due at once"
                ),
            ));
        }
        let outcome = self
            .store
            .retry_deliveries(id, event_id, RETRY_BATCH, self.settings.max_pending)
            .await?;
        if outcome.full {
            return Err(Error::conflict(
                "outbox_full",
                format!(
                    "tenant {} has {} or more pending webhook deliveries \
                     (SHORTENER_WEBHOOK_MAX_PENDING): retry when they have drained",
                    endpoint.tenant, self.settings.max_pending
                ),
            ));
        }
        let retried = outcome.retried;
        if let Some(event) = event_id
            && retried == 0
        {
            return Err(Error::conflict(
                "not_retryable",
                format!(
                    "webhook {id} has no delivered or failed delivery of event {event}: the event is \
                     unknown, its delivery purged, or still pending"
                ),
            ));
        }
        if retried > 0 {
            let change = serde_json::json!({ "retried": retried, "event_id": event_id });
            self.audit_endpoint(caller, &endpoint, Action::WebhookUpdate, change)
                .await;
        }
        Ok(retried)
    }

    /// The latest deliveries of an endpoint, newest first.
    pub async fn log(&self, caller: &Caller, id: i64) -> Result<Vec<DeliveryRecord>, Error> {
        self.store
            .delivery_log(id, caller.tenant_scope(), LOG_LINES)
            .await?
            .ok_or_else(|| Error::NotFound(format!("webhook {id}")))
    }
}
