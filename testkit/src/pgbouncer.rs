//! A PgBouncer (Debian's `/usr/sbin/pgbouncer`) in front of a PostgreSQL server, on a free
//! loopback port, for tests of services behind a pooler. Every database name is passed through
//! to the server; clients authenticate as anyone, without a password (`auth_type = trust`).
//! The process is stopped when the value is dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The pooling mode of a [`PgBouncer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A server connection per client connection, for the client's whole session.
    Session,
    /// A server connection per transaction: the next transaction may get another.
    Transaction,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Session => "session",
            Mode::Transaction => "transaction",
        }
    }
}

/// A running PgBouncer.
pub struct PgBouncer {
    dir: tempfile::TempDir,
    child: Child,
    port: u16,
}

/// The PgBouncer binary: `PGBOUNCER` if set, else Debian's.
fn binary() -> PathBuf {
    std::env::var_os("PGBOUNCER")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/sbin/pgbouncer"))
}

impl PgBouncer {
    /// Starts PgBouncer in `mode` in front of the server on 127.0.0.1:`server_port`, with at
    /// most `pool_size` server connections per database and user. As root, it runs as
    /// `postgres` (PgBouncer refuses to run as root). Panics with its log if it does not accept
    /// connections within ten seconds.
    pub async fn start(server_port: u16, mode: Mode, pool_size: u32) -> PgBouncer {
        let dir = tempfile::Builder::new()
            .prefix("testkit-pgbouncer-")
            .tempdir()
            .expect("create a directory for PgBouncer");
        let owner = postgres_owner();
        let log = dir.path().join("pgbouncer.log");
        // A port free a moment ago may be taken by the time PgBouncer binds it: retry.
        for attempt in 0..5 {
            let port = crate::free_port();
            let ini = dir.path().join("pgbouncer.ini");
            std::fs::write(dir.path().join("users.txt"), "\"postgres\" \"\"\n").expect("users");
            std::fs::write(&ini, config(dir.path(), port, server_port, mode, pool_size))
                .expect("write pgbouncer.ini");
            let mut command = Command::new(binary());
            if let Some((uid, gid)) = owner {
                for path in [
                    dir.path().to_path_buf(),
                    ini.clone(),
                    dir.path().join("users.txt"),
                ] {
                    std::os::unix::fs::chown(&path, Some(uid), Some(gid))
                        .unwrap_or_else(|e| panic!("give {} to postgres: {e}", path.display()));
                }
                command.args(["-u", "postgres"]);
            }
            let mut child = command
                .arg(&ini)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("start {}: {e}", binary().display()));
            let url = format!("postgres://postgres@127.0.0.1:{port}/postgres");
            let up = crate::wait_until(Duration::from_secs(10), || async {
                matches!(
                    tokio::time::timeout(
                        Duration::from_secs(2),
                        tokio_postgres::connect(&url, tokio_postgres::NoTls)
                    )
                    .await,
                    Ok(Ok(_))
                )
            })
            .await;
            if up {
                return PgBouncer { dir, child, port };
            }
            let _ = child.kill();
            let _ = child.wait();
            eprintln!(
                "PgBouncer did not start on port {port} (attempt {attempt}):\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        panic!(
            "start PgBouncer; log:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }

    /// The port PgBouncer listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The connection string of database `name` through PgBouncer.
    pub fn database_url(&self, name: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{name}", self.port)
    }

    /// PgBouncer's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("pgbouncer.log")).unwrap_or_default()
    }
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The uid and gid of `postgres` when the tests run as root, which PgBouncer refuses to.
fn postgres_owner() -> Option<(u32, u32)> {
    let id = |args: &[&str]| -> Option<u32> {
        let out = Command::new("id").args(args).output().ok()?;
        String::from_utf8_lossy(&out.stdout).trim().parse().ok()
    };
    if id(&["-u"])? != 0 {
        return None;
    }
    Some((id(&["-u", "postgres"])?, id(&["-g", "postgres"])?))
}

fn config(dir: &Path, port: u16, server_port: u16, mode: Mode, pool_size: u32) -> String {
    let dir = dir.display();
    format!(
        "[databases]\n\
         * = host=127.0.0.1 port={server_port}\n\
         [pgbouncer]\n\
         listen_addr = 127.0.0.1\n\
         listen_port = {port}\n\
         unix_socket_dir =\n\
         auth_type = trust\n\
         auth_file = {dir}/users.txt\n\
         pool_mode = {mode}\n\
         default_pool_size = {pool_size}\n\
         max_client_conn = 500\n\
         ignore_startup_parameters = extra_float_digits,options\n\
         logfile = {dir}/pgbouncer.log\n\
         pidfile = {dir}/pgbouncer.pid\n\
         server_login_retry = 1\n",
        mode = mode.name()
    )
}
