//! Connections to a real PostgreSQL serving TLS with a certificate from a throwaway CA, in each
//! sslmode; `pg_stat_ssl` tells whether the session is encrypted.

use std::path::Path;
use testkit::cluster::Cluster;
use testkit::tls::TestCerts;

/// The error and its causes, which is where tokio-postgres puts the reason.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        text.push_str(&format!(": {e}"));
        cause = e.source();
    }
    text
}

/// Connects to `url` through `pgtls` and reports whether the session is encrypted.
async fn encrypted(url: &str, ca_file: Option<&Path>) -> Result<bool, String> {
    let config: tokio_postgres::Config = url.parse().map_err(|e| format!("{e}"))?;
    let tls = pgtls::connector(&config, ca_file).map_err(|e| e.to_string())?;
    let (client, connection) = config.connect(tls).await.map_err(|e| chain(&e))?;
    tokio::spawn(connection);
    let row = client
        .query_one(
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            &[],
        )
        .await
        .map_err(|e| e.to_string())?;
    Ok(row.get(0))
}

#[tokio::test]
async fn each_sslmode_connects_as_documented_to_a_server_with_tls() {
    let certs = TestCerts::generate();
    let cluster = Cluster::start_tls(&certs, &[]).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = certs.write_ca(dir.path());
    let url = |mode: &str| format!("{}?sslmode={mode}", cluster.url());

    assert_eq!(encrypted(&url("disable"), None).await, Ok(false));
    // prefer encrypts without verifying, as libpq does: the CA is unknown here.
    assert_eq!(encrypted(&cluster.url(), None).await, Ok(true));
    assert_eq!(encrypted(&url("prefer"), None).await, Ok(true));
    assert_eq!(encrypted(&url("require"), Some(&ca)).await, Ok(true));
    // The certificate names localhost too.
    let by_name = url("require").replace("127.0.0.1", "localhost");
    assert_eq!(encrypted(&by_name, Some(&ca)).await, Ok(true));

    // The name checked is the host of the connection string, not the address connected to.
    let wrong_name = format!(
        "host=db.example.invalid hostaddr=127.0.0.1 port={} user=postgres sslmode=require",
        cluster.port()
    );
    let err = encrypted(&wrong_name, Some(&ca))
        .await
        .expect_err("a certificate for another name");
    assert!(
        err.contains("certificate not valid for name \"db.example.invalid\""),
        "{err}"
    );

    let untrusted = encrypted(&url("require"), None)
        .await
        .expect_err("a certificate from an unknown CA");
    assert!(untrusted.contains("UnknownIssuer"), "{untrusted}");
    let elsewhere = tempfile::tempdir().expect("tempdir");
    let other_ca = TestCerts::generate().write_ca(elsewhere.path());
    let wrong = encrypted(&url("require"), Some(&other_ca))
        .await
        .expect_err("a CA file of another CA");
    // Both CAs have the same name: the chain is found, and its signature does not match.
    assert!(wrong.contains("invalid peer certificate"), "{wrong}");
}

#[tokio::test]
async fn require_fails_and_prefer_falls_back_when_the_server_has_no_tls() {
    let cluster = Cluster::start(&["ssl = off"]).await;
    assert_eq!(encrypted(&cluster.url(), None).await, Ok(false));
    let err = encrypted(&format!("{}?sslmode=require", cluster.url()), None)
        .await
        .expect_err("TLS is required");
    assert!(err.contains("does not support TLS"), "{err}");
}
