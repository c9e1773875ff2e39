//! Passwords of protected links: checked as given, stored only as an Argon2id hash (a PHC
//! string with its own salt and parameters), never shown, never logged.
//!
//! Hashing and verifying cost tens of milliseconds of CPU and 19 MiB of memory each (Argon2id's
//! recommended parameters), so both run on the blocking pool, and verifying is bounded per
//! node and rate-limited per client and code by the redirect edge.

use super::Error;
use argon2::Argon2;
use argon2::password_hash::phc::PasswordHash as Phc;
use argon2::password_hash::{PasswordHasher, PasswordVerifier};

/// The longest password accepted, in bytes.
pub const MAX_PASSWORD: usize = 256;

/// Checks a password as a create or a patch gives it: 1 to [`MAX_PASSWORD`] bytes, no control
/// characters.
pub fn check_password(password: &str) -> Result<(), Error> {
    if password.is_empty()
        || password.len() > MAX_PASSWORD
        || password.chars().any(char::is_control)
    {
        return Err(Error::invalid(
            "invalid_password",
            format!("a password is 1 to {MAX_PASSWORD} bytes without control characters"),
        ));
    }
    Ok(())
}

/// The stored hash of a link's password. Its `Debug` shows nothing of it.
#[derive(Clone, PartialEq, Eq)]
pub struct PasswordHash(String);

impl std::fmt::Debug for PasswordHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PasswordHash(<redacted>)")
    }
}

impl PasswordHash {
    /// Hashes `password` with a fresh random salt (blocking: run it off the runtime's threads).
    pub fn hash(password: &str) -> Result<Self, Error> {
        Argon2::default()
            .hash_password(password.as_bytes())
            .map(|hash| Self(hash.to_string()))
            .map_err(|e| Error::Internal(format!("hashing a password failed: {e}")))
    }

    /// A hash as the store keeps it.
    pub fn from_stored(text: String) -> Self {
        Self(text)
    }

    /// The PHC string, for the store.
    pub fn as_stored(&self) -> &str {
        &self.0
    }

    /// Whether `password` is the one hashed (blocking, constant-time in the comparison). A
    /// stored string that does not parse matches nothing.
    pub fn verify(&self, password: &str) -> bool {
        Phc::new(&self.0).is_ok_and(|phc| {
            Argon2::default()
                .verify_password(password.as_bytes(), &phc)
                .is_ok()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hash_verifies_its_password_only_and_shows_nothing() {
        let hash = PasswordHash::hash("open sesame").expect("hash");
        assert!(hash.as_stored().starts_with("$argon2id$"));
        assert!(hash.verify("open sesame"));
        assert!(!hash.verify("open sesame "));
        assert!(!hash.verify(""));
        assert_ne!(
            PasswordHash::hash("open sesame").expect("hash"),
            hash,
            "salted"
        );
        assert_eq!(format!("{hash:?}"), "PasswordHash(<redacted>)");
        assert!(!PasswordHash::from_stored("not a hash".into()).verify("x"));
        for bad in ["", "a\nb", &"x".repeat(MAX_PASSWORD + 1)] {
            assert_eq!(
                check_password(bad).expect_err(bad).code(),
                "invalid_password"
            );
        }
        check_password(&"é".repeat(MAX_PASSWORD / 2)).expect("multibyte within the bound");
    }
}
