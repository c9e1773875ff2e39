//! A link's UTM parameters, query passing and social preview in the console, in a real browser:
//! the New link form takes them and its preview card shows the title, description, image and
//! short URL host as typed (as text, never markup); the API stores them and a redirect carries
//! the parameters; the edit form changes and clears them, sending only what changed; a bad UTM
//! value is refused by the API with its field marked. Screenshots go to
//! `target/console-screenshots/sharing/`.

use crate::console::{Page, driver, keys_file};
use crate::console_domains::check_refused;
use crate::domains::call;
use crate::helpers::{Node, Stack};
use reqwest::Method;
use serde_json::{Value, json};
use std::time::Duration;

const TARGET: &str = "https://example.com/shared";
const IMAGE: &str = "https://img.example.com/cards/spring.png";
/// A title that would be markup if it were ever parsed as HTML.
const MARKUP: &str = "Summer <b>sale</b> & <img src=x> more";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_edits_a_links_utm_parameters_and_preview() {
    let stack = Stack::new(crate::helpers::Backend::Sqlite).await;
    let keys = stack.dir.path().join("api-keys.toml");
    let (writer, _) = keys_file(&keys);
    let mut config = stack.config("console-sharing");
    config.access.api_keys_file = Some(keys);
    config.listeners.public_url = None;
    let node = Node::start(config).await;
    let driver = driver();
    let mut page = Page::open(&driver, &node.base, "sharing").await;
    tokio::time::timeout(Duration::from_secs(180), flow(&node, &mut page, &writer))
        .await
        .expect("the console's sharing flow took over three minutes");
    page.client.close().await.expect("close");
}

/// The link `code` as the API answers it.
async fn link(node: &Node, key: &str, code: &str) -> Value {
    let (status, link) = call(node, Method::GET, &format!("/links/{code}"), key, None).await;
    assert_eq!(status, 200, "{link}");
    link
}

