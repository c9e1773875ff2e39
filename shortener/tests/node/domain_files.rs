//! What a branded domain answers by itself, chosen by the request's host: its root, its
//! `robots.txt` and its two app-link files, per domain and per tenant, beside the default host
//! and an unclaimed host that answer as they always did; changes seen at once on the node that
//! made them and within the bound on another; a forwarded host believed only from a trusted
//! proxy; bad app-link files refused over JSON and gRPC, nothing written.

use crate::domains::call;
use crate::helpers::{Backend, Node, Stack};
use crate::tenants::{TenantKeys, write_keys};
use reqwest::Method;
use serde_json::{Value, json};
use std::num::NonZeroU64;
use std::time::{Duration, Instant};

/// A node of `stack` named `name` with the tenants' keys (`acme` may claim under
/// `acme.example`, `globex` under `globex.example`), a short domain, a cache that would keep a
/// stale domain for ten minutes were it not told of changes, and `trusted` as its trusted
/// proxies.
async fn node(stack: &Stack, name: &str, trusted: &[&str]) -> Node {
    let mut config = stack.config(name);
    config.access.api_keys_file = Some(stack.dir.path().join("api-keys.toml"));
    config.access.domain_suffixes = ["acme=acme.example", "globex=globex.example"]
        .map(String::from)
        .to_vec();
    config.listeners.short_domains = vec!["s.example".into()];
    config.listeners.trusted_proxies = trusted.iter().map(|n| n.parse().expect("net")).collect();
    config.redirects.cache_ttl = NonZeroU64::new(600).expect("nonzero");
    config.redirects.negative_cache_ttl_ms = 600_000;
    Node::start(config).await
}

fn keys(stack: &Stack) -> TenantKeys {
    write_keys(&stack.dir.path().join("api-keys.toml"))
}

/// Claims `host` with `key`, which must succeed.
async fn claim(node: &Node, key: &str, host: &str) {
    let (status, body) = crate::domains::claim(node, key, host).await;
    assert_eq!(status, 201, "{host}: {body}");
}

async fn patch(node: &Node, key: &str, host: &str, body: Value) -> Value {
    let (status, changed) = call(
        node,
        Method::PATCH,
        &format!("/domains/{host}"),
        key,
        Some(body),
    )
    .await;
    assert_eq!(status, 200, "{changed}");
    changed
}

/// What one request answered: status, `Location`, `Content-Type`, body.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Answer {
    status: u16,
    location: Option<String>,
    content_type: Option<String>,
    body: String,
}

/// `method path` on `node` with `headers` (a `host` among them names the host asked for).
async fn ask(node: &Node, method: Method, path: &str, headers: &[(&str, &str)]) -> Answer {
    let mut request = node.client.request(method, format!("{}{path}", node.base));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.expect("send");
    let header = |name| {
        response
            .headers()
            .get(name)
            .map(|v: &reqwest::header::HeaderValue| v.to_str().expect("ascii").to_string())
    };
    Answer {
        status: response.status().as_u16(),
        location: header(reqwest::header::LOCATION),
        content_type: header(reqwest::header::CONTENT_TYPE),
        body: response.text().await.expect("body"),
    }
}

async fn get(node: &Node, host: &str, path: &str) -> Answer {
    ask(node, Method::GET, path, &[("host", host)]).await
}

fn aasa(team: &str) -> Value {
    json!({"applinks": {"details": [{"appIDs": [format!("{team}.com.example.app")], "components": [{"/": "/*"}]}]}})
}

fn assetlinks(package: &str) -> Value {
    json!([{"relation": ["delegate_permission/common.handle_all_urls"],
            "target": {"namespace": "android_app", "package_name": package, "sha256_cert_fingerprints": ["AB:CD"]}}])
}

