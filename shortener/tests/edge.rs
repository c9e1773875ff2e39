//! The node for internal services and the open internet: gRPC API, cache invalidation across
//! nodes, click analytics, abuse limits and metrics.

mod common;

use common::{API_KEY, Backend, Cluster, Node};
use proto::shortener::v1 as pb;
use reqwest::StatusCode;
use std::time::Duration;
use tonic::Code;

const BROWSER: &str = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36";

fn authed<T>(message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.metadata_mut().insert(
        "authorization",
        format!("Bearer {API_KEY}").parse().expect("ascii"),
    );
    request
}

fn create(url: &str) -> pb::CreateLinkRequest {
    pb::CreateLinkRequest {
        url: url.to_string(),
        ..Default::default()
    }
}

async fn grpc_create_get_delete_and_batch(backend: Backend) {
    let cluster = Cluster::new(backend).await;
    let node = cluster.node("a").await;
    let mut client = node.links_client().await;

    let link = client
        .create_link(authed(create("https://example.com/grpc")))
        .await
        .expect("create")
        .into_inner();
    assert_eq!(link.code.len(), 7);
    assert_eq!(link.url, "https://example.com/grpc");
    assert_eq!(link.short_url, format!("https://sho.rt/{}", link.code));
    assert_eq!(
        node.visit(&link.code).await.headers()["location"],
        "https://example.com/grpc"
    );

    let got = client
        .get_link(authed(pb::GetLinkRequest {
            code: link.code.clone(),
        }))
        .await
        .expect("get")
        .into_inner();
    assert_eq!(got.code, link.code);
    assert!(got.deleted_at.is_none());

    // Alias, dedup, private, expiry and idempotency behave as over HTTP.
    let alias = pb::CreateLinkRequest {
        alias: Some("grpc-alias".into()),
        ..create("https://example.com/a")
    };
    assert_eq!(
        client
            .create_link(authed(alias.clone()))
            .await
            .expect("alias")
            .into_inner()
            .code,
        "grpc-alias"
    );
    let taken = client.create_link(authed(alias)).await.expect_err("taken");
    assert_eq!(taken.code(), Code::AlreadyExists);
    let dedup = pb::CreateLinkRequest {
        dedup: true,
        ..create("https://example.com/d")
    };
    let d1 = client
        .create_link(authed(dedup.clone()))
        .await
        .expect("dedup")
        .into_inner();
    let d2 = client
        .create_link(authed(dedup))
        .await
        .expect("dedup")
        .into_inner();
    assert_eq!(d1.code, d2.code);
    let private = pb::CreateLinkRequest {
        private: true,
        ..create("https://example.com/p")
    };
    assert_eq!(
        client
            .create_link(authed(private))
            .await
            .expect("private")
            .into_inner()
            .code
            .len(),
        16
    );
    let idem = pb::CreateLinkRequest {
        idempotency_key: Some("k-1".into()),
        ..create("https://example.com/i")
    };
    let i1 = client
        .create_link(authed(idem.clone()))
        .await
        .expect("idem")
        .into_inner();
    let i2 = client
        .create_link(authed(idem))
        .await
        .expect("idem")
        .into_inner();
    assert_eq!(i1.code, i2.code);
    let past = pb::CreateLinkRequest {
        expires_at: Some(prost_types::Timestamp {
            seconds: 1,
            nanos: 0,
        }),
        ..create("https://example.com/e")
    };
    assert_eq!(
        client
            .create_link(authed(past))
            .await
            .expect_err("past")
            .code(),
        Code::InvalidArgument
    );

    // Errors follow gRPC conventions and carry the machine code.
    let bad = client
        .create_link(authed(create("javascript:alert(1)")))
        .await
        .expect_err("bad url");
    assert_eq!(bad.code(), Code::InvalidArgument);
    assert_eq!(
        bad.metadata()
            .get("error-code")
            .and_then(|v| v.to_str().ok()),
        Some("invalid_url")
    );
    let unauth = client
        .create_link(tonic::Request::new(create("https://example.com/")))
        .await
        .expect_err("no key");
    assert_eq!(unauth.code(), Code::Unauthenticated);
    let missing = client
        .get_link(authed(pb::GetLinkRequest {
            code: "zzzzzzz".into(),
        }))
        .await
        .expect_err("missing");
    assert_eq!(missing.code(), Code::NotFound);

    client
        .delete_link(authed(pb::DeleteLinkRequest {
            code: link.code.clone(),
        }))
        .await
        .expect("delete");
    assert_eq!(node.visit(&link.code).await.status(), StatusCode::GONE);
    let deleted = client
        .get_link(authed(pb::GetLinkRequest {
            code: link.code.clone(),
        }))
        .await
        .expect("get")
        .into_inner();
    assert!(deleted.deleted_at.is_some());

    // A batch: one bad item does not fail the others; results keep request order.
    let items = vec![
        create("https://example.com/b/1"),
        create("ftp://example.com/nope"),
        pb::CreateLinkRequest {
            alias: Some("grpc-alias".into()),
            ..create("https://example.com/b/taken")
        },
        create("https://example.com/b/4"),
    ];
    let results = client
        .batch_create_links(authed(pb::BatchCreateLinksRequest { items }))
        .await
        .expect("batch")
        .into_inner()
        .results;
    assert_eq!(results.len(), 4);
    let outcome = |i: usize| results[i].outcome.clone().expect("outcome");
    use pb::batch_create_result::Outcome;
    assert!(matches!(outcome(0), Outcome::Link(l) if l.url == "https://example.com/b/1"));
    assert!(
        matches!(outcome(1), Outcome::Error(e) if e.status == Code::InvalidArgument as i32 && e.error == "invalid_url")
    );
    assert!(
        matches!(outcome(2), Outcome::Error(e) if e.status == Code::AlreadyExists as i32 && e.error == "alias_taken")
    );
    let Outcome::Link(fourth) = outcome(3) else {
        panic!("item 4 failed: {:?}", outcome(3))
    };
    assert_eq!(
        node.visit(&fourth.code).await.headers()["location"],
        "https://example.com/b/4"
    );
    let empty = client
        .batch_create_links(authed(pb::BatchCreateLinksRequest { items: vec![] }))
        .await
        .expect_err("empty");
    assert_eq!(empty.code(), Code::InvalidArgument);
    let too_many = vec![create("https://example.com/x"); 1001];
    let over = client
        .batch_create_links(authed(pb::BatchCreateLinksRequest { items: too_many }))
        .await
        .expect_err("over");
    assert_eq!(over.code(), Code::InvalidArgument);

    // Health and reflection on the same port.
    let channel = tonic::transport::Channel::from_shared(node.grpc.clone())
        .expect("uri")
        .connect()
        .await
        .expect("connect");
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel);
    let status = health
        .check(tonic_health::pb::HealthCheckRequest {
            service: "shortener.v1.Links".into(),
        })
        .await
        .expect("health")
        .into_inner()
        .status;
    assert_eq!(
        status,
        tonic_health::pb::health_check_response::ServingStatus::Serving as i32
    );
}
on_both_stores!(grpc_create_get_delete_and_batch);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_delete_on_one_node_stops_redirects_on_the_other_within_the_bound() {
    let cluster = Cluster::new(Backend::Postgres).await;
    let a = cluster.node("node-a").await;
    let b = cluster.node("node-b").await;
    let code = a.create_url("https://example.com/cached").await;
    // Both nodes cache the link.
    for node in [&a, &b] {
        for _ in 0..3 {
            assert_eq!(node.visit(&code).await.status(), StatusCode::FOUND);
        }
    }
    let hits_before = b
        .service
        .counters
        .cache_hits
        .load(std::sync::atomic::Ordering::Relaxed);
    assert!(hits_before >= 2, "node b did not serve from its cache");
    assert_eq!(a.delete(&code).await, StatusCode::NO_CONTENT);
    // The cache TTL in the test config is 60 s; the notification must beat it by far.
    let started = std::time::Instant::now();
    let gone = testkit::wait_until(Duration::from_secs(5), || async {
        b.visit(&code).await.status() == StatusCode::GONE
    })
    .await;
    assert!(gone, "node b kept redirecting a deleted link");
    assert!(started.elapsed() < Duration::from_secs(5));
}

