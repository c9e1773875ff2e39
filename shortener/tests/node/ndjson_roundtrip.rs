//! An NDJSON export reads back in: its lines are the API's link objects, and an import takes
//! them as they are, making the open links again with their tags and routing, and refusing the
//! disabled, deleted, used-up and protected ones per row, as a CSV export's rows are.

use crate::csv_routing::{Closed, closed_links, create, routing, visit};
use crate::helpers::{Backend, Stack};
use crate::rules::{IPHONE, node};
use reqwest::StatusCode;
use serde_json::{Value, json};

async fn an_ndjson_export_imports_back_as_it_is(backend: Backend) {
    let stack = Stack::new(backend).await;
    let from = node(&stack, "from").await;
    let routed = create(
        &from,
        json!({
            "url": "https://fallback.example/",
            "tags": ["spring", "mail"],
            "rules": [{"url": "https://phone.example/", "conditions": [{"type": "device", "value": "mobile"}]}],
            "ios": "myapp://item/7",
            "utm_source": "news",
            "pass_query": true,
            "title": "Spring",
            "image": "https://img.example/a.png",
        }),
    )
    .await;
    let split = create(
        &from,
        json!({"url": "https://plain.example/", "max_visits": 5,
               "variants": [{"url": "https://a.example/", "weight": 70}, {"url": "https://b.example/", "weight": 30}]}),
    )
    .await;
    let plain = create(&from, json!({"url": "https://plain.example/only"})).await;
    let Closed {
        disabled,
        deleted,
        protected,
        used_up,
    } = closed_links(&from).await;
    let person = [("user-agent", IPHONE)];
    // The export carries the visit once the node has flushed its count.
    let lines = |file: &str| -> Vec<Value> {
        file.lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect()
    };
    let counted = |file: &str| {
        lines(file)
            .iter()
            .any(|l| l["code"] == *used_up && l["clicks"]["human"] == 1)
    };
    let flushed = testkit::wait_until(std::time::Duration::from_secs(20), || async {
        counted(&from.export("format=ndjson").await.1)
    })
    .await;
    let (status, file) = from.export("format=ndjson").await;
    assert!(flushed && status == StatusCode::OK, "{status}: {file}");
    let exported = lines(&file);
    assert_eq!(exported.len(), 7, "{file}");

    // A fresh deployment imports the file as it is.
    let other = Stack::new(backend).await;
    let to = node(&other, "to").await;
    let (status, answers) = to.import("application/x-ndjson", file.clone(), "").await;
    assert_eq!(status, StatusCode::OK, "{answers:?}");
    let answer = |code: &str| {
        let row = exported
            .iter()
            .position(|l| l["code"] == code)
            .expect("exported")
            + 1;
        answers
            .iter()
            .find(|a| a["row"] == row)
            .unwrap_or_else(|| panic!("no answer for {code} in {answers:?}"))
            .clone()
    };
    for code in [&routed, &split, &plain] {
        assert_eq!(answer(code)["status"], "created", "{answers:?}");
        assert_eq!(
            routing(&to, code).await,
            routing(&from, code).await,
            "{code}"
        );
        let (there, here) = (from.get(code).await.1, to.get(code).await.1);
        for field in ["tags", "max_visits", "expires_at", "protected", "state"] {
            assert_eq!(here[field], there[field], "{code} {field}");
        }
    }
    for (code, error) in [
        (&disabled, "not_active"),
        (&deleted, "not_active"),
        (&used_up, "not_active"),
        (&protected, "password_protected"),
    ] {
        let line = answer(code);
        assert_eq!(
            (line["status"].as_str(), line["error"].as_str()),
            (Some("error"), Some(error)),
            "{line}"
        );
        assert_eq!(to.get(code).await.0, StatusCode::NOT_FOUND, "{code}");
    }
    let summary = &answers.last().expect("summary")["summary"];
    assert_eq!(
        (&summary["created"], &summary["errors"]),
        (&json!(3), &json!(4)),
        "{answers:?}"
    );
    let (status, location, _) = visit(&to, &routed, &person).await;
    assert!((301..=308).contains(&status), "{status}");
    assert!(location.starts_with("https://phone.example/"), "{location}");

    // Importing it again finds the links it made; a field no link has is still refused.
    let (_, again) = to.import("application/x-ndjson", file, "").await;
    assert_eq!(
        again.last().expect("summary")["summary"]["exists"],
        3,
        "{again:?}"
    );
    let odd = r#"{"url":"https://e.example/","colour":"red"}"#.to_string();
    let (_, refused) = to.import("application/x-ndjson", odd, "").await;
    assert_eq!(refused[0]["error"], "invalid_json", "{refused:?}");
    assert!(
        refused[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("colour")),
        "{refused:?}"
    );
}
crate::on_both_stores!(an_ndjson_export_imports_back_as_it_is);
