//! Logging set-up: `tracing` to standard error, filtered by `RUST_LOG`; and, when the `OTEL_*`
//! variables name a collector, traces over OTLP ([`init_serving`], the `otel` crate).

use crate::config::LogFormat;
use crate::metrics::{Sample, Samples};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// The log filter for `RUST_LOG`: [`otel::log_filter`].
pub fn filter(rust_log: Option<&str>) -> EnvFilter {
    otel::log_filter(rust_log)
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
        LogFormat::Json => builder.json().flatten_event(true).init(),
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
        LogFormat::Json => logs.json().flatten_event(true).with_filter(filter).boxed(),
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
