//! The keys in force, and their reload: a changed keys file (or SIGHUP) replaces the whole set
//! at once, and a file that does not parse changes nothing. The keys tenant admins keep in the
//! store are a second set beside the file's, replaced whole by `crate::keys` each reload
//! interval; the file's set is asked first. A well-formed key that neither set holds is asked of
//! the store before it is refused ([`KeyLookup`]), so a key made on another node works at once.

use super::keyfile;
use super::keys::{KeyEntry, KeySet, bearer, digest, is_generated_shape};
use super::signed::{Signed, YourlsTokens};
use crate::domain::{Caller, Error, NoKey};
use crate::metrics::{Sample, Samples};
use crate::watch::{ReloadCounters, ReloadSeries};
use arc_swap::ArcSwap;
use chrono::Utc;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Where a key in neither set is looked up before it is refused: the store's keys, read by
/// `crate::keys`, which bounds how often a refused key may cost a read.
pub trait KeyLookup: Send + Sync {
    /// Whether a live, unexpired key of `digest` is kept; when one is ([`Looked::Kept`]), the
    /// stored set has been read again since, so the key is in force now if it may be (its
    /// maker's role allows).
    fn look_up(&self, digest: [u8; 32]) -> Pin<Box<dyn Future<Output = Looked> + Send + '_>>;
}

/// What a lookup of a key found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Looked {
    /// The store keeps it live, and the keys were read again.
    Kept,
    /// The store keeps no live key of it.
    NotKept,
    /// Not asked: the answer was known, or lookups were at their bound.
    Unasked,
    /// The store failed or took too long.
    Failed,
}

impl Looked {
    const ALL: [Looked; 4] = [
        Looked::Kept,
        Looked::NotKept,
        Looked::Unasked,
        Looked::Failed,
    ];

    /// Its label in the metrics.
    pub fn name(self) -> &'static str {
        match self {
            Looked::Kept => "kept",
            Looked::NotKept => "not_kept",
            Looked::Unasked => "unasked",
            Looked::Failed => "failed",
        }
    }
}

/// How many lookups found what (`shortener_api_key_lookups_total{outcome}`).
#[derive(Debug, Default)]
pub struct LookupCounters([AtomicU64; 4]);

