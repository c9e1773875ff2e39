//! The audit log in the store, on both backends: entries read back as appended, newest first;
//! every filter narrows; the keyset continues where a page ended; a purge removes only entries
//! older than its instant, at most its bound per run; and an entry recorded through the log
//! names a signed-in person.

use crate::helpers::{Backend, Stack};
use chrono::{Duration, Utc};
use shortener::audit::{Action, ObjectKind, Subject};
use shortener::domain::{Caller, Person, Scopes};
use shortener::store::{AuditFilter, AuditStore, NewAuditEntry};
use std::sync::Arc;

fn entry(tenant: &str, action: &str, object: &str) -> NewAuditEntry {
    NewAuditEntry {
        tenant: tenant.into(),
        actor_tenant: tenant.into(),
        actor_key: "lead".into(),
        actor_subject: None,
        actor_email: None,
        address: Some("198.51.100.4".into()),
        action: action.into(),
        object_kind: "link".into(),
        object_id: object.into(),
        change: serde_json::json!({ "url": format!("https://example.com/{object}") }),
    }
}

async fn entries_are_filtered_paged_and_purged_in_bounded_runs(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = stack.node("audit-store").await;
    let store = node.app.store.clone();
    let appended: Vec<NewAuditEntry> = (0..5)
        .map(|i| entry("acme", "link.create", &format!("c{i}")))
        .chain([entry("globex", "link.delete", "g0")])
        .collect();
    store.append_audit(appended.clone()).await.expect("append");
    let all = store
        .audit_entries(&AuditFilter::default(), 100)
        .await
        .expect("read");
    let read: Vec<NewAuditEntry> = all.iter().rev().map(|e| e.entry.clone()).collect();
    assert_eq!(read, appended, "read back as appended, newest first");
    assert!(all.windows(2).all(|w| w[0].id > w[1].id));
    let acme = AuditFilter {
        tenant: Some("acme".into()),
        ..AuditFilter::default()
    };
    let first = store.audit_entries(&acme, 2).await.expect("page");
    let next = AuditFilter {
        before_id: Some(first[1].id),
        ..acme.clone()
    };
    let second = store.audit_entries(&next, 10).await.expect("page");
    let ids: Vec<&str> = first
        .iter()
        .chain(&second)
        .map(|e| e.entry.object_id.as_str())
        .collect();
    assert_eq!(ids, ["c4", "c3", "c2", "c1", "c0"]);
    for (filter, expected) in [
        (
            AuditFilter {
                action: Some("link.delete".into()),
                ..Default::default()
            },
            1,
        ),
        (
            AuditFilter {
                object_id: Some("c2".into()),
                ..Default::default()
            },
            1,
        ),
        (
            AuditFilter {
                actor: Some("lead".into()),
                ..Default::default()
            },
            6,
        ),
        (
            AuditFilter {
                actor: Some("someone".into()),
                ..Default::default()
            },
            0,
        ),
        (
            AuditFilter {
                object_kind: Some("domain".into()),
                ..Default::default()
            },
            0,
        ),
        (
            AuditFilter {
                since: Some(Utc::now() + Duration::hours(1)),
                ..Default::default()
            },
            0,
        ),
        (
            AuditFilter {
                until: Some(Utc::now() + Duration::hours(1)),
                ..Default::default()
            },
            6,
        ),
    ] {
        let got = store.audit_entries(&filter, 100).await.expect("read");
        assert_eq!(got.len(), expected, "{filter:?}");
    }
    // Nothing is older than an hour ago; everything is older than an hour from now, and a run
    // takes at most its bound.
    assert_eq!(
        store
            .purge_audit(Utc::now() - Duration::hours(1), 100)
            .await
            .expect("purge"),
        0
    );
    let later = Utc::now() + Duration::hours(1);
    assert_eq!(store.purge_audit(later, 4).await.expect("purge"), 4);
    assert_eq!(store.purge_audit(later, 4).await.expect("purge"), 2);
    assert!(
        store
            .audit_entries(&AuditFilter::default(), 100)
            .await
            .expect("read")
            .is_empty()
    );
    node.stop().await;
}

on_both_stores!(entries_are_filtered_paged_and_purged_in_bounded_runs);

async fn a_person_is_recorded_beside_the_key(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = stack.node("audit-person").await;
    let mut caller = Caller::of_key(Arc::from("acme"), Arc::from("console"), Scopes::default());
    caller.person = Some(Arc::new(Person {
        subject: Arc::from("248289761001"),
        email: Some(Arc::from("ana@example.com")),
        claims: None,
    }));
    caller.address = Some("2001:db8::7".parse().expect("address"));
    let subject = Subject {
        tenant: "acme",
        action: Action::LinkUpdate,
        kind: ObjectKind::Link,
        id: "abc-1",
    };
    let change = serde_json::json!({ "password": "never-stored", "url": "https://example.com/" });
    node.app.audit.record(&caller, subject, change).await;
    let all = node
        .app
        .store
        .audit_entries(
            &AuditFilter {
                actor: Some("ana@example.com".into()),
                ..Default::default()
            },
            10,
        )
        .await
        .expect("read");
    assert_eq!(all.len(), 1);
    let e = &all[0].entry;
    assert_eq!(e.actor_subject.as_deref(), Some("248289761001"));
    assert_eq!(
        (e.actor_key.as_str(), e.address.as_deref()),
        ("console", Some("2001:db8::7"))
    );
    assert_eq!(e.change["password"], "(set)");
    node.stop().await;
}

