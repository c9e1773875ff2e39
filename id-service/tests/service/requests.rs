//! The gRPC contract: bad input, look-ups and paging, and the optional token.

use crate::helpers::{Server, lease};
use id_service::Config;
use proto::idalloc::v1::{ListLeasesRequest, LookupIdRequest};
use testkit::TestDb;
use tonic::Code;

async fn count(db: &tokio_postgres::Client, table: &str) -> i64 {
    db.query_one(&format!("SELECT count(*) FROM {table}"), &[])
        .await
        .expect("count rows")
        .get(0)
}

enum Call {
    Lease(&'static str, u64, String),
    Lookup(&'static str, u64),
    List(&'static str, u32),
}

#[tokio::test]
async fn malformed_requests_are_refused_with_a_clear_status_and_nothing_is_written() {
    let db = TestDb::create().await;
    let config = Config {
        max_block: 1000,
        ..Config::for_tests(db.url())
    };
    let server = Server::start(config).await;
    let mut client = server.client().await;
    let ok = || "pod-1".to_string();
    let table: Vec<(&str, Call, Code)> = vec![
        (
            "empty namespace",
            Call::Lease("", 10, ok()),
            Code::InvalidArgument,
        ),
        (
            "upper-case namespace",
            Call::Lease("Links", 10, ok()),
            Code::InvalidArgument,
        ),
        (
            "namespace starts with a digit",
            Call::Lease("1links", 10, ok()),
            Code::InvalidArgument,
        ),
        (
            "namespace with a dash",
            Call::Lease("my-links", 10, ok()),
            Code::InvalidArgument,
        ),
        (
            "namespace with a space",
            Call::Lease("links ", 10, ok()),
            Code::InvalidArgument,
        ),
        (
            "64-character namespace",
            Call::Lease(
                "a123456789012345678901234567890123456789012345678901234567890123",
                10,
                ok(),
            ),
            Code::InvalidArgument,
        ),
        (
            "size 0",
            Call::Lease("links", 0, ok()),
            Code::InvalidArgument,
        ),
        (
            "size above the maximum",
            Call::Lease("links", 1001, ok()),
            Code::InvalidArgument,
        ),
        (
            "huge size",
            Call::Lease("links", u64::MAX, ok()),
            Code::InvalidArgument,
        ),
        (
            "missing holder",
            Call::Lease("links", 10, String::new()),
            Code::InvalidArgument,
        ),
        (
            "over-long holder",
            Call::Lease("links", 10, "h".repeat(201)),
            Code::InvalidArgument,
        ),
        (
            "holder with a newline",
            Call::Lease("links", 10, "pod\n1".into()),
            Code::InvalidArgument,
        ),
        (
            "holder with a Unicode line separator",
            Call::Lease("links", 10, "pod\u{2028}lease granted holder=admin".into()),
            Code::InvalidArgument,
        ),
        (
            "holder with a right-to-left override",
            Call::Lease("links", 10, "pod\u{202E}nimda".into()),
            Code::InvalidArgument,
        ),
        (
            "lookup with a bad namespace",
            Call::Lookup("Links", 1),
            Code::InvalidArgument,
        ),
        (
            "lookup in an unknown namespace",
            Call::Lookup("links", 1),
            Code::NotFound,
        ),
        (
            "list with a bad namespace",
            Call::List("", 10),
            Code::InvalidArgument,
        ),
        (
            "list with a page above 1000",
            Call::List("links", 1001),
            Code::InvalidArgument,
        ),
        (
            "list of an unknown namespace",
            Call::List("links", 10),
            Code::NotFound,
        ),
    ];
    for (case, call, code) in table {
        let result = match call {
            Call::Lease(namespace, size, holder) => {
                lease(&mut client, namespace, size, &holder).await.map(drop)
            }
            Call::Lookup(namespace, id) => client
                .lookup_id(LookupIdRequest {
                    namespace: namespace.into(),
                    id,
                })
                .await
                .map(drop),
            Call::List(namespace, limit) => client
                .list_leases(ListLeasesRequest {
                    namespace: namespace.into(),
                    limit,
                    before_lease_id: 0,
                })
                .await
                .map(drop),
        };
        let status = result.expect_err(case);
        assert_eq!(status.code(), code, "{case}: {status:?}");
        assert!(!status.message().is_empty(), "{case}: no message");
    }
    let conn = db.connect().await;
    assert_eq!(
        count(&conn, "id_leases").await,
        0,
        "a refused call wrote a lease"
    );
    assert_eq!(
        count(&conn, "id_namespaces").await,
        0,
        "a refused call made a namespace"
    );

    // Unknown IDs in a namespace that exists: NOT_FOUND, and still only the one lease.
    let granted = lease(&mut client, "links", 10, "pod-1")
        .await
        .expect("lease");
    for id in [0, granted.end, granted.end + 1_000_000, u64::MAX] {
        let status = client
            .lookup_id(LookupIdRequest {
                namespace: "links".into(),
                id,
            })
            .await
            .expect_err("no lease holds this ID");
        assert_eq!(status.code(), Code::NotFound, "id {id}: {status:?}");
    }
    assert_eq!(count(&conn, "id_leases").await, 1);
    server.stop().await;
}

#[tokio::test]
async fn lookups_find_the_lease_holding_an_id_and_lists_page_newest_first() {
    let db = TestDb::create().await;
    let server = Server::start(Config::for_tests(db.url())).await;
    let mut client = server.client().await;
    let mut granted = Vec::new();
    for i in 0..120u64 {
        let holder = format!("pod-{}", i % 3);
        granted.push(
            lease(&mut client, "links", 1 + i % 5, &holder)
                .await
                .expect("lease"),
        );
    }
    let other = lease(&mut client, "other", 50, "pod-x")
        .await
        .expect("lease");

    for g in granted.iter().step_by(17) {
        for id in [g.start, g.end - 1] {
            let found = client
                .lookup_id(LookupIdRequest {
                    namespace: "links".into(),
                    id,
                })
                .await
                .expect("lookup")
                .into_inner();
            assert_eq!(&found, g, "lookup of {id}");
            assert!(found.leased_at.is_some());
        }
    }
    // Namespaces are independent: the same ID belongs to a different lease in each.
    let found = client
        .lookup_id(LookupIdRequest {
            namespace: "other".into(),
            id: other.start,
        })
        .await
        .expect("lookup")
        .into_inner();
    assert_eq!(found.lease_id, other.lease_id);

    let page = |limit, before_lease_id| ListLeasesRequest {
        namespace: "links".into(),
        limit,
        before_lease_id,
    };
    let first = client
        .list_leases(page(0, 0))
        .await
        .expect("list")
        .into_inner();
    assert_eq!(first.leases.len(), 100, "the default page is 100");
    let newest: Vec<u64> = granted.iter().rev().map(|l| l.lease_id).collect();
    let listed: Vec<u64> = first.leases.iter().map(|l| l.lease_id).collect();
    assert_eq!(listed, newest[..100]);
    let last = *listed.last().expect("a full page");
    let second = client
        .list_leases(page(1000, last))
        .await
        .expect("list")
        .into_inner();
    let listed: Vec<u64> = second.leases.iter().map(|l| l.lease_id).collect();
    assert_eq!(listed, newest[100..]);
    let one = client
        .list_leases(page(1, 0))
        .await
        .expect("list")
        .into_inner();
    assert_eq!(one.leases.len(), 1);
    assert_eq!(one.leases[0], *granted.last().expect("leases"));
    server.stop().await;
}
