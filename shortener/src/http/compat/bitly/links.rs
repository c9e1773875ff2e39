//! Bitly's bitlinks over the link service: a shorten is a create with dedup (Bitly answers a
//! long URL the group already shortened with its bitlink, `200`, and a new one `201`), a
//! bitlink's `id` is `host/code` like Bitly's `bit.ly/abc`, and times are Bitly's
//! `2006-01-02T15:04:05+0000`, in UTC.

use super::{Failure, Outcome};
use crate::domain::{Caller, CreateInput, CreateRequest, Error, Link, ShortCode};
use crate::http::HttpState;
use crate::http::compat::MAX_FORM_BYTES;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};

/// A time as Bitly writes it.
pub(super) fn bitly_time(time: DateTime<Utc>) -> String {
    time.format("%Y-%m-%dT%H:%M:%S%z").to_string()
}

/// A bitlink's `id`: its short URL without the scheme.
fn id(state: &HttpState, link: &Link) -> String {
    let url = state.public.link_url(link);
    url.split_once("://")
        .map_or(url.clone(), |(_, rest)| rest.to_string())
}

/// The fields every bitlink answer starts with.
fn base(state: &HttpState, link: &Link) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("created_at".into(), bitly_time(link.created_at).into());
    out.insert("id".into(), id(state, link).into());
    out.insert("link".into(), state.public.link_url(link).into());
    out.insert("long_url".into(), link.url.clone().into());
    out
}

/// The bitlink object (`POST /v4/shorten`, `GET /v4/bitlinks/{id}`).
fn bitlink_body(state: &HttpState, link: &Link, title: bool) -> Value {
    let mut out = base(state, link);
    if title {
        let text = link.routes.preview.title.clone();
        out.insert("title".into(), text.map_or(Value::Null, Value::String));
    }
    out.insert("custom_bitlinks".into(), json!([]));
    out.insert("archived".into(), false.into());
    out.insert("tags".into(), json!(link.tags));
    out.insert("deeplinks".into(), json!([]));
    let group = format!("{}v4/groups/{}", state.public.as_str(), link.tenant);
    out.insert("references".into(), json!({ "group": group }));
    Value::Object(out)
}

/// A JSON object body (at most [`MAX_FORM_BYTES`]); `field` names what a refusal is about.
async fn read_body(
    body: axum::body::Body,
    message: &'static str,
    field: &'static str,
) -> Result<Map<String, Value>, Failure> {
    let bytes = crate::http::body::read_public(body, MAX_FORM_BYTES)
        .await
        .map_err(|unread| Failure::unread(unread, MAX_FORM_BYTES, message, field))?;
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(map)) => Ok(map),
        // The parser's own words say where (`trailing comma at line 1 column 32`).
        Err(error) if !bytes.is_empty() => Err(Failure::arg(
            message,
            field,
            false,
            format!("the body is not valid JSON: {error}"),
        )),
        _ => Err(Failure::arg(
            message,
            field,
            bytes.is_empty(),
            format!("send a JSON object with {field}"),
        )),
    }
}

/// The string `name` of `body`: absent (or null) is `None`, another type a refusal.
fn text<'a>(
    body: &'a Map<String, Value>,
    name: &'static str,
    message: &'static str,
) -> Result<Option<&'a str>, Failure> {
    match body.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(Failure::arg(
            message,
            name,
            false,
            format!("{name} must be a string"),
        )),
    }
}

/// Bitly's default domain: a shorten naming it gets the node's default domain.
const BITLY_DEFAULT_DOMAIN: &str = "bit.ly";

