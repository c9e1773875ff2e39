//! The sign-in itself: `GET /console/oidc/login` starts an attempt and sends the browser to the
//! issuer; `GET /console/oidc/callback` checks what comes back and opens a session.

use super::{ATTEMPT_SECONDS, cookie, cookie_name, enabled, no_store, set_cookie};
use crate::http::{ApiError, HttpState};
use crate::signin::oidc::Attempt;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use std::net::SocketAddr;
use std::sync::Arc;

/// `GET /console/oidc/login`: to the issuer, with a new attempt in a cookie. An issuer that
/// does not answer gets the browser a page saying so (`502`), not an API error.
pub async fn login(State(state): State<Arc<HttpState>>) -> Result<Response, ApiError> {
    let signin = enabled(&state)?;
    let attempt = Attempt::new();
    let url = match signin.provider().authorization_url(&attempt).await {
        Ok(url) => url,
        Err(e) => {
            tracing::warn!(error = %e, "sign-in could not start");
            let body = format!(
                "Sign-in could not start: the identity provider did not answer ({e}).\n\n\
                 Try again in a moment, or go back to /console/ and sign in with an API key.\n"
            );
            let page = (
                StatusCode::BAD_GATEWAY,
                [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                body,
            );
            return Ok(no_store(page.into_response()));
        }
    };
    let value = format!("{}.{}.{}", attempt.state, attempt.nonce, attempt.verifier);
    let mut response = (StatusCode::SEE_OTHER, [(header::LOCATION, url)]).into_response();
    response.headers_mut().insert(
        header::SET_COOKIE,
        set_cookie(signin, "signin", &value, Some(ATTEMPT_SECONDS)),
    );
    Ok(no_store(response))
}

/// Who answered a callback, and whether a sign-in had been started in its browser.
struct Caller<'a> {
    peer: SocketAddr,
    headers: &'a HeaderMap,
    /// The request carried the attempt cookie of a sign-in begun here: its failure is recorded
    /// in the audit log. Without one it is noise anyone can send, and only counted.
    started: bool,
}

/// A page that says why a sign-in failed (never a token or code), with the attempt cookie
/// cleared. Each failure spends one token of the client's 404 budget (a `429` once it is
/// spent, recorded nowhere), so failures cost the node a bounded number of writes per client;
/// one of a started sign-in is recorded in the audit log (`signin_failed`, with the reason and
/// address).
async fn failed(state: &HttpState, caller: Caller<'_>, status: StatusCode, why: &str) -> Response {
    if let Some(refused) =
        crate::http::redirect::spend_404_token(state, caller.peer, caller.headers)
    {
        return refused;
    }
    if caller.started {
        tracing::warn!(reason = %why, "a console sign-in failed");
        state
            .audit
            .record_sign_in(crate::audit::SignInAttempt {
                tenant: "",
                subject: None,
                email: None,
                address: None,
                succeeded: false,
                reason: Some(why),
            })
            .await;
    } else {
        tracing::debug!(reason = %why, "a sign-in callback without a sign-in started");
    }
    let Some(signin) = state.signin.as_deref() else {
        return (status, why.to_string()).into_response();
    };
    let body = format!("Sign-in failed: {why}.\n\nGo back to /console/ and sign in again.\n");
    let mut response = (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        body,
    )
        .into_response();
    response.headers_mut().insert(
        header::SET_COOKIE,
        set_cookie(signin, "signin", "", Some(0)),
    );
    no_store(response)
}

/// `GET /console/oidc/callback?code&state`: opens a session, or says why not.
pub async fn callback(
    State(state): State<Arc<HttpState>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    uri: axum::http::Uri,
) -> Result<Response, ApiError> {
    let signin = enabled(&state)?;
    // A client whose failures have spent its 404 budget is refused before anything else: a
    // callback with a made-up attempt cookie and a matching `state` would otherwise cost a
    // code exchange with the provider (and its client secret) each time.
    if let Some(refused) = crate::http::redirect::past_404_budget(&state, peer, &headers) {
        return Ok(refused);
    }
    let query: std::collections::HashMap<String, String> =
        url::form_urlencoded::parse(uri.query().unwrap_or("").as_bytes())
            .into_owned()
            .collect();
    let attempt = cookie(&headers, &cookie_name(signin, "signin")).and_then(|v| {
        let mut parts = v.split('.');
        let (state, nonce, verifier) = (parts.next()?, parts.next()?, parts.next()?);
        Some(Attempt {
            state: state.into(),
            nonce: nonce.into(),
            verifier: verifier.into(),
        })
    });
    let caller = |started| Caller {
        peer,
        headers: &headers,
        started,
    };
    let Some(attempt) = attempt else {
        return Ok(failed(
            &state,
            caller(false),
            StatusCode::BAD_REQUEST,
            "no sign-in was started in this browser (or it took too long)",
        )
        .await);
    };
    if query.contains_key("error") {
        return Ok(failed(
            &state,
            caller(true),
            StatusCode::UNAUTHORIZED,
            "the identity provider refused",
        )
        .await);
    }
    let (Some(code), Some(returned)) = (query.get("code"), query.get("state")) else {
        return Ok(failed(
            &state,
            caller(true),
            StatusCode::BAD_REQUEST,
            "the answer lacks a code or state",
        )
        .await);
    };
    if !bool::from(subtle::ConstantTimeEq::ct_eq(
        returned.as_bytes(),
        attempt.state.as_bytes(),
    )) {
        return Ok(failed(
            &state,
            caller(true),
            StatusCode::BAD_REQUEST,
            "the state does not match this browser's sign-in",
        )
        .await);
    }
    let cookie_value = match signin.finish(code, &attempt).await {
        Ok(value) => value,
        Err(error) => {
            return Ok(failed(
                &state,
                caller(true),
                StatusCode::UNAUTHORIZED,
                &error.to_string(),
            )
            .await);
        }
    };
    // The session this browser held before (another person's, on a shared machine) ends with
    // the new one's start: a copy of its cookie is good for nothing from now on.
    if let Some(previous) = cookie(&headers, &cookie_name(signin, "session"))
        && let Ok(previous) = signin.session(previous).await
        && let Err(error) = signin.sign_out(&previous).await
    {
        tracing::warn!(%error, "the browser's previous console session could not be ended");
    }
    if let Ok(session) = signin.session(&cookie_value).await {
        state
            .audit
            .record_sign_in(crate::audit::SignInAttempt {
                tenant: session.tenant.as_deref().unwrap_or(""),
                subject: Some(&session.subject),
                email: session.email.as_deref(),
                address: None,
                succeeded: true,
                reason: None,
            })
            .await;
    }
    let mut response = (StatusCode::SEE_OTHER, [(header::LOCATION, "/console/")]).into_response();
    let set = response.headers_mut();
    set.append(
        header::SET_COOKIE,
        set_cookie(signin, "signin", "", Some(0)),
    );
    set.append(
        header::SET_COOKIE,
        set_cookie(signin, "session", &cookie_value, None),
    );
    Ok(no_store(response))
}
