//! Visits: what a served redirect (or a protected link's right password) counts, kept off
//! the redirect path.
//!
//! The transport builds a plain [`Visit`] (method, `User-Agent`, `Referer`, client address:
//! no transport types), [`Visit::classify`] sorts it once ([`classify`]: a person's, a HEAD
//! request or a bot's; device, referrer host and country for the rollups), and
//! [`Visits::record`] counts it in both accumulators, which keep different promises:
//!
//! - [`clicks`]: the exact totals of each link; they never drop a visit.
//! - [`analytics`]: the rollups by hour, referrer, device and country; at their ceiling they
//!   drop visits, counted per tenant (the totals still count them).
//!
//! Neither writes per visit: one schedule ([`Visits::run`]) flushes each at its own interval
//! and both once more at stop, and runs the rollups' maintenance. Each accumulator reports
//! its own metrics ([`Sample`]).

pub mod analytics;
pub mod classify;
pub mod clicks;
mod schedule;

pub use classify::VisitKind;
pub use schedule::Schedule;

use crate::clock::Clock;
use crate::metrics::{Sample, Samples};
use analytics::{Analytics, AnalyticsSettings, GeoIp};
use clicks::ClickRecorder;
use std::net::IpAddr;
use std::sync::Arc;

/// One visit as the transport saw it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Visit<'a> {
    /// A HEAD request (counted apart from people and bots).
    pub head: bool,
    /// The `User-Agent`, if it is text.
    pub user_agent: Option<&'a str>,
    /// The `Referer`, if it is text.
    pub referrer: Option<&'a str>,
    /// The client address; the transport finds it only when [`Visits::locates_clients`]
    /// (it is looked up for a country and dropped, never kept).
    pub client: Option<IpAddr>,
    /// Which of the link's targets the visit was sent to.
    pub route: crate::domain::Route,
    /// The user agent's profile, when routing read it already (so it is not looked up again).
    pub profile: Option<classify::AgentProfile>,
}

impl<'a> Visit<'a> {
    /// The visit with its kind, classified once for the link's visit limit and both counts.
    pub fn classify(self) -> Classified<'a> {
        Classified {
            kind: classify::kind(self.head, self.user_agent),
            visit: self,
        }
    }
}

/// A [`Visit`] with its kind.
#[derive(Debug, Clone, Copy)]
pub struct Classified<'a> {
    visit: Visit<'a>,
    kind: VisitKind,
}

impl Classified<'_> {
    /// What kind of visit it is.
    pub fn kind(&self) -> VisitKind {
        self.kind
    }
}

/// The node's visit counts: the exact totals and the rollups.
pub struct Visits {
    clicks: ClickRecorder,
    analytics: Arc<Analytics>,
}

impl Visits {
    /// Visit counting with analytics as `settings` say, countries from `geo` if given, on
    /// `clock`; the totals flush early past `max_pending_clicks` codes.
    pub fn new(
        settings: AnalyticsSettings,
        geo: Option<Arc<GeoIp>>,
        clock: Clock,
        max_pending_clicks: usize,
    ) -> Self {
        Self {
            clicks: ClickRecorder::new(max_pending_clicks),
            analytics: Arc::new(Analytics::new(settings, geo, clock)),
        }
    }

    /// Counts one visit of `code`, a link of `tenant`: in the totals always, in the rollups
    /// when analytics are on (and their ceiling allows).
    pub fn record(&self, code: &str, tenant: &Arc<str>, visit: &Classified<'_>) {
        self.clicks.record(code, visit.kind);
        self.analytics
            .record(code, tenant, &visit.visit, visit.kind);
    }

    /// Counts one visit as [`Visits::record`] does, its total held by `holder` (listed in
    /// `held` until a flush takes it) rather than in the recorder's map by code, and its
    /// rollup count there too while the holder's word is of the visit's cell
    /// ([`clicks::PendingClicks`]).
    pub fn record_held<H: clicks::Holder>(
        &self,
        held: &clicks::HeldClicks<H>,
        holder: &H,
        code: &str,
        tenant: &Arc<str>,
        visit: &Classified<'_>,
    ) {
        let prepared = self.analytics.prepare(&visit.visit, visit.kind);
        let tagged = prepared.as_ref().and_then(|p| p.tag);
        let recorded = held.record(&self.clicks, code, holder, (visit.kind, tagged));
        if let Some(rollups) = recorded.rollups {
            self.analytics.add_taken(code, tenant, rollups);
        }
        if let Some(prepared) = prepared.filter(|_| !recorded.held) {
            self.analytics
                .count_prepared(code, tenant, prepared, visit.kind);
        }
    }

    /// Whether a visit should carry its client address: when analytics are on and a GeoIP
    /// database is in force.
    pub fn locates_clients(&self) -> bool {
        self.analytics.locates_clients()
    }

    /// This node's human visits of `code` not yet flushed to the totals (for visit limits).
    pub fn pending_human(&self, code: &str) -> u64 {
        self.clicks.pending_human(code)
    }

    /// The exact totals.
    pub fn clicks(&self) -> &ClickRecorder {
        &self.clicks
    }

    /// The rollups, and the stats they answer.
    pub fn analytics(&self) -> &Arc<Analytics> {
        &self.analytics
    }
}

impl Sample for Visits {
    fn sample(&self, out: &mut Samples<'_, '_>) -> std::fmt::Result {
        self.analytics.sample(out)?;
        self.clicks.sample(out)
    }
}
