//! What the link service records in the audit log for each change it makes: the action, the
//! link, and a summary built from the request (never a password; its presence only).

use super::LinkService;
use crate::audit::{Action, ObjectKind, Subject};
use crate::domain::{Caller, LinkPatch, PasswordChange};
use crate::store::NewAuditEntry;
use serde_json::{Value, json};

/// The action a patch is recorded as: a patch that only disables or enables a link is that;
/// anything else is an update (with `disabled` among its fields when it also did that).
pub(super) fn patch_action(patch: &LinkPatch) -> Action {
    match patch.disabled {
        Some(disabled) if patch_fields(patch) == ["disabled"] => {
            if disabled {
                Action::LinkDisable
            } else {
                Action::LinkEnable
            }
        }
        _ => Action::LinkUpdate,
    }
}

/// A link's routing fields in the API's spelling, in the order entries name them.
const ROUTING_FIELDS: [&str; 13] = [
    "rules",
    "ios",
    "android",
    "variants",
    "utm_source",
    "utm_medium",
    "utm_campaign",
    "utm_term",
    "utm_content",
    "pass_query",
    "title",
    "description",
    "image",
];

/// The names of [`ROUTING_FIELDS`] whose flag in `set` is up.
fn routing_named(set: [bool; 13]) -> impl Iterator<Item = &'static str> {
    ROUTING_FIELDS
        .into_iter()
        .zip(set)
        .filter_map(|(name, set)| set.then_some(name))
}

/// The names of the fields a patch sets, in the API's spelling.
fn patch_fields(patch: &LinkPatch) -> Vec<&'static str> {
    let (utm, preview) = (&patch.utm, &patch.preview);
    let plain = [
        ("url", patch.url.is_some()),
        ("expires_at", patch.expires_at.is_some()),
        ("tags", patch.tags.is_some()),
        ("disabled", patch.disabled.is_some()),
        ("max_visits", patch.max_visits.is_some()),
        ("password", patch.password.is_some()),
        ("domain", patch.domain.is_some()),
    ];
    let routing = routing_named([
        patch.rules.is_some(),
        patch.ios.is_some(),
        patch.android.is_some(),
        patch.variants.is_some(),
        utm.source.is_some(),
        utm.medium.is_some(),
        utm.campaign.is_some(),
        utm.term.is_some(),
        utm.content.is_some(),
        patch.pass_query.is_some(),
        preview.title.is_some(),
        preview.description.is_some(),
        preview.image.is_some(),
    ]);
    plain
        .into_iter()
        .filter_map(|(name, set)| set.then_some(name))
        .chain(routing)
        .collect()
}

/// The summary of a patch: the fields it set, and the new values of the plain ones (the
/// routing's are named only; a password is `"(set)"` or null).
pub(super) fn patch_summary(patch: &LinkPatch) -> Value {
    let mut values = serde_json::Map::new();
    values.insert("fields".into(), json!(patch_fields(patch)));
    if let Some(url) = &patch.url {
        values.insert("url".into(), json!(url.as_str()));
    }
    if let Some(expires_at) = &patch.expires_at {
        values.insert("expires_at".into(), json!(expires_at));
    }
    if let Some(tags) = &patch.tags {
        values.insert("tags".into(), json!(tags));
    }
    if let Some(disabled) = patch.disabled {
        values.insert("disabled".into(), json!(disabled));
    }
    if let Some(max_visits) = &patch.max_visits {
        values.insert("max_visits".into(), json!(max_visits));
    }
    if let Some(domain) = &patch.domain {
        values.insert("domain".into(), json!(domain));
    }
    if let Some(password) = &patch.password {
        let shown = match password {
            PasswordChange::Remove => Value::Null,
            PasswordChange::Set(_) | PasswordChange::Hashed(_) => json!("(set)"),
        };
        values.insert("password".into(), shown);
    }
    Value::Object(values)
}

/// The names of the routing fields a new link is made with, in the API's spelling (named
/// only, as a patch's are: rules and targets are for the link's own answers).
fn routing_fields(routes: &crate::domain::Routes) -> Vec<&'static str> {
    let (utm, preview) = (&routes.utm, &routes.preview);
    routing_named([
        !routes.rules.is_empty(),
        routes.ios.is_some(),
        routes.android.is_some(),
        !routes.variants.is_empty(),
        utm.source.is_some(),
        utm.medium.is_some(),
        utm.campaign.is_some(),
        utm.term.is_some(),
        utm.content.is_some(),
        routes.pass_query,
        preview.title.is_some(),
        preview.description.is_some(),
        preview.image.is_some(),
    ])
    .collect()
}

/// The audit entry of a new link: what it was made with (a password only as `protected`, its
/// routing by field name), its object left for [`super::create::Row::with_code`] to fill with
/// the code it goes in under.
pub(super) fn created_entry(caller: &Caller, row: &super::create::Row) -> NewAuditEntry {
    let change = json!({
        "url": &row.url,
        "domain": &row.domain,
        "tags": &row.tags,
        "expires_at": row.expires_at,
        "max_visits": row.max_visits,
        "protected": row.password.is_some(),
        "imported": row.import_batch.is_some(),
        "routing": routing_fields(&row.routes),
    });
    let subject = Subject {
        tenant: &row.tenant,
        action: Action::LinkCreate,
        kind: ObjectKind::Link,
        id: "",
    };
    crate::audit::entry(caller, subject, change)
}

impl LinkService {
    /// Records `action` on the link of `code` in `tenant`.
    pub(super) async fn audit_link(
        &self,
        caller: &Caller,
        tenant: &str,
        code: &str,
        action: Action,
        change: Value,
    ) {
        let subject = Subject {
            tenant,
            action,
            kind: ObjectKind::Link,
            id: code,
        };
        self.audit.record(caller, subject, change).await;
    }
}
