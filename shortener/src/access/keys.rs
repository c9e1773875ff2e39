//! API keys: held only as SHA-256 digests, each with its tenant, name, scopes and expiry; sent
//! by clients as `Authorization: Bearer <key>`.

use super::signed::{Signed, YourlsTokens};
use crate::domain::{Caller, Error, NoKey, Scopes};
use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

/// The shortest API key accepted (so a key cannot be guessed).
pub const MIN_KEY_LENGTH: usize = 16;

/// The tenant of keys given without one (`SHORTENER_API_KEYS`, a file of one key per line).
pub const DEFAULT_TENANT: &str = "default";

/// The SHA-256 digest of a key.
pub fn digest(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

/// One accepted key, by what the server keeps of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyEntry {
    /// The tenant whose links the key acts on.
    pub tenant: String,
    /// The key's name, unique within its tenant (shown in logs and metrics).
    pub name: String,
    /// The SHA-256 of the key.
    pub digest: [u8; 32],
    /// What the key may do.
    pub scopes: Scopes,
    /// When the key stops working, if ever.
    pub expires: Option<DateTime<Utc>>,
}

/// Checks a tenant or key name: 1 to 64 characters of `a-z0-9_-` (a key name may also hold
/// upper case and `.`), starting with a letter or digit. Names go into logs and metric labels,
/// so nothing else is allowed.
pub fn check_name(what: &str, name: &str, key_name: bool) -> Result<(), String> {
    let allowed = |c: char| {
        c.is_ascii_lowercase()
            || c.is_ascii_digit()
            || c == '_'
            || c == '-'
            || (key_name && (c.is_ascii_uppercase() || c == '.'))
    };
    let starts_well = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric());
    if name.len() <= 64 && starts_well && name.chars().all(allowed) {
        Ok(())
    } else {
        let chars = if key_name { "A-Za-z0-9_.-" } else { "a-z0-9_-" };
        Err(format!(
            "{what} {} must be 1 to 64 characters of {chars}, starting with a letter or digit",
            crate::domain::echo(name)
        ))
    }
}

/// A set of accepted keys.
#[derive(Debug, Clone, Default)]
pub struct KeySet {
    by_digest: HashMap<[u8; 32], Arc<Accepted>>,
}

/// What the store adds to a key it holds: the note of its uses, and the person whose role caps
/// it (`crate::keys::cap`), which the key passes on to the keys it makes.
#[derive(Debug, Clone, Default)]
pub struct Kept {
    /// Where each use is noted.
    pub used: Option<Arc<LastUse>>,
    /// The signed-in person who made it, when one did.
    pub maker: Option<Arc<crate::domain::Person>>,
}

/// A key as authentication hands it out: the caller it makes, its expiry, and (for a key kept
/// in the store) where its last use is noted.
#[derive(Debug)]
struct Accepted {
    caller: Caller,
    expires: Option<DateTime<Utc>>,
    used: Option<Arc<LastUse>>,
    /// The key's YOURLS token, derived at its first signed check: a signed request tries every
    /// key, and each then costs its two hashes, not a derivation besides.
    yourls_token: std::sync::OnceLock<String>,
}

impl Accepted {
    /// Whether the key's YOURLS token (under `tokens`) signed `signed`.
    fn signed(&self, digest: &[u8; 32], tokens: &YourlsTokens, signed: &Signed) -> bool {
        signed.signed_with(self.yourls_token.get_or_init(|| tokens.token(digest)))
    }
}

/// When a key was last accepted, in Unix seconds (0: not since the node started). Noted in
/// memory on every use, one relaxed atomic store at most, and written to the store in batches
/// (see `crate::keys`), so a request never waits for a write.
#[derive(Debug, Default)]
pub struct LastUse(AtomicI64);

impl LastUse {
    /// Notes a use at `now`.
    pub fn note(&self, now: DateTime<Utc>) {
        let seconds = now.timestamp();
        if self.0.load(Ordering::Relaxed) < seconds {
            self.0.store(seconds, Ordering::Relaxed);
        }
    }

    /// The last use noted, if any.
    pub fn last(&self) -> Option<DateTime<Utc>> {
        match self.0.load(Ordering::Relaxed) {
            0 => None,
            seconds => DateTime::from_timestamp(seconds, 0),
        }
    }
}

impl KeySet {
    /// A set of `entries`; refused when two share a digest or a (tenant, name).
    pub fn new(entries: Vec<KeyEntry>) -> Result<Self, String> {
        Self::noting(entries.into_iter().map(|e| (e, Kept::default())).collect())
    }

