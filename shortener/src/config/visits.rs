//! Settings of one part of the node (`Clicks and analytics` in `--help`).

use super::ConfigError;
use super::parse_switch;
use clap::Args;
use std::num::{NonZeroU32, NonZeroU64, NonZeroUsize};
use std::path::PathBuf;

/// How visits are counted: exact totals and the analytics rollups.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Clicks and analytics")]
pub struct VisitsConfig {
    /// Milliseconds between click-count flushes (a crash loses at most this much). A flush
    /// writes one row per code clicked since the last, so a longer interval writes less under
    /// skewed traffic.
    #[arg(
        long,
        env = "SHORTENER_CLICK_FLUSH_INTERVAL_MS",
        default_value = "5000", value_parser = super::units::millis::<NonZeroU64>)]
    pub click_flush_interval_ms: NonZeroU64,
    /// Most links with click counts pending between flushes: past it the counts flush at once,
    /// so no visit is dropped and memory stays bounded (about 100 bytes per link at the bound;
    /// README, "Sizing").
    #[arg(long, env = "SHORTENER_CLICK_MAX_PENDING", default_value = "1000000")]
    pub click_max_pending: NonZeroUsize,
    /// Whether visits are counted by hour, referrer, device and country for the stats API.
    #[arg(long, env = "SHORTENER_ANALYTICS", default_value = "on", value_parser = parse_switch, action = clap::ArgAction::Set)]
    pub analytics: bool,
    /// Milliseconds between writes of the analytics counters to the rollups. A crash loses at
    /// most this long of analytics (the link totals flush on their own interval); longer means
    /// fewer rollup writes per visit, since a link's visits in one interval share a row. At most
    /// 50 s: the hourly rollup webhook event is recorded a minute after its hour ends.
    #[arg(
        long,
        env = "SHORTENER_ANALYTICS_FLUSH_INTERVAL_MS",
        default_value = "30000", value_parser = super::units::millis::<NonZeroU64>)]
    pub analytics_flush_interval_ms: NonZeroU64,
    /// Most analytics counters held in memory between flushes; visits needing more are left
    /// out of the rollups (the link totals still count them). Past half of it, a tenant makes
    /// new counters only within its fair share, so one tenant cannot fill it for the others.
    #[arg(
        long,
        env = "SHORTENER_ANALYTICS_MAX_ENTRIES",
        default_value = "1000000"
    )]
    pub analytics_max_entries: NonZeroUsize,
    /// Distinct referrer hosts counted per link and hour; the rest fold into "(other)".
    #[arg(
        long,
        env = "SHORTENER_ANALYTICS_REFERRERS_PER_HOUR",
        default_value = "100"
    )]
    pub analytics_referrers_per_hour: NonZeroUsize,
    /// Hourly rollups older than this many days are compacted into daily ones.
    #[arg(
        long,
        env = "SHORTENER_ANALYTICS_COMPACT_AFTER_DAYS",
        default_value = "30", value_parser = super::units::days::<NonZeroU32>)]
    pub analytics_compact_after_days: NonZeroU32,
    /// Rollups older than this many days are removed (0: kept forever).
    #[arg(
        long,
        env = "SHORTENER_ANALYTICS_RETENTION_DAYS",
        default_value_t = 400, value_parser = super::units::days::<u32>)]
    pub analytics_retention_days: u32,
    /// A MaxMind-format (GeoIP2 / GeoLite2 Country or City) database file: visits are counted
    /// by country when set, and redirect rules may have country conditions (refused without
    /// one). Re-read when it changes.
    #[arg(long, env = "SHORTENER_GEOIP_DB")]
    pub geoip_db: Option<PathBuf>,
}

impl VisitsConfig {
    /// The analytics accumulator's settings; hourly rollup events are kept as long as the
    /// webhook log (`webhook_log_days`).
    pub fn analytics(&self, webhook_log_days: u32) -> crate::visits::analytics::AnalyticsSettings {
        use crate::visits::analytics::AnalyticsSettings;
        AnalyticsSettings {
            enabled: self.analytics,
            max_entries: self.analytics_max_entries.get(),
            referrers_per_hour: self.analytics_referrers_per_hour.get(),
            compact_after_days: self.analytics_compact_after_days.get(),
            retention_days: self.analytics_retention_days,
            rollup_event_hours: AnalyticsSettings::rollup_event_hours_for(webhook_log_days),
            flush_interval: std::time::Duration::from_millis(
                self.analytics_flush_interval_ms.get(),
            ),
        }
    }

    /// The exact totals' flush interval.
    pub fn click_flush(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.click_flush_interval_ms.get())
    }

    /// When the visit accumulators flush, and how often the GeoIP file is checked (`reload`).
    pub fn schedule(&self, reload: std::time::Duration) -> crate::visits::Schedule {
        crate::visits::Schedule {
            clicks: std::time::Duration::from_millis(self.click_flush_interval_ms.get()),
            analytics: std::time::Duration::from_millis(self.analytics_flush_interval_ms.get()),
            geo_reload: reload,
        }
    }

    /// Checks what this section alone can tell; the error names the setting.
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        use super::validate::{CENTURY_DAYS, at_most};
        for (setting, days) in [
            (
                "SHORTENER_ANALYTICS_RETENTION_DAYS",
                u64::from(self.analytics_retention_days),
            ),
            (
                "SHORTENER_ANALYTICS_COMPACT_AFTER_DAYS",
                u64::from(self.analytics_compact_after_days.get()),
            ),
        ] {
            at_most(setting, days, CENTURY_DAYS, "days (a century)")?;
        }
        // The hourly `clicks.rollup` events look back two days for hours not yet told, and
        // read them from the hourly rollups: those must not be compacted away by then.
        let event_days = crate::visits::analytics::ROLLUP_EVENT_HOURS.div_ceil(24) + 1;
        if self.analytics_compact_after_days.get() < event_days {
            return Err(ConfigError::new(
                "SHORTENER_ANALYTICS_COMPACT_AFTER_DAYS",
                format!(
                    "SHORTENER_ANALYTICS_COMPACT_AFTER_DAYS must be at least {event_days}: the \
                     hourly rollup events look back {} hours over the hourly rollups",
                    crate::visits::analytics::ROLLUP_EVENT_HOURS
                ),
            ));
        }
        if self.analytics_flush_interval_ms.get() > 50_000 {
            // The hourly `clicks.rollup` event is recorded a minute after its hour ends: every
            // flush of the hour must be in by then.
            return Err(ConfigError::new(
                "SHORTENER_ANALYTICS_FLUSH_INTERVAL_MS",
                "SHORTENER_ANALYTICS_FLUSH_INTERVAL_MS must be at most 50000 (the hourly rollup event is recorded a minute after its hour)",
            ));
        }
        if self.analytics_retention_days != 0
            && self.analytics_retention_days <= self.analytics_compact_after_days.get()
        {
            return Err(ConfigError::new(
                "SHORTENER_ANALYTICS_RETENTION_DAYS",
                format!(
                    "SHORTENER_ANALYTICS_RETENTION_DAYS ({}) must be 0 (keep forever) or more than SHORTENER_ANALYTICS_COMPACT_AFTER_DAYS ({})",
                    self.analytics_retention_days,
                    self.analytics_compact_after_days.get()
                ),
            ));
        }
        Ok(())
    }
}
