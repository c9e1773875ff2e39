//! IDs and leases: every generated code decodes to its row's ID, no ID is used twice, and the
//! ID lies in a lease held by the node incarnation that created the link (so a restarted node
//! never resumed an old block). No two leases overlap.

use super::{Input, Report, describe};
use crate::history::CreateOp;
use crate::snapshot::LeaseRow;
use crate::system::holder;
use std::collections::{BTreeSet, HashMap};

pub(super) fn check(input: &Input<'_>, report: &mut Report) {
    let leases: Vec<&LeaseRow> = input
        .snapshot
        .leases
        .iter()
        .filter(|l| l.namespace == input.namespace)
        .collect();
    check_leases(input, &leases, report);

    let mut ops_by_url: HashMap<&str, Vec<&CreateOp>> = HashMap::new();
    for op in input.creates {
        ops_by_url.entry(op.url.as_str()).or_default().push(op);
    }
    let mut codes_by_id: HashMap<u64, &str> = HashMap::new();
    for row in input
        .snapshot
        .links
        .iter()
        .filter(|r| r.kind == "generated")
    {
        let id = match input.space.decode(&row.code) {
            Ok(id) => id,
            Err(e) => {
                report.violation(format!("generated code {} does not decode: {e}", row.code));
                continue;
            }
        };
        if row.id != Some(id as i64) {
            report.violation(format!(
                "generated code {} decodes to ID {id} but its row records ID {:?}",
                row.code, row.id
            ));
        }
        if let Some(other) = codes_by_id.insert(id, &row.code) {
            report.duplicates += 1;
            report.violation(format!(
                "ID {id} was used twice: codes {other} and {}",
                row.code
            ));
        }
        let Some(lease) = find_lease(&leases, id) else {
            if input.bounds.lossy {
                report.ids_outside_surviving_leases += 1;
                continue;
            }
            report.violation(format!(
                "generated code {} decodes to ID {id}, which no lease of {} covers",
                row.code, input.namespace
            ));
            continue;
        };
        let ops = ops_by_url
            .get(row.url.as_str())
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        let allowed: BTreeSet<String> = ops
            .iter()
            .flat_map(|op| (op.incarnations.0..=op.incarnations.1).map(|k| holder(op.node, k)))
            .collect();
        if !ops.is_empty() && !allowed.contains(&lease.holder) {
            report.violation(format!(
                "generated code {} (ID {id}) lies in lease {} [{}, {}) held by {}, but was \
                 created through {allowed:?}: {}",
                row.code,
                lease.lease_id,
                lease.start,
                lease.end,
                lease.holder,
                ops.iter()
                    .map(|op| describe(op))
                    .collect::<Vec<_>>()
                    .join("; ")
            ));
        }
    }
}

fn check_leases(input: &Input<'_>, leases: &[&LeaseRow], report: &mut Report) {
    if input.snapshot.overlapping_pairs > 0 {
        report.duplicates += input.snapshot.overlapping_pairs as usize;
        report.violation(format!(
            "the ledger holds {} pairs of overlapping leases",
            input.snapshot.overlapping_pairs
        ));
    }
    for pair in leases.windows(2) {
        if pair[0].end > pair[1].start {
            report.violation(format!(
                "leases {} [{}, {}) and {} [{}, {}) overlap",
                pair[0].lease_id,
                pair[0].start,
                pair[0].end,
                pair[1].lease_id,
                pair[1].start,
                pair[1].end
            ));
        }
    }
    for lease in leases {
        if lease.start < 1 || lease.end <= lease.start {
            report.violation(format!(
                "lease {} has an invalid range [{}, {})",
                lease.lease_id, lease.start, lease.end
            ));
        }
        let known = lease.holder == crate::ha::PROBE_HOLDER
            || (0..input.nodes).any(|n| {
                lease
                    .holder
                    .strip_prefix(&format!("node{n}-r"))
                    .is_some_and(|k| k.parse::<u32>().is_ok())
            });
        if !known {
            report.violation(format!(
                "lease {} is held by {:?}, which is no node incarnation",
                lease.lease_id, lease.holder
            ));
        }
    }
}

/// The lease containing `id`, from leases sorted by start.
fn find_lease<'a>(leases: &[&'a LeaseRow], id: u64) -> Option<&'a LeaseRow> {
    let id = i64::try_from(id).ok()?;
    let after = leases.partition_point(|l| l.start <= id);
    let lease = *leases.get(after.checked_sub(1)?)?;
    (id < lease.end).then_some(lease)
}
