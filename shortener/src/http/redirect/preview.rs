//! Social previews: a link-preview crawler (Facebook, X, LinkedIn, Slack, Discord, Telegram,
//! WhatsApp, iMessage, ...) asking for a link with a preview gets a small HTML page of `og:` and
//! `twitter:` tags instead of the redirect; everyone else gets the redirect. The page holds no
//! script and no refresh, says `noindex`, escapes every value, and stays under
//! [`MAX_PAGE`] bytes.

use super::protect::escape;
use crate::domain::routes::Preview;
use aho_corasick::AhoCorasick;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use std::fmt::Write;
use std::sync::LazyLock;

/// The most bytes a preview page has.
pub const MAX_PAGE: usize = 10 * 1024;

/// User-agent fragments (any case) of link-preview crawlers.
const PREVIEW_CRAWLERS: &[&str] = &[
    "facebookexternalhit",
    "facebot",
    "twitterbot",
    "linkedinbot",
    "slackbot",
    "slack-imgproxy",
    "discordbot",
    "telegrambot",
    "whatsapp",
    "skypeuripreview",
    "pinterest",
    "redditbot",
    "embedly",
    "vkshare",
    "mastodon",
    "bluesky",
    "iframely",
    // Snapchat's fetcher ("Snap URL Preview Service"), not its in-app browser, whose agent
    // names `Snapchat` too and is a person's.
    "snap url preview",
];

static FINDER: LazyLock<AhoCorasick> = LazyLock::new(|| {
    AhoCorasick::builder()
        .ascii_case_insensitive(true)
        .build(PREVIEW_CRAWLERS)
        .expect("the crawler markers are valid patterns")
});

/// Whether the request comes from a link-preview crawler.
pub fn is_preview_crawler(headers: &HeaderMap) -> bool {
    headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|agent| FINDER.is_match(agent))
}

/// The preview page of `preview` for the short URL `short_url`.
pub fn page(preview: &Preview, short_url: &str) -> Response {
    let body = html(preview, short_url, true);
    let body = if body.len() > MAX_PAGE {
        html(preview, short_url, false)
    } else {
        body
    };
    (
        StatusCode::OK,
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            ),
            (
                header::CACHE_CONTROL,
                HeaderValue::from_static("private, no-store"),
            ),
            (
                header::HeaderName::from_static("x-robots-tag"),
                HeaderValue::from_static("noindex"),
            ),
            (
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static("default-src 'none'"),
            ),
        ],
        body,
    )
        .into_response()
}

/// The page's HTML; without the description when `with_description` is false (the fallback that
/// keeps a page of pathological values under the bound).
fn html(preview: &Preview, short_url: &str, with_description: bool) -> String {
    let mut out = String::with_capacity(1024);
    out.push_str("<!doctype html><html><head><meta charset=\"utf-8\"><meta name=\"robots\" content=\"noindex\">");
    let tag = |out: &mut String, attribute: &str, name: &str, value: &str| {
        let _ = write!(
            out,
            "<meta {attribute}=\"{name}\" content=\"{}\">",
            escape(value)
        );
    };
    if let Some(title) = &preview.title {
        let _ = write!(out, "<title>{}</title>", escape(title));
        tag(&mut out, "property", "og:title", title);
    }
    if with_description && let Some(description) = &preview.description {
        tag(&mut out, "property", "og:description", description);
    }
    if let Some(image) = &preview.image {
        tag(&mut out, "property", "og:image", image);
    }
    tag(&mut out, "property", "og:url", short_url);
    tag(&mut out, "property", "og:type", "website");
    let card = if preview.image.is_some() {
        "summary_large_image"
    } else {
        "summary"
    };
    tag(&mut out, "name", "twitter:card", card);
    out.push_str("</head><body></body></html>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A preview crawler's fetch is a bot's visit, so it never spends a link's visit limit nor
    /// counts as a person: each crawler this module answers is one the visit classifier knows.
    #[test]
    fn every_preview_crawler_is_counted_as_a_bot() {
        for marker in PREVIEW_CRAWLERS {
            let agent = format!("Mozilla/5.0 (compatible; {marker}/1.0; +https://example.org/)");
            assert_eq!(
                crate::visits::classify::kind(false, Some(&agent)),
                crate::visits::classify::VisitKind::Bot,
                "{agent}"
            );
        }
        // A person in Snapchat's in-app browser is no crawler.
        let in_app = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 Snapchat/12.50.0.32 (like Safari/604.1)";
        let mut headers = HeaderMap::new();
        headers.insert(header::USER_AGENT, HeaderValue::from_static(in_app));
        assert!(!is_preview_crawler(&headers));
        assert_eq!(
            crate::visits::classify::kind(false, Some(in_app)),
            crate::visits::classify::VisitKind::Human
        );
        // As Mastodon's fetcher spells itself.
        let mastodon = "http.rb/5.1.1 (Mastodon/4.2.0; +https://mastodon.social/)";
        assert_eq!(
            crate::visits::classify::kind(false, Some(mastodon)),
            crate::visits::classify::VisitKind::Bot
        );
    }

    #[test]
    fn every_value_is_escaped_and_the_page_stays_small() {
        let preview = Preview {
            title: Some("<script>alert(\"x\")</script> & 'more'".into()),
            description: Some("\"".repeat(500)),
            image: Some("https://img.example/a.png?x=1&y=2".into()),
        };
        let body = html(&preview, "https://sho.rt/abc", true);
        assert!(!body.contains("<script>"), "{body}");
        assert!(
            body.contains("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;more&#39;")
        );
        assert!(body.contains("content=\"https://img.example/a.png?x=1&amp;y=2\""));
        let worst = Preview {
            title: Some("\"".repeat(200)),
            description: Some("\"".repeat(500)),
            image: Some(format!("https://img.example/?{}", "a=&".repeat(600))),
        };
        let response = page(&worst, "https://sho.rt/abc");
        assert_eq!(response.status(), StatusCode::OK);
        assert!(html(&worst, "https://sho.rt/abc", false).len() <= MAX_PAGE);
        for agent in [
            "facebookexternalhit/1.1",
            "Twitterbot/1.0",
            "Slackbot-LinkExpanding 1.0",
            "WhatsApp/2.23",
        ] {
            let mut headers = HeaderMap::new();
            headers.insert(header::USER_AGENT, HeaderValue::from_static(agent));
            assert!(is_preview_crawler(&headers), "{agent}");
        }
        let mut headers = HeaderMap::new();
        headers.insert(
            header::USER_AGENT,
            HeaderValue::from_static("Mozilla/5.0 Chrome/120"),
        );
        assert!(!is_preview_crawler(&headers));
    }
}
