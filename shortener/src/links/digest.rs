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

/// The digest that tells a true retry (same request) from a reused idempotency key. A create
/// on the default domain digests as it did before domains existed, so a retry across an upgrade
/// is still recognised.
pub(super) fn fingerprint(request: &CreateRequest) -> Vec<u8> {
    let flags = [u8::from(request.dedup), u8::from(request.private)];
    let alias = request.alias.as_deref().unwrap_or("");
    let tags = request.tags.join(",");
    let max_visits = request.max_visits.unwrap_or(0).to_be_bytes();
    let expiry = expiry_bytes(request);
    let fields: [&[u8]; 6] = [
        request.url.as_str().as_bytes(),
        alias.as_bytes(),
        &expiry,
        &flags,
        tags.as_bytes(),
        &max_visits,
    ];
    match &request.domain {
        None => digest(b"create v2", &fields),
        Some(host) => {
            let mut all = fields.to_vec();
            all.push(host.as_bytes());
            digest(b"create v3", &all)
        }
    }
}

/// The dedup key: one live generated link per (tenant, URL, expiry) on the default domain, and
/// per (tenant, domain, URL, expiry) on a branded one (the default domain's keys are those of
/// before domains, so dedup creates keep finding the links made before).
pub(super) fn dedup_key(tenant: &str, request: &CreateRequest) -> Vec<u8> {
    let base = [
        tenant.as_bytes(),
        request.url.as_str().as_bytes(),
        &expiry_bytes(request),
    ];
    match &request.domain {
        None => digest(b"dedup v2", &base),
        Some(host) => digest(b"dedup v3", &[base[0], base[1], base[2], host.as_bytes()]),
    }
}
