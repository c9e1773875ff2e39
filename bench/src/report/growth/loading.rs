//! The loading table: each load step's rows, time and rate, and what the largest step's rate
//! means for bigger tables.

use crate::growth::{Growth, count_label};
use crate::stats::rate;
use std::fmt::Write;

/// The load steps of every layout (nothing when none ran).
pub(super) fn loading(s: &mut String, g: &Growth) {
    let loads: Vec<_> = g.layouts.iter().flat_map(|l| l.loads.iter()).collect();
    if loads.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "### Loading (`shortener preload`, chunks of {} links)\n",
        count_label(g.settings.chunk)
    );
    let _ = writeln!(
        s,
        "| layout | rows from | to | preload s | rows/s | VACUUM (ANALYZE) s |\n|---|---:|---:|---:|---:|---:|"
    );
    for l in &loads {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {:.0} | {} | {:.0} |",
            l.layout.label(),
            l.from,
            l.to,
            l.seconds,
            rate(l.rate()),
            l.vacuum_seconds
        );
    }
    if let Some(last) = loads.iter().max_by_key(|l| l.to - l.from) {
        let minutes = |n: f64| n / last.rate() / 60.0;
        let _ = writeln!(
            s,
            "\nAt the largest step's rate ({} rows/s), 10M rows would take about {:.0} min and 50M about \
             {:.0} min per layout (more if the rate keeps falling as the indexes outgrow memory).\n",
            rate(last.rate()),
            minutes(1e7),
            minutes(5e7)
        );
    }
}
