//! A key a signed-in person made carries at most what that person holds now: the roles file
//! taking their role down caps it, taking it away puts it out of force, giving it back restores
//! it, and the person's next sign-in with other groups caps it the same way, on every node at
//! its next key reload. A key made by an API key is untouched by all of it.

use super::issuer::{Key, TestIssuer};
use super::tables::{callback, start, whoami, with_session};
use super::{CLIENT_ID, ROLES, configure, marketing_keys};
use crate::helpers::{Backend, Node, Stack, wait_for};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::time::Duration;

/// How long a change of the roles file or a sign-in may take to reach the keys in force: the
/// test's reload interval is 200 ms (the roles file's and the keys'), and a loaded machine is
/// slow.
pub(super) const REACHES_KEYS: Duration = Duration::from_secs(20);

/// Signs in at `node` as person `sub-ana`, a member of `groups`: the session cookie.
pub(super) async fn sign_in_as_ana(
    node: &Node,
    issuer: &TestIssuer,
    key: &Key,
    groups: &[&str],
) -> String {
    let started = start(node).await;
    let now = chrono::Utc::now().timestamp();
    let claims = json!({
        "iss": issuer.issuer, "aud": CLIENT_ID, "sub": "sub-ana", "email": "ana@example.com",
        "groups": groups, "nonce": started.nonce, "iat": now, "exp": now + 300,
    });
    issuer.answer(key.sign(&key.kid, &claims));
    let query = format!("code=c&state={}", started.state);
    let (status, session) = callback(node, Some(&started.cookie), &query).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    session.expect("a session cookie")
}

/// Makes key `name` with `scopes` through `POST /api/v1/keys`, as the session `cookie` or (no
/// cookie) as the API key `by`: its secret.
pub(super) async fn make_key(
    node: &Node,
    cookie: Option<&str>,
    by: &str,
    name: &str,
    scopes: &[&str],
) -> String {
    let builder = node.client.post(format!("{}/api/v1/keys", node.base));
    let builder = match cookie {
        Some(cookie) => {
            let csrf = whoami(node, cookie).await["csrf"]
                .as_str()
                .expect("csrf")
                .to_string();
            with_session(builder, cookie, Some(&csrf), Some(node.base.as_str()))
        }
        None => builder.bearer_auth(by),
    };
    let response = builder
        .json(&json!({ "name": name, "scopes": scopes }))
        .send()
        .await
        .expect("make a key");
    assert_eq!(response.status(), StatusCode::CREATED, "{name}");
    let body: Value = response.json().await.expect("JSON");
    body["secret"].as_str().expect("a secret").to_string()
}

/// What key `secret` gets for a create and for a list.
pub(super) async fn statuses(node: &Node, secret: &str) -> (StatusCode, StatusCode) {
    let (create, _) = node
        .create_with_key(json!({ "url": "https://example.com/capped" }), secret)
        .await;
    let (list, _) = node.list_with_key("limit=1", secret).await;
    (create, list)
}

/// Key `name`'s `scopes_in_force` as the tenant's list shows it to `by`.
pub(super) async fn listed_in_force(node: &Node, by: &str, name: &str) -> Value {
    let response = node
        .client
        .get(format!("{}/api/v1/keys", node.base))
        .bearer_auth(by)
        .send()
        .await
        .expect("list keys");
    assert_eq!(response.status(), StatusCode::OK);
    let body: Value = response.json().await.expect("JSON");
    let keys = body["keys"].as_array().expect("keys");
    let key = keys.iter().find(|k| k["name"] == name).expect("listed");
    key["scopes_in_force"].clone()
}

pub(super) async fn wait_statuses(
    node: &Node,
    secret: &str,
    what: &str,
    want: (StatusCode, StatusCode),
) {
    wait_for(what, REACHES_KEYS, async || {
        statuses(node, secret).await == want
    })
    .await;
}

