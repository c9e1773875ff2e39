//! The API keys a tenant admin makes, in the store, on both backends: one live key per name in
//! a tenant (a revoked key's name is free again), reads confined to a tenant, last uses that
//! never move back; and the key service's batched writes of last uses (a use is written once,
//! not again until the key is used again).

use crate::helpers::{Backend, Stack};
use chrono::{Duration, SubsecRound, Utc};
use shortener::access::{digest, generate_api_key};
use shortener::domain::{Caller, Scopes};
use shortener::keys::KeyRequest;
use shortener::store::{KeyStore, NewApiKey, NewSession, PersonClaims, SessionStore};
use std::sync::Arc;

fn new_key(tenant: &str, name: &str) -> NewApiKey {
    NewApiKey {
        tenant: tenant.into(),
        name: name.into(),
        digest: digest(&generate_api_key()),
        scopes: "links:read".into(),
        created_by: format!("{tenant}/lead"),
        expires_at: None,
        person: None,
    }
}

async fn a_name_is_taken_once_per_tenant_and_freed_by_revocation(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = stack.node("keys-store").await;
    let store = node.app.store.clone();
    let first = new_key("acme", "ci");
    let stored = store
        .insert_api_key(&first)
        .await
        .expect("insert")
        .expect("a new name");
    assert_eq!(
        (stored.tenant.as_str(), stored.name.as_str()),
        ("acme", "ci")
    );
    assert_eq!(stored.digest, first.digest);
    assert_eq!(stored.created_by, "acme/lead");
    assert_eq!(stored.last_used_at, None);
    assert!(
        store
            .insert_api_key(&new_key("acme", "ci"))
            .await
            .expect("insert")
            .is_none(),
        "a second live key of one name"
    );
    store
        .insert_api_key(&new_key("globex", "ci"))
        .await
        .expect("insert")
        .expect("another tenant's name");
    let acme = store.api_keys(Some("acme")).await.expect("list");
    assert_eq!(acme.len(), 1);
    let all = store.api_keys(None).await.expect("list");
    let names: Vec<(&str, &str)> = all
        .iter()
        .map(|k| (k.tenant.as_str(), k.name.as_str()))
        .collect();
    assert_eq!(names, [("acme", "ci"), ("globex", "ci")]);

    // Uses are written in a batch; an older time never moves a key's last use back.
    let later = Utc::now().trunc_subsecs(0);
    store
        .note_api_key_uses(vec![(stored.id, later)])
        .await
        .expect("note");
    store
        .note_api_key_uses(vec![(stored.id, later - Duration::hours(1))])
        .await
        .expect("note");
    let acme = store.api_keys(Some("acme")).await.expect("list");
    assert_eq!(acme[0].last_used_at, Some(later));

    assert!(
        !store
            .revoke_api_key("globex", "nope")
            .await
            .expect("revoke")
    );
    assert!(store.revoke_api_key("acme", "ci").await.expect("revoke"));
    assert!(
        !store.revoke_api_key("acme", "ci").await.expect("revoke"),
        "twice"
    );
    assert!(store.api_keys(Some("acme")).await.expect("list").is_empty());
    assert_eq!(store.api_keys(Some("globex")).await.expect("list").len(), 1);
    store
        .insert_api_key(&new_key("acme", "ci"))
        .await
        .expect("insert")
        .expect("a revoked key's name is free again");
    node.stop().await;
}

on_both_stores!(a_name_is_taken_once_per_tenant_and_freed_by_revocation);

async fn a_use_is_written_once_in_a_batch(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = stack.node("keys-uses").await;
    let service = Arc::clone(&node.app.api_keys);
    let lead = Caller::of_key(
        Arc::from("acme"),
        Arc::from("lead"),
        Scopes::parse_list("keys:manage,links:read").expect("scopes"),
    );
    let request = KeyRequest {
        name: "bot".into(),
        scopes: vec!["links:read".into()],
        expires_at: None,
    };
    let created = service.create(&lead, &request).await.expect("create");
    assert_eq!(service.write_last_uses().await.expect("write"), 0, "unused");
    let header = format!("Bearer {}", created.secret);
    let caller = node
        .app
        .admission
        .keys()
        .authenticate(Some(&header))
        .expect("the new key is in force at once");
    assert_eq!((&*caller.tenant, &*caller.key), ("acme", "bot"));
    assert_eq!(service.write_last_uses().await.expect("write"), 1);
    assert_eq!(
        service.write_last_uses().await.expect("write"),
        0,
        "written"
    );
    let stored = node.app.store.api_keys(Some("acme")).await.expect("list");
    let used = stored[0].last_used_at.expect("the use is stored");
    assert!((Utc::now() - used).num_seconds().abs() < 60, "{used}");
    assert!(service.revoke(&lead, "bot").await.expect("revoke"));
    assert!(
        node.app
            .admission
            .keys()
            .authenticate(Some(&header))
            .is_err(),
        "refused at once on the node that revoked it"
    );
    node.stop().await;
}

on_both_stores!(a_use_is_written_once_in_a_batch);

