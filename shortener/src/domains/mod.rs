//! Branded domains as tenant objects: a host belongs to at most one tenant, which sets what its
//! requests do (fallbacks, the redirect status, robots). [`DomainService`] owns them: the host
//! rules, the settings' rules, the tenant confinement; the database decides between two claims
//! of one host. Who may claim which host is the admission's
//! ([`crate::access::Admission::admit_claim`]).

mod cache;
pub mod files;
mod metrics;

pub use cache::{DomainCache, MAX_HOSTS};
pub use metrics::DomainMetrics;

use crate::access::check_name;
use crate::audit::{Action, AuditLog, ObjectKind, Subject};
use crate::domain::{
    Caller, CreateRules, Domain, DomainSettings, Error, normalise_host, patch_settings, path_host,
};
use crate::store::{DomainRemoval, DomainStore, LIVE_LINKS_COUNTED, Store};
use serde_json::{Map, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The most domains one page of a list holds.
pub const MAX_PAGE: i64 = 1000;

/// Domains a list page holds when the caller does not say.
pub const DEFAULT_PAGE: i64 = 100;

/// One page of a list: the domains, and the cursor of the next page when there may be one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainPage {
    /// The domains, in host order.
    pub domains: Vec<Domain>,
    /// The cursor of the next page (the last host of this one), if this page is full.
    pub next_cursor: Option<String>,
}

/// The branded domains: claims, reads, changes and removals, each confined to the caller's
/// tenant (`admin` sees every tenant's).
pub struct DomainService {
    store: Store,
    reserved: Vec<String>,
    rules: CreateRules,
    cache: DomainCache,
    audit: Arc<AuditLog>,
}

fn unknown(host: &str) -> Error {
    Error::NotFound(host.to_string())
}

impl DomainService {
    /// The service over `store`; `reserved` are the node's own hosts (the public URL's and the
    /// short domains), which no tenant may claim; `rules` are what a fallback URL must pass;
    /// `ttl` and `negative_ttl` how long the public listener's lookups by host are kept
    /// ([`DomainCache`]).
    pub fn new(
        store: Store,
        reserved: &[String],
        rules: CreateRules,
        ttl: Duration,
        negative_ttl: Duration,
        audit: Arc<AuditLog>,
    ) -> Self {
        let reserved = reserved
            .iter()
            .filter_map(|h| path_host(h).or_else(|| Some(h.to_ascii_lowercase())))
            .collect();
        Self {
            cache: DomainCache::new(store.clone(), ttl, negative_ttl),
            store,
            reserved,
            rules,
            audit,
        }
    }

    /// The domain a request's `host` (in its normal form, [`files::request_host`]) names when
    /// that is known without the store: none for the node's own hosts (never a domain), else
    /// what the [`DomainCache`] holds fresh as of `now`. `None`: ask
    /// [`DomainService::load_host`].
    pub fn cached_host(&self, host: &str, now: Instant) -> Option<Option<Arc<Domain>>> {
        if self.is_own_host(host) {
            return Some(None);
        }
        self.cache.cached(host, now)
    }

    /// Whether `host` (in normal form) is one of the node's own: the default domain's.
    pub fn is_own_host(&self, host: &str) -> bool {
        self.reserved.iter().any(|h| h == host)
    }

    /// The domain `host` names, read from the store (and cached).
    pub async fn load_host(&self, host: &str) -> Result<Option<Arc<Domain>>, Error> {
        Ok(self.cache.load(host).await?)
    }

    /// The cache of lookups by host, for the change feed to keep fresh.
    pub fn cache(&self) -> &DomainCache {
        &self.cache
    }

    /// `input` as a host a domain may have, in its normal form, or why not
    /// ([`crate::domain::normalise_host`]).
    pub fn host(&self, input: &str) -> Result<String, Error> {
        normalise_host(input, &self.reserved)
    }

    /// The tenant a claim is for: `named` (checked as a tenant name), or the caller's own.
    pub fn tenant(&self, caller: &Caller, named: Option<&str>) -> Result<String, Error> {
        match named {
            None => Ok(caller.tenant.to_string()),
            Some(name) => {
                check_name("tenant", name, false)
                    .map_err(|message| Error::invalid("invalid_tenant", message))?;
                Ok(name.to_string())
            }
        }
    }