/// `POST /v4/shorten`: `long_url`, optional `domain` (the node's host or one of the tenant's
/// domains) and `group_guid` (the caller's tenant).
pub async fn shorten(state: &HttpState, caller: &Caller, body: axum::body::Body) -> Outcome {
    const LONG_URL: &str = "INVALID_ARG_LONG_URL";
    let body = read_body(body, LONG_URL, "long_url").await?;
    let url = text(&body, "long_url", LONG_URL)?.unwrap_or_default();
    if url.trim().is_empty() {
        return Err(Failure::arg(
            LONG_URL,
            "long_url",
            true,
            "long_url is missing".into(),
        ));
    }
    let domain = text(&body, "domain", "INVALID_ARG_DOMAIN")?;
    if let Some(group) = text(&body, "group_guid", "INVALID_ARG_GROUP_GUID")?
        && group != &*caller.tenant
    {
        return Err(Failure::arg(
            "INVALID_ARG_GROUP_GUID",
            "group_guid",
            false,
            format!(
                "group_guid is the tenant's name, {}",
                crate::domain::echo(&caller.tenant)
            ),
        ));
    }
    let started = std::time::Instant::now();
    // Bitly's own `bit.ly`, which scripts send as Bitly's examples write it, is the default
    // domain here, unless the tenant has claimed a domain of that name.
    let domain = match domain.filter(|d| !d.is_empty()) {
        Some(d) if crate::domain::plain_host(d) == BITLY_DEFAULT_DOMAIN => {
            match state.links.check_domain(caller, BITLY_DEFAULT_DOMAIN).await {
                Ok(()) => Some(BITLY_DEFAULT_DOMAIN.to_string()),
                Err(error) if error.code() == "unknown_domain" => None,
                // Not known whether the tenant claimed it: refused as the store's failure,
                // never made on the default domain by mistake.
                Err(error) => return Err(Failure::of(&error, None)),
            }
        }
        other => other.map(str::to_string),
    };
    let input = CreateInput {
        url: url.to_string(),
        domain,
        dedup: true,
        ..CreateInput::default()
    };
    let result = match CreateRequest::parse(input, &state.rules, Utc::now()) {
        Ok(request) => state.links.create(caller, request).await,
        Err(error) => Err(error),
    };
    let label = result.as_ref().map_or_else(Error::outcome, |_| "created");
    state.metrics.create(label, started.elapsed());
    let (link, new) = result.map_err(|error| Failure::of(&error, Some(create_arg(&error))))?;
    let status = if new {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    if !crate::links::answers_whole(caller, new) {
        // An existing bitlink answered to a key that may not read links: only what it named
        // or is given (its id and short URL), never the link's times or tags.
        let mut receipt = Map::new();
        receipt.insert("id".into(), id(state, &link).into());
        receipt.insert("link".into(), state.public.link_url(&link).into());
        return Ok((status, Value::Object(receipt)));
    }
    Ok((status, bitlink_body(state, &link, false)))
}

/// Bitly's message and the field of a refused create's value.
fn create_arg(error: &Error) -> (&'static str, &'static str) {
    match error {
        Error::Invalid { code, .. } | Error::BadRequest { code, .. } if code.contains("domain") => {
            ("INVALID_ARG_DOMAIN", "domain")
        }
        _ => ("INVALID_ARG_LONG_URL", "long_url"),
    }
}

/// A bitlink id's host and code (`host/code`, with or without a scheme), when it has both.
/// The public URL may have a path (`example.com/s/abc`): its codes are the default domain's.
pub(super) fn split_id<'a>(state: &'a HttpState, id: &'a str) -> Option<(&'a str, &'a str)> {
    match state.public.code_in(id) {
        Some(code) => Some((state.public.host_str(), code)),
        None => crate::domain::unscheme(id).split_once('/'),
    }
}

/// The link a bitlink `id` (`host/code`, optionally with a scheme) names and the caller may
/// see, with its code; a deleted link is no link here. An id that cannot name a link is `INVALID_ARG_BITLINK`.
pub(super) async fn find<'a>(
    state: &'a HttpState,
    caller: &Caller,
    id: &'a str,
    field: &'static str,
) -> Result<(Link, ShortCode), Failure> {
    let bad = |why: String| Failure::arg("INVALID_ARG_BITLINK", field, false, why);
    let Some((host, code)) = split_id(state, id) else {
        return Err(bad(format!(
            "{field} must be host/code, such as sho.rt/abc, not {}",
            crate::domain::echo(id)
        )));
    };
    let domain = state
        .rules
        .domain(Some(host))
        .map_err(|e| bad(format!("{field}: {}", e.public_message())))?;
    let code = ShortCode::parse(code, state.rules.code_length)
        .map_err(|e| bad(format!("{field}: {}", e.public_message())))?
        .on(domain);
    let link = state
        .links
        .get(caller, &code)
        .await
        .map_err(|e| Failure::of(&e, None))?;
    if link.deleted_at.is_some() {
        return Err(Failure::of(
            &Error::NotFound(code.shown().to_string()),
            None,
        ));
    }
    Ok((link, code))
}

/// `POST /v4/expand`: `bitlink_id`.
pub async fn expand(state: &HttpState, caller: &Caller, body: axum::body::Body) -> Outcome {
    const BITLINK: &str = "INVALID_ARG_BITLINK";
    let body = read_body(body, BITLINK, "bitlink_id").await?;
    let Some(id) = text(&body, "bitlink_id", BITLINK)?.filter(|t| !t.is_empty()) else {
        return Err(Failure::arg(
            BITLINK,
            "bitlink_id",
            true,
            "bitlink_id is missing".into(),
        ));
    };
    let (link, _) = find(state, caller, id, "bitlink_id").await?;
    Ok((StatusCode::OK, Value::Object(base(state, &link))))
}

/// `GET /v4/bitlinks/{id}`.
pub async fn bitlink(state: &HttpState, caller: &Caller, id: &str) -> Outcome {
    let (link, _) = find(state, caller, id, "bitlink").await?;
    Ok((StatusCode::OK, bitlink_body(state, &link, true)))
}
