//! The actions of YOURLS's API over the link and stats services, each answered in YOURLS's
//! shape. A create refused for its keyword is YOURLS's `error:keyword` (HTTP 200, as YOURLS
//! answers it, so its clients raise their "keyword exists" error); one refused for its URL is
//! `error:nourl` (HTTP 400), or `error:blocked` for a blocked domain. Times are YOURLS's
//! `Y-m-d H:i:s`, in UTC; `ip` is empty (the node keeps no client addresses); `title` is the
//! link's preview title, if it has one.

use super::answer::{Answer, Value};
use super::{Outcome, refusal};
use crate::domain::routes::Preview;
use crate::domain::{Caller, CreateInput, CreateRequest, Error, Link, ShortCode};
use crate::http::HttpState;
use crate::http::compat::{Params, outcome};
use chrono::{DateTime, Utc};

/// Without stats, YOURLS's `simple` text.
pub(super) const NEED_FORMAT: &str = "Need either XML or JSON format for stats";
const NOT_FOUND: &str = "Error: short URL not found";

pub(super) fn yourls_time(time: DateTime<Utc>) -> String {
    time.format("%Y-%m-%d %H:%M:%S").to_string()
}

pub(super) fn title(link: &Link) -> String {
    link.routes.preview.title.clone().unwrap_or_default()
}

/// Clicks as YOURLS counts them: redirects of GET requests (people's and bots').
pub(super) fn clicks(link: &Link) -> u64 {
    link.clicks.human.saturating_add(link.clicks.bot)
}

/// `url` as YOURLS takes it: one without a protocol (`example.com/page`, as bookmarklets and
/// screenshot tools send it) gets `http://` in front; one with any protocol is left as it is,
/// for the create's rules to judge.
fn with_protocol(url: &str) -> String {
    let mut chars = url.chars();
    let scheme_len = chars
        .by_ref()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '.' | '-'))
        .count();
    let has_protocol = scheme_len >= 2
        && url.starts_with(|c: char| c.is_ascii_alphabetic())
        && url[scheme_len..].starts_with(':');
    if has_protocol {
        url.to_string()
    } else {
        format!("http://{url}")
    }
}

/// `action=shorturl`: `url`, optional `keyword` (an alias) and `title` (the preview title).
pub async fn shorturl(state: &HttpState, caller: &Caller, params: &Params) -> Outcome {
    let started = std::time::Instant::now();
    let url = params.get("url").unwrap_or_default();
    let keyword = params.non_empty("keyword");
    let result = create(state, caller, url, keyword, params.non_empty("title")).await;
    let label = result.as_ref().map_or_else(Error::outcome, |_| "created");
    state.metrics.create(label, started.elapsed());
    match result {
        Ok(link) => (created(state, &link), "ok"),
        Err(error) => (create_failure(&error, keyword), outcome(&error)),
    }
}

async fn create(
    state: &HttpState,
    caller: &Caller,
    url: &str,
    keyword: Option<&str>,
    title: Option<&str>,
) -> Result<Link, Error> {
    if url.trim().is_empty() {
        return Err(Error::invalid("invalid_url", "url is missing"));
    }
    let input = CreateInput {
        url: with_protocol(url.trim()),
        alias: keyword.map(str::to_string),
        preview: Preview {
            title: title.map(str::to_string),
            ..Preview::default()
        },
        ..CreateInput::default()
    };
    let request = CreateRequest::parse(input, &state.rules, Utc::now())?;
    let (link, _) = state.links.create(caller, request).await?;
    Ok(link)
}

fn created(state: &HttpState, link: &Link) -> Answer {
    let short = state.public.link_url(link);
    let shown: String = link.url.chars().take(100).collect();
    Answer::new(
        vec![
            ("status", "success".into()),
            ("code", "".into()),
            (
                "url",
                Value::Map(vec![
                    ("keyword".into(), link.shown_code().into()),
                    ("url".into(), link.url.as_str().into()),
                    ("title".into(), title(link).into()),
                    ("date".into(), yourls_time(link.created_at).into()),
                    ("ip".into(), "".into()),
                ]),
            ),
            ("message", format!("{shown} added to database").into()),
            ("title", title(link).into()),
            ("shorturl", short.clone().into()),
            ("statusCode", 200u64.into()),
        ],
        short,
    )
}

/// A refused create as YOURLS answers it.
fn create_failure(error: &Error, keyword: Option<&str>) -> Answer {
    let fail = |code: &str, message: String, status: u64| {
        let mut fields = vec![
            ("status", "fail".into()),
            ("code", code.into()),
            ("message", message.into()),
        ];
        if status != 200 {
            fields.push(("errorCode", status.to_string().into()));
        }
        fields.push(("statusCode", status.into()));
        Answer::new(fields, "")
    };
    let keyword = keyword.unwrap_or_default();
    match error {
        Error::AliasTaken(_) => fail(
            "error:keyword",
            format!("Short URL {keyword} already exists in database or is reserved"),
            200,
        ),
        Error::Invalid {
            code: "invalid_alias",
            message,
        } => fail("error:keyword", format!("keyword: {message}"), 200),
        Error::Invalid {
            code: "invalid_url",
            message,
        } => fail("error:nourl", url_message(message), 400),
        Error::Invalid {
            code: "blocked_target",
            message,
        } => fail("error:blocked", url_message(message), 400),
        Error::Invalid { code, .. } | Error::BadRequest { code, .. } => {
            fail(&format!("error:{code}"), error.public_message(), 400)
        }
        Error::Unavailable { .. } | Error::Internal(_) => {
            let mut answer = refusal(error);
            answer.fields.insert(0, ("status".into(), "fail".into()));
            answer.fields.insert(1, ("code".into(), "error:db".into()));
            answer
        }
        _ => refusal(error),
    }
}

