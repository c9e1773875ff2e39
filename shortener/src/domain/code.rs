//! Codes named by API callers: parsed once, at the edge of each transport, into a
//! [`ShortCode`] whose shape is known.

use super::Error;
use codespace::shape::{self, CodeKind};

/// The most characters of a refused code repeated back in an error message.
const ECHOED: usize = 32;

/// A code an API call names: its text has the shape of a generated code, a private code or an
/// alias for the node's base length. Whether a link holds it is the store's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShortCode {
    text: String,
    kind: CodeKind,
}

impl ShortCode {
    /// Parses `text` for base length `length`; a string no code can have is
    /// [`Error::Invalid`] `invalid_code`, the same on every transport.
    pub fn parse(text: &str, length: usize) -> Result<Self, Error> {
        match shape::classify(text, length) {
            Some(kind) => Ok(Self {
                text: text.to_string(),
                kind,
            }),
            None => Err(Error::invalid(
                "invalid_code",
                format!("{} is not a valid code or alias", echo(text)),
            )),
        }
    }

    /// The code.
    pub fn as_str(&self) -> &str {
        &self.text
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
