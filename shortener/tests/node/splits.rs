//! Splits and app targets: new visitors spread over a split's variants by its weights, each
//! kept on its variant (by its cookie, or without one by its address and browser); a split
//! ended by choosing a winner, recorded; iOS and Android visitors sent to their app targets
//! after the rules; bad splits and app targets refused over HTTP and gRPC with nothing written.

use crate::helpers::{Backend, Node, Stack, authed};
use crate::rules::{ANDROID, IPHONE, WINDOWS_CHROME, node};
use futures::StreamExt;
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::collections::HashMap;

/// A visit of `code` from `address` with `headers`: status, `Location`, `Set-Cookie`,
/// `Cache-Control` (and no `Vary`: an answer no cache may keep names none).
pub(crate) async fn visit(
    node: &Node,
    code: &str,
    address: &str,
    headers: &[(&str, &str)],
) -> (u16, String, Option<String>, Option<String>) {
    let mut request = node
        .client
        .get(format!("{}/{code}", node.base))
        .header("x-forwarded-for", address);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.expect("visit");
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .map(|v| v.to_str().expect("ascii").to_string())
    };
    assert_eq!(header("vary"), None, "{code}: a redirect names no Vary");
    (
        response.status().as_u16(),
        header("location").unwrap_or_default(),
        header("set-cookie"),
        header("cache-control"),
    )
}

async fn create(node: &Node, body: Value) -> String {
    let (status, made) = node.create(body.clone()).await;
    assert_eq!(status, StatusCode::CREATED, "{body}: {made}");
    made["code"].as_str().expect("code").to_string()
}

async fn a_split_spreads_new_visitors_and_keeps_each(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = node(&stack, "split").await;
    let code = create(
        &node,
        json!({"url": "https://plain.example/", "variants": [
            {"url": "https://a.example/", "weight": 70},
            {"url": "https://b.example/", "weight": 30}]}),
    )
    .await;
    // 10,000 new visitors, each from its own address, no cookie.
    let counts: HashMap<String, u32> = futures::stream::iter(0..10_000u32)
        .map(|i| {
            let (node, code) = (&node, &code);
            async move {
                let address = format!("198.{}.{}.{}", 18 + i / 65_536, (i / 256) % 256, i % 256);
                visit(node, code, &address, &[]).await.1
            }
        })
        .buffer_unordered(32)
        .fold(HashMap::new(), |mut counts, location| async move {
            *counts.entry(location).or_insert(0) += 1;
            counts
        })
        .await;
    let share = |host: &str| f64::from(counts.get(host).copied().unwrap_or(0)) / 100.0;
    let (a, b) = (share("https://a.example/"), share("https://b.example/"));
    assert!(
        (a - 70.0).abs() <= 3.0 && (b - 30.0).abs() <= 3.0,
        "{counts:?}"
    );
    assert_eq!(counts.len(), 2, "{counts:?}");

    // A new visitor is told its variant in a cookie on the short URL's path; with it, it stays
    // on it from any address, and without it from the same address and browser.
    let (status, first, cookie, cache_control) = visit(&node, &code, "203.0.113.9", &[]).await;
    assert_eq!(status, 302);
    let cookie = cookie.expect("a cookie for a new visitor");
    assert!(
        cookie.contains(&format!("Path=/{code}"))
            && cookie.contains("HttpOnly")
            && cookie.contains("SameSite=Lax")
            && cookie.contains("Max-Age=2592000"),
        "{cookie}"
    );
    assert_eq!(cache_control.as_deref(), Some("private, no-store"));
    let pair = cookie.split(';').next().expect("name=value").to_string();
    for i in 0..20 {
        let (_, location, again, _) = visit(
            &node,
            &code,
            &format!("192.0.2.{i}"),
            &[("cookie", pair.as_str())],
        )
        .await;
        assert_eq!(location, first, "a returning visitor moved");
        assert_eq!(again, None, "a visitor with its cookie is not told again");
    }
    for _ in 0..5 {
        assert_eq!(visit(&node, &code, "203.0.113.9", &[]).await.1, first);
    }
    // A cookie naming no variant of this split is ignored, and a new one set.
    let (_, _, reset, _) = visit(&node, &code, "203.0.113.9", &[("cookie", "sv=7")]).await;
    assert!(reset.is_some(), "a cookie out of range was believed");

    // Ending the split: the winner becomes the URL, recorded in the history.
    let (status, ended) = node
        .patch(&code, json!({"url": first, "variants": null}))
        .await;
    assert_eq!(
        (status, &ended["variants"]),
        (StatusCode::OK, &json!([])),
        "{ended}"
    );
    let (status, location, cookie, cache_control) = visit(&node, &code, "198.51.100.1", &[]).await;
    assert_eq!(
        (status, location.as_str(), cookie, cache_control),
        (301, first.as_str(), None, None)
    );
    let (_, history) = node.history(&code).await;
    let update = history["events"]
        .as_array()
        .expect("events")
        .iter()
        .find(|e| e["kind"] == "update")
        .expect("the update");
    assert_eq!(update["change"]["variants"]["new"], json!([]));
    assert_eq!(update["change"]["variants"]["old"][0]["weight"], 70);
    assert_eq!(update["change"]["url"]["new"], json!(first));
}

