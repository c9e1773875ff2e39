//! Links belong to a domain: two tenants with a branded domain each and the default domain; the
//! same alias on each domain is its own link with its own target; a generated code answers on
//! its own domain only; another tenant can neither put links on a domain nor read, list or
//! change another's; lists filter by domain; a domain with live links cannot be removed; the
//! fallbacks of a domain answer for its unknown, expired and disabled codes; two creates racing
//! for one alias on one domain get one winner.

use crate::domains::{call, claim};
use crate::helpers::{Backend, Node, Stack};
use crate::tenants::{TenantKeys, write_keys};
use reqwest::Method;
use serde_json::{Value, json};

/// A node with the tenants' keys; `acme` may claim under `acme.example`, `globex` under
/// `globex.example`; `s.example` is a short domain of the default domain.
pub(crate) async fn node(stack: &Stack, name: &str) -> (Node, TenantKeys) {
    let keys = write_keys(&stack.dir.path().join("api-keys.toml"));
    let mut config = stack.config(name);
    config.access.api_keys_file = Some(stack.dir.path().join("api-keys.toml"));
    config.access.domain_suffixes = ["acme=acme.example", "globex=globex.example"]
        .map(String::from)
        .to_vec();
    config.listeners.short_domains = vec!["s.example".into()];
    (Node::start(config).await, keys)
}

/// Creates a link with `key` from `body`: the status and the answer.
async fn create(node: &Node, key: &str, body: Value) -> (u16, Value) {
    call(node, Method::POST, "/links", key, Some(body)).await
}

/// Creates a link that must be made.
async fn made(node: &Node, key: &str, body: Value) -> Value {
    let (status, link) = create(node, key, body.clone()).await;
    assert_eq!(status, 201, "{body} -> {link}");
    link
}

/// `GET /{code}` on `host`: the status and the `Location`.
pub(crate) async fn visit(node: &Node, host: &str, code: &str) -> (u16, Option<String>) {
    let (status, location) = node.on_host(host, code).await;
    (status.as_u16(), location)
}

/// `request`'s answer: the status and the `Location`.
async fn answer(request: reqwest::RequestBuilder) -> (u16, Option<String>) {
    let response = request.send().await.expect("send");
    let location = response
        .headers()
        .get(reqwest::header::LOCATION)
        .map(|v| v.to_str().expect("ascii").to_string());
    (response.status().as_u16(), location)
}

async fn the_same_alias_is_a_link_per_domain(backend: Backend) {
    let stack = Stack::new(backend).await;
    let (node, keys) = node(&stack, "aliases").await;
    assert_eq!(claim(&node, &keys.own, "go.acme.example").await.0, 201);
    assert_eq!(claim(&node, &keys.other, "go.globex.example").await.0, 201);

    let default = made(
        &node,
        &keys.own,
        json!({"url": "https://default.example/", "alias": "spring"}),
    )
    .await;
    let acme = made(
        &node,
        &keys.own,
        json!({"url": "https://acme.example/spring", "alias": "spring", "domain": "Go.Acme.Example."}),
    )
    .await;
    let globex = made(
        &node,
        &keys.other,
        json!({"url": "https://globex.example/spring", "alias": "spring", "domain": "go.globex.example"}),
    )
    .await;
    assert_eq!(acme["code"], "spring");
    assert_eq!(acme["domain"], "go.acme.example");
    assert_eq!(acme["short_url"], "https://go.acme.example/spring");
    assert_eq!(globex["short_url"], "https://go.globex.example/spring");
    assert_eq!(default["domain"], "sho.rt");
    assert!(
        default["short_url"]
            .as_str()
            .expect("short_url")
            .ends_with("/spring"),
        "{default}"
    );
    // Taken again on its own domain: 409, whoever asks.
    for (key, domain) in [
        (&keys.own, "go.acme.example"),
        (&keys.other, "go.globex.example"),
    ] {
        let (status, body) = create(
            &node,
            key,
            json!({"url": "https://x.example/", "alias": "spring", "domain": domain}),
        )
        .await;
        assert_eq!(
            (status, &body["error"]),
            (409, &json!("alias_taken")),
            "{body}"
        );
    }

    // Each host answers with its own link; the default domain's hosts with the default's.
    assert_eq!(
        visit(&node, "go.acme.example", "spring").await,
        (302, Some("https://acme.example/spring".into()))
    );
    assert_eq!(
        visit(&node, "go.globex.example:8443", "spring").await,
        (302, Some("https://globex.example/spring".into()))
    );
    for host in ["127.0.0.1", "sho.rt", "s.example", "unclaimed.example"] {
        assert_eq!(
            visit(&node, host, "spring").await,
            (302, Some("https://default.example/".into())),
            "{host}"
        );
    }
    // An alias made on one domain is unknown on the others.
    made(
        &node,
        &keys.own,
        json!({"url": "https://acme.example/only", "alias": "only-acme", "domain": "go.acme.example"}),
    )
    .await;
    for host in ["127.0.0.1", "go.globex.example"] {
        assert_eq!(visit(&node, host, "only-acme").await.0, 404, "{host}");
    }

    // A generated code answers on its own domain only.
    let generated = made(
        &node,
        &keys.own,
        json!({"url": "https://acme.example/generated", "domain": "go.acme.example"}),
    )
    .await;
    let code = generated["code"].as_str().expect("code");
    assert_eq!(
        visit(&node, "go.acme.example", code).await,
        (302, Some("https://acme.example/generated".into()))
    );
    for host in ["127.0.0.1", "s.example", "go.globex.example"] {
        assert_eq!(visit(&node, host, code).await.0, 404, "{host}");
    }
    // And the default domain's generated codes do not answer on a branded domain.
    let plain = made(
        &node,
        &keys.own,
        json!({"url": "https://default.example/g"}),
    )
    .await;
    let plain_code = plain["code"].as_str().expect("code");
    assert_eq!(visit(&node, "go.acme.example", plain_code).await.0, 404);
    assert_eq!(visit(&node, "127.0.0.1", plain_code).await.0, 302);

    // Reads name the domain of an alias; without it, the default domain's alias is read.
    let (status, body) = call(
        &node,
        Method::GET,
        "/links/spring?domain=go.acme.example",
        &keys.own,
        None,
    )
    .await;
    assert_eq!(
        (status, &body["url"]),
        (200, &json!("https://acme.example/spring")),
        "{body}"
    );
    let (status, body) = call(&node, Method::GET, "/links/spring", &keys.own, None).await;
    assert_eq!(
        (status, &body["url"]),
        (200, &json!("https://default.example/")),
        "{body}"
    );
    let (status, body) = call(
        &node,
        Method::GET,
        &format!("/links/{code}"),
        &keys.own,
        None,
    )
    .await;
    assert_eq!(
        (status, &body["domain"]),
        (200, &json!("go.acme.example")),
        "{body}"
    );
    let (status, body) = call(
        &node,
        Method::GET,
        &format!("/links/{code}?domain=go.globex.example"),
        &keys.own,
        None,
    )
    .await;
    assert_eq!(status, 404, "a generated code read on another domain");
    assert!(!body_says_domain(&body), "{body}");
    // Named on the default domain (by any of its hosts), a branded generated code is not
    // there either: a read, a change or a delete scoped to the default domain leaves it be.
    for host in ["sho.rt", "S.Example."] {
        for (method, path) in [
            (Method::GET, format!("/links/{code}?domain={host}")),
            (Method::GET, format!("/links/{code}/history?domain={host}")),
            (Method::PATCH, format!("/links/{code}?domain={host}")),
            (Method::DELETE, format!("/links/{code}?domain={host}")),
        ] {
            let body = (method == Method::PATCH).then(|| json!({"tags": ["moved"]}));
            let (status, answer) = call(&node, method.clone(), &path, &keys.own, body).await;
            assert_eq!(status, 404, "{method} {path}: {answer}");
        }
    }
    let (status, body) = call(
        &node,
        Method::GET,
        &format!("/links/{code}?domain=go.acme.example"),
        &keys.own,
        None,
    )
    .await;
    assert_eq!(
        (status, &body["state"], &body["tags"]),
        (200, &json!("active"), &json!([])),
        "{body}"
    );
    // And the default domain's generated code is found by its host as without one.
    let (status, _) = call(
        &node,
        Method::GET,
        &format!("/links/{plain_code}?domain=sho.rt"),
        &keys.own,
        None,
    )
    .await;
    assert_eq!(status, 200);

    tenants_stay_apart(&node, &keys).await;
    lists_filter_by_domain(&node, &keys).await;
    an_alias_asked_for_without_its_domain(&node, &keys).await;
    a_domain_with_live_links_stays(&node, &keys).await;
    locations_name_the_link(&node, &keys).await;
}

