//! The tables of bad input: ID tokens that fail one check each (against an issuer the test
//! signs for), codes the real provider refuses (a replayed code, a wrong PKCE verifier),
//! sessions that no longer hold (tampered, timed out, revoked, on another node after
//! revocation), cross-site requests (no token, a wrong token, a foreign or no Origin) and
//! roles (a viewer's create, an editor's key, a tenant that does not exist). Each is refused
//! with its status, and nothing is written: no session row, no link, no key. The same session
//! works on an embedded node, whose SQLite file holds it.

use super::issuer::{Key, TestIssuer};
use super::provider::OidcProvider;
use super::{CLIENT_ID, configure, marketing_keys, marketing_links, me};
use crate::helpers::{API_KEY, Backend, Node, Stack};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::time::Duration;

/// A sign-in started at a node: the attempt cookie (`name=value`) and what the issuer was sent.
pub(super) struct Started {
    pub(super) cookie: String,
    pub(super) state: String,
    pub(super) nonce: String,
    location: String,
}

/// The `name=value` of each cookie `response` sets.
fn set_cookies(response: &reqwest::Response) -> Vec<String> {
    response
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or("").to_string())
        .collect()
}

/// `GET /console/oidc/login`: the browser's "Sign in".
async fn login(node: &Node) -> reqwest::Response {
    node.client
        .get(format!("{}/console/oidc/login", node.base))
        .send()
        .await
        .expect("login")
}

pub(super) async fn start(node: &Node) -> Started {
    let response = login(node).await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let location = response.headers()["location"]
        .to_str()
        .expect("location")
        .to_string();
    let cookie = set_cookies(&response)
        .into_iter()
        .find(|c| c.starts_with("shortener-signin="))
        .expect("an attempt cookie");
    let query: HashMap<String, String> = url::Url::parse(&location)
        .expect("a URL")
        .query_pairs()
        .into_owned()
        .collect();
    assert_eq!(query["code_challenge_method"], "S256");
    assert_eq!(query["client_id"], CLIENT_ID);
    let verifier = cookie.rsplit('.').next().expect("verifier");
    assert!(!location.contains(verifier), "the verifier is in the URL");
    Started {
        cookie,
        state: query["state"].clone(),
        nonce: query["nonce"].clone(),
        location,
    }
}

/// The node's callback with `cookie` and `query`: the status and the session cookie it set.
pub(super) async fn callback(
    node: &Node,
    cookie: Option<&str>,
    query: &str,
) -> (StatusCode, Option<String>) {
    let mut request = node
        .client
        .get(format!("{}/console/oidc/callback?{query}", node.base));
    if let Some(cookie) = cookie {
        request = request.header("cookie", cookie);
    }
    let response = request.send().await.expect("callback");
    let session = set_cookies(&response)
        .into_iter()
        .find(|c| c.starts_with("shortener-session=") && c.len() > "shortener-session=".len());
    (response.status(), session)
}

pub(super) fn claims(issuer: &str, nonce: &str, groups: &[&str]) -> Value {
    let now = chrono::Utc::now().timestamp();
    json!({
        "iss": issuer, "aud": CLIENT_ID, "sub": format!("sub-{}", groups.join("-")),
        "email": format!("{}@example.com", groups.first().unwrap_or(&"nobody")),
        "email_verified": true,
        "name": "Ann Person", "groups": groups, "nonce": nonce,
        "iat": now, "exp": now + 300,
    })
}

/// Signs in at `node` through `issuer` as a member of `groups`: the session cookie.
pub(super) async fn sign_in(
    node: &Node,
    issuer: &TestIssuer,
    key: &Key,
    groups: &[&str],
) -> String {
    let started = start(node).await;
    issuer.answer(key.sign(&key.kid, &claims(&issuer.issuer, &started.nonce, groups)));
    let query = format!("code=c&state={}", started.state);
    let (status, session) = callback(node, Some(&started.cookie), &query).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    session.expect("a session cookie")
}

async fn sessions_stored(stack: &Stack) -> i64 {
    let client = stack.db.as_ref().expect("PostgreSQL").connect().await;
    client
        .query_one("SELECT count(*) FROM console_sessions", &[])
        .await
        .expect("count")
        .get(0)
}

