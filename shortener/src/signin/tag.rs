//! Session cookies a node can tell from made-up ones without the store: a cookie is 32 random
//! bytes and a tag, an HMAC of them under a secret every node of a deployment derives from the
//! code-space key. A cookie whose tag does not check is refused before any read, so made-up
//! cookies cost one HMAC each and never a store read, and no budget has to stand between a
//! client and the store: a person whose address has spent its 404 budget on unknown codes still
//! reaches their session. What a tag cannot say (signed out, timed out) is still the stored
//! row's to say, read on every request.

use crate::secrets::{derive_secret, hmac_sha256};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use codespace::CodeKey;
use subtle::ConstantTimeEq;

/// How many bytes of the HMAC a cookie carries (128 bits: a tag cannot be guessed).
const TAG_BYTES: usize = 16;

/// The length of a session cookie: 43 characters of randomness, a dot and 22 of tag.
pub const COOKIE_LEN: usize = 43 + 1 + 22;

/// The secret session cookies are tagged under. Never printed.
#[derive(Clone)]
pub struct SessionTags([u8; 32]);

impl std::fmt::Debug for SessionTags {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionTags(..)")
    }
}

impl SessionTags {
    /// The tag secret of a deployment whose code-space key is `key` (one-way: a cookie reveals
    /// nothing of the key, and every node derives the same secret, so a session opened on one
    /// node is recognised by all).
    pub fn derive(key: &CodeKey) -> Self {
        Self(derive_secret(
            key,
            b"shortener console session tag secret v1",
        ))
    }

    /// A new session cookie's value: 32 random bytes and their tag, base64url, joined by `.`.
    pub fn issue(&self) -> String {
        let random = super::oidc::random_token();
        let tag = self.tag(&random);
        format!("{random}.{tag}")
    }

    /// Whether `cookie` is one this deployment issued (its tag checks, in constant time). Says
    /// nothing of whether its session is still open.
    pub fn verify(&self, cookie: &str) -> bool {
        if cookie.len() != COOKIE_LEN {
            return false;
        }
        let Some((random, tag)) = cookie.split_once('.') else {
            return false;
        };
        let expected = self.tag(random);
        bool::from(expected.as_bytes().ct_eq(tag.as_bytes()))
    }

    fn tag(&self, random: &str) -> String {
        let mut input = b"console session\0".to_vec();
        input.extend_from_slice(random.as_bytes());
        URL_SAFE_NO_PAD.encode(&hmac_sha256(&self.0, &input)[..TAG_BYTES])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(byte: u8) -> SessionTags {
        SessionTags::derive(&CodeKey::from_bytes([byte; 32]))
    }

    #[test]
    fn an_issued_cookie_checks_under_its_own_deployment_only() {
        let ours = tags(1);
        let cookie = ours.issue();
        assert_eq!(cookie.len(), COOKIE_LEN, "{cookie}");
        assert!(ours.verify(&cookie));
        assert!(
            tags(1).verify(&cookie),
            "every node derives the same secret"
        );
        assert!(
            !tags(2).verify(&cookie),
            "another code-space key is another deployment"
        );
        assert_ne!(ours.issue(), cookie, "each cookie is random");
    }

    #[test]
    fn made_up_cookies_do_not_check() {
        let ours = tags(7);
        let good = ours.issue();
        let (random, tag) = good.split_once('.').expect("a dot");
        let other = ours.issue();
        let (_, other_tag) = other.split_once('.').expect("a dot");
        let mut flipped = tag.to_string();
        let last = flipped.pop().expect("a tag");
        flipped.push(if last == 'A' { 'B' } else { 'A' });
        let bad = [
            String::new(),
            "made-up".to_string(),
            random.to_string(),
            format!("{random}."),
            format!("{random}.{flipped}"),
            format!("{random}.{other_tag}"),
            format!("{random}.{}", &tag[..tag.len() - 1]),
            format!("{random}.{tag}x"),
            format!("{random}{tag}."),
            format!(".{random}{tag}"),
            good.to_uppercase(),
            "a".repeat(4096),
        ];
        for cookie in &bad {
            assert!(!ours.verify(cookie), "accepted {cookie:?}");
        }
    }
}