async fn a_persons_key_follows_their_role(backend: Backend) {
    let stack = Stack::new(backend).await;
    let file_key = marketing_keys(&stack.dir.path().join("keys.toml"));
    let signer = Key::new("k1");
    let issuer = TestIssuer::start(&[&signer]).await;
    let mut config = stack.config("capped");
    configure(&mut config, stack.dir.path(), &issuer.issuer);
    config.access.reload_interval_ms = std::num::NonZero::new(200).expect("non-zero");
    let roles = config.access.roles_file.clone().expect("a roles file");
    let node = Node::start(config).await;
    let (created, ok, forbidden, unknown) = (
        StatusCode::CREATED,
        StatusCode::OK,
        StatusCode::FORBIDDEN,
        StatusCode::UNAUTHORIZED,
    );
    let (writes, reads) = (["links:read", "links:create"], ["links:read"]);

    let admin = sign_in_as_ana(&node, &issuer, &signer, &["link-admins"]).await;
    let deploy = make_key(&node, Some(&admin), "", "deploy", &writes).await;
    // A key of hers that makes keys: what it makes is hers too, capped alike.
    let delegate = ["links:read", "links:create", "keys:manage"];
    let delegate = make_key(&node, Some(&admin), "", "delegate", &delegate).await;
    let child = make_key(&node, None, &delegate, "child", &writes).await;
    // The operator's file key (links:read, keys:manage) makes one too: it is never capped.
    let reader = make_key(&node, None, &file_key, "pipeline", &reads).await;
    for key in [&deploy, &child] {
        assert_eq!(statuses(&node, key).await, (created, ok), "an admin's key");
    }
    assert_eq!(statuses(&node, &reader).await.1, ok);

    // The roles file makes link-admins viewers: her keys keep reading and create no more.
    let demoted = ROLES.replacen(
        "value = \"link-admins\"\ntenant = \"marketing\"\nrole = \"admin\"",
        "value = \"link-admins\"\ntenant = \"marketing\"\nrole = \"viewer\"",
        1,
    );
    assert_ne!(demoted, ROLES, "the admins' table is in the roles");
    std::fs::write(&roles, &demoted).expect("write roles");
    for key in [&deploy, &child] {
        wait_statuses(&node, key, "a key capped to a viewer's", (forbidden, ok)).await;
    }
    assert_eq!(
        listed_in_force(&node, &file_key, "deploy").await,
        json!(reads)
    );

    // Without the table she holds no role in marketing: her keys are not in force.
    let gone = ROLES.replacen(
        "value = \"link-admins\"\ntenant = \"marketing\"",
        "value = \"link-admins\"\ntenant = \"sales\"",
        1,
    );
    std::fs::write(&roles, &gone).expect("write roles");
    for key in [&deploy, &child] {
        wait_statuses(&node, key, "a key out of force", (unknown, unknown)).await;
    }
    assert_eq!(statuses(&node, &reader).await.1, ok, "the file key's key");
    assert_eq!(
        listed_in_force(&node, &file_key, "deploy").await,
        Value::Null
    );
    assert_eq!(
        listed_in_force(&node, &file_key, "pipeline").await,
        json!(reads)
    );

    // The role back, the keys are whole again.
    std::fs::write(&roles, ROLES).expect("write roles");
    for key in [&deploy, &child] {
        wait_statuses(&node, key, "a key back in force", (created, ok)).await;
    }
    assert_eq!(
        listed_in_force(&node, &file_key, "deploy").await,
        json!(["links:create", "links:read"])
    );

    // Ana signs in again, now only a viewer by her groups: her keys follow her new claims, and
    // so does the session she opened as an admin, which makes no more keys.
    let viewer = sign_in_as_ana(&node, &issuer, &signer, &["link-viewers"]).await;
    let viewing = json!([{ "tenant": "marketing", "role": "viewer" }]);
    assert_eq!(whoami(&node, &viewer).await["tenants"], viewing);
    for key in [&deploy, &child] {
        wait_statuses(
            &node,
            key,
            "a key capped by the new sign-in",
            (forbidden, ok),
        )
        .await;
    }
    assert_eq!(
        whoami(&node, &admin).await["tenants"],
        viewing,
        "the older session"
    );
    let csrf = whoami(&node, &admin).await["csrf"]
        .as_str()
        .expect("csrf")
        .to_string();
    let refused = with_session(
        node.client.post(format!("{}/api/v1/keys", node.base)),
        &admin,
        Some(&csrf),
        Some(node.base.as_str()),
    )
    .json(&json!({ "name": "late", "scopes": reads }))
    .send()
    .await
    .expect("make a key");
    assert_eq!(refused.status(), forbidden, "a key from the older session");

    // Signed in with no group the roles file knows, she holds no role: her keys are out.
    sign_in_as_ana(&node, &issuer, &signer, &["nobody"]).await;
    wait_statuses(
        &node,
        &deploy,
        "a key out with its person",
        (unknown, unknown),
    )
    .await;
    assert_eq!(statuses(&node, &reader).await.1, ok);
    node.stop().await;
}

on_both_stores!(a_persons_key_follows_their_role);
