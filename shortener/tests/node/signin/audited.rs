//! What sign-in leaves behind besides sessions: a change of the roles file is recorded in the
//! audit log by the node that reloads it, per tenant it touched; and the node's logs, captured
//! at debug level through a full sign-in and a key made with the session, hold none of the
//! secrets that went by (the code, the ID token, the state, nonce and PKCE verifier, the
//! session cookie, the anti-CSRF token, the new key's secret).

use super::issuer::{Key, TestIssuer};
use super::tables::{callback, claims, start, whoami, with_session};
use super::{ROLES, configure, marketing_audit, marketing_keys};
use crate::helpers::{Backend, Node, Stack};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, Once};
use std::time::Duration;

/// Every log line any node of this test binary wrote since [`capture_logs`] was first called.
static LOGS: Mutex<Vec<u8>> = Mutex::new(Vec::new());

/// Appends what it is given to [`LOGS`].
struct Capture;

impl Write for Capture {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        LOGS.lock().expect("logs").extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Whether [`LOGS`] takes events now: only while a test holds a [`Capturing`], so the other
/// tests of the binary run with logging off as before.
static CAPTURING: AtomicBool = AtomicBool::new(false);

/// Capturing lasts as long as this.
struct Capturing;

impl Drop for Capturing {
    fn drop(&mut self) {
        CAPTURING.store(false, Ordering::Relaxed);
    }
}

/// Installs, once for the test binary, a subscriber that writes every event at debug level
/// and above (trace for the node's own crate), with its spans' fields, into [`LOGS`] while
/// capturing; and captures until the answer is dropped.
fn capture_logs() -> Capturing {
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let while_capturing =
            tracing_subscriber::filter::filter_fn(|_| CAPTURING.load(Ordering::Relaxed));
        let levels = tracing_subscriber::EnvFilter::new("debug,shortener=trace");
        tracing_subscriber::registry()
            .with(
                tracing_subscriber::fmt::layer()
                    .with_writer(|| Capture)
                    .with_ansi(false)
                    .with_filter(levels)
                    .with_filter(while_capturing),
            )
            .init();
    });
    CAPTURING.store(true, Ordering::Relaxed);
    Capturing
}

/// The captured logs as text.
fn logs() -> String {
    String::from_utf8_lossy(&LOGS.lock().expect("logs")).into_owned()
}

