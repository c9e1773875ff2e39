//! The targets table: each layout and `shared_buffers` at the largest size against the
//! smallest, judged against the goals.

use crate::growth::{Growth, GrowthSettings, Layout, Point, count_label};
use crate::stats::ratio;
use std::fmt::Write;

/// The baseline row of the targets table: no target of its own, it shows what PostgreSQL's
/// lookup alone does.
pub(super) const BASELINE_ROW: &str =
    "primary-key lookup p99 straight to PostgreSQL (no node), after the prewarmed run";

/// The size the issue states its targets at.
const TARGET_SIZE: u64 = 50_000_000;

/// The targets table, `largest` against `smallest`.
pub(super) fn targets(s: &mut String, g: &Growth, smallest: u64, largest: u64) {
    let st = &g.settings;
    let default_sb = &st.shared_buffers[0];
    let _ = writeln!(
        s,
        "### Targets ({} rows against {}{})\n",
        count_label(largest),
        count_label(smallest),
        if largest == TARGET_SIZE {
            String::new()
        } else {
            format!(
                "; the targets are stated at {}, so these are only indications",
                count_label(TARGET_SIZE)
            )
        }
    );
    let _ = writeln!(
        s,
        "The creates/s target is the slot layout's at the default shared_buffers ({default_sb}); the \
         other rows are there to compare.\n"
    );
    let _ = writeln!(
        s,
        "| layout | shared_buffers | target | goal | measured | status |\n|---|---|---|---|---|---|"
    );
    for l in g.layouts.iter().filter(|l| l.skipped.is_none()) {
        for sb in &st.shared_buffers {
            let (Some(a), Some(b)) = (
                g.point(l.layout, sb, smallest),
                g.point(l.layout, sb, largest),
            ) else {
                continue;
            };
            let the_target = l.layout == Layout::Slot && sb == default_sb;
            layout_rows(s, st, l.layout, sb, a, b, the_target);
        }
    }
    s.push('\n');
}

/// The rows of one layout and `shared_buffers`: `a` at the smallest size, `b` at the largest;
/// `the_target` for the pair the creates/s target is stated for.
fn layout_rows(
    s: &mut String,
    st: &GrowthSettings,
    layout: Layout,
    sb: &str,
    a: &Point,
    b: &Point,
    the_target: bool,
) {
    let mark = |ok: bool| {
        if the_target {
            crate::report::status(ok).to_string()
        } else if ok {
            "met".into()
        } else {
            "not met".into()
        }
    };
    let warm = |p: &Point| p.warm.as_ref().map_or(f64::NAN, |r| r.p99_ms);
    let paced = format!(
        "cache-miss redirect p99 at {:.0} requests/s offered, after the prewarmed run",
        st.miss_rate
    );
    let rows: [(&str, &str, f64, bool); 8] = [
        (
            "creates/s, HTTP, 64 clients",
            "≥ 0.8×",
            b.http.rate() / a.http.rate(),
            true,
        ),
        (
            "links/s, gRPC BatchCreateLinks, 64 clients",
            "≥ 0.8×",
            b.batch.rate() / a.batch.rate(),
            true,
        ),
        (
            "WAL bytes per create, HTTP",
            "≤ 1.5×",
            b.http_wal / a.http_wal,
            false,
        ),
        (
            "WAL bytes per create, batches",
            "≤ 1.5×",
            b.batch_wal / a.batch_wal,
            false,
        ),
        (
            "cache-miss redirect p99, caches as the load left them",
            "≤ 2×",
            b.miss.p99_ms / a.miss.p99_ms,
            false,
        ),
        (
            "cache-miss redirect p99, table and primary key read in (pg_prewarm)",
            "≤ 2×",
            warm(b) / warm(a),
            false,
        ),
        (&paced, "≤ 2×", b.paced.p99_ms / a.paced.p99_ms, false),
        (
            BASELINE_ROW,
            "≤ 2×",
            b.direct.p99_ms / a.direct.p99_ms,
            false,
        ),
    ];
    for (name, goal, v, higher_is_better) in rows.into_iter().filter(|r| !r.2.is_nan()) {
        let limit: f64 = goal
            .trim_start_matches(['≥', '≤', ' '])
            .trim_end_matches('×')
            .parse()
            .unwrap_or(f64::NAN);
        let ok = if higher_is_better {
            v >= limit
        } else {
            v <= limit
        };
        let status = if name == BASELINE_ROW {
            format!("(baseline) {}", if ok { "within" } else { "beyond" })
        } else {
            mark(ok)
        };
        let _ = writeln!(
            s,
            "| {} | {sb} | {name} | {goal} | {} | {status} |",
            layout.label(),
            ratio(v),
        );
    }
}
