//! AllocateIds over gRPC and through the Rust client: exactly the IDs asked for, never twice,
//! covered by the ledger; bad input refused with a clear status and nothing written. The same
//! contract over JSON is in `allocate_json`, on the same set-up ([`secured`]).

use crate::helpers::tokens::{self, Caller};
use crate::helpers::{
    Server, allocate, assert_ledger_covers, assert_ranges_disjoint, count_rows, ledger_overlaps,
};
use id_client::{AllocateClient, AllocateClientConfig, AllocateError};
use id_service::Config;
use std::time::Duration;
use testkit::TestDb;
use tonic::Code;

pub(crate) const ORDERS: Caller = Caller::new("orders-api", &["orders"], &["allocate"]);
pub(crate) const LEASER: Caller = Caller::new("leaser", &["orders"], &["lease"]);

/// A server that authenticates [`ORDERS`] and [`LEASER`], with namespaces `orders` and `other`
/// and AllocateIds calls of at most `max_count` IDs.
pub(crate) async fn secured(db: &TestDb, dir: &tempfile::TempDir, max_count: u64) -> Server {
    Server::start(Config {
        tokens_file: Some(tokens::write(dir.path(), &[ORDERS, LEASER])),
        insecure_no_auth: false,
        auto_create_namespaces: false,
        namespaces: vec!["orders".into(), "other".into()],
        allocate_max_count: max_count,
        segment_min: max_count.max(1000),
        ..Config::for_tests(db.url())
    })
    .await
}

#[tokio::test]
async fn bad_allocate_calls_are_refused_with_a_clear_status_and_nothing_is_written() {
    let (db, dir) = (
        TestDb::create().await,
        tempfile::tempdir().expect("tempdir"),
    );
    let server = secured(&db, &dir, 100).await;
    let mut client = server.client().await;
    let token = ORDERS.token();
    let wrong = tokens::token_of("stranger");
    let cases: [(&str, Option<&str>, &str, u64, Code); 9] = [
        ("count 0", Some(&token), "orders", 0, Code::InvalidArgument),
        (
            "count above the maximum",
            Some(&token),
            "orders",
            101,
            Code::InvalidArgument,
        ),
        (
            "huge count",
            Some(&token),
            "orders",
            u64::MAX,
            Code::InvalidArgument,
        ),
        (
            "malformed namespace",
            Some(&token),
            "Orders",
            1,
            Code::InvalidArgument,
        ),
        (
            "empty namespace",
            Some(&token),
            "",
            1,
            Code::InvalidArgument,
        ),
        (
            "unknown namespace",
            Some(&token),
            "nothing",
            1,
            Code::PermissionDenied,
        ),
        (
            "namespace the token does not allow",
            Some(&token),
            "other",
            1,
            Code::PermissionDenied,
        ),
        ("no token", None, "orders", 1, Code::Unauthenticated),
        (
            "wrong token",
            Some(&wrong),
            "orders",
            1,
            Code::Unauthenticated,
        ),
    ];
    for (case, token, namespace, count, code) in cases {
        let status = allocate(&mut client, token, namespace, count)
            .await
            .expect_err(case);
        assert_eq!(status.code(), code, "{case}: {status:?}");
        assert!(!status.message().is_empty(), "{case}");
    }
    let conn = db.connect().await;
    assert_eq!(
        count_rows(&conn, "id_leases").await,
        0,
        "a refused call wrote a lease"
    );
    assert_eq!(
        count_rows(&conn, "id_namespaces").await,
        2,
        "a refused call made a namespace"
    );
    server.stop().await;
}

