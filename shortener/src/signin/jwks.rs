//! The issuer's signing keys (JWKS) as the node keeps them: read at the first sign-in, read
//! again when a token names a key they lack (at most once per [`JWKS_REFETCH_INTERVAL`]) or
//! once they are [`JWKS_MAX_AGE`] old, and still used for [`JWKS_GRACE`] while the key set
//! cannot be read again.

use jsonwebtoken::jwk::Jwk;
use std::time::{Duration, Instant};

/// The least time between two reads of the issuer's keys prompted by an unknown key id.
pub const JWKS_REFETCH_INTERVAL: Duration = Duration::from_secs(10);

/// How long the issuer's keys are trusted as read: past it, the next sign-in reads them again,
/// so a key the issuer withdrew (after a compromise, say) stops verifying tokens within this
/// long, whether or not a token names a key the node has not seen.
pub const JWKS_MAX_AGE: Duration = Duration::from_secs(3600);

/// How long keys read before still verify while the issuer's key set cannot be read again.
pub const JWKS_GRACE: Duration = Duration::from_secs(24 * 3600);

/// The issuer's keys as last read, and when.
pub(super) struct KeyCache {
    pub(super) keys: Vec<Jwk>,
    pub(super) fetched: Option<Instant>,
}

/// What the key cache says of a token's key.
#[derive(Debug)]
pub(super) enum Look {
    /// The key, read less than [`JWKS_MAX_AGE`] ago.
    Found(Box<Jwk>),
    /// Read the keys again: they are older than that, or lack the key and were read over
    /// [`JWKS_REFETCH_INTERVAL`] ago.
    Read,
    /// The keys lack it and were read too recently to read them again.
    Refused,
}

impl KeyCache {
    /// What the cache says of the key `kid` now.
    pub(super) fn look(&self, kid: Option<&str>) -> Look {
        let age = self.fetched.map(|at| at.elapsed());
        if age.is_some_and(|age| age < JWKS_MAX_AGE)
            && let Some(jwk) = find(&self.keys, kid)
        {
            return Look::Found(Box::new(jwk));
        }
        if age.is_none_or(|age| age >= JWKS_REFETCH_INTERVAL) {
            Look::Read
        } else {
            Look::Refused
        }
    }

    /// The key `kid` as last read, when that read is under [`JWKS_GRACE`] old: what serves
    /// while the issuer's key set cannot be read again.
    pub(super) fn fallback(&self, kid: Option<&str>) -> Option<Jwk> {
        self.fallback_at(self.fetched.map(|at| at.elapsed()), kid)
    }

    /// [`KeyCache::fallback`] for keys read `age` ago (none: never read).
    fn fallback_at(&self, age: Option<Duration>, kid: Option<&str>) -> Option<Jwk> {
        if age.is_some_and(|age| age < JWKS_GRACE) {
            find(&self.keys, kid)
        } else {
            None
        }
    }
}

/// The signing key `kid` of `keys`, or their only signing key when the token names none.
pub(super) fn find(keys: &[Jwk], kid: Option<&str>) -> Option<Jwk> {
    let mut signing = keys.iter().filter(|k| {
        !matches!(
            k.common.public_key_use,
            Some(jsonwebtoken::jwk::PublicKeyUse::Encryption)
        )
    });
    match kid {
        Some(kid) => signing
            .find(|k| k.common.key_id.as_deref() == Some(kid))
            .cloned(),
        None => {
            let all: Vec<&Jwk> = signing.collect();
            (all.len() == 1).then(|| all[0].clone())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys are used as read for an hour at most; an unknown key id reads them again, but not
    /// more than once per interval; while they cannot be read again, those read within a day
    /// still serve.
    #[test]
    fn keys_are_read_again_when_old_or_lacking_but_not_too_often() {
        let key: Jwk = serde_json::from_value(serde_json::json!({
            "kty": "RSA", "kid": "k1", "use": "sig", "alg": "RS256",
            "n": "sXchDaQebHnPiGvyDOAT4saGEUetSyo9MKLOoWFsueri23bOdgWp4Dy1Wl",
            "e": "AQAB"
        }))
        .expect("a key");
        let at = |ago: Duration| KeyCache {
            keys: vec![key.clone()],
            fetched: Instant::now().checked_sub(ago),
        };
        assert!(matches!(
            at(Duration::from_secs(5)).look(Some("k1")),
            Look::Found(_)
        ));
        assert!(
            matches!(at(Duration::from_secs(5)).look(None), Look::Found(_)),
            "the only key"
        );
        assert!(matches!(
            at(Duration::from_secs(5)).look(Some("k2")),
            Look::Refused
        ));
        assert!(matches!(
            at(Duration::from_secs(60)).look(Some("k2")),
            Look::Read
        ));
        assert!(
            matches!(
                at(JWKS_MAX_AGE + Duration::from_secs(1)).look(Some("k1")),
                Look::Read
            ),
            "a known key read over an hour ago is read again"
        );
        let empty = KeyCache {
            keys: Vec::new(),
            fetched: None,
        };
        assert!(matches!(empty.look(Some("k1")), Look::Read), "never read");

        // While the key set cannot be read again, keys read within the grace period serve.
        // (Ages are given rather than made from `Instant::now()`, which cannot go back further
        // than the machine's uptime.)
        let cache = at(Duration::from_secs(5));
        assert!(cache.fallback(Some("k1")).is_some(), "read just now");
        let hours = |n: u64| Some(Duration::from_secs(n * 3600));
        assert!(
            cache.fallback_at(hours(2), Some("k1")).is_some(),
            "two hours old"
        );
        assert!(
            cache
                .fallback_at(Some(JWKS_GRACE - Duration::from_secs(60)), None)
                .is_some(),
            "the only key, just inside the grace period"
        );
        assert!(
            cache.fallback_at(hours(2), Some("k2")).is_none(),
            "a key never read"
        );
        assert!(
            cache.fallback_at(Some(JWKS_GRACE), Some("k1")).is_none(),
            "at the end of the grace period"
        );
        assert!(cache.fallback_at(None, Some("k1")).is_none(), "never read");
        assert!(empty.fallback(Some("k1")).is_none(), "never read");
    }
}
