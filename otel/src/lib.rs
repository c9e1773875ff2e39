//! OpenTelemetry traces for the services, configured only by the standard `OTEL_*` variables.
//!
//! Tracing is off unless an OTLP endpoint is set (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or
//! `OTEL_EXPORTER_OTLP_ENDPOINT`) and `OTEL_SDK_DISABLED` is not `true`. Off, nothing here
//! allocates or locks: every entry point first reads one flag ([`enabled`]).
//!
//! On, [`Tracing::from_env`] builds a tracer whose spans go to a bounded queue; one background
//! task sends them in batches over OTLP (gRPC or HTTP/protobuf, `OTEL_EXPORTER_OTLP_PROTOCOL`).
//! A collector that is down or slow costs the spans that do not fit in the queue or whose batch
//! failed, counted in [`ExportStats`] for the service's `/metrics`: a request never waits for
//! the collector, and the queue never grows past its bound.
//!
//! What becomes a span: only `tracing` spans whose target begins with `otel` (the ones this
//! crate's helpers make): a server span per API request ([`http::server_span`]), per redirect
//! ([`http::edge_span`]) and per gRPC call ([`grpc::TraceLayer`]), each made only when the
//! sampler picks the request (an unpicked one makes no span at all); client spans around
//! calls out ([`rpc_client_span`], [`http_client_span`]) and database statements
//! ([`db_span`], [`db_procedure_span`]); and work a request caused but does not wait for
//! ([`follow_up_span`], or a kept [`Parent::traceparent`], as the webhook outbox does). Log
//! events are never exported, and no helper records a request's parameters: routes are
//! templates, database spans name the operation and table (or procedure) only. Incoming and outgoing context is W3C trace context (`traceparent`,
//! `tracestate`).
//!
//! Beside the traces, what both services share about starting up: their log filter
//! ([`log_filter`]), a refused setting said naming its variable ([`env_refusal`]), switches
//! read alike ([`parse_switch`]), and the warning of variables no setting reads
//! ([`warn_of_unread`]).

mod config;
mod context;
mod export;
pub mod grpc;
pub mod http;
mod processor;
mod refusal;
mod sampler;
mod unread;

pub use refusal::{env_refusal, parse_switch};
pub use unread::{Unread, env_names, unread_variables, warn_of_unread};

pub use config::{ConfigError, Protocol, Settings};
pub use context::{
    Parent, TRACEPARENT, current_parent, current_traceparent, db_procedure_span, db_span,
    follow_up_span, http_client_span, inject_headers, inject_metadata, record_grpc_status,
    record_http_status, record_ids, rpc_client_span,
};
pub use processor::ExportStats;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tracing::Subscriber;
use tracing::subscriber::Interest;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::{Context, Filter};
use tracing_subscriber::registry::LookupSpan;

/// The span targets a log filter enables when tracing is on, so that a log line written within
/// such a span carries its `trace_id` and `span_id`: every span this crate makes but a
/// redirect's (`otel::edge`), within which nothing is logged.
pub const LOGGED_SPANS: [&str; 5] = [
    "otel::http",
    "otel::grpc",
    "otel::client",
    "otel::db",
    "otel::internal",
];

/// The log filter of both services for `RUST_LOG` (default `info`). The PostgreSQL driver logs every
/// statement with its parameters (codes, target URLs) at `debug`; it is held at `info` unless
/// `RUST_LOG` asks for its `trace` by name, so that nothing a client sent is logged above
/// `trace`. The server's notices (`relation ... already exists, skipping` at every start),
/// which the driver logs at `info`, show only when the default level is `debug` or `trace`:
/// below that the driver is held at `warn`.
pub fn log_filter(rust_log: Option<&str>) -> tracing_subscriber::EnvFilter {
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
    tracing_subscriber::EnvFilter::try_new(&spec)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,tokio_postgres=warn"))
}

/// `filter` with the [`LOGGED_SPANS`] enabled at `INFO` (where this crate makes its spans).
pub fn log_spans(filter: tracing_subscriber::EnvFilter) -> tracing_subscriber::EnvFilter {
    LOGGED_SPANS.iter().fold(filter, |filter, target| {
        match format!("{target}=info").parse() {
            Ok(directive) => filter.add_directive(directive),
            Err(_) => filter,
        }
    })
}

/// Whether traces are being recorded in this process (set once by [`Tracing::from_env`]).
static ENABLED: AtomicBool = AtomicBool::new(false);

/// The sampler of this process, for decisions made before a span exists (redirects).
static SAMPLER: OnceLock<sampler::EdgeSampler> = OnceLock::new();

/// The export counters of this process's pipeline, once one is built.
static STATS: OnceLock<Arc<ExportStats>> = OnceLock::new();

