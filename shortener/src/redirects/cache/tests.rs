use super::*;
use crate::domain::compact_code::INLINE;

fn cache(max_bytes: u64, ttl: Duration, negative_ttl: Duration) -> LinkCache {
    LinkCache::new(
        CacheConfig {
            max_bytes,
            negative_max_bytes: 1 << 20,
            ttl,
            negative_ttl,
            limited_ttl: ttl,
        },
        Arc::default(),
    )
}

fn link(url: &str) -> Answer {
    Answer::Link(NewLink {
        url: url.to_owned(),
        expires_at: None,
        gone: false,
        tenant: "default".into(),
        domain: None,
        rare: Rare::default(),
    })
}

/// The URL a cached answer redirects to (`Some("")` for a blocked link), `None` if the
/// code is unknown or not cached.
fn url(cached: Option<Cached>) -> Option<String> {
    match cached? {
        Cached::Found(entry) => Some(entry.url().to_owned()),
        Cached::Missing => None,
    }
}

#[test]
fn found_and_missing_entries_are_kept_apart_and_invalidated() {
    let minute = Duration::from_secs(60);
    let cache = cache(1 << 20, minute, minute);
    cache.put("abc", link("https://example.com/"));
    cache.put("zzz", Answer::Missing);
    assert_eq!(
        url(cache.get("abc", Instant::now())).as_deref(),
        Some("https://example.com/")
    );
    assert_eq!(cache.get("zzz", Instant::now()), Some(Cached::Missing));
    assert_eq!(cache.get("other", Instant::now()), None);
    // A code found after it was unknown (just created) is no longer unknown, and back.
    cache.put("zzz", link("https://example.com/z"));
    assert!(url(cache.get("zzz", Instant::now())).is_some());
    cache.put("zzz", Answer::Missing);
    assert_eq!(cache.get("zzz", Instant::now()), Some(Cached::Missing));
    cache.invalidate("abc");
    cache.invalidate("zzz");
    assert_eq!(cache.get("abc", Instant::now()), None);
    assert_eq!(cache.get("zzz", Instant::now()), None);
}

#[test]
fn entries_past_their_lifetime_read_as_absent() {
    // Lifetimes are checked against the time the caller gives, so the test asks as of later
    // instants instead of letting real time pass.
    let cache = cache(
        1 << 20,
        Duration::from_millis(200),
        Duration::from_millis(20),
    );
    cache.put("abc", link("https://example.com/"));
    cache.put("zzz", Answer::Missing);
    let later = Instant::now() + Duration::from_millis(60);
    assert_eq!(
        cache.get("zzz", later),
        None,
        "the negative entry outlived its lifetime"
    );
    assert!(
        url(cache.get("abc", later)).is_some(),
        "the link expired too early"
    );
    let much_later = later + Duration::from_millis(200);
    assert_eq!(
        cache.get("abc", much_later),
        None,
        "the link outlived its lifetime"
    );
}

#[test]
fn lifetimes_are_checked_against_the_callers_clock() {
    let (ttl, negative_ttl) = (Duration::from_secs(60), Duration::from_secs(5));
    let cache = cache(1 << 20, ttl, negative_ttl);
    let before = Instant::now();
    cache.put("abc", link("https://example.com/"));
    cache.put("zzz", Answer::Missing);
    let after = Instant::now();
    // A time read before the entry was stored (a request that raced the insert) is fresh.
    assert!(url(cache.get("abc", before)).is_some());
    assert_eq!(cache.get("zzz", before), Some(Cached::Missing));
    // Each lifetime is its own: the negative one ends first.
    let between = after + negative_ttl;
    assert_eq!(cache.get("zzz", between), None);
    assert!(url(cache.get("abc", between)).is_some());
    assert_eq!(cache.get("abc", after + ttl), None);
    // An expired entry is dropped, not just hidden.
    assert_eq!(cache.get("abc", after), None);
}

/// A "missing" answer lives the negative lifetime from when its read began (its ticket), not
/// from when the read came back: a read that took long makes no longer-lived 404.
#[test]
fn a_missing_answer_lives_from_when_its_read_began() {
    let negative_ttl = Duration::from_secs(5);
    let cache = cache(1 << 20, Duration::from_secs(60), negative_ttl);
    // Times as the cache counts them, from its epoch. The stamp is the ticket's: a ticket said
    // to be taken 10 s after the epoch makes an answer that lives until 15 s, whenever it is
    // stored (here at once).
    let ticket = Ticket {
        at: 10_000_000_000,
        ..cache.ticket("zzz")
    };
    cache.put_at("zzz", Answer::Missing, ticket);
    let epoch = cache.epoch;
    assert_eq!(
        cache.get("zzz", epoch + Duration::from_secs(14)),
        Some(Cached::Missing)
    );
    assert_eq!(cache.get("zzz", epoch + Duration::from_secs(16)), None);
}

