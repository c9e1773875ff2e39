//! Certificates for tests of TLS to PostgreSQL: a throwaway CA and a server certificate it
//! signs, for `localhost` and `127.0.0.1`. [`crate::cluster::Cluster::start_tls`] serves them.

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use std::path::{Path, PathBuf};

/// A CA certificate and a server certificate and key signed by it, all PEM.
#[derive(Clone)]
pub struct TestCerts {
    /// The CA certificate: what a client must trust.
    pub ca_pem: String,
    /// The server certificate, valid for `localhost` and `127.0.0.1`.
    pub server_cert_pem: String,
    /// The server's private key (PKCS#8).
    pub server_key_pem: String,
}

impl TestCerts {
    /// A new CA and server certificate (ECDSA P-256; every call makes different keys).
    pub fn generate() -> TestCerts {
        let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "testkit throwaway CA");
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca_key = KeyPair::generate().expect("generate the CA key");
        let ca = CertifiedIssuer::self_signed(ca, ca_key).expect("self-sign the CA");

        let mut server = CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()])
            .expect("server parameters");
        server
            .distinguished_name
            .push(DnType::CommonName, "localhost");
        server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let server_key = KeyPair::generate().expect("generate the server key");
        let server_cert = server
            .signed_by(&server_key, &ca)
            .expect("sign the server certificate");
        TestCerts {
            ca_pem: ca.pem(),
            server_cert_pem: server_cert.pem(),
            server_key_pem: server_key.serialize_pem(),
        }
    }

    /// Writes the CA certificate to `dir/ca.pem` and returns its path.
    pub fn write_ca(&self, dir: &Path) -> PathBuf {
        let path = dir.join("ca.pem");
        std::fs::write(&path, &self.ca_pem).expect("write the CA certificate");
        path
    }
}
