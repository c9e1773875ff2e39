//! Namespace management: create, describe and list, and what a description holds.

use super::lease::{page_limit, timestamp};
use super::{Namespace, Scoped};
use crate::error::Error;
use chrono::{DateTime, Utc};
use proto::idalloc::v1 as pb;

/// The highest bound a namespace can have: one below `i64::MAX`, so that "one past the last ID"
/// still fits PostgreSQL's bigint.
pub const MAX_BOUND: u64 = i64::MAX as u64 - 1;

/// A valid request to create a namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateNamespace {
    /// The name.
    pub namespace: Namespace,
    /// The first ID it grants.
    pub first_id: u64,
    /// The highest ID it may grant.
    pub max_id: u64,
    /// The largest lease, if below the server's.
    pub max_block: Option<u64>,
}

impl CreateNamespace {
    /// Parses a wire request; zeros take the server's defaults (`default_max_id`, and the
    /// server's block bounds, `server_blocks`: a namespace's largest block may not exceed the
    /// server's largest, nor fall below its smallest, to which every lease is rounded up).
    pub fn parse(
        request: pb::CreateNamespaceRequest,
        default_max_id: u64,
        server_blocks: std::ops::RangeInclusive<u64>,
    ) -> Result<Self, Error> {
        let (server_min_block, server_max_block) = server_blocks.into_inner();
        let namespace = Namespace::parse(&request.name)?;
        let first_id = request.first_id.max(1);
        let max_id = match request.max_id {
            0 => default_max_id,
            n => n,
        };
        if max_id > MAX_BOUND {
            return Err(Error::invalid(format!(
                "max_id {max_id} is above the largest bound, {MAX_BOUND}"
            )));
        }
        if first_id > max_id {
            return Err(Error::invalid(format!(
                "first_id {first_id} is above max_id {max_id}"
            )));
        }
        let max_block = match request.max_block {
            0 => None,
            n if n > server_max_block => {
                return Err(Error::invalid(format!(
                    "max_block {n} is above the server's maximum block of {server_max_block}"
                )));
            }
            n if n < server_min_block => {
                return Err(Error::invalid(format!(
                    "max_block {n} is below the server's minimum block of {server_min_block} \
                     (ID_SERVICE_MIN_BLOCK), to which every lease is rounded up: no lease could \
                     be granted"
                )));
            }
            n => Some(n),
        };
        Ok(Self {
            namespace,
            first_id,
            max_id,
            max_block,
        })
    }
}

impl Scoped for CreateNamespace {
    fn namespace(&self) -> Option<&Namespace> {
        Some(&self.namespace)
    }
}

/// Which namespace to describe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribeNamespace(pub Namespace);

impl TryFrom<pb::DescribeNamespaceRequest> for DescribeNamespace {
    type Error = Error;
    fn try_from(request: pb::DescribeNamespaceRequest) -> Result<Self, Error> {
        Ok(Self(Namespace::parse(&request.name)?))
    }
}

impl Scoped for DescribeNamespace {
    fn namespace(&self) -> Option<&Namespace> {
        Some(&self.0)
    }
}

/// A page of namespaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListNamespaces {
    /// Page size, 1..=1000.
    pub limit: u32,
    /// Only names after this one.
    pub after: Option<Namespace>,
}

impl TryFrom<pb::ListNamespacesRequest> for ListNamespaces {
    type Error = Error;
    fn try_from(request: pb::ListNamespacesRequest) -> Result<Self, Error> {
        Ok(Self {
            limit: page_limit(request.limit, 100, 1000)?,
            after: match request.after.as_str() {
                "" => None,
                name => Some(Namespace::parse(name)?),
            },
        })
    }
}

impl Scoped for ListNamespaces {
    fn namespace(&self) -> Option<&Namespace> {
        None
    }
}

