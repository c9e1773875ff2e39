//! Password-protected links at the edge: `GET|HEAD /{code}` answers a small form (never the
//! target), and `POST /{code}` with the right password answers the redirect.
//!
//! The target only ever leaves in the `Location` of a POST whose password verified: the cache
//! holds a protected link's target with its hash, and every path that would answer it from
//! either (a GET, a HEAD, a bot, a wrong password) answers the form instead. Attempts are
//! limited per client address and code; verifying runs on the blocking pool, a few at a time
//! per node, since each costs tens of milliseconds and 19 MiB.

use super::super::HttpState;
use super::{Target, gone};
use crate::clicks;
use crate::domain::PasswordHash;
use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use sha2::{Digest, Sha256};
use std::net::SocketAddr;
use std::sync::{Arc, LazyLock};
use tokio::sync::Semaphore;

/// The largest form body read.
const MAX_FORM: usize = 4 * 1024;

/// Password checks running at once on a node.
static VERIFYING: LazyLock<Semaphore> = LazyLock::new(|| {
    let cores = std::thread::available_parallelism().map_or(2, usize::from);
    Semaphore::new(cores.max(2))
});

/// The form's own style, allowed by its hash in the page's policy (no other inline style, and
/// no script at all).
const STYLE: &str = "body{font-family:system-ui,sans-serif;max-width:28rem;margin:4rem auto;padding:0 1rem;color:#1b1f24}\
label{display:block;font-weight:600;margin:1rem 0 .25rem}input{width:100%;padding:.5rem;font:inherit}\
button{margin-top:1rem;padding:.5rem 1rem;font:inherit}.error{color:#b42318}";

static POLICY: LazyLock<HeaderValue> = LazyLock::new(|| {
    let digest = base64::engine::general_purpose::STANDARD.encode(Sha256::digest(STYLE.as_bytes()));
    HeaderValue::try_from(format!(
        "default-src 'none'; style-src 'sha256-{digest}'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ))
    .expect("an ASCII policy")
});

/// `text` with the HTML specials escaped.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

/// The form page, with `message` (if any) above it.
pub(super) fn form(status: StatusCode, code: &str, message: Option<&str>, head: bool) -> Response {
    let message = message.map_or(String::new(), |m| {
        format!("<p class=\"error\" role=\"alert\">{}</p>", escape(m))
    });
    let page = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>Protected link</title><style>{STYLE}</style></head><body>\
         <h1>This link is protected</h1><p>Enter the password to continue to its target.</p>{message}\
         <form method=\"post\" action=\"/{code}\"><label for=\"password\">Password</label>\
         <input id=\"password\" name=\"password\" type=\"password\" required autofocus autocomplete=\"off\" maxlength=\"256\">\
         <button type=\"submit\">Continue</button></form></body></html>\n",
        code = escape(code)
    );
    let mut response = if head {
        Response::new(Body::empty())
    } else {
        Response::new(Body::from(page))
    };
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(header::CONTENT_SECURITY_POLICY, POLICY.clone());
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response
}

/// The `password` field of a form body, if it has one.
fn password_field(body: &[u8]) -> Option<String> {
    url::form_urlencoded::parse(body)
        .find(|(name, _)| name == "password")
        .map(|(_, value)| value.into_owned())
}

/// Whether `password` is the one `hash` was made from, checked on the blocking pool.
async fn verify(hash: Arc<PasswordHash>, password: String) -> bool {
    let Ok(_permit) = VERIFYING.acquire().await else {
        return false;
    };
    tokio::task::spawn_blocking(move || hash.verify(&password))
        .await
        .unwrap_or(false)
}

/// `POST /{code}`: the redirect for the right password, the form again for a wrong one.
pub(super) async fn unlock(
    state: &HttpState,
    peer: SocketAddr,
    code: &str,
    headers: &HeaderMap,
    body: Body,
    target: Target,
) -> (Response, &'static str) {
    let Some(hash) = target.password.clone() else {
        // Only a protected link takes a POST.
        let mut response = (
            StatusCode::METHOD_NOT_ALLOWED,
            "this link takes GET and HEAD\n",
        )
            .into_response();
        response
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return (response, "not_allowed");
    };
    let client = state.client_policy.client(peer, headers);
    if let Err(wait) = state.limits.password_attempt(client, code) {
        state.metrics.rate_limited("password");
        let mut response = form(
            StatusCode::TOO_MANY_REQUESTS,
            code,
            Some(&format!(
                "Too many attempts; try again in {} s.",
                wait.as_secs().max(1)
            )),
            false,
        );
        response.headers_mut().insert(
            header::RETRY_AFTER,
            HeaderValue::from(wait.as_secs().max(1)),
        );
        return (response, "rate_limited");
    }
    let form_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .eq_ignore_ascii_case("application/x-www-form-urlencoded")
        });
    let Ok(bytes) = axum::body::to_bytes(body, MAX_FORM).await else {
        return (
            form(
                StatusCode::PAYLOAD_TOO_LARGE,
                code,
                Some("The form is too large."),
                false,
            ),
            "refused",
        );
    };
    let password = form_type.then(|| password_field(&bytes)).flatten();
    let right = match password {
        Some(password) if !password.is_empty() && password.len() <= crate::domain::MAX_PASSWORD => {
            verify(hash, password).await
        }
        _ => false,
    };
    if !right {
        return (
            form(
                StatusCode::FORBIDDEN,
                code,
                Some("That password is not right."),
                false,
            ),
            "wrong_password",
        );
    }
    let user_agent = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok());
    let visit = clicks::classify(false, user_agent);
    if !target.admits(visit) {
        return (gone(), "gone");
    }
    state.clicks.record(code, visit);
    state
        .analytics
        .record(code, &target.tenant, visit, headers, || {
            state.client_policy.client(peer, headers)
        });
    let mut response = Response::new(Body::empty());
    // A 307 or 308 would have the browser POST the password on to the target: after a form,
    // the redirect is a 303 (301 and 302 already turn into a GET).
    *response.status_mut() = match state.redirect_status {
        StatusCode::TEMPORARY_REDIRECT | StatusCode::PERMANENT_REDIRECT => StatusCode::SEE_OTHER,
        other => other,
    };
    response
        .headers_mut()
        .insert(header::LOCATION, target.location);
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    (response, "redirect")
}

/// What a GET or HEAD of a protected link answers: the form.
pub(super) fn locked(code: &str, method: &Method) -> (Response, &'static str) {
    (
        form(StatusCode::OK, code, None, method == Method::HEAD),
        "protected",
    )
}
