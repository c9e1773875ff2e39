//! API keys in the console, in a real browser: a tenant admin (`keys:manage`) opens the Keys
//! page, makes a key (its secret shown once on the page), sees it listed, and revokes it; the
//! secret works over the API until then and is refused after. A key without `keys:manage` is
//! not offered the page. Screenshots go to `target/console-screenshots/keys/`.

use crate::console::{Page, driver};
use crate::helpers::{Node, Stack};
use fantoccini::Locator;
use reqwest::StatusCode;
use shortener::access::{KEY_FILE_HEADER, KeyEntry, digest, generate_api_key, render};
use shortener::domain::Scopes;

/// `GET /api/v1/me` with `key`: its status.
async fn me(node: &Node, key: &str) -> StatusCode {
    node.client
        .get(format!("{}/api/v1/me", node.base))
        .bearer_auth(key)
        .send()
        .await
        .expect("GET /api/v1/me")
        .status()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_admin_makes_lists_and_revokes_a_key_in_the_console() {
    let stack = Stack::new(crate::helpers::Backend::Sqlite).await;
    let path = stack.dir.path().join("api-keys.toml");
    let (lead, reader) = (generate_api_key(), generate_api_key());
    let entry = |name: &str, key: &str, scopes: &str| KeyEntry {
        tenant: "marketing".into(),
        name: name.into(),
        digest: digest(key),
        scopes: Scopes::parse_list(scopes).expect("scopes"),
        expires: None,
    };
    let text = [
        entry("lead", &lead, "keys:manage,links:create,links:read"),
        entry("viewer", &reader, "links:read"),
    ]
    .iter()
    .map(render)
    .fold(KEY_FILE_HEADER.to_string(), |text, table| text + &table);
    std::fs::write(&path, text).expect("write keys");
    let mut config = stack.config("console-keys");
    config.access.api_keys_file = Some(path);
    config.listeners.public_url = None;
    let node = Node::start(config).await;
    let driver = driver();
    let mut page = Page::open(&driver, &node.base, "keys").await;

    // A key without keys:manage is not offered the page.
    page.sign_in(&reader).await;
    assert!(!page.has_control("Keys").await, "Keys offered to a viewer");
    page.click("Sign out").await;

    page.sign_in(&lead).await;
    page.click("Keys").await;
    page.wait_text("main h1", "API keys of marketing").await;
    page.wait_text("#keys", "No keys made here yet.").await;
    page.check("empty").await;
    page.type_into("Name", "ci-bot").await;
    page.click("Make key").await;
    page.wait("#new-secret input").await;
    let secret = page
        .eval("return document.querySelector('#new-secret input').value;")
        .await;
    let secret = secret.as_str().expect("the secret is shown").to_string();
    page.wait_text("#keys", "ci-bot").await;
    page.wait_text("#keys", "links:read").await;
    page.wait_text("#keys", "marketing/lead").await;
    page.check("made").await;
    assert_eq!(me(&node, &secret).await, StatusCode::OK);

    page.click("Revoke").await;
    page.client
        .wait()
        .for_element(Locator::Css("dialog button.danger"))
        .await
        .expect("the confirmation")
        .click()
        .await
        .expect("confirm");
    page.wait_text("#keys", "No keys made here yet.").await;
    page.check("revoked").await;
    assert_eq!(me(&node, &secret).await, StatusCode::UNAUTHORIZED);
    // The secret was on the page only: leaving it and coming back shows none.
    page.click("Links").await;
    page.click("Keys").await;
    page.wait_text("#keys", "No keys made here yet.").await;
    assert!(
        page.client
            .find_all(Locator::Css("#new-secret"))
            .await
            .expect("find")
            .is_empty()
    );
    node.stop().await;
}
