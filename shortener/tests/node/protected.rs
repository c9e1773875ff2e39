//! Password-protected links: the form for GET, HEAD and bots, the target only in the answer
//! to a POST of the right password, attempts limited, password checks bounded per node, and the
//! target never in any other answer.

use crate::helpers::{BROWSER, Backend, Node, Stack};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

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

/// Asserts `response` is the answer to the right password: a `200` page, never stored, under
/// the form's policy, that continues to `target` (as HTML-escaped) by a refresh and a link of
/// its own, not by a redirect of the form's submission.
async fn assert_continues(response: reqwest::Response, target: &str) {
    assert_eq!(response.status(), StatusCode::OK);
    assert!(response.headers().get("location").is_none());
    assert_eq!(response.headers()["cache-control"], "no-store");
    let csp = response.headers()["content-security-policy"]
        .to_str()
        .expect("csp")
        .to_string();
    assert!(
        csp.contains("default-src 'none'") && csp.contains("form-action 'self'"),
        "{csp}"
    );
    let page = response.text().await.expect("page");
    assert!(
        page.contains(&format!(
            "<meta http-equiv=\"refresh\" content=\"0;url={target}\">"
        )),
        "{page}"
    );
    assert!(page.contains(&format!("href=\"{target}\"")), "{page}");
}

