//! Logging set-up: `tracing` to standard error, filtered by `RUST_LOG`.

use crate::config::LogFormat;
use tracing_subscriber::EnvFilter;

/// The log filter for `RUST_LOG` (default `info`). The PostgreSQL driver logs every
/// statement with its parameters (codes, target URLs) at `debug`; it is held at `info` unless
/// `RUST_LOG` asks for its `trace` by name, so that nothing a client sent is logged above
/// `trace`. The server's notices (`relation ... already exists, skipping` at every start),
/// which the driver logs at `info`, show only when the default level is `debug` or `trace`:
/// below that the driver is held at `warn`.
pub fn filter(rust_log: Option<&str>) -> EnvFilter {
    let spec = rust_log.filter(|s| !s.trim().is_empty()).unwrap_or("info");
    let driver_traced = spec
        .split(',')
        .any(|d| d.trim().starts_with("tokio_postgres") && d.trim().ends_with("=trace"));
    let verbose = spec
        .split(',')
        .any(|d| matches!(d.trim(), "debug" | "trace"));
    let spec = if driver_traced {
        spec.to_string()
    } else if verbose {
        format!("{spec},tokio_postgres=info")
    } else {
        format!("{spec},tokio_postgres=warn")
    };
    EnvFilter::try_new(&spec).unwrap_or_else(|_| EnvFilter::new("info,tokio_postgres=warn"))
}

/// Installs the global tracing subscriber (`RUST_LOG` filters; see [`filter`]).
pub fn init_tracing(format: LogFormat) {
    let filter = filter(std::env::var("RUST_LOG").ok().as_deref());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colours only on a terminal: a log file or collector gets plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_database_driver_is_held_at_info_unless_traced_by_name() {
        for (rust_log, shown) in [
            (None, "info,tokio_postgres=warn"),
            (Some("debug"), "debug,tokio_postgres=info"),
            (Some("trace"), "trace,tokio_postgres=info"),
            (
                Some("shortener=debug"),
                "shortener=debug,tokio_postgres=warn",
            ),
            (
                Some("debug,tokio_postgres=trace"),
                "debug,tokio_postgres=trace",
            ),
        ] {
            let filter = filter(rust_log).to_string();
            for directive in shown.split(',') {
                assert!(filter.contains(directive), "{rust_log:?}: {filter}");
            }
            if !shown.contains("tokio_postgres=trace") {
                assert!(
                    !filter.contains("tokio_postgres=debug")
                        && !filter.contains("tokio_postgres=trace"),
                    "{filter}"
                );
            }
        }
    }
}
