//! Domain types: requests are parsed from the wire once, here, and nothing invalid goes further.

use crate::error::Error;
use chrono::{DateTime, Utc};
use codespace::Block;
use proto::idalloc::v1 as pb;
use std::fmt;

/// A validated namespace name: `[a-z][a-z0-9_]{0,62}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Namespace(String);

impl Namespace {
    /// Parses a namespace name, refusing anything outside `[a-z][a-z0-9_]{0,62}`.
    pub fn parse(name: &str) -> Result<Self, Error> {
        let bytes = name.as_bytes();
        let Some(first) = bytes.first() else {
            return Err(Error::invalid("namespace is empty"));
        };
        if bytes.len() > 63 {
            return Err(Error::invalid(format!(
                "namespace is {} characters long; the limit is 63",
                name.chars().count()
            )));
        }
        let valid = first.is_ascii_lowercase()
            && bytes
                .iter()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_');
        if !valid {
            return Err(Error::invalid(format!(
                "namespace {name:?} must match [a-z][a-z0-9_]{{0,62}}"
            )));
        }
        Ok(Self(name.to_string()))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Namespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A validated holder identity: 1 to 200 characters, none of them control characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder(String);

impl Holder {
    /// The longest holder accepted, in characters.
    pub const MAX_CHARS: usize = 200;

    /// Parses a holder identity.
    pub fn parse(holder: &str) -> Result<Self, Error> {
        let chars = holder.chars().count();
        if chars == 0 {
            return Err(Error::invalid("holder is missing"));
        }
        if chars > Self::MAX_CHARS {
            return Err(Error::invalid(format!(
                "holder is {chars} characters long; the limit is {}",
                Self::MAX_CHARS
            )));
        }
        if holder.chars().any(char::is_control) {
            return Err(Error::invalid("holder contains control characters"));
        }
        Ok(Self(holder.to_string()))
    }

    /// The holder text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

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
    /// Who takes the block.
    pub holder: Holder,
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
        Ok(Self {
            namespace,
            size: request.size.max(bounds.min),
            holder,
        })
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
        let limit = match request.limit {
            0 => Self::DEFAULT_LIMIT,
            n if n > Self::MAX_LIMIT => {
                return Err(Error::invalid(format!(
                    "limit {n} is above the maximum page of {}",
                    Self::MAX_LIMIT
                )));
            }
            n => n,
        };
        Ok(Self {
            namespace,
            limit,
            before_lease_id: (request.before_lease_id != 0).then_some(request.before_lease_id),
        })
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
    /// Who holds them.
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
            leased_at: Some(prost_types::Timestamp {
                seconds: lease.leased_at.timestamp(),
                nanos: lease.leased_at.timestamp_subsec_nanos() as i32,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUNDS: BlockBounds = BlockBounds { min: 10, max: 1000 };

    fn lease(namespace: &str, size: u64, holder: &str) -> Result<LeaseRequest, Error> {
        LeaseRequest::parse(
            pb::LeaseBlockRequest {
                namespace: namespace.into(),
                size,
                holder: holder.into(),
            },
            BOUNDS,
        )
    }

    #[test]
    fn namespace_names_follow_the_documented_pattern() {
        for good in ["a", "links", "a1_b2", &format!("a{}", "b".repeat(62))] {
            assert!(Namespace::parse(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "Links",
            "1a",
            "_a",
            "a-b",
            "a b",
            "é",
            &format!("a{}", "b".repeat(63)),
        ] {
            assert!(Namespace::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn sizes_are_rounded_up_to_the_minimum_and_capped_at_the_maximum() {
        assert_eq!(lease("a", 1, "h").expect("valid").size, 10);
        assert_eq!(lease("a", 1000, "h").expect("valid").size, 1000);
        assert!(lease("a", 0, "h").is_err());
        assert!(lease("a", 1001, "h").is_err());
    }

    #[test]
    fn holders_must_be_present_printable_and_short() {
        assert!(lease("a", 5, "").is_err());
        assert!(lease("a", 5, "pod\n1").is_err());
        assert!(lease("a", 5, &"é".repeat(200)).is_ok());
        assert!(lease("a", 5, &"x".repeat(201)).is_err());
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
