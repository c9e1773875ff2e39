//! YOURLS's API at `/yourls-api.php` (GET, or POST with a form body): `shorturl`, `expand`,
//! `url-stats`, `stats`, `db-stats` and `version`, answered as YOURLS answers them (`answer`)
//! in `format=xml` (the default), `json` or `simple`. The caller sends one of our API keys as
//! `signature`, or a timestamp signature made with the key's YOURLS token; see docs/compat.md
//! for what is served and why other credentials are not.

mod actions;
mod answer;
mod stats;

use super::{Params, authenticate};
use crate::access::{Operation, Signed};
use crate::domain::{Caller, Error};
use crate::http::HttpState;
use answer::{Answer, Format};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use std::net::IpAddr;
use std::sync::Arc;

/// The API's path.
pub const PATH: &str = "/yourls-api.php";
/// The API's path segment (a reserved word: no code can take it).
pub const PATH_FILE: &str = "yourls-api.php";
/// The dialect's metric label.
const DIALECT: &str = "yourls";

/// The YOURLS version whose answers the API follows (what `action=version` says; clients that
/// check it see the API level they get, not this node's version).
pub const YOURLS_VERSION: &str = "1.9.2";

/// What a request asks for (`action`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    ShortUrl,
    Expand,
    UrlStats,
    Stats,
    DbStats,
    Version,
    Unknown,
}

impl Action {
    fn parse(text: Option<&str>) -> Self {
        match text.unwrap_or_default() {
            "shorturl" => Action::ShortUrl,
            "expand" => Action::Expand,
            "url-stats" => Action::UrlStats,
            "stats" => Action::Stats,
            "db-stats" => Action::DbStats,
            "version" => Action::Version,
            _ => Action::Unknown,
        }
    }

    /// The metric label (a fixed set).
    fn name(self) -> &'static str {
        match self {
            Action::ShortUrl => "shorturl",
            Action::Expand => "expand",
            Action::UrlStats => "url-stats",
            Action::Stats => "stats",
            Action::DbStats => "db-stats",
            Action::Version => "version",
            Action::Unknown => "unknown",
        }
    }

    /// Whether the action is admitted for a scope: `version` and an unknown action read
    /// nothing, so any valid key gets their answer (as `GET /api/v1/me` needs no scope), and
    /// a create-only key (ShareX's) is told an action is unknown rather than refused.
    fn scoped(self) -> bool {
        !matches!(self, Action::Version | Action::Unknown)
    }

    /// What admission checks for the action: the operation of the JSON API that does the
    /// same (a link's page for `url-stats` shows its clicks as `GET /api/v1/links/{code}`
    /// does; `stats` lists links with their clicks; `db-stats` is the tenant's stats).
    fn operation(self) -> Operation {
        match self {
            Action::ShortUrl => Operation::Create,
            Action::Expand | Action::UrlStats | Action::Version | Action::Unknown => {
                Operation::Read
            }
            Action::Stats => Operation::Export,
            Action::DbStats => Operation::Stats,
        }
    }
}

/// A request's result: its answer and its metric outcome.
type Outcome = (Answer, &'static str);

/// `GET|POST /yourls-api.php`.
pub async fn api(State(state): State<Arc<HttpState>>, request: axum::extract::Request) -> Response {
    let (parts, body) = request.into_parts();
    let client = parts
        .extensions
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|peer| state.client_policy.client(peer.0, &parts.headers));
    let params = match Params::read(&parts.method, parts.uri.query(), &parts.headers, body).await {
        Ok(params) => params,
        Err(message) => {
            state
                .metrics
                .compat_request(DIALECT, Action::Unknown.name(), "invalid");
            return Answer::error(StatusCode::BAD_REQUEST, message).render(Format::Json);
        }
    };
    let action = Action::parse(params.get("action"));
    let format = match Format::parse(params.get("format")) {
        Ok(format) => format,
        Err(message) => {
            state
                .metrics
                .compat_request(DIALECT, action.name(), "invalid");
            // A format that is not served is answered in JSON, the closest a client that
            // asked for a script can read.
            return Answer::error(StatusCode::BAD_REQUEST, message).render(Format::Json);
        }
    };
    let (answer, outcome) = match admit(&state, &params, action, client).await {
        Ok(caller) => run(&state, &caller, &params, action).await,
        Err(refused) => refused,
    };
    state
        .metrics
        .compat_request(DIALECT, action.name(), outcome);
    answer.render(format)
}

async fn run(state: &HttpState, caller: &Caller, params: &Params, action: Action) -> Outcome {
    match action {
        Action::ShortUrl => actions::shorturl(state, caller, params).await,
        Action::Expand => actions::expand(state, caller, params).await,
        Action::UrlStats => actions::url_stats(state, caller, params).await,
        Action::Stats => stats::stats(state, caller, params).await,
        Action::DbStats => stats::db_stats(state, caller).await,
        Action::Version => (
            Answer::new(vec![("version", YOURLS_VERSION.into())], YOURLS_VERSION),
            "ok",
        ),
        Action::Unknown => {
            let message = "Unknown or missing \"action\" parameter";
            (
                Answer::new(
                    vec![("errorCode", 400u64.into()), ("message", message.into())],
                    message,
                ),
                "invalid",
            )
        }
    }
}

