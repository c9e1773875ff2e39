//! Where a link routes besides its URL, stored whole as one JSON object beside it: its redirect
//! rules ([`super::rules`]), its app targets (`ios`, `android`) and its split (`variants`).
//! The redirect edge compiles it once per cache entry ([`crate::redirects::routing`]) and
//! decides in this order: the first rule that holds, else the app target of the visitor's
//! operating system, else the visitor's variant of the split, else the link's URL.

use super::rules::Rules;
use super::{Error, TargetPolicy, TargetUrl, UrlError};
use serde::{Deserialize, Serialize};

/// The most variants of a split.
pub const MAX_VARIANTS: usize = 10;
/// The longest app target, in bytes.
pub const MAX_APP_URL: usize = 2048;

/// Schemes an app target may never have: they run or read something in the browser itself.
const REFUSED_SCHEMES: &[&str] = &["javascript", "data", "vbscript", "file", "about", "blob"];

/// One variant of a split: a target and its share of new visitors.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Variant {
    /// The target.
    pub url: String,
    /// Its share, in percent (1 to 100; a split's weights sum to 100).
    pub weight: u8,
}

/// A variant as a transport received it (the weight any integer, checked by [`variants`]).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VariantInput {
    /// The target.
    pub url: String,
    /// Its share, in percent.
    pub weight: i64,
}

/// A link's routing, checked.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Routes {
    /// Redirect rules, in order.
    #[serde(default, skip_serializing_if = "Rules::is_empty")]
    pub rules: Rules,
    /// The iOS target (an app URL or a store link).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ios: Option<String>,
    /// The Android target (an app URL or a store link).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub android: Option<String>,
    /// The split, if the link has one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub variants: Vec<Variant>,
}

impl Routes {
    /// Whether the link routes nowhere but its URL.
    pub fn is_empty(&self) -> bool {
        self == &Self::default()
    }

    /// As stored (JSON text); `None` for a plain link.
    pub fn to_stored(&self) -> Option<String> {
        (!self.is_empty()).then(|| serde_json::to_string(self).unwrap_or_default())
    }

    /// From stored JSON text; unreadable text routes nowhere.
    pub fn from_stored(text: Option<&str>) -> Self {
        text.and_then(|t| serde_json::from_str(t).ok())
            .unwrap_or_default()
    }
}

/// Checks an app target (`field` names it in the error): an `http(s)` URL passes every rule a
/// link's target does; any other scheme (an app's, `myapp://item/7`) must parse as a URL, be at
/// most [`MAX_APP_URL`] bytes and not be one that runs in the browser (`javascript:`, `data:`,
/// `file:`, ...). `None` or empty: no target.
pub fn app_target(
    field: &str,
    input: Option<String>,
    max_url_length: usize,
    targets: &dyn TargetPolicy,
) -> Result<Option<String>, Error> {
    let Some(text) = input.filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    let invalid =
        |message: String| Error::invalid("invalid_app_target", format!("{field}: {message}"));
    let parsed = url::Url::parse(&text).map_err(|e| invalid(format!("not a URL: {e}")))?;
    if matches!(parsed.scheme(), "http" | "https") {
        return TargetUrl::parse(&text, max_url_length, targets)
            .map(|u| Some(u.as_str().to_string()))
            .map_err(|e| match e {
                UrlError::Blocked(_) => Error::invalid("blocked_target", format!("{field}: {e}")),
                e => invalid(e.to_string()),
            });
    }
    if REFUSED_SCHEMES.contains(&parsed.scheme()) {
        return Err(invalid(format!(
            "the {} scheme is not an app's",
            parsed.scheme()
        )));
    }
    let serialized = parsed.to_string();
    if serialized.len() > MAX_APP_URL || serialized.chars().any(char::is_control) {
        return Err(invalid(format!(
            "at most {MAX_APP_URL} bytes, no control characters"
        )));
    }
    Ok(Some(serialized))
}

/// Checks a split: 2 to [`MAX_VARIANTS`] variants, each target like a link's, each weight 1 to
/// 100, the weights summing to 100. Empty: no split.
pub fn variants(
    input: Vec<VariantInput>,
    max_url_length: usize,
    targets: &dyn TargetPolicy,
) -> Result<Vec<Variant>, Error> {
    if input.is_empty() {
        return Ok(Vec::new());
    }
    let invalid = |message: String| Error::invalid("invalid_variants", message);
    if input.len() < 2 || input.len() > MAX_VARIANTS {
        return Err(invalid(format!(
            "variants: 2 to {MAX_VARIANTS} variants, not {}",
            input.len()
        )));
    }
    let mut total = 0u32;
    let mut checked = Vec::with_capacity(input.len());
    for (i, variant) in input.into_iter().enumerate() {
        let Ok(weight) = u8::try_from(variant.weight).map_err(drop).and_then(|w| {
            if (1..=100).contains(&w) {
                Ok(w)
            } else {
                Err(())
            }
        }) else {
            return Err(invalid(format!(
                "variants[{i}].weight: 1 to 100, not {}",
                variant.weight
            )));
        };
        total += u32::from(weight);
        let url = TargetUrl::parse(&variant.url, max_url_length, targets).map_err(|e| match e {
            UrlError::Blocked(_) => {
                Error::invalid("blocked_target", format!("variants[{i}].url: {e}"))
            }
            e => invalid(format!("variants[{i}].url: {e}")),
        })?;
        checked.push(Variant {
            url: url.as_str().to_string(),
            weight,
        });
    }
    if total != 100 {
        return Err(invalid(format!(
            "variants: the weights sum to {total}, not 100"
        )));
    }
    Ok(checked)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Anything;

    impl TargetPolicy for Anything {
        fn check_host(&self, _: url::Host<&str>) -> Result<(), UrlError> {
            Ok(())
        }
    }

    #[test]
    fn routes_round_trip_and_plain_links_store_nothing() {
        assert_eq!(Routes::default().to_stored(), None);
        let routes = Routes {
            ios: Some("myapp://item/7".into()),
            variants: vec![
                Variant {
                    url: "https://a.example/".into(),
                    weight: 30,
                },
                Variant {
                    url: "https://b.example/".into(),
                    weight: 70,
                },
            ],
            ..Default::default()
        };
        let stored = routes.to_stored().expect("stored");
        assert_eq!(Routes::from_stored(Some(&stored)), routes);
    }

    #[test]
    fn app_targets_and_splits_are_checked() {
        let app = |t: &str| app_target("ios", Some(t.into()), 2048, &Anything);
        assert_eq!(
            app("myapp://item/7").expect("app"),
            Some("myapp://item/7".into())
        );
        assert_eq!(
            app("https://apps.apple.com/app/id1").expect("store"),
            Some("https://apps.apple.com/app/id1".into())
        );
        for bad in [
            "javascript:alert(1)",
            "data:text/html,x",
            "not a url",
            "file:///etc/passwd",
        ] {
            assert_eq!(
                app(bad).expect_err(bad).code(),
                "invalid_app_target",
                "{bad}"
            );
        }
        let split = |w: &[i64]| {
            variants(
                w.iter()
                    .map(|w| VariantInput {
                        url: format!("https://{w}.example/"),
                        weight: *w,
                    })
                    .collect(),
                2048,
                &Anything,
            )
        };
        assert!(split(&[50, 50]).is_ok());
        for bad in [
            &[100][..],
            &[50, 49],
            &[0, 100],
            &[60, 60],
            &[10; 11],
            &[-50, 150],
        ] {
            assert_eq!(
                split(bad).expect_err("bad").code(),
                "invalid_variants",
                "{bad:?}"
            );
        }
    }
}
