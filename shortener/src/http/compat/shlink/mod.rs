//! Shlink's REST API (v3) under `/rest`: health, short URLs, tags, domains, redirect rules and
//! visits, answered in Shlink's JSON shapes with its problem+json errors. The caller sends one
//! of our API keys as `X-Api-Key` (or, for the legacy `shorten` action, as `apiKey`); it is
//! admitted as `Authorization: Bearer <key>` is on `/api/v1`. See docs/compat.md for what each
//! endpoint serves and how it differs.

mod body;
mod domains;
mod list;
mod problem;
mod rules;
mod short_urls;
mod tags;
mod visits;

use super::authenticate;
use crate::access::Operation;
use crate::domain::{Caller, Error, ShortCode};
use crate::http::HttpState;
use axum::Router;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
pub use problem::Problem;
use std::sync::Arc;

/// The dialect's metric label.
const DIALECT: &str = "shlink";

/// The Shlink version whose API the dialect follows (what `health` reports): 4.3 is the
/// first with `hasRedirectRules`, and the clients turn on no feature this node lacks for it.
pub const SHLINK_VERSION: &str = "4.3.0";

/// The dialect's routes (all under the reserved word `rest`).
pub fn router() -> Router<Arc<HttpState>> {
    Router::new()
        .route("/rest/health", get(health))
        .route("/rest/v3/health", get(health))
        .route(
            "/rest/v3/short-urls",
            get(list::list).post(short_urls::create),
        )
        .route("/rest/v3/short-urls/shorten", get(short_urls::shorten))
        .route(
            "/rest/v3/short-urls/{code}",
            get(short_urls::get)
                .patch(short_urls::edit)
                .delete(short_urls::delete),
        )
        .route(
            "/rest/v3/short-urls/{code}/redirect-rules",
            get(rules::get).post(rules::set),
        )
        .route(
            "/rest/v3/tags",
            get(tags::list).put(tags::rename).delete(tags::delete),
        )
        .route("/rest/v3/tags/stats", get(tags::stats))
        .route("/rest/v3/domains", get(domains::list))
        .route(
            "/rest/v3/domains/redirects",
            axum::routing::patch(domains::redirects),
        )
        .route("/rest/v3/visits", get(visits::overview))
        // Deleting visits is not served: 404 `not-found`, as for Shlink's other unserved paths.
        .route(
            "/rest/v3/short-urls/{code}/visits",
            get(visits::short_url).delete(unknown),
        )
        .route("/rest/v3/tags/{tag}/visits", get(visits::other))
        .route("/rest/v3/domains/{host}/visits", get(visits::other))
        .route("/rest/v3/visits/orphan", get(visits::other).delete(unknown))
        .route("/rest/v3/visits/non-orphan", get(visits::other))
        // Set on the routes above only: `any` routes answer every method themselves.
        .method_not_allowed_fallback(wrong_method)
        .route("/rest", axum::routing::any(unknown))
        .route("/rest/", axum::routing::any(unknown))
        .route("/rest/{*rest}", axum::routing::any(unknown))
}

/// Another method on one of the dialect's paths: 405 as problem+json.
async fn wrong_method(
    axum::extract::State(state): axum::extract::State<Arc<HttpState>>,
) -> Response {
    finish(
        &state,
        "unknown",
        Err(Problem::of_status(StatusCode::METHOD_NOT_ALLOWED).into()),
    )
}

/// Any other path under `/rest`: Shlink's `not-found`, so a client reads the answer it expects.
async fn unknown(axum::extract::State(state): axum::extract::State<Arc<HttpState>>) -> Response {
    finish(&state, "unknown", Err(Problem::not_found().into()))
}

/// A request's failure: its answer and its metric outcome.
#[derive(Debug)]
pub struct Fail {
    problem: Box<Problem>,
    outcome: &'static str,
}

impl From<Error> for Fail {
    fn from(error: Error) -> Self {
        Fail {
            outcome: super::outcome(&error),
            problem: Box::new(Problem::of(&error)),
        }
    }
}

/// Maps the link service's error about `code` (asked for on its domain) to Shlink's answer: a
/// link not found, or gone, is `short-url-not-found` naming the code and the domain asked for.
pub(super) fn about(code: &ShortCode) -> impl Fn(Error) -> Fail + '_ {
    move |error| {
        let mut fail = Fail::from(error.clone());
        if let Error::NotFound(_) | Error::Gone(_) = error {
            fail.problem = Box::new(Problem::short_url_not_found(code.shown(), code.domain()));
        }
        fail
    }
}