async fn clicks_are_counted_apart_for_people_head_requests_and_bots(backend: Backend) {
    let cluster = Cluster::new(backend).await;
    let node = cluster.node("a").await;
    let code = node.create_url("https://example.com/clicks").await;
    let url = format!("{}/{code}", node.base);
    let human = (0..25).map(|_| node.client.get(&url).header("user-agent", BROWSER).send());
    let head = (0..7).map(|_| node.client.head(&url).header("user-agent", BROWSER).send());
    let bots = (0..4).map(|_| {
        node.client
            .get(&url)
            .header(
                "user-agent",
                "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)",
            )
            .send()
    });
    for response in futures::future::join_all(human.chain(head).chain(bots)).await {
        assert_eq!(response.expect("visit").status(), StatusCode::FOUND);
    }
    let counted = testkit::wait_until(Duration::from_secs(10), || async {
        let (_, link) = node.get(&code).await;
        link["clicks"] == serde_json::json!({ "human": 25, "head": 7, "bot": 4 })
    })
    .await;
    let (_, link) = node.get(&code).await;
    assert!(
        counted,
        "click counts never reached 25/7/4: {}",
        link["clicks"]
    );
    let mut client = node.links_client().await;
    let clicks = client
        .get_link(authed(pb::GetLinkRequest { code }))
        .await
        .expect("get")
        .into_inner()
        .clicks
        .expect("clicks");
    assert_eq!((clicks.human, clicks.head, clicks.bot), (25, 7, 4));
}
on_both_stores!(clicks_are_counted_apart_for_people_head_requests_and_bots);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_404_scanner_gets_429_while_a_normal_client_keeps_getting_302() {
    let cluster = Cluster::new(Backend::Sqlite).await;
    let mut config = cluster.config("edge");
    config.not_found_rate = 1;
    config.not_found_burst = 10;
    config.client_ip_header = Some("x-forwarded-for".into());
    config.trusted_proxies = vec!["127.0.0.0/8".parse().expect("net")];
    let node = Node::start(config).await;
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
    assert!(
        node.metrics()
            .await
            .contains("shortener_rate_limited_total{limit=\"not_found\"}")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creates_beyond_the_per_key_rate_get_429() {
    let cluster = Cluster::new(Backend::Sqlite).await;
    let mut config = cluster.config("limited");
    config.create_rate = 1;
    config.create_burst = 5;
    config.batch_limit = 5;
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

/// An embedded node whose header read timeout is one second (the cluster must outlive it).
async fn node_with_a_one_second_header_timeout(name: &str) -> (Cluster, Node) {
    let cluster = Cluster::new(Backend::Sqlite).await;
    let mut config = cluster.config(name);
    config.header_read_timeout = 1;
    let node = Node::start(config).await;
    (cluster, node)
}

/// A raw TCP connection to `node`'s public HTTP port.
async fn connect(node: &Node) -> tokio::net::TcpStream {
    let addr = node.base.trim_start_matches("http://");
    tokio::net::TcpStream::connect(addr).await.expect("connect")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_finishes_its_headers_is_disconnected() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (_cluster, node) = node_with_a_one_second_header_timeout("slow").await;
    let mut stream = connect(&node).await;
    stream
        .write_all(b"GET /abc HTTP/1.1\r\nHost: x\r\n")
        .await
        .expect("write");
    let mut buf = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut buf)).await;
    assert!(
        read.is_ok(),
        "the server kept a slow client's connection open past the timeout"
    );
}

/// Reads one HTTP/1.1 response with a `content-length` body from `stream`; returns its status
/// and body, or `None` if the server closed the connection first.
async fn read_response(stream: &mut tokio::net::TcpStream) -> Option<(u16, String)> {
    use tokio::io::AsyncReadExt;
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = bytes.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&bytes[..end]).to_ascii_lowercase();
            let status = head.get(9..12)?.parse().ok()?;
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse().expect("content-length"));
            while bytes.len() < end + 4 + length {
                let n = stream.read(&mut chunk).await.ok()?;
                if n == 0 {
                    return None;
                }
                bytes.extend_from_slice(&chunk[..n]);
            }
            let body = String::from_utf8_lossy(&bytes[end + 4..end + 4 + length]).into_owned();
            return Some((status, body));
        }
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        bytes.extend_from_slice(&chunk[..n]);
    }
}

