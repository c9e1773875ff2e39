//! Invariant I1 across replicas: many id-service processes on one database, many callers; and
//! a caller's quota holds for all replicas together.

use crate::helpers::tokens::{self, Caller};
use crate::helpers::{
    Server, allocate, assert_disjoint, lease, lease_as, ledger_leases, ledger_overlaps,
};
use id_service::Config;
use proto::idalloc::v1::Lease;
use std::collections::BTreeSet;
use std::time::Instant;
use testkit::TestDb;
use tonic::Code;

const REPLICAS: usize = 3;
const CALLERS: usize = 48;
const LEASES_PER_CALLER: usize = 50;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replicas_on_one_database_never_grant_overlapping_leases_to_concurrent_callers() {
    let db = TestDb::create().await;
    // Start the replicas at the same time: migrations and namespace creation race too.
    let servers = futures::future::join_all(
        (0..REPLICAS).map(|_| Server::start(Config::for_tests(db.url()))),
    )
    .await;

    let mut tasks = Vec::new();
    for caller in 0..CALLERS {
        let mut client = servers[caller % REPLICAS].client().await;
        // Two namespaces: the same IDs may be granted once in each, never twice in one.
        let namespace = if caller % 4 == 0 { "other" } else { "links" };
        tasks.push(tokio::spawn(async move {
            let mut granted = Vec::with_capacity(LEASES_PER_CALLER);
            for i in 0..LEASES_PER_CALLER {
                let size = [1, 10, 100, 1000, 37][(caller + i) % 5];
                let holder = format!("caller-{caller}");
                granted.push(
                    lease(&mut client, namespace, size, &holder)
                        .await
                        .expect("lease"),
                );
            }
            granted
        }));
    }
    let mut replies: Vec<Lease> = Vec::new();
    for task in tasks {
        replies.extend(task.await.expect("join a caller"));
    }
    assert_eq!(replies.len(), CALLERS * LEASES_PER_CALLER);

    for namespace in ["links", "other"] {
        let of_namespace: Vec<Lease> = replies
            .iter()
            .filter(|l| l.namespace == namespace)
            .cloned()
            .collect();
        assert_disjoint(&of_namespace);
    }
    let ids: BTreeSet<u64> = replies.iter().map(|l| l.lease_id).collect();
    assert_eq!(ids.len(), replies.len(), "a lease_id was reused");

    // The ledger agrees with the replies exactly, and proves disjointness itself.
    let conn = db.connect().await;
    assert_eq!(ledger_overlaps(&conn).await, 0);
    let ledger: BTreeSet<(String, u64, u64, u64)> =
        ledger_leases(&conn).await.into_iter().collect();
    let replied: BTreeSet<(String, u64, u64, u64)> = replies
        .iter()
        .map(|l| (l.namespace.clone(), l.start, l.end, l.lease_id))
        .collect();
    assert_eq!(ledger, replied);

    for server in servers {
        server.stop().await;
    }
}

#[tokio::test]
async fn the_ledger_itself_refuses_an_overlapping_lease() {
    let db = TestDb::create().await;
    let server = Server::start(Config::for_tests(db.url())).await;
    let mut client = server.client().await;
    let granted = lease(&mut client, "links", 100, "pod")
        .await
        .expect("lease");
    let conn = db.connect().await;
    let error = conn
        .execute(
            "INSERT INTO id_leases (namespace, ids, holder) VALUES ('links', int8range($1, $2), 'x')",
            &[&(granted.start as i64 + 50), &(granted.end as i64 + 50)],
        )
        .await
        .expect_err("the EXCLUDE constraint refuses an overlap");
    assert_eq!(
        error.code(),
        Some(&tokio_postgres::error::SqlState::EXCLUSION_VIOLATION),
        "{error}"
    );
    server.stop().await;
}

