//! The TLS connector for PostgreSQL connections, chosen by the connection string's `sslmode`.
//!
//! Both services parse `DATABASE_URL` into a [`tokio_postgres::Config`] and hand it, with the
//! optional CA file setting, to [`connector`]; the [`MakeRustlsConnect`] it returns goes to
//! `tokio_postgres::connect` or to deadpool's `Manager::from_config`, and tokio-postgres decides
//! per connection whether to start TLS:
//!
//! - `disable`: plaintext. tokio-postgres never starts TLS in this mode (and should it ever
//!   try, this connector refuses every certificate).
//! - `prefer` (the default): TLS if the server offers it, plaintext if it does not. As with
//!   libpq's `prefer`, the certificate is not verified: this keeps passive eavesdroppers out but
//!   not an active attacker, and it keeps working against servers with a self-signed
//!   certificate (Debian's default "snakeoil" one, for example).
//! - `require`: TLS or no connection, and the server's certificate must chain to a trusted root
//!   (the system store plus the CA file, if given) and name the host of the connection string,
//!   as with libpq's `verify-full`.
//!
//! A CA file is accepted only with `require`: with the other modes nothing would be verified
//! against it, and a setting that is silently ignored suggests a protection that is not there.
//!
//! Cryptography is rustls on the `ring` provider, which builds without a C toolchain or cmake.
//!
//! Besides TLS: [`evict`] keeps pooled connections a failover left unusable from being reused,
//! and [`pooler`] says what a service does differently behind a pooler in transaction mode.

pub mod evict;
pub mod pooler;
mod unverified;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use rustls::{ClientConfig, RootCertStore};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio_postgres::config::SslMode;
use unverified::Unverified;

pub use tokio_postgres_rustls::MakeRustlsConnect;

/// Why no connector could be built. The messages name the file but not the setting: callers
/// add the name of their own setting (`SHORTENER_DATABASE_CA_FILE`, ...).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The CA file could not be read.
    #[error("read CA file {}: {error}", path.display())]
    ReadCaFile {
        /// The file.
        path: PathBuf,
        /// Why it could not be read.
        error: std::io::Error,
    },
    /// The CA file holds a malformed PEM section or a certificate unusable as a trust anchor.
    #[error("CA file {}: {reason}", path.display())]
    InvalidCaFile {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The CA file holds no certificate at all.
    #[error("CA file {} holds no PEM certificate (-----BEGIN CERTIFICATE-----)", path.display())]
    NoCertificate {
        /// The file.
        path: PathBuf,
    },
    /// A CA file was given with an sslmode that verifies no certificate.
    #[error(
        "a CA file is used only with sslmode=require, and the connection string has sslmode={0}"
    )]
    CaFileNeedsRequire(&'static str),
    /// `sslmode=require`, but there is no root certificate to verify the server against.
    #[error(
        "sslmode=require needs trusted root certificates: the system store has none and no CA file is given"
    )]
    NoTrustedRoots,
    /// The connection string asks for an sslmode this crate does not know.
    #[error("unsupported sslmode {0}")]
    UnsupportedSslMode(String),
    /// rustls refused the configuration.
    #[error("configure TLS: {0}")]
    Tls(#[from] rustls::Error),
}

/// The connector for connections made with `config`, following its `sslmode` (see the crate
/// documentation). `ca_file` is a PEM bundle of extra trusted roots; it is read here, so an
/// unreadable or empty file is reported now rather than at the first connection.
///
/// `require` also loads the system's root certificates; a system store that cannot be read
/// only counts as empty, and is logged.
pub fn connector(
    config: &tokio_postgres::Config,
    ca_file: Option<&Path>,
) -> Result<MakeRustlsConnect, Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()?;
    let mode = config.get_ssl_mode();
    let mut tls = match mode {
        SslMode::Require => builder
            .with_root_certificates(trusted_roots(ca_file)?)
            .with_no_client_auth(),
        SslMode::Prefer | SslMode::Disable => {
            if ca_file.is_some() {
                let name = if mode == SslMode::Prefer {
                    "prefer"
                } else {
                    "disable"
                };
                return Err(Error::CaFileNeedsRequire(name));
            }
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(Unverified {
                    provider,
                    accept: mode == SslMode::Prefer,
                }))
                .with_no_client_auth()
        }
        other => return Err(Error::UnsupportedSslMode(format!("{other:?}"))),
    };
    // PostgreSQL 17 checks the protocol name when it is sent, and requires it with
    // `sslnegotiation=direct`; older servers ignore it.
    tls.alpn_protocols = vec![b"postgresql".to_vec()];
    Ok(MakeRustlsConnect::new(tls))
}

