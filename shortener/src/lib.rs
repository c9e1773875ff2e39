//! A URL shortener node.
//!
//! The crate owns everything a node does: the redirect edge and JSON API ([`http`]), the admin
//! endpoints ([`admin`]), the link service ([`service`]) over a store ([`store`]: PostgreSQL or
//! an embedded SQLite file), and start-up ([`app`], [`setup`]).
//!
//! A create flows: HTTP handler -> [`service::LinkService::validate`] (wire input becomes a
//! domain [`domain::CreateRequest`]) -> [`service::LinkService::create`], which takes the next
//! ID from the in-memory [`id_client::IdPool`], permutes it into a code with the
//! [`codespace::CodeSpace`], and inserts the row with `ON CONFLICT DO NOTHING`; the reply goes
//! out after the commit. A redirect flows: `GET /{code}` -> shape check (no store access for
//! paths that cannot be codes) -> store -> 302 with `Location`.

pub mod admin;
pub mod app;
pub mod auth;
pub mod cache;
pub mod cli;
pub mod clicks;
pub mod code_map_key;
pub mod codes_cli;
pub mod config;
pub mod domain;
pub mod grpc;
pub mod http;
pub mod keys;
pub mod limits;
pub mod metrics;
pub mod service;
pub mod setup;
pub mod store;
pub mod telemetry;

pub use app::App;
pub use config::Config;
