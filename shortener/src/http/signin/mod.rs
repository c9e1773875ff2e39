//! Signing in to the console with OpenID Connect, and the session's own routes:
//!
//! - `GET /console/oidc/login`: a new sign-in attempt (random `state`, `nonce` and PKCE
//!   verifier, kept in a short-lived `HttpOnly` cookie, never in a URL the node writes but the
//!   issuer's own authorization request), and a redirect to the issuer;
//! - `GET /console/oidc/callback`: checks `state` against the cookie, exchanges the code with
//!   the verifier, verifies the ID token, opens a session and sets its cookie;
//! - `GET /console/session`: who is signed in, their tenants and roles, and the anti-CSRF token;
//! - `POST /console/session/tenant`: switches the active tenant;
//! - `POST /console/oidc/logout`: signs out (the row is revoked) and answers where to send the
//!   browser to sign out at the issuer too, when it offers that.
//!
//! [`session_scope`] puts a session's caller in force for the JSON API when a request carries
//! the session cookie and no `Authorization` header, after the anti-CSRF checks.

mod flow;

pub use flow::{callback, login};

use super::api::{MAX_BODY_BYTES, read_json_up_to};
use super::{ApiError, HttpState};
use crate::signin::{CSRF_HEADER, Session, SessionError, SignIn};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

/// How long a sign-in attempt may take, in seconds.
const ATTEMPT_SECONDS: u32 = 600;

tokio::task_local! {
    /// The caller of the session the current JSON API request was made with.
    static SESSION_CALLER: crate::domain::Caller;
}

/// The caller of the session the current request was made with, if [`session_scope`] put one
/// in force.
pub fn session_caller() -> Option<crate::domain::Caller> {
    SESSION_CALLER.try_with(Clone::clone).ok()
}

fn cookie_name(signin: &SignIn, name: &str) -> String {
    if signin.secure() {
        format!("__Host-shortener-{name}")
    } else {
        format!("shortener-{name}")
    }
}

/// The value of cookie `name` in `headers`.
fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v)
}

fn set_cookie(signin: &SignIn, name: &str, value: &str, max_age: Option<u32>) -> HeaderValue {
    let secure = if signin.secure() { "; Secure" } else { "" };
    let age = max_age.map_or(String::new(), |s| format!("; Max-Age={s}"));
    let text = format!(
        "{}={value}; Path=/; HttpOnly; SameSite=Lax{secure}{age}",
        cookie_name(signin, name)
    );
    HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static("x=; Max-Age=0"))
}

fn no_store(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    super::console::secured(response)
}

fn enabled(state: &HttpState) -> Result<&Arc<SignIn>, ApiError> {
    state.signin.as_ref().ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "sign_in_off",
            "single sign-on is not configured on this node",
        )
    })
}

fn session_error(error: SessionError) -> ApiError {
    match error {
        SessionError::Unauthenticated => ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthenticated",
            "no valid console session: sign in again",
        ),
        SessionError::Csrf(why) => ApiError::new(StatusCode::FORBIDDEN, "csrf_refused", why),
        SessionError::Store(e) => ApiError::from(crate::domain::Error::from(e)),
    }
}

/// The session of `headers`, if the request carries the cookie. A cookie the deployment did not
/// issue is refused without a store read ([`crate::signin::SessionTags`]), so no budget stands
/// between a client and its session: a person behind an address that has spent its 404 budget
/// still reaches the console.
async fn session_of(signin: &SignIn, headers: &HeaderMap) -> Option<Result<Session, SessionError>> {
    let value = cookie(headers, &cookie_name(signin, "session"))?;
    Some(signin.session(value).await)
}

async fn checked(
    state: &HttpState,
    headers: &HeaderMap,
) -> Result<(Arc<SignIn>, Session), ApiError> {
    let signin = Arc::clone(enabled(state)?);
    let session = session_of(&signin, headers)
        .await
        .unwrap_or(Err(SessionError::Unauthenticated))
        .map_err(session_error)?;
    signin
        .check_csrf(
            &session,
            header_text(headers, CSRF_HEADER),
            header_text(headers, "origin"),
        )
        .map_err(session_error)?;
    Ok((signin, session))
}

