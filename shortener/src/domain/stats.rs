//! Click statistics: what a stats request asks for (a checked time range, its granularity, and
//! whose links), the dimensions a visit is counted under, and what comes back.

use super::{ClickCounts, Error, echo};
use chrono::{DateTime, Utc};

/// Seconds in an hour and in a day: rollup buckets start at multiples of these (UTC).
pub const HOUR: i64 = 3600;
/// See [`HOUR`].
pub const DAY: i64 = 86_400;

/// How many entries each top list (referrers, devices, countries, links) holds at most, unless
/// the request asks for fewer or more (up to [`MAX_TOP`]).
pub const DEFAULT_TOP: usize = 10;
/// The longest top list a request may ask for.
pub const MAX_TOP: usize = 100;

/// The most points one stats query reads (hourly points over eleven years, daily ones over
/// far longer): a query past it is refused, so no request walks every row ever kept.
pub const MAX_POINTS: i64 = 100_000;

/// The referrer host that stands for every host past a link's per-hour limit.
pub const OTHER_REFERRER: &str = "(other)";

/// The width of one point of a series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Granularity {
    /// One point per hour (days already compacted show as one point at their start).
    Hour,
    /// One point per UTC day.
    Day,
}

impl Granularity {
    /// The bucket width in seconds.
    pub fn seconds(self) -> i64 {
        match self {
            Granularity::Hour => HOUR,
            Granularity::Day => DAY,
        }
    }

    /// `hour` or `day`.
    pub fn parse(text: &str) -> Result<Self, Error> {
        match text {
            "hour" => Ok(Granularity::Hour),
            "day" => Ok(Granularity::Day),
            other => Err(Error::bad_request(
                "invalid_granularity",
                format!("granularity must be hour or day, not {}", echo(other)),
            )),
        }
    }
}

/// The device class of a visit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Device {
    /// A desktop or laptop browser.
    Desktop,
    /// A phone.
    Mobile,
    /// A tablet.
    Tablet,
    /// A crawler or link-preview fetcher.
    Bot,
    /// Anything else (an appliance, an unknown agent, none at all).
    Other,
}

impl Device {
    /// The class's name on the wire and in the store.
    pub fn name(self) -> &'static str {
        match self {
            Device::Desktop => "desktop",
            Device::Mobile => "mobile",
            Device::Tablet => "tablet",
            Device::Bot => "bot",
            Device::Other => "other",
        }
    }
}

/// Which of a link's targets a visit was sent to: a dimension of the per-link rollups, so a
/// split (or a rule) can be judged. Indexes are positions in the link's `rules` and `variants`
/// as they were when the visit was made (an edit that reorders them starts new rows).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Route {
    /// The link's own URL (every visit of a link that does not route).
    #[default]
    Url,
    /// The rule at this index.
    Rule(u8),
    /// Variant `.1` of the split of the rule at index `.0`.
    RuleVariant(u8, u8),
    /// The iOS app target.
    Ios,
    /// The Android app target.
    Android,
    /// Variant at this index of the link's split.
    Variant(u8),
}

impl Route {
    /// The route as stored and answered: `url` (stored empty), `rules[2]`,
    /// `rules[2].variants[1]`, `ios`, `android`, `variants[1]`.
    pub fn stored(self) -> std::borrow::Cow<'static, str> {
        use std::borrow::Cow;
        match self {
            Route::Url => Cow::Borrowed(""),
            Route::Rule(i) => Cow::Owned(format!("rules[{i}]")),
            Route::RuleVariant(i, v) => Cow::Owned(format!("rules[{i}].variants[{v}]")),
            Route::Ios => Cow::Borrowed("ios"),
            Route::Android => Cow::Borrowed("android"),
            Route::Variant(v) => Cow::Owned(format!("variants[{v}]")),
        }
    }

    /// The name of a stored route on the wire: `url` for the empty one.
    pub fn shown(stored: &str) -> &str {
        if stored.is_empty() { "url" } else { stored }
    }
}

