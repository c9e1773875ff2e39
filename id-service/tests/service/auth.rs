//! Callers with tokens against a real server: who may do what, under which name, how fast;
//! every refusal leaves the ledger untouched.

use crate::helpers::tokens::{self, Caller};
use crate::helpers::{Server, allocate, authed, count_rows, lease_as};
use id_service::Config;
use proto::idalloc::v1::{DescribeNamespaceRequest, ListLeasesRequest, LookupIdRequest};
use std::time::Duration;
use testkit::TestDb;
use tonic::Code;

pub(crate) const SHORTENER: Caller = Caller::new("shortener", &["links"], &["lease"]);
pub(crate) const BILLING: Caller = Caller {
    quota: "ids_per_second = 50\nids_burst = 100\n",
    ..Caller::new("billing", &["orders"], &["allocate", "lookup"])
};
const REPORTS: Caller = Caller::new("reports", &["orders"], &["allocate"]);
pub(crate) const OPS: Caller = Caller::new("ops", &["*"], &["admin", "lookup"]);

/// A server that authenticates with a tokens file of `callers`, namespaces `links` and
/// `orders` created at start-up, auto-creation off.
pub(crate) async fn server(db: &TestDb, dir: &tempfile::TempDir, callers: &[Caller]) -> Server {
    Server::start(Config {
        tokens_file: Some(tokens::write(dir.path(), callers)),
        insecure_no_auth: false,
        auto_create_namespaces: false,
        namespaces: vec!["links".into(), "orders".into()],
        ..Config::for_tests(db.url())
    })
    .await
}

#[tokio::test]
async fn a_missing_wrong_or_unknown_token_is_unauthenticated_and_nothing_is_written() {
    let (db, dir) = (
        TestDb::create().await,
        tempfile::tempdir().expect("tempdir"),
    );
    let server = server(&db, &dir, &[SHORTENER, BILLING]).await;
    let mut client = server.client().await;
    let good = SHORTENER.token();
    let wrong = tokens::token_of("nobody");
    for (case, token) in [
        ("no token", None),
        ("unknown token", Some(wrong.as_str())),
        ("a prefix of a real token", Some(&good[..20])),
    ] {
        let status = lease_as(&mut client, token, "links", 10, "pod-1", None)
            .await
            .expect_err(case);
        assert_eq!(status.code(), Code::Unauthenticated, "{case}: {status:?}");
        let status = allocate(&mut client, token, "orders", 10)
            .await
            .expect_err(case);
        assert_eq!(status.code(), Code::Unauthenticated, "{case}: {status:?}");
    }
    // Not even a malformed request is looked at before the token is.
    let status = lease_as(&mut client, None, "Not-A-Namespace", 0, "", None)
        .await
        .expect_err("no token");
    assert_eq!(status.code(), Code::Unauthenticated);
    // A raw header that is not "Bearer <token>".
    let mut request = tonic::Request::new(proto::idalloc::v1::AllocateIdsRequest {
        namespace: "orders".into(),
        count: 1,
    });
    request
        .metadata_mut()
        .insert("authorization", good.parse().expect("ascii"));
    let status = client.allocate_ids(request).await.expect_err("no scheme");
    assert_eq!(status.code(), Code::Unauthenticated);

    let conn = db.connect().await;
    assert_eq!(
        count_rows(&conn, "id_leases").await,
        0,
        "a refused call wrote"
    );
    assert!(
        server
            .metrics()
            .await
            .contains("idservice_unauthenticated_total 8")
    );
    server.stop().await;
}

#[tokio::test]
async fn a_namespace_or_scope_the_token_does_not_cover_is_permission_denied_and_nothing_is_written()
{
    let (db, dir) = (
        TestDb::create().await,
        tempfile::tempdir().expect("tempdir"),
    );
    let server = server(&db, &dir, &[SHORTENER, BILLING, OPS]).await;
    let mut client = server.client().await;
    let mut admin = server.admin_client().await;
    let (shortener, billing, ops) = (SHORTENER.token(), BILLING.token(), OPS.token());
    let leaser = client.clone();
    let lease = |token: &str, ns: &'static str| {
        let mut client = leaser.clone();
        let token = token.to_string();
        async move { lease_as(&mut client, Some(&token), ns, 10, "pod", None).await }
    };
    let cases: Vec<(&str, Result<(), tonic::Status>)> = vec![
        (
            "lease in another namespace",
            lease(&shortener, "orders").await.map(drop),
        ),
        (
            "lease without the lease scope",
            lease(&billing, "orders").await.map(drop),
        ),
        (
            "allocate without the allocate scope",
            allocate(&mut client, Some(&shortener), "links", 5)
                .await
                .map(drop),
        ),
        (
            "allocate in another namespace",
            allocate(&mut client, Some(&billing), "links", 5)
                .await
                .map(drop),
        ),
        (
            "look up without the lookup scope",
            client
                .lookup_id(authed(
                    LookupIdRequest {
                        namespace: "links".into(),
                        id: 1,
                    },
                    Some(&shortener),
                ))
                .await
                .map(drop),
        ),
        (
            "list another namespace",
            client
                .list_leases(authed(
                    ListLeasesRequest {
                        namespace: "links".into(),
                        limit: 0,
                        before_lease_id: 0,
                    },
                    Some(&billing),
                ))
                .await
                .map(drop),
        ),
        (
            "describe without the admin scope",
            admin
                .describe_namespace(authed(
                    DescribeNamespaceRequest {
                        name: "links".into(),
                    },
                    Some(&billing),
                ))
                .await
                .map(drop),
        ),
        (
            "lease with only admin and lookup",
            lease(&ops, "links").await.map(drop),
        ),
    ];
    for (case, result) in cases {
        let status = result.expect_err(case);
        assert_eq!(status.code(), Code::PermissionDenied, "{case}: {status:?}");
    }
    let conn = db.connect().await;
    assert_eq!(
        count_rows(&conn, "id_leases").await,
        0,
        "a refused call wrote"
    );
    let metrics = server.metrics().await;
    assert!(
        metrics.contains(
            "idservice_caller_refusals_total{caller=\"shortener\",reason=\"permission_denied\"} 3"
        ),
        "{metrics}"
    );

    // What the tokens do cover works.
    lease(&shortener, "links")
        .await
        .expect("shortener leases links");
    allocate(&mut client, Some(&billing), "orders", 5)
        .await
        .expect("billing allocates orders");
    admin
        .describe_namespace(authed(
            DescribeNamespaceRequest {
                name: "orders".into(),
            },
            Some(&ops),
        ))
        .await
        .expect("ops describes any namespace");
    server.stop().await;
}

