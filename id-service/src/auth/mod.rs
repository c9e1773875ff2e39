//! Callers, tokens, scopes and quotas, and the one check every call passes ([`Gate::admit`]).
//!
//! A caller has a name, a token (the service keeps only its SHA-256), the namespaces it may use,
//! its scopes and its quotas, all from the tokens file ([`tokens_file`]). `Gate::admit`
//! authenticates the bearer token, parses the request (so malformed input is answered only to
//! callers the service knows), and checks the scope and the namespace the request acts on. The
//! handlers then charge the caller's quotas before touching the ledger, and record leases under
//! [`Principal::holder`]: `<caller>/<instance>`, so no caller can write another's name.
//!
//! Without a tokens file the service only starts with `--insecure-no-auth`; then every call is
//! admitted as [`Principal::Insecure`], with every scope, no quota, and the holder as sent.

pub mod quota;
pub mod reload;
pub mod token;
pub mod tokens_file;

use crate::domain::{CallerName, Holder, Namespace, Scoped};
use crate::error::Error;
use crate::metrics::Metrics;
use quota::Quotas;
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, RwLock};
use token::TokenDigest;
use tokens_file::CallerSpec;

/// What a caller may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// `LeaseBlock`: hold blocks itself.
    Lease,
    /// `AllocateIds` and the JSON endpoint.
    Allocate,
    /// `LookupId`, `ListLeases`.
    Lookup,
    /// `NamespaceAdmin`.
    Admin,
}

impl Scope {
    /// Every scope, in documentation order.
    pub const ALL: [Scope; 4] = [Scope::Lease, Scope::Allocate, Scope::Lookup, Scope::Admin];

    /// The name used in the tokens file.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Lease => "lease",
            Scope::Allocate => "allocate",
            Scope::Lookup => "lookup",
            Scope::Admin => "admin",
        }
    }

    /// Parses a scope name.
    pub fn parse(name: &str) -> Result<Scope, String> {
        Scope::ALL
            .into_iter()
            .find(|s| s.as_str() == name)
            .ok_or_else(|| {
                format!(
                    "unknown scope \"{}\" (known: lease, allocate, lookup, admin)",
                    crate::logsafe::Escaped(name)
                )
            })
    }
}

/// A set of scopes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ScopeSet(u8);

impl ScopeSet {
    /// This set plus `scope`.
    pub fn with(self, scope: Scope) -> Self {
        Self(self.0 | 1 << scope as u8)
    }

    /// Whether `scope` is in the set.
    pub fn contains(self, scope: Scope) -> bool {
        self.0 & (1 << scope as u8) != 0
    }
}

/// The namespaces a caller may use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NamespaceGrant {
    /// Every namespace (`["*"]`).
    All,
    /// Only these.
    Only(BTreeSet<Namespace>),
}

impl NamespaceGrant {
    /// Whether `namespace` is covered.
    pub fn allows(&self, namespace: &Namespace) -> bool {
        match self {
            NamespaceGrant::All => true,
            NamespaceGrant::Only(set) => set.contains(namespace),
        }
    }
}

/// A known caller and its live quotas.
pub struct Caller {
    /// Name, namespaces, scopes and quota settings.
    pub spec: CallerSpec,
    quotas: Arc<Quotas>,
}

/// The callers of one version of the tokens file, found by their token's digest.
pub struct CallerSet {
    by_digest: HashMap<TokenDigest, Arc<Caller>>,
}

impl CallerSet {
    /// Builds the set; a caller whose name and quota settings were in `previous` keeps its
    /// buckets (a reload must not refill them).
    pub fn build(specs: Vec<CallerSpec>, previous: Option<&CallerSet>) -> Self {
        let old: HashMap<&CallerName, &Arc<Quotas>> = previous
            .map(|p| {
                p.by_digest
                    .values()
                    .map(|c| (&c.spec.name, &c.quotas))
                    .collect()
            })
            .unwrap_or_default();
        let by_digest = specs
            .into_iter()
            .map(|spec| {
                let quotas = match old.get(&spec.name) {
                    Some(q) if q.spec() == spec.quota => Arc::clone(q),
                    _ => Arc::new(Quotas::new(spec.quota)),
                };
                (spec.digest, Arc::new(Caller { spec, quotas }))
            })
            .collect();
        Self { by_digest }
    }

    /// How many callers there are.
    pub fn len(&self) -> usize {
        self.by_digest.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.by_digest.is_empty()
    }
}

/// Who is calling, once the token was checked.
#[derive(Clone)]
pub enum Principal {
    /// A caller from the tokens file.
    Caller(Arc<Caller>),
    /// Anyone, on a service started with `--insecure-no-auth`.
    Insecure,
}

impl Principal {
    /// The caller's name (`-` without authentication), for logs and metrics.
    pub fn name(&self) -> &str {
        match self {
            Principal::Caller(c) => c.spec.name.as_str(),
            Principal::Insecure => "-",
        }
    }

    /// Whether the caller may use `namespace` (at all: the scope is checked separately).
    pub fn may_use(&self, namespace: &Namespace) -> bool {
        match self {
            Principal::Caller(c) => c.spec.namespaces.allows(namespace),
            Principal::Insecure => true,
        }
    }

    /// The namespaces the caller may see, for listings; `None` means every one.
    pub fn visible_namespaces(&self) -> Option<Vec<String>> {
        match self {
            Principal::Caller(c) => match &c.spec.namespaces {
                NamespaceGrant::All => None,
                NamespaceGrant::Only(set) => Some(set.iter().map(|n| n.to_string()).collect()),
            },
            Principal::Insecure => None,
        }
    }

