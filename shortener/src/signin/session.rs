//! A signed-in person as of one request, and the caller they act as.

use super::roles::Role;
use crate::domain::{Caller, Person, Scopes};
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A signed-in person, as of one request.
#[derive(Debug, Clone)]
pub struct Session {
    pub(super) digest: [u8; 32],
    pub(super) csrf: String,
    /// The person's subject at the issuer.
    pub subject: String,
    /// Their e-mail address.
    pub email: Option<String>,
    /// Their name.
    pub name: Option<String>,
    /// Their role in each tenant (known tenants only).
    pub roles: BTreeMap<String, Role>,
    /// The tenant they act in now (one of `roles`), if any.
    pub tenant: Option<String>,
    /// When the session ends whatever its use.
    pub expires_at: DateTime<Utc>,
    /// The claims of the sign-in the roles file may name, as stored (a JSON object).
    pub(super) claims: Arc<str>,
}

impl Session {
    /// The anti-CSRF token of this session.
    pub fn csrf_token(&self) -> &str {
        &self.csrf
    }

    /// The person as a caller in their active tenant, with their role's scopes; `None` when
    /// they hold no role anywhere.
    pub fn caller(&self) -> Option<Caller> {
        let tenant = self.tenant.as_deref()?;
        let role = self.roles.get(tenant)?;
        Some(self.caller_in(tenant, role.scopes()))
    }

    fn caller_in(&self, tenant: &str, scopes: Scopes) -> Caller {
        let key = match &self.email {
            Some(email) => email.clone(),
            None => format!("oidc:{}", self.subject),
        };
        let mut caller = Caller::of_key(Arc::from(tenant), Arc::from(key.as_str()), scopes);
        caller.person = Some(Arc::new(Person {
            subject: Arc::from(self.subject.as_str()),
            email: self.email.as_deref().map(Arc::from),
            claims: Some(Arc::clone(&self.claims)),
        }));
        caller
    }
}
