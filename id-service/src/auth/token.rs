//! Tokens: how they are made and how the service recognises them (by their SHA-256 digest).
//!
//! A token is 32 bytes from the operating system's random source, base64url-encoded behind a
//! short prefix (so secret scanners can spot it). With that much entropy a plain SHA-256 is
//! enough to store: nobody can guess a token from its digest, and no slow hash is needed.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::TryRngCore;
use sha2::{Digest, Sha256};

/// The prefix of generated tokens.
pub const PREFIX: &str = "idsvc_";
/// The shortest token the service accepts (generated ones have 49 characters).
pub const MIN_CHARS: usize = 32;
/// The longest token the service reads.
pub const MAX_CHARS: usize = 256;

/// A SHA-256 digest of a token.
pub type TokenDigest = [u8; 32];

/// A fresh random token.
pub fn generate() -> Result<String, rand::rand_core::OsError> {
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.try_fill_bytes(&mut bytes)?;
    Ok(format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(bytes)))
}

/// The digest the tokens file stores for `token`.
pub fn digest(token: &[u8]) -> TokenDigest {
    Sha256::digest(token).into()
}

/// Why a raw token or a written digest is unusable. The token itself is never part of it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// Fewer than [`MIN_CHARS`] characters (it has this many).
    #[error("the token has {0} characters; at least {min} are required", min = MIN_CHARS)]
    TooShort(usize),
    /// More than [`MAX_CHARS`] characters.
    #[error("the token is longer than {max} characters", max = MAX_CHARS)]
    TooLong,
    /// A space, a control character or anything outside ASCII.
    #[error("the token must be printable ASCII without spaces")]
    NotPrintable,
    /// A digest that is not 64 hexadecimal digits.
    #[error("token_sha256 must be 64 hexadecimal digits")]
    BadDigest,
}

/// Why a raw token is unusable.
pub fn check_raw(token: &str) -> Result<(), TokenError> {
    let chars = token.chars().count();
    if chars < MIN_CHARS {
        return Err(TokenError::TooShort(chars));
    }
    if chars > MAX_CHARS {
        return Err(TokenError::TooLong);
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(TokenError::NotPrintable);
    }
    Ok(())
}

/// Parses a digest written as 64 hexadecimal digits.
pub fn parse_digest(text: &str) -> Result<TokenDigest, TokenError> {
    let mut out = [0u8; 32];
    hex::decode_to_slice(text, &mut out).map_err(|_| TokenError::BadDigest)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_tokens_are_long_distinct_and_acceptable() {
        let a = generate().expect("random");
        let b = generate().expect("random");
        assert_ne!(a, b);
        assert!(a.starts_with(PREFIX) && a.len() == PREFIX.len() + 43, "{a}");
        check_raw(&a).expect("a generated token is acceptable");
    }

    #[test]
    fn short_spaced_or_binary_tokens_are_refused_without_repeating_them() {
        for bad in [
            "x",
            &"a".repeat(31),
            &format!("{} b", "a".repeat(40)),
            &"é".repeat(40),
        ] {
            let error = check_raw(bad).expect_err(bad).to_string();
            assert!(!error.contains(bad), "{error}");
        }
        check_raw(&"a".repeat(32)).expect("32 characters is enough");
    }

    #[test]
    fn digests_round_trip_through_hex() {
        let d = digest(b"some token");
        assert_eq!(parse_digest(&hex::encode(d)), Ok(d));
        assert_eq!(parse_digest(&hex::encode_upper(d)), Ok(d));
        assert!(parse_digest("abc").is_err());
        assert!(parse_digest(&"zz".repeat(32)).is_err());
    }
}
