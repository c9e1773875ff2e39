//! Invariant I1 across `kill -9`: the real binary is killed while callers lease from it.

use crate::helpers::process::Process;
use crate::helpers::{assert_disjoint, lease, ledger_leases, ledger_overlaps};
use proto::idalloc::v1::Lease;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use testkit::TestDb;
use tokio::sync::watch;

const CALLERS: usize = 8;

async fn spawn(database_url: &str) -> Process {
    Process::spawn(
        &["--insecure-no-auth"],
        &[
            ("DATABASE_URL", database_url.to_string()),
            ("ID_SERVICE_NAMESPACES", "links".into()),
            ("RUST_LOG", "warn".into()),
        ],
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_an_id_service_under_load_never_leads_to_overlapping_leases() {
    let db = TestDb::create().await;
    let first = spawn(db.url()).await;
    let (endpoint_tx, endpoint_rx) = watch::channel(first.grpc_addr);
    let replies = Arc::new(Mutex::new(Vec::<Lease>::new()));
    let stop = Arc::new(AtomicBool::new(false));

    let mut callers = Vec::new();
    for caller in 0..CALLERS {
        let mut endpoint = endpoint_rx.clone();
        let replies = Arc::clone(&replies);
        let stop = Arc::clone(&stop);
        callers.push(tokio::spawn(async move {
            let mut addr = *endpoint.borrow_and_update();
            let mut client = crate::helpers::client(addr).await;
            let mut i = 0usize;
            while !stop.load(Ordering::SeqCst) {
                let current = *endpoint.borrow_and_update();
                if current != addr {
                    addr = current;
                    client = crate::helpers::client(addr).await;
                }
                i += 1;
                let size = [1, 50, 500, 5000][(caller + i) % 4];
                match lease(&mut client, "links", size, &format!("caller-{caller}")).await {
                    Ok(lease) => replies.lock().expect("replies").push(lease),
                    // The replica died under us: wait for the next one.
                    Err(_) => {
                        let _ =
                            tokio::time::timeout(Duration::from_millis(200), endpoint.changed())
                                .await;
                    }
                }
            }
        }));
    }
    let count = || replies.lock().expect("replies").len();
    assert!(
        testkit::wait_until(Duration::from_secs(30), || async { count() >= 200 }).await,
        "no load on the first replica"
    );
    first.kill_9().await;
    let killed_at = count();

    let second = spawn(db.url()).await;
    endpoint_tx.send(second.grpc_addr).expect("callers listen");
    assert!(
        testkit::wait_until(Duration::from_secs(30), || async {
            count() >= killed_at + 200
        })
        .await,
        "no load on the second replica"
    );
    stop.store(true, Ordering::SeqCst);
    for caller in callers {
        caller.await.expect("join a caller");
    }
    let status = second.terminate().await;
    assert!(
        status.success(),
        "SIGTERM should end the service cleanly: {status:?}"
    );

    let replies = replies.lock().expect("replies").clone();
    assert_disjoint(&replies);
    let conn = db.connect().await;
    assert_eq!(ledger_overlaps(&conn).await, 0);
    // Every reply is in the ledger; the ledger may also hold leases whose reply died with the
    // killed process (gaps, never reused).
    let ledger = ledger_leases(&conn).await;
    for reply in &replies {
        assert!(
            ledger
                .iter()
                .any(|(_, s, e, id)| *id == reply.lease_id && *s == reply.start && *e == reply.end),
            "reply {reply:?} is not in the ledger"
        );
    }
}
