//! Redirect rules decided at the edge: per condition type, a table of requests and the target
//! each gets (first match wins, else the link's URL); the headers of an answer that varies by
//! visitor; rules edited and recorded; bad rules refused with their field named and nothing
//! written, over HTTP and gRPC; both stores.

use crate::analytics::mmdb;
use crate::helpers::{API_KEY, Backend, Node, Stack, authed};
use reqwest::StatusCode;
use serde_json::{Value, json};

pub(crate) const IPHONE: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1";
const IPAD: &str = "Mozilla/5.0 (iPad; CPU OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1";
pub(crate) const ANDROID: &str = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Mobile Safari/537.36";
pub(crate) const WINDOWS_CHROME: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36";
const WINDOWS_EDGE: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36 Edg/120.0.0.0";
const LINUX_FIREFOX: &str =
    "Mozilla/5.0 (X11; Linux x86_64; rv:121.0) Gecko/20100101 Firefox/121.0";
const MAC_SAFARI: &str = "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_2) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.2 Safari/605.1.15";

/// A node that finds the client address in `X-Forwarded-For` from loopback, knows two
/// countries (81.0.0.0/8 DE, 2.0.0.0/8 FR), and redirects with 301.
pub(crate) async fn node(stack: &Stack, name: &str) -> Node {
    let mut config = stack.config(name);
    know_countries(stack, &mut config);
    config.listeners.client_ip_header = Some("x-forwarded-for".into());
    config.listeners.trusted_proxies = vec!["127.0.0.0/8".parse().expect("net")];
    config.redirects.redirect_status = axum::http::StatusCode::MOVED_PERMANENTLY;
    Node::start(config).await
}

/// Gives `config` a GeoIP file of two countries (81.0.0.0/8 DE, 2.0.0.0/8 FR): a node needs
/// one to take a rule with a country condition.
pub(crate) fn know_countries(stack: &Stack, config: &mut shortener::Config) {
    let geoip = stack.dir.path().join("countries.mmdb");
    std::fs::write(
        &geoip,
        mmdb::country_db(&[([81, 0, 0, 0], 8, "DE"), ([2, 0, 0, 0], 8, "FR")]),
    )
    .expect("write GeoIP file");
    config.visits.geoip_db = Some(geoip);
}

/// Creates a link to `https://fallback.example/` with `rules`; its code.
async fn link_with(node: &Node, rules: Value) -> String {
    let (status, body) = node
        .create(json!({"url": "https://fallback.example/", "rules": rules}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    body["code"].as_str().expect("code").to_string()
}

/// A rule to `https://{name}.example/` on `conditions`.
fn rule(name: &str, conditions: Value) -> Value {
    json!({"url": format!("https://{name}.example/"), "conditions": conditions})
}

/// What a visit of `code` with `query` and `headers` answered: status, `Location`,
/// `Cache-Control`, `Vary`.
async fn visit(
    node: &Node,
    code: &str,
    query: &str,
    headers: &[(&str, &str)],
) -> (u16, String, Option<String>, Option<String>) {
    let mut request = node.client.get(format!("{}/{code}{query}", node.base));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.expect("visit");
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .map(|v| v.to_str().expect("ascii").to_string())
    };
    (
        response.status().as_u16(),
        header("location").unwrap_or_default(),
        header("cache-control"),
        header("vary"),
    )
}

/// Each case: query, headers, the host of the target it must get.
type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a str);

