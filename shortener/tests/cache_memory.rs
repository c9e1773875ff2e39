//! What a cached link costs, counted by dhat's allocator in a process of its own: plain links
//! with URLs of a known length put into the redirect cache, every allocation counted (the
//! cache's tables, each link's block, the shared tenant), against the bound of 200
//! bytes plus the URL, against what the cache reports in `shortener_memory_bytes`, and against
//! its byte bound once it is full.

use shortener::metrics::Footprint;
use shortener::redirects::{Answer, CacheConfig, LinkCache, NewLink, Rare};
use std::sync::Arc;
use std::time::Duration;

#[global_allocator]
static ALLOCATOR: dhat::Alloc = dhat::Alloc;

/// The URLs' length: an average link's.
const URL: usize = 60;

fn cache(max_bytes: u64) -> LinkCache {
    LinkCache::new(
        CacheConfig {
            max_bytes,
            negative_max_bytes: 1 << 20,
            ttl: Duration::from_secs(600),
            negative_ttl: Duration::from_secs(600),
            limited_ttl: Duration::from_secs(600),
        },
        Arc::default(),
    )
}

/// Heap bytes in use now.
fn in_use() -> i64 {
    dhat::HeapStats::get().curr_bytes as i64
}

/// Puts links `from..to` (7-character codes, URLs of `URL` bytes) into `cache`.
fn put(cache: &LinkCache, from: usize, to: usize) {
    for i in from..to {
        let url = format!("https://example.com/{i:0>width$}", width = URL - 20);
        assert_eq!(url.len(), URL);
        let answer = Answer::Link(NewLink {
            url,
            expires_at: None,
            gone: false,
            tenant: "default".into(),
            domain: None,
            rare: Rare::default(),
        });
        assert!(cache.put(&format!("c{i:06}"), answer).is_some());
    }
}

#[test]
fn a_cached_link_costs_what_the_cache_says_and_the_bound_holds() {
    let _profiler = dhat::Profiler::builder().testing().build();

    // 100k links in a cache that holds them all.
    const LINKS: usize = 100_000;
    let start = in_use();
    let all = cache(1 << 30);
    let empty = in_use();
    put(&all, 0, LINKS);
    let used = in_use() - start;
    let per_link = (in_use() - empty) as f64 / LINKS as f64;
    println!("{LINKS} links: {used} bytes allocated, {per_link:.1} per link");
    assert!(
        per_link <= (200 + URL) as f64,
        "a link costs {per_link:.1} bytes with a {URL}-byte URL"
    );
    let reported = all.bytes() as f64;
    assert!(
        (reported / used as f64 - 1.0).abs() <= 0.10,
        "the cache reports {reported} bytes; {used} are allocated"
    );
    drop(all);
    assert!(
        in_use() - start < 4096,
        "the cache left {} bytes",
        in_use() - start
    );

    // A cache of 8 MiB, filled five times over: what it holds stays within its bound.
    let bound = 8 << 20;
    let start = in_use();
    let full = cache(bound);
    put(&full, 0, 5 * bound as usize / (200 + URL));
    let used = in_use() - start;
    println!(
        "a full cache of {bound} bytes: {used} allocated, {} reported",
        full.bytes()
    );
    assert!(
        used as f64 <= bound as f64 * 1.05,
        "a cache bound to {bound} bytes holds {used}"
    );
    assert!(
        used as f64 >= bound as f64 * 0.6,
        "a cache bound to {bound} bytes holds only {used}: the weights overstate the cost"
    );
    let reported = full.bytes() as f64;
    assert!(
        (reported / used as f64 - 1.0).abs() <= 0.10,
        "the full cache reports {reported} bytes; {used} are allocated"
    );
    assert_eq!(full.budget(), bound);
}
