//! The analytics aggregator's memory with 1 million distinct (code, referrer) pairs in one
//! hour (10 000 links with 100 referrer hosts each, the per-hour limit), and the cost of a
//! count. Run with `cargo run --release -p shortener --example aggregator_memory`.

use shortener::domain::Device;
use shortener::visits::VisitKind;
use shortener::visits::analytics::aggregate::one;
use shortener::visits::analytics::{Aggregator, Cell, Referrer};
use std::time::Instant;

/// The process's resident memory in KiB (`VmRSS`).
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

fn main() {
    const LINKS: usize = 10_000;
    const HOSTS: usize = 100;
    let codes: Vec<String> = (0..LINKS).map(|i| format!("c{i:06}")).collect();
    let hosts: Vec<String> = (0..HOSTS).map(|i| format!("ref{i}.example.com")).collect();
    let before = rss_kib();
    let aggregator = Aggregator::new(2_000_000, HOSTS);
    let tenant: std::sync::Arc<str> = "acme".into();
    let started = Instant::now();
    for code in &codes {
        for host in &hosts {
            let cell = Cell {
                referrer: Referrer::Host(host.as_str().into()),
                device: Device::Desktop,
                country: None,
                route: Default::default(),
            };
            aggregator.add(code, &tenant, 0, cell, one(VisitKind::Human), true);
        }
    }
    let filled = started.elapsed();
    let after = rss_kib();
    let pairs = aggregator.entries();
    // A second pass finds every counter in place: the cost of a count on the redirect path.
    let started = Instant::now();
    for code in &codes {
        for host in &hosts {
            let cell = Cell {
                referrer: Referrer::Host(host.as_str().into()),
                device: Device::Desktop,
                country: None,
                route: Default::default(),
            };
            aggregator.add(code, &tenant, 0, cell, one(VisitKind::Human), true);
        }
    }
    let counted = started.elapsed();
    let started = Instant::now();
    let taken = aggregator.take();
    let take = started.elapsed();
    let grown = after.saturating_sub(before);
    println!("distinct (code, referrer) pairs: {pairs}");
    println!(
        "resident memory grown: {:.1} MiB ({} bytes per pair)",
        grown as f64 / 1024.0,
        grown * 1024 / pairs.max(1) as u64
    );
    println!(
        "first count of a pair: {:.0} ns; count of a held pair: {:.0} ns; take for a flush: {:.0} ms ({} rows)",
        filled.as_nanos() as f64 / pairs.max(1) as f64,
        counted.as_nanos() as f64 / pairs.max(1) as f64,
        take.as_secs_f64() * 1000.0,
        taken.len()
    );
}
