//! AllocateIds over JSON (`POST /v1/namespaces/{namespace}/ids:allocate`): the same tokens and
//! the same contract as over gRPC (`allocate`), errors answered as JSON, nothing written by a
//! refusal.

use crate::allocate::{LEASER, ORDERS, secured};
use crate::helpers::tokens;
use crate::helpers::{allocate, assert_ledger_covers, assert_ranges_disjoint, count_rows};
use std::time::Duration;
use testkit::TestDb;

/// One refused JSON call: case, namespace, body, token, HTTP status, error code.
type JsonCase<'a> = (&'a str, &'a str, String, Option<&'a str>, u16, &'a str);

#[tokio::test]
async fn the_json_endpoint_allocates_with_the_same_tokens_and_answers_errors_as_json() {
    let (db, dir) = (
        TestDb::create().await,
        tempfile::tempdir().expect("tempdir"),
    );
    let server = secured(&db, &dir, 100).await;
    let http = reqwest::Client::new();
    let token = ORDERS.token();
    let post = |namespace: &str, body: &str, token: Option<&str>| {
        let mut request = http
            .post(server.allocate_url(namespace))
            .header("content-type", "application/json")
            .body(body.to_string());
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        request.send()
    };
    let ok = post("orders", r#"{"count": 42}"#, Some(&token))
        .await
        .expect("post");
    assert_eq!(ok.status(), 200);
    assert_eq!(ok.headers()["cache-control"], "no-store");
    let body: serde_json::Value = ok.json().await.expect("json");
    let ranges: Vec<(u64, u64)> = body["ranges"]
        .as_array()
        .expect("ranges")
        .iter()
        .map(|r| (r[0].as_u64().expect("start"), r[1].as_u64().expect("end")))
        .collect();
    assert_eq!(ranges.iter().map(|(s, e)| e - s).sum::<u64>(), 42);
    let conn = db.connect().await;
    // The first call starts the namespace's pool, which leases its spare segment in the
    // background: wait for it, so the count below is what refused calls must leave alone.
    let spare_leased = testkit::wait_until(Duration::from_secs(10), || {
        let conn = &conn;
        async move { count_rows(conn, "id_leases").await == 2 }
    })
    .await;
    assert!(spare_leased, "the pool never leased its spare segment");
    let leases_before = count_rows(&conn, "id_leases").await;

    let wrong = tokens::token_of("stranger");
    let leaser = LEASER.token();
    let big = format!(r#"{{"count": 1, "pad": "{}"}}"#, "x".repeat(2000));
    // (case, namespace, body, token, HTTP status, error code)
    let cases: Vec<JsonCase> = vec![
        (
            "count 0",
            "orders",
            r#"{"count": 0}"#.into(),
            Some(&token),
            400,
            "invalid_argument",
        ),
        (
            "count too big",
            "orders",
            r#"{"count": 101}"#.into(),
            Some(&token),
            400,
            "invalid_argument",
        ),
        (
            "negative count",
            "orders",
            r#"{"count": -1}"#.into(),
            Some(&token),
            400,
            "invalid_argument",
        ),
        (
            "not JSON",
            "orders",
            "count=1".into(),
            Some(&token),
            400,
            "invalid_argument",
        ),
        (
            "unknown field",
            "orders",
            r#"{"count": 1, "n": 2}"#.into(),
            Some(&token),
            400,
            "invalid_argument",
        ),
        (
            "body over 1 KiB",
            "orders",
            big,
            Some(&token),
            400,
            "invalid_argument",
        ),
        (
            "bad namespace",
            "Orders",
            r#"{"count": 1}"#.into(),
            Some(&token),
            400,
            "invalid_argument",
        ),
        (
            "no token",
            "orders",
            r#"{"count": 1}"#.into(),
            None,
            401,
            "unauthenticated",
        ),
        (
            "wrong token",
            "orders",
            r#"{"count": 1}"#.into(),
            Some(&wrong),
            401,
            "unauthenticated",
        ),
        (
            "namespace not allowed",
            "other",
            r#"{"count": 1}"#.into(),
            Some(&token),
            403,
            "permission_denied",
        ),
        (
            "scope missing",
            "orders",
            r#"{"count": 1}"#.into(),
            Some(&leaser),
            403,
            "permission_denied",
        ),
    ];
    for (case, namespace, body, token, status, code) in cases {
        let response = post(namespace, &body, token).await.expect("post");
        assert_eq!(response.status().as_u16(), status, "{case}");
        assert_eq!(response.headers()["cache-control"], "no-store", "{case}");
        if status == 401 {
            assert_eq!(response.headers()["www-authenticate"], "Bearer", "{case}");
        }
        let error: serde_json::Value = response.json().await.expect("a JSON error");
        assert_eq!(error["error"], code, "{case}: {error}");
        assert!(
            error["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{case}"
        );
    }
    // Without a JSON content type.
    let plain = http
        .post(server.allocate_url("orders"))
        .bearer_auth(&token)
        .body(r#"{"count": 1}"#)
        .send()
        .await
        .expect("post");
    assert_eq!(plain.status(), 400);
    assert_eq!(
        count_rows(&conn, "id_leases").await,
        leases_before,
        "a refused call wrote"
    );

    // gRPC and JSON draw from the same segments: never the same ID twice.
    let mut client = server.client().await;
    let mut all = ranges;
    all.extend(
        allocate(&mut client, Some(&token), "orders", 100)
            .await
            .expect("grpc"),
    );
    assert_ranges_disjoint(&all);
    assert_ledger_covers(&conn, "orders", &all).await;

    let doc: serde_json::Value =
        reqwest::get(format!("http://{}/v1/openapi.json", server.http_addr))
            .await
            .expect("openapi")
            .json()
            .await
            .expect("json");
    assert!(doc["paths"]["/v1/namespaces/{namespace}/ids:allocate"]["post"].is_object());
    // A wrong path or method is answered in the port's error shape, not with an empty body.
    let client = reqwest::Client::new();
    for (method, path, status, code) in [
        (
            reqwest::Method::POST,
            "/v1/namespaces/orders/ids:allocat",
            404,
            "not_found",
        ),
        (
            reqwest::Method::GET,
            "/v1/namespaces/orders/ids:allocate",
            405,
            "method_not_allowed",
        ),
    ] {
        let response = client
            .request(method.clone(), format!("http://{}{path}", server.http_addr))
            .send()
            .await
            .expect("send");
        assert_eq!(response.status(), status, "{method} {path}");
        let body: serde_json::Value = response.json().await.expect("a JSON error");
        assert_eq!(body["error"], code, "{method} {path}: {body}");
        assert!(
            body["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{body}"
        );
    }
    server.stop().await;
}

/// A JSON call whose database has gone silent is answered within the request timeout, as a
/// gRPC call is, rather than held until TCP gives up; what it held is let go with it.
#[tokio::test]
async fn a_json_call_whose_database_is_silent_is_answered_within_the_timeout() {
    use testkit::proxy::{Mode, Proxy};
    let (db, dir) = (
        TestDb::create().await,
        tempfile::tempdir().expect("tempdir"),
    );
    // The database through a proxy the test can silence: its host and port, replaced.
    let url = db.url().to_string();
    let (head, rest) = url.split_once("@").expect("a user in the URL");
    let (address, database) = rest.split_once('/').expect("a database in the URL");
    let proxy = Proxy::start(address.parse().expect("a socket address"))
        .await
        .expect("proxy");
    let through = format!("{head}@{}/{database}", proxy.addr());
    let server = crate::helpers::Server::start(id_service::Config {
        tokens_file: Some(crate::helpers::tokens::write(dir.path(), &[ORDERS, LEASER])),
        insecure_no_auth: false,
        auto_create_namespaces: false,
        namespaces: vec!["orders".into()],
        request_timeout: Duration::from_secs(1),
        ..id_service::Config::for_tests(&through)
    })
    .await;
    // The namespace's pool is made on its first call, which reads the database.
    proxy.set_mode(Mode::Blackhole);
    let answered = tokio::time::timeout(
        Duration::from_secs(30),
        reqwest::Client::new()
            .post(server.allocate_url("orders"))
            .header("content-type", "application/json")
            .bearer_auth(ORDERS.token())
            .body(r#"{"count": 1}"#)
            .send(),
    )
    .await
    .expect("a call whose database is silent is answered, not left waiting")
    .expect("post");
    assert_eq!(answered.status(), 503);
    let body: serde_json::Value = answered.json().await.expect("json");
    assert_eq!(body["error"], "unavailable", "{body}");
    proxy.set_mode(Mode::Open);
}
