//! Sign-in through a real OpenID provider's login page in headless Chromium, on two nodes
//! sharing PostgreSQL: an editor lands in the console and creates a link (its owner is the
//! person), the session works on the second node, and signing out ends it on both; a viewer
//! sees no create control, and a create forged with the viewer's session (cookie, anti-CSRF
//! token and Origin all right) is refused with nothing written. Screenshots go to
//! `target/console-screenshots/signin/`.

use super::provider::OidcProvider;
use super::{configure, marketing_audit, marketing_keys, marketing_links, me};
use crate::console::{BrowserLog, Page, driver};
use crate::helpers::{Backend, Node, Stack};
use fantoccini::Locator;
use reqwest::StatusCode;

/// Reads the browser log past the provider's pages: their errors (the development login page
/// loads a web font, which cannot be reached here, and asks the provider for a favicon) are the
/// provider's, and each must be about one of those; the console's own are checked by
/// [`Page::check`].
async fn past_the_provider(page: &Page, issuer: &str) {
    let log = page
        .client
        .issue_cmd(BrowserLog)
        .await
        .expect("browser log");
    for entry in log.as_array().into_iter().flatten() {
        let message = entry["message"].as_str().unwrap_or("");
        if entry["level"] == "SEVERE" {
            assert!(
                message.starts_with("https://fonts.googleapis.com/")
                    || message.starts_with(&format!("{issuer}/favicon.ico")),
                "the provider's page logged {message}"
            );
        }
    }
}

/// Signs in at the provider's login page as `login`, from the console's sign-in page.
async fn sign_in(page: &mut Page, issuer: &str, login: &str, name: &str) {
    page.client
        .goto(&format!("{}/console/", page.base))
        .await
        .expect("open the console");
    page.click("Sign in with single sign-on").await;
    let field = page.wait("input[name=login]").await;
    field.send_keys(login).await.expect("type the login");
    page.client
        .find(Locator::Css("input[name=password]"))
        .await
        .expect("the password field")
        .send_keys("any password")
        .await
        .expect("type the password");
    page.click("Sign-in").await;
    page.wait_text("#who", name).await;
    page.wait_text("main h1", "Links").await;
    past_the_provider(page, issuer).await;
}

/// The session cookie the browser holds for the node, as `name=value`.
async fn session_cookie(page: &Page) -> String {
    let cookies = page.client.get_all_cookies().await.expect("cookies");
    let cookie = cookies
        .iter()
        .find(|c| c.name() == "shortener-session")
        .expect("a session cookie");
    assert_eq!(
        cookie.http_only(),
        Some(true),
        "the session cookie is HttpOnly"
    );
    format!("{}={}", cookie.name(), cookie.value())
}

/// Reads marketing's audit log: the link the editor made is recorded as theirs (subject,
/// e-mail and the browser's address, not only the name the person's caller goes by), and so is
/// their sign-in.
async fn the_audit_log_names_ed(node: &Node, key: &str) {
    let entries = marketing_audit(node, key).await;
    let shown = serde_json::Value::Array(entries.clone());
    let of = |action: &str| {
        entries
            .iter()
            .find(|e| e["action"] == action)
            .unwrap_or_else(|| panic!("no {action} entry in {shown}"))
    };
    let created = of("link.create");
    let signed_in = of("signin");
    let subject = signed_in["actor"]["subject"].as_str().expect("a subject");
    assert_eq!(subject, "editor", "{signed_in}");
    assert_eq!(signed_in["actor"]["email"], "ed@example.com", "{signed_in}");
    assert_eq!(signed_in["object"]["kind"], "session", "{signed_in}");
    assert_eq!(signed_in["address"], "127.0.0.1", "{signed_in}");
    assert_eq!(created["object"]["kind"], "link", "{created}");
    assert_eq!(created["actor"]["subject"], subject, "{created}");
    assert_eq!(created["actor"]["email"], "ed@example.com", "{created}");
    assert_eq!(created["actor"]["tenant"], "marketing", "{created}");
    assert_eq!(created["address"], "127.0.0.1", "{created}");
    assert_eq!(
        created["change"]["url"], "https://example.com/by/ed",
        "{created}"
    );
}

