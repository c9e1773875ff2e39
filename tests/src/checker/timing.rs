//! Bounded degradation (I7): while the id-service is unreachable a node keeps creating from
//! its current and prefetched blocks, then refuses quickly, never hangs, keeps redirecting, and
//! recovers by itself once the id-service is back.

use super::{Input, Report, describe};
use crate::history::{CreateOp, Fault, FaultRecord, Kind, Outcome, ReadOutcome};
use std::time::{Duration, UNIX_EPOCH};

pub(super) fn check(input: &Input<'_>, report: &mut Report) {
    // A refusal for lack of IDs never waits on anything, whatever else is going on.
    for op in input.creates {
        if let Outcome::Refused {
            out_of_ids: true, ..
        } = op.outcome
            && op.elapsed > input.bounds.fast_fail
        {
            report.violation(format!(
                "out-of-IDs refusal took {:.3}s (bound {:?}): {}",
                op.elapsed.as_secs_f64(),
                input.bounds.fast_fail,
                describe(op)
            ));
        }
    }
    for fault in input.faults {
        match fault.fault {
            Fault::IdServiceOutage => outage(input, fault, report),
            Fault::CutNodeFromIdService { node, .. } => {
                let what = format!("while node{node} was cut off from the id-service");
                answered_in_time(input, fault, Some(node), &what, report);
            }
            _ => {}
        }
    }
}

fn in_window(start: Duration, fault: &FaultRecord) -> bool {
    start >= fault.start && start < fault.end
}

/// Every create (of `node`, or of all nodes) sent during the fault got an answer in time.
fn answered_in_time(
    input: &Input<'_>,
    fault: &FaultRecord,
    node: Option<usize>,
    what: &str,
    report: &mut Report,
) {
    let deadline = input.bounds.answer_deadline;
    for op in input.creates {
        if !in_window(op.start, fault) || node.is_some_and(|n| n != op.node) {
            continue;
        }
        if let Outcome::Indeterminate { reason } = &op.outcome {
            report.violation(format!(
                "{what}, a create got no answer ({reason}): {}",
                describe(op)
            ));
        } else if op.elapsed > deadline {
            report.violation(format!(
                "{what}, a create took {:.3}s (bound {deadline:?}): {}",
                op.elapsed.as_secs_f64(),
                describe(op)
            ));
        }
    }
}

/// An acknowledged create that certainly consumed a fresh ID (a dedup hit or an idempotent
/// replay returns an existing link without one).
fn acked_with_id(op: &CreateOp) -> bool {
    op.kind == Kind::Generated && matches!(op.outcome, Outcome::Acked { .. })
}

/// The id-service outage `fault`: every answer in time, each node through it as it should be,
/// the redirects served, and no lease granted while every replica was down.
fn outage(input: &Input<'_>, fault: &FaultRecord, report: &mut Report) {
    let window = format!(
        "the id-service outage [{:.3}s, {:.3}s)",
        fault.start.as_secs_f64(),
        fault.end.as_secs_f64()
    );
    answered_in_time(input, fault, None, &format!("during {window}"), report);

    for node in 0..input.nodes {
        node_through_outage(input, fault, node, &window, report);
    }
    reads_through_outage(input, fault, &window, report);
    no_lease_during_outage(input, fault, &window, report);
}

/// What node `node` must have done through the outage: created from its prefetched blocks,
/// run dry and refused fast without acknowledging a generated create, then recovered in time.
fn node_through_outage(
    input: &Input<'_>,
    fault: &FaultRecord,
    node: usize,
    window: &str,
    report: &mut Report,
) {
    let ops: Vec<&CreateOp> = input.creates.iter().filter(|op| op.node == node).collect();
    let Some(dry) = fault.ran_dry.get(node).copied().flatten() else {
        report.violation(format!(
            "node{node} never refused a create for lack of IDs during {window}: its runway \
             should be bounded by its current and spare block"
        ));
        return;
    };
    let on_runway = ops
        .iter()
        .filter(|op| in_window(op.start, fault) && op.end() <= dry && acked_with_id(op))
        .count();
    if on_runway == 0 {
        report.violation(format!(
            "node{node} created nothing from its prefetched blocks during {window} before \
             running dry at {:.3}s",
            dry.as_secs_f64()
        ));
    }
    for op in ops
        .iter()
        .filter(|op| op.start >= dry && op.start < fault.end)
    {
        if acked_with_id(op) {
            report.violation(format!(
                "node{node} acknowledged a generated create after it had run dry at {:.3}s \
                 with every id-service down: {}",
                dry.as_secs_f64(),
                describe(op)
            ));
        }
    }
    let refusals: Vec<Duration> = ops
        .iter()
        .filter(|op| in_window(op.start, fault))
        .filter(|op| {
            matches!(
                op.outcome,
                Outcome::Refused {
                    out_of_ids: true,
                    ..
                }
            )
        })
        .map(|op| op.elapsed)
        .collect();
    let recovered = ops
        .iter()
        .filter(|op| op.start >= fault.end && acked_with_id(op))
        .map(|op| op.end())
        .min();
    match recovered {
        None => report.violation(format!(
            "node{node} never acknowledged a generated create after {window}"
        )),
        Some(at) if at - fault.end > input.bounds.recovery => report.violation(format!(
            "node{node} took {:.3}s after {window} to create again (bound {:?})",
            (at - fault.end).as_secs_f64(),
            input.bounds.recovery
        )),
        Some(_) => {}
    }
    report.notes.push(format!(
        "outage node{node}: {on_runway} creates on runway, dry at +{:.1}s, {} fast refusals \
         (slowest {:.0} ms), creating again +{:.1}s after restart",
        (dry - fault.start).as_secs_f64(),
        refusals.len(),
        refusals
            .iter()
            .max()
            .copied()
            .unwrap_or_default()
            .as_secs_f64()
            * 1000.0,
        recovered.map_or(f64::NAN, |at| (at - fault.end).as_secs_f64())
    ));
}

/// Every redirect read during the outage was answered, within the deadline, and there was one.
fn reads_through_outage(input: &Input<'_>, fault: &FaultRecord, window: &str, report: &mut Report) {
    let mut reads = 0;
    for read in input.reads.iter().filter(|r| in_window(r.start, fault)) {
        reads += 1;
        if read.outcome != ReadOutcome::Redirected {
            report.violation(format!(
                "redirect of {} through node{} at {:.3}s failed during {window}: {:?}",
                read.code,
                read.node,
                read.start.as_secs_f64(),
                read.outcome
            ));
        } else if read.elapsed > input.bounds.answer_deadline {
            report.violation(format!(
                "redirect of {} through node{} took {:.3}s during {window}",
                read.code,
                read.node,
                read.elapsed.as_secs_f64()
            ));
        }
    }
    if reads == 0 {
        report.violation(format!(
            "no redirect was read during {window}: nothing was proved"
        ));
    }
}

/// With every replica down no lease can be granted (a margin covers the kill itself).
fn no_lease_during_outage(
    input: &Input<'_>,
    fault: &FaultRecord,
    window: &str,
    report: &mut Report,
) {
    let seconds = |t: std::time::SystemTime| {
        t.duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs_f64()
    };
    let (from, to) = (seconds(fault.wall.0) + 1.0, seconds(fault.wall.1) - 0.2);
    for lease in &input.snapshot.leases {
        if lease.leased_at > from && lease.leased_at < to {
            report.violation(format!(
                "lease {} [{}, {}) for {} was granted during {window}, with every id-service \
                 replica killed",
                lease.lease_id, lease.start, lease.end, lease.holder
            ));
        }
    }
}
