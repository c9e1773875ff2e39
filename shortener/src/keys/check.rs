//! The rules a key to make must pass: its name, scopes its maker holds, and an expiry no later
//! than its maker's.

use super::KeyRequest;
use crate::access::check_name;
use crate::domain::{Caller, Error, Scope, Scopes, unknown_scope};
use chrono::{DateTime, Datelike, Utc};

/// The most scopes a request may list (there are fewer scopes than this; repeats count).
const MAX_SCOPES: usize = 16;

/// A request's key, checked: its name, scopes and expiry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedKey {
    /// Its name.
    pub name: String,
    /// Its scopes.
    pub scopes: Scopes,
    /// Its expiry.
    pub expires_at: Option<DateTime<Utc>>,
}

pub(super) fn invalid(code: &'static str, message: String) -> Error {
    Error::invalid(code, message)
}

/// Checks what `caller` asks for as of `now`: a valid name, known scopes that `caller` holds
/// itself, and an expiry in the future, and no later than the caller's own key's if it expires
/// (a key may not make one that outlives it). Each refusal names the field.
pub fn check(
    caller: &Caller,
    request: &KeyRequest,
    now: DateTime<Utc>,
) -> Result<CheckedKey, Error> {
    check_name("name", &request.name, true).map_err(|m| invalid("invalid_name", m))?;
    if request.scopes.is_empty() || request.scopes.len() > MAX_SCOPES {
        return Err(invalid(
            "invalid_scopes",
            format!("scopes must list 1 to {MAX_SCOPES} scope names"),
        ));
    }
    let mut scopes = Vec::with_capacity(request.scopes.len());
    for name in &request.scopes {
        let scope = Scope::parse(name)
            .ok_or_else(|| invalid("invalid_scopes", format!("scopes: {}", unknown_scope(name))))?;
        scopes.push(scope);
    }
    let scopes: Scopes = scopes.into_iter().collect();
    if !scopes.within(caller.scopes) {
        let lacking: Vec<&str> = scopes
            .iter()
            .filter(|s| !caller.scopes.grants(*s))
            .map(Scope::name)
            .collect();
        return Err(invalid(
            "scope_not_held",
            format!(
                "scopes: a key may give only scopes it holds itself; this one lacks {}",
                lacking.join(", ")
            ),
        ));
    }
    let expires_at = match &request.expires_at {
        None => None,
        Some(text) => {
            let at = DateTime::parse_from_rfc3339(text)
                .map(|t| t.with_timezone(&Utc))
                .map_err(|e| {
                    invalid(
                        "invalid_expiry",
                        format!(
                            "expires_at must be an RFC 3339 time such as 2027-01-31T00:00:00Z: {e}"
                        ),
                    )
                })?;
            if at <= now {
                return Err(invalid(
                    "invalid_expiry",
                    "expires_at must be in the future".into(),
                ));
            }
            if at.year() > 9999 {
                return Err(invalid(
                    "invalid_expiry",
                    "expires_at must be before the year 10000".into(),
                ));
            }
            Some(at)
        }
    };
    if let Some(limit) = caller.expires
        && expires_at.is_none_or(|at| at > limit)
    {
        return Err(invalid(
            "invalid_expiry",
            format!(
                "expires_at must be at or before {}: the key making it expires then, and a key \
                 may not make one that outlives it",
                limit.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            ),
        ));
    }
    Ok(CheckedKey {
        name: request.name.clone(),
        scopes,
        expires_at,
    })
}