/// The answers of a host that is no domain: today's, checked against the default host's.
async fn answers_as_before(node: &Node, host: &str) {
    let root = get(node, host, "/").await;
    assert_eq!(
        (root.status, root.location.as_deref()),
        (303, Some("/console/")),
        "{host}: {root:?}"
    );
    let head = ask(node, Method::HEAD, "/", &[("host", host)]).await;
    assert_eq!(head.status, 303, "{host}");
    for path in [
        "/robots.txt",
        "/.well-known/apple-app-site-association",
        "/.well-known/assetlinks.json",
    ] {
        let answer = get(node, host, path).await;
        assert_eq!(
            (answer.status, answer.body.as_str()),
            (404, "not found\n"),
            "{host}{path}"
        );
    }
}

async fn branded_domains_answer_by_host(backend: Backend) {
    let stack = Stack::new(backend).await;
    let keys = keys(&stack);
    let node = node(&stack, "files", &[]).await;
    let default_host = node.base.trim_start_matches("http://").to_string();
    // What the default host says before any domain exists: every later answer of a host that
    // is no domain must be the same.
    answers_as_before(&node, &default_host).await;

    claim(&node, &keys.own, "go.acme.example").await;
    claim(&node, &keys.other, "links.globex.example").await;
    patch(
        &node,
        &keys.own,
        "go.acme.example",
        json!({
            "root_url": "https://www.acme.example/", "robots": "allow",
            "apple_app_site_association": aasa("ACME"), "assetlinks": assetlinks("com.acme.app"),
        }),
    )
    .await;
    let changed = patch(
        &node,
        &keys.other,
        "links.globex.example",
        json!({
            "root_url": "https://globex.example/home", "redirect_status": 301,
            "apple_app_site_association": aasa("GLOBEX"),
        }),
    )
    .await;
    assert_eq!(changed["apple_app_site_association"], aasa("GLOBEX"));
    assert_eq!(changed["assetlinks"], Value::Null);

    // The root goes where each domain says, with its status (the node's 302 when unset).
    for (host, status, location) in [
        ("go.acme.example", 302, "https://www.acme.example/"),
        ("GO.Acme.Example.:8080", 302, "https://www.acme.example/"),
        ("links.globex.example", 301, "https://globex.example/home"),
    ] {
        for method in [Method::GET, Method::HEAD] {
            let answer = ask(&node, method.clone(), "/", &[("host", host)]).await;
            assert_eq!(
                (answer.status, answer.location.as_deref()),
                (status, Some(location)),
                "{method} {host}"
            );
        }
    }
    // robots.txt per domain.
    let robots = get(&node, "go.acme.example", "/robots.txt").await;
    assert_eq!(robots.status, 200);
    assert_eq!(
        robots.content_type.as_deref(),
        Some("text/plain; charset=utf-8")
    );
    assert_eq!(robots.body, "User-agent: *\nAllow: /\n");
    let robots = get(&node, "links.globex.example", "/robots.txt").await;
    assert_eq!(
        (robots.status, robots.body.as_str()),
        (200, "User-agent: *\nDisallow: /\n")
    );
    // The app-link files, exactly as set, as JSON; a file not set is a 404.
    for (host, path, want) in [
        (
            "go.acme.example",
            "/.well-known/apple-app-site-association",
            Some(aasa("ACME")),
        ),
        (
            "go.acme.example",
            "/.well-known/assetlinks.json",
            Some(assetlinks("com.acme.app")),
        ),
        (
            "links.globex.example",
            "/.well-known/apple-app-site-association",
            Some(aasa("GLOBEX")),
        ),
        ("links.globex.example", "/.well-known/assetlinks.json", None),
    ] {
        let answer = get(&node, host, path).await;
        match want {
            Some(want) => {
                assert_eq!(answer.status, 200, "{host}{path}");
                assert_eq!(
                    answer.content_type.as_deref(),
                    Some("application/json"),
                    "{host}{path}"
                );
                assert_eq!(answer.body, want.to_string(), "{host}{path}");
            }
            None => assert_eq!(answer.status, 404, "{host}{path}"),
        }
    }
    // The default host, a short domain, an unclaimed host and a subdomain of a domain answer
    // as before.
    for host in [
        default_host.as_str(),
        "s.example",
        "nobody.example",
        "x.go.acme.example",
    ] {
        answers_as_before(&node, host).await;
    }

    // Other methods on the fixed files are refused, on every host.
    for host in ["go.acme.example", default_host.as_str()] {
        for path in ["/robots.txt", "/.well-known/assetlinks.json"] {
            let answer = ask(&node, Method::POST, path, &[("host", host)]).await;
            assert_eq!(answer.status, 405, "POST {host}{path}");
            assert!(
                answer.body.contains("method_not_allowed"),
                "{}",
                answer.body
            );
        }
    }

    // Changes are served at once by the node that made them.
    patch(&node, &keys.own, "go.acme.example", json!({"root_url": "https://www.acme.example/new", "robots": "disallow", "assetlinks": null})).await;
    let root = get(&node, "go.acme.example", "/").await;
    assert_eq!(
        root.location.as_deref(),
        Some("https://www.acme.example/new")
    );
    assert_eq!(
        get(&node, "go.acme.example", "/robots.txt").await.body,
        "User-agent: *\nDisallow: /\n"
    );
    assert_eq!(
        get(&node, "go.acme.example", "/.well-known/assetlinks.json")
            .await
            .status,
        404
    );
    // A domain without a root_url gives the node's root; a removed domain is no domain.
    patch(
        &node,
        &keys.own,
        "go.acme.example",
        json!({"root_url": null}),
    )
    .await;
    let root = get(&node, "go.acme.example", "/").await;
    assert_eq!(
        (root.status, root.location.as_deref()),
        (303, Some("/console/"))
    );
    let (status, _) = call(
        &node,
        Method::DELETE,
        "/domains/go.acme.example",
        &keys.own,
        None,
    )
    .await;
    assert_eq!(status, 204);
    answers_as_before(&node, "go.acme.example").await;
    node.stop().await;
}
on_both_stores!(branded_domains_answer_by_host);

