//! Countries of client addresses, from a MaxMind-format database file the operator provides
//! (`SHORTENER_GEOIP_DB`), read with the `maxminddb` reader and re-read when the file changes.
//!
//! A file that is missing, truncated or not a MaxMind database is logged once (until it
//! changes) and the node counts visits without countries; it never stops the node or its
//! readiness. The address is only looked up: it is never stored or logged.

use arc_swap::ArcSwapOption;
use maxminddb::Reader;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use tokio_util::sync::CancellationToken;

/// A country database, swapped whole when its file changes; lookups take no lock.
pub struct GeoIp {
    path: PathBuf,
    reader: ArcSwapOption<Reader<Vec<u8>>>,
    /// The modification time and length of the file last read (or found unreadable).
    /// `None` before the first look; then the file's stamp at the last look (`None`: missing).
    seen: Mutex<Option<Option<(SystemTime, u64)>>>,
}

impl GeoIp {
    /// The database at `path`, read now (a failure is logged and leaves no database).
    pub fn open(path: PathBuf) -> Self {
        let geo = Self {
            path,
            reader: ArcSwapOption::empty(),
            seen: Mutex::new(None),
        };
        geo.reload_if_changed();
        geo
    }

    /// Whether a database is in force.
    pub fn loaded(&self) -> bool {
        self.reader.load().is_some()
    }

    /// The ISO code of the country of `ip`, if the database knows it.
    pub fn country(&self, ip: IpAddr) -> Option<[u8; 2]> {
        let reader = self.reader.load();
        let reader = reader.as_ref()?;
        let found = reader.lookup(ip.to_canonical()).ok()?;
        let record: maxminddb::geoip2::Country = found.decode().ok()??;
        let code = record
            .country
            .iso_code
            .or(record.registered_country.iso_code)?;
        match code.as_bytes() {
            &[a, b] if a.is_ascii_alphabetic() && b.is_ascii_alphabetic() => {
                Some([a.to_ascii_uppercase(), b.to_ascii_uppercase()])
            }
            _ => None,
        }
    }

    /// Reads the file again if its modification time or length changed since the last look
    /// (a file that stays missing or unreadable is complained about once).
    pub fn reload_if_changed(&self) {
        let stamp = std::fs::metadata(&self.path)
            .ok()
            .map(|m| (m.modified().unwrap_or(SystemTime::UNIX_EPOCH), m.len()));
        {
            let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
            if *seen == Some(stamp) {
                return;
            }
            *seen = Some(stamp);
        }
        if stamp.is_none() {
            // A database read before stays in force while its file is being replaced.
            if !self.loaded() {
                tracing::error!(path = %self.path.display(), "the GeoIP database file is missing; counting visits without countries");
            }
            return;
        }
        match std::fs::read(&self.path)
            .map_err(|e| e.to_string())
            .and_then(|bytes| Reader::from_source(bytes).map_err(|e| e.to_string()))
        {
            Ok(reader) => {
                tracing::info!(path = %self.path.display(), "GeoIP database loaded");
                self.reader.store(Some(Arc::new(reader)));
            }
            Err(error) => {
                tracing::error!(path = %self.path.display(), %error, "the GeoIP database cannot be read; counting visits without countries");
                self.reader.store(None);
            }
        }
    }

    /// Re-reads the file when it changes, checking every `every` until `stop`.
    pub async fn watch(self: Arc<Self>, every: Duration, stop: CancellationToken) {
        while tokio::time::timeout(every, stop.cancelled()).await.is_err() {
            let geo = Arc::clone(&self);
            let _ = tokio::task::spawn_blocking(move || geo.reload_if_changed()).await;
        }
    }
}