crate::on_both_stores!(a_split_spreads_new_visitors_and_keeps_each);

async fn app_targets_follow_the_rules(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = node(&stack, "apps").await;
    let code = create(
        &node,
        json!({
            "url": "https://plain.example/",
            "ios": "myapp://item/7",
            "android": "https://play.google.com/store/apps/details?id=com.example.app",
            "rules": [{"url": "https://german.example/", "conditions": [{"type": "language", "value": "de"}]}],
        }),
    )
    .await;
    #[rustfmt::skip]
    let cases: [(&[(&str, &str)], &str); 5] = [
        (&[("user-agent", IPHONE)], "myapp://item/7"),
        (&[("user-agent", ANDROID)], "https://play.google.com/store/apps/details?id=com.example.app"),
        (&[("user-agent", WINDOWS_CHROME)], "https://plain.example/"),
        (&[("user-agent", IPHONE), ("accept-language", "de")], "https://german.example/"),
        (&[], "https://plain.example/"),
    ];
    for (headers, want) in cases {
        let (status, location, _, cache_control) = visit(&node, &code, "192.0.2.1", headers).await;
        assert_eq!(
            (status, location.as_str(), cache_control.as_deref()),
            (302, want, Some("private, no-store")),
            "{headers:?}"
        );
    }
    let (_, read) = node.get(&code).await;
    assert_eq!(
        (&read["ios"], &read["variants"]),
        (&json!("myapp://item/7"), &json!([]))
    );
    let (status, patched) = node.patch(&code, json!({"ios": null})).await;
    assert_eq!((status, &patched["ios"]), (StatusCode::OK, &Value::Null));
    let (_, location, _, _) = visit(&node, &code, "192.0.2.1", &[("user-agent", IPHONE)]).await;
    assert_eq!(location, "https://plain.example/");
}

crate::on_both_stores!(app_targets_follow_the_rules);

async fn bad_splits_and_app_targets_are_refused(backend: Backend) {
    use proto::shortener::v1 as pb;
    let stack = Stack::new(backend).await;
    let node = node(&stack, "bad").await;
    let variant = |w: i64| json!({"url": format!("https://w{w}.example/"), "weight": w});
    #[rustfmt::skip]
    let table: Vec<(Value, &str, &str)> = vec![
        (json!({"variants": [variant(100)]}), "invalid_variants", "variants:"),
        (json!({"variants": [variant(50), variant(49)]}), "invalid_variants", "variants:"),
        (json!({"variants": [variant(0), variant(100)]}), "invalid_variants", "variants[0].weight"),
        (json!({"variants": [variant(-50), variant(150)]}), "invalid_variants", "variants[0].weight"),
        (json!({"variants": vec![variant(10); 11]}), "invalid_variants", "variants:"),
        (json!({"variants": [variant(50), {"url": "ftp://x.example/", "weight": 50}]}), "invalid_variants", "variants[1].url"),
        (json!({"ios": "javascript:alert(1)"}), "invalid_app_target", "ios:"),
        (json!({"android": "data:text/html,hi"}), "invalid_app_target", "android:"),
        (json!({"ios": "not a url"}), "invalid_app_target", "ios:"),
        (json!({"android": "https://127.0.0.1/app"}), "invalid_app_target", "android:"),
    ];
    let before = node.list_all("", 1000).await.len();
    let mut grpc = node.links_client().await;
    for (fields, error, field) in &table {
        let mut body = json!({"url": "https://plain.example/"});
        for (k, v) in fields.as_object().expect("fields") {
            body[k] = v.clone();
        }
        let (status, answer) = node.create(body.clone()).await;
        assert_eq!(
            (status.as_u16(), answer["error"].as_str()),
            (422, Some(*error)),
            "{body}: {answer}"
        );
        let message = answer["message"].as_str().expect("message");
        assert!(message.starts_with(field), "{body}: {message}");
        let request = pb::CreateLinkRequest {
            url: "https://plain.example/".into(),
            ios: fields["ios"].as_str().map(str::to_string),
            android: fields["android"].as_str().map(str::to_string),
            variants: fields["variants"]
                .as_array()
                .map(|vs| {
                    vs.iter()
                        .map(|v| pb::Variant {
                            url: v["url"].as_str().expect("url").into(),
                            weight: v["weight"].as_i64().expect("weight"),
                        })
                        .collect()
                })
                .unwrap_or_default(),
            ..Default::default()
        };
        let refused = grpc
            .create_link(authed(request))
            .await
            .expect_err("refused over gRPC");
        assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{body}");
        assert_eq!(
            refused
                .metadata()
                .get("error-code")
                .map(|v| v.to_str().expect("ascii")),
            Some(*error)
        );
    }
    assert_eq!(
        node.list_all("", 1000).await.len(),
        before,
        "a refused create wrote a link"
    );
}

