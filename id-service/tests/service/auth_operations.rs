//! Token auth as an operator meets it: the tokens file reloaded on change (a bad version keeps
//! the callers in use), health and reflection open to all, and callers of missing namespaces
//! warned of at start.

use crate::auth::{BILLING, OPS, SHORTENER, server};
use crate::helpers::tokens::{self, Caller};
use crate::helpers::{allocate, lease_as};
use std::time::Duration;
use testkit::TestDb;
use tonic::Code;

#[tokio::test]
async fn the_tokens_file_is_reloaded_on_change_and_a_bad_version_keeps_the_callers_in_use() {
    let (db, dir) = (
        TestDb::create().await,
        tempfile::tempdir().expect("tempdir"),
    );
    let server = server(&db, &dir, &[SHORTENER]).await;
    let path = dir.path().join("tokens.toml");
    let mut client = server.client().await;
    let (shortener, billing) = (SHORTENER.token(), BILLING.token());
    assert_eq!(
        allocate(&mut client, Some(&billing), "orders", 1)
            .await
            .expect_err("unknown")
            .code(),
        Code::Unauthenticated
    );

    tokens::replace(&path, &tokens::toml(&[SHORTENER, BILLING]));
    let reloaded = testkit::wait_until(Duration::from_secs(10), || {
        let mut client = client.clone();
        let billing = billing.clone();
        async move {
            allocate(&mut client, Some(&billing), "orders", 1)
                .await
                .is_ok()
        }
    })
    .await;
    assert!(reloaded, "the new caller was not picked up");

    // A broken version (a duplicate name) is refused whole: both callers keep working.
    let broken = format!(
        "{}{}",
        tokens::toml(&[SHORTENER, BILLING]),
        tokens::toml(&[SHORTENER])
    );
    tokens::replace(&path, &broken);
    let refused = testkit::wait_until(Duration::from_secs(10), || async {
        server
            .metrics()
            .await
            .contains("idservice_tokens_reloads_total{outcome=\"error\"} 1")
    })
    .await;
    assert!(refused, "the broken file was not looked at");
    allocate(&mut client, Some(&billing), "orders", 1)
        .await
        .expect("billing still works");
    lease_as(&mut client, Some(&shortener), "links", 5, "pod", None)
        .await
        .expect("shortener still works");

    // Removing a caller takes effect as soon as a good file says so.
    tokens::replace(&path, &tokens::toml(&[BILLING]));
    let removed = testkit::wait_until(Duration::from_secs(10), || {
        let mut client = client.clone();
        let shortener = shortener.clone();
        async move {
            matches!(
                lease_as(&mut client, Some(&shortener), "links", 5, "pod", None).await,
                Err(status) if status.code() == Code::Unauthenticated
            )
        }
    })
    .await;
    assert!(removed, "the removed caller still works");
    server.stop().await;
}

