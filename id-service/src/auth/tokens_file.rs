//! The tokens file (`ID_SERVICE_TOKENS_FILE`): TOML, one `[[callers]]` table per caller.
//!
//! ```toml
//! [[callers]]
//! name = "shortener"                  # [a-z][a-z0-9_-]{0,63}, unique
//! token_sha256 = "3f0c...64 hex..."   # or `token = "..."` (raw, at least 32 characters)
//! namespaces = ["links"]              # or ["*"] for every namespace
//! scopes = ["lease"]                  # lease, allocate, lookup, admin
//! ids_per_second = 100000             # optional quotas
//! ids_burst = 1000000
//! leases_per_second = 5
//! ```
//!
//! The whole file is checked before it is used: any error refuses it (at start-up the service
//! does not start; on a reload the previous set stays). Messages never contain a token: the TOML
//! parser's own excerpt of the offending line is dropped, quoted values in its message too.

use super::quota::QuotaSpec;
use super::token::{self, TokenDigest, TokenError};
use super::{NamespaceGrant, Scope, ScopeSet, UnknownScope};
use crate::domain::{BadCallerName, CallerName, Namespace};
use serde::Deserialize;
use std::collections::{BTreeSet, HashSet};
use std::io::Read;
use std::num::NonZeroU32;
use std::path::Path;

/// The largest tokens file read (bigger files are refused unread).
pub const MAX_FILE_BYTES: u64 = 1 << 20;
/// The most callers one file may name.
pub const MAX_CALLERS: usize = 10_000;

/// One caller as the file describes it, checked.
#[derive(Clone, PartialEq, Eq)]
pub struct CallerSpec {
    /// Its name (the prefix of its holders).
    pub name: CallerName,
    /// The SHA-256 of its token.
    pub digest: TokenDigest,
    /// The namespaces it may use.
    pub namespaces: NamespaceGrant,
    /// What it may do.
    pub scopes: ScopeSet,
    /// Its quotas.
    pub quota: QuotaSpec,
}

impl std::fmt::Debug for CallerSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallerSpec")
            .field("name", &self.name)
            .field("digest", &"<sha256>")
            .field("namespaces", &self.namespaces)
            .field("scopes", &self.scopes)
            .field("quota", &self.quota)
            .finish()
    }
}

/// Why a tokens file was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokensFileError {
    /// The file could not be read.
    #[error("cannot read the tokens file: {0}")]
    Read(String),
    /// Not valid TOML, or not the expected shape.
    #[error("the tokens file is not valid: {0}")]
    Syntax(String),
    /// One entry breaks a rule.
    #[error("the tokens file's caller #{index} ({name}): {reason}")]
    Entry {
        /// 1-based position in the file.
        index: usize,
        /// The entry's name as written (escaped for logs), or `?`.
        name: String,
        /// What is wrong.
        reason: EntryError,
    },
    /// The file as a whole breaks a rule.
    #[error("the tokens file: {0}")]
    File(String),
}

/// Why one caller (an entry of the file, or the options of `tokens add`) breaks a rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EntryError {
    /// The name is not a caller name.
    #[error(transparent)]
    Name(#[from] BadCallerName),
    /// The token or its digest is unusable.
    #[error(transparent)]
    Token(#[from] TokenError),
    /// Neither or both of `token` and `token_sha256`.
    #[error("give exactly one of token and token_sha256")]
    TokenChoice,
    /// `namespaces = []`.
    #[error("namespaces is empty")]
    NoNamespaces,
    /// `*` beside named namespaces.
    #[error("\"*\" (every namespace) must be the only entry of namespaces")]
    StarNotAlone,
    /// A namespace name that does not parse (why).
    #[error("{0}")]
    Namespace(String),
    /// `scopes = []`.
    #[error("scopes is empty")]
    NoScopes,
    /// A scope name that is none of the four.
    #[error(transparent)]
    Scope(#[from] UnknownScope),
    /// A rate quota outside `1..=QuotaSpec::MAX_RATE`.
    #[error("{field} must be within 1..={max}, got {value}", max = QuotaSpec::MAX_RATE)]
    RateOutOfRange {
        /// The quota's field.
        field: &'static str,
        /// The value given.
        value: u32,
    },
    /// `ids_burst = 0`.
    #[error("ids_burst must be at least 1")]
    ZeroBurst,
    /// `ids_burst` without `ids_per_second`.
    #[error("ids_burst needs ids_per_second")]
    BurstWithoutRate,
    /// Another entry has the same name.
    #[error("another caller has the same name")]
    DuplicateName,
    /// Another entry has the same token.
    #[error("another caller has the same token")]
    DuplicateToken,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Document {
    #[serde(default)]
    callers: Vec<Entry>,
}

/// An entry as written. No `Debug`: it may hold a raw token.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    name: String,
    token: Option<String>,
    token_sha256: Option<String>,
    namespaces: Vec<String>,
    scopes: Vec<String>,
    ids_per_second: Option<u32>,
    ids_burst: Option<u32>,
    leases_per_second: Option<u32>,
}

/// Reads and checks the file at `path`, reading at most [`MAX_FILE_BYTES`].
pub fn read(path: &Path) -> Result<Vec<CallerSpec>, TokensFileError> {
    parse(&read_text(path)?)
}

/// The file's text, bounded in size.
pub fn read_text(path: &Path) -> Result<String, TokensFileError> {
    let file = std::fs::File::open(path)
        .map_err(|e| TokensFileError::Read(format!("{}: {e}", path.display())))?;
    let mut text = String::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| TokensFileError::Read(format!("{}: {e}", path.display())))?;
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(TokensFileError::Read(format!(
            "{} is larger than {MAX_FILE_BYTES} bytes",
            path.display()
        )));
    }
    Ok(text)
}

