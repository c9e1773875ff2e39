//! Starting real shortener nodes for tests: embedded (SQLite in a temp dir) or distributed
//! (PostgreSQL test database + an in-process id-service on port 0).

#![allow(dead_code)]

use reqwest::StatusCode;
use serde_json::{Value, json};
use shortener::{App, Config};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use testkit::TestDb;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The API key every test node accepts.
pub const API_KEY: &str = "test-key-0123456789abcdef";
/// A code-space key shared by the nodes of one test.
pub const CODE_KEY: &str = "5f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0";

/// Which store a node runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// Embedded SQLite with the in-process lease ledger.
    Sqlite,
    /// PostgreSQL with the id-service.
    Postgres,
}

/// The shared back end of one test: a temp dir, and for PostgreSQL a database and id-service.
pub struct Cluster {
    pub backend: Backend,
    pub dir: tempfile::TempDir,
    pub db: Option<TestDb>,
    id_service: Option<(String, CancellationToken, JoinHandle<()>)>,
}

impl Cluster {
    pub async fn new(backend: Backend) -> Cluster {
        let dir = tempfile::tempdir().expect("tempdir");
        let (db, id_service) = match backend {
            Backend::Sqlite => (None, None),
            Backend::Postgres => {
                let db = TestDb::create().await;
                let app = id_service::App::build(id_service::Config::for_tests(db.url()))
                    .await
                    .expect("build id-service");
                let addr = format!("http://{}", app.grpc_addr());
                let token = CancellationToken::new();
                let task = tokio::spawn({
                    let token = token.clone();
                    async move {
                        app.run(token).await.expect("id-service run");
                    }
                });
                (Some(db), Some((addr, token, task)))
            }
        };
        Cluster {
            backend,
            dir,
            db,
            id_service,
        }
    }

    /// A node configuration for this cluster, with its own data directory `name`.
    pub fn config(&self, name: &str) -> Config {
        let mut config = Config::for_tests(self.dir.path().join(name), API_KEY);
        config.key = Some(CODE_KEY.to_string());
        if let (Some(db), Some((addr, _, _))) = (&self.db, &self.id_service) {
            config.database_url = Some(db.url().to_string());
            config.id_service = vec![addr.clone()];
        }
        config.holder = Some(name.to_string());
        config
    }

    pub async fn node(&self, name: &str) -> Node {
        Node::start(self.config(name)).await
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Some((_, token, task)) = self.id_service.take() {
            token.cancel();
            task.abort();
        }
    }
}

/// A running node and an HTTP client for it.
pub struct Node {
    pub base: String,
    pub admin: String,
    pub grpc: String,
    pub service: Arc<shortener::service::LinkService>,
    pub client: reqwest::Client,
    shutdown: CancellationToken,
    task: Option<JoinHandle<anyhow::Result<()>>>,
    pub data_dir: PathBuf,
}

impl Node {
    pub async fn start(config: Config) -> Node {
        let data_dir = config.data_dir.clone();
        let app = App::build(config).await.expect("build node");
        let base = format!("http://{}", app.http_addr());
        let admin = format!("http://{}", app.admin_addr());
        let grpc = format!("http://{}", app.grpc_addr());
        let service = app.service();
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(app.run(shutdown.clone()));
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(10))
            .build()
            .expect("client");
        let node = Node {
            base,
            admin,
            grpc,
            service,
            client,
            shutdown,
            task: Some(task),
            data_dir,
        };
        let ready = testkit::wait_until(Duration::from_secs(10), || async {
            matches!(node.client.get(format!("{}/readyz", node.admin)).send().await, Ok(r) if r.status() == 200)
        })
        .await;
        assert!(ready, "node at {} never became ready", node.base);
        node
    }

    /// Starts the shutdown (as SIGTERM does) without waiting for it.
    pub fn begin_shutdown(&self) {
        self.shutdown.cancel();
    }

    /// Stops the node and waits for it to drain.
    pub async fn stop(mut self) {
        self.shutdown.cancel();
        if let Some(task) = self.task.take() {
            task.await.expect("join").expect("run");
        }
    }

    /// `POST /api/v1/links` with `body`; returns status and JSON.
    pub async fn create(&self, body: Value) -> (StatusCode, Value) {
        self.create_with(body, &[]).await
    }

    /// `POST /api/v1/links` with extra headers.
    pub async fn create_with(&self, body: Value, headers: &[(&str, &str)]) -> (StatusCode, Value) {
        let mut request = self
            .client
            .post(format!("{}/api/v1/links", self.base))
            .bearer_auth(API_KEY)
            .json(&body);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.send().await.expect("send create");
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// Creates a link for `url` and returns its code.
    pub async fn create_url(&self, url: &str) -> String {
        let (status, body) = self.create(json!({ "url": url })).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        body["code"].as_str().expect("code").to_string()
    }

    /// Like [`Node::create_url`], taking the URL by value (handy with `join_all`).
    pub async fn create_url_owned(&self, url: String) -> String {
        self.create_url(&url).await
    }

    /// `GET /{code}` without following redirects.
    pub async fn visit(&self, code: &str) -> reqwest::Response {
        self.client
            .get(format!("{}/{code}", self.base))
            .send()
            .await
            .expect("send visit")
    }

    /// `GET /api/v1/links/{code}`.
    pub async fn get(&self, code: &str) -> (StatusCode, Value) {
        let response = self
            .client
            .get(format!("{}/api/v1/links/{code}", self.base))
            .bearer_auth(API_KEY)
            .send()
            .await
            .expect("send get");
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// `DELETE /api/v1/links/{code}`.
    pub async fn delete(&self, code: &str) -> StatusCode {
        self.client
            .delete(format!("{}/api/v1/links/{code}", self.base))
            .bearer_auth(API_KEY)
            .send()
            .await
            .expect("send delete")
            .status()
    }

    /// A gRPC client for the `Links` service.
    pub async fn links_client(
        &self,
    ) -> proto::shortener::v1::links_client::LinksClient<tonic::transport::Channel> {
        proto::shortener::v1::links_client::LinksClient::connect(self.grpc.clone())
            .await
            .expect("connect gRPC")
    }

    /// The `/metrics` text.
    pub async fn metrics(&self) -> String {
        self.client
            .get(format!("{}/metrics", self.admin))
            .send()
            .await
            .expect("metrics")
            .text()
            .await
            .expect("text")
    }

    /// How many links the store holds.
    pub async fn stored_links(&self) -> u64 {
        self.service
            .store()
            .count_links()
            .await
            .expect("count links")
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// Runs an async test body once per backend, as two `#[tokio::test]`s.
#[macro_export]
macro_rules! on_both_stores {
    ($name:ident) => {
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                super::$name($crate::common::Backend::Sqlite).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                super::$name($crate::common::Backend::Postgres).await
            }
        }
    };
}
