//! The PostgreSQL the system under test runs on: one throwaway cluster the nemesis crashes and
//! cuts per node through proxies, or a Patroni cluster (three members under etcd) it fails over.

use std::net::SocketAddr;
use testkit::cluster::Cluster;
use testkit::patroni::{Patroni, Replication};

/// Which PostgreSQL a run uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DatabaseKind {
    /// One cluster; every node reaches it through its own proxy.
    Single,
    /// Three Patroni members replicating as given; every process connects with a multi-host
    /// URL and `target_session_attrs=read-write`.
    Patroni(Replication),
}

/// The running PostgreSQL.
pub enum Database {
    /// See [`DatabaseKind::Single`].
    Single(Cluster),
    /// See [`DatabaseKind::Patroni`].
    Patroni(Patroni),
}

impl Database {
    /// Starts the database of `kind`.
    pub async fn start(kind: DatabaseKind) -> Database {
        match kind {
            // fsync buys nothing here: the faults kill processes, not the machine, so what
            // PostgreSQL has written survives in the page cache either way; synchronous_commit
            // still makes every commit wait for its WAL write.
            DatabaseKind::Single => {
                Database::Single(Cluster::start(&["max_connections = 200", "fsync = off"]).await)
            }
            DatabaseKind::Patroni(replication) => {
                Database::Patroni(Patroni::start(replication).await)
            }
        }
    }

    /// Creates database `name` and returns the URL the id-services (and the checker) use.
    pub async fn create_database(&self, name: &str) -> String {
        match self {
            Database::Single(pg) => pg.create_database(name).await,
            Database::Patroni(cluster) => cluster.create_database(name).await,
        }
    }

    /// Where a node's proxy to PostgreSQL forwards, when nodes connect through one.
    pub fn proxied_target(&self) -> Option<SocketAddr> {
        match self {
            Database::Single(pg) => Some(SocketAddr::from(([127, 0, 0, 1], pg.port()))),
            Database::Patroni(_) => None,
        }
    }

    /// The single cluster; panics for a Patroni cluster (its faults are Patroni's own).
    pub fn single(&self) -> &Cluster {
        match self {
            Database::Single(pg) => pg,
            Database::Patroni(_) => panic!("a single-cluster fault on a Patroni cluster"),
        }
    }

    /// The Patroni cluster, if the run has one.
    pub fn patroni_mut(&mut self) -> Option<&mut Patroni> {
        match self {
            Database::Patroni(cluster) => Some(cluster),
            Database::Single(_) => None,
        }
    }

    /// The Patroni cluster; panics for a single cluster.
    pub fn patroni(&mut self) -> &mut Patroni {
        match self {
            Database::Patroni(cluster) => cluster,
            Database::Single(_) => panic!("a Patroni fault on a single cluster"),
        }
    }
}
