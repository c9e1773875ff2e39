//! One service process: started with its environment, its output appended to a log file,
//! killed with SIGKILL on demand and on drop (also when a test panics).

use anyhow::Context;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use tokio::process::{Child, Command};

/// A restartable child process.
pub struct Process {
    name: String,
    program: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
    log: PathBuf,
    child: Option<Child>,
    starts: u32,
}

impl Process {
    /// A process named `name` (for messages) running `program` with exactly `env` added to a
    /// minimal environment; not started yet. Output goes to `<log_dir>/<name>.log`.
    pub fn new(name: &str, program: &Path, env: Vec<(String, String)>, log_dir: &Path) -> Self {
        Self {
            name: name.to_string(),
            program: program.to_path_buf(),
            args: Vec::new(),
            env,
            log: log_dir.join(format!("{name}.log")),
            child: None,
            starts: 0,
        }
    }

    /// The same process, started with `args` on its command line.
    pub fn with_args(mut self, args: &[&str]) -> Self {
        self.args = args.iter().map(|a| a.to_string()).collect();
        self
    }

    /// The name given at creation.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How many times the process was started.
    pub fn starts(&self) -> u32 {
        self.starts
    }

    /// The log file (all incarnations, appended).
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// Replaces one environment variable for the next start.
    pub fn set_env(&mut self, key: &str, value: &str) {
        self.env.retain(|(k, _)| k != key);
        self.env.push((key.to_string(), value.to_string()));
    }

    /// Starts the process (it must not be running).
    pub fn spawn(&mut self) -> anyhow::Result<()> {
        if let Some(child) = &mut self.child {
            anyhow::ensure!(
                child.try_wait().ok().flatten().is_some(),
                "{} is already running",
                self.name
            );
        }
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .with_context(|| format!("open {}", self.log.display()))?;
        use std::io::Write;
        writeln!(
            &log,
            "==== start #{} of {} ====",
            self.starts + 1,
            self.name
        )
        .context("write the log banner")?;
        let mut command = Command::new(&self.program);
        command
            .args(&self.args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::from(
                log.try_clone().context("clone the log handle")?,
            ))
            .stderr(Stdio::from(log))
            .kill_on_drop(true);
        let child = command
            .spawn()
            .with_context(|| format!("start {} ({})", self.name, self.program.display()))?;
        self.child = Some(child);
        self.starts += 1;
        Ok(())
    }

    /// Whether a started process is still running (false after it exited or was killed).
    pub fn is_running(&mut self) -> bool {
        self.exit_status().is_none() && self.child.is_some()
    }

    /// The exit status if the process has exited on its own since it was started.
    pub fn exit_status(&mut self) -> Option<ExitStatus> {
        self.child.as_mut()?.try_wait().ok().flatten()
    }

    /// `kill -9` and reap; a no-op if the process is not running.
    pub async fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.start_kill();
            let _ = child.wait().await;
        }
    }

    /// The last `lines` lines of the log, for failure messages.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Lines of the log (all incarnations) that contain `needle`.
    pub fn log_lines_containing(&self, needle: &str) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(needle))
            .map(str::to_string)
            .collect()
    }
}
