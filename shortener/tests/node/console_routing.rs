//! A link's routing in the console, in a real browser: the edit form adds a rule (mobile visitors
//! to their own URL) and a 50/50 split, and the patch carries only those fields; the link's page
//! shows them; a split whose weights do not sum to 100 is refused before anything is sent; a bad
//! rule is refused by the API with its field named beside the form; rules are reordered and a
//! query condition's list is sent as one of; and the split is ended by choosing its winner. A
//! node without a GeoIP database offers no country condition.
//! Screenshots go to `target/console-screenshots/routing/`.

use crate::console::{Page, driver, keys_file};
use crate::console_domains::check_refused;
use crate::domains::call;
use crate::helpers::{Node, Stack};
use fantoccini::Locator;
use reqwest::Method;
use serde_json::{Value, json};
use std::time::Duration;

const TARGET: &str = "https://example.com/routed";
const MOBILE: &str = "https://m.example.com/app";
const CAMPAIGN: &str = "https://example.com/campaign";
const A: &str = "https://a.example.com/";
const B: &str = "https://b.example.com/";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_edits_a_links_rules_and_split() {
    let stack = Stack::new(crate::helpers::Backend::Sqlite).await;
    let keys = stack.dir.path().join("api-keys.toml");
    let (writer, _) = keys_file(&keys);
    let mut config = stack.config("console-routing");
    config.access.api_keys_file = Some(keys);
    config.listeners.public_url = None;
    crate::rules::know_countries(&stack, &mut config);
    let node = Node::start(config).await;
    let (_, me) = call(&node, Method::GET, "/me", &writer, None).await;
    assert_eq!(
        me["rule_conditions"],
        json!([
            "device", "os", "browser", "language", "country", "query", "before", "after", "cidr"
        ]),
        "{me}"
    );
    let driver = driver();
    let mut page = Page::open(&driver, &node.base, "routing").await;
    tokio::time::timeout(Duration::from_secs(180), flow(&node, &mut page, &writer))
        .await
        .expect("the console's routing flow took over three minutes");
    page.client.close().await.expect("close");
}

/// A node without a GeoIP database says so in `/me`, and its console does not offer a country
/// condition (a rule with one would be refused); the other types are all there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_offers_no_country_condition_without_geoip() {
    let stack = Stack::new(crate::helpers::Backend::Sqlite).await;
    let keys = stack.dir.path().join("api-keys.toml");
    let (writer, _) = keys_file(&keys);
    let mut config = stack.config("console-no-geoip");
    config.access.api_keys_file = Some(keys);
    config.listeners.public_url = None;
    let node = Node::start(config).await;
    let (status, me) = call(&node, Method::GET, "/me", &writer, None).await;
    assert_eq!(status, 200, "{me}");
    let offered = json!([
        "device", "os", "browser", "language", "query", "before", "after", "cidr"
    ]);
    assert_eq!(me["rule_conditions"], offered, "{me}");
    let driver = driver();
    let mut page = Page::open(&driver, &node.base, "routing-no-geoip").await;
    tokio::time::timeout(Duration::from_secs(120), async {
        page.sign_in(&writer).await;
        page.click("New link").await;
        page.wait_text("main h1", "New link").await;
        page.click("Add rule").await;
        page.field("Rule 1, condition 1").await;
        let options = page
            .eval(
                "return [...document.querySelector('[data-field=\"rules[0].conditions[0].type\"]').options]\
                 .map((o) => o.value);",
            )
            .await;
        assert_eq!(options, offered);
        page.check("no-country").await;
    })
    .await
    .expect("the console's condition types took over two minutes");
    page.client.close().await.expect("close");
}

/// The link `code` as the API answers it.
async fn link(node: &Node, key: &str, code: &str) -> Value {
    let (status, link) = call(node, Method::GET, &format!("/links/{code}"), key, None).await;
    assert_eq!(status, 200, "{link}");
    link
}

/// The link's history events.
async fn events(node: &Node, key: &str, code: &str) -> Vec<Value> {
    let (status, history) = call(
        node,
        Method::GET,
        &format!("/links/{code}/history"),
        key,
        None,
    )
    .await;
    assert_eq!(status, 200, "{history}");
    history["events"].as_array().cloned().expect("events")
}

