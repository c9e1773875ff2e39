//! YOURLS's timestamp signatures: a key's YOURLS token, printed by `shortener keys
//! yourls-token`, signs `timestamp` (md5 by default, sha256 with `hash`), and the request acts
//! as that key (its tenant, its scopes). A table of bad signatures (expired, future, wrong,
//! malformed, of an expired key, of a removed key) is each refused in YOURLS's error shape,
//! with nothing written.

use super::{get, post, yourls_node_with};
use crate::cli::shortener;
use crate::helpers::{Backend, CODE_KEY, Stack, metric, wait_for};
use md5::Md5;
use reqwest::StatusCode;
use serde_json::Value;
use sha2::{Digest, Sha256};
use shortener::access::{KEY_FILE_HEADER, parse_key_file, render};
use std::path::Path;
use std::time::Duration;

/// The YOURLS token of key `name` of `tenant` in `keys`, printed by the CLI.
fn token(keys: &Path, code_key: &Path, tenant: &str, name: &str) -> String {
    let out = shortener(
        &[
            "keys",
            "yourls-token",
            "--file",
            keys.to_str().expect("utf8"),
            "--tenant",
            tenant,
            "--name",
            name,
            "--key-file",
            code_key.to_str().expect("utf8"),
        ],
        "",
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "yourls-token: {stderr}");
    assert!(stderr.contains(name), "{stderr}");
    let token = String::from_utf8(out.stdout)
        .expect("utf8")
        .trim()
        .to_string();
    assert!(
        token.len() == 32 && token.bytes().all(|b| b.is_ascii_hexdigit()),
        "{token}"
    );
    token
}

