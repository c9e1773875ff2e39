//! The real `id-service` binary as a child process on free loopback ports.

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::Duration;
use tokio::process::{Child, Command};

/// A running `id-service` process.
pub struct Process {
    child: Child,
    /// Its gRPC address.
    pub grpc_addr: SocketAddr,
    /// Its JSON address.
    pub http_addr: SocketAddr,
    /// Its admin address.
    pub admin_addr: SocketAddr,
    log: tempfile::NamedTempFile,
}

impl Process {
    /// Starts the binary with `args` and `env` on free ports and waits until it is ready. A
    /// port picked as free may be taken by the time the process binds it: then the process
    /// exits and this tries again.
    pub async fn spawn(args: &[&str], env: &[(&str, String)]) -> Process {
        for _ in 0..3 {
            let mut process = Self::start(args, env);
            let url = format!("http://{}/readyz", process.admin_addr);
            let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
            loop {
                if matches!(reqwest::get(&url).await, Ok(r) if r.status() == 200) {
                    return process;
                }
                if let Ok(Some(status)) = process.child.try_wait() {
                    eprintln!("id-service exited ({status}); log:\n{}", process.log());
                    break;
                }
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "the id-service did not become ready; log:\n{}",
                    process.log()
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        panic!("the id-service binary did not start in three attempts");
    }

    fn start(args: &[&str], env: &[(&str, String)]) -> Process {
        let (grpc_addr, http_addr, admin_addr) = (
            testkit::free_addr(),
            testkit::free_addr(),
            testkit::free_addr(),
        );
        let log = tempfile::NamedTempFile::new().expect("log file");
        let mut command = Command::new(env!("CARGO_BIN_EXE_id-service"));
        command
            .args(args)
            .env("ID_SERVICE_GRPC_ADDR", grpc_addr.to_string())
            .env("ID_SERVICE_HTTP_ADDR", http_addr.to_string())
            .env("ID_SERVICE_ADMIN_ADDR", admin_addr.to_string())
            .env("ID_SERVICE_DRAIN_TIMEOUT", "5s")
            .env("RUST_LOG", "info")
            .stdout(log.reopen().expect("reopen the log"))
            .stderr(Stdio::null())
            .kill_on_drop(true);
        for (key, value) in env {
            command.env(key, value);
        }
        let child = command.spawn().expect("start the id-service binary");
        Process {
            child,
            grpc_addr,
            http_addr,
            admin_addr,
            log,
        }
    }

    /// The log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log.path()).unwrap_or_default()
    }

    /// The process ID.
    pub fn pid(&self) -> u32 {
        self.child.id().expect("still running")
    }

    /// Sends `signal` (a `kill` name such as `HUP`).
    pub async fn signal(&self, signal: &str) {
        let sent = Command::new("kill")
            .args([&format!("-{signal}"), &self.pid().to_string()])
            .status()
            .await
            .expect("run kill");
        assert!(sent.success(), "kill -{signal} failed");
    }

    /// `kill -9`, then reaps the process.
    pub async fn kill_9(mut self) {
        self.child.start_kill().expect("SIGKILL");
        self.child.wait().await.expect("reap the killed process");
    }

    /// SIGTERM; waits for the exit within the drain timeout.
    pub async fn terminate(mut self) -> std::process::ExitStatus {
        self.signal("TERM").await;
        tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .expect("exits within the drain timeout")
            .expect("reap")
    }
}
