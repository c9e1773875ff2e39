//! Who is asking: the identity an authenticated request acts as.

use super::Scopes;
use super::scope::Scope;
use std::sync::Arc;

/// An authenticated caller: the tenant whose links it acts on, the name of its API key (shown
/// in logs, metrics and a link's history, never the secret), and what the key may do. A person
/// signed in to the console is a caller too: `key` is then their e-mail address (or
/// `oidc:<subject>`), which no key name can be, and `person` names them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Caller {
    /// The tenant that owns what this caller creates.
    pub tenant: Arc<str>,
    /// The API key's name, unique within its tenant.
    pub key: Arc<str>,
    /// What the key may do.
    pub scopes: Scopes,
    /// The person who signed in, when a person (not a machine's key) makes the request; `None`
    /// for API keys. Sign-in fills it; nothing else does.
    pub person: Option<Arc<Person>>,
}

/// A person as the identity provider names them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Person {
    /// The issuer's stable identifier of the person (the ID token's `sub`).
    pub subject: Arc<str>,
    /// Their e-mail, when the issuer gives one.
    pub email: Option<Arc<str>>,
}

impl Caller {
    /// A key's caller, with no person.
    pub fn of_key(tenant: Arc<str>, key: Arc<str>, scopes: Scopes) -> Self {
        Self {
            tenant,
            key,
            scopes,
            person: None,
        }
    }

    /// Whether the caller may act on a link of `tenant`: its own tenant's, or any with `admin`.
    pub fn sees(&self, tenant: &str) -> bool {
        self.scopes.is_admin() || *self.tenant == *tenant
    }

    /// The tenant a store read or write must be confined to: `None` for `admin`, which sees
    /// every tenant.
    pub fn tenant_scope(&self) -> Option<&str> {
        (!self.scopes.is_admin()).then_some(&*self.tenant)
    }

    /// Whether the caller's key grants `scope`.
    pub fn may(&self, scope: Scope) -> bool {
        self.scopes.grants(scope)
    }

    /// The key's identity across tenants (`tenant/name`), for rate limits.
    pub fn key_id(&self) -> String {
        format!("{}/{}", self.tenant, self.key)
    }
}
