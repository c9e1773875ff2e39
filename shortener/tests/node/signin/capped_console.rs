//! The console's Keys page shows what a person's key holds now, in a real browser: a tenant
//! admin signed in with the operator's key sees a key a signed-in person made whole while the
//! person's role grants it, capped (with what it was made with) once the roles file makes the
//! person a viewer, and not in force once it gives them no role at all. Screenshots go to
//! `target/console-screenshots/capped/`.

use super::capped::{REACHES_KEYS, listed_in_force, make_key, sign_in_as_ana};
use super::issuer::{Key, TestIssuer};
use super::{ROLES, configure, marketing_keys};
use crate::console::{Page, driver};
use crate::helpers::{Backend, Node, Stack, wait_for};
use serde_json::{Value, json};

/// Waits until the tenant's key list gives key `name` the scopes in force `want`.
async fn wait_in_force(node: &Node, by: &str, name: &str, want: Value) {
    wait_for(
        &format!("{name} in force as {want}"),
        REACHES_KEYS,
        async || listed_in_force(node, by, name).await == want,
    )
    .await;
}

/// Opens the Keys page afresh (through another page, so that it reads the list again) once it
/// shows `shows`, and returns key `name`'s scopes cell: its first line (the scopes in force, or
/// the state) and the whole of its text.
async fn scopes_of(page: &mut Page, name: &str, shows: &str) -> (String, String) {
    page.click("Links").await;
    page.click("Keys").await;
    page.wait_text("#keys", shows).await;
    let cell = page
        .eval(&format!(
            "const row = [...document.querySelectorAll('#keys tr')]\
               .find(r => r.querySelector('td')?.textContent === '{name}');\
             const cell = row?.querySelector('td.scopes');\
             return cell ? [cell.firstChild.textContent, cell.textContent] : null;"
        ))
        .await;
    let text = |i: usize| {
        cell[i]
            .as_str()
            .unwrap_or_else(|| panic!("no scopes cell for {name}: {cell}"))
            .to_string()
    };
    (text(0), text(1))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_keys_page_shows_a_persons_key_as_their_role_leaves_it() {
    let stack = Stack::new(Backend::Sqlite).await;
    let file_key = marketing_keys(&stack.dir.path().join("keys.toml"));
    let signer = Key::new("k1");
    let issuer = TestIssuer::start(&[&signer]).await;
    let mut config = stack.config("capped-console");
    configure(&mut config, stack.dir.path(), &issuer.issuer);
    config.access.reload_interval_ms = std::num::NonZero::new(200).expect("non-zero");
    let roles = config.access.roles_file.clone().expect("a roles file");
    let node = Node::start(config).await;
    let admin = sign_in_as_ana(&node, &issuer, &signer, &["link-admins"]).await;
    make_key(
        &node,
        Some(&admin),
        "",
        "deploy",
        &["links:read", "links:create"],
    )
    .await;

    let driver = driver();
    let mut page = Page::open(&driver, &node.base, "capped").await;
    page.sign_in(&file_key).await;

    // While her role grants it, the key is shown with the scopes it was made with, no more.
    let (first, whole) = scopes_of(&mut page, "deploy", "deploy").await;
    assert_eq!(first, "links:create, links:read");
    assert_eq!(whole, first, "nothing more is said of a whole key");
    page.check("whole").await;

    // The roles file makes link-admins viewers: the page shows the cap and what it was made with.
    let demoted = ROLES.replacen(
        "value = \"link-admins\"\ntenant = \"marketing\"\nrole = \"admin\"",
        "value = \"link-admins\"\ntenant = \"marketing\"\nrole = \"viewer\"",
        1,
    );
    assert_ne!(demoted, ROLES, "the admins' table is in the roles");
    std::fs::write(&roles, &demoted).expect("write roles");
    wait_in_force(&node, &file_key, "deploy", json!(["links:read"])).await;
    let (first, capped) = scopes_of(&mut page, "deploy", "Capped by its maker's role").await;
    assert_eq!(first, "links:read");
    assert!(
        capped.ends_with("Capped by its maker's role; made with links:create, links:read."),
        "{capped}"
    );
    page.check("capped").await;

    // No role in marketing at all: the key is shown as not in force.
    let gone = ROLES.replacen(
        "value = \"link-admins\"\ntenant = \"marketing\"",
        "value = \"link-admins\"\ntenant = \"sales\"",
        1,
    );
    std::fs::write(&roles, &gone).expect("write roles");
    wait_in_force(&node, &file_key, "deploy", Value::Null).await;
    let (first, out) = scopes_of(&mut page, "deploy", "not in force").await;
    assert_eq!(first, "not in force");
    assert!(
        out.ends_with("its maker's role no longer grants it, or a key of the keys file has its name. Made with links:create, links:read."),
        "{out}"
    );
    page.check("out-of-force").await;
    node.stop().await;
}
