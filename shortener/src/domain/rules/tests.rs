use super::*;

use crate::domain::target::AnyHost as Anything;

fn parse(json: serde_json::Value) -> Result<Rules, Error> {
    let input: Vec<RuleInput> = serde_json::from_value(json).expect("rule input");
    Rules::parse(input, 2048, &Anything)
}

#[test]
fn rules_round_trip_through_their_stored_form() {
    let rules = parse(serde_json::json!([
        {"url": "https://a.example/", "conditions": [
            {"type": "device", "value": "Mobile"},
            {"type": "os", "value": "iOS"},
            {"type": "language", "value": "pt-BR"},
            {"type": "country", "value": "de"},
            {"type": "query", "key": "ref", "value": ["a", "b"]},
            {"type": "query", "key": "utm"},
            {"type": "after", "value": "2026-01-01T00:00:00Z"},
            {"type": "cidr", "value": "10.1.2.3/8"}
        ]}
    ]))
    .expect("valid");
    let stored = rules.to_stored().expect("some");
    assert_eq!(Rules::from_stored(Some(&stored)), rules);
    let Condition::Cidr { value } = &rules.0[0].conditions[7] else {
        panic!("cidr");
    };
    assert_eq!(value.to_string(), "10.0.0.0/8");
    assert_eq!(Rules::from_stored(None), Rules::default());
}

#[test]
fn bad_rules_name_their_field() {
    let many = serde_json::json!({"url": "https://a.example/", "conditions": [{"type": "device", "value": "mobile"}]});
    let cases = [
        (
            serde_json::json!([{"url": "https://a.example/", "conditions": [{"type": "planet", "value": "mars"}]}]),
            "rules[0].conditions[0].type",
        ),
        (
            serde_json::json!([{"url": "https://a.example/", "conditions": [{"type": "device", "value": "fridge"}]}]),
            "rules[0].conditions[0].value",
        ),
        (
            serde_json::json!([{"url": "https://a.example/", "conditions": [{"type": "language", "value": "english!"}]}]),
            "rules[0].conditions[0].value",
        ),
        (
            serde_json::json!([{"url": "https://a.example/", "conditions": [{"type": "country", "value": "DEU"}]}]),
            "rules[0].conditions[0].value",
        ),
        (
            serde_json::json!([{"url": "https://a.example/", "conditions": [{"type": "cidr", "value": "10.0.0.0/33"}]}]),
            "rules[0].conditions[0].value",
        ),
        (
            serde_json::json!([{"url": "https://a.example/", "conditions": [{"type": "before", "value": "tomorrow"}]}]),
            "rules[0].conditions[0].value",
        ),
        (
            serde_json::json!([{"url": "https://a.example/", "conditions": [{"type": "query", "value": "x"}]}]),
            "rules[0].conditions[0].key",
        ),
        (
            serde_json::json!([{"url": "https://a.example/", "conditions": [{"type": "device", "key": "k", "value": "mobile"}]}]),
            "rules[0].conditions[0].key",
        ),
        (
            serde_json::json!([{"url": "https://a.example/", "conditions": [{"type": "query", "key": "k", "value": []}]}]),
            "rules[0].conditions[0].value",
        ),
        (
            serde_json::json!([{"url": "https://a.example/", "conditions": []}]),
            "rules[0].conditions",
        ),
        (
            serde_json::json!([{"url": "ftp://a.example/", "conditions": [{"type": "device", "value": "mobile"}]}]),
            "rules[0].url",
        ),
        (
            serde_json::Value::Array(vec![many; MAX_RULES + 1]),
            "rules:",
        ),
    ];
    for (json, field) in cases {
        let error = parse(json.clone()).expect_err(&json.to_string());
        assert_eq!(error.code(), "invalid_rules", "{json}");
        assert!(error.to_string().starts_with(field), "{json}: {error}");
    }
}

/// The condition types are named in four places: [`CONDITION_TYPES`], the parser, the OpenAPI
/// schema of `/api/v1/me` and the console's rule editor. They must agree.
#[test]
fn every_place_that_names_condition_types_names_the_same() {
    for kind in CONDITION_TYPES {
        let refusal = parse(serde_json::json!([{"url": "https://a.example/",
            "conditions": [{"type": kind, "value": []}]}]))
        .expect_err("an empty list is no value of any type")
        .to_string();
        assert!(!refusal.contains(".type"), "{kind}: {refusal}");
    }
    let openapi: serde_json::Value =
        serde_json::from_str(include_str!("../../http/openapi.json")).expect("openapi");
    let schema = &openapi["components"]["schemas"]["Identity"]["properties"]["rule_conditions"];
    assert_eq!(schema["items"]["enum"], serde_json::json!(CONDITION_TYPES));
    let console = include_str!("../../../console/routing.js");
    let listed = format!(
        "const TYPES = [{}];",
        CONDITION_TYPES.map(|t| format!("'{t}'")).join(", ")
    );
    assert!(
        console.contains(&listed),
        "routing.js does not hold {listed}"
    );
}
