//! What runs before a `Links` call's message is decoded: the key is checked (an unauthenticated
//! call is refused without reading its body), the body is bounded by what its method needs, and
//! the node's calls in flight are capped, a streaming call's until its answer ends (`held`).
//! Health and reflection pass with a small bound of their own. A message that does not decode is reported as INVALID_ARGUMENT, not INTERNAL.

use super::decoded::{self, Reckoner, Refusal, Shape};
use super::held::{self, StreamBounds};
use crate::access::{Admission, Operation};
use crate::domain::Error;
use crate::net::idle::ConnectionInfo;
use futures::future::BoxFuture;
use hyper::body::{Body, Bytes, Frame, SizeHint};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::sync::Semaphore;
use tonic::Status;
use tonic::codegen::http;

/// The path prefix of the calls that need a key.
const LINKS: &str = "/shortener.v1.Links/";

/// The most bytes of any other call (health checks, reflection).
const OTHER_LIMIT: usize = 16 * 1024;

/// How many bytes a batch's or an import's message may hold decoded for each byte it may send.
/// A message of real items holds at most about ten times its bytes (a rule's condition of a
/// two-letter type and a one-letter value: ten bytes sent, a hundred held), one of empty items
/// two hundred times (an empty create: two bytes sent, four hundred held).
const DECODED_PER_BYTE: usize = 16;

/// The least a message may hold decoded, however small the batch bound: an import message of
/// its full 2,000 rows of short URLs holds about 300 KB.
const DECODED_FLOOR: usize = 16 << 20;

/// How large a request each method may send, in bytes of its body (framing included).
#[derive(Debug, Clone, Copy)]
pub struct BodyLimits {
    /// A create of one link without routing, or a domain's claim.
    pub create: usize,
    /// A create or update of one link with its routing (rules, split, app targets, UTM
    /// parameters, preview): what the JSON API takes for one ([`crate::domain::link_body_limit`]).
    pub routed: usize,
    /// A batch create.
    pub batch: usize,
    /// A get, delete or history (a code).
    pub small: usize,
    /// A list or export (a cursor and filters).
    pub query: usize,
    /// What a batch create's message, or one of an import's, may hold once decoded
    /// ([`decoded`]): sixteen times a batch's bytes, and at least 16 MiB.
    pub decoded: usize,
}

impl BodyLimits {
    /// The limits for target URLs of at most `max_url` bytes and batches of `batch_limit`.
    pub fn new(max_url: usize, batch_limit: usize) -> Self {
        let create = max_url + 1024;
        Self {
            create,
            routed: crate::domain::link_body_limit(max_url),
            batch: create * batch_limit + 1024,
            small: 1024,
            query: 4096,
            decoded: (DECODED_PER_BYTE * (create * batch_limit + 1024)).max(DECODED_FLOOR),
        }
    }

    /// The limit of a call to `method` of `Links`, and the operation it is. An import streams
    /// without a bound on its total: each of its messages is bounded by the server's message
    /// size limit (that of a batch), and it is read a chunk at a time.
    fn of(&self, method: &str) -> (usize, Operation) {
        match method {
            "BatchCreateLinks" => (self.batch, Operation::CreateBatch { items: 0 }),
            "ImportLinks" => (usize::MAX, Operation::Import),
            _ => self.small_call(method),
        }
    }

    /// The messages of `method` that are reckoned before they are decoded: those whose size
    /// lets empty items add up to far more memory than their bytes.
    fn reckoned(method: &str) -> Option<&'static Shape> {
        match method {
            "BatchCreateLinks" => Some(&decoded::BATCH),
            "ImportLinks" => Some(&decoded::IMPORT),
            _ => None,
        }
    }

    /// The limit of a call whose message is bounded by what one link, one domain or one query
    /// holds.
    fn small_call(&self, method: &str) -> (usize, Operation) {
        match method {
            "CreateLink" => (self.routed, Operation::Create),
            "DeleteLink" => (self.small, Operation::Delete),
            "UpdateLink" => (self.routed, Operation::Update),
            "GetLinkHistory" => (self.small, Operation::History),
            "GetLinkStats" | "GetTenantStats" => (self.small, Operation::Stats),
            "ListLinks" => (self.query, Operation::List),
            "ExportLinks" => (self.query, Operation::Export),
            "ClaimDomain" => (self.create, Operation::DomainWrite),
            // Room for both app-link files at their bound besides the URLs.
            "UpdateDomain" => (
                3 * self.create + 2 * crate::domain::MAX_APP_FILE_BYTES,
                Operation::DomainWrite,
            ),
            "DeleteDomain" => (self.small, Operation::DomainWrite),
            "GetDomain" => (self.small, Operation::DomainRead),
            "ListDomains" => (self.query, Operation::DomainRead),
            _ => (self.small, Operation::Read),
        }
    }
}

