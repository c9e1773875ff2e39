//! Links as the service sees them.

use chrono::{DateTime, Utc};

/// A stored short link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// The link's key: its code, or for an alias-shaped code on a branded domain the domain's
    /// host, `/` and the code ([`super::link_key`]); the code shown to people is
    /// [`Link::shown_code`].
    pub code: String,
    /// The branded domain it answers on (its host); `None` for the default domain.
    pub domain: Option<String>,
    /// Where it routes besides its URL: rules, app targets, a split (none for a plain link).
    pub routes: super::Routes,
    /// The tenant that owns it.
    pub tenant: String,
    /// The name of the API key that created it.
    pub owner: String,
    /// The target.
    pub url: String,
    /// When the link was committed (or, imported, when the other shortener made it).
    pub created_at: DateTime<Utc>,
    /// When it stops redirecting, if ever.
    pub expires_at: Option<DateTime<Utc>>,
    /// When it was deleted, if it was.
    pub deleted_at: Option<DateTime<Utc>>,
    /// When it was disabled, if it is (it answers 410 until enabled again).
    pub disabled_at: Option<DateTime<Utc>>,
    /// After this many human visits it answers 410.
    pub max_visits: Option<u64>,
    /// Its tags, sorted.
    pub tags: Vec<String>,
    /// The import that brought it under a legacy code, if one did.
    pub import_batch: Option<i64>,
    /// The hash of its password, if visitors must give one.
    pub password: Option<super::PasswordHash>,
    /// Redirect counts (flushed in batches).
    pub clicks: ClickCounts,
}

/// The largest visit limit (the stores keep it as a signed 64-bit integer).
pub const MAX_VISITS: u64 = i64::MAX as u64;

/// Checks a visit limit: 1 to [`MAX_VISITS`].
pub fn check_max_visits(max_visits: u64) -> Result<(), super::Error> {
    if (1..=MAX_VISITS).contains(&max_visits) {
        Ok(())
    } else {
        Err(super::Error::invalid(
            "invalid_max_visits",
            format!("max_visits must be 1 to {MAX_VISITS}"),
        ))
    }
}

/// A visit limit given as any JSON number: a negative or fractional one is refused as one out
/// of range is (`invalid_max_visits`), whatever the transport; the range is
/// [`check_max_visits`]'s.
pub fn max_visits_of(number: &serde_json::Number) -> Result<u64, super::Error> {
    number.as_u64().ok_or_else(|| {
        super::Error::invalid(
            "invalid_max_visits",
            format!("max_visits must be 1 to {MAX_VISITS}"),
        )
    })
}

/// Where a link stands, as of a moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkState {
    /// It redirects.
    Active,
    /// Past its expiry.
    Expired,
    /// Past its visit limit (`max_visits` human visits counted): it answers 410.
    UsedUp,
    /// Disabled (reversibly).
    Disabled,
    /// Deleted (for good).
    Deleted,
}

impl LinkState {
    /// The state's name in the API (`active`, `expired`, `used_up`, `disabled`, `deleted`).
    pub fn name(self) -> &'static str {
        match self {
            LinkState::Active => "active",
            LinkState::Expired => "expired",
            LinkState::UsedUp => "used_up",
            LinkState::Disabled => "disabled",
            LinkState::Deleted => "deleted",
        }
    }
}

impl Link {
    /// The code as people type it after the host: the key without its domain part.
    pub fn shown_code(&self) -> &str {
        super::shown_code(&self.code)
    }

    /// The link's state at `now`: deleted before disabled before expired before used up (by the
    /// human visits its click counts hold: those flushed to the store).
    pub fn state(&self, now: DateTime<Utc>) -> LinkState {
        if self.deleted_at.is_some() {
            LinkState::Deleted
        } else if self.disabled_at.is_some() {
            LinkState::Disabled
        } else if self.expires_at.is_some_and(|t| t <= now) {
            LinkState::Expired
        } else if self
            .max_visits
            .is_some_and(|limit| self.clicks.human >= limit)
        {
            LinkState::UsedUp
        } else {
            LinkState::Active
        }
    }
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

impl std::ops::AddAssign for ClickCounts {
    fn add_assign(&mut self, more: ClickCounts) {
        self.human += more.human;
        self.head += more.head;
        self.bot += more.bot;
    }
}
