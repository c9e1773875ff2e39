//! The OpenID Connect relying party: discovery, the authorization request (code flow with
//! PKCE, `state` and `nonce`), the code exchange, and the ID token's checks (signature by one
//! of the issuer's keys, issuer, audience, expiry, nonce).
//!
//! The node reaches the provider only at the issuer's origin: discovery is read from
//! `<issuer>/.well-known/openid-configuration`, and a token or key endpoint elsewhere is
//! refused. The issuer's keys (JWKS) are read at the first sign-in and read again when a token
//! names a key id they lack (the issuer rotated its keys), at most once per
//! [`JWKS_REFETCH_INTERVAL`], so tokens with made-up key ids cannot make the node hammer the
//! provider, and at the first sign-in once they are [`JWKS_MAX_AGE`] old (a withdrawn key stops
//! verifying); sign-ins that need the keys while they are being read wait for that one read. Only asymmetric signatures are accepted: `alg: none` does not even parse, and an
//! HMAC token (which the client secret could sign) is refused.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use std::time::Duration;
use tokio::sync::OnceCell;

use super::jwks::Keys;
pub use super::jwks::{JWKS_GRACE, JWKS_MAX_AGE, JWKS_REFETCH_INTERVAL};

/// The signature algorithms accepted on ID tokens.
const ALGORITHMS: [Algorithm; 9] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// Why a sign-in failed. The text names the check, never a token or code.
#[derive(Debug, thiserror::Error)]
pub enum SignInError {
    /// The provider could not be reached or answered something unusable.
    #[error("the identity provider: {0}")]
    Provider(String),
    /// The ID token failed a check.
    #[error("the ID token was refused: {0}")]
    Token(String),
}

/// The relying party's settings (shown by `Debug` without the client secret).
#[derive(Clone)]
pub struct ClientConfig {
    /// The issuer, exactly as its tokens name it (`https://id.example.com`).
    pub issuer: String,
    /// The client id registered at the issuer.
    pub client_id: String,
    /// The client secret.
    pub client_secret: String,
    /// Where the issuer sends the browser back (`<public URL>/console/oidc/callback`).
    pub redirect_url: String,
}

impl std::fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientConfig")
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field("client_secret", &"<redacted>")
            .field("redirect_url", &self.redirect_url)
            .finish()
    }
}

/// What discovery tells.
#[derive(Debug, Clone, Deserialize)]
pub struct Metadata {
    /// The issuer the document is of.
    pub issuer: String,
    /// Where the browser is sent to sign in.
    pub authorization_endpoint: String,
    /// Where codes are exchanged.
    pub token_endpoint: String,
    /// The issuer's keys.
    pub jwks_uri: String,
    /// Where the browser is sent to sign out at the issuer, if it offers that.
    #[serde(default)]
    pub end_session_endpoint: Option<String>,
}

/// One sign-in in flight: what the browser's round trip must bring back. Never logged.
#[derive(Clone, PartialEq, Eq)]
pub struct Attempt {
    /// The `state` sent, compared with the one that comes back.
    pub state: String,
    /// The `nonce` sent, compared with the ID token's.
    pub nonce: String,
    /// The PKCE verifier; its S256 challenge was sent.
    pub verifier: String,
}

impl std::fmt::Debug for Attempt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Attempt(..)")
    }
}

/// 32 random bytes, base64url: a state, nonce, verifier or session cookie.
pub fn random_token() -> String {
    let bytes: [u8; 32] = rand::random();
    URL_SAFE_NO_PAD.encode(bytes)
}

impl Attempt {
    /// A fresh attempt.
    pub fn new() -> Self {
        Self {
            state: random_token(),
            nonce: random_token(),
            verifier: random_token(),
        }
    }

    /// The S256 challenge of the verifier.
    pub fn challenge(&self) -> String {
        URL_SAFE_NO_PAD.encode(Sha256::digest(self.verifier.as_bytes()))
    }
}

impl Default for Attempt {
    fn default() -> Self {
        Self::new()
    }
}

/// The verified claims of an ID token.
pub type Claims = serde_json::Map<String, serde_json::Value>;

/// The issuer as this node sees it.
pub struct Provider {
    config: ClientConfig,
    http: reqwest::Client,
    metadata: OnceCell<Metadata>,
    keys: Keys,
}

#[derive(Deserialize)]
struct TokenAnswer {
    id_token: Option<String>,
}

