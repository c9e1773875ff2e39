//! The report's sections: one table set per benchmark group.

use super::{client_cpu, cpu, cpu_at, repeated_cells};
use crate::create_suite::{Creates, StoreKind};
use crate::creates::Transport;
use crate::memory::Memory;
use crate::redirects::{CONNECTIONS, Redirects, rate_at};
use crate::settings::Settings;
use crate::stats::{Repeated, Run, ms, rate, ratio};
use std::fmt::Write;

pub(super) fn redirects(s: &mut String, r: &Redirects, settings: &Settings) {
    let _ = writeln!(
        s,
        "### Redirects (embedded node, {} links, wrk on the load core)\n",
        r.links
    );
    let _ = writeln!(
        s,
        "| scenario | conns | req/s | spread | p50 ms | p99 ms | p99.9 ms | server CPU µs/req | req/s vs ceiling | CPU capacity vs ceiling |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let rows: [(&str, &Vec<(usize, Repeated)>); 5] = [
        ("hyper ceiling (fixed 302)", &r.ceiling),
        ("cache hits, Zipf(1)", &r.hit),
        (
            "cache hits, Zipf(1), click analytics off",
            &r.hit_analytics_off,
        ),
        ("Zipf hits + 5% unknown codes (404)", &r.mix404),
        ("cache disabled (every request reads SQLite)", &r.miss),
    ];
    for (name, list) in rows {
        for conns in CONNECTIONS {
            if let Some((_, x)) = list.iter().find(|(c, _)| *c == conns) {
                let _ = writeln!(
                    s,
                    "| {name} | {conns} | {} | {} | {} | {} |",
                    repeated_cells(x),
                    cpu(x),
                    ratio(x.rate() / rate_at(&r.ceiling, conns)),
                    ratio(cpu_at(&r.ceiling, conns) / x.cpu_us())
                );
            }
        }
    }
    let e = &r.each_once;
    let st = &r.steady;
    let steady_rows = [
        ("hyper ceiling (fixed 302)", &st.ceiling),
        ("cache hits, Zipf(1)", &st.hit),
        (
            "cache hits, Zipf(1), click analytics off",
            &st.hit_analytics_off,
        ),
    ];
    for (name, x) in steady_rows.into_iter().filter(|(_, x)| !x.runs.is_empty()) {
        let _ = writeln!(
            s,
            "| {name}, {} s windows | 64 | {} | {} | {} | {} |",
            st.window.as_secs(),
            repeated_cells(x),
            cpu(x),
            ratio(x.rate() / st.ceiling.rate()),
            ratio(st.ceiling.cpu_us() / x.cpu_us())
        );
    }
    let _ = writeln!(
        s,
        "| cold cache: each code once (this crate's client) | 64 | {} | n=1 | {} | {} | {} | – | – | – |\n",
        rate(e.per_second),
        ms(e.p50_ms),
        ms(e.p99_ms),
        ms(e.p999_ms)
    );
    if !r.open.is_empty() {
        let _ = writeln!(
            s,
            "Open loop (64 connections, Zipf hits, the same rate offered to both servers, latency from each request's intended send time; {} s per point):\n",
            settings.redirect.as_secs()
        );
        let _ = writeln!(
            s,
            "| offered (of the node's peak) | req/s, to each | ceiling p50 ms | p99 ms | p99.9 ms | node p50 ms | p99 ms | p99.9 ms | generator behind, ms (ceiling / node) |"
        );
        let _ = writeln!(s, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        // Runs the generator could not hold to its schedule, or whose answers fell behind it.
        let behind = |run: &Run, offered: f64| {
            let late = run.behind_ms.is_some_and(|ms| ms > 1.0);
            if late || run.per_second < 0.97 * offered || run.errors > 0 {
                " †"
            } else {
                ""
            }
        };
        let mut any_behind = false;
        for p in &r.open {
            let (c, n) = (behind(&p.ceiling, p.rate), behind(&p.node, p.rate));
            any_behind |= !c.is_empty() || !n.is_empty();
            let _ = writeln!(
                s,
                "| {:.0}% | {} | {} | {} | {}{} | {} | {} | {}{} | {} / {} |",
                p.fraction * 100.0,
                rate(p.rate),
                ms(p.ceiling.p50_ms),
                ms(p.ceiling.p99_ms),
                ms(p.ceiling.p999_ms),
                c,
                ms(p.node.p50_ms),
                ms(p.node.p99_ms),
                ms(p.node.p999_ms),
                n,
                ms(p.ceiling.behind_ms.unwrap_or(f64::NAN)),
                ms(p.node.behind_ms.unwrap_or(f64::NAN))
            );
        }
        if any_behind {
            let _ = writeln!(
                s,
                "\n† The generator fell more than 1 ms behind its own schedule, or answers came back \
                 below 97% of the offered rate, or some requests failed: part of that row's tail \
                 belongs to the generator (stalled on its one core) or to a backlog, not to the \
                 server's latency alone."
            );
        }
        s.push('\n');
    }
}

/// A node row's rate against its store's baseline; none for h2load's rows, whose creates all
/// ask for one URL where the baselines' rows each have their own.
fn against_baseline(transport: Transport, v: f64) -> String {
    if transport.by_h2load() {
        "– (one URL)".into()
    } else {
        ratio(v)
    }
}

pub(super) fn creates(s: &mut String, c: &Creates, settings: &Settings) {
    let _ = writeln!(
        s,
        "### Creates ({} s per point after {} ms warm-up; batch rows count links)\n",
        settings.create.as_secs(),
        settings.warmup.as_millis()
    );
    let _ = writeln!(
        s,
        "| store | client | clients | creates/s | spread | p50 ms | p99 ms | p99.9 ms | node CPU µs/link | generator CPU µs/link | vs baseline | errors |"
    );
    let _ = writeln!(
        s,
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for clients in settings.clients() {
        if let Some((_, x)) = c.pgbench.iter().find(|(n, _)| *n == clients) {
            let _ = writeln!(
                s,
                "| PostgreSQL | pgbench, same INSERT (baseline) | {clients} | {} | – | – | 1.00× | 0 |",
                repeated_cells(x)
            );
        }
        for row in c
            .rows
            .iter()
            .filter(|r| r.store == StoreKind::Postgres && r.clients == clients)
        {
            let v = row.runs.rate() / c.pgbench_rate(clients);
            let _ = writeln!(
                s,
                "| PostgreSQL | {} | {clients} | {} | {} | {} | {} | {} |",
                row.transport.label(),
                repeated_cells(&row.runs),
                cpu(&row.runs),
                client_cpu(&row.runs),
                against_baseline(row.transport, v),
                row.runs.errors()
            );
        }
    }
    if !c.sqlite.runs.is_empty() {
        let _ = writeln!(
            s,
            "| embedded | SQLite single insert, own transaction (baseline) | 1 | {} | – | – | 1.00× | 0 |",
            repeated_cells(&c.sqlite)
        );
    }
    for row in c.rows.iter().filter(|r| r.store == StoreKind::Embedded) {
        let v = row.runs.rate() / c.sqlite.rate();
        let _ = writeln!(
            s,
            "| embedded | {} | {} | {} | {} | {} | {} | {} |",
            row.transport.label(),
            row.clients,
            repeated_cells(&row.runs),
            cpu(&row.runs),
            client_cpu(&row.runs),
            against_baseline(row.transport, v),
            row.runs.errors()
        );
    }
    s.push('\n');
    if !c.rollover.is_empty() {
        let _ = writeln!(
            s,
            "Block rollovers (HTTP creates, 64 clients, `SHORTENER_MIN_BLOCK = SHORTENER_MAX_BLOCK`):\n"
        );
        let _ = writeln!(
            s,
            "| store | block | leases during runs | creates/s | p50 ms | p99 ms | p99.9 ms | p99 with default blocks | ratio |"
        );
        let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---:|---:|");
        for r in &c.rollover {
            let normal = c
                .row(r.store, Transport::Http, 64)
                .map_or(f64::NAN, |x| x.runs.p99());
            let _ = writeln!(
                s,
                "| {} | {} | {:.0} | {} | {} | {} | {} | {} | {} |",
                r.store.label(),
                r.block,
                r.leases,
                rate(r.runs.rate()),
                ms(r.runs.p50()),
                ms(r.runs.p99()),
                ms(r.runs.p999()),
                ms(normal),
                ratio(r.runs.p99() / normal)
            );
        }
        s.push('\n');
    }
}

pub(super) fn memory(s: &mut String, m: &Memory) {
    let _ = writeln!(
        s,
        "### Memory of an embedded node (VmRSS; each link warmed by one redirect)\n"
    );
    let _ = writeln!(
        s,
        "| cached links | cache entries (node's count) | RSS MiB | bytes per link over empty | redirect cache MiB (node's gauge) | cache bytes per link |\n|---:|---:|---:|---:|---:|---:|"
    );
    let base = m.points.first().map_or(0, |p| p.rss_kib);
    for p in &m.points {
        let per = if p.links > 0 {
            format!(
                "{:.0}",
                (p.rss_kib.saturating_sub(base)) as f64 * 1024.0 / p.links as f64
            )
        } else {
            "–".into()
        };
        let (cache, cache_per) = if p.cache_bytes.is_nan() {
            ("–".into(), "–".into())
        } else {
            let per = (p.links > 0).then(|| format!("{:.0}", p.cache_bytes / p.links as f64));
            (
                format!("{:.1}", p.cache_bytes / 1048576.0),
                per.unwrap_or_else(|| "–".into()),
            )
        };
        let _ = writeln!(
            s,
            "| {} | {:.0} | {:.1} | {per} | {cache} | {cache_per} |",
            p.links,
            p.cache_entries,
            p.rss_kib as f64 / 1024.0
        );
    }
    if let Some(w) = &m.warming {
        let _ = writeln!(
            s,
            "\nWarming ran at {} redirects/s (64 connections, every one a cache miss), p99 {} ms.",
            rate(w.per_second),
            ms(w.p99_ms)
        );
    }
    s.push('\n');
}
