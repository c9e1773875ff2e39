//! The keys in force, and their reload: a changed keys file (or SIGHUP) replaces the whole set
//! at once, and a file that does not parse changes nothing. The keys tenant admins keep in the
//! store are a second set beside the file's, replaced whole by `crate::keys` each reload
//! interval; the file's set is asked first.

use super::keyfile;
use super::keys::{KeyEntry, KeySet};
use super::signed::{Signed, YourlsTokens};
use crate::domain::{Caller, Error};
use crate::watch::{ReloadCounters, ReloadSeries};
use arc_swap::ArcSwap;
use chrono::Utc;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The accepted API keys: those given directly, plus those of the keys file, which is re-read
/// when it changes. Readers take no lock.
pub struct ApiKeys {
    current: ArcSwap<KeySet>,
    stored: ArcSwap<KeySet>,
    fixed: Vec<KeyEntry>,
    file: Option<PathBuf>,
    reloads: Arc<ReloadCounters>,
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