impl From<Problem> for Fail {
    fn from(problem: Problem) -> Self {
        let outcome = match problem.status {
            StatusCode::UNAUTHORIZED => "unauthenticated",
            StatusCode::NOT_FOUND => "not_found",
            StatusCode::CONFLICT => "conflict",
            StatusCode::FORBIDDEN => "forbidden",
            StatusCode::METHOD_NOT_ALLOWED => "not_found",
            _ => "invalid",
        };
        Fail {
            problem: Box::new(problem),
            outcome,
        }
    }
}

/// What a handler gives back.
pub type Answer = Result<Response, Fail>;

/// Counts `answer` under `action` and turns it into the response.
fn finish(state: &HttpState, action: &'static str, answer: Answer) -> Response {
    match answer {
        Ok(response) => {
            state.metrics.compat_request(DIALECT, action, "ok");
            response
        }
        Err(fail) => {
            state.metrics.compat_request(DIALECT, action, fail.outcome);
            fail.problem.into_response()
        }
    }
}

/// JSON with status 200.
fn json(value: serde_json::Value) -> Response {
    axum::Json(value).into_response()
}

/// The caller whose `X-Api-Key` (or `key`, when given) the request carries, admitted for
/// `operation` as the JSON API admits it.
async fn admit(
    state: &HttpState,
    headers: &HeaderMap,
    key: Option<&str>,
    operation: Operation,
) -> Result<Caller, Fail> {
    let key = key.or_else(|| headers.get("x-api-key").and_then(|v| v.to_str().ok()));
    let Some(key) = key.map(str::trim).filter(|k| !k.is_empty()) else {
        return Err(Problem::missing_key().into());
    };
    let caller = authenticate(state, key, operation)
        .await
        .map_err(|_| Problem::invalid_key())?;
    state.admission.admit(&caller, operation)?;
    Ok(caller)
}

/// The value of `name` in the query of `uri`, if any (the last one).
fn query_value(uri: &Uri, name: &str) -> Option<String> {
    query_pairs(uri)
        .into_iter()
        .rev()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v)
}

/// The query of `uri` as pairs.
fn query_pairs(uri: &Uri) -> Vec<(String, String)> {
    uri.query()
        .map(|q| {
            url::form_urlencoded::parse(q.as_bytes())
                .into_owned()
                .collect()
        })
        .unwrap_or_default()
}

/// The path's code as text; a segment that does not decode to UTF-8 is no code, and becomes an
/// empty text that none matches, so that it is answered after the key check, as not found, in
/// Shlink's shape (not the router's plain-text 400).
fn path_text(
    code: Result<axum::extract::Path<String>, axum::extract::rejection::PathRejection>,
) -> String {
    code.map(|axum::extract::Path(text)| text)
        .unwrap_or_default()
}

/// The short code `text` of the path, on the domain the query's `domain` names (Shlink's
/// `DEFAULT` and none are the default domain).
fn short_code(state: &HttpState, text: &str, uri: &Uri) -> Result<ShortCode, Fail> {
    let named = query_value(uri, "domain").filter(|d| d != "DEFAULT");
    let domain = state
        .rules
        .domain(named.as_deref())
        .map_err(|e| Problem::invalid_data("domain", e.public_message()))?;
    // A domain named (its host, or `DEFAULT`) is the only one a code of generated shape is
    // found on, as on the JSON API; none names any.
    let explicit = query_value(uri, "domain").is_some_and(|d| !d.is_empty());
    ShortCode::parse(text, state.rules.code_length)
        .map(|code| {
            if explicit {
                code.on_named(domain)
            } else {
                code.on(domain)
            }
        })
        .map_err(|_| Problem::short_url_not_found(text, named.as_deref()).into())
}

/// `GET /rest/health` and `/rest/v3/health` (unauthenticated, as in Shlink).
async fn health(axum::extract::State(state): axum::extract::State<Arc<HttpState>>) -> Response {
    state.metrics.compat_request(DIALECT, "health", "ok");
    let body = serde_json::json!({
        "status": "pass",
        "version": SHLINK_VERSION,
        "links": {
            "about": "https://shlink.io",
            "project": "https://github.com/shlinkio/shlink",
        },
    });
    (
        [(header::CONTENT_TYPE, "application/health+json")],
        body.to_string(),
    )
        .into_response()
}
