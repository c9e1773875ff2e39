//! A [`Cluster`] that plays a demoted primary, and a multi-host connection string over several:
//! what failover tests need without a whole HA stack (for that, see [`crate::patroni`]).

use crate::cluster::Cluster;
use std::time::Duration;

impl Cluster {
    /// Turns every transaction read-only (`default_transaction_read_only`, set with ALTER
    /// SYSTEM and reloaded), or back: to its sessions, open ones included, the server then
    /// behaves as a demoted primary does, refusing writes with SQLSTATE 25006 and answering
    /// `transaction_read_only = on`, which `target_session_attrs=read-write` skips.
    pub async fn set_read_only(&self, on: bool) {
        let value = if on { "on" } else { "off" };
        let admin = self.connect().await;
        // ALTER SYSTEM runs outside a transaction block: one statement per call.
        for statement in [
            "SET default_transaction_read_only = off".to_string(),
            format!("ALTER SYSTEM SET default_transaction_read_only = {value}"),
            "SELECT pg_reload_conf()".to_string(),
        ] {
            admin
                .batch_execute(&statement)
                .await
                .unwrap_or_else(|e| panic!("{statement}: {e:?}"));
        }
        // The reload reaches every backend at its next command; a new session sees it at once.
        let reloaded = crate::wait_until(Duration::from_secs(10), || async {
            let client = self.connect().await;
            client
                .simple_query("SHOW default_transaction_read_only")
                .await
                .is_ok_and(|rows| {
                    rows.iter().any(|m| {
                        matches!(m, tokio_postgres::SimpleQueryMessage::Row(r) if r.get(0) == Some(value))
                    })
                })
        })
        .await;
        assert!(
            reloaded,
            "default_transaction_read_only did not become {value}"
        );
    }

    /// The connection string of database `name` on the first of `members` that accepts writes
    /// (`target_session_attrs=read-write`), as a multi-host URL lists a cluster's members.
    pub fn multi_host_url(members: &[&Cluster], name: &str) -> String {
        let hosts: Vec<String> = members
            .iter()
            .map(|c| format!("127.0.0.1:{}", c.port()))
            .collect();
        format!(
            "postgres://postgres@{}/{name}?target_session_attrs=read-write",
            hosts.join(",")
        )
    }
}
