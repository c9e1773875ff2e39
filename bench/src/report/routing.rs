//! The routing comparison, printed by `bench routing` (its figures are copied into
//! docs/benchmarks.md by hand, with the run they come from).

use crate::routing::{
    ACCEPT_LANGUAGE, CONNECTIONS, Round, Routing, TARGET, USER_AGENT, per_cpu_second,
};
use crate::stats::{Run, rate, ratio};
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

fn cells(run: &Run) -> String {
    format!(
        "{} | {} | {}",
        rate(run.per_second),
        run.cpu_us.map_or("–".into(), |us| format!("{us:.2}")),
        rate(per_cpu_second(run))
    )
}

/// The median cells of one kind over the rounds.
fn median_cells(rounds: &[Round], of: fn(&Round) -> &Run) -> String {
    format!(
        "{} | | {}",
        rate(median(rounds.iter().map(|r| of(r).per_second).collect())),
        rate(median(
            rounds.iter().map(|r| per_cpu_second(of(r))).collect()
        ))
    )
}

/// Whether `r` meets the target, in words.
fn verdict(r: f64) -> &'static str {
    if r >= TARGET { "met" } else { "not met" }
}

/// The comparison as Markdown.
pub fn markdown(
    r: &Routing,
    machine: &[(String, String)],
    command: &str,
    elapsed: Duration,
) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "## Routing: cache-hit redirects of links with rules and splits\n"
    );
    let _ = writeln!(
        s,
        "Printed by `bench {command}` in {:.1} min. One embedded node, {} links of each kind \
         created through the API: plain; 10 rules of which only the last \
         (`device` = `desktop`) holds; a 50/50 split. Every code requested once, then Zipf(1) \
         cache hits from wrk (one thread, {CONNECTIONS} connections, {} s per run), the three \
         kinds one after the other in each round (the first kind rotating between rounds), \
         every request with `User-Agent: {USER_AGENT}` and `Accept-Language: \
         {ACCEPT_LANGUAGE}` and no cookie (so every split visit is a new visitor's: hashed, \
         and answered with a `Set-Cookie`). \"req/CPU s\" is requests per second of the \
         node's CPU (user + system); the ratios are within the round, and their medians are \
         of those ratios.\n",
        elapsed.as_secs_f64() / 60.0,
        r.links,
        r.seconds,
    );
    let _ = writeln!(s, "| | |\n|---|---|");
    for (k, v) in machine {
        let _ = writeln!(s, "| {k} | {v} |");
    }
    let _ = writeln!(
        s,
        "\n| round | plain req/s | CPU µs/req | req/CPU s | rules req/s | CPU µs/req | req/CPU s | split req/s | CPU µs/req | req/CPU s | rules / plain | split / plain |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for (i, round) in r.rounds.iter().enumerate() {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} |",
            i + 1,
            cells(&round.plain),
            cells(&round.rules),
            cells(&round.split),
            ratio(round.rules_ratio()),
            ratio(round.split_ratio()),
        );
    }
    let rules = median(r.rounds.iter().map(Round::rules_ratio).collect());
    let split = median(r.rounds.iter().map(Round::split_ratio).collect());
    let _ = writeln!(
        s,
        "| **median** | {} | {} | {} | **{}** | **{}** |\n",
        median_cells(&r.rounds, |r| &r.plain),
        median_cells(&r.rounds, |r| &r.rules),
        median_cells(&r.rounds, |r| &r.split),
        ratio(rules),
        ratio(split),
    );
    let _ = writeln!(
        s,
        "Target: cache hits of a link with 10 rules (the last matching) and of a 50/50 split \
         ≥ {TARGET:.2}× a plain link's requests per CPU second: rules {} — **{}**; split {} — \
         **{}**.",
        ratio(rules),
        verdict(rules),
        ratio(split),
        verdict(split),
    );
    s
}
