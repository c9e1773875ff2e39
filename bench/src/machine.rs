//! The machine: its description, core pinning, and per-process figures from `/proc`.

use anyhow::Context;
use std::process::Command;

/// The core servers run on (the load generator runs on [`LOAD_CORE`]).
pub const SERVER_CORE: &str = "0";
/// The core the load generators (this process, wrk, pgbench) run on.
pub const LOAD_CORE: &str = "1";

/// Whether servers and load generators can be kept on different cores.
pub fn pinning() -> bool {
    std::env::var_os("BENCH_NO_PIN").is_none()
        && online_cpus() >= 2
        && Command::new("taskset").arg("-V").output().is_ok()
}

fn online_cpus() -> usize {
    std::fs::read_to_string("/proc/cpuinfo")
        .map(|t| t.lines().filter(|l| l.starts_with("processor")).count())
        .unwrap_or(1)
}

/// Re-runs this process pinned to [`LOAD_CORE`] unless it already is (or pinning is off);
/// returns the child's exit code when it re-ran.
pub fn repin_self() -> anyhow::Result<Option<i32>> {
    if !pinning() || std::env::var_os("BENCH_PINNED").is_some() {
        return Ok(None);
    }
    let exe = std::env::current_exe().context("find this executable")?;
    let status = Command::new("taskset")
        .args(["-c", LOAD_CORE])
        .arg(exe)
        .args(std::env::args_os().skip(1))
        .env("BENCH_PINNED", "1")
        .status()
        .context("re-run pinned with taskset")?;
    Ok(Some(status.code().unwrap_or(1)))
}

/// A command prefixed with `taskset -c <core>` when pinning is possible.
pub fn pinned(core: &str, program: impl AsRef<std::ffi::OsStr>) -> Command {
    if pinning() {
        let mut command = Command::new("taskset");
        command.args(["-c", core]).arg(program);
        command
    } else {
        Command::new(program)
    }
}

/// Resident set size of a process, in KiB.
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// User + system CPU seconds a process has used (clock ticks of 1/100 s).
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

fn first_line(program: &str, args: &[&str]) -> String {
    Command::new(program)
        .args(args)
        .output()
        .ok()
        .map(|o| {
            let text = if o.stdout.is_empty() {
                o.stderr
            } else {
                o.stdout
            };
            String::from_utf8_lossy(&text)
                .lines()
                .next()
                .unwrap_or("")
                .trim()
                .to_string()
        })
        .unwrap_or_default()
}

/// The 1, 5 and 15 minute load averages (other work on a shared machine shows here).
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(", "))
        .unwrap_or_default()
}

/// A short description of the machine and the tools, for the report.
pub fn describe() -> Vec<(String, String)> {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .unwrap_or("?")
        .trim()
        .to_string();
    let memory = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kib| kib.parse::<f64>().ok())
        })
        .map(|kib| format!("{:.1} GiB", kib / 1024.0 / 1024.0))
        .unwrap_or_else(|| "?".into());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .unwrap_or_default()
        .trim()
        .to_string();
    let postgres = first_line(
        "psql",
        &[
            "-h",
            "127.0.0.1",
            "-U",
            "postgres",
            "-Atc",
            "SELECT split_part(version(), ' ', 2) || ', synchronous_commit=' || current_setting('synchronous_commit') || ', fsync=' || current_setting('fsync')",
        ],
    );
    let pinning = if pinning() {
        format!(
            "servers on core {SERVER_CORE}, load generators on core {LOAD_CORE} (taskset); PostgreSQL unpinned"
        )
    } else {
        "off (fewer than 2 cores, no taskset, or BENCH_NO_PIN)".into()
    };
    vec![
        ("cores (nproc)".into(), online_cpus().to_string()),
        ("CPU".into(), model),
        ("memory".into(), memory),
        ("kernel".into(), kernel),
        ("PostgreSQL".into(), postgres),
        ("SQLite (bundled)".into(), rusqlite::version().to_string()),
        ("wrk".into(), first_line("wrk", &["-v"])),
        ("pinning".into(), pinning),
        (
            "load average at start (1, 5, 15 min)".into(),
            load_average(),
        ),
    ]
}
