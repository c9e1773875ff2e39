//! A throwaway PostgreSQL cluster that a test may crash.
//!
//! `initdb` refuses to run as root, so when the tests run as root (CI does) every PostgreSQL
//! binary runs as the `postgres` user through `setpriv`, on directories it owns. The cluster
//! listens on 127.0.0.1 on a free port with its socket in its own directory; it is stopped and
//! deleted on drop.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// A private PostgreSQL server.
pub struct Cluster {
    dir: tempfile::TempDir,
    bin: PathBuf,
    as_postgres: bool,
    port: u16,
}

impl Cluster {
    /// Creates and starts a cluster whose `postgresql.conf` also holds `settings`
    /// (`name = value` lines).
    pub async fn start(settings: &[&str]) -> Cluster {
        let bin = bin_dir();
        let as_postgres = run_output("id", &["-u"]).await.trim() == "0";
        let dir = tempfile::Builder::new()
            .prefix("idsvc-pg-")
            .tempdir()
            .expect("create a directory for the cluster");
        let mut cluster = Cluster {
            dir,
            bin,
            as_postgres,
            port: 0,
        };
        if as_postgres {
            let uid: u32 = parse_id(&run_output("id", &["-u", "postgres"]).await);
            let gid: u32 = parse_id(&run_output("id", &["-g", "postgres"]).await);
            std::os::unix::fs::chown(cluster.dir.path(), Some(uid), Some(gid))
                .expect("give the cluster directory to postgres");
        }
        let data = cluster.data();
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

        // A port free a moment ago may be taken by the time the server binds it: retry.
        for attempt in 0..5 {
            cluster.port = super::free_port();
            if cluster.try_start().await {
                return cluster;
            }
            eprintln!(
                "cluster did not start on port {} (attempt {attempt})",
                cluster.port
            );
        }
        panic!("start a throwaway PostgreSQL; log:\n{}", cluster.log());
    }

    /// `postgres://postgres@127.0.0.1:<port>/postgres`.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// A connection to the cluster (its task runs on the current runtime).
    pub async fn connect(&self) -> tokio_postgres::Client {
        let (client, connection) = tokio_postgres::connect(&self.url(), tokio_postgres::NoTls)
            .await
            .expect("connect to the throwaway cluster");
        tokio::spawn(connection);
        client
    }

    /// Stops the server like a crash: no checkpoint, no flush of WAL still in memory;
    /// the next start runs crash recovery.
    pub async fn crash(&self) {
        let data = self.data();
        self.pg(
            "pg_ctl",
            &["-D", path_str(&data), "-m", "immediate", "-w", "stop"],
        )
        .await;
    }

    /// Starts the server again on the same port (after [`Cluster::crash`]).
    pub async fn restart(&self) {
        assert!(
            self.try_start().await,
            "restart the throwaway PostgreSQL; log:\n{}",
            self.log()
        );
    }

    async fn try_start(&self) -> bool {
        let data = self.data();
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

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    fn command(&self, program: &str) -> tokio::process::Command {
        let program = self.bin.join(program);
        let mut command = if self.as_postgres {
            let mut c = tokio::process::Command::new("setpriv");
            c.args([
                "--reuid=postgres",
                "--regid=postgres",
                "--init-groups",
                "--",
            ])
            .arg(program);
            c
        } else {
            tokio::process::Command::new(program)
        };
        command.current_dir(self.dir.path()).kill_on_drop(true);
        command
    }

    async fn pg(&self, program: &str, args: &[&str]) {
        let output = tokio::time::timeout(
            Duration::from_secs(60),
            self.command(program).args(args).output(),
        )
        .await
        .unwrap_or_else(|_| panic!("{program} did not finish within 60 s"))
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
        let data = self.data();
        let mut command = if self.as_postgres {
            let mut c = std::process::Command::new("setpriv");
            c.args([
                "--reuid=postgres",
                "--regid=postgres",
                "--init-groups",
                "--",
            ])
            .arg(self.bin.join("pg_ctl"));
            c
        } else {
            std::process::Command::new(self.bin.join("pg_ctl"))
        };
        let _ = command
            .args(["-D", path_str(&data), "-m", "immediate", "-w", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// The newest `/usr/lib/postgresql/<version>/bin`, or `PG_BIN_DIR`.
fn bin_dir() -> PathBuf {
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

async fn run_output(program: &str, args: &[&str]) -> String {
    let output = tokio::process::Command::new(program)
        .args(args)
        .output()
        .await
        .unwrap_or_else(|e| panic!("run {program}: {e}"));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn parse_id(text: &str) -> u32 {
    text.trim()
        .parse()
        .unwrap_or_else(|_| panic!("a numeric id, got {text:?}"))
}

fn path_str(path: &Path) -> &str {
    path.to_str().expect("temporary paths are UTF-8")
}
