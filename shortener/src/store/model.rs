//! What goes into and comes out of a store, the same for both backends.

use crate::domain::Link;
use chrono::{DateTime, Utc};
use codespace::shape::CodeKind;
use std::sync::atomic::AtomicU64;

/// The name a code's kind is stored under (`links.kind`).
pub fn kind_name(kind: CodeKind) -> &'static str {
    match kind {
        CodeKind::Generated => "generated",
        CodeKind::Private => "private",
        CodeKind::Alias => "alias",
    }
}

/// An idempotency key claimed by a create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Idempotency {
    /// The caller's key.
    pub key: String,
    /// A digest of the request, to tell a true retry from a reused key.
    pub fingerprint: Vec<u8>,
    /// Claims made before this have expired: the key is free again.
    pub expired_before: DateTime<Utc>,
}

/// A row to insert.
#[derive(Debug, Clone)]
pub struct NewLink {
    /// The key ([`crate::domain::link_key`]): the code, or `host/alias` for an alias on a
    /// branded domain.
    pub code: String,
    /// The branded domain it answers on; `None` for the default domain.
    pub domain: Option<String>,
    /// Where it routes besides its URL (none for a plain link).
    pub routes: crate::domain::Routes,
    /// The serialized target URL.
    pub url: String,
    /// The code's kind.
    pub kind: CodeKind,
    /// The generated ID, for generated codes; `code` must then be the code space's code for
    /// it (the embedded store files the row under the ID and finds it by decoding the code).
    pub id: Option<u64>,
    /// Expiry.
    pub expires_at: Option<DateTime<Utc>>,
    /// The tenant that owns it.
    pub tenant: String,
    /// The name of the API key that created it.
    pub owner: String,
    /// Dedup key, for dedup creates.
    pub dedup_key: Option<Vec<u8>>,
    /// Idempotency claim, if the request carried a key.
    pub idempotency: Option<Idempotency>,
    /// Tags, sorted and checked.
    pub tags: Vec<String>,
    /// After this many human visits the link answers 410.
    pub max_visits: Option<u64>,
    /// The import that brings it from another shortener (its code is a legacy one, kept as it
    /// was spelled; a generated create whose code it holds steps over it without an alarm).
    pub import_batch: Option<i64>,
    /// When the link was made, for an imported one (otherwise the commit time).
    pub created_at: Option<DateTime<Utc>>,
    /// The hash of the password visitors must give.
    pub password: Option<crate::domain::PasswordHash>,
    /// The W3C `traceparent` of the traced request that creates it: its `link.created` event
    /// keeps it, so the delivery continues that trace whichever node makes it.
    pub trace: Option<String>,
    /// The audit entry of this create (its object the link's key, whatever `code` is when the
    /// row goes in): the store writes it in the insert's transaction exactly when the row is
    /// inserted, never for a dedup twin, a taken code or an idempotent replay. `None` writes
    /// none (imports record their chunks themselves).
    pub audit: Option<super::NewAuditEntry>,
}

impl NewLink {
    /// A plain link of `tenant`, made by `owner`: `code` (of `kind`, and for a generated code
    /// its `id`) to `url`, on the default domain, with nothing else set (no expiry, tags,
    /// limits, password, dedup or idempotency key, trace or audit entry). Set the rest with
    /// struct update syntax.
    pub fn plain(
        code: String,
        url: String,
        kind: CodeKind,
        id: Option<u64>,
        tenant: &str,
        owner: &str,
    ) -> Self {
        Self {
            code,
            domain: None,
            routes: Default::default(),
            url,
            kind,
            id,
            expires_at: None,
            tenant: tenant.to_string(),
            owner: owner.to_string(),
            dedup_key: None,
            idempotency: None,
            tags: Vec::new(),
            max_visits: None,
            import_batch: None,
            created_at: None,
            password: None,
            trace: None,
            audit: None,
        }
    }
}

/// A target URL's host with its labels reversed (`com.example.www`), the form lists filter by.
pub fn host_rev(url: &str) -> String {
    match plain_web_host(url) {
        Some(host) => crate::domain::reverse_host(host),
        None => url::Url::parse(url)
            .ok()
            .and_then(|u| u.host_str().map(crate::domain::reverse_host))
            .unwrap_or_default(),
    }
}