/// What the ledger knows about a namespace.
#[derive(Debug, Clone, PartialEq)]
pub struct NamespaceInfo {
    /// The name.
    pub name: String,
    /// The first ID it grants.
    pub first_id: u64,
    /// The highest ID it may grant.
    pub max_id: u64,
    /// The largest lease.
    pub max_block: u64,
    /// The cursor: the highest ID granted or skipped (first_id - 1 before any grant).
    pub last_id: u64,
    /// IDs in leases granted.
    pub ids_granted: u64,
    /// Cursor advance per second over the last hour (or since creation).
    pub grant_rate_per_second: f64,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When the description was read (the database's clock).
    pub read_at: DateTime<Utc>,
    /// The timeline of the last grant.
    pub timeline: u64,
    /// Moves of the cursor on finding a new timeline or system.
    pub timeline_jumps: u64,
    /// The last of those moves.
    pub last_jump_at: Option<DateTime<Utc>>,
}

impl NamespaceInfo {
    /// IDs left below the bound.
    pub fn remaining(&self) -> u64 {
        self.max_id.saturating_sub(self.last_id)
    }

    /// When the namespace runs out at the current grant rate; `None` while the rate is 0.
    pub fn projected_exhaustion(&self) -> Option<DateTime<Utc>> {
        if self.grant_rate_per_second <= 0.0 {
            return None;
        }
        let seconds = self.remaining() as f64 / self.grant_rate_per_second;
        // Beyond chrono's range (about 262,000 years) there is nothing useful to say.
        let delta = chrono::TimeDelta::try_milliseconds((seconds * 1000.0).min(1e16) as i64)?;
        self.read_at.checked_add_signed(delta)
    }
}

impl From<NamespaceInfo> for pb::NamespaceInfo {
    fn from(info: NamespaceInfo) -> Self {
        pb::NamespaceInfo {
            remaining: info.remaining(),
            projected_exhaustion: info.projected_exhaustion().map(timestamp),
            name: info.name,
            first_id: info.first_id,
            max_id: info.max_id,
            max_block: info.max_block,
            last_id: info.last_id,
            ids_granted: info.ids_granted,
            grant_rate_per_second: info.grant_rate_per_second,
            created_at: Some(timestamp(info.created_at)),
            timeline: info.timeline,
            timeline_jumps: info.timeline_jumps,
            last_jump_at: info.last_jump_at.map(timestamp),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn create(
        name: &str,
        first_id: u64,
        max_id: u64,
        max_block: u64,
    ) -> Result<CreateNamespace, Error> {
        CreateNamespace::parse(
            pb::CreateNamespaceRequest {
                name: name.into(),
                first_id,
                max_id,
                max_block,
            },
            1_000_000,
            10..=10_000,
        )
    }

    #[test]
    fn zeros_take_the_defaults_and_inconsistent_bounds_are_refused() {
        let plain = create("orders", 0, 0, 0).expect("valid");
        assert_eq!(
            (plain.first_id, plain.max_id, plain.max_block),
            (1, 1_000_000, None)
        );
        let custom = create("orders", 1000, 5000, 100).expect("valid");
        assert_eq!(
            (custom.first_id, custom.max_id, custom.max_block),
            (1000, 5000, Some(100))
        );
        for (case, result) in [
            ("first above max", create("a", 10, 5, 0)),
            ("bound too high", create("a", 0, u64::MAX, 0)),
            ("block above the server's", create("a", 0, 0, 10_001)),
            ("block below the server's least", create("a", 0, 0, 9)),
            ("bad name", create("A", 0, 0, 0)),
        ] {
            assert!(result.is_err(), "{case}");
        }
    }

    #[test]
    fn exhaustion_is_projected_from_the_rate_and_absent_without_one() {
        let at = DateTime::from_timestamp(1_000_000, 0).expect("time");
        let mut info = NamespaceInfo {
            name: "a".into(),
            first_id: 1,
            max_id: 1_000,
            max_block: 10,
            last_id: 400,
            ids_granted: 400,
            grant_rate_per_second: 2.0,
            created_at: at,
            read_at: at,
            timeline: 1,
            timeline_jumps: 0,
            last_jump_at: None,
        };
        assert_eq!(info.remaining(), 600);
        assert_eq!(
            info.projected_exhaustion(),
            DateTime::from_timestamp(1_000_300, 0)
        );
        info.grant_rate_per_second = 0.0;
        assert_eq!(info.projected_exhaustion(), None);
    }
}
