//! Links as the service sees them.

use chrono::{DateTime, Utc};

/// A stored short link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// The short code.
    pub code: String,
    /// The tenant that owns it.
    pub tenant: String,
    /// The target.
    pub url: String,
    /// When the link was committed.
    pub created_at: DateTime<Utc>,
    /// When it stops redirecting, if ever.
    pub expires_at: Option<DateTime<Utc>>,
    /// When it was deleted, if it was.
    pub deleted_at: Option<DateTime<Utc>>,
    /// Redirect counts (flushed in batches).
    pub clicks: ClickCounts,
}

/// Redirect counts of one link.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClickCounts {
    /// GET redirects to people.
    pub human: u64,
    /// HEAD requests.
    pub head: u64,
    /// GET redirects to known bots and preview fetchers.
    pub bot: u64,
}
