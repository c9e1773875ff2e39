//! SVG charts of a run: latency against offered load, and create throughput against clients.

use crate::create_suite::{Creates, StoreKind};
use crate::creates::Transport;
use crate::redirects::Redirects;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;

type Series = (String, RGBColor, Vec<(f64, f64)>);

fn bounds(series: &[Series]) -> (f64, f64, f64, f64) {
    let points = series
        .iter()
        .flat_map(|s| s.2.iter())
        .filter(|p| p.0.is_finite() && p.1.is_finite() && p.1 > 0.0);
    points.fold(
        (f64::MAX, f64::MIN, f64::MAX, f64::MIN),
        |(x0, x1, y0, y1), &(x, y)| (x0.min(x), x1.max(x), y0.min(y), y1.max(y)),
    )
}

fn draw(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    caption: &str,
    x_desc: &str,
    y_desc: &str,
    log_x: bool,
    series: &[Series],
) -> anyhow::Result<()> {
    let (x0, x1, y0, y1) = bounds(series);
    if x0 > x1 {
        return Ok(());
    }
    let y_range = ((y0 / 1.5).max(1e-3)..(y1 * 1.5)).log_scale();
    let mut builder = ChartBuilder::on(area);
    builder
        .caption(caption, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60);
    macro_rules! body {
        ($chart:expr) => {{
            let mut chart = $chart;
            chart
                .configure_mesh()
                .x_desc(x_desc)
                .y_desc(y_desc)
                .draw()
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            for (label, color, points) in series {
                let points: Vec<(f64, f64)> = points
                    .iter()
                    .copied()
                    .filter(|p| p.0.is_finite() && p.1.is_finite() && p.1 > 0.0)
                    .collect();
                let color = *color;
                chart
                    .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
                    .map_err(|e| anyhow::anyhow!("{e}"))?
                    .label(label.as_str())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                    });
                chart
                    .draw_series(points.iter().map(|&p| Circle::new(p, 3, color.filled())))
                    .map_err(|e| anyhow::anyhow!("{e}"))?;
            }
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperLeft)
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .draw()
                .map_err(|e| anyhow::anyhow!("{e}"))?;
        }};
    }
    if log_x {
        let x_range = ((x0 / 1.3).max(1e-3)..(x1 * 1.3)).log_scale();
        body!(
            builder
                .build_cartesian_2d(x_range, y_range)
                .map_err(|e| anyhow::anyhow!("{e}"))?
        );
    } else {
        let x_range = 0.0..(x1 * 1.05);
        body!(
            builder
                .build_cartesian_2d(x_range, y_range)
                .map_err(|e| anyhow::anyhow!("{e}"))?
        );
    }
    Ok(())
}

const CEILING: RGBColor = RGBColor(31, 119, 180);
const NODE: RGBColor = RGBColor(214, 39, 40);
const HTTP: RGBColor = RGBColor(214, 39, 40);
const GRPC: RGBColor = RGBColor(255, 127, 14);
const BATCH: RGBColor = RGBColor(44, 160, 44);
const GRPC_SHARED: RGBColor = RGBColor(148, 103, 189);
const BASE: RGBColor = RGBColor(31, 119, 180);
const LIGHT_CEILING: RGBColor = RGBColor(158, 202, 225);
const LIGHT_NODE: RGBColor = RGBColor(252, 146, 114);

