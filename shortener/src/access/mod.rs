//! Who may do what: every API request on either transport is admitted here, in one place.
//!
//! [`Admission::authenticate`] turns the request's `Authorization` value into a [`Caller`]
//! against the [`ApiKeys`] in force (`keys`, `keyfile`, `reload`); [`Admission::admit`] checks
//! that the caller's key carries the scope the [`Operation`] needs, keeps a batch within its
//! bound and charges the key's rate limit. A refusal is counted in the metrics by tenant and
//! returned as the domain error both transports map to their status. Which links a caller
//! sees (its own tenant's; every tenant's with `admin`) is [`Caller::sees`], applied by the
//! link service. Which hosts a caller may claim as a domain is [`Admission::admit_claim`].

mod keyfile;
mod keys;
mod reload;
mod signed;
mod suffixes;

pub use keyfile::{
    HEADER as KEY_FILE_HEADER, is_legacy, parse as parse_key_file, parse_legacy, render,
};
pub use keys::{
    DEFAULT_TENANT, Kept, KeyEntry, KeySet, LastUse, MIN_KEY_LENGTH, check_name, digest,
    generate_api_key,
};
pub use reload::{ApiKeys, KeyLookup, Looked, LookupCounters};
pub use signed::{SignatureHash, Signed, WINDOW_SECONDS, YourlsTokens};
pub use suffixes::DomainSuffixes;

use crate::domain::{Caller, Error, Scope};
use crate::limits::Limits;
use crate::metrics::Metrics;
use std::sync::Arc;

/// What a request asks to do, as far as admission cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// Create one link.
    Create,
    /// Create `items` links in one batch (gRPC).
    CreateBatch {
        /// How many items the batch holds.
        items: usize,
    },
    /// Read one link.
    Read,
    /// Delete one link.
    Delete,
    /// Read a page of links.
    List,
    /// Read one link's history.
    History,
    /// Stream every link of a list (charged once).
    Export,
    /// Change one link.
    Update,
    /// Import links in bulk (charged once: an import is bounded by its chunks, not the rate).
    Import,
    /// Read or change the deployment's settings (the blocked domains).
    Admin,
    /// Read click statistics (of one link or of the tenant's links).
    Stats,
    /// Read the tenant's domains.
    DomainRead,
    /// Claim, change or remove a domain (a claim is checked further by
    /// [`Admission::admit_claim`]).
    DomainWrite,
    /// List the API keys kept in the store for the caller's tenant.
    KeyRead,
    /// Create or revoke an API key of the caller's tenant.
    KeyWrite,
    /// Read the audit log (a page, or an export charged once).
    AuditRead,
}

impl Operation {
    /// The scope the operation needs.
    pub fn scope(self) -> Scope {
        match self {
            Operation::Create | Operation::CreateBatch { .. } => Scope::LinksCreate,
            Operation::Read | Operation::List | Operation::History | Operation::Export => {
                Scope::LinksRead
            }
            Operation::Delete | Operation::Update | Operation::DomainWrite => Scope::LinksWrite,
            Operation::DomainRead => Scope::LinksRead,
            Operation::Import => Scope::LinksCreate,
            Operation::Admin => Scope::Admin,
            Operation::Stats => Scope::StatsRead,
            Operation::KeyRead | Operation::KeyWrite => Scope::KeysManage,
            Operation::AuditRead => Scope::AuditRead,
        }
    }

    /// The operation's label in metrics.
    pub fn name(self) -> &'static str {
        match self {
            Operation::Create => "create",
            Operation::CreateBatch { .. } => "batch_create",
            Operation::Read => "read",
            Operation::Delete => "delete",
            Operation::List => "list",
            Operation::History => "history",
            Operation::Export => "export",
            Operation::Update => "update",
            Operation::Import => "import",
            Operation::Admin => "admin",
            Operation::Stats => "stats",
            Operation::DomainRead => "domain_read",
            Operation::DomainWrite => "domain_write",
            Operation::KeyRead => "key_read",
            Operation::KeyWrite => "key_write",
            Operation::AuditRead => "audit_read",
        }
    }
}

/// The admission of API requests: keys, scopes, rate limits, and the batch bound.
pub struct Admission {
    keys: Arc<ApiKeys>,
    limits: Arc<Limits>,
    metrics: Arc<Metrics>,
    batch_limit: usize,
    suffixes: DomainSuffixes,
}

impl Admission {
    /// Admission against `keys` and `limits`, counting outcomes in `metrics`; batches hold 1
    /// to `batch_limit` items; a tenant's keys may claim the hosts `suffixes` allow it.
    pub fn new(
        keys: Arc<ApiKeys>,
        limits: Arc<Limits>,
        metrics: Arc<Metrics>,
        batch_limit: usize,
        suffixes: DomainSuffixes,
    ) -> Self {
        Self {
            keys,
            limits,
            metrics,
            batch_limit,
            suffixes,
        }
    }

