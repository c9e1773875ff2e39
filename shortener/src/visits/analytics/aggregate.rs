//! The in-memory counters of visits not yet flushed, keyed by (code, hour, referrer, device,
//! country), with bounded memory.
//!
//! Two bounds keep memory flat whatever the traffic: past `referrers_per_hour` distinct
//! referrer hosts, a link's further hosts in that hour fold into [`OTHER_REFERRER`] (counted
//! as folded); past `max_entries` counters in all, a visit that needs a new one is not
//! counted in the rollups (counted as dropped; the link's totals still count it). Like the
//! click counts, the map is split into independently locked shards by code, and a flush
//! swaps each shard out under its lock.
//!
//! The ceiling is shared fairly between tenants, so one tenant's flood (of random referrers,
//! say) cannot leave another's visits out: while fewer than half of `max_entries` counters are
//! held, any visit may make one; past that, only a tenant holding less than its fair share,
//! `max_entries / (holders + 1)` where `holders` counts the tenants holding counters (itself
//! included), may make another, up to the ceiling. One tenant alone thus takes at most half,
//! and the other half stays for the tenants that come after it; each drop is counted for its
//! tenant with its reason ([`DropReason`]) and logged once per tenant between flushes.

use crate::domain::stats::OTHER_REFERRER;
use crate::domain::{ClickCounts, CompactCode, Device, Route};
use crate::visits::VisitKind;
use std::collections::{HashMap, HashSet};
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

const SHARDS: usize = 16;

/// Who sent a visit.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Referrer {
    /// No (usable) `Referer`.
    None,
    /// A host.
    Host(Box<str>),
    /// The hosts past the per-link, per-hour limit.
    Other,
}

impl Referrer {
    /// The stored form: empty for none.
    pub fn stored(&self) -> &str {
        match self {
            Referrer::None => "",
            Referrer::Host(host) => host,
            Referrer::Other => OTHER_REFERRER,
        }
    }
}

/// One counter's dimensions within a link's hour.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Cell {
    /// Who sent the visit.
    pub referrer: Referrer,
    /// The device class.
    pub device: Device,
    /// The country, if known.
    pub country: Option<[u8; 2]>,
    /// Which of the link's targets the visit went to.
    pub route: Route,
}

/// A link's counters of one hour, with its tenant (so a flush needs no lookup). The first cell
/// is held inline: most link-hours see one referrer, device and country, and their visits
/// are then counted without a second table or an allocation.
#[derive(Debug)]
struct LinkHour {
    tenant: Arc<str>,
    first: (Cell, ClickCounts),
    /// The cells after the first, once there are any.
    more: Option<Box<MoreCells>>,
}

/// A link-hour's cells after the first.
#[derive(Debug, Default)]
struct MoreCells {
    cells: HashMap<Cell, ClickCounts, Fast>,
    /// Distinct hosts among these cells' referrers that the first cell's is not (not counting
    /// none and other), by their hash: the host itself is in its cells already.
    hosts: HashSet<u64, Fast>,
}

type Fast = foldhash::fast::RandomState;

/// One shard: the pending link-hours, keyed by code and hour, in one map whose capacity is
/// kept across flushes (a steady flow of visits to the same links allocates little).
type Shard = HashMap<(CompactCode, i64), LinkHour, Fast>;

/// One taken counter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taken {
    /// The link.
    pub code: CompactCode,
    /// The start of the hour, Unix seconds.
    pub hour: i64,
    /// The dimensions.
    pub cell: Cell,
    /// The visits counted.
    pub counts: ClickCounts,
    /// The link's tenant.
    pub tenant: Arc<str>,
}

/// Why a visit was left out of the rollups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DropReason {
    /// Its tenant held its fair share of a ceiling more than half full.
    TenantShare,
    /// The ceiling was reached.
    Full,
}

impl DropReason {
    /// The reason's label in metrics and logs.
    pub fn label(self) -> &'static str {
        match self {
            DropReason::TenantShare => "tenant_share",
            DropReason::Full => "full",
        }
    }
}