/// Marketing's `role_mapping.change` entries, waiting up to ten seconds for `count` of them.
async fn role_changes(node: &Node, key: &str, count: usize) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let found: Vec<Value> = marketing_audit(node, key)
            .await
            .into_iter()
            .filter(|e| e["action"] == "role_mapping.change")
            .collect();
        if found.len() >= count || tokio::time::Instant::now() > deadline {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_of_the_roles_file_is_audited_per_tenant() {
    let stack = Stack::new(Backend::Sqlite).await;
    let key = marketing_keys(&stack.dir.path().join("keys.toml"));
    let signer = Key::new("k1");
    let issuer = TestIssuer::start(&[&signer]).await;
    let mut config = stack.config("a");
    configure(&mut config, stack.dir.path(), &issuer.issuer);
    let roles = config.access.roles_file.clone().expect("a roles file");
    let node = Node::start(config).await;
    assert!(role_changes(&node, &key, 0).await.is_empty());

    // Editors become admins of marketing, viewers lose it; sales is untouched.
    let changed = ROLES
        .replace(
            "value = \"link-editors\"\ntenant = \"marketing\"\nrole = \"editor\"",
            "value = \"link-editors\"\ntenant = \"marketing\"\nrole = \"admin\"",
        )
        .replace(
            "value = \"link-viewers\"\ntenant = \"marketing\"\nrole = \"viewer\"",
            "value = \"link-viewers\"\ntenant = \"sales\"\nrole = \"viewer\"",
        );
    assert_ne!(changed, ROLES);
    std::fs::write(&roles, &changed).expect("write roles");
    let entries = role_changes(&node, &key, 1).await;
    assert_eq!(entries.len(), 1, "{entries:?}");
    let entry = &entries[0];
    assert_eq!(entry["tenant"], "marketing", "{entry}");
    assert_eq!(
        entry["object"],
        json!({"kind": "role_mapping", "id": "marketing"})
    );
    assert_eq!(entry["actor"]["key"], "roles-file", "{entry}");
    assert!(entry["actor"]["subject"].is_null(), "{entry}");
    assert!(entry["actor"]["email"].is_null(), "{entry}");
    assert!(entry["address"].is_null(), "{entry}");
    let table = |value: &str, role: &str| json!({"claim": "groups", "value": value, "role": role});
    assert_eq!(
        entry["change"]["added"],
        json!([table("link-editors", "admin")])
    );
    assert_eq!(
        entry["change"]["removed"],
        json!([
            table("link-editors", "editor"),
            table("link-viewers", "viewer")
        ])
    );
    assert!(
        entry["change"]["node"]
            .as_str()
            .is_some_and(|n| !n.is_empty()),
        "{entry}"
    );

    // The same tables in another order change nothing, and record nothing.
    let reordered: Vec<&str> = changed.split("[[role]]").collect();
    let mut tables = reordered[1..].to_vec();
    tables.reverse();
    std::fs::write(&roles, format!("[[role]]{}", tables.join("[[role]]"))).expect("write");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(role_changes(&node, &key, 2).await.len(), 1);
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_of_a_sign_in_or_a_new_key_reaches_the_logs() {
    let capturing = capture_logs();
    let stack = Stack::new(Backend::Sqlite).await;
    marketing_keys(&stack.dir.path().join("keys.toml"));
    let signer = Key::new("k1");
    let issuer = TestIssuer::start(&[&signer]).await;
    let mut config = stack.config("a");
    configure(&mut config, stack.dir.path(), &issuer.issuer);
    let node = Node::start(config).await;
    tracing::info!("the log capture works");

    // A sign-in as an admin of marketing, by a code that can be looked for.
    let started = start(&node).await;
    let attempt = started.cookie.split_once('=').expect("name=value").1;
    let verifier = attempt.rsplit('.').next().expect("a verifier").to_string();
    let id_token = signer.sign(
        &signer.kid,
        &claims(&issuer.issuer, &started.nonce, &["link-admins"]),
    );
    issuer.answer(id_token.clone());
    let code = shortener::access::generate_api_key();
    let query = format!("code={code}&state={}", started.state);
    let (status, session) = callback(&node, Some(&started.cookie), &query).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let session = session.expect("a session cookie");
    let csrf = whoami(&node, &session).await["csrf"]
        .as_str()
        .expect("a token")
        .to_string();

    // A key made with the session, as the console's Keys page does.
    let made = with_session(
        node.client.post(format!("{}/api/v1/keys", node.base)),
        &session,
        Some(&csrf),
        Some(&node.base),
    )
    .json(&json!({ "name": "robot", "scopes": ["links:read"] }))
    .send()
    .await
    .expect("create a key");
    assert_eq!(made.status(), StatusCode::CREATED);
    let made: Value = made.json().await.expect("JSON");
    let secret = made["secret"].as_str().expect("a secret").to_string();
    node.stop().await;
    drop(capturing);

    let logs = logs();
    assert!(
        logs.contains("the log capture works"),
        "nothing was captured"
    );
    assert!(
        logs.contains("a person signed in"),
        "the sign-in was not logged"
    );
    let cookie = session.split_once('=').expect("name=value").1;
    for (what, value) in [
        ("the authorization code", code.as_str()),
        ("the ID token", id_token.as_str()),
        ("the session cookie", cookie),
        ("the anti-CSRF token", csrf.as_str()),
        ("the state", started.state.as_str()),
        ("the nonce", started.nonce.as_str()),
        ("the PKCE verifier", verifier.as_str()),
        ("the new key's secret", secret.as_str()),
    ] {
        assert!(
            value.len() >= 16,
            "{what} is too short to look for: {value}"
        );
        assert!(!logs.contains(value), "{what} was logged");
    }
}
