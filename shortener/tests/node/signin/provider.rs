//! The real OpenID provider: `tests/oidc/provider.mjs` (the npm package `oidc-provider`,
//! pinned in tests/oidc), run by Node.js on 127.0.0.1 and stopped with the test. The package is
//! installed with `npm ci` from the lockfile on the first run and reused after.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The pinned package version (package.json and package-lock.json say the same).
const VERSION: &str = "9.13.3";

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/oidc")
}

/// Installs the pinned provider unless it already is.
fn install() {
    let dir = dir();
    let installed = dir.join("node_modules/oidc-provider/package.json");
    let current = std::fs::read_to_string(&installed)
        .ok()
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
        .is_some_and(|package| package["version"] == VERSION);
    if current {
        return;
    }
    let out = Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund"])
        .current_dir(&dir)
        .output()
        .expect("npm must be installed to run the sign-in tests (Node.js 18 or later)");
    assert!(
        out.status.success(),
        "npm ci in tests/oidc failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A running provider; stopped on drop.
pub struct OidcProvider {
    child: Child,
    /// Its issuer (`http://127.0.0.1:<port>`).
    pub issuer: String,
}

impl Drop for OidcProvider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl OidcProvider {
    /// Starts the provider for nodes at `bases` (their callbacks and consoles registered) and
    /// waits until its discovery answers.
    pub async fn start(bases: &[String]) -> OidcProvider {
        install();
        let port = testkit::free_port();
        let join = |path: &str| {
            bases
                .iter()
                .map(|b| format!("{b}{path}"))
                .collect::<Vec<_>>()
                .join(",")
        };
        let child = Command::new("node")
            .arg("provider.mjs")
            .current_dir(dir())
            .env("PORT", port.to_string())
            .env("CLIENT_ID", super::CLIENT_ID)
            .env("CLIENT_SECRET", super::CLIENT_SECRET)
            .env("REDIRECT_URIS", join("/console/oidc/callback"))
            .env("POST_LOGOUT_URIS", join("/console/"))
            .process_group(0)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("node must be installed to run the sign-in tests");
        let provider = OidcProvider {
            child,
            issuer: format!("http://127.0.0.1:{port}"),
        };
        let client = reqwest::Client::new();
        let url = format!("{}/.well-known/openid-configuration", provider.issuer);
        let up = testkit::wait_until(Duration::from_secs(20), || async {
            matches!(client.get(&url).send().await, Ok(r) if r.status() == 200)
        })
        .await;
        assert!(up, "the OpenID provider never answered at {url}");
        provider
    }
}