/// Clicks the button whose `aria-label` is `label`.
async fn press(page: &Page, label: &str) {
    page.client
        .find(Locator::Css(&format!("button[aria-label='{label}']")))
        .await
        .unwrap_or_else(|e| panic!("no button {label:?}: {e}"))
        .click()
        .await
        .unwrap_or_else(|e| panic!("press {label:?}: {e}"));
}

async fn choose(page: &Page, label: &str, value: &str) {
    page.field(label)
        .await
        .select_by_value(value)
        .await
        .unwrap_or_else(|e| panic!("choose {value} in {label}: {e}"));
}

async fn flow(node: &Node, page: &mut Page, key: &str) {
    page.sign_in(key).await;
    page.click("New link").await;
    page.wait_text("main h1", "New link").await;
    page.type_into("Target URL", TARGET).await;
    page.click("Create").await;
    page.wait_text("#target", TARGET).await;
    page.wait_text("#no-routing", "every visit goes to the target")
        .await;
    let code = page
        .eval("return location.hash.split('/')[2];")
        .await
        .as_str()
        .expect("the code in the address")
        .to_string();
    page.check("created").await;

    add_a_rule_and_a_split(node, page, key, &code).await;
    refusals_and_a_second_rule(node, page, key, &code).await;

    // The split ends with its winner: the target becomes B and the split goes.
    page.click("Edit").await;
    page.wait_text("#edit-title", &code).await;
    choose(page, "Winner", B).await;
    page.click("End split").await;
    page.wait_text("dialog h2", "End the split?").await;
    page.click("End the split").await;
    page.wait_text("#target", B).await;
    let ended = link(node, key, &code).await;
    assert_eq!(ended["variants"], json!([]), "{ended}");
    assert_eq!(ended["url"], B, "{ended}");
    assert_eq!(ended["rules"].as_array().map(Vec::len), Some(2), "{ended}");
    assert!(
        page.client.find(Locator::Css("#variants")).await.is_err(),
        "the ended split is still shown"
    );
    page.wait_text("#rules", "query src is one of a, b").await;
    page.check("split-ended").await;
    a_rules_split_is_kept(node, page, key, &code).await;
}

