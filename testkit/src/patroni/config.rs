//! The configuration files of a test's Patroni members.

use std::net::SocketAddr;
use std::path::Path;

/// How the cluster replicates, as Patroni's dynamic configuration says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replication {
    /// Asynchronous streaming: a failover may lose what the old leader had not sent yet (up to
    /// `maximum_lag_on_failover`).
    Async,
    /// `synchronous_mode: true`: a commit waits for one synchronous standby, and only that
    /// standby may be promoted; with no standby left the leader writes alone.
    Sync,
    /// `synchronous_mode_strict: true` as well: with no synchronous standby, commits wait.
    SyncStrict,
}

impl Replication {
    /// The lines of the `bootstrap.dcs` section that set the mode.
    fn dcs_lines(self) -> &'static str {
        match self {
            Replication::Async => "    synchronous_mode: false\n",
            Replication::Sync => "    synchronous_mode: true\n",
            Replication::SyncStrict => {
                "    synchronous_mode: true\n    synchronous_mode_strict: true\n"
            }
        }
    }

    /// A short name for logs and reports.
    pub fn name(self) -> &'static str {
        match self {
            Replication::Async => "async",
            Replication::Sync => "sync",
            Replication::SyncStrict => "sync-strict",
        }
    }
}

/// Where one member listens and keeps its files.
pub(super) struct MemberPlan<'a> {
    pub scope: &'a str,
    pub name: &'a str,
    pub dir: &'a Path,
    pub bin_dir: &'a Path,
    pub pg_port: u16,
    pub rest: SocketAddr,
    /// The member's own way to etcd (the test's proxy in front of it).
    pub etcd: SocketAddr,
    pub replication: Replication,
    pub ttl: u32,
}

/// The member's `patroni.yml`. `use_proxies` keeps Patroni on the test's proxy: without it,
/// Patroni asks etcd for its members and talks to the address etcd advertises, around the
/// proxy, and a partition would cut nothing. Everything is on 127.0.0.1 with trust authentication; the leader
/// key's TTL is short and the loop fast, so a failover in a test takes seconds, not a minute.
pub(super) fn member_yaml(plan: &MemberPlan) -> String {
    let dir = plan.dir.display();
    let retry_timeout = (plan.ttl.saturating_sub(1) / 2).clamp(3, 10);
    format!(
        "scope: {scope}\n\
         name: {name}\n\
         log:\n  level: INFO\n\
         restapi:\n  listen: {rest}\n  connect_address: {rest}\n\
         etcd3:\n  hosts: {etcd}\n  use_proxies: true\n\
         bootstrap:\n\
         \x20 dcs:\n\
         \x20   ttl: {ttl}\n\
         \x20   loop_wait: 1\n\
         \x20   retry_timeout: {retry_timeout}\n\
         \x20   maximum_lag_on_failover: 1048576\n\
         {mode}\
         \x20   postgresql:\n\
         \x20     use_pg_rewind: true\n\
         \x20     use_slots: true\n\
         \x20     parameters:\n\
         \x20       wal_log_hints: 'on'\n\
         \x20       max_connections: 200\n\
         \x20       max_wal_senders: 10\n\
         \x20       max_replication_slots: 10\n\
         \x20 initdb:\n  - encoding: UTF8\n  - no-sync\n\
         \x20 pg_hba:\n\
         \x20 - local all all trust\n\
         \x20 - host all all 127.0.0.1/32 trust\n\
         \x20 - host replication all 127.0.0.1/32 trust\n\
         postgresql:\n\
         \x20 listen: 127.0.0.1:{pg_port}\n\
         \x20 connect_address: 127.0.0.1:{pg_port}\n\
         \x20 data_dir: {dir}/data\n\
         \x20 bin_dir: {bin}\n\
         \x20 pgpass: {dir}/pgpass\n\
         \x20 authentication:\n\
         \x20   superuser: {{username: postgres}}\n\
         \x20   replication: {{username: postgres}}\n\
         \x20   rewind: {{username: postgres}}\n\
         \x20 parameters:\n\
         \x20   unix_socket_directories: '{dir}'\n\
         \x20   shared_buffers: 16MB\n\
         \x20   fsync: 'off'\n\
         \x20   autovacuum: 'off'\n",
        scope = plan.scope,
        name = plan.name,
        rest = plan.rest,
        etcd = plan.etcd,
        ttl = plan.ttl,
        mode = plan.replication.dcs_lines(),
        pg_port = plan.pg_port,
        bin = plan.bin_dir.display(),
    )
}
