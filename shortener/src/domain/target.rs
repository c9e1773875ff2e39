//! Target URLs: parsed once at the edge, refused cleanly when unsafe (invariant I6).

use url::Url;

/// The longest target URL accepted by default, in bytes.
pub const DEFAULT_MAX_URL_LENGTH: usize = 2048;

/// A validated redirect target: an absolute `http`/`https` URL without user info, in its
/// serialized (WHATWG) form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetUrl(String);

/// Why a target URL was refused. The display text is safe to show to the caller.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    /// Nothing was given.
    #[error("the url is empty")]
    Empty,
    /// Over the configured maximum.
    #[error("the url is {got} bytes long; at most {max} are allowed")]
    TooLong {
        /// The length seen.
        got: usize,
        /// The configured maximum.
        max: usize,
    },
    /// Raw or percent-encoded control characters (CR, LF, TAB, NUL, ...), or surrounding spaces.
    #[error("the url contains control characters or surrounding whitespace")]
    ControlCharacters,
    /// Not a parseable absolute URL.
    #[error("the url is not a valid absolute URL: {0}")]
    Unparseable(String),
    /// A scheme other than http or https.
    #[error("only http and https urls are allowed, not {0:?}")]
    Scheme(String),
    /// User name or password in the URL.
    #[error("urls with user info (user:password@) are not allowed")]
    UserInfo,
    /// No host.
    #[error("the url has no host")]
    NoHost,
    /// A link to this shortener itself, in any spelling of its host or addresses (loops and
    /// laundering), or to a loopback name (`localhost`, `localhost.localdomain`, ...) or address.
    #[error(
        "links to this shortener's own domains or addresses, or to loopback names and addresses such as localhost, are not allowed"
    )]
    OwnDomain,
    /// An address this deployment does not link to: loopback, link-local, private, unique-local
    /// or a cloud metadata service.
    #[error("links to private, link-local or metadata addresses are not allowed here")]
    PrivateAddress,
    /// A domain the operator has blocked.
    #[error("links to {0} are blocked here")]
    Blocked(String),
}

/// What a deployment refuses as a link target beyond the rules every target follows: its own
/// hosts and addresses, private ranges, blocked domains. Implemented by
/// `crate::targets::TargetRules`.
pub trait TargetPolicy: Send + Sync {
    /// Whether `host` (as the WHATWG parser gave it) may be linked to.
    fn check_host(&self, host: url::Host<&str>) -> Result<(), UrlError>;
}

/// A policy that takes every host, for the unit tests of what is checked besides the host.
#[cfg(test)]
pub(crate) struct AnyHost;

#[cfg(test)]
impl TargetPolicy for AnyHost {
    fn check_host(&self, _: url::Host<&str>) -> Result<(), UrlError> {
        Ok(())
    }
}

