//! Cross-origin calls to the dialects (`SHORTENER_COMPAT_CORS_ORIGINS`), through raw HTTP: a
//! listed origin is answered on every dialect's path (errors too), another origin and a node
//! set to `none` get no CORS headers, preflights have one shape, and the console and the JSON
//! API answer no other origin. `browser` calls the Shlink API from a page of another origin in
//! headless Chromium.

mod browser;

use crate::helpers::{API_KEY, Backend, Node, Stack};
use reqwest::{Method, StatusCode};

/// The origin the listed node allows.
const ALLOWED: &str = "https://app.example";
/// An origin no listed node allows.
const OTHER: &str = "https://evil.example";

/// A node on `stack` speaking every dialect, with `SHORTENER_COMPAT_CORS_ORIGINS` `origins`.
async fn node(stack: &Stack, name: &str, origins: &[&str]) -> Node {
    let mut config = stack.config(name);
    config.compat.compat = ["yourls", "shlink", "bitly"].map(String::from).to_vec();
    config.compat.compat_cors_origins = origins.iter().map(|o| o.to_string()).collect();
    Node::start(config).await
}

/// One request: method, path and query, its headers.
struct Call {
    what: &'static str,
    method: Method,
    path: &'static str,
    headers: Vec<(&'static str, String)>,
}

/// Each dialect's calls, each with and without a key (a refused call is answered to the page
/// too, so it can show why), and the paths of the node's own that answer no other origin.
fn dialect_calls() -> Vec<Call> {
    let key = || vec![("x-api-key", API_KEY.to_string())];
    vec![
        Call {
            what: "Shlink list",
            method: Method::GET,
            path: "/rest/v3/short-urls",
            headers: key(),
        },
        Call {
            what: "Shlink list without a key",
            method: Method::GET,
            path: "/rest/v3/short-urls",
            headers: Vec::new(),
        },
        Call {
            what: "Shlink health",
            method: Method::GET,
            path: "/rest/health",
            headers: Vec::new(),
        },
        Call {
            what: "YOURLS version",
            method: Method::GET,
            path: "/yourls-api.php?action=version&format=json&signature=test-key-0123456789abcdef",
            headers: Vec::new(),
        },
        Call {
            what: "YOURLS without a key",
            method: Method::GET,
            path: "/yourls-api.php?action=version&format=json",
            headers: Vec::new(),
        },
        Call {
            what: "Bitly expand of no link",
            method: Method::POST,
            path: "/v4/expand",
            headers: vec![("authorization", format!("Bearer {API_KEY}"))],
        },
        Call {
            what: "Bitly without a key",
            method: Method::GET,
            path: "/v4/bitlinks/sho.rt/nope",
            headers: Vec::new(),
        },
    ]
}

/// The node's own paths, which answer no other origin whatever the setting.
const OWN_PATHS: [&str; 4] = ["/api/v1/me", "/api/v1/links", "/console/", "/healthz"];

/// Sends `call` from a page of `origin` (none: not from a browser).
async fn send(node: &Node, call: &Call, origin: Option<&str>) -> reqwest::Response {
    let mut request = node
        .client
        .request(call.method.clone(), format!("{}{}", node.base, call.path));
    for (name, value) in &call.headers {
        request = request.header(*name, value);
    }
    if let Some(origin) = origin {
        request = request.header("origin", origin);
    }
    request.send().await.expect("send")
}

/// A browser's preflight for `method` on `path` from `origin`.
async fn preflight(node: &Node, path: &str, origin: &str, method: &str) -> reqwest::Response {
    node.client
        .request(Method::OPTIONS, format!("{}{path}", node.base))
        .header("origin", origin)
        .header("access-control-request-method", method)
        .header("access-control-request-headers", "x-api-key,content-type")
        .send()
        .await
        .expect("preflight")
}

fn header(response: &reqwest::Response, name: &str) -> Option<String> {
    let values: Vec<&str> = response
        .headers()
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    (!values.is_empty()).then(|| values.join(", "))
}

/// Asserts the CORS headers of an actual answer: `allow` in Access-Control-Allow-Origin (none:
/// no CORS headers at all), and whether `Vary` names `Origin`.
fn assert_marked(response: &reqwest::Response, allow: Option<&str>, varies: bool, what: &str) {
    assert_eq!(
        header(response, "access-control-allow-origin").as_deref(),
        allow,
        "{what}: {:?}",
        response.headers()
    );
    let expose = header(response, "access-control-expose-headers");
    assert_eq!(
        expose.as_deref(),
        allow.map(|_| "Retry-After"),
        "{what}: expose"
    );
    assert_eq!(
        header(response, "access-control-allow-credentials"),
        None,
        "{what}: credentials"
    );
    let vary = header(response, "vary").unwrap_or_default();
    assert_eq!(vary.contains("Origin"), varies, "{what}: vary {vary:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listed_origin_reads_every_dialect_and_others_get_no_cors_headers() {
    let stack = Stack::new(Backend::Sqlite).await;
    let node = node(&stack, "listed", &[ALLOWED, "http://127.0.0.1:9"]).await;
    for call in dialect_calls() {
        let plain = send(&node, &call, None).await;
        let status = plain.status();
        assert_marked(&plain, None, true, &format!("{} without Origin", call.what));
        let allowed = send(&node, &call, Some(ALLOWED)).await;
        assert_eq!(
            allowed.status(),
            status,
            "{}: Origin changed the answer",
            call.what
        );
        assert_marked(&allowed, Some(ALLOWED), true, call.what);
        let other = send(&node, &call, Some(OTHER)).await;
        assert_eq!(
            other.status(),
            status,
            "{}: Origin changed the answer",
            call.what
        );
        assert_marked(&other, None, true, &format!("{} from {OTHER}", call.what));
        let opaque = send(&node, &call, Some("null")).await;
        assert_marked(&opaque, None, true, &format!("{} from null", call.what));
    }
    for path in OWN_PATHS {
        let call = Call {
            what: "own",
            method: Method::GET,
            path,
            headers: vec![("authorization", format!("Bearer {API_KEY}"))],
        };
        let response = send(&node, &call, Some(ALLOWED)).await;
        assert_marked(&response, None, false, path);
        let asked = preflight(&node, path, ALLOWED, "POST").await;
        assert_ne!(asked.status(), StatusCode::NO_CONTENT, "{path} preflight");
        assert_marked(&asked, None, false, &format!("{path} preflight"));
    }
    assert_eq!(node.stored_links().await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preflights_have_one_shape_and_write_nothing() {
    let stack = Stack::new(Backend::Sqlite).await;
    let listed = node(&stack, "listed", &[ALLOWED]).await;
    let any = node(&stack, "any", &["*"]).await;
    let none = node(&stack, "none", &["none"]).await;
    let asks = [
        ("/rest/v3/short-urls", "POST"),
        ("/rest/v3/short-urls/abc", "PATCH"),
        ("/rest/v3/short-urls/abc", "DELETE"),
        ("/rest/v3/tags", "PUT"),
        ("/rest/health", "GET"),
        ("/yourls-api.php", "POST"),
        ("/v4/shorten", "POST"),
        ("/v4/bitlinks/sho.rt/abc", "GET"),
    ];
    // (node, origin, the Allow-Origin expected: none means a refused preflight)
    let cases: [(&Node, &str, Option<&str>, bool); 5] = [
        (&listed, ALLOWED, Some(ALLOWED), true),
        (&listed, OTHER, None, true),
        (&any, OTHER, Some("*"), false),
        (&any, "null", Some("*"), false),
        (&none, ALLOWED, None, false),
    ];
    for (node, origin, allow, varies) in cases {
        for (path, method) in asks {
            let what = format!("{method} {path} from {origin} ({})", node.base);
            let response = preflight(node, path, origin, method).await;
            let expose = header(&response, "access-control-expose-headers");
            let vary = header(&response, "vary").unwrap_or_default();
            let allow_origin = header(&response, "access-control-allow-origin");
            assert_eq!(allow_origin.as_deref(), allow, "{what}");
            assert_eq!(vary.contains("Origin"), varies, "{what}: vary {vary:?}");
            assert_eq!(header(&response, "access-control-allow-credentials"), None);
            if allow.is_some() {
                assert_eq!(response.status(), StatusCode::NO_CONTENT, "{what}");
                assert_eq!(expose.as_deref(), Some("Retry-After"), "{what}");
                let methods = header(&response, "access-control-allow-methods").unwrap_or_default();
                assert!(methods.contains(method), "{what}: methods {methods:?}");
                assert_eq!(
                    header(&response, "access-control-allow-headers").as_deref(),
                    Some("X-Api-Key, Content-Type, Authorization"),
                    "{what}"
                );
                assert_eq!(
                    header(&response, "access-control-max-age").as_deref(),
                    Some("3600"),
                    "{what}"
                );
            } else {
                for name in [
                    "access-control-allow-methods",
                    "access-control-allow-headers",
                    "access-control-max-age",
                ] {
                    assert_eq!(header(&response, name), None, "{what}: {name}");
                }
                if *node.base == *listed.base {
                    assert_eq!(response.status(), StatusCode::NO_CONTENT, "{what}");
                }
            }
            assert!(
                response.bytes().await.expect("body").is_empty() || allow.is_none(),
                "{what}: a preflight answer has no body"
            );
        }
    }
    // A node set to `none` marks no actual answer either; `*` marks every one, no Vary.
    let list = &dialect_calls()[0];
    assert_marked(&send(&none, list, Some(ALLOWED)).await, None, false, "none");
    assert_marked(
        &send(&any, list, Some(OTHER)).await,
        Some("*"),
        false,
        "any",
    );
    assert_marked(
        &send(&any, list, None).await,
        Some("*"),
        false,
        "any, no Origin",
    );
    for node in [&listed, &any, &none] {
        assert_eq!(node.stored_links().await, 0, "a preflight wrote");
    }
}

/// Bad values of `SHORTENER_COMPAT_CORS_ORIGINS`, read by the binary's own loader from its
/// environment: each stops the node before it binds or writes anything, naming the setting
/// and what to write instead.
#[test]
fn bad_origins_stop_the_binary_naming_the_setting() {
    for (value, says) in [
        ("https://app.example/", "write https://app.example"),
        ("https://App.Example", "write https://app.example"),
        ("https://app.example:443", "write https://app.example"),
        ("https://app.example/shlink", "write https://app.example"),
        ("app.example", "not an origin"),
        ("chrome-extension://abc", "only http and https"),
        ("https://*.example", "no wildcards"),
        ("*,https://app.example", "stands alone"),
        ("https://app.example,none", "stands alone"),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_shortener"))
            .arg("serve")
            .env_remove("DATABASE_URL")
            .env("SHORTENER_DATA_DIR", dir.path().join("data"))
            .env("SHORTENER_HTTP_ADDR", "127.0.0.1:0")
            .env("SHORTENER_GRPC_ADDR", "127.0.0.1:0")
            .env("SHORTENER_ADMIN_ADDR", "127.0.0.1:0")
            .env("SHORTENER_COMPAT", "shlink")
            .env("SHORTENER_COMPAT_CORS_ORIGINS", value)
            .output()
            .expect("run shortener");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{value} was accepted: {stderr}");
        assert!(
            stderr.contains("SHORTENER_COMPAT_CORS_ORIGINS") && stderr.contains(says),
            "{value}: {stderr}"
        );
        assert!(
            !dir.path().join("data").exists(),
            "{value} wrote the data directory"
        );
    }
}
