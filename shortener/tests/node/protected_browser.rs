//! A password-protected link in a real browser: headless Chromium through the system
//! chromedriver opens the link, types a password and submits the node's own form, as a person
//! would. A wrong password leaves it on the form; the right one lands it on the target page,
//! served on loopback under a public-looking name (the node refuses loopback targets), which
//! the browser resolves to that server alone. Screenshots go to
//! `target/protected-screenshots/`, and the test fails on any error the pages log (a refused
//! navigation or a policy violation is one).

use crate::console::{BrowserLog, browser_with, driver};
use crate::helpers::{Backend, Stack};
use axum::extract::RawQuery;
use fantoccini::{Client, Locator};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// The target's host name, mapped to the local page server in the browser only.
const TARGET_HOST: &str = "landing.example.com";

/// A page server on 127.0.0.1 for `/landing`, counting its visits.
async fn landing_server() -> (u16, Arc<AtomicUsize>) {
    let visits = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&visits);
    let app = axum::Router::new().route(
        "/landing",
        axum::routing::get(move |RawQuery(query): RawQuery| {
            counted.fetch_add(1, Ordering::SeqCst);
            let query = query
                .unwrap_or_default()
                .replace('&', "&amp;")
                .replace('<', "&lt;");
            async move {
                axum::response::Html(format!(
                    "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><link rel=\"icon\" href=\"data:,\"><title>Landing</title></head>\
                     <body><p id=\"landed\">Landed with {query}</p></body></html>"
                ))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the page server");
    let port = listener.local_addr().expect("address").port();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (port, visits)
}

/// Saves a screenshot and fails on any error the page logged but the `expected` one (its
/// message holds that text).
async fn check(client: &Client, shots: &std::path::Path, name: &str, expected: Option<&str>) {
    let png = client.screenshot().await.expect("screenshot");
    std::fs::write(shots.join(format!("{name}.png")), png).expect("save screenshot");
    let log = client.issue_cmd(BrowserLog).await.expect("browser log");
    let errors: Vec<&Value> = log
        .as_array()
        .map(|entries| {
            entries
                .iter()
                .filter(|e| e["level"] == "SEVERE")
                .filter(|e| {
                    expected
                        .is_none_or(|text| !e["message"].as_str().is_some_and(|m| m.contains(text)))
                })
                .collect()
        })
        .unwrap_or_default();
    assert!(
        errors.is_empty(),
        "the page logged errors at {name}: {errors:?}"
    );
}

/// Types `password` into the form's field and submits it with its button.
async fn submit(client: &Client, password: &str) {
    let field = client
        .wait()
        .at_most(Duration::from_secs(10))
        .for_element(Locator::Css("input#password"))
        .await
        .expect("the password field");
    field.clear().await.expect("clear");
    field.send_keys(password).await.expect("type");
    client
        .find(Locator::XPath("//button[normalize-space()='Continue']"))
        .await
        .expect("the Continue button")
        .click()
        .await
        .expect("submit");
}

/// Waits until the page shows `css` holding `text`; the last text seen otherwise.
async fn wait_text(client: &Client, css: &str, text: &str) -> Result<(), String> {
    let mut last = String::new();
    for _ in 0..100 {
        if let Ok(element) = client.find(Locator::Css(css)).await
            && let Ok(shown) = element.text().await
        {
            if shown.contains(text) {
                return Ok(());
            }
            last = shown;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let url = client.current_url().await.map(|u| u.to_string());
    Err(format!(
        "{css} never showed {text:?} (last: {last:?}, at {url:?})"
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_right_password_lands_a_browser_on_the_target_and_a_wrong_one_stays_on_the_form() {
    let (port, visits) = landing_server().await;
    let stack = Stack::new(Backend::Sqlite).await;
    let node = stack.node("protected-browser").await;
    // A query with `&` checks the target is escaped in the page and arrives whole.
    let target = format!("http://{TARGET_HOST}/landing?a=1&b=2");
    let (status, link) = node
        .create(json!({ "url": target, "password": "open sesame" }))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{link}");
    let code = link["code"].as_str().expect("code").to_string();
    let shots = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/protected-screenshots");
    std::fs::create_dir_all(&shots).expect("screenshot directory");

    let driver = driver();
    let client = browser_with(
        &driver,
        &[
            // Only the target's name, to the page server: nothing else is resolved or reached.
            format!("--host-resolver-rules=MAP {TARGET_HOST} 127.0.0.1:{port}"),
            // Straight to the http target, without first trying https on the page server.
            "--disable-features=HttpsUpgrades,HttpsFirstBalancedModeAutoEnable".into(),
        ],
    )
    .await;
    let form_url = format!("{}/{code}", node.base);
    client.goto(&form_url).await.expect("open the link");
    wait_text(&client, "h1", "This link is protected")
        .await
        .expect("the form");
    check(&client, &shots, "01-form", None).await;

    // A wrong password: the form again, with its message, and no visit to the target.
    submit(&client, "open sesame?").await;
    wait_text(&client, "p.error", "That password is not right.")
        .await
        .expect("the wrong password's message");
    assert_eq!(
        client.current_url().await.expect("url").as_str(),
        form_url,
        "a wrong password left the form"
    );
    // The browser logs the form's 403 as a failed load: that one is expected.
    check(
        &client,
        &shots,
        "02-wrong-password",
        Some(&format!(
            "{form_url} - Failed to load resource: the server responded with a status of 403"
        )),
    )
    .await;
    assert_eq!(visits.load(Ordering::SeqCst), 0);

    // The right password: the browser lands on the target, its query whole.
    submit(&client, "open sesame").await;
    if let Err(stuck) = wait_text(&client, "#landed", "Landed with a=1&b=2").await {
        // Fails first on what the page logged (a refused navigation says why).
        check(&client, &shots, "03-stuck", None).await;
        panic!("the right password did not reach the target: {stuck}");
    }
    assert_eq!(
        client.current_url().await.expect("url").as_str(),
        target,
        "landed elsewhere"
    );
    assert_eq!(visits.load(Ordering::SeqCst), 1);
    check(&client, &shots, "03-target", None).await;
    client.close().await.expect("close");

    // The unlock counted one visit (headless Chromium names itself, so as a bot).
    let counted = testkit::wait_until(Duration::from_secs(10), || async {
        let clicks = node.get(&code).await.1["clicks"].clone();
        clicks["human"].as_u64().unwrap_or(0) + clicks["bot"].as_u64().unwrap_or(0) == 1
    })
    .await;
    assert!(counted, "clicks: {}", node.get(&code).await.1["clicks"]);
}
