//! The checker must catch what it claims to: each test plants one violation in an otherwise
//! clean history and expects it reported.

use super::*;
use crate::history::{Fault, Kind, Transport};
use crate::snapshot::{LeaseRow, LinkRow};
use codespace::CodeKey;
use std::time::{Duration, SystemTime};

fn space() -> CodeSpace {
    let key = CodeKey::parse(crate::system::CODE_KEY).expect("key");
    CodeSpace::new(&key, 7).expect("space")
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn op(seq: u64, node: usize, kind: Kind, url: &str, outcome: Outcome) -> CreateOp {
    CreateOp {
        seq,
        client: 0,
        kind,
        transport: Transport::Http,
        node,
        incarnations: (1, 1),
        url: url.into(),
        alias: None,
        idempotency_key: None,
        start: ms(seq * 10),
        elapsed: ms(5),
        outcome,
    }
}

fn acked(code: &str, url: &str) -> Outcome {
    Outcome::Acked {
        code: code.into(),
        url: url.into(),
    }
}

fn row(code: &str, url: &str, id: Option<i64>) -> LinkRow {
    LinkRow {
        code: code.into(),
        url: url.into(),
        kind: "generated".into(),
        id,
    }
}

fn lease(id: i64, start: i64, end: i64, holder: &str) -> LeaseRow {
    LeaseRow {
        lease_id: id,
        namespace: "links".into(),
        start,
        end,
        holder: holder.into(),
        leased_at: 0.0,
    }
}

struct Case {
    creates: Vec<CreateOp>,
    snapshot: Snapshot,
    reads: Vec<ReadOp>,
    faults: Vec<FaultRecord>,
    problems: Vec<String>,
}

/// Two generated links from node0 and node1, each in its own lease, both read back.
fn clean() -> Case {
    let s = space();
    let (a, b) = (s.encode(5), s.encode(105));
    Case {
        creates: vec![
            op(
                1,
                0,
                Kind::Generated,
                "https://e.com/a",
                acked(&a, "https://e.com/a"),
            ),
            op(
                2,
                1,
                Kind::Generated,
                "https://e.com/b",
                acked(&b, "https://e.com/b"),
            ),
        ],
        snapshot: Snapshot {
            links: vec![
                row(&a, "https://e.com/a", Some(5)),
                row(&b, "https://e.com/b", Some(105)),
            ],
            leases: vec![lease(1, 1, 100, "node0-r1"), lease(2, 100, 200, "node1-r1")],
            overlapping_pairs: 0,
        },
        reads: Vec::new(),
        faults: Vec::new(),
        problems: Vec::new(),
    }
}

fn run(case: &Case) -> Report {
    run_with(case, Bounds::default())
}

fn run_with(case: &Case, bounds: Bounds) -> Report {
    let s = space();
    let final_reads: Vec<(String, ReadOutcome)> = case
        .snapshot
        .links
        .iter()
        .map(|r| (r.code.clone(), ReadOutcome::Redirected))
        .collect();
    check(&Input {
        creates: &case.creates,
        reads: &case.reads,
        faults: &case.faults,
        snapshot: &case.snapshot,
        final_reads: &final_reads,
        space: &s,
        namespace: "links",
        nodes: 3,
        bounds,
        problems: &case.problems,
    })
}

fn lossy() -> Bounds {
    Bounds {
        lossy: true,
        ..Bounds::default()
    }
}

fn assert_flags(report: &Report, needle: &str) {
    assert!(
        report.violations.iter().any(|v| v.contains(needle)),
        "expected a violation containing {needle:?}, got {:#?}",
        report.violations
    );
}

#[test]
fn a_clean_history_passes() {
    let report = run(&clean());
    assert!(report.passed(), "{:#?}", report.violations);
    assert_eq!((report.attempted, report.acked), (2, 2));
}

#[test]
fn an_acknowledged_create_missing_from_the_database_is_lost() {
    let mut case = clean();
    case.snapshot.links.pop();
    let report = run(&case);
    assert_eq!(report.lost, 1);
    assert_flags(&report, "lost: acknowledged create");
}

#[test]
fn a_url_stored_twice_is_a_duplicate() {
    let mut case = clean();
    let extra = space().encode(6);
    case.snapshot
        .links
        .push(row(&extra, "https://e.com/a", Some(6)));
    let report = run(&case);
    assert_eq!(report.duplicates, 1);
    assert_flags(&report, "is stored under 2 codes");
}

#[test]
fn one_code_acknowledged_for_two_urls_is_a_duplicate() {
    let mut case = clean();
    let a = space().encode(5);
    case.creates.push(op(
        3,
        2,
        Kind::Generated,
        "https://e.com/c",
        acked(&a, "https://e.com/c"),
    ));
    let report = run(&case);
    assert!(report.duplicates >= 1);
    assert_flags(&report, "acknowledged for 2 different URLs");
}

#[test]
fn a_code_outside_its_nodes_lease_is_flagged() {
    let mut case = clean();
    case.snapshot.leases[0].holder = "node2-r1".into();
    assert_flags(&run(&case), "held by node2-r1");
}

#[test]
fn a_restarted_node_using_its_old_block_is_flagged() {
    let mut case = clean();
    case.creates[0].incarnations = (2, 2);
    assert_flags(&run(&case), "held by node0-r1");
}

#[test]
fn overlapping_leases_are_flagged() {
    let mut case = clean();
    case.snapshot.leases[1].start = 50;
    assert_flags(&run(&case), "overlap");
}

#[test]
fn a_refused_create_that_was_stored_is_flagged() {
    let mut case = clean();
    case.creates[1].outcome = Outcome::Refused {
        reason: "503".into(),
        out_of_ids: true,
    };
    assert_flags(&run(&case), "refused create stored anyway");
}

#[test]
fn an_indeterminate_create_may_be_present_once_or_absent() {
    let mut case = clean();
    case.creates[1].outcome = Outcome::Indeterminate {
        reason: "timeout".into(),
    };
    assert!(run(&case).passed());
    case.snapshot.links.pop();
    assert!(run(&case).passed());
}

#[test]
fn a_row_nobody_asked_for_is_a_phantom() {
    let mut case = clean();
    let code = space().encode(7);
    case.snapshot
        .links
        .push(row(&code, "https://e.com/zzz", Some(7)));
    assert_flags(&run(&case), "phantom row");
}

#[test]
fn a_slow_out_of_ids_refusal_is_flagged() {
    let mut case = clean();
    let mut slow = op(
        3,
        2,
        Kind::Generated,
        "https://e.com/slow",
        Outcome::Refused {
            reason: "503".into(),
            out_of_ids: true,
        },
    );
    slow.elapsed = Duration::from_secs(3);
    case.creates.push(slow);
    assert_flags(&run(&case), "out-of-IDs refusal took");
}

#[test]
fn an_outage_without_fast_failure_or_recovery_is_flagged() {
    let mut case = clean();
    let hung = op(
        50,
        0,
        Kind::Generated,
        "https://e.com/hung",
        Outcome::Indeterminate {
            reason: "timeout".into(),
        },
    );
    case.creates.push(hung);
    case.faults.push(FaultRecord {
        fault: Fault::IdServiceOutage,
        start: ms(400),
        end: ms(900),
        wall: (SystemTime::now(), SystemTime::now()),
        ran_dry: vec![Some(ms(600)), None, None],
        recovered: Some(ms(1000)),
    });
    let report = run(&case);
    assert_flags(&report, "got no answer");
    assert_flags(&report, "node1 never refused a create for lack of IDs");
    assert_flags(&report, "node0 created nothing from its prefetched blocks");
    assert_flags(&report, "node0 never acknowledged a generated create after");
    assert_flags(&report, "no redirect was read during");
}

#[test]
fn with_asynchronous_replication_a_lost_create_is_counted_not_failed() {
    let mut case = clean();
    case.snapshot.links.pop();
    let report = run_with(&case, lossy());
    assert!(report.passed(), "{:#?}", report.violations);
    assert_eq!((report.lost, report.lost_in_failover), (0, 1));
}

/// A 404 read of the second link, at 500 ms through node2.
fn missing_read(case: &Case) -> ReadOp {
    ReadOp {
        node: 2,
        code: case.snapshot.links[1].code.clone(),
        start: ms(500),
        elapsed: ms(1),
        outcome: ReadOutcome::Missing(404),
    }
}

#[test]
fn a_404_for_an_acknowledged_link_fails_unless_a_failover_lost_it() {
    let mut case = clean();
    case.reads.push(missing_read(&case));
    assert_flags(&run(&case), "404 for an acknowledged link");
    // Lossy, but the link is in the database: the 404 was wrong.
    assert_flags(&run_with(&case, lossy()), "404 for an acknowledged link");
    // Lossy, and the failover lost the link: the read saw the loss the count already holds.
    case.snapshot.links.pop();
    let report = run_with(&case, lossy());
    assert!(report.passed(), "{:#?}", report.violations);
    assert_eq!(report.lost_in_failover, 1);
}

#[test]
fn with_asynchronous_replication_an_id_whose_lease_was_lost_is_counted_not_failed() {
    let mut case = clean();
    case.snapshot.leases.pop();
    let strict = run(&case);
    assert_flags(&strict, "which no lease of links covers");
    let report = run_with(&case, lossy());
    assert!(report.passed(), "{:#?}", report.violations);
    assert_eq!(report.ids_outside_surviving_leases, 1);
}

#[test]
fn with_asynchronous_replication_an_id_used_twice_still_fails() {
    let mut case = clean();
    let twice = space().encode(5);
    case.snapshot.links[1].code = twice;
    let report = run_with(&case, lossy());
    assert!(!report.passed(), "an ID twice must fail a lossy run too");
    assert!(report.duplicates >= 1, "{report:?}");
}

#[test]
fn the_lease_probe_may_hold_leases_and_strangers_may_not() {
    let mut case = clean();
    case.snapshot
        .leases
        .push(lease(3, 500, 501, crate::ha::PROBE_HOLDER));
    assert!(run(&case).passed(), "the probe's lease is known");
    case.snapshot.leases.push(lease(4, 600, 601, "someone"));
    assert_flags(&run(&case), "which is no node incarnation");
}

#[test]
fn a_problem_the_run_itself_saw_fails_it() {
    let mut case = clean();
    case.problems
        .push("alarm logged: generated code already taken".into());
    let report = run(&case);
    assert!(!report.passed(), "{}", report.summary());
    assert_flags(&report, "generated code already taken");
}
