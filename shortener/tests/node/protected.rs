//! Password-protected links: the form for GET, HEAD and bots, the redirect only for a POST of
//! the right password, attempts limited, and the target never in any other answer.

use crate::helpers::{BROWSER, Backend, Stack};
use reqwest::StatusCode;
use serde_json::json;

const TARGET: &str = "https://example.com/secret-target-7f3a";

/// Every byte of an answer: status line, headers and body.
async fn whole(response: reqwest::Response) -> (StatusCode, String) {
    let status = response.status();
    let mut text = String::new();
    for (name, value) in response.headers() {
        text.push_str(&format!("{name}: {}\n", value.to_str().unwrap_or("")));
    }
    text.push_str(&response.text().await.unwrap_or_default());
    (status, text)
}

async fn protected_links_answer_their_target_only_for_the_right_password(backend: Backend) {
    let stack = Stack::new(backend).await;
    let mut config = stack.config("protected");
    config.password_attempts = 30;
    let node = crate::helpers::Node::start(config).await;
    let (status, link) = node
        .create(json!({ "url": TARGET, "password": "correct horse" }))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{link}");
    let code = link["code"].as_str().expect("code").to_string();
    assert_eq!(link["protected"], true);
    assert!(!link.to_string().contains("argon2") && !link.to_string().contains("correct horse"));

    let post = |body: String, content_type: &'static str, agent: &'static str| {
        node.client
            .post(format!("{}/{code}", node.base))
            .header("content-type", content_type)
            .header("user-agent", agent)
            .body(body)
            .send()
    };
    let form = "application/x-www-form-urlencoded";
    // Twice each, so the second answer comes from the cache.
    for round in 0..2 {
        for (method, agent) in [
            ("GET", BROWSER),
            ("GET", "Googlebot/2.1"),
            ("HEAD", BROWSER),
        ] {
            let request = if method == "GET" {
                node.client.get(format!("{}/{code}", node.base))
            } else {
                node.client.head(format!("{}/{code}", node.base))
            };
            let response = request
                .header("user-agent", agent)
                .send()
                .await
                .expect("send");
            assert!(response.headers().get("location").is_none());
            assert_eq!(response.headers()["cache-control"], "no-store");
            assert!(
                response.headers()["content-security-policy"]
                    .to_str()
                    .expect("csp")
                    .contains("default-src 'none'")
            );
            let (status, text) = whole(response).await;
            assert_eq!(status, StatusCode::OK, "{method} {agent} round {round}");
            assert!(
                !text.contains(TARGET),
                "{method} {agent} showed the target: {text}"
            );
            if method == "GET" {
                assert!(text.contains("name=\"password\""), "the form");
            }
        }
        let over_long = format!("password={}", "x".repeat(300));
        for (body, content_type, status) in [
            ("password=wrong".to_string(), form, StatusCode::FORBIDDEN),
            ("password=".to_string(), form, StatusCode::FORBIDDEN),
            ("nothing=here".to_string(), form, StatusCode::FORBIDDEN),
            (over_long, form, StatusCode::FORBIDDEN),
            (
                "password=correct+horse".to_string(),
                "text/plain",
                StatusCode::FORBIDDEN,
            ),
            (
                "password=correct+horse".to_string() + &"&x=y".repeat(2000),
                form,
                StatusCode::PAYLOAD_TOO_LARGE,
            ),
        ] {
            let (got, text) = whole(
                post(body.clone(), content_type, BROWSER)
                    .await
                    .expect("send"),
            )
            .await;
            assert_eq!(got, status, "{body:.40} {content_type}");
            assert!(
                !text.contains(TARGET),
                "a refused password showed the target"
            );
        }
        let right = post("password=correct+horse".into(), form, BROWSER)
            .await
            .expect("send");
        assert_eq!(right.status(), StatusCode::FOUND);
        assert_eq!(right.headers()["location"], TARGET);
    }
    // The password is never returned, and its changes are recorded without it.
    let (_, got) = node.get(&code).await;
    assert_eq!(got["protected"], true);
    assert!(!got.to_string().contains("argon2"));
    assert_eq!(
        node.patch(&code, json!({ "password": "new one" })).await.0,
        StatusCode::OK
    );
    assert_eq!(
        post("password=correct+horse".into(), form, BROWSER)
            .await
            .expect("send")
            .status(),
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        post("password=new+one".into(), form, BROWSER)
            .await
            .expect("send")
            .status(),
        StatusCode::FOUND
    );
    assert_eq!(
        node.patch(&code, json!({ "password": null })).await.1["protected"],
        false
    );
    let open = node
        .client
        .get(format!("{}/{code}", node.base))
        .header("user-agent", BROWSER)
        .send()
        .await
        .expect("send");
    assert_eq!(
        open.headers()["location"],
        TARGET,
        "without a password it redirects"
    );
    let (_, history) = node.history(&code).await;
    let text = history.to_string();
    assert!(
        !text.contains("argon2") && !text.contains("new one") && !text.contains("correct horse"),
        "{text}"
    );
    assert_eq!(history["events"][0]["change"]["password"]["new"], "(set)");
    // A link without a password takes no POST.
    assert_eq!(
        post("password=x".into(), form, BROWSER)
            .await
            .expect("send")
            .status(),
        StatusCode::METHOD_NOT_ALLOWED
    );

    // Bad passwords are refused at create and patch; a password cannot go with dedup.
    for (body, error) in [
        (json!({ "url": TARGET, "password": "" }), "invalid_password"),
        (
            json!({ "url": TARGET, "password": "x".repeat(257) }),
            "invalid_password",
        ),
        (
            json!({ "url": TARGET, "password": "a\u{7}b" }),
            "invalid_password",
        ),
        (json!({ "url": TARGET, "password": 5 }), "invalid_json"),
        (
            json!({ "url": TARGET, "password": "p", "dedup": true }),
            "conflicting_options",
        ),
    ] {
        let (_, answer) = node.create(body.clone()).await;
        assert_eq!(answer["error"], error, "{body}");
    }
    assert_eq!(
        node.patch(&code, json!({ "password": "" })).await.1["error"],
        "invalid_password"
    );
}
on_both_stores!(protected_links_answer_their_target_only_for_the_right_password);

async fn password_attempts_are_limited_per_client_and_code(backend: Backend) {
    let stack = Stack::new(backend).await;
    let mut config = stack.config("attempts");
    config.password_attempts = 3;
    let node = crate::helpers::Node::start(config).await;
    let make = || async {
        node.create(json!({ "url": TARGET, "password": "pw" }))
            .await
            .1["code"]
            .as_str()
            .expect("code")
            .to_string()
    };
    let (first, second) = (make().await, make().await);
    let post = |code: String, password: &'static str| {
        node.client
            .post(format!("{}/{code}", node.base))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!("password={password}"))
            .send()
    };
    for _ in 0..3 {
        assert_eq!(
            post(first.clone(), "no").await.expect("send").status(),
            StatusCode::FORBIDDEN
        );
    }
    let limited = post(first.clone(), "pw").await.expect("send");
    assert_eq!(
        limited.status(),
        StatusCode::TOO_MANY_REQUESTS,
        "even the right password waits"
    );
    assert!(limited.headers().contains_key("retry-after"));
    let (_, text) = whole(limited).await;
    assert!(!text.contains(TARGET));
    // Another code's attempts are its own.
    assert_eq!(
        post(second, "pw").await.expect("send").status(),
        StatusCode::FOUND
    );
}
on_both_stores!(password_attempts_are_limited_per_client_and_code);
