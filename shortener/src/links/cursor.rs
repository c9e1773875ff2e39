//! List cursors: where the next page starts, opaque and tamper-evident.
//!
//! A cursor carries the keyset position (the last link's creation time and code) and a MAC
//! over that position and the list's filters, tenant included. A cursor that was changed, cut,
//! or made for another tenant or other filters fails the MAC and is refused as
//! `invalid_cursor`: it never yields a wrong page or another tenant's rows. The MAC key is
//! derived from the code-space key, which every node of a deployment shares, so a cursor from
//! one node works on any other.

use crate::domain::{Error, ListQuery, Position};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::DateTime;
use codespace::CodeKey;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// The cursor format's version (the first byte).
const VERSION: u8 = 1;
/// Bytes of MAC a cursor carries (128 bits).
const MAC_BYTES: usize = 16;
/// The longest cursor accepted, in characters (a code is at most 64 bytes).
const MAX_CURSOR: usize = 160;

/// The key cursors are signed with.
#[derive(Clone)]
pub struct CursorKey([u8; 32]);

impl std::fmt::Debug for CursorKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CursorKey(<secret>)")
    }
}

impl CursorKey {
    /// The cursor key of a deployment whose code-space key is `key` (a one-way derivation:
    /// a cursor reveals nothing of the code-space key).
    pub fn derive(key: &CodeKey) -> Self {
        Self(crate::secrets::derive_secret(
            key,
            b"shortener list cursor key v1",
        ))
    }

    fn mac(&self, query: &ListQuery, payload: &[u8]) -> Hmac<Sha256> {
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.0)
            .expect("HMAC takes keys of any length");
        let filters = query.filters_text();
        mac.update(&(filters.len() as u64).to_be_bytes());
        mac.update(filters.as_bytes());
        mac.update(payload);
        mac
    }

    /// The cursor that continues `query` after `position`.
    pub fn seal(&self, query: &ListQuery, position: &Position) -> String {
        let mut bytes = Vec::with_capacity(9 + position.code.len() + MAC_BYTES);
        bytes.push(VERSION);
        bytes.extend_from_slice(&position.created_at.timestamp_micros().to_be_bytes());
        bytes.extend_from_slice(position.code.as_bytes());
        let tag = self.mac(query, &bytes).finalize().into_bytes();
        bytes.extend_from_slice(&tag[..MAC_BYTES]);
        URL_SAFE_NO_PAD.encode(bytes)
    }

    /// The position a cursor of `query` holds; any cursor this key did not seal for exactly
    /// these filters is `invalid_cursor`.
    pub fn open(&self, query: &ListQuery, cursor: &str) -> Result<Position, Error> {
        let invalid = || {
            Error::bad_request(
                "invalid_cursor",
                "the cursor is not one this list returned (it was changed, or made for other filters)",
            )
        };
        if cursor.len() > MAX_CURSOR {
            return Err(invalid());
        }
        let bytes = URL_SAFE_NO_PAD.decode(cursor).map_err(|_| invalid())?;
        if bytes.len() < 9 + MAC_BYTES || bytes[0] != VERSION {
            return Err(invalid());
        }
        let (payload, tag) = bytes.split_at(bytes.len() - MAC_BYTES);
        // Constant-time comparison of the truncated tag.
        self.mac(query, payload)
            .verify_truncated_left(tag)
            .map_err(|_| invalid())?;
        let micros = i64::from_be_bytes(payload[1..9].try_into().map_err(|_| invalid())?);
        let created_at = DateTime::from_timestamp_micros(micros).ok_or_else(invalid)?;
        let code = std::str::from_utf8(&payload[9..]).map_err(|_| invalid())?;
        Ok(Position {
            created_at,
            code: code.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ListInput;
    use chrono::Utc;

    fn query(tenant: &str, tag: Option<&str>) -> ListQuery {
        let input = ListInput {
            tag: tag.map(str::to_string),
            ..Default::default()
        };
        ListQuery::parse(&input, Some(tenant), Utc::now()).expect("a valid query")
    }

    #[test]
    fn a_cursor_opens_only_for_its_own_list_and_unchanged() {
        let key = CursorKey::derive(&CodeKey::from_bytes([7; 32]));
        let position = Position {
            created_at: DateTime::from_timestamp_micros(1_800_000_000_123_456).expect("a time"),
            code: "aB3xY9z".into(),
        };
        let q = query("acme", Some("spring"));
        let cursor = key.seal(&q, &position);
        assert_eq!(key.open(&q, &cursor).expect("opens"), position);
        // Another tenant, other filters, another key: refused.
        assert!(key.open(&query("other", Some("spring")), &cursor).is_err());
        assert!(key.open(&query("acme", None), &cursor).is_err());
        let other = CursorKey::derive(&CodeKey::from_bytes([8; 32]));
        assert!(other.open(&q, &cursor).is_err());
        // Every single-character change is refused.
        let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        for i in 0..cursor.len() {
            let mut changed = cursor.clone().into_bytes();
            changed[i] =
                alphabet[(alphabet.iter().position(|&c| c == changed[i]).unwrap_or(0) + 1) % 64];
            let changed = String::from_utf8(changed).expect("ASCII");
            let error = key.open(&q, &changed).expect_err(&changed);
            assert_eq!(error.code(), "invalid_cursor");
        }
        for bad in [
            "",
            "x",
            "!!!!",
            &cursor[..cursor.len() - 1],
            &"A".repeat(500),
        ] {
            assert_eq!(key.open(&q, bad).expect_err(bad).code(), "invalid_cursor");
        }
    }
}
