//! TLS to PostgreSQL: the ledger on a server whose certificate comes from a throwaway CA.

use crate::helpers::{Server, lease};
use id_service::{App, Config};
use testkit::cluster::Cluster;
use testkit::tls::TestCerts;

#[tokio::test]
async fn with_sslmode_require_and_the_ca_file_leases_are_served_over_tls() {
    let certs = TestCerts::generate();
    let cluster = Cluster::start_tls(&certs, &[]).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = Config::for_tests(&format!("{}?sslmode=require", cluster.url()));
    config.database_ca_file = Some(certs.write_ca(dir.path()));

    let known: Vec<i32> = id_service::migrate::MIGRATIONS
        .iter()
        .map(|m| m.version)
        .collect();
    assert_eq!(
        id_service::migrate(&config)
            .await
            .expect("migrate over TLS"),
        known
    );
    let server = Server::start(config).await;
    let mut client = server.client().await;
    let first = lease(&mut client, "links", 100, "a").await.expect("lease");
    assert_eq!((first.start, first.end), (1, 101));

    let pooled = cluster
        .connect()
        .await
        .query(
            "SELECT s.ssl FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid) \
             WHERE a.application_name = 'id-service'",
            &[],
        )
        .await
        .expect("read pg_stat_ssl");
    assert!(!pooled.is_empty(), "no pooled connection is open");
    assert!(pooled.iter().all(|row| row.get::<_, bool>(0)));
    server.stop().await;
}

#[tokio::test]
async fn an_unusable_ca_file_is_refused_by_name_before_connecting() {
    let dir = tempfile::tempdir().expect("tempdir");
    let empty = dir.path().join("empty.pem");
    std::fs::write(&empty, "").expect("write");
    let require = "postgres://postgres@127.0.0.1:1/x?sslmode=require";
    for (url, file) in [
        (require, dir.path().join("missing.pem")),
        (require, empty),
        // A valid CA file, but DATABASE_URL does not say sslmode=require.
        (
            "postgres://postgres@127.0.0.1:1/x",
            TestCerts::generate().write_ca(dir.path()),
        ),
    ] {
        let mut config = Config::for_tests(url);
        config.database_ca_file = Some(file.clone());
        let error = match App::build(config).await {
            Ok(_) => panic!("{url} with {} was accepted", file.display()),
            Err(error) => format!("{error:#}"),
        };
        assert!(
            error.contains("ID_SERVICE_DATABASE_CA_FILE") && !error.contains("connect to postgres"),
            "{error}"
        );
    }
}