/// The caller a request's credentials make, admitted for `operation`; a refusal is answered
/// as YOURLS refuses one (`message`, `errorCode` 403, or 429 past the key's rate).
///
/// Two credentials are accepted: `signature=<API key>`, and YOURLS's timestamp signature,
/// `timestamp` with `signature` = hash(`timestamp` . token) (`hash` names the hash, md5 by
/// default), where the token is the key's YOURLS token (`shortener keys yourls-token`), not
/// the key: the node keeps only digests of its keys (see [`crate::access::Signed`]).
/// `username` and `password` are no credentials of this node.
///
/// A timestamp signature names no key, so checking one tries every key in force: a signature
/// that matches none is charged to the client's 404 budget (`client`), and a client that
/// spent it is refused (429) before any key is tried, so guessing costs the node what a
/// scanner's misses cost, not a pass over the keys per request.
async fn admit(
    state: &HttpState,
    params: &Params,
    action: Action,
    client: Option<IpAddr>,
) -> Result<Caller, Outcome> {
    let operation = action.operation();
    let refuse = |message: &str| {
        Err((
            Answer::error(StatusCode::FORBIDDEN, message),
            "unauthenticated",
        ))
    };
    if params.non_empty("username").is_some() || params.non_empty("password").is_some() {
        return refuse(
            "username and password are not accepted: send one of the node's API keys as \
             signature, or sign with its YOURLS token (docs/compat.md)",
        );
    }
    let Some(signature) = params.non_empty("signature") else {
        return refuse("Please log in: send one of the node's API keys as signature");
    };
    let caller = if let Some(timestamp) = params.non_empty("timestamp") {
        let spent = |retry_after| {
            state.admission.refused_unauthenticated(operation);
            let error = Error::RateLimited { retry_after };
            Err((refusal(&error), "rate_limited"))
        };
        if let Some(retry_after) = client.and_then(|c| state.limits.waiting_for_404_token(c)) {
            return spent(retry_after);
        }
        let now = chrono::Utc::now().timestamp();
        let signed = match Signed::parse(timestamp, signature, params.get("hash"), now) {
            Ok(signed) => signed,
            Err(message) => {
                state.admission.refused_unauthenticated(operation);
                return refuse(&message);
            }
        };
        match state
            .admission
            .authenticate_signed(&state.yourls_tokens, &signed, operation)
        {
            Ok(caller) => caller,
            Err(_) => {
                // The refusal is counted already (by authenticate_signed): not again here.
                if let Some(Err(retry_after)) = client.map(|c| state.limits.not_found(c)) {
                    let error = Error::RateLimited { retry_after };
                    return Err((refusal(&error), "rate_limited"));
                }
                return refuse(
                    "Invalid signature: no API key's YOURLS token signed this timestamp, or \
                     the key has been removed or has expired",
                );
            }
        }
    } else {
        match authenticate(state, signature, operation).await {
            Ok(caller) => caller,
            Err(_) => return refuse("Invalid signature: no such API key, or it has expired"),
        }
    };
    if !action.scoped() {
        return Ok(caller);
    }
    state
        .admission
        .admit(&caller, operation)
        .map(|()| caller)
        .map_err(|error| (refusal(&error), super::outcome(&error)))
}

/// A refusal of an admitted caller (a missing scope, a rate limit) or a fault, as YOURLS
/// answers errors outside a create.
fn refusal(error: &Error) -> Answer {
    let status = match error {
        Error::Unauthenticated(_) | Error::Forbidden(_) | Error::HostNotAllowed(_) => {
            StatusCode::FORBIDDEN
        }
        Error::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
        Error::Unavailable { .. } => StatusCode::SERVICE_UNAVAILABLE,
        Error::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        Error::NotFound(_) | Error::Gone(_) => StatusCode::NOT_FOUND,
        // An export cut off at its deadline, a conflict with the store's state: not a request
        // the client can mend, as 400 would say.
        Error::Conflict { .. } => StatusCode::CONFLICT,
        _ => StatusCode::BAD_REQUEST,
    };
    let mut answer = Answer::error(status, error.public_message());
    if let Error::RateLimited { retry_after } | Error::Unavailable { retry_after, .. } = error {
        answer.retry_after = Some(retry_after.as_secs().max(1));
    }
    answer
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each refusal's status says whose it is: the client's (400, 403, 404, 429) or the node's
    /// (409 for an export cut off at its deadline, 503, 500).
    #[test]
    fn refusals_carry_the_status_of_their_cause() {
        for (error, status) in [
            (
                Error::Forbidden(crate::domain::Scope::LinksRead),
                StatusCode::FORBIDDEN,
            ),
            (Error::NotFound("x".into()), StatusCode::NOT_FOUND),
            (
                Error::conflict("export_ended", "the export ended early"),
                StatusCode::CONFLICT,
            ),
            (
                Error::Internal("x".into()),
                StatusCode::INTERNAL_SERVER_ERROR,
            ),
            (Error::invalid("invalid_url", "x"), StatusCode::BAD_REQUEST),
        ] {
            assert_eq!(refusal(&error).status(), status, "{error:?}");
        }
    }
}
