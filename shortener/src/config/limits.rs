//! Settings of one part of the node (`Limits` in `--help`).

use super::ConfigError;
use clap::Args;
use std::num::NonZeroUsize;

/// Rates and caps per caller.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Limits")]
pub struct LimitsConfig {
    /// Sustained 404s per second allowed per client address.
    #[arg(long, env = "SHORTENER_NOT_FOUND_RATE", default_value_t = 5)]
    pub not_found_rate: u32,
    /// Burst of 404s allowed per client address.
    #[arg(long, env = "SHORTENER_NOT_FOUND_BURST", default_value_t = 20)]
    pub not_found_burst: u32,
    /// Sustained creates per second allowed per API key.
    #[arg(long, env = "SHORTENER_CREATE_RATE", default_value_t = 1000)]
    pub create_rate: u32,
    /// Burst of creates allowed per API key (at least the batch limit).
    #[arg(long, env = "SHORTENER_CREATE_BURST", default_value_t = 2000)]
    pub create_burst: u32,
    /// Sustained API reads per second allowed per API key.
    #[arg(long, env = "SHORTENER_READ_RATE", default_value_t = 200)]
    pub read_rate: u32,
    /// Burst of API reads allowed per API key.
    #[arg(long, env = "SHORTENER_READ_BURST", default_value_t = 400)]
    pub read_burst: u32,
    /// Most clients (addresses, API keys, or an address and a code) each rate limit remembers
    /// at once. A limit at its bound forgets the clients whose buckets are full again, and if
    /// that is not enough, every client (each starts with a full bucket). About 65 to 160 bytes
    /// per client, by limit (README, "Sizing").
    #[arg(long, env = "SHORTENER_LIMIT_MAX_CLIENTS", default_value = "100000")]
    pub limit_max_clients: NonZeroUsize,
    /// Most links in one batch create.
    #[arg(long, env = "SHORTENER_BATCH_LIMIT", default_value_t = 1000)]
    pub batch_limit: usize,
    /// Most exports running at once on the node (more answer 429). Each takes a store
    /// connection only while it reads a page, so at most this many of the pool's connections
    /// serve exports at any moment.
    #[arg(long, env = "SHORTENER_EXPORT_MAX_CONCURRENT", default_value = "4")]
    pub export_max_concurrent: NonZeroUsize,
    /// Most exports running at once for one API key (more answer 429).
    #[arg(long, env = "SHORTENER_EXPORT_MAX_PER_KEY", default_value = "2")]
    pub export_max_per_key: NonZeroUsize,
    /// Most exports running at once for one tenant, all its keys together (more answer 429):
    /// below `SHORTENER_EXPORT_MAX_CONCURRENT`, so one tenant's exports leave room for
    /// another's. Shlink lists and YOURLS stats are such passes too.
    #[arg(long, env = "SHORTENER_EXPORT_MAX_PER_TENANT", default_value = "3")]
    pub export_max_per_tenant: NonZeroUsize,
    /// The longest one export runs, in seconds: one read slowly but steadily ends there (as
    /// failed, never as complete) and gives its place back.
    #[arg(long, env = "SHORTENER_EXPORT_MAX_SECONDS", default_value = "900", value_parser = super::units::seconds::<std::num::NonZeroU64>)]
    pub export_max_seconds: std::num::NonZeroU64,
    /// Most imports running at once on the node (more answer 429 before their body is read).
    #[arg(long, env = "SHORTENER_IMPORT_MAX_CONCURRENT", default_value = "4")]
    pub import_max_concurrent: NonZeroUsize,
    /// Most imports running at once for one tenant, all its keys together (more answer 429):
    /// below `SHORTENER_IMPORT_MAX_CONCURRENT`, so one tenant's imports leave room for
    /// another's.
    #[arg(long, env = "SHORTENER_IMPORT_MAX_PER_TENANT", default_value = "3")]
    pub import_max_per_tenant: NonZeroUsize,
    /// Most imports running at once for one API key (more answer 429).
    #[arg(long, env = "SHORTENER_IMPORT_MAX_PER_KEY", default_value = "1")]
    pub import_max_per_key: NonZeroUsize,
    /// The longest an import waits for its next row (a CSV's header, a gRPC stream's first
    /// message), in milliseconds; past it the import stops, `import_idle`, with every row
    /// before it answered, and gives its place back.
    #[arg(long, env = "SHORTENER_IMPORT_IDLE_MS", default_value = "60000", value_parser = super::units::millis::<std::num::NonZeroU64>)]
    pub import_idle_ms: std::num::NonZeroU64,
    /// The longest one import runs, in seconds: one whose rows come slowly but steadily (each
    /// within the idle bound) stops there, `import_too_long`, with every row before it
    /// answered, and gives its place back.
    #[arg(long, env = "SHORTENER_IMPORT_MAX_SECONDS", default_value = "3600", value_parser = super::units::seconds::<std::num::NonZeroU64>)]
    pub import_max_seconds: std::num::NonZeroU64,
    /// Most links one rename or delete of a tag changes, 1 to 10000 (a change that would touch
    /// more is refused, 409 `too_many_links`, before anything is written).
    #[arg(long, env = "SHORTENER_TAG_CHANGE_MAX_LINKS", default_value_t = crate::links::MAX_TAG_CHANGE_LINKS)]
    pub tag_change_max_links: usize,
}

