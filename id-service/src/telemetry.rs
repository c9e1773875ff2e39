//! Process-wide logging set-up for the binary.

use crate::config::LogFormat;
use tracing_subscriber::EnvFilter;

/// Installs a global `tracing` subscriber: `RUST_LOG` filtering (default `info`, with the
/// PostgreSQL driver at `warn` so that the server's notices at every start stay out of the
/// log), text or JSON lines on stdout, coloured only on a terminal. Does nothing if one is installed already (tests may
/// call it repeatedly).
pub fn init_tracing(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,tokio_postgres=warn"));
    // Colours only on a terminal: a log file or collector gets plain text.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()));
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}