crate::on_both_stores!(bad_splits_and_app_targets_are_refused);

/// UTM parameters are added to every http(s) target that lacks them, and the short URL's own
/// query is passed on when the link says so, never duplicating a parameter; a link with only
/// these keeps the node's permanent status and cacheability. Bad UTM values are refused.
async fn utm_and_the_query_are_passed_on(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = node(&stack, "utm").await;
    let tagged = create(
        &node,
        json!({"url": "https://t.example/p?utm_source=kept", "utm_source": "news",
               "utm_medium": "mail", "utm_campaign": "spring sale", "pass_query": true}),
    )
    .await;
    let (_, read) = node.get(&tagged).await;
    assert_eq!(
        (&read["utm_source"], &read["utm_term"], &read["pass_query"]),
        (&json!("news"), &Value::Null, &json!(true))
    );
    let base = "https://t.example/p?utm_source=kept&utm_medium=mail&utm_campaign=spring+sale";
    #[rustfmt::skip]
    let cases = [
        ("", base.to_string()),
        ("?ref=x", format!("{base}&ref=x")),
        ("?utm_medium=other&ref=a+b", format!("{base}&ref=a+b")),
    ];
    for (query, want) in cases {
        let response = node
            .client
            .get(format!("{}/{tagged}{query}", node.base))
            .send()
            .await
            .expect("visit");
        let location = response.headers()["location"]
            .to_str()
            .expect("ascii")
            .to_string();
        assert_eq!(
            (response.status().as_u16(), location.as_str()),
            (301, want.as_str()),
            "{query}"
        );
        assert!(response.headers().get("cache-control").is_none(), "{query}");
    }
    // Rule targets carry them too.
    let routed = create(
        &node,
        json!({"url": "https://t.example/", "utm_source": "news",
               "rules": [{"url": "https://promo.example/x", "conditions": [{"type": "query", "key": "promo"}]}]}),
    )
    .await;
    let (status, location, _, _) = visit(&node, &format!("{routed}?promo"), "192.0.2.1", &[]).await;
    assert_eq!(
        (status, location.as_str()),
        (302, "https://promo.example/x?utm_source=news")
    );
    // A patch clears one parameter and stops passing the query on.
    let (status, patched) = node
        .patch(&tagged, json!({"utm_medium": null, "pass_query": false}))
        .await;
    assert_eq!(status, StatusCode::OK, "{patched}");
    let response = node
        .client
        .get(format!("{}/{tagged}?ref=x", node.base))
        .send()
        .await
        .expect("visit");
    assert_eq!(
        response.headers()["location"],
        "https://t.example/p?utm_source=kept&utm_campaign=spring+sale"
    );
    for bad in ["a&b", "x=y", "#frag", "tab\there", &"x".repeat(201)] {
        let (status, body) = node
            .create(json!({"url": "https://t.example/", "utm_campaign": bad}))
            .await;
        assert_eq!(
            (status.as_u16(), body["error"].as_str()),
            (422, Some("invalid_utm")),
            "{bad}"
        );
        let (status, body) = node.patch(&tagged, json!({"utm_term": bad})).await;
        assert_eq!(
            (status.as_u16(), body["error"].as_str()),
            (422, Some("invalid_utm")),
            "{bad}"
        );
    }
}

crate::on_both_stores!(utm_and_the_query_are_passed_on);