/// Who holds the counters, and whose visits were dropped.
#[derive(Debug, Default)]
struct Tenants {
    /// Counters held per tenant (tenants holding none are not kept).
    held: HashMap<Arc<str>, usize, Fast>,
    /// Visits dropped per tenant and reason since the start (as many tenants as the keys name).
    dropped: HashMap<(Arc<str>, DropReason), u64, Fast>,
    /// Tenants whose drops were logged since the last take.
    logged: HashSet<Arc<str>, Fast>,
}

/// What one counter costs, estimated: a link-hour's slot in its shard (code inline, hour,
/// tenant, the first cell inline, one control byte), doubled for the free slots a hash table
/// keeps; the same slot in a link-hour's further cells when there are several is smaller, so
/// one figure serves both; plus a referrer host's allocation of up to [`HOST_BYTES`] (most are
/// shorter; a longer one is counted as more counters, [`units`]).
pub const COUNTER_BYTES: u64 =
    2 * (std::mem::size_of::<((CompactCode, i64), LinkHour)>() as u64 + 1) + HOST_BYTES as u64;

/// One link-hour's slot in its shard's table (and a control byte).
const SLOT_BYTES: u64 = std::mem::size_of::<((CompactCode, i64), LinkHour)>() as u64 + 1;

/// The referrer host bytes [`COUNTER_BYTES`] includes.
pub(super) const HOST_BYTES: usize = 32;

/// How many counters' worth of memory a counter of `cell` holds: one, and as many more as its
/// referrer host's bytes past [`HOST_BYTES`] fill (a host of up to 253 bytes is two), so that
/// counters with long hosts keep to the same byte budget as the rest.
fn units(cell: &Cell) -> usize {
    match &cell.referrer {
        Referrer::Host(host) if host.len() > HOST_BYTES => {
            1 + (host.len() - HOST_BYTES).div_ceil(COUNTER_BYTES as usize)
        }
        _ => 1,
    }
}

/// Counters' worth of memory a link-hour's key holds beyond its slot: none inline, else as many
/// as its heap bytes fill (a branded host and alias), so long keys keep to the byte budget.
fn code_units(code: &CompactCode) -> usize {
    code.heap_bytes().div_ceil(COUNTER_BYTES as usize)
}

/// The aggregator.
pub struct Aggregator {
    shards: [Mutex<Shard>; SHARDS],
    max_entries: usize,
    referrers_per_hour: usize,
    /// Taken after a shard's lock, never before it.
    tenants: Mutex<Tenants>,
    entries: AtomicUsize,
    /// Visits whose referrer was folded into [`OTHER_REFERRER`].
    pub folded: AtomicU64,
    /// Visits not counted in the rollups because the aggregator was full (or their tenant held
    /// its share of it): every tenant's, as [`Aggregator::dropped_by_tenant`] tells them apart.
    pub dropped: AtomicU64,
}

fn add(counts: &mut ClickCounts, more: ClickCounts) {
    *counts += more;
}

/// How many visits `counts` counts (one for a single visit; more for the counts a cached
/// link's word hands over).
fn visits(counts: ClickCounts) -> u64 {
    counts.human + counts.head + counts.bot
}

/// The counts of one visit.
pub fn one(kind: VisitKind) -> ClickCounts {
    let mut counts = ClickCounts::default();
    match kind {
        VisitKind::Human => counts.human = 1,
        VisitKind::Head => counts.head = 1,
        VisitKind::Bot => counts.bot = 1,
    }
    counts
}

impl Aggregator {
    /// An empty aggregator holding at most `max_entries` counters, and at most
    /// `referrers_per_hour` distinct referrer hosts per link and hour.
    pub fn new(max_entries: usize, referrers_per_hour: usize) -> Self {
        Self {
            shards: Default::default(),
            max_entries,
            referrers_per_hour,
            tenants: Mutex::default(),
            entries: AtomicUsize::new(0),
            folded: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        }
    }

    /// Counters held now, each counted in [`units`] (one, or two for a long referrer host).
    pub fn entries(&self) -> usize {
        self.entries.load(Ordering::Relaxed)
    }

