//! YOURLS's timestamp signatures: a client configured with a YOURLS token sends `timestamp`
//! (seconds since 1970) and `signature` = hash(`timestamp` . token) (or hash(token .
//! `timestamp`)), the hash `md5` unless `hash` names another, so the token itself never
//! travels.
//!
//! The node keeps only digests of its API keys, so a token cannot be the key: each key's token
//! is derived from its digest under a secret of the deployment (itself derived from the
//! code-space key every node holds), and `shortener keys yourls-token` prints it. A token
//! therefore stands for exactly one key: it carries that key's tenant, scopes, expiry and
//! rate limits, and stops working when the key leaves the keys file.
//!
//! A signed request names no key, so it is checked against every key in force (as YOURLS
//! checks every user), each comparison in constant time. YOURLS keeps a signature valid for
//! its nonce life (12 hours); a node accepts one only within [`WINDOW_SECONDS`] of its clock,
//! which bounds how long a signed URL caught in a log or a proxy can be replayed (nodes share
//! no store of used signatures to refuse a replay outright).

use codespace::CodeKey;
use md5::Md5;
use sha2::{Digest, Sha224, Sha256, Sha384, Sha512};
use subtle::ConstantTimeEq;

/// How far, in seconds, a signed request's `timestamp` may be from the node's clock, either
/// way (a client's clock a little ahead is as common as one a little behind).
pub const WINDOW_SECONDS: i64 = 600;

/// How many bytes of the derivation a token holds (as hex, twice as many characters).
const TOKEN_BYTES: usize = 16;

/// The secret YOURLS tokens are derived under. Never printed.
#[derive(Clone)]
pub struct YourlsTokens([u8; 32]);

impl std::fmt::Debug for YourlsTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("YourlsTokens(..)")
    }
}

impl YourlsTokens {
    /// The token secret of a deployment whose code-space key is `key` (one-way: a token
    /// reveals nothing of the code-space key, and every node derives the same secret).
    pub fn derive(key: &CodeKey) -> Self {
        Self(crate::secrets::derive_secret(
            key,
            b"shortener yourls token secret v1",
        ))
    }

    /// The YOURLS token of the key whose digest is `digest`: 32 hex digits.
    pub fn token(&self, digest: &[u8; 32]) -> String {
        let mut input = b"yourls token\0".to_vec();
        input.extend_from_slice(digest);
        hex::encode(&crate::secrets::hmac_sha256(&self.0, &input)[..TOKEN_BYTES])
    }
}

/// The hash a signature is made with (`hash`; `md5` when absent, as YOURLS).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignatureHash {
    /// MD5, YOURLS's default.
    Md5,
    /// SHA-224.
    Sha224,
    /// SHA-256.
    Sha256,
    /// SHA-384.
    Sha384,
    /// SHA-512.
    Sha512,
}

impl SignatureHash {
    /// The hash `name` names (PHP's names, as YOURLS takes them from `hash_algos()`); none or
    /// empty is `md5`. Another name is refused with the names accepted.
    pub fn parse(name: Option<&str>) -> Result<Self, String> {
        Ok(match name.unwrap_or_default() {
            "" | "md5" => SignatureHash::Md5,
            "sha224" => SignatureHash::Sha224,
            "sha256" => SignatureHash::Sha256,
            "sha384" => SignatureHash::Sha384,
            "sha512" => SignatureHash::Sha512,
            other => {
                return Err(format!(
                    "hash {} is not accepted: use md5, sha224, sha256, sha384 or sha512",
                    crate::domain::echo(other)
                ));
            }
        })
    }

    /// The hex digest of `first` then `second`.
    pub fn hex(self, first: &[u8], second: &[u8]) -> String {
        fn of<D: Digest>(first: &[u8], second: &[u8]) -> String {
            hex::encode(D::new().chain_update(first).chain_update(second).finalize())
        }
        match self {
            SignatureHash::Md5 => of::<Md5>(first, second),
            SignatureHash::Sha224 => of::<Sha224>(first, second),
            SignatureHash::Sha256 => of::<Sha256>(first, second),
            SignatureHash::Sha384 => of::<Sha384>(first, second),
            SignatureHash::Sha512 => of::<Sha512>(first, second),
        }
    }

    /// The hash's name in `hash`.
    pub fn name(self) -> &'static str {
        match self {
            SignatureHash::Md5 => "md5",
            SignatureHash::Sha224 => "sha224",
            SignatureHash::Sha256 => "sha256",
            SignatureHash::Sha384 => "sha384",
            SignatureHash::Sha512 => "sha512",
        }
    }

    /// How many hex digits a signature of this hash holds.
    fn hex_len(self) -> usize {
        match self {
            SignatureHash::Md5 => 32,
            SignatureHash::Sha224 => 56,
            SignatureHash::Sha256 => 64,
            SignatureHash::Sha384 => 96,
            SignatureHash::Sha512 => 128,
        }
    }
}

/// A signed request's credentials, checked for shape and time ([`Signed::parse`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signed {
    timestamp: String,
    signature: Vec<u8>,
    hash: SignatureHash,
}

