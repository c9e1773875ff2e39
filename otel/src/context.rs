//! W3C trace context (`traceparent`, `tracestate`) in and out, and the client spans.

use crate::enabled;
use opentelemetry::propagation::{Injector, TextMapPropagator};
use opentelemetry::trace::TraceContextExt;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing::Span;
use tracing::field::Empty;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The header (and gRPC metadata key) that carries the caller's trace.
pub const TRACEPARENT: &str = "traceparent";

/// [`TRACEPARENT`] as a prepared header name: looking a `&str` up would parse and check it on
/// every request.
pub(crate) const TRACEPARENT_HEADER: http::HeaderName = http::HeaderName::from_static(TRACEPARENT);

/// The trace context of a sampled span, kept to parent a span that starts later (a lease a
/// request triggered, say).
#[derive(Debug, Clone)]
pub struct Parent(pub(crate) opentelemetry::Context);

impl Parent {
    /// This context as a W3C `traceparent` value, to be kept where later work, perhaps in
    /// another process, picks it up (the webhook outbox row of the event a create recorded).
    pub fn traceparent(&self) -> Option<String> {
        let mut carrier = std::collections::HashMap::new();
        TraceContextPropagator::new().inject_context(&self.0, &mut carrier);
        carrier.remove(TRACEPARENT)
    }

    /// The context a kept `traceparent` value names, when tracing is on and the value is a
    /// valid, sampled one; `None` otherwise.
    pub fn from_traceparent(value: &str) -> Option<Parent> {
        if !enabled() {
            return None;
        }
        let carrier =
            std::collections::HashMap::from([(TRACEPARENT.to_string(), value.to_string())]);
        let cx = TraceContextPropagator::new().extract(&carrier);
        let span = cx.span();
        let context = span.span_context();
        (context.is_valid() && context.is_sampled()).then(|| Parent(cx.clone()))
    }
}

/// The `traceparent` of the current span when tracing is on and that span is sampled (see
/// [`Parent::traceparent`]); `None` otherwise, at the cost of one flag read when tracing is off.
pub fn current_traceparent() -> Option<String> {
    current_parent().and_then(|parent| parent.traceparent())
}

/// The context of the current span when tracing is on and that span is sampled; `None`
/// otherwise, at the cost of one flag read when tracing is off.
pub fn current_parent() -> Option<Parent> {
    if !enabled() {
        return None;
    }
    let cx = Span::current().context();
    cx.span().span_context().is_sampled().then_some(Parent(cx))
}

/// The caller's context from request headers (an empty one when they carry none).
pub(crate) fn extract(headers: &http::HeaderMap) -> opentelemetry::Context {
    if !headers.contains_key(&TRACEPARENT_HEADER) {
        return opentelemetry::Context::new();
    }
    TraceContextPropagator::new().extract(&opentelemetry_http::HeaderExtractor(headers))
}

/// Adds the current span's `traceparent` (and `tracestate`) to outgoing request headers when
/// tracing is on and the span is sampled.
pub fn inject_headers(headers: &mut http::HeaderMap) {
    if let Some(Parent(cx)) = current_parent() {
        TraceContextPropagator::new()
            .inject_context(&cx, &mut opentelemetry_http::HeaderInjector(headers));
    }
}

/// Adds the current span's `traceparent` (and `tracestate`) to an outgoing gRPC call's
/// metadata when tracing is on and the span is sampled.
pub fn inject_metadata(metadata: &mut tonic::metadata::MetadataMap) {
    if let Some(Parent(cx)) = current_parent() {
        TraceContextPropagator::new().inject_context(&cx, &mut Metadata(metadata));
    }
}

struct Metadata<'a>(&'a mut tonic::metadata::MetadataMap);

impl Injector for Metadata<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(key), Ok(value)) = (
            tonic::metadata::MetadataKey::from_bytes(key.as_bytes()),
            tonic::metadata::MetadataValue::try_from(value),
        ) {
            self.0.insert(key, value);
        }
    }
}

/// Records the span's trace and span IDs in its `trace_id` and `span_id` fields, so that log
/// lines within it carry them. Nothing for a span that is not sampled.
pub fn record_ids(span: &Span) {
    let cx = span.context();
    let otel = cx.span();
    let context = otel.span_context();
    if context.is_sampled() {
        span.record("trace_id", tracing::field::display(context.trace_id()));
        span.record("span_id", tracing::field::display(context.span_id()));
    }
}