impl LimitsConfig {
    /// Limits loose enough that tests drive a node hard from one address, with the defaults'
    /// bounds on exports and imports.
    pub fn for_tests() -> Self {
        LimitsConfig {
            not_found_rate: 1000,
            not_found_burst: 1000,
            create_rate: 100_000,
            create_burst: 100_000,
            read_rate: 100_000,
            read_burst: 100_000,
            limit_max_clients: NonZeroUsize::new(100_000).expect("non-zero"),
            batch_limit: 1000,
            export_max_concurrent: NonZeroUsize::new(4).expect("non-zero"),
            export_max_per_key: NonZeroUsize::new(2).expect("non-zero"),
            export_max_per_tenant: NonZeroUsize::new(3).expect("non-zero"),
            export_max_seconds: std::num::NonZeroU64::new(900).expect("non-zero"),
            import_max_concurrent: NonZeroUsize::new(4).expect("non-zero"),
            import_max_per_tenant: NonZeroUsize::new(3).expect("non-zero"),
            import_max_per_key: NonZeroUsize::new(1).expect("non-zero"),
            import_idle_ms: std::num::NonZeroU64::new(60_000).expect("non-zero"),
            import_max_seconds: std::num::NonZeroU64::new(3600).expect("non-zero"),
            tag_change_max_links: crate::links::MAX_TAG_CHANGE_LINKS,
        }
    }

    /// The per-caller rate limits; `password_attempts` per minute for a code's password; IPv6
    /// clients keyed by `ipv6_prefix` bits (`SHORTENER_IPV6_PREFIX`), and counted in their /48
    /// network's 404 budget too when that is longer.
    pub fn rates(&self, password_attempts: u32, ipv6_prefix: u8) -> crate::limits::Limits {
        use crate::limits::Rate;
        crate::limits::Limits::new(
            Rate {
                per_second: self.not_found_rate,
                burst: self.not_found_burst,
            },
            Rate {
                per_second: self.create_rate,
                burst: self.create_burst,
            },
            Rate {
                per_second: self.read_rate,
                burst: self.read_burst,
            },
            password_attempts,
            self.limit_max_clients.get(),
        )
        .counting_networks(ipv6_prefix)
    }

    /// How many exports run at once and for how long; a reader that takes nothing for
    /// `send_timeout` ends one.
    pub fn exports(&self, send_timeout: std::time::Duration) -> crate::links::ExportLimits {
        crate::links::ExportLimits {
            places: crate::links::Places {
                per_node: self.export_max_concurrent,
                per_tenant: self.export_max_per_tenant,
                per_key: self.export_max_per_key,
            },
            send_timeout,
            deadline: std::time::Duration::from_secs(self.export_max_seconds.get()),
        }
    }

    /// How many imports run at once.
    pub fn imports(&self) -> crate::links::Places {
        crate::links::Places {
            per_node: self.import_max_concurrent,
            per_tenant: self.import_max_per_tenant,
            per_key: self.import_max_per_key,
        }
    }

    /// How long an import waits for its next row.
    pub fn import_idle(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.import_idle_ms.get())
    }

    /// The longest one import runs.
    pub fn import_max(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.import_max_seconds.get())
    }

    /// Checks what this section alone can tell; the error names the setting.
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        if self.create_burst < self.batch_limit as u32 {
            return Err(ConfigError::new(
                "SHORTENER_CREATE_BURST",
                format!(
                    "SHORTENER_CREATE_BURST ({}) must be at least SHORTENER_BATCH_LIMIT ({})",
                    self.create_burst, self.batch_limit
                ),
            ));
        }
        if self.batch_limit == 0 || self.batch_limit > 10_000 {
            return Err(ConfigError::new(
                "SHORTENER_BATCH_LIMIT",
                format!(
                    "SHORTENER_BATCH_LIMIT must be between 1 and 10000, not {}",
                    self.batch_limit
                ),
            ));
        }
        let most = crate::links::MAX_TAG_CHANGE_LINKS;
        if self.tag_change_max_links == 0 || self.tag_change_max_links > most {
            return Err(ConfigError::new(
                "SHORTENER_TAG_CHANGE_MAX_LINKS",
                format!(
                    "SHORTENER_TAG_CHANGE_MAX_LINKS must be between 1 and {most}, not {}",
                    self.tag_change_max_links
                ),
            ));
        }
        Ok(())
    }
}
