//! The web console in a real browser: headless Chromium driven through the system
//! chromedriver. Every step saves a screenshot under `target/console-screenshots/`, and the test
//! fails on any message the page logs as an error (a script error, a failed request).

use crate::helpers::{Node, Stack};
use fantoccini::elements::Element;
use fantoccini::wd::WebDriverCompatibleCommand;
use fantoccini::{Client, ClientBuilder, Locator};
use reqwest::StatusCode;
use serde_json::{Value, json};
use shortener::access::{KEY_FILE_HEADER, KeyEntry, digest, generate_api_key, render};
use shortener::domain::Scopes;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The chromedriver process, stopped on drop.
pub(crate) struct Driver {
    child: Child,
    url: String,
}

impl Drop for Driver {
    /// Stops chromedriver and every browser it started: they share its process group, so a
    /// failed test leaves no Chromium behind.
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.child.id())])
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn driver() -> Driver {
    let chromedriver = ["/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .expect("chromedriver is missing: apt-get install chromium chromium-driver (tests/prepare installs them)");
    let port = testkit::free_addr().port();
    let child = Command::new(chromedriver)
        .arg(format!("--port={port}"))
        // Times on the page are in the browser's zone: one zone makes them predictable.
        .env("TZ", "UTC")
        .process_group(0)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start chromedriver");
    Driver {
        child,
        url: format!("http://127.0.0.1:{port}"),
    }
}

pub(crate) async fn browser(driver: &Driver) -> Client {
    browser_with(driver, &[]).await
}

/// A headless Chromium session with `extra` command-line switches.
pub(crate) async fn browser_with(driver: &Driver, extra: &[String]) -> Client {
    let mut args: Vec<String> = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--no-first-run",
        "--window-size=1280,1000",
    ]
    .map(String::from)
    .to_vec();
    args.extend_from_slice(extra);
    let capabilities = json!({
        "browserName": "chrome",
        "goog:chromeOptions": {
            "binary": "/usr/bin/chromium",
            "args": args,
        },
        "goog:loggingPrefs": { "browser": "ALL" },
    });
    let capabilities = match capabilities {
        Value::Object(map) => map,
        _ => unreachable!(),
    };
    for _ in 0..50 {
        let connected =
            ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
                .capabilities(capabilities.clone())
                .connect(&driver.url)
                .await;
        if let Ok(client) = connected {
            return client;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("chromedriver at {} did not answer", driver.url);
}

/// chromedriver's browser log (`/session/{id}/se/log`): what the page logged since last asked.
#[derive(Debug)]
pub(crate) struct BrowserLog;

impl WebDriverCompatibleCommand for BrowserLog {
    fn endpoint(
        &self,
        base: &url::Url,
        session: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base.join(&format!("session/{}/se/log", session.unwrap_or("")))
    }

    fn method_and_body(&self, _: &url::Url) -> (axum::http::Method, Option<String>) {
        (
            axum::http::Method::POST,
            Some(r#"{"type":"browser"}"#.to_string()),
        )
    }
}

/// The page session: the browser, where screenshots go, and the step count.
pub(crate) struct Page {
    pub(crate) client: Client,
    pub(crate) base: String,
    pub(crate) shots: PathBuf,
    pub(crate) step: usize,
}

impl Page {
    /// A page in a new browser of `driver` at the node `base`, its screenshots going to
    /// `target/console-screenshots/{shots}` (the directory itself for `""`).
    pub(crate) async fn open(driver: &Driver, base: &str, shots: &str) -> Page {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/console-screenshots");
        let shots = if shots.is_empty() {
            dir
        } else {
            dir.join(shots)
        };
        std::fs::create_dir_all(&shots).expect("screenshot directory");
        Page {
            client: browser(driver).await,
            base: base.to_string(),
            shots,
            step: 0,
        }
    }

    /// Saves a screenshot named `name` and fails on any error the page logged.
    pub(crate) async fn check(&mut self, name: &str) {
        self.step += 1;
        let png = self.client.screenshot().await.expect("screenshot");
        std::fs::write(self.shots.join(format!("{:02}-{name}.png", self.step)), png)
            .expect("save screenshot");
        let log = self
            .client
            .issue_cmd(BrowserLog)
            .await
            .expect("browser log");
        let errors: Vec<&Value> = log
            .as_array()
            .map(|entries| entries.iter().filter(|e| e["level"] == "SEVERE").collect())
            .unwrap_or_default();
        assert!(
            errors.is_empty(),
            "the page logged errors at {name}: {errors:?}"
        );
    }

    pub(crate) async fn wait(&self, css: &str) -> Element {
        self.client
            .wait()
            .at_most(Duration::from_secs(10))
            .for_element(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no {css}: {e}"))
    }

    /// Waits until `css` holds `text`.
    pub(crate) async fn wait_text(&self, css: &str, text: &str) -> Element {
        let mut last = None;
        for _ in 0..100 {
            if let Ok(element) = self.client.find(Locator::Css(css)).await {
                match element.text().await {
                    Ok(shown) if shown.contains(text) => return element,
                    Ok(shown) => last = Some(shown),
                    Err(_) => {}
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("{css} never showed {text:?} (last: {last:?})");
    }

    /// The control labelled `label`.
    pub(crate) async fn field(&self, label: &str) -> Element {
        let label = self
            .client
            .wait()
            .at_most(Duration::from_secs(10))
            .for_element(Locator::XPath(&format!(
                "//label[normalize-space()='{label}']"
            )))
            .await
            .unwrap_or_else(|e| panic!("no field labelled {label:?}: {e}"));
        let id = label
            .attr("for")
            .await
            .expect("for")
            .expect("a label names its control");
        self.client
            .find(Locator::Id(&id))
            .await
            .expect("the labelled control")
    }

    pub(crate) async fn type_into(&self, label: &str, text: &str) {
        let field = self.field(label).await;
        field.clear().await.expect("clear");
        field.send_keys(text).await.expect("type");
    }

    pub(crate) async fn button(&self, text: &str) -> Element {
        self.client
            .wait()
            .at_most(Duration::from_secs(10))
            .for_element(Locator::XPath(&format!(
                "//button[normalize-space()='{text}'] | //a[normalize-space()='{text}']"
            )))
            .await
            .unwrap_or_else(|e| panic!("no button {text:?}: {e}"))
    }

    /// Clicks the control named `text`. The page re-renders a section when its data arrives,
    /// so a control found a moment before may have been replaced: find it again and retry.
    pub(crate) async fn click(&self, text: &str) {
        for _ in 0..20 {
            match self.button(text).await.click().await {
                Ok(()) => return,
                Err(fantoccini::error::CmdError::Standard(e))
                    if e.error == fantoccini::error::ErrorStatus::StaleElementReference =>
                {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => panic!("click {text:?}: {e}"),
            }
        }
        panic!("{text:?} kept being replaced before it could be clicked");
    }

    /// Whether a button or link named `text` is shown: rendered, not merely present without
    /// a `hidden` attribute.
    pub(crate) async fn has_control(&self, text: &str) -> bool {
        let xpath =
            format!("//button[normalize-space()='{text}'] | //a[normalize-space()='{text}']");
        for control in self
            .client
            .find_all(Locator::XPath(&xpath))
            .await
            .expect("find")
        {
            if control.is_displayed().await.unwrap_or(false) {
                return true;
            }
        }
        false
    }

    /// Fails if the navigation, any of its links or "Sign out" is shown: signed out, the page
    /// offers only the sign-in form.
    pub(crate) async fn shows_nothing_signed_in(&self, when: &str) {
        for css in ["#nav", "#nav a", "#sign-out"] {
            for element in self.client.find_all(Locator::Css(css)).await.expect("find") {
                assert!(
                    !element.is_displayed().await.expect("displayed"),
                    "{css} is shown {when}"
                );
            }
        }
        assert!(!self.has_control("Sign out").await, "Sign out shown {when}");
    }

    pub(crate) async fn sign_in(&mut self, key: &str) {
        self.client
            .goto(&format!("{}/console/", self.base))
            .await
            .expect("open the console");
        self.type_into("API key", key).await;
        self.click("Sign in").await;
        self.wait_text("main h1", "Links").await;
    }

    pub(crate) async fn eval(&self, script: &str) -> Value {
        self.client.execute(script, vec![]).await.expect("script")
    }
}

pub(crate) fn keys_file(path: &std::path::Path) -> (String, String) {
    let (writer, reader) = (generate_api_key(), generate_api_key());
    let entry = |name: &str, key: &str, scopes: &str| KeyEntry {
        tenant: "marketing".into(),
        name: name.into(),
        digest: digest(key),
        scopes: Scopes::parse_list(scopes).expect("scopes"),
        expires: None,
    };
    let text = [
        entry(
            "campaigns",
            &writer,
            "links:create,links:read,links:write,stats:read",
        ),
        entry("viewer", &reader, "links:read"),
    ]
    .iter()
    .map(render)
    .fold(KEY_FILE_HEADER.to_string(), |text, table| text + &table);
    std::fs::write(path, text).expect("write keys");
    (writer, reader)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_manages_links_in_a_real_browser() {
    let stack = Stack::new(crate::helpers::Backend::Sqlite).await;
    let keys = stack.dir.path().join("api-keys.toml");
    let (writer, reader) = keys_file(&keys);
    let mut config = stack.config("console");
    config.access.api_keys_file = Some(keys);
    config.listeners.public_url = None;
    let node = Node::start(config).await;
    let driver = driver();
    let mut page = Page::open(&driver, &node.base, "").await;

    // Signed out, the page shows the sign-in form only: no navigation, no "Sign out".
    page.client
        .goto(&format!("{}/console/", node.base))
        .await
        .expect("open the console");
    page.wait("input[type=password]").await;
    page.shows_nothing_signed_in("before signing in").await;
    page.check("signed-out").await;

    // Sign in; the list is empty.
    page.sign_in(&writer).await;
    page.wait_text("#who", "marketing / campaigns").await;
    page.wait_text(".more", "No links match.").await;
    assert!(page.has_control("Sign out").await, "no Sign out signed in");
    // "New link" is a button of its natural size, not half the page.
    let new_link = page.wait("main a.button[href='#/new']").await;
    let (_, _, width, _) = new_link.rectangle().await.expect("its box");
    let viewport = page.eval("return window.innerWidth;").await;
    let viewport = viewport.as_f64().expect("a width");
    assert!(
        width > 0.0 && width < 0.3 * viewport,
        "New link is {width} px wide on a {viewport} px page"
    );
    page.check("signed-in").await;

    // Create a link with tags.
    page.click("New link").await;
    page.type_into("Target URL", "https://example.com/spring/launch")
        .await;
    page.type_into("Tags", "spring, promo").await;
    page.check("new-link-form").await;
    page.click("Create").await;
    let short = page
        .wait_text("#short-url", "/")
        .await
        .text()
        .await
        .expect("short URL");
    let code = short.rsplit('/').next().expect("code").to_string();
    page.wait_text("#target", "https://example.com/spring/launch")
        .await;
    // The QR code shows (an image that decoded, from a blob the page fetched with the key).
    let mut shown = false;
    for _ in 0..50 {
        shown = page
            .eval("const i = document.getElementById('qr-image'); return !!i && i.complete && i.naturalWidth > 0 && i.src.startsWith('blob:');")
            .await
            == json!(true);
        if shown {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(shown, "the QR image did not load");
    page.wait("svg.chart").await;
    page.check("detail").await;

    // Find it by search.
    page.client
        .goto(&format!("{}/console/#/links", node.base))
        .await
        .expect("list");
    page.type_into("Search targets", "spring/laun").await;
    page.click("Filter").await;
    page.wait_text("tbody", &code).await;
    page.check("search").await;
    page.client
        .find(Locator::LinkText(&code))
        .await
        .expect("the row's link")
        .click()
        .await
        .expect("open");
    page.wait_text("#link-title", &code).await;

    // Edit the target: the redirect follows it.
    page.click("Edit").await;
    page.type_into("Target URL", "https://example.com/spring/moved")
        .await;
    page.check("edit").await;
    page.click("Save").await;
    page.wait_text("#target", "https://example.com/spring/moved")
        .await;
    assert_eq!(
        node.location(&code).await.1.as_deref(),
        Some("https://example.com/spring/moved")
    );

    // Disable, then enable.
    page.click("Disable").await;
    page.wait_text(".state", "disabled").await;
    assert_eq!(node.location(&code).await.0, StatusCode::GONE);
    page.check("disabled").await;
    page.click("Enable").await;
    page.wait_text(".state", "active").await;
    assert_eq!(node.location(&code).await.0, StatusCode::FOUND);
    page.wait_text(".events", "disable").await;

    // Import a small CSV with one bad row; stored text is shown as text, never as markup. The
    // row names the host that was the default domain where it comes from, which the form
    // names too.
    let csv_path = stack.dir.path().join("links.csv");
    std::fs::write(
        &csv_path,
        "url,code,tags,domain\nhttps://example.com/imported,imp-1,spring,go.elsewhere.example\nnot a url,imp-2,,\nhttps://example.com/x,<b>x</b><script>window.pwned=1</script>,,\n",
    )
    .expect("write csv");
    page.client
        .goto(&format!("{}/console/#/import", node.base))
        .await
        .expect("import page");
    page.field("File")
        .await
        .send_keys(&csv_path.display().to_string())
        .await
        .expect("choose the file");
    page.type_into("Default hosts of the file", "Go.Elsewhere.Example")
        .await;
    // The form's submit button, not the navigation's link of the same name.
    page.client
        .find(Locator::XPath("//form//button[normalize-space()='Import']"))
        .await
        .expect("the import button")
        .click()
        .await
        .expect("import");
    page.wait_text(
        "#import-summary",
        "3 rows: 1 created, 0 already there, 2 refused.",
    )
    .await;
    let injected = page
        .eval("return [window.pwned === undefined, document.querySelectorAll('main b, main script').length, document.querySelector('.results').textContent.includes('<script>')];")
        .await;
    assert_eq!(
        injected,
        json!([true, 0, true]),
        "an imported string was parsed as HTML"
    );
    page.button("Download results").await;
    page.check("import").await;
    assert_eq!(
        node.location("imp-1").await.1.as_deref(),
        Some("https://example.com/imported")
    );

    // A target that spells a script tag is shown as the text it is.
    let (status, made) = node
        .create_with_key(json!({ "url": "https://example.com/<script>window.pwned=2</script>?q=\"><img src=x>" }), &writer)
        .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let tricky = made["code"].as_str().expect("code").to_string();
    page.client
        .goto(&format!("{}/console/#/links/{tricky}", node.base))
        .await
        .expect("detail");
    page.wait_text("#target", "script").await;
    let injected = page.eval("return [window.pwned === undefined, document.querySelectorAll('main img:not(#qr-image), main script').length];").await;
    assert_eq!(injected, json!([true, 0]));
    page.check("script-in-target").await;

    // Delete, with a confirmation that names the code.
    page.client
        .goto(&format!("{}/console/#/links/{code}", node.base))
        .await
        .expect("detail");
    // The hash changed on the same page: wait for this link's page to replace the last one,
    // or the click may land on the old page's button as it goes.
    page.wait_text("#short-url", &code).await;
    page.click("Delete").await;
    page.wait_text("dialog h2", &format!("Delete {code}?"))
        .await;
    page.check("confirm-delete").await;
    page.click(&format!("Delete {code}")).await;
    page.wait_text("main h1", "Links").await;
    let deleted: Value = node
        .client
        .get(format!("{}/api/v1/links/{code}", node.base))
        .bearer_auth(&writer)
        .send()
        .await
        .expect("get")
        .json()
        .await
        .expect("json");
    assert_eq!(deleted["state"], "deleted");
    assert_eq!(node.location(&code).await.0, StatusCode::GONE);

    // On a phone's width the page does not scroll sideways.
    page.client.set_window_size(375, 800).await.expect("resize");
    page.client
        .goto(&format!("{}/console/#/links", node.base))
        .await
        .expect("list");
    page.wait_text("tbody", "imp-1").await;
    let overflow = page
        .eval("return document.documentElement.scrollWidth <= window.innerWidth;")
        .await;
    assert_eq!(
        overflow,
        json!(true),
        "the layout overflows a 375-pixel screen"
    );
    page.check("phone").await;
    page.client
        .set_window_size(1280, 1000)
        .await
        .expect("resize");

    // A read-only key sees no create, edit or delete controls.
    page.click("Sign out").await;
    page.sign_in(&reader).await;
    page.wait_text("tbody", "imp-1").await;
    assert!(
        !page.has_control("New link").await,
        "a read-only key is offered create"
    );
    page.client
        .goto(&format!("{}/console/#/links/imp-1", node.base))
        .await
        .expect("detail");
    page.wait_text("#link-title", "imp-1").await;
    for control in ["Edit", "Delete", "Disable"] {
        assert!(
            !page.has_control(control).await,
            "a read-only key is offered {control}"
        );
    }
    page.check("read-only").await;

    // Keyboard only: from the sign-in form, Tab reaches the key and Enter signs in.
    page.click("Sign out").await;
    page.wait("input[type=password]").await;
    page.shows_nothing_signed_in("after signing out").await;
    let focused = page
        .eval("return document.activeElement && document.activeElement.type;")
        .await;
    assert_eq!(focused, json!("password"), "the key field has the focus");
    page.client
        .active_element()
        .await
        .expect("focused")
        .send_keys(&format!("{writer}\u{E007}"))
        .await
        .expect("type and press Enter");
    page.wait_text("main h1", "Links").await;
    page.check("keyboard-sign-in").await;
    page.client.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_responses_are_locked_down_and_cacheable() {
    let stack = Stack::new(crate::helpers::Backend::Sqlite).await;
    let node = stack.node("console-headers").await;
    let page = node
        .client
        .get(format!("{}/console/", node.base))
        .send()
        .await
        .expect("page");
    assert_eq!(page.status(), StatusCode::OK);
    let csp = page.headers()["content-security-policy"]
        .to_str()
        .expect("csp")
        .to_string();
    for part in [
        "default-src 'none'",
        "script-src 'self'",
        "frame-ancestors 'none'",
    ] {
        assert!(csp.contains(part), "{csp}");
    }
    assert!(!csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"));
    assert_eq!(page.headers()["x-content-type-options"], "nosniff");
    assert_eq!(page.headers()["cache-control"], "no-cache");
    // The public URL is https: the console is to be reached over https only.
    assert_eq!(
        page.headers()["strict-transport-security"],
        "max-age=31536000"
    );
    let etag = page.headers()["etag"].to_str().expect("etag").to_string();
    let html = page.text().await.expect("html");
    let again = node
        .client
        .get(format!("{}/console/", node.base))
        .header("if-none-match", &etag)
        .send()
        .await
        .expect("page");
    assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
    // Every asset the page names, and those they import, is served for a year; the whole first
    // load is well under 150 KB.
    let prefix = html
        .split("href=\"")
        .nth(2)
        .expect("the stylesheet")
        .split("/console.css")
        .next()
        .expect("prefix")
        .to_string();
    let mut total = html.len();
    for file in [
        "app.js",
        "api.js",
        "dom.js",
        "links.js",
        "detail.js",
        "editor.js",
        "importer.js",
        "admin.js",
        "domains.js",
        "chart.js",
        "console.css",
    ] {
        let response = node
            .client
            .get(format!("{}{prefix}/{file}", node.base))
            .send()
            .await
            .expect("asset");
        assert_eq!(response.status(), StatusCode::OK, "{file}");
        assert_eq!(
            response.headers()["cache-control"],
            "public, max-age=31536000, immutable"
        );
        assert!(response.headers().contains_key("etag"));
        total += response.bytes().await.expect("body").len();
    }
    assert!(total < 150 * 1024, "the first load is {total} bytes");
    let stale = node
        .client
        .get(format!(
            "{}/console/assets/0000000000000000/app.js",
            node.base
        ))
        .send()
        .await
        .expect("asset");
    assert_eq!(stale.status(), StatusCode::NOT_FOUND);
    // Refusals on the console's routes carry the same headers: sign-in is off here, and a
    // tenant switch without a session or its anti-CSRF token is refused.
    for (method, path) in [
        (reqwest::Method::GET, "/console/oidc/login"),
        (reqwest::Method::POST, "/console/session/tenant"),
        (
            reqwest::Method::GET,
            "/console/assets/0000000000000000/app.js",
        ),
    ] {
        let refused = node
            .client
            .request(method.clone(), format!("{}{path}", node.base))
            .send()
            .await
            .expect("refused");
        assert!(refused.status().is_client_error(), "{method} {path}");
        for header in [
            "content-security-policy",
            "x-content-type-options",
            "x-frame-options",
            "referrer-policy",
        ] {
            assert!(
                refused.headers().contains_key(header),
                "{method} {path}: {header}"
            );
        }
    }
    // Under a plain http public URL there is nothing to insist on.
    let mut config = stack.config("console-http");
    config.listeners.public_url = Some("http://sho.rt/".into());
    let plain = Node::start(config).await;
    let page = plain
        .client
        .get(format!("{}/console/", plain.base))
        .send()
        .await
        .expect("page");
    assert_eq!(page.status(), StatusCode::OK);
    assert!(!page.headers().contains_key("strict-transport-security"));
    // Off, the console is not served.
    let mut config = stack.config("console-off");
    config.access.console = false;
    let off = Node::start(config).await;
    assert_eq!(
        off.client
            .get(format!("{}/console/", off.base))
            .send()
            .await
            .expect("page")
            .status(),
        StatusCode::NOT_FOUND
    );
}