/// Shared by every connection's guard.
struct Shared {
    admission: Arc<Admission>,
    limits: BodyLimits,
    streams: StreamBounds,
    in_flight: Arc<Semaphore>,
}

/// The guard as a tower layer for tonic's server.
#[derive(Clone)]
pub struct GuardLayer(Arc<Shared>);

impl GuardLayer {
    /// A guard admitting through `admission`, bounding bodies by `limits`, and letting at most
    /// `max_in_flight` calls run at once on the node; a streaming call is in flight until its
    /// answer ends or its bound in `streams` passes ([`held`]).
    pub fn new(
        admission: Arc<Admission>,
        limits: BodyLimits,
        streams: StreamBounds,
        max_in_flight: usize,
    ) -> Self {
        Self(Arc::new(Shared {
            admission,
            limits,
            streams,
            in_flight: Arc::new(Semaphore::new(max_in_flight.max(1))),
        }))
    }
}

impl<S> tower::Layer<S> for GuardLayer {
    type Service = Guard<S>;

    fn layer(&self, inner: S) -> Guard<S> {
        Guard {
            inner,
            shared: Arc::clone(&self.0),
        }
    }
}

/// The guard in front of one service.
#[derive(Clone)]
pub struct Guard<S> {
    inner: S,
    shared: Arc<Shared>,
}

fn refuse(status: Status) -> http::Response<tonic::body::Body> {
    status.into_http()
}

impl<S> tower::Service<http::Request<tonic::body::Body>> for Guard<S>
where
    S: tower::Service<
            http::Request<tonic::body::Body>,
            Response = http::Response<tonic::body::Body>,
        > + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Self::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        let shared = Arc::clone(&self.shared);
        // The clone is ready only in its own poll_ready; swap so this call uses the one that is.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let call = request
            .extensions()
            .get::<ConnectionInfo>()
            .map(|info| info.activity.call());
        let links_call = request.uri().path().strip_prefix(LINKS).map(|method| {
            let (limit, operation) = shared.limits.of(method);
            let reckoner = BodyLimits::reckoned(method)
                .map(|shape| Box::new(Reckoner::new(shape, shared.limits.decoded)));
            (limit, operation, reckoner, shared.streams.of(method))
        });
        let Some((limit, operation, reckoner, stream_bound)) = links_call else {
            let request = request.map(|body| bounded(body, OTHER_LIMIT, None));
            return Box::pin(async move {
                let response = inner.call(request).await;
                drop(call);
                response
            });
        };
        let Ok(permit) = Arc::clone(&shared.in_flight).try_acquire_owned() else {
            return Box::pin(std::future::ready(Ok(refuse(Status::from(
                Error::RateLimited {
                    retry_after: std::time::Duration::from_secs(1),
                },
            )))));
        };
        let admission = Arc::clone(&shared.admission);
        Box::pin(async move {
            let authorization = request
                .headers()
                .get("authorization")
                .and_then(|v| v.to_str().ok());
            let caller = match admission.authenticate(authorization, operation).await {
                Ok(caller) => caller,
                Err(error) => return Ok(refuse(Status::from(error))),
            };
            let mut request = request.map(|body| bounded(body, limit, reckoner));
            request.extensions_mut().insert(caller);
            let response = inner.call(request).await.map(undecodable_is_invalid);
            match (response, stream_bound) {
                // The stream runs on in the body: the call is in flight until it ends.
                (Ok(response), Some(bound)) => Ok(held::hold(response, (permit, call), bound)),
                (response, _) => {
                    drop((permit, call));
                    response
                }
            }
        })
    }
}

/// `grpc-status` of INTERNAL, as it is written.
const INTERNAL_STATUS: &[u8] = b"13";

/// A response whose status is INTERNAL without the `error-code` every status of the service
/// carries came from tonic itself, before the handler ran: the request's message did not
/// decode. That is the caller's fault, so it is reported as INVALID_ARGUMENT.
fn undecodable_is_invalid(
    mut response: http::Response<tonic::body::Body>,
) -> http::Response<tonic::body::Body> {
    let headers = response.headers_mut();
    let internal = headers
        .get("grpc-status")
        .is_some_and(|s| s.as_bytes() == INTERNAL_STATUS);
    if internal && !headers.contains_key("error-code") {
        let code = tonic::Code::InvalidArgument as i32;
        headers.insert("grpc-status", http::HeaderValue::from(code));
        headers.insert(
            "grpc-message",
            http::HeaderValue::from_static(
                "the request is not a valid protobuf message for this method",
            ),
        );
        headers.insert(
            "error-code",
            http::HeaderValue::from_static("invalid_message"),
        );
    }
    response
}

