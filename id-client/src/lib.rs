//! Hands out unique IDs from RAM, backed by leased blocks.
//!
//! An [`IdPool`] holds the block it is handing out and one spare, and a background task keeps
//! the spare filled from a [`LeaseSource`]: the id-service over gRPC ([`GrpcLeaseSource`]) or
//! any other ledger with the same guarantees (the shortener's embedded mode leases from its
//! SQLite file). Taking an ID is a counter bump under a `std::sync::Mutex`; nothing awaits while
//! the lock is held and nothing in the hot path touches the network.
//!
//! Guarantees:
//! - An ID comes only from a block the source granted to this pool, and each ID is handed out
//!   at most once: a block is never resumed after a restart (a new pool always leases anew; IDs
//!   left over are a gap, never reused).
//! - Block sizes follow the consumption rate (a block lasts about
//!   [`PoolConfig::target_block_duration`], within `min_block..=max_block`), so an idle node wastes
//!   little on restart and a busy node leases rarely.
//! - When the source is unreachable the pool keeps handing out what it holds (current block and
//!   spare), exposes how long that will last ([`PoolStats::runway_seconds`]), then fails fast with
//!   [`IdError::Exhausted`] and recovers by itself once leases succeed again.
//! - A block that starts below one already seen is refused and counted
//!   ([`PoolStats::rewinds`]): it means the ledger went back in time (for example a restore), and
//!   using it could repeat IDs. Every lease request also reports the pool's high water
//!   ([`LeaseSource::lease_reporting`]), so that an id-service whose database failed over
//!   grants above it in the first place.
//!
//! Callers that do not want to hold blocks use [`AllocateClient`] instead: one `AllocateIds`
//! call per batch of IDs, served from segments the id-service holds.
//!
//! Modules: `pool` ([`IdPool`]), `rate` (the consumption-rate estimate that sizes blocks),
//! `source` (the [`LeaseSource`] trait and its errors), `grpc` ([`GrpcLeaseSource`]),
//! `allocate` ([`AllocateClient`]), `channel` (the channel both gRPC clients share).

mod allocate;
mod channel;
mod grpc;
mod pool;
mod rate;
mod source;

pub use allocate::{AllocateClient, AllocateClientConfig, AllocateError};
pub use grpc::{GrpcLeaseSource, GrpcSourceConfig};
pub use pool::{IdError, IdPool, PoolConfig, PoolStats};
pub use source::{Lease, LeaseError, LeaseFuture, LeaseSource};
