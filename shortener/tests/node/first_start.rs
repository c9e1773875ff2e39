//! The first minutes with the binary: an embedded node says where it answers, where its console
//! and its API key are, and how to use the key, on every start; a port it cannot bind is
//! named by its setting, and such a start writes no key; `/` leads to the console.

use crate::helpers::{Backend, Stack};
use reqwest::StatusCode;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// `shortener` in embedded mode on `dir`, HTTP on a free loopback port, gRPC and admin where
/// `grpc_addr` and `admin_addr` say, with nothing inherited that would change its mode.
fn start(dir: &Path, grpc_addr: &str, admin_addr: &str) -> Child {
    start_with(dir, grpc_addr, admin_addr, &[])
}

/// [`start`] with `env` set besides.
fn start_with(dir: &Path, grpc_addr: &str, admin_addr: &str, env: &[(&str, &Path)]) -> Child {
    let mut command = Command::new(env!("CARGO_BIN_EXE_shortener"));
    command
        .env_remove("DATABASE_URL")
        .env_remove("SHORTENER_API_KEYS")
        .env_remove("SHORTENER_API_KEYS_FILE")
        .env_remove("SHORTENER_KEY")
        .env_remove("SHORTENER_KEY_FILE")
        .env_remove("SHORTENER_PUBLIC_URL")
        .env("SHORTENER_DATA_DIR", dir)
        .env("SHORTENER_HTTP_ADDR", "127.0.0.1:0")
        .env("SHORTENER_GRPC_ADDR", grpc_addr)
        .env("SHORTENER_ADMIN_ADDR", admin_addr)
        .env("RUST_LOG", "info")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start shortener")
}

/// The log lines of `child` up to and including the first that contains `until` (or all of
/// them, if it exits first); panics after a minute.
fn read_until(child: &mut Child, until: &'static str) -> Vec<String> {
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            let done = line.contains(until);
            if tx.send(line).is_err() || done {
                break;
            }
        }
    });
    let mut lines = Vec::new();
    loop {
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(line) => {
                let done = line.contains(until);
                lines.push(line);
                if done {
                    return lines;
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => return lines,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                panic!("no {until:?} within a minute: {lines:#?}")
            }
        }
    }
}

/// Creates a link to `url` at `base` with the first key of the data directory's key file:
/// the answer.
async fn create_with_first_key(data: &Path, base: &str, url: &str) -> serde_json::Value {
    let key = std::fs::read_to_string(data.join("api-keys")).expect("the key file");
    reqwest::Client::new()
        .post(format!("{base}api/v1/links"))
        .bearer_auth(key.lines().next().expect("a key"))
        .json(&serde_json::json!({ "url": url }))
        .send()
        .await
        .expect("create")
        .json()
        .await
        .expect("json")
}

