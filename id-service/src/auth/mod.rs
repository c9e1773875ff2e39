//! Callers, tokens, scopes and quotas, and the one check every call passes ([`Gate::admit`]).
//!
//! A caller has a name, a token (the service keeps only its SHA-256), the namespaces it may use,
//! its scopes and its quotas, all from the tokens file ([`tokens_file`]). `Gate::admit`
//! authenticates the bearer token, parses the request (so malformed input is answered only to
//! callers the service knows), and checks the scope and the namespace the request acts on. The
//! handlers then charge the caller's quotas before granting (the replica's own buckets, then the
//! buckets every replica shares in the ledger, [`SharedQuotas`]), and record leases under
//! [`Principal::holder`]: `<caller>/<instance>`, so no caller can write another's name.
//!
//! Without a tokens file the service only starts with `--insecure-no-auth`; then every call is
//! admitted as [`Principal::Insecure`], with every scope, no quota, and the holder as sent.

mod principal;
pub mod quota;
pub mod reload;
mod scope;
mod shared_quota;
pub mod token;
pub mod tokens_file;

pub use principal::{Caller, CallerSet, Principal};
pub use scope::{NamespaceGrant, Scope, ScopeSet, UnknownScope};
pub use shared_quota::SharedQuotas;

use crate::domain::Scoped;
use crate::error::Error;
use crate::metrics::Metrics;
use std::sync::{Arc, RwLock};
use tokens_file::CallerSpec;

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
    /// the request names. Refusals are counted (and logged by the caller of this, with who was
    /// refused, through its throttled log); nothing is ever written before this passes.
    pub fn admit<R: Scoped>(
        &self,
        authorization: Option<&[u8]>,
        scope: Scope,
        parse: impl FnOnce() -> Result<R, Error>,
    ) -> Result<(Principal, R), Refused> {
        let principal = self.authenticate(authorization).map_err(|error| {
            self.metrics.unauthenticated();
            tracing::debug!(%error, "call refused");
            Refused {
                caller: None,
                error,
            }
        })?;
        let refused = |error| Refused {
            caller: Some(principal.clone()),
            error,
        };
        let request = parse().map_err(refused)?;
        if let Err(error) = principal.authorize(scope, request.namespace()) {
            self.metrics.permission_denied(principal.name());
            return Err(refused(error));
        }
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
            .find(&token::digest(presented))
            .map(|caller| Principal::Caller(Arc::clone(caller)))
            .ok_or_else(|| Error::Unauthenticated("unknown token".into()))
    }
}

/// A call the gate refused, and who made it when the refusal came after its token was taken.
pub struct Refused {
    /// The authenticated caller (none when the token was missing or unknown).
    pub caller: Option<Principal>,
    /// Why.
    pub error: Error,
}

impl Refused {
    /// The caller's name for a log line (`""` for a caller that was never admitted).
    pub fn caller_name(&self) -> &str {
        self.caller.as_ref().map_or("", Principal::name)
    }

    /// Why, with the caller's name kept in `caller` for the log line of the refusal.
    pub fn noted(self, caller: &std::sync::OnceLock<String>) -> Error {
        let _ = caller.set(self.caller_name().to_string());
        self.error
    }
}

impl std::fmt::Debug for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Refused")
            .field("caller", &self.caller_name())
            .field("error", &self.error)
            .finish()
    }
}

impl From<Refused> for Error {
    fn from(refused: Refused) -> Self {
        refused.error
    }
}

#[cfg(test)]
mod tests;
