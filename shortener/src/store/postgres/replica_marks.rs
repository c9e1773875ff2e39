//! What the replica must have replayed before it may answer: a mark per code and tenant this
//! node changed (or heard changed), each the primary's WAL position once known, kept within a
//! bound while the replica replays nothing.

use std::collections::HashMap;
use std::time::Instant;

/// A WAL position as a byte offset (`pg_lsn - '0/0'`).
pub(super) type Lsn = i64;

/// A mark: the primary's WAL position the replica must have replayed before it may answer
/// for a code or tenant, or not known yet (the write finished at `at`; the next poll reads the
/// primary's position and attaches it).
#[derive(Debug, Clone, Copy)]
pub(super) enum Mark {
    Pending(Instant),
    At(Lsn),
}

#[derive(Debug, Default)]
pub(super) struct Marks {
    pub(super) codes: HashMap<String, Mark>,
    pub(super) tenants: HashMap<String, Mark>,
    /// A change whose tenant this node did not learn (an admin's edit): every list waits for it.
    pub(super) any: Option<Mark>,
    /// Changes may have been missed (the change feed reconnected): every read waits.
    pub(super) everything: Option<Mark>,
}

/// The most codes and tenants marked one by one. Marks end only as the replica replays past
/// them, which it never does while it is down or refused (after a failover promoted it): past
/// this many, one mark on everything stands for them all, so the marks of a node whose replica
/// is gone keep to a bound however many links change.
const MAX_MARKS: usize = 10_000;

impl Marks {
    /// Marks `codes` and `tenant` (`None`: a change of a tenant not known here, which every
    /// list waits for) with `mark`, within [`MAX_MARKS`]. `mark` is the newest of all (taken
    /// under the lock the marks are kept behind), so past the bound it stands for the others.
    pub(super) fn mark<'a>(
        &mut self,
        codes: impl IntoIterator<Item = &'a str>,
        tenant: Option<&str>,
        mark: Mark,
    ) {
        for code in codes {
            self.codes.insert(code.to_string(), mark);
        }
        match tenant {
            Some(t) => {
                self.tenants.insert(t.to_string(), mark);
            }
            None => self.any = Some(mark),
        }
        if self.codes.len() + self.tenants.len() > MAX_MARKS {
            // Everything waits for what the newest mark waits for, which covers every older one.
            self.codes = HashMap::new();
            self.tenants = HashMap::new();
            self.any = None;
            self.everything = Some(mark);
        }
    }

    pub(super) fn entries(&mut self) -> impl Iterator<Item = &mut Mark> {
        self.codes
            .values_mut()
            .chain(self.tenants.values_mut())
            .chain(self.any.iter_mut())
            .chain(self.everything.iter_mut())
    }

    pub(super) fn has_pending(&self) -> bool {
        let pending = |m: &Mark| matches!(m, Mark::Pending(_));
        self.codes.values().any(pending)
            || self.tenants.values().any(pending)
            || self.any.as_ref().is_some_and(pending)
            || self.everything.as_ref().is_some_and(pending)
    }

    /// Attaches `lsn`, read from the primary after `read_at`, to marks of writes finished
    /// before then; drops every mark the replica has replayed.
    pub(super) fn settle(&mut self, read_at: Option<(Instant, Lsn)>, replayed: Lsn) {
        if let Some((at, lsn)) = read_at {
            for mark in self.entries() {
                if let Mark::Pending(done) = *mark
                    && done <= at
                {
                    *mark = Mark::At(lsn);
                }
            }
        }
        let passed = |m: &Mark| matches!(m, Mark::At(lsn) if *lsn <= replayed);
        self.codes.retain(|_, m| !passed(m));
        self.tenants.retain(|_, m| !passed(m));
        if self.any.as_ref().is_some_and(passed) {
            self.any = None;
        }
        if self.everything.as_ref().is_some_and(passed) {
            self.everything = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_wait_for_the_primary_position_then_for_the_replay() {
        let mut marks = Marks::default();
        let before = Instant::now();
        marks
            .codes
            .insert("abc".into(), Mark::Pending(Instant::now()));
        // A position read before the write finished says nothing about it.
        marks.settle(Some((before, 100)), 1_000);
        assert!(matches!(marks.codes["abc"], Mark::Pending(_)));
        // Read after it: the mark waits for that position.
        marks.settle(Some((Instant::now(), 500)), 400);
        assert!(matches!(marks.codes["abc"], Mark::At(500)));
        marks.settle(None, 499);
        assert!(marks.codes.contains_key("abc"));
        marks.settle(None, 500);
        assert!(marks.codes.is_empty());
    }

    /// While the replica replays nothing (down, or promoted and refused), marks pile up; past
    /// their bound one mark on everything stands for them, and ends as any mark does.
    #[test]
    fn marks_keep_to_their_bound_while_the_replica_replays_nothing() {
        let mut marks = Marks::default();
        let codes: Vec<String> = (0..3 * MAX_MARKS).map(|n| format!("c{n}")).collect();
        for (n, code) in codes.iter().enumerate() {
            let tenant = format!("t{}", n % 7);
            marks.mark(
                [code.as_str()],
                Some(&tenant),
                Mark::Pending(Instant::now()),
            );
            assert!(marks.codes.len() + marks.tenants.len() <= MAX_MARKS + 1);
        }
        assert!(marks.everything.is_some(), "one mark stands for the rest");
        marks.settle(Some((Instant::now(), 700)), 699);
        assert!(marks.everything.is_some(), "not yet replayed");
        marks.settle(None, 700);
        assert!(marks.everything.is_none() && marks.codes.is_empty() && marks.tenants.is_empty());
    }

    #[test]
    fn a_mark_of_unknown_tenant_holds_every_list() {
        let mut marks = Marks {
            any: Some(Mark::Pending(Instant::now())),
            ..Marks::default()
        };
        assert!(marks.has_pending());
        marks.settle(Some((Instant::now(), 10)), 9);
        assert!(marks.any.is_some());
        marks.settle(None, 10);
        assert!(marks.any.is_none() && !marks.has_pending());
    }
}
