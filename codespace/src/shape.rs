//! The three kinds of codes and the shapes that keep them apart (invariant I5).
//!
//! | kind      | shape                                                          |
//! |-----------|----------------------------------------------------------------|
//! | generated | `L` to [`MAX_GENERATED_LENGTH`] characters of `0-9A-Za-z`       |
//! | private   | exactly [`PRIVATE_LENGTH`] characters of `0-9A-Za-z`            |
//! | alias     | 1 to [`MAX_ALIAS_LENGTH`] characters of `A-Za-z0-9_-`, containing `-` or `_` or shorter than `L`, not reserved |
//!
//! An alias made only of letters and digits is shorter than `L`, and every other alias holds a
//! `-` or `_`, which no generated or private code contains: the namespaces cannot meet.

use crate::base62::ALPHABET;
use crate::space::MAX_GENERATED_LENGTH;
use rand::Rng;

/// The length of a private (random, unguessable) code: 62^16 ≈ 2^95 possibilities.
pub const PRIVATE_LENGTH: usize = 16;
/// The longest custom alias.
pub const MAX_ALIAS_LENGTH: usize = 64;

/// Words no code may take on any write path (alias, import; compared case-insensitively),
/// because the service's own routes or common well-known paths live there, or the first path
/// segments of the other shorteners' APIs a node may speak (`yourls-api.php`, Shlink's `rest`,
/// Bitly's `v4`). The node's router checks in a test that each of its fixed first path segments
/// is here.
pub const RESERVED_WORDS: &[&str] = &[
    "admin",
    "api",
    "apple-app-site-association",
    "assets",
    "console",
    "docs",
    "export",
    "favicon",
    "health",
    "healthz",
    "import",
    "livez",
    "login",
    "logout",
    "metrics",
    "openapi",
    "readyz",
    "rest",
    "robots",
    "static",
    "status",
    "v4",
    "well-known",
    "www",
    "yourls-api.php",
];

/// Whether `word` is one of the [`RESERVED_WORDS`] (in any case).
pub fn is_reserved(word: &str) -> bool {
    RESERVED_WORDS.iter().any(|w| w.eq_ignore_ascii_case(word))
}

/// The kind of code a path segment could be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CodeKind {
    /// A code derived from a leased ID.
    Generated,
    /// A random private code.
    Private,
    /// A custom alias.
    Alias,
}

/// Why an alias was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AliasError {
    /// The alias is empty.
    #[error("the alias is empty")]
    Empty,
    /// The alias is longer than [`MAX_ALIAS_LENGTH`].
    #[error("the alias has {0} characters; at most {MAX_ALIAS_LENGTH} are allowed")]
    TooLong(usize),
    /// The alias holds a character outside `A-Za-z0-9_-`.
    #[error(
        "character {character:?} at position {position} is not allowed in an alias (A-Z, a-z, 0-9, '-', '_')"
    )]
    BadCharacter {
        /// The offending character.
        character: char,
        /// Its zero-based character position.
        position: usize,
    },
    /// The alias is a reserved word.
    #[error("{0:?} is a reserved word")]
    Reserved(String),
    /// The alias is only letters and digits and at least `L` long, the shape of generated and
    /// private codes.
    #[error(
        "an alias of only letters and digits must be shorter than {0} characters (longer ones are the shape of generated codes), or contain '-' or '_' (careers-page, summer_2024)"
    )]
    ShapedLikeCode(usize),
}

fn is_base62(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// Checks a custom alias against the alias namespace for base length `length`.
pub fn validate_alias(alias: &str, length: usize) -> Result<(), AliasError> {
    let count = alias.chars().count();
    if count == 0 {
        return Err(AliasError::Empty);
    }
    if count > MAX_ALIAS_LENGTH {
        return Err(AliasError::TooLong(count));
    }
    if let Some((position, character)) = alias
        .chars()
        .enumerate()
        .find(|(_, c)| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'))
    {
        return Err(AliasError::BadCharacter {
            character,
            position,
        });
    }
    if is_reserved(alias) {
        return Err(AliasError::Reserved(alias.to_string()));
    }
    if is_base62(alias) && count >= length {
        return Err(AliasError::ShapedLikeCode(length));
    }
    Ok(())
}

/// What kind of code `segment` could be for base length `length`, or `None` if it cannot be a
/// code at all (so the store need not be asked).
pub fn classify(segment: &str, length: usize) -> Option<CodeKind> {
    let len = segment.len();
    if is_base62(segment) && (length..=MAX_GENERATED_LENGTH).contains(&len) {
        Some(CodeKind::Generated)
    } else if is_base62(segment) && len == PRIVATE_LENGTH {
        Some(CodeKind::Private)
    } else if validate_alias(segment, length).is_ok() {
        Some(CodeKind::Alias)
    } else {
        None
    }
}

/// A fresh private code: [`PRIVATE_LENGTH`] characters drawn uniformly from `0-9A-Za-z` by the
/// operating system's CSPRNG.
pub fn generate_private_code() -> String {
    let mut rng = rand::rng();
    (0..PRIVATE_LENGTH)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_table() {
        let l = 7;
        let good = ["promo", "summer-2024", "a", "x_y", "Launch-Day", "abc123"];
        for alias in good {
            assert_eq!(validate_alias(alias, l), Ok(()), "{alias}");
            assert_eq!(classify(alias, l), Some(CodeKind::Alias), "{alias}");
        }
        let long = "a-".repeat(33);
        let bad: &[(&str, AliasError)] = &[
            ("", AliasError::Empty),
            (&long, AliasError::TooLong(66)),
            (
                "a/b",
                AliasError::BadCharacter {
                    character: '/',
                    position: 1,
                },
            ),
            (
                "a b",
                AliasError::BadCharacter {
                    character: ' ',
                    position: 1,
                },
            ),
            (
                "caf\u{e9}",
                AliasError::BadCharacter {
                    character: '\u{e9}',
                    position: 3,
                },
            ),
            (
                "a.b",
                AliasError::BadCharacter {
                    character: '.',
                    position: 1,
                },
            ),
            ("api", AliasError::Reserved("api".into())),
            ("HealthZ", AliasError::Reserved("HealthZ".into())),
            ("abcdefg", AliasError::ShapedLikeCode(7)),
            ("abcdefgh", AliasError::ShapedLikeCode(7)),
            ("0123456789abcdef", AliasError::ShapedLikeCode(7)),
        ];
        for (alias, want) in bad {
            assert_eq!(
                validate_alias(alias, l).as_ref().err(),
                Some(want),
                "{alias:?}"
            );
        }
    }

    #[test]
    fn classify_separates_the_namespaces() {
        assert_eq!(classify("aB3xY9z", 7), Some(CodeKind::Generated));
        assert_eq!(classify("aB3xY9zQ", 7), Some(CodeKind::Generated));
        assert_eq!(classify("aB3xY9zQ12345", 7), None);
        assert_eq!(
            classify(&generate_private_code(), 7),
            Some(CodeKind::Private)
        );
        for junk in ["", "a/b", "..", "%2e", "abc def", "x".repeat(65).as_str()] {
            assert_eq!(classify(junk, 7), None, "{junk:?}");
        }
    }

    #[test]
    fn private_codes_have_fixed_length_and_vary() {
        let a = generate_private_code();
        let b = generate_private_code();
        assert_eq!(a.len(), PRIVATE_LENGTH);
        assert!(is_base62(&a));
        assert_ne!(a, b);
    }
}
