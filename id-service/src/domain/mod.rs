//! Domain types: requests are parsed from the wire once, here, and nothing invalid goes further.
//!
//! - [`names`]: namespace, holder and caller names.
//! - [`lease`]: `LeaseBlock`, `LookupId`, `ListLeases` and the lease itself.
//! - [`allocate`]: `AllocateIds` and its ranges.
//! - [`namespaces`]: namespace management.

pub mod allocate;
pub mod lease;
pub mod names;
pub mod namespaces;

pub use allocate::{AllocateRequest, IdRanges};
pub use lease::{BlockBounds, Lease, LeaseRequest, ListRequest, LookupRequest};
pub use names::{BadCallerName, CallerName, Holder, Namespace};
pub use namespaces::{CreateNamespace, DescribeNamespace, ListNamespaces, NamespaceInfo};

/// A request that names the namespace it acts on (if any), so the authorization check can
/// hold it against the caller's token.
pub trait Scoped {
    /// The namespace the request acts on; `None` for requests about no single namespace.
    fn namespace(&self) -> Option<&Namespace>;
}
