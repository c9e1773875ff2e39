//! Helpers for integration tests that run against a real PostgreSQL.
//!
//! [`TestDb::create`] makes a database with a random name on the server named by
//! `TEST_DATABASE_URL` (default `postgres://postgres@127.0.0.1:5432/postgres`), so tests run in
//! parallel without sharing state; the database is dropped when the value is dropped.
//! [`wait_until`] polls a condition against a deadline instead of sleeping a fixed time.
//! [`cluster::Cluster`] is a whole throwaway PostgreSQL server for tests that crash it, and
//! [`free_port`] and [`free_addr`] pick ports for processes that must be told theirs, and [`tls::TestCerts`]
//! makes certificates for a cluster that serves TLS. [`patroni::Patroni`] is a highly available
//! cluster (etcd and PostgreSQL members under Patroni) for failover tests, and [`proxy::Proxy`]
//! a TCP link a test can cut. [`cluster::Cluster::set_read_only`] makes a cluster behave as a
//! demoted primary, and [`cluster::Cluster::multi_host_url`] lists several as one connection string.
//! [`pgbouncer::PgBouncer`] puts Debian's PgBouncer in front of a server.

pub mod cluster;
mod demote;
pub mod patroni;
pub mod pgbouncer;
pub mod proxy;
pub mod tls;

use std::future::Future;
use std::time::Duration;
use tokio_postgres::NoTls;

/// The administrative connection string for the test server.
pub fn admin_url() -> String {
    std::env::var("TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_string())
}

/// A database that exists for one test.
pub struct TestDb {
    name: String,
    url: String,
}

impl TestDb {
    /// Creates a fresh, uniquely named database and returns it.
    ///
    /// Panics with a clear message when PostgreSQL is unreachable: these tests need it.
    pub async fn create() -> TestDb {
        let name = format!("t_{:016x}", rand::random::<u64>());
        let admin = admin_url();
        let (client, connection) =
            tokio_postgres::connect(&admin, NoTls)
                .await
                .unwrap_or_else(|e| {
                    panic!("connect to PostgreSQL at {admin} (set TEST_DATABASE_URL): {e}")
                });
        tokio::spawn(connection);
        client
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .unwrap_or_else(|e| panic!("create test database {name}: {e}"));
        let url = match admin.rfind('/') {
            Some(slash) if !admin[..slash].ends_with('/') => format!("{}/{name}", &admin[..slash]),
            _ => format!("{admin}/{name}"),
        };
        TestDb { name, url }
    }

    /// The connection string of this database.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The database's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A new connection to this database (the connection task runs on the current runtime).
    pub async fn connect(&self) -> tokio_postgres::Client {
        let (client, connection) = tokio_postgres::connect(&self.url, NoTls)
            .await
            .unwrap_or_else(|e| panic!("connect to test database {}: {e}", self.name));
        tokio::spawn(connection);
        client
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        // Drop on a separate thread with its own runtime: Drop may run inside or outside one.
        let name = self.name.clone();
        let admin = admin_url();
        let _ = std::thread::spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            runtime.block_on(async move {
                if let Ok((client, connection)) = tokio_postgres::connect(&admin, NoTls).await {
                    tokio::spawn(connection);
                    let _ = client
                        .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                        .await;
                }
            });
        })
        .join();
    }
}

/// Polls `condition` every 20 ms until it returns true or `timeout` passes; returns its last
/// answer.
pub async fn wait_until<F, Fut>(timeout: Duration, mut condition: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if condition().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A loopback address with a port that was free a moment ago (the kernel's pick), for a server
/// that must be told its address before it binds.
pub fn free_addr() -> std::net::SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind an ephemeral loopback port")
}

/// Picks a loopback port that is free right now, for a process that must be told its port and
/// may be restarted on it.
///
/// The port comes from below the kernel's ephemeral range, so the outgoing connections of the
/// test itself cannot occupy it while its server is down between a crash and a restart. No port
/// is handed out twice in one test process, so a test that frees its port and checks it is free
/// again cannot find it taken by another test of the same binary. Falls back to an ephemeral
/// port if none is free there.
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<Option<std::collections::HashSet<u16>>> =
        std::sync::Mutex::new(None);
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    let floor = low.saturating_sub(12_000).max(1024);
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    let given = given.get_or_insert_with(Default::default);
    for _ in 0..200 {
        let port = rand::random_range(floor..low.max(floor + 1));
        if !given.contains(&port) && std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            given.insert(port);
            return port;
        }
    }
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind an ephemeral port")
        .port()
}

#[cfg(test)]
mod tests {
    #[test]
    fn no_port_is_handed_out_twice() {
        let ports: Vec<u16> = (0..500).map(|_| super::free_port()).collect();
        let distinct: std::collections::HashSet<u16> = ports.iter().copied().collect();
        assert_eq!(distinct.len(), ports.len(), "a port was handed out twice");
    }
}