async fn protected_links_answer_their_target_only_for_the_right_password(backend: Backend) {
    let stack = Stack::new(backend).await;
    let mut config = stack.config("protected");
    config.access.password_attempts = 30;
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
    let mut lengths = Vec::new();
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
            if agent == BROWSER {
                lengths.push(response.headers().get("content-length").cloned());
            }
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
        // HEAD answers the headers GET gets, its length included.
        assert!(lengths.iter().all(Option::is_some), "{lengths:?}");
        assert_eq!(lengths[0], lengths[1], "GET and HEAD: {lengths:?}");
        let over_long = format!("password={}", "x".repeat(300));
        for (body, content_type, status) in [
            ("password=wrong".to_string(), form, StatusCode::FORBIDDEN),
            ("password=".to_string(), form, StatusCode::FORBIDDEN),
            ("nothing=here".to_string(), form, StatusCode::FORBIDDEN),
            (over_long, form, StatusCode::FORBIDDEN),
            (
                "password=correct+horse".to_string(),
                "text/plain",
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
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
        assert_continues(right, TARGET).await;
    }
    // Each unlock counted a human visit; the forms counted nothing.
    let counted = testkit::wait_until(Duration::from_secs(10), || async {
        node.get(&code).await.1["clicks"]["human"] == 2
    })
    .await;
    assert!(counted, "clicks: {}", node.get(&code).await.1["clicks"]);
    // A client that asks for JSON gets the target, or its refusal, as JSON.
    let post_json = |password: &str| {
        node.client
            .post(format!("{}/{code}", node.base))
            .header("content-type", form)
            .header("accept", "application/json")
            .body(format!("password={password}"))
            .send()
    };
    let right = post_json("correct+horse").await.expect("send");
    assert_eq!(right.status(), StatusCode::OK);
    assert_eq!(right.headers()["cache-control"], "no-store");
    assert!(right.headers().contains_key("content-security-policy"));
    assert_eq!(
        right.json::<Value>().await.expect("json"),
        json!({ "url": TARGET })
    );
    let wrong = post_json("wrong").await.expect("send");
    assert_eq!(wrong.status(), StatusCode::FORBIDDEN);
    let wrong = wrong.json::<Value>().await.expect("json");
    assert_eq!(wrong["error"], "wrong_password", "{wrong}");
    assert!(!wrong.to_string().contains(TARGET));
    // A target's HTML specials are escaped in the page.
    let (_, query) = node
        .create(json!({ "url": "https://example.com/p?a=1&b=2", "password": "pw" }))
        .await;
    let query_code = query["code"].as_str().expect("code");
    assert_continues(
        node.client
            .post(format!("{}/{query_code}", node.base))
            .header("content-type", form)
            .body("password=pw")
            .send()
            .await
            .expect("send"),
        "https://example.com/p?a=1&amp;b=2",
    )
    .await;
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
    assert_continues(
        post("password=new+one".into(), form, BROWSER)
            .await
            .expect("send"),
        TARGET,
    )
    .await;
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
    config.access.password_attempts = 3;
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
    assert_continues(post(second, "pw").await.expect("send"), TARGET).await;
}
on_both_stores!(password_attempts_are_limited_per_client_and_code);

/// A password sent as anything but a form (JSON, say, as the JSON answers invite) is told how
/// to send it, `415`, without counting as an attempt: the right password as a form still goes
/// through after more such requests than the attempt budget.
async fn a_password_not_sent_as_a_form_is_no_attempt(backend: Backend) {
    let stack = Stack::new(backend).await;
    let mut config = stack.config("not-a-form");
    config.access.password_attempts = 2;
    let node = crate::helpers::Node::start(config).await;
    let (_, made) = node
        .create(json!({ "url": TARGET, "password": "pw" }))
        .await;
    let code = made["code"].as_str().expect("code").to_string();
    let bodies: [(Option<&str>, &str); 4] = [
        (Some("application/json"), r#"{"password":"pw"}"#),
        (Some("text/plain"), "password=pw"),
        (Some("multipart/form-data; boundary=x"), "--x--"),
        (None, "password=pw"),
    ];
    for (content_type, body) in bodies {
        let mut request = node
            .client
            .post(format!("{}/{code}", node.base))
            .header("accept", "application/json")
            .body(body);
        if let Some(content_type) = content_type {
            request = request.header("content-type", content_type);
        }
        let answer = request.send().await.expect("send");
        assert_eq!(
            answer.status(),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "{content_type:?}"
        );
        let answer: Value = answer.json().await.expect("json");
        assert_eq!(answer["error"], "unsupported_media_type", "{answer}");
        assert!(
            answer["message"]
                .as_str()
                .is_some_and(|m| m.contains("application/x-www-form-urlencoded")),
            "{answer}"
        );
    }
    let form = node
        .client
        .post(format!("{}/{code}", node.base))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("password=pw")
        .send()
        .await
        .expect("send");
    assert_continues(form, TARGET).await;
}
on_both_stores!(a_password_not_sent_as_a_form_is_no_attempt);

/// A client whose requests come from `address` (any of 127.0.0.0/8 reaches the node).
fn client_from(address: IpAddr) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(address)
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_guesses_is_refused_at_once_while_a_user_gets_through() {
    let stack = Stack::new(Backend::Sqlite).await;
    let mut config = stack.config("flood");
    // Only the node's pool of checks stands in the flood's way.
    config.access.password_attempts = 100_000;
    let node = Node::start(config).await;
    let (status, link) = node
        .create(json!({ "url": TARGET, "password": "the user's own" }))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{link}");
    let url = format!("{}/{}", node.base, link["code"].as_str().expect("code"));

    // Wrong guesses from 8 addresses, 3 at a time each: more than the pool holds. Each task
    // stops when told, after 300 guesses, or after 30 s.
    let stop = Arc::new(AtomicBool::new(false));
    let (busy, wrong) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let unexpected = Arc::new(Mutex::new(Vec::new()));
    let mut flood = Vec::new();
    for last in 10..18u8 {
        let client = client_from(IpAddr::from([127, 0, 0, last]));
        for _ in 0..3 {
            let (client, url, stop) = (client.clone(), url.clone(), Arc::clone(&stop));
            let (busy, wrong, unexpected) = (
                Arc::clone(&busy),
                Arc::clone(&wrong),
                Arc::clone(&unexpected),
            );
            flood.push(tokio::spawn(async move {
                let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
                for _ in 0..300 {
                    if stop.load(Ordering::SeqCst) || tokio::time::Instant::now() > deadline {
                        break;
                    }
                    let Ok(response) = client
                        .post(&url)
                        .header("content-type", "application/x-www-form-urlencoded")
                        .body("password=a+guess")
                        .send()
                        .await
                    else {
                        unexpected
                            .lock()
                            .expect("lock")
                            .push("send failed".to_string());
                        continue;
                    };
                    let status = response.status();
                    let retry_after = response.headers().get("retry-after").cloned();
                    let text = response.text().await.unwrap_or_default();
                    match status {
                        StatusCode::TOO_MANY_REQUESTS
                            if retry_after.is_some()
                                && text.contains("Too many passwords are being checked") =>
                        {
                            busy.fetch_add(1, Ordering::SeqCst);
                        }
                        StatusCode::FORBIDDEN => {
                            wrong.fetch_add(1, Ordering::SeqCst);
                        }
                        other => unexpected
                            .lock()
                            .expect("lock")
                            .push(format!("{other}: {text:.200}")),
                    }
                }
            }));
        }
    }
    let flooding = testkit::wait_until(Duration::from_secs(20), || async {
        busy.load(Ordering::SeqCst) >= 5 && wrong.load(Ordering::SeqCst) >= 5
    })
    .await;
    assert!(
        flooding,
        "the flood was never refused: {} refused, {} checked, others {:?}",
        busy.load(Ordering::SeqCst),
        wrong.load(Ordering::SeqCst),
        unexpected.lock().expect("lock")
    );

    // Meanwhile an ordinary user's right password goes through, well within a deadline.
    let user = client_from(IpAddr::from([127, 0, 0, 9]));
    let answer = tokio::time::timeout(
        Duration::from_secs(5),
        user.post(&url)
            .header("content-type", "application/x-www-form-urlencoded")
            .body("password=the+user%27s+own")
            .send(),
    )
    .await
    .expect("the user's unlock took longer than 5 s under the flood")
    .expect("send");
    let still_flooding = !flood.iter().all(|task| task.is_finished());
    stop.store(true, Ordering::SeqCst);
    for task in flood {
        task.await.expect("flood task");
    }
    assert!(still_flooding, "the flood ended before the user's unlock");
    assert_continues(answer, TARGET).await;
    assert!(
        unexpected.lock().expect("lock").is_empty(),
        "{:?}",
        unexpected.lock().expect("lock")
    );
    let metrics = node.metrics().await;
    assert!(
        crate::helpers::metric(
            &metrics,
            "shortener_rate_limited_total{limit=\"password_checks\"}"
        ) >= 5.0,
        "the refusals were not counted"
    );
}
