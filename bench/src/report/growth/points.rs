//! One table per layout and `shared_buffers`: every measured size's figures, each against the
//! smallest size's.

use super::{bytes, hit};
use crate::growth::{Growth, Layout, Point, count_label};
use crate::stats::{Run, ms, rate, ratio};
use std::fmt::Write;

/// The table of one layout and `shared_buffers`, sizes compared with `smallest`.
pub(super) fn table(s: &mut String, g: &Growth, layout: Layout, sb: &str, smallest: u64) {
    let points: Vec<&Point> = g
        .settings
        .sizes
        .iter()
        .filter_map(|&n| g.point(layout, sb, n))
        .collect();
    if points.is_empty() {
        return;
    }
    let base = g.point(layout, sb, smallest);
    let vs = |f: &dyn Fn(&Point) -> f64, p: &Point| -> String {
        base.map_or("–".into(), |b| ratio(f(p) / f(b)))
    };
    let _ = writeln!(
        s,
        "### {} layout, shared_buffers {sb}\n",
        match layout {
            Layout::Code => "Code",
            Layout::Slot => "Slot",
        }
    );
    let _ = writeln!(
        s,
        "| loaded to | rows at start | table + indexes | table + primary key | HTTP creates/s | vs {0} | p99 ms | batch links/s | vs {0} | p99 ms | WAL B/create, HTTP | batch | vs {0} (HTTP / batch) | buffer hits, creates | miss p50 ms | miss p99 ms | p99 vs {0} | buffer hits, misses | prewarmed: miss p50 ms | p99 ms | p99 vs {0} | buffer hits | at {1:.0}/s: miss p50 ms | p99 ms | p99 vs {0} | straight to PostgreSQL: p50 ms | p99 ms | p99 vs {0} | errors |",
        count_label(smallest),
        g.settings.miss_rate
    );
    let _ = writeln!(
        s,
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    let warm = |p: &Point, f: fn(&Run) -> f64| p.warm.as_ref().map_or(f64::NAN, f);
    for p in points {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.0} | {:.0} | {} / {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            count_label(p.size),
            p.rows,
            bytes(p.bytes as f64),
            bytes(p.lookup_bytes as f64),
            rate(p.http.rate()),
            vs(&|p| p.http.rate(), p),
            ms(p.http.p99()),
            rate(p.batch.rate()),
            vs(&|p| p.batch.rate(), p),
            ms(p.batch.p99()),
            p.http_wal,
            p.batch_wal,
            vs(&|p| p.http_wal, p),
            vs(&|p| p.batch_wal, p),
            hit(p.create_hit),
            ms(p.miss.p50_ms),
            ms(p.miss.p99_ms),
            vs(&|p| p.miss.p99_ms, p),
            hit(p.miss_hit),
            ms(warm(p, |r| r.p50_ms)),
            ms(warm(p, |r| r.p99_ms)),
            vs(&|p| warm(p, |r| r.p99_ms), p),
            hit(p.warm_hit),
            ms(p.paced.p50_ms),
            ms(p.paced.p99_ms),
            vs(&|p| p.paced.p99_ms, p),
            ms(p.direct.p50_ms),
            ms(p.direct.p99_ms),
            vs(&|p| p.direct.p99_ms, p),
            p.http.errors()
                + p.batch.errors()
                + p.miss.errors
                + p.warm.as_ref().map_or(0, |r| r.errors)
                + p.paced.errors
        );
    }
    s.push('\n');
}