/// An alias only a branded domain holds, asked for without its domain: each call's 404 says
/// how to name it; with the domain it is found.
async fn an_alias_asked_for_without_its_domain(node: &Node, keys: &TenantKeys) {
    made(
        node,
        &keys.own,
        json!({"url": "https://acme.example/autumn", "alias": "autumn", "domain": "go.acme.example"}),
    )
    .await;
    for (method, path) in [
        (Method::GET, "/links/autumn"),
        (Method::DELETE, "/links/autumn"),
        (Method::GET, "/links/autumn/history"),
        (Method::GET, "/links/autumn/stats"),
        (Method::GET, "/links/autumn/qr"),
    ] {
        let (status, body) = call(node, method.clone(), path, &keys.own, None).await;
        assert_eq!(status, 404, "{method} {path}: {body}");
        assert_eq!(body["error"], "not_found", "{body}");
        assert!(body_says_domain(&body), "{method} {path}: {body}");
    }
    let (status, body) = call(
        node,
        Method::GET,
        "/links/autumn?domain=go.acme.example",
        &keys.own,
        None,
    )
    .await;
    assert_eq!((status, &body["code"]), (200, &json!("autumn")), "{body}");
    let path = "/links/autumn?domain=go.acme.example";
    let (status, _) = call(node, Method::DELETE, path, &keys.own, None).await;
    assert_eq!(
        status, 204,
        "deleted, so the domain holds the live links it did"
    );
}

/// Whether a 404's message says how a branded domain's alias is named.
fn body_says_domain(body: &Value) -> bool {
    body["message"]
        .as_str()
        .is_some_and(|m| m.contains("?domain=<its host>"))
}

/// A create's `Location` reads the link it made: a branded alias's with its domain, a default
/// alias's and a generated code's by the code alone.
async fn locations_name_the_link(node: &Node, keys: &TenantKeys) {
    for (body, want) in [
        (
            json!({"url": "https://globex.example/loc", "alias": "loc", "domain": "go.globex.example"}),
            "/api/v1/links/loc?domain=go.globex.example",
        ),
        (
            json!({"url": "https://default.example/loc", "alias": "loc"}),
            "/api/v1/links/loc",
        ),
        (
            json!({"url": "https://globex.example/gen", "domain": "go.globex.example"}),
            "",
        ),
    ] {
        let response = node
            .client
            .post(format!("{}/api/v1/links", node.base))
            .bearer_auth(&keys.other)
            .json(&body)
            .send()
            .await
            .expect("send");
        assert_eq!(response.status().as_u16(), 201, "{body}");
        let location = response.headers()[reqwest::header::LOCATION]
            .to_str()
            .expect("ascii")
            .to_string();
        let made: Value = response.json().await.expect("json");
        if !want.is_empty() {
            assert_eq!(location, want, "{body}");
        }
        let read: Value = node
            .client
            .get(format!("{}{location}", node.base))
            .bearer_auth(&keys.other)
            .send()
            .await
            .expect("send")
            .json()
            .await
            .expect("json");
        assert_eq!(
            (&read["url"], &read["code"], &read["domain"]),
            (&body["url"], &made["code"], &made["domain"]),
            "{location}"
        );
    }
}

/// Another tenant can neither put links on a domain nor read, change or delete its links.
async fn tenants_stay_apart(node: &Node, keys: &TenantKeys) {
    let (status, body) = create(
        node,
        &keys.other,
        json!({"url": "https://globex.example/", "alias": "in-truder", "domain": "go.acme.example"}),
    )
    .await;
    assert_eq!(
        (status, &body["error"]),
        (422, &json!("unknown_domain")),
        "{body}"
    );
    let (status, body) = create(
        node,
        &keys.other,
        json!({"url": "https://globex.example/", "domain": "go.acme.example"}),
    )
    .await;
    assert_eq!(
        (status, &body["error"]),
        (422, &json!("unknown_domain")),
        "{body}"
    );
    for method in [Method::GET, Method::DELETE] {
        let (status, _) = call(
            node,
            method.clone(),
            "/links/spring?domain=go.acme.example",
            &keys.other,
            None,
        )
        .await;
        assert_eq!(status, 404, "{method} of another tenant's alias");
    }
    let (status, _) = call(
        node,
        Method::PATCH,
        "/links/spring?domain=go.acme.example",
        &keys.other,
        Some(json!({"url": "https://evil.example/"})),
    )
    .await;
    assert_eq!(status, 404);
    assert_eq!(
        visit(node, "go.acme.example", "spring").await,
        (302, Some("https://acme.example/spring".into()))
    );
}

