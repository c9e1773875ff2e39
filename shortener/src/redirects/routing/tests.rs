use super::visitor::{first_language, language_matches};
use super::*;
use axum::http::{HeaderMap, header};
use std::net::IpAddr;

#[test]
fn a_language_tag_holds_for_itself_and_a_primary_tag_for_its_regions() {
    for (preferred, tag, holds) in [
        ("de", "de", true),
        ("DE-at", "de", true),
        ("de-AT", "de-at", true),
        ("de", "de-at", false),
        ("de-CH", "de-at", false),
        ("pt-BR-x", "pt-br", false),
        ("den", "de", false),
        ("en-US", "de", false),
    ] {
        assert_eq!(
            language_matches(preferred.as_bytes(), tag),
            holds,
            "{preferred} {tag}"
        );
    }
}

/// The compiled rules (agent conditions and a query's presence as bits) choose the rule
/// that reading every condition in order would: for each agent, query and language, over
/// rules that mix every kind of condition the bits decide or pre-check.
#[test]
fn compiled_rules_choose_what_reading_each_condition_would() {
    use crate::domain::rules::{Browser, DeviceClass, Rule as Written, Rules};
    let rule = |n: usize, conditions: Vec<Condition>| Written {
        url: format!("https://r{n}.example/"),
        variants: Vec::new(),
        conditions,
    };
    let query = |key: &str, values: &[&str]| Condition::Query {
        key: key.into(),
        values: values.iter().map(|v| v.to_string()).collect(),
    };
    let written = vec![
        rule(0, vec![query("ref", &[])]),
        rule(
            1,
            vec![query("src", &["feed"]), Condition::Os { value: Os::Ios }],
        ),
        rule(2, vec![Condition::Language { value: "de".into() }]),
        rule(
            3,
            vec![
                Condition::Device {
                    value: DeviceClass::Mobile,
                },
                Condition::Browser {
                    value: Browser::Firefox,
                },
            ],
        ),
        rule(
            4,
            vec![
                Condition::Device {
                    value: DeviceClass::Desktop,
                },
                Condition::Device {
                    value: DeviceClass::Mobile,
                },
            ],
        ),
        rule(
            5,
            vec![
                Condition::Os { value: Os::Android },
                Condition::Language { value: "fr".into() },
            ],
        ),
        rule(
            6,
            vec![
                Condition::Browser {
                    value: Browser::Chrome,
                },
                query("x", &[]),
            ],
        ),
        rule(
            7,
            vec![Condition::Device {
                value: DeviceClass::Desktop,
            }],
        ),
    ];
    let routes = Routes {
        rules: Rules(written.clone()),
        ..Routes::default()
    };
    let routing = Routing::compile(&routes, "https://url.example/").expect("it routes");
    let agents = [
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36",
        "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1",
        "Mozilla/5.0 (Android 14; Mobile; rv:121.0) Gecko/121.0 Firefox/121.0",
        "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Mobile Safari/537.36",
        "curl/8.5",
    ];
    let mut chosen = std::collections::BTreeSet::new();
    for agent in agents {
        for query in [
            None,
            Some(""),
            Some("ref=1"),
            Some("src=feed"),
            Some("x=&y=2"),
        ] {
            for language in [None, Some("de-AT"), Some("fr;q=0.9, en;q=0.8")] {
                let mut headers = HeaderMap::new();
                if let Some(language) = language {
                    headers.insert(header::ACCEPT_LANGUAGE, language.parse().unwrap());
                }
                let client = || IpAddr::from([192, 0, 2, 1]);
                let country = |_| None;
                let visitor = Visitor::new("k", &headers, Some(agent), query, &client, &country);
                let read = written
                    .iter()
                    .position(|r| r.conditions.iter().all(|c| visitor.meets(c)));
                let route = routing.choose(&visitor).route;
                let want = read.map_or(Route::Url, |i| Route::Rule(i as u8));
                assert_eq!(route, want, "{agent} {query:?} {language:?}");
                chosen.insert(format!("{route:?}"));
            }
        }
    }
    // The table reaches most rules, so a wrong bit would show.
    assert!(chosen.len() >= 6, "{chosen:?}");
}

