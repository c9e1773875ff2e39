//! Settings of one part of the node (`Webhooks` in `--help`).

use super::ConfigError;
use clap::Args;
use std::num::{NonZeroU32, NonZeroU64};
use std::time::Duration;

/// How webhook events are delivered.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Webhooks")]
pub struct WebhookConfig {
    /// Milliseconds a webhook delivery may take (connect, send, answer).
    #[arg(long, env = "SHORTENER_WEBHOOK_TIMEOUT_MS", default_value = "10000", value_parser = super::units::millis::<NonZeroU64>)]
    pub webhook_timeout_ms: NonZeroU64,
    /// Milliseconds before a failed delivery's first retry; each further one doubles it.
    #[arg(long, env = "SHORTENER_WEBHOOK_RETRY_BASE_MS", default_value = "1000", value_parser = super::units::millis::<NonZeroU64>)]
    pub webhook_retry_base_ms: NonZeroU64,
    /// Failed deliveries in a row after which an endpoint is disabled.
    #[arg(long, env = "SHORTENER_WEBHOOK_MAX_FAILURES", default_value = "10")]
    pub webhook_max_failures: NonZeroU32,
    /// Attempts a delivery gets: when the last fails it ends `failed` and is not tried again
    /// (72 with the default retry delays: about three days, most of them an hour apart), so an
    /// event its receiver always refuses is not retried for as long as the endpoint lives.
    #[arg(long, env = "SHORTENER_WEBHOOK_MAX_ATTEMPTS", default_value = "72")]
    pub webhook_max_attempts: NonZeroU32,
    /// Whether webhook URLs may name (or resolve to) loopback, private, link-local or
    /// metadata hosts; the other target rules apply either way.
    #[arg(long, env = "SHORTENER_WEBHOOK_ALLOW_PRIVATE", default_value = "false", value_parser = otel::parse_switch, action = clap::ArgAction::Set)]
    pub webhook_allow_private: bool,
    /// Days a webhook delivery, delivered or failed, stays in its endpoint's log before it is
    /// purged, with events no delivery refers to any more (0 keeps them forever).
    #[arg(long, env = "SHORTENER_WEBHOOK_LOG_DAYS", default_value_t = 30, value_parser = super::units::days::<u32>)]
    pub webhook_log_days: u32,
    /// Pending webhook deliveries a tenant may have. Measured every ten delivery polls: while
    /// a tenant is at the bound its events are dropped (and counted in
    /// `shortener_webhook_events_dropped_total`); the link changes themselves still succeed.
    #[arg(long, env = "SHORTENER_WEBHOOK_MAX_PENDING", default_value = "100000")]
    pub webhook_max_pending: NonZeroU64,
}

impl WebhookConfig {
    /// The delivery settings; the outbox is polled every `poll`.
    pub fn delivery(&self, poll: Duration) -> crate::webhooks::WebhookSettings {
        crate::webhooks::WebhookSettings {
            timeout: Duration::from_millis(self.webhook_timeout_ms.get()),
            retry_base: Duration::from_millis(self.webhook_retry_base_ms.get()),
            max_failures: self.webhook_max_failures.get(),
            max_attempts: self.webhook_max_attempts.get(),
            allow_private: self.webhook_allow_private,
            poll,
            log_retention: (self.webhook_log_days > 0)
                .then(|| chrono::Duration::days(i64::from(self.webhook_log_days))),
            max_pending: self.webhook_max_pending.get(),
        }
    }

    /// Checks what this section alone can tell; the error names the setting.
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        super::validate::at_most(
            "SHORTENER_WEBHOOK_LOG_DAYS",
            u64::from(self.webhook_log_days),
            super::validate::CENTURY_DAYS,
            "days (a century)",
        )
    }
}
