//! The domains interface: branded domains, each host owned by one tenant. The host is the
//! table's primary key, so the database decides between two claims of one host.

use super::{Store, StoreError};
use crate::domain::{Domain, DomainSettings};
use std::future::Future;

/// What a store does with branded domains. Both backends implement it; [`Store`] dispatches.
/// `tenant` confines a read or change to one tenant's domains (`None`: every tenant's).
pub trait DomainStore: Send + Sync {
    /// Inserts `domain` (its `created_at` is the store's time); `None` when its host is a
    /// domain already, of any tenant: nothing is written then.
    fn insert_domain(
        &self,
        domain: &Domain,
    ) -> impl Future<Output = Result<Option<Domain>, StoreError>> + Send;

    /// The domain of `host`, if `tenant` sees it.
    fn domain(
        &self,
        host: &str,
        tenant: Option<&str>,
    ) -> impl Future<Output = Result<Option<Domain>, StoreError>> + Send;

    /// Up to `limit` domains `tenant` sees, in host order, after the host `after`.
    fn domains(
        &self,
        tenant: Option<&str>,
        after: Option<&str>,
        limit: i64,
    ) -> impl Future<Output = Result<Vec<Domain>, StoreError>> + Send;

    /// Replaces the settings of the domain of `host`, if `tenant` sees it: the domain as it
    /// is now, or `None` (nothing written).
    fn set_domain_settings(
        &self,
        host: &str,
        tenant: Option<&str>,
        settings: &DomainSettings,
    ) -> impl Future<Output = Result<Option<Domain>, StoreError>> + Send;

    /// Removes the domain of `host`, if `tenant` sees it and no live link is on it.
    fn delete_domain(
        &self,
        host: &str,
        tenant: Option<&str>,
    ) -> impl Future<Output = Result<DomainRemoval, StoreError>> + Send;
}

/// How many live links a refused removal counts at most (it says "at least" past that).
pub const LIVE_LINKS_COUNTED: i64 = 1000;

/// What became of a domain's removal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DomainRemoval {
    /// It is removed.
    Removed,
    /// No such domain (or another tenant's).
    NotFound,
    /// Refused: this many live links (at most [`LIVE_LINKS_COUNTED`]) are on it. Deleted links
    /// do not count.
    HasLinks(i64),
}

impl DomainRemoval {
    /// The outcome from what a store saw: whether it removed the row, whether the row was
    /// there (to the caller), and the live links it counted.
    pub(crate) fn of(removed: bool, exists: bool, live: i64) -> Self {
        match (removed, exists) {
            (true, _) => DomainRemoval::Removed,
            (false, false) => DomainRemoval::NotFound,
            (false, true) => DomainRemoval::HasLinks(live),
        }
    }
}

impl DomainStore for Store {
    async fn insert_domain(&self, domain: &Domain) -> Result<Option<Domain>, StoreError> {
        traced!(self, "INSERT", "domains", s => s.insert_domain(domain))
    }

    async fn domain(&self, host: &str, tenant: Option<&str>) -> Result<Option<Domain>, StoreError> {
        traced!(self, "SELECT", "domains", s => s.domain(host, tenant))
    }

    async fn domains(
        &self,
        tenant: Option<&str>,
        after: Option<&str>,
        limit: i64,
    ) -> Result<Vec<Domain>, StoreError> {
        traced!(self, "SELECT", "domains", s => s.domains(tenant, after, limit))
    }

    async fn set_domain_settings(
        &self,
        host: &str,
        tenant: Option<&str>,
        settings: &DomainSettings,
    ) -> Result<Option<Domain>, StoreError> {
        traced!(self, "UPDATE", "domains", s => s.set_domain_settings(host, tenant, settings))
    }

    async fn delete_domain(
        &self,
        host: &str,
        tenant: Option<&str>,
    ) -> Result<DomainRemoval, StoreError> {
        traced!(self, "DELETE", "domains", s => s.delete_domain(host, tenant))
    }
}