impl LookupCounters {
    fn count(&self, looked: Looked) {
        self.0[looked as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// How many lookups found `looked`.
    pub fn of(&self, looked: Looked) -> u64 {
        self.0[looked as usize].load(Ordering::Relaxed)
    }
}

impl Sample for LookupCounters {
    fn sample(&self, out: &mut Samples<'_, '_>) -> std::fmt::Result {
        out.counters(
            "shortener_api_key_lookups",
            "Keys a node held in no set, looked up in the store before refusing them, by what \
             the lookup found (kept, not_kept, unasked: known or past the bounds, failed)",
            Looked::ALL.map(|looked| ([("outcome", looked.name())], self.of(looked))),
        )
    }
}

/// The accepted API keys: those given directly, plus those of the keys file, which is re-read
/// when it changes. Readers take no lock.
pub struct ApiKeys {
    current: ArcSwap<KeySet>,
    stored: ArcSwap<KeySet>,
    fixed: Vec<KeyEntry>,
    file: Option<PathBuf>,
    reloads: Arc<ReloadCounters>,
    /// Where a key in neither set is looked up, once the store's keys are kept.
    lookup: OnceLock<Weak<dyn KeyLookup>>,
    /// What lookups found.
    lookups: Arc<LookupCounters>,
}

impl ApiKeys {
    /// Keys from `fixed` entries and, if given, `file`; refused if the file cannot be read or
    /// parsed, or the set is empty.
    pub fn load(fixed: Vec<KeyEntry>, file: Option<PathBuf>) -> Result<Self, String> {
        let keys = Self {
            current: ArcSwap::from_pointee(KeySet::default()),
            stored: ArcSwap::from_pointee(KeySet::default()),
            fixed,
            file,
            reloads: Arc::new(ReloadCounters::new(ReloadSeries {
                name: "shortener_api_keys_reloads",
                applied_help: "Reloads of the API keys file that replaced the keys in force",
                refused_help: "Reloads of the API keys file refused because it did not parse (the keys in force stayed)",
            })),
            lookup: OnceLock::new(),
            lookups: Arc::default(),
        };
        let set = keys.read()?;
        if set.is_empty() {
            return Err(
                "no API keys configured (SHORTENER_API_KEYS or SHORTENER_API_KEYS_FILE)".into(),
            );
        }
        keys.current.store(Arc::new(set));
        Ok(keys)
    }

    /// A fixed set (for tests and tools).
    pub fn fixed(entries: Vec<KeyEntry>) -> Result<Self, String> {
        Self::load(entries, None)
    }

    fn read(&self) -> Result<KeySet, String> {
        let mut entries = self.fixed.clone();
        if let Some(path) = &self.file {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("read API keys file {}: {e}", path.display()))?;
            let from_file = keyfile::parse(&text)
                .map_err(|e| format!("API keys file {}: {e}", path.display()))?;
            entries.extend(from_file);
        }
        KeySet::new(entries)
    }

    /// Re-reads the keys file; the new set replaces the old one only if it parses and is not
    /// empty. Returns how many keys are now in force.
    pub fn reload(&self) -> Result<usize, String> {
        let set = self.read()?;
        if set.is_empty() {
            return Err("the new set has no keys".into());
        }
        let count = set.len();
        self.current.store(Arc::new(set));
        Ok(count)
    }

    /// The counts of reloads applied and refused (a part of `/metrics`).
    pub fn reloads(&self) -> Arc<ReloadCounters> {
        Arc::clone(&self.reloads)
    }

    /// Puts `set` in force as the keys kept in the store, in place of the previous ones.
    pub fn set_stored(&self, set: KeySet) {
        self.stored.store(Arc::new(set));
    }

    /// Whether the keys file (or the keys given directly) holds a key named `name` in
    /// `tenant`: such a name is the operator's, and a stored key may not take it.
    pub fn configured(&self, tenant: &str, name: &str) -> bool {
        self.current.load().holds(tenant, name)
    }

    /// The caller of an `Authorization` header value, against the keys in force now: the
    /// file's, then the stored ones.
    pub fn authenticate(&self, header: Option<&str>) -> Result<Caller, Error> {
        let now = Utc::now();
        self.current
            .load()
            .authenticate(header, now)
            .or_else(|_| self.stored.load().authenticate(header, now))
    }

    /// Has a key in neither set looked up by `lookup` before it is refused (once; a later
    /// call changes nothing). Held weakly: the lookup owns these keys.
    pub fn look_up_with(&self, lookup: Weak<dyn KeyLookup>) {
        let _ = self.lookup.set(lookup);
    }

    /// [`ApiKeys::authenticate`], but a key in neither set that has the shape of a stored key
    /// is first asked of the store ([`KeyLookup`]): a key made on another node since this
    /// node's last read is in force at once, not at the next reload.
    pub async fn authenticate_looking_up(&self, header: Option<&str>) -> Result<Caller, Error> {
        let refused = match self.authenticate(header) {
            Err(refused @ Error::Unauthenticated(NoKey::Unknown)) => refused,
            answered => return answered,
        };
        let Some(lookup) = self.lookup.get().and_then(Weak::upgrade) else {
            return Err(refused);
        };
        let key = bearer(header).map_err(Error::Unauthenticated)?;
        let digest = digest(key);
        let in_a_set =
            self.current.load().contains(&digest) || self.stored.load().contains(&digest);
        if in_a_set || !is_generated_shape(key) {
            return Err(refused);
        }
        let looked = lookup.look_up(digest).await;
        self.lookups.count(looked);
        if looked != Looked::Kept {
            return Err(refused);
        }
        self.authenticate(header)
    }

    /// What lookups of keys in neither set found (a part of `/metrics`).
    pub fn lookups(&self) -> Arc<LookupCounters> {
        Arc::clone(&self.lookups)
    }

    /// The caller whose YOURLS token signed `signed`, against the keys in force now.
    pub fn authenticate_signed(
        &self,
        tokens: &YourlsTokens,
        signed: &Signed,
    ) -> Result<Caller, Error> {
        let now = Utc::now();
        self.current
            .load()
            .authenticate_signed(tokens, signed, now)
            .or_else(|_| self.stored.load().authenticate_signed(tokens, signed, now))
    }

    /// The tenants that hold keys now.
    pub fn tenants(&self) -> Vec<String> {
        self.current.load().tenants().into_iter().collect()
    }

    /// Re-reads the keys file whenever it changes or the process gets SIGHUP (see
    /// [`crate::watch`]), until `stop`.
    pub async fn watch(self: Arc<Self>, every: Duration, stop: CancellationToken) {
        let Some(path) = self.file.clone() else {
            return;
        };
        let keys = Arc::clone(&self);
        let reload = move || keys.reload().map(|count| format!("{count} keys"));
        crate::watch::watch_file(path, "API keys", every, &self.reloads, reload, stop).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::keys::generate_api_key;
    use crate::domain::Scopes;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn entry(name: &str, key: &str) -> KeyEntry {
        KeyEntry {
            tenant: "acme".into(),
            name: name.into(),
            digest: digest(key),
            scopes: Scopes::all_but_admin(),
            expires: None,
        }
    }

    /// A store of its own: the digests it keeps (each put in force when looked up), and how
    /// many lookups it answered.
    struct Kept {
        keys: Weak<ApiKeys>,
        kept: Mutex<Vec<KeyEntry>>,
        asked: AtomicUsize,
    }

    impl KeyLookup for Kept {
        fn look_up(&self, digest: [u8; 32]) -> Pin<Box<dyn Future<Output = Looked> + Send + '_>> {
            self.asked.fetch_add(1, Ordering::SeqCst);
            let kept = self.kept.lock().expect("kept").clone();
            let found = kept.iter().any(|e| e.digest == digest);
            if found && let Some(keys) = self.keys.upgrade() {
                keys.set_stored(KeySet::new(kept).expect("valid"));
            }
            let looked = if found { Looked::Kept } else { Looked::NotKept };
            Box::pin(std::future::ready(looked))
        }
    }

    #[tokio::test]
    async fn only_a_well_formed_key_no_set_holds_is_looked_up_and_a_kept_one_is_in_force() {
        let operator = generate_api_key();
        let keys = Arc::new(ApiKeys::fixed(vec![entry("operator", &operator)]).expect("keys"));
        let store = Arc::new(Kept {
            keys: Arc::downgrade(&keys),
            kept: Mutex::new(Vec::new()),
            asked: AtomicUsize::new(0),
        });
        let bearer = |key: &str| format!("Bearer {key}");
        let made_elsewhere = generate_api_key();
        // Without a lookup, an unknown key is refused as before.
        assert!(
            keys.authenticate_looking_up(Some(&bearer(&made_elsewhere)))
                .await
                .is_err()
        );
        let lookup: Weak<Kept> = Arc::downgrade(&store);
        keys.look_up_with(lookup);
        store
            .kept
            .lock()
            .expect("kept")
            .push(entry("made-elsewhere", &made_elsewhere));
        let caller = keys
            .authenticate_looking_up(Some(&bearer(&made_elsewhere)))
            .await
            .expect("a kept key is in force at once");
        assert_eq!(&*caller.key, "made-elsewhere");
        assert_eq!(store.asked.load(Ordering::SeqCst), 1);
        // Held now: no second lookup; nor for the operator's key.
        for key in [&made_elsewhere, &operator] {
            keys.authenticate_looking_up(Some(&bearer(key)))
                .await
                .expect("held");
        }
        assert_eq!(store.asked.load(Ordering::SeqCst), 1);
        // A key of the generated shape the store does not keep: asked, refused.
        let never_made = generate_api_key();
        assert!(matches!(
            keys.authenticate_looking_up(Some(&bearer(&never_made)))
                .await,
            Err(Error::Unauthenticated(NoKey::Unknown))
        ));
        assert_eq!(store.asked.load(Ordering::SeqCst), 2);
        // Not asked: keys no stored key can be, and malformed headers.
        for header in [
            bearer("short"),
            bearer(&format!("{never_made}x")),
            bearer(&format!("{}-", &never_made[..31])),
            format!("Basic {never_made}"),
            String::new(),
        ] {
            assert!(keys.authenticate_looking_up(Some(&header)).await.is_err());
        }
        assert_eq!(store.asked.load(Ordering::SeqCst), 2);
        let counted = keys.lookups();
        assert_eq!(
            (counted.of(Looked::Kept), counted.of(Looked::NotKept)),
            (1, 1)
        );
        // A key a set holds but that has expired is not asked for either.
        let expired = generate_api_key();
        let mut old = entry("old", &expired);
        old.expires = Some(Utc::now() - chrono::Duration::seconds(1));
        keys.set_stored(KeySet::new(vec![old]).expect("valid"));
        assert!(
            keys.authenticate_looking_up(Some(&bearer(&expired)))
                .await
                .is_err()
        );
        assert_eq!(store.asked.load(Ordering::SeqCst), 2);
    }
}