/// `domain=` lists one domain's links; a host of the default domain lists the default's.
async fn lists_filter_by_domain(node: &Node, keys: &TenantKeys) {
    let codes = |page: &Value| -> Vec<(String, String)> {
        page["links"]
            .as_array()
            .expect("links")
            .iter()
            .map(|l| {
                (
                    l["code"].as_str().expect("code").to_string(),
                    l["domain"].as_str().expect("domain").to_string(),
                )
            })
            .collect()
    };
    let (status, page) = call(
        node,
        Method::GET,
        "/links?domain=go.acme.example",
        &keys.own,
        None,
    )
    .await;
    assert_eq!(status, 200, "{page}");
    let listed = codes(&page);
    assert_eq!(listed.len(), 3, "{listed:?}");
    assert!(
        listed.iter().all(|(_, d)| d == "go.acme.example"),
        "{listed:?}"
    );
    let (_, page) = call(
        node,
        Method::GET,
        "/links?domain=s.example",
        &keys.own,
        None,
    )
    .await;
    let listed = codes(&page);
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert!(listed.iter().all(|(_, d)| d == "sho.rt"), "{listed:?}");
    // Another tenant's domain lists nothing of it.
    let (_, page) = call(
        node,
        Method::GET,
        "/links?domain=go.acme.example",
        &keys.other,
        None,
    )
    .await;
    assert_eq!(codes(&page), Vec::<(String, String)>::new());
    let (status, page) = call(
        node,
        Method::GET,
        "/links?domain=not%20a%20host",
        &keys.own,
        None,
    )
    .await;
    assert_eq!(
        (status, &page["error"]),
        (400, &json!("invalid_domain")),
        "{page}"
    );
}

/// A domain is kept while live links are on it, and removed once they are deleted.
async fn a_domain_with_live_links_stays(node: &Node, keys: &TenantKeys) {
    let (status, body) = call(
        node,
        Method::DELETE,
        "/domains/go.acme.example",
        &keys.own,
        None,
    )
    .await;
    assert_eq!(
        (status, &body["error"]),
        (409, &json!("domain_has_links")),
        "{body}"
    );
    assert!(
        body["message"]
            .as_str()
            .expect("message")
            .starts_with("3 live links"),
        "{body}"
    );
    let (_, page) = call(
        node,
        Method::GET,
        "/links?domain=go.acme.example",
        &keys.own,
        None,
    )
    .await;
    for link in page["links"].as_array().expect("links") {
        let path = format!(
            "/links/{}?domain=go.acme.example",
            link["code"].as_str().expect("code")
        );
        let (status, body) = call(node, Method::DELETE, &path, &keys.own, None).await;
        assert_eq!(status, 204, "{path}: {body}");
    }
    let (status, body) = call(
        node,
        Method::DELETE,
        "/domains/go.acme.example",
        &keys.own,
        None,
    )
    .await;
    assert_eq!(status, 204, "{body}");
    // No longer a domain, the host answers as the default domain's.
    assert_eq!(
        visit(node, "go.acme.example", "spring").await,
        (302, Some("https://default.example/".into()))
    );
}

crate::on_both_stores!(the_same_alias_is_a_link_per_domain);

