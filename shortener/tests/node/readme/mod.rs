//! README.md's HTTP API section against the OpenAPI document a node serves: every request,
//! query parameter, status, error code and body field the README names exists in the document;
//! every body it shows lists all of the schema's fields (a `link` too, so leaving out one of a
//! link's fields fails); and every operation of the document has a row.
//!
//! [`section`] reads the README, [`shape`] its notation for bodies, [`check`] compares.

mod check;
mod section;
mod shape;

use crate::helpers::{Backend, Stack};
use serde_json::Value;

/// README.md at the root of the workspace.
fn readme() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md");
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {path}: {e}"))
}

/// The OpenAPI document as a fresh embedded node serves it.
async fn served_document() -> Value {
    let stack = Stack::new(Backend::Sqlite).await;
    let node = stack.node("readme").await;
    let response = node
        .client
        .get(format!("{}/api/v1/openapi.json", node.base))
        .send()
        .await
        .expect("GET /api/v1/openapi.json");
    assert_eq!(response.status(), 200);
    let document = response.json().await.expect("the document is JSON");
    node.stop().await;
    document
}

/// The differences between `readme`'s HTTP API section and `document`.
fn problems(readme: &str, document: &Value) -> Vec<String> {
    match section::parse(readme) {
        Ok(section) => check::check(&section, document),
        Err(e) => vec![e],
    }
}

#[tokio::test]
async fn readme_http_api_section_matches_the_served_openapi_document() {
    let document = served_document().await;
    let readme = readme();
    let section = section::parse(&readme).expect("parse README.md's HTTP API section");
    // The section is read at all: a parser that finds nothing would pass vacuously.
    assert!(section.rows.len() >= 15, "{} rows", section.rows.len());
    assert!(
        section
            .definitions
            .iter()
            .any(|(name, _, _)| name == "link"),
        "README.md defines no `link`"
    );
    assert!(!section.errors.is_empty(), "README.md lists no error codes");
    let problems = check::check(&section, &document);
    assert!(
        problems.is_empty(),
        "README.md disagrees with the OpenAPI document:\n{}",
        problems.join("\n")
    );
}

/// The README with `from` replaced by `to` once; panics when `from` is not there, so a test
/// cannot pass because the README changed under it.
fn edited(readme: &str, from: &str, to: &str) -> String {
    assert!(
        readme.contains(from),
        "README.md no longer contains {from:?}"
    );
    readme.replacen(from, to, 1)
}

#[tokio::test]
async fn readme_check_finds_missing_or_unknown_fields_operations_and_codes() {
    let document = served_document().await;
    let readme = readme();
    let cases = [
        // A link's field left out of the definition.
        (
            edited(&readme, r#""imported", "protected", "#, r#""imported", "#),
            "leaves out `protected`",
        ),
        // A field the schema lacks (what `/me` once documented).
        (
            edited(
                &readme,
                r#"{"tenant", "key", "scopes", "rule_conditions"}"#,
                r#"{"tenant", "name", "scopes", "rule_conditions"}"#,
            ),
            "names `name`, which the schema lacks",
        ),
        // A required request field marked optional.
        (
            edited(&readme, r#"{"url", "alias"?"#, r#"{"url"?, "alias"?"#),
            "marks `url` optional",
        ),
        // An operation the document lacks.
        (
            edited(&readme, "`GET /api/v1/me`", "`GET /api/v1/myself`"),
            "`GET /api/v1/myself` is not in the OpenAPI document",
        ),
        // An operation of the document without a row.
        (
            edited(&readme, ", `GET /api/v1/webhooks/{id}/deliveries`", ""),
            "does not name `GET /api/v1/webhooks/{id}/deliveries`",
        ),
        // A query parameter or a value the operation does not take.
        (
            edited(&readme, "granularity=hour\\|day", "granularity=hour\\|week"),
            "does not take `granularity=week`",
        ),
        (
            edited(&readme, "?limit=&cursor=", "?limit=&page="),
            "no query parameter `page`",
        ),
        // A status the operation does not answer.
        (edited(&readme, "| `204`;", "| `200`;"), "answers `200`"),
        // An error code no operation answers.
        (
            edited(&readme, "`409 alias_taken`", "`409 alias_in_use`"),
            "`409 alias_in_use`",
        ),
    ];
    for (text, expected) in cases {
        let found = problems(&text, &document);
        assert!(
            found.iter().any(|p| p.contains(expected)),
            "expected a problem containing {expected:?}, got:\n{}",
            found.join("\n")
        );
    }
}

#[test]
fn readme_crate_table_names_every_workspace_member() {
    let manifest = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.toml"))
        .expect("read the workspace manifest");
    let members = manifest
        .lines()
        .find_map(|l| l.strip_prefix("members = ["))
        .expect("a members line")
        .trim_end_matches(']');
    let readme = readme();
    let mut names = 0;
    for member in members.split(',').map(|m| m.trim().trim_matches('"')) {
        names += 1;
        assert!(
            readme.contains(&format!("| `{member}/` |")),
            "README.md's crate table lacks `{member}/`"
        );
    }
    assert!(names >= 9, "{members}");
}
