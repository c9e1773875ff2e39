use super::*;

/// What `agg` holds, taken, in the order of the rollup key (the flush's order).
fn sorted_take(agg: &Aggregator) -> Vec<Taken> {
    let mut taken = agg.take();
    taken.sort_unstable_by(|a, b| (&a.code, a.hour, &a.cell).cmp(&(&b.code, b.hour, &b.cell)));
    taken
}

fn host(name: &str) -> Cell {
    Cell {
        referrer: Referrer::Host(name.into()),
        device: Device::Desktop,
        country: None,
        route: Route::Url,
    }
}

/// What a link-hour holds besides its first cell: its further cells and hosts.
fn held_more(agg: &Aggregator, code: &str, hour: i64) -> Option<(usize, usize)> {
    let shard = agg.shard(code).lock().expect("shard");
    let link_hour = shard
        .get(&(CompactCode::new(code), hour))
        .expect("link-hour");
    link_hour
        .more
        .as_ref()
        .map(|m| (m.cells.len(), m.hosts.len()))
}

#[test]
fn a_cell_the_ceiling_refuses_leaves_no_host_and_no_box_behind() {
    let agg = Aggregator::new(1, 100);
    let t: Arc<str> = "acme".into();
    agg.add("x", &t, 0, host("first.com"), one(VisitKind::Human), true);
    for n in 0..50 {
        let name = format!("h{n}.example");
        agg.add("x", &t, 0, host(&name), one(VisitKind::Human), true);
    }
    assert_eq!(agg.entries(), 1);
    assert_eq!(agg.dropped.load(Ordering::Relaxed), 50);
    assert_eq!(
        held_more(&agg, "x", 0),
        None,
        "refused cells left state behind"
    );
    // Counts handed over from a cached link's word are dropped visit by visit.
    let handed = ClickCounts {
        human: 150,
        head: 0,
        bot: 50,
    };
    agg.add("y", &t, 0, host("first.com"), handed, true);
    assert_eq!(agg.dropped.load(Ordering::Relaxed), 250);
    let by_tenant: u64 = agg.dropped_by_tenant().iter().map(|(_, _, n)| n).sum();
    assert_eq!(by_tenant, 250);
    // With room, a new host is held once, whatever its visits.
    let agg = Aggregator::new(8, 100);
    agg.add("x", &t, 0, host("first.com"), one(VisitKind::Human), true);
    for _ in 0..3 {
        agg.add("x", &t, 0, host("b.com"), one(VisitKind::Human), true);
    }
    agg.add("x", &t, 0, host("first.com"), one(VisitKind::Bot), true);
    assert_eq!(held_more(&agg, "x", 0), Some((1, 1)));
    assert_eq!(agg.entries(), 2);
}

