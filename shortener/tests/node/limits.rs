//! Abuse limits: a 404 budget per client address and a create rate per API key.

use crate::helpers::{Backend, Node, Stack, authed, create};
use reqwest::StatusCode;
use tonic::Code;

/// A node behind a trusted proxy on 127.0.0.0/8 that names the client in `x-forwarded-for`,
/// whose clients may have `burst` 404s and one more a second.
fn behind_proxy(stack: &Stack, burst: u32) -> shortener::Config {
    let mut config = stack.config("edge");
    config.limits.not_found_rate = 1;
    config.limits.not_found_burst = burst;
    config.listeners.client_ip_header = Some("x-forwarded-for".into());
    config.listeners.trusted_proxies = vec!["127.0.0.0/8".parse().expect("net")];
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_404_scanner_gets_429_while_a_normal_client_keeps_getting_302() {
    let stack = Stack::new(Backend::Sqlite).await;
    let node = Node::start(behind_proxy(&stack, 10)).await;
    let code = node.create_url("https://example.com/real").await;
    let scan = |i: usize| {
        node.client
            .get(format!("{}/zz{i:05}", node.base))
            .header("x-forwarded-for", "203.0.113.66")
            .send()
    };
    let mut limited = 0;
    for i in 0..40 {
        let response = scan(i).await.expect("scan");
        match response.status() {
            StatusCode::NOT_FOUND => {}
            StatusCode::TOO_MANY_REQUESTS => {
                limited += 1;
                assert!(response.headers().contains_key("retry-after"));
            }
            other => panic!("scanner got {other}"),
        }
    }
    assert!(limited >= 25, "only {limited} of 40 scans were limited");
    // Another client behind the same proxy keeps getting redirects and honest 404s.
    for _ in 0..20 {
        let response = node
            .client
            .get(format!("{}/{code}", node.base))
            .header("x-forwarded-for", "198.51.100.7")
            .send()
            .await
            .expect("visit");
        assert_eq!(response.status(), StatusCode::FOUND);
    }
    let honest = node
        .client
        .get(format!("{}/zz99999", node.base))
        .header("x-forwarded-for", "198.51.100.7")
        .send()
        .await
        .expect("visit");
    assert_eq!(honest.status(), StatusCode::NOT_FOUND);
    let text = node.metrics().await;
    let refused = r#"shortener_rate_limited_total{limit="not_found"}"#;
    assert!(crate::helpers::metric(&text, refused) >= 1.0, "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_past_its_404_budget_is_refused_before_any_lookup() {
    let stack = Stack::new(Backend::Sqlite).await;
    let node = Node::start(behind_proxy(&stack, 5)).await;
    let code = node.create_url("https://example.com/real").await;
    let from = |client: &'static str, method: reqwest::Method, path: String| {
        node.client
            .request(method, format!("{}/{path}", node.base))
            .header("x-forwarded-for", client)
            .send()
    };
    let scanner = "203.0.113.66";
    for i in 0..5 {
        let answer = from(scanner, reqwest::Method::GET, format!("zz{i:05}"))
            .await
            .expect("scan");
        assert_eq!(answer.status(), StatusCode::NOT_FOUND, "within its burst");
    }
    let answer = from(scanner, reqwest::Method::GET, "zz00005".into())
        .await
        .expect("scan");
    assert_eq!(answer.status(), StatusCode::TOO_MANY_REQUESTS, "past it");

    // For the Retry-After it was told, every request of the scanner is refused without a lookup:
    // unknown codes, its real link (the accept loop's direct path), a percent-encoded code
    // (the router's path) and a password form's POST.
    let seen = node.lookups_seen();
    let mut requests = vec![
        (reqwest::Method::GET, code.clone()),
        (reqwest::Method::HEAD, code.clone()),
        (reqwest::Method::GET, "%7A%7A00006".to_string()),
        (reqwest::Method::POST, "zz00007".to_string()),
    ];
    requests.extend((10..20).map(|i| (reqwest::Method::GET, format!("zz{i:05}"))));
    // All at once, well inside the second it was told to wait.
    let answers = futures::future::join_all(
        requests
            .iter()
            .map(|(method, path)| from(scanner, method.clone(), path.clone())),
    )
    .await;
    for ((method, path), answer) in requests.iter().zip(answers) {
        let answer = answer.expect("refused request");
        assert_eq!(
            answer.status(),
            StatusCode::TOO_MANY_REQUESTS,
            "{method} /{path}"
        );
        assert!(answer.headers().contains_key("retry-after"));
    }
    assert_eq!(
        node.lookups_seen(),
        seen,
        "a refused client caused a cache or store lookup"
    );
    // Another client is not refused.
    let other = from("198.51.100.7", reqwest::Method::GET, code.clone())
        .await
        .expect("visit");
    assert_eq!(other.status(), StatusCode::FOUND);
    // Once that second is over, the scanner's real link answers again.
    crate::helpers::wait_for(
        "the scanner's Retry-After to pass",
        std::time::Duration::from_secs(5),
        async || {
            from(scanner, reqwest::Method::GET, code.clone())
                .await
                .is_ok_and(|answer| answer.status() == StatusCode::FOUND)
        },
    )
    .await;
}

/// Past its wait, a client that spent its 404 budget pays a token before each lookup: requests
/// that arrive together as the wait ends (a scanner on many connections) are looked up only as
/// far as its tokens go, and the others are refused before any lookup, not after one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_its_wait_a_scanner_is_looked_up_only_as_far_as_its_tokens_go() {
    // On PostgreSQL, whose reads take long enough for the requests beside the first to reach
    // the door before its miss is counted.
    let stack = Stack::new(Backend::Postgres).await;
    let node = Node::start(behind_proxy(&stack, 5)).await;
    let code = node.create_url("https://example.com/real").await;
    let from = |path: String| {
        node.client
            .get(format!("{}/{path}", node.base))
            .header("x-forwarded-for", "203.0.113.66")
            .send()
    };
    // Aliases no link has: each is read from the store.
    for i in 0..6 {
        from(format!("q-a{i:07}")).await.expect("scan");
    }
    assert_eq!(
        from("q-a0000006".into()).await.expect("scan").status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    // Forty connections, each refused while the client waits (and kept open for the burst).
    for answer in futures::future::join_all((0..40).map(|i| from(format!("q-c{i:07}")))).await {
        assert_eq!(
            answer.expect("scan").status(),
            StatusCode::TOO_MANY_REQUESTS
        );
    }
    crate::helpers::wait_for(
        "the scanner's Retry-After to pass",
        std::time::Duration::from_secs(5),
        async || {
            from(code.clone())
                .await
                .is_ok_and(|answer| answer.status() == StatusCode::FOUND)
        },
    )
    .await;
    let reads = || {
        node.app
            .resolver
            .counters()
            .cache_misses
            .load(std::sync::atomic::Ordering::Relaxed)
    };
    let before = reads();
    let answers = futures::future::join_all((0..40).map(|i| from(format!("q-b{i:07}")))).await;
    let read = reads() - before;
    let mut refused = 0;
    for answer in answers {
        match answer.expect("scan").status() {
            StatusCode::NOT_FOUND => {}
            StatusCode::TOO_MANY_REQUESTS => refused += 1,
            other => panic!("scanner got {other}"),
        }
    }
    // A token held from its link's visit, if that paid one, and at most a few more from the
    // seconds the test took: nowhere near the 40 requests.
    assert!(read <= 5, "{read} of 40 requests were read from the store");
    assert!(40 - refused <= read, "every 404 was looked up");
    assert!(refused >= 35, "only {refused} of 40 were refused");
    // Refusals at the door do not start a new wait: its link still answers (many people
    // behind one address are not locked out by the requests of others).
    assert_eq!(
        from(code.clone()).await.expect("visit").status(),
        StatusCode::FOUND
    );
}

/// A scanner rotating through the /64s of one IPv6 allocation gets no more 404s than the
/// network's budget (sixteen clients' worth): past it, a /64 it never used is refused before
/// any lookup, while another network's client is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_64s_of_one_ipv6_network_share_its_404_budget() {
    let stack = Stack::new(Backend::Sqlite).await;
    let node = Node::start(behind_proxy(&stack, 2)).await;
    let from = |client: String, path: String| {
        node.client
            .get(format!("{}/{path}", node.base))
            .header("x-forwarded-for", client)
            .send()
    };
    // The first /64 of a network (whose key is the network's address) spends its own budget,
    // and another /64 of that network is still answered.
    let first: Vec<StatusCode> = futures::future::join_all((0..3).map(|i| async move {
        from("2001:db8:9::1".into(), format!("q-z{i:07}"))
            .await
            .expect("scan")
            .status()
    }))
    .await;
    assert!(
        first.contains(&StatusCode::TOO_MANY_REQUESTS),
        "the first /64 spent its budget: {first:?}"
    );
    let beside = from("2001:db8:9:5::1".into(), "q-z0000009".into())
        .await
        .expect("scan");
    assert_eq!(
        beside.status(),
        StatusCode::NOT_FOUND,
        "its neighbour is answered"
    );
    let mut answered = 0;
    for sub in 0..60 {
        let answer = from(format!("2001:db8:7:{sub:x}::1"), format!("q-a{sub:07}"))
            .await
            .expect("scan");
        match answer.status() {
            StatusCode::NOT_FOUND => answered += 1,
            StatusCode::TOO_MANY_REQUESTS => {}
            other => panic!("scanner got {other}"),
        }
    }
    // Two each for sixteen clients, and a token or two the network's rate adds meanwhile.
    assert!(
        (32..40).contains(&answered),
        "{answered} of 60 unknown codes were answered 404"
    );
    let seen = node.lookups_seen();
    let fresh = from("2001:db8:7:ffff::1".into(), "q-b0000000".into())
        .await
        .expect("scan");
    assert_eq!(fresh.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(node.lookups_seen(), seen, "refused before any lookup");
    let other = from("2001:db8:8::1".into(), "q-b0000001".into())
        .await
        .expect("visit");
    assert_eq!(other.status(), StatusCode::NOT_FOUND, "another network");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creates_beyond_the_per_key_rate_get_429() {
    let stack = Stack::new(Backend::Sqlite).await;
    let mut config = stack.config("limited");
    config.limits.create_rate = 1;
    config.limits.create_burst = 5;
    config.limits.batch_limit = 5;
    let node = Node::start(config).await;
    let mut statuses = Vec::new();
    for i in 0..10 {
        statuses.push(
            node.create(serde_json::json!({ "url": format!("https://example.com/{i}") }))
                .await,
        );
    }
    let limited: Vec<_> = statuses
        .iter()
        .filter(|(s, _)| *s == StatusCode::TOO_MANY_REQUESTS)
        .collect();
    assert!(limited.len() >= 4, "{statuses:?}");
    assert_eq!(limited[0].1["error"], "rate_limited");
    let mut client = node.links_client().await;
    let refused = client
        .create_link(authed(create("https://example.com/g")))
        .await
        .expect_err("limited");
    assert_eq!(refused.code(), Code::ResourceExhausted);
    assert!(refused.metadata().contains_key("retry-after"));
}

/// Behind a trusted proxy a scanner cannot pick its 404 budget's key: entries it adds to the
/// left of the chain, with ports or as garbage, change nothing, it cannot spend a victim's
/// budget, and rotating IPv6 addresses within one /64 is one client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scanner_behind_a_trusted_proxy_cannot_choose_or_spend_anothers_budget() {
    let stack = Stack::new(Backend::Sqlite).await;
    let mut config = stack.config("proxied");
    config.limits.not_found_rate = 1;
    config.limits.not_found_burst = 10;
    config.listeners.client_ip_header = Some("x-forwarded-for".into());
    config.listeners.trusted_proxies = vec!["127.0.0.0/8".parse().expect("net")];
    let node = Node::start(config).await;
    let probe = |i: usize, chain: String| {
        node.client
            .get(format!("{}/zz{i:05}", node.base))
            .header("x-forwarded-for", chain)
            .send()
    };
    let mut limited = 0;
    for i in 0..40 {
        // A fresh spoofed entry each time, then the address the proxy saw, with a port.
        let chain = format!(
            "198.51.{}.{}, unknown, 203.0.113.66:{}",
            i / 250,
            i % 250,
            40000 + i
        );
        if probe(i, chain).await.expect("probe").status() == StatusCode::TOO_MANY_REQUESTS {
            limited += 1;
        }
    }
    assert!(
        limited >= 25,
        "only {limited} of 40 spoofed probes were limited"
    );
    // The victim named in the spoofed entries keeps its own budget.
    let victim = probe(99_999, "198.51.0.1".into()).await.expect("probe");
    assert_eq!(victim.status(), StatusCode::NOT_FOUND);
    // Rotating through one /64 is one client.
    let mut limited = 0;
    for i in 0..40 {
        let chain = format!("2001:db8:aa:bb::{:x}", i + 1);
        if probe(50_000 + i, chain).await.expect("probe").status() == StatusCode::TOO_MANY_REQUESTS
        {
            limited += 1;
        }
    }
    assert!(
        limited >= 25,
        "only {limited} of 40 rotating IPv6 probes were limited"
    );
}

/// API reads have a per-key budget of their own: past it, gets answer 429 on both transports
/// while creates (another bucket) still work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_beyond_the_per_key_rate_get_429() {
    let stack = Stack::new(Backend::Sqlite).await;
    let mut config = stack.config("read-limited");
    config.limits.read_rate = 1;
    config.limits.read_burst = 5;
    let node = Node::start(config).await;
    let code = node.create_url("https://example.com/read-me").await;
    let mut statuses = Vec::new();
    for _ in 0..10 {
        statuses.push(node.get(&code).await.0);
    }
    let limited = statuses
        .iter()
        .filter(|s| **s == StatusCode::TOO_MANY_REQUESTS)
        .count();
    assert!(limited >= 4, "{statuses:?}");
    let mut client = node.links_client().await;
    let refused = client
        .get_link(authed(proto::shortener::v1::GetLinkRequest {
            code,
            ..Default::default()
        }))
        .await
        .expect_err("limited");
    assert_eq!(refused.code(), Code::ResourceExhausted);
    // A list is charged to the same budget, and every refusal is counted under it.
    let listed = node
        .client
        .get(format!("{}/api/v1/links", node.base))
        .bearer_auth(crate::helpers::API_KEY)
        .send()
        .await
        .expect("list");
    assert_eq!(listed.status(), StatusCode::TOO_MANY_REQUESTS);
    let text = node.metrics().await;
    let read = "shortener_rate_limited_total{limit=\"read\"} ";
    assert_eq!(
        crate::helpers::metric(&text, read),
        (limited + 2) as f64,
        "{text}"
    );
    let create = "shortener_rate_limited_total{limit=\"create\"} ";
    assert_eq!(crate::helpers::metric(&text, create), 0.0, "{text}");
    assert_eq!(
        node.create(serde_json::json!({ "url": "https://example.com/w" }))
            .await
            .0,
        StatusCode::CREATED
    );
}
