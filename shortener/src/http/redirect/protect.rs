//! Password-protected links at the edge: `GET|HEAD /{code}` answers a small form (never the
//! target), and `POST /{code}` with the right password answers a page that continues to it.
//!
//! The target only ever leaves in the answer to a POST whose password verified: the cache
//! holds a protected link's target with its hash, and every path that would answer it from
//! either (a GET, a HEAD, a bot, a wrong password) answers the form instead. Attempts are
//! limited per client address and code; verifying runs in the node's bounded pool of password
//! checks (`limits::PasswordChecks`), since each costs tens of milliseconds and 19 MiB, and a
//! full pool answers 429 at once.
//!
//! Why the right password answers a page and not a redirect: the form page's policy says
//! `form-action 'self'`, and Chromium applies it to every redirect that follows the form's
//! submission, so a 302/303 to another origin is refused and the user stays on the form.
//! Loosening `form-action` to any origin would let an injected form post the password
//! anywhere. So the POST answers `200` with a small `no-store` page whose
//! `<meta http-equiv="refresh">` (and a visible link) starts a new navigation to the target
//! once the submission has ended: a navigation no `form-action` governs. A client that asks
//! for `application/json` gets `{"url": ...}` instead, and its refusals as JSON errors.

use super::super::HttpState;
use super::{Seen, Target, count_visit, gone};
use crate::domain::PasswordHash;
use crate::http::body::Unread;
use crate::limits::CheckRefused;
use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use sha2::{Digest, Sha256};
use std::net::SocketAddr;
use std::sync::{Arc, LazyLock};

/// The largest form body read.
const MAX_FORM: usize = 4 * 1024;

/// The form's own style, allowed by its hash in the page's policy (no other inline style, and
/// no script at all).
const STYLE: &str = "body{font-family:system-ui,sans-serif;max-width:28rem;margin:4rem auto;padding:0 1rem;color:#1b1f24}\
label{display:block;font-weight:600;margin:1rem 0 .25rem}input{width:100%;padding:.5rem;font:inherit}\
button{margin-top:1rem;padding:.5rem 1rem;font:inherit}.error{color:#b42318}a{overflow-wrap:anywhere}";