#[test]
fn hosts_past_the_limit_fold_into_other_and_the_ceiling_drops() {
    let agg = Aggregator::new(8, 2);
    let t: Arc<str> = "acme".into();
    let other: Arc<str> = "globex".into();
    for name in ["a.com", "b.com", "c.com", "d.com", "a.com"] {
        agg.add("x", &t, 0, host(name), one(VisitKind::Human), true);
    }
    // Another hour has its own limit.
    agg.add("x", &t, 3600, host("c.com"), one(VisitKind::Bot), true);
    assert_eq!(agg.folded.load(Ordering::Relaxed), 2);
    assert_eq!(agg.entries(), 4);
    assert_eq!(
        agg.bytes(),
        4 * COUNTER_BYTES,
        "the gauge follows the counters"
    );
    // Half the ceiling is held, all by one tenant: its share. Its next counter is dropped,
    // another tenant's is made.
    agg.add("y", &t, 0, host("a.com"), one(VisitKind::Head), true);
    agg.add("z", &other, 0, host("a.com"), one(VisitKind::Head), true);
    assert_eq!(agg.dropped.load(Ordering::Relaxed), 1);
    assert_eq!(
        agg.dropped_by_tenant(),
        [(Arc::clone(&t), DropReason::TenantShare, 1)]
    );
    let taken = sorted_take(&agg);
    assert_eq!(agg.entries(), 0);
    assert_eq!(
        agg.bytes(),
        room(&agg),
        "only the room kept for the next interval"
    );

    let summary: Vec<(&str, i64, &str, u64)> = taken
        .iter()
        .map(|t| {
            (
                t.code.as_str(),
                t.hour,
                t.cell.referrer.stored(),
                t.counts.human + t.counts.bot + t.counts.head,
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("x", 0, "a.com", 2),
            ("x", 0, "b.com", 1),
            ("x", 0, OTHER_REFERRER, 2),
            ("x", 3600, "c.com", 1),
            ("z", 0, "a.com", 1),
        ]
    );
    let tenants: Vec<&str> = taken.iter().map(|t| &*t.tenant).collect();
    assert_eq!(tenants, ["acme", "acme", "acme", "acme", "globex"]);
    // Put back unbounded: nothing folds or drops.
    for t in taken {
        agg.add(t.code.as_str(), &t.tenant, t.hour, t.cell, t.counts, false);
    }
    assert_eq!(agg.take().len(), 5);
    assert_eq!(agg.entries(), 0);
    // After the take, the tenant holds nothing and may count again.
    agg.add("y", &t, 0, host("a.com"), one(VisitKind::Head), true);
    assert_eq!(agg.entries(), 1);
}

#[test]
fn no_tenant_fills_the_ceiling_past_its_fair_share() {
    let agg = Aggregator::new(12, 1000);
    let tenant = |name: &str| -> Arc<str> { name.into() };
    let (flood, second, third) = (tenant("flood"), tenant("second"), tenant("third"));
    let fill = |t: &Arc<str>, n: usize| {
        for i in 0..n {
            agg.add(
                &format!("{t}{i}"),
                t,
                0,
                host("a.com"),
                one(VisitKind::Human),
                true,
            );
        }
    };
    // Alone, a tenant takes half the ceiling.
    fill(&flood, 100);
    assert_eq!(agg.entries(), 6);
    // With two holding counters, a share is 12 / 3 = 4: the second tenant gets its four.
    fill(&second, 10);
    assert_eq!(agg.entries(), 10);
    // A third comes in under its share (12 / 4 = 3), until the ceiling.
    fill(&third, 10);
    assert_eq!(agg.entries(), 12);
    assert_eq!(
        agg.dropped_by_tenant(),
        [
            (Arc::clone(&flood), DropReason::TenantShare, 94),
            (Arc::clone(&second), DropReason::TenantShare, 6),
            (Arc::clone(&third), DropReason::Full, 8),
        ]
    );
    assert_eq!(agg.dropped.load(Ordering::Relaxed), 108);
    let mut per_tenant: HashMap<Arc<str>, usize> = HashMap::new();
    for t in agg.take() {
        *per_tenant.entry(t.tenant).or_default() += 1;
    }
    assert_eq!(per_tenant[&flood], 6);
    assert_eq!(per_tenant[&second], 4);
    assert_eq!(per_tenant[&third], 2);
}

#[test]
fn the_first_cell_counts_its_host_and_takes_what_folds_into_it() {
    let agg = Aggregator::new(100, 1);
    let t: Arc<str> = "acme".into();
    let mobile = |name: &str| Cell {
        device: Device::Mobile,
        ..host(name)
    };
    // The first cell's host is the one allowed: the same host on another device is no
    // new host, a second host folds.
    agg.add("x", &t, 0, host("a.com"), one(VisitKind::Human), true);
    agg.add("x", &t, 0, mobile("a.com"), one(VisitKind::Human), true);
    agg.add("x", &t, 0, host("b.com"), one(VisitKind::Human), true);
    assert_eq!(agg.folded.load(Ordering::Relaxed), 1);
    // A link-hour put back with "(other)" first: a folded visit adds to it.
    let other = Cell {
        referrer: Referrer::Other,
        ..host("a.com")
    };
    agg.add("y", &t, 0, other.clone(), one(VisitKind::Bot), false);
    agg.add("y", &t, 0, host("c.com"), one(VisitKind::Human), true);
    agg.add("y", &t, 0, host("d.com"), one(VisitKind::Human), true);
    assert_eq!(agg.folded.load(Ordering::Relaxed), 2);
    assert_eq!(agg.entries(), 5);
    let taken: Vec<(&str, Cell, u64)> = sorted_take(&agg)
        .into_iter()
        .map(|t| {
            (
                if t.code.as_str() == "x" { "x" } else { "y" },
                t.cell,
                t.counts.human + t.counts.bot + t.counts.head,
            )
        })
        .collect();
    assert_eq!(
        taken,
        [
            ("x", host("a.com"), 1),
            ("x", mobile("a.com"), 1),
            ("x", other.clone(), 1),
            ("y", host("c.com"), 1),
            ("y", other, 2),
        ]
    );
}

#[test]
fn the_counters_keep_to_their_ceiling_and_so_does_their_gauge() {
    let agg = Aggregator::new(16, 2);
    let tenants: Vec<Arc<str>> = (0..40).map(|i| format!("t{i}").into()).collect();
    for (i, tenant) in tenants.iter().enumerate() {
        agg.add(
            &format!("c{i}"),
            tenant,
            0,
            host("a.com"),
            one(VisitKind::Human),
            true,
        );
    }
    assert_eq!(agg.entries(), 16, "the ceiling holds");
    assert_eq!(
        agg.bytes(),
        agg.budget().max(room(&agg)),
        "the gauge is at its bound"
    );
}

/// Counters put back after a failed flush merge into what is held and make new ones only
/// within the ceiling: visits admitted while the flush ran may have filled it again, and
/// repeated failures must not grow the counters by a ceiling each. What is refused is
/// counted as dropped.
#[test]
fn counters_put_back_keep_to_the_ceiling() {
    let agg = Aggregator::new(10, 100);
    // A tenant per link, so that no tenant's fair share is what refuses.
    let visit = |agg: &Aggregator, code: &str| {
        let tenant: Arc<str> = format!("of-{code}").into();
        agg.add(code, &tenant, 0, host("a.com"), one(VisitKind::Human), true);
    };
    for round in 0..3 {
        for n in 0..10 {
            visit(&agg, &format!("r{round}-{n}"));
        }
        // A flush takes everything; while it runs, ten new links are visited, and one held
        // link once more.
        let taken = agg.take();
        assert_eq!(taken.len(), 10);
        for n in 0..9 {
            visit(&agg, &format!("during{round}-{n}"));
        }
        visit(&agg, &format!("r{round}-0"));
        // The flush fails: what it took is put back.
        for t in taken {
            agg.add(t.code.as_str(), &t.tenant, t.hour, t.cell, t.counts, false);
        }
        assert_eq!(agg.entries(), 10, "round {round}: the ceiling holds");
        assert_eq!(agg.bytes(), agg.budget().max(room(&agg)), "round {round}");
        let _ = agg.take();
    }
    // Each round: r-0 merged into the counter its new visit made, nine refused.
    assert_eq!(agg.dropped.load(Ordering::Relaxed), 3 * 9);
    // Put back below the ceiling, everything is kept.
    let agg = Aggregator::new(10, 100);
    visit(&agg, "a");
    let taken = agg.take();
    visit(&agg, "a");
    for t in taken {
        agg.add(t.code.as_str(), &t.tenant, t.hour, t.cell, t.counts, false);
    }
    let again = agg.take();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].counts.human, 2);
    assert_eq!(agg.dropped.load(Ordering::Relaxed), 0);
}

