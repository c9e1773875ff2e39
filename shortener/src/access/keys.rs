//! API keys: held only as SHA-256 digests, sent by clients as `Authorization: Bearer <key>`.

use crate::domain::{Caller, Error};
use sha2::{Digest, Sha256};
use std::collections::HashMap;

/// The accepted API keys, by digest. Keys themselves are not kept in memory after start-up.
#[derive(Clone, Default)]
pub struct ApiKeys {
    by_digest: HashMap<[u8; 32], Caller>,
}

/// The shortest API key accepted (so a key cannot be guessed).
pub const MIN_KEY_LENGTH: usize = 16;

fn digest(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

impl ApiKeys {
    /// Builds the key set from entries that are either a raw key or `sha256:<64 hex digits>`
    /// (the digest of a key, so the key itself need not be stored on the server).
    pub fn from_entries<'a>(entries: impl IntoIterator<Item = &'a str>) -> Result<Self, String> {
        let mut by_digest = HashMap::new();
        for (n, entry) in entries.into_iter().enumerate() {
            let entry = entry.trim();
            if entry.is_empty() || entry.starts_with('#') {
                continue;
            }
            let digest: [u8; 32] = if let Some(hex_digest) = entry.strip_prefix("sha256:") {
                hex::decode(hex_digest)
                    .ok()
                    .and_then(|d| d.try_into().ok())
                    .ok_or_else(|| {
                        format!(
                            "API key entry {}: sha256: must be followed by 64 hex digits",
                            n + 1
                        )
                    })?
            } else {
                if entry.len() < MIN_KEY_LENGTH || !entry.bytes().all(|b| b.is_ascii_graphic()) {
                    return Err(format!(
                        "API key entry {}: keys need at least {MIN_KEY_LENGTH} printable characters without spaces",
                        n + 1
                    ));
                }
                digest(entry)
            };
            by_digest.insert(
                digest,
                Caller {
                    id: hex::encode(&digest[..8]),
                },
            );
        }
        Ok(Self { by_digest })
    }

    /// How many keys are accepted.
    pub fn len(&self) -> usize {
        self.by_digest.len()
    }

    /// Whether no key is configured.
    pub fn is_empty(&self) -> bool {
        self.by_digest.is_empty()
    }

    /// The caller whose key is in an `Authorization` header value (`Bearer <key>`).
    pub fn authenticate(&self, header: Option<&str>) -> Result<Caller, Error> {
        let key = header
            .and_then(|h| {
                h.strip_prefix("Bearer ")
                    .or_else(|| h.strip_prefix("bearer "))
            })
            .map(str::trim)
            .ok_or(Error::Unauthenticated)?;
        self.by_digest
            .get(&digest(key))
            .cloned()
            .ok_or(Error::Unauthenticated)
    }
}

/// A fresh random API key (32 characters of base62, ~190 bits).
pub fn generate_api_key() -> String {
    use rand::Rng;
    let mut rng = rand::rng();
    (0..32)
        .map(|_| codespace::ALPHABET[rng.random_range(0..codespace::ALPHABET.len())] as char)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_and_hashed_entries_authenticate_the_same_key() {
        let key = generate_api_key();
        let hashed = format!("sha256:{}", hex::encode(digest(&key)));
        for entry in [key.as_str(), hashed.as_str()] {
            let keys = ApiKeys::from_entries([entry, "# comment", ""]).expect("valid");
            assert_eq!(keys.len(), 1);
            let caller = keys
                .authenticate(Some(&format!("Bearer {key}")))
                .expect("known key");
            assert_eq!(caller.id.len(), 16);
            assert!(!caller.id.contains(&key));
        }
    }

    #[test]
    fn missing_or_wrong_credentials_are_refused() {
        let keys = ApiKeys::from_entries(["0123456789abcdef0123"]).expect("valid");
        for header in [
            None,
            Some(""),
            Some("Bearer"),
            Some("Bearer nope"),
            Some("Basic 0123456789abcdef0123"),
            Some("0123456789abcdef0123"),
        ] {
            assert!(
                matches!(keys.authenticate(header), Err(Error::Unauthenticated)),
                "{header:?}"
            );
        }
    }

    #[test]
    fn weak_or_malformed_entries_are_refused() {
        assert!(ApiKeys::from_entries(["short"]).is_err());
        assert!(ApiKeys::from_entries(["has a space in it!!"]).is_err());
        assert!(ApiKeys::from_entries(["sha256:abcd"]).is_err());
    }
}