    fn authorize(&self, scope: Scope, namespace: Option<&Namespace>) -> Result<(), Error> {
        let Principal::Caller(caller) = self else {
            return Ok(());
        };
        if !caller.spec.scopes.contains(scope) {
            return Err(Error::PermissionDenied(format!(
                "caller {} lacks the {} scope",
                caller.spec.name,
                scope.as_str()
            )));
        }
        match namespace {
            Some(ns) if !caller.spec.namespaces.allows(ns) => Err(Error::PermissionDenied(
                format!("caller {} may not use namespace {ns}", caller.spec.name),
            )),
            _ => Ok(()),
        }
    }

    /// The holder the ledger records for a lease this caller takes for `instance`:
    /// `<caller>/<instance>`, or the instance alone without authentication.
    pub fn holder(&self, instance: &Holder) -> Result<String, Error> {
        let Principal::Caller(caller) = self else {
            return Ok(instance.as_str().to_string());
        };
        let name = caller.spec.name.as_str();
        let room = Holder::MAX_CHARS - 1 - name.len();
        if instance.chars() > room {
            return Err(Error::invalid(format!(
                "holder is {} characters long; caller {name} may use at most {room}",
                instance.chars()
            )));
        }
        Ok(format!("{name}/{}", instance.as_str()))
    }

    /// Takes one token of the caller's lease quota.
    pub fn take_lease(&self) -> Result<(), Error> {
        match self {
            Principal::Caller(c) => c.quotas.take_lease(c.spec.name.as_str()),
            Principal::Insecure => Ok(()),
        }
    }

    /// Takes `count` tokens of the caller's ID quota.
    pub fn take_ids(&self, count: u64) -> Result<(), Error> {
        match self {
            Principal::Caller(c) => c.quotas.take_ids(c.spec.name.as_str(), count),
            Principal::Insecure => Ok(()),
        }
    }
}

enum Mode {
    Tokens(RwLock<Arc<CallerSet>>),
    Insecure,
}

/// The one check every call passes: token, then request, then scope and namespace.
pub struct Gate {
    mode: Mode,
    metrics: Arc<Metrics>,
}

impl Gate {
    /// A gate that admits the callers of `callers`.
    pub fn with_callers(callers: CallerSet, metrics: Arc<Metrics>) -> Self {
        metrics.set_callers(callers.len());
        Self {
            mode: Mode::Tokens(RwLock::new(Arc::new(callers))),
            metrics,
        }
    }

    /// A gate that admits everyone (`--insecure-no-auth`).
    pub fn insecure(metrics: Arc<Metrics>) -> Self {
        Self {
            mode: Mode::Insecure,
            metrics,
        }
    }

    /// Swaps in a new set of callers at once (a reload of the tokens file), keeping the
    /// buckets of callers whose quota settings did not change.
    pub fn replace(&self, specs: Vec<CallerSpec>) -> usize {
        let Mode::Tokens(set) = &self.mode else {
            return 0;
        };
        let current = self.current();
        let next = Arc::new(CallerSet::build(specs, current.as_deref()));
        let count = next.len();
        *set.write().unwrap_or_else(|poisoned| poisoned.into_inner()) = next;
        self.metrics.set_callers(count);
        count
    }

    fn current(&self) -> Option<Arc<CallerSet>> {
        match &self.mode {
            // A panic while the lock was held cannot leave the Arc half-written.
            Mode::Tokens(set) => Some(Arc::clone(
                &set.read().unwrap_or_else(|poisoned| poisoned.into_inner()),
            )),
            Mode::Insecure => None,
        }
    }

    /// Authenticates `authorization` (the raw header or metadata value), then parses the
    /// request with `parse`, then checks that the caller has `scope` and may use the namespace
    /// the request names. Refusals are counted; nothing is ever written before this passes.
    pub fn admit<R: Scoped>(
        &self,
        authorization: Option<&[u8]>,
        scope: Scope,
        parse: impl FnOnce() -> Result<R, Error>,
    ) -> Result<(Principal, R), Error> {
        let principal = self.authenticate(authorization).inspect_err(|error| {
            self.metrics.unauthenticated();
            tracing::debug!(%error, "call refused");
        })?;
        let request = parse()?;
        principal
            .authorize(scope, request.namespace())
            .inspect_err(|error| {
                self.metrics.permission_denied(principal.name());
                tracing::info!(caller = principal.name(), %error, "call refused");
            })?;
        Ok((principal, request))
    }

    fn authenticate(&self, authorization: Option<&[u8]>) -> Result<Principal, Error> {
        let Some(callers) = self.current() else {
            return Ok(Principal::Insecure);
        };
        let Some(value) = authorization else {
            return Err(Error::Unauthenticated(
                "missing authorization: Bearer <token>".into(),
            ));
        };
        let presented = value
            .strip_prefix(b"Bearer ")
            .filter(|t| !t.is_empty() && t.len() <= token::MAX_CHARS)
            .ok_or_else(|| Error::Unauthenticated("authorization must be Bearer <token>".into()))?;
        // Looked up by digest: the time a miss takes says nothing about how close a guess was.
        callers
            .by_digest
            .get(&token::digest(presented))
            .map(|caller| Principal::Caller(Arc::clone(caller)))
            .ok_or_else(|| Error::Unauthenticated("unknown token".into()))
    }
}

#[cfg(test)]
mod tests;
