//! Shlink's domains: the default domain (the node's public host) and the caller's branded
//! domains, each with Shlink's three redirects mapped onto a domain's fallbacks:
//! `baseUrlRedirect` is `root_url`, `regular404Redirect` is `not_found_url`,
//! `invalidShortUrlRedirect` is `expired_url`. The default domain has none (the node has no
//! such setting), and its redirects cannot be changed here.

use super::{Fail, Problem, admit, finish, json};
use crate::access::Operation;
use crate::domain::{Domain, Error};
use crate::http::HttpState;
use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use serde_json::{Map, Value, json};
use std::sync::Arc;

/// Shlink's redirect names and the domain settings they are.
const REDIRECTS: [(&str, &str); 3] = [
    ("baseUrlRedirect", "root_url"),
    ("regular404Redirect", "not_found_url"),
    ("invalidShortUrlRedirect", "expired_url"),
];

fn redirects_of(domain: Option<&Domain>) -> Value {
    let settings = domain.map(|d| &d.settings);
    json!({
        "baseUrlRedirect": settings.and_then(|s| s.root_url.clone()),
        "regular404Redirect": settings.and_then(|s| s.not_found_url.clone()),
        "invalidShortUrlRedirect": settings.and_then(|s| s.expired_url.clone()),
    })
}

/// `GET /rest/v3/domains`: the default domain first, then the caller's branded domains (at
/// most a domain list page of them).
pub async fn list(State(state): State<Arc<HttpState>>, headers: HeaderMap) -> Response {
    let answer = async {
        let caller = admit(&state, &headers, None, Operation::DomainRead).await?;
        let page = state
            .domains
            .list(&caller, None, Some(crate::domains::MAX_PAGE))
            .await?;
        let mut data = vec![json!({
            "domain": state.public.host_str(),
            "isDefault": true,
            "redirects": redirects_of(None),
        })];
        data.extend(page.domains.iter().map(|domain| {
            json!({ "domain": domain.host, "isDefault": false, "redirects": redirects_of(Some(domain)) })
        }));
        Ok(json(json!({
            "domains": { "data": data, "defaultRedirects": redirects_of(None) }
        })))
    }
    .await;
    finish(&state, "domains", answer)
}

/// A refusal of the domain service, its field named as Shlink names it.
fn refusal(error: Error, host: &str) -> Fail {
    match &error {
        Error::NotFound(_) => Problem::domain_not_found(host).into(),
        Error::Invalid { .. } | Error::BadRequest { .. } => {
            let message = error.public_message();
            let field = REDIRECTS
                .iter()
                .find(|(_, ours)| message.contains(ours))
                .map_or("domain", |(theirs, _)| theirs);
            Problem::invalid_data(field, message).into()
        }
        _ => error.into(),
    }
}

/// `PATCH /rest/v3/domains/redirects`: `domain` (a branded domain of the caller's) and the
/// redirects to set (a URL) or clear (`null`); answers the domain's redirects.
pub async fn redirects_patch(
    state: &HttpState,
    headers: &HeaderMap,
    body: Body,
) -> Result<Value, Fail> {
    let caller = admit(state, headers, None, Operation::DomainWrite).await?;
    let map = super::body::object(body).await?;
    let host = match map.get("domain") {
        Some(Value::String(host)) if !host.is_empty() => host.clone(),
        _ => return Err(Problem::invalid_data("domain", "domain is missing").into()),
    };
    match state.rules.domain(Some(&host)) {
        Ok(Some(_)) => {}
        Ok(None) => {
            return Err(Problem::invalid_data(
                "domain",
                "the default domain's redirects are not set through this API",
            )
            .into());
        }
        Err(_) => {
            return Err(Problem::invalid_data(
                "domain",
                format!("domain {} is not a host name", crate::domain::echo(&host)),
            )
            .into());
        }
    }
    let mut patch = Map::new();
    for (theirs, ours) in REDIRECTS {
        match map.get(theirs) {
            None => {}
            Some(value @ (Value::Null | Value::String(_))) => {
                let value = match value {
                    Value::String(s) if s.is_empty() => Value::Null,
                    other => other.clone(),
                };
                patch.insert(ours.to_string(), value);
            }
            Some(_) => {
                return Err(
                    Problem::invalid_data(theirs, format!("{theirs} is a URL or null")).into(),
                );
            }
        }
    }
    let domain = state
        .domains
        .update(&caller, &host, &patch)
        .await
        .map_err(|e| refusal(e, &host))?;
    Ok(redirects_of(Some(&domain)))
}

/// `PATCH /rest/v3/domains/redirects`.
pub async fn redirects(
    State(state): State<Arc<HttpState>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let answer = redirects_patch(&state, &headers, body).await.map(json);
    finish(&state, "domain-redirects", answer)
}