static POLICY: LazyLock<HeaderValue> = LazyLock::new(|| {
    let digest = base64::engine::general_purpose::STANDARD.encode(Sha256::digest(STYLE.as_bytes()));
    HeaderValue::try_from(format!(
        "default-src 'none'; style-src 'sha256-{digest}'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ))
    .expect("an ASCII policy")
});

/// `text` with the HTML specials escaped.
pub(super) fn escape(text: &str) -> String {
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
    if head {
        // The headers GET would get, its length included, without the page.
        let length = HeaderValue::from(page.len());
        let mut response = page_response(status, String::new());
        response
            .headers_mut()
            .insert(header::CONTENT_LENGTH, length);
        return response;
    }
    page_response(status, page)
}

/// An HTML page of this module with its locked-down headers.
fn page_response(status: StatusCode, page: String) -> Response {
    let mut response = Response::new(Body::from(page));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    lock_down(response)
}

/// The headers every answer of this module carries, HTML or JSON: never stored, no script,
/// framed by no one, sending no referrer.
fn lock_down(mut response: Response) -> Response {
    let headers = response.headers_mut();
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

/// Whether the client asked for JSON (`Accept` names `application/json`): an API client rather
/// than a browser's form submission, which never does.
fn wants_json(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|item| {
            item.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .eq_ignore_ascii_case("application/json")
        })
}

/// A refused POST: the form again with `message`, or for a JSON client the JSON error
/// `error`; `Retry-After` when given.
fn refuse(
    code: &str,
    json: bool,
    status: StatusCode,
    error: &'static str,
    message: &str,
    retry_after: Option<u64>,
) -> Response {
    let mut response = if json {
        lock_down(super::super::ApiError::new(status, error, message).into_response())
    } else {
        form(status, code, Some(message), false)
    };
    if let Some(seconds) = retry_after {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    response
}

/// The answer to the right password: a page that continues to `target` by a navigation of
/// its own (see the module's comment), or `{"url": target}` for a JSON client. Never stored.
fn proceed(target: &HeaderValue, json: bool) -> Response {
    let target = String::from_utf8_lossy(target.as_bytes());
    if json {
        return lock_down(axum::Json(serde_json::json!({ "url": target })).into_response());
    }
    let target = escape(&target);
    page_response(
        StatusCode::OK,
        format!(
            "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
             <meta http-equiv=\"refresh\" content=\"0;url={target}\">\
             <title>Continuing</title><style>{STYLE}</style></head><body>\
             <h1>Password accepted</h1><p>Continuing to the link&#39;s target. If nothing happens, \
             <a id=\"continue\" href=\"{target}\" rel=\"noreferrer\">continue to {target}</a>.</p>\
             </body></html>\n"
        ),
    )
}

/// `POST /{code}`: for the right password the page that continues to the target, for a wrong
/// one the form again. `key` is the link's key on the request's domain (attempts are limited,
/// and the visit counted, under it).
pub(super) async fn unlock(
    state: &HttpState,
    peer: SocketAddr,
    code: &str,
    key: &str,
    headers: &HeaderMap,
    body: Body,
    (target, domain): (Target, Option<&crate::domain::Domain>),
) -> (Response, &'static str) {
    let Some(hash) = target.password().cloned() else {
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
    let json = wants_json(headers);
    if !form_type(headers) {
        // Not a guess: nothing is read or charged, and the caller learns what to send.
        return (
            refuse(
                code,
                json,
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "Send the password as a form: Content-Type application/x-www-form-urlencoded, field password.",
                None,
            ),
            "refused",
        );
    }
    let client = state.client_policy.client(peer, headers);
    if let Err(wait) = state.limits.password_attempt(client, key) {
        state.metrics.rate_limited("password");
        let seconds = wait.as_secs().max(1);
        return (
            refuse(
                code,
                json,
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limited",
                &format!("Too many attempts; try again in {seconds} s."),
                Some(seconds),
            ),
            "rate_limited",
        );
    }
    let bytes = match crate::http::body::read_public(body, MAX_FORM).await {
        Ok(bytes) => bytes,
        Err(unread) => {
            let (status, error, message) = unread_form(unread);
            return (refuse(code, json, status, error, message, None), "refused");
        }
    };
    let password = password_field(&bytes);
    let right = match password {
        Some(password) if !password.is_empty() && password.len() <= crate::domain::MAX_PASSWORD => {
            let hash: Arc<PasswordHash> = hash;
            match state
                .limits
                .password_checks()
                .run(client, move || hash.verify(&password))
                .await
            {
                Ok(right) => right,
                Err(CheckRefused::Failed) => false,
                Err(CheckRefused::Busy) => {
                    state.metrics.rate_limited("password_checks");
                    return (
                        refuse(
                            code,
                            json,
                            StatusCode::TOO_MANY_REQUESTS,
                            "busy",
                            "Too many passwords are being checked right now; try again in a moment.",
                            Some(1),
                        ),
                        "busy",
                    );
                }
            }
        }
        _ => false,
    };
    if !right {
        return (
            refuse(
                code,
                json,
                StatusCode::FORBIDDEN,
                "wrong_password",
                "That password is not right.",
                None,
            ),
            "wrong_password",
        );
    }
    if !count_visit(state, peer, key, Seen::of(false, headers), headers, &target) {
        // Past its visit limit: as a GET of a gone link answers on its domain (its
        // `expired_url`, if it has one) to the form; a JSON caller is told 410.
        let answer = if json { gone() } else { super::gone_on(domain) };
        return (answer, "gone");
    }
    (proceed(&target.location, json), "redirect")
}

/// Whether the request's body is a form, as a browser posts the password page's.
fn form_type(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .eq_ignore_ascii_case("application/x-www-form-urlencoded")
        })
}

/// What a GET or HEAD of a protected link answers: the form.
pub(super) fn locked(code: &str, method: &Method) -> (Response, &'static str) {
    (
        form(StatusCode::OK, code, None, method == Method::HEAD),
        "protected",
    )
}

/// How a password form that was not read is refused: its status, error code and message.
fn unread_form(unread: Unread) -> (StatusCode, &'static str, &'static str) {
    match unread {
        Unread::TooLarge => (
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            "The form is too large.",
        ),
        Unread::TooSlow => (
            StatusCode::REQUEST_TIMEOUT,
            "body_timeout",
            "The form took too long to arrive.",
        ),
        Unread::Broken => (
            StatusCode::BAD_REQUEST,
            "body_unreadable",
            "The form could not be read.",
        ),
    }
}
