//! Trace contexts handed from a request to later work in this process that the request caused
//! but does not wait for (a webhook delivery of the event a create recorded), by a key both
//! sides can name. Bounded: the oldest and least used entries go first, so a context that is
//! never asked for costs nothing lasting.

use crate::{Parent, current_parent, enabled};
use std::sync::OnceLock;

/// How many contexts are kept at most.
const CAPACITY: usize = 4096;

fn contexts() -> &'static quick_cache::sync::Cache<String, Parent> {
    static CONTEXTS: OnceLock<quick_cache::sync::Cache<String, Parent>> = OnceLock::new();
    CONTEXTS.get_or_init(|| quick_cache::sync::Cache::new(CAPACITY))
}

/// Keeps the current span's context under `key` (built only when tracing is on and the span
/// is sampled; otherwise one flag read).
pub fn remember(key: impl FnOnce() -> String) {
    if let Some(parent) = current_parent() {
        contexts().insert(key(), parent);
    }
}

/// The context kept under `key`, if it is still kept (`None` at once while tracing is off).
pub fn recall(key: &str) -> Option<Parent> {
    if !enabled() {
        return None;
    }
    contexts().get(key)
}
