//! Links: each URL of the workload is one logical create (or, for dedup, one shared target),
//! so grouping attempts and rows by URL shows duplicates, losses and phantoms directly.

use super::{Input, Report, describe};
use crate::history::{CreateOp, Kind, Outcome, ReadOutcome};
use crate::snapshot::LinkRow;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

/// Acknowledged codes that are not in the database, map to another URL there, or did not
/// redirect in the final reads (`lost`: violations), and those lost in an asynchronous
/// failover (`failover`: counted, not failed).
#[derive(Default)]
struct Losses<'a> {
    lost: HashSet<&'a str>,
    failover: HashSet<&'a str>,
}

/// Checks every create and row of the run: no code for two URLs, no URL under two codes, no
/// acknowledged link lost, no refused create stored, no row the workload never asked for.
pub(super) fn check(input: &Input<'_>, report: &mut Report) {
    let mut groups: BTreeMap<&str, Vec<&CreateOp>> = BTreeMap::new();
    for op in input.creates {
        groups.entry(op.url.as_str()).or_default().push(op);
    }
    let mut rows_by_url: HashMap<&str, Vec<&LinkRow>> = HashMap::new();
    let mut rows_by_code: HashMap<&str, &LinkRow> = HashMap::new();
    for row in &input.snapshot.links {
        rows_by_url.entry(row.url.as_str()).or_default().push(row);
        rows_by_code.insert(row.code.as_str(), row);
    }
    check_codes_name_one_url(input, report);
    let mut losses = Losses::default();
    for (url, ops) in &groups {
        let rows = rows_by_url.get(url).map(Vec::as_slice).unwrap_or(&[]);
        check_one_url(url, ops, rows, report);
        check_acknowledged(input, ops, &rows_by_code, &mut losses, report);
        for row in rows {
            check_row_shape(row, ops[0], input.space.length(), report);
        }
    }
    for row in &input.snapshot.links {
        if !groups.contains_key(row.url.as_str()) {
            report.violation(format!(
                "phantom row: code {} -> {} was never requested by the workload",
                row.code, row.url
            ));
        }
    }
    check_reads(input, &losses.failover, report);
    for (code, outcome) in input.final_reads {
        if *outcome != ReadOutcome::Redirected
            && !losses.failover.contains(code.as_str())
            && losses.lost.insert(code)
        {
            report.violation(format!(
                "final redirect of acknowledged code {code}: {outcome:?}"
            ));
        }
    }
    report.lost += losses.lost.len();
}

/// No code is acknowledged for two URLs.
fn check_codes_name_one_url(input: &Input<'_>, report: &mut Report) {
    let mut urls_by_code: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for op in input.creates {
        if let Outcome::Acked { code, url } = &op.outcome {
            urls_by_code.entry(code).or_default().insert(url);
        }
    }
    for (code, urls) in &urls_by_code {
        if urls.len() > 1 {
            report.duplicates += 1;
            report.violation(format!(
                "code {code} was acknowledged for {} different URLs: {urls:?}",
                urls.len()
            ));
        }
    }
}

/// One URL's attempts (`ops`) and stored `rows`: acknowledged under one code at most, stored
/// under one code at most, and not stored if every attempt was refused.
fn check_one_url(url: &str, ops: &[&CreateOp], rows: &[&LinkRow], report: &mut Report) {
    let attempts = || {
        ops.iter()
            .map(|op| describe(op))
            .collect::<Vec<_>>()
            .join("; ")
    };
    let acked: BTreeSet<&str> = ops
        .iter()
        .filter_map(|op| match &op.outcome {
            Outcome::Acked { code, .. } => Some(code.as_str()),
            _ => None,
        })
        .collect();
    if acked.len() > 1 {
        report.duplicates += acked.len() - 1;
        report.violation(format!(
            "{url} was acknowledged under {} codes {acked:?} (a dedup or idempotent create \
             must return one link); attempts: {}",
            acked.len(),
            attempts()
        ));
    }
    if rows.len() > 1 {
        report.duplicates += rows.len() - 1;
        report.violation(format!(
            "{url} is stored under {} codes {:?}, created by: {}",
            rows.len(),
            rows.iter().map(|r| r.code.as_str()).collect::<Vec<_>>(),
            attempts()
        ));
    }
    let all_refused = ops
        .iter()
        .all(|op| matches!(op.outcome, Outcome::Refused { .. }));
    if all_refused && !rows.is_empty() {
        report.violation(format!(
            "refused create stored anyway: {url} is in the database as {:?}; attempts: {}",
            rows.iter().map(|r| r.code.as_str()).collect::<Vec<_>>(),
            ops.iter()
                .map(|op| format!("{} ({:?})", describe(op), op.outcome))
                .collect::<Vec<_>>()
                .join("; ")
        ));
    }
}

/// Every acknowledged create among `ops` is in the database under its code, with its URL.
fn check_acknowledged<'a>(
    input: &Input<'_>,
    ops: &[&'a CreateOp],
    rows_by_code: &HashMap<&str, &LinkRow>,
    losses: &mut Losses<'a>,
    report: &mut Report,
) {
    for op in ops {
        let Outcome::Acked {
            code,
            url: acked_url,
        } = &op.outcome
        else {
            continue;
        };
        match rows_by_code.get(code.as_str()) {
            None if input.bounds.lossy => {
                if losses.failover.insert(code) {
                    report.lost_in_failover += 1;
                }
            }
            None => {
                if losses.lost.insert(code) {
                    report.violation(format!(
                        "lost: acknowledged create {} returned code {code}, which is not in \
                         the database",
                        describe(op)
                    ));
                }
            }
            Some(row) if row.url != *acked_url => {
                if losses.lost.insert(code) {
                    report.violation(format!(
                        "code {code} was acknowledged for {acked_url} but the database maps \
                         it to {} ({})",
                        row.url,
                        describe(op)
                    ));
                }
            }
            Some(_) => {}
        }
    }
}

/// Every redirect read during the run of an acknowledged link: a wrong target always fails, a
/// 404 fails unless the create was lost in an asynchronous failover (counted there already).
fn check_reads(input: &Input, failover_lost: &HashSet<&str>, report: &mut Report) {
    for read in input.reads {
        let why = match &read.outcome {
            ReadOutcome::Wrong(why) => why.clone(),
            ReadOutcome::Missing(_) if failover_lost.contains(read.code.as_str()) => continue,
            ReadOutcome::Missing(status) => format!("{status} for an acknowledged link"),
            ReadOutcome::Redirected | ReadOutcome::Failed(_) => continue,
        };
        report.violation(format!(
            "redirect of acknowledged code {} through node{} at {:.3}s: {why}",
            read.code,
            read.node,
            read.start.as_secs_f64()
        ));
    }
}

fn check_row_shape(row: &LinkRow, op: &CreateOp, length: usize, report: &mut Report) {
    let expected = match op.kind {
        Kind::Generated | Kind::Idempotent | Kind::Dedup => "generated",
        Kind::Alias => "alias",
        Kind::Private => "private",
    };
    let shape_ok = match op.kind {
        Kind::Alias => op.alias.as_deref() == Some(row.code.as_str()),
        Kind::Private => row.code.len() == 16,
        _ => row.code.len() == length,
    };
    if row.kind != expected || !shape_ok {
        report.violation(format!(
            "row {} -> {} is a {} code but was requested as {:?} ({})",
            row.code,
            row.url,
            row.kind,
            op.kind,
            describe(op)
        ));
    }
}
