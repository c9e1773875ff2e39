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
