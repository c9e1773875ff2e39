//! Creates driven by h2load (nghttp2's load generator, in C) over both transports: the same
//! program, the same connection model and the same few microseconds of client CPU per call
//! whether it speaks HTTP/1.1 JSON or gRPC. The node's own clients ([`crate::creates`]) cost
//! the tonic client more CPU per call than the HTTP one, on a core PostgreSQL shares, so their
//! gRPC/HTTP ratio is partly the clients'; this one is the node's.
//!
//! h2load sends one fixed body, so every create of a run asks for the same target URL (a new
//! link each time: `dedup` is off). Both transports get the same URL, which keeps their ratio
//! fair; it is not compared with pgbench, whose rows each have a URL of their own.

use crate::creates::Transport;
use crate::machine::{self, LOAD_CORE};
use crate::node::{API_KEY, Node};
use crate::procs::target_url;
use crate::stats::Run;
use anyhow::{Context, bail};
use prost::Message;
use proto::shortener::v1::CreateLinkRequest;
use std::path::Path;
use std::time::Duration;

/// The program, installed by `bench/run` when missing (Debian's `nghttp2-client`).
const PROGRAM: &str = "h2load";

/// The gRPC request body: a length-prefixed, uncompressed `CreateLinkRequest` carrying only
/// its `url`.
fn grpc_body(url: &str) -> Vec<u8> {
    let message = CreateLinkRequest {
        url: url.into(),
        ..Default::default()
    }
    .encode_to_vec();
    let mut frame = vec![0];
    frame.extend_from_slice(&(message.len() as u32).to_be_bytes());
    frame.extend(message);
    frame
}

/// `shortener_creates_total` by outcome: (created, every outcome).
async fn creates_counted(node: &Node) -> anyhow::Result<(f64, f64)> {
    let text = crate::http::get_text(node.admin, "/metrics").await?;
    let (mut created, mut all) = (0.0, 0.0);
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("shortener_creates_total{") else {
            continue;
        };
        let value: f64 = rest.rsplit(' ').next().unwrap_or("").parse()?;
        all += value;
        if rest.starts_with("outcome=\"created\"") {
            created += value;
        }
    }
    Ok((created, all))
}

