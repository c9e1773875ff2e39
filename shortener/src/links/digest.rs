//! The digests a create is recognised by: its idempotency fingerprint and its dedup key.

use crate::domain::CreateRequest;
use sha2::{Digest, Sha256};

/// SHA-256 over NUL-separated fields, under a domain tag.
fn digest(tag: &[u8], fields: &[&[u8]]) -> Vec<u8> {
    let mut h = Sha256::new();
    h.update(tag);
    for field in fields {
        h.update([0]);
        h.update(field);
    }
    h.finalize().to_vec()
}

fn expiry_bytes(request: &CreateRequest) -> [u8; 8] {
    request
        .expires_at
        .map_or(i64::MIN, |t| t.timestamp_millis())
        .to_be_bytes()
}

/// The digest that tells a true retry (same request) from a reused idempotency key.
pub(super) fn fingerprint(request: &CreateRequest) -> Vec<u8> {
    let flags = [u8::from(request.dedup), u8::from(request.private)];
    let alias = request.alias.as_deref().unwrap_or("");
    let tags = request.tags.join(",");
    let max_visits = request.max_visits.unwrap_or(0).to_be_bytes();
    digest(
        b"create v2",
        &[
            request.url.as_str().as_bytes(),
            alias.as_bytes(),
            &expiry_bytes(request),
            &flags,
            tags.as_bytes(),
            &max_visits,
        ],
    )
}

/// The dedup key: one live generated link per (tenant, URL, expiry).
pub(super) fn dedup_key(tenant: &str, request: &CreateRequest) -> Vec<u8> {
    digest(
        b"dedup v2",
        &[
            tenant.as_bytes(),
            request.url.as_str().as_bytes(),
            &expiry_bytes(request),
        ],
    )
}