#[tokio::test]
async fn the_ledger_records_the_callers_name_before_the_instance_it_reports() {
    let (db, dir) = (
        TestDb::create().await,
        tempfile::tempdir().expect("tempdir"),
    );
    let server = server(&db, &dir, &[SHORTENER]).await;
    let mut client = server.client().await;
    let token = SHORTENER.token();
    // Whatever holder a caller sends, it cannot pass for another caller.
    for holder in ["pod-7", "billing/pod-1", "@segment/replica-1"] {
        let lease = lease_as(&mut client, Some(&token), "links", 10, holder, None)
            .await
            .expect("lease");
        assert_eq!(lease.holder, format!("shortener/{holder}"));
    }
    let conn = db.connect().await;
    let holders: Vec<String> = conn
        .query("SELECT holder FROM id_leases ORDER BY lease_id", &[])
        .await
        .expect("holders")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(
        holders,
        [
            "shortener/pod-7",
            "shortener/billing/pod-1",
            "shortener/@segment/replica-1"
        ]
    );
    // An instance that leaves no room for the caller's name is refused, and writes nothing.
    let status = lease_as(
        &mut client,
        Some(&token),
        "links",
        10,
        &"x".repeat(195),
        None,
    )
    .await
    .expect_err("too long with the prefix");
    assert_eq!(status.code(), Code::InvalidArgument);
    assert_eq!(count_rows(&conn, "id_leases").await, 3);
    server.stop().await;
}

#[tokio::test]
async fn a_caller_at_its_quota_gets_resource_exhausted_with_retry_advice_while_another_is_unaffected()
 {
    let (db, dir) = (
        TestDb::create().await,
        tempfile::tempdir().expect("tempdir"),
    );
    let server = server(&db, &dir, &[BILLING, REPORTS]).await;
    let mut client = server.client().await;
    let (billing, reports) = (BILLING.token(), REPORTS.token());
    // The bucket holds 100 IDs: the first calls pass, then the caller is refused.
    let mut granted = 0;
    let refusal = loop {
        match allocate(&mut client, Some(&billing), "orders", 25).await {
            Ok(ranges) => granted += ranges.iter().map(|(s, e)| e - s).sum::<u64>(),
            Err(status) => break status,
        }
        assert!(granted <= 200, "the quota never refused");
    };
    assert!(
        (100..=125).contains(&granted),
        "granted {granted} before the refusal"
    );
    assert_eq!(refusal.code(), Code::ResourceExhausted, "{refusal:?}");
    let retry_ms: u64 = refusal
        .metadata()
        .get("retry-after-ms")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .expect("retry-after-ms");
    assert!((1..=1000).contains(&retry_ms), "retry after {retry_ms} ms");
    assert!(refusal.metadata().get("retry-after").is_some());
    // More than the bucket can ever hold says so, as bad input without retry advice.
    let too_many = allocate(&mut client, Some(&billing), "orders", 101)
        .await
        .expect_err("above the burst");
    assert_eq!(too_many.code(), Code::InvalidArgument, "{too_many:?}");
    assert!(too_many.metadata().get("retry-after-ms").is_none());

    // Another caller in the same namespace is not slowed down at all.
    for _ in 0..20 {
        allocate(&mut client, Some(&reports), "orders", 1000)
            .await
            .expect("an unlimited caller is unaffected");
    }
    // The refused caller recovers after the advice.
    tokio::time::sleep(Duration::from_millis(retry_ms)).await;
    allocate(&mut client, Some(&billing), "orders", 1)
        .await
        .expect("allowed again after retry-after");
    let metrics = server.metrics().await;
    assert!(
        metrics.contains(
            "idservice_caller_refusals_total{caller=\"billing\",reason=\"quota_exceeded\"}"
        ),
        "{metrics}"
    );
    assert!(!metrics.contains("caller=\"reports\",reason=\"quota_exceeded\""));
    server.stop().await;
}