impl Provider {
    /// The provider of `config`; nothing is fetched until the first sign-in.
    pub fn new(config: ClientConfig) -> Result<Self, SignInError> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| SignInError::Provider(format!("HTTP client: {e}")))?;
        Ok(Self {
            config,
            http,
            metadata: OnceCell::new(),
            keys: Keys::new(),
        })
    }

    /// The client settings.
    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    fn origin(url: &str) -> Option<url::Origin> {
        url::Url::parse(url).ok().map(|u| u.origin())
    }

    /// The issuer's metadata, read once (a failed read is tried again at the next sign-in).
    pub async fn metadata(&self) -> Result<&Metadata, SignInError> {
        self.metadata
            .get_or_try_init(|| async {
                let url = format!(
                    "{}/.well-known/openid-configuration",
                    self.config.issuer.trim_end_matches('/')
                );
                let metadata: Metadata = self.get_json(&url).await?;
                if metadata.issuer != self.config.issuer {
                    return Err(SignInError::Provider(
                        "discovery names another issuer".into(),
                    ));
                }
                let home = Self::origin(&self.config.issuer);
                for endpoint in [&metadata.token_endpoint, &metadata.jwks_uri] {
                    if Self::origin(endpoint).is_none() || Self::origin(endpoint) != home {
                        return Err(SignInError::Provider(
                            "a token or key endpoint is outside the issuer's origin".into(),
                        ));
                    }
                }
                Ok(metadata)
            })
            .await
    }

    async fn get_json<T: serde::de::DeserializeOwned>(&self, url: &str) -> Result<T, SignInError> {
        let answer = self
            .http
            .get(url)
            .send()
            .await
            .map_err(|e| SignInError::Provider(format!("GET {url}: {}", e.without_url())))?;
        if !answer.status().is_success() {
            return Err(SignInError::Provider(format!(
                "GET {url}: status {}",
                answer.status()
            )));
        }
        super::answer::bounded_json(answer, &format!("GET {url}")).await
    }

    /// Where to send the browser to sign in for `attempt`.
    pub async fn authorization_url(&self, attempt: &Attempt) -> Result<String, SignInError> {
        let metadata = self.metadata().await?;
        let mut url = url::Url::parse(&metadata.authorization_endpoint)
            .map_err(|_| SignInError::Provider("the authorization endpoint is no URL".into()))?;
        url.query_pairs_mut()
            .append_pair("response_type", "code")
            .append_pair("client_id", &self.config.client_id)
            .append_pair("redirect_uri", &self.config.redirect_url)
            .append_pair("scope", "openid email profile")
            .append_pair("state", &attempt.state)
            .append_pair("nonce", &attempt.nonce)
            .append_pair("code_challenge", &attempt.challenge())
            .append_pair("code_challenge_method", "S256");
        Ok(url.into())
    }

    /// Where to send the browser to sign out at the issuer, if it offers that.
    pub async fn logout_url(&self, after: &str) -> Option<String> {
        let metadata = self.metadata().await.ok()?;
        let mut url = url::Url::parse(metadata.end_session_endpoint.as_deref()?).ok()?;
        url.query_pairs_mut()
            .append_pair("client_id", &self.config.client_id)
            .append_pair("post_logout_redirect_uri", after);
        Some(url.into())
    }

    /// Exchanges `code` with the verifier of `attempt` and checks the ID token that comes back.
    pub async fn exchange(&self, code: &str, attempt: &Attempt) -> Result<Claims, SignInError> {
        let metadata = self.metadata().await?;
        let answer = self
            .http
            .post(&metadata.token_endpoint)
            .basic_auth(
                form_encode(&self.config.client_id),
                Some(form_encode(&self.config.client_secret)),
            )
            .form(&[
                ("grant_type", "authorization_code"),
                ("code", code),
                ("redirect_uri", &self.config.redirect_url),
                ("code_verifier", &attempt.verifier),
            ])
            .send()
            .await
            .map_err(|e| SignInError::Provider(format!("token endpoint: {}", e.without_url())))?;
        if !answer.status().is_success() {
            return Err(SignInError::Provider(format!(
                "the token endpoint refused the code (status {})",
                answer.status()
            )));
        }
        let answer: TokenAnswer = super::answer::bounded_json(answer, "token endpoint").await?;
        let token = answer
            .id_token
            .ok_or_else(|| SignInError::Token("the token endpoint gave no ID token".into()))?;
        self.verify(&token, &attempt.nonce).await
    }

    /// Checks an ID token: a signature by one of the issuer's keys, the issuer, this client
    /// as its audience (and as its authorized party when it names one, as it must when there
    /// are several audiences), expiry and not-before (a minute's leeway), a subject, and
    /// `nonce`. An `email` the issuer does not say it verified (`email_verified` true) is left
    /// out of the claims: where a provider lets people set their own address unverified, it
    /// would otherwise give them another person's roles and name them as that person.
    pub async fn verify(&self, token: &str, nonce: &str) -> Result<Claims, SignInError> {
        let header = jsonwebtoken::decode_header(token)
            .map_err(|_| SignInError::Token("malformed, or an algorithm not accepted".into()))?;
        if !ALGORITHMS.contains(&header.alg) {
            return Err(SignInError::Token(format!(
                "algorithm {:?} is not accepted",
                header.alg
            )));
        }
        let jwk = self.key(header.kid.as_deref()).await?;
        let key = DecodingKey::from_jwk(&jwk)
            .map_err(|_| SignInError::Token("the issuer's key is unusable".into()))?;
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&self.config.issuer]);
        validation.set_audience(&[&self.config.client_id]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.validate_nbf = true;
        let data = jsonwebtoken::decode::<Claims>(token, &key, &validation)
            .map_err(|e| SignInError::Token(token_error(e.kind())))?;
        let mut claims = data.claims;
        let several = matches!(claims.get("aud"), Some(serde_json::Value::Array(a)) if a.len() > 1);
        let party = claims.get("azp");
        if (several || party.is_some())
            && party.and_then(|v| v.as_str()) != Some(&self.config.client_id)
        {
            return Err(SignInError::Token("another authorized party".into()));
        }
        let sent = nonce.as_bytes();
        let got = claims.get("nonce").and_then(|v| v.as_str()).unwrap_or("");
        if !bool::from(subtle::ConstantTimeEq::ct_eq(got.as_bytes(), sent)) {
            return Err(SignInError::Token("the nonce does not match".into()));
        }
        if claims
            .get("sub")
            .and_then(|v| v.as_str())
            .is_none_or(str::is_empty)
        {
            return Err(SignInError::Token("no subject".into()));
        }
        let verified = match claims.get("email_verified") {
            Some(serde_json::Value::Bool(verified)) => *verified,
            // Some issuers send it as a string.
            Some(serde_json::Value::String(text)) => text == "true",
            _ => false,
        };
        if !verified {
            claims.remove("email");
        }
        Ok(claims)
    }

    /// The issuer's key `kid` (the only key when the token names none and the set holds one),
    /// reading the keys again when they were read over [`JWKS_MAX_AGE`] ago, or when `kid` is
    /// unknown and the last read is old enough.
    async fn key(&self, kid: Option<&str>) -> Result<Jwk, SignInError> {
        self.keys.get(kid, async || self.read_keys().await).await
    }

    /// The issuer's signing keys as its key set says now.
    async fn read_keys(&self) -> Result<Vec<Jwk>, SignInError> {
        let metadata = self.metadata().await?;
        let set: serde_json::Value = self.get_json(&metadata.jwks_uri).await?;
        let keys: Vec<Jwk> = set
            .get("keys")
            .and_then(|k| k.as_array())
            .map(|keys| {
                keys.iter()
                    .filter_map(|k| serde_json::from_value(k.clone()).ok())
                    .collect()
            })
            .unwrap_or_default();
        if keys.is_empty() {
            return Err(SignInError::Provider(
                "the issuer's key set holds no key".into(),
            ));
        }
        Ok(keys)
    }
}

