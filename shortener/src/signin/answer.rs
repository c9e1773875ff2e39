//! The identity provider's answers (discovery, keys, token answers), read up to a bound.

use super::SignInError;

/// The most bytes read of one answer of the identity provider (its discovery document, its
/// keys, a token answer): each is a few kilobytes, and a provider that sends more (or a
/// service at its address that is none) is refused instead of buffered.
const MAX_ANSWER_BYTES: usize = 1 << 20;

/// `answer`'s JSON body, read up to [`MAX_ANSWER_BYTES`] (within the client's deadline).
pub(super) async fn bounded_json<T: serde::de::DeserializeOwned>(
    mut answer: reqwest::Response,
    what: &str,
) -> Result<T, SignInError> {
    let failed = |why: String| SignInError::Provider(format!("{what}: {why}"));
    if answer
        .content_length()
        .is_some_and(|n| n > MAX_ANSWER_BYTES as u64)
    {
        return Err(failed(format!("an answer over {MAX_ANSWER_BYTES} bytes")));
    }
    let mut body = Vec::new();
    while let Some(chunk) = answer
        .chunk()
        .await
        .map_err(|e| failed(e.without_url().to_string()))?
    {
        if body.len() + chunk.len() > MAX_ANSWER_BYTES {
            return Err(failed(format!("an answer over {MAX_ANSWER_BYTES} bytes")));
        }
        body.extend_from_slice(&chunk);
    }
    serde_json::from_slice(&body).map_err(|e| failed(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signin::oidc::{ClientConfig, Provider};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// An issuer on 127.0.0.1 that answers every request with a discovery document of
    /// `padding` bytes more than a real one, with its length in `Content-Length` or (with
    /// `chunked`) unsaid; its URL.
    async fn bloated_issuer(padding: usize, chunked: bool) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let issuer = format!("http://{}", listener.local_addr().expect("addr"));
        let body = format!(
            "{{\"issuer\":\"{issuer}\",\"authorization_endpoint\":\"{issuer}/a\",\
             \"token_endpoint\":\"{issuer}/t\",\"jwks_uri\":\"{issuer}/k\",\"pad\":\"{}\"}}",
            "p".repeat(padding)
        );
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let mut request = [0u8; 4096];
                let _ = stream.read(&mut request).await;
                let head = if chunked {
                    format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                         transfer-encoding: chunked\r\n\r\n{:x}\r\n",
                        body.len()
                    )
                } else {
                    format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                         content-length: {}\r\n\r\n",
                        body.len()
                    )
                };
                let _ = stream.write_all(head.as_bytes()).await;
                let _ = stream.write_all(body.as_bytes()).await;
                if chunked {
                    let _ = stream.write_all(b"\r\n0\r\n\r\n").await;
                }
            }
        });
        issuer
    }

    fn provider(issuer: &str) -> Provider {
        Provider::new(ClientConfig {
            issuer: issuer.to_string(),
            client_id: "shortener".into(),
            client_secret: "secret".into(),
            redirect_url: "http://127.0.0.1/console/oidc/callback".into(),
        })
        .expect("provider")
    }

    /// The provider's answers are read up to a bound: a discovery document of megabytes is
    /// refused, whether its length is said or not; one of a normal size is read.
    #[tokio::test]
    async fn an_answer_past_the_bound_is_refused_not_buffered() {
        for chunked in [false, true] {
            let issuer = bloated_issuer(2 * MAX_ANSWER_BYTES, chunked).await;
            let refused = match provider(&issuer).metadata().await {
                Ok(_) => panic!("a {chunked} answer of megabytes was read"),
                Err(error) => error.to_string(),
            };
            assert!(refused.contains("bytes"), "{refused}");
            let issuer = bloated_issuer(1000, chunked).await;
            let normal = provider(&issuer);
            let metadata = normal.metadata().await.expect("a normal answer");
            assert_eq!(metadata.issuer, issuer);
        }
    }
}
