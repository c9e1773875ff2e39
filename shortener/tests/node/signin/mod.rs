//! Single sign-on to the console: a real OpenID provider (`oidc-provider`, tests/oidc) in a
//! real browser (`browser`), and the tables of bad ID tokens, sessions, cross-site requests and
//! roles, each refused with nothing changed (`tables`, against an issuer the test signs tokens
//! for itself, `issuer`), and what sign-in adds to the audit log (`audited`).

mod audited;
mod browser;
mod capped;
mod capped_console;
mod capped_race;
mod issuer;
mod provider;
mod tables;
mod tagged;

use crate::helpers::Node;
use reqwest::StatusCode;
use shortener::access::{KEY_FILE_HEADER, KeyEntry, digest, generate_api_key, render};
use shortener::domain::Scopes;
use std::path::Path;

/// The client the node is registered as at the provider.
pub const CLIENT_ID: &str = "shortener-console";
/// Its secret.
pub const CLIENT_SECRET: &str = "console-secret-0123456789";

/// A keys file with a key of tenant `marketing` that reads its links, keys and audit log, and
/// one of `sales` (the keys make the two tenants exist); returns marketing's key.
pub fn marketing_keys(path: &Path) -> String {
    let key = generate_api_key();
    let entry = |tenant: &str, key: &str| KeyEntry {
        tenant: tenant.into(),
        name: "reader".into(),
        digest: digest(key),
        scopes: Scopes::parse_list("links:read,keys:manage,audit:read").expect("scopes"),
        expires: None,
    };
    let text = KEY_FILE_HEADER.to_string()
        + &render(&entry("marketing", &key))
        + &render(&entry("sales", &generate_api_key()));
    std::fs::write(path, text).expect("write keys");
    key
}

/// The roles of the tests: group `link-editors` edits marketing and views sales,
/// `link-viewers` views marketing, `link-admins` administers it, and `link-editors` also maps
/// to `ghost`, a tenant that holds no keys (ignored with a warning).
pub const ROLES: &str = r#"
[[role]]
claim = "groups"
value = "link-editors"
tenant = "marketing"
role = "editor"

[[role]]
claim = "groups"
value = "link-editors"
tenant = "sales"
role = "viewer"

[[role]]
claim = "groups"
value = "link-viewers"
tenant = "marketing"
role = "viewer"

[[role]]
claim = "groups"
value = "link-admins"
tenant = "marketing"
role = "admin"

[[role]]
claim = "groups"
value = "link-editors"
tenant = "ghost"
role = "owner"
"#;

/// Writes the client secret and roles files into `dir` and points `config` at `issuer`.
pub fn configure(config: &mut shortener::config::Config, dir: &Path, issuer: &str) {
    let secret = dir.join("oidc-secret");
    std::fs::write(&secret, format!("{CLIENT_SECRET}\n")).expect("write secret");
    let roles = dir.join("roles.toml");
    std::fs::write(&roles, ROLES).expect("write roles");
    let keys = dir.join("keys.toml");
    if !keys.exists() {
        marketing_keys(&keys);
    }
    config.access.api_keys_file = Some(keys);
    config.access.oidc_issuer = Some(issuer.to_string());
    config.access.oidc_client_id = Some(CLIENT_ID.to_string());
    config.access.oidc_client_secret_file = Some(secret);
    config.access.roles_file = Some(roles);
    config.listeners.public_url = None;
}

/// `GET /api/v1/me` with the session cookie `cookie` (`name=value`): its status.
pub async fn me(node: &Node, cookie: &str) -> StatusCode {
    node.client
        .get(format!("{}/api/v1/me", node.base))
        .header("cookie", cookie)
        .send()
        .await
        .expect("GET /api/v1/me")
        .status()
}

/// How many links tenant marketing holds, as its key lists them.
pub async fn marketing_links(node: &Node, key: &str) -> usize {
    let (status, body) = node.list_with_key("limit=100", key).await;
    assert_eq!(status, 200, "{body}");
    body["links"].as_array().expect("links").len()
}

/// Tenant marketing's audit entries (newest first), as its key reads them.
pub async fn marketing_audit(node: &Node, key: &str) -> Vec<serde_json::Value> {
    let response = node
        .client
        .get(format!("{}/api/v1/audit?limit=100", node.base))
        .bearer_auth(key)
        .send()
        .await
        .expect("GET /api/v1/audit");
    assert_eq!(response.status(), StatusCode::OK);
    let body: serde_json::Value = response.json().await.expect("audit page");
    body["entries"].as_array().expect("entries").clone()
}