/// Latency (p50, p99) against offered load for the ceiling and the node.
pub fn redirect_latency(redirects: &Redirects, path: &Path) -> anyhow::Result<()> {
    let pick = |f: &dyn Fn(&crate::redirects::OpenPoint) -> (f64, f64)| -> Vec<(f64, f64)> {
        redirects.open.iter().map(f).collect()
    };
    let series: Vec<Series> = vec![
        (
            "hyper ceiling p50".into(),
            LIGHT_CEILING,
            pick(&|p| (p.rate, p.ceiling.p50_ms)),
        ),
        (
            "hyper ceiling p99".into(),
            CEILING,
            pick(&|p| (p.rate, p.ceiling.p99_ms)),
        ),
        (
            "node, cache hits p50".into(),
            LIGHT_NODE,
            pick(&|p| (p.rate, p.node.p50_ms)),
        ),
        (
            "node, cache hits p99".into(),
            NODE,
            pick(&|p| (p.rate, p.node.p99_ms)),
        ),
    ];
    let root = SVGBackend::new(path, (900, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow::anyhow!("{e}"))?;
    draw(
        &root,
        "Redirect latency against offered load (open loop, 64 connections)",
        "offered load (requests/s)",
        "latency from intended send (ms, log)",
        false,
        &series,
    )?;
    root.present().map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(())
}

/// Creates per second against concurrent clients, PostgreSQL and embedded side by side.
pub fn create_throughput(creates: &Creates, batch: usize, path: &Path) -> anyhow::Result<()> {
    let root = SVGBackend::new(path, (1100, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow::anyhow!("{e}"))?;
    let (left, right) = root.split_horizontally(550);
    for (area, store) in [(&left, StoreKind::Postgres), (&right, StoreKind::Embedded)] {
        let line = |t: Transport| -> Vec<(f64, f64)> {
            [1usize, 16, 64]
                .iter()
                .filter_map(|&c| creates.row(store, t, c).map(|r| (c as f64, r.runs.rate())))
                .collect()
        };
        let baseline: Vec<(f64, f64)> = match store {
            StoreKind::Postgres => creates
                .pgbench
                .iter()
                .map(|(c, r)| (*c as f64, r.rate()))
                .collect(),
            StoreKind::Embedded => [1.0, 16.0, 64.0]
                .iter()
                .map(|&c| (c, creates.sqlite.rate()))
                .collect(),
        };
        let baseline_label = match store {
            StoreKind::Postgres => "pgbench, same INSERT",
            StoreKind::Embedded => "SQLite single insert (1 writer)",
        };
        let series: Vec<Series> = vec![
            ("HTTP".into(), HTTP, line(Transport::Http)),
            ("gRPC".into(), GRPC, line(Transport::Grpc)),
            (
                "gRPC, one channel".into(),
                GRPC_SHARED,
                line(Transport::GrpcShared),
            ),
            (
                format!("gRPC batch×{batch} (links/s)"),
                BATCH,
                line(Transport::GrpcBatch(batch)),
            ),
            (baseline_label.into(), BASE, baseline),
        ];
        draw(
            area,
            &format!("Creates, {}", store.label()),
            "concurrent clients (log)",
            "creates/s (log)",
            true,
            &series,
        )?;
    }
    root.present().map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(())
}

/// Creates per second against the rows in the links table: one line per layout,
/// `shared_buffers` and transport.
pub fn growth_throughput(growth: &crate::growth::Growth, path: &Path) -> anyhow::Result<()> {
    const PALETTE: [RGBColor; 8] = [
        HTTP,
        GRPC,
        BATCH,
        BASE,
        LIGHT_NODE,
        LIGHT_CEILING,
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
    ];
    let mut series: Vec<Series> = Vec::new();
    for l in growth.layouts.iter().filter(|l| l.skipped.is_none()) {
        for sb in &growth.settings.shared_buffers {
            let points: Vec<_> = growth
                .points
                .iter()
                .filter(|p| p.layout == l.layout && &p.shared_buffers == sb)
                .collect();
            for (transport, pick) in [
                (
                    "HTTP",
                    (|p: &crate::growth::Point| p.http.rate()) as fn(&crate::growth::Point) -> f64,
                ),
                ("gRPC batch (links/s)", |p: &crate::growth::Point| {
                    p.batch.rate()
                }),
            ] {
                let color = PALETTE[series.len() % PALETTE.len()];
                series.push((
                    format!(
                        "{} layout, shared_buffers {sb}, {transport}",
                        l.layout.label()
                    ),
                    color,
                    points.iter().map(|p| (p.rows as f64, pick(p))).collect(),
                ));
            }
        }
    }
    let root = SVGBackend::new(path, (900, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow::anyhow!("{e}"))?;
    draw(
        &root,
        "Creates against table size (PostgreSQL, 64 clients)",
        "rows in the links table",
        "creates/s (log)",
        false,
        &series,
    )?;
    root.present().map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(())
}