/// A counter whose referrer host is longer than the estimate allows for counts as two, so
/// that counters with long hosts (up to 253 bytes) keep to the same byte budget: the gauge
/// stays at or under it, and a take gives every unit back.
#[test]
fn long_referrer_hosts_count_as_more_counters() {
    let agg = Aggregator::new(10, 100);
    let long = |n: usize| host(&format!("{n}{}.example", "h".repeat(240)));
    for n in 0..10 {
        let tenant: Arc<str> = format!("t{n}").into();
        agg.add(
            &format!("c{n}"),
            &tenant,
            0,
            long(n),
            one(VisitKind::Human),
            true,
        );
    }
    assert_eq!(agg.entries(), 10, "five counters of two units each");
    assert_eq!(agg.dropped.load(Ordering::Relaxed), 5);
    let held_bytes = 5 * (COUNTER_BYTES - HOST_BYTES as u64 + 253);
    assert!(
        held_bytes <= agg.budget(),
        "{held_bytes} past {}",
        agg.budget()
    );
    // A further cell with a long host in a held link-hour counts two as well.
    let agg = Aggregator::new(10, 100);
    let t: Arc<str> = "acme".into();
    agg.add("x", &t, 0, host("a.com"), one(VisitKind::Human), true);
    agg.add("x", &t, 0, long(1), one(VisitKind::Human), true);
    assert_eq!(agg.entries(), 3);
    let taken = agg.take();
    assert_eq!(taken.len(), 2);
    assert_eq!(agg.entries(), 0, "every unit given back");
    // Short hosts are one unit each, as before.
    agg.add("y", &t, 0, host("b.com"), one(VisitKind::Human), true);
    assert_eq!(agg.entries(), 1);
}

