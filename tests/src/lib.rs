//! End-to-end fault tests: the real `id-service` and `shortener` binaries as separate
//! processes on a throwaway PostgreSQL cluster, driven by concurrent clients while a nemesis
//! kills processes, restarts PostgreSQL abruptly and cuts links; then a checker proves that no
//! ID or code was handed out twice and no acknowledged link was lost (invariants I1-I3, I7).
//!
//! Flow of a run ([`run::run`]): [`system::System`] starts everything behind [`proxy::Proxy`]s;
//! [`workload::Workload`] clients create and read links, recording each attempt in a
//! [`history::History`]; [`nemesis`] injects faults and records their windows; at the end
//! [`snapshot::Snapshot`] reads the database and [`checker::check`] judges the history.

pub mod binaries;
pub mod checker;
pub mod database;
pub mod ha;
pub mod history;
pub mod nemesis;
pub mod node;
pub mod process;
/// The test-controlled TCP proxy, kept in `testkit` so other harnesses (the Patroni cluster's
/// links to etcd) use the same one.
pub use testkit::proxy;
pub mod run;
pub mod snapshot;
pub mod system;
pub mod transport;
pub mod workload;