    /// Whether `caller` (admitted for [`Operation::DomainWrite`]) may claim `host`
    /// (normalised) for `tenant`: an `admin` key any host for any tenant; another key only for
    /// its own tenant ([`Error::Forbidden`] `admin` otherwise), and only a host under a suffix
    /// the operator allows that tenant ([`Error::HostNotAllowed`] otherwise).
    pub fn admit_claim(&self, caller: &Caller, tenant: &str, host: &str) -> Result<(), Error> {
        if caller.scopes.is_admin() {
            Ok(())
        } else if *caller.tenant != *tenant {
            Err(Error::Forbidden(Scope::Admin))
        } else if self.suffixes.covers(tenant, host) {
            Ok(())
        } else {
            Err(Error::HostNotAllowed(host.to_string()))
        }
    }

    /// The keys in force.
    pub fn keys(&self) -> &Arc<ApiKeys> {
        &self.keys
    }

    /// The caller of a request whose `Authorization` value is `authorization`:
    /// [`Error::Unauthenticated`] without a known, unexpired key.
    /// A key in no set this node holds is asked of the store first (see
    /// [`ApiKeys::authenticate_looking_up`]): a key made on another node works here at once.
    pub async fn authenticate(
        &self,
        authorization: Option<&str>,
        operation: Operation,
    ) -> Result<Caller, Error> {
        self.keys
            .authenticate_looking_up(authorization)
            .await
            .inspect_err(|_| {
                self.metrics.api_unauthenticated(operation.name());
            })
    }

    /// The caller whose YOURLS token (under `tokens`) signed `signed`:
    /// [`Error::Unauthenticated`] when no key in force did (a removed or expired key's token
    /// signs nothing).
    pub fn authenticate_signed(
        &self,
        tokens: &YourlsTokens,
        signed: &Signed,
        operation: Operation,
    ) -> Result<Caller, Error> {
        self.keys
            .authenticate_signed(tokens, signed)
            .inspect_err(|_| self.metrics.api_unauthenticated(operation.name()))
    }

    /// Counts a request refused before its credentials could be checked (a malformed or stale
    /// signature) as the unauthenticated request it is.
    pub fn refused_unauthenticated(&self, operation: Operation) {
        self.metrics.api_unauthenticated(operation.name());
    }

    /// Whether `caller` may run `operation` now: [`Error::Forbidden`] without its scope,
    /// [`Error::Invalid`] `invalid_batch` for a batch outside its bound,
    /// [`Error::RateLimited`] past the key's rate (creates and changes share one bucket,
    /// reads have their own).
    pub fn admit(&self, caller: &Caller, operation: Operation) -> Result<(), Error> {
        let outcome = self.check(caller, operation);
        let label = match &outcome {
            Ok(()) => "admitted",
            Err(Error::Forbidden(_)) => "forbidden",
            Err(Error::RateLimited { .. }) => "rate_limited",
            Err(_) => "invalid",
        };
        self.metrics
            .api_request(&caller.tenant, operation.name(), label);
        outcome
    }

    fn check(&self, caller: &Caller, operation: Operation) -> Result<(), Error> {
        let scope = operation.scope();
        if !caller.may(scope) {
            return Err(Error::Forbidden(scope));
        }
        let key = caller.key_id();
        let (charged, bucket) = match operation {
            Operation::Create => (self.limits.create(&key), "create"),
            Operation::CreateBatch { items } => {
                if items == 0 || items > self.batch_limit {
                    return Err(Error::invalid(
                        "invalid_batch",
                        format!("a batch holds 1 to {} items, not {items}", self.batch_limit),
                    ));
                }
                (self.limits.create_n(&key, items as u32), "create")
            }
            Operation::Delete
            | Operation::Update
            | Operation::Import
            | Operation::DomainWrite
            | Operation::KeyWrite => (self.limits.create(&key), "create"),
            Operation::Read
            | Operation::List
            | Operation::History
            | Operation::Export
            | Operation::Admin
            | Operation::Stats
            | Operation::DomainRead
            | Operation::KeyRead
            | Operation::AuditRead => (self.limits.read(&key), "read"),
        };
        // Counted under the budget that refused: a list past the read rate is a `read` refusal.
        charged.map_err(|retry_after| {
            self.metrics.rate_limited(bucket);
            Error::RateLimited { retry_after }
        })
    }

    /// [`Admission::authenticate`] and [`Admission::admit`] together, for a transport that has
    /// the header at hand.
    pub async fn admit_request(
        &self,
        authorization: Option<&str>,
        operation: Operation,
    ) -> Result<Caller, Error> {
        let caller = self.authenticate(authorization, operation).await?;
        self.admit(&caller, operation)?;
        Ok(caller)
    }
}
