//! Callers as the tokens file describes them, and the principal a call is admitted as.

use super::NamespaceGrant;
use super::Scope;
use super::quota::{QuotaSpec, Quotas};
use super::token::TokenDigest;
use super::tokens_file::CallerSpec;
use crate::domain::{CallerName, Holder, Namespace};
use crate::error::Error;
use std::collections::HashMap;
use std::sync::Arc;

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

    /// The caller whose token has this digest.
    pub fn find(&self, digest: &TokenDigest) -> Option<&Arc<Caller>> {
        self.by_digest.get(digest)
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

    pub(super) fn authorize(
        &self,
        scope: Scope,
        namespace: Option<&Namespace>,
    ) -> Result<(), Error> {
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

    /// The caller's name and quota settings; `None` without authentication.
    pub fn quota(&self) -> Option<(&str, QuotaSpec)> {
        match self {
            Principal::Caller(c) => Some((c.spec.name.as_str(), c.spec.quota)),
            Principal::Insecure => None,
        }
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
