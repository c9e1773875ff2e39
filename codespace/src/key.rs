//! The secret key of the code space.

use base64::Engine as _;
use sha2::{Digest, Sha256};
use std::fmt;

/// Why a key was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// The text was empty (or only whitespace).
    #[error("the key is empty; expected 32 bytes as 64 hex digits or base64")]
    Empty,
    /// The text decoded, but not to 32 bytes.
    #[error(
        "the key decodes to {0} bytes; expected exactly 32 (64 hex digits or 44 base64 characters)"
    )]
    WrongLength(usize),
    /// The text is neither hex nor base64.
    #[error("the key is neither hex nor base64; expected 32 bytes as 64 hex digits or base64")]
    Malformed,
}

/// A 32-byte AES-256 key for the code-space permutation.
///
/// Every node of one deployment must hold the same key: codes made under one key mean nothing
/// under another. The key itself is never printed ([`fmt::Debug`] redacts it); compare nodes by
/// [`CodeKey::fingerprint`] instead.
#[derive(Clone, PartialEq, Eq)]
pub struct CodeKey([u8; 32]);

impl CodeKey {
    /// The length of a key in bytes.
    pub const LEN: usize = 32;

    /// A key from its raw bytes.
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// A fresh key from the operating system's CSPRNG.
    pub fn generate() -> Self {
        let mut bytes = [0u8; 32];
        rand::fill(&mut bytes);
        Self(bytes)
    }

    /// Parses a key written as 64 hex digits or as base64 (standard or URL-safe, padded or not).
    /// Surrounding whitespace (such as a trailing newline in a key file) is ignored.
    pub fn parse(text: &str) -> Result<Self, KeyError> {
        let text = text.trim();
        if text.is_empty() {
            return Err(KeyError::Empty);
        }
        let bytes = if text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
            hex::decode(text).map_err(|_| KeyError::Malformed)?
        } else if text.bytes().all(|b| b.is_ascii_hexdigit()) && text.len().is_multiple_of(2) {
            // Hex, but of the wrong length: say so rather than reading it as base64.
            return Err(KeyError::WrongLength(text.len() / 2));
        } else {
            decode_base64(text).ok_or(KeyError::Malformed)?
        };
        let bytes: [u8; 32] = bytes
            .as_slice()
            .try_into()
            .map_err(|_| KeyError::WrongLength(bytes.len()))?;
        Ok(Self(bytes))
    }

    /// The raw key bytes (for the cipher only; never log them).
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The key as 64 lowercase hex digits, the form written to key files.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    /// A short, stable fingerprint (16 hex digits of a domain-separated SHA-256) that identifies
    /// the key without revealing it: safe to log and to compare across nodes.
    pub fn fingerprint(&self) -> String {
        let digest = Sha256::new()
            .chain_update(b"codespace key fingerprint v1\0")
            .chain_update(self.0)
            .finalize();
        hex::encode(&digest[..8])
    }
}

fn decode_base64(text: &str) -> Option<Vec<u8>> {
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
    [STANDARD, URL_SAFE, STANDARD_NO_PAD, URL_SAFE_NO_PAD]
        .iter()
        .find_map(|engine| engine.decode(text).ok())
}

impl fmt::Debug for CodeKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CodeKey(fingerprint={})", self.fingerprint())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

    #[test]
    fn hex_and_base64_forms_give_the_same_key() {
        let from_hex = CodeKey::parse(HEX).expect("hex");
        let b64 = base64::engine::general_purpose::STANDARD.encode(from_hex.as_bytes());
        assert_eq!(CodeKey::parse(&b64).expect("base64"), from_hex);
        assert_eq!(
            CodeKey::parse(&format!("  {}\n", HEX.to_uppercase())).expect("hex"),
            from_hex
        );
        assert_eq!(
            CodeKey::parse(b64.trim_end_matches('=')).expect("unpadded"),
            from_hex
        );
        assert_eq!(from_hex.to_hex(), HEX);
    }

    #[test]
    fn bad_keys_are_refused_with_a_reason() {
        let cases: &[(&str, KeyError)] = &[
            ("", KeyError::Empty),
            ("   \n", KeyError::Empty),
            ("00", KeyError::WrongLength(1)),
            (&HEX[..62], KeyError::WrongLength(31)),
            (
                "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHg==",
                KeyError::WrongLength(31),
            ),
            ("not a key at all!", KeyError::Malformed),
            (
                "!!0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f",
                KeyError::Malformed,
            ),
        ];
        for (text, want) in cases {
            assert_eq!(
                CodeKey::parse(text).as_ref().err(),
                Some(want),
                "input {text:?}"
            );
        }
    }

    #[test]
    fn fingerprint_is_stable_distinct_and_hides_the_key() {
        let a = CodeKey::parse(HEX).expect("hex");
        let b = CodeKey::generate();
        assert_eq!(
            a.fingerprint(),
            CodeKey::parse(HEX).expect("hex").fingerprint()
        );
        assert_ne!(a.fingerprint(), b.fingerprint());
        assert_eq!(a.fingerprint().len(), 16);
        let debug = format!("{a:?}");
        assert!(
            !debug.contains(HEX) && debug.contains(&a.fingerprint()),
            "{debug}"
        );
    }
}
