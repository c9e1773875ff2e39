//! API keys in a file: `shortener keys add` makes them, a running node re-reads the file when
//! it changes or on SIGHUP, and a file that does not parse leaves the keys in force.

use crate::cli::shortener;
use crate::helpers::{Backend, Node, Stack};
use crate::served::Served;
use reqwest::StatusCode;
use serde_json::json;
use std::path::Path;
use std::time::Duration;

/// `shortener keys add` into `file`; returns the printed key.
fn add_key(file: &Path, tenant: &str, name: &str, scopes: &str) -> String {
    let out = shortener(
        &[
            "keys",
            "add",
            "--file",
            file.to_str().expect("utf8"),
            "--tenant",
            tenant,
            "--name",
            name,
            "--scopes",
            scopes,
        ],
        "",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let key = String::from_utf8(out.stdout)
        .expect("utf8")
        .trim()
        .to_string();
    assert_eq!(key.len(), 32, "one key on stdout: {key:?}");
    key
}

/// Writes `text` over `path` the way a deploy does: a new file renamed into place.
fn replace(path: &Path, text: &str) {
    let temporary = path.with_extension("new");
    std::fs::write(&temporary, text).expect("write");
    std::fs::rename(&temporary, path).expect("rename");
}

async fn status_with(node: &Node, key: &str) -> StatusCode {
    node.create_with_key(json!({ "url": "https://example.com/k" }), key)
        .await
        .0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_keys_file_takes_effect_and_a_broken_one_keeps_the_keys_in_force() {
    let stack = Stack::new(Backend::Sqlite).await;
    let file = stack.dir.path().join("keys.toml");
    let first = add_key(&file, "acme", "first", "links:create");
    let mut config = stack.config("reload");
    config.access.api_keys = Vec::new();
    config.access.api_keys_file = Some(file.clone());
    let node = Node::start(config).await;
    assert_eq!(status_with(&node, &first).await, StatusCode::CREATED);

    // Added: accepted once the node has seen the file change.
    let second = add_key(&file, "acme", "second", "links:create");
    let added = testkit::wait_until(Duration::from_secs(10), || async {
        status_with(&node, &second).await == StatusCode::CREATED
    })
    .await;
    assert!(added, "the added key was never accepted");
    assert_eq!(status_with(&node, &first).await, StatusCode::CREATED);

    // Removed: refused once the node has seen the change; the other key stays.
    let text = std::fs::read_to_string(&file).expect("read");
    let start = text.find("\n[[key]]").expect("first table");
    let next = text[start + 1..].find("\n[[key]]").expect("second table") + start + 1;
    replace(&file, &format!("{}{}", &text[..start], &text[next..]));
    let removed = testkit::wait_until(Duration::from_secs(10), || async {
        status_with(&node, &first).await == StatusCode::UNAUTHORIZED
    })
    .await;
    assert!(
        removed,
        "the removed key kept working; file now:\n{}\nmetrics:\n{}",
        std::fs::read_to_string(&file).unwrap_or_default(),
        node.metrics()
            .await
            .lines()
            .filter(|l| l.contains("reloads"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert_eq!(status_with(&node, &second).await, StatusCode::CREATED);

    // Broken: refused, counted, and the keys in force stay.
    replace(&file, "[[key]\nthis is not a keys file\n");
    let refused = testkit::wait_until(Duration::from_secs(10), || async {
        node.metrics()
            .await
            .contains("shortener_api_keys_reloads_refused_total 1")
    })
    .await;
    assert!(refused, "the broken file was never refused");
    assert_eq!(status_with(&node, &second).await, StatusCode::CREATED);
    assert_eq!(status_with(&node, &first).await, StatusCode::UNAUTHORIZED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_add_prints_a_key_once_and_sighup_reloads_a_running_node() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("keys.toml");
    let first = add_key(&file, "acme", "first", "links:create,links:read");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).expect("stat").permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "the keys file is private");
    }
    let text = std::fs::read_to_string(&file).expect("read");
    assert!(!text.contains(&first), "the key itself is never written");
    let served = Served::start(
        &dir.path().join("data"),
        &[
            ("SHORTENER_API_KEYS_FILE", file.display().to_string()),
            // Only a signal can make this node re-read the file within the test.
            ("SHORTENER_RELOAD_INTERVAL_MS", "3600000".to_string()),
        ],
        None,
    )
    .await;
    let client = reqwest::Client::new();
    let create = |key: String| {
        let client = client.clone();
        let url = format!("http://{}/api/v1/links", served.http);
        async move {
            client
                .post(url)
                .bearer_auth(key)
                .json(&json!({ "url": "https://example.com/signal" }))
                .send()
                .await
                .expect("send")
                .status()
        }
    };
    assert_eq!(create(first.clone()).await, StatusCode::CREATED);
    let second = add_key(&file, "acme", "second", "links:create");
    assert_eq!(
        create(second.clone()).await,
        StatusCode::UNAUTHORIZED,
        "no reload yet"
    );
    served.signal("HUP");
    let reloaded = testkit::wait_until(Duration::from_secs(10), || async {
        create(second.clone()).await == StatusCode::CREATED
    })
    .await;
    assert!(reloaded, "SIGHUP did not reload the keys file");
    assert_eq!(
        create(first).await,
        StatusCode::CREATED,
        "the node survived the signal"
    );
}

#[test]
fn keys_add_refuses_bad_input_and_changes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("keys.toml");
    add_key(&file, "acme", "taken", "links:read");
    let legacy = dir.path().join("legacy");
    std::fs::write(&legacy, "an-old-style-key-0123456789\n").expect("write");
    let path = file.to_str().expect("utf8");
    let legacy_path = legacy.to_str().expect("utf8");
    // (file, tenant, name, scopes, extra arguments, what the error says)
    type Case<'a> = (&'a str, &'a str, &'a str, &'a str, &'a [&'a str], &'a str);
    #[rustfmt::skip]
    let cases: [Case; 7] = [
        (path, "acme", "new", "links:delete", &[], "unknown scope"),
        (path, "Acme Corp", "new", "links:read", &[], "tenant"),
        (path, "acme", "bad name!", "links:read", &[], "name"),
        (path, "acme", "taken", "links:read", &[], "named \"taken\""),
        (path, "acme", "new", "links:read", &["--expires", "2001-01-01T00:00:00Z"], "in the past"),
        (path, "acme", "new", "links:read", &["--expires", "soon"], "RFC 3339"),
        (legacy_path, "acme", "new", "links:read", &[], "one-per-line"),
    ];
    for (target, tenant, name, scopes, extra, why) in cases {
        let before = std::fs::read_to_string(target).expect("read");
        let mut args = vec![
            "keys", "add", "--file", target, "--tenant", tenant, "--name", name, "--scopes", scopes,
        ];
        args.extend_from_slice(extra);
        let out = shortener(&args, "");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{why}: accepted");
        assert!(stderr.contains(why), "{why}: {stderr}");
        assert!(out.stdout.is_empty(), "{why}: printed a key");
        assert_eq!(
            std::fs::read_to_string(target).expect("read"),
            before,
            "{why}: changed the file"
        );
    }
}