/// A link with a preview answers a preview crawler with a small page of `og:` tags (values
/// escaped, `og:url` the short URL, no script, `noindex`) and everyone else with the redirect;
/// bad preview fields are refused.
async fn previews_are_shown_to_crawlers_only(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = node(&stack, "preview").await;
    let code = create(
        &node,
        json!({"url": "https://t.example/", "title": "Spring <sale> & \"more\"",
               "description": "Everything 20 % off", "image": "https://img.example/a.png?x=1&y=2"}),
    )
    .await;
    for crawler in [
        "facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)",
        "Twitterbot/1.0",
        "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)",
    ] {
        let response = node
            .client
            .get(format!("{}/{code}", node.base))
            .header("user-agent", crawler)
            .send()
            .await
            .expect("visit");
        assert_eq!(response.status(), StatusCode::OK, "{crawler}");
        assert_eq!(
            response.headers()["content-type"],
            "text/html; charset=utf-8"
        );
        assert_eq!(response.headers()["cache-control"], "private, no-store");
        assert!(response.headers().get("vary").is_none(), "kept by no cache");
        let page = response.text().await.expect("page");
        assert!(page.len() < 10 * 1024);
        for want in [
            r#"<meta property="og:title" content="Spring &lt;sale&gt; &amp; &quot;more&quot;">"#,
            r#"<meta property="og:description" content="Everything 20 % off">"#,
            r#"<meta property="og:image" content="https://img.example/a.png?x=1&amp;y=2">"#,
            &format!(r#"<meta property="og:url" content="https://sho.rt/{code}">"#),
            r#"<meta name="robots" content="noindex">"#,
            r#"<meta name="twitter:card" content="summary_large_image">"#,
        ] {
            assert!(page.contains(want), "{crawler}: {want} missing in {page}");
        }
        assert!(
            !page.contains("<script") && !page.contains("http-equiv"),
            "{page}"
        );
    }
    let (status, location, _, cache_control) =
        visit(&node, &code, "192.0.2.1", &[("user-agent", IPHONE)]).await;
    assert_eq!(
        (status, location.as_str(), cache_control.as_deref()),
        (302, "https://t.example/", Some("private, no-store"))
    );
    // A link past its visit limit is gone to crawlers as to people: no preview page.
    let limited = create(
        &node,
        json!({"url": "https://t.example/once", "title": "Once", "max_visits": 1}),
    )
    .await;
    let crawl = |code: String| {
        let node = &node;
        async move {
            node.client
                .get(format!("{}/{code}", node.base))
                .header("user-agent", "Twitterbot/1.0")
                .send()
                .await
                .expect("visit")
                .status()
                .as_u16()
        }
    };
    assert_eq!(
        crawl(limited.clone()).await,
        200,
        "a preview before the limit"
    );
    let (status, ..) = visit(&node, &limited, "192.0.2.2", &[("user-agent", IPHONE)]).await;
    assert_eq!(status, 302, "the one human visit");
    assert_eq!(
        crawl(limited.clone()).await,
        410,
        "a preview past the limit"
    );
    let (status, patched) = node
        .patch(
            &code,
            json!({"title": null, "description": null, "image": null}),
        )
        .await;
    assert_eq!((status, &patched["title"]), (StatusCode::OK, &Value::Null));
    let response = node
        .client
        .get(format!("{}/{code}", node.base))
        .header("user-agent", "Twitterbot/1.0")
        .send()
        .await
        .expect("visit");
    assert_eq!(
        response.status().as_u16(),
        301,
        "without a preview a crawler gets the redirect"
    );
    for bad in [
        json!({"title": "x".repeat(201)}),
        json!({"description": "line\nbreak"}),
        json!({"image": "javascript:alert(1)"}),
        json!({"image": "https://127.0.0.1/i.png"}),
    ] {
        let mut body = json!({"url": "https://t.example/"});
        for (k, v) in bad.as_object().expect("object") {
            body[k] = v.clone();
        }
        let (status, answer) = node.create(body.clone()).await;
        assert_eq!(
            (status.as_u16(), answer["error"].as_str()),
            (422, Some("invalid_preview")),
            "{body}"
        );
        let (status, answer) = node.patch(&code, bad.clone()).await;
        assert_eq!(
            (status.as_u16(), answer["error"].as_str()),
            (422, Some("invalid_preview")),
            "{bad}"
        );
    }
}

crate::on_both_stores!(previews_are_shown_to_crawlers_only);