async fn table(node: &Node, rules: Value, cases: &[Case<'_>]) {
    let code = link_with(node, rules.clone()).await;
    for (query, headers, want) in cases {
        let (status, location, cache_control, _) = visit(node, &code, query, headers).await;
        assert_eq!(
            (status, location.as_str()),
            (302, format!("https://{want}.example/").as_str()),
            "{rules} {query} {headers:?}"
        );
        assert_eq!(cache_control.as_deref(), Some("private, no-store"));
    }
}

async fn each_condition_type_routes_its_table(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = node(&stack, "rules").await;
    let ua = |agent| [("user-agent", agent)];
    let (iphone, ipad, android) = (ua(IPHONE), ua(IPAD), ua(ANDROID));
    let (chrome, edge, firefox, safari) = (
        ua(WINDOWS_CHROME),
        ua(WINDOWS_EDGE),
        ua(LINUX_FIREFOX),
        ua(MAC_SAFARI),
    );
    #[rustfmt::skip]
    table(&node, json!([
        rule("phone", json!([{"type": "device", "value": "mobile"}])),
        rule("tablet", json!([{"type": "device", "value": "tablet"}])),
    ]), &[
        ("", &iphone, "phone"), ("", &android, "phone"), ("", &ipad, "tablet"),
        ("", &chrome, "fallback"), ("", &[], "fallback"),
    ]).await;
    #[rustfmt::skip]
    table(&node, json!([
        rule("ios", json!([{"type": "os", "value": "ios"}])),
        rule("android", json!([{"type": "os", "value": "Android"}])),
        rule("windows", json!([{"type": "os", "value": "windows"}])),
        rule("mac", json!([{"type": "os", "value": "macos"}])),
    ]), &[
        ("", &iphone, "ios"), ("", &ipad, "ios"), ("", &android, "android"),
        ("", &chrome, "windows"), ("", &safari, "mac"), ("", &firefox, "fallback"),
    ]).await;
    #[rustfmt::skip]
    table(&node, json!([
        rule("edge", json!([{"type": "browser", "value": "edge"}])),
        rule("firefox", json!([{"type": "browser", "value": "firefox"}])),
        rule("chrome", json!([{"type": "browser", "value": "chrome"}])),
        rule("safari", json!([{"type": "browser", "value": "safari"}])),
    ]), &[
        ("", &edge, "edge"), ("", &firefox, "firefox"), ("", &chrome, "chrome"),
        ("", &android, "chrome"), ("", &safari, "safari"), ("", &iphone, "safari"),
        ("", &[("user-agent", "curl/8.0")], "fallback"),
    ]).await;
    #[rustfmt::skip]
    table(&node, json!([
        rule("brazil", json!([{"type": "language", "value": "pt-BR"}])),
        rule("german", json!([{"type": "language", "value": "de"}])),
    ]), &[
        ("", &[("accept-language", "de-AT,de;q=0.9,en;q=0.8")], "german"),
        ("", &[("accept-language", "DE")], "german"),
        ("", &[("accept-language", "en, de;q=0.5")], "fallback"),
        ("", &[("accept-language", "en;q=0.4, de;q=0.6")], "german"),
        ("", &[("accept-language", "pt-BR")], "brazil"),
        ("", &[("accept-language", "pt-PT")], "fallback"),
        ("", &[("accept-language", "de;q=0")], "fallback"),
        ("", &[], "fallback"),
    ]).await;
    #[rustfmt::skip]
    table(&node, json!([
        rule("germany", json!([{"type": "country", "value": "de"}])),
        rule("france", json!([{"type": "country", "value": "FR"}])),
    ]), &[
        ("", &[("x-forwarded-for", "81.1.2.3")], "germany"),
        ("", &[("x-forwarded-for", "2.9.9.9")], "france"),
        ("", &[("x-forwarded-for", "192.0.2.1")], "fallback"),
    ]).await;
    #[rustfmt::skip]
    table(&node, json!([
        rule("one-of", json!([{"type": "query", "key": "src", "value": ["a", "b c"]}])),
        rule("equal", json!([{"type": "query", "key": "src", "value": "z"}])),
        rule("present", json!([{"type": "query", "key": "promo"}])),
    ]), &[
        ("?src=a", &[], "one-of"), ("?src=b%20c", &[], "one-of"), ("?x=1&src=b+c", &[], "one-of"),
        ("?src=z", &[], "equal"), ("?src=y&promo=", &[], "present"), ("?promo", &[], "present"),
        ("?src=y", &[], "fallback"), ("", &[], "fallback"),
    ]).await;
    #[rustfmt::skip]
    table(&node, json!([
        rule("future", json!([{"type": "after", "value": "2999-01-01T00:00:00Z"}])),
        rule("past", json!([{"type": "before", "value": "2000-01-01T00:00:00Z"}])),
        rule("now", json!([{"type": "after", "value": "2000-01-01T00:00:00Z"}, {"type": "before", "value": "2999-01-01T00:00:00+02:00"}])),
    ]), &[("", &[], "now")]).await;
    #[rustfmt::skip]
    table(&node, json!([
        rule("inside", json!([{"type": "cidr", "value": "10.0.0.0/8"}])),
        rule("host", json!([{"type": "cidr", "value": "192.0.2.7"}])),
    ]), &[
        ("", &[("x-forwarded-for", "10.200.3.4")], "inside"),
        ("", &[("x-forwarded-for", "192.0.2.7")], "host"),
        ("", &[("x-forwarded-for", "11.0.0.1")], "fallback"),
    ]).await;
    // All conditions of a rule must hold; the first rule that holds wins.
    #[rustfmt::skip]
    table(&node, json!([
        rule("german-phone", json!([{"type": "device", "value": "mobile"}, {"type": "country", "value": "DE"}])),
        rule("phone", json!([{"type": "device", "value": "mobile"}])),
        rule("never", json!([{"type": "device", "value": "mobile"}])),
    ]), &[
        ("", &[("user-agent", IPHONE), ("x-forwarded-for", "81.0.0.1")], "german-phone"),
        ("", &[("user-agent", IPHONE), ("x-forwarded-for", "2.0.0.1")], "phone"),
        ("", &[("user-agent", WINDOWS_CHROME), ("x-forwarded-for", "81.0.0.1")], "fallback"),
    ]).await;
}

crate::on_both_stores!(each_condition_type_routes_its_table);

/// An answer decided by rules is never permanent and kept by no cache (`no-store`, so it names
/// no `Vary`: no cache holds a variant to mix up); a plain link keeps the node's 301 and
/// cacheability.
async fn varying_answers_say_so_and_plain_ones_stay(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = node(&stack, "headers").await;
    let plain = link_with(&node, json!([])).await;
    let (status, location, cache_control, vary) = visit(&node, &plain, "", &[]).await;
    assert_eq!(
        (status, location.as_str(), cache_control, vary),
        (301, "https://fallback.example/", None, None)
    );
    let by_agent = link_with(
        &node,
        json!([
            rule("phone", json!([{"type": "device", "value": "mobile"}])),
            rule("german", json!([{"type": "language", "value": "de"}]))
        ]),
    )
    .await;
    let (status, _, cache_control, vary) = visit(&node, &by_agent, "", &[]).await;
    assert_eq!(
        (status, cache_control.as_deref(), vary.as_deref()),
        (302, Some("private, no-store"), None)
    );
    let by_query = link_with(
        &node,
        json!([rule("promo", json!([{"type": "query", "key": "promo"}]))]),
    )
    .await;
    let (status, location, cache_control, vary) = visit(&node, &by_query, "?promo=1", &[]).await;
    assert_eq!(
        (status, location.as_str(), cache_control.as_deref(), vary),
        (
            302,
            "https://promo.example/",
            Some("private, no-store"),
            None
        )
    );
}

crate::on_both_stores!(varying_answers_say_so_and_plain_ones_stay);

/// Rules are read back as given, replaced by a patch (recorded in the history with the old and
/// new rules) and removed by `null`; the edge follows each change at once.
async fn rules_are_edited_and_recorded(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = node(&stack, "edits").await;
    let first = json!([
        rule("phone", json!([{"type": "device", "value": "mobile"}])),
        rule(
            "promo",
            json!([{"type": "query", "key": "src", "value": ["a", "b"]}])
        )
    ]);
    let code = link_with(&node, first.clone()).await;
    let (status, read) = node.get(&code).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(read["rules"], first);
    assert_eq!(
        visit(&node, &code, "?src=a", &[]).await.1,
        "https://promo.example/"
    );
    let second = json!([rule("german", json!([{"type": "language", "value": "de"}]))]);
    let (status, patched) = node.patch(&code, json!({"rules": second})).await;
    assert_eq!(status, StatusCode::OK, "{patched}");
    assert_eq!(patched["rules"], second);
    assert_eq!(
        visit(&node, &code, "?src=a", &[]).await.1,
        "https://fallback.example/"
    );
    let german = [("accept-language", "de")];
    assert_eq!(
        visit(&node, &code, "", &german).await.1,
        "https://german.example/"
    );
    let (status, cleared) = node.patch(&code, json!({"rules": null})).await;
    assert_eq!((status, &cleared["rules"]), (StatusCode::OK, &json!([])));
    let (status, _, cache_control, _) = visit(&node, &code, "", &german).await;
    assert_eq!((status, cache_control), (301, None));
    let (_, history) = node.history(&code).await;
    let changes: Vec<&Value> = history["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|e| e["change"].get("rules"))
        .collect();
    assert_eq!(
        changes,
        [
            &json!({"old": first, "new": second}),
            &json!({"old": second, "new": []})
        ]
    );
}

crate::on_both_stores!(rules_are_edited_and_recorded);

/// Bad rules, over HTTP (create and patch) and gRPC: refused with the field named, nothing
/// written.
/// One `device` = `mobile` condition.
fn mobile() -> Value {
    json!([{"type": "device", "value": "mobile"}])
}

/// A split with these weights, each variant on a host of its own.
fn split(weights: &[i64]) -> Value {
    weights
        .iter()
        .enumerate()
        .map(|(i, w)| json!({"url": format!("https://v{i}.example/"), "weight": w}))
        .collect()
}

async fn bad_rules_are_refused_and_nothing_is_written(backend: Backend) {
    use proto::shortener::v1 as pb;
    let stack = Stack::new(backend).await;
    let node = node(&stack, "bad").await;
    let plain = link_with(&node, json!([])).await;
    let ok = |conditions: Value| json!([rule("a", conditions)]);
    #[rustfmt::skip]
    let table: Vec<(Value, &str, &str)> = vec![
        (ok(json!([{"type": "planet", "value": "mars"}])), "invalid_rules", "rules[0].conditions[0].type"),
        (ok(json!([{"type": "device", "value": "toaster"}])), "invalid_rules", "rules[0].conditions[0].value"),
        (ok(json!([{"type": "language", "value": "x"}])), "invalid_rules", "rules[0].conditions[0].value"),
        (ok(json!([{"type": "country", "value": "Germany"}])), "invalid_rules", "rules[0].conditions[0].value"),
        (ok(json!([{"type": "cidr", "value": "300.0.0.0/8"}])), "invalid_rules", "rules[0].conditions[0].value"),
        (ok(json!([{"type": "after", "value": "soon"}])), "invalid_rules", "rules[0].conditions[0].value"),
        (ok(json!([{"type": "query", "value": "a"}])), "invalid_rules", "rules[0].conditions[0].key"),
        (ok(json!([{"type": "query", "key": "k", "value": ["a\u{7}"]}])), "invalid_rules", "rules[0].conditions[0].value"),
        (ok(json!([])), "invalid_rules", "rules[0].conditions"),
        (ok(json!(vec![json!({"type": "device", "value": "mobile"}); 9])), "invalid_rules", "rules[0].conditions"),
        (json!(vec![rule("a", json!([{"type": "device", "value": "mobile"}])); 33]), "invalid_rules", "rules:"),
        (json!([{"url": "javascript:alert(1)", "conditions": [{"type": "device", "value": "mobile"}]}]), "invalid_rules", "rules[0].url"),
        (json!([{"url": "https://127.0.0.1/", "conditions": [{"type": "device", "value": "mobile"}]}]), "invalid_rules", "rules[0].url"),
        // A rule's split: a url or variants, exactly one; the variants checked as a link's.
        (json!([{"conditions": mobile()}]), "invalid_rules", "rules[0]:"),
        (json!([{"url": "https://a.example/", "variants": split(&[50, 50]), "conditions": mobile()}]), "invalid_rules", "rules[0]:"),
        (json!([{"variants": split(&[100]), "conditions": mobile()}]), "invalid_variants", "rules[0].variants:"),
        (json!([{"variants": split(&[50, 49]), "conditions": mobile()}]), "invalid_variants", "rules[0].variants:"),
        (json!([{"variants": split(&[0, 100]), "conditions": mobile()}]), "invalid_variants", "rules[0].variants[0].weight"),
        (json!([{"variants": [{"url": "https://a.example/", "weight": 50}, {"url": "ftp://b.example/", "weight": 50}], "conditions": mobile()}]), "invalid_variants", "rules[0].variants[1].url"),
    ];
    let before = node.list_all("", 1000).await.len();
    let mut grpc = node.links_client().await;
    for (rules, error, field) in &table {
        let (status, body) = node
            .create(json!({"url": "https://fallback.example/", "rules": rules}))
            .await;
        assert_eq!(
            (status.as_u16(), body["error"].as_str()),
            (422, Some(*error)),
            "{rules}: {body}"
        );
        let message = body["message"].as_str().expect("message");
        assert!(message.starts_with(field), "{rules}: {message}");
        let (status, body) = node.patch(&plain, json!({ "rules": rules })).await;
        assert_eq!(
            (status.as_u16(), body["error"].as_str()),
            (422, Some(*error)),
            "patch {rules}"
        );
        let input: Vec<shortener::domain::RuleInput> =
            serde_json::from_value(rules.clone()).expect("rule input");
        let messages = input.into_iter().map(grpc_rule).collect();
        let refused = grpc
            .create_link(authed(pb::CreateLinkRequest {
                url: "https://fallback.example/".into(),
                rules: messages,
                ..Default::default()
            }))
            .await
            .expect_err("refused over gRPC");
        assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{rules}");
        assert_eq!(
            refused
                .metadata()
                .get("error-code")
                .map(|v| v.to_str().expect("ascii")),
            Some(*error)
        );
    }
    assert_eq!(
        node.list_all("", 1000).await.len(),
        before,
        "a refused create wrote a link"
    );
    let (_, read) = node.get(&plain).await;
    assert_eq!(read["rules"], json!([]), "a refused patch changed the link");
    let _ = API_KEY;
}

/// A node without a GeoIP database refuses a country condition, which would never hold there:
/// on a create, a patch, over gRPC and in an import row, by the field and the setting, with
/// nothing written. Other conditions it takes.
async fn a_node_without_geoip_refuses_country_conditions(backend: Backend) {
    use proto::shortener::v1 as pb;
    let stack = Stack::new(backend).await;
    let node = Node::start(stack.config("no-geoip")).await;
    let plain = link_with(&node, json!([rule("phone", mobile())])).await;
    let rules = json!([
        rule("phone", mobile()),
        rule(
            "german-phone",
            json!([{"type": "device", "value": "mobile"}, {"type": "country", "value": "DE"}])
        ),
    ]);
    let refused = |body: &Value| {
        body["error"] == "invalid_rules"
            && body["message"].as_str().is_some_and(|m| {
                m.starts_with("rules[1].conditions[1].type: ") && m.contains("SHORTENER_GEOIP_DB")
            })
    };
    let before = node.list_all("", 1000).await.len();
    let (status, body) = node
        .create(json!({"url": "https://fallback.example/", "rules": rules}))
        .await;
    assert!(status == 422 && refused(&body), "{status}: {body}");
    let (status, body) = node.patch(&plain, json!({ "rules": rules })).await;
    assert!(status == 422 && refused(&body), "patch {status}: {body}");
    let input: Vec<shortener::domain::RuleInput> =
        serde_json::from_value(rules.clone()).expect("rule input");
    let status = node
        .links_client()
        .await
        .create_link(authed(pb::CreateLinkRequest {
            url: "https://fallback.example/".into(),
            rules: input.into_iter().map(grpc_rule).collect(),
            ..Default::default()
        }))
        .await
        .expect_err("refused over gRPC");
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert!(
        status.message().contains("SHORTENER_GEOIP_DB"),
        "{status:?}"
    );
    let row = json!({"url": "https://fallback.example/", "code": "geo-row", "rules": rules});
    let (status, lines) = node
        .import("application/x-ndjson", format!("{row}\n"), "")
        .await;
    assert_eq!(status, 200);
    assert!(refused(&lines[0]), "{lines:?}");
    assert_eq!(lines[0]["code"], "geo-row", "{lines:?}");
    assert_eq!(
        node.list_all("", 1000).await.len(),
        before,
        "a link was written"
    );
    let (_, read) = node.get(&plain).await;
    assert_eq!(read["rules"].as_array().map(Vec::len), Some(1), "{read}");
}

crate::on_both_stores!(a_node_without_geoip_refuses_country_conditions);

/// A rule as its gRPC message, from the JSON input.
fn grpc_rule(rule: shortener::domain::RuleInput) -> proto::shortener::v1::Rule {
    use shortener::domain::rules::ValueInput;
    proto::shortener::v1::Rule {
        url: rule.url,
        variants: rule
            .variants
            .into_iter()
            .map(|v| proto::shortener::v1::Variant {
                url: v.url,
                weight: v.weight,
            })
            .collect(),
        conditions: rule
            .conditions
            .into_iter()
            .map(|c| proto::shortener::v1::Condition {
                r#type: c.kind,
                key: c.key.unwrap_or_default(),
                values: match c.value {
                    None => Vec::new(),
                    Some(ValueInput::One(v)) => vec![v],
                    Some(ValueInput::Many(vs)) => vs,
                },
            })
            .collect(),
    }
}

crate::on_both_stores!(bad_rules_are_refused_and_nothing_is_written);

/// Rules edited on one node are followed by another within the change feed's bound, as target
/// edits are: the other node had the old rules cached.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_edited_on_one_node_reach_another() {
    let stack = Stack::new(Backend::Postgres).await;
    let (a, b) = (node(&stack, "a").await, node(&stack, "b").await);
    let german = [("accept-language", "de")];
    let code = link_with(
        &a,
        json!([rule("first", json!([{"type": "language", "value": "de"}]))]),
    )
    .await;
    assert_eq!(
        visit(&b, &code, "", &german).await.1,
        "https://first.example/"
    );
    let edited = std::time::Instant::now();
    let (status, body) = a
        .patch(
            &code,
            json!({"rules": [rule("second", json!([{"type": "language", "value": "de"}]))]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    crate::helpers::wait_for(
        "the other node to follow the edited rules",
        std::time::Duration::from_secs(2),
        async || visit(&b, &code, "", &german).await.1 == "https://second.example/",
    )
    .await;
    println!(
        "rules edit followed by the other node after {:?}",
        edited.elapsed()
    );
}

/// NDJSON import rows carry routing as a create does: imported rules route at once, and a row
/// with bad routing is refused on its own, the others imported.
async fn imported_rows_carry_their_routing(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = node(&stack, "import").await;
    let rows = [
        json!({"url": "https://fallback.example/", "code": "imp-routed",
               "rules": [rule("promo", json!([{"type": "query", "key": "promo"}]))],
               "utm_source": "import", "title": "Imported"}),
        json!({"url": "https://fallback.example/", "code": "imp-bad",
               "variants": [{"url": "https://a.example/", "weight": 70}]}),
        json!({"url": "https://fallback.example/", "variants": [
               {"url": "https://a.example/", "weight": 50}, {"url": "https://b.example/", "weight": 50}]}),
    ];
    let body: String = rows.iter().map(|r| format!("{r}\n")).collect();
    let (status, lines) = node.import("application/x-ndjson", body, "").await;
    assert_eq!(status, StatusCode::OK, "{lines:?}");
    let row = |n: u64| {
        lines
            .iter()
            .find(|l| l["row"] == n)
            .unwrap_or_else(|| panic!("no row {n}: {lines:?}"))
    };
    assert_eq!(row(1)["status"], "created");
    assert_eq!(row(2)["status"], "error");
    assert_eq!(row(2)["error"], "invalid_variants", "{}", row(2));
    assert_eq!(row(3)["status"], "created");
    let (status, location, _, _) = visit(&node, "imp-routed", "?promo", &[]).await;
    assert_eq!(
        (status, location.as_str()),
        (302, "https://promo.example/?utm_source=import")
    );
    let (_, read) = node.get("imp-routed").await;
    assert_eq!(read["title"], "Imported");
    let (status, _) = node.get("imp-bad").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "a refused row was written");
    let split = row(3)["code"].as_str().expect("code").to_string();
    let (_, read) = node.get(&split).await;
    assert_eq!(read["variants"][1]["weight"], 50);
}

crate::on_both_stores!(imported_rows_carry_their_routing);

/// With a permanent redirect status, a link that expires or has a visit limit is answered with
/// the temporary twin: a browser keeps a 301 for good, and would go on redirecting past the
/// link's end without asking (so without being counted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn links_that_end_are_never_answered_permanently() {
    let stack = Stack::new(Backend::Sqlite).await;
    let node = node(&stack, "ending").await;
    let later = (chrono::Utc::now() + chrono::Duration::days(1)).to_rfc3339();
    for (body, status) in [
        (json!({"url": "https://plain.example/"}), 301),
        (
            json!({"url": "https://limited.example/", "max_visits": 10}),
            302,
        ),
        (
            json!({"url": "https://expiring.example/", "expires_at": later}),
            302,
        ),
    ] {
        let (created, made) = node.create(body.clone()).await;
        assert_eq!(created, StatusCode::CREATED, "{made}");
        let code = made["code"].as_str().expect("code");
        let answer = visit(&node, code, "", &[("user-agent", crate::helpers::BROWSER)]).await;
        assert_eq!(answer.0, status, "{body}: {answer:?}");
    }
}