    /// Bytes the counters hold now, estimated: [`COUNTER_BYTES`] each, or what the shards'
    /// tables hold when more (the room a take keeps for the next interval's counters).
    pub fn bytes(&self) -> u64 {
        let slots: usize = self
            .shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(|p| p.into_inner()).capacity())
            .sum();
        (self.entries() as u64 * COUNTER_BYTES).max(slots as u64 * SLOT_BYTES)
    }

    /// [`Aggregator::bytes`] at the ceiling (`max_entries`).
    pub fn budget(&self) -> u64 {
        self.max_entries as u64 * COUNTER_BYTES
    }

    /// Visits dropped since the start, per tenant and reason, sorted (for metrics).
    pub fn dropped_by_tenant(&self) -> Vec<(Arc<str>, DropReason, u64)> {
        let tenants = self.tenants.lock().unwrap_or_else(|p| p.into_inner());
        let mut dropped: Vec<_> = tenants
            .dropped
            .iter()
            .map(|((tenant, reason), n)| (Arc::clone(tenant), *reason, *n))
            .collect();
        dropped.sort_unstable();
        dropped
    }

    fn shard(&self, code: &str) -> &Mutex<Shard> {
        let first = code.as_bytes().first().copied().unwrap_or(0);
        &self.shards[usize::from(first) % SHARDS]
    }

    /// Counts `counts` under (`code`, `hour`, `cell`) for the link's `tenant`. With `bounded`,
    /// the referrer limit, the tenant's fair share and the ceiling apply (a visit); without,
    /// only the ceiling does (counts put back after a failed flush, which passed the rest when
    /// they came: the visits admitted while the flush ran may have filled the ceiling again,
    /// and repeated failures would otherwise grow the counters by a ceiling each).
    pub fn add(
        &self,
        code: &str,
        tenant: &Arc<str>,
        hour: i64,
        cell: Cell,
        counts: ClickCounts,
        bounded: bool,
    ) {
        let key = (CompactCode::new(code), hour);
        let mut shard = self.shard(code).lock().unwrap_or_else(|p| p.into_inner());
        if let Some(link_hour) = shard.get_mut(&key) {
            if link_hour.first.0 == cell {
                add(&mut link_hour.first.1, counts);
            } else {
                self.add_more(link_hour, cell, counts, bounded);
            }
            return;
        }
        // A link-hour's first cell: its referrer is the first host, within any limit.
        let held = units(&cell) + code_units(&key.0);
        if !self.admit(tenant, bounded, visits(counts), held) {
            return;
        }
        shard.insert(
            key,
            LinkHour {
                tenant: Arc::clone(tenant),
                first: (cell, counts),
                more: None,
            },
        );
    }

    /// Whether `tenant` may make a new counter of `units` ([`units`]), counting it if so (or
    /// its `visits` as dropped): within the ceiling and, with `bounded`, past half of it,
    /// within the tenant's fair share.
    fn admit(&self, tenant: &Arc<str>, bounded: bool, visits: u64, units: usize) -> bool {
        let mut tenants = self.tenants.lock().unwrap_or_else(|p| p.into_inner());
        let entries = self.entries.load(Ordering::Relaxed);
        let held = tenants.held.get(tenant).copied().unwrap_or(0);
        let refused = if entries + units > self.max_entries {
            Some(DropReason::Full)
        } else if !bounded {
            None
        } else if entries * 2 >= self.max_entries {
            let holders = tenants.held.len() + usize::from(held == 0);
            let share = (self.max_entries / (holders + 1)).max(1);
            (held >= share).then_some(DropReason::TenantShare)
        } else {
            None
        };
        let Some(reason) = refused else {
            *tenants.held.entry(Arc::clone(tenant)).or_default() += units;
            self.entries.fetch_add(units, Ordering::Relaxed);
            return true;
        };
        self.dropped.fetch_add(visits, Ordering::Relaxed);
        *tenants
            .dropped
            .entry((Arc::clone(tenant), reason))
            .or_default() += visits;
        let first = tenants.logged.insert(Arc::clone(tenant));
        drop(tenants);
        if first {
            tracing::warn!(
                tenant = %tenant,
                reason = reason.label(),
                entries,
                max_entries = self.max_entries,
                "analytics counters full for this tenant: its new counters are left out of the rollups until the next flush (link totals still count every visit)"
            );
        }
        false
    }

    /// Counts into a link-hour a cell other than its first. A cell the ceiling refuses leaves
    /// nothing behind (no box, no host), so what is held is what [`Aggregator::bytes`] counts.
    fn add_more(
        &self,
        link_hour: &mut LinkHour,
        mut cell: Cell,
        counts: ClickCounts,
        bounded: bool,
    ) {
        if let Some(existing) = link_hour.more.as_mut().and_then(|m| m.cells.get_mut(&cell)) {
            add(existing, counts);
            return;
        }
        // A new cell: its referrer host is a new one of the hour unless the first cell's or
        // another cell's is the same.
        let mut new_host = None;
        if let Referrer::Host(host) = &cell.referrer {
            let first_host = match &link_hour.first.0.referrer {
                Referrer::Host(first) => Some(first),
                _ => None,
            };
            let known = link_hour
                .more
                .as_ref()
                .map(|m| (m.hosts.hasher().hash_one(host), m));
            let seen = known.is_some_and(|(hash, m)| m.hosts.contains(&hash));
            if first_host != Some(host) && !seen {
                let held = link_hour.more.as_ref().map_or(0, |m| m.hosts.len());
                if bounded && held + usize::from(first_host.is_some()) >= self.referrers_per_hour {
                    cell.referrer = Referrer::Other;
                    self.folded.fetch_add(1, Ordering::Relaxed);
                } else {
                    new_host = Some(host.clone());
                }
            }
        }
        // A folded referrer may have made it the first cell, or one already held.
        if link_hour.first.0 == cell {
            add(&mut link_hour.first.1, counts);
            return;
        }
        if let Some(existing) = link_hour.more.as_mut().and_then(|m| m.cells.get_mut(&cell)) {
            add(existing, counts);
            return;
        }
        if !self.admit(&link_hour.tenant, bounded, visits(counts), units(&cell)) {
            return;
        }
        let more = link_hour.more.get_or_insert_with(Box::default);
        if let Some(host) = new_host {
            let hash = more.hosts.hasher().hash_one(&host);
            more.hosts.insert(hash);
        }
        more.cells.insert(cell, counts);
    }

    /// Takes every pending counter, in no particular order (the flush sorts them, off the
    /// thread that serves requests).
    pub fn take(&self) -> Vec<Taken> {
        let mut taken = Vec::with_capacity(self.entries());
        for shard in &self.shards {
            let mut shard = shard.lock().unwrap_or_else(|p| p.into_inner());
            let mut units_taken = 0;
            let mut released: HashMap<Arc<str>, usize, Fast> = HashMap::default();
            let drained = shard.len();
            for ((code, hour), link_hour) in shard.drain() {
                let LinkHour {
                    tenant,
                    first,
                    more,
                } = link_hour;
                let more = more.map(|more| more.cells).unwrap_or_default();
                let held =
                    code_units(&code) + units(&first.0) + more.keys().map(units).sum::<usize>();
                units_taken += held;
                *released.entry(Arc::clone(&tenant)).or_default() += held;
                taken.extend(
                    std::iter::once(first)
                        .chain(more)
                        .map(|(cell, counts)| Taken {
                            code: code.clone(),
                            hour,
                            cell,
                            counts,
                            tenant: Arc::clone(&tenant),
                        }),
                );
            }
            let mut tenants = self.tenants.lock().unwrap_or_else(|p| p.into_inner());
            for (tenant, n) in released {
                if let Some(held) = tenants.held.get_mut(&tenant) {
                    *held = held.saturating_sub(n);
                    if *held == 0 {
                        tenants.held.remove(&tenant);
                    }
                }
            }
            self.entries.fetch_sub(units_taken, Ordering::Relaxed);
            // A drained table keeps its slots: room for as many as were taken stays (the next
            // interval has about as many, and a table growing from nothing rehashes as visits
            // are counted), what a burst grew it past goes.
            shard.shrink_to(drained);
        }
        self.tenants
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .logged
            .clear();
        taken
    }
}

#[cfg(test)]
mod tests;