fn bounded(
    body: tonic::body::Body,
    limit: usize,
    reckoner: Option<Box<Reckoner>>,
) -> tonic::body::Body {
    tonic::body::Body::new(Bounded {
        inner: body,
        left: limit,
        limit,
        reckoner,
    })
}

/// A request body cut off with RESOURCE_EXHAUSTED once it passes its method's limit, or once
/// one of its messages would hold more than its bound decoded (INVALID_ARGUMENT for bytes that
/// are no message).
struct Bounded {
    inner: tonic::body::Body,
    left: usize,
    limit: usize,
    reckoner: Option<Box<Reckoner>>,
}

/// The status of a message refused before it is decoded.
fn refusal_status(refusal: Refusal) -> Status {
    let (mut status, code) = match refusal {
        Refusal::TooLarge { bound } => (
            Status::resource_exhausted(format!(
                "a message of this request would take more than the {bound} bytes of memory \
                 this method allows once decoded: send fewer items in each message"
            )),
            "payload_too_large",
        ),
        Refusal::Malformed => (
            Status::invalid_argument("the request is not a valid protobuf message for this method"),
            "invalid_message",
        ),
    };
    status.metadata_mut().insert(
        "error-code",
        tonic::metadata::MetadataValue::from_static(code),
    );
    status
}

impl Body for Bounded {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let frame = match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => frame,
            other => return other,
        };
        if let Some(data) = frame.data_ref() {
            if data.len() > self.left {
                let limit = self.limit;
                self.left = 0;
                let mut status = Status::resource_exhausted(format!(
                    "the request is larger than the {limit} bytes this method accepts"
                ));
                status.metadata_mut().insert(
                    "error-code",
                    tonic::metadata::MetadataValue::from_static("payload_too_large"),
                );
                return Poll::Ready(Some(Err(status)));
            }
            self.left -= data.len();
            let this = &mut *self;
            if let Some(reckoner) = this.reckoner.as_mut()
                && let Err(refusal) = reckoner.feed(data)
            {
                this.left = 0;
                this.reckoner = None;
                return Poll::Ready(Some(Err(refusal_status(refusal))));
            }
        }
        Poll::Ready(Some(Ok(frame)))
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
    use super::*;
    use prost::Message;
    use proto::shortener::v1 as pb;

    fn reckoned(
        shape: &'static Shape,
        bound: usize,
        message: &impl Message,
    ) -> Result<(), Refusal> {
        Reckoner::new(shape, bound).feed(&decoded::framed(message))
    }

    /// The densest real messages the byte bounds let through are taken, at the default bounds
    /// and at the smallest batch bound; a batch of empty items within the byte bound is not.
    #[test]
    fn real_messages_fit_the_decoded_bound_and_empty_items_do_not() {
        let limits = BodyLimits::new(2048, 1000);
        // Items of 32 rules of 8 conditions each, types and values as short as they come.
        let condition = pb::Condition {
            r#type: "os".into(),
            key: String::new(),
            values: vec!["a".into()],
        };
        let rule = pb::Rule {
            url: "https://e.io/".into(),
            conditions: vec![condition; 8],
            variants: vec![],
        };
        let item = pb::CreateLinkRequest {
            url: "https://e.io/".into(),
            rules: vec![rule; 32],
            tags: vec!["t".into(); 20],
            ..Default::default()
        };
        let per_item = item.encoded_len() + 4;
        let dense = pb::BatchCreateLinksRequest {
            items: vec![item; limits.batch / per_item],
        };
        assert!(dense.encoded_len() <= limits.batch);
        assert_eq!(reckoned(&decoded::BATCH, limits.decoded, &dense), Ok(()));

        let empty = pb::BatchCreateLinksRequest {
            items: vec![pb::CreateLinkRequest::default(); limits.batch / 2 - 8],
        };
        assert!(empty.encoded_len() <= limits.batch);
        assert!(matches!(
            reckoned(&decoded::BATCH, limits.decoded, &empty),
            Err(Refusal::TooLarge { .. })
        ));

        // The smallest batch bound still takes an import message of its full 2,000 rows.
        let small = BodyLimits::new(2048, 1);
        let rows = pb::ImportLinksRequest {
            rows: vec![
                pb::ImportRow {
                    url: "https://example.com/a-short-path".into(),
                    tags: vec!["t".into()],
                    ..Default::default()
                };
                super::super::ROWS_PER_MESSAGE
            ],
            dry_run: false,
            ..Default::default()
        };
        assert_eq!(reckoned(&decoded::IMPORT, small.decoded, &rows), Ok(()));
    }

    #[test]
    fn the_internal_status_is_written_as_its_code() {
        assert_eq!(
            INTERNAL_STATUS,
            (tonic::Code::Internal as i32).to_string().as_bytes()
        );
    }
}