/// Two PostgreSQL nodes: a change made on one is served by the other within the bound (the
/// change feed's latency; the cache would otherwise keep the old answer ten minutes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_node_serves_a_domain_change_within_the_bound() {
    let stack = Stack::new(Backend::Postgres).await;
    let keys = keys(&stack);
    let a = node(&stack, "files-a", &[]).await;
    let b = node(&stack, "files-b", &[]).await;
    // B remembers the host as no domain before it is claimed.
    answers_as_before(&b, "go.acme.example").await;
    claim(&a, &keys.own, "go.acme.example").await;
    let mut waits = Vec::new();
    let claimed = Instant::now();
    let seen = testkit::wait_until(Duration::from_secs(5), || async {
        get(&b, "go.acme.example", "/robots.txt").await.status == 200
    })
    .await;
    assert!(seen, "node B still answers the claimed host as no domain");
    waits.push(claimed.elapsed());
    for round in 0..4 {
        let (robots, line) = if round % 2 == 0 {
            ("allow", "Allow: /")
        } else {
            ("disallow", "Disallow: /")
        };
        let root = format!("https://www.acme.example/{round}");
        // B has the old answer cached.
        assert_ne!(
            get(&b, "go.acme.example", "/").await.location.as_deref(),
            Some(root.as_str())
        );
        patch(
            &a,
            &keys.own,
            "go.acme.example",
            json!({"root_url": root, "robots": robots}),
        )
        .await;
        let acknowledged = Instant::now();
        // A at once.
        assert_eq!(
            get(&a, "go.acme.example", "/").await.location.as_deref(),
            Some(root.as_str())
        );
        let served = testkit::wait_until(Duration::from_secs(5), || async {
            get(&b, "go.acme.example", "/").await.location.as_deref() == Some(root.as_str())
                && get(&b, "go.acme.example", "/robots.txt").await.body
                    == format!("User-agent: *\n{line}\n")
        })
        .await;
        assert!(
            served,
            "node B still serves the old root or robots 5 s after the change"
        );
        waits.push(acknowledged.elapsed());
    }
    let (status, _) = call(
        &a,
        Method::DELETE,
        "/domains/go.acme.example",
        &keys.own,
        None,
    )
    .await;
    assert_eq!(status, 204);
    let removed = testkit::wait_until(Duration::from_secs(5), || async {
        get(&b, "go.acme.example", "/").await.status == 303
    })
    .await;
    assert!(removed, "node B still serves a removed domain");
    waits.sort();
    eprintln!("domain change propagation to the other node: {waits:?}");
    a.stop().await;
    b.stop().await;
}

