//! The cluster under faults: no ID twice, no code twice, no acknowledged link lost, and
//! bounded degradation while the id-service is down (invariants I1-I3 and I7, docs/design.md).
//!
//! Sized for CI by default; `SOAK_SECONDS`, `SOAK_CLIENTS` and `FAULT_SEED` turn it into a
//! soak or a replay (see docs/fault-test.md).

use tests::run::{RunSettings, run};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cluster_hands_out_no_id_or_code_twice_and_loses_no_acknowledged_link_under_faults() {
    let settings = RunSettings::from_env().expect("read the run settings");
    let report = run(&settings).await.expect("run the fault test");
    assert!(
        report.passed(),
        "{} (seed {}); first violations:\n{}",
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
}
