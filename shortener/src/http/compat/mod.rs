//! Other shorteners' APIs, each a dialect a node speaks when `SHORTENER_COMPAT` names it (see
//! docs/compat.md). A dialect is a thin transport: it reads its own request shape, admits the
//! caller through the same [`crate::access::Admission`] as the JSON API (the key is the one
//! the JSON API takes, with its tenant, scopes and rate limits), calls the same link and stats
//! services (validation, blocklist, history and webhooks apply unchanged), and writes its own
//! answer shape. A dialect not spoken has no route: its paths answer 404 like any unknown code.
//! Each request is counted in `shortener_compat_requests_total{dialect, action, outcome}`.
//! Pages of other origins may call the dialects as `SHORTENER_COMPAT_CORS_ORIGINS` allows
//! ([`cors`]); the node's own API and console never carry that layer.

pub mod bitly;
pub mod cors;
pub mod shlink;
pub mod yourls;

use super::HttpState;
use crate::access::Operation;
use crate::config::{CorsOrigins, Dialect, Dialects};
use crate::domain::{Caller, Error};
use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Method, header};
use std::sync::Arc;

/// The routes of the dialects `dialects` names, each request in a server span named after its
/// route when tracing is on (as the JSON API's: the query, which holds the key, is never
/// recorded), and answered to the browser origins `origins` allows (`cors`).
pub fn router(dialects: Dialects, origins: CorsOrigins) -> Router<Arc<HttpState>> {
    if !Dialect::ALL.into_iter().any(|d| dialects.speaks(d)) {
        // A route layer on no routes is refused by the router.
        return Router::new();
    }
    let mut router = Router::new();
    if dialects.speaks(Dialect::Yourls) {
        router = router.route(
            yourls::PATH,
            axum::routing::get(yourls::api).post(yourls::api),
        );
    }
    if dialects.speaks(Dialect::Bitly) {
        let path = |rest: &str| format!("/{}/{rest}", bitly::PATH_WORD);
        router = router
            .route(
                &path("shorten"),
                axum::routing::post(bitly::shorten).fallback(bitly::method_not_allowed),
            )
            .route(
                &path("expand"),
                axum::routing::post(bitly::expand).fallback(bitly::method_not_allowed),
            )
            .route(
                &path("bitlinks/{*id}"),
                axum::routing::get(bitly::bitlinks).fallback(bitly::method_not_allowed),
            )
            // Bitly's create (`POST /v4/bitlinks`) is not served: a catch-all needs a segment,
            // so the bare path is routed here to be refused as not allowed, not unknown.
            .route(
                &path("bitlinks"),
                axum::routing::any(bitly::method_not_allowed),
            )
            .route(
                &path("user"),
                axum::routing::get(bitly::user).fallback(bitly::method_not_allowed),
            )
            .route(
                &path("groups"),
                axum::routing::get(bitly::groups).fallback(bitly::method_not_allowed),
            )
            .route(
                &path("groups/{guid}"),
                axum::routing::get(bitly::groups).fallback(bitly::method_not_allowed),
            )
            .route(&path("{*rest}"), axum::routing::any(bitly::unknown));
    }
    if dialects.speaks(Dialect::Shlink) {
        router = router.merge(shlink::router());
    }
    let router = router.route_layer(axum::middleware::from_fn(super::trace_api));
    if origins == CorsOrigins::None {
        return router;
    }
    // A layer, not a route layer: a preflight is answered on a path whose methods do not
    // include OPTIONS.
    router.layer(axum::middleware::from_fn_with_state(
        Arc::new(origins),
        cors::layer,
    ))
}

/// The most bytes of a form body a dialect reads.
pub const MAX_FORM_BYTES: usize = 64 * 1024;

/// A request's parameters: its query's, then (for a form `POST`) its body's, a later value of
/// a name winning over an earlier one (as PHP's `$_REQUEST` has it).
#[derive(Debug, Default, Clone)]
pub struct Params(Vec<(String, String)>);

impl Params {
    /// The parameters of a request of `method` with `query`, `headers` and `body`: a `POST`
    /// body is read when it is `application/x-www-form-urlencoded` (at most
    /// [`MAX_FORM_BYTES`]); any other body is refused with the message to send.
    pub async fn read(
        method: &Method,
        query: Option<&str>,
        headers: &HeaderMap,
        body: Body,
    ) -> Result<Self, String> {
        let mut pairs: Vec<(String, String)> = query
            .map(|q| {
                url::form_urlencoded::parse(q.as_bytes())
                    .into_owned()
                    .collect()
            })
            .unwrap_or_default();
        if method == Method::POST {
            let media = headers
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .map(|v| {
                    v.split(';')
                        .next()
                        .unwrap_or_default()
                        .trim()
                        .to_ascii_lowercase()
                })
                .unwrap_or_default();
            // Read before the request is authenticated (a signature may be in it): bounded in
            // time as well as size.
            let bytes = crate::http::body::read_public(body, MAX_FORM_BYTES)
                .await
                .map_err(|unread| unread.message(MAX_FORM_BYTES))?;
            if media == "application/x-www-form-urlencoded" {
                pairs.extend(url::form_urlencoded::parse(&bytes).into_owned());
            } else if !bytes.is_empty() {
                return Err("send the parameters in the query or as an \
                     application/x-www-form-urlencoded body"
                    .to_string());
            }
        }
        Ok(Self(pairs))
    }

    /// The last value of `name`, if any.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The last value of `name`, unless it is absent or empty.
    pub fn non_empty(&self, name: &str) -> Option<&str> {
        self.get(name).filter(|v| !v.is_empty())
    }
}

/// Authenticates `key` exactly as the JSON API authenticates `Authorization: Bearer <key>`
/// (a key the JSON API refuses is refused here), counting a refusal for `operation`.
pub async fn authenticate(
    state: &HttpState,
    key: &str,
    operation: Operation,
) -> Result<Caller, Error> {
    let header = format!("Bearer {key}");
    state.admission.authenticate(Some(&header), operation).await
}

/// The metric outcome of a failed request.
pub fn outcome(error: &Error) -> &'static str {
    match error {
        Error::Unauthenticated(_) => "unauthenticated",
        Error::Forbidden(_) | Error::HostNotAllowed(_) => "forbidden",
        Error::NotFound(_) | Error::Gone(_) => "not_found",
        Error::RateLimited { .. } => "rate_limited",
        Error::AliasTaken(_) | Error::DomainTaken(_) | Error::Conflict { .. } => "conflict",
        Error::BadRequest { .. } | Error::Invalid { .. } | Error::IdempotencyMismatch => "invalid",
        Error::Unavailable { .. } => "unavailable",
        Error::Internal(_) => "error",
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn each_dialect_path_is_a_reserved_word() {
        for word in [super::yourls::PATH_FILE, "rest", super::bitly::PATH_WORD] {
            assert!(
                codespace::shape::is_reserved(word),
                "{word} is not reserved"
            );
        }
        assert_eq!(
            super::yourls::PATH,
            format!("/{}", super::yourls::PATH_FILE)
        );
    }
}
