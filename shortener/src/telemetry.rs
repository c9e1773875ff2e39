//! Logging set-up: `tracing` to standard error, filtered by `RUST_LOG`; and, when the `OTEL_*`
//! variables name a collector, traces over OTLP ([`init_serving`], the `otel` crate).

use crate::config::LogFormat;
use crate::metrics::{Sample, Samples};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

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

/// Installs the global subscriber of a serving node: the log lines of [`init_tracing`] and,
/// when the `OTEL_*` variables name a collector, the trace pipeline, whose handle is returned
/// so that `main` can flush it at shutdown. With tracing on, the request spans also pass the
/// log filter, so a log line within a traced request carries its `trace_id` and `span_id`.
pub fn init_serving(format: LogFormat) -> anyhow::Result<Option<otel::Tracing>> {
    let tracing = otel::Tracing::from_env("shortener", env!("CARGO_PKG_VERSION"))?;
    let mut filter = filter(std::env::var("RUST_LOG").ok().as_deref());
    if tracing.is_some() {
        filter = otel::log_spans(filter);
    }
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    let logs = match format {
        LogFormat::Text => logs.with_filter(filter).boxed(),
        LogFormat::Json => logs.json().with_filter(filter).boxed(),
    };
    let traces = tracing.as_ref().map(|t| t.layer());
    tracing_subscriber::registry()
        .with(logs)
        .with(traces)
        .try_init()?;
    Ok(tracing)
}

/// The trace export's counters in `/metrics` (zero while tracing is off).
pub struct TraceExport;

impl Sample for TraceExport {
    fn sample(&self, out: &mut Samples<'_, '_>) -> std::fmt::Result {
        let stats = otel::stats();
        let read = |f: fn(&otel::ExportStats) -> u64| stats.as_deref().map_or(0, f);
        out.counter(
            "shortener_trace_spans_exported",
            "Spans the OTLP collector accepted.",
            read(otel::ExportStats::exported),
        )?;
        out.counters(
            "shortener_trace_spans_dropped",
            "Spans dropped instead of exported: the export queue was full (reason=queue_full) \
             or their batch failed or timed out (reason=export_failed).",
            [
                (
                    [("reason", "queue_full")],
                    read(otel::ExportStats::dropped_queue_full),
                ),
                (
                    [("reason", "export_failed")],
                    read(otel::ExportStats::dropped_export_failed),
                ),
            ],
        )
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
