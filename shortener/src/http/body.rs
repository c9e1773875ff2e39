//! Bodies read before the request is authenticated (a YOURLS form carrying its signature, the
//! password form of a protected link): bounded in size, as every body is, and in time, so that
//! a client that trickles one cannot hold its buffer and its connection for as long as it likes.

use axum::body::{Body, Bytes};
use std::time::Duration;

/// How long such a body may take to arrive in full.
pub const PUBLIC_BODY_READ: Duration = Duration::from_secs(10);

/// Why a body was not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unread {
    /// It is longer than the limit.
    TooLarge,
    /// It did not arrive within [`PUBLIC_BODY_READ`].
    TooSlow,
}

/// `body` in full, if it is at most `limit` bytes and arrives within [`PUBLIC_BODY_READ`].
pub async fn read_public(body: Body, limit: usize) -> Result<Bytes, Unread> {
    match tokio::time::timeout(PUBLIC_BODY_READ, axum::body::to_bytes(body, limit)).await {
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(_)) => Err(Unread::TooLarge),
        Err(_) => Err(Unread::TooSlow),
    }
}

impl Unread {
    /// What a refusal says, for a body of at most `limit` bytes.
    pub fn message(self, limit: usize) -> String {
        match self {
            Unread::TooLarge => format!("the request body exceeds {limit} bytes"),
            Unread::TooSlow => format!(
                "the request body did not arrive within {} seconds",
                PUBLIC_BODY_READ.as_secs()
            ),
        }
    }
}
