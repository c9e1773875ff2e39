//! The one classifier of visits, for the totals and the rollups alike: what kind of visit it
//! was (a person's, a HEAD request or a bot's, from the method and `User-Agent`), its device
//! class, its referrer's host and its country.

use super::Visit;
use super::analytics::{Cell, GeoIp, Referrer};
use crate::domain::Device;
use aho_corasick::AhoCorasick;
use quick_cache::sync::Cache;
use std::hash::BuildHasher;
use std::sync::LazyLock;

/// What kind of visit a redirect was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VisitKind {
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
    // Link-preview fetchers whose agents name no `bot` (every preview crawler is a bot here:
    // `http::redirect::preview`'s test holds the two lists together).
    "mastodon",
    "bluesky",
    "iframely",
    "slack-imgproxy",
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

/// Classifies a request by method and `User-Agent`: a GET with no user agent, or an empty
/// one, is a bot's, as is one naming a crawler (the marker `bot` only where it is not part of
/// a device name: `CUBOT` phones are people's).
pub fn kind(is_head: bool, user_agent: Option<&str>) -> VisitKind {
    if is_head {
        return VisitKind::Head;
    }
    match user_agent.map(str::trim) {
        Some(ua) if !ua.is_empty() && !names_a_bot(ua) => VisitKind::Human,
        _ => VisitKind::Bot,
    }
}

/// Whether `ua` holds a crawler's marker. `bot` counts unless it ends the word `cubot` (a phone
/// maker whose models put it in every browser's user agent).
fn names_a_bot(ua: &str) -> bool {
    BOT_FINDER.find_iter(ua).any(|found| {
        let before = &ua.as_bytes()[..found.start()];
        !(BOT_MARKERS[found.pattern().as_usize()] == "bot"
            && before.len() >= 2
            && before[before.len() - 2..].eq_ignore_ascii_case(b"cu"))
    })
}

/// What a visit is counted under in the rollups besides its kind: its referrer's host, its
/// device class and, when `geo` is given and loaded, its client's country (the address is
/// looked up and dropped).
pub fn cell(visit: &Visit<'_>, kind: VisitKind, geo: Option<&GeoIp>) -> Cell {
    let referrer = match referrer_host(visit.referrer) {
        Some(host) => Referrer::Host(host),
        None => Referrer::None,
    };
    let country = geo
        .filter(|geo| geo.loaded())
        .zip(visit.client)
        .and_then(|(geo, client)| geo.country(client));
    let device = match visit.profile {
        Some(profile) if kind != VisitKind::Bot => profile.class,
        _ => device(kind, visit.user_agent),
    };
    Cell {
        referrer,
        device,
        country,
        route: visit.route,
    }
}

/// The longest host kept (a DNS name has at most 253 characters).
const MAX_HOST: usize = 253;

/// The host of a `Referer` value, normalised: only `http` and `https` referrers count,
/// lowercased (IDNs in their ASCII form, as the URL parser gives them), without a trailing dot
/// or a leading `www.`. `None` when there is no referrer or it is not such a URL.
pub fn referrer_host(referer: Option<&str>) -> Option<Box<str>> {
    let url = url::Url::parse(referer?.trim()).ok()?;
    if !matches!(url.scheme(), "http" | "https") {
        return None;
    }
    let host = url.host_str()?.trim_end_matches('.');
    let host = host.strip_prefix("www.").unwrap_or(host);
    // A host of the characters names and address literals are made of: the URL parser takes
    // others (`(other)`, the folded bucket's own name, among them), which no referrer needs.
    let plain =
        |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b':' | b'[' | b']');
    if host.is_empty() || host.len() > MAX_HOST || !host.bytes().all(plain) {
        return None;
    }
    Some(host.to_ascii_lowercase().into_boxed_str())
}

/// The device class of a visit: bots (as [`kind`] tells them) are `bot`; otherwise the
/// User-Agent is parsed (woothee, remembered per agent with its profile): PCs are desktops,
/// phones mobile, iPads and Android devices without the `Mobile` token tablets, crawlers bots,
/// the rest other.
pub fn device(kind: VisitKind, user_agent: Option<&str>) -> Device {
    if kind == VisitKind::Bot {
        return Device::Bot;
    }
    agent_profile(user_agent).class
}

