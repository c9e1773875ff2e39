//! Edit propagation: a PATCH on one PostgreSQL node, and how soon the other serves it.

use super::{ManageSettings, Propagation};
use crate::http::Conn;
use crate::node::{API_KEY, Node};
use crate::stats::Run;
use anyhow::ensure;
use hyper::Method;
use hyper::body::Bytes;
use std::time::Instant;

/// Redirects `node` answered from its cache so far.
async fn cache_hits(node: &Node) -> f64 {
    match node.metric("shortener_cache_hits_total").await {
        Some(v) => v,
        None => node
            .metric("shortener_cache_hits")
            .await
            .unwrap_or(f64::NAN),
    }
}

/// PATCH on `a`, then poll `b` until it redirects to the new target; `codes` are links both
/// nodes know.
pub(super) async fn propagation(
    settings: &ManageSettings,
    a: &Node,
    b: &Node,
    codes: &[String],
) -> anyhow::Result<Propagation> {
    let mut on_a = Conn::connect(a.http).await?;
    let mut on_b = Conn::connect(b.http).await?;
    let (mut waits, mut patches, mut missed) = (Vec::new(), Vec::new(), 0usize);
    let (mut stale_edits, mut visits) = (0usize, 0u64);
    let hits_before = cache_hits(b).await;
    let started = Instant::now();
    for (i, code) in codes.iter().take(settings.edits).enumerate() {
        if started.elapsed() > settings.edit_budget {
            eprintln!("manage: edit budget spent after {i} edits");
            break;
        }
        let path = format!("/{code}");
        // B holds the old target in its cache (the second visit is served from it).
        let (status, old) = on_b.get_location(&path).await?;
        ensure!(status == 302, "{code} answered {status} on node B");
        on_b.get_location(&path).await?;
        visits += 2;
        let new = format!("https://www.example.org/edited/{i}/{code}");
        let body = serde_json::json!({ "url": new }).to_string();
        let t = Instant::now();
        let (status, answer) = on_a
            .call(
                Method::PATCH,
                &format!("/api/v1/links/{code}"),
                API_KEY,
                "application/merge-patch+json",
                Bytes::from(body),
            )
            .await?;
        let acknowledged = Instant::now();
        patches.push((acknowledged - t).as_micros() as u32);
        ensure!(
            status.as_u16() == 200,
            "PATCH answered {status}: {}",
            String::from_utf8_lossy(&answer)
        );
        let mut stale = false;
        loop {
            let (status, location) = on_b.get_location(&path).await?;
            visits += 1;
            if status == 302 && location.as_deref() == Some(new.as_str()) {
                stale_edits += usize::from(stale);
                waits.push(acknowledged.elapsed().as_micros() as u32);
                break;
            }
            ensure!(
                status == 302 && location == old,
                "node B answered {status} {location:?} for {code} during an edit"
            );
            stale = true;
            if acknowledged.elapsed() > settings.edit_timeout {
                missed += 1;
                break;
            }
        }
    }
    let cache_hits = cache_hits(b).await - hits_before;
    let edits = waits.len() + missed;
    let max_ms = waits
        .iter()
        .max()
        .map_or(f64::NAN, |&us| f64::from(us) / 1000.0);
    let n = waits.len() as u64;
    let p = patches.len() as u64;
    Ok(Propagation {
        waits: Run::from_latencies(waits, n, started.elapsed(), missed as u64),
        patch: Run::from_latencies(patches, p, started.elapsed(), 0),
        max_ms,
        edits,
        missed,
        stale_edits,
        visits,
        cache_hits,
    })
}
