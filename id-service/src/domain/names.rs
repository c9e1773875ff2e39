//! Names that come from callers: namespaces, holders (instances) and caller names.

use crate::error::Error;
use crate::logsafe::{Escaped, is_unsafe};
use std::fmt;

/// A validated namespace name: `[a-z][a-z0-9_]{0,62}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Namespace(String);

impl Namespace {
    /// Parses a namespace name, refusing anything outside `[a-z][a-z0-9_]{0,62}`.
    pub fn parse(name: &str) -> Result<Self, Error> {
        let bytes = name.as_bytes();
        let Some(first) = bytes.first() else {
            return Err(Error::invalid("namespace is empty"));
        };
        if bytes.len() > 63 {
            return Err(Error::invalid(format!(
                "namespace is {} characters long; the limit is 63",
                name.chars().count()
            )));
        }
        let valid = first.is_ascii_lowercase()
            && bytes
                .iter()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_');
        if !valid {
            return Err(Error::invalid(format!(
                "namespace \"{}\" must match [a-z][a-z0-9_]{{0,62}}",
                Escaped(name)
            )));
        }
        Ok(Self(name.to_string()))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Namespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A validated holder identity: 1 to 200 characters, none of them control, line-separator or
/// bidirectional-control characters (which could forge or disguise log lines).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder(String);

impl Holder {
    /// The longest holder accepted, in characters (the ledger's limit).
    pub const MAX_CHARS: usize = 200;

    /// Parses a holder identity.
    pub fn parse(holder: &str) -> Result<Self, Error> {
        let chars = holder.chars().count();
        if chars == 0 {
            return Err(Error::invalid("holder is missing"));
        }
        if chars > Self::MAX_CHARS {
            return Err(Error::invalid(format!(
                "holder is {chars} characters long; the limit is {}",
                Self::MAX_CHARS
            )));
        }
        if holder.chars().any(is_unsafe) {
            return Err(Error::invalid(
                "holder contains control, line-separator or bidirectional-control characters",
            ));
        }
        Ok(Self(holder.to_string()))
    }

    /// The holder text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// How many characters it has.
    pub fn chars(&self) -> usize {
        self.0.chars().count()
    }
}

/// A caller's name from the tokens file: `[a-z][a-z0-9_-]{0,63}`. It prefixes every holder
/// the caller's leases record, so it cannot contain `/` (or anything else a holder could use
/// to pass for another caller).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CallerName(String);

impl CallerName {
    /// Parses a caller name.
    pub fn parse(name: &str) -> Result<Self, BadCallerName> {
        let bytes = name.as_bytes();
        let ok = !bytes.is_empty()
            && bytes.len() <= 64
            && bytes[0].is_ascii_lowercase()
            && bytes
                .iter()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_' || *b == b'-');
        if ok {
            Ok(Self(name.to_string()))
        } else {
            Err(BadCallerName(Escaped(name).to_string()))
        }
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A caller name outside `[a-z][a-z0-9_-]{0,63}` (the name as written, escaped for logs).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("caller name \"{0}\" must match [a-z][a-z0-9_-]{{0,63}}")]
pub struct BadCallerName(String);

impl fmt::Display for CallerName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_names_follow_the_documented_pattern() {
        for good in ["a", "links", "a1_b2", &format!("a{}", "b".repeat(62))] {
            assert!(Namespace::parse(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "Links",
            "1a",
            "_a",
            "a-b",
            "a b",
            "é",
            &format!("a{}", "b".repeat(63)),
        ] {
            assert!(Namespace::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn holders_must_be_present_printable_short_and_free_of_separators_and_bidi_controls() {
        assert!(Holder::parse("pod-7f9c").is_ok());
        assert!(Holder::parse(&"é".repeat(200)).is_ok());
        for bad in [
            String::new(),
            "x".repeat(201),
            "pod\n1".into(),
            "pod\u{2028}fake line".into(),
            "pod\u{2029}".into(),
            "pod\u{0085}".into(),
            "admin\u{202E}1dop".into(),
            "\u{2066}pod\u{2069}".into(),
            "pod\u{200F}".into(),
        ] {
            assert!(Holder::parse(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn caller_names_are_short_lower_case_words_without_slashes() {
        for good in ["shortener", "billing-api", "a", "a_1"] {
            assert!(CallerName::parse(good).is_ok(), "{good}");
        }
        for bad in ["", "Shortener", "a/b", "1a", "-a", "a b", &"a".repeat(65)] {
            assert!(CallerName::parse(bad).is_err(), "{bad:?}");
        }
    }
}
