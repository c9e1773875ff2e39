//! What kind of visit a redirect was, from its method and `User-Agent`.

use aho_corasick::AhoCorasick;
use std::sync::LazyLock;

/// What kind of visit a redirect was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Visit {
    /// A GET from a person's browser (or anything not known to be a bot).
    Human,
    /// A HEAD request.
    Head,
    /// A GET from a known crawler or link-preview fetcher.
    Bot,
}

/// User-agent fragments (lowercase) of crawlers and link-preview fetchers.
const BOT_MARKERS: &[&str] = &[
    "bot",
    "crawler",
    "spider",
    "slurp",
    "facebookexternalhit",
    "facebookcatalog",
    "embedly",
    "quora link preview",
    "outbrain",
    "pinterest",
    "vkshare",
    "w3c_validator",
    "whatsapp",
    "skypeuripreview",
    "bitlybot",
    "preview",
    "headlesschrome",
    "lighthouse",
    "python-requests",
    "go-http-client",
    "okhttp",
    "curl/",
    "wget/",
];

/// Finds any of [`BOT_MARKERS`], ignoring ASCII case, in one pass over the user agent.
static BOT_FINDER: LazyLock<AhoCorasick> = LazyLock::new(|| {
    AhoCorasick::builder()
        .ascii_case_insensitive(true)
        .build(BOT_MARKERS)
        .expect("the bot markers are valid patterns")
});

/// Classifies a request by method and `User-Agent`.
pub fn classify(is_head: bool, user_agent: Option<&str>) -> Visit {
    if is_head {
        return Visit::Head;
    }
    match user_agent {
        Some(ua) if !BOT_FINDER.is_match(ua) => Visit::Human,
        _ => Visit::Bot,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn visits_are_classified_by_method_and_user_agent() {
        let browser =
            "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 Chrome/120.0 Safari/537.36";
        assert_eq!(classify(false, Some(browser)), Visit::Human);
        assert_eq!(classify(true, Some(browser)), Visit::Head);
        for ua in [
            "Slackbot-LinkExpanding 1.0",
            "facebookexternalhit/1.1",
            "Twitterbot/1.0",
            "Googlebot/2.1",
            "WhatsApp/2.23",
            "curl/8.0",
        ] {
            assert_eq!(classify(false, Some(ua)), Visit::Bot, "{ua}");
        }
        assert_eq!(classify(false, None), Visit::Bot);
    }
}
