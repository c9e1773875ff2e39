//! A bitlink's clicks (`GET /v4/bitlinks/{id}/clicks` and `/clicks/summary`) from the stats
//! service's rollups: `unit` `hour` from hourly points (a day already compacted counts in its
//! first hour), `day` from daily ones, `week` (Monday to Sunday, UTC) and `month` (calendar
//! months, UTC) as sums of days. `minute` is refused: the node keeps no finer counts than an
//! hour, and makes none up. Clicks are GET redirects, people's and bots'; HEAD requests are
//! left out, as in the JSON API's totals of a link.

use super::links::{bitly_time, find};
use super::{Failure, Outcome};
use crate::domain::{Caller, Error, StatsInput};
use crate::http::HttpState;
use axum::http::StatusCode;
use chrono::{DateTime, Datelike, Duration, Months, TimeZone, Timelike, Utc};
use serde_json::{Value, json};

/// The most units an answer lists (`units=-1` lists the latest this many at most).
pub const MAX_UNITS: i64 = 10_000;

/// The width of one entry of `link_clicks`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    Hour,
    Day,
    Week,
    Month,
}

impl Unit {
    fn parse(text: Option<&str>) -> Result<Self, Failure> {
        let bad = |why: String| Failure::arg("INVALID_ARG_UNIT", "unit", false, why);
        match text.unwrap_or("day") {
            "hour" => Ok(Unit::Hour),
            "day" => Ok(Unit::Day),
            "week" => Ok(Unit::Week),
            "month" => Ok(Unit::Month),
            "minute" => Err(bad(
                "unit minute is not served: clicks are kept per hour at the finest".into(),
            )),
            other => Err(bad(format!(
                "unit must be hour, day, week or month, not {}",
                crate::domain::echo(other)
            ))),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Unit::Hour => "hour",
            Unit::Day => "day",
            Unit::Week => "week",
            Unit::Month => "month",
        }
    }

    /// The start of the unit holding `t`.
    fn floor(self, t: DateTime<Utc>) -> DateTime<Utc> {
        let hour = t
            .with_nanosecond(0)
            .and_then(|t| t.with_second(0))
            .and_then(|t| t.with_minute(0))
            .unwrap_or(t);
        let day = hour.with_hour(0).unwrap_or(hour);
        match self {
            Unit::Hour => hour,
            Unit::Day => day,
            Unit::Week => day - Duration::days(i64::from(day.weekday().num_days_from_monday())),
            Unit::Month => Utc
                .with_ymd_and_hms(day.year(), day.month(), 1, 0, 0, 0)
                .single()
                .unwrap_or(day),
        }
    }

    /// The start of the unit after the one starting at `start`.
    fn next(self, start: DateTime<Utc>) -> DateTime<Utc> {
        match self {
            Unit::Hour => start + Duration::hours(1),
            Unit::Day => start + Duration::days(1),
            Unit::Week => start + Duration::weeks(1),
            Unit::Month => start + Months::new(1),
        }
    }

    /// The start of the unit `n` units before the one starting at `start`.
    fn back(self, start: DateTime<Utc>, n: i64) -> DateTime<Utc> {
        match self {
            Unit::Hour => start - Duration::hours(n),
            Unit::Day => start - Duration::days(n),
            Unit::Week => start - Duration::weeks(n),
            Unit::Month => start - Months::new(u32::try_from(n).unwrap_or(u32::MAX)),
        }
    }
}

/// The query's `name`, if given.
fn param(query: Option<&str>, name: &str) -> Option<String> {
    url::form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.into_owned())
}

