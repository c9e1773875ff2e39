//! Shlink's short URL endpoints over the link service: create, the legacy `shorten`, read,
//! edit and delete; and the ShortUrl shape every answer that holds a link uses.
//!
//! Shlink's values and ours: `validUntil` is the expiry, `maxVisits` the visit limit, `title`
//! the preview title, `forwardQuery` passing the query on (on unless `false`, as in Shlink),
//! `deviceLongUrls` the iOS and Android targets. `validSince` has no counterpart: a time not
//! after now is what a link already is and is taken, a later one is refused; so are
//! `crawlable: true`, a `desktop` device URL and, on a create, a `shortCodeLength` other than
//! the node's code length (one beside a `customSlug` is ignored, as Shlink does, and so is one
//! on an edit, which Shlink does not take).

use super::body::{self, Fields};
use super::{Answer, Fail, Problem, about, admit, finish, json, query_value, short_code};
use crate::access::Operation;
use crate::domain::routes::{Preview, PreviewPatch};
use crate::domain::{Caller, CreateInput, CreateRequest, Link, LinkPatch, PatchInput, ShortCode};
use crate::http::HttpState;
use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use serde_json::{Value, json};
use std::sync::Arc;

/// A link in Shlink's ShortUrl shape.
pub fn short_url(state: &HttpState, link: &Link) -> Value {
    let routes = &link.routes;
    json!({
        "shortCode": link.shown_code(),
        "shortUrl": state.public.link_url(link),
        "longUrl": link.url,
        "deviceLongUrls": {
            "android": routes.android,
            "ios": routes.ios,
            "desktop": null,
        },
        "dateCreated": body::date(link.created_at),
        "visitsSummary": visits_summary(link.clicks.human, link.clicks.bot),
        "tags": link.tags,
        "meta": {
            "validSince": null,
            "validUntil": link.expires_at.map(body::date),
            "maxVisits": link.max_visits,
        },
        "domain": link.domain,
        "title": routes.preview.title,
        "crawlable": false,
        "forwardQuery": routes.pass_query,
        "hasRedirectRules": !routes.rules.is_empty(),
    })
}

/// A link as the caller may see it: whole, or (to a key without `links:read`, of a link its
/// request did not create: a `findIfExists` hit, an edit) only its code and short URL, as the
/// JSON API answers such a key.
pub fn seen(state: &HttpState, caller: &Caller, link: &Link, created: bool) -> Value {
    if crate::links::answers_whole(caller, created) {
        short_url(state, link)
    } else {
        json!({ "shortCode": link.shown_code(), "shortUrl": state.public.link_url(link) })
    }
}

/// Shlink's visits summary: people's and bots' `GET` visits (`HEAD` requests are not visits).
pub fn visits_summary(human: u64, bot: u64) -> Value {
    json!({ "total": human.saturating_add(bot), "nonBots": human, "bots": bot })
}

/// Refuses what Shlink has and this node has not: a `validSince` after now, `crawlable:
/// true`, a desktop URL.
fn refuse_unserved(fields: &Fields<'_>) -> Result<(), Fail> {
    if let Some(Some(since)) = fields.date("validSince")?
        && since > Utc::now()
    {
        return Err(Problem::invalid_data(
            "validSince",
            "validSince after now is not supported: a link is valid from its creation",
        )
        .into());
    }
    if fields.boolean("crawlable")? == Some(true) {
        return Err(Problem::invalid_data(
            "crawlable",
            "crawlable short URLs are not supported: robots.txt is set per domain",
        )
        .into());
    }
    if let Some(Value::Object(devices)) = fields.0.get("deviceLongUrls")
        && devices.get("desktop").is_some_and(|v| !v.is_null())
    {
        return Err(Problem::invalid_data(
            "deviceLongUrls",
            "a desktop URL is not supported: the long URL is where desktops go",
        )
        .into());
    }
    Ok(())
}

/// The `android` and `ios` URLs of `deviceLongUrls` (absent, or `null` to remove).
fn device_urls(fields: &Fields<'_>) -> Result<[Option<Option<String>>; 2], Fail> {
    match fields.0.get("deviceLongUrls") {
        None | Some(Value::Null) => Ok([None, None]),
        Some(Value::Object(devices)) => {
            let devices = Fields(devices);
            let read = |name: &str| {
                devices
                    .string(name)
                    .map_err(|_| Problem::invalid_data("deviceLongUrls", "device URLs are strings"))
            };
            Ok([read("android")?, read("ios")?])
        }
        Some(_) => {
            Err(Problem::invalid_data("deviceLongUrls", "deviceLongUrls is an object").into())
        }
    }
}