#[test]
fn a_link_with_a_visit_limit_is_kept_for_the_shorter_lifetime() {
    let cache = LinkCache::new(
        CacheConfig {
            max_bytes: 1 << 20,
            negative_max_bytes: 1 << 20,
            ttl: Duration::from_secs(60),
            negative_ttl: Duration::from_secs(60),
            limited_ttl: Duration::from_secs(2),
        },
        Arc::default(),
    );
    let Answer::Link(mut limited) = link("https://example.com/limited") else {
        unreachable!()
    };
    limited.rare.limit = Some(Arc::new(VisitLimit::new(5, 0)));
    cache.put("lim", Answer::Link(limited));
    cache.put("abc", link("https://example.com/"));
    let later = Instant::now() + Duration::from_secs(3);
    assert_eq!(cache.get("lim", later), None);
    assert!(url(cache.get("abc", later)).is_some());
}

#[test]
fn short_and_long_codes_are_found_by_their_text() {
    let minute = Duration::from_secs(60);
    let cache = cache(1 << 20, minute, minute);
    let exactly_inline = "a".repeat(INLINE);
    let long = "an-alias-longer-than-the-inline-key-holds";
    for code in ["abc", exactly_inline.as_str(), long] {
        cache.put(code, link(&format!("https://example.com/{code}")));
    }
    for code in ["abc", exactly_inline.as_str(), long] {
        assert_eq!(
            url(cache.get(code, Instant::now())),
            Some(format!("https://example.com/{code}")),
            "{code}"
        );
    }
    // A prefix or an extension of a stored code is a different key.
    assert_eq!(cache.get("ab", Instant::now()), None);
    assert_eq!(cache.get("abc\0", Instant::now()), None);
    assert_eq!(cache.get(&long[..INLINE], Instant::now()), None);
    cache.invalidate(long);
    assert_eq!(cache.get(long, Instant::now()), None);
    assert!(url(cache.get("abc", Instant::now())).is_some());
}

#[test]
fn answers_made_under_an_earlier_generation_are_stale() {
    let generation = Arc::new(AtomicU64::new(0));
    let minute = Duration::from_secs(60);
    let cache = LinkCache::new(
        CacheConfig {
            max_bytes: 1 << 20,
            negative_max_bytes: 1 << 20,
            ttl: minute,
            negative_ttl: minute,
            limited_ttl: minute,
        },
        Arc::clone(&generation),
    );
    let read_before = cache.ticket("raced");
    cache.put("abc", link("https://example.com/"));
    generation.fetch_add(1, Ordering::AcqRel);
    // An answer computed before the change and stored after it.
    cache.put_at("raced", link("https://example.com/"), read_before);
    assert_eq!(cache.get("abc", Instant::now()), None);
    assert_eq!(cache.get("raced", Instant::now()), None);
    let blocked = Answer::Blocked {
        tenant: "default".into(),
        domain: None,
    };
    cache.put("abc", blocked);
    let Some(Cached::Found(entry)) = cache.get("abc", Instant::now()) else {
        panic!("the blocked link is not cached");
    };
    assert_eq!((entry.kind(), entry.domain()), (Kind::Blocked, None));
}

/// A link with a visit limit of `max`.
fn limited(url: &str, max: u64) -> Answer {
    let Answer::Link(mut limited) = link(url) else {
        unreachable!()
    };
    limited.rare.limit = Some(Arc::new(VisitLimit::new(max, 0)));
    Answer::Link(limited)
}

#[test]
fn a_watched_link_outlives_its_lifetime_while_changes_are_confirmed() {
    let ttl = Duration::from_millis(50);
    let cache = cache(1 << 20, ttl, ttl);
    cache.put("abc", link("https://example.com/"));
    cache.put("lim", limited("https://example.com/limited", 10));
    let later = Instant::now() + 2 * ttl;
    // Nothing confirmed: the lifetime runs from when it was cached, as for any link.
    assert_eq!(cache.get("abc", later), None);

    cache.put("abc", link("https://example.com/"));
    cache.put("lim", limited("https://example.com/limited", 10));
    cache.confirm(later - ttl / 2);
    let url = |code| url(cache.get(code, later));
    assert_eq!(url("abc").as_deref(), Some("https://example.com/"));
    // A visit limit is read again at its lifetime, whatever is confirmed.
    assert_eq!(url("lim"), None);
    // Confirmation that stops leaves a lifetime from the last one.
    assert_eq!(cache.get("abc", later + ttl), None);

    let cache = self::cache(1 << 20, ttl, ttl);
    cache.sees_every_change();
    cache.put("abc", link("https://example.com/"));
    let much_later = Instant::now() + 1000 * ttl;
    assert_eq!(
        super::tests::url(cache.get("abc", much_later)).as_deref(),
        Some("https://example.com/")
    );
    // A change the node makes drops it at once.
    cache.invalidate("abc");
    assert_eq!(cache.get("abc", Instant::now()), None);
}

