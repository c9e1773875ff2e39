//! Bad UTM and preview input, one table over both transports: each value is refused by an HTTP
//! create and patch (`422` with its code, the message naming the field) and by a gRPC
//! `CreateLink` and `UpdateLink` (`INVALID_ARGUMENT`, the code in `error-code`, the field in
//! the message), and nothing is written: no link is made and the edited link stays as it was.
//! And the other way: a routed link of several kilobytes that HTTP takes, gRPC takes too.

use crate::helpers::{Backend, Node, Stack, authed};
use crate::rules::node;
use proto::shortener::v1 as pb;
use reqwest::StatusCode;
use serde_json::{Value, json};

/// One bad input: the field, its value, the error code.
type Bad = (&'static str, String, &'static str);

/// Every bad UTM and preview value: the query's separators, control characters, bidirectional
/// overrides and noncharacters, and values past their bounds (a UTM value's in bytes, a preview text's in characters), bad image URLs.
fn table() -> Vec<Bad> {
    let utm = "invalid_utm";
    let preview = "invalid_preview";
    #[rustfmt::skip]
    let table: Vec<Bad> = vec![
        ("utm_source", "a&b".into(), utm),
        ("utm_medium", "x=y".into(), utm),
        ("utm_campaign", "spring#sale".into(), utm),
        ("utm_term", "what?".into(), utm),
        ("utm_content", "tab\there".into(), utm),
        ("utm_source", "line\nbreak".into(), utm),
        ("utm_medium", "nul\u{0}byte".into(), utm),
        ("utm_campaign", "x".repeat(201), utm),
        // 101 characters, 202 bytes: the bound is in bytes.
        ("utm_term", "\u{e9}".repeat(101), utm),
        ("title", "t".repeat(201), preview),
        ("title", "tab\there".into(), preview),
        ("description", "d".repeat(501), preview),
        ("description", "line\nbreak".into(), preview),
        ("description", "bell\u{7}".into(), preview),
        ("title", "invoice\u{202e}fdp.exe".into(), preview),
        ("title", "isolate\u{2067}d".into(), preview),
        ("title", "xml\u{fffe}".into(), preview),
        ("description", "line\u{2028}separator".into(), preview),
        ("image", "javascript:alert(1)".into(), preview),
        ("image", "not a url".into(), preview),
        ("image", "ftp://img.example/a.png".into(), preview),
        ("image", "https://127.0.0.1/a.png".into(), preview),
        // Past the longest URL a target may be (2048 bytes), within a gRPC create's body.
        ("image", format!("https://img.example/{}", "p".repeat(2048)), preview),
    ];
    table
}

/// Sets `field` of a gRPC create to `value`.
fn create_request(field: &str, value: &str) -> pb::CreateLinkRequest {
    let mut request = pb::CreateLinkRequest {
        url: "https://plain.example/".into(),
        ..Default::default()
    };
    let value = Some(value.to_string());
    match field {
        "utm_source" => request.utm_source = value,
        "utm_medium" => request.utm_medium = value,
        "utm_campaign" => request.utm_campaign = value,
        "utm_term" => request.utm_term = value,
        "utm_content" => request.utm_content = value,
        "title" => request.title = value,
        "description" => request.description = value,
        "image" => request.image = value,
        other => panic!("no field {other}"),
    }
    request
}

/// Sets `field` of a gRPC update of `code` to `value`.
fn update_request(code: &str, field: &str, value: &str) -> pb::UpdateLinkRequest {
    let mut request = pb::UpdateLinkRequest {
        code: code.into(),
        ..Default::default()
    };
    let value = Some(value.to_string());
    match field {
        "utm_source" => request.utm_source = value,
        "utm_medium" => request.utm_medium = value,
        "utm_campaign" => request.utm_campaign = value,
        "utm_term" => request.utm_term = value,
        "utm_content" => request.utm_content = value,
        "title" => request.title = value,
        "description" => request.description = value,
        "image" => request.image = value,
        other => panic!("no field {other}"),
    }
    request
}

/// Asserts that an HTTP answer refused `field` with `code`.
fn refused_over_http(what: &str, (status, body): (StatusCode, Value), field: &str, code: &str) {
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some(code)),
        "{what}: {body}"
    );
    let message = body["message"].as_str().expect("message");
    assert!(message.contains(&format!("{field}:")), "{what}: {message}");
}

/// Asserts that a gRPC answer refused `field` with `code`.
fn refused_over_grpc<T: std::fmt::Debug>(
    what: &str,
    answer: Result<tonic::Response<T>, tonic::Status>,
    field: &str,
    code: &str,
) {
    let status = answer.expect_err(what);
    assert_eq!(
        status.code(),
        tonic::Code::InvalidArgument,
        "{what}: {status:?}"
    );
    assert_eq!(
        status
            .metadata()
            .get("error-code")
            .map(|v| v.to_str().expect("ascii")),
        Some(code),
        "{what}"
    );
    assert!(
        status.message().contains(&format!("{field}:")),
        "{what}: {}",
        status.message()
    );
}

