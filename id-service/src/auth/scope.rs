//! Scopes and namespace grants: what a caller may do, and where.

use crate::domain::Namespace;
use std::collections::BTreeSet;

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
    pub fn parse(name: &str) -> Result<Scope, UnknownScope> {
        Scope::ALL
            .into_iter()
            .find(|s| s.as_str() == name)
            .ok_or_else(|| UnknownScope(crate::logsafe::Escaped(name).to_string()))
    }
}

/// A scope name that is none of the four (the name as written, escaped for logs).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown scope \"{0}\" (known: lease, allocate, lookup, admin)")]
pub struct UnknownScope(String);

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
