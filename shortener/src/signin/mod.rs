//! People signing in to the console: OpenID Connect ([`oidc`]), sessions kept in the store,
//! and roles per tenant from the issuer's claims ([`roles`]).
//!
//! A session is an opaque random cookie; the store holds only its SHA-256, with the person's
//! subject, e-mail, name, claims and active tenant. Every request made with the cookie reads
//! that row (no cache), so a sign-out on one node holds on every node sharing the store at
//! once, and a session past its idle or absolute timeout is refused. The person's role, and so
//! their scopes, is worked out from the stored claims and the roles file in force at each
//! request: a change of the roles file applies to open sessions at the next reload. (About 450
//! lines: a sign-in, the session it opens and what it refreshes read as one sequence.)
//!
//! Requests made with a session that change anything must carry the session's anti-CSRF
//! token ([`Session::csrf_token`], a digest of the cookie the page reads from
//! `GET /console/session`, which another origin cannot read) in `X-CSRF-Token`, and an
//! `Origin` equal to the public URL's ([`SignIn::check_csrf`]). Requests with an API key
//! (`Authorization`) are untouched by all of this.

mod answer;
mod jwks;
pub mod oidc;
pub mod roles;
mod session;
mod tag;

pub use session::Session;
pub use tag::SessionTags;

use crate::access::ApiKeys;
use crate::store::{KeyStore, NewSession, SessionStore, Store, StoreError, StoredSession};
use chrono::Utc;
use oidc::{Attempt, Claims, ClientConfig, Provider, SignInError};
use roles::{Role, Roles};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// The header the console sends its anti-CSRF token in.
pub const CSRF_HEADER: &str = "x-csrf-token";

/// How often a session's last use is written at most (or a quarter of the idle timeout, when
/// that is shorter): the idle timeout's granularity.
const TOUCH_EVERY: chrono::TimeDelta = chrono::TimeDelta::seconds(60);

/// How often session rows past their absolute timeout, or signed out longer than
/// [`REVOKED_KEPT`], are purged.
pub const PURGE_EVERY: Duration = Duration::from_secs(3600);
/// The most session rows one purge run deletes (the next run takes the rest).
pub const PURGE_BATCH: usize = 10_000;
/// How long a signed-out session's row is kept (so the table still says who signed out when).
pub const REVOKED_KEPT: chrono::TimeDelta = chrono::TimeDelta::days(1);

/// The claims kept with a session: the standard ones about the token itself are left out.
const TOKEN_CLAIMS: [&str; 11] = [
    "iss",
    "aud",
    "exp",
    "iat",
    "nbf",
    "nonce",
    "at_hash",
    "c_hash",
    "azp",
    "auth_time",
    "jti",
];

/// Who records the roles file's changes in the audit log: each node that reloads the file
/// records what it saw change, one entry per affected tenant, naming itself (`node`) in the
/// summary, so a cluster of N nodes sharing a store holds N entries per change, one per node
/// (docs/audit.md says why).
pub struct Reporter {
    /// The audit log.
    pub audit: Arc<crate::audit::AuditLog>,
    /// This node's name.
    pub node: String,
}

impl Reporter {
    /// Records `changed`, one `role_mapping.change` entry per tenant.
    pub async fn report(self: Arc<Self>, changed: BTreeMap<String, roles::TenantChange>) {
        let tables = |tables: &[(String, String, Role)]| -> Vec<serde_json::Value> {
            tables
                .iter()
                .map(|(claim, value, role)| {
                    serde_json::json!({ "claim": claim, "value": value, "role": role.name() })
                })
                .collect()
        };
        for (tenant, change) in changed {
            let summary = serde_json::json!({
                "node": &self.node,
                "added": tables(&change.added),
                "removed": tables(&change.removed),
            });
            self.audit.record_role_mappings(&tenant, summary).await;
        }
    }
}

/// The settings of sign-in.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The relying party.
    pub client: ClientConfig,
    /// How long a session may go unused.
    pub idle: Duration,
    /// How long a session lasts at most.
    pub absolute: Duration,
    /// The public URL (its origin is what `Origin` must be; `https` makes cookies `Secure`).
    pub public_url: String,
    /// The secret session cookies are tagged under (derived from the code-space key).
    pub tags: SessionTags,
}

