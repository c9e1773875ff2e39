//! Settings of one part of the node (`IDs and codes` in `--help`).

use super::ConfigError;
use clap::Args;
use std::path::PathBuf;

/// Where IDs come from and how they become codes.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "IDs and codes")]
pub struct IdsConfig {
    /// id-service addresses, comma-separated (`http://id-service:50051`); required with DATABASE_URL.
    #[arg(long, env = "SHORTENER_ID_SERVICE", value_delimiter = ',')]
    pub id_service: Vec<String>,
    /// Bearer token for the id-service, if it requires one.
    #[arg(long, env = "SHORTENER_ID_SERVICE_TOKEN", hide_env_values = true)]
    pub id_service_token: Option<String>,
    /// The ID namespace this deployment leases from.
    #[arg(long, env = "SHORTENER_ID_NAMESPACE", default_value = "links")]
    pub id_namespace: String,
    /// This node's identity in the lease ledger (default: host name and process id).
    #[arg(long, env = "SHORTENER_HOLDER")]
    pub holder: Option<String>,
    /// Code-space key file (32 bytes as hex or base64); the same on every node.
    /// Embedded mode default: `<data dir>/code.key`, generated on first start.
    #[arg(long, env = "SHORTENER_KEY_FILE")]
    pub key_file: Option<PathBuf>,
    /// Code-space key given directly (hex or base64), instead of a file.
    #[arg(
        long,
        env = "SHORTENER_KEY",
        hide_env_values = true,
        conflicts_with = "key_file"
    )]
    pub key: Option<String>,
    /// Length L of generated codes (4 to 11).
    #[arg(long, env = "SHORTENER_CODE_LENGTH", default_value_t = codespace::DEFAULT_LENGTH)]
    pub code_length: usize,
    /// Smallest ID block to lease.
    #[arg(long, env = "SHORTENER_MIN_BLOCK", default_value_t = 100)]
    pub min_block: u64,
    /// Largest ID block to lease.
    #[arg(long, env = "SHORTENER_MAX_BLOCK", default_value_t = 100_000)]
    pub max_block: u64,
}

impl IdsConfig {
    /// How the node's ID pool sizes its blocks.
    pub fn pool(&self) -> id_client::PoolConfig {
        id_client::PoolConfig {
            min_block: self.min_block,
            max_block: self.max_block,
            initial_block: self.min_block.max(1000).min(self.max_block),
            ..id_client::PoolConfig::default()
        }
    }

    /// Checks what this section alone can tell; the error names the setting.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(codespace::MIN_LENGTH..=codespace::MAX_GENERATED_LENGTH).contains(&self.code_length) {
            return Err(ConfigError::new(
                "SHORTENER_CODE_LENGTH",
                format!(
                    "SHORTENER_CODE_LENGTH must be between {} and {}, not {}",
                    codespace::MIN_LENGTH,
                    codespace::MAX_GENERATED_LENGTH,
                    self.code_length
                ),
            ));
        }
        if let Some(key) = &self.key
            && let Err(error) = codespace::CodeKey::parse(key)
        {
            return Err(ConfigError::new(
                "SHORTENER_KEY",
                format!("SHORTENER_KEY cannot be used: {error}"),
            ));
        }
        if self.min_block == 0 || self.min_block > self.max_block {
            return Err(ConfigError::new(
                "SHORTENER_MIN_BLOCK",
                format!(
                    "SHORTENER_MIN_BLOCK ({}) must be at least 1 and at most SHORTENER_MAX_BLOCK ({})",
                    self.min_block, self.max_block
                ),
            ));
        }
        for endpoint in &self.id_service {
            if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
                return Err(ConfigError::new(
                    "SHORTENER_ID_SERVICE",
                    format!(
                        "SHORTENER_ID_SERVICE entries must be http:// or https:// URLs, not {endpoint:?}"
                    ),
                ));
            }
        }
        let namespace_ok = {
            let mut chars = self.id_namespace.chars();
            chars.next().is_some_and(|c| c.is_ascii_lowercase())
                && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
                && self.id_namespace.len() <= 63
        };
        if !namespace_ok {
            return Err(ConfigError::new(
                "SHORTENER_ID_NAMESPACE",
                format!(
                    "SHORTENER_ID_NAMESPACE must match [a-z][a-z0-9_]{{0,62}}, not {:?}",
                    self.id_namespace
                ),
            ));
        }
        Ok(())
    }
}
