//! Codes named by API callers: parsed once, at the edge of each transport, into a
//! [`ShortCode`] whose shape is known.

use super::Error;
use codespace::shape::{self, CodeKind};
use std::borrow::Cow;

/// The most characters of a refused code repeated back in an error message.
const ECHOED: usize = 32;

/// The key a link is stored under for `code` of shape `kind` on `domain` (a branded domain's
/// host; `None` for the default domain). An alias-shaped code on a branded domain is unique per
/// domain, so its key is the host, `/` and the code (`go.brand.com/spring`); every other code
/// is its own key: on the default domain, and a code of generated or private shape anywhere,
/// which is unique across all domains as generated codes are (docs/design.md, I2). No code
/// holds a `/`, so a key names its domain part unambiguously.
pub fn link_key<'a>(domain: Option<&str>, code: &'a str, kind: CodeKind) -> Cow<'a, str> {
    match domain {
        Some(host) if kind == CodeKind::Alias => Cow::Owned(format!("{host}/{code}")),
        _ => Cow::Borrowed(code),
    }
}

/// The code of the key `key` as people type it after the host (the key without a domain part).
pub fn shown_code(key: &str) -> &str {
    key.rsplit_once('/').map_or(key, |(_, code)| code)
}

/// A code an API call names: its text has the shape of a generated code, a private code or an
/// alias for the node's base length, and it may name the branded domain it is on. Whether a link
/// holds it is the store's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShortCode {
    key: String,
    kind: CodeKind,
    domain: Option<String>,
    /// Whether the caller named the domain (the default domain by one of its hosts included),
    /// rather than naming none.
    named: bool,
}

impl ShortCode {
    /// Parses `text` for base length `length`; a string no code can have is
    /// [`Error::Invalid`] `invalid_code`, the same on every transport.
    pub fn parse(text: &str, length: usize) -> Result<Self, Error> {
        match shape::classify(text, length) {
            Some(kind) => Ok(Self {
                key: text.to_string(),
                kind,
                domain: None,
                named: false,
            }),
            None => Err(Error::invalid(
                "invalid_code",
                format!("{} is not a valid code or alias", echo(text)),
            )),
        }
    }

    /// The code on the branded domain `domain` (its host in normal form; `None`: the default
    /// domain, which a code names when no domain is given).
    pub fn on(mut self, domain: Option<String>) -> Self {
        self.key = link_key(domain.as_deref(), self.shown(), self.kind).into_owned();
        self.domain = domain;
        self
    }

    /// The code on the domain the caller named: as [`Self::on`], but a code of generated or
    /// private shape (found under the same key on every domain) then names only the link on
    /// that domain, the default domain's when `domain` is `None` (the caller named one of its
    /// hosts). Bitly's and YOURLS' reads, whose callers write the public host in every short
    /// link they name, keep [`Self::on`].
    pub fn on_named(self, domain: Option<String>) -> Self {
        Self {
            named: true,
            ..self.on(domain)
        }
    }

    /// The key of the link it names ([`link_key`]): what the store is asked for.
    pub fn as_str(&self) -> &str {
        &self.key
    }

    /// The code as the caller wrote it.
    pub fn shown(&self) -> &str {
        shown_code(&self.key)
    }

    /// The branded domain the caller named, if any.
    pub fn domain(&self) -> Option<&str> {
        self.domain.as_deref()
    }

    /// Whether `link` (found under this code's key) is on the domain the caller named: a code
    /// of generated or private shape is found under the same key on every domain, so a caller
    /// that names a domain (the default one by its host included) gets only that domain's
    /// link. Naming none matches any.
    pub fn names(&self, link: &super::Link) -> bool {
        (self.domain.is_none() && !self.named) || link.domain == self.domain
    }

    /// Whether the link found under this code's key must be checked to be on the domain the
    /// caller named ([`Self::names`]): a domain was named and the key does not hold it.
    pub fn scoped(&self) -> bool {
        (self.named || self.domain.is_some()) && self.key == self.shown()
    }

    /// What kind of code its shape makes it.
    pub fn kind(&self) -> CodeKind {
        self.kind
    }
}

/// `text` quoted for an error message: at most 32 characters, escaped, so a message never
/// carries a client's megabyte, its control characters or a bidirectional override back.
pub fn echo(text: &str) -> String {
    format!(
        "\"{}\"",
        super::text::bounded(text, ECHOED).replace('"', "\\\"")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_of_every_shape_parse_and_others_are_invalid_code() {
        for (text, kind) in [
            ("aB3xY9z", CodeKind::Generated),
            ("aB3xY9zQ", CodeKind::Generated),
            ("0123456789abcdef", CodeKind::Private),
            ("my-link", CodeKind::Alias),
            ("abc", CodeKind::Alias),
        ] {
            assert_eq!(
                ShortCode::parse(text, 7).expect(text).kind(),
                kind,
                "{text}"
            );
        }
        for text in [
            "",
            "a/b",
            "api",
            "x".repeat(80).as_str(),
            "caf\u{e9}-1",
            "a b",
        ] {
            let error = ShortCode::parse(text, 7).expect_err(text);
            assert_eq!(error.code(), "invalid_code", "{text:?}");
        }
    }

    #[test]
    fn a_refused_code_is_echoed_short_and_escaped() {
        let huge = format!("{}\u{202e}\n", "z".repeat(1_000_000));
        let message = ShortCode::parse(&huge, 7).expect_err("refused").to_string();
        assert!(message.len() < 100, "{} bytes", message.len());
        assert!(!message.contains('\n') && !message.contains('\u{202e}'));
        assert_eq!(echo("a\u{202e}b\""), "\"a\\u{202e}b\\\"\"");
    }
}
