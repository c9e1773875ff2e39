//! The processes and databases a run starts: nodes, the id-service, the ceiling server, and
//! throwaway PostgreSQL databases. Everything is stopped or dropped when its handle goes.

use crate::machine::{self, SERVER_CORE};
use anyhow::{Context, bail};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The PostgreSQL server the benchmarks use (trust auth as `postgres`).
pub const PG_HOST: &str = "127.0.0.1";

/// A binary built next to this one (`target/release/<name>`).
pub fn sibling_binary(name: &str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("find this executable")?;
    let path = exe.with_file_name(name);
    if !path.exists() {
        bail!(
            "{} is missing: build it first (cargo build --release -p shortener -p id-service -p bench)",
            path.display()
        );
    }
    Ok(path)
}

/// A running server process, pinned to the server core; stopped (SIGTERM, then SIGKILL) on drop.
pub struct Server {
    child: Child,
    name: String,
    log: PathBuf,
}

impl Server {
    /// Starts `program args` with `envs` on the server core, logging to `log`.
    pub fn spawn(
        name: &str,
        program: &Path,
        args: &[&str],
        envs: &[(String, String)],
        log: PathBuf,
    ) -> anyhow::Result<Server> {
        let out =
            std::fs::File::create(&log).with_context(|| format!("create {}", log.display()))?;
        let child = machine::pinned(SERVER_CORE, program)
            .args(args)
            .envs(envs.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .with_context(|| format!("start {name}"))?;
        Ok(Server {
            child,
            name: name.into(),
            log,
        })
    }

    /// The process id (taskset execs the program, so it is the server's).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Fails with the tail of the log if the process has exited.
    pub fn check_alive(&mut self) -> anyhow::Result<()> {
        if let Some(status) = self.child.try_wait()? {
            let log = std::fs::read(&self.log).unwrap_or_default();
            let log = String::from_utf8_lossy(&log);
            let tail: Vec<&str> = log.lines().rev().take(15).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            bail!("{} exited ({status}):\n{}", self.name, tail.join("\n"));
        }
        Ok(())
    }

    /// Waits until `GET http://addr/path` answers 200.
    pub async fn wait_http_ok(&mut self, addr: SocketAddr, path: &str) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            self.check_alive()?;
            if let Ok(200) = crate::http::get_status(addr, path).await {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("{} not ready on {addr}{path} within 60 s", self.name);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until something accepts TCP connections on `addr`.
    pub async fn wait_listening(&mut self, addr: SocketAddr) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            self.check_alive()?;
            if tokio::net::TcpStream::connect(addr).await.is_ok() {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("{} not listening on {addr} within 60 s", self.name);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn psql(database: &str, sql: &str) -> anyhow::Result<()> {
    let output = Command::new("psql")
        .args([
            "-h",
            PG_HOST,
            "-U",
            "postgres",
            "-d",
            database,
            "-v",
            "ON_ERROR_STOP=1",
            "-qAtc",
            sql,
        ])
        .output()
        .context("run psql")?;
    if !output.status.success() {
        bail!("psql {sql:?}: {}", String::from_utf8_lossy(&output.stderr));
    }
    Ok(())
}

/// A throwaway PostgreSQL database, dropped on drop.
pub struct PgDatabase {
    name: String,
}

impl PgDatabase {
    /// Creates a database with a unique name ending in `suffix`.
    pub fn create(suffix: &str) -> anyhow::Result<PgDatabase> {
        let name = format!("bench_{}_{suffix}", std::process::id());
        psql(
            "postgres",
            &format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
        )?;
        psql("postgres", &format!("CREATE DATABASE {name}"))?;
        Ok(PgDatabase { name })
    }

    /// Its connection URL.
    pub fn url(&self) -> String {
        format!("postgres://postgres@{PG_HOST}:5432/{}", self.name)
    }
}

impl Drop for PgDatabase {
    fn drop(&mut self) {
        let _ = psql(
            "postgres",
            &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
        );
    }
}

/// The URL every generated link in the benchmarks points to (about 80 bytes, a typical length).
pub fn target_url(n: u64) -> String {
    format!(
        "https://www.example.com/articles/2026/11/a-typical-article-slug-{n:08}?utm_source=bench"
    )
}
