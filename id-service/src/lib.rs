//! The id-service: grants durable, disjoint blocks of IDs from a PostgreSQL ledger over gRPC.
//!
//! This crate owns the `idalloc.v1.IdAllocator` server, its ledger schema and migrations, and
//! the admin port. A `LeaseBlock` call flows like this: the handler ([`grpc`]) parses the wire
//! request into a [`domain::LeaseRequest`] (malformed input stops here, nothing is written);
//! the [`ledger::Ledger`] runs one autocommit call of the `id_grant_lease()` SQL function, which
//! advances the namespace's sequence by the block size and records the lease in `id_leases`
//! with `synchronous_commit = on`; the reply is built from the committed row. Failures are
//! [`Error`] values, turned into gRPC statuses in exactly one place (`From<Error> for Status`).
//!
//! [`App::build`] validates the [`Config`], migrates, and binds both ports; [`App::run`]
//! serves until cancelled and then drains. `main` and the tests run exactly this code.
//! `docs/design.md` states the invariants (I1: no ID twice), `docs/leases.md` explains why
//! leases are durable and disjoint, and `docs/id-service.md` lists the configuration and metrics.

pub mod admin;
mod app;
pub mod config;
pub mod domain;
mod error;
pub mod grpc;
pub mod ledger;
pub mod metrics;
pub mod migrate;
mod shutdown;
mod telemetry;

pub use app::{App, migrate};
pub use config::{Cli, Command, Config, ConfigError, LogFormat, Secret};
pub use error::Error;
pub use shutdown::shutdown_signal;
pub use telemetry::init_tracing;