/// The text after `label` on the line that holds it.
fn after<'a>(lines: &'a [String], label: &str) -> &'a str {
    lines
        .iter()
        .find_map(|l| l.split_once(label).map(|(_, rest)| rest.trim()))
        .unwrap_or_else(|| panic!("no {label:?} in {lines:#?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_embedded_node_says_where_its_key_is_on_every_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let key_file = data.join("api-keys");
    // The second start also turns the gRPC and admin listeners off: HTTP alone serves.
    for (start_number, made, others) in [
        (1, "made just now", "127.0.0.1:0"),
        (2, "made on the first start", "off"),
    ] {
        let mut node = start(&data, others, others);
        let lines = read_until(&mut node, "try:");
        let serving = after(&lines, "shortener serving");
        let off = others == "off";
        for listener in ["grpc_addr=off", "admin_addr=off"] {
            assert_eq!(serving.contains(listener), off, "{serving}");
        }
        let public = after(&lines, "answering at ").to_string();
        assert!(public.starts_with("http://127.0.0.1:"), "{public}");
        assert!(
            !lines.iter().any(|l| l.contains("cache is off")),
            "{lines:#?}"
        );
        assert_eq!(
            after(&lines, "console:"),
            format!("{public}console/ (sign in with the API key)")
        );
        let key_line = after(&lines, "API key:");
        assert!(
            key_line.contains(&key_file.display().to_string()),
            "start {start_number}: {key_line}"
        );
        assert!(key_line.contains(made), "start {start_number}: {key_line}");
        let admin_hint = after(&lines, "An admin key:");
        assert!(admin_hint.contains("--scopes admin"), "{admin_hint}");
        // The command it names runs from a shell as written: this binary is on no PATH, so it
        // is named by its path.
        let program = admin_hint.split_whitespace().next().expect("a command");
        assert!(Path::new(program).is_file(), "{admin_hint}");

        // The hint is right: the key in the named file creates a link at the named URL, and
        // `/` leads to the console.
        let key = std::fs::read_to_string(&key_file).expect("the key file");
        let key = key.lines().next().expect("a key line");
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("client");
        let created = client
            .post(format!("{public}api/v1/links"))
            .bearer_auth(key)
            .json(&serde_json::json!({ "url": "https://example.com/" }))
            .send()
            .await
            .expect("create");
        assert_eq!(
            created.status(),
            StatusCode::CREATED,
            "start {start_number}"
        );
        let root = client.get(&public).send().await.expect("GET /");
        assert_eq!(root.status(), StatusCode::SEE_OTHER);
        assert_eq!(root.headers()["location"], "/console/");

        let _ = node.kill();
        let _ = node.wait();
    }
}

/// A cache bound of 0 turns the redirect cache off, and the start says so; sizes are read in
/// the units a manifest writes them in (`1Mi`), and a node without a cache still redirects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_cache_turned_off_is_said_at_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let mut node = start_with(
        &data,
        "off",
        "off",
        &[
            ("SHORTENER_CACHE_BYTES", Path::new("0")),
            ("SHORTENER_NEGATIVE_CACHE_BYTES", Path::new("1Mi")),
        ],
    );
    let lines = read_until(&mut node, "try:");
    assert!(
        lines.iter().any(|l| l.contains(
            "SHORTENER_CACHE_BYTES is 0: the redirect cache is off, so every redirect reads the store"
        )),
        "{lines:#?}"
    );
    assert!(
        !lines
            .iter()
            .any(|l| l.contains("NEGATIVE_CACHE_BYTES is 0")),
        "{lines:#?}"
    );
    let public = after(&lines, "answering at ").to_string();
    let created = create_with_first_key(&data, &public, "https://example.com/uncached").await;
    let code = created["code"].as_str().expect("a code");
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client");
    for _ in 0..2 {
        let visit = client
            .get(format!("{public}{code}"))
            .send()
            .await
            .expect("visit");
        assert_eq!(visit.status(), StatusCode::FOUND);
        assert_eq!(visit.headers()["location"], "https://example.com/uncached");
    }
    let _ = node.kill();
    let _ = node.wait();
}

/// A node whose public URL is not its own listener (a load balancer's, say) says where it
/// answers itself, and under what URL its links are made; its `curl` goes to the listener.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_behind_another_public_url_says_where_it_answers_itself() {
    // An address that is not the listener, and a host name (which may be a load balancer's, or
    // someone else's: the first `curl`, with the API key, must not go there).
    for elsewhere in ["http://127.0.0.1:9/", "https://sho.rt/"] {
        behind(elsewhere).await;
    }
}

async fn behind(elsewhere: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let mut node = start_with(
        &data,
        "off",
        "off",
        &[("SHORTENER_PUBLIC_URL", Path::new(elsewhere))],
    );
    let lines = read_until(&mut node, "try:");
    let answering = after(&lines, "answering at ");
    let (here, rest) = answering.split_once("; ").expect("two parts");
    assert!(
        here.starts_with("http://127.0.0.1:") && here != elsewhere,
        "{answering}"
    );
    assert!(
        rest.contains(&format!("links are made under {elsewhere}")),
        "{answering}"
    );
    let try_line = after(&lines, "try:");
    assert!(
        try_line.contains(&format!("{here}api/v1/links")),
        "{try_line}"
    );
    let created = create_with_first_key(&data, here, "https://example.com/").await;
    assert!(
        created["short_url"]
            .as_str()
            .is_some_and(|u| u.starts_with(elsewhere)),
        "{created}"
    );
    let _ = node.kill();
    let _ = node.wait();
}