/// Whose clicks a stats request counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatsScope {
    /// One link.
    Link(String),
    /// The links of a tenant (every tenant's for `None`), or only those carrying `tag`.
    Links {
        /// The tenant; `None` for an admin's view of every tenant.
        tenant: Option<String>,
        /// Only links with this tag.
        tag: Option<String>,
    },
}

/// The query parameters of a stats request, as the transport read them.
#[derive(Debug, Clone, Default)]
pub struct StatsInput {
    /// RFC 3339 start (inclusive); default: 30 days before `to`, no earlier than retention.
    pub from: Option<String>,
    /// RFC 3339 end (exclusive); default: now.
    pub to: Option<String>,
    /// `hour` or `day` (default).
    pub granularity: Option<String>,
    /// Length of each top list.
    pub top: Option<usize>,
}

/// A checked stats request: buckets starting in `[start, end)` (Unix seconds), `start`
/// aligned to the granularity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatsQuery {
    /// Whose clicks.
    pub scope: StatsScope,
    /// The first bucket counted.
    pub start: i64,
    /// Buckets from here on are not counted.
    pub end: i64,
    /// Point width of the series.
    pub granularity: Granularity,
    /// Length of each top list.
    pub top: usize,
}

fn parse_time(name: &str, text: &str) -> Result<DateTime<Utc>, Error> {
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.to_utc())
        .map_err(|_| {
            Error::bad_request(
                "invalid_time",
                format!(
                    "{name} must be an RFC 3339 time such as 2026-01-31T00:00:00Z, not {}",
                    echo(text)
                ),
            )
        })
}

impl StatsInput {
    /// Checks the request at `now`, with rollups kept `retention_days` (0: forever): a time
    /// that is not RFC 3339, `from` not before `to`, `from` before the oldest rollup kept, or
    /// an unknown granularity are refused with [`Error::BadRequest`].
    pub fn parse(
        self,
        scope: StatsScope,
        now: DateTime<Utc>,
        retention_days: u32,
    ) -> Result<StatsQuery, Error> {
        let granularity = match self.granularity.as_deref() {
            None => Granularity::Day,
            Some(text) => Granularity::parse(text)?,
        };
        let top = self.top.unwrap_or(DEFAULT_TOP);
        if !(1..=MAX_TOP).contains(&top) {
            return Err(Error::bad_request(
                "invalid_query_parameter",
                format!("top must be between 1 and {MAX_TOP}, not {top}"),
            ));
        }
        let oldest =
            (retention_days > 0).then(|| now - chrono::Duration::days(i64::from(retention_days)));
        let to = match &self.to {
            Some(text) => parse_time("to", text)?,
            None => now,
        };
        let from = match &self.from {
            Some(text) => parse_time("from", text)?,
            None => {
                let month = to - chrono::Duration::days(30);
                oldest.map_or(month, |oldest| month.max(oldest))
            }
        };
        if from >= to {
            return Err(Error::bad_request(
                "invalid_range",
                format!("from ({from}) must be before to ({to})"),
            ));
        }
        if let Some(oldest) = oldest
            && from < oldest
        {
            return Err(Error::bad_request(
                "range_beyond_retention",
                format!(
                    "clicks are kept {retention_days} days: from must be no earlier than {}",
                    oldest.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                ),
            ));
        }
        let width = granularity.seconds();
        let start = from.timestamp().div_euclid(width) * width;
        let points = (to.timestamp() - start).div_euclid(width) + 1;
        if points > MAX_POINTS {
            return Err(Error::bad_request(
                "invalid_range",
                format!(
                    "the range holds {points} points of its granularity, more than the \
                     {MAX_POINTS} a query may read: narrow it, or ask for a coarser granularity"
                ),
            ));
        }
        Ok(StatsQuery {
            scope,
            start,
            end: to.timestamp(),
            granularity,
            top,
        })
    }
}

/// One point of a series: the clicks of the bucket starting at `at` (Unix seconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeriesPoint {
    /// Start of the bucket.
    pub at: i64,
    /// Its clicks.
    pub counts: ClickCounts,
}