fn class(agent: &str, parsed: Option<&woothee::parser::WootheeResult<'_>>) -> Device {
    let Some(parsed) = parsed else {
        return Device::Other;
    };
    match parsed.category {
        "pc" => Device::Desktop,
        "smartphone" | "mobilephone" => {
            let android_tablet = parsed.os == "Android" && !agent.contains("Mobile");
            if parsed.os == "iPad" || android_tablet || agent.contains("Tablet") {
                Device::Tablet
            } else {
                Device::Mobile
            }
        }
        "crawler" => Device::Bot,
        _ => Device::Other,
    }
}

/// What redirect rules read of a user agent: its device class, operating system and browser.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentProfile {
    /// The device class the rollups count it under (bots by the agent only; see [`device`]).
    pub class: Device,
    /// The device class (`None`: a bot or unknown).
    pub device: Option<crate::domain::rules::DeviceClass>,
    /// The operating system family, if known.
    pub os: Option<crate::domain::rules::Os>,
    /// The browser family, if known.
    pub browser: Option<crate::domain::rules::Browser>,
}

/// Profiles of recently seen user agents, keyed by a hash of the agent: a parse costs
/// microseconds, and a few agents make up most traffic. One cache serves the rollups' device
/// classes and the redirect rules alike.
static PROFILES: LazyLock<(Cache<u64, AgentProfile>, foldhash::quality::RandomState)> =
    LazyLock::new(|| {
        (
            Cache::new(PROFILES_HELD),
            foldhash::quality::RandomState::default(),
        )
    });

/// The most agent profiles remembered.
const PROFILES_HELD: usize = 4096;

/// What one remembered profile costs, estimated: its key and profile in the cache's slot, the
/// cache's index of it and its eviction state (about as much again).
const PROFILE_BYTES: u64 = 2 * std::mem::size_of::<(u64, AgentProfile)>() as u64 + 16;

/// Bytes the per-agent profile cache holds now, and at most (see [`PROFILE_BYTES`]).
pub fn profile_cache_memory() -> (u64, u64) {
    let (cache, _) = &*PROFILES;
    (
        cache.len() as u64 * PROFILE_BYTES,
        PROFILES_HELD as u64 * PROFILE_BYTES,
    )
}

/// The profile of `user_agent` for the rollups and redirect rules (woothee; remembered).
pub fn agent_profile(user_agent: Option<&str>) -> AgentProfile {
    let Some(agent) = user_agent else {
        return AgentProfile {
            class: Device::Other,
            device: None,
            os: None,
            browser: None,
        };
    };
    let (cache, hasher) = &*PROFILES;
    let key = hasher.hash_one(agent);
    if let Some(profile) = cache.get(&key) {
        return profile;
    }
    let profile = profile_of(agent);
    cache.insert(key, profile);
    profile
}