/// The host of an `http` or `https` URL already in the form the URL parser writes it, read off
/// the text without parsing the whole URL (every create computes its target's host, and the
/// target was parsed once already): lowercase ASCII letters, digits, hyphens and inner dots, a
/// last label that does not start with a digit (the URL standard could read the host as an
/// IPv4 address), no punycode label (the parser checks it), and nothing else in the authority
/// but a valid port. `None` for anything else, which [`host_rev`] parses in full.
fn plain_web_host(url: &str) -> Option<&str> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))?;
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    let (host, port) = match authority.split_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (authority, None),
    };
    if let Some(port) = port {
        let valid = (1..=5).contains(&port.len())
            && port.bytes().all(|b| b.is_ascii_digit())
            && port.parse::<u32>().is_ok_and(|p| p <= 65535);
        if !valid {
            return None;
        }
    }
    let plain = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.';
    let last = host.rsplit('.').next()?;
    let usable = !host.is_empty()
        && host.bytes().all(plain)
        && !host.starts_with('.')
        && !host.ends_with('.')
        && !host.contains("..")
        && !host.contains("xn--")
        && !last.starts_with(|c: char| c.is_ascii_digit());
    usable.then_some(host)
}

/// A domain blocked through the admin API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockedDomain {
    /// `example.com`, or `.example.com` for it and its subdomains.
    pub entry: String,
    /// When it was added.
    pub added_at: DateTime<Utc>,
    /// The key that added it (`tenant/name`).
    pub added_by: String,
}

/// The result of an insert.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InsertOutcome {
    /// The row was committed.
    Created(Link),
    /// The code is already taken; nothing was written.
    CodeTaken,
    /// A live link with the same dedup key exists; it is returned and nothing new was written.
    Deduplicated(Link),
    /// The idempotency key was used before for the same request: the first result.
    Replayed(Link),
    /// The idempotency key was used before for a different request; nothing was written.
    IdempotencyMismatch,
}

/// The result of a delete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteOutcome {
    /// The link was live and is now deleted.
    Deleted,
    /// The link had been deleted before.
    AlreadyDeleted,
    /// No such code.
    NotFound,
}

/// The result of an update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpdateOutcome {
    /// The link as it is now (unchanged if the patch asked for what it already was).
    Updated(Box<Link>),
    /// No such code in the caller's tenant.
    NotFound,
    /// The link was deleted: deletes are for good.
    Gone,
}

/// The result of a [`TagChange`](crate::domain::TagChange) over a tenant's links.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TagOutcome {
    /// The change committed: the codes of the links it changed (none for a rename of a tag
    /// onto itself).
    Changed(Vec<String>),
    /// No live link of the tenant carries any of the tags sought; nothing was written.
    NotFound,
    /// A live link of the tenant already carries the new name of a rename; nothing was
    /// written.
    Conflict,
    /// More links than the bound carry the tags; nothing was written.
    TooMany,
}

/// Storage failures.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// The statement was rolled back by a deadlock or serialization failure; nothing was
    /// written and it can be run again at once.
    #[error("store conflict, retry: {0}")]
    Retry(String),
    /// The connection failed after a write was sent: it may or may not have been committed.
    #[error("store connection lost during a write; the outcome is unknown: {0}")]
    Ambiguous(String),
    /// The database cannot be reached (or timed out); retrying later may work.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// Anything else (a bug or a schema problem).
    #[error("store error: {0}")]
    Internal(String),
}

/// What a backend's write batching has done since it started (read by the metrics at scrape
/// time).
#[derive(Debug, Default)]
pub struct WriterStats {
    /// Batched inserts run (each one commit).
    pub batches: AtomicU64,
    /// Rows those batches carried; `rows / batches` is the mean batch size.
    pub rows: AtomicU64,
}

/// A change to a link or a domain made by some node, as the change feed reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChangeEvent {
    /// This code changed (deleted or disabled).
    Changed(String),
    /// The domain of this host was claimed, changed or removed.
    DomainChanged(String),
    /// Changes may have been missed: forget everything cached.
    Reset,
    /// Every change committed anywhere before this instant has been reported.
    CaughtUp(std::time::Instant),
}