/// A rule that splits its visits (set over the API) is shown with its split, and an edit of the
/// rules in the console keeps it as it is.
async fn a_rules_split_is_kept(node: &Node, page: &mut Page, key: &str, code: &str) {
    let mut rules = link(node, key, code).await["rules"].clone();
    rules[1] = json!({"variants": [{"url": A, "weight": 30}, {"url": B, "weight": 70}],
        "conditions": [{"type": "device", "value": "mobile"}]});
    let (status, body) = call(
        node,
        Method::PATCH,
        &format!("/links/{code}"),
        key,
        Some(json!({ "rules": rules })),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    page.client.refresh().await.expect("reload");
    page.wait_text("#rules", "split 30%").await;
    page.click("Edit").await;
    page.wait_text("#edit-title", code).await;
    press(page, "Move rule 2 up").await;
    page.click("Save").await;
    page.wait_text("#rules", "split 30%").await;
    let stored = link(node, key, code).await;
    assert_eq!(stored["rules"][0], rules[1], "{stored}");
    assert_eq!(stored["rules"][1]["url"], CAMPAIGN, "{stored}");
    page.check("rule-split-kept").await;
}

/// Adds a rule (mobile visitors to [`MOBILE`]) and a 50/50 split in the edit form, and checks
/// what the API stored, what the patch held and what the link's page shows.
async fn add_a_rule_and_a_split(node: &Node, page: &mut Page, key: &str, code: &str) {
    page.click("Edit").await;
    page.wait_text("#edit-title", code).await;
    page.click("Add rule").await;
    page.type_into("Rule 1 URL", MOBILE).await;
    choose(page, "Rule 1, condition 1", "device").await;
    choose(page, "Rule 1, condition 1 value", "mobile").await;
    page.click("Add variant").await;
    page.click("Add variant").await;
    for (i, url) in [(1, A), (2, B)] {
        page.type_into(&format!("Variant {i} URL"), url).await;
        page.type_into(&format!("Variant {i} weight"), "50").await;
    }
    page.wait_text("#split-sum", "Weights sum to 100.").await;
    page.check("rule-and-split-entered").await;
    page.click("Save").await;
    page.wait_text("#rules", "device is mobile").await;

    let stored = link(node, key, code).await;
    assert_eq!(
        stored["rules"],
        json!([{"url": MOBILE, "conditions": [{"type": "device", "value": "mobile"}]}])
    );
    assert_eq!(
        stored["variants"],
        json!([{"url": A, "weight": 50}, {"url": B, "weight": 50}])
    );
    assert_eq!(stored["url"], TARGET);
    assert_eq!(
        (&stored["ios"], &stored["android"]),
        (&Value::Null, &Value::Null)
    );
    // The patch held the routing fields that changed, and nothing else.
    let update = events(node, key, code)
        .await
        .into_iter()
        .find(|e| e["kind"] == "update");
    let mut changed: Vec<String> = update.expect("an update event")["change"]
        .as_object()
        .expect("a change")
        .keys()
        .cloned()
        .collect();
    changed.sort();
    assert_eq!(changed, ["rules", "variants"]);

    // The page tells the routing: the rule with its condition, the split with its weights.
    page.wait_text("#rules", MOBILE).await;
    let split = page
        .wait_text("#variants", A)
        .await
        .text()
        .await
        .expect("text");
    assert!(split.contains("50%") && split.contains(B), "{split}");
    assert!(!split.contains("60%"), "{split}");
    page.check("routing-shown").await;
}

/// A 60/60 split is refused in the page; a country that is no code is refused by the API, its
/// message shown beside the form; then a second rule (a query list) is moved first and saved.
async fn refusals_and_a_second_rule(node: &Node, page: &mut Page, key: &str, code: &str) {
    let before = events(node, key, code).await.len();
    page.click("Edit").await;
    page.wait_text("#edit-title", code).await;
    page.type_into("Variant 1 weight", "60").await;
    page.type_into("Variant 2 weight", "60").await;
    page.wait_text("#split-sum", "Weights sum to 120").await;
    page.click("Save").await;
    page.wait_text("#form-error", "must sum to 100").await;
    page.wait_text("#edit-title", code).await;
    page.check("split-refused").await;
    assert_eq!(
        events(node, key, code).await.len(),
        before,
        "a refused split was sent"
    );
    let kept = link(node, key, code).await;
    assert_eq!(kept["variants"][0]["weight"], 50, "{kept}");

    // Weights back to 50/50, a second rule: a query list and a country the API refuses.
    page.type_into("Variant 1 weight", "50").await;
    page.type_into("Variant 2 weight", "50").await;
    page.click("Add rule").await;
    page.type_into("Rule 2 URL", CAMPAIGN).await;
    choose(page, "Rule 2, condition 1", "query").await;
    page.type_into("Rule 2, condition 1 key", "src").await;
    page.type_into("Rule 2, condition 1 value", "a, b").await;
    page.client
        .find(Locator::XPath(
            "(//fieldset[@class='rule'])[2]//button[normalize-space()='Add condition']",
        ))
        .await
        .expect("rule 2's Add condition")
        .click()
        .await
        .expect("add a condition");
    choose(page, "Rule 2, condition 2", "country").await;
    page.type_into("Rule 2, condition 2 value", "Germany").await;
    page.click("Save").await;
    page.wait_text("#form-error", "invalid_rules").await;
    page.wait_text("#form-error", "rules[1].conditions[1].value")
        .await;
    let marked = page
        .eval("return document.querySelector('[aria-invalid=true]')?.getAttribute('data-field');")
        .await;
    assert_eq!(marked, json!("rules[1].conditions[1].value"));
    check_refused(page, "rule-refused-by-the-api", 422).await;
    assert_eq!(
        events(node, key, code).await.len(),
        before,
        "a refused rule was stored"
    );

    // Fixed and moved first, it is saved in that order.
    page.type_into("Rule 2, condition 2 value", "DE").await;
    press(page, "Move rule 2 up").await;
    let first_url = page
        .eval("return document.querySelector('fieldset.rule input').value;")
        .await;
    assert_eq!(first_url, json!(CAMPAIGN));
    page.check("rule-moved").await;
    page.click("Save").await;
    page.wait_text("#rules", "query src is one of a, b").await;
    let stored = link(node, key, code).await;
    assert_eq!(
        stored["rules"],
        json!([
            {"url": CAMPAIGN, "conditions": [
                {"type": "query", "key": "src", "value": ["a", "b"]},
                {"type": "country", "value": "DE"}]},
            {"url": MOBILE, "conditions": [{"type": "device", "value": "mobile"}]},
        ])
    );
    assert_eq!(
        stored["variants"],
        json!([{"url": A, "weight": 50}, {"url": B, "weight": 50}])
    );
    page.check("rules-reordered").await;
}
