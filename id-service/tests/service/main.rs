//! The id-service's integration tests, one binary: real servers on free ports (in this process
//! or the `id-service` binary as a child), a real PostgreSQL (a database per test, or a private
//! cluster the test crashes), clients over gRPC and JSON. Run one group with
//! `cargo test -p id-service --test service -- <module>::`.

mod helpers;

mod allocate;
mod allocate_json;
mod allocate_kill9;
mod auth;
mod auth_operations;
mod cli;
mod demoted;
mod failover;
mod id_pool;
mod kill9;
mod namespaces;
mod patroni_pooler;
mod pooler;
mod postgres_crash;
mod replicas;
mod requests;
mod serving;
mod tls;
mod tokens_cli;
