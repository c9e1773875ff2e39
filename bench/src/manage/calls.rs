//! The node's side of lists, imports and exports, and the alternation with the baselines.

use super::direct::Direct;
use super::{LIST_ROUNDS, ListPoint, ManageSettings, StoreManage};
use crate::http::Conn;
use crate::node::{API_KEY, Node};
use crate::procs::target_url;
use crate::stats::Run;
use anyhow::{Context, ensure};
use hyper::Method;
use hyper::body::Bytes;
use proto::shortener::v1::links_client::LinksClient;
use proto::shortener::v1::{BatchCreateLinksRequest, CreateLinkRequest, batch_create_result};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// One page through the node: `(next cursor, links on it)`.
async fn node_page(
    conn: &mut Conn,
    limit: usize,
    cursor: Option<&str>,
) -> anyhow::Result<(Option<String>, usize)> {
    let mut path = format!("/api/v1/links?limit={limit}");
    if let Some(c) = cursor {
        path.push_str("&cursor=");
        path.push_str(c);
    }
    let (status, body) = conn
        .call(
            Method::GET,
            &path,
            API_KEY,
            "application/json",
            Bytes::new(),
        )
        .await?;
    ensure!(
        status.as_u16() == 200,
        "list answered {status}: {}",
        String::from_utf8_lossy(&body)
    );
    let page: serde_json::Value = serde_json::from_slice(&body)?;
    let links = page["links"].as_array().map_or(0, Vec::len);
    Ok((page["next_cursor"].as_str().map(str::to_owned), links))
}

/// Pages through the first `depth` links 1,000 at a time; returns the cursor after them.
async fn cursor_at(conn: &mut Conn, depth: u64) -> anyhow::Result<String> {
    let (mut cursor, mut seen) = (None::<String>, 0u64);
    while seen < depth {
        let limit = (depth - seen).min(1000) as usize;
        let (next, n) = node_page(conn, limit, cursor.as_deref()).await?;
        ensure!(n == limit, "the list ended after {} links", seen + n as u64);
        seen += n as u64;
        cursor = Some(next.context("no cursor before the end of the list")?);
    }
    cursor.context("depth 0 has no cursor")
}

/// The list at the first page and `depth` links in, node and direct SQL interleaved.
pub(super) async fn list(
    settings: &ManageSettings,
    node: &Node,
    direct: &Direct,
) -> anyhow::Result<(ListPoint, ListPoint)> {
    let mut conn = Conn::connect(node.http).await?;
    let started = Instant::now();
    let cursor = cursor_at(&mut conn, settings.depth).await?;
    eprintln!(
        "manage: paged {} links deep through the node in {:.1} s",
        settings.depth,
        started.elapsed().as_secs_f64()
    );
    let position = direct.position(settings.depth).await?;
    let per_round = settings.samples.div_ceil(LIST_ROUNDS);
    let (mut first_node, mut deep_node, mut first_sql, mut deep_sql) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    // Warm both paths once (statement caches, pages in memory).
    node_page(&mut conn, settings.page, None).await?;
    node_page(&mut conn, settings.page, Some(&cursor)).await?;
    direct.pages(None, settings.page, 3).await?;
    direct.pages(Some(&position), settings.page, 3).await?;
    for _ in 0..LIST_ROUNDS {
        for (cursor, out) in [(None, &mut first_node), (Some(&cursor), &mut deep_node)] {
            for _ in 0..per_round {
                let t = Instant::now();
                let (_, n) =
                    node_page(&mut conn, settings.page, cursor.map(String::as_str)).await?;
                out.push(t.elapsed().as_micros() as u32);
                ensure!(n == settings.page, "a short page through the node");
            }
        }
        first_sql.extend(direct.pages(None, settings.page, per_round).await?);
        deep_sql.extend(
            direct
                .pages(Some(&position), settings.page, per_round)
                .await?,
        );
    }
    let point = |node: Vec<u32>, sql: Vec<u32>| {
        let run = |v: Vec<u32>| {
            let total: f64 = v.iter().map(|&us| f64::from(us) / 1e6).sum();
            let n = v.len() as u64;
            Run::from_latencies(v, n, Duration::from_secs_f64(total), 0)
        };
        ListPoint {
            node: run(node),
            sql: run(sql),
        }
    };
    Ok((point(first_node, first_sql), point(deep_node, deep_sql)))
}

/// Target URLs for imported and batch-created rows, apart from the preloaded ones.
static NEXT_ROW: AtomicU64 = AtomicU64::new(1_000_000_000);

fn next_url() -> String {
    target_url(NEXT_ROW.fetch_add(1, Ordering::Relaxed))
}