async fn bad_utm_and_preview_input_is_refused_alike_over_http_and_grpc(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node: Node = node(&stack, "bad").await;
    let (status, made) = node
        .create(
            json!({"url": "https://plain.example/kept", "utm_source": "news",
                       "utm_campaign": "spring", "title": "Kept", "description": "As it was",
                       "image": "https://img.example/kept.png"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let code = made["code"].as_str().expect("code").to_string();
    let (_, kept) = node.get(&code).await;
    let before = node.stored_links().await;
    let mut grpc = node.links_client().await;

    for (field, value, error) in table() {
        let shown: String = value.chars().take(40).collect();
        let what = format!("{field} = {shown:?}");
        let answer = node
            .create(json!({"url": "https://plain.example/", field: value}))
            .await;
        refused_over_http(&format!("HTTP create {what}"), answer, field, error);
        let answer = node.patch(&code, json!({ field: value })).await;
        refused_over_http(&format!("HTTP patch {what}"), answer, field, error);
        let answer = grpc
            .create_link(authed(create_request(field, &value)))
            .await;
        refused_over_grpc(&format!("CreateLink {what}"), answer, field, error);
        let answer = grpc
            .update_link(authed(update_request(&code, field, &value)))
            .await;
        refused_over_grpc(&format!("UpdateLink {what}"), answer, field, error);
    }

    assert_eq!(
        node.stored_links().await,
        before,
        "a refused create wrote a link"
    );
    let (_, now) = node.get(&code).await;
    assert_eq!(now, kept, "a refused edit changed the link");
    let (_, history) = node.history(&code).await;
    let kinds: Vec<&Value> = history["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| &e["kind"])
        .collect();
    assert_eq!(kinds, [&json!("create")], "a refused edit was recorded");
    // The bounds are the bounds: a value right at each is taken, over both transports.
    let (status, body) = node
        .patch(
            &code,
            json!({"utm_term": "\u{e9}".repeat(100), "title": "t".repeat(200)}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let updated = grpc
        .update_link(authed(update_request(
            &code,
            "description",
            &"d".repeat(500),
        )))
        .await
        .expect("a description at the bound")
        .into_inner();
    assert_eq!(updated.description.map(|d| d.len()), Some(500));
}
crate::on_both_stores!(bad_utm_and_preview_input_is_refused_alike_over_http_and_grpc);

/// A create whose routing takes several kilobytes (long rule targets, a split, a preview at
/// its bounds): what the JSON API takes, `CreateLink` and `UpdateLink` take too, rather than
/// refusing the message for its size.
async fn a_routed_create_http_takes_grpc_takes_too(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node: Node = node(&stack, "big").await;
    let long = |name: &str| format!("https://{name}.example/{}", "p".repeat(1500));
    let rules: Vec<pb::Rule> = (0..3)
        .map(|i| pb::Rule {
            url: long(&format!("rule{i}")),
            conditions: vec![pb::Condition {
                r#type: "query".into(),
                key: "c".into(),
                values: vec![format!("v{i}")],
            }],
            variants: Vec::new(),
        })
        .collect();
    let variants = vec![
        pb::Variant {
            url: long("a"),
            weight: 50,
        },
        pb::Variant {
            url: long("b"),
            weight: 50,
        },
    ];
    let (title, description) = ("\u{e9}".repeat(200), "d".repeat(500));
    let body = json!({
        "url": long("target"),
        "rules": rules.iter().map(|r| json!({"url": r.url, "conditions": [
            {"type": "query", "key": "c", "value": r.conditions[0].values[0]}]})).collect::<Vec<_>>(),
        "variants": variants.iter().map(|v| json!({"url": v.url, "weight": v.weight})).collect::<Vec<_>>(),
        "title": title, "description": description, "image": long("img"),
    });
    assert!(body.to_string().len() > 8 * 1024, "a create of some size");
    let (status, made) = node.create(body).await;
    assert_eq!(status, StatusCode::CREATED, "{made}");

    let mut grpc = node.links_client().await;
    let request = pb::CreateLinkRequest {
        url: long("target"),
        rules: rules.clone(),
        variants: variants.clone(),
        title: Some(title.clone()),
        description: Some(description.clone()),
        image: Some(long("img")),
        ..Default::default()
    };
    let created = grpc
        .create_link(authed(request))
        .await
        .expect("CreateLink takes what HTTP takes")
        .into_inner();
    assert_eq!((created.rules.len(), created.variants.len()), (3, 2));
    let plain = grpc
        .create_link(authed(crate::helpers::create("https://plain.example/")))
        .await
        .expect("a plain create")
        .into_inner();
    let update = pb::UpdateLinkRequest {
        code: plain.code.clone(),
        rules: Some(pb::RuleList { rules }),
        variants: Some(pb::VariantList { variants }),
        title: Some(title),
        description: Some(description),
        image: Some(long("img")),
        ..Default::default()
    };
    let updated = grpc
        .update_link(authed(update))
        .await
        .expect("UpdateLink takes what HTTP takes")
        .into_inner();
    assert_eq!((updated.rules.len(), updated.variants.len()), (3, 2));
}
crate::on_both_stores!(a_routed_create_http_takes_grpc_takes_too);
