//! The issuer's signing keys (JWKS) as the node keeps them: read at the first sign-in, read
//! again when a token names a key they lack (at most once per [`JWKS_REFETCH_INTERVAL`]) or
//! once they are [`JWKS_MAX_AGE`] old, and still used for [`JWKS_GRACE`] while the key set
//! cannot be read again. One read runs at a time: sign-ins that arrive while it runs take what
//! it found.

use super::oidc::SignInError;
use jsonwebtoken::jwk::Jwk;
use std::sync::Mutex;
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
struct KeyCache {
    keys: Vec<Jwk>,
    fetched: Option<Instant>,
}

/// What the key cache says of a token's key.
#[derive(Debug)]
enum Look {
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
    fn look(&self, kid: Option<&str>) -> Look {
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
    fn fallback(&self, kid: Option<&str>) -> Option<Jwk> {
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

/// The key cache and the one read of the issuer's keys that may run at a time.
pub(super) struct Keys {
    cache: Mutex<Shared>,
    reading: tokio::sync::Mutex<()>,
}

/// The cache with what the sign-ins that wait for a read need to know of it, changed together.
struct Shared {
    cache: KeyCache,
    /// Reads tried so far, ended well or not: a sign-in that waited for another's read sees
    /// by this that it need not read again.
    reads: u64,
    /// Why the last read failed, when it did (what a sign-in that waited for it is told).
    failure: Option<String>,
}

impl Keys {
    /// No keys yet: the first sign-in reads them.
    pub(super) fn new() -> Self {
        Self {
            cache: Mutex::new(Shared {
                cache: KeyCache {
                    keys: Vec::new(),
                    fetched: None,
                },
                reads: 0,
                failure: None,
            }),
            reading: tokio::sync::Mutex::new(()),
        }
    }

    fn shared(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The key `kid`, reading the issuer's keys with `read` when the cache says to. Sign-ins
    /// that need a read while one runs wait for it and take what it found (or, when it failed,
    /// the keys read within the grace period, or its failure) instead of each reading the keys
    /// again.
    pub(super) async fn get<F>(&self, kid: Option<&str>, read: F) -> Result<Jwk, SignInError>
    where
        F: AsyncFnOnce() -> Result<Vec<Jwk>, SignInError>,
    {
        let unknown = || SignInError::Token("signed by a key the issuer does not hold".into());
        let seen = {
            let shared = self.shared();
            match shared.cache.look(kid) {
                Look::Found(jwk) => return Ok(*jwk),
                Look::Refused => return Err(unknown()),
                Look::Read => shared.reads,
            }
        };
        let _reading = self.reading.lock().await;
        if let Some(answer) = self.read_meanwhile(seen, kid) {
            return answer;
        }
        let outcome = read().await;
        let mut shared = self.shared();
        shared.reads += 1;
        let keys = match outcome {
            Ok(keys) => keys,
            Err(error) => {
                shared.failure = Some(match &error {
                    SignInError::Provider(why) | SignInError::Token(why) => why.clone(),
                });
                // Keys read within the grace period still serve while the issuer's key set
                // cannot be read (and an empty set never replaces them).
                let fallback = shared.cache.fallback(kid);
                drop(shared);
                return match fallback {
                    Some(jwk) => {
                        tracing::warn!(%error, "the identity provider's keys could not be read again; using those read before");
                        Ok(jwk)
                    }
                    None => Err(error),
                };
            }
        };
        shared.failure = None;
        shared.cache.keys = keys;
        shared.cache.fetched = Some(Instant::now());
        let found = find(&shared.cache.keys, kid);
        let count = shared.cache.keys.len();
        drop(shared);
        tracing::info!(keys = count, "read the identity provider's signing keys");
        found.ok_or_else(unknown)
    }

    /// What a read that ended while this sign-in waited (the reads are no longer `seen`) left
    /// for `kid`: the key, or why there is none (the read's failure, or keys that lack it).
    fn read_meanwhile(&self, seen: u64, kid: Option<&str>) -> Option<Result<Jwk, SignInError>> {
        let shared = self.shared();
        if shared.reads == seen {
            return None;
        }
        if let Look::Found(jwk) = shared.cache.look(kid) {
            return Some(Ok(*jwk));
        }
        if let Some(jwk) = shared.cache.fallback(kid) {
            return Some(Ok(jwk));
        }
        Some(Err(match &shared.failure {
            Some(failure) => SignInError::Provider(failure.clone()),
            None => SignInError::Token("signed by a key the issuer does not hold".into()),
        }))
    }
}

/// The signing key `kid` of `keys`, or their only signing key when the token names none.
fn find(keys: &[Jwk], kid: Option<&str>) -> Option<Jwk> {
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
    use std::sync::atomic::{AtomicU64, Ordering};

    fn key(kid: &str) -> Jwk {
        serde_json::from_value(serde_json::json!({
            "kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
            "n": "sXchDaQebHnPiGvyDOAT4saGEUetSyo9MKLOoWFsueri23bOdgWp4Dy1Wl",
            "e": "AQAB"
        }))
        .expect("a key")
    }

    /// Sign-ins that need the keys at once (the first ones after a start, or after the issuer
    /// rotated its keys) cause one read, not one each; and when that read fails, the others
    /// do not each try again in turn.
    #[tokio::test]
    async fn sign_ins_at_once_share_one_read_of_the_keys() {
        let keys = Keys::new();
        let reads = AtomicU64::new(0);
        let slow_read = async || {
            reads.fetch_add(1, Ordering::SeqCst);
            // Pending once: join_all polls every other sign-in before this read ends.
            tokio::task::yield_now().await;
            Ok(vec![key("k1")])
        };
        let found =
            futures::future::join_all((0..8).map(|_| keys.get(Some("k1"), slow_read))).await;
        assert!(
            found.iter().all(Result::is_ok),
            "{:?}",
            found
                .iter()
                .map(|r| r.as_ref().err().map(ToString::to_string))
                .collect::<Vec<_>>()
        );
        assert_eq!(reads.load(Ordering::SeqCst), 1);

        // A key the issuer rotated in is not known yet, and the keys were read too recently to
        // read them again: refused, without a read.
        let refused = keys.get(Some("k2"), slow_read).await;
        assert!(refused.is_err());
        assert_eq!(reads.load(Ordering::SeqCst), 1);

        // Never read, and the issuer cannot be reached: one read fails, and the sign-ins that
        // waited for it are refused with it rather than each trying again.
        let fresh = Keys::new();
        let failing = async || {
            reads.fetch_add(1, Ordering::SeqCst);
            tokio::task::yield_now().await;
            Err(SignInError::Provider("unreachable".into()))
        };
        let failed =
            futures::future::join_all((0..8).map(|_| fresh.get(Some("k1"), failing))).await;
        for outcome in &failed {
            // Each told why: the provider could not be reached, not that the token was bad.
            assert!(
                matches!(outcome, Err(SignInError::Provider(why)) if why == "unreachable"),
                "{:?}",
                outcome.as_ref().err().map(ToString::to_string)
            );
        }
        assert_eq!(reads.load(Ordering::SeqCst), 2);
    }

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