    /// Claims `host` (normalised, admitted) for `tenant` on behalf of `caller`: the new
    /// domain, or [`Error::DomainTaken`] when the host is a domain already, the tenant's own or
    /// another's (nothing is written).
    pub async fn claim(&self, caller: &Caller, tenant: &str, host: &str) -> Result<Domain, Error> {
        let domain = Domain {
            host: host.to_string(),
            tenant: tenant.to_string(),
            created_at: chrono::Utc::now(),
            created_by: caller.key_id(),
            settings: DomainSettings::default(),
        };
        let claimed = self
            .store
            .insert_domain(&domain)
            .await?
            .ok_or_else(|| Error::DomainTaken(host.to_string()))?;
        self.cache.invalidate(&claimed.host);
        tracing::info!(
            host = %claimed.host,
            tenant = %claimed.tenant,
            key = %caller.key_id(),
            "domain claimed"
        );
        let subject = Subject {
            tenant: &claimed.tenant,
            action: Action::DomainClaim,
            kind: ObjectKind::Domain,
            id: &claimed.host,
        };
        let change = serde_json::json!({ "host": &claimed.host, "tenant": &claimed.tenant });
        self.audit.record(caller, subject, change).await;
        Ok(claimed)
    }

    /// A page of the domains `caller` sees, in host order: `limit` of them (1 to
    /// [`MAX_PAGE`]) after the host `cursor`.
    pub async fn list(
        &self,
        caller: &Caller,
        cursor: Option<&str>,
        limit: Option<i64>,
    ) -> Result<DomainPage, Error> {
        let limit = limit.unwrap_or(DEFAULT_PAGE);
        if !(1..=MAX_PAGE).contains(&limit) {
            return Err(Error::bad_request(
                "invalid_limit",
                format!("limit is 1 to {MAX_PAGE}"),
            ));
        }
        let after = match cursor {
            None => None,
            Some(text) => Some(path_host(text).filter(|h| h == text).ok_or_else(|| {
                Error::bad_request("invalid_cursor", "the cursor is not one a list gave")
            })?),
        };
        let domains = self
            .store
            .domains(caller.tenant_scope(), after.as_deref(), limit)
            .await?;
        let next_cursor = if domains.len() as i64 == limit {
            domains.last().map(|d| d.host.clone())
        } else {
            None
        };
        Ok(DomainPage {
            domains,
            next_cursor,
        })
    }

    /// The domain of the path's `host`, if `caller` sees it (another tenant's answers as an
    /// unknown host does).
    pub async fn get(&self, caller: &Caller, host: &str) -> Result<Domain, Error> {
        let host = path_host(host).ok_or_else(|| unknown(host))?;
        self.store
            .domain(&host, caller.tenant_scope())
            .await?
            .ok_or_else(|| unknown(&host))
    }

    /// Applies the JSON merge patch `patch` to the settings of the path's `host`
    /// ([`crate::domain::patch_settings`]); the domain as it is now. Nothing is written for a
    /// refused patch.
    pub async fn update(
        &self,
        caller: &Caller,
        host: &str,
        patch: &Map<String, Value>,
    ) -> Result<Domain, Error> {
        let current = self.get(caller, host).await?;
        let settings = patch_settings(&current.host, &current.settings, patch, &self.rules)?;
        let updated = self
            .store
            .set_domain_settings(&current.host, caller.tenant_scope(), &settings)
            .await?
            .ok_or_else(|| unknown(&current.host))?;
        self.cache.invalidate(&updated.host);
        tracing::info!(host = %updated.host, key = %caller.key_id(), "domain changed");
        let subject = Subject {
            tenant: &updated.tenant,
            action: Action::DomainUpdate,
            kind: ObjectKind::Domain,
            id: &updated.host,
        };
        self.audit
            .record(caller, subject, Value::Object(patch.clone()))
            .await;
        Ok(updated)
    }

    /// Removes the domain of the path's `host`, if `caller` sees it. A domain that live links
    /// are still on is kept: `domain_has_links` (409) says how many; delete them, or move them
    /// to another domain, first. Deleted links do not hold it (their codes stay gone).
    pub async fn delete(&self, caller: &Caller, host: &str) -> Result<(), Error> {
        let current = self.get(caller, host).await?;
        let host = current.host;
        match self
            .store
            .delete_domain(&host, caller.tenant_scope())
            .await?
        {
            DomainRemoval::Removed => {}
            DomainRemoval::NotFound => return Err(unknown(&host)),
            DomainRemoval::HasLinks(live) => {
                let count = if live >= LIVE_LINKS_COUNTED {
                    format!("at least {live}")
                } else {
                    live.to_string()
                };
                return Err(Error::conflict(
                    "domain_has_links",
                    format!(
                        "{count} live links are on {host}; delete them (or move them to another domain) before removing it (GET /api/v1/links?domain={host} lists them)"
                    ),
                ));
            }
        }
        self.cache.invalidate(&host);
        tracing::info!(host = %host, key = %caller.key_id(), "domain removed");
        let subject = Subject {
            tenant: &current.tenant,
            action: Action::DomainDelete,
            kind: ObjectKind::Domain,
            id: &host,
        };
        self.audit
            .record(caller, subject, serde_json::json!({ "host": &host }))
            .await;
        Ok(())
    }
}