impl TargetUrl {
    /// Parses and checks `input`; `policy` decides on the host.
    pub fn parse(input: &str, max_len: usize, policy: &dyn TargetPolicy) -> Result<Self, UrlError> {
        if input.is_empty() {
            return Err(UrlError::Empty);
        }
        if input.len() > max_len {
            return Err(UrlError::TooLong {
                got: input.len(),
                max: max_len,
            });
        }
        if input.chars().any(|c| c.is_control())
            || input.trim() != input
            || has_encoded_control(input)
        {
            return Err(UrlError::ControlCharacters);
        }
        let url = Url::parse(input).map_err(|e| match e {
            // "example.com/page": what people paste from an address bar.
            url::ParseError::RelativeUrlWithoutBase => UrlError::Unparseable(
                "it has no scheme: start it with https:// (or http://)".into(),
            ),
            e => UrlError::Unparseable(e.to_string()),
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(UrlError::Scheme(super::text::bounded(url.scheme(), 20)));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(UrlError::UserInfo);
        }
        let host = url
            .host()
            .filter(|h| !matches!(h, url::Host::Domain("")))
            .ok_or(UrlError::NoHost)?;
        policy.check_host(host)?;
        let serialized = String::from(url);
        if serialized.len() > max_len {
            return Err(UrlError::TooLong {
                got: serialized.len(),
                max: max_len,
            });
        }
        Ok(Self(serialized))
    }

    /// Wraps a URL read back from the store (validated when it was written).
    pub fn from_stored(url: String) -> Self {
        Self(url)
    }

    /// The serialized URL.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The serialized URL, owned.
    pub fn into_string(self) -> String {
        self.0
    }
}

/// Whether `input` holds a percent-encoded C0 control character or DEL (`%00`-`%1F`, `%7F`),
/// the encoded form of header-splitting attempts such as `%0d%0a`.
fn has_encoded_control(input: &str) -> bool {
    input.as_bytes().windows(3).any(|w| {
        w[0] == b'%'
            && match (hex_value(w[1]), hex_value(w[2])) {
                (Some(hi), Some(lo)) => {
                    let byte = hi * 16 + lo;
                    byte < 0x20 || byte == 0x7f
                }
                _ => false,
            }
    })
}

fn hex_value(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Refuses `sho.rt` in any case, with or without a trailing dot.
    struct OwnHost;

    impl TargetPolicy for OwnHost {
        fn check_host(&self, host: url::Host<&str>) -> Result<(), UrlError> {
            match host {
                url::Host::Domain(d) if d.trim_end_matches('.') == "sho.rt" => {
                    Err(UrlError::OwnDomain)
                }
                _ => Ok(()),
            }
        }
    }

    fn parse(input: &str) -> Result<TargetUrl, UrlError> {
        TargetUrl::parse(input, 100, &OwnHost)
    }

    #[test]
    fn good_urls_are_stored_serialized() {
        assert_eq!(
            parse("https://Example.COM/a b?q=1").expect("ok").as_str(),
            "https://example.com/a%20b?q=1"
        );
        assert_eq!(
            parse("http://example.com").expect("ok").as_str(),
            "http://example.com/"
        );
        assert_eq!(
            parse("https://b\u{fc}cher.de/").expect("ok").as_str(),
            "https://xn--bcher-kva.de/"
        );
        assert_eq!(
            parse("https://example.com/%41").expect("ok").as_str(),
            "https://example.com/%41"
        );
    }

    #[test]
    fn bad_urls_table() {
        let long = format!("https://example.com/{}", "a".repeat(100));
        type Check = fn(&UrlError) -> bool;
        let cases: &[(&str, Check)] = &[
            ("", |e| *e == UrlError::Empty),
            (&long, |e| matches!(e, UrlError::TooLong { .. })),
            ("javascript:alert(1)", |e| matches!(e, UrlError::Scheme(_))),
            (" javascript:alert(1)", |e| {
                *e == UrlError::ControlCharacters
            }),
            ("java\tscript:alert(1)", |e| {
                *e == UrlError::ControlCharacters
            }),
            ("JAVASCRIPT:alert(1)", |e| matches!(e, UrlError::Scheme(_))),
            ("data:text/html,hi", |e| matches!(e, UrlError::Scheme(_))),
            ("file:///etc/passwd", |e| matches!(e, UrlError::Scheme(_))),
            ("ftp://example.com/", |e| matches!(e, UrlError::Scheme(_))),
            ("https://example.com/\r\nSet-Cookie: a=b", |e| {
                *e == UrlError::ControlCharacters
            }),
            ("https://example.com/%0d%0aSet-Cookie:a", |e| {
                *e == UrlError::ControlCharacters
            }),
            ("https://example.com/%00", |e| {
                *e == UrlError::ControlCharacters
            }),
            ("https://user:pw@example.com/", |e| *e == UrlError::UserInfo),
            ("https://user@example.com/", |e| *e == UrlError::UserInfo),
            (
                "example.com/path",
                |e| matches!(e, UrlError::Unparseable(m) if m.contains("start it with https://")),
            ),
            ("/relative", |e| matches!(e, UrlError::Unparseable(_))),
            ("https://", |e| matches!(e, UrlError::Unparseable(_))),
            ("https://sho.rt/abc", |e| *e == UrlError::OwnDomain),
            ("https://SHO.RT./abc", |e| *e == UrlError::OwnDomain),
        ];
        for (input, check) in cases {
            let err = parse(input).expect_err(input);
            assert!(check(&err), "{input:?} gave {err:?}");
        }
    }
}
