use super::summary::{compact_len_at_most, json_len_bound};
use super::*;

#[test]
fn secrets_are_masked_at_any_depth_and_large_summaries_cut_to_field_names() {
    let change = serde_json::json!({
        "url": "https://example.com/",
        "password": "hunter2",
        "nested": [{"secret": "s3"}, {"secret": null}],
    });
    let safe = summary(change);
    assert_eq!(safe["password"], "(set)");
    assert_eq!(safe["nested"][0]["secret"], "(set)");
    assert!(safe["nested"][1]["secret"].is_null());
    assert!(!safe.to_string().contains("hunter2"));
    let big = serde_json::json!({ "url": "x".repeat(MAX_CHANGE_BYTES), "tags": [] });
    let cut = summary(big);
    assert_eq!(cut["truncated"], true);
    assert_eq!(cut["fields"], serde_json::json!(["tags", "url"]));
}

#[test]
fn a_summary_is_measured_exactly_at_the_limit() {
    let values = [
        serde_json::json!(null),
        serde_json::json!(-1.2345678901234567e-308),
        serde_json::json!(u64::MAX),
        serde_json::json!({"url": "https://example.com/\u{0}\"\\\n", "tags": ["a", "b"], "n": [1, true]}),
        serde_json::json!({"url": "\u{1}".repeat(700)}),
        serde_json::json!({"url": "x".repeat(MAX_CHANGE_BYTES - 10)}),
    ];
    for value in values {
        let len = value.to_string().len();
        assert!(json_len_bound(&value) >= len, "{value}");
        assert!(compact_len_at_most(&value, len), "{value}");
        assert!(!compact_len_at_most(&value, len - 1), "{value}");
    }
    // Just past the limit: the bound cannot answer, the counter does.
    let edge = serde_json::json!({ "url": "x".repeat(MAX_CHANGE_BYTES - 9) });
    assert_eq!(edge.to_string().len(), MAX_CHANGE_BYTES + 1);
    assert_eq!(summary(edge)["truncated"], true);
}

#[test]
fn every_name_parses_back() {
    for action in Action::ALL {
        assert_eq!(Action::parse(action.name()), Some(*action));
    }
    for kind in ObjectKind::ALL {
        assert_eq!(ObjectKind::parse(kind.name()), Some(*kind));
    }
    assert_eq!(Action::parse("link.explode"), None);
}

/// The marker [`AuditLog::settle`] sends is answered only once the entries queued before it are
/// written: a stopping node lets go of its store after that.
#[tokio::test]
async fn a_settle_marker_is_answered_after_the_entries_queued_before_it_are_written() {
    use crate::store::{AuditFilter, AuditStore, Capabilities};
    let dir = tempfile::tempdir().expect("tempdir");
    let space = codespace::CodeSpace::new(&codespace::CodeKey::generate(), 7).expect("space");
    let sqlite = crate::store::SqliteStore::open(&dir.path().join("a.db"), Arc::new(space), 16)
        .expect("open");
    sqlite.migrate().await.expect("migrate");
    let store = Store::Sqlite(sqlite);
    let entry = |n: usize| NewAuditEntry {
        tenant: "acme".into(),
        actor_tenant: "acme".into(),
        actor_key: "ci".into(),
        actor_subject: None,
        actor_email: None,
        address: None,
        action: "link.create".into(),
        object_kind: "link".into(),
        object_id: format!("alias-{n}"),
        change: serde_json::json!({}),
    };
    let (queue, rx) = mpsc::channel(16);
    let mut answers = Vec::new();
    for pending in [Some(entry(1)), Some(entry(2)), None] {
        let (written, done) = oneshot::channel();
        queue
            .send(Pending {
                entry: pending,
                written,
            })
            .await
            .expect("queued");
        answers.push(done);
    }
    tokio::spawn(write_batches(store.clone(), rx, Arc::default()));
    answers.pop().expect("the marker").await.expect("answered");
    let filter = AuditFilter {
        tenant: Some("acme".into()),
        ..AuditFilter::default()
    };
    let written = store.audit_entries(&filter, 10).await.expect("read");
    assert_eq!(written.len(), 2, "{written:?}");
}

/// An unknown action's refusal names every known one, whole: the list is written grouped by
/// object, short enough for an error message even beside the longest echoed value.
#[test]
fn an_unknown_action_lists_every_action_within_a_message() {
    let value = "x".repeat(200);
    let error = super::query::unknown("action", &value, Action::ALL.iter().map(|a| a.name()));
    let message = error.public_message();
    assert!(
        message.chars().count() < crate::domain::MAX_MESSAGE,
        "{message}"
    );
    assert!(message.ends_with("signin, signin_failed"), "{message}");
    assert!(
        message.contains("link.{create,update,disable,enable,delete,import}"),
        "{message}"
    );
}