fn header_text<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// `GET /console/session`: whether sign-in is offered, and who is signed in.
pub async fn whoami(State(state): State<Arc<HttpState>>, headers: HeaderMap) -> Response {
    let Some(signin) = &state.signin else {
        return no_store(axum::Json(serde_json::json!({ "oidc": false })).into_response());
    };
    let session = match session_of(signin, &headers).await {
        None | Some(Err(SessionError::Unauthenticated)) => {
            return no_store(
                axum::Json(serde_json::json!({ "oidc": true, "signed_in": false })).into_response(),
            );
        }
        Some(Err(e)) => return session_error(e).into_response(),
        Some(Ok(session)) => session,
    };
    let tenants: Vec<_> = session
        .roles
        .iter()
        .map(|(tenant, role)| serde_json::json!({ "tenant": tenant, "role": role.name() }))
        .collect();
    let scopes: Vec<&str> = session
        .caller()
        .map(|c| c.scopes.iter().map(|s| s.name()).collect())
        .unwrap_or_default();
    no_store(
        axum::Json(serde_json::json!({
            "oidc": true,
            "signed_in": true,
            "subject": session.subject,
            "email": session.email,
            "name": session.name,
            "tenant": session.tenant,
            "tenants": tenants,
            "scopes": scopes,
            "csrf": session.csrf_token(),
        }))
        .into_response(),
    )
}

/// `POST /console/session/tenant` `{"tenant": "..."}`: acts in another tenant the person holds
/// a role in (403 `no_role` otherwise).
///
/// The session and its anti-CSRF token are checked before the body is read, and the body is
/// read up to the API's bound for small bodies (16 KiB, 413 past it).
pub async fn switch_tenant(
    State(state): State<Arc<HttpState>>,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Result<Response, ApiError> {
    let (signin, session) = checked(&state, &headers).await?;
    #[derive(serde::Deserialize)]
    struct Wanted {
        tenant: String,
    }
    let body: Wanted =
        read_json_up_to(&headers, body, &["application/json"], MAX_BODY_BYTES).await?;
    if !signin
        .switch(&session, &body.tenant)
        .await
        .map_err(session_error)?
    {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "no_role",
            "you hold no role in that tenant",
        ));
    }
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `POST /console/oidc/logout`: signs out; answers where the browser goes next (the issuer's
/// sign-out when it offers one, else the console).
pub async fn logout(
    State(state): State<Arc<HttpState>>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let (signin, session) = checked(&state, &headers).await?;
    signin.sign_out(&session).await.map_err(session_error)?;
    let back = format!("{}/console/", signin.origin());
    let next = signin
        .provider()
        .logout_url(&back)
        .await
        .unwrap_or_else(|| "/console/".into());
    let mut response = axum::Json(serde_json::json!({ "next": next })).into_response();
    response.headers_mut().insert(
        header::SET_COOKIE,
        set_cookie(&signin, "session", "", Some(0)),
    );
    Ok(no_store(response))
}

/// Whether `method` changes nothing (and so needs no anti-CSRF token).
fn safe(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// The session a JSON API request without `Authorization` is made with, checked: `None`
/// when it carries no session cookie (or sign-in is off), an error response when the session
/// is invalid, the request changes something without passing the anti-CSRF checks, or the
/// person holds no role.
pub async fn api_session(
    state: &HttpState,
    method: &Method,
    headers: &HeaderMap,
) -> Option<Result<crate::domain::Caller, Response>> {
    let signin = state.signin.as_ref()?;
    if headers.contains_key(header::AUTHORIZATION) {
        return None;
    }
    let session = match session_of(signin, headers).await? {
        Ok(session) => session,
        Err(e) => return Some(Err(session_error(e).into_response())),
    };
    if !safe(method)
        && let Err(e) = signin.check_csrf(
            &session,
            header_text(headers, CSRF_HEADER),
            header_text(headers, "origin"),
        )
    {
        tracing::warn!(reason = %e, "a console request was refused as cross-site");
        return Some(Err(session_error(e).into_response()));
    }
    Some(session.caller().ok_or_else(|| {
        ApiError::new(
            StatusCode::FORBIDDEN,
            "no_role",
            "you hold no role in any tenant of this deployment",
        )
        .into_response()
    }))
}

/// Runs `answer` with `caller` as the session caller of the JSON API.
pub async fn session_scope<F: Future<Output = Response>>(
    caller: crate::domain::Caller,
    answer: F,
) -> Response {
    SESSION_CALLER.scope(caller, answer).await
}