/// The changes of the link's update events.
async fn updates(node: &Node, key: &str, code: &str) -> Vec<Value> {
    let path = format!("/links/{code}/history");
    let (status, history) = call(node, Method::GET, &path, key, None).await;
    assert_eq!(status, 200, "{history}");
    history["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["kind"] == "update")
        .map(|e| e["change"].clone())
        .collect()
}

/// Where a visit of `/{path}` is sent.
async fn location(node: &Node, path: &str) -> String {
    let response = node
        .client
        .get(format!("{}/{path}", node.base))
        .send()
        .await
        .expect("visit");
    assert!(response.status().is_redirection(), "{path}: {response:?}");
    response.headers()["location"]
        .to_str()
        .expect("ascii")
        .to_string()
}

/// The text of the element `css`.
async fn text(page: &Page, css: &str) -> String {
    page.wait(css).await.text().await.expect("text")
}

/// Sets the pass-the-query checkbox to `on`.
async fn pass_query(page: &Page, on: bool) {
    let checked = page
        .eval("return document.querySelector(\"input[data-field='pass_query']\").checked;")
        .await;
    if checked != json!(on) {
        page.wait("input[data-field='pass_query']")
            .await
            .click()
            .await
            .expect("tick the checkbox");
    }
}

async fn flow(node: &Node, page: &mut Page, key: &str) {
    page.sign_in(key).await;
    page.click("New link").await;
    page.wait_text("main h1", "New link").await;
    page.wait_text("#preview-note", "No preview set").await;
    page.type_into("Target URL", TARGET).await;
    page.type_into("UTM source", "newsletter").await;
    page.type_into("UTM medium", "email").await;
    page.type_into("UTM campaign", "spring sale").await;
    pass_query(page, true).await;
    page.type_into("Preview title", "Spring sale").await;
    page.type_into("Preview description", "Everything 20 % off")
        .await;
    page.type_into("Preview image URL", IMAGE).await;
    // The card shows what was typed, on the host the short URL will have.
    let host = page.eval("return location.host;").await;
    let host = host.as_str().expect("host");
    page.wait_text("#preview-title", "Spring sale").await;
    assert_eq!(
        text(page, "#preview-description").await,
        "Everything 20 % off"
    );
    assert_eq!(
        text(page, "#preview-host").await.to_lowercase(),
        host.to_lowercase()
    );
    assert_eq!(
        text(page, "#preview-image").await,
        "Image: img.example.com/cards/spring.png"
    );
    page.wait_text("#preview-note", "instead of the target")
        .await;
    page.check("sharing-entered").await;
    page.click("Create").await;
    page.wait_text("#target", TARGET).await;
    let code = page
        .eval("return location.hash.split('/')[2];")
        .await
        .as_str()
        .expect("the code in the address")
        .to_string();

    // The link's page tells them.
    page.wait_text("#campaign", "spring sale").await;
    page.wait_text("#campaign", "passed on to the target").await;
    page.wait_text("#preview", "Spring sale").await;
    page.wait_text("#preview", IMAGE).await;
    page.check("sharing-shown").await;

    let stored = link(node, key, &code).await;
    #[rustfmt::skip]
    let want = [
        ("utm_source", json!("newsletter")), ("utm_medium", json!("email")),
        ("utm_campaign", json!("spring sale")), ("utm_term", Value::Null),
        ("utm_content", Value::Null), ("pass_query", json!(true)),
        ("title", json!("Spring sale")), ("description", json!("Everything 20 % off")),
        ("image", json!(IMAGE)),
    ];
    for (field, value) in &want {
        assert_eq!(&stored[*field], value, "{field}: {stored}");
    }
    assert_eq!(
        location(node, &format!("{code}?ref=x")).await,
        format!("{TARGET}?utm_source=newsletter&utm_medium=email&utm_campaign=spring+sale&ref=x")
    );
    let crawled = node
        .client
        .get(format!("{}/{code}", node.base))
        .header("user-agent", "Twitterbot/1.0")
        .send()
        .await
        .expect("a crawler's visit")
        .text()
        .await
        .expect("page");
    assert!(
        crawled.contains(r#"<meta property="og:title" content="Spring sale">"#),
        "{crawled}"
    );
    edit(node, page, key, &code).await;
}

/// Changes and clears fields in the edit form (the card shows a title of markup as text), then
/// has a bad UTM value refused.
async fn edit(node: &Node, page: &mut Page, key: &str, code: &str) {
    page.click("Edit").await;
    page.wait_text("#edit-title", code).await;
    page.wait_text("#preview-title", "Spring sale").await;
    page.type_into("UTM campaign", "summer").await;
    page.field("UTM medium").await.clear().await.expect("clear");
    pass_query(page, false).await;
    page.type_into("Preview title", MARKUP).await;
    page.wait_text("#preview-title", "Summer").await;
    assert_eq!(text(page, "#preview-title").await, MARKUP);
    let parsed = page
        .eval("return document.querySelectorAll('#preview-card b, #preview-card img').length;")
        .await;
    assert_eq!(parsed, json!(0), "the title was parsed as markup");
    page.check("sharing-edited").await;
    page.click("Save").await;
    page.wait_text("#target", TARGET).await;

    let stored = link(node, key, code).await;
    assert_eq!(
        (
            &stored["utm_campaign"],
            &stored["utm_medium"],
            &stored["pass_query"]
        ),
        (&json!("summer"), &Value::Null, &json!(false)),
        "{stored}"
    );
    assert_eq!(stored["title"], MARKUP);
    assert_eq!(stored["image"], IMAGE);
    // One update, of what changed: the history groups the UTM parameters and the preview.
    let changes = updates(node, key, code).await;
    assert_eq!(changes.len(), 1, "{changes:?}");
    let mut fields: Vec<&String> = changes[0].as_object().expect("a change").keys().collect();
    fields.sort();
    assert_eq!(fields, ["pass_query", "preview", "utm"], "{changes:?}");
    assert_eq!(
        changes[0]["utm"]["new"],
        json!({"source": "newsletter", "campaign": "summer"})
    );
    assert_eq!(
        changes[0]["preview"]["new"],
        json!({"title": MARKUP, "description": "Everything 20 % off", "image": IMAGE})
    );
    assert_eq!(
        location(node, &format!("{code}?ref=x")).await,
        format!("{TARGET}?utm_source=newsletter&utm_campaign=summer")
    );

    // A separator in a UTM value is refused by the API, its field marked; nothing is stored.
    page.click("Edit").await;
    page.wait_text("#edit-title", code).await;
    page.type_into("UTM term", "a&b").await;
    page.click("Save").await;
    page.wait_text("#form-error", "invalid_utm").await;
    page.wait_text("#form-error", "utm_term").await;
    let marked = page
        .eval("return document.querySelector('[aria-invalid=true]')?.getAttribute('data-field');")
        .await;
    assert_eq!(marked, json!("utm_term"));
    check_refused(page, "utm-refused-by-the-api", 422).await;
    assert_eq!(
        updates(node, key, code).await.len(),
        1,
        "a refused edit was stored"
    );
    assert_eq!(link(node, key, code).await["utm_term"], Value::Null);
}
