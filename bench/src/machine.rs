//! The machine: its description, core pinning, and per-process figures from `/proc`.

use crate::stats::percentile;
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

/// Sleeps of [`WAKE_SLEEP`] the wake-up probe takes.
const WAKE_SAMPLES: usize = 4000;
/// The length of each of those sleeps.
const WAKE_SLEEP: std::time::Duration = std::time::Duration::from_micros(500);

/// How late a thread on an otherwise idle core wakes from short sleeps: the oversleep's p50,
/// p99, p99.9 and maximum in milliseconds, space-separated. On a virtual machine an idle vCPU
/// may be descheduled by the host, and a server pays that delay when a request wakes it.
pub fn wake_probe() -> String {
    let mut late: Vec<u32> = (0..WAKE_SAMPLES)
        .map(|_| {
            let started = std::time::Instant::now();
            std::thread::sleep(WAKE_SLEEP);
            started.elapsed().saturating_sub(WAKE_SLEEP).as_micros() as u32
        })
        .collect();
    late.sort_unstable();
    let [p50, p99, p999, max] = [0.5, 0.99, 0.999, 1.0].map(|q| percentile(&late, q));
    format!("{p50} {p99} {p999} {max}")
}

/// Runs [`wake_probe`] on `core` (in a child process pinned there); a table cell.
fn wake_delays(core: &str) -> String {
    let output = std::env::current_exe().and_then(|exe| {
        let mut command = pinned(core, exe);
        command.arg("wake-probe").output()
    });
    let Ok(output) = output else {
        return "?".into();
    };
    let text = String::from_utf8_lossy(&output.stdout);
    let v: Vec<f64> = text
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    match v[..] {
        [p50, p99, p999, max] => {
            format!("p50 {p50:.2} ms, p99 {p99:.2} ms, p99.9 {p999:.2} ms, max {max:.2} ms")
        }
        _ => "?".into(),
    }
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
    let pinned_cores = pinning();
    let pinning = if pinned_cores {
        format!(
            "servers on core {SERVER_CORE}, load generators on core {LOAD_CORE} (taskset); PostgreSQL unpinned"
        )
    } else {
        "off (fewer than 2 cores, no taskset, or BENCH_NO_PIN)".into()
    };
    let wake = if pinned_cores {
        vec![
            (
                format!("wake-up delay of idle core {SERVER_CORE} (servers) after 0.5 ms sleeps"),
                wake_delays(SERVER_CORE),
            ),
            (
                format!("the same on core {LOAD_CORE} (load generators)"),
                wake_delays(LOAD_CORE),
            ),
        ]
    } else {
        vec![(
            "wake-up delay after 0.5 ms sleeps".into(),
            wake_delays(SERVER_CORE),
        )]
    };
    let mut rows = vec![
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
    ];
    rows.extend(wake);
    rows
}
