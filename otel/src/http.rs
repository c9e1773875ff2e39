//! Server spans for HTTP requests: one per API request ([`server_span`]) and per redirect
//! ([`edge_span`]), each only when the sampler picks the request ([`picked`]).

use crate::context::{TRACEPARENT_HEADER, extract};
use crate::{enabled, record_http_status, record_ids};
use tracing::Span;
use tracing::field::Empty;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The context a request's server span continues, when tracing is on and the sampler picks the
/// request: the caller's `traceparent` (`tracestate` too) when it sent one and the sampler
/// follows it, else a new trace when the root rule keeps one. `None`: make no span. With
/// tracing off this is one flag read; unpicked, a header lookup and one random draw (plus
/// parsing the caller's `traceparent`, when it sent one). See the `sampler` module for why a
/// request is decided before its span exists.
pub(crate) fn picked(headers: &http::HeaderMap) -> Option<opentelemetry::Context> {
    if !enabled() {
        return None;
    }
    let sampler = crate::SAMPLER.get()?;
    if headers.contains_key(&TRACEPARENT_HEADER) {
        let parent = extract(headers);
        sampler.decide(&parent).then_some(parent)
    } else {
        // The trace would start here: the root rule alone, before any context is built.
        sampler.decide_root().then(opentelemetry::Context::new)
    }
}

/// A server span for an API request, named `METHOD route` after the route template (never the
/// path itself: it may hold a code or a key), continuing the caller's trace from `headers`.
/// `None` when tracing is off or the sampler does not pick the request ([`picked`]). Record
/// the answer with [`crate::record_http_status`].
pub fn server_span(method: &http::Method, route: &str, headers: &http::HeaderMap) -> Option<Span> {
    let parent = picked(headers)?;
    let span = tracing::info_span!(
        target: "otel::http",
        parent: None,
        "HTTP request",
        otel.name = format_args!("{method} {route}"),
        otel.kind = "server",
        http.request.method = method.as_str(),
        http.route = route,
        http.response.status_code = Empty,
        otel.status_code = Empty,
        trace_id = Empty,
        span_id = Empty,
    );
    let _ = span.set_parent(parent);
    record_ids(&span);
    Some(span)
}

/// A server span for a redirect (`GET|HEAD /{code}`), only when tracing is on and the sampler
/// picks it ([`picked`]: with `parentbased_traceidratio`, that ratio of redirects without a
/// `traceparent`). The code is never recorded. Its target, `otel::edge`, is not among the
/// [`crate::LOGGED_SPANS`]: a redirect writes no log line of its own, so the log layer is spared
/// formatting its fields.
pub fn edge_span(method: &http::Method, headers: &http::HeaderMap) -> Option<Span> {
    let parent = picked(headers)?;
    let span = if method == http::Method::HEAD {
        tracing::info_span!(
            target: "otel::edge",
            parent: None,
            "HEAD /{code}",
            otel.kind = "server",
            http.request.method = "HEAD",
            http.route = "/{code}",
            http.response.status_code = Empty,
            otel.status_code = Empty,
            trace_id = Empty,
            span_id = Empty,
        )
    } else {
        tracing::info_span!(
            target: "otel::edge",
            parent: None,
            "GET /{code}",
            otel.kind = "server",
            http.request.method = "GET",
            http.route = "/{code}",
            http.response.status_code = Empty,
            otel.status_code = Empty,
            trace_id = Empty,
            span_id = Empty,
        )
    };
    let _ = span.set_parent(parent);
    record_ids(&span);
    Some(span)
}

/// `answer` within `span` when there is one (from [`server_span`] or [`edge_span`]), recording
/// the answer's status on it; without a span, within a disabled one (a check per poll).
///
/// A plain function returning a combinator, not an `async fn`: an `async fn` keeps its argument
/// and the future it awaits side by side, twice the size of `answer`, and the HTTP server moves
/// every request's future into a box.
pub fn answer_in<B>(
    span: Option<Span>,
    answer: impl Future<Output = http::Response<B>>,
) -> impl Future<Output = http::Response<B>> {
    use futures::FutureExt;
    let within = span.clone().unwrap_or_else(Span::none);
    tracing::Instrument::instrument(answer, within).map(move |response| {
        if let Some(span) = span {
            record_http_status(&span, response.status().as_u16(), false);
        }
        response
    })
}