/// Checks a create's `shortCodeLength`: generated codes have the node's one length, so that
/// length is the only one served; like Shlink, a create with a `customSlug` ignores it.
fn check_code_length(fields: &Fields<'_>, code_length: usize) -> Result<(), Fail> {
    let Some(Some(asked)) = fields.count("shortCodeLength")? else {
        return Ok(());
    };
    if asked == code_length as u64 || fields.string("customSlug")?.flatten().is_some() {
        return Ok(());
    }
    Err(Problem::invalid_data(
        "shortCodeLength",
        format!(
            "shortCodeLength {asked} is not supported: generated codes on this node have \
             {code_length} characters (omit it or send {code_length})"
        ),
    )
    .into())
}

fn create_input(fields: &Fields<'_>, code_length: usize) -> Result<CreateInput, Fail> {
    refuse_unserved(fields)?;
    check_code_length(fields, code_length)?;
    let url = fields
        .string("longUrl")?
        .flatten()
        .filter(|u| !u.trim().is_empty())
        .ok_or_else(|| Problem::invalid_data("longUrl", "longUrl is missing"))?;
    let [android, ios] = device_urls(fields)?;
    Ok(CreateInput {
        url,
        alias: fields.string("customSlug")?.flatten(),
        expires_at: fields.date("validUntil")?.flatten(),
        dedup: fields.boolean("findIfExists")?.unwrap_or(false),
        // Shlink finds a link with the same tags and `maxVisits` too.
        dedup_settings: true,
        tags: peer_tags(fields.strings("tags")?.unwrap_or_default()),
        max_visits: fields.count("maxVisits")?.flatten(),
        domain: fields.string("domain")?.flatten(),
        ios: ios.flatten(),
        android: android.flatten(),
        pass_query: fields.boolean("forwardQuery")?.unwrap_or(true),
        preview: Preview {
            title: fields.string("title")?.flatten(),
            ..Preview::default()
        },
        ..CreateInput::default()
    })
}

async fn created(state: &HttpState, caller: &crate::domain::Caller, input: CreateInput) -> Answer {
    let started = std::time::Instant::now();
    let result = create_or_find(state, caller, input).await;
    let label = result
        .as_ref()
        .map_or_else(crate::domain::Error::outcome, |(_, new)| {
            if *new { "created" } else { "existing" }
        });
    state.metrics.create(label, started.elapsed());
    let (link, new) = result?;
    Ok(json(seen(state, caller, &link, new)))
}

/// Creates the link of `input`: `(link, created)`. Shlink's `findIfExists` with a
/// `customSlug` answers the slug's link when it already goes to the same URL (on the same
/// domain, of the caller's tenant), where it would otherwise be refused as taken; the node's
/// own dedup is for generated codes, so the slug is created, and looked up when it is taken.
/// Any other holder of the slug leaves the refusal as it was, and so does a caller without
/// `links:read`: the answer would tell it where the slug leads, which it may not read.
async fn create_or_find(
    state: &HttpState,
    caller: &crate::domain::Caller,
    mut input: CreateInput,
) -> Result<(Link, bool), crate::domain::Error> {
    let slug = input.dedup && input.alias.is_some();
    input.dedup &= !slug;
    let find_slug = slug && caller.may(crate::domain::Scope::LinksRead);
    let request = CreateRequest::parse(input, &state.rules, Utc::now())?;
    let wanted = find_slug.then(|| {
        (
            request.url.as_str().to_owned(),
            request.alias.clone(),
            request.domain.clone(),
        )
    });
    let result = state.links.create(caller, request).await;
    let (Err(crate::domain::Error::AliasTaken(_)), Some((url, Some(slug), domain))) =
        (&result, wanted)
    else {
        return result;
    };
    let Ok(code) = ShortCode::parse(&slug, state.rules.code_length) else {
        return result;
    };
    match state.links.get(caller, &code.on(domain)).await {
        // The caller's own tenant's only: an admin key sees every tenant's links.
        Ok(link)
            if link.deleted_at.is_none() && link.url == url && *link.tenant == *caller.tenant =>
        {
            Ok((link, false))
        }
        _ => result,
    }
}

/// `POST /rest/v3/short-urls`.
pub async fn create(
    State(state): State<Arc<HttpState>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let answer = async {
        let caller = admit(&state, &headers, None, Operation::Create).await?;
        let map = body::object(body).await?;
        let input = create_input(&Fields(&map), state.rules.code_length)?;
        created(&state, &caller, input).await
    }
    .await;
    finish(&state, "create", answer)
}