/// Reads a PEM bundle of CA certificates. Sections other than certificates (a key, say) are
/// skipped; the file must hold at least one certificate, and every certificate must be usable as
/// a trust anchor.
pub fn load_ca_file(path: &Path) -> Result<RootCertStore, Error> {
    let pem = std::fs::read(path).map_err(|error| Error::ReadCaFile {
        path: path.to_path_buf(),
        error,
    })?;
    let invalid = |reason: String| Error::InvalidCaFile {
        path: path.to_path_buf(),
        reason,
    };
    let mut roots = RootCertStore::empty();
    for certificate in CertificateDer::pem_slice_iter(&pem) {
        let certificate = certificate.map_err(|e| invalid(format!("malformed PEM: {e}")))?;
        roots
            .add(certificate)
            .map_err(|e| invalid(format!("not a usable CA certificate: {e}")))?;
    }
    if roots.is_empty() {
        return Err(Error::NoCertificate {
            path: path.to_path_buf(),
        });
    }
    Ok(roots)
}

/// The CA file's certificates plus the system's.
fn trusted_roots(ca_file: Option<&Path>) -> Result<RootCertStore, Error> {
    let mut roots = match ca_file {
        Some(path) => load_ca_file(path)?,
        None => RootCertStore::empty(),
    };
    let system = rustls_native_certs::load_native_certs();
    for error in &system.errors {
        tracing::warn!(%error, "could not read part of the system certificate store");
    }
    let (_, ignored) = roots.add_parsable_certificates(system.certs);
    if ignored > 0 {
        tracing::debug!(ignored, "skipped unparsable system root certificates");
    }
    if roots.is_empty() {
        return Err(Error::NoTrustedRoots);
    }
    Ok(roots)
}

#[cfg(test)]
mod tests {
    use super::*;
    use testkit::tls::TestCerts;

    fn pg(url: &str) -> tokio_postgres::Config {
        url.parse().expect("a valid connection string")
    }

    fn refused(url: &str, ca_file: Option<&Path>) -> Error {
        match connector(&pg(url), ca_file) {
            Ok(_) => panic!("{url} with {ca_file:?} was accepted"),
            Err(error) => error,
        }
    }

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).expect("write test file");
        path
    }

    #[test]
    fn a_missing_ca_file_is_an_error_naming_the_file() {
        let err = load_ca_file(Path::new("/nonexistent/ca.pem")).expect_err("missing file");
        assert!(matches!(err, Error::ReadCaFile { .. }), "{err:?}");
        assert!(err.to_string().contains("/nonexistent/ca.pem"), "{err}");
    }

    #[test]
    fn a_ca_file_without_certificates_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let certs = TestCerts::generate();
        for (name, text) in [
            ("empty.pem", String::new()),
            ("text.pem", "not a certificate\n".to_string()),
            ("key.pem", certs.server_key_pem.clone()),
        ] {
            let err = load_ca_file(&write(dir.path(), name, &text)).expect_err(name);
            assert!(
                matches!(err, Error::NoCertificate { .. }),
                "{name}: {err:?}"
            );
            assert!(err.to_string().contains(name), "{err}");
        }
    }

    #[test]
    fn a_malformed_certificate_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let bad_base64 = "-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n";
        let not_x509 = "-----BEGIN CERTIFICATE-----\naGVsbG8=\n-----END CERTIFICATE-----\n";
        for (name, text) in [("base64.pem", bad_base64), ("der.pem", not_x509)] {
            let err = load_ca_file(&write(dir.path(), name, text)).expect_err(name);
            assert!(
                matches!(err, Error::InvalidCaFile { .. }),
                "{name}: {err:?}"
            );
        }
    }

    #[test]
    fn a_bundle_yields_every_certificate_and_skips_other_sections() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (one, two) = (TestCerts::generate(), TestCerts::generate());
        let bundle = format!(
            "# two CAs\n{}{}{}",
            one.ca_pem, one.server_key_pem, two.ca_pem
        );
        let roots = load_ca_file(&write(dir.path(), "bundle.pem", &bundle)).expect("bundle");
        assert_eq!(roots.len(), 2);
    }

    #[test]
    fn disable_and_prefer_need_no_roots() {
        for url in [
            "postgres://h/db?sslmode=disable",
            "postgres://h/db?sslmode=prefer",
            "postgres://h/db",
        ] {
            connector(&pg(url), None).unwrap_or_else(|e| panic!("{url}: {e}"));
        }
    }

    #[test]
    fn a_ca_file_is_refused_unless_sslmode_is_require() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ca = write(dir.path(), "ca.pem", &TestCerts::generate().ca_pem);
        for (url, mode) in [
            ("postgres://h/db?sslmode=disable", "disable"),
            ("postgres://h/db", "prefer"),
        ] {
            let err = refused(url, Some(&ca));
            assert!(
                err.to_string().contains(&format!("sslmode={mode}")),
                "{err}"
            );
        }
        connector(&pg("postgres://h/db?sslmode=require"), Some(&ca)).expect("require with a CA");
    }

    #[test]
    fn require_reports_a_bad_ca_file() {
        let err = refused(
            "postgres://h/db?sslmode=require",
            Some(Path::new("/nonexistent/ca.pem")),
        );
        assert!(matches!(err, Error::ReadCaFile { .. }), "{err:?}");
    }
}