#[tokio::test]
async fn an_unknown_namespace_is_not_found_and_starts_nothing_when_auto_creation_is_off() {
    let db = TestDb::create().await;
    let server = Server::start(Config {
        auto_create_namespaces: false,
        ..Config::for_tests(db.url())
    })
    .await;
    let mut client = server.client().await;
    for _ in 0..3 {
        let status = allocate(&mut client, None, "typo", 5)
            .await
            .expect_err("unknown");
        assert_eq!(status.code(), Code::NotFound, "{status:?}");
    }
    let conn = db.connect().await;
    assert_eq!(count_rows(&conn, "id_namespaces").await, 0);
    assert!(
        !server
            .metrics()
            .await
            .contains("segment_ids_in_hand{namespace=\"typo\"}")
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_callers_on_two_replicas_get_distinct_ids_that_the_ledger_covers() {
    let db = TestDb::create().await;
    let config = || Config {
        segment_min: 1000,
        allocate_max_count: 500,
        ..Config::for_tests(db.url())
    };
    let replicas = [Server::start(config()).await, Server::start(config()).await];
    let mut tasks = Vec::new();
    for caller in 0..24u64 {
        let mut client = replicas[(caller % 2) as usize].client().await;
        tasks.push(tokio::spawn(async move {
            let mut got = Vec::new();
            for i in 0..60u64 {
                let count = [1, 7, 100, 499][((caller + i) % 4) as usize];
                let ranges = allocate(&mut client, None, "orders", count)
                    .await
                    .expect("allocate");
                let total: u64 = ranges.iter().map(|(s, e)| e - s).sum();
                assert_eq!(total, count, "asked {count}, got {ranges:?}");
                for pair in ranges.windows(2) {
                    assert!(
                        pair[0].1 < pair[1].0,
                        "ranges not ascending and apart: {ranges:?}"
                    );
                }
                got.extend(ranges);
            }
            got
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.expect("join a caller"));
    }
    assert_ranges_disjoint(&all);
    let conn = db.connect().await;
    assert_eq!(ledger_overlaps(&conn).await, 0);
    assert_ledger_covers(&conn, "orders", &all).await;
    // Only replicas' segments are in the ledger, under their holder.
    let holders: i64 = conn
        .query_one(
            "SELECT count(DISTINCT holder) FROM id_leases WHERE holder LIKE '@segment/%'",
            &[],
        )
        .await
        .expect("holders")
        .get(0);
    assert_eq!(holders, 1, "both test replicas are named test-replica");
    for replica in replicas {
        replica.stop().await;
    }
}

#[tokio::test]
async fn ids_per_replica_ascend_and_a_restart_never_hands_out_a_held_id_again() {
    let db = TestDb::create().await;
    let first = Server::start(Config::for_tests(db.url())).await;
    let mut client = first.client().await;
    let mut seen = Vec::new();
    for _ in 0..50 {
        seen.extend(
            allocate(&mut client, None, "orders", 37)
                .await
                .expect("allocate"),
        );
    }
    for pair in seen.windows(2) {
        assert!(
            pair[0].1 <= pair[1].0,
            "not ascending within one replica: {pair:?}"
        );
    }
    let held_until = seen.last().expect("ranges").1;
    first.stop().await;
    // The stopped replica held the rest of its segment and a spare: they are a gap.
    let conn = db.connect().await;
    let leased_until: i64 = conn
        .query_one("SELECT max(upper(ids)) FROM id_leases", &[])
        .await
        .expect("segments")
        .get(0);
    assert!(leased_until as u64 > held_until);
    let second = Server::start(Config::for_tests(db.url())).await;
    let mut client = second.client().await;
    let after = allocate(&mut client, None, "orders", 1)
        .await
        .expect("allocate");
    assert!(
        after[0].0 >= leased_until as u64,
        "{after:?} reaches into IDs the stopped replica held (up to {leased_until})"
    );
    second.stop().await;
}

#[tokio::test]
async fn the_thin_rust_client_returns_exactly_the_ids_asked_for_and_says_why_it_cannot() {
    let (db, dir) = (
        TestDb::create().await,
        tempfile::tempdir().expect("tempdir"),
    );
    let server = secured(&db, &dir, 100).await;
    let client = |token: Option<String>| {
        AllocateClient::new(&AllocateClientConfig {
            endpoints: vec![server.endpoint()],
            token,
            connect_timeout: Duration::from_secs(1),
            request_timeout: Duration::from_secs(5),
        })
        .expect("client")
    };
    let orders = client(Some(ORDERS.token()));
    let mut all = Vec::new();
    for count in [1, 50, 100, 3] {
        let blocks = orders.allocate("orders", count).await.expect("allocate");
        assert_eq!(blocks.iter().map(|b| b.len()).sum::<u64>(), count);
        all.extend(blocks.iter().map(|b| (b.start, b.end)));
    }
    assert_ranges_disjoint(&all);
    assert!(matches!(
        orders.allocate("orders", 0).await,
        Err(AllocateError::Refused(_))
    ));
    assert!(matches!(
        orders.allocate("other", 1).await,
        Err(AllocateError::Refused(_))
    ));
    assert!(matches!(
        client(None).allocate("orders", 1).await,
        Err(AllocateError::Refused(_))
    ));
    server.stop().await;
}
