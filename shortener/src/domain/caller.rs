//! Who is asking: the identity an authenticated request acts as.

use super::Scopes;
use super::scope::Scope;
use std::net::IpAddr;
use std::sync::Arc;

/// An authenticated caller: the tenant whose links it acts on, the name of its API key (shown
/// in logs, metrics and a link's history, never the secret), and what the key may do; with
/// the person behind the request when one signed in, and the client address it came from,
/// both of which the audit log records. A person signed in to the console is a caller too:
/// `key` is then their e-mail address (or `oidc:<subject>`), which no key name can be.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Caller {
    /// The tenant that owns what this caller creates.
    pub tenant: Arc<str>,
    /// The API key's name, unique within its tenant (for a signed-in person, the name the
    /// session's credential goes by).
    pub key: Arc<str>,
    /// What the key may do.
    pub scopes: Scopes,
    /// The person who signed in, when a person (not a machine's key) makes the request; `None`
    /// for API keys. Sign-in fills it; nothing else does.
    pub person: Option<Arc<Person>>,
    /// The client address the request came from (after the trusted-proxy rules), when the
    /// transport knows it.
    pub address: Option<IpAddr>,
    /// When the caller's key stops working, if it does: a key it makes may not outlive it.
    pub expires: Option<chrono::DateTime<chrono::Utc>>,
    /// The signed-in person who made the caller's key, when one did: their role caps the key,
    /// and a key it makes is theirs too (capped alike). `None` for other keys and for sessions
    /// (a session's person is [`Caller::person`]).
    pub maker: Option<Arc<Person>>,
}

/// A person as the identity provider names them: what the audit log and a link's history
/// record of who made a change besides the key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Person {
    /// The issuer's stable identifier of the person (the ID token's `sub`).
    pub subject: Arc<str>,
    /// Their e-mail, when the issuer gives one.
    pub email: Option<Arc<str>>,
    /// The claims of their sign-in that the roles file may name (a JSON object, as the session
    /// keeps them): what caps a key they make (`crate::keys`).
    pub claims: Option<Arc<str>>,
}

impl Person {
    /// How records name the person: the e-mail when known, else the subject.
    pub fn name(&self) -> &str {
        self.email.as_deref().unwrap_or(&self.subject)
    }
}

impl Caller {
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

    /// A key's caller, with no person and no address yet.
    pub fn of_key(tenant: Arc<str>, key: Arc<str>, scopes: Scopes) -> Self {
        Self {
            tenant,
            key,
            scopes,
            person: None,
            address: None,
            expires: None,
            maker: None,
        }
    }

    /// Who a link's history names as the author of a change: the key's identity
    /// ([`Caller::key_id`]), followed by the person (`marketing/console (ana@example.com)`)
    /// when one signed in under another name. A person signed in to the console acts under
    /// their own name (`marketing/ana@example.com`), which is not repeated.
    pub fn author(&self) -> String {
        match &self.person {
            Some(person) if *self.key != *person.name() && !self.key.starts_with("oidc:") => {
                format!("{} ({})", self.key_id(), person.name())
            }
            _ => self.key_id(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_author_of_a_change_is_the_key_and_the_person_when_one_signed_in() {
        let mut caller = Caller::of_key(Arc::from("acme"), Arc::from("console"), Scopes::default());
        assert_eq!(caller.author(), "acme/console");
        caller.person = Some(Arc::new(Person {
            subject: Arc::from("248289761001"),
            email: None,
            claims: None,
        }));
        assert_eq!(caller.author(), "acme/console (248289761001)");
        caller.person = Some(Arc::new(Person {
            subject: Arc::from("248289761001"),
            email: Some(Arc::from("ana@example.com")),
            claims: None,
        }));
        assert_eq!(caller.author(), "acme/console (ana@example.com)");
        // Signed in to the console, the person acts under their own name, said once.
        caller.key = Arc::from("ana@example.com");
        assert_eq!(caller.author(), "acme/ana@example.com");
        caller.key = Arc::from("oidc:248289761001");
        assert_eq!(caller.author(), "acme/oidc:248289761001");
    }
}