async fn start_node(stack: &Stack, name: &str, port: u16, issuer: &str) -> Node {
    let mut config = stack.config(name);
    config.listeners.http_addr = format!("127.0.0.1:{port}").parse().expect("address");
    configure(&mut config, stack.dir.path(), issuer);
    Node::start(config).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn people_sign_in_through_the_provider_and_act_by_their_role() {
    let stack = Stack::new(Backend::Postgres).await;
    let key = marketing_keys(&stack.dir.path().join("keys.toml"));
    let ports = [testkit::free_port(), testkit::free_port()];
    let bases: Vec<String> = ports
        .iter()
        .map(|p| format!("http://127.0.0.1:{p}"))
        .collect();
    let provider = OidcProvider::start(&bases).await;
    let a = start_node(&stack, "a", ports[0], &provider.issuer).await;
    let b = start_node(&stack, "b", ports[1], &provider.issuer).await;
    let driver = driver();
    let mut page = Page::open(&driver, &a.base, "signin").await;

    // The editor signs in, in marketing (the mapping to the unknown tenant is left out).
    sign_in(&mut page, &provider.issuer, "editor", "Ed Editor").await;
    page.wait_text("#tenant", "marketing (editor)").await;
    page.wait_text("#tenant", "sales (viewer)").await;
    page.check("editor-signed-in").await;
    assert!(page.has_control("New link").await);
    page.click("New link").await;
    page.type_into("Target URL", "https://example.com/by/ed")
        .await;
    page.click("Create").await;
    page.wait_text("#target", "https://example.com/by/ed").await;
    page.check("editor-created").await;
    let (status, listed) = a.list_with_key("limit=10", &key).await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed["links"][0]["owner"], "ed@example.com", "{listed}");
    assert_eq!(marketing_links(&a, &key).await, 1);
    the_audit_log_names_ed(&a, &key).await;

    // The session is in the store: the other node knows it; signing out ends it on both.
    let editor = session_cookie(&page).await;
    assert_eq!(me(&a, &editor).await, StatusCode::OK);
    assert_eq!(me(&b, &editor).await, StatusCode::OK);
    page.click("Sign out").await;
    // The issuer's sign-out page: confirm, and the browser comes back to the console.
    page.click("Yes, sign me out").await;
    page.wait_text("main h1", "Sign in").await;
    past_the_provider(&page, &provider.issuer).await;
    page.check("signed-out").await;
    assert_eq!(me(&a, &editor).await, StatusCode::UNAUTHORIZED);
    assert_eq!(me(&b, &editor).await, StatusCode::UNAUTHORIZED);

    // The viewer sees no create control, and the server refuses a forged create anyway.
    sign_in(&mut page, &provider.issuer, "viewer", "Vi Viewer").await;
    page.wait_text("#tenant", "marketing (viewer)").await;
    page.check("viewer-signed-in").await;
    assert!(
        !page.has_control("New link").await,
        "a viewer is offered a create"
    );
    let viewer = session_cookie(&page).await;
    let csrf = page
        .eval("return fetch('/console/session').then(r => r.json()).then(s => s.csrf);")
        .await;
    let forged = b
        .client
        .post(format!("{}/api/v1/links", b.base))
        .header("cookie", &viewer)
        .header("x-csrf-token", csrf.as_str().expect("a token"))
        .header("origin", &b.base)
        .json(&serde_json::json!({ "url": "https://example.com/by/vi" }))
        .send()
        .await
        .expect("forged create");
    assert_eq!(forged.status(), StatusCode::FORBIDDEN);
    assert_eq!(marketing_links(&a, &key).await, 1);
    drop(provider);
    a.stop().await;
    b.stop().await;
}
