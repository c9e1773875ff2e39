//! Webhooks: an admin key registers an endpoint; link events reach a receiver in the test
//! signed, once each, across a restart in the middle of a delivery; a receiver that fails gets
//! retries and then its endpoint is disabled; refused URLs and keys change nothing. What
//! happens to slow, hanging and re-enabled receivers and to the delivery log is in `delivery`;
//! how tenants share delivery, and the outbox bound, in `fairness`; what a tag renamed across
//! a tenant announces, in `tags`; the hourly rollup event, in `rollups`; deliveries sent again
//! by hand, in `retry`; a purge of many batches, in `purge`; a node that holds a public address refusing webhooks that lead back to
//! it, in `own_address`.

mod delivery;
mod fairness;
mod own_address;
mod purge;
mod retry;
mod revisions;
mod rollups;
mod support;
mod tags;

use crate::helpers::{Backend, Node, Stack};
use reqwest::StatusCode;
use serde_json::json;
use std::time::Duration;
use support::{
    HANG, SECRET, api, config, deliveries, log, receiver, register, registered, send, verified,
};

async fn link_events_arrive_signed_once_each_across_a_restart(backend: Backend) {
    let stack = Stack::new(backend).await;
    // The first delivery is answered slowly, so the node stops in the middle of it.
    let receiver = receiver(200, Duration::from_millis(800)).await;
    let (config, keys) = config(&stack, 10);
    let node = Node::start(config.clone()).await;
    let endpoint = registered(&node, &keys, &receiver).await;
    assert!(
        endpoint.get("secret").is_none(),
        "the secret is never shown"
    );
    let (_, link) = node
        .create_with_key(json!({ "url": "https://example.com/hooked" }), &keys.own)
        .await;
    let code = link["code"].as_str().expect("code").to_string();
    // Another tenant's link tells this endpoint nothing.
    node.create_with_key(json!({ "url": "https://example.com/theirs" }), &keys.other)
        .await;
    let first = testkit::wait_until(Duration::from_secs(10), || async {
        !receiver.requests().is_empty()
    })
    .await;
    assert!(first, "the first event never arrived");
    // Change and delete the link, then stop while the first delivery is still being answered.
    let patched = node
        .client
        .patch(format!("{}/api/v1/links/{code}", node.base))
        .bearer_auth(&keys.own)
        .header("content-type", "application/merge-patch+json")
        .body(r#"{"tags": ["hooked"]}"#)
        .send()
        .await
        .expect("patch");
    assert_eq!(patched.status(), StatusCode::OK);
    let (status, _) = api(
        &node,
        reqwest::Method::DELETE,
        &format!("/links/{code}"),
        &keys.own,
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    node.stop().await;
    let node = Node::start(config).await;
    let id = endpoint["id"].as_i64().expect("id");
    let delivered = testkit::wait_until(Duration::from_secs(15), || async {
        let (_, log) = api(
            &node,
            reqwest::Method::GET,
            &format!("/webhooks/{id}/deliveries"),
            &keys.admin,
        )
        .await;
        log["deliveries"]
            .as_array()
            .is_some_and(|d| d.len() == 3 && d.iter().all(|e| e["state"] == "delivered"))
    })
    .await;
    let (_, log) = api(
        &node,
        reqwest::Method::GET,
        &format!("/webhooks/{id}/deliveries"),
        &keys.admin,
    )
    .await;
    assert!(delivered, "{log}");
    let mut events = verified(&receiver);
    assert_eq!(events.len(), 3, "each event arrives once: {events:?}");
    // Event numbers follow the order of the changes.
    events.sort();
    let kinds: Vec<(&str, &str)> = events
        .iter()
        .map(|(_, k, c)| (k.as_str(), c.as_str()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("link.created", code.as_str()),
            ("link.updated", code.as_str()),
            ("link.deleted", code.as_str()),
        ],
        "every event once"
    );
    let mut ids: Vec<i64> = events.iter().map(|(id, ..)| *id).collect();
    ids.dedup();
    assert_eq!(ids.len(), 3);
}
on_both_stores!(link_events_arrive_signed_once_each_across_a_restart);

/// A node that stops while a receiver holds an attempt past the stop's grace gives the attempt
/// up unrecorded and lets its endpoint go: the next node delivers the event at once, rather
/// than after the claim's lease runs out, and no failure is counted against the endpoint.
async fn an_attempt_held_at_stop_is_let_go_and_delivered_by_the_next_node(backend: Backend) {
    let stack = Stack::new(backend).await;
    // The first request is held for a minute, past the attempt's own timeout (20 s) too.
    let receiver = receiver(200, Duration::from_secs(60)).await;
    let (mut config, keys) = config(&stack, 10);
    config.webhooks.webhook_timeout_ms = std::num::NonZero::new(20_000).expect("non-zero");
    let node = Node::start(config.clone()).await;
    let endpoint = registered(&node, &keys, &receiver).await;
    let id = endpoint["id"].as_i64().expect("id");
    node.create_with_key(json!({ "url": "https://example.com/held" }), &keys.own)
        .await;
    let held = testkit::wait_until(Duration::from_secs(10), || async {
        receiver.requests().len() == 1
    })
    .await;
    assert!(held, "the event never reached the receiver");
    node.stop().await;

    let node = Node::start(config).await;
    let delivered = testkit::wait_until(Duration::from_secs(15), || async {
        let log = deliveries(&node, id, &keys.admin).await;
        log.len() == 1 && log[0]["state"] == "delivered"
    })
    .await;
    let log = deliveries(&node, id, &keys.admin).await;
    assert!(
        delivered,
        "the held event was not delivered by the next node: {log:?}"
    );
    assert_eq!(
        receiver.requests().len(),
        2,
        "the held attempt and the one delivered"
    );
    assert_eq!(
        log[0]["attempts"], 1,
        "the attempt given up was recorded: {log:?}"
    );
    let (_, list) = api(&node, reqwest::Method::GET, "/webhooks", &keys.admin).await;
    assert_eq!(list["webhooks"][0]["id"], id, "{list}");
    assert_eq!(list["webhooks"][0]["failures"], 0, "{list}");
}
on_both_stores!(an_attempt_held_at_stop_is_let_go_and_delivered_by_the_next_node);

async fn a_failing_receiver_gets_retries_then_its_endpoint_is_disabled(backend: Backend) {
    let stack = Stack::new(backend).await;
    let receiver = receiver(500, Duration::ZERO).await;
    let (config, keys) = config(&stack, 3);
    let node = Node::start(config).await;
    let endpoint = registered(&node, &keys, &receiver).await;
    let id = endpoint["id"].as_i64().expect("id");
    node.create_with_key(json!({ "url": "https://example.com/failing" }), &keys.own)
        .await;
    let disabled = testkit::wait_until(Duration::from_secs(15), || async {
        let (_, list) = api(&node, reqwest::Method::GET, "/webhooks", &keys.admin).await;
        !list["webhooks"][0]["disabled_at"].is_null()
    })
    .await;
    let (_, list) = api(&node, reqwest::Method::GET, "/webhooks", &keys.admin).await;
    assert!(disabled, "{list}");
    assert_eq!(list["webhooks"][0]["failures"], 3);
    // Three attempts of the same event, each signed, then no more.
    let events = verified(&receiver);
    assert_eq!(events.len(), 3, "{events:?}");
    assert!(events.iter().all(|e| e.0 == events[0].0));
    let (_, log) = api(
        &node,
        reqwest::Method::GET,
        &format!("/webhooks/{id}/deliveries"),
        &keys.admin,
    )
    .await;
    assert_eq!(
        (
            &log["deliveries"][0]["attempts"],
            &log["deliveries"][0]["last_status"],
            &log["deliveries"][0]["state"]
        ),
        (&json!(3), &json!(500), &json!("pending")),
        "{log}"
    );
}
on_both_stores!(a_failing_receiver_gets_retries_then_its_endpoint_is_disabled);

async fn a_delivery_that_keeps_failing_ends_failed_after_its_last_attempt(backend: Backend) {
    let stack = Stack::new(backend).await;
    // A receiver that refuses what it is sent, long before its endpoint would be disabled.
    let receiver = receiver(400, Duration::ZERO).await;
    let (mut config, keys) = config(&stack, 100);
    config.webhooks.webhook_max_attempts = std::num::NonZero::new(3).expect("non-zero");
    let node = Node::start(config).await;
    let endpoint = registered(&node, &keys, &receiver).await;
    let log_path = format!("/webhooks/{}/deliveries", endpoint["id"]);
    let log = || async {
        api(&node, reqwest::Method::GET, &log_path, &keys.admin)
            .await
            .1
    };
    node.create_with_key(json!({ "url": "https://example.com/refused" }), &keys.own)
        .await;
    let failed = testkit::wait_until(Duration::from_secs(15), || async {
        log().await["deliveries"][0]["state"] == "failed"
    })
    .await;
    let first = log().await;
    assert!(failed, "{first}");
    let delivery = &first["deliveries"][0];
    assert_eq!(
        (&delivery["attempts"], &delivery["last_status"]),
        (&json!(3), &json!(400)),
        "{first}"
    );
    assert!(delivery["failed_at"].is_string() && delivery["delivered_at"].is_null());
    let refused = delivery["event_id"].as_i64().expect("event id");
    let metrics = node.metrics().await;
    assert_eq!(
        crate::helpers::metric(&metrics, "shortener_webhook_deliveries_given_up_total"),
        1.0
    );
    // The endpoint goes on: the next event is delivered, and the failed one is never sent
    // again.
    receiver.answer(200);
    node.create_with_key(json!({ "url": "https://example.com/taken" }), &keys.own)
        .await;
    let delivered = testkit::wait_until(Duration::from_secs(15), || async {
        log().await["deliveries"][0]["state"] == "delivered"
    })
    .await;
    let (_, list) = api(&node, reqwest::Method::GET, "/webhooks", &keys.admin).await;
    assert!(delivered, "{}", log().await);
    assert!(list["webhooks"][0]["disabled_at"].is_null(), "{list}");
    let sent: Vec<i64> = verified(&receiver).iter().map(|e| e.0).collect();
    assert_eq!(
        sent.iter().filter(|id| **id == refused).count(),
        3,
        "{sent:?}"
    );
    assert_eq!(sent.len(), 4, "{sent:?}");
    assert_eq!(log().await["deliveries"][1]["state"], "failed");
}
on_both_stores!(a_delivery_that_keeps_failing_ends_failed_after_its_last_attempt);

async fn refused_webhook_registrations_change_nothing(backend: Backend) {
    let stack = Stack::new(backend).await;
    let (mut config, keys) = config(&stack, 10);
    config.webhooks.webhook_allow_private = false;
    let node = Node::start(config).await;
    // A public address: a name would be resolved at registration.
    let good = json!({ "tenant": "acme", "url": "https://93.184.215.14/in", "secret": SECRET });
    let cases = [
        (
            "loopback",
            json!({ "tenant": "acme", "url": "http://127.0.0.1:9/", "secret": SECRET }),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "metadata",
            json!({ "tenant": "acme", "url": "http://169.254.169.254/", "secret": SECRET }),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "private",
            json!({ "tenant": "acme", "url": "http://10.0.0.1/", "secret": SECRET }),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "metadata name",
            json!({ "tenant": "acme", "url": "http://metadata.google.internal/computeMetadata/v1/", "secret": SECRET }),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "private-use name",
            json!({ "tenant": "acme", "url": "https://db.corp.internal/hook", "secret": SECRET }),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "localhost",
            json!({ "tenant": "acme", "url": "http://localhost:9/", "secret": SECRET }),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "user info",
            json!({ "tenant": "acme", "url": "https://user:pw@hooks.example.com/", "secret": SECRET }),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "not http",
            json!({ "tenant": "acme", "url": "ftp://hooks.example.com/", "secret": SECRET }),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "short secret",
            json!({ "tenant": "acme", "url": "https://hooks.example.com/", "secret": "short" }),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "bad tenant",
            json!({ "tenant": "Not A Tenant", "url": "https://hooks.example.com/", "secret": SECRET }),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "unknown field",
            json!({ "tenant": "acme", "url": "https://hooks.example.com/", "secret": SECRET, "x": 1 }),
            StatusCode::BAD_REQUEST,
        ),
    ];
    for (case, body, status) in cases {
        let (got, answer) = register(&node, &keys.admin, body).await;
        assert_eq!(got, status, "{case}: {answer}");
        assert!(answer["error"].is_string(), "{case}: {answer}");
    }
    let (got, _) = register(&node, &keys.own, good.clone()).await;
    assert_eq!(got, StatusCode::FORBIDDEN, "a key without admin");
    let (_, list) = api(&node, reqwest::Method::GET, "/webhooks", &keys.admin).await;
    assert_eq!(list["webhooks"], json!([]), "nothing was registered");
    let (got, _) = register(&node, &keys.admin, good.clone()).await;
    assert_eq!(got, StatusCode::CREATED, "a public https URL is accepted");
    let (got, _) = api(
        &node,
        reqwest::Method::DELETE,
        "/webhooks/999999",
        &keys.admin,
    )
    .await;
    assert_eq!(got, StatusCode::NOT_FOUND);

    // A tenant has at most 25 endpoints, registrations made at once included.
    let answers =
        futures::future::join_all((0..30).map(|_| register(&node, &keys.admin, good.clone())))
            .await;
    let created = answers
        .iter()
        .filter(|(status, _)| *status == StatusCode::CREATED)
        .count();
    assert_eq!(created, 24, "{answers:?}");
    for (status, answer) in answers.iter().filter(|(s, _)| *s != StatusCode::CREATED) {
        assert_eq!(
            (*status, answer["error"].as_str()),
            (StatusCode::CONFLICT, Some("too_many_webhooks")),
            "{answer}"
        );
    }
    let (_, list) = api(&node, reqwest::Method::GET, "/webhooks", &keys.admin).await;
    let listed = list["webhooks"].as_array().expect("list").clone();
    assert_eq!(listed.len(), 25, "{list}");
    let first = listed[0]["id"].as_i64().expect("id");
    let path = format!("/webhooks/{first}");
    let (got, _) = api(&node, reqwest::Method::DELETE, &path, &keys.admin).await;
    assert_eq!(got, StatusCode::NO_CONTENT);
    let (got, _) = register(&node, &keys.admin, good).await;
    assert_eq!(got, StatusCode::CREATED, "room again after a delete");
}
on_both_stores!(refused_webhook_registrations_change_nothing);

/// This machine's name, which resolves locally (`/etc/hosts` or the system's own resolver)
/// without asking any name server.
fn own_host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .expect("host name")
        .trim()
        .to_string()
}

async fn registrations_that_delivery_would_refuse_are_refused(backend: Backend) {
    let stack = Stack::new(backend).await;
    let (mut config, keys) = config(&stack, 10);
    config.webhooks.webhook_allow_private = false;
    let node = Node::start(config).await;
    let host = own_host_name();
    let resolved: Vec<std::net::IpAddr> = tokio::net::lookup_host((host.as_str(), 0))
        .await
        .map(|found| found.map(|a| a.ip()).collect())
        .unwrap_or_default();
    assert!(
        resolved
            .iter()
            .any(|ip| ip.is_loopback() || shortener::targets::is_not_public(*ip)),
        "this test needs the machine's name {host} to resolve to a local address: {resolved:?}"
    );
    let url = |url: &str| json!({ "tenant": "acme", "url": url, "secret": SECRET });
    let cases = [
        // 6to4 of 127.0.0.1, and of a public address: a relay decides where it leads.
        (
            "6to4",
            url("http://[2002:7f00:1::]/hook"),
            "invalid_webhook_url",
        ),
        (
            "6to4 public",
            url("http://[2002:5db8:d70e::1]/hook"),
            "invalid_webhook_url",
        ),
        (
            "NAT64",
            url("http://[64:ff9b::5db8:d70e]/hook"),
            "invalid_webhook_url",
        ),
        (
            "NAT64 local-use",
            url("http://[64:ff9b:1::a00:1]/hook"),
            "invalid_webhook_url",
        ),
        (
            "Teredo",
            url("http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/hook"),
            "invalid_webhook_url",
        ),
        (
            "a name resolving to a local address",
            url(&format!("http://{host}:9/hook")),
            "invalid_webhook_url",
        ),
        (
            "unknown tenant",
            json!({ "tenant": "initech", "url": "https://93.184.215.14/in", "secret": SECRET }),
            "unknown_tenant",
        ),
    ];
    for (case, body, code) in cases {
        let (status, answer) = register(&node, &keys.admin, body).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{case}: {answer}");
        assert_eq!(answer["error"], code, "{case}: {answer}");
        assert!(
            answer["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{case}: {answer}"
        );
    }
    // A refusal of a local receiver names the setting that allows one.
    for local in [
        "http://127.0.0.1:9/hook".to_string(),
        format!("http://{host}:9/hook"),
    ] {
        let (_, answer) = register(&node, &keys.admin, url(&local)).await;
        assert!(
            answer["message"]
                .as_str()
                .is_some_and(|m| m.contains("SHORTENER_WEBHOOK_ALLOW_PRIVATE=true")),
            "{local}: {answer}"
        );
    }
    let (_, list) = api(&node, reqwest::Method::GET, "/webhooks", &keys.admin).await;
    assert_eq!(list["webhooks"], json!([]), "nothing was registered");
}
on_both_stores!(registrations_that_delivery_would_refuse_are_refused);

async fn allowing_private_endpoints_lifts_only_the_private_rule(backend: Backend) {
    let stack = Stack::new(backend).await;
    let (mut config, keys) = config(&stack, 10);
    let blocklist = stack.dir.path().join("blocklist");
    std::fs::write(&blocklist, ".blocked.example\n").expect("blocklist");
    config.redirects.blocklist_file = Some(blocklist);
    let node = Node::start(config).await;
    let (status, answer) = register(
        &node,
        &keys.admin,
        json!({ "tenant": "acme", "url": "http://127.0.0.2:9/hook", "secret": SECRET }),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    for url in [
        "https://hooks.blocked.example/in",
        "https://user:pw@hooks.example.com/",
        "ftp://hooks.example.com/",
    ] {
        let (status, answer) = register(
            &node,
            &keys.admin,
            json!({ "tenant": "acme", "url": url, "secret": SECRET }),
        )
        .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{url}: {answer}");
        assert_eq!(answer["error"], "invalid_webhook_url", "{url}: {answer}");
    }
    let (_, list) = api(&node, reqwest::Method::GET, "/webhooks", &keys.admin).await;
    assert_eq!(list["webhooks"].as_array().map(Vec::len), Some(1), "{list}");
}
on_both_stores!(allowing_private_endpoints_lifts_only_the_private_rule);
