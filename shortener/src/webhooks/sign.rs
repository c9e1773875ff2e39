//! Signatures of webhook deliveries: HMAC-SHA256 over `"{timestamp}.{body}"` with the
//! endpoint's secret, sent as `Webhook-Signature: v1=<hex>` with `Webhook-Timestamp` (Unix
//! seconds). A receiver recomputes it, compares in constant time, and refuses timestamps
//! outside its replay window (five minutes is usual).

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// The header carrying the signature.
pub const SIGNATURE_HEADER: &str = "webhook-signature";
/// The header carrying the timestamp the signature covers.
pub const TIMESTAMP_HEADER: &str = "webhook-timestamp";
/// The header carrying the event's number (the same on every retry: a receiver's dedup key).
pub const ID_HEADER: &str = "webhook-id";

/// The `Webhook-Signature` value of `body` sent at `timestamp` with `secret`.
pub fn signature(secret: &str, timestamp: i64, body: &[u8]) -> String {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes a key of any length");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("v1={}", hex::encode(mac.finalize().into_bytes()))
}

/// Whether `header` is a valid signature of `body` at `timestamp` with `secret`, and
/// `timestamp` is within `window` seconds of `now` (what a receiver checks).
pub fn verify(
    secret: &str,
    timestamp: i64,
    body: &[u8],
    header: &str,
    now: i64,
    window: i64,
) -> bool {
    if (now - timestamp).abs() > window {
        return false;
    }
    let Some(hex_mac) = header.strip_prefix("v1=") else {
        return false;
    };
    let Ok(given) = hex::decode(hex_mac) else {
        return false;
    };
    let mut mac =
        Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes a key of any length");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    mac.verify_slice(&given).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_verifies_only_for_its_secret_body_and_window() {
        let sig = signature("s3cret", 1_700_000_000, b"{\"a\":1}");
        assert!(sig.starts_with("v1=") && sig.len() == 3 + 64);
        assert!(verify(
            "s3cret",
            1_700_000_000,
            b"{\"a\":1}",
            &sig,
            1_700_000_100,
            300
        ));
        assert!(!verify(
            "other",
            1_700_000_000,
            b"{\"a\":1}",
            &sig,
            1_700_000_100,
            300
        ));
        assert!(!verify(
            "s3cret",
            1_700_000_000,
            b"{\"a\":2}",
            &sig,
            1_700_000_100,
            300
        ));
        assert!(!verify(
            "s3cret",
            1_700_000_001,
            b"{\"a\":1}",
            &sig,
            1_700_000_100,
            300
        ));
        assert!(!verify(
            "s3cret",
            1_700_000_000,
            b"{\"a\":1}",
            &sig,
            1_700_001_000,
            300
        ));
        assert!(!verify(
            "s3cret",
            1_700_000_000,
            b"{\"a\":1}",
            "v1=zz",
            1_700_000_000,
            300
        ));
    }
}