/// A client span for a gRPC call `service`/`method` (`rpc.*` attributes; record the outcome
/// with [`record_grpc_status`]), the child of the current span when that one is sampled;
/// disabled (and free) otherwise: a call no traced work caused is not traced. Inject the
/// context with [`inject_metadata`] while the span is current.
pub fn rpc_client_span(service: &'static str, method: &'static str) -> Span {
    if current_parent().is_none() {
        return Span::none();
    }
    tracing::info_span!(
        target: "otel::client",
        "gRPC call",
        otel.name = format_args!("{service}/{method}"),
        otel.kind = "client",
        rpc.system = "grpc",
        rpc.service = service,
        rpc.method = method,
        rpc.grpc.status_code = Empty,
        otel.status_code = Empty,
    )
}

/// An internal span `name` for work that a traced request caused but that runs elsewhere (a
/// background task), the child of `parent`; disabled without one.
pub fn follow_up_span(name: &'static str, parent: Option<&Parent>) -> Span {
    let Some(Parent(cx)) = parent else {
        return Span::none();
    };
    let span =
        tracing::info_span!(target: "otel::internal", parent: None, "follow-up", otel.name = name);
    let _ = span.set_parent(cx.clone());
    span
}

/// Records a gRPC call's status code (`tonic::Code as i32`) on its span; an error status for
/// codes the conventions count as errors (every code but OK on a client span).
pub fn record_grpc_status(span: &Span, code: i32, client: bool) {
    span.record("rpc.grpc.status_code", code);
    let error = if client {
        code != 0
    } else {
        // Unknown, DeadlineExceeded, Unimplemented, Internal, Unavailable, DataLoss.
        matches!(code, 2 | 4 | 12 | 13 | 14 | 15)
    };
    if error {
        span.record("otel.status_code", "error");
    }
}

/// A client span for an outgoing HTTP request `method` (no URL: a target is never recorded),
/// the child of `cause` when given, else of the current span when that one is sampled;
/// disabled otherwise. Inject the context with [`inject_headers`] while the span is current,
/// and record the answer with [`record_http_status`].
pub fn http_client_span(method: &'static str, cause: Option<&Parent>) -> Span {
    let Some(Parent(cx)) = cause.cloned().or_else(current_parent) else {
        return Span::none();
    };
    let span = tracing::info_span!(
        target: "otel::client",
        parent: None,
        "HTTP request",
        otel.name = method,
        otel.kind = "client",
        http.request.method = method,
        http.response.status_code = Empty,
        otel.status_code = Empty,
    );
    let _ = span.set_parent(cx);
    span
}

/// Records an HTTP answer's status on a span; 5xx are errors on a server span, 4xx and 5xx on
/// a client span.
pub fn record_http_status(span: &Span, status: u16, client: bool) {
    // As i64: an unsigned value would reach the exporter as text.
    span.record("http.response.status_code", i64::from(status));
    if status >= 500 || (client && status >= 400) {
        span.record("otel.status_code", "error");
    }
}

/// A client span for a database statement: `db.system` (`postgresql`, `sqlite`), the
/// operation (`INSERT`, `SELECT`, ...) and the table; never the statement's parameters. A
/// child of the current span when that one is sampled; disabled otherwise.
pub fn db_span(system: &'static str, operation: &'static str, table: &'static str) -> Span {
    if current_parent().is_none() {
        return Span::none();
    }
    tracing::info_span!(
        target: "otel::db",
        "database statement",
        otel.name = format_args!("{operation} {table}"),
        otel.kind = "client",
        db.system = system,
        db.operation.name = operation,
        db.collection.name = table,
    )
}

/// A client span for a call of the stored procedure `procedure` (`db.system`,
/// `db.stored_procedure.name`; never its arguments), a child of the current span when that one
/// is sampled; disabled otherwise.
pub fn db_procedure_span(system: &'static str, procedure: &'static str) -> Span {
    if current_parent().is_none() {
        return Span::none();
    }
    tracing::info_span!(
        target: "otel::db",
        "database call",
        otel.name = procedure,
        otel.kind = "client",
        db.system = system,
        db.stored_procedure.name = procedure,
    )
}