fn url_message(message: &str) -> String {
    if message.starts_with("url") {
        format!("Missing or malformed URL: {message}")
    } else {
        format!("Missing or malformed URL: url: {message}")
    }
}

/// The link `text` names (a code, or a short URL on one of the node's hosts or a domain's) and
/// the caller may see; a deleted link is no link here, as YOURLS removes deleted rows.
async fn find(state: &HttpState, caller: &Caller, text: &str) -> Result<Link, Error> {
    // The public URL may have a path (`https://example.net/s/`): its codes follow it.
    let (host, code) = match (state.public.code_in(text), url::Url::parse(text)) {
        (Some(code), _) => (Some(state.public.host_str().to_string()), code.to_string()),
        (None, Ok(url)) if matches!(url.scheme(), "http" | "https") => {
            let code = url.path().trim_start_matches('/').to_string();
            (url.host_str().map(str::to_string), code)
        }
        _ => (None, text.to_string()),
    };
    let domain = state.rules.domain(host.as_deref())?;
    let code = ShortCode::parse(&code, state.rules.code_length)?.on(domain);
    let link = state.links.get(caller, &code).await?;
    if link.deleted_at.is_some() {
        return Err(Error::NotFound(code.as_str().to_string()));
    }
    Ok(link)
}

/// `action=expand`: `shorturl` (a code or a full short URL).
pub async fn expand(state: &HttpState, caller: &Caller, params: &Params) -> Outcome {
    let text = params.get("shorturl").unwrap_or_default();
    match find(state, caller, text).await {
        Ok(link) => (
            Answer::new(
                vec![
                    ("keyword", link.shown_code().into()),
                    ("shorturl", state.public.link_url(&link).into()),
                    ("longurl", link.url.as_str().into()),
                    ("title", title(&link).into()),
                    ("message", "success".into()),
                    ("statusCode", 200u64.into()),
                ],
                link.url.clone(),
            ),
            "ok",
        ),
        Err(error) => (lookup_failure(&error, text, true), outcome(&error)),
    }
}

/// A link that is not found (or cannot be a code) as YOURLS answers it; another refusal (a
/// rate limit, a fault) as an error.
fn lookup_failure(error: &Error, text: &str, expand: bool) -> Answer {
    match error {
        Error::NotFound(_) | Error::Gone(_) | Error::Invalid { .. } | Error::BadRequest { .. } => {
            if expand {
                Answer::new(
                    vec![
                        ("keyword", crate::domain::text::bounded(text, 64).into()),
                        ("message", NOT_FOUND.into()),
                        ("errorCode", 404u64.into()),
                    ],
                    "not found",
                )
            } else {
                Answer::new(
                    vec![("statusCode", 404u64.into()), ("message", NOT_FOUND.into())],
                    NEED_FORMAT,
                )
            }
        }
        _ => refusal(error),
    }
}

pub(super) fn link_fields(state: &HttpState, link: &Link) -> Value {
    Value::Map(vec![
        ("shorturl".into(), state.public.link_url(link).into()),
        ("url".into(), link.url.as_str().into()),
        ("title".into(), title(link).into()),
        ("timestamp".into(), yourls_time(link.created_at).into()),
        ("ip".into(), "".into()),
        ("clicks".into(), clicks(link).to_string().into()),
    ])
}

/// `action=url-stats`: `shorturl`.
pub async fn url_stats(state: &HttpState, caller: &Caller, params: &Params) -> Outcome {
    let text = params.get("shorturl").unwrap_or_default();
    match find(state, caller, text).await {
        Ok(link) => (
            Answer::new(
                vec![
                    ("statusCode", 200u64.into()),
                    ("message", "success".into()),
                    ("link", link_fields(state, &link)),
                ],
                NEED_FORMAT,
            ),
            "ok",
        ),
        Err(error) => (lookup_failure(&error, text, false), outcome(&error)),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_url_without_a_protocol_gets_yourls_http() {
        for (given, taken) in [
            ("example.com/page", "http://example.com/page"),
            ("www.example.com", "http://www.example.com"),
            ("https://example.com/", "https://example.com/"),
            ("HTTP://example.com/", "HTTP://example.com/"),
            ("javascript:alert(1)", "javascript:alert(1)"),
            ("svn+ssh://host/x", "svn+ssh://host/x"),
            ("1abc:thing", "http://1abc:thing"),
            ("a:b", "http://a:b"),
        ] {
            assert_eq!(super::with_protocol(given), taken, "{given}");
        }
    }
}