/// The audit log's sign-ins and refused sign-ins, with the tenant, subject and address of the
/// last sign-in.
async fn sign_ins(stack: &Stack) -> (i64, i64, Option<(String, Option<String>, Option<String>)>) {
    let client = stack.db.as_ref().expect("PostgreSQL").connect().await;
    let count = |action: &'static str| {
        let client = &client;
        async move {
            client
                .query_one(
                    "SELECT count(*) FROM audit_log WHERE action = $1 AND object_kind = 'session'",
                    &[&action],
                )
                .await
                .expect("count")
                .get::<_, i64>(0)
        }
    };
    let last = client
        .query_opt(
            "SELECT tenant, actor_subject, address FROM audit_log WHERE action = 'signin' \
             ORDER BY id DESC LIMIT 1",
            &[],
        )
        .await
        .expect("last sign-in")
        .map(|row| (row.get(0), row.get(1), row.get(2)));
    (count("signin").await, count("signin_failed").await, last)
}

async fn node_for(stack: &Stack, name: &str, issuer: &str) -> Node {
    let mut config = stack.config(name);
    configure(&mut config, stack.dir.path(), issuer);
    config.access.session_idle_seconds = std::num::NonZero::new(2).expect("non-zero");
    config.access.session_max_seconds = std::num::NonZero::new(4).expect("non-zero");
    Node::start(config).await
}

/// A node `name` on `backend` with sign-in against a test issuer and a 404 budget of four (one
/// a second): the stack, the issuer (kept while the node runs), its signing key and the node.
pub(super) async fn small_404_budget(
    backend: Backend,
    name: &str,
) -> (Stack, TestIssuer, Key, Node) {
    let stack = Stack::new(backend).await;
    let key = Key::new("k1");
    let issuer = TestIssuer::start(&[&key]).await;
    let mut config = stack.config(name);
    configure(&mut config, stack.dir.path(), &issuer.issuer);
    config.limits.not_found_burst = 4;
    config.limits.not_found_rate = 1;
    let node = Node::start(config).await;
    (stack, issuer, key, node)
}

/// Failed callbacks spend the client's 404 budget: once it is spent they are answered 429 and
/// cost no write, begun sign-in or not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_callbacks_spend_the_clients_404_budget() {
    let (stack, _issuer, _key, node) = small_404_budget(Backend::Postgres, "budget").await;
    let started = start(&node).await;
    let query = format!("code=c&state={}", started.nonce);
    let mut statuses = Vec::new();
    for _ in 0..8 {
        statuses.push(callback(&node, Some(&started.cookie), &query).await.0);
    }
    assert_eq!(statuses[..4], [StatusCode::BAD_REQUEST; 4], "{statuses:?}");
    assert!(
        statuses[5..]
            .iter()
            .all(|s| *s == StatusCode::TOO_MANY_REQUESTS),
        "{statuses:?}"
    );
    let recorded = sign_ins(&stack).await.1;
    assert!(
        (4..=5).contains(&recorded),
        "failures past the budget were recorded: {recorded}"
    );
    node.stop().await;
}

/// A client past its 404 budget is refused before its callback reaches the provider: failed
/// code exchanges (a made-up code with a matching `state`) stop costing the provider anything
/// once the budget is spent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_past_its_budget_costs_the_provider_no_exchange() {
    let (_stack, issuer, _key, node) = small_404_budget(Backend::Sqlite, "exchanges").await;
    let started = start(&node).await;
    // The state matches: each callback gets as far as the code exchange, which fails.
    let query = format!("code=made-up&state={}", started.state);
    let began = std::time::Instant::now();
    let mut statuses = Vec::new();
    for _ in 0..10 {
        statuses.push(callback(&node, Some(&started.cookie), &query).await.0);
    }
    // The budget refills a token a second: a slow run may earn one or two more exchanges.
    let refilled = began.elapsed().as_secs() as usize;
    assert!(
        statuses[6 + refilled.min(3)..]
            .iter()
            .all(|s| *s == StatusCode::TOO_MANY_REQUESTS),
        "{statuses:?}"
    );
    let exchanges = issuer.token_forms().len();
    assert!(
        (4..=5 + refilled).contains(&exchanges),
        "callbacks past the budget reached the provider: {exchanges} exchanges"
    );
    node.stop().await;
}

/// The e-mail kept with the newest session.
async fn last_session_email(stack: &Stack) -> Option<String> {
    let client = stack.db.as_ref().expect("PostgreSQL").connect().await;
    client
        .query_one(
            "SELECT email FROM console_sessions ORDER BY id DESC LIMIT 1",
            &[],
        )
        .await
        .expect("the newest session")
        .get(0)
}

