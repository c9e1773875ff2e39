//! Closed-loop redirect load with wrk (pinned to the load core), driven by `wrk.lua`.

use crate::machine::{self, LOAD_CORE};
use crate::stats::Run;
use anyhow::{Context, bail};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The request mix of a wrk run.
#[derive(Debug, Clone, Copy)]
pub struct Mix {
    /// Zipf exponent over the code list (0: uniform).
    pub zipf: f64,
    /// Fraction of requests for random unknown codes.
    pub unknown: f64,
}

/// Writes the Lua script into `dir`; returns its path.
pub fn install_script(dir: &Path) -> anyhow::Result<PathBuf> {
    let path = dir.join("wrk.lua");
    std::fs::write(&path, include_str!("wrk.lua")).context("write wrk.lua")?;
    Ok(path)
}

/// Runs wrk against `addr` with `connections` for `duration`, measuring the CPU the server
/// process `server_pid` uses meanwhile. Requests carry the address as their `Host`.
pub fn run(
    script: &Path,
    codes_file: &Path,
    addr: SocketAddr,
    connections: usize,
    duration: Duration,
    mix: Mix,
    server_pid: u32,
) -> anyhow::Result<Run> {
    run_on(
        script,
        codes_file,
        addr,
        None,
        connections,
        duration,
        mix,
        server_pid,
    )
}

/// [`run`] with every request naming `host` in its `Host` header (`None`: the address), as a
/// client of a domain that resolves to the node sends it.
#[allow(clippy::too_many_arguments)]
pub fn run_on(
    script: &Path,
    codes_file: &Path,
    addr: SocketAddr,
    host: Option<&str>,
    connections: usize,
    duration: Duration,
    mix: Mix,
    server_pid: u32,
) -> anyhow::Result<Run> {
    let headers: Vec<String> = host.map(|h| format!("Host: {h}")).into_iter().collect();
    run_with(
        script,
        codes_file,
        addr,
        &headers,
        connections,
        duration,
        mix,
        server_pid,
    )
}

/// [`run`] with `headers` (`Name: value`) on every request.
#[allow(clippy::too_many_arguments)]
pub fn run_with(
    script: &Path,
    codes_file: &Path,
    addr: SocketAddr,
    headers: &[String],
    connections: usize,
    duration: Duration,
    mix: Mix,
    server_pid: u32,
) -> anyhow::Result<Run> {
    let cpu_before = machine::cpu_seconds(server_pid);
    let mut wrk = machine::pinned(LOAD_CORE, "wrk");
    for header in headers {
        // wrk.format() in the script takes wrk.headers, where -H puts these.
        wrk.args(["-H", header]);
    }
    let output = wrk
        .args(["-t1", "-c", &connections.to_string()])
        .args(["-d", &format!("{}s", duration.as_secs().max(1))])
        .args(["--timeout", "5s", "-s"])
        .arg(script)
        .arg(format!("http://{addr}"))
        .arg("--")
        .arg(codes_file)
        .args([mix.zipf.to_string(), mix.unknown.to_string()])
        .output()
        .context("run wrk (apt-get install -y wrk)")?;
    let cpu_after = machine::cpu_seconds(server_pid);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let Some(line) = stdout.lines().find_map(|l| l.strip_prefix("BENCH ")) else {
        bail!(
            "wrk printed no summary: {}{}",
            stdout,
            String::from_utf8_lossy(&output.stderr)
        );
    };
    let f: Vec<f64> = line
        .split_whitespace()
        .map(|v| v.parse().unwrap_or(f64::NAN))
        .collect();
    let [
        requests,
        duration_us,
        status_errors,
        socket_errors,
        p50,
        p99,
        p999,
    ] = f[..]
    else {
        bail!("unexpected wrk summary {line:?}");
    };
    let cpu_us = match (cpu_before, cpu_after) {
        (Some(a), Some(b)) if requests > 0.0 => Some((b - a) * 1e6 / requests),
        _ => None,
    };
    let errors = if mix.unknown > 0.0 {
        socket_errors
    } else {
        status_errors + socket_errors
    };
    Ok(Run {
        per_second: requests / (duration_us / 1e6),
        p50_ms: p50 / 1000.0,
        p99_ms: p99 / 1000.0,
        p999_ms: p999 / 1000.0,
        cpu_us,
        // wrk is another process: its CPU is not this one's.
        client_cpu_us: None,
        errors: errors as u64,
        behind_ms: None,
    })
}
