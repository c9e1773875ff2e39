//! Logging set-up: `tracing` to standard error, filtered by `RUST_LOG`.

use crate::config::LogFormat;
use tracing_subscriber::EnvFilter;

/// Installs the global tracing subscriber (`RUST_LOG` filters; default `info`).
pub fn init_tracing(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}
