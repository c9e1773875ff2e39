//! `LeaseBlock`, `LookupId` and `ListLeases` requests, and the lease they return.

use super::{Holder, Namespace, Scoped};
use crate::error::Error;
use chrono::{DateTime, Utc};
use codespace::Block;
use proto::idalloc::v1 as pb;

/// The server's bounds on block sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockBounds {
    /// Smaller requests are rounded up to this.
    pub min: u64,
    /// Larger requests are refused.
    pub max: u64,
}

/// A valid request for a block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRequest {
    /// Where to draw from.
    pub namespace: Namespace,
    /// How many IDs to grant, already within the server's bounds.
    pub size: u64,
    /// Who takes the block, as the caller names it (the instance, with tokens).
    pub holder: Holder,
    /// One past the highest ID the caller reports holding, if it reported one.
    pub high_water: Option<u64>,
}

impl LeaseRequest {
    /// Parses a wire request under the server's block bounds.
    pub fn parse(request: pb::LeaseBlockRequest, bounds: BlockBounds) -> Result<Self, Error> {
        let namespace = Namespace::parse(&request.namespace)?;
        if request.size == 0 {
            return Err(Error::invalid("size must be at least 1"));
        }
        if request.size > bounds.max {
            return Err(Error::invalid(format!(
                "size {} is above the maximum block of {}",
                request.size, bounds.max
            )));
        }
        let holder = Holder::parse(&request.holder)?;
        let high_water = match request.high_water {
            None | Some(0) => None,
            // IDs are bigint in the ledger: one past the last ID is at most i64::MAX.
            Some(h) if h > i64::MAX as u64 => {
                return Err(Error::invalid(format!(
                    "high_water {h} is above the largest ID a namespace can have"
                )));
            }
            Some(h) => Some(h),
        };
        Ok(Self {
            namespace,
            size: request.size.max(bounds.min),
            holder,
            high_water,
        })
    }
}

impl Scoped for LeaseRequest {
    fn namespace(&self) -> Option<&Namespace> {
        Some(&self.namespace)
    }
}

/// A valid look-up of one ID.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LookupRequest {
    /// The namespace of the ID.
    pub namespace: Namespace,
    /// The ID.
    pub id: u64,
}

impl TryFrom<pb::LookupIdRequest> for LookupRequest {
    type Error = Error;
    fn try_from(request: pb::LookupIdRequest) -> Result<Self, Error> {
        Ok(Self {
            namespace: Namespace::parse(&request.namespace)?,
            id: request.id,
        })
    }
}

impl Scoped for LookupRequest {
    fn namespace(&self) -> Option<&Namespace> {
        Some(&self.namespace)
    }
}

/// A valid page request over a namespace's leases.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListRequest {
    /// The namespace to list.
    pub namespace: Namespace,
    /// Page size, 1..=1000.
    pub limit: u32,
    /// Only leases below this ID; `None` starts from the newest.
    pub before_lease_id: Option<u64>,
}

impl ListRequest {
    /// The page size when the caller sends 0.
    pub const DEFAULT_LIMIT: u32 = 100;
    /// The largest page.
    pub const MAX_LIMIT: u32 = 1000;
}

impl TryFrom<pb::ListLeasesRequest> for ListRequest {
    type Error = Error;
    fn try_from(request: pb::ListLeasesRequest) -> Result<Self, Error> {
        let namespace = Namespace::parse(&request.namespace)?;
        let limit = page_limit(request.limit, Self::DEFAULT_LIMIT, Self::MAX_LIMIT)?;
        Ok(Self {
            namespace,
            limit,
            before_lease_id: (request.before_lease_id != 0).then_some(request.before_lease_id),
        })
    }
}

impl Scoped for ListRequest {
    fn namespace(&self) -> Option<&Namespace> {
        Some(&self.namespace)
    }
}

/// A page size: 0 means `default`, above `max` is refused.
pub(crate) fn page_limit(limit: u32, default: u32, max: u32) -> Result<u32, Error> {
    match limit {
        0 => Ok(default),
        n if n > max => Err(Error::invalid(format!(
            "limit {n} is above the maximum page of {max}"
        ))),
        n => Ok(n),
    }
}

/// A lease as recorded in the ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The ledger's identifier of the lease.
    pub lease_id: u64,
    /// The namespace of the IDs.
    pub namespace: String,
    /// The IDs granted.
    pub block: Block,
    /// Who holds them, as recorded.
    pub holder: String,
    /// When the lease was committed.
    pub leased_at: DateTime<Utc>,
}

impl From<Lease> for pb::Lease {
    fn from(lease: Lease) -> Self {
        pb::Lease {
            lease_id: lease.lease_id,
            namespace: lease.namespace,
            start: lease.block.start,
            end: lease.block.end,
            holder: lease.holder,
            leased_at: Some(timestamp(lease.leased_at)),
        }
    }
}

/// A wire timestamp.
pub(crate) fn timestamp(at: DateTime<Utc>) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: at.timestamp(),
        nanos: i32::try_from(at.timestamp_subsec_nanos()).unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUNDS: BlockBounds = BlockBounds { min: 10, max: 1000 };

    fn lease(size: u64, high_water: Option<u64>) -> Result<LeaseRequest, Error> {
        LeaseRequest::parse(
            pb::LeaseBlockRequest {
                namespace: "a".into(),
                size,
                holder: "h".into(),
                high_water,
            },
            BOUNDS,
        )
    }

    #[test]
    fn sizes_are_rounded_up_to_the_minimum_and_capped_at_the_maximum() {
        assert_eq!(lease(1, None).expect("valid").size, 10);
        assert_eq!(lease(1000, None).expect("valid").size, 1000);
        assert!(lease(0, None).is_err());
        assert!(lease(1001, None).is_err());
    }

    #[test]
    fn a_reported_high_water_of_zero_means_none_and_above_the_id_range_is_refused() {
        assert_eq!(lease(5, Some(0)).expect("valid").high_water, None);
        assert_eq!(lease(5, Some(77)).expect("valid").high_water, Some(77));
        assert!(lease(5, Some(u64::MAX)).is_err());
    }

    #[test]
    fn list_limits_default_to_100_and_stop_at_1000() {
        let list = |limit| {
            ListRequest::try_from(pb::ListLeasesRequest {
                namespace: "a".into(),
                limit,
                before_lease_id: 0,
            })
        };
        assert_eq!(list(0).expect("valid").limit, 100);
        assert_eq!(list(1000).expect("valid").limit, 1000);
        assert!(list(1001).is_err());
    }
}
