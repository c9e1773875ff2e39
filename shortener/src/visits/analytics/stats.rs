//! Answering stats requests ([`StatsService`], what every transport calls): the request
//! checked at the analytics clock's time against the retention, the caller's right to the link
//! checked by the link service (another tenant's code is not found), then one read of the
//! rollups, with how far that read reaches ([`Freshness`]).

use super::Analytics;
use crate::domain::{
    Caller, Error, ShortCode, StatsInput, StatsQuery, StatsReport, StatsScope, check_tag,
};
use crate::limits::{Gate, Places};
use crate::links::LinkService;
use crate::store::{Store, VisitStore};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// How far a stats answer reaches: the rollups it was read from hold every visit this node
/// counted before `as_of`; later ones are written at the node's next flushes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Freshness {
    /// Unix second before which every visit this node counted is in the rollups: when its
    /// last complete flush began (its start until the first).
    pub as_of: i64,
    /// How often the node writes newly counted visits; `None` when analytics are off (no
    /// visit after `as_of` will be counted by this node).
    pub flush_interval: Option<Duration>,
}

impl Analytics {
    /// How far a read of the rollups made now reaches. Taken before the read, so a flush that
    /// ends during it can only make the answer hold more than it says.
    pub fn freshness(&self) -> Freshness {
        Freshness {
            as_of: self.last_flush.load(Ordering::Relaxed),
            flush_interval: self
                .settings
                .enabled
                .then_some(self.settings.flush_interval),
        }
    }

    /// The query `input` asks for over `scope`, checked at the clock's time.
    pub fn query(&self, scope: StatsScope, input: StatsInput) -> Result<StatsQuery, Error> {
        input.parse(scope, self.clock.now(), self.settings.retention_days)
    }
}

/// Stats reads at once: on the node, per tenant and per API key. A tenant's summary reads its
/// parts at once on PostgreSQL (five connections), so two per tenant leave most of the pool to
/// the others; past these a read is answered `429` (retry after a second), never queued.
pub const STATS_PLACES: Places = Places {
    per_node: std::num::NonZeroUsize::new(8).expect("not zero"),
    per_tenant: std::num::NonZeroUsize::new(2).expect("not zero"),
    per_key: std::num::NonZeroUsize::new(2).expect("not zero"),
};

/// Answers stats requests: owns the store reads they need, so a transport hands over only the
/// parsed request and its caller.
pub struct StatsService {
    analytics: Arc<Analytics>,
    links: Arc<LinkService>,
    store: Store,
    /// Places for reads running at once ([`STATS_PLACES`]): one tenant's many reads never
    /// take every connection.
    reads: Gate,
}

impl StatsService {
    /// The service reading `store`'s rollups, with `links` checking the caller's right to a
    /// link and `analytics` its clock, retention and freshness.
    pub fn new(analytics: Arc<Analytics>, links: Arc<LinkService>, store: Store) -> Self {
        Self {
            analytics,
            links,
            store,
            reads: Gate::new(STATS_PLACES, Duration::from_secs(1)),
        }
    }

    /// The analytics clock's time and the oldest time a stats request may start from (`None`:
    /// rollups are kept forever), for a transport that asks for "everything kept".
    pub fn window(
        &self,
    ) -> (
        chrono::DateTime<chrono::Utc>,
        Option<chrono::DateTime<chrono::Utc>>,
    ) {
        let now = self.analytics.clock.now();
        let days = self.analytics.settings.retention_days;
        (
            now,
            (days > 0).then(|| now - chrono::Duration::days(i64::from(days))),
        )
    }

    /// The stats of one link of the caller's tenant (any tenant's for `admin`).
    pub async fn link(
        &self,
        caller: &Caller,
        code: &ShortCode,
        input: StatsInput,
    ) -> Result<(Freshness, StatsReport), Error> {
        let query = self
            .analytics
            .query(StatsScope::Link(code.as_str().to_string()), input)?;
        let _place = self.reads.admit(caller)?;
        self.links.get(caller, code).await?;
        let freshness = self.analytics.freshness();
        let report = self.store.stats(&query).await?;
        Ok((freshness, report))
    }

    /// The stats of the caller's tenant (every tenant's for `admin`), or of its links with
    /// `tag`, with the top links.
    pub async fn tenant(
        &self,
        caller: &Caller,
        tag: Option<String>,
        input: StatsInput,
    ) -> Result<(Freshness, StatsReport), Error> {
        if let Some(tag) = &tag {
            check_tag(tag)?;
        }
        let scope = StatsScope::Links {
            tenant: caller.tenant_scope().map(str::to_string),
            tag,
        };
        let query = self.analytics.query(scope, input)?;
        let _place = self.reads.admit(caller)?;
        let freshness = self.analytics.freshness();
        let report = self.store.stats(&query).await?;
        Ok((freshness, report))
    }
}
