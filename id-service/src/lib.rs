//! The id-service: unique IDs from a PostgreSQL ledger, as durable blocks (`LeaseBlock`) or in
//! one call (`AllocateIds`, also as JSON), for callers with tokens, scopes and quotas.
//!
//! A `LeaseBlock` call flows like this: the handler ([`grpc`]) passes the token, the parsed
//! request ([`domain`]), the scope and the namespace through [`auth::Gate::admit`] (nothing is
//! written before this passes), charges the caller's quotas, then the [`ledger::Ledger`] runs
//! one autocommit call of the `id_grant()` SQL function: it moves the cursor forward if the
//! database went back in time (a new timeline or system), advances the namespace's sequence by
//! the block size and records the lease in `id_leases` with `synchronous_commit = on`. The reply
//! is built from the committed row. `AllocateIds` ([`allocator`]) is served from segments each
//! replica leases the same way and refills in the background ([`segments`]). Failures are
//! [`Error`] values, turned into gRPC statuses in exactly one place (`From<Error> for Status`);
//! the JSON endpoint ([`http_api`]) answers the HTTP form of the same status.
//!
//! [`App::build`] validates the [`Config`], loads the callers, migrates, and binds every port;
//! [`App::run`] serves until cancelled and then drains. `main` and the tests run exactly this
//! code. `docs/design.md` states the invariants (I1: no ID twice), `docs/leases.md` explains why leases are durable and disjoint, also across failovers;
//! `docs/id-service.md` lists the configuration, tokens and metrics.

pub mod allocator;
mod app;
pub mod auth;
pub mod config;
pub mod domain;
mod error;
pub mod grpc;
pub mod http_api;
pub mod ledger;
pub mod logsafe;
pub mod metrics;
pub mod migrate;
pub mod ops;
pub mod segments;
mod shutdown;
mod telemetry;
pub mod tokens_cli;

pub use app::{App, migrate};
pub use config::{
    Action, AddToken, Cli, Command, Config, ConfigError, LogFormat, Secret, TokensCommand,
};
pub use error::Error;
pub use shutdown::shutdown_signal;
pub use telemetry::{init_serving, init_tracing};