/// The header read timeout bounds how long a connection waits for a request head, not how long
/// it lives: a keep-alive client that keeps sending requests stays connected through many
/// timeouts, and once it falls silent its connection is closed within two of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_keep_alive_connection_outlives_the_header_timeout_and_an_idle_one_does_not() {
    use tokio::io::AsyncWriteExt;
    let (_cluster, node) = node_with_a_one_second_header_timeout("keepalive").await;
    let code = node.create_url("https://example.com/keep-alive").await;
    let mut stream = connect(&node).await;
    let request = format!("GET /{code} HTTP/1.1\r\nHost: x\r\n\r\n");
    // Eight requests 400 ms apart: 3.2 s on one connection, over three header timeouts.
    for i in 0..8 {
        stream.write_all(request.as_bytes()).await.expect("write");
        let answer = read_response(&mut stream).await;
        assert_eq!(
            answer.map(|(status, _)| status),
            Some(302),
            "request {i} on a busy keep-alive connection was not answered"
        );
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
    let started = std::time::Instant::now();
    let closed = tokio::time::timeout(Duration::from_secs(5), read_response(&mut stream)).await;
    assert_eq!(
        closed,
        Ok(None),
        "an idle keep-alive connection was not closed"
    );
    assert!(
        started.elapsed() >= Duration::from_millis(500),
        "an idle connection was closed {:?} after its last response, before the timeout",
        started.elapsed()
    );
}

