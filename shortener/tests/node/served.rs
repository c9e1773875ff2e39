//! The `shortener` binary as a separate process: for what only a process shows (signals, its
//! own memory, its own open-file limit).

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A `shortener serve` process on loopback ports; killed on drop.
pub struct Served {
    child: Child,
    /// Public HTTP.
    pub http: SocketAddr,
    /// gRPC.
    pub grpc: SocketAddr,
    /// Admin.
    pub admin: SocketAddr,
}

impl Served {
    /// Starts an embedded node on `data_dir` with `env` (on top of the addresses and a test
    /// code key) and waits until it is ready. With `open_files`, the process runs under that
    /// limit of open files (soft and hard, as `ulimit -n` sets them).
    pub async fn start(data_dir: &Path, env: &[(&str, String)], open_files: Option<u64>) -> Served {
        Served::start_logging(data_dir, env, open_files, None).await
    }

    /// As [`Served::start`], with the process's log (its standard error) written to `log`
    /// when given.
    pub async fn start_logging(
        data_dir: &Path,
        env: &[(&str, String)],
        open_files: Option<u64>,
        log: Option<&Path>,
    ) -> Served {
        let (http, grpc, admin) = (
            testkit::free_addr(),
            testkit::free_addr(),
            testkit::free_addr(),
        );
        let binary = env!("CARGO_BIN_EXE_shortener");
        let mut command = match open_files {
            Some(limit) => {
                let mut sh = Command::new("sh");
                sh.arg("-c")
                    .arg(format!("ulimit -n {limit} && exec \"$0\" serve"))
                    .arg(binary);
                sh
            }
            None => {
                let mut direct = Command::new(binary);
                direct.arg("serve");
                direct
            }
        };
        command
            .env("SHORTENER_HTTP_ADDR", http.to_string())
            .env("SHORTENER_GRPC_ADDR", grpc.to_string())
            .env("SHORTENER_ADMIN_ADDR", admin.to_string())
            .env("SHORTENER_DATA_DIR", data_dir)
            .env("SHORTENER_KEY", crate::helpers::CODE_KEY)
            .env("SHORTENER_PUBLIC_URL", "https://sho.rt/")
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(match log {
                Some(path) => Stdio::from(std::fs::File::create(path).expect("create the log")),
                None => Stdio::inherit(),
            });
        for (name, value) in env {
            command.env(name, value);
        }
        let child = command.spawn().expect("start shortener serve");
        let served = Served {
            child,
            http,
            grpc,
            admin,
        };
        let client = reqwest::Client::new();
        let ready = testkit::wait_until(Duration::from_secs(20), || async {
            matches!(client.get(format!("http://{admin}/readyz")).send().await, Ok(r) if r.status() == 200)
        })
        .await;
        assert!(ready, "shortener serve never became ready");
        served
    }

    /// An HTTP client that does not follow redirects, for talking to this node.
    pub fn client() -> reqwest::Client {
        reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("client")
    }

    /// Creates a link to `url` with the test API key; returns its code.
    pub async fn create(&self, client: &reqwest::Client, url: &str) -> String {
        let created = client
            .post(format!("http://{}/api/v1/links", self.http))
            .bearer_auth(crate::helpers::API_KEY)
            .json(&serde_json::json!({ "url": url }))
            .send()
            .await
            .expect("create");
        assert_eq!(created.status(), reqwest::StatusCode::CREATED);
        created.json::<serde_json::Value>().await.expect("json")["code"]
            .as_str()
            .expect("code")
            .to_string()
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `signal` (e.g. `HUP`) to the process.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.pid().to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{signal} failed");
    }

    /// The process's peak resident memory so far, in KiB (`VmHWM`).
    pub fn peak_rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .expect("read /proc status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmHWM in /proc status")
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
