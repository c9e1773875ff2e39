//! An issuer the test signs ID tokens for itself: discovery, its keys (which the test can
//! rotate) and a token endpoint that answers the next token the test queued, on 127.0.0.1. It
//! lets the ID-token table put exactly one thing wrong in each token; what a real provider
//! decides (PKCE, replayed codes) is tested against the real one.

use axum::Router;
use axum::extract::State;
use axum::routing::{get, post};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// A signing key: its id, the private half, and its public JWK.
pub struct Key {
    pub kid: String,
    encoding: EncodingKey,
    pub jwk: Value,
}

impl Key {
    /// A new P-256 key named `kid`.
    pub fn new(kid: &str) -> Key {
        let pair = rcgen::KeyPair::generate().expect("a P-256 key");
        let raw = pair.public_key_raw();
        assert_eq!(raw.len(), 65, "an uncompressed P-256 point");
        Key {
            kid: kid.into(),
            encoding: EncodingKey::from_ec_der(&pair.serialize_der()),
            jwk: json!({
                "kty": "EC", "crv": "P-256", "use": "sig", "alg": "ES256", "kid": kid,
                "x": URL_SAFE_NO_PAD.encode(&raw[1..33]),
                "y": URL_SAFE_NO_PAD.encode(&raw[33..]),
            }),
        }
    }

    /// `claims` signed with this key, the header naming `kid`.
    pub fn sign(&self, kid: &str, claims: &Value) -> String {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(kid.into());
        jsonwebtoken::encode(&header, claims, &self.encoding).expect("sign")
    }
}

#[derive(Default)]
struct Shared {
    keys: Mutex<Vec<Value>>,
    answers: Mutex<VecDeque<Value>>,
    jwks_reads: AtomicUsize,
    token_forms: Mutex<Vec<String>>,
}

/// The running issuer.
pub struct TestIssuer {
    pub issuer: String,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TestIssuer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn discovery(State((issuer, _)): State<(String, Arc<Shared>)>) -> axum::Json<Value> {
    axum::Json(json!({
        "issuer": issuer,
        "authorization_endpoint": format!("{issuer}/auth"),
        "token_endpoint": format!("{issuer}/token"),
        "jwks_uri": format!("{issuer}/jwks"),
        "end_session_endpoint": format!("{issuer}/logout"),
    }))
}

async fn jwks(State((_, shared)): State<(String, Arc<Shared>)>) -> axum::Json<Value> {
    shared.jwks_reads.fetch_add(1, Ordering::SeqCst);
    let keys = shared.keys.lock().expect("keys").clone();
    axum::Json(json!({ "keys": keys }))
}

async fn token(
    State((_, shared)): State<(String, Arc<Shared>)>,
    body: String,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    shared.token_forms.lock().expect("forms").push(body);
    match shared.answers.lock().expect("answers").pop_front() {
        Some(answer) => axum::Json(answer).into_response(),
        None => (
            axum::http::StatusCode::BAD_REQUEST,
            axum::Json(json!({ "error": "invalid_grant" })),
        )
            .into_response(),
    }
}

impl TestIssuer {
    /// An issuer on a free port serving `keys`.
    pub async fn start(keys: &[&Key]) -> TestIssuer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let issuer = format!("http://{}", listener.local_addr().expect("address"));
        let shared = Arc::new(Shared::default());
        *shared.keys.lock().expect("keys") = keys.iter().map(|k| k.jwk.clone()).collect();
        let app = Router::new()
            .route("/.well-known/openid-configuration", get(discovery))
            .route("/jwks", get(jwks))
            .route("/token", post(token))
            .with_state((issuer.clone(), Arc::clone(&shared)));
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.expect("serve");
        });
        TestIssuer {
            issuer,
            shared,
            task,
        }
    }

    /// Serves `keys` from now on (a key rotation).
    pub fn rotate(&self, keys: &[&Key]) {
        *self.shared.keys.lock().expect("keys") = keys.iter().map(|k| k.jwk.clone()).collect();
    }

    /// Answers the next code exchange with `id_token`.
    pub fn answer(&self, id_token: String) {
        self.shared.answers.lock().expect("answers").push_back(
            json!({ "id_token": id_token, "access_token": "a", "token_type": "Bearer" }),
        );
    }

    /// How often the keys were read.
    pub fn jwks_reads(&self) -> usize {
        self.shared.jwks_reads.load(Ordering::SeqCst)
    }

    /// The form bodies of the code exchanges so far.
    pub fn token_forms(&self) -> Vec<String> {
        self.shared.token_forms.lock().expect("forms").clone()
    }
}
