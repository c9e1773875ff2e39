//! `AllocateIds`: a request for IDs in one call, and the ranges that answer it.

use super::{Namespace, Scoped};
use crate::error::Error;
use proto::idalloc::v1 as pb;
use std::ops::Range;

/// A valid request for `count` IDs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllocateRequest {
    /// Where to draw from.
    pub namespace: Namespace,
    /// How many IDs, 1 to the server's maximum per call.
    pub count: u64,
}

impl AllocateRequest {
    /// Parses a namespace and count under the server's maximum per call.
    pub fn parse(namespace: &str, count: u64, max_count: u64) -> Result<Self, Error> {
        let namespace = Namespace::parse(namespace)?;
        if count == 0 {
            return Err(Error::invalid("count must be at least 1"));
        }
        if count > max_count {
            return Err(Error::invalid(format!(
                "count {count} is above the maximum of {max_count} per call"
            )));
        }
        Ok(Self { namespace, count })
    }

    /// Parses a wire request.
    pub fn from_wire(request: pb::AllocateIdsRequest, max_count: u64) -> Result<Self, Error> {
        Self::parse(&request.namespace, request.count, max_count)
    }
}

impl Scoped for AllocateRequest {
    fn namespace(&self) -> Option<&Namespace> {
        Some(&self.namespace)
    }
}

/// The IDs handed out for one request: ascending, disjoint, non-empty half-open ranges.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct IdRanges(Vec<Range<u64>>);

impl IdRanges {
    /// Appends `range`, merging it into the last one when they touch. Ranges must come in
    /// ascending order; empty ones are ignored.
    pub fn push(&mut self, range: Range<u64>) {
        if range.is_empty() {
            return;
        }
        match self.0.last_mut() {
            Some(last) if last.end == range.start => last.end = range.end,
            _ => self.0.push(range),
        }
    }

    /// How many IDs the ranges hold.
    pub fn count(&self) -> u64 {
        self.0.iter().map(|r| r.end - r.start).sum()
    }

    /// The ranges.
    pub fn ranges(&self) -> &[Range<u64>] {
        &self.0
    }
}

impl From<IdRanges> for pb::AllocateIdsResponse {
    fn from(ranges: IdRanges) -> Self {
        pb::AllocateIdsResponse {
            ranges: ranges
                .0
                .into_iter()
                .map(|r| pb::IdRange {
                    start: r.start,
                    end: r.end,
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_must_be_between_one_and_the_maximum_per_call() {
        assert!(AllocateRequest::parse("links", 1, 100).is_ok());
        assert!(AllocateRequest::parse("links", 100, 100).is_ok());
        assert!(AllocateRequest::parse("links", 0, 100).is_err());
        assert!(AllocateRequest::parse("links", 101, 100).is_err());
        assert!(AllocateRequest::parse("Links", 1, 100).is_err());
    }

    #[test]
    fn touching_ranges_merge_and_the_count_adds_up() {
        let mut ranges = IdRanges::default();
        ranges.push(1..5);
        ranges.push(5..9);
        ranges.push(9..9);
        ranges.push(20..22);
        assert_eq!(ranges.ranges(), [1..9, 20..22]);
        assert_eq!(ranges.count(), 10);
    }
}
