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
    /// Reading it failed (the client went away, or sent a malformed chunk).
    Broken,
}

/// `body` in full, if it is at most `limit` bytes and arrives within [`PUBLIC_BODY_READ`].
pub async fn read_public(body: Body, limit: usize) -> Result<Bytes, Unread> {
    match tokio::time::timeout(PUBLIC_BODY_READ, axum::body::to_bytes(body, limit)).await {
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(error)) => {
            let inner = error.into_inner();
            if inner
                .downcast_ref::<http_body_util::LengthLimitError>()
                .is_some()
            {
                Err(Unread::TooLarge)
            } else {
                Err(Unread::Broken)
            }
        }
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
            Unread::Broken => "the request body could not be read".to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(chunks: Vec<Result<&'static str, std::io::Error>>) -> Body {
        Body::from_stream(futures::stream::iter(chunks))
    }

    /// A body is read whole within its limit; past it, one that breaks off and one that never
    /// ends are each refused for what they are.
    #[tokio::test(start_paused = true)]
    async fn a_public_body_is_refused_for_what_went_wrong() {
        let whole = stream(vec![Ok("password="), Ok("horse")]);
        assert_eq!(
            read_public(whole, 64).await.as_deref(),
            Ok(&b"password=horse"[..])
        );
        let long = stream(vec![Ok("password="), Ok("horse")]);
        assert_eq!(read_public(long, 10).await, Err(Unread::TooLarge));
        let broken = stream(vec![
            Ok("password="),
            Err(std::io::Error::from(std::io::ErrorKind::ConnectionReset)),
        ]);
        assert_eq!(read_public(broken, 64).await, Err(Unread::Broken));
        let endless = Body::from_stream(futures::stream::pending::<Result<&str, std::io::Error>>());
        assert_eq!(read_public(endless, 64).await, Err(Unread::TooSlow));
    }
}