/// A request whose body is still arriving is being answered, not waiting for a head: the header
/// read timeout does not cut it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slowly_sent_body_is_not_cut_by_the_header_timeout() {
    use tokio::io::AsyncWriteExt;
    let (_cluster, node) = node_with_a_one_second_header_timeout("slow-body").await;
    let mut stream = connect(&node).await;
    let body = br#"{"url":"https://example.com/slow-body"}"#;
    let head = format!(
        "POST /api/v1/links HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {API_KEY}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.expect("head");
    // The body in four parts over 2.4 s: more than two header timeouts.
    for part in body.chunks(body.len().div_ceil(4)) {
        tokio::time::sleep(Duration::from_millis(600)).await;
        stream.write_all(part).await.expect("body");
    }
    let (status, answer) = tokio::time::timeout(Duration::from_secs(5), read_response(&mut stream))
        .await
        .expect("an answer in time")
        .expect("the connection was closed while the body was arriving");
    assert_eq!(status, 201, "{answer}");
    assert!(answer.contains("https://example.com/slow-body"), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_present_and_move() {
    let cluster = Cluster::new(Backend::Sqlite).await;
    let node = cluster.node("metrics").await;
    let before = node.metrics().await;
    for name in [
        "shortener_ids_in_hand",
        "shortener_runway_seconds",
        "shortener_leases_total",
        "shortener_generated_code_conflicts_total 0",
        "shortener_code_space_utilisation",
        "shortener_cache_hits_total",
        "shortener_clicks_flushed_total",
    ] {
        assert!(before.contains(name), "{name} missing from:\n{before}");
    }
    let code = node.create_url("https://example.com/m").await;
    for _ in 0..3 {
        node.client
            .get(format!("{}/{code}", node.base))
            .header("user-agent", BROWSER)
            .send()
            .await
            .expect("visit");
    }
    node.visit("zzzzzzz").await;
    let moved = testkit::wait_until(Duration::from_secs(5), || async {
        let after = node.metrics().await;
        after.contains("shortener_creates_total{outcome=\"created\"} 1")
            && after.contains("shortener_redirects_total{status=\"302\"} 3")
            && after.contains("shortener_redirects_total{status=\"404\"} 1")
            && after.contains("shortener_create_duration_seconds_count{outcome=\"created\"} 1")
            && after.contains("shortener_cache_hits_total 2")
            && after.contains("shortener_clicks_flushed_total 3")
    })
    .await;
    assert!(
        moved,
        "metrics did not move as expected:\n{}",
        node.metrics().await
    );
}

/// Plain `GET|HEAD /{code}` requests are answered by the accept loop directly; everything else
/// goes through the router. Both must agree on every path a client can send.
async fn the_direct_redirect_path_and_the_router_agree(backend: Backend) {
    let cluster = Cluster::new(backend).await;
    let node = cluster.node("a").await;
    let target = "https://example.com/direct-and-routed";
    let (status, _) = node
        .create(serde_json::json!({ "url": target, "alias": "pct-test_1" }))
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let get = |path: &str| node.client.get(format!("{}{path}", node.base)).send();
    for path in [
        "/pct-test_1",
        "/pct%2Dtest_1",
        "/%70ct-test_1",
        "/pct-test_1?utm_source=x",
    ] {
        let response = get(path).await.expect("visit");
        assert_eq!(response.status(), StatusCode::FOUND, "{path}");
        assert_eq!(response.headers()["location"], target, "{path}");
    }
    let head = node
        .client
        .head(format!("{}/pct-test_1", node.base))
        .send()
        .await
        .expect("head");
    assert_eq!(head.status(), StatusCode::FOUND);
    assert_eq!(head.headers()["location"], target);
    for (path, status) in [
        ("/pct-test_1/", StatusCode::NOT_FOUND),
        ("/nosuch-1", StatusCode::NOT_FOUND),
        ("/%ZZ", StatusCode::NOT_FOUND),
        ("/", StatusCode::NOT_FOUND),
        ("/api", StatusCode::NOT_FOUND),
    ] {
        let response = get(path).await.expect("visit");
        assert_eq!(response.status(), status, "{path}");
        assert_eq!(response.headers()["cache-control"], "no-store", "{path}");
    }
    let post = node
        .client
        .post(format!("{}/pct-test_1", node.base))
        .send()
        .await
        .expect("post");
    assert_eq!(post.status(), StatusCode::METHOD_NOT_ALLOWED);
}
on_both_stores!(the_direct_redirect_path_and_the_router_agree);

/// A redirect answered from the cache (at once, while the server reads the request) is the
/// answer the store gave on the first visit: the same status, headers and body for a live
/// link, a `HEAD`, a deleted link and an unknown code.
async fn a_cached_answer_is_the_answer_the_store_gave(backend: Backend) {
    let cluster = Cluster::new(backend).await;
    let node = cluster.node("a").await;
    let live = node.create_url("https://example.com/cached-answer").await;
    let deleted = node.create_url("https://example.com/deleted-answer").await;
    assert_eq!(node.delete(&deleted).await, StatusCode::NO_CONTENT);
    let hits = || {
        node.service
            .counters
            .cache_hits
            .load(std::sync::atomic::Ordering::Relaxed)
    };
    for (method, code, status) in [
        (reqwest::Method::GET, live.as_str(), StatusCode::FOUND),
        (reqwest::Method::HEAD, live.as_str(), StatusCode::FOUND),
        (reqwest::Method::GET, deleted.as_str(), StatusCode::GONE),
        (reqwest::Method::GET, "zzzzzzz", StatusCode::NOT_FOUND),
    ] {
        let visit = || async {
            let response = node
                .client
                .request(method.clone(), format!("{}/{code}", node.base))
                .header("user-agent", BROWSER)
                .send()
                .await
                .expect("visit");
            let status = response.status();
            let headers: Vec<_> = ["location", "cache-control", "content-length"]
                .iter()
                .map(|h| response.headers().get(*h).cloned())
                .collect();
            (status, headers, response.text().await.expect("body"))
        };
        let before = hits();
        let first = visit().await;
        let second = visit().await;
        assert_eq!(first.0, status, "{method} /{code}");
        assert_eq!(second, first, "{method} /{code}: the cached answer differs");
        assert!(
            hits() > before,
            "{method} /{code}: the second visit was not answered from the cache"
        );
    }
}
on_both_stores!(a_cached_answer_is_the_answer_the_store_gave);