/// A forwarded host is believed only from a trusted proxy: the same request from a peer that is
/// not one gets the default host's answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forwarded_host_is_believed_only_from_a_trusted_proxy() {
    let stack = Stack::new(Backend::Sqlite).await;
    let keys = keys(&stack);
    let untrusting = node(&stack, "forwarded", &["10.0.0.0/8"]).await;
    claim(&untrusting, &keys.own, "brand.acme.example").await;
    patch(
        &untrusting,
        &keys.own,
        "brand.acme.example",
        json!({"root_url": "https://www.acme.example/"}),
    )
    .await;
    let default_host = untrusting.base.trim_start_matches("http://").to_string();
    let forwarded: [&[(&str, &str)]; 3] = [
        &[("x-forwarded-host", "brand.acme.example")],
        &[("forwarded", "for=192.0.2.1;host=brand.acme.example")],
        &[("x-forwarded-host", "BRAND.acme.example:443")],
    ];
    for headers in forwarded {
        let mut with_host = vec![("host", default_host.as_str())];
        with_host.extend_from_slice(headers);
        let root = ask(&untrusting, Method::GET, "/", &with_host).await;
        assert_eq!(
            (root.status, root.location.as_deref()),
            (303, Some("/console/")),
            "{headers:?}"
        );
        let robots = ask(&untrusting, Method::GET, "/robots.txt", &with_host).await;
        assert_eq!(robots.status, 404, "{headers:?}");
    }
    untrusting.stop().await;

    // The same data, served by a node that trusts the loopback peer as a proxy.
    let trusting = node(&stack, "forwarded", &["127.0.0.1/32"]).await;
    let default_host = trusting.base.trim_start_matches("http://").to_string();
    for headers in forwarded {
        let mut with_host = vec![("host", default_host.as_str())];
        with_host.extend_from_slice(headers);
        let root = ask(&trusting, Method::GET, "/", &with_host).await;
        assert_eq!(
            (root.status, root.location.as_deref()),
            (302, Some("https://www.acme.example/")),
            "{headers:?}"
        );
        let robots = ask(&trusting, Method::GET, "/robots.txt", &with_host).await;
        assert_eq!(
            (robots.status, robots.body.as_str()),
            (200, "User-agent: *\nDisallow: /\n"),
            "{headers:?}"
        );
    }
    // Without a forwarded host, the request's own host decides.
    answers_as_before(&trusting, &default_host).await;
    trusting.stop().await;
}