#[test]
fn a_read_that_raced_a_reported_change_is_answered_but_not_kept() {
    let ttl = Duration::from_millis(50);
    let cache = cache(1 << 20, ttl, ttl);
    cache.sees_every_change();
    let later = Instant::now() + 2 * ttl;

    // The store was read before the change was reported, its answer cached after.
    let ticket = cache.ticket("abc");
    cache.invalidate("abc");
    let answered = cache.put_at("abc", link("https://example.com/old"), ticket);
    assert_eq!(url(answered).as_deref(), Some("https://example.com/old"));
    assert_eq!(
        cache.get("abc", Instant::now()),
        None,
        "a read older than a reported change was kept"
    );

    // The same across a clear (the change feed reconnected).
    let ticket = cache.ticket("def");
    cache.clear();
    cache.put_at("def", link("https://example.com/old"), ticket);
    assert_eq!(cache.get("def", Instant::now()), None);

    // A code read as unknown while its create was reported: not remembered as unknown.
    let ticket = cache.ticket("new");
    cache.invalidate("new");
    assert_eq!(
        cache.put_at("new", Answer::Missing, ticket),
        Some(Cached::Missing)
    );
    assert!(
        !cache.negative.holds("new", Instant::now()),
        "a code created during its read was cached as unknown"
    );
    let ticket = cache.ticket("new");
    cache.put_at("new", Answer::Missing, ticket);
    assert!(cache.negative.holds("new", Instant::now()));

    // A change to a code of another stripe leaves a read watched.
    let other = (0..1000)
        .map(|i| format!("x{i}"))
        .find(|code| {
            let scratch = Changes::default();
            let seen = scratch.seen("ghi");
            scratch.changed(code);
            scratch.unchanged_since("ghi", seen)
        })
        .expect("a code of another stripe");
    let ticket = cache.ticket("ghi");
    cache.invalidate(&other);
    cache.put_at("ghi", link("https://example.com/new"), ticket);
    assert_eq!(
        url(cache.get("ghi", later)).as_deref(),
        Some("https://example.com/new")
    );
}

#[test]
fn links_of_one_tenant_and_domain_share_one_place() {
    let minute = Duration::from_secs(60);
    let cache = cache(1 << 20, minute, minute);
    for code in ["a1", "a2"] {
        let Answer::Link(mut branded) = link("https://example.com/") else {
            unreachable!()
        };
        branded.domain = Some("go.example".into());
        cache.put(code, Answer::Link(branded));
    }
    let tenant = |code| match cache.get(code, Instant::now()) {
        Some(Cached::Found(entry)) => Arc::clone(entry.tenant()),
        other => panic!("{other:?}"),
    };
    assert!(Arc::ptr_eq(&tenant("a1"), &tenant("a2")));
    assert_eq!(cache.places.len(), 1);
}

#[test]
fn memory_stays_within_the_bound_and_misses_never_evict_links() {
    let cache = cache(64 * 1024, Duration::from_secs(60), Duration::from_secs(60));
    for i in 0..10_000 {
        cache.put(
            &format!("code{i}"),
            link(&format!("https://example.com/{i}")),
        );
    }
    let links = cache.entries.len();
    assert!(links > 100 && links < 1000, "{links} links kept");
    assert!(cache.entries.weight() <= 64 * 1024);
    let kept: Vec<String> = (0..10_000)
        .map(|i| format!("code{i}"))
        .filter(|code| cache.get(code, Instant::now()).is_some())
        .collect();
    // A storm of unknown codes fills their own cache, and evicts no link.
    for i in 0..100_000 {
        cache.put(&format!("miss{i}"), Answer::Missing);
    }
    assert!(cache.negative.len() > 1000, "{}", cache.negative.len());
    for code in &kept {
        assert!(
            cache.get(code, Instant::now()).is_some(),
            "{code} was evicted"
        );
    }
}
