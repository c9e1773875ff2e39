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
        dispatch!(self, s => s.blocked_domains().await)
    }

    async fn block_domain(&self, entry: &str, key: &str) -> Result<bool, StoreError> {
        dispatch!(self, s => s.block_domain(entry, key).await)
    }

    async fn unblock_domain(&self, entry: &str) -> Result<bool, StoreError> {
        dispatch!(self, s => s.unblock_domain(entry).await)
    }
}