/// A request's parameters.
type Pairs = Vec<(&'static str, String)>;

fn md5_hex(text: &str) -> String {
    hex::encode(Md5::digest(text.as_bytes()))
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// `params` signed with `token` at `timestamp` by md5, as a YOURLS client signs.
fn signed(
    token: &str,
    timestamp: i64,
    params: &[(&'static str, &str)],
) -> Vec<(&'static str, String)> {
    let mut all: Vec<(&'static str, String)> =
        params.iter().map(|(n, v)| (*n, v.to_string())).collect();
    all.push(("timestamp", timestamp.to_string()));
    all.push(("signature", md5_hex(&format!("{timestamp}{token}"))));
    all.push(("format", "json".into()));
    all
}

/// A JSON answer to `params` over GET (or form POST).
async fn call(
    node: &crate::helpers::Node,
    params: &[(&'static str, String)],
    via_post: bool,
) -> (StatusCode, Value) {
    let params: Vec<(&str, &str)> = params.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let (status, media, body) = if via_post {
        post(node, &params).await
    } else {
        get(node, &params).await
    };
    assert_eq!(media, "application/json", "{params:?}: {body}");
    (
        status,
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{body}: {e}")),
    )
}

async fn signed_requests_act_as_their_key_and_bad_ones_are_refused(backend: Backend) {
    let stack = Stack::new(backend).await;
    let (node, keys) = yourls_node_with(&stack, "signed", |_| {}).await;
    let keys_file = stack.dir.path().join("signed-keys.toml");
    let code_key = stack.dir.path().join("code.key");
    std::fs::write(&code_key, format!("{CODE_KEY}\n")).expect("write the code key");
    let own = token(&keys_file, &code_key, "acme", "writer");
    let other = token(&keys_file, &code_key, "globex", "writer");
    let scopeless = token(&keys_file, &code_key, "acme", "stats");
    let expired = token(&keys_file, &code_key, "acme", "old");
    assert_ne!(own, other);
    assert!(!own.contains(&keys.own) && own != keys.own);

    // md5(timestamp . token), over GET and POST: the link is the key's, in its tenant.
    let shorten = |url: &'static str| [("action", "shorturl"), ("url", url)];
    let (status, made) = call(
        &node,
        &signed(&own, now(), &shorten("https://example.com/s1")),
        false,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{made}");
    assert_eq!(made["status"], "success", "{made}");
    let code = made["url"]["keyword"]
        .as_str()
        .expect("keyword")
        .to_string();
    let (status, body) = node.list_with_key("", &keys.own).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.to_string().contains(&code), "acme's list: {body}");
    let (status, made) = call(
        &node,
        &signed(&own, now() - 300, &shorten("https://example.com/s2")),
        true,
    )
    .await;
    assert_eq!(
        (status, &made["status"]),
        (StatusCode::OK, &Value::from("success")),
        "{made}"
    );
    // hash=sha256, token first (YOURLS accepts either order).
    let stamp = now() + 300;
    let sha = hex::encode(Sha256::digest(format!("{own}{stamp}").as_bytes()));
    let params = vec![
        ("action", "expand".to_string()),
        ("shorturl", code.clone()),
        ("timestamp", stamp.to_string()),
        ("signature", sha),
        ("hash", "sha256".to_string()),
        ("format", "json".to_string()),
    ];
    let (status, expanded) = call(&node, &params, false).await;
    assert_eq!(status, StatusCode::OK, "{expanded}");
    assert_eq!(expanded["longurl"], "https://example.com/s1");
    // Another tenant's token sees none of acme's links; a token without links:create creates
    // nothing (the key's scopes, as the JSON API checks them).
    let expand = [("action", "expand"), ("shorturl", code.as_str())];
    let (status, answer) = call(&node, &signed(&other, now(), &expand), false).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{answer}");
    let (status, answer) = call(
        &node,
        &signed(&scopeless, now(), &shorten("https://example.com/s3")),
        false,
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{answer}");
    assert_eq!(answer["errorCode"], "403", "{answer}");
    let stored = node.stored_links().await;
    assert_eq!(stored, 2);

    // Bad signatures: each refused as YOURLS refuses a login, naming what is wrong.
    let create = shorten("https://example.com/refused");
    let with = |pairs: &[(&'static str, String)]| {
        let mut all: Vec<(&'static str, String)> =
            create.iter().map(|(n, v)| (*n, v.to_string())).collect();
        all.extend_from_slice(pairs);
        all.push(("format", "json".into()));
        all
    };
    let at = |t: i64| md5_hex(&format!("{t}{own}"));
    let t = now();
    let bad: Vec<(&str, Pairs, &str)> = vec![
        (
            "expired",
            with(&[
                ("timestamp", (t - 3600).to_string()),
                ("signature", at(t - 3600)),
            ]),
            "has expired",
        ),
        (
            "future",
            with(&[
                ("timestamp", (t + 3600).to_string()),
                ("signature", at(t + 3600)),
            ]),
            "in the future",
        ),
        (
            "wrong token",
            with(&[
                ("timestamp", t.to_string()),
                ("signature", md5_hex(&format!("{t}{}", "0".repeat(32)))),
            ]),
            "Invalid signature",
        ),
        (
            "the key as token",
            with(&[
                ("timestamp", t.to_string()),
                ("signature", md5_hex(&format!("{t}{}", keys.own))),
            ]),
            "Invalid signature",
        ),
        (
            "another timestamp",
            with(&[("timestamp", (t - 1).to_string()), ("signature", at(t))]),
            "Invalid signature",
        ),
        (
            "timestamp not digits",
            with(&[("timestamp", "soon".into()), ("signature", at(t))]),
            "not a time",
        ),
        (
            "timestamp in ms",
            with(&[
                ("timestamp", (t * 1000).to_string()),
                ("signature", at(t * 1000)),
            ]),
            "not a time",
        ),
        (
            "signature not hex",
            with(&[("timestamp", t.to_string()), ("signature", "z".repeat(32))]),
            "not a hex md5 digest",
        ),
        (
            "md5 sent as sha256",
            with(&[
                ("timestamp", t.to_string()),
                ("signature", at(t)),
                ("hash", "sha256".into()),
            ]),
            "not a hex sha256 digest",
        ),
        (
            "unknown hash",
            with(&[
                ("timestamp", t.to_string()),
                ("signature", at(t)),
                ("hash", "crc32".into()),
            ]),
            "is not accepted",
        ),
        (
            "expired key",
            with(&[
                ("timestamp", t.to_string()),
                ("signature", md5_hex(&format!("{t}{expired}"))),
            ]),
            "Invalid signature",
        ),
    ];
    let refused = bad.len();
    for (what, params, says) in bad {
        for via_post in [false, true] {
            let (status, answer) = call(&node, &params, via_post).await;
            assert_eq!(status, StatusCode::FORBIDDEN, "{what}: {answer}");
            assert_eq!(answer["errorCode"], "403", "{what}: {answer}");
            let message = answer["message"].as_str().unwrap_or_default();
            assert!(message.contains(says), "{what}: {message}");
        }
    }

    // A removed key's token stops working once the node re-reads the keys file.
    let (status, _) = call(&node, &signed(&other, now(), &expand), false).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "globex's token works before");
    let text = std::fs::read_to_string(&keys_file).expect("read keys");
    let kept = parse_key_file(&text)
        .expect("parse keys")
        .iter()
        .filter(|e| e.tenant != "globex")
        .map(render)
        .fold(KEY_FILE_HEADER.to_string(), |text, table| text + &table);
    std::fs::write(&keys_file, kept).expect("rewrite keys");
    wait_for(
        "the keys file reloaded",
        Duration::from_secs(10),
        async || {
            call(&node, &signed(&other, now(), &expand), false).await.0 == StatusCode::FORBIDDEN
        },
    )
    .await;
    let (_, answer) = call(&node, &signed(&other, now(), &create), true).await;
    assert!(
        answer["message"]
            .as_str()
            .unwrap_or_default()
            .contains("Invalid signature"),
        "{answer}"
    );
    assert_eq!(
        node.stored_links().await,
        stored,
        "a refused request wrote a link"
    );
    let metrics = node.metrics().await;
    let counted = "shortener_compat_requests_total{dialect=\"yourls\",action=\"shorturl\",outcome=\"unauthenticated\"}";
    assert_eq!(metric(&metrics, counted), (refused * 2 + 1) as f64);
}
on_both_stores!(signed_requests_act_as_their_key_and_bad_ones_are_refused);

/// A timestamp signature names no key, so each is checked against every key: one that matches
/// none is charged to the client's 404 budget, and a client that spent it is refused 429
/// before any key is tried, a rightly signed request too, until its next token. A request
/// that names its key (`signature=<key>`) is found by the key itself and is not held back.
async fn wrong_signatures_spend_the_clients_404_budget(backend: Backend) {
    let stack = Stack::new(backend).await;
    let (node, keys) = yourls_node_with(&stack, "guessed", |config| {
        config.limits.not_found_burst = 3;
        config.limits.not_found_rate = 1;
    })
    .await;
    let keys_file = stack.dir.path().join("guessed-keys.toml");
    let code_key = stack.dir.path().join("code.key");
    std::fs::write(&code_key, format!("{CODE_KEY}\n")).expect("write the code key");
    let own = token(&keys_file, &code_key, "acme", "writer");
    let version = [("action", "version")];
    let wrong = "0".repeat(32);
    for attempt in 0..3 {
        let (status, answer) = call(&node, &signed(&wrong, now(), &version), false).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "attempt {attempt}: {answer}");
    }
    let (status, answer) = call(&node, &signed(&wrong, now(), &version), false).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{answer}");
    assert_eq!(answer["errorCode"], "429", "{answer}");
    let (status, answer) = call(&node, &signed(&own, now(), &version), true).await;
    assert_eq!(
        status,
        StatusCode::TOO_MANY_REQUESTS,
        "refused before any key is tried: {answer}"
    );
    let named = vec![
        ("action", "version".to_string()),
        ("signature", keys.own.clone()),
        ("format", "json".to_string()),
    ];
    let (status, answer) = call(&node, &named, false).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let metrics = node.metrics().await;
    let counted = "shortener_compat_requests_total{dialect=\"yourls\",action=\"version\",outcome=\"rate_limited\"}";
    assert_eq!(metric(&metrics, counted), 2.0, "{metrics}");
    // Each unauthenticated request counted once: three wrong, the one that spent the budget,
    // and the rightly signed one refused before any key was tried.
    let unauthenticated: f64 = metrics
        .lines()
        .filter(|l| l.starts_with("shortener_api_unauthenticated_total"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert_eq!(unauthenticated, 5.0, "{metrics}");
}
on_both_stores!(wrong_signatures_spend_the_clients_404_budget);

#[test]
fn the_token_command_names_a_key_or_says_why_not() {
    let dir = tempfile::tempdir().expect("tempdir");
    let keys_file = dir.path().join("keys.toml");
    crate::tenants::write_keys(&keys_file);
    let code_key = dir.path().join("code.key");
    std::fs::write(&code_key, format!("{CODE_KEY}\n")).expect("write the code key");
    let (keys, code) = (
        keys_file.to_str().expect("utf8"),
        code_key.to_str().expect("utf8"),
    );
    // One key of its tenant: no name needed, and the same token as when named.
    let run = |args: &[&str]| {
        shortener(
            &[
                &["keys", "yourls-token", "--file", keys, "--key-file", code][..],
                args,
            ]
            .concat(),
            "",
        )
    };
    let named = run(&["--tenant", "globex", "--name", "writer"]);
    let unnamed = run(&["--tenant", "globex"]);
    assert!(named.status.success() && unnamed.status.success());
    assert_eq!(named.stdout, unnamed.stdout);
    let missing = dir.path().join("nope.key");
    for (args, says) in [
        (vec!["--tenant", "acme"], "name one with --name"),
        (
            vec!["--tenant", "acme", "--name", "nobody"],
            "holds no key \"nobody\"",
        ),
        (vec!["--tenant", "initech"], "of tenant \"initech\""),
    ] {
        let out = run(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && out.stdout.is_empty(), "{args:?}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    let out = shortener(
        &[
            "keys",
            "yourls-token",
            "--file",
            keys,
            "--key-file",
            missing.to_str().expect("utf8"),
            "--tenant",
            "globex",
        ],
        "",
    );
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("nope.key"));
}

/// A key made through the API (by tenant `ops`'s admin) answers its YOURLS token beside its
/// secret, shown that once, and a request signed with the token acts as that key, in its
/// tenant.
async fn a_key_made_through_the_api_signs_with_its_token(backend: Backend) {
    let stack = Stack::new(backend).await;
    let (node, keys) = yourls_node_with(&stack, "api-key", |_| {}).await;
    let response = node
        .client
        .post(format!("{}/api/v1/keys", node.base))
        .bearer_auth(&keys.admin)
        .json(&serde_json::json!({"name": "ci-bot", "scopes": ["links:create", "links:read"]}))
        .send()
        .await
        .expect("create a key");
    assert_eq!(response.status(), StatusCode::CREATED);
    let made: Value = response.json().await.expect("json");
    let token = made["yourls_token"].as_str().expect("a token").to_string();
    assert!(
        token.len() == 32 && token.bytes().all(|b| b.is_ascii_hexdigit()),
        "{made}"
    );
    assert_ne!(made["secret"].as_str(), Some(token.as_str()));
    let shorten = [
        ("action", "shorturl"),
        ("url", "https://example.com/api-key"),
    ];
    let (status, answer) = call(&node, &signed(&token, now(), &shorten), false).await;
    assert_eq!(
        (status, &answer["status"]),
        (StatusCode::OK, &Value::from("success")),
        "{answer}"
    );
    let code = answer["url"]["keyword"].as_str().expect("keyword");
    let (status, body) = node.list_with_key("", &keys.admin).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.to_string().contains(code), "ops's list: {body}");
    // The listing never shows it again.
    let listed = node
        .client
        .get(format!("{}/api/v1/keys", node.base))
        .bearer_auth(&keys.admin)
        .send()
        .await
        .expect("list keys")
        .text()
        .await
        .expect("body");
    assert!(!listed.contains(&token), "{listed}");
}
on_both_stores!(a_key_made_through_the_api_signs_with_its_token);