/// `GET /rest/v3/short-urls/shorten?apiKey=&longUrl=&format=json|txt`: Shlink's single-URL
/// shortening for tools that can only send a `GET`; `txt` answers the short URL alone.
pub async fn shorten(
    State(state): State<Arc<HttpState>>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let answer = async {
        let key = query_value(&uri, "apiKey");
        let format = query_value(&uri, "format").unwrap_or_else(|| "json".into());
        if !matches!(format.as_str(), "json" | "txt") {
            return Err(Problem::invalid_data("format", "format must be json or txt").into());
        }
        let caller = admit(&state, &headers, key.as_deref(), Operation::Create).await?;
        let url = query_value(&uri, "longUrl")
            .filter(|u| !u.trim().is_empty())
            .ok_or_else(|| Problem::invalid_data("longUrl", "longUrl is missing"))?;
        let input = CreateInput {
            url,
            pass_query: true,
            ..CreateInput::default()
        };
        let response = created(&state, &caller, input).await?;
        if format == "json" {
            return Ok(response);
        }
        let bytes = axum::body::to_bytes(response.into_body(), body::MAX_BODY_BYTES)
            .await
            .unwrap_or_default();
        let value: Value = serde_json::from_slice(&bytes).unwrap_or_default();
        let text = value["shortUrl"].as_str().unwrap_or_default().to_string();
        Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response())
    }
    .await;
    finish(&state, "shorten", answer)
}

/// The link of the path's code the caller sees and that is not deleted.
pub async fn find(
    state: &HttpState,
    caller: &crate::domain::Caller,
    code: &str,
    uri: &Uri,
) -> Result<Link, Fail> {
    let code = short_code(state, code, uri)?;
    let link = state.links.get(caller, &code).await.map_err(about(&code))?;
    if link.deleted_at.is_some() {
        return Err(about(&code)(crate::domain::Error::NotFound(
            code.shown().to_string(),
        )));
    }
    Ok(link)
}

/// `GET /rest/v3/short-urls/{shortCode}?domain=`.
pub async fn get(
    State(state): State<Arc<HttpState>>,
    headers: HeaderMap,
    code: Result<Path<String>, PathRejection>,
    uri: Uri,
) -> Response {
    let code = super::path_text(code);
    let answer = async {
        let caller = admit(&state, &headers, None, Operation::Read).await?;
        let link = find(&state, &caller, &code, &uri).await?;
        Ok(json(short_url(&state, &link)))
    }
    .await;
    finish(&state, "get", answer)
}

fn patch_input(fields: &Fields<'_>) -> Result<PatchInput, Fail> {
    refuse_unserved(fields)?;
    let [android, ios] = device_urls(fields)?;
    let url = match fields.string("longUrl")? {
        Some(None) => return Err(Problem::invalid_data("longUrl", "longUrl cannot be null").into()),
        other => other.flatten(),
    };
    Ok(PatchInput {
        url,
        expires_at: fields.date("validUntil")?,
        tags: fields.strings("tags")?.map(peer_tags),
        max_visits: fields.count("maxVisits")?,
        ios,
        android,
        pass_query: fields.boolean("forwardQuery")?,
        preview: PreviewPatch {
            title: fields.string("title")?,
            ..PreviewPatch::default()
        },
        ..PatchInput::default()
    })
}

/// `PATCH /rest/v3/short-urls/{shortCode}?domain=`.
pub async fn edit(
    State(state): State<Arc<HttpState>>,
    headers: HeaderMap,
    code: Result<Path<String>, PathRejection>,
    uri: Uri,
    body: Body,
) -> Response {
    let code = super::path_text(code);
    let answer = async {
        let caller = admit(&state, &headers, None, Operation::Update).await?;
        let map = body::object(body).await?;
        let input = patch_input(&Fields(&map))?;
        let patch = LinkPatch::parse(input, &state.rules, Utc::now())?;
        let code = short_code(&state, &code, &uri)?;
        let link = (state.links.update(&caller, &code, &patch).await).map_err(about(&code))?;
        Ok(json(seen(&state, &caller, &link, false)))
    }
    .await;
    finish(&state, "edit", answer)
}

/// `DELETE /rest/v3/short-urls/{shortCode}?domain=`: 204; the code answers 410 from then on,
/// and Shlink's reads answer it not found.
pub async fn delete(
    State(state): State<Arc<HttpState>>,
    headers: HeaderMap,
    code: Result<Path<String>, PathRejection>,
    uri: Uri,
) -> Response {
    let code = super::path_text(code);
    let answer = async {
        let caller = admit(&state, &headers, None, Operation::Delete).await?;
        // A deleted link is no link (as Shlink removes it): deleting it again is not found.
        find(&state, &caller, &code, &uri).await?;
        let code = short_code(&state, &code, &uri)?;
        (state.links.delete(&caller, &code).await).map_err(about(&code))?;
        Ok(StatusCode::NO_CONTENT.into_response())
    }
    .await;
    finish(&state, "delete", answer)
}

/// Tags as Shlink stores them: lower case, a `-` for each space ([`crate::domain::peer_tag`]).
fn peer_tags(tags: Vec<String>) -> Vec<String> {
    tags.iter()
        .map(|tag| crate::domain::peer_tag(tag))
        .collect()
}
