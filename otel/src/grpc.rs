//! Server spans for gRPC calls: a tower layer for tonic servers.

use crate::{enabled, record_grpc_status, record_ids};
use bytes::Bytes;
use futures::future::{BoxFuture, Either};
use http_body::{Body, Frame, SizeHint};
use std::pin::Pin;
use std::task::{Context, Poll};
use tonic::body::Body as TonicBody;
use tracing::Span;
use tracing::field::Empty;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// Wraps a tonic server so that each call to one of the named services gets a server span
/// (`rpc.system`, `rpc.service`, `rpc.method`, `rpc.grpc.status_code`), continuing the caller's
/// `traceparent` from the call's metadata. Calls to other services (health checks, reflection)
/// get none, and with tracing off the layer adds nothing to a call.
#[derive(Debug, Clone, Copy)]
pub struct TraceLayer {
    services: &'static [&'static str],
}

impl TraceLayer {
    /// Traces calls to `services` (full names, `idalloc.v1.IdAllocator`).
    pub fn new(services: &'static [&'static str]) -> Self {
        Self { services }
    }
}

impl<S> tower::Layer<S> for TraceLayer {
    type Service = Traced<S>;

    fn layer(&self, inner: S) -> Traced<S> {
        Traced {
            inner,
            services: self.services,
        }
    }
}

/// The service [`TraceLayer`] makes.
#[derive(Debug, Clone)]
pub struct Traced<S> {
    inner: S,
    services: &'static [&'static str],
}

/// The service and method of a call path `/package.Service/Method`, when the service is one
/// of `services`; a method that is not a plain identifier is `_OTHER` (a client chose it).
fn route<'a>(services: &[&'static str], path: &'a str) -> Option<(&'static str, &'a str)> {
    let (service, method) = path.strip_prefix('/')?.split_once('/')?;
    let service = services.iter().find(|known| **known == service)?;
    let plain = !method.is_empty()
        && method.len() <= 64
        && method
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_');
    Some((service, if plain { method } else { "_OTHER" }))
}

impl<S> tower::Service<http::Request<TonicBody>> for Traced<S>
where
    S: tower::Service<http::Request<TonicBody>, Response = http::Response<TonicBody>>,
    S::Future: Send + 'static,
{
    type Response = http::Response<TonicBody>;
    type Error = S::Error;
    type Future = Either<S::Future, BoxFuture<'static, Result<Self::Response, S::Error>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<TonicBody>) -> Self::Future {
        if !enabled() {
            return Either::Left(self.inner.call(request));
        }
        let Some((service, method)) = route(self.services, request.uri().path()) else {
            return Either::Left(self.inner.call(request));
        };
        let Some(parent) = crate::http::picked(request.headers()) else {
            return Either::Left(self.inner.call(request));
        };
        let span = tracing::info_span!(
            target: "otel::grpc",
            parent: None,
            "gRPC call",
            otel.name = format_args!("{service}/{method}"),
            otel.kind = "server",
            rpc.system = "grpc",
            rpc.service = service,
            rpc.method = method,
            rpc.grpc.status_code = Empty,
            otel.status_code = Empty,
            trace_id = Empty,
            span_id = Empty,
        );
        let _ = span.set_parent(parent);
        record_ids(&span);
        let future = span.in_scope(|| self.inner.call(request));
        Either::Right(Box::pin(async move {
            let response = tracing::Instrument::instrument(future, span.clone()).await?;
            // A call that failed before its first message answers with its status in the
            // headers (trailers-only); otherwise the status comes in the trailers.
            if let Some(code) = status_in(response.headers()) {
                record_grpc_status(&span, code, false);
                return Ok(response);
            }
            Ok(response.map(|body| {
                TonicBody::new(StatusBody {
                    inner: body,
                    span: Some(span),
                })
            }))
        }))
    }
}

fn status_in(headers: &http::HeaderMap) -> Option<i32> {
    headers.get("grpc-status")?.to_str().ok()?.parse().ok()
}

/// A response body that records the call's status from its trailers and ends the span with
/// the body.
struct StatusBody {
    inner: TonicBody,
    span: Option<Span>,
}

impl Body for StatusBody {
    type Data = Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, tonic::Status>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(code) = frame.trailers_ref().and_then(status_in)
                    && let Some(span) = self.span.take()
                {
                    record_grpc_status(&span, code, false);
                }
            }
            Poll::Ready(Some(Err(status))) => {
                if let Some(span) = self.span.take() {
                    record_grpc_status(&span, status.code() as i32, false);
                }
            }
            Poll::Ready(None) => {
                self.span = None;
            }
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::route;

    #[test]
    fn only_named_services_are_traced_and_odd_methods_are_not_echoed() {
        let services = &["idalloc.v1.IdAllocator"];
        assert_eq!(
            route(services, "/idalloc.v1.IdAllocator/AllocateIds"),
            Some(("idalloc.v1.IdAllocator", "AllocateIds"))
        );
        assert_eq!(route(services, "/grpc.health.v1.Health/Check"), None);
        assert_eq!(
            route(services, "/idalloc.v1.IdAllocator/https:%2F%2Fexample.com"),
            Some(("idalloc.v1.IdAllocator", "_OTHER"))
        );
        assert_eq!(route(services, "nonsense"), None);
    }
}
