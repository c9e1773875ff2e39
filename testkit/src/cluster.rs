//! A throwaway PostgreSQL cluster that a test may crash.
//!
//! `initdb` refuses to run as root, so when the tests run as root (CI does) every PostgreSQL
//! binary runs as the `postgres` user through `setpriv`, on directories it owns. The cluster
//! listens on 127.0.0.1 on a free port with its socket in its own directory, so crashing it
//! never disturbs the shared server on 5432 or another test's cluster; it is stopped and deleted
//! on drop.
//!
//! Faults: [`Cluster::crash`] (immediate shutdown: no checkpoint, crash recovery on the next
//! start) and [`Cluster::kill`] (`kill -9` of the postmaster, leaving its backends to die and its
//! lock files behind); [`Cluster::restart`] brings the server back on the same port after
//! either.
//!
//! Replication: [`Cluster::start_standby`] makes a streaming standby of a running cluster
//! (`pg_basebackup -R -X stream`), and [`Cluster::promote`] turns a standby into a primary on
//! a new timeline, as a failover does.
//!
//! One type, a cluster and every fault a test can do to it; it is long because each fault is a
//! sequence of PostgreSQL tools run as another user.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// How long one PostgreSQL tool (initdb, pg_ctl) may run.
const TOOL_TIMEOUT: Duration = Duration::from_secs(60);

/// A private PostgreSQL server.
pub struct Cluster {
    dir: tempfile::TempDir,
    bin: PathBuf,
    as_postgres: bool,
    /// The uid and gid of `postgres` when the tools run as that user.
    owner: Option<(u32, u32)>,
    port: u16,
}

impl Cluster {
    /// Creates and starts a cluster whose `postgresql.conf` also holds `settings`
    /// (`name = value` lines; later lines win over the defaults written before them).
    ///
    /// Panics with the server log when the cluster cannot be created or started.
    pub async fn start(settings: &[&str]) -> Cluster {
        Self::create(settings).await.start_created().await
    }

    /// Like [`Cluster::start`], with TLS on (`ssl = on`): the server presents
    /// `certs.server_cert_pem`, whose key is in the data directory with mode 0600 as PostgreSQL
    /// requires. Plaintext connections are still accepted.
    pub async fn start_tls(certs: &crate::tls::TestCerts, settings: &[&str]) -> Cluster {
        let mut all = vec![
            "ssl = on",
            "ssl_cert_file = 'server.crt'",
            "ssl_key_file = 'server.key'",
        ];
        all.extend_from_slice(settings);
        let cluster = Self::create(&all).await;
        let data = cluster.data_dir();
        cluster.write_owned(&data.join("server.crt"), &certs.server_cert_pem, 0o644);
        cluster.write_owned(&data.join("server.key"), &certs.server_key_pem, 0o600);
        cluster.start_created().await
    }

