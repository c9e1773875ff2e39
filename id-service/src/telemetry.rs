//! Process-wide logging set-up for the binary.

use crate::config::LogFormat;
use tracing_subscriber::Layer;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// Installs a global `tracing` subscriber: `RUST_LOG` filtering ([`otel::log_filter`]:
/// default `info`, the PostgreSQL driver held at `warn` unless the level is `debug` or below,
/// so that the server's notices at every start stay out of the log, `RUST_LOG=info` too), text or JSON lines on stdout, coloured only on a terminal. Does nothing if one is installed already (tests may
/// call it repeatedly).
pub fn init_tracing(format: LogFormat) {
    let filter = otel::log_filter(std::env::var("RUST_LOG").ok().as_deref());
    // Colours only on a terminal: a log file or collector gets plain text.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()));
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}

/// Installs the global subscriber of a serving id-service: the log lines of [`init_tracing`]
/// and, when the `OTEL_*` variables name a collector, the trace pipeline, whose handle is
/// returned so that `main` can flush it at shutdown. With tracing on, the call spans also pass
/// the log filter, so a log line within a traced call carries its `trace_id` and `span_id`.
/// Fails on `OTEL_*` values it cannot use, or if a subscriber is installed already.
pub fn init_serving(format: LogFormat) -> anyhow::Result<Option<otel::Tracing>> {
    let tracing = otel::Tracing::from_env("id-service", env!("CARGO_PKG_VERSION"))?;
    let mut filter = otel::log_filter(std::env::var("RUST_LOG").ok().as_deref());
    if tracing.is_some() {
        filter = otel::log_spans(filter);
    }
    let logs = tracing_subscriber::fmt::layer()
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()));
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
