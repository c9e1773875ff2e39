//! Console sessions in the store: the purge deletes rows past their absolute timeout and rows
//! signed out more than the cut-off ago, in bounded runs, and leaves live ones.

use crate::helpers::{Backend, Stack};
use chrono::{Duration, Utc};
use shortener::store::{NewSession, SessionStore};

fn session(n: u8, expires_in: Duration) -> NewSession {
    NewSession {
        digest: [n; 32],
        subject: format!("person-{n}"),
        email: None,
        name: None,
        claims: "{}".into(),
        tenant: Some("acme".into()),
        expires_at: Utc::now() + expires_in,
    }
}

async fn old_sessions_are_purged_in_bounded_runs(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = stack.node("sessions-store").await;
    let store = node.app.store.clone();
    // 1-3 expired an hour ago; 4-5 live and signed out; 6 live.
    for n in 1..=3 {
        store
            .insert_session(&session(n, -Duration::hours(1)))
            .await
            .expect("insert");
    }
    for n in 4..=6 {
        store
            .insert_session(&session(n, Duration::hours(8)))
            .await
            .expect("insert");
    }
    for n in [4, 5] {
        assert!(store.revoke_session([n; 32]).await.expect("revoke"));
    }
    let now = Utc::now();
    let day_ago = now - Duration::days(1);
    // Runs take at most their bound; a sign-out younger than the cut-off stays.
    assert_eq!(
        store.purge_sessions(now, day_ago, 2).await.expect("purge"),
        2
    );
    assert_eq!(
        store.purge_sessions(now, day_ago, 2).await.expect("purge"),
        1
    );
    assert_eq!(
        store.purge_sessions(now, day_ago, 2).await.expect("purge"),
        0
    );
    // The revoked rows go once the cut-off passes their sign-out; the live one never does.
    let later = Utc::now() + Duration::seconds(1);
    assert_eq!(
        store.purge_sessions(now, later, 10).await.expect("purge"),
        2
    );
    assert_eq!(
        store.purge_sessions(now, later, 10).await.expect("purge"),
        0
    );
    let live = store.session([6; 32]).await.expect("read").expect("live");
    assert_eq!(live.subject, "person-6");
    node.stop().await;
}

on_both_stores!(old_sessions_are_purged_in_bounded_runs);
