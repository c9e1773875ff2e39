//! The shortener node through its real interfaces: servers on ports, real HTTP and gRPC
//! clients, SQLite files and PostgreSQL databases of their own. One test binary, one module per
//! behaviour; `helpers` starts nodes and talks to them.

#[macro_use]
mod helpers;
mod route_stats;
mod served;
mod signin;
mod splits;

mod admin;
mod analytics;
mod bad_input;
mod cache;
mod cli;
mod clicks;
mod compat_bitly;
mod compat_cors;
mod compat_shlink;
mod compat_yourls;
mod config;
mod console;
mod console_details;
mod console_domains;
mod console_keys;
mod console_routing;
mod console_sharing;
mod csv_routing;
mod demoted;
mod domain_files;
mod domains;
mod editing;
mod exports;
mod first_start;
mod grpc;
mod grpc_manage;
mod hardening;
mod id_shortage;
mod importing;
mod impossible;
mod keys;
mod limits;
mod link_domains;
mod links;
mod listing;
mod metrics;
mod nodes;
mod pooler;
mod probing;
mod protected;
mod protected_browser;
mod qr;
mod readme;
mod redirects;
mod replica;
mod reserved;
mod routing_bad_input;
mod rules;
mod store;
mod tags;
mod targets;
mod tenants;
mod timeouts;
mod tls;
mod webhooks;
mod write_only;
