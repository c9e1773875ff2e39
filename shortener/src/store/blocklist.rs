//! The blocklist interface: the domains blocked through the admin API, the stored part of the
//! target rules.

use super::{BlockedDomain, Store, StoreError};
use std::future::Future;

/// What a store does with the blocked domains. Both backends implement it; [`Store`]
/// dispatches.
pub trait BlocklistStore: Send + Sync {
    /// The domains blocked through the admin API, in entry order.
    fn blocked_domains(
        &self,
    ) -> impl Future<Output = Result<Vec<BlockedDomain>, StoreError>> + Send;

    /// Adds a blocked domain entry on behalf of `key`; false if it was there already.
    fn block_domain(
        &self,
        entry: &str,
        key: &str,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Removes a blocked domain entry; false if it was not there.
    fn unblock_domain(&self, entry: &str) -> impl Future<Output = Result<bool, StoreError>> + Send;
}

impl BlocklistStore for Store {
    async fn blocked_domains(&self) -> Result<Vec<BlockedDomain>, StoreError> {
        traced!(self, "SELECT", "blocked_domains", s => s.blocked_domains())
    }

    async fn block_domain(&self, entry: &str, key: &str) -> Result<bool, StoreError> {
        traced!(self, "INSERT", "blocked_domains", s => s.block_domain(entry, key))
    }

    async fn unblock_domain(&self, entry: &str) -> Result<bool, StoreError> {
        traced!(self, "DELETE", "blocked_domains", s => s.unblock_domain(entry))
    }
}