on_both_stores!(a_person_is_recorded_beside_the_key);

/// Entries recorded at once by many requests are all in the store when each call returns
/// (they are written in batches by one writer).
async fn concurrent_entries_are_all_durable_when_recorded(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = stack.node("audit-burst").await;
    let caller = Caller::of_key(Arc::from("acme"), Arc::from("bulk"), Scopes::default());
    let ids: Vec<String> = (0..200).map(|i| format!("code-{i}")).collect();
    futures::future::join_all(ids.iter().map(|id| {
        let subject = Subject {
            tenant: "acme",
            action: Action::LinkCreate,
            kind: ObjectKind::Link,
            id,
        };
        node.app
            .audit
            .record(&caller, subject, serde_json::json!({}))
    }))
    .await;
    let filter = AuditFilter {
        actor: Some("bulk".into()),
        ..Default::default()
    };
    let stored = node
        .app
        .store
        .audit_entries(&filter, 500)
        .await
        .expect("read");
    let mut got: Vec<&str> = stored.iter().map(|e| e.entry.object_id.as_str()).collect();
    got.sort_unstable();
    let mut want: Vec<&str> = ids.iter().map(String::as_str).collect();
    want.sort_unstable();
    assert_eq!(got, want);
    assert_eq!(node.app.audit.failed(), 0);
    node.stop().await;
}

on_both_stores!(concurrent_entries_are_all_durable_when_recorded);

/// On SQLite a link's entries are found by the ID its code decodes to (migration 31), and
/// entries written before it by the code's text: one link's entries are all found by its code,
/// with a tenant filter or without, whichever way each was written; an alias's by its text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_links_entries_are_found_by_its_code_however_they_were_written() {
    let stack = Stack::new(Backend::Sqlite).await;
    let node = stack.node("audit-slots").await;
    let (status, link) = node
        .create(serde_json::json!({ "url": "https://example.com/slots" }))
        .await;
    assert_eq!(status, 201, "{link}");
    let code = link["code"].as_str().expect("code").to_string();
    let (status, alias) = node
        .create(serde_json::json!({ "url": "https://example.com/alias", "alias": "spring-sale" }))
        .await;
    assert_eq!(status, 201, "{alias}");
    // The create's entry as the release before wrote it: no ID, found by its text only.
    let path = stack
        .dir
        .path()
        .join("audit-slots")
        .join(shortener::app::DB_FILE);
    let file = rusqlite::Connection::open(path).expect("open");
    let slotted = |file: &rusqlite::Connection| -> i64 {
        file.query_row(
            "SELECT count(*) FROM audit_log WHERE object_slot IS NOT NULL",
            [],
            |r| r.get(0),
        )
        .expect("count")
    };
    assert_eq!(
        slotted(&file),
        1,
        "the generated code's create, not the alias's"
    );
    file.execute("UPDATE audit_log SET object_slot = NULL", [])
        .expect("forget the slots");
    for disabled in [true, false] {
        let (status, body) = node
            .patch(&code, serde_json::json!({ "disabled": disabled }))
            .await;
        assert_eq!(status, 200, "{body}");
    }
    assert_eq!(slotted(&file), 2, "the two updates");

    let store = &node.app.store;
    let newest = store.audit_entries(&AuditFilter::default(), 1).await;
    let tenant = Some(newest.expect("read")[0].entry.tenant.clone());
    for (tenant, kind) in [(None, None), (tenant.clone(), None), (tenant, Some("link"))] {
        let filter = AuditFilter {
            tenant: tenant.clone(),
            object_kind: kind.map(str::to_string),
            object_id: Some(code.clone()),
            ..AuditFilter::default()
        };
        let found = store.audit_entries(&filter, 50).await.expect("read");
        let actions: Vec<&str> = found.iter().map(|e| e.entry.action.as_str()).collect();
        assert_eq!(
            actions,
            ["link.enable", "link.disable", "link.create"],
            "{tenant:?} {kind:?}"
        );
        assert!(found.iter().all(|e| e.entry.object_id == code));
    }
    let filter = AuditFilter {
        object_id: Some("spring-sale".into()),
        ..AuditFilter::default()
    };
    let found = store.audit_entries(&filter, 50).await.expect("read");
    assert_eq!(found.len(), 1, "{found:?}");
    // Another kind of object with the link's code as its name is not the link.
    let filter = AuditFilter {
        object_kind: Some("host".into()),
        object_id: Some(code.clone()),
        ..AuditFilter::default()
    };
    assert!(
        store
            .audit_entries(&filter, 50)
            .await
            .expect("read")
            .is_empty()
    );
    node.stop().await;
}