    /// A set of `entries`, each use of a key noted in its [`LastUse`] where it has one;
    /// refused when two share a digest or a (tenant, name).
    pub fn noting(entries: Vec<(KeyEntry, Kept)>) -> Result<Self, String> {
        let mut by_digest = HashMap::new();
        let mut names = BTreeSet::new();
        for (entry, kept) in entries {
            if !names.insert((entry.tenant.clone(), entry.name.clone())) {
                return Err(format!(
                    "two keys are named {:?} in tenant {:?}",
                    entry.name, entry.tenant
                ));
            }
            let accepted = Accepted {
                caller: Caller {
                    expires: entry.expires,
                    maker: kept.maker,
                    ..Caller::of_key(
                        Arc::from(entry.tenant.as_str()),
                        Arc::from(entry.name.as_str()),
                        entry.scopes,
                    )
                },
                expires: entry.expires,
                used: kept.used,
                yourls_token: std::sync::OnceLock::new(),
            };
            if by_digest.insert(entry.digest, Arc::new(accepted)).is_some() {
                return Err(format!(
                    "key {:?} of tenant {:?} has the same digest as another key",
                    entry.name, entry.tenant
                ));
            }
        }
        Ok(Self { by_digest })
    }

    /// How many keys are accepted.
    pub fn len(&self) -> usize {
        self.by_digest.len()
    }

    /// Whether no key is accepted.
    pub fn is_empty(&self) -> bool {
        self.by_digest.is_empty()
    }

    /// Whether a key named `name` of `tenant` is in the set.
    pub fn holds(&self, tenant: &str, name: &str) -> bool {
        self.by_digest
            .values()
            .any(|a| *a.caller.tenant == *tenant && *a.caller.key == *name)
    }

    /// Whether a key of `digest` is in the set, expired or not.
    pub fn contains(&self, digest: &[u8; 32]) -> bool {
        self.by_digest.contains_key(digest)
    }

    /// The tenants that hold keys, sorted.
    pub fn tenants(&self) -> BTreeSet<String> {
        self.by_digest
            .values()
            .map(|a| a.caller.tenant.to_string())
            .collect()
    }

    /// The caller whose key is in an `Authorization` header value (`Bearer <key>`), as of
    /// `now`. An unknown, malformed or expired key is [`Error::Unauthenticated`].
    pub fn authenticate(&self, header: Option<&str>, now: DateTime<Utc>) -> Result<Caller, Error> {
        let key = bearer(header).map_err(Error::Unauthenticated)?;
        let unknown = Error::Unauthenticated(NoKey::Unknown);
        let accepted = self.by_digest.get(&digest(key)).ok_or(unknown.clone())?;
        if accepted.expires.is_some_and(|t| t <= now) {
            return Err(unknown);
        }
        if let Some(used) = &accepted.used {
            used.note(now);
        }
        Ok(accepted.caller.clone())
    }

    /// The caller whose YOURLS token (under `tokens`) signed `signed`, as of `now`: every
    /// unexpired key is tried, as a signed request names none. None matches: `Err`.
    pub fn authenticate_signed(
        &self,
        tokens: &YourlsTokens,
        signed: &Signed,
        now: DateTime<Utc>,
    ) -> Result<Caller, Error> {
        self.by_digest
            .iter()
            .filter(|(_, accepted)| accepted.expires.is_none_or(|t| t > now))
            .find(|(digest, accepted)| accepted.signed(digest, tokens, signed))
            .map(|(_, accepted)| {
                if let Some(used) = &accepted.used {
                    used.note(now);
                }
                accepted.caller.clone()
            })
            .ok_or(Error::Unauthenticated(NoKey::Unknown))
    }
}

/// The key in an `Authorization` header value (`Bearer <key>`), or why there is none.
pub fn bearer(header: Option<&str>) -> Result<&str, NoKey> {
    let header = header
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .ok_or(NoKey::Missing)?;
    header
        .strip_prefix("Bearer ")
        .or_else(|| header.strip_prefix("bearer "))
        .map(str::trim)
        .ok_or(NoKey::NotBearer)
}

/// How many characters [`generate_api_key`] makes.
pub const GENERATED_KEY_LENGTH: usize = 32;

