//! The branded-domain comparison, printed by `bench branded` (its figures are copied into
//! docs/benchmarks.md by hand, with the run they come from).

use crate::branded::{Branded, CONNECTIONS, DEFAULT_HOST, HOST, Pair, TARGET, per_cpu_second};
use crate::stats::{rate, ratio};
use std::fmt::Write;
use std::time::Duration;

fn median(mut values: Vec<f64>) -> f64 {
    values.retain(|v| v.is_finite());
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

fn cpu_us(run: &crate::stats::Run) -> String {
    run.cpu_us.map_or("–".into(), |us| format!("{us:.2}"))
}

/// One kind of code's rounds as table rows, and its summary line.
fn kind(s: &mut String, label: &str, pairs: &[Pair]) -> Option<f64> {
    if pairs.is_empty() {
        return None;
    }
    for (i, p) in pairs.iter().enumerate() {
        let _ = writeln!(
            s,
            "| {label} | {} | {} | {} | {} | {} | {} | {} | {} |",
            i + 1,
            rate(p.default.per_second),
            cpu_us(&p.default),
            rate(per_cpu_second(&p.default)),
            rate(p.branded.per_second),
            cpu_us(&p.branded),
            rate(per_cpu_second(&p.branded)),
            ratio(p.ratio()),
        );
    }
    let default = median(pairs.iter().map(|p| per_cpu_second(&p.default)).collect());
    let branded = median(pairs.iter().map(|p| per_cpu_second(&p.branded)).collect());
    let paired = median(pairs.iter().map(Pair::ratio).collect());
    let _ = writeln!(
        s,
        "| {label} | **median** | {} | | {} | {} | | {} | **{}** (of medians {}) |",
        rate(median(pairs.iter().map(|p| p.default.per_second).collect())),
        rate(default),
        rate(median(pairs.iter().map(|p| p.branded.per_second).collect())),
        rate(branded),
        ratio(paired),
        ratio(branded / default),
    );
    Some(paired)
}

/// The comparison as Markdown.
pub fn markdown(
    b: &Branded,
    machine: &[(String, String)],
    command: &str,
    elapsed: Duration,
) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "## Branded domains: cache-hit redirects by Host\n");
    let _ = writeln!(
        s,
        "Printed by `bench {command}` in {:.1} min. One embedded node, {} generated codes and {} \
         aliases on `{HOST}` and as many on the default domain (`{DEFAULT_HOST}`, the public \
         URL's host); every code requested once on its host, then Zipf(1) cache hits from wrk \
         (one thread, {CONNECTIONS} connections, {} s per run), the two hosts alternated within \
         each round (the first host alternates between rounds). \"req/CPU s\" is requests per \
         second of the node's CPU (user + system); the ratio is branded over default within \
         the round, and the median is of those ratios.\n",
        elapsed.as_secs_f64() / 60.0,
        b.links,
        b.aliases,
        b.seconds,
    );
    let _ = writeln!(s, "| | |\n|---|---|");
    for (k, v) in machine {
        let _ = writeln!(s, "| {k} | {v} |");
    }
    let _ = writeln!(
        s,
        "\n| codes | round | default req/s | CPU µs/req | req/CPU s | branded req/s | CPU µs/req | req/CPU s | branded / default, req/CPU s |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    let generated = kind(&mut s, "generated", &b.generated);
    let alias = kind(&mut s, "alias", &b.alias);
    let _ = writeln!(s);
    if let Some(r) = generated {
        let _ = writeln!(
            s,
            "Target: cache-hit redirects on a branded domain ≥ {TARGET:.2}× the default domain's \
             requests per CPU second (generated codes): {} — **{}**.",
            ratio(r),
            if r >= TARGET { "met" } else { "not met" }
        );
    }
    if let Some(r) = alias {
        let _ = writeln!(s, "Aliases (not in the target): {}.", ratio(r));
    }
    s
}