fn profile_of(agent: &str) -> AgentProfile {
    use crate::domain::rules::{Browser, DeviceClass, Os};
    let parsed = woothee::parser::Parser::new().parse(agent);
    let class = class(agent, parsed.as_ref());
    let device = match class {
        Device::Desktop => Some(DeviceClass::Desktop),
        Device::Mobile => Some(DeviceClass::Mobile),
        Device::Tablet => Some(DeviceClass::Tablet),
        Device::Bot | Device::Other => None,
    };
    let os = match parsed.as_ref().map(|p| p.os) {
        Some("iPhone" | "iPad" | "iPod" | "iOS") => Some(Os::Ios),
        Some("Android") => Some(Os::Android),
        Some(os) if os.starts_with("Windows") => Some(Os::Windows),
        Some("Mac OSX" | "Mac OS Classic") => Some(Os::Macos),
        Some("ChromeOS") => Some(Os::Chromeos),
        Some("Linux") => Some(Os::Linux),
        _ => None,
    };
    // Browsers that build on Chrome's engine name themselves after it in the agent; the
    // specific names are looked for first.
    let browser = if agent.contains("SamsungBrowser/") {
        Some(Browser::Samsung)
    } else if agent.contains("Edg/") || agent.contains("Edge/") || agent.contains("EdgA/") {
        Some(Browser::Edge)
    } else if agent.contains("OPR/") || agent.contains("Opera") {
        Some(Browser::Opera)
    } else if agent.contains("Firefox/") || agent.contains("FxiOS/") {
        Some(Browser::Firefox)
    } else if agent.contains("Chrome/") || agent.contains("CriOS/") || agent.contains("Chromium/") {
        Some(Browser::Chrome)
    } else if agent.contains("Safari/") && agent.contains("Version/") {
        Some(Browser::Safari)
    } else {
        None
    };
    AgentProfile {
        class,
        device,
        os,
        browser,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn visits_are_classified_by_method_and_user_agent() {
        let browser =
            "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 Chrome/120.0 Safari/537.36";
        assert_eq!(kind(false, Some(browser)), VisitKind::Human);
        assert_eq!(kind(true, Some(browser)), VisitKind::Head);
        for ua in [
            "Slackbot-LinkExpanding 1.0",
            "facebookexternalhit/1.1",
            "Twitterbot/1.0",
            "Googlebot/2.1",
            "WhatsApp/2.23",
            "curl/8.0",
        ] {
            assert_eq!(kind(false, Some(ua)), VisitKind::Bot, "{ua}");
        }
        assert_eq!(kind(false, None), VisitKind::Bot);
        // An empty user agent is none; a phone maker's name holding "bot" is a person's.
        assert_eq!(kind(false, Some("")), VisitKind::Bot);
        assert_eq!(kind(false, Some("  ")), VisitKind::Bot);
        let cubot = "Mozilla/5.0 (Linux; Android 10; CUBOT_X30) AppleWebKit/537.36 Chrome/120.0 Mobile Safari/537.36";
        assert_eq!(kind(false, Some(cubot)), VisitKind::Human);
        let crawler_on_cubot = "Mozilla/5.0 (Linux; Android 10; CUBOT_X30) Googlebot/2.1";
        assert_eq!(kind(false, Some(crawler_on_cubot)), VisitKind::Bot);
    }

    #[test]
    fn referrers_are_reduced_to_a_normalised_host() {
        let cases = [
            (
                Some("https://www.Example.com/path?q=1"),
                Some("example.com"),
            ),
            (Some("http://news.example.org./a"), Some("news.example.org")),
            (
                Some("https://bücher.example/"),
                Some("xn--bcher-kva.example"),
            ),
            (Some("android-app://com.slack/"), None),
            (Some("http://[::1]:8080/"), Some("[::1]")),
            // The folded bucket's own name, and hosts of characters no name has.
            (Some("http://(other)/"), None),
            (Some("http://a(b)c.example/"), None),
            (Some("http://a$b.example/"), None),
            (Some("not a url"), None),
            (Some(""), None),
            (None, None),
        ];
        for (referer, host) in cases {
            assert_eq!(referrer_host(referer).as_deref(), host, "{referer:?}");
        }
    }

    #[test]
    fn user_agents_are_sorted_into_device_classes() {
        let cases = [
            (
                "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36",
                Device::Desktop,
            ),
            (
                "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1",
                Device::Mobile,
            ),
            (
                "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Mobile Safari/537.36",
                Device::Mobile,
            ),
            (
                "Mozilla/5.0 (iPad; CPU OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1",
                Device::Tablet,
            ),
            (
                "Mozilla/5.0 (Linux; Android 13; SM-X200) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36",
                Device::Tablet,
            ),
            (
                "Googlebot/2.1 (+http://www.google.com/bot.html)",
                Device::Bot,
            ),
            ("something-else/1.0", Device::Other),
        ];
        for (agent, expected) in cases {
            assert_eq!(device(VisitKind::Human, Some(agent)), expected, "{agent}");
            // Cached: the same answer again.
            assert_eq!(device(VisitKind::Human, Some(agent)), expected, "{agent}");
        }
        assert_eq!(device(VisitKind::Bot, Some(cases[0].0)), Device::Bot);
        assert_eq!(device(VisitKind::Human, None), Device::Other);
    }

    #[test]
    fn the_profile_cache_keeps_to_its_bound_however_many_agents_come() {
        for i in 0..(PROFILES_HELD * 3) {
            agent_profile(Some(&format!("Mozilla/5.0 (agent {i}) Chrome/120.0")));
        }
        let (bytes, budget) = profile_cache_memory();
        assert!(bytes > 0, "the gauge moved");
        assert!(bytes <= budget, "{bytes} past {budget}");
    }
}