/// A link-hour whose key is too long to be held inline (a branded host and alias) counts its
/// key's heap bytes as further counters, and a take gives them back.
#[test]
fn long_link_keys_count_as_more_counters() {
    let agg = Aggregator::new(100, 100);
    let t: Arc<str> = "acme".into();
    let key = format!("go.{}.example/{}", "b".repeat(60), "a".repeat(220));
    let extra = CompactCode::new(&key)
        .heap_bytes()
        .div_ceil(COUNTER_BYTES as usize);
    assert!(extra >= 1, "the key is held on the heap");
    agg.add(&key, &t, 0, host("a.com"), one(VisitKind::Human), true);
    assert_eq!(agg.entries(), 1 + extra);
    agg.add(&key, &t, 0, host("b.com"), one(VisitKind::Human), true);
    assert_eq!(
        agg.entries(),
        2 + extra,
        "the key is counted once per link-hour"
    );
    agg.add("short", &t, 0, host("a.com"), one(VisitKind::Human), true);
    assert_eq!(agg.entries(), 3 + extra, "an inline key costs nothing more");
    assert_eq!(agg.take().len(), 3);
    assert_eq!(agg.entries(), 0, "every unit given back");
    // At the ceiling, the key's units are refused with the counter.
    let agg = Aggregator::new(extra, 100);
    agg.add(&key, &t, 0, host("a.com"), one(VisitKind::Human), true);
    assert_eq!(agg.entries(), 0);
    assert_eq!(agg.dropped.load(Ordering::Relaxed), 1);
}

/// A take keeps room in the tables for as many counters as it took (the next interval has
/// about as many), counted by the gauge while it is kept, and a take after a quiet interval
/// lets go of what a burst grew them to.
#[test]
fn a_take_keeps_room_for_the_next_interval_and_a_quiet_one_lets_it_go() {
    let agg = Aggregator::new(10_000, 2);
    let t: Arc<str> = "acme".into();
    let slots = |agg: &Aggregator| -> usize {
        agg.shards
            .iter()
            .map(|s| s.lock().expect("shard").capacity())
            .sum()
    };
    for n in 0..2000 {
        agg.add(
            &format!("b{n}"),
            &t,
            0,
            host("a.com"),
            one(VisitKind::Human),
            true,
        );
    }
    let burst = slots(&agg);
    assert_eq!(agg.take().len(), 2000);
    assert_eq!(agg.entries(), 0);
    assert!(
        slots(&agg) >= 2000,
        "room kept for as many: {}",
        slots(&agg)
    );
    assert_eq!(
        agg.bytes(),
        slots(&agg) as u64 * SLOT_BYTES,
        "the gauge counts the room"
    );
    assert!(agg.bytes() <= agg.budget());
    assert!(agg.take().is_empty());
    assert!(
        slots(&agg) < burst / 10,
        "a quiet take lets the room go: {} of {burst}",
        slots(&agg)
    );
}

/// What the shards' tables hold, counted in slots (a few tables' smallest size is more than a
/// ceiling of ten counters costs).
fn room(agg: &Aggregator) -> u64 {
    let slots: usize = agg
        .shards
        .iter()
        .map(|s| s.lock().expect("shard").capacity())
        .sum();
    slots as u64 * SLOT_BYTES
}
