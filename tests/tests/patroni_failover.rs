//! The whole system on a Patroni cluster (etcd and three PostgreSQL members) through a planned
//! switchover, a `kill -9` of the leader, a leader cut off from etcd and a replica restarted,
//! in each replication mode: no code or ID twice, no lease range granted twice (the
//! id-service's timeline fence under Patroni's own promotions), every ID inside a lease, and in
//! the synchronous modes every acknowledged create present. The recovery times and losses are
//! printed per fault (docs/operations.md has a table of them).
//!
//! The short form runs each fault kind once per mode, the modes one after another
//! (`PATRONI_MODES=sync,sync-strict,async` by default); `PATRONI_SOAK_SECONDS` adds random
//! faults for that long, `FAULT_SEED` replays a schedule.

use testkit::patroni::Replication;
use tests::run::{RunSettings, run};

fn modes() -> Vec<Replication> {
    let text = std::env::var("PATRONI_MODES").unwrap_or_else(|_| "sync,sync-strict,async".into());
    text.split(',')
        .map(|m| match m.trim() {
            "sync" => Replication::Sync,
            "sync-strict" => Replication::SyncStrict,
            "async" => Replication::Async,
            other => panic!("PATRONI_MODES: unknown mode {other:?} (sync, sync-strict, async)"),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_system_survives_patroni_failovers_in_every_replication_mode() {
    for replication in modes() {
        let settings = RunSettings::patroni(replication).expect("read the run settings");
        eprintln!("=== Patroni, {} replication", replication.name());
        let report = run(&settings).await.expect("run the failover test");
        assert!(
            report.passed(),
            "{} replication: {} (seed {}); first violations:\n{}",
            replication.name(),
            report.summary(),
            settings.seed,
            report
                .violations
                .iter()
                .take(20)
                .cloned()
                .collect::<Vec<_>>()
                .join("\n")
        );
        if replication != Replication::Async {
            assert_eq!(report.lost_in_failover, 0, "counted only when lossy");
        }
    }
}