async fn a_persons_claims_are_kept_and_follow_their_sign_ins(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = stack.node("keys-person").await;
    let store = node.app.store.clone();
    let person = |claims: &str| PersonClaims {
        subject: "sub-ana".into(),
        claims: claims.into(),
    };
    let made_by_ana = |name: &str| NewApiKey {
        person: Some(person(r#"{"groups":["admins"]}"#)),
        ..new_key("acme", name)
    };
    for name in ["deploy", "backup", "gone"] {
        store
            .insert_api_key(&made_by_ana(name))
            .await
            .expect("insert")
            .expect("a new name");
    }
    store
        .insert_api_key(&new_key("acme", "machine"))
        .await
        .expect("insert")
        .expect("a new name");
    assert!(store.revoke_api_key("acme", "gone").await.expect("revoke"));
    let people =
        |keys: Vec<shortener::store::StoredApiKey>| -> Vec<(String, Option<PersonClaims>)> {
            keys.into_iter().map(|k| (k.name, k.person)).collect()
        };
    let admins = Some(person(r#"{"groups":["admins"]}"#));
    assert_eq!(
        people(store.api_keys(Some("acme")).await.expect("list")),
        [
            ("backup".to_string(), admins.clone()),
            ("deploy".to_string(), admins.clone()),
            ("machine".to_string(), None),
        ]
    );
    // A sign-in with other claims reaches her live keys, and no one else's.
    let viewers = r#"{"groups":["viewers"]}"#;
    assert_eq!(
        store
            .refresh_person_claims(&signed_in("sub-ana", viewers))
            .await
            .expect("refresh"),
        2
    );
    assert_eq!(
        store
            .refresh_person_claims(&signed_in("sub-ana", viewers))
            .await
            .expect("refresh"),
        0,
        "claims that did not change are not written again"
    );
    assert_eq!(
        store
            .refresh_person_claims(&signed_in("sub-bob", "{}"))
            .await
            .expect("refresh"),
        0
    );
    assert_eq!(
        people(store.api_keys(Some("acme")).await.expect("list")),
        [
            ("backup".to_string(), Some(person(viewers))),
            ("deploy".to_string(), Some(person(viewers))),
            ("machine".to_string(), None),
        ]
    );

    // Her open session takes a later sign-in's claims too, and a key made after it (say from
    // an older session, with older claims) takes her latest session's claims.
    let session = |digest: u8, claims: &str| NewSession {
        digest: [digest; 32],
        subject: "sub-ana".into(),
        email: None,
        name: None,
        claims: claims.into(),
        tenant: Some("acme".into()),
        expires_at: Utc::now() + Duration::hours(1),
    };
    store
        .insert_session(&session(1, viewers))
        .await
        .expect("a session");
    store
        .insert_session(&session(2, viewers))
        .await
        .expect("a later session");
    let editors = r#"{"groups":["editors"]}"#;
    store
        .refresh_person_claims(&signed_in("sub-ana", editors))
        .await
        .expect("refresh");
    let open = store.session([1; 32]).await.expect("read").expect("open");
    assert_eq!(open.claims, editors);
    let late = store
        .insert_api_key(&made_by_ana("late"))
        .await
        .expect("insert")
        .expect("a new name");
    assert_eq!(
        late.person,
        Some(person(editors)),
        "the latest session's claims"
    );
    node.stop().await;
}

on_both_stores!(a_persons_claims_are_kept_and_follow_their_sign_ins);

/// A tenant makes at most `MAX_KEYS_PER_TENANT` live keys through the API: one more is
/// refused, `too_many_keys`, with nothing stored; another tenant is not held to the first's
/// count; a revoked key frees its place.
async fn a_tenant_makes_a_bounded_number_of_keys(backend: Backend) {
    use shortener::keys::MAX_KEYS_PER_TENANT;
    let stack = Stack::new(backend).await;
    let node = stack.node("keys-bound").await;
    let (service, store) = (Arc::clone(&node.app.api_keys), node.app.store.clone());
    let made: Vec<_> = (0..MAX_KEYS_PER_TENANT - 1)
        .map(|i| new_key("acme", &format!("k{i}")))
        .collect();
    for chunk in made.chunks(50) {
        for stored in futures::future::join_all(chunk.iter().map(|k| store.insert_api_key(k))).await
        {
            stored.expect("insert").expect("a new name");
        }
    }
    let lead = |tenant: &str| {
        Caller::of_key(
            Arc::from(tenant),
            Arc::from("lead"),
            Scopes::parse_list("keys:manage,links:read").expect("scopes"),
        )
    };
    let request = |name: &str| KeyRequest {
        name: name.into(),
        scopes: vec!["links:read".into()],
        expires_at: None,
    };
    service
        .create(&lead("acme"), &request("last"))
        .await
        .expect("the last place");
    let refused = service
        .create(&lead("acme"), &request("one-more"))
        .await
        .expect_err("past the bound");
    assert_eq!(refused.code(), "too_many_keys", "{refused}");
    let count = || async { store.api_keys(Some("acme")).await.expect("list").len() };
    assert_eq!(count().await, MAX_KEYS_PER_TENANT, "nothing stored");
    service
        .create(&lead("globex"), &request("own"))
        .await
        .expect("another tenant's first key");
    assert!(service.revoke(&lead("acme"), "k0").await.expect("revoke"));
    service
        .create(&lead("acme"), &request("one-more"))
        .await
        .expect("a revoked key's place");
    node.stop().await;
}
on_both_stores!(a_tenant_makes_a_bounded_number_of_keys);

/// What a sign-in of `subject` with `claims` says of them, without an e-mail or a name.
fn signed_in<'a>(subject: &'a str, claims: &'a str) -> shortener::store::Person<'a> {
    shortener::store::Person {
        subject,
        claims,
        email: None,
        name: None,
    }
}
