//! A router to the leader, as HAProxy with Patroni's `GET /primary` check is: a [`Proxy`] whose
//! target follows the leader Patroni's REST API names, and which cuts the sessions of a member
//! that stops being the leader (HAProxy's `on-marked-down shutdown-sessions`).

use super::Patroni;
use crate::proxy::{Mode, Proxy};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// Member `i`'s PostgreSQL address.
pub fn member(cluster: &Patroni, i: usize) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], cluster.pg_port(i)))
}

/// Points `router` at the leader as Patroni's REST API names it, every 200 ms, starting from
/// `first`; a member that stops being the leader loses its sessions at once, and with no
/// leader nothing is routed. Stops when the value returned is dropped.
pub fn follow_leader(cluster: Arc<Patroni>, router: Arc<Proxy>, first: usize) -> impl Drop {
    let task = tokio::spawn(async move {
        let mut current = Some(first);
        loop {
            let leader = cluster.leader().await;
            if leader != current {
                router.set_mode(Mode::Reset);
                if let Some(l) = leader {
                    router.set_target(member(&cluster, l));
                    router.set_mode(Mode::Open);
                }
                current = leader;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
    AbortOnDrop(task)
}

/// Aborts its task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