/// Waits up to `bound` for `pid` to exit without reaping it and returns its CPU seconds: a
/// process that has exited keeps its final times in `/proc` until its parent waits for it.
/// None when it is still running at `bound` (or cannot be read).
fn cpu_at_exit(pid: u32, bound: Duration) -> Option<f64> {
    let stat = format!("/proc/{pid}/stat");
    let end = std::time::Instant::now() + bound;
    while std::time::Instant::now() < end {
        let text = std::fs::read_to_string(&stat).ok()?;
        let state = text.get(text.rfind(')')? + 2..)?.chars().next()?;
        if state == 'Z' {
            return machine::cpu_seconds(pid);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// One h2load point: for [`Transport::H2loadHttp`] `clients` connections (HTTP/1.1, one
/// request in flight each), for [`Transport::H2loadGrpcShared`] one HTTP/2 connection with
/// `clients` calls in flight on it. Latencies come from h2load's per-request log, which holds
/// the requests that ended in the measured phase; the node's CPU per link and the errors are
/// counted over the whole run, warm-up included, from the node's process and its
/// `shortener_creates_total`.
pub async fn run(
    node: &Node,
    transport: Transport,
    clients: usize,
    warmup: Duration,
    duration: Duration,
    dir: &Path,
) -> anyhow::Result<Run> {
    let url = target_url(1);
    let (body, address, mut args) = match transport {
        Transport::H2loadHttp => (
            serde_json::json!({ "url": url }).to_string().into_bytes(),
            format!("http://{}/api/v1/links", node.http),
            vec![
                "--h1".to_string(),
                "-c".into(),
                clients.to_string(),
                "-H".into(),
                "content-type: application/json".into(),
            ],
        ),
        Transport::H2loadGrpcShared => (
            grpc_body(&url),
            format!("http://{}/shortener.v1.Links/CreateLink", node.grpc),
            vec![
                "-c".to_string(),
                "1".into(),
                "-m".into(),
                clients.to_string(),
                "-H".into(),
                "content-type: application/grpc".into(),
                "-H".into(),
                "te: trailers".into(),
            ],
        ),
        other => bail!("h2load does not drive {}", other.label()),
    };
    let body_file = dir.join(format!("h2load-body-{}", std::process::id()));
    let log_file = dir.join(format!("h2load-log-{}", std::process::id()));
    std::fs::write(&body_file, body)?;
    let _ = std::fs::remove_file(&log_file);
    args.extend([
        "-H".into(),
        format!("authorization: Bearer {API_KEY}"),
        "-d".into(),
        body_file.display().to_string(),
        format!("--log-file={}", log_file.display()),
        format!("--warm-up-time={}ms", warmup.as_millis()),
        "-D".into(),
        format!("{}ms", duration.as_millis()),
        address,
    ]);
    let pid = node.server.pid();
    let (cpu_before, counted_before) = (machine::cpu_seconds(pid), creates_counted(node).await?);
    // Its output goes to a file: a pipe nobody reads while it runs could fill and stall it.
    let output_file = dir.join(format!("h2load-output-{}", std::process::id()));
    let output = std::fs::File::create(&output_file)?;
    let mut child = machine::pinned(LOAD_CORE, PROGRAM)
        .args(&args)
        .stdout(output.try_clone()?)
        .stderr(output)
        .spawn()
        .context("run h2load (Debian: apt-get install nghttp2-client)")?;
    let child_pid = child.id();
    let bound = warmup + duration + Duration::from_secs(30);
    let own_cpu = tokio::task::spawn_blocking(move || cpu_at_exit(child_pid, bound)).await?;
    if own_cpu.is_none() {
        let _ = child.kill();
    }
    let status = tokio::task::spawn_blocking(move || child.wait()).await??;
    let (cpu_after, counted_after) = (machine::cpu_seconds(pid), creates_counted(node).await?);
    let printed = std::fs::read_to_string(&output_file).unwrap_or_default();
    let _ = std::fs::remove_file(&output_file);
    let _ = std::fs::remove_file(&body_file);
    if !status.success() || own_cpu.is_none() {
        bail!("h2load failed or ran past {bound:?} ({status}): {printed}");
    }
    let (mut latencies, mut failed) = (Vec::new(), 0u64);
    // One line per request of the measured phase: start (µs since the epoch), status,
    // duration (µs), and maybe more columns in later versions.
    for line in std::fs::read_to_string(&log_file)?.lines() {
        let mut fields = line.split('\t');
        let (Some(_), Some(status), Some(micros)) = (fields.next(), fields.next(), fields.next())
        else {
            bail!("an h2load log line of an unknown shape: {line:?}");
        };
        if !status.starts_with('2') {
            failed += 1;
        }
        latencies.push(micros.parse()?);
    }
    let _ = std::fs::remove_file(&log_file);
    let answered = latencies.len() as u64 - failed;
    if answered == 0 {
        bail!("h2load had no request answered: {printed}");
    }
    let created = counted_after.0 - counted_before.0;
    // A gRPC call that fails still answers HTTP 200 (its status is in the trailers): the
    // node's own count of every create that did not make a link catches those. The refusals
    // it counts beyond the answers h2load saw fail are taken off the measured phase's
    // answers (counted over the whole run, they may take off too many, never too few).
    let refused = ((counted_after.1 - counted_before.1) - created) as u64;
    let hidden = refused.saturating_sub(failed);
    let ok = answered.saturating_sub(hidden);
    let mut run = Run::from_latencies(latencies, ok, duration, failed.max(refused));
    if let (Some(a), Some(b)) = (cpu_before, cpu_after)
        && created > 0.0
    {
        run.cpu_us = Some((b - a) * 1e6 / created);
        run.client_cpu_us = own_cpu.map(|c| c * 1e6 / created);
    }
    Ok(run)
}

#[cfg(test)]
mod tests {
    use super::grpc_body;
    use prost::Message;
    use proto::shortener::v1::CreateLinkRequest;

    #[test]
    fn the_grpc_body_is_one_length_prefixed_create_request() {
        for url in [crate::procs::target_url(7), "x".repeat(300)] {
            let body = grpc_body(&url);
            assert_eq!(body[0], 0, "not compressed");
            let len = u32::from_be_bytes(body[1..5].try_into().unwrap()) as usize;
            assert_eq!(len, body.len() - 5);
            assert_eq!(CreateLinkRequest::decode(&body[5..]).unwrap().url, url);
        }
    }
}
