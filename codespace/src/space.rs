//! The keyed permutation of IDs onto fixed-length base62 codes.

use crate::base62::{parse, render};
use crate::ff1::Ff1;
use crate::key::CodeKey;

/// The default length `L` of generated codes: `62^7 ≈ 3.52e12` IDs.
pub const DEFAULT_LENGTH: usize = 7;
/// The shortest allowed `L` (FF1 with radix 62 needs at least 4 numerals: `62^4 ≈ 1.48e7`).
pub const MIN_LENGTH: usize = 4;
/// The longest generated code: `62^11 > u64::MAX`, so every `u64` ID fits in 11 characters.
/// `L` itself may be at most this.
pub const MAX_GENERATED_LENGTH: usize = 11;

/// `62^len` (exact for every `len <= 21`).
pub const fn pow62(len: usize) -> u128 {
    let mut value = 1u128;
    let mut i = 0;
    while i < len {
        value *= 62;
        i += 1;
    }
    value
}

/// Why an ID or a code was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodeError {
    /// The configured code length is outside `MIN_LENGTH..=MAX_GENERATED_LENGTH`.
    #[error(
        "code length {0} is out of range; it must be between {MIN_LENGTH} and {MAX_GENERATED_LENGTH}"
    )]
    InvalidLength(usize),
    /// The code's length is not one a generated code can have.
    #[error("a generated code has {min} to {MAX_GENERATED_LENGTH} characters, not {got}")]
    WrongLength {
        /// The shortest generated length (`L`).
        min: usize,
        /// The length of the input.
        got: usize,
    },
    /// The code holds a character outside `0-9A-Za-z`.
    #[error("character {character:?} at position {position} is not base62 (0-9, A-Z, a-z)")]
    BadCharacter {
        /// The offending character.
        character: char,
        /// Its zero-based character position.
        position: usize,
    },
    /// The code is well-formed but no ID encodes to it: it decodes to an ID that belongs to a
    /// shorter length (or beyond `u64`), so it was never generated.
    #[error("not a generated code: it lies outside the ID space of its length")]
    OutsideDomain,
}

/// The code space of one deployment: a secret key and the base length `L`.
///
/// Guarantees (invariant I4):
/// - [`encode`](Self::encode) is a bijection from `0..62^L` onto the `L`-character codes, and from
///   `62^(k-1)..62^k` into the `k`-character codes for each `k > L`; different IDs never share a
///   code, and lengths never wrap around.
/// - Without the key, consecutive IDs give codes with no visible order.
/// - [`decode`](Self::decode) inverts `encode` and refuses every code `encode` cannot produce.
pub struct CodeSpace {
    ff1: Ff1,
    length: usize,
    fingerprint: String,
}

impl CodeSpace {
    /// A code space of base length `length` under `key`.
    pub fn new(key: &CodeKey, length: usize) -> Result<Self, CodeError> {
        if !(MIN_LENGTH..=MAX_GENERATED_LENGTH).contains(&length) {
            return Err(CodeError::InvalidLength(length));
        }
        let ff1 = Ff1::new(key.as_bytes());
        Ok(Self {
            ff1,
            length,
            fingerprint: key.fingerprint(),
        })
    }

    /// The fingerprint of the key ([`CodeKey::fingerprint`]): with [`length`](Self::length),
    /// what identifies this code space without revealing the key.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// The base length `L`.
    pub fn length(&self) -> usize {
        self.length
    }

    /// How many IDs fit in codes of exactly `L` characters (`62^L`); the denominator of the
    /// code-space utilisation figure.
    pub fn capacity(&self) -> u128 {
        pow62(self.length)
    }

    /// The length of the code that `id` encodes to: `L` for IDs below `62^L`, otherwise the
    /// shortest `k > L` with `id < 62^k`.
    pub fn code_length(&self, id: u64) -> usize {
        let mut len = self.length;
        while u128::from(id) >= pow62(len) {
            len += 1;
        }
        len
    }

    /// The code for `id`.
    pub fn encode(&self, id: u64) -> String {
        let len = self.code_length(id);
        render(self.ff1.encrypt(u128::from(id), len), len)
    }

    /// The ID that `code` was generated from.
    pub fn decode(&self, code: &str) -> Result<u64, CodeError> {
        let len = code.chars().count();
        if !(self.length..=MAX_GENERATED_LENGTH).contains(&len) {
            return Err(CodeError::WrongLength {
                min: self.length,
                got: len,
            });
        }
        let cipher = parse(code).map_err(|(character, position)| CodeError::BadCharacter {
            character,
            position,
        })?;
        let value = self.ff1.decrypt(cipher, len);
        // A k-character code with k > L is only generated for IDs in 62^(k-1)..62^k.
        if len > self.length && value < pow62(len - 1) {
            return Err(CodeError::OutsideDomain);
        }
        u64::try_from(value).map_err(|_| CodeError::OutsideDomain)
    }
}

impl std::fmt::Debug for CodeSpace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CodeSpace")
            .field("length", &self.length)
            .finish_non_exhaustive()
    }
}