#[tokio::test]
async fn health_and_reflection_need_no_token() {
    let (db, dir) = (
        TestDb::create().await,
        tempfile::tempdir().expect("tempdir"),
    );
    let server = server(&db, &dir, &[SHORTENER]).await;
    let mut health = tonic_health::pb::health_client::HealthClient::new(crate::helpers::channel(
        server.grpc_addr,
    ));
    health
        .check(tonic_health::pb::HealthCheckRequest {
            service: String::new(),
        })
        .await
        .expect("health needs no token");
    let openapi = reqwest::get(format!("http://{}/v1/openapi.json", server.http_addr))
        .await
        .expect("openapi");
    assert_eq!(openapi.status(), 200);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_of_missing_namespaces_are_warned_of_at_start_and_reload_and_refused_leases_are_logged_with_their_reason_and_caller()
 {
    use crate::helpers::process::Process;
    const ORDERS: Caller = Caller::new("orders-svc", &["orders", "links"], &["lease"]);
    let (db, dir) = (
        TestDb::create().await,
        tempfile::tempdir().expect("tempdir"),
    );
    let file = tokens::write(dir.path(), &[SHORTENER, ORDERS, OPS]);
    let service = Process::spawn(
        &[],
        &[
            ("DATABASE_URL", db.url().to_string()),
            ("ID_SERVICE_TOKENS_FILE", file.display().to_string()),
            ("ID_SERVICE_NAMESPACES", "links".into()),
        ],
    )
    .await;
    let warnings: Vec<String> = service
        .log()
        .lines()
        .filter(|l| l.contains("namespaces that do not exist"))
        .map(str::to_string)
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    for wanted in ["caller=orders-svc", "ID_SERVICE_NAMESPACES"] {
        assert!(warnings[0].contains(wanted), "{wanted}: {}", warnings[0]);
    }
    assert!(
        warnings[0].ends_with("namespaces=orders"),
        "{}",
        warnings[0]
    );

    // Refusals of a lease are logged with their reason, once per kind every 10 s.
    let mut client = crate::helpers::client(service.grpc_addr).await;
    let token = ORDERS.token();
    for _ in 0..3 {
        let refused = lease_as(&mut client, Some(&token), "orders", 10, "a", None)
            .await
            .expect_err("no such namespace");
        assert_eq!(refused.code(), Code::NotFound);
    }
    let refused = lease_as(&mut client, None, "links", 10, "a", None)
        .await
        .expect_err("no token");
    assert_eq!(refused.code(), Code::Unauthenticated);
    // A namespace outside the caller's list: refused by the gate, logged once with who asked.
    for _ in 0..3 {
        let refused = lease_as(&mut client, Some(&token), "billing", 10, "a", None)
            .await
            .expect_err("not its namespace");
        assert_eq!(refused.code(), Code::PermissionDenied);
    }
    // A scope the caller lacks, on a method that grants nothing: logged too, with who asked.
    let mut admin = proto::idalloc::v1::namespace_admin_client::NamespaceAdminClient::new(
        crate::helpers::channel(service.grpc_addr),
    );
    for _ in 0..2 {
        let refused = admin
            .list_namespaces(crate::helpers::authed(
                proto::idalloc::v1::ListNamespacesRequest::default(),
                Some(&token),
            ))
            .await
            .expect_err("no admin scope");
        assert_eq!(refused.code(), Code::PermissionDenied);
    }
    lease_as(&mut client, Some(&token), "links", 10, "a", None)
        .await
        .expect("a lease of an existing namespace");
    let log = service.log();
    let refusals = |reason: &str| {
        log.lines()
            .filter(|l| l.contains("call refused") && l.contains(&format!("reason=\"{reason}\"")))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let not_found = refusals("not_found");
    assert_eq!(not_found.len(), 1, "logged once in 10 s: {log}");
    for wanted in [
        "LeaseBlock",
        "orders-svc",
        "namespace orders does not exist",
    ] {
        assert!(not_found[0].contains(wanted), "{wanted}: {}", not_found[0]);
    }
    assert_eq!(refusals("unauthenticated").len(), 1, "{log}");
    let denied = refusals("permission_denied");
    assert_eq!(denied.len(), 2, "once per method in 10 s: {log}");
    for (line, method) in denied.iter().zip(["LeaseBlock", "ListNamespaces"]) {
        assert!(line.contains("caller=\"orders-svc\""), "{line}");
        assert!(line.contains(method), "{line}");
    }
    assert_eq!(
        log.lines()
            .filter(|l| l.contains("orders-svc") && l.contains("billing"))
            .count(),
        1,
        "a refusal is logged once, by the throttled line: {log}"
    );

    // A caller a reloaded file adds is warned of as one at start is.
    const PAYMENTS: Caller = Caller::new("payments-svc", &["payments"], &["lease"]);
    tokens::replace(&file, &tokens::toml(&[SHORTENER, ORDERS, OPS, PAYMENTS]));
    let warned = testkit::wait_until(Duration::from_secs(10), || async {
        service.log().lines().any(|l| {
            l.contains("namespaces that do not exist")
                && l.contains("caller=payments-svc")
                && l.ends_with("namespaces=payments")
        })
    })
    .await;
    assert!(warned, "no warning for the new caller: {}", service.log());
    service.terminate().await;
}