/// One NDJSON import of `rows` new links through `POST /api/v1/links/import`; links/s.
async fn import(node: &Node, rows: u64) -> anyhow::Result<Run> {
    let mut body = Vec::with_capacity(rows as usize * 110);
    for _ in 0..rows {
        serde_json::to_writer(&mut body, &serde_json::json!({ "url": next_url() }))?;
        body.push(b'\n');
    }
    let mut conn = Conn::connect(node.http).await?;
    let started = Instant::now();
    let (status, answer) = conn
        .call(
            Method::POST,
            "/api/v1/links/import",
            API_KEY,
            "application/x-ndjson",
            Bytes::from(body),
        )
        .await?;
    let elapsed = started.elapsed();
    ensure!(status.as_u16() == 200, "import answered {status}");
    let mut created = 0u64;
    let mut summary = None;
    for line in answer.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let value: serde_json::Value = serde_json::from_slice(line)?;
        if value["status"] == "created" {
            created += 1;
        } else if value.get("summary").is_some() {
            summary = Some(value);
        }
    }
    let summary = summary.context("the import's answer has no summary line")?;
    ensure!(
        created == rows && summary["summary"]["created"] == rows,
        "import created {created} of {rows} rows: {summary}"
    );
    Ok(Run::from_latencies(
        vec![elapsed.as_micros() as u32],
        created,
        elapsed,
        rows - created,
    ))
}

fn authorized<T>(message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.metadata_mut().insert(
        "authorization",
        format!("Bearer {API_KEY}")
            .parse()
            .expect("ASCII header value"),
    );
    request
}

/// `rows` new links through sequential `BatchCreateLinks` calls of `batch` items on one
/// channel; links/s (latencies per call).
async fn batch_create(node: &Node, rows: u64, batch: usize) -> anyhow::Result<Run> {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", node.grpc))?
        .tcp_nodelay(true)
        .connect()
        .await?;
    let mut client = LinksClient::new(channel)
        .max_decoding_message_size(64 << 20)
        .max_encoding_message_size(64 << 20);
    let (mut latencies, mut created, mut sent) = (Vec::new(), 0u64, 0u64);
    let started = Instant::now();
    while sent < rows {
        let n = (rows - sent).min(batch as u64) as usize;
        let items = (0..n)
            .map(|_| CreateLinkRequest {
                url: next_url(),
                ..Default::default()
            })
            .collect();
        let t = Instant::now();
        let response = client
            .batch_create_links(authorized(BatchCreateLinksRequest { items }))
            .await
            .context("BatchCreateLinks")?;
        latencies.push(t.elapsed().as_micros() as u32);
        created += response
            .get_ref()
            .results
            .iter()
            .filter(|r| matches!(r.outcome, Some(batch_create_result::Outcome::Link(_))))
            .count() as u64;
        sent += n as u64;
    }
    let elapsed = started.elapsed();
    ensure!(
        created == rows,
        "batch create made {created} of {rows} links"
    );
    Ok(Run::from_latencies(
        latencies,
        created,
        elapsed,
        rows - created,
    ))
}

/// One export through the node: (rows/s run, rows, bytes).
async fn export(node: &Node) -> anyhow::Result<(Run, u64, u64)> {
    let mut conn = Conn::connect(node.http).await?;
    let started = Instant::now();
    let (status, lines, bytes) = conn
        .get_counting("/api/v1/links/export?format=ndjson", API_KEY)
        .await?;
    let elapsed = started.elapsed();
    ensure!(status.as_u16() == 200, "export answered {status}");
    Ok((
        Run::from_latencies(vec![elapsed.as_micros() as u32], lines, elapsed, 0),
        lines,
        bytes,
    ))
}

/// Import and batch create, alternated, then export and the direct scan, alternated.
pub(super) async fn bulk(
    settings: &ManageSettings,
    node: &Node,
    direct: &Direct,
    out: &mut StoreManage,
) -> anyhow::Result<()> {
    let label = out.store.label();
    for rep in 0..settings.reps {
        // B I, I B, ...: drift over the run hits both sides alike.
        for first_import in [rep % 2 == 1, rep % 2 == 0] {
            if first_import {
                eprintln!(
                    "manage: {label} import of {} rows, rep {rep}",
                    settings.rows
                );
                out.import.push(import(node, settings.rows).await?);
            } else {
                eprintln!(
                    "manage: {label} BatchCreateLinks of {} rows, rep {rep}",
                    settings.rows
                );
                out.batch
                    .push(batch_create(node, settings.rows, settings.batch).await?);
            }
        }
    }
    for rep in 0..settings.reps {
        for first_export in [rep % 2 == 1, rep % 2 == 0] {
            if first_export {
                eprintln!("manage: {label} export, rep {rep}");
                let (run, rows, bytes) = export(node).await?;
                out.exported = rows;
                out.export_bytes.0 = bytes;
                out.export.push(run);
            } else {
                eprintln!("manage: {label} direct scan, rep {rep}");
                let (rows, bytes, elapsed) = direct.scan().await?;
                out.export_bytes.1 = bytes;
                out.scan.push(Run::from_latencies(
                    vec![elapsed.as_micros() as u32],
                    rows,
                    elapsed,
                    0,
                ));
            }
        }
    }
    let scanned = out.scan.runs.last().map(|r| r.per_second).unwrap_or(0.0);
    ensure!(scanned > 0.0, "the direct scan read nothing");
    Ok(())
}
