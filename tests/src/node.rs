//! One shortener node run as its own process for the end-to-end tests of tenant features (API
//! keys, the audit log): started on free loopback ports with the settings a test adds, and
//! waited for until it is ready; and the operator's keys written with the real CLI.

use crate::binaries::Binaries;
use crate::process::Process;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;
use tokio::time::Instant;

/// A running node and where it answers.
pub struct Node {
    /// The node's process (its log tail explains a failure).
    pub process: Process,
    /// The public HTTP address (redirects and the JSON API).
    pub http: SocketAddr,
    /// The gRPC address.
    pub grpc: SocketAddr,
    /// The admin address (`/readyz`, `/metrics`).
    pub admin: SocketAddr,
}

/// A free port on 127.0.0.1.
pub fn loopback() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], testkit::free_port()))
}

/// Adds a key of `tenant` named `name` with `scopes` (comma-separated) to the keys `file` with
/// `shortener keys add`, and returns its secret.
pub fn add_key(binaries: &Binaries, file: &Path, tenant: &str, name: &str, scopes: &str) -> String {
    let output = std::process::Command::new(&binaries.shortener)
        .args(["keys", "add", "--file"])
        .arg(file)
        .args(["--tenant", tenant, "--name", name, "--scopes", scopes])
        .output()
        .expect("run shortener keys add");
    assert!(output.status.success(), "keys add: {output:?}");
    String::from_utf8(output.stdout)
        .expect("utf-8")
        .trim()
        .to_string()
}

/// Starts node `name` with `env` besides its addresses (its public URL is its own HTTP
/// address, logs at `info`), its files in `dir`, and waits until it is ready.
pub async fn start_node(
    name: &str,
    binaries: &Binaries,
    env: &[(&str, String)],
    dir: &Path,
) -> Node {
    let (http, grpc, admin) = (loopback(), loopback(), loopback());
    let mut vars: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    for (k, v) in [
        ("SHORTENER_HTTP_ADDR", http.to_string()),
        ("SHORTENER_GRPC_ADDR", grpc.to_string()),
        ("SHORTENER_ADMIN_ADDR", admin.to_string()),
        ("SHORTENER_PUBLIC_URL", format!("http://{http}/")),
        ("RUST_LOG", "info".into()),
    ] {
        vars.push((k.to_string(), v));
    }
    let mut process = Process::new(name, &binaries.shortener, vars, dir);
    process.spawn().expect("start the node");
    wait_ready(&mut process, admin).await;
    Node {
        process,
        http,
        grpc,
        admin,
    }
}

/// Waits (up to a minute) until the node's `/readyz` on `admin` answers success; fails with
/// its log tail if it exits or never gets ready.
pub async fn wait_ready(process: &mut Process, admin: SocketAddr) {
    let client = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(
            process.exit_status().is_none(),
            "{} exited: {}",
            process.name(),
            process.log_tail(30)
        );
        if let Ok(r) = client.get(format!("http://{admin}/readyz")).send().await
            && r.status().is_success()
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{} not ready: {}",
            process.name(),
            process.log_tail(30)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Starts an id-service (no authentication, namespace `links`) on the database at `url`, its
/// files in `dir`; returns it and its gRPC address (nodes wait for it when they start).
pub fn start_id_service(binaries: &Binaries, dir: &Path, url: &str) -> (Process, SocketAddr) {
    let grpc = loopback();
    let mut id_service = Process::new(
        "id-service",
        &binaries.id_service,
        vec![
            ("ID_SERVICE_GRPC_ADDR".into(), grpc.to_string()),
            ("ID_SERVICE_ADMIN_ADDR".into(), loopback().to_string()),
            ("ID_SERVICE_HTTP_ADDR".into(), "127.0.0.1:0".into()),
            ("DATABASE_URL".into(), url.to_string()),
            ("ID_SERVICE_NAMESPACES".into(), "links".into()),
            ("RUST_LOG".into(), "info".into()),
        ],
        dir,
    )
    .with_args(&["--insecure-no-auth"]);
    id_service.spawn().expect("start the id-service");
    (id_service, grpc)
}