/// An e-mail the issuer does not say it verified is nobody's: the session keeps none (so no
/// role mapping and no name in the records can rest on it), whether `email_verified` is false
/// or missing; `"true"` as a string counts as verified, as some issuers send it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_email_the_issuer_did_not_verify_is_left_out() {
    let stack = Stack::new(Backend::Postgres).await;
    let key = Key::new("k1");
    let issuer = TestIssuer::start(&[&key]).await;
    let node = node_for(&stack, "unverified", &issuer.issuer).await;
    let with_flag = |flag: Option<Value>| {
        let issuer = &issuer;
        let node = &node;
        let key = &key;
        async move {
            let started = start(node).await;
            let mut claims = claims(&issuer.issuer, &started.nonce, &["link-editors"]);
            match flag {
                Some(flag) => claims["email_verified"] = flag,
                None => {
                    claims
                        .as_object_mut()
                        .expect("object")
                        .remove("email_verified");
                }
            }
            issuer.answer(key.sign(&key.kid, &claims));
            let query = format!("code=c&state={}", started.state);
            let (status, session) = callback(node, Some(&started.cookie), &query).await;
            assert_eq!(status, StatusCode::SEE_OTHER);
            session.expect("a session cookie")
        }
    };
    for (flag, kept) in [
        (Some(json!(true)), true),
        (Some(json!("true")), true),
        (Some(json!(false)), false),
        (None, false),
        (Some(json!("yes")), false),
    ] {
        with_flag(flag.clone()).await;
        assert_eq!(
            last_session_email(&stack).await.is_some(),
            kept,
            "email_verified {flag:?}"
        );
    }
}