/// What a stats request answers. Every top list is ordered by visits (human, bot and HEAD
/// together), most first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatsReport {
    /// Clicks over the whole range.
    pub totals: ClickCounts,
    /// Points with clicks, oldest first (buckets without clicks are left out).
    pub series: Vec<SeriesPoint>,
    /// Referrer hosts (`None`: no referrer; [`OTHER_REFERRER`]: the folded rest).
    pub referrers: Vec<(Option<String>, u64)>,
    /// Device classes by name.
    pub devices: Vec<(String, u64)>,
    /// ISO country codes (`None`: unknown).
    pub countries: Vec<(Option<String>, u64)>,
    /// Codes (only for a [`StatsScope::Links`] request).
    pub links: Vec<(String, u64)>,
    /// The link's targets by [`Route`] name (`url`, `rules[2]`, `variants[1]`, ...; only for a
    /// [`StatsScope::Link`] request).
    pub routes: Vec<(String, u64)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> DateTime<Utc> {
        parse_time("now", "2026-06-15T12:34:56Z").expect("time")
    }

    fn input(from: Option<&str>, to: Option<&str>, granularity: Option<&str>) -> StatsInput {
        StatsInput {
            from: from.map(str::to_string),
            to: to.map(str::to_string),
            granularity: granularity.map(str::to_string),
            top: None,
        }
    }

    fn parse(input: StatsInput) -> Result<StatsQuery, Error> {
        input.parse(StatsScope::Link("abc".into()), now(), 400)
    }

    #[test]
    fn a_range_is_aligned_to_its_granularity_and_defaults_to_thirty_days() {
        let q = parse(input(
            Some("2026-06-14T10:30:00Z"),
            Some("2026-06-15T00:00:00+02:00"),
            Some("hour"),
        ))
        .expect("valid");
        assert_eq!(q.start % HOUR, 0);
        assert_eq!(
            q.start,
            now().timestamp() - now().timestamp() % DAY - DAY + 10 * HOUR
        );
        assert_eq!(
            q.end,
            now().timestamp() - now().timestamp() % DAY - 2 * HOUR
        );
        let q = parse(input(None, None, None)).expect("defaults");
        assert_eq!(q.granularity, Granularity::Day);
        assert_eq!(q.end, now().timestamp());
        assert_eq!(q.start % DAY, 0);
        assert_eq!(q.end - q.start, 30 * DAY + now().timestamp() % DAY);
    }

    #[test]
    fn bad_ranges_and_granularities_are_refused_with_their_reason() {
        let cases = [
            (input(Some("yesterday"), None, None), "invalid_time"),
            (
                input(None, Some("2026-13-01T00:00:00Z"), None),
                "invalid_time",
            ),
            (
                input(
                    Some("2026-06-15T00:00:00Z"),
                    Some("2026-06-14T00:00:00Z"),
                    None,
                ),
                "invalid_range",
            ),
            (
                input(
                    Some("2026-06-14T00:00:00Z"),
                    Some("2026-06-14T00:00:00Z"),
                    None,
                ),
                "invalid_range",
            ),
            (
                input(Some("2024-01-01T00:00:00Z"), None, None),
                "range_beyond_retention",
            ),
            (input(None, None, Some("minute")), "invalid_granularity"),
        ];
        for (input, code) in cases {
            let error = parse(input.clone()).expect_err(code);
            assert_eq!(error.code(), code, "{input:?}: {error}");
        }
        // Retention 0 keeps everything, but a query reads a bounded number of points.
        let old = input(Some("2001-01-01T00:00:00Z"), None, None);
        assert!(old.parse(StatsScope::Link("a".into()), now(), 0).is_ok());
        let hourly = input(Some("2001-01-01T00:00:00Z"), None, Some("hour"));
        let error = hourly
            .parse(StatsScope::Link("a".into()), now(), 0)
            .expect_err("25 years of hours");
        assert_eq!(error.code(), "invalid_range", "{error}");
        let ages = input(
            Some("0001-01-01T00:00:00Z"),
            Some("9999-12-31T00:00:00Z"),
            None,
        );
        let error = ages
            .parse(StatsScope::Link("a".into()), now(), 0)
            .expect_err("ten thousand years of days");
        assert_eq!(error.code(), "invalid_range", "{error}");
    }
}