/// Started as the first start's message suggests, with a keys file of the operator's own, the
/// node still says where it answers, names the file its keys come from, and says that the key
/// it made on the first start is no longer read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_with_a_keys_file_still_says_where_it_answers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let mut first = start(&data, "127.0.0.1:0", "127.0.0.1:0");
    read_until(&mut first, "try:");
    let _ = first.kill();
    let _ = first.wait();
    let made = std::fs::read_to_string(data.join("api-keys")).expect("the key made");
    let made = made.lines().next().expect("a key line").to_string();
    let file = dir.path().join("keys");
    let own = "operator-key-0123456789abcdefghij";
    std::fs::write(&file, format!("{own}\n")).expect("write keys");

    let mut node = start_with(
        &data,
        "127.0.0.1:0",
        "127.0.0.1:0",
        &[("SHORTENER_API_KEYS_FILE", &file)],
    );
    let lines = read_until(&mut node, "try:");
    let public = after(&lines, "answering at ").to_string();
    assert!(public.starts_with("http://127.0.0.1:"), "{public}");
    let keys = after(&lines, "API keys:");
    assert!(keys.contains(&file.display().to_string()), "{keys}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains(&data.join("api-keys").display().to_string())
                && l.contains("is not read")),
        "{lines:#?}"
    );
    let client = reqwest::Client::new();
    for (key, wanted) in [
        (own, StatusCode::CREATED),
        (made.as_str(), StatusCode::UNAUTHORIZED),
    ] {
        let created = client
            .post(format!("{public}api/v1/links"))
            .bearer_auth(key)
            .json(&serde_json::json!({ "url": "https://example.com/" }))
            .send()
            .await
            .expect("create");
        assert_eq!(created.status(), wanted);
    }
    let _ = node.kill();
    let _ = node.wait();
}

#[test]
fn a_taken_port_is_named_by_its_setting_and_writes_no_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("address").to_string();
    let mut node = start(&data, &addr, "127.0.0.1:0");
    let lines = read_until(&mut node, "SHORTENER_GRPC_ADDR");
    let status = node.wait().expect("wait");
    assert!(
        !status.success(),
        "a node without its gRPC port kept running"
    );
    let error = lines.join("\n");
    assert!(error.contains("SHORTENER_GRPC_ADDR"), "{error}");
    assert!(error.contains(&addr), "{error}");
    assert!(
        !data.join("api-keys").exists(),
        "a start that could not bind wrote a key"
    );
}

async fn the_short_domains_root_leads_to_the_console(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = stack.node("a").await;
    let response = node.visit("").await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(response.headers()["location"], "/console/");

    let mut config = stack.config("b");
    config.access.console = false;
    let node = crate::helpers::Node::start(config).await;
    assert_eq!(node.visit("").await.status(), StatusCode::NOT_FOUND);
}
on_both_stores!(the_short_domains_root_leads_to_the_console);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_needs_only_a_database_url() {
    let db = testkit::TestDb::create().await;
    let out = Command::new(env!("CARGO_BIN_EXE_shortener"))
        .arg("migrate")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("DATABASE_URL", db.url())
        .output()
        .expect("run shortener migrate");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (client, connection) = tokio_postgres::connect(db.url(), tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(connection);
    let applied: i64 = client
        .query_one("SELECT count(*) FROM shortener_schema_migrations", &[])
        .await
        .expect("the migrations table")
        .get(0);
    assert!(applied > 0, "no migration recorded");
    // A node on the migrated database starts and serves (it applies nothing more).
    let stack = Stack::on_database(db.url()).await;
    let node = stack.node("a").await;
    let code = node.create_url("https://example.com/after-migrate").await;
    assert_eq!(node.location(&code).await.0, StatusCode::FOUND);
}
