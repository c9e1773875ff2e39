//! Invariant I1 across `kill -9`: the real binary is killed while callers lease from it.

mod common;

use common::{assert_disjoint, free_port, lease, ledger_leases, ledger_overlaps};
use proto::idalloc::v1::Lease;
use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use testkit::TestDb;
use tokio::process::{Child, Command};
use tokio::sync::watch;

const CALLERS: usize = 8;

/// A running `id-service` process.
struct Process {
    child: Child,
    grpc_addr: SocketAddr,
    admin_addr: SocketAddr,
    log: tempfile::NamedTempFile,
}

impl Process {
    /// Starts the binary on free ports and waits until it is ready. A port picked as free may
    /// be taken by the time the process binds it: then the process exits and we try again.
    async fn spawn(database_url: &str) -> Process {
        for _ in 0..3 {
            let mut process = Self::start(database_url);
            let url = format!("http://{}/readyz", process.admin_addr);
            let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
            loop {
                if matches!(reqwest::get(&url).await, Ok(r) if r.status() == 200) {
                    return process;
                }
                if let Ok(Some(status)) = process.child.try_wait() {
                    eprintln!(
                        "id-service exited ({status}); log:\n{}",
                        std::fs::read_to_string(process.log.path()).unwrap_or_default()
                    );
                    break;
                }
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "the id-service did not become ready; log:\n{}",
                    std::fs::read_to_string(process.log.path()).unwrap_or_default()
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        panic!("the id-service binary did not start in three attempts");
    }

    fn start(database_url: &str) -> Process {
        let grpc_addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let admin_addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let log = tempfile::NamedTempFile::new().expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_id-service"))
            .env("DATABASE_URL", database_url)
            .env("ID_SERVICE_GRPC_ADDR", grpc_addr.to_string())
            .env("ID_SERVICE_ADMIN_ADDR", admin_addr.to_string())
            .env("ID_SERVICE_DRAIN_TIMEOUT", "5s")
            .env("RUST_LOG", "warn")
            .stdout(log.reopen().expect("reopen the log"))
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start the id-service binary");
        Process {
            child,
            grpc_addr,
            admin_addr,
            log,
        }
    }

    async fn kill_9(mut self) {
        self.child.start_kill().expect("SIGKILL");
        self.child.wait().await.expect("reap the killed process");
    }

    async fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().expect("still running").to_string();
        let sent = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .await
            .expect("run kill");
        assert!(sent.success());
        tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .expect("exits within the drain timeout")
            .expect("reap")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_an_id_service_under_load_never_leads_to_overlapping_leases() {
    let db = TestDb::create().await;
    let first = Process::spawn(db.url()).await;
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
            let mut client = common::client(addr).await;
            let mut i = 0usize;
            while !stop.load(Ordering::SeqCst) {
                let current = *endpoint.borrow_and_update();
                if current != addr {
                    addr = current;
                    client = common::client(addr).await;
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

    let second = Process::spawn(db.url()).await;
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