async fn bad_app_files_are_refused_and_change_nothing(backend: Backend) {
    use crate::domains::{refusal, with_key};
    use proto::shortener::v1 as pb;
    let stack = Stack::new(backend).await;
    let keys = keys(&stack);
    let node = node(&stack, "bad-files", &[]).await;
    claim(&node, &keys.own, "go.acme.example").await;
    let set = patch(
        &node,
        &keys.own,
        "go.acme.example",
        json!({
            "apple_app_site_association": aasa("ACME"), "assetlinks": assetlinks("com.acme.app"),
        }),
    )
    .await;
    let bound = shortener::domain::MAX_APP_FILE_BYTES;
    // `["x...x"]` one byte over the bound as compact JSON, and an object as large.
    let over_array = json!(["x".repeat(bound - 3)]);
    let over_object = json!({"k": "x".repeat(bound)});
    let at_bound = json!(["x".repeat(bound - 4)]);
    let bad: Vec<(Value, u16, &str)> = vec![
        (
            json!({"apple_app_site_association": []}),
            422,
            "invalid_app_file",
        ),
        (
            json!({"apple_app_site_association": "{}"}),
            422,
            "invalid_app_file",
        ),
        (
            json!({"apple_app_site_association": 7}),
            422,
            "invalid_app_file",
        ),
        (
            json!({"apple_app_site_association": true}),
            422,
            "invalid_app_file",
        ),
        (json!({"assetlinks": {}}), 422, "invalid_app_file"),
        (json!({"assetlinks": "[]"}), 422, "invalid_app_file"),
        (json!({"assetlinks": over_array}), 422, "app_file_too_large"),
        (
            json!({"apple_app_site_association": over_object}),
            422,
            "app_file_too_large",
        ),
        // A good field beside a bad one: nothing of the patch is written.
        (
            json!({"robots": "allow", "assetlinks": {"a": 1}}),
            422,
            "invalid_app_file",
        ),
        (
            json!({"assetlinks": ["y".repeat(3 * bound)]}),
            413,
            "payload_too_large",
        ),
    ];
    for (body, status, code) in &bad {
        let (got, answer) = call(
            &node,
            Method::PATCH,
            "/domains/go.acme.example",
            &keys.own,
            Some(body.clone()),
        )
        .await;
        assert_eq!(
            (got, answer["error"].as_str()),
            (*status, Some(*code)),
            "{body:.80}: {answer}"
        );
    }
    // Not JSON at all: the body is refused as such.
    let response = node
        .client
        .patch(format!("{}/api/v1/domains/go.acme.example", node.base))
        .bearer_auth(&keys.own)
        .header("content-type", "application/merge-patch+json")
        .body(r#"{"assetlinks": [1,]}"#)
        .send()
        .await
        .expect("send");
    assert_eq!(response.status().as_u16(), 400);
    assert_eq!(
        response.json::<Value>().await.expect("json")["error"],
        "invalid_json"
    );

    let mut grpc = node.links_client().await;
    let update = |change: pb::UpdateDomainRequest| {
        with_key(
            &keys.own,
            pb::UpdateDomainRequest {
                host: "go.acme.example".into(),
                ..change
            },
        )
    };
    let grpc_bad: Vec<(pb::UpdateDomainRequest, &str)> = vec![
        (
            pb::UpdateDomainRequest {
                apple_app_site_association: Some("not json".into()),
                ..Default::default()
            },
            "invalid_app_file",
        ),
        (
            pb::UpdateDomainRequest {
                apple_app_site_association: Some("".into()),
                ..Default::default()
            },
            "invalid_app_file",
        ),
        (
            pb::UpdateDomainRequest {
                apple_app_site_association: Some("[]".into()),
                ..Default::default()
            },
            "invalid_app_file",
        ),
        (
            pb::UpdateDomainRequest {
                assetlinks: Some("{".into()),
                ..Default::default()
            },
            "invalid_app_file",
        ),
        (
            pb::UpdateDomainRequest {
                assetlinks: Some("{}".into()),
                ..Default::default()
            },
            "invalid_app_file",
        ),
        (
            pb::UpdateDomainRequest {
                assetlinks: Some(over_array.to_string()),
                ..Default::default()
            },
            "app_file_too_large",
        ),
        (
            pb::UpdateDomainRequest {
                assetlinks: Some("[]".into()),
                clear_assetlinks: true,
                ..Default::default()
            },
            "conflicting_options",
        ),
        (
            pb::UpdateDomainRequest {
                robots: Some("allow".into()),
                apple_app_site_association: Some("1".into()),
                ..Default::default()
            },
            "invalid_app_file",
        ),
    ];
    for (change, code) in grpc_bad {
        let status = grpc
            .update_domain(update(change.clone()))
            .await
            .expect_err(code);
        assert_eq!(
            refusal(status),
            (tonic::Code::InvalidArgument, code.to_string()),
            "{change:?}"
        );
    }
    let (status, now) = call(
        &node,
        Method::GET,
        "/domains/go.acme.example",
        &keys.own,
        None,
    )
    .await;
    assert_eq!(
        (status, &now),
        (200, &set),
        "a refused change wrote something"
    );
    assert_eq!(
        get(&node, "go.acme.example", "/.well-known/assetlinks.json")
            .await
            .body,
        assetlinks("com.acme.app").to_string()
    );

    // The bound itself is accepted, over both APIs; gRPC sets and clears.
    patch(
        &node,
        &keys.own,
        "go.acme.example",
        json!({"assetlinks": at_bound}),
    )
    .await;
    assert_eq!(
        get(&node, "go.acme.example", "/.well-known/assetlinks.json")
            .await
            .body
            .len(),
        bound
    );
    let changed = grpc
        .update_domain(update(pb::UpdateDomainRequest {
            apple_app_site_association: Some(r#"{ "applinks" : {"details": []} }"#.into()),
            clear_assetlinks: true,
            ..Default::default()
        }))
        .await
        .expect("update")
        .into_inner();
    assert_eq!(
        changed.apple_app_site_association.as_deref(),
        Some(r#"{"applinks":{"details":[]}}"#)
    );
    assert_eq!(changed.assetlinks, None);
    let served = get(
        &node,
        "go.acme.example",
        "/.well-known/apple-app-site-association",
    )
    .await;
    assert_eq!(served.body, r#"{"applinks":{"details":[]}}"#);
    assert_eq!(
        get(&node, "go.acme.example", "/.well-known/assetlinks.json")
            .await
            .status,
        404
    );
    node.stop().await;
}
on_both_stores!(bad_app_files_are_refused_and_change_nothing);

/// A host the node does not know costs a store read, so it is bounded as an unknown code is:
/// a read that finds no domain spends a token of the client's 404 budget (even on `/`, whose
/// answer is no 404), a client past its budget gets 429 before any read, and a host already
/// known (a domain, or a host cached as none) costs nothing.
#[tokio::test]
async fn unknown_hosts_spend_the_404_budget_and_known_ones_do_not() {
    let stack = Stack::new(Backend::Sqlite).await;
    let keys = keys(&stack);
    let mut config = stack.config("hosts");
    config.access.api_keys_file = Some(stack.dir.path().join("api-keys.toml"));
    config.access.domain_suffixes = vec!["acme=acme.example".to_string()];
    config.limits.not_found_rate = 1;
    config.limits.not_found_burst = 5;
    config.redirects.negative_cache_ttl_ms = 600_000;
    let node = Node::start(config).await;
    claim(&node, &keys.own, "go.acme.example").await;
    patch(
        &node,
        &keys.own,
        "go.acme.example",
        json!({"root_url": "https://www.acme.example/"}),
    )
    .await;
    let branded = get(&node, "go.acme.example", "/").await;
    assert_eq!(
        branded.location.as_deref(),
        Some("https://www.acme.example/")
    );
    // One host asked again and again is read once, then known: one token in all.
    for _ in 0..10 {
        assert_eq!(get(&node, "same.example", "/").await.status, 303);
    }
    // New hosts, each a read that finds nothing: the four tokens left (and any the budget's
    // rate of one a second gave back meanwhile), then 429.
    let mut answered = 0;
    let mut refused = false;
    for i in 0..30 {
        match get(&node, &format!("probe-{i}.example"), "/").await.status {
            303 if !refused => answered += 1,
            429 => refused = true,
            other => panic!("probe {i} answered {other}"),
        }
        if refused {
            break;
        }
    }
    assert!(refused, "thirty unknown hosts were looked up without a 429");
    assert!(
        (4..=6).contains(&answered),
        "{answered} unknown hosts were answered before the 429"
    );
    // Refused for its Retry-After: new hosts are not even looked up.
    for i in 30..33 {
        let answer = get(&node, &format!("probe-{i}.example"), "/").await;
        assert_eq!(answer.status, 429, "probe {i}: {answer:?}");
    }
    // What is known still answers for nothing: the domain, and the host known to be none.
    let branded = get(&node, "go.acme.example", "/").await;
    assert_eq!(
        branded.location.as_deref(),
        Some("https://www.acme.example/")
    );
    assert_eq!(get(&node, "same.example", "/").await.status, 303);
}
