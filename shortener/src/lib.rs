//! A URL shortener node: redirects at the edge, a JSON and a gRPC API for internal services,
//! over PostgreSQL or an embedded SQLite file. The design and its invariants (I1-I8) are in
//! `docs/design.md`.
//!
//! # Map
//!
//! Every module, one line each; a part's settings are its section of [`config`].
//!
//! - [`app`]: building and running a node (wiring, listeners, background tasks, drain).
//! - [`config`]: flags and environment variables in one section per part, checked before
//!   anything is bound.
//! - [`domain`]: links, creates, codes, callers, errors; no transport or store types.
//! - [`links`]: the link service (create, get, delete, list, update, history, import, export).
//! - [`access`]: API keys and the one admission of every API request (authentication, rate
//!   limits, batch bounds); [`limits`]: the token buckets, the password checks and the client
//!   address.
//! - [`redirects`]: where a code goes ([`redirects::Resolver`]), from the redirect cache
//!   ([`redirects::LinkCache`]) or the store.
//! - [`targets`]: what targets are refused (own hosts, private addresses, the blocklist) and
//!   the blocklist service.
//! - [`domains`]: branded domains, each host owned by one tenant, with its settings.
//! - [`keys`]: the API keys tenant admins make through the API, kept in the store and in force
//!   beside the keys file's.
//! - [`http`]: the public listener: the redirect edge ([`http::redirect`]), the JSON API and the
//!   console; [`grpc`]: the `shortener.v1.Links` service; [`ops`]: the operations listener
//!   (health, readiness, metrics; `SHORTENER_ADMIN_ADDR`).
//! - [`visits`]: each served redirect classified once and counted off the redirect path, in
//!   the exact click totals ([`visits::clicks`]) and by hour, referrer, device and country in
//!   the rollups of the stats API ([`visits::analytics`]), both flushed in batches on one
//!   schedule ([`clock`]: the time it runs on).
//! - [`webhooks`]: signed deliveries of link events from the store's outbox.
//! - [`qr`]: QR codes of short URLs (SVG and PNG).
//! - [`store`]: the store interfaces (links, visits, webhook outbox, blocklist, domains, API
//!   keys, capabilities)
//!   and their PostgreSQL and SQLite backends.
//! - [`net`]: connection caps per listener and client, the open-file budget, idle gRPC
//!   connections, stalled writers.
//! - [`metrics`]: the exposition, a leaf: each part reports its own series.
//! - [`telemetry`], [`shutdown`], [`watch`]: logs, the signal, files re-read when they change.
//! - [`cli`]: the binary's subcommands; [`secrets`]: key files.
//!
//! "admin" means one thing in code: the API scope that manages tenants' keys, webhooks and the
//! blocklist. The operations listener keeps its `SHORTENER_ADMIN_ADDR` name for compatibility.
//!
//! # Invariants, and where each is kept
//!
//! - I1 no ID twice: `id_client::IdPool` (never below a block it has seen) over a durable
//!   ledger (the id-service, or the embedded one in [`store`]).
//! - I2 no code maps to two URLs: the store's unique indexes ([`store::LinkStore::insert`]).
//! - I3 no lost acknowledgement: a create answers after its commit ([`links`]).
//! - I4 fixed-length codes that reveal no order: `codespace::CodeSpace`.
//! - I5 aliases cannot shadow generated codes: [`domain`]'s code shapes.
//! - I6 bad input is refused cleanly: [`domain::CreateRequest::parse`] and the transports'
//!   bounds.
//! - I7 bounded degradation: the ID pool's runway and the fail-fast paths ([`links`],
//!   [`redirects`]).
//! - I8 click rollups add up: [`visits`].
//!
//! # A create
//!
//! HTTP `POST /api/v1/links` or gRPC `CreateLink` -> [`access::Admission::admit`] (key, rate)
//! -> the transport's one conversion to a [`domain::CreateInput`] -> [`domain::CreateRequest::parse`]
//! (every rule, nothing stored on a refusal) -> [`links::LinkService::create`]: the next ID
//! from the in-memory [`id_client::IdPool`], permuted into a code by the
//! [`codespace::CodeSpace`], inserted with `ON CONFLICT DO NOTHING` through the store's
//! batching ([`store::LinkStore::insert`]); the reply goes out after the commit.
//!
//! # A redirect
//!
//! `GET /{code}` -> [`http::redirect`] -> [`redirects::Resolver`]: a path that cannot be a code
//! is answered 404 without the store; a cached code is answered at once; otherwise the store is read and the
//! answer cached -> 302 with `Location` (404, 410), the click counted in memory
//! ([`visits::Visits::record`]).

pub mod access;
pub mod app;
pub mod audit;
pub mod cli;
pub mod clock;
pub mod config;
pub mod domain;
pub mod domains;
pub mod grpc;
pub mod http;
pub mod keys;
pub mod limits;
pub mod links;
pub mod metrics;
pub mod net;
pub mod ops;
pub mod qr;
pub mod redirects;
pub mod secrets;
pub mod shutdown;
pub mod signin;
pub mod store;
pub mod targets;
pub mod telemetry;
pub mod visits;
pub mod watch;
pub mod webhooks;

pub use app::App;
pub use config::Config;