/// Whether `key` has the shape of a key [`generate_api_key`] made (every key kept in the store
/// is one): only such a key is worth asking the store for.
pub fn is_generated_shape(key: &str) -> bool {
    key.len() == GENERATED_KEY_LENGTH && key.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// A fresh random API key (32 characters of base62, ~190 bits).
pub fn generate_api_key() -> String {
    use rand::Rng;
    let mut rng = rand::rng();
    (0..GENERATED_KEY_LENGTH)
        .map(|_| codespace::ALPHABET[rng.random_range(0..codespace::ALPHABET.len())] as char)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Scope;

    fn entry(tenant: &str, name: &str, key: &str, scopes: Scopes) -> KeyEntry {
        KeyEntry {
            tenant: tenant.into(),
            name: name.into(),
            digest: digest(key),
            scopes,
            expires: None,
        }
    }

    #[test]
    fn a_key_authenticates_as_its_tenant_name_and_scopes_until_it_expires() {
        let key = generate_api_key();
        let reader: Scopes = [Scope::LinksRead].into_iter().collect();
        let mut expiring = entry("acme", "reader", &key, reader);
        let now = Utc::now();
        expiring.expires = Some(now + chrono::Duration::hours(1));
        let keys = KeySet::new(vec![expiring]).expect("valid");
        let header = format!("Bearer {key}");
        let caller = keys.authenticate(Some(&header), now).expect("known key");
        assert_eq!((&*caller.tenant, &*caller.key), ("acme", "reader"));
        assert_eq!(caller.scopes, reader);
        // The caller carries the expiry, which bounds the keys it may make.
        assert_eq!(caller.expires, Some(now + chrono::Duration::hours(1)));
        let later = now + chrono::Duration::hours(2);
        assert!(matches!(
            keys.authenticate(Some(&header), later),
            Err(Error::Unauthenticated(_))
        ));
    }

    #[test]
    fn a_use_is_noted_where_the_key_has_a_note_and_an_expired_key_notes_nothing() {
        let (key, old) = (generate_api_key(), generate_api_key());
        let now = Utc::now();
        let mut expired = entry("acme", "old", &old, Scopes::all_but_admin());
        expired.expires = Some(now - chrono::Duration::seconds(1));
        let (used, unused) = (Arc::new(LastUse::default()), Arc::new(LastUse::default()));
        let keys = KeySet::noting(vec![
            (
                entry("acme", "console", &key, Scopes::all_but_admin()),
                Kept {
                    used: Some(Arc::clone(&used)),
                    maker: None,
                },
            ),
            (
                expired,
                Kept {
                    used: Some(Arc::clone(&unused)),
                    maker: None,
                },
            ),
        ])
        .expect("valid");
        assert_eq!(used.last(), None);
        keys.authenticate(Some(&format!("Bearer {key}")), now)
            .expect("known key");
        assert_eq!(used.last().map(|t| t.timestamp()), Some(now.timestamp()));
        assert!(
            keys.authenticate(Some(&format!("Bearer {old}")), now)
                .is_err()
        );
        assert_eq!(unused.last(), None);
        assert!(keys.holds("acme", "console") && !keys.holds("other", "console"));
    }

    #[test]
    fn missing_or_wrong_credentials_are_refused() {
        let keys = KeySet::new(vec![entry(
            "t",
            "k",
            "0123456789abcdef0123",
            Scopes::all_but_admin(),
        )])
        .expect("valid");
        // Each refusal says which mistake it was.
        for (header, why) in [
            (None, NoKey::Missing),
            (Some(""), NoKey::Missing),
            (Some("  "), NoKey::Missing),
            (Some("Bearer"), NoKey::NotBearer),
            (Some("Basic 0123456789abcdef0123"), NoKey::NotBearer),
            (Some("0123456789abcdef0123"), NoKey::NotBearer),
            (Some("Bearer nope"), NoKey::Unknown),
            (Some("Bearer 0123456789abcdef0124"), NoKey::Unknown),
        ] {
            match keys.authenticate(header, Utc::now()) {
                Err(Error::Unauthenticated(got)) => assert_eq!(got, why, "{header:?}"),
                other => panic!("{header:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn duplicate_names_or_digests_are_refused_and_names_are_checked() {
        let all = Scopes::all_but_admin();
        let same_name = vec![
            entry("t", "k", "a-key-0123456789", all),
            entry("t", "k", "b-key-0123456789", all),
        ];
        assert!(KeySet::new(same_name).is_err());
        let same_key = vec![
            entry("t", "a", "a-key-0123456789", all),
            entry("u", "b", "a-key-0123456789", all),
        ];
        assert!(KeySet::new(same_key).is_err());
        assert!(check_name("tenant", "acme-1", false).is_ok());
        assert!(check_name("key", "Deploy.bot_2", true).is_ok());
        for bad in ["", "-x", "Acme", "a b", "x\u{202e}", &"a".repeat(65)] {
            assert!(check_name("tenant", bad, false).is_err(), "{bad:?}");
        }
    }
}
