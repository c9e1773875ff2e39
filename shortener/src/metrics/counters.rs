//! Counters bumped on the hot paths by the parts that own them, read at scrape time.

use std::sync::atomic::AtomicU64;

/// Redirect lookups (bumped by the redirect resolver).
#[derive(Debug, Default)]
pub struct LookupCounters {
    /// Lookups answered from the cache.
    pub cache_hits: AtomicU64,
    /// Lookups that went to the store.
    pub cache_misses: AtomicU64,
}

/// The create path's alarm (bumped by the link service).
#[derive(Debug, Default)]
pub struct CreateCounters {
    /// Generated codes that were unexpectedly taken (must stay 0: alarm).
    pub generated_conflicts: AtomicU64,
    /// Generated codes stepped over because an imported legacy code holds them (expected).
    pub imported_skips: AtomicU64,
}

/// Reloads of a file the node re-reads while it runs (bumped by its watcher).
#[derive(Debug, Default)]
pub struct ReloadCounters {
    /// Reloads that replaced what was in force.
    pub applied: AtomicU64,
    /// Reloads refused (the file did not parse); what was in force stayed.
    pub refused: AtomicU64,
}
