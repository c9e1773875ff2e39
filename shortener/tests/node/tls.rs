//! TLS to PostgreSQL: a node and its id-service on a server whose certificate comes from a
//! throwaway CA, with `sslmode=require` in DATABASE_URL.

use crate::helpers::{CODE_KEY, Node};
use reqwest::StatusCode;
use shortener::{App, Config};
use std::path::Path;
use std::time::Duration;
use testkit::cluster::Cluster as PgCluster;
use testkit::tls::TestCerts;
use tokio_util::sync::CancellationToken;

/// A node configuration for `database_url`, leasing from `id_service`.
fn node_config(dir: &Path, database_url: &str, ca_file: Option<&Path>, id_service: &str) -> Config {
    let mut config = Config::for_tests(dir.join("node"), crate::helpers::API_KEY);
    config.ids.key = Some(CODE_KEY.to_string());
    config.store.database_url = Some(database_url.to_string());
    config.store.database_ca_file = ca_file.map(Path::to_path_buf);
    config.ids.id_service = vec![id_service.to_string()];
    config
}

/// `(ssl, application_name)` of every session on database `name`, seen from a plaintext admin
/// session.
async fn sessions(cluster: &PgCluster, name: &str) -> Vec<(bool, String)> {
    cluster
        .connect()
        .await
        .query(
            "SELECT s.ssl, a.application_name FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid) \
             WHERE a.datname = $1",
            &[&name],
        )
        .await
        .expect("read pg_stat_ssl")
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_sslmode_require_and_the_ca_file_links_are_created_and_redirected_over_tls() {
    let certs = TestCerts::generate();
    let cluster = PgCluster::start_tls(&certs, &[]).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = certs.write_ca(dir.path());
    let url = format!("{}?sslmode=require", cluster.create_database("links").await);

    let mut id_config = id_service::Config::for_tests(&url);
    id_config.database_ca_file = Some(ca.clone());
    let id_app = id_service::App::build(id_config)
        .await
        .expect("build id-service over TLS");
    let id_addr = format!("http://{}", id_app.grpc_addr());
    let id_stop = CancellationToken::new();
    let id_task = tokio::spawn(id_app.run(id_stop.clone()));

    let node = Node::start(node_config(dir.path(), &url, Some(&ca), &id_addr)).await;
    let code = node.create_url("https://example.com/over-tls").await;
    let response = node.visit(&code).await;
    assert_eq!(response.status(), StatusCode::FOUND);
    assert_eq!(
        response.headers()["location"],
        "https://example.com/over-tls"
    );

    // Pool connections of both services and the node's change listener, all encrypted.
    let listening = testkit::wait_until(Duration::from_secs(10), || async {
        sessions(&cluster, "links")
            .await
            .iter()
            .any(|(_, name)| name == "shortener-change-feed")
    })
    .await;
    assert!(listening, "the change listener never connected");
    let seen = sessions(&cluster, "links").await;
    assert!(
        seen.len() >= 3 && seen.iter().all(|(ssl, _)| *ssl),
        "{seen:?}"
    );

    node.stop().await;
    id_stop.cancel();
    id_task.await.expect("join").expect("id-service run");
}

#[tokio::test]
async fn with_sslmode_require_an_untrusted_certificate_fails_start_up() {
    let certs = TestCerts::generate();
    let cluster = PgCluster::start_tls(&certs, &[]).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("{}?sslmode=require", cluster.url());

    let config = node_config(dir.path(), &url, None, "http://127.0.0.1:1");
    let error = match App::build(config).await {
        Ok(_) => panic!("a node trusted a certificate from an unknown CA"),
        Err(error) => format!("{error:#}"),
    };
    assert!(
        error.contains("invalid peer certificate") && error.contains("UnknownIssuer"),
        "{error}"
    );

    let error = match id_service::App::build(id_service::Config::for_tests(&url)).await {
        Ok(_) => panic!("the id-service trusted a certificate from an unknown CA"),
        Err(error) => format!("{error:#}"),
    };
    assert!(
        error.contains("invalid peer certificate") && error.contains("UnknownIssuer"),
        "{error}"
    );
}