#[tokio::test]
async fn an_exhausted_namespace_gives_resource_exhausted_and_never_wraps() {
    let db = TestDb::create().await;
    let config = Config {
        namespace_max: 250,
        max_block: 100,
        ..Config::for_tests(db.url())
    };
    let server = Server::start(config).await;
    let mut client = server.client().await;
    let mut granted = Vec::new();
    let status = loop {
        match lease(&mut client, "tiny", 100, "pod").await {
            Ok(lease) => granted.push(lease),
            Err(status) => break status,
        }
        assert!(granted.len() < 10, "the namespace never ran out");
    };
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
    // 1..=250 in blocks of 100: the last block is cut short at the bound.
    let ranges: Vec<(u64, u64)> = granted.iter().map(|l| (l.start, l.end)).collect();
    assert_eq!(ranges, [(1, 101), (101, 201), (201, 251)]);
    // Still exhausted, still no wrap.
    let again = lease(&mut client, "tiny", 1, "pod")
        .await
        .expect_err("exhausted");
    assert_eq!(again.code(), tonic::Code::ResourceExhausted);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callers_quota_holds_for_all_replicas_together() {
    const METERED: Caller = Caller {
        quota: "ids_per_second = 10\nids_burst = 100\n",
        ..Caller::new("metered", &["links"], &["lease", "allocate"])
    };
    let db = TestDb::create().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let file = tokens::write(dir.path(), &[METERED]);
    let config = || Config {
        tokens_file: Some(file.clone()),
        insecure_no_auth: false,
        ..Config::for_tests(db.url())
    };
    let servers = [Server::start(config()).await, Server::start(config()).await];
    let mut clients = [servers[0].client().await, servers[1].client().await];
    let token = METERED.token();
    // Blocks of 10 from both replicas in turn, leases and AllocateIds alike. Each replica's
    // own bucket holds 100: alone, each would grant 100 at once.
    let started = Instant::now();
    let mut granted = [0u64; 2];
    let mut refusal = None;
    for call in 0..40 {
        let replica = call % 2;
        let client = &mut clients[replica];
        let outcome = if call % 4 < 2 {
            lease_as(client, Some(&token), "links", 10, "pod", None)
                .await
                .map(|lease| lease.end - lease.start)
        } else {
            allocate(client, Some(&token), "links", 10)
                .await
                .map(|ranges| ranges.iter().map(|(s, e)| e - s).sum())
        };
        match outcome {
            Ok(ids) => granted[replica] += ids,
            Err(status) => {
                refusal = Some(status);
                break;
            }
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    let refusal = refusal.expect("the two replicas together were never refused");
    assert_eq!(refusal.code(), Code::ResourceExhausted, "{refusal:?}");
    assert!(refusal.message().contains("across replicas"), "{refusal:?}");
    assert!(refusal.metadata().get("retry-after-ms").is_some());
    // The shared bucket of 100, what refilled meanwhile, and one block of slack.
    let total = granted[0] + granted[1];
    let allowed = 100 + (10.0 * elapsed).ceil() as u64 + 10;
    assert!(
        (100..=allowed).contains(&total),
        "{total} IDs granted in {elapsed:.2} s"
    );
    // Neither replica came near its own bucket: the shared one refused.
    assert!(granted.iter().all(|g| *g < 100), "{granted:?}");
    for server in servers {
        server.stop().await;
    }
}

/// While the database has gone silent, a caller with quotas is still served from the IDs its
/// replica holds: the shared bucket is asked for a quarter of a second at most, then left
/// alone for a second, and the replica's own bucket stands alone meanwhile. (Before, each call
/// waited on the silent database until its request timeout.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_with_quotas_is_served_from_held_ids_while_the_database_is_silent() {
    use testkit::proxy::{Mode, Proxy};
    const METERED: Caller = Caller {
        // A slice of one ID: every call past the first asks the shared bucket.
        quota: "ids_per_second = 10\nids_burst = 100\n",
        ..Caller::new("metered", &["links"], &["lease", "allocate"])
    };
    let db = TestDb::create().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let url = db.url().to_string();
    let (head, rest) = url.split_once('@').expect("a user in the URL");
    let (address, database) = rest.split_once('/').expect("a database in the URL");
    let proxy = Proxy::start(address.parse().expect("a socket address"))
        .await
        .expect("proxy");
    let server = Server::start(Config {
        tokens_file: Some(tokens::write(dir.path(), &[METERED])),
        insecure_no_auth: false,
        request_timeout: std::time::Duration::from_secs(2),
        ..Config::for_tests(&format!("{head}@{}/{database}", proxy.addr()))
    })
    .await;
    let mut client = server.client().await;
    let token = METERED.token();
    // The namespace's segment is leased while the database answers.
    allocate(&mut client, Some(&token), "links", 1)
        .await
        .expect("a first call");
    proxy.set_mode(Mode::Blackhole);
    let served = tokio::time::timeout(std::time::Duration::from_secs(20), async {
        for call in 0..12 {
            if let Err(status) = allocate(&mut client, Some(&token), "links", 1).await {
                return Err((call, status));
            }
        }
        Ok(())
    })
    .await
    .expect("the calls were answered");
    proxy.set_mode(Mode::Open);
    if let Err((call, status)) = served {
        panic!("call {call} was refused while the replica held IDs: {status:?}");
    }
    server.stop().await;
}
