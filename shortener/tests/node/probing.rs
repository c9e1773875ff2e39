//! An import learns of other tenants' codes within the key's read budget: each code a dry run
//! looks at, and each `code_taken` a real import answers, is charged to it, and past it the row
//! answers `rate_limited` without saying anything of the code (a real import still writes the
//! free codes it tries, in its own tenant).

use crate::helpers::{Backend, Node, Stack};
use crate::tenants::write_keys;
use reqwest::StatusCode;
use serde_json::{Value, json};

fn rows(codes: &[String]) -> String {
    codes
        .iter()
        .map(|code| {
            format!(
                "{}\n",
                json!({ "url": format!("https://example.com/{code}"), "code": code })
            )
        })
        .collect()
}

/// How many row answers have `field` equal to `value`.
fn count(lines: &[Value], field: &str, value: &str) -> usize {
    lines.iter().filter(|l| l[field] == value).count()
}

async fn imports_answer_about_codes_within_the_read_budget(backend: Backend) {
    let stack = Stack::new(backend).await;
    let path = stack.dir.path().join("api-keys.toml");
    let keys = write_keys(&path);
    let mut config = stack.config("a");
    config.access.api_keys_file = Some(path);
    config.limits.read_rate = 1;
    config.limits.read_burst = 20;
    let node = Node::start(config).await;

    // Another tenant's hidden aliases.
    let hidden: Vec<String> = (0..30).map(|i| format!("hidden-{i}")).collect();
    for code in &hidden {
        let (status, body) = node
            .create_with_key(
                json!({ "url": "https://example.com/theirs", "alias": code }),
                &keys.other,
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }

    // A dry run of 70 free guesses and then the 30 hidden ones: the budget answers 20 rows,
    // the rest are refused unlooked, so no hidden code is told apart from a free one.
    let mut guesses: Vec<String> = (0..70).map(|i| format!("free-{i}")).collect();
    guesses.extend(hidden.iter().cloned());
    let (status, lines) = node
        .import_with_key(
            "application/x-ndjson",
            rows(&guesses),
            "dry_run=true",
            &keys.own,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let rows_answered = &lines[..lines.len() - 1];
    assert_eq!(
        count(rows_answered, "status", "valid"),
        20,
        "{rows_answered:?}"
    );
    assert_eq!(count(rows_answered, "error", "rate_limited"), 80);
    assert_eq!(
        count(rows_answered, "error", "code_taken"),
        0,
        "a hidden code was told"
    );

    // A real import writes free codes at full speed but is told a code is taken only within
    // the budget (spent above, refilled at one a second since).
    let mut mine: Vec<String> = (0..10).map(|i| format!("mine-{i}")).collect();
    mine.extend(hidden.iter().cloned());
    let stored = node.stored_links().await;
    let (status, lines) = node
        .import_with_key("application/x-ndjson", rows(&mine), "", &keys.own)
        .await;
    assert_eq!(status, StatusCode::OK);
    let rows_answered = &lines[..lines.len() - 1];
    assert_eq!(
        count(rows_answered, "status", "created"),
        10,
        "{rows_answered:?}"
    );
    let taken = count(rows_answered, "error", "code_taken");
    let limited = count(rows_answered, "error", "rate_limited");
    assert_eq!(taken + limited, 30, "{rows_answered:?}");
    assert!(taken <= 10, "{taken} hidden codes told past a spent budget");
    assert_eq!(node.stored_links().await, stored + 10);
}
on_both_stores!(imports_answer_about_codes_within_the_read_budget);