impl Signed {
    /// The credentials of `timestamp`, `signature` and `hash` as of `now` (seconds since
    /// 1970): refused, with the message to send, when the timestamp is not decimal seconds,
    /// is older or newer than [`WINDOW_SECONDS`] from `now`, the hash is not accepted, or the
    /// signature is not that hash's hex digest.
    pub fn parse(
        timestamp: &str,
        signature: &str,
        hash: Option<&str>,
        now: i64,
    ) -> Result<Self, String> {
        let hash = SignatureHash::parse(hash)?;
        let seconds = (!timestamp.is_empty()
            && timestamp.len() <= 12
            && timestamp.bytes().all(|b| b.is_ascii_digit()))
        .then(|| timestamp.parse::<i64>().ok())
        .flatten()
        .ok_or_else(|| {
            format!(
                "timestamp {} is not a time: send seconds since 1970 (UTC), as PHP's time()",
                crate::domain::echo(timestamp)
            )
        })?;
        if seconds < now - WINDOW_SECONDS {
            return Err(format!(
                "timestamp {seconds} has expired: a signature is accepted for {} minutes either \
                 side of the node's clock (now {now}); sign the request again",
                WINDOW_SECONDS / 60
            ));
        }
        if seconds > now + WINDOW_SECONDS {
            return Err(format!(
                "timestamp {seconds} is in the future: a signature is accepted for {} minutes \
                 either side of the node's clock (now {now}); check the client's clock",
                WINDOW_SECONDS / 60
            ));
        }
        let signature = signature.to_ascii_lowercase();
        if signature.len() != hash.hex_len() || !signature.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!(
                "signature is not a hex {} digest: send the {} hex digits of \
                 {}(timestamp . token)",
                hash.name(),
                hash.hex_len(),
                hash.name()
            ));
        }
        Ok(Self {
            timestamp: timestamp.to_string(),
            signature: signature.into_bytes(),
            hash,
        })
    }

    /// Whether the request was signed with `token`, in either of YOURLS's orders; the
    /// comparison takes the same time wherever the digests differ.
    pub fn signed_with(&self, token: &str) -> bool {
        let (token, timestamp) = (token.as_bytes(), self.timestamp.as_bytes());
        let after = self.hash.hex(timestamp, token);
        let before = self.hash.hex(token, timestamp);
        let matched =
            after.as_bytes().ct_eq(&self.signature) | before.as_bytes().ct_eq(&self.signature);
        matched.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_800_000_000;

    fn tokens() -> YourlsTokens {
        YourlsTokens::derive(&CodeKey::from_bytes([7; 32]))
    }

    #[test]
    fn tokens_are_one_per_key_and_per_deployment() {
        let (a, b) = ([1; 32], [2; 32]);
        let token = tokens().token(&a);
        assert_eq!(token.len(), 32);
        assert!(token.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(token, tokens().token(&a), "the same on every node");
        assert_ne!(token, tokens().token(&b));
        let other = YourlsTokens::derive(&CodeKey::from_bytes([8; 32]));
        assert_ne!(token, other.token(&a));
        assert_eq!(format!("{:?}", tokens()), "YourlsTokens(..)");
    }

    #[test]
    fn md5_and_sha256_signatures_in_either_order_match_only_their_token() {
        let token = tokens().token(&[1; 32]);
        let stamp = NOW.to_string();
        // md5("1800000000" . token), as a YOURLS client computes it.
        let md5 = SignatureHash::Md5.hex(stamp.as_bytes(), token.as_bytes());
        let signed = Signed::parse(&stamp, &md5.to_uppercase(), None, NOW).expect("md5");
        assert!(signed.signed_with(&token));
        assert!(!signed.signed_with(&tokens().token(&[2; 32])));
        let reversed = SignatureHash::Md5.hex(token.as_bytes(), stamp.as_bytes());
        assert!(
            Signed::parse(&stamp, &reversed, Some("md5"), NOW)
                .expect("md5")
                .signed_with(&token)
        );
        let sha = SignatureHash::Sha256.hex(stamp.as_bytes(), token.as_bytes());
        let signed = Signed::parse(&stamp, &sha, Some("sha256"), NOW).expect("sha256");
        assert!(signed.signed_with(&token));
        // The same digest under another timestamp is another signature.
        let later = (NOW + 1).to_string();
        assert!(
            !Signed::parse(&later, &sha, Some("sha256"), NOW)
                .expect("shape")
                .signed_with(&token)
        );
        assert_eq!(
            SignatureHash::Md5.hex(b"", b""),
            "d41d8cd98f00b204e9800998ecf8427e"
        );
    }

    #[test]
    fn bad_timestamps_hashes_and_signatures_are_refused_by_what_is_wrong() {
        let md5 = "0".repeat(32);
        let inside = (NOW - WINDOW_SECONDS).to_string();
        assert!(Signed::parse(&inside, &md5, None, NOW).is_ok());
        let cases: [(String, &str, Option<&str>, &str); 9] = [
            (
                (NOW - WINDOW_SECONDS - 1).to_string(),
                &md5,
                None,
                "has expired",
            ),
            (
                (NOW + WINDOW_SECONDS + 1).to_string(),
                &md5,
                None,
                "in the future",
            ),
            ("".into(), &md5, None, "not a time"),
            ("-5".into(), &md5, None, "not a time"),
            ("1.8e9".into(), &md5, None, "not a time"),
            ("9".repeat(13), &md5, None, "not a time"),
            (NOW.to_string(), &md5, Some("sha1"), "is not accepted"),
            (
                NOW.to_string(),
                &md5,
                Some("sha256"),
                "not a hex sha256 digest",
            ),
            (NOW.to_string(), "zz", None, "not a hex md5 digest"),
        ];
        for (timestamp, signature, hash, says) in cases {
            let error = Signed::parse(&timestamp, signature, hash, NOW).expect_err(says);
            assert!(error.contains(says), "{timestamp} {hash:?}: {error}");
        }
    }
}