/// Checks a whole file's text.
pub fn parse(text: &str) -> Result<Vec<CallerSpec>, TokensFileError> {
    let document: Document = toml::from_str(text).map_err(|e| syntax_error(text, &e))?;
    if document.callers.is_empty() {
        return Err(TokensFileError::File(
            "it names no caller ([[callers]] tables)".into(),
        ));
    }
    if document.callers.len() > MAX_CALLERS {
        return Err(TokensFileError::File(format!(
            "it names more than {MAX_CALLERS} callers"
        )));
    }
    let mut names = HashSet::new();
    let mut digests = HashSet::new();
    let mut specs = Vec::with_capacity(document.callers.len());
    for (i, entry) in document.callers.into_iter().enumerate() {
        let fail = |name: &str, reason: EntryError| TokensFileError::Entry {
            index: i + 1,
            name: crate::logsafe::Escaped(name).to_string(),
            reason,
        };
        let shown = entry.name.clone();
        let spec = check_entry(entry).map_err(|reason| fail(&shown, reason))?;
        if !names.insert(spec.name.clone()) {
            return Err(fail(&shown, EntryError::DuplicateName));
        }
        if !digests.insert(spec.digest) {
            return Err(fail(&shown, EntryError::DuplicateToken));
        }
        specs.push(spec);
    }
    Ok(specs)
}

fn check_entry(entry: Entry) -> Result<CallerSpec, EntryError> {
    let name = CallerName::parse(&entry.name)?;
    let digest = match (&entry.token, &entry.token_sha256) {
        (Some(raw), None) => {
            token::check_raw(raw)?;
            token::digest(raw.as_bytes())
        }
        (None, Some(hex)) => token::parse_digest(hex)?,
        _ => return Err(EntryError::TokenChoice),
    };
    Ok(CallerSpec {
        name,
        digest,
        namespaces: namespace_grant(&entry.namespaces)?,
        scopes: scope_set(&entry.scopes)?,
        quota: quota_spec(
            entry.ids_per_second,
            entry.ids_burst,
            entry.leases_per_second,
        )?,
    })
}

/// Parses a list of namespaces, where `*` alone means every namespace.
pub fn namespace_grant(list: &[String]) -> Result<NamespaceGrant, EntryError> {
    if list.is_empty() {
        return Err(EntryError::NoNamespaces);
    }
    if list.iter().any(|n| n == "*") {
        return if list.len() == 1 {
            Ok(NamespaceGrant::All)
        } else {
            Err(EntryError::StarNotAlone)
        };
    }
    let set = list
        .iter()
        .map(|n| Namespace::parse(n).map_err(|e| EntryError::Namespace(e.to_string())))
        .collect::<Result<BTreeSet<_>, _>>()?;
    Ok(NamespaceGrant::Only(set))
}

/// Parses a list of scope names.
pub fn scope_set(list: &[String]) -> Result<ScopeSet, EntryError> {
    if list.is_empty() {
        return Err(EntryError::NoScopes);
    }
    let mut set = ScopeSet::default();
    for name in list {
        set = set.with(Scope::parse(name)?);
    }
    Ok(set)
}

/// Checks the quota settings of one caller.
pub fn quota_spec(
    ids_per_second: Option<u32>,
    ids_burst: Option<u32>,
    leases_per_second: Option<u32>,
) -> Result<QuotaSpec, EntryError> {
    let rate = |field: &'static str, value: Option<u32>| match value {
        None => Ok(None),
        Some(v) if (1..=QuotaSpec::MAX_RATE).contains(&v) => Ok(NonZeroU32::new(v)),
        Some(value) => Err(EntryError::RateOutOfRange { field, value }),
    };
    let spec = QuotaSpec {
        ids_per_second: rate("ids_per_second", ids_per_second)?,
        ids_burst: match ids_burst {
            None => None,
            Some(b) => Some(NonZeroU32::new(b).ok_or(EntryError::ZeroBurst)?),
        },
        leases_per_second: rate("leases_per_second", leases_per_second)?,
    };
    if spec.ids_burst.is_some() && spec.ids_per_second.is_none() {
        return Err(EntryError::BurstWithoutRate);
    }
    Ok(spec)
}

/// A TOML error as "line L, column C: message", without the parser's excerpt of the line and
/// with quoted values blanked out: either could be a token.
fn syntax_error(text: &str, error: &toml::de::Error) -> TokensFileError {
    let mut message = String::new();
    let mut quoted = false;
    for c in error.message().chars() {
        if c == '"' {
            if !quoted {
                message.push_str("\"…");
            }
            quoted = !quoted;
        }
        if !quoted {
            message.push(c);
        }
    }
    let message = crate::logsafe::Escaped(message.trim()).to_string();
    let Some(span) = error.span() else {
        return TokensFileError::Syntax(message);
    };
    let before = &text[..span.start.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    TokensFileError::Syntax(format!("line {line}, column {column}: {message}"))
}

#[cfg(test)]
mod tests;