async fn a_domain_answers_its_fallbacks(backend: Backend) {
    let stack = Stack::new(backend).await;
    let (node, keys) = node(&stack, "fallbacks").await;
    assert_eq!(claim(&node, &keys.own, "go.acme.example").await.0, 201);
    assert_eq!(claim(&node, &keys.own, "bare.acme.example").await.0, 201);
    let (status, body) = call(
        &node,
        Method::PATCH,
        "/domains/go.acme.example",
        &keys.own,
        Some(json!({
            "root_url": "https://www.acme.example/",
            "not_found_url": "https://www.acme.example/missing",
            "expired_url": "https://www.acme.example/expired",
            "redirect_status": 301,
        })),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    for domain in ["go.acme.example", "bare.acme.example"] {
        made(
            &node,
            &keys.own,
            json!({"url": "https://acme.example/live", "alias": "live", "domain": domain}),
        )
        .await;
        made(
            &node,
            &keys.own,
            json!({"url": "https://acme.example/off", "alias": "off", "domain": domain}),
        )
        .await;
        let (status, body) = call(
            &node,
            Method::PATCH,
            &format!("/links/off?domain={domain}"),
            &keys.own,
            Some(json!({"disabled": true})),
        )
        .await;
        assert_eq!(status, 200, "{body}");
        let soon = (chrono::Utc::now() + chrono::Duration::milliseconds(1500)).to_rfc3339();
        made(
            &node,
            &keys.own,
            json!({"url": "https://acme.example/soon", "alias": "soon", "domain": domain, "expires_at": soon}),
        )
        .await;
    }
    // Wait until the expiring links have expired (the bare domain answers 410 for them).
    crate::helpers::wait_for(
        "the expiring links to expire",
        std::time::Duration::from_secs(5),
        async || visit(&node, "bare.acme.example", "soon").await.0 == 410,
    )
    .await;
    // The domain's own redirect status, and its fallbacks for what would be a 404 or a 410.
    let cases = [
        ("live", (301, Some("https://acme.example/live"))),
        (
            "unknown-code",
            (302, Some("https://www.acme.example/missing")),
        ),
        ("off", (302, Some("https://www.acme.example/expired"))),
        ("soon", (302, Some("https://www.acme.example/expired"))),
    ];
    for (code, (status, location)) in cases {
        assert_eq!(
            visit(&node, "go.acme.example", code).await,
            (status, location.map(str::to_string)),
            "{code}"
        );
    }
    // A protected link past its visit limit: the form's unlock answers as a GET of a gone link
    // does on its domain, the fallback where there is one.
    for (domain, want) in [
        (
            "go.acme.example",
            (302, Some("https://www.acme.example/expired")),
        ),
        ("bare.acme.example", (410, None)),
    ] {
        made(
            &node,
            &keys.own,
            json!({"url": "https://acme.example/kept", "alias": "kept", "domain": domain,
                   "password": "open-sesame", "max_visits": 1}),
        )
        .await;
        let unlock = || {
            answer(
                node.client
                    .post(format!("{}/kept", node.base))
                    .header("host", domain)
                    .header("user-agent", crate::helpers::BROWSER)
                    .header("content-type", "application/x-www-form-urlencoded")
                    .body("password=open-sesame"),
            )
        };
        assert_eq!(unlock().await.0, 200, "{domain}: the one visit");
        let (status, location) = unlock().await;
        assert_eq!(
            (status, location.as_deref()),
            want,
            "{domain}: past the limit"
        );
    }
    // A domain without fallbacks answers as the default domain does.
    let bare = [
        ("live", (302, Some("https://acme.example/live"))),
        ("unknown-code", (404, None)),
        ("off", (410, None)),
        ("soon", (410, None)),
    ];
    for (code, (status, location)) in bare {
        assert_eq!(
            visit(&node, "bare.acme.example", code).await,
            (status, location.map(str::to_string)),
            "{code}"
        );
    }
}

crate::on_both_stores!(a_domain_answers_its_fallbacks);

/// Unknown codes on a domain with a `not_found_url` spend the 404 budget as anywhere: a scan
/// is refused with 429 after the budget, fallback or not.
#[tokio::test]
async fn a_fallback_for_unknown_codes_still_spends_the_404_budget() {
    let stack = Stack::new(Backend::Sqlite).await;
    let keys = write_keys(&stack.dir.path().join("api-keys.toml"));
    let mut config = stack.config("budget");
    config.access.api_keys_file = Some(stack.dir.path().join("api-keys.toml"));
    config.access.domain_suffixes = vec!["acme=acme.example".to_string()];
    config.limits.not_found_rate = 1;
    config.limits.not_found_burst = 5;
    let node = Node::start(config).await;
    assert_eq!(claim(&node, &keys.own, "go.acme.example").await.0, 201);
    let (status, body) = call(
        &node,
        Method::PATCH,
        "/domains/go.acme.example",
        &keys.own,
        Some(json!({"not_found_url": "https://www.acme.example/missing"})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let mut fallbacks = 0;
    let mut refused = false;
    for i in 0..30 {
        match visit(&node, "go.acme.example", &format!("probe-{i}"))
            .await
            .0
        {
            302 if !refused => fallbacks += 1,
            429 => {
                refused = true;
                break;
            }
            other => panic!("probe {i} answered {other}"),
        }
    }
    assert!(
        refused,
        "thirty unknown codes got the fallback without a 429"
    );
    assert!(
        (4..=7).contains(&fallbacks),
        "{fallbacks} fallbacks before the 429"
    );
}

/// Creates racing for one alias on one domain, from two tenants' keys and from one: one winner
/// each time, decided by the database; the loser is told `alias_taken`.
async fn racing_creates_of_one_alias_on_one_domain_get_one_winner(backend: Backend) {
    let stack = Stack::new(backend).await;
    let (node, keys) = node(&stack, "race").await;
    assert_eq!(claim(&node, &keys.own, "go.acme.example").await.0, 201);
    for round in 0..20 {
        let alias = format!("race-{round}");
        let attempts = (0..4).map(|i| {
            let body = json!({
                "url": format!("https://acme.example/{round}/{i}"),
                "alias": alias,
                "domain": "go.acme.example",
            });
            let (node, key) = (&node, keys.own.clone());
            async move { create(node, &key, body).await }
        });
        let answers = futures::future::join_all(attempts).await;
        let winners: Vec<&Value> = answers
            .iter()
            .filter(|(status, _)| *status == 201)
            .map(|(_, body)| body)
            .collect();
        assert_eq!(winners.len(), 1, "round {round}: {answers:?}");
        assert!(
            answers
                .iter()
                .all(|(status, body)| *status == 201 || body["error"] == "alias_taken"),
            "round {round}: {answers:?}"
        );
        let (_, location) = visit(&node, "go.acme.example", &alias).await;
        assert_eq!(
            location.as_deref(),
            winners[0]["url"].as_str(),
            "round {round}"
        );
        // The same alias on the default domain is still free.
        made(
            &node,
            &keys.other,
            json!({"url": "https://globex.example/", "alias": alias}),
        )
        .await;
    }
}

crate::on_both_stores!(racing_creates_of_one_alias_on_one_domain_get_one_winner);

/// The links `key` lists, all domains.
pub(crate) async fn count_links(node: &Node, key: &str) -> usize {
    let (status, page) = call(node, Method::GET, "/links?limit=1000", key, None).await;
    assert_eq!(status, 200, "{page}");
    page["links"].as_array().expect("links").len()
}

async fn bad_domains_are_refused_and_nothing_is_written(backend: Backend) {
    let stack = Stack::new(backend).await;
    let (node, keys) = node(&stack, "bad").await;
    assert_eq!(claim(&node, &keys.own, "go.acme.example").await.0, 201);
    assert_eq!(claim(&node, &keys.other, "go.globex.example").await.0, 201);
    let before = count_links(&node, &keys.own).await;
    #[rustfmt::skip]
    let table: &[(&str, u16, &str)] = &[
        // (domain, status, error)
        ("go.globex.example", 422, "unknown_domain"),
        ("unclaimed.acme.example", 422, "unknown_domain"),
        ("GO.GLOBEX.EXAMPLE.", 422, "unknown_domain"),
        ("go.acme.example:443", 422, "invalid_domain"),
        ("https://go.acme.example/", 422, "invalid_domain"),
        ("user@go.acme.example", 422, "invalid_domain"),
        ("*.acme.example", 422, "invalid_domain"),
        ("192.0.2.1", 422, "invalid_domain"),
        ("[2001:db8::1]", 422, "invalid_domain"),
        ("go..acme.example", 422, "invalid_domain"),
        ("single", 422, "invalid_domain"),
    ];
    for (domain, status, error) in table {
        for body in [
            json!({"url": "https://acme.example/", "domain": domain}),
            json!({"url": "https://acme.example/", "alias": "bad-domain", "domain": domain}),
        ] {
            let (got, answer) = create(&node, &keys.own, body.clone()).await;
            assert_eq!(
                (got, answer["error"].as_str()),
                (*status, Some(*error)),
                "{body}: {answer}"
            );
        }
        let path = format!("/links/import?domain={}", urlencoding(domain));
        let response = node
            .client
            .post(format!("{}/api/v1{path}", node.base))
            .bearer_auth(&keys.own)
            .header("content-type", "application/x-ndjson")
            .body("{\"url\": \"https://acme.example/imported\", \"code\": \"imp-1\"}\n")
            .send()
            .await
            .expect("import");
        assert_eq!(response.status().as_u16(), *status, "import on {domain}");
        // A read naming the domain is refused the same way, or not found.
        let (got, _) = call(
            &node,
            Method::GET,
            &format!("/links/bad-domain?domain={}", urlencoding(domain)),
            &keys.own,
            None,
        )
        .await;
        assert!(got == 404 || got == *status, "read on {domain}: {got}");
    }
    assert_eq!(
        count_links(&node, &keys.own).await,
        before,
        "a refused create wrote a link"
    );
}

fn urlencoding(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

crate::on_both_stores!(bad_domains_are_refused_and_nothing_is_written);

/// The same rules over gRPC: a create names its domain, a read names the alias's domain, another
/// tenant's domain is `unknown_domain` and its alias `NOT_FOUND`, and the answer carries the
/// domain and the short URL on its host.
async fn links_on_domains_over_grpc(backend: Backend) {
    use crate::domains::with_key;
    use proto::shortener::v1 as pb;
    use tonic::Code;
    let stack = Stack::new(backend).await;
    let (node, keys) = node(&stack, "grpc").await;
    assert_eq!(claim(&node, &keys.own, "go.acme.example").await.0, 201);
    let mut grpc = node.links_client().await;
    let create = |key: &str, alias: &str, domain: Option<&str>, url: &str| {
        with_key(
            key,
            pb::CreateLinkRequest {
                url: url.into(),
                alias: Some(alias.into()),
                domain: domain.map(str::to_string),
                ..Default::default()
            },
        )
    };
    let branded = grpc
        .create_link(create(
            &keys.own,
            "spring",
            Some("GO.acme.example"),
            "https://acme.example/b",
        ))
        .await
        .expect("create on the domain")
        .into_inner();
    assert_eq!(
        (
            branded.code.as_str(),
            branded.domain.as_str(),
            branded.short_url.as_str()
        ),
        (
            "spring",
            "go.acme.example",
            "https://go.acme.example/spring"
        )
    );
    let default = grpc
        .create_link(create(&keys.own, "spring", None, "https://acme.example/d"))
        .await
        .expect("the same alias on the default domain")
        .into_inner();
    assert_eq!(
        (default.domain.as_str(), default.url.as_str()),
        ("sho.rt", "https://acme.example/d")
    );
    let taken = grpc
        .create_link(create(
            &keys.own,
            "spring",
            Some("go.acme.example"),
            "https://x.example/",
        ))
        .await
        .expect_err("taken on its domain");
    assert_eq!(taken.code(), Code::AlreadyExists);
    let refused = grpc
        .create_link(create(
            &keys.other,
            "other",
            Some("go.acme.example"),
            "https://x.example/",
        ))
        .await
        .expect_err("another tenant's domain");
    assert_eq!(
        (
            refused.code(),
            refused
                .metadata()
                .get("error-code")
                .map(|v| v.to_str().expect("ascii"))
        ),
        (Code::InvalidArgument, Some("unknown_domain"))
    );
    let get = |key: &str, domain: &str| {
        with_key(
            key,
            pb::GetLinkRequest {
                code: "spring".into(),
                domain: domain.into(),
            },
        )
    };
    let read = grpc
        .get_link(get(&keys.own, "go.acme.example"))
        .await
        .expect("read on the domain")
        .into_inner();
    assert_eq!(read.url, "https://acme.example/b");
    let read = grpc
        .get_link(get(&keys.own, ""))
        .await
        .expect("read")
        .into_inner();
    assert_eq!(read.url, "https://acme.example/d");
    let hidden = grpc
        .get_link(get(&keys.other, "go.acme.example"))
        .await
        .expect_err("another tenant's alias");
    assert_eq!(hidden.code(), Code::NotFound);
    let deleted = grpc
        .delete_link(with_key(
            &keys.other,
            pb::DeleteLinkRequest {
                code: "spring".into(),
                domain: "go.acme.example".into(),
            },
        ))
        .await
        .expect_err("another tenant's delete");
    assert_eq!(deleted.code(), Code::NotFound);
    let listed = grpc
        .list_links(with_key(
            &keys.own,
            pb::ListLinksRequest {
                filter: Some(pb::LinkFilter {
                    domain: Some("go.acme.example".into()),
                    ..Default::default()
                }),
                ..Default::default()
            },
        ))
        .await
        .expect("list")
        .into_inner();
    let codes: Vec<(&str, &str)> = listed
        .links
        .iter()
        .map(|l| (l.code.as_str(), l.url.as_str()))
        .collect();
    assert_eq!(codes, [("spring", "https://acme.example/b")]);
    assert_eq!(
        visit(&node, "go.acme.example", "spring").await,
        (302, Some("https://acme.example/b".into()))
    );
    // A generated code on the branded domain: found without a domain and on its own, not on
    // the default domain named by its host.
    let generated = grpc
        .create_link(with_key(
            &keys.own,
            pb::CreateLinkRequest {
                url: "https://acme.example/g".into(),
                domain: Some("go.acme.example".into()),
                ..Default::default()
            },
        ))
        .await
        .expect("a generated code on the domain")
        .into_inner();
    let read_generated = |domain: &str| {
        with_key(
            &keys.own,
            pb::GetLinkRequest {
                code: generated.code.clone(),
                domain: domain.into(),
            },
        )
    };
    for domain in ["", "go.acme.example"] {
        grpc.get_link(read_generated(domain))
            .await
            .unwrap_or_else(|e| panic!("read with {domain:?}: {e:?}"));
    }
    let elsewhere = grpc
        .get_link(read_generated("sho.rt"))
        .await
        .expect_err("a branded generated code on the default domain");
    assert_eq!(elsewhere.code(), Code::NotFound);
}

crate::on_both_stores!(links_on_domains_over_grpc);

/// Redirects are counted per domain only for the domains the operator lists: a listed domain
/// gets a series per outcome, another claimed domain and made-up hosts none.
#[tokio::test]
async fn only_listed_domains_get_redirect_series() {
    let stack = Stack::new(Backend::Sqlite).await;
    let keys = write_keys(&stack.dir.path().join("api-keys.toml"));
    let mut config = stack.config("metrics");
    config.access.api_keys_file = Some(stack.dir.path().join("api-keys.toml"));
    config.access.domain_suffixes = vec!["acme=acme.example".to_string()];
    config.redirects.domain_metrics = vec!["Go.Acme.Example".into()];
    let node = Node::start(config).await;
    for host in ["go.acme.example", "other.acme.example"] {
        assert_eq!(claim(&node, &keys.own, host).await.0, 201);
        made(
            &node,
            &keys.own,
            json!({"url": "https://acme.example/", "alias": "m-1", "domain": host}),
        )
        .await;
    }
    for _ in 0..3 {
        assert_eq!(visit(&node, "go.acme.example", "m-1").await.0, 302);
        assert_eq!(visit(&node, "other.acme.example", "m-1").await.0, 302);
    }
    assert_eq!(visit(&node, "go.acme.example", "m-unknown").await.0, 404);
    assert_eq!(visit(&node, "made-up.example", "m-1").await.0, 404);
    let text = node.metrics().await;
    let series: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("shortener_domain_redirects_total{"))
        .collect();
    assert!(
        series.contains(
            &r#"shortener_domain_redirects_total{domain="go.acme.example",outcome="redirect"} 3"#
        ),
        "{series:?}"
    );
    assert!(
        series.contains(
            &r#"shortener_domain_redirects_total{domain="go.acme.example",outcome="not_found"} 1"#
        ),
        "{series:?}"
    );
    assert!(
        series
            .iter()
            .all(|l| l.contains(r#"domain="go.acme.example""#)),
        "a series for a host that is not listed: {series:?}"
    );
}

/// A link of generated or private shape moves between its tenant's domains (and the default
/// domain) with a PATCH of `domain`, recorded in its history; an alias does not move, nor does
/// any link to another tenant's domain; a domain emptied by moves can be removed.
async fn links_move_between_domains(backend: Backend) {
    let stack = Stack::new(backend).await;
    let (node, keys) = node(&stack, "moves").await;
    assert_eq!(claim(&node, &keys.own, "go.acme.example").await.0, 201);
    assert_eq!(claim(&node, &keys.other, "go.globex.example").await.0, 201);
    let link = made(
        &node,
        &keys.own,
        json!({"url": "https://acme.example/moving"}),
    )
    .await;
    let code = link["code"].as_str().expect("code").to_string();
    let patch = |body: Value| {
        let (node, key, code) = (&node, keys.own.clone(), code.clone());
        async move {
            call(
                node,
                Method::PATCH,
                &format!("/links/{code}"),
                &key,
                Some(body),
            )
            .await
        }
    };
    let (status, moved) = patch(json!({"domain": "go.acme.example"})).await;
    assert_eq!(status, 200, "{moved}");
    assert_eq!(
        (&moved["domain"], &moved["short_url"]),
        (
            &json!("go.acme.example"),
            &json!(format!("https://go.acme.example/{code}"))
        )
    );
    assert_eq!(visit(&node, "go.acme.example", &code).await.0, 302);
    assert_eq!(visit(&node, "sho.rt", &code).await.0, 404);
    // Refused, nothing changed: another tenant's domain, an unclaimed host, a bad host.
    for (domain, error) in [
        ("go.globex.example", "unknown_domain"),
        ("nobody.acme.example", "unknown_domain"),
        ("bad host", "invalid_domain"),
    ] {
        let (status, body) = patch(json!({ "domain": domain })).await;
        assert_eq!(
            (status, body["error"].as_str()),
            (422, Some(error)),
            "{domain}: {body}"
        );
    }
    assert_eq!(visit(&node, "go.acme.example", &code).await.0, 302);
    // An alias stays on its domain.
    made(
        &node,
        &keys.own,
        json!({"url": "https://acme.example/a", "alias": "stays-put"}),
    )
    .await;
    let (status, body) = call(
        &node,
        Method::PATCH,
        "/links/stays-put",
        &keys.own,
        Some(json!({"domain": "go.acme.example"})),
    )
    .await;
    assert_eq!(
        (status, &body["error"]),
        (422, &json!("alias_not_movable")),
        "{body}"
    );
    // The domain holds a live link, so it stays; moved back to the default domain (named by the
    // public URL's host, as links show it), the domain can go.
    let (status, _) = call(
        &node,
        Method::DELETE,
        "/domains/go.acme.example",
        &keys.own,
        None,
    )
    .await;
    assert_eq!(status, 409);
    let (status, back) = patch(json!({"domain": "sho.rt"})).await;
    assert_eq!((status, &back["domain"]), (200, &json!("sho.rt")), "{back}");
    assert_eq!(visit(&node, "sho.rt", &code).await.0, 302);
    assert_eq!(visit(&node, "go.acme.example", &code).await.0, 404);
    let (status, history) = call(
        &node,
        Method::GET,
        &format!("/links/{code}/history"),
        &keys.own,
        None,
    )
    .await;
    assert_eq!(status, 200, "{history}");
    let moves: Vec<&Value> = history["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|e| e["change"].get("domain"))
        .collect();
    assert_eq!(
        moves,
        [
            &json!({"old": null, "new": "go.acme.example"}),
            &json!({"old": "go.acme.example", "new": null})
        ]
    );
    let (status, body) = call(
        &node,
        Method::DELETE,
        "/domains/go.acme.example",
        &keys.own,
        None,
    )
    .await;
    assert_eq!(status, 204, "{body}");
}

crate::on_both_stores!(links_move_between_domains);

/// Posts `rows` to the import with `key` (`query` after `?`): each row's answer, then the
/// summary line.
async fn import(node: &Node, key: &str, kind: &str, rows: String, query: &str) -> Vec<Value> {
    let response = node
        .client
        .post(format!("{}/api/v1/links/import?{query}", node.base))
        .bearer_auth(key)
        .header("content-type", kind)
        .body(rows)
        .send()
        .await
        .expect("import");
    assert_eq!(response.status().as_u16(), 200);
    let text = response.text().await.expect("body");
    text.lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// NDJSON rows of `(code, domain)`, each to `https://acme.example/{code}`.
fn ndjson_rows(rows: &[(&str, &str)]) -> String {
    rows.iter()
        .map(|(code, domain)| {
            json!({"url": format!("https://acme.example/{code}"), "code": code, "domain": domain})
                .to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The answer to the row holding `code` (rows count from 1, after the header).
fn row_of<'a>(answers: &'a [Value], code: &str) -> &'a Value {
    answers
        .iter()
        .find(|a| a["code"] == code)
        .unwrap_or_else(|| panic!("no answer for {code}: {answers:#?}"))
}

/// An export imports back onto the domains its links answered on: into the node it came
/// from, every row is found again and nothing is made twice; into another deployment (another
/// public host), a row naming a domain the importer's tenant has not claimed is refused
/// (`unknown_domain`) until it has, and one naming the host that was the default domain where
/// the rows come from is refused until the import names it in `default_hosts`; text no domain
/// can be is `invalid_domain`, unless `default_hosts` names it; `?domain=` puts every row there,
/// whatever the rows say.
async fn an_export_imports_back_onto_its_domains(backend: Backend) {
    let stack = Stack::new(backend).await;
    let (from, keys) = node(&stack, "from").await;
    assert_eq!(claim(&from, &keys.own, "go.acme.example").await.0, 201);
    made(&from, &keys.own, json!({"url": "https://acme.example/spring", "alias": "spring", "domain": "go.acme.example"})).await;
    let generated = made(
        &from,
        &keys.own,
        json!({"url": "https://acme.example/gen", "domain": "go.acme.example"}),
    )
    .await;
    let generated = generated["code"].as_str().expect("code").to_string();
    made(
        &from,
        &keys.own,
        json!({"url": "https://acme.example/plain", "alias": "plain"}),
    )
    .await;
    let export = from
        .client
        .get(format!("{}/api/v1/links/export?format=csv", from.base))
        .bearer_auth(&keys.own)
        .send()
        .await
        .expect("export")
        .text()
        .await
        .expect("csv");
    assert!(export.contains(",go.acme.example,"), "{export}");
    let before = count_links(&from, &keys.own).await;

    // Back into the node it came from: every row exists already.
    let again = import(&from, &keys.own, "text/csv", export.clone(), "").await;
    let summary = &again.last().expect("summary")["summary"];
    assert_eq!(
        (&summary["exists"], &summary["created"]),
        (&json!(3), &json!(0)),
        "{again:#?}"
    );
    assert_eq!(count_links(&from, &keys.own).await, before);

    // Into another deployment, answering under another public host.
    let other = Stack::new(backend).await;
    let to_keys = write_keys(&other.dir.path().join("api-keys.toml"));
    let mut config = other.config("to");
    config.access.api_keys_file = Some(other.dir.path().join("api-keys.toml"));
    config.access.domain_suffixes = ["acme=acme.example", "globex=globex.example"]
        .map(String::from)
        .to_vec();
    config.listeners.public_url = Some("https://other.example/".into());
    let to = Node::start(config).await;
    let stored = count_links(&to, &to_keys.own).await;
    // Every row is refused, saying what to do, and nothing is written.
    let first = import(&to, &to_keys.own, "text/csv", export.clone(), "").await;
    for code in ["spring", generated.as_str(), "plain"] {
        let line = row_of(&first, code);
        assert_eq!(line["error"], "unknown_domain", "{first:#?}");
        let message = line["message"].as_str().expect("message");
        assert!(
            message.contains("claim it first") && message.contains("import's default_hosts"),
            "{message}"
        );
    }
    assert_eq!(count_links(&to, &to_keys.own).await, stored);
    // With the other deployment's host named, its default-domain row lands on this one's;
    // the branded ones wait for their domain.
    let second = import(
        &to,
        &to_keys.own,
        "text/csv",
        export.clone(),
        "default_hosts=https%3A%2F%2FSho.Rt.%2F",
    )
    .await;
    assert_eq!(row_of(&second, "plain")["status"], "created", "{second:#?}");
    assert_eq!(
        row_of(&second, "spring")["error"],
        "unknown_domain",
        "{second:#?}"
    );
    assert_eq!(claim(&to, &to_keys.own, "go.acme.example").await.0, 201);
    let third = import(
        &to,
        &to_keys.own,
        "text/csv",
        export,
        "default_hosts=sho.rt",
    )
    .await;
    for (code, status) in [
        ("spring", "created"),
        (generated.as_str(), "created"),
        ("plain", "exists"),
    ] {
        assert_eq!(row_of(&third, code)["status"], status, "{third:#?}");
    }
    assert_eq!(
        visit(&to, "go.acme.example", "spring").await,
        (302, Some("https://acme.example/spring".into()))
    );
    assert_eq!(visit(&to, "other.example", "spring").await.0, 404);
    assert_eq!(
        visit(&to, "go.acme.example", &generated).await,
        (302, Some("https://acme.example/gen".into()))
    );
    assert_eq!(
        visit(&to, "other.example", "plain").await,
        (302, Some("https://acme.example/plain".into()))
    );
    // The audit entry of a chunk names each link it made with its domain: the rows went on
    // domains of their own, not one of the import's.
    let (status, audit) = call(
        &to,
        Method::GET,
        "/audit?tenant=acme&action=link.import",
        &to_keys.admin,
        None,
    )
    .await;
    assert_eq!(status, 200, "{audit}");
    let mut codes: Vec<Value> = audit["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .flat_map(|e| e["change"]["codes"].as_array().cloned().unwrap_or_default())
        .collect();
    codes.sort_by_key(|c| c.as_str().map(String::from));
    let mut expected = vec![
        json!("plain"),
        json!("go.acme.example/spring"),
        json!(format!("go.acme.example/{generated}")),
    ];
    expected.sort_by_key(|c| c.as_str().map(String::from));
    assert_eq!(codes, expected, "{audit:#}");
    // An import onto one long host, of long codes: its entry keeps its count and its domain
    // (the codes, bare, as many as fit), never cut down to the names of its fields.
    let long_host = format!("{}.acme.example", "l".repeat(60));
    assert_eq!(claim(&to, &to_keys.own, &long_host).await.0, 201);
    let rows: String = (0..120)
        .map(|i| format!("{}\n", json!({"url": "https://acme.example/many", "code": format!("{i:03}-{}", "c".repeat(56))})))
        .collect();
    let many = import(
        &to,
        &to_keys.own,
        "application/x-ndjson",
        rows,
        &format!("domain={long_host}"),
    )
    .await;
    assert_eq!(
        many.last().expect("summary")["summary"]["created"],
        120,
        "{many:#?}"
    );
    let (_, audit) = call(
        &to,
        Method::GET,
        "/audit?tenant=acme&action=link.import&limit=1",
        &to_keys.admin,
        None,
    )
    .await;
    let change = &audit["entries"][0]["change"];
    assert_eq!(change["created"], 120, "{change:#}");
    assert_eq!(change["domain"], long_host.as_str(), "{change:#}");
    let listed = change["codes"].as_array().expect("codes");
    assert!((40..120).contains(&listed.len()), "{change:#}");
    assert_eq!(
        listed[0],
        format!("000-{}", "c".repeat(56)).as_str(),
        "{change:#}"
    );

    // A row's host, read as a create's: another tenant's domain is unknown, text no domain
    // can be is invalid unless `default_hosts` names it, the node's own host is the default
    // domain, case and a final dot are the same host.
    assert_eq!(claim(&to, &to_keys.other, "go.globex.example").await.0, 201);
    let rows = [
        ("theirs", "go.globex.example"),
        ("nohost", "https://go.acme.example/"),
        ("old-ip", "192.0.2.1"),
        ("own-host", "other.example"),
        ("shouted", "GO.ACME.EXAMPLE."),
        ("ported", "go.acme.example:8443"),
    ];
    let answers = import(
        &to,
        &to_keys.own,
        "application/x-ndjson",
        ndjson_rows(&rows),
        "default_hosts=192.0.2.1",
    )
    .await;
    let said: Vec<Value> = answers.iter().take(6).map(|a| a["error"].clone()).collect();
    assert_eq!(
        said,
        [
            json!("unknown_domain"),
            json!("invalid_domain"),
            Value::Null,
            Value::Null,
            Value::Null,
            Value::Null
        ],
        "{answers:#?}"
    );
    assert_eq!(visit(&to, "go.globex.example", "theirs").await.0, 404);
    assert_eq!(visit(&to, "other.example", "old-ip").await.0, 302);
    assert_eq!(visit(&to, "other.example", "own-host").await.0, 302);
    assert_eq!(visit(&to, "go.acme.example", "shouted").await.0, 302);
    assert_eq!(visit(&to, "go.acme.example", "ported").await.0, 302);
    // With `?domain=`, that domain is every row's, whatever the row says.
    let rows = [("fixed", "go.globex.example"), ("fixed-ip", "192.0.2.1")];
    let answers = import(
        &to,
        &to_keys.own,
        "application/x-ndjson",
        ndjson_rows(&rows),
        "domain=go.acme.example",
    )
    .await;
    for answer in answers.iter().take(2) {
        assert_eq!(answer["status"], "created", "{answers:#?}");
    }
    assert_eq!(visit(&to, "go.acme.example", "fixed").await.0, 302);
    assert_eq!(visit(&to, "go.acme.example", "fixed-ip").await.0, 302);
    // More default hosts than an import takes is refused before any row is read.
    let many: Vec<String> = (0..17).map(|i| format!("h{i}.example")).collect();
    let response = to
        .client
        .post(format!(
            "{}/api/v1/links/import?default_hosts={}",
            to.base,
            many.join(",")
        ))
        .bearer_auth(&to_keys.own)
        .header("content-type", "application/x-ndjson")
        .body("{\"url\": \"https://acme.example/never\"}\n")
        .send()
        .await
        .expect("import");
    assert_eq!(response.status().as_u16(), 400);
    // A domain for every row with default hosts too is refused: the rows' domains would not
    // be read.
    let stored = count_links(&to, &to_keys.own).await;
    let response = to
        .client
        .post(format!(
            "{}/api/v1/links/import?domain=go.acme.example&default_hosts=sho.rt",
            to.base
        ))
        .bearer_auth(&to_keys.own)
        .header("content-type", "application/x-ndjson")
        .body("{\"url\": \"https://acme.example/never\"}\n")
        .send()
        .await
        .expect("import");
    assert_eq!(response.status().as_u16(), 400);
    let refusal: Value = response.json().await.expect("JSON");
    assert_eq!(refusal["error"], "invalid_query_parameter", "{refusal}");
    assert!(
        refusal["message"]
            .as_str()
            .is_some_and(|m| m.contains("one or the other")),
        "{refusal}"
    );
    assert_eq!(count_links(&to, &to_keys.own).await, stored);
}

crate::on_both_stores!(an_export_imports_back_onto_its_domains);

/// A peer's export with no domain column names each link's host in its short URL (a Bitly
/// `Bitlink`, Shlink's `shortUrl`): a host the importer's tenant has claimed puts the link
/// there, any other (`bit.ly`, a host not claimed here) leaves it on the default domain.
async fn a_peers_short_url_host_places_rows_on_claimed_domains(backend: Backend) {
    let stack = Stack::new(backend).await;
    let (node, keys) = node(&stack, "bitlinks").await;
    assert_eq!(claim(&node, &keys.own, "go.acme.example").await.0, 201);
    assert_eq!(claim(&node, &keys.other, "go.globex.example").await.0, 201);
    let csv = "Bitlink,Long URL,Title\n\
               go.acme.example/bitly-1,https://acme.example/1,One\n\
               https://bit.ly/bitly-2,https://acme.example/2,Two\n\
               go.globex.example/bitly-3,https://acme.example/3,Three\n";
    let answers = import(&node, &keys.own, "text/csv", csv.into(), "").await;
    // Each row's answer names its new short URL, on the domain it went to.
    for (code, host) in [
        ("bitly-1", "go.acme.example"),
        ("bitly-2", "sho.rt"),
        ("bitly-3", "sho.rt"),
    ] {
        let answer = row_of(&answers, code);
        assert_eq!(answer["status"], "created", "{answers:#?}");
        let short_url = answer["short_url"].as_str().unwrap_or_default();
        assert!(
            short_url.ends_with(&format!("://{host}/{code}")),
            "{code}: {answer}"
        );
    }
    assert_eq!(
        visit(&node, "go.acme.example", "bitly-1").await,
        (302, Some("https://acme.example/1".into()))
    );
    assert_eq!(visit(&node, "sho.rt", "bitly-1").await.0, 404);
    assert_eq!(visit(&node, "sho.rt", "bitly-2").await.0, 302);
    // Another tenant's domain is not the importer's: the default domain.
    assert_eq!(visit(&node, "sho.rt", "bitly-3").await.0, 302);
    assert_eq!(visit(&node, "go.globex.example", "bitly-3").await.0, 404);
    // A file with a domain column says where each row goes: a blank cell is the default
    // domain, whatever host the short URL is on.
    let csv = "short_url,url,domain\n\
               go.acme.example/blank-1,https://acme.example/blank,\n";
    let answers = import(&node, &keys.own, "text/csv", csv.into(), "").await;
    assert_eq!(
        row_of(&answers, "blank-1")["status"],
        "created",
        "{answers:#?}"
    );
    assert_eq!(visit(&node, "sho.rt", "blank-1").await.0, 302);
    assert_eq!(visit(&node, "go.acme.example", "blank-1").await.0, 404);
}

crate::on_both_stores!(a_peers_short_url_host_places_rows_on_claimed_domains);

/// The store failing while a row's host is looked up fails every row after it alike: the
/// import stops with the failure, having written nothing of the chunk, rather than answering
/// each row of the file with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_failure_looking_up_a_rows_host_stops_the_import() {
    let stack = Stack::new(Backend::Postgres).await;
    let (node, keys) = node(&stack, "hosts-down").await;
    let before = count_links(&node, &keys.own).await;
    let db = stack.db.as_ref().expect("a PostgreSQL stack");
    db.connect()
        .await
        .batch_execute("ALTER TABLE domains RENAME TO domains_away")
        .await
        .expect("rename");
    let csv = "Bitlink,Long URL\n\
               bit.ly/down-1,https://acme.example/1\n\
               bit.ly/down-2,https://acme.example/2\n";
    let answers = import(&node, &keys.own, "text/csv", csv.into(), "").await;
    db.connect()
        .await
        .batch_execute("ALTER TABLE domains_away RENAME TO domains")
        .await
        .expect("rename back");
    let summary = &answers.last().expect("a summary")["summary"];
    assert_eq!(summary["created"], 0, "{answers:#?}");
    assert!(summary["stopped"]["error"].is_string(), "{answers:#?}");
    assert_eq!(answers.len(), 1, "no row answered one by one: {answers:#?}");
    assert_eq!(count_links(&node, &keys.own).await, before);
}
