//! Branded domains in the console, in a real browser: a tenant claims a host (a host it is not
//! allowed is refused with the API's message), sets a fallback (app-link text that is not JSON is
//! refused before anything is sent), creates a link on it with an alias the default domain also
//! has, sees both listed with their domains, filters by domain, opens and edits the branded one
//! (its own target, not the default one's), and is told why a domain with links on it cannot be
//! removed. Screenshots go to `target/console-screenshots/domains/`.

use crate::console::{BrowserLog, Page, driver};
use crate::domains::call;
use crate::helpers::{Node, Stack};
use crate::tenants::write_keys;
use fantoccini::Locator;
use reqwest::Method;
use serde_json::{Value, json};
use std::time::Duration;

/// The branded host the test claims.
const HOST: &str = "go.acme.example";

/// `GET /{code}` on `host`: the status and the `Location`.
async fn visit(node: &Node, host: &str, code: &str) -> (u16, Option<String>) {
    let (status, location) = node.on_host(host, code).await;
    (status.as_u16(), location)
}

/// Saves a screenshot named `name` after a step whose request the API refuses on purpose:
/// the page may log that refused request (a response of `status`), and nothing else.
pub(crate) async fn check_refused(page: &mut Page, name: &str, status: u16) {
    page.step += 1;
    let png = page.client.screenshot().await.expect("screenshot");
    std::fs::write(page.shots.join(format!("{:02}-{name}.png", page.step)), png)
        .expect("save screenshot");
    let log = page
        .client
        .issue_cmd(BrowserLog)
        .await
        .expect("browser log");
    let unexpected: Vec<&Value> = log
        .as_array()
        .map(|entries| {
            entries
                .iter()
                .filter(|e| e["level"] == "SEVERE")
                .filter(|e| {
                    !e["message"]
                        .as_str()
                        .unwrap_or("")
                        .contains(&format!("status of {status}"))
                })
                .collect()
        })
        .unwrap_or_default();
    assert!(
        unexpected.is_empty(),
        "the page logged errors at {name}: {unexpected:?}"
    );
}

/// The rows of the links table as `[code, domain, href]`.
async fn rows(page: &Page) -> Value {
    page.eval(
        "return [...document.querySelectorAll('main tbody tr')].map((r) => \
         [r.cells[0].textContent, r.cells[1].textContent, r.querySelector('a').getAttribute('href')]);",
    )
    .await
}