/// The export counters of this process (`None` while tracing is off), for its `/metrics`.
pub fn stats() -> Option<Arc<ExportStats>> {
    STATS.get().cloned()
}

/// Whether traces are recorded in this process. One relaxed load: the check every traced path
/// makes first, so that with tracing off it costs nothing else.
#[inline]
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// A running trace pipeline: the tracer provider and its export task.
pub struct Tracing {
    provider: SdkTracerProvider,
    pipeline: processor::Pipeline,
}

impl std::fmt::Debug for Tracing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracing").finish_non_exhaustive()
    }
}

impl Tracing {
    /// The pipeline the `OTEL_*` variables describe, or `None` when tracing is off (no endpoint,
    /// `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`). `service` names the service
    /// unless `OTEL_SERVICE_NAME` or `service.name` in `OTEL_RESOURCE_ATTRIBUTES` does;
    /// `version` becomes `service.version`. Must be called within a tokio runtime: the export
    /// task runs there. Fails on a variable it cannot use (an unknown protocol or sampler).
    pub fn from_env(service: &str, version: &str) -> Result<Option<Tracing>, ConfigError> {
        Self::from_settings(Settings::from_env()?, service, version)
    }

    /// The pipeline for `settings` (see [`Tracing::from_env`]).
    pub fn from_settings(
        settings: Option<Settings>,
        service: &str,
        version: &str,
    ) -> Result<Option<Tracing>, ConfigError> {
        let Some(settings) = settings else {
            return Ok(None);
        };
        let resource = settings.resource(service, version);
        let mut exporter = export::exporter(settings.protocol)?;
        opentelemetry_sdk::trace::SpanExporter::set_resource(&mut exporter, &resource);
        let (processor, pipeline) = processor::Pipeline::start(exporter, settings.batch);
        let edge = sampler::EdgeSampler::new(settings.sampler.clone(), settings.root);
        let _ = SAMPLER.set(edge.clone());
        let _ = STATS.set(Arc::clone(&pipeline.stats));
        let provider = SdkTracerProvider::builder()
            .with_resource(resource)
            .with_sampler(edge)
            .with_span_processor(processor)
            .build();
        ENABLED.store(true, Ordering::Relaxed);
        Ok(Some(Tracing { provider, pipeline }))
    }

    /// The `tracing` layer that turns this crate's spans into OpenTelemetry spans. Only spans
    /// whose target begins with `otel` pass; events never do.
    pub fn layer<S>(&self) -> impl Layer<S> + use<S>
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        let tracer = self.provider.tracer("otel");
        tracing_opentelemetry::layer()
            .with_tracer(tracer)
            // Attributes name what the spans' fields say, nothing about this process's code.
            .with_tracked_inactivity(false)
            .with_location(false)
            .with_threads(false)
            .with_target(false)
            .with_filter(OtelSpans)
    }

    /// The export counters, for the service's metrics.
    pub fn stats(&self) -> Arc<ExportStats> {
        Arc::clone(&self.pipeline.stats)
    }

    /// Stops recording and sends what is queued, waiting at most `deadline`; what is not sent
    /// by then is dropped (and counted).
    pub async fn shutdown(self, deadline: Duration) {
        ENABLED.store(false, Ordering::Relaxed);
        self.pipeline.finish(deadline).await;
        // The queue is closed: the provider's own shutdown has nothing left to wait for.
        let _ = self
            .provider
            .shutdown_with_timeout(Duration::from_millis(100));
    }
}

/// The trace layer's filter: spans whose target begins with `otel` (all made at `INFO`), never
/// events. Its answer depends on the callsite alone, so it is given once per callsite
/// ([`Filter::callsite_enabled`]) and cached by `tracing`: a log or span callsite that no layer
/// wants (a `debug!` in a dependency on the redirect path) costs one cached read, not a filter
/// call per use. Its level hint (`INFO`) keeps the process's maximum level where the log
/// filter puts it, so `debug!` and `trace!` calls below it stay one comparison.
struct OtelSpans;

impl OtelSpans {
    fn wants(meta: &tracing::Metadata<'_>) -> bool {
        meta.is_span() && meta.target().starts_with("otel")
    }
}

impl<S> Filter<S> for OtelSpans {
    fn enabled(&self, meta: &tracing::Metadata<'_>, _: &Context<'_, S>) -> bool {
        Self::wants(meta)
    }

    fn callsite_enabled(&self, meta: &'static tracing::Metadata<'static>) -> Interest {
        if Self::wants(meta) {
            Interest::always()
        } else {
            Interest::never()
        }
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(LevelFilter::INFO)
    }
}

#[cfg(test)]
mod log_filter_tests {
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
            let filter = log_filter(rust_log).to_string();
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
