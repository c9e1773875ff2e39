//! The redirect edge: the direct path and the router agree on every path a client can send.

use crate::helpers::{Backend, Stack};
use reqwest::StatusCode;

/// Plain `GET|HEAD /{code}` requests are answered by the accept loop directly; everything else
/// goes through the router. Both must agree on every path a client can send.
async fn the_direct_redirect_path_and_the_router_agree(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = stack.node("a").await;
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
        ("/api", StatusCode::NOT_FOUND),
    ] {
        let response = get(path).await.expect("visit");
        assert_eq!(response.status(), status, "{path}");
        assert_eq!(response.headers()["cache-control"], "no-store", "{path}");
    }
    // `/` is a route of its own: it leads to the console (first_start tests it).
    assert_eq!(
        get("/").await.expect("visit").status(),
        StatusCode::SEE_OTHER
    );
    let post = node
        .client
        .post(format!("{}/pct-test_1", node.base))
        .send()
        .await
        .expect("post");
    assert_eq!(post.status(), StatusCode::METHOD_NOT_ALLOWED);
}
on_both_stores!(the_direct_redirect_path_and_the_router_agree);