/// Waits until the links table holds exactly `want` (in any order).
async fn wait_rows(page: &Page, want: &[[&str; 3]]) {
    let mut want: Vec<Value> = want.iter().map(|r| json!(r)).collect();
    want.sort_by_key(|r| r.to_string());
    let mut last = Value::Null;
    for _ in 0..100 {
        let mut shown = rows(page).await.as_array().cloned().unwrap_or_default();
        shown.sort_by_key(|r| r.to_string());
        if shown == want {
            return;
        }
        last = json!(shown);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the links table never showed {want:?} (last: {last})");
}

/// Opens the console page `hash` and waits for `css` to show `text`: the hash may change on
/// the same page, so the old page's content is not taken for the new one's.
async fn open(page: &Page, hash: &str, css: &str, text: &str) {
    page.client
        .goto(&format!("{}/console/{hash}", page.base))
        .await
        .expect("open a page");
    page.wait_text(css, text).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_claims_a_domain_and_puts_links_on_it() {
    let stack = Stack::new(crate::helpers::Backend::Sqlite).await;
    let keys = write_keys(&stack.dir.path().join("api-keys.toml"));
    let mut config = stack.config("console-domains");
    config.access.api_keys_file = Some(stack.dir.path().join("api-keys.toml"));
    config.access.domain_suffixes = vec!["acme=acme.example".into()];
    // The default domain's host is then the listener's address: a host no domain can have,
    // which the console must not send as `?domain=`.
    config.listeners.public_url = None;
    let node = Node::start(config).await;
    let driver = driver();
    let mut page = Page::open(&driver, &node.base, "domains").await;
    tokio::time::timeout(Duration::from_secs(180), flow(&node, &mut page, &keys.own))
        .await
        .expect("the console's domain flow took over three minutes");
    page.client.close().await.expect("close");
}

async fn flow(node: &Node, page: &mut Page, key: &str) {
    claim_and_set_a_fallback(node, page, key).await;
    the_same_alias_on_two_domains(node, page, key).await;

    // A domain with links on it stays, and the page says why.
    open(page, &format!("#/domains/{HOST}"), "#domain-title", HOST).await;
    page.click("Remove domain").await;
    page.wait_text("dialog h2", &format!("Remove {HOST}?"))
        .await;
    page.click(&format!("Remove {HOST}")).await;
    page.wait_text("#remove-error", "domain_has_links").await;
    page.wait_text("#remove-error", "live links are on").await;
    page.wait_text("#notice.error", "domain_has_links").await;
    check_refused(page, "remove-refused", 409).await;
    let (status, _) = call(node, Method::GET, &format!("/domains/{HOST}"), key, None).await;
    assert_eq!(status, 200, "the domain was removed");
    // The refusal leads to the list of those links, filtered by the domain.
    page.client
        .find(Locator::Css("#remove-error a"))
        .await
        .expect("the link to the domain's links")
        .click()
        .await
        .expect("follow it");
    page.wait_text("main h1", "Links").await;
    wait_rows(
        page,
        &[["spring", HOST, &format!("#/links/spring?domain={HOST}")]],
    )
    .await;
    let chosen = page
        .eval("return document.querySelector('select[name=domain]').value;")
        .await;
    assert_eq!(chosen, json!(HOST));
    page.check("links-of-the-domain").await;

    // On the import page, a domain chosen for every row leaves no default hosts to name.
    open(page, "#/import", "#import-title", "Import links").await;
    let hosts_off = "return document.querySelector('input[name=default_hosts]').disabled;";
    assert_eq!(page.eval(hosts_off).await, json!(false));
    for (value, off) in [(HOST, true), ("", false)] {
        page.field("Domain")
            .await
            .select_by_value(value)
            .await
            .expect("choose the import's domain");
        assert_eq!(page.eval(hosts_off).await, json!(off), "{value:?}");
    }
    page.check("import-domain").await;
}

/// Claims [`HOST`] (after a host the tenant is not allowed) and sets its not-found fallback.
async fn claim_and_set_a_fallback(node: &Node, page: &mut Page, key: &str) {
    page.sign_in(key).await;
    page.click("Domains").await;
    page.wait_text("main h1", "Domains").await;
    page.wait_text("main", "No domains yet").await;
    page.check("no-domains").await;

    // A host the tenant is not allowed: the API's message and code are shown.
    page.type_into("Host", "go.globex.example").await;
    page.click("Claim").await;
    page.wait_text("#notice.error", "host_not_allowed").await;
    check_refused(page, "claim-refused", 403).await;

    // Claim one: its page opens.
    page.type_into("Host", HOST).await;
    page.click("Claim").await;
    page.wait_text("#domain-title", HOST).await;
    page.check("claimed").await;

    // App-link text that is not JSON is refused in the page, and nothing is saved.
    page.type_into("Not-found URL", "https://acme.example/missing")
        .await;
    page.type_into("assetlinks.json", "[{\"relation\": ").await;
    page.click("Save settings").await;
    page.wait_text("#notice.error", "assetlinks is not JSON")
        .await;
    page.check("not-json").await;
    let (status, domain) = call(node, Method::GET, &format!("/domains/{HOST}"), key, None).await;
    assert_eq!((status, &domain["not_found_url"]), (200, &Value::Null));
    // Emptied, it saves; the fallback answers for an unknown code on the host.
    page.field("assetlinks.json")
        .await
        .clear()
        .await
        .expect("clear");
    page.click("Save settings").await;
    page.wait_text("#notice.ok", "Saved.").await;
    let (_, domain) = call(node, Method::GET, &format!("/domains/{HOST}"), key, None).await;
    assert_eq!(domain["not_found_url"], "https://acme.example/missing");
    assert_eq!(domain["assetlinks"], Value::Null);
    assert_eq!(
        visit(node, HOST, "nothing-here").await.1.as_deref(),
        Some("https://acme.example/missing")
    );
    page.check("fallback-saved").await;
}

/// Puts the alias `spring` on the default domain and on [`HOST`], lists, filters, opens and
/// edits the branded one.
async fn the_same_alias_on_two_domains(node: &Node, page: &mut Page, key: &str) {
    // The alias `spring` on the default domain, then on the claimed one.
    for (domain, target) in [
        (None, "https://example.com/default-spring"),
        (Some(HOST), "https://acme.example/spring"),
    ] {
        open(page, "#/new", "main h1", "New link").await;
        page.type_into("Target URL", target).await;
        page.type_into("Alias", "spring").await;
        if let Some(host) = domain {
            page.field("Domain")
                .await
                .select_by_value(host)
                .await
                .expect("choose the domain");
        }
        page.click("Create").await;
        page.wait_text("#target", target).await;
    }
    page.wait_text("#domain", HOST).await;
    page.wait_text("#short-url", &format!("{HOST}/spring"))
        .await;
    page.check("created-on-domain").await;
    let (status, default) = call(node, Method::GET, "/links/spring", key, None).await;
    assert_eq!(status, 200, "{default}");
    assert_eq!(default["url"], "https://example.com/default-spring");
    let default_host = default["domain"].as_str().expect("domain").to_string();
    assert_ne!(default_host, HOST);

    // Both are listed with their domains; the branded one's address names its host.
    let branded_hash = format!("#/links/spring?domain={HOST}");
    open(page, "#/links", "main h1", "Links").await;
    wait_rows(
        page,
        &[
            ["spring", &default_host, "#/links/spring"],
            ["spring", HOST, &branded_hash],
        ],
    )
    .await;
    page.check("both-listed").await;
    page.field("Domain")
        .await
        .select_by_value(HOST)
        .await
        .expect("filter by domain");
    wait_rows(page, &[["spring", HOST, &branded_hash]]).await;
    page.check("filtered").await;

    // The branded one's page shows its own target, QR code and history.
    page.client
        .find(Locator::Css(&format!(
            "main tbody a[href='{branded_hash}']"
        )))
        .await
        .expect("the branded row")
        .click()
        .await
        .expect("open it");
    page.wait_text("#target", "https://acme.example/spring")
        .await;
    page.wait_text("#domain", HOST).await;
    page.wait_text(".events", "create").await;
    let mut qr = false;
    for _ in 0..50 {
        qr = page
            .eval("const i = document.getElementById('qr-image'); return !!i && i.complete && i.naturalWidth > 0;")
            .await
            == json!(true);
        if qr {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(qr, "the branded link's QR image did not load");
    page.check("branded-detail").await;

    // Edited there, the branded link changes and the default one does not.
    page.click("Edit").await;
    page.wait_text("#edit-title", "spring").await;
    page.type_into("Target URL", "https://acme.example/summer")
        .await;
    page.click("Save").await;
    page.wait_text("#target", "https://acme.example/summer")
        .await;
    assert_eq!(
        visit(node, HOST, "spring").await,
        (302, Some("https://acme.example/summer".into()))
    );
    assert_eq!(
        node.location("spring").await.1.as_deref(),
        Some("https://example.com/default-spring")
    );
    page.check("branded-edited").await;
}