/// What failed, in words that carry nothing of the token.
fn token_error(kind: &jsonwebtoken::errors::ErrorKind) -> String {
    use jsonwebtoken::errors::ErrorKind as K;
    match kind {
        K::InvalidSignature => "the signature does not verify",
        K::ExpiredSignature => "expired",
        K::InvalidIssuer => "another issuer",
        K::InvalidAudience => "another audience",
        K::MissingRequiredClaim(_) => "a required claim is missing",
        K::ImmatureSignature => "not valid yet",
        K::InvalidAlgorithm => "the algorithm does not match the key",
        _ => "malformed",
    }
    .to_string()
}

/// The client id or secret as HTTP Basic credentials of OAuth 2.0 carry them
/// (`application/x-www-form-urlencoded` first).
fn form_encode(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_challenge_is_the_s256_of_the_verifier_and_attempts_differ() {
        let (a, b) = (Attempt::new(), Attempt::new());
        assert_ne!(a.state, b.state);
        assert_ne!(a.nonce, a.state);
        // RFC 7636 appendix B.
        let known = Attempt {
            state: String::new(),
            nonce: String::new(),
            verifier: "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk".into(),
        };
        assert_eq!(
            known.challenge(),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
        assert_eq!(format!("{a:?}"), "Attempt(..)");
    }
}
