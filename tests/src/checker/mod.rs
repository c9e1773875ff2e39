//! The checker: judges a run's [`History`](crate::history::History) against the database
//! snapshot and a final sweep through the redirect edge.
//!
//! - `links`: no code maps to two URLs, every acknowledged create is stored and redirects
//!   (lost = 0), indeterminate creates are stored at most once, refused ones never.
//! - `ids`: every generated code decodes to an ID used once, inside a lease of the node
//!   incarnation that created it; no two leases overlap.
//! - `timing`: during an id-service outage every node kept creating from its runway, then
//!   refused quickly, never hung, kept redirecting, and recovered.
//!
//! The checks are pure functions of their input, so they are unit-tested on made-up histories.

mod ids;
mod links;
mod timing;

use crate::history::{CreateOp, FaultRecord, Outcome, ReadOp, ReadOutcome};
use crate::snapshot::Snapshot;
use codespace::CodeSpace;
use std::time::Duration;

/// Time bounds the run must keep.
#[derive(Debug, Clone)]
pub struct Bounds {
    /// A refusal for lack of IDs must come at least this fast.
    pub fast_fail: Duration,
    /// While only the id-service is unreachable, every request must be answered this fast.
    pub answer_deadline: Duration,
    /// After an outage, each node must create again within this long.
    pub recovery: Duration,
    /// Asynchronous replication underneath: a failover may lose acknowledged creates (and the
    /// leases their IDs came from). Such losses are counted in [`Report::lost_in_failover`]
    /// (the RPO) instead of failing the run; a code or ID twice still fails it.
    pub lossy: bool,
}

impl Default for Bounds {
    fn default() -> Self {
        Self {
            fast_fail: Duration::from_secs(1),
            answer_deadline: Duration::from_secs(2),
            recovery: Duration::from_secs(30),
            lossy: false,
        }
    }
}

/// What the checker looks at.
pub struct Input<'a> {
    /// Every create attempt.
    pub creates: &'a [CreateOp],
    /// Every redirect read during the run.
    pub reads: &'a [ReadOp],
    /// Every fault, with its window.
    pub faults: &'a [FaultRecord],
    /// The database at the end.
    pub snapshot: &'a Snapshot,
    /// The final redirect of every acknowledged code, through a node that did not create it.
    pub final_reads: &'a [(String, ReadOutcome)],
    /// The code space every node uses.
    pub space: &'a CodeSpace,
    /// The namespace the nodes lease from.
    pub namespace: &'a str,
    /// How many nodes there are.
    pub nodes: usize,
    /// Time bounds.
    pub bounds: Bounds,
    /// What the run itself saw go wrong: the nemesis's reports, clients that did not stop,
    /// processes not ready or gone at the end, alarm lines in the logs. Each is a violation.
    pub problems: &'a [String],
}

/// The verdict.
#[derive(Debug, Default)]
pub struct Report {
    /// Create attempts (idempotent retries included).
    pub attempted: usize,
    /// Acknowledged attempts.
    pub acked: usize,
    /// Attempts refused such that nothing can have been stored.
    pub refused: usize,
    /// Attempts with an unknown outcome.
    pub indeterminate: usize,
    /// Redirect reads during the run.
    pub reads: usize,
    /// Codes mapped to two URLs, URLs stored twice, IDs used twice, overlapping leases.
    pub duplicates: usize,
    /// Acknowledged creates missing from the database or the edge.
    pub lost: usize,
    /// With [`Bounds::lossy`]: acknowledged creates a failover lost (missing from the database,
    /// so not counted in `lost`), and IDs in use whose lease row it lost.
    pub lost_in_failover: usize,
    /// With [`Bounds::lossy`]: generated codes whose ID no surviving lease covers.
    pub ids_outside_surviving_leases: usize,
    /// Everything that broke an invariant, precisely.
    pub violations: Vec<String>,
    /// Observations that are not violations.
    pub notes: Vec<String>,
}

impl Report {
    /// The one-line summary.
    pub fn summary(&self) -> String {
        format!(
            "attempted={} acked={} refused={} indeterminate={} reads={} duplicates={} lost={} \
             lost_in_failover={} violations={}",
            self.attempted,
            self.acked,
            self.refused,
            self.indeterminate,
            self.reads,
            self.duplicates,
            self.lost,
            self.lost_in_failover,
            self.violations.len()
        )
    }

    /// Whether every invariant held.
    pub fn passed(&self) -> bool {
        self.violations.is_empty() && self.duplicates == 0 && self.lost == 0
    }

    fn violation(&mut self, text: String) {
        self.violations.push(text);
    }
}

/// Runs every check.
pub fn check(input: &Input<'_>) -> Report {
    let mut report = Report {
        attempted: input.creates.len(),
        reads: input.reads.len(),
        ..Report::default()
    };
    for op in input.creates {
        match op.outcome {
            Outcome::Acked { .. } => report.acked += 1,
            Outcome::Refused { .. } => report.refused += 1,
            Outcome::Indeterminate { .. } => report.indeterminate += 1,
        }
    }
    report.notes.extend(outcome_breakdown(input.creates));
    for problem in input.problems {
        report.violation(problem.clone());
    }
    links::check(input, &mut report);
    ids::check(input, &mut report);
    timing::check(input, &mut report);
    report
}

/// How many refusals and indeterminate outcomes of each kind, for the log.
fn outcome_breakdown(creates: &[CreateOp]) -> Vec<String> {
    let mut counts: std::collections::BTreeMap<String, usize> = Default::default();
    for op in creates {
        let (class, reason) = match &op.outcome {
            Outcome::Acked { .. } => continue,
            Outcome::Refused { reason, .. } => ("refused", reason),
            Outcome::Indeterminate { reason } => ("indeterminate", reason),
        };
        // Keep the status and machine code, drop per-request detail.
        let short: String = reason
            .split(':')
            .next()
            .unwrap_or(reason)
            .chars()
            .take(60)
            .collect();
        *counts
            .entry(format!("{class} {:?} {short}", op.transport))
            .or_default() += 1;
    }
    counts
        .into_iter()
        .map(|(what, n)| format!("{n:>6} x {what}"))
        .collect()
}

/// One create, for messages.
pub fn describe(op: &CreateOp) -> String {
    format!(
        "#{} {:?}/{:?} to node{} (r{}..r{}) at {:.3}s for {:.3}s, url {}",
        op.seq,
        op.kind,
        op.transport,
        op.node,
        op.incarnations.0,
        op.incarnations.1,
        op.start.as_secs_f64(),
        op.elapsed.as_secs_f64(),
        op.url
    )
}

#[cfg(test)]
mod tests;