/// What a store failure means to a caller: the one place it becomes a domain error.
impl From<StoreError> for crate::domain::Error {
    fn from(e: StoreError) -> Self {
        use crate::domain::Error;
        use std::time::Duration;
        // The store's own words (a driver's text: hosts, addresses, certificates) go to the
        // log; the caller gets what it can act on.
        match e {
            StoreError::Unavailable(detail) | StoreError::Retry(detail) => {
                tracing::warn!(%detail, "the store is unavailable");
                Error::Unavailable {
                    message: "the store is unavailable; retry in a moment".into(),
                    retry_after: Duration::from_secs(1),
                }
            }
            StoreError::Ambiguous(detail) => {
                tracing::warn!(%detail, "the store connection was lost during a commit");
                Error::Unavailable {
                    message: "the store connection was lost during the commit, so this create may or may not have \
                              been stored; retry with the same Idempotency-Key to be safe"
                        .into(),
                    retry_after: Duration::from_secs(1),
                }
            }
            StoreError::Internal(message) => Error::Internal(message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A driver's text (a host, an address, a certificate's subject) never reaches a caller:
    /// each kind of store failure answers its own fixed words.
    #[test]
    fn a_store_failure_tells_the_caller_nothing_of_the_store() {
        let detail =
            "error connecting to server db-7.internal (10.1.2.3:5432): certificate for CN=db-7";
        for (failure, says) in [
            (StoreError::Unavailable(detail.into()), "retry in a moment"),
            (StoreError::Retry(detail.into()), "retry in a moment"),
            (
                StoreError::Ambiguous(detail.into()),
                "may or may not have been stored",
            ),
        ] {
            let error = crate::domain::Error::from(failure);
            let shown = error.public_message();
            assert!(shown.contains(says), "{shown}");
            for leak in ["db-7", "10.1.2.3", "CN="] {
                assert!(!shown.contains(leak), "{shown}");
            }
        }
    }

    /// The host as the URL parser reads it, reversed: what [`host_rev`] must always give.
    fn parsed(url: &str) -> String {
        url::Url::parse(url)
            .ok()
            .and_then(|u| u.host_str().map(crate::domain::reverse_host))
            .unwrap_or_default()
    }

    #[test]
    fn the_host_read_off_the_text_is_the_parsers() {
        let hosts = [
            "example.com",
            "www.example.com",
            "a-b.example.co.uk",
            "EXAMPLE.com",
            "example.com.",
            ".example.com",
            "a..b",
            "127.0.0.1",
            "0x7f.1",
            "1.2.3.example",
            "example.123",
            "example.1a",
            "xn--nxasmq6b.com",
            "xn--bad.com",
            "ex%41mple.com",
            "[::1]",
            "",
            "user@example.com",
            "user:pw@example.com",
            "b\u{fc}cher.de",
            "ex ample.com",
            "exa\tmple.com",
            "-a-.com",
            "a.b-",
            "\u{ff21}.com",
        ];
        let ports = [
            "", ":", ":80", ":443", ":8080", ":65535", ":65536", ":0", ":99999", ":123456", ":x",
            ":-1",
        ];
        let tails = ["", "/", "/path?q=1#f", "?q", "#f", "\\path", " ", "/a b"];
        let schemes = [
            "http://", "https://", "HTTP://", "ftp://", "mailto:", "http:", "//", " http://",
        ];
        let mut checked = 0;
        for scheme in schemes {
            for host in hosts {
                for port in ports {
                    for tail in tails {
                        let url = format!("{scheme}{host}{port}{tail}");
                        assert_eq!(host_rev(&url), parsed(&url), "{url:?}");
                        checked += 1;
                    }
                }
            }
        }
        assert_eq!(
            checked,
            schemes.len() * hosts.len() * ports.len() * tails.len()
        );
        // The common case takes the short way.
        assert_eq!(
            plain_web_host("https://www.example.com/a?b"),
            Some("www.example.com")
        );
        assert_eq!(
            host_rev("https://www.example.com:8443/a"),
            "com.example.www"
        );
    }
}