/// Why a session request is refused.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// No session, or one that is unknown, signed out or timed out.
    #[error("no valid session")]
    Unauthenticated,
    /// A state-changing request without the right anti-CSRF token or from another origin.
    #[error("cross-site request refused: {0}")]
    Csrf(&'static str),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Sign-in, sessions and roles of one node.
pub struct SignIn {
    provider: Provider,
    roles: Arc<Roles>,
    keys: Arc<ApiKeys>,
    store: Store,
    tags: SessionTags,
    idle: chrono::TimeDelta,
    absolute: chrono::TimeDelta,
    origin: String,
    secure: bool,
}

/// The SHA-256 of a cookie's value: what the store knows a session by.
fn digest(cookie: &str) -> [u8; 32] {
    Sha256::digest(cookie.as_bytes()).into()
}

/// The anti-CSRF token of the session whose cookie is `cookie`.
fn csrf_of(cookie: &str) -> String {
    let mut h = Sha256::new();
    h.update(b"shortener console csrf\0");
    h.update(cookie.as_bytes());
    base64::Engine::encode(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD,
        h.finalize(),
    )
}

fn equal(a: &str, b: &str) -> bool {
    bool::from(subtle::ConstantTimeEq::ct_eq(a.as_bytes(), b.as_bytes()))
}

impl SignIn {
    /// Sign-in over `store`, with roles from `roles` in the tenants `keys` knows.
    pub fn new(
        settings: Settings,
        roles: Arc<Roles>,
        keys: Arc<ApiKeys>,
        store: Store,
    ) -> Result<Self, SignInError> {
        let public = url::Url::parse(&settings.public_url)
            .map_err(|_| SignInError::Provider("the public URL is no URL".into()))?;
        let delta = |d: Duration| {
            chrono::TimeDelta::from_std(d).unwrap_or(chrono::TimeDelta::seconds(3600))
        };
        Ok(Self {
            provider: Provider::new(settings.client)?,
            roles,
            keys,
            store,
            tags: settings.tags,
            idle: delta(settings.idle),
            absolute: delta(settings.absolute),
            origin: public.origin().ascii_serialization(),
            secure: public.scheme() == "https",
        })
    }

    /// The issuer.
    pub fn provider(&self) -> &Provider {
        &self.provider
    }

    /// The roles file in force.
    pub fn roles(&self) -> &Arc<Roles> {
        &self.roles
    }

    /// Whether cookies are `Secure` (and `__Host-` named): the public URL is `https`.
    pub fn secure(&self) -> bool {
        self.secure
    }

    /// The public URL's origin (`https://sho.rt`).
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// Whether a tenant exists: it holds keys in the keys file.
    fn tenant_exists(&self, tenant: &str) -> bool {
        self.keys.tenants().iter().any(|t| t == tenant)
    }

    /// The role `claims` give in each known tenant.
    pub fn roles_of(&self, claims: &Claims) -> BTreeMap<String, Role> {
        roles::resolve(&self.roles.mappings(), claims, |t| self.tenant_exists(t))
    }

    /// The mapped tenants that do not exist: their mappings are left out.
    pub fn unknown_tenants(&self) -> Vec<String> {
        let mut unknown: Vec<String> = self
            .roles
            .mappings()
            .iter()
            .filter(|m| !self.tenant_exists(&m.tenant))
            .map(|m| m.tenant.clone())
            .collect();
        unknown.sort();
        unknown.dedup();
        unknown
    }

    /// Logs a warning naming each mapped tenant that does not exist.
    pub fn warn_unknown_tenants(&self) {
        for tenant in self.unknown_tenants() {
            tracing::warn!(
                tenant = %tenant,
                "the roles file maps to a tenant that holds no keys; its mappings are ignored"
            );
        }
    }

    /// Re-reads the roles file of `signin` (if any) when it changes, warning about unknown
    /// tenants after each load and recording in the audit log what each reload changed
    /// ([`Reporter::report`]), until `stop`.
    pub async fn watch(
        signin: Option<Arc<Self>>,
        reporter: Reporter,
        every: Duration,
        stop: tokio_util::sync::CancellationToken,
    ) {
        let Some(signin) = signin else {
            return;
        };
        let Some(path) = signin.roles.file().cloned() else {
            return;
        };
        let reloads = signin.roles.reloads();
        let reporter = Arc::new(reporter);
        let reload = move || {
            let before = signin.roles.mappings();
            let count = signin.roles.reload()?;
            signin.warn_unknown_tenants();
            let changed = roles::changes(&before, &signin.roles.mappings());
            if !changed.is_empty() {
                tokio::spawn(Arc::clone(&reporter).report(changed));
            }
            Ok(format!("{count} role mappings"))
        };
        crate::watch::watch_file(path, "roles", every, &reloads, reload, stop).await;
    }

    /// Deletes at most [`PURGE_BATCH`] session rows past their absolute timeout or signed out
    /// more than [`REVOKED_KEPT`] ago; how many it deleted.
    pub async fn purge_once(&self) -> Result<usize, StoreError> {
        let now = Utc::now();
        self.store
            .purge_sessions(now, now - REVOKED_KEPT, PURGE_BATCH)
            .await
    }

    /// Purges old session rows of `signin` (if any) every `every` until `stop`, as the audit
    /// log's purge runs: any node may run it, a run is bounded, a failed run waits for the
    /// next.
    pub async fn run_purge(
        signin: Option<Arc<Self>>,
        every: Duration,
        stop: tokio_util::sync::CancellationToken,
    ) {
        let Some(signin) = signin else {
            return;
        };
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = ticks.tick() => {}
            }
            match signin.purge_once().await {
                Ok(0) => {}
                Ok(n) => tracing::info!(removed = n, "ended console sessions purged"),
                Err(e) => tracing::warn!(error = %e, "session purge failed; the next run retries"),
            }
        }
    }

    /// Finishes a sign-in: exchanges `code` for the verified claims of `attempt`, and opens a
    /// session for them. Returns the new cookie's value.
    pub async fn finish(&self, code: &str, attempt: &Attempt) -> Result<String, SignInError> {
        let claims = self.provider.exchange(code, attempt).await?;
        let text = |name: &str| {
            claims
                .get(name)
                .and_then(|v| v.as_str())
                .map(str::to_string)
        };
        let subject = text("sub").unwrap_or_default();
        let roles = self.roles_of(&claims);
        let kept: Claims = claims
            .iter()
            .filter(|(name, _)| !TOKEN_CLAIMS.contains(&name.as_str()))
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect();
        let cookie = self.tags.issue();
        let kept = serde_json::Value::Object(kept).to_string();
        let session = NewSession {
            digest: digest(&cookie),
            subject: subject.clone(),
            email: text("email"),
            name: text("name").or_else(|| text("preferred_username")),
            claims: kept.clone(),
            tenant: roles.keys().next().cloned(),
            expires_at: Utc::now() + self.absolute,
        };
        self.store.insert_session(&session).await.map_err(|e| {
            // The store's words stay in the log: the page and the audit entry are read by
            // whoever signs in.
            tracing::warn!(error = %e, "a console session could not be stored");
            SignInError::Provider("the session could not be stored".into())
        })?;
        tracing::info!(
            subject = %subject,
            tenants = roles.len(),
            "a person signed in to the console"
        );
        // The person's keys and open sessions follow what this sign-in says of them (every
        // node reads the keys at its next key reload). Should that fail, the sign-in fails too
        // (its cookie is never handed out): keys must not keep claims this sign-in took away.
        let person = crate::store::Person {
            subject: &subject,
            claims: &kept,
            email: session.email.as_deref(),
            name: session.name.as_deref(),
        };
        let keys = self
            .store
            .refresh_person_claims(&person)
            .await
            .map_err(|e| {
                tracing::warn!(error = %e, "a person's keys and sessions could not take a sign-in's claims");
                SignInError::Provider(
                    "the person's keys and sessions could not take this sign-in's claims".into(),
                )
            })?;
        if keys > 0 {
            tracing::info!(subject = %subject, keys, "a person's API keys follow their new sign-in's claims");
        }
        Ok(cookie)
    }

    /// The session whose cookie is `cookie`, as of now: [`SessionError::Unauthenticated`] when
    /// it is unknown, signed out, idle too long or past its absolute timeout.
    pub async fn session(&self, cookie: &str) -> Result<Session, SessionError> {
        // A cookie this deployment did not issue is refused unread ([`tag`]).
        if !self.tags.verify(cookie) {
            return Err(SessionError::Unauthenticated);
        }
        let digest = digest(cookie);
        let stored = self
            .store
            .session(digest)
            .await?
            .ok_or(SessionError::Unauthenticated)?;
        let now = Utc::now();
        if now >= stored.expires_at || now - stored.last_seen_at >= self.idle {
            return Err(SessionError::Unauthenticated);
        }
        if now - stored.last_seen_at >= TOUCH_EVERY.min(self.idle / 4) {
            self.store.touch_session(digest, now).await?;
        }
        Ok(self.person(digest, csrf_of(cookie), stored))
    }

    fn person(&self, digest: [u8; 32], csrf: String, stored: StoredSession) -> Session {
        let claims: Claims = serde_json::from_str(&stored.claims).unwrap_or_default();
        let roles = self.roles_of(&claims);
        let tenant = stored
            .tenant
            .filter(|t| roles.contains_key(t))
            .or_else(|| roles.keys().next().cloned());
        Session {
            digest,
            csrf,
            subject: stored.subject,
            email: stored.email,
            name: stored.name,
            roles,
            tenant,
            expires_at: stored.expires_at,
            claims: Arc::from(stored.claims),
        }
    }

    /// Refuses a state-changing request made with `session` unless it carries the session's
    /// anti-CSRF token (`token`) and comes from the public URL's origin (`origin`).
    pub fn check_csrf(
        &self,
        session: &Session,
        token: Option<&str>,
        origin: Option<&str>,
    ) -> Result<(), SessionError> {
        if origin != Some(self.origin.as_str()) {
            return Err(SessionError::Csrf("the request's Origin is not this site"));
        }
        match token {
            None => Err(SessionError::Csrf("no anti-CSRF token")),
            Some(token) if !equal(token, session.csrf_token()) => {
                Err(SessionError::Csrf("a wrong anti-CSRF token"))
            }
            Some(_) => Ok(()),
        }
    }

    /// Makes `tenant` the session's active tenant; false when the person holds no role there.
    pub async fn switch(&self, session: &Session, tenant: &str) -> Result<bool, SessionError> {
        if !session.roles.contains_key(tenant) {
            return Ok(false);
        }
        Ok(self
            .store
            .switch_session_tenant(session.digest, tenant)
            .await?)
    }

    /// Signs the session out: its row is revoked, on every node at once.
    pub async fn sign_out(&self, session: &Session) -> Result<(), SessionError> {
        self.store.revoke_session(session.digest).await?;
        tracing::info!(subject = %session.subject, "a person signed out of the console");
        Ok(())
    }
}