/// The token table's cases: a name and the token, each wrong in one way.
fn bad_tokens(issuer: &str, nonce: &str, good: &Key, other: &Key) -> Vec<(&'static str, String)> {
    let valid = claims(issuer, nonce, &["link-editors"]);
    let with = |name: &str, value: Value| {
        let mut c = valid.clone();
        c[name] = value;
        c
    };
    let unsigned = format!(
        "{}.{}.",
        URL_SAFE_NO_PAD.encode(br#"{"alg":"none","typ":"JWT"}"#),
        URL_SAFE_NO_PAD.encode(valid.to_string())
    );
    let mut hmac = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256);
    hmac.kid = Some(good.kid.clone());
    let symmetric = jsonwebtoken::encode(
        &hmac,
        &valid,
        &jsonwebtoken::EncodingKey::from_secret(super::CLIENT_SECRET.as_bytes()),
    )
    .expect("sign");
    let mut no_nonce = valid.clone();
    no_nonce.as_object_mut().expect("object").remove("nonce");
    let now = chrono::Utc::now().timestamp();
    let (k, kid) = (good, good.kid.as_str());
    vec![
        ("wrong signature", other.sign(kid, &valid)),
        ("alg none", unsigned),
        ("HMAC with the client secret", symmetric),
        (
            "wrong issuer",
            k.sign(kid, &with("iss", json!("http://127.0.0.1:1"))),
        ),
        (
            "wrong audience",
            k.sign(kid, &with("aud", json!("another-client"))),
        ),
        (
            "two audiences, no azp",
            k.sign(kid, &with("aud", json!([CLIENT_ID, "other"]))),
        ),
        (
            "another authorized party, one audience",
            k.sign(kid, &with("azp", json!("another-client"))),
        ),
        ("expired", k.sign(kid, &with("exp", json!(now - 3600)))),
        (
            "not valid yet",
            k.sign(kid, &with("nbf", json!(now + 3600))),
        ),
        (
            "nonce mismatch",
            k.sign(kid, &with("nonce", json!("another-nonce"))),
        ),
        ("no nonce", k.sign(kid, &no_nonce)),
        ("no subject", k.sign(kid, &with("sub", json!("")))),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn id_tokens_that_fail_a_check_open_no_session_and_keys_rotate() {
    let stack = Stack::new(Backend::Postgres).await;
    let (first, other) = (Key::new("k1"), Key::new("k1"));
    let issuer = TestIssuer::start(&[&first]).await;
    let node = node_for(&stack, "a", &issuer.issuer).await;
    let session = sign_in(&node, &issuer, &first, &["link-editors"]).await;
    assert_eq!(me(&node, &session).await, StatusCode::OK);
    let form = issuer.token_forms().pop().expect("an exchange");
    assert!(form.contains("grant_type=authorization_code"), "{form}");
    assert!(
        form.contains("code_verifier=") && !form.contains("code_verifier=&"),
        "{form}"
    );
    assert_eq!(sessions_stored(&stack).await, 1);
    let (signed_in, refused, last) = sign_ins(&stack).await;
    assert_eq!((signed_in, refused), (1, 0));
    let (tenant, subject, address) = last.expect("the sign-in is in the audit log");
    assert_eq!(tenant, "marketing");
    assert!(subject.is_some_and(|s| !s.is_empty()));
    assert_eq!(address.as_deref(), Some("127.0.0.1"));

    let started = start(&node).await;
    for (case, token) in bad_tokens(&issuer.issuer, &started.nonce, &first, &other) {
        issuer.answer(token);
        let query = format!("code=c&state={}", started.state);
        let (status, opened) = callback(&node, Some(&started.cookie), &query).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{case}");
        assert_eq!(opened, None, "{case}");
        assert_eq!(sessions_stored(&stack).await, 1, "{case}");
    }
    // The browser's round trip itself: another state, no attempt cookie, the issuer's refusal.
    let query = format!("code=c&state={}", started.nonce);
    assert_eq!(
        callback(&node, Some(&started.cookie), &query).await.0,
        StatusCode::BAD_REQUEST
    );
    let query = format!("code=c&state={}", started.state);
    assert_eq!(
        callback(&node, None, &query).await.0,
        StatusCode::BAD_REQUEST
    );
    let refused = format!("error=access_denied&state={}", started.state);
    assert_eq!(
        callback(&node, Some(&started.cookie), &refused).await.0,
        StatusCode::UNAUTHORIZED
    );
    // Every refusal above of a sign-in begun in the browser is in the audit log as a failed
    // sign-in; no sign-in was added. A callback with none begun is noise anyone can send, and
    // is recorded nowhere, however often it comes.
    for _ in 0..20 {
        assert_eq!(
            callback(&node, None, &query).await.0,
            StatusCode::BAD_REQUEST
        );
    }
    let cases = bad_tokens(&issuer.issuer, &started.nonce, &first, &other).len() as i64;
    assert_eq!(sign_ins(&stack).await.0, 1);
    assert_eq!(sign_ins(&stack).await.1, cases + 2);

    // An unknown key id: the keys were read just now, so they are not read again at once.
    let reads = issuer.jwks_reads();
    let stranger = Key::new("k9");
    for _ in 0..3 {
        issuer.answer(stranger.sign("k9", &claims(&issuer.issuer, &started.nonce, &["x"])));
        let (status, _) = callback(&node, Some(&started.cookie), &query).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
    }
    assert_eq!(
        issuer.jwks_reads(),
        reads,
        "the keys were read again for a made-up key id"
    );

    // The issuer rotates its keys: once the bound has passed, a token by the new key is taken.
    let second = Key::new("k2");
    issuer.rotate(&[&second]);
    tokio::time::sleep(shortener::signin::oidc::JWKS_REFETCH_INTERVAL).await;
    sign_in(&node, &issuer, &second, &["link-editors"]).await;
    assert_eq!(issuer.jwks_reads(), reads + 1);
    assert_eq!(sessions_stored(&stack).await, 2);
    node.stop().await;
}

/// A request made with the session `cookie`: `token` in X-CSRF-Token and `origin` in Origin
/// when given.
pub(super) fn with_session(
    builder: reqwest::RequestBuilder,
    cookie: &str,
    token: Option<&str>,
    origin: Option<&str>,
) -> reqwest::RequestBuilder {
    let mut builder = builder.header("cookie", cookie);
    if let Some(token) = token {
        builder = builder.header("x-csrf-token", token);
    }
    if let Some(origin) = origin {
        builder = builder.header("origin", origin);
    }
    builder
}

/// `GET /console/session` with `cookie`.
pub(super) async fn whoami(node: &Node, cookie: &str) -> Value {
    let response = node
        .client
        .get(format!("{}/console/session", node.base))
        .header("cookie", cookie)
        .send()
        .await
        .expect("session");
    assert_eq!(response.status(), StatusCode::OK);
    response.json().await.expect("JSON")
}

async fn create(
    node: &Node,
    cookie: &str,
    token: Option<&str>,
    origin: Option<&str>,
) -> StatusCode {
    let builder = node.client.post(format!("{}/api/v1/links", node.base));
    with_session(builder, cookie, token, origin)
        .json(&json!({ "url": "https://example.com/session" }))
        .send()
        .await
        .expect("create")
        .status()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cross_site_requests_and_roles_are_refused_with_nothing_written() {
    let stack = Stack::new(Backend::Postgres).await;
    let key = marketing_keys(&stack.dir.path().join("keys.toml"));
    let signer = Key::new("k1");
    let issuer = TestIssuer::start(&[&signer]).await;
    let node = node_for(&stack, "a", &issuer.issuer).await;
    let editor = sign_in(&node, &issuer, &signer, &["link-editors"]).await;
    let person = whoami(&node, &editor).await;
    // The mapping to `ghost`, which holds no keys, is left out.
    assert_eq!(
        person["tenants"],
        json!([{ "tenant": "marketing", "role": "editor" }, { "tenant": "sales", "role": "viewer" }])
    );
    let csrf = person["csrf"].as_str().expect("a token").to_string();
    let origin = node.base.as_str();
    for (case, token, from) in [
        ("no token", None, Some(origin)),
        ("a wrong token", Some("forged"), Some(origin)),
        (
            "a foreign Origin",
            Some(csrf.as_str()),
            Some("http://evil.example"),
        ),
        ("no Origin", Some(csrf.as_str()), None),
    ] {
        assert_eq!(
            create(&node, &editor, token, from).await,
            StatusCode::FORBIDDEN,
            "{case}"
        );
        assert_eq!(marketing_links(&node, &key).await, 0, "{case}");
    }
    assert_eq!(
        create(&node, &editor, Some(&csrf), Some(origin)).await,
        StatusCode::CREATED
    );
    assert_eq!(marketing_links(&node, &key).await, 1);
    // Every answer read with a session (a cookie, which shared caches do not treat as
    // private) is no-store, so a cache in front of the node keeps none for another person.
    let read = |path: String| {
        with_session(
            node.client.get(format!("{}{path}", node.base)),
            &editor,
            None,
            None,
        )
        .send()
    };
    let listed: Value = read("/api/v1/links".into())
        .await
        .expect("list")
        .json()
        .await
        .expect("JSON");
    let code = listed["links"][0]["code"]
        .as_str()
        .expect("a code")
        .to_string();
    for path in [
        format!("/api/v1/links/{code}"),
        format!("/api/v1/links/{code}/history"),
        "/api/v1/me".into(),
    ] {
        let answer = read(path.clone()).await.expect("read");
        assert_eq!(answer.status(), StatusCode::OK, "{path}");
        assert_eq!(answer.headers()["cache-control"], "no-store", "{path}");
    }
    // An API key needs none of it, with or without a cookie beside it.
    let keyed = node
        .client
        .post(format!("{}/api/v1/links", node.base))
        .bearer_auth(API_KEY)
        .header("cookie", &editor)
        .json(&json!({ "url": "https://example.com/key" }))
        .send()
        .await
        .expect("create with a key");
    assert_eq!(keyed.status(), StatusCode::CREATED);

    // An editor makes no key; an admin does.
    let keys = |cookie: &str, token: Option<&str>| {
        let builder = node.client.post(format!("{}/api/v1/keys", node.base));
        with_session(builder, cookie, token, Some(origin))
            .json(&json!({ "name": "bot", "scopes": ["links:read"] }))
    };
    let refused = keys(&editor, Some(&csrf)).send().await.expect("key");
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    let admin = sign_in(&node, &issuer, &signer, &["link-admins"]).await;
    let admin_csrf = whoami(&node, &admin).await["csrf"]
        .as_str()
        .expect("token")
        .to_string();
    assert_eq!(
        keys(&admin, None).send().await.expect("key").status(),
        StatusCode::FORBIDDEN
    );
    let made = keys(&admin, Some(&admin_csrf)).send().await.expect("key");
    assert_eq!(made.status(), StatusCode::CREATED);

    // A viewer's create is refused.
    let viewer = sign_in(&node, &issuer, &signer, &["link-viewers"]).await;
    let viewer_csrf = whoami(&node, &viewer).await["csrf"]
        .as_str()
        .expect("token")
        .to_string();
    assert_eq!(
        create(&node, &viewer, Some(&viewer_csrf), Some(origin)).await,
        StatusCode::FORBIDDEN
    );
    assert_eq!(marketing_links(&node, &key).await, 1);

    // Switching tenant is a change too; a tenant without a role (or without keys) is refused.
    let switch = |tenant: &str, token: Option<&str>| {
        let builder = node
            .client
            .post(format!("{}/console/session/tenant", node.base));
        with_session(builder, &editor, token, Some(origin)).json(&json!({ "tenant": tenant }))
    };
    assert_eq!(
        switch("sales", None).send().await.expect("switch").status(),
        StatusCode::FORBIDDEN
    );
    assert_eq!(whoami(&node, &editor).await["tenant"], "marketing");
    for tenant in ["ghost", "nowhere"] {
        let status = switch(tenant, Some(&csrf))
            .send()
            .await
            .expect("switch")
            .status();
        assert_eq!(status, StatusCode::FORBIDDEN, "{tenant}");
    }
    // A body past the bound of small bodies is refused as such, not read whole.
    let big = switch(&"x".repeat(20 << 10), Some(&csrf))
        .send()
        .await
        .expect("switch");
    assert_eq!(big.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let switched = switch("sales", Some(&csrf)).send().await.expect("switch");
    assert_eq!(switched.status(), StatusCode::NO_CONTENT);
    assert_eq!(whoami(&node, &editor).await["tenant"], "sales");
    assert_eq!(
        create(&node, &editor, Some(&csrf), Some(origin)).await,
        StatusCode::FORBIDDEN
    );

    // A person no table maps opens a session that may do nothing.
    let nobody = sign_in(&node, &issuer, &signer, &["nobody"]).await;
    assert_eq!(whoami(&node, &nobody).await["tenants"], json!([]));
    assert_eq!(me(&node, &nobody).await, StatusCode::FORBIDDEN);
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_end_when_tampered_timed_out_or_revoked_on_every_node() {
    let stack = Stack::new(Backend::Postgres).await;
    let signer = Key::new("k1");
    let issuer = TestIssuer::start(&[&signer]).await;
    let a = node_for(&stack, "a", &issuer.issuer).await;
    let b = node_for(&stack, "b", &issuer.issuer).await;
    let session = sign_in(&a, &issuer, &signer, &["link-editors"]).await;
    assert_eq!(me(&b, &session).await, StatusCode::OK);
    let mut tampered = session.clone();
    let last = tampered.pop().expect("a value");
    tampered.push(if last == 'A' { 'B' } else { 'A' });
    assert_eq!(me(&a, &tampered).await, StatusCode::UNAUTHORIZED);

    // Revoked on one node: refused on both at once.
    let csrf = whoami(&a, &session).await["csrf"]
        .as_str()
        .expect("token")
        .to_string();
    let out = with_session(
        a.client.post(format!("{}/console/oidc/logout", a.base)),
        &session,
        Some(&csrf),
        Some(&a.base),
    )
    .send()
    .await
    .expect("logout");
    assert_eq!(out.status(), StatusCode::OK);
    let cleared = set_cookies(&out);
    assert!(
        cleared.contains(&"shortener-session=".to_string()),
        "{cleared:?}"
    );
    let next: Value = out.json().await.expect("JSON");
    let next = next["next"].as_str().expect("next");
    assert!(
        next.starts_with(&format!("{}/logout?client_id=", issuer.issuer)),
        "{next}"
    );
    let value = session.split_once('=').expect("value").1;
    assert!(!next.contains(value) && !next.contains(&csrf), "{next}");
    assert_eq!(me(&a, &session).await, StatusCode::UNAUTHORIZED);
    assert_eq!(me(&b, &session).await, StatusCode::UNAUTHORIZED);

    // Idle for longer than 2 s: refused.
    let idle = sign_in(&a, &issuer, &signer, &["link-editors"]).await;
    tokio::time::sleep(Duration::from_millis(2_300)).await;
    assert_eq!(me(&a, &idle).await, StatusCode::UNAUTHORIZED);
    // Used every second, but past its 4 s: refused.
    let busy = sign_in(&a, &issuer, &signer, &["link-editors"]).await;
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(me(&b, &busy).await, StatusCode::OK);
    }
    tokio::time::sleep(Duration::from_millis(1_300)).await;
    assert_eq!(me(&b, &busy).await, StatusCode::UNAUTHORIZED);
    a.stop().await;
    b.stop().await;
}

/// Cookies a client holds for the provider, by name (paths and expiry ignored: the flow is
/// short).
#[derive(Default)]
struct Jar(HashMap<String, String>);

impl Jar {
    fn take(&mut self, response: &reqwest::Response) {
        for cookie in set_cookies(response) {
            if let Some((name, value)) = cookie.split_once('=') {
                self.0.insert(name.into(), value.into());
            }
        }
    }

    fn header(&self) -> String {
        self.0
            .iter()
            .map(|(n, v)| format!("{n}={v}"))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// Signs in at the real provider as `login` for the sign-in `started`, as a browser would
/// (the login form, no consent asked): the query the provider sends back to the node.
async fn provider_code(
    client: &reqwest::Client,
    issuer: &str,
    started: &Started,
    login: &str,
) -> String {
    let mut jar = Jar::default();
    let mut next = started.location.clone();
    let mut submitted = false;
    for _ in 0..10 {
        let response = client
            .get(&next)
            .header("cookie", jar.header())
            .send()
            .await
            .expect("provider");
        jar.take(&response);
        if response.status().is_redirection() {
            let location = response.headers()["location"].to_str().expect("location");
            let location = url::Url::parse(issuer)
                .expect("issuer")
                .join(location)
                .expect("URL");
            if location.path() == "/console/oidc/callback" {
                return location.query().expect("a query").to_string();
            }
            next = location.to_string();
            continue;
        }
        assert_eq!(response.status(), StatusCode::OK, "{next}");
        assert!(!submitted, "the provider showed a page twice");
        let form = client
            .post(&next)
            .header("cookie", jar.header())
            .form(&[("prompt", "login"), ("login", login), ("password", "any")])
            .send()
            .await
            .expect("login form");
        jar.take(&form);
        assert!(form.status().is_redirection(), "{}", form.status());
        next = url::Url::parse(issuer)
            .expect("issuer")
            .join(form.headers()["location"].to_str().expect("location"))
            .expect("URL")
            .to_string();
        submitted = true;
    }
    panic!("the provider never sent the browser back");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_provider_refuses_a_replayed_code_and_a_wrong_verifier() {
    let stack = Stack::new(Backend::Postgres).await;
    let port = testkit::free_port();
    let base = format!("http://127.0.0.1:{port}");
    let provider = OidcProvider::start(std::slice::from_ref(&base)).await;
    let mut config = stack.config("a");
    config.listeners.http_addr = format!("127.0.0.1:{port}").parse().expect("address");
    configure(&mut config, stack.dir.path(), &provider.issuer);
    let node = Node::start(config).await;
    let client = node.client.clone();

    // A wrong PKCE verifier (the attempt cookie's, changed): the provider refuses the code.
    let started = start(&node).await;
    let query = provider_code(&client, &provider.issuer, &started, "editor").await;
    let (head, _) = started.cookie.rsplit_once('.').expect("verifier");
    let wrong = format!("{head}.{}", "v".repeat(43));
    assert_eq!(
        callback(&node, Some(&wrong), &query).await,
        (StatusCode::UNAUTHORIZED, None)
    );
    let missing = format!("{head}.");
    assert_eq!(
        callback(&node, Some(&missing), &query).await,
        (StatusCode::UNAUTHORIZED, None)
    );
    assert_eq!(sessions_stored(&stack).await, 0);

    // The right verifier opens a session; the same code again opens none.
    let started = start(&node).await;
    let query = provider_code(&client, &provider.issuer, &started, "editor").await;
    let (status, session) = callback(&node, Some(&started.cookie), &query).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(
        me(&node, &session.expect("a session")).await,
        StatusCode::OK
    );
    assert_eq!(
        callback(&node, Some(&started.cookie), &query).await,
        (StatusCode::UNAUTHORIZED, None)
    );
    assert_eq!(sessions_stored(&stack).await, 1);
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_embedded_node_keeps_sessions_in_its_sqlite_file() {
    let stack = Stack::new(Backend::Sqlite).await;
    let key = marketing_keys(&stack.dir.path().join("keys.toml"));
    let signer = Key::new("k1");
    let issuer = TestIssuer::start(&[&signer]).await;
    let node = node_for(&stack, "a", &issuer.issuer).await;
    let session = sign_in(&node, &issuer, &signer, &["link-editors"]).await;
    let person = whoami(&node, &session).await;
    assert_eq!(person["email"], "link-editors@example.com");
    let csrf = person["csrf"].as_str().expect("token").to_string();
    let origin = node.base.clone();
    assert_eq!(
        create(&node, &session, None, Some(&origin)).await,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        create(&node, &session, Some(&csrf), Some(&origin)).await,
        StatusCode::CREATED
    );
    assert_eq!(marketing_links(&node, &key).await, 1);
    let switched = with_session(
        node.client
            .post(format!("{}/console/session/tenant", node.base)),
        &session,
        Some(&csrf),
        Some(&origin),
    )
    .json(&json!({ "tenant": "sales" }))
    .send()
    .await
    .expect("switch");
    assert_eq!(switched.status(), StatusCode::NO_CONTENT);
    assert_eq!(whoami(&node, &session).await["tenant"], "sales");
    let out = with_session(
        node.client
            .post(format!("{}/console/oidc/logout", node.base)),
        &session,
        Some(&csrf),
        Some(&origin),
    )
    .send()
    .await
    .expect("logout");
    assert_eq!(out.status(), StatusCode::OK);
    assert_eq!(me(&node, &session).await, StatusCode::UNAUTHORIZED);
    assert_eq!(whoami(&node, &session).await["signed_in"], false);
    node.stop().await;
}

/// A sign-in in a browser that still holds a session ends that session: on a shared machine,
/// a copy of the cookie of the person before is good for nothing once the next one signs in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_sign_in_ends_the_browsers_previous_session() {
    let stack = Stack::new(Backend::Sqlite).await;
    marketing_keys(&stack.dir.path().join("keys.toml"));
    let signer = Key::new("k1");
    let issuer = TestIssuer::start(&[&signer]).await;
    let node = node_for(&stack, "a", &issuer.issuer).await;
    let first = sign_in(&node, &issuer, &signer, &["link-editors"]).await;
    assert_eq!(me(&node, &first).await, StatusCode::OK);
    // The next sign-in in the same browser: its attempt cookie and the first session's go
    // together.
    let started = start(&node).await;
    issuer.answer(signer.sign(
        &signer.kid,
        &claims(&issuer.issuer, &started.nonce, &["link-editors"]),
    ));
    let both = format!("{}; {first}", started.cookie);
    let query = format!("code=c&state={}", started.state);
    let (status, second) = callback(&node, Some(&both), &query).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let second = second.expect("a session cookie");
    assert_eq!(me(&node, &second).await, StatusCode::OK);
    assert_eq!(me(&node, &first).await, StatusCode::UNAUTHORIZED);
    node.stop().await;
}

/// A person's open sessions show what their latest sign-in says of them: signed in again with
/// a new e-mail (elsewhere, in another browser), their older session acts under it too.
async fn a_persons_older_sessions_take_their_latest_email(backend: Backend) {
    let stack = Stack::new(backend).await;
    marketing_keys(&stack.dir.path().join("keys.toml"));
    let signer = Key::new("k1");
    let issuer = TestIssuer::start(&[&signer]).await;
    let node = node_for(&stack, "a", &issuer.issuer).await;
    let first = sign_in(&node, &issuer, &signer, &["link-editors"]).await;
    assert_eq!(
        whoami(&node, &first).await["email"],
        "link-editors@example.com"
    );
    let started = start(&node).await;
    let mut renamed = claims(&issuer.issuer, &started.nonce, &["link-editors"]);
    renamed["email"] = json!("renamed@example.com");
    issuer.answer(signer.sign(&signer.kid, &renamed));
    let query = format!("code=c&state={}", started.state);
    let (status, second) = callback(&node, Some(&started.cookie), &query).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let second = second.expect("a session cookie");
    for session in [&first, &second] {
        assert_eq!(whoami(&node, session).await["email"], "renamed@example.com");
    }
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persons_older_sessions_take_their_latest_email_on_sqlite() {
    a_persons_older_sessions_take_their_latest_email(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persons_older_sessions_take_their_latest_email_on_postgres() {
    a_persons_older_sessions_take_their_latest_email(Backend::Postgres).await;
}

/// An issuer that does not answer (nothing listens on its port): the browser's "Sign in" gets a
/// page that says so and where else to go, not an API error in JSON, and no attempt cookie.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_issuer_that_does_not_answer_gets_the_browser_a_page() {
    let stack = Stack::new(Backend::Sqlite).await;
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let issuer = format!("http://{}", closed.local_addr().expect("addr"));
    drop(closed);
    let node = node_for(&stack, "no-issuer", &issuer).await;
    let response = login(&node).await;
    assert_eq!(response.status(), reqwest::StatusCode::BAD_GATEWAY);
    assert!(response.headers().get("set-cookie").is_none());
    let media = response.headers()["content-type"]
        .to_str()
        .expect("ascii")
        .to_string();
    assert!(media.starts_with("text/plain"), "{media}");
    let body = response.text().await.expect("body");
    assert!(
        body.starts_with("Sign-in could not start: the identity provider did not answer")
            && body.contains("/console/"),
        "{body}"
    );
}
