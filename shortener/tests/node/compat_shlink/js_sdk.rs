//! Shlink's own JavaScript SDK (`@shlinkio/shlink-js-sdk`, pinned in tests/compat-js) against a
//! node: `tests/compat-js/shlink.mjs` runs every step a Shlink client takes (health, create,
//! list, get, edit, visits, tags renamed and deleted, domains, redirect rules, delete) and fails at the first
//! answer the SDK reads differently. Needs Node.js 18 or later and npm; the SDK is installed
//! with `npm ci` from the lockfile on the first run (from the npm registry) and reused after.

use super::shlink_node;
use crate::helpers::{Backend, Stack};
use std::path::PathBuf;
use std::process::Command;

/// The pinned SDK version (package.json and package-lock.json say the same).
const SDK_VERSION: &str = "3.2.1";

fn js_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/compat-js")
}

/// Installs the pinned SDK unless it already is.
fn install(dir: &std::path::Path) {
    let installed = dir.join("node_modules/@shlinkio/shlink-js-sdk/package.json");
    let current = std::fs::read_to_string(&installed)
        .ok()
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
        .is_some_and(|package| package["version"] == SDK_VERSION);
    if current {
        return;
    }
    let out = Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund"])
        .current_dir(dir)
        .output()
        .expect("npm must be installed to run the Shlink SDK test (Node.js 18 or later)");
    assert!(
        out.status.success(),
        "npm ci in tests/compat-js failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shlinks_js_sdk_drives_a_node() {
    let dir = js_dir();
    install(&dir);
    let stack = Stack::new(Backend::Sqlite).await;
    let (node, keys) = shlink_node(&stack, "a").await;
    let (status, body) = crate::domains::claim(&node, &keys.own, "sdk.acme.example").await;
    assert_eq!(status, 201, "{body}");
    let script = tokio::process::Command::new("node")
        .arg("shlink.mjs")
        .current_dir(&dir)
        .env("SHLINK_BASE", &node.base)
        .env("SHLINK_KEY", &keys.own)
        .env("SHLINK_DOMAIN", "sdk.acme.example")
        .output()
        .await
        .expect("node must be installed to run the Shlink SDK test (Node.js 18 or later)");
    let stdout = String::from_utf8_lossy(&script.stdout);
    let stderr = String::from_utf8_lossy(&script.stderr);
    assert!(
        script.status.success(),
        "shlink.mjs failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("all steps passed"), "{stdout}");
}
