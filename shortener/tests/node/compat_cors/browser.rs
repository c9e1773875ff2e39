//! The Shlink API from a page of another origin, in headless Chromium: a tiny page server on
//! 127.0.0.1 serves an app whose script creates a short URL, lists them and renames its tag
//! (a `PUT`) with `X-Api-Key`, as the Shlink web client does (a JSON body and a key header: the browser sends a preflight
//! first). The node allows the page's origin and not a second page server's: the first page
//! reads both answers, the second reads neither and creates nothing.

use crate::console::{browser, driver};
use crate::helpers::{API_KEY, Backend, Node, Stack};
use fantoccini::{Client, Locator};
use std::time::Duration;

/// The app's page: on load its script calls the node named in the page's query (`node`) and
/// writes what it read, or the error it got, into `#result`.
fn app_page() -> String {
    format!(
        r#"<!doctype html><html lang="en"><head><meta charset="utf-8"><link rel="icon" href="data:,">
<title>App</title></head><body><p id="result">running</p><script>
const node = new URLSearchParams(location.search).get("node");
const headers = {{ "X-Api-Key": {API_KEY:?} }};
(async () => {{
  const show = text => {{ document.getElementById("result").textContent = text; }};
  try {{
    const made = await fetch(node + "/rest/v3/short-urls", {{
      method: "POST",
      headers: {{ ...headers, "Content-Type": "application/json" }},
      body: JSON.stringify({{
        longUrl: "https://example.com/from-" + location.port,
        tags: ["t" + location.port],
      }}),
    }});
    const link = await made.json();
    const listed = await fetch(node + "/rest/v3/short-urls", {{ headers }});
    const page = await listed.json();
    const renamed = await fetch(node + "/rest/v3/tags", {{
      method: "PUT",
      headers: {{ ...headers, "Content-Type": "application/json" }},
      body: JSON.stringify({{ oldName: "t" + location.port, newName: "r" + location.port }}),
    }});
    show("ok " + made.status + " " + link.shortCode + " " + listed.status + " " +
      page.shortUrls.pagination.totalItems + " " + renamed.status);
  }} catch (error) {{
    show("failed " + error.name + ": " + error.message);
  }}
}})();
</script></body></html>"#
    )
}

/// A page server on 127.0.0.1 (its own origin) serving the app at `/app`; its port.
async fn page_server() -> u16 {
    let page = app_page();
    let app = axum::Router::new().route(
        "/app",
        axum::routing::get(move || async move { axum::response::Html(page) }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the page server");
    let port = listener.local_addr().expect("address").port();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    port
}

/// Opens the app at `port`, calling the node at `node`, and returns what it wrote once it
/// finished.
async fn run_app(client: &Client, port: u16, node: &str) -> String {
    client
        .goto(&format!("http://127.0.0.1:{port}/app?node={node}"))
        .await
        .expect("open the app");
    let mut shown = String::new();
    for _ in 0..100 {
        shown = client
            .find(Locator::Css("#result"))
            .await
            .expect("the result")
            .text()
            .await
            .expect("its text");
        if shown != "running" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    shown
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_of_an_allowed_origin_calls_shlink_and_another_origin_cannot() {
    let allowed = page_server().await;
    let refused = page_server().await;
    let stack = Stack::new(Backend::Sqlite).await;
    let mut config = stack.config("browser");
    config.compat.compat = vec!["shlink".into()];
    config.compat.compat_cors_origins = vec![format!("http://127.0.0.1:{allowed}")];
    let node = Node::start(config).await;

    let driver = driver();
    let client = browser(&driver).await;
    let shown = run_app(&client, allowed, &node.base).await;
    let parts: Vec<&str> = shown.split(' ').collect();
    assert!(
        matches!(parts.as_slice(), ["ok", "200", code, "200", "1", "204"] if code.len() == 7),
        "the allowed origin's app: {shown}"
    );
    assert_eq!(node.stored_links().await, 1);
    let (_, link) = node.get(parts[2]).await;
    assert_eq!(
        link["tags"],
        serde_json::json!([format!("r{allowed}")]),
        "the rename went through"
    );

    // Another origin: the preflight of its create names no origin, so the browser sends no
    // create at all, and the page reads nothing.
    let shown = run_app(&client, refused, &node.base).await;
    assert!(
        shown.starts_with("failed TypeError"),
        "another origin's app: {shown}"
    );
    assert_eq!(
        node.stored_links().await,
        1,
        "another origin created a link"
    );

    // A node that allows any origin lets the second page in too.
    let mut config = stack.config("browser-any");
    config.compat.compat = vec!["shlink".into()];
    let any = Node::start(config).await;
    let shown = run_app(&client, refused, &any.base).await;
    assert!(shown.starts_with("ok 200 "), "any origin's app: {shown}");
    assert_eq!(any.stored_links().await, 1);
    client.close().await.expect("close");
}
