//! AllocateIds across two replicas of the real binary, one of them killed with SIGKILL while
//! callers are busy: every ID handed out is distinct, checked from the replies, and the ledger
//! covers every range.

use crate::helpers::process::Process;
use crate::helpers::tokens::{self, Caller};
use crate::helpers::{allocate, assert_ledger_covers, assert_ranges_disjoint, ledger_overlaps};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use testkit::TestDb;

const LOAD: Caller = Caller::new("load", &["orders"], &["allocate"]);
const CALLERS: usize = 16;
/// Each caller stops after this many calls at the latest.
const MAX_CALLS: usize = 2_000;

async fn replica(db: &TestDb, tokens_file: &std::path::Path) -> Process {
    Process::spawn(
        &[],
        &[
            ("DATABASE_URL", db.url().to_string()),
            ("ID_SERVICE_TOKENS_FILE", tokens_file.display().to_string()),
            ("ID_SERVICE_NAMESPACES", "orders".into()),
            ("ID_SERVICE_SEGMENT_MIN", "1000".into()),
            ("ID_SERVICE_SEGMENT_MAX", "5000".into()),
            ("ID_SERVICE_ALLOCATE_MAX_COUNT", "500".into()),
            ("RUST_LOG", "warn".into()),
        ],
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_one_of_two_replicas_under_load_never_hands_out_an_id_twice() {
    let db = TestDb::create().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let file = tokens::write(dir.path(), &[LOAD]);
    let doomed = replica(&db, &file).await;
    let survivor = replica(&db, &file).await;
    let replies = Arc::new(Mutex::new(Vec::<(u64, u64)>::new()));
    let calls = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let token = LOAD.token();

    let mut callers = Vec::new();
    for caller in 0..CALLERS {
        let addrs = [doomed.grpc_addr, survivor.grpc_addr];
        let (replies, calls, stop, token) = (
            Arc::clone(&replies),
            Arc::clone(&calls),
            Arc::clone(&stop),
            token.clone(),
        );
        callers.push(tokio::spawn(async move {
            // Half the callers start on the replica that will be killed, and move to the
            // other one when it stops answering.
            let mut on = caller % 2;
            let mut client = crate::helpers::client(addrs[on]).await;
            for i in 0..MAX_CALLS {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let count = [1, 10, 100, 499][(caller + i) % 4];
                match allocate(&mut client, Some(&token), "orders", count).await {
                    Ok(ranges) => {
                        assert_eq!(ranges.iter().map(|(s, e)| e - s).sum::<u64>(), count);
                        replies.lock().expect("replies").extend(ranges);
                        calls.fetch_add(1, Ordering::SeqCst);
                    }
                    Err(_) if on == 0 => {
                        on = 1;
                        client = crate::helpers::client(addrs[on]).await;
                    }
                    Err(status) => panic!("the surviving replica failed: {status:?}"),
                }
            }
        }));
    }
    let done = |n: usize| {
        let calls = Arc::clone(&calls);
        move || {
            let calls = Arc::clone(&calls);
            async move { calls.load(Ordering::SeqCst) >= n }
        }
    };
    assert!(
        testkit::wait_until(Duration::from_secs(60), done(500)).await,
        "no load"
    );
    doomed.kill_9().await;
    let killed_at = calls.load(Ordering::SeqCst);
    assert!(
        testkit::wait_until(Duration::from_secs(60), done(killed_at + 500)).await,
        "no load after the kill"
    );
    stop.store(true, Ordering::SeqCst);
    for caller in callers {
        caller.await.expect("a caller failed");
    }
    let status = survivor.terminate().await;
    assert!(status.success(), "{status:?}");

    let replies = replies.lock().expect("replies").clone();
    assert!(replies.len() >= 1000);
    assert_ranges_disjoint(&replies);
    let conn = db.connect().await;
    assert_eq!(ledger_overlaps(&conn).await, 0);
    assert_ledger_covers(&conn, "orders", &replies).await;
}
