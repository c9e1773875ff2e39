//! A link's history: every create, update, disable, enable and delete, with who did it.

use chrono::{DateTime, Utc};

/// What kind of change an event records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// The link was made.
    Create,
    /// Its target, expiry, tags or visit limit changed.
    Update,
    /// It was disabled.
    Disable,
    /// It was enabled again.
    Enable,
    /// It was deleted.
    Delete,
}

impl EventKind {
    /// The kind's name in the API and the store.
    pub fn name(self) -> &'static str {
        match self {
            EventKind::Create => "create",
            EventKind::Update => "update",
            EventKind::Disable => "disable",
            EventKind::Enable => "enable",
            EventKind::Delete => "delete",
        }
    }

    /// The kind named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        [
            Self::Create,
            Self::Update,
            Self::Disable,
            Self::Enable,
            Self::Delete,
        ]
        .into_iter()
        .find(|k| k.name() == name)
    }
}

/// One recorded change.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// When it was made.
    pub at: DateTime<Utc>,
    /// The name of the API key that made it.
    pub key: String,
    /// What kind of change it was.
    pub kind: EventKind,
    /// The fields it changed, each as `{"old": ..., "new": ...}`.
    pub change: serde_json::Value,
}

/// The most events a history answer holds ([`History`]); a link changed more often than this
/// answers with its latest ones.
pub const MAX_HISTORY_EVENTS: usize = 1000;

/// A link's recorded events as the store read them: the latest `max_events` at most, oldest
/// first.
#[derive(Debug, Clone)]
pub struct History {
    /// The link as it is now (without click counts).
    pub link: super::Link,
    /// Its events after its creation, oldest first: the latest ones when `earlier`.
    pub events: Vec<Event>,
    /// Earlier events were left out (the link changed more often than the read's bound).
    pub earlier: bool,
}

impl History {
    /// Keeps the latest `max` of `newest_first` (read newest first, one more than `max` to
    /// know whether any were left out), oldest first.
    pub fn of(link: super::Link, mut newest_first: Vec<Event>, max: usize) -> Self {
        let earlier = newest_first.len() > max;
        newest_first.truncate(max);
        newest_first.reverse();
        History {
            link,
            events: newest_first,
            earlier,
        }
    }
}
