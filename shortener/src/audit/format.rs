//! An audit entry as the API answers it: JSON, and the CSV export's columns.

use super::Entry;

/// The CSV export's columns, in order.
pub const CSV_COLUMNS: &[&str] = &[
    "id",
    "at",
    "tenant",
    "actor_tenant",
    "actor_key",
    "actor_subject",
    "actor_email",
    "address",
    "action",
    "object_kind",
    "object_id",
    "change",
];

/// An entry as the API answers it: `{"id", "at", "tenant", "actor": {"tenant", "key",
/// "subject", "email"}, "address", "action", "object": {"kind", "id"}, "change"}`.
pub fn entry_json(entry: &Entry) -> serde_json::Value {
    let e = &entry.entry;
    serde_json::json!({
        "id": entry.id,
        "at": entry.at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        "tenant": &e.tenant,
        "actor": {
            "tenant": &e.actor_tenant,
            "key": &e.actor_key,
            "subject": &e.actor_subject,
            "email": &e.actor_email,
        },
        "address": &e.address,
        "action": &e.action,
        "object": { "kind": &e.object_kind, "id": &e.object_id },
        "change": &e.change,
    })
}

/// An entry's fields in the order of [`CSV_COLUMNS`].
pub fn csv_fields(entry: &Entry) -> [String; 12] {
    let e = &entry.entry;
    let text = |v: &Option<String>| v.clone().unwrap_or_default();
    [
        entry.id.to_string(),
        entry
            .at
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        e.tenant.clone(),
        e.actor_tenant.clone(),
        e.actor_key.clone(),
        text(&e.actor_subject),
        text(&e.actor_email),
        text(&e.address),
        e.action.clone(),
        e.object_kind.clone(),
        e.object_id.clone(),
        e.change.to_string(),
    ]
}