#[test]
fn a_plain_first_range_is_the_preferred_language_without_reading_on() {
    for (header, fast) in [
        ("en-US,en;q=0.9", Some(Some(&b"en-US"[..]))),
        ("  de-AT , fr", Some(Some(&b"de-AT"[..]))),
        ("pt-BR", Some(Some(&b"pt-BR"[..]))),
        ("de;q=0.5, en", None),
        ("*, en", None),
        (", en", None),
        ("", None),
        ("d\u{e9}, en", None),
        ("de\tat, en", None),
    ] {
        assert_eq!(first_language(header.as_bytes()), fast, "{header}");
        if let Some(answer) = fast {
            assert_eq!(
                preferred_language(header).map(str::as_bytes),
                answer,
                "{header}"
            );
        }
    }
}

#[test]
fn the_preferred_language_is_the_highest_q_value() {
    for (header, want) in [
        ("de-AT,de;q=0.9,en;q=0.8", Some("de-AT")),
        ("en;q=0.5, fr;q=0.9", Some("fr")),
        ("*;q=1, it", Some("it")),
        ("es;q=0, pt-BR", Some("pt-BR")),
        ("fr;q=1, de", Some("fr")),
        ("de;q=0.5, en, fr", Some("en")),
        ("en;q=oops, nl;q=0.1", Some("nl")),
        ("", None),
        ("*", None),
    ] {
        assert_eq!(preferred_language(header), want, "{header}");
    }
}

/// A routed link is weighed at no less than the texts it holds: a rule's query conditions
/// (keys and every value), the preview and the link's URL with its UTM parameters. Weighed at
/// less, large rules would fill many times the cache's budget.
#[test]
fn a_routed_link_weighs_at_least_the_texts_it_holds() {
    use crate::domain::routes::{Preview, Utm};
    use crate::domain::rules::{Rule as Written, Rules};
    let value = |n: usize| format!("{n:03}{}", "v".repeat(97));
    let conditions: Vec<Condition> = (0..8)
        .map(|k| Condition::Query {
            key: format!("key{k}{}", "k".repeat(100)),
            values: (0..16).map(value).collect(),
        })
        .collect();
    let texts: usize = conditions.iter().map(Condition::heap_bytes).sum();
    assert!(texts >= 8 * (104 + 16 * 100), "{texts}");
    let preview = Preview {
        title: Some("t".repeat(200)),
        description: Some("d".repeat(500)),
        image: Some(format!("https://img.example/{}", "i".repeat(1900))),
    };
    let url = format!("https://url.example/{}", "p".repeat(1500));
    let routes = Routes {
        rules: Rules(vec![Written {
            url: "https://rule.example/".into(),
            variants: Vec::new(),
            conditions,
        }]),
        utm: Utm {
            source: Some("newsletter".into()),
            ..Utm::default()
        },
        preview: preview.clone(),
        ..Routes::default()
    };
    let routing = Routing::compile(&routes, &url).expect("it routes");
    let held = texts + preview.heap_bytes() + url.len() + "https://rule.example/".len();
    assert!(
        routing.weight() >= held,
        "weighed {} for {held} bytes of texts",
        routing.weight()
    );
    // And a plain rule stays small: no flat charge dwarfs what it holds.
    let plain = Routes {
        rules: Rules(vec![Written {
            url: "https://rule.example/".into(),
            variants: Vec::new(),
            conditions: vec![Condition::Language { value: "de".into() }],
        }]),
        ..Routes::default()
    };
    let small = Routing::compile(&plain, "https://url.example/").expect("it routes");
    assert!(small.weight() < 512, "{}", small.weight());
}
