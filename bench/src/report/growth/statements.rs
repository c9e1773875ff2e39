//! pg_stat_statements' top statements of each layout at the largest size measured.

use super::bytes;
use crate::growth::{Growth, count_label};
use crate::stats::ms;
use std::fmt::Write;

/// The top-statements table of each layout, or a note that there are none.
pub(super) fn statements(s: &mut String, g: &Growth) {
    for l in g.layouts.iter().filter(|l| !l.top.is_empty()) {
        let _ = writeln!(
            s,
            "### Top 10 statements by total time, {} layout (pg_stat_statements over the points at {} rows, every shared_buffers)\n",
            l.layout.label(),
            count_label(l.top_size)
        );
        let _ = writeln!(
            s,
            "| total ms | calls | mean ms | rows | shared hit | read | WAL | statement |\n|---:|---:|---:|---:|---:|---:|---:|---|"
        );
        for q in &l.top {
            let text: String = q.query.split_whitespace().collect::<Vec<_>>().join(" ");
            let short: String = text.chars().take(160).collect();
            let ellipsis = if text.chars().count() > 160 {
                "…"
            } else {
                ""
            };
            let _ = writeln!(
                s,
                "| {:.0} | {} | {} | {} | {} | {} | {} | `{}{ellipsis}` |",
                q.total_ms,
                q.calls,
                ms(q.mean_ms),
                q.rows,
                q.hit,
                q.read,
                bytes(q.wal_bytes),
                short.replace('|', "\\|").replace('`', "'")
            );
        }
        s.push('\n');
    }
    if !g.layouts.iter().any(|l| !l.top.is_empty()) {
        let _ = writeln!(
            s,
            "No top-statements table: pg_stat_statements is not installed on this machine.\n"
        );
    }
}