    /// Writes a file the server can read: owned by `postgres` when the tests run as root.
    fn write_owned(&self, path: &Path, contents: &str, mode: u32) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(path, contents).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
            .unwrap_or_else(|e| panic!("restrict {}: {e}", path.display()));
        if let Some((uid, gid)) = self.owner {
            std::os::unix::fs::chown(path, Some(uid), Some(gid))
                .unwrap_or_else(|e| panic!("give {} to postgres: {e}", path.display()));
        }
    }

    /// A cluster directory (owned by `postgres` when the tests run as root) with nothing in it.
    async fn empty() -> Cluster {
        let bin = bin_dir();
        let as_postgres = run_output("id", &["-u"]).await.trim() == "0";
        let dir = tempfile::Builder::new()
            .prefix("testkit-pg-")
            .tempdir()
            .expect("create a directory for the cluster");
        let owner = if as_postgres {
            let uid: u32 = parse_id(&run_output("id", &["-u", "postgres"]).await);
            let gid: u32 = parse_id(&run_output("id", &["-g", "postgres"]).await);
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid))
                .expect("give the cluster directory to postgres");
            Some((uid, gid))
        } else {
            None
        };
        Cluster {
            dir,
            bin,
            as_postgres,
            owner,
            port: 0,
        }
    }

    /// A cluster created with `initdb` and configured, not yet started.
    async fn create(settings: &[&str]) -> Cluster {
        let cluster = Self::empty().await;
        let data = cluster.data_dir();
        cluster
            .pg(
                "initdb",
                &[
                    "-D",
                    path_str(&data),
                    "-U",
                    "postgres",
                    "-A",
                    "trust",
                    "-E",
                    "UTF8",
                    "--no-sync",
                ],
            )
            .await;
        let mut conf = format!(
            "\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{}'\n\
             shared_buffers = 16MB\nmax_connections = 40\nautovacuum = off\n",
            path_str(cluster.dir.path())
        );
        for setting in settings {
            conf.push_str(setting);
            conf.push('\n');
        }
        let conf_path = data.join("postgresql.conf");
        let mut text = std::fs::read_to_string(&conf_path).expect("read postgresql.conf");
        text.push_str(&conf);
        std::fs::write(&conf_path, text).expect("write postgresql.conf");
        cluster
    }

    /// Starts a cluster made by [`Cluster::create`] on a free port.
    async fn start_created(mut self) -> Cluster {
        // A port free a moment ago may be taken by the time the server binds it: retry.
        for attempt in 0..5 {
            self.port = crate::free_port();
            if self.try_start().await {
                return self;
            }
            eprintln!(
                "cluster did not start on port {} (attempt {attempt})",
                self.port
            );
        }
        panic!("start a throwaway PostgreSQL; log:\n{}", self.log());
    }

    /// A streaming standby of this running cluster, started on its own free port: a base
    /// backup taken with `pg_basebackup -R -X stream` (so it connects back to this cluster as
    /// its primary), with `settings` appended to its configuration. It replays what the primary
    /// writes until it is stopped or promoted; it is read-only until [`Cluster::promote`].
    ///
    /// Panics with the server log when the standby cannot be made or started.
    pub async fn start_standby(&self, settings: &[&str]) -> Cluster {
        let standby = Self::empty().await;
        let data = standby.data_dir();
        standby
            .pg(
                "pg_basebackup",
                &[
                    "-h",
                    "127.0.0.1",
                    "-p",
                    &self.port.to_string(),
                    "-U",
                    "postgres",
                    "-D",
                    path_str(&data),
                    "-R",
                    "-X",
                    "stream",
                    "--no-sync",
                    // An immediate checkpoint: a spread one can take minutes on an idle server.
                    "--checkpoint=fast",
                ],
            )
            .await;
        // The copied configuration points at the primary's socket directory: use our own.
        let mut conf = format!(
            "\nunix_socket_directories = '{}'\n",
            path_str(standby.dir.path())
        );
        for setting in settings {
            conf.push_str(setting);
            conf.push('\n');
        }
        let conf_path = data.join("postgresql.conf");
        let mut text = std::fs::read_to_string(&conf_path).expect("read postgresql.conf");
        text.push_str(&conf);
        std::fs::write(&conf_path, text).expect("write postgresql.conf");
        standby.start_created().await
    }

    /// Promotes a standby to a primary (`pg_ctl promote -w`): it stops replaying, starts a new
    /// timeline and accepts writes once this returns.
    pub async fn promote(&self) {
        let data = self.data_dir();
        self.pg(
            "pg_ctl",
            &["-D", path_str(&data), "-w", "-t", "60", "promote"],
        )
        .await;
    }

    /// The port the server listens on (the same across restarts).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `postgres://postgres@127.0.0.1:<port>/postgres`.
    pub fn url(&self) -> String {
        self.database_url("postgres")
    }

    /// The connection string of database `name` on this cluster.
    pub fn database_url(&self, name: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{name}", self.port)
    }

    /// A connection to the cluster (its task runs on the current runtime).
    pub async fn connect(&self) -> tokio_postgres::Client {
        connect(&self.url()).await
    }

    /// Creates database `name` (an identifier chosen by the test) and returns its URL.
    pub async fn create_database(&self, name: &str) -> String {
        self.connect()
            .await
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .unwrap_or_else(|e| panic!("create database {name}: {e}"));
        self.database_url(name)
    }

    /// Stops the server like a crash: no checkpoint, no flush of WAL still in memory;
    /// the next start runs crash recovery.
    pub async fn crash(&self) {
        let data = self.data_dir();
        self.pg(
            "pg_ctl",
            &["-D", path_str(&data), "-m", "immediate", "-w", "stop"],
        )
        .await;
    }

    /// `kill -9` of the postmaster. Its backends notice and exit on their own; the lock files
    /// stay behind and are cleared by [`Cluster::restart`].
    pub async fn kill(&self) {
        let pid = self
            .postmaster_pid()
            .expect("a running postmaster to kill (postmaster.pid)");
        let status = tokio::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status()
            .await
            .expect("run kill");
        assert!(status.success(), "kill -9 {pid} failed");
        // The backends exit once they notice the postmaster is gone; a restart while they
        // still hold the shared memory fails, so wait for them.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while (process_alive(pid) || !children_of(pid).is_empty())
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Stops the server cleanly (fast shutdown: a checkpoint, clients disconnected).
    pub async fn stop(&self) {
        let data = self.data_dir();
        self.pg(
            "pg_ctl",
            &["-D", path_str(&data), "-m", "fast", "-w", "stop"],
        )
        .await;
    }

    /// Starts the server again on the same port (after [`Cluster::crash`], [`Cluster::kill`]
    /// or [`Cluster::stop`]). Panics with the server log if it does not come up.
    pub async fn restart(&self) {
        // Right after a kill the old server's memory may still be in use for a moment: retry.
        for _ in 0..20 {
            self.clear_stale_lock_files().await;
            if self.try_start().await {
                return;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        panic!("restart the throwaway PostgreSQL; log:\n{}", self.log());
    }

    /// Whether the server accepts a connection right now.
    pub async fn accepts_connections(&self) -> bool {
        matches!(
            tokio::time::timeout(
                Duration::from_secs(2),
                tokio_postgres::connect(&self.url(), tokio_postgres::NoTls)
            )
            .await,
            Ok(Ok(_))
        )
    }

    /// The data directory.
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// The server log so far (empty if there is none yet).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    fn postmaster_pid(&self) -> Option<u32> {
        let text = std::fs::read_to_string(self.data_dir().join("postmaster.pid")).ok()?;
        text.lines().next()?.trim().parse().ok()
    }

    /// After a `kill -9` the postmaster leaves `postmaster.pid` and the socket lock file
    /// behind; PostgreSQL refuses to start while it believes the old server may be alive.
    async fn clear_stale_lock_files(&self) {
        let Some(pid) = self.postmaster_pid() else {
            return;
        };
        let alive = process_alive(pid);
        if alive {
            return;
        }
        let _ = std::fs::remove_file(self.data_dir().join("postmaster.pid"));
        let _ = std::fs::remove_file(self.dir.path().join(format!(".s.PGSQL.{}.lock", self.port)));
    }

    async fn try_start(&self) -> bool {
        let data = self.data_dir();
        let log = self.dir.path().join("server.log");
        let port = format!("-p {}", self.port);
        self.command("pg_ctl")
            .args([
                "-D",
                path_str(&data),
                "-l",
                path_str(&log),
                "-w",
                "-t",
                "30",
            ])
            .args(["-o", &port, "start"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .await
            .map(|s| s.success())
            .unwrap_or(false)
    }

    fn command(&self, program: &str) -> tokio::process::Command {
        let mut command = tokio::process::Command::from(self.std_command(program));
        command.kill_on_drop(true);
        command
    }

    fn std_command(&self, program: &str) -> std::process::Command {
        let program = self.bin.join(program);
        let mut command = if self.as_postgres {
            let mut c = std::process::Command::new("setpriv");
            c.args([
                "--reuid=postgres",
                "--regid=postgres",
                "--init-groups",
                "--",
            ])
            .arg(program);
            c
        } else {
            std::process::Command::new(program)
        };
        command.current_dir(self.dir.path());
        command
    }

    async fn pg(&self, program: &str, args: &[&str]) {
        let output = tokio::time::timeout(TOOL_TIMEOUT, self.command(program).args(args).output())
            .await
            .unwrap_or_else(|_| panic!("{program} did not finish within {TOOL_TIMEOUT:?}"))
            .unwrap_or_else(|e| panic!("run {program}: {e}"));
        assert!(
            output.status.success(),
            "{program} {args:?} failed: {}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let data = self.data_dir();
        let _ = self
            .std_command("pg_ctl")
            .args(["-D", path_str(&data), "-m", "immediate", "-w", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// Whether `pid` is a live process. A killed postmaster may linger as a zombie when nothing
/// reaps it (its parent is PID 1 in a container); a zombie holds no files or ports.
pub(crate) fn process_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised command name, which may itself contain spaces.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

/// The live processes whose parent is `pid`.
fn children_of(pid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|child| {
            std::fs::read_to_string(format!("/proc/{child}/stat"))
                .ok()
                .and_then(|stat| {
                    let rest = stat.rsplit_once(')')?.1.to_string();
                    let mut fields = rest.split_whitespace();
                    let state = fields.next()?.to_string();
                    let ppid: u32 = fields.next()?.parse().ok()?;
                    Some(ppid == pid && state != "Z")
                })
                .unwrap_or(false)
        })
        .collect()
}

async fn connect(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("connect to the throwaway cluster at {url}: {e}"));
    tokio::spawn(connection);
    client
}

/// The newest `/usr/lib/postgresql/<version>/bin`, or `PG_BIN_DIR`.
pub(crate) fn bin_dir() -> PathBuf {
    if let Ok(dir) = std::env::var("PG_BIN_DIR") {
        return PathBuf::from(dir);
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL server binaries in /usr/lib/postgresql (or set PG_BIN_DIR)")
        .filter_map(Result::ok)
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions
        .pop()
        .map(|(_, bin)| bin)
        .expect("an initdb under /usr/lib/postgresql/<version>/bin (or set PG_BIN_DIR)")
}

pub(crate) async fn run_output(program: &str, args: &[&str]) -> String {
    let output = tokio::process::Command::new(program)
        .args(args)
        .output()
        .await
        .unwrap_or_else(|e| panic!("run {program}: {e}"));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub(crate) fn parse_id(text: &str) -> u32 {
    text.trim()
        .parse()
        .unwrap_or_else(|_| panic!("a numeric id, got {text:?}"))
}

fn path_str(path: &Path) -> &str {
    path.to_str().expect("temporary paths are UTF-8")
}