/// `unit_reference` as a time of the years 1 to 9999 (a four-digit ISO 8601 year): chrono
/// itself reads years past ±262,000, where stepping a unit from them would overflow.
fn parse_reference(text: &str) -> Result<DateTime<Utc>, Failure> {
    DateTime::parse_from_rfc3339(text)
        .or_else(|_| DateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S%z"))
        .map(|t| t.to_utc())
        .ok()
        .filter(|t| (1..=9999).contains(&t.year()))
        .ok_or(())
        .map_err(|()| {
            Failure::arg(
                "INVALID_ARG_UNIT_REFERENCE",
                "unit_reference",
                false,
                format!(
                    "unit_reference must be an ISO 8601 time such as 2026-01-31T00:00:00+0000, not {}",
                    crate::domain::echo(text)
                ),
            )
        })
}

fn parse_units(text: Option<&str>) -> Result<i64, Failure> {
    let Some(text) = text else { return Ok(-1) };
    match text.parse::<i64>() {
        Ok(n) if n == -1 || (1..=MAX_UNITS).contains(&n) => Ok(n),
        _ => Err(Failure::arg(
            "INVALID_ARG_UNITS",
            "units",
            false,
            format!(
                "units must be -1 (every unit kept) or 1 to {MAX_UNITS}, not {}",
                crate::domain::echo(text)
            ),
        )),
    }
}

/// `.../clicks` (`summary`: `.../clicks/summary`) of the bitlink `id`, with `unit`, `units`
/// and `unit_reference` from `query`.
pub async fn clicks(
    state: &HttpState,
    caller: &Caller,
    id: &str,
    query: Option<&str>,
    summary: bool,
) -> Outcome {
    let unit = Unit::parse(param(query, "unit").as_deref())?;
    let units = parse_units(param(query, "units").as_deref())?;
    let (now, oldest) = state.stats.window();
    let reference = match param(query, "unit_reference") {
        Some(text) => parse_reference(&text)?,
        None => now,
    };
    let (link, code) = find(state, caller, id, "bitlink").await?;
    let last = unit.floor(reference);
    let mut first = if units > 0 {
        unit.back(last, units - 1)
    } else {
        // Every unit since the link was made that the rollups still hold in full, the latest
        // MAX_UNITS at most.
        let mut first = unit.floor(link.created_at);
        if let Some(oldest) = oldest
            && first < oldest + Duration::minutes(1)
        {
            first = unit.next(unit.floor(oldest + Duration::minutes(1)));
        }
        first.max(unit.back(last, MAX_UNITS - 1))
    };
    let mut starts = Vec::new();
    while first <= last {
        starts.push(first);
        first = unit.next(first);
    }
    let counts = match (starts.first(), starts.last()) {
        (Some(&from), Some(&until)) => {
            read(state, caller, &code, unit, from, unit.next(until)).await?
        }
        _ => Vec::new(),
    };
    // Each point's clicks added to its unit once: a lookup per unit, not a pass over every
    // point for each of up to MAX_UNITS units.
    let mut by_unit: std::collections::HashMap<DateTime<Utc>, u64> =
        std::collections::HashMap::with_capacity(starts.len());
    for (at, n) in &counts {
        *by_unit.entry(unit.floor(*at)).or_default() += n;
    }
    let total = |start: DateTime<Utc>| -> u64 { by_unit.get(&start).copied().unwrap_or(0) };
    let mut body = json!({
        "units": units,
        "unit": unit.name(),
        "unit_reference": bitly_time(reference),
    });
    if summary {
        body["total_clicks"] = counts.iter().map(|(_, n)| n).sum::<u64>().into();
    } else {
        body["link_clicks"] = starts
            .iter()
            .rev()
            .map(|start| json!({ "clicks": total(*start), "date": bitly_time(*start) }))
            .collect::<Vec<Value>>()
            .into();
    }
    Ok((StatusCode::OK, body))
}

/// The link's clicks per point (hours for `hour`, else days) in `[from, to)`.
async fn read(
    state: &HttpState,
    caller: &Caller,
    code: &crate::domain::ShortCode,
    unit: Unit,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Vec<(DateTime<Utc>, u64)>, Failure> {
    let input = StatsInput {
        from: Some(from.to_rfc3339()),
        to: Some(to.to_rfc3339()),
        granularity: Some(if unit == Unit::Hour { "hour" } else { "day" }.into()),
        top: None,
    };
    let (_, report) =
        state
            .stats
            .link(caller, code, input)
            .await
            .map_err(|error| match &error {
                Error::BadRequest { .. } => {
                    Failure::arg("INVALID_ARG_UNITS", "units", false, error.public_message())
                }
                _ => Failure::of(&error, None),
            })?;
    Ok(report
        .series
        .iter()
        .filter_map(|p| {
            let at = DateTime::from_timestamp(p.at, 0)?;
            Some((at, p.counts.human.saturating_add(p.counts.bot)))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).expect("time").to_utc()
    }

    #[test]
    fn units_start_on_the_hour_day_monday_and_first_of_the_month_in_utc() {
        // A Sunday.
        let t = at("2026-03-01T17:45:12.5Z");
        assert_eq!(Unit::Hour.floor(t), at("2026-03-01T17:00:00Z"));
        assert_eq!(Unit::Day.floor(t), at("2026-03-01T00:00:00Z"));
        assert_eq!(Unit::Week.floor(t), at("2026-02-23T00:00:00Z"));
        assert_eq!(Unit::Month.floor(t), at("2026-03-01T00:00:00Z"));
        assert_eq!(
            Unit::Month.back(at("2026-02-01T00:00:00Z"), 2),
            at("2025-12-01T00:00:00Z")
        );
        assert_eq!(
            Unit::Month.next(at("2026-12-01T00:00:00Z")),
            at("2027-01-01T00:00:00Z")
        );
        assert_eq!(
            Unit::Week.back(at("2026-02-23T00:00:00Z"), 1),
            at("2026-02-16T00:00:00Z")
        );
    }

    #[test]
    fn parameters_are_checked() {
        assert!(Unit::parse(None).is_ok_and(|u| u == Unit::Day));
        for bad in ["minute", "year", ""] {
            let failure = Unit::parse(Some(bad)).expect_err(bad);
            assert_eq!(failure.message, "INVALID_ARG_UNIT");
        }
        assert_eq!(parse_units(None).ok(), Some(-1));
        assert_eq!(parse_units(Some("7")).ok(), Some(7));
        for bad in ["0", "-2", "10001", "x"] {
            assert_eq!(
                parse_units(Some(bad)).expect_err(bad).message,
                "INVALID_ARG_UNITS"
            );
        }
        let bitly = parse_reference("2026-01-31T10:00:00+0000").expect("Bitly's form");
        assert_eq!(
            bitly,
            parse_reference("2026-01-31T10:00:00Z").expect("RFC 3339")
        );
        assert!(parse_reference("yesterday").is_err());
    }
}
