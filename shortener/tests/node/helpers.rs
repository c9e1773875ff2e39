//! Starting real shortener nodes for tests: embedded (SQLite in a temp dir) or distributed
//! (PostgreSQL test database + an in-process id-service on port 0), and talking to them.

use proto::shortener::v1 as pb;
use reqwest::StatusCode;
use serde_json::{Value, json};
use shortener::store::LinkStore;
use shortener::{App, Config};
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

/// What the nodes of one test run on: a temp dir, and for PostgreSQL a database and an
/// id-service.
pub struct Stack {
    pub dir: tempfile::TempDir,
    pub db: Option<TestDb>,
    /// The PostgreSQL database the nodes use (that of `db`, or one the test made elsewhere).
    db_url: Option<String>,
    id_service: Option<(String, CancellationToken, JoinHandle<()>)>,
}

impl Stack {
    /// A fresh stack for `backend`.
    pub async fn new(backend: Backend) -> Stack {
        let dir = tempfile::tempdir().expect("tempdir");
        let (db, id_service) = match backend {
            Backend::Sqlite => (None, None),
            Backend::Postgres => {
                let db = TestDb::create().await;
                let id_service = start_id_service(db.url()).await;
                (Some(db), Some(id_service))
            }
        };
        Stack {
            dir,
            db_url: db.as_ref().map(|db| db.url().to_string()),
            db,
            id_service,
        }
    }

    /// A PostgreSQL stack on a database the test made itself (on a cluster of its own).
    pub async fn on_database(url: &str) -> Stack {
        Stack {
            dir: tempfile::tempdir().expect("tempdir"),
            db: None,
            db_url: Some(url.to_string()),
            id_service: Some(start_id_service(url).await),
        }
    }

    /// What a node process started outside the test needs to join this stack: its database
    /// and id-service, as environment variables (nothing for an embedded stack).
    pub fn env(&self) -> Vec<(&'static str, String)> {
        match (&self.db_url, &self.id_service) {
            (Some(url), Some((addr, _, _))) => vec![
                ("DATABASE_URL", url.clone()),
                ("SHORTENER_ID_SERVICE", addr.clone()),
            ],
            _ => Vec::new(),
        }
    }

    /// A node configuration for this stack, with its own data directory `name`.
    pub fn config(&self, name: &str) -> Config {
        let mut config = Config::for_tests(self.dir.path().join(name), API_KEY);
        config.ids.key = Some(CODE_KEY.to_string());
        if let (Some(url), Some((addr, _, _))) = (&self.db_url, &self.id_service) {
            config.store.database_url = Some(url.clone());
            config.ids.id_service = vec![addr.clone()];
        }
        config.ids.holder = Some(name.to_string());
        config
    }

    /// A node on this stack, started and ready.
    pub async fn node(&self, name: &str) -> Node {
        Node::start(self.config(name)).await
    }
}

/// An in-process id-service on `url`, on a free port.
async fn start_id_service(url: &str) -> (String, CancellationToken, JoinHandle<()>) {
    let app = id_service::App::build(id_service::Config::for_tests(url))
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
    (addr, token, task)
}

impl Drop for Stack {
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
    /// The node's parts (store, ID pool, code space, counters), read directly by tests.
    pub app: Arc<shortener::app::Node>,
    pub client: reqwest::Client,
    shutdown: CancellationToken,
    task: Option<JoinHandle<anyhow::Result<()>>>,
}

impl Node {
    /// Starts a node for `config` and waits until it is ready.
    pub async fn start(config: Config) -> Node {
        let app = App::build(config).await.expect("build node");
        let base = format!("http://{}", app.http_addr());
        let admin = format!(
            "http://{}",
            app.admin_addr().expect("the admin listener is on")
        );
        let grpc = format!(
            "http://{}",
            app.grpc_addr().expect("the gRPC listener is on")
        );
        let parts = app.node();
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
            app: parts,
            client,
            shutdown,
            task: Some(task),
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
        self.create_with_key_and(body, API_KEY, headers).await
    }

    /// `POST /api/v1/links` with API key `key`.
    pub async fn create_with_key(&self, body: Value, key: &str) -> (StatusCode, Value) {
        self.create_with_key_and(body, key, &[]).await
    }

    /// `POST /api/v1/links` with API key `key` and extra headers.
    pub async fn create_with_key_and(
        &self,
        body: Value,
        key: &str,
        headers: &[(&str, &str)],
    ) -> (StatusCode, Value) {
        let mut request = self
            .client
            .post(format!("{}/api/v1/links", self.base))
            .bearer_auth(key)
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

    /// A browser's `GET /{code}` (a human visit): the status and the `Location`, if any.
    pub async fn location(&self, code: &str) -> (StatusCode, Option<String>) {
        let request = self.client.get(format!("{}/{code}", self.base));
        status_and_location(request.header("user-agent", BROWSER)).await
    }

    /// `GET /{path}` with `Host: host` (a branded domain's, or any other): the status and the
    /// `Location`, if any.
    pub async fn on_host(&self, host: &str, path: &str) -> (StatusCode, Option<String>) {
        let request = self.client.get(format!("{}/{path}", self.base));
        status_and_location(request.header("host", host)).await
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

    /// A request to the API path `path` (under `/api/v1`) with the test key.
    pub fn api(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.client
            .request(method, format!("{}/api/v1{path}", self.base))
            .bearer_auth(API_KEY)
    }

    /// `GET /api/v1/links?{query}` with `key`; status and JSON.
    pub async fn list_with_key(&self, query: &str, key: &str) -> (StatusCode, Value) {
        let response = self
            .client
            .get(format!("{}/api/v1/links?{query}", self.base))
            .bearer_auth(key)
            .send()
            .await
            .expect("send list");
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// `GET /api/v1/links?{query}`; status and JSON.
    pub async fn list(&self, query: &str) -> (StatusCode, Value) {
        self.list_with_key(query, API_KEY).await
    }

    /// Every code of a list, page by page (`limit` per page), in order.
    pub async fn list_all(&self, query: &str, limit: usize) -> Vec<String> {
        let mut codes = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut q = format!("{query}&limit={limit}");
            if let Some(c) = &cursor {
                q.push_str(&format!("&cursor={c}"));
            }
            let (status, page) = self.list(&q).await;
            assert_eq!(status, StatusCode::OK, "{q}: {page}");
            for link in page["links"].as_array().expect("links") {
                codes.push(link["code"].as_str().expect("code").to_string());
            }
            match page["next_cursor"].as_str() {
                Some(next) => cursor = Some(next.to_string()),
                None => return codes,
            }
        }
    }

    /// `PATCH /api/v1/links/{code}` with `body` (a JSON merge patch); status and JSON.
    pub async fn patch(&self, code: &str, body: Value) -> (StatusCode, Value) {
        let response = self
            .api(reqwest::Method::PATCH, &format!("/links/{code}"))
            .header("content-type", "application/merge-patch+json")
            .body(body.to_string())
            .send()
            .await
            .expect("send patch");
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// The events of `GET /api/v1/links/{code}/history`.
    pub async fn history(&self, code: &str) -> (StatusCode, Value) {
        let response = self
            .api(reqwest::Method::GET, &format!("/links/{code}/history"))
            .send()
            .await
            .expect("send history");
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// `POST /api/v1/links/import?{query}` of `body` as `content_type` with `key`: the status
    /// and the answer's lines (or, refused, its one JSON error).
    pub async fn import_with_key(
        &self,
        content_type: &str,
        body: impl Into<reqwest::Body>,
        query: &str,
        key: &str,
    ) -> (StatusCode, Vec<Value>) {
        let response = self
            .client
            .post(format!("{}/api/v1/links/import?{query}", self.base))
            .bearer_auth(key)
            .header("content-type", content_type)
            .timeout(Duration::from_secs(120))
            .body(body)
            .send()
            .await
            .expect("send import");
        let status = response.status();
        let text = response.text().await.expect("answer");
        let lines = text
            .lines()
            .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
            .collect();
        (status, lines)
    }

    /// [`Node::import_with_key`] with the test key.
    pub async fn import(
        &self,
        content_type: &str,
        body: impl Into<reqwest::Body>,
        query: &str,
    ) -> (StatusCode, Vec<Value>) {
        self.import_with_key(content_type, body, query, API_KEY)
            .await
    }

    /// `GET /api/v1/links/export?{query}`: status and body.
    pub async fn export(&self, query: &str) -> (StatusCode, String) {
        let response = self
            .api(reqwest::Method::GET, &format!("/links/export?{query}"))
            .send()
            .await
            .expect("send export");
        let status = response.status();
        (status, response.text().await.expect("export body"))
    }

    /// A gRPC client for the `Links` service.
    pub async fn links_client(
        &self,
    ) -> proto::shortener::v1::links_client::LinksClient<tonic::transport::Channel> {
        proto::shortener::v1::links_client::LinksClient::connect(self.grpc.clone())
            .await
            .expect("connect gRPC")
    }

    /// A gRPC health client on the node's gRPC port.
    pub async fn health_client(
        &self,
    ) -> tonic_health::pb::health_client::HealthClient<tonic::transport::Channel> {
        let channel = tonic::transport::Channel::from_shared(self.grpc.clone())
            .expect("uri")
            .connect()
            .await
            .expect("connect gRPC");
        tonic_health::pb::health_client::HealthClient::new(channel)
    }

    /// Runs the rollup maintenance now, on the node's analytics clock (compaction,
    /// retention, the hourly webhook events).
    pub async fn maintain_rollups(&self) -> shortener::store::RollupOutcome {
        self.app
            .visits
            .analytics()
            .maintain(&self.app.store)
            .await
            .expect("maintain")
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
        self.app.store.count_links().await.expect("count links")
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl Node {
    /// The number of cache hits the node has counted.
    pub fn cache_hits(&self) -> u64 {
        self.app
            .resolver
            .counters()
            .cache_hits
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Cache hits and misses together: how many lookups reached the cache at all.
    pub fn lookups_seen(&self) -> u64 {
        self.cache_hits()
            + self
                .app
                .resolver
                .counters()
                .cache_misses
                .load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// A user agent of a person's browser.
pub const BROWSER: &str = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36";

/// `message` with the test API key in its metadata.
pub fn authed<T>(message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.metadata_mut().insert(
        "authorization",
        format!("Bearer {API_KEY}").parse().expect("ascii"),
    );
    request
}

/// A gRPC create of `url` with no options.
pub fn create(url: &str) -> pb::CreateLinkRequest {
    pb::CreateLinkRequest {
        url: url.to_string(),
        ..Default::default()
    }
}

/// Runs an async test body once per backend, as two `#[tokio::test]`s.
#[macro_export]
macro_rules! on_both_stores {
    ($name:ident) => {
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                super::$name($crate::helpers::Backend::Sqlite).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                super::$name($crate::helpers::Backend::Postgres).await
            }
        }
    };
}

/// Polls `check` every 50 ms until it holds; panics naming `what` if it does not within
/// `within`.
pub async fn wait_for(what: &str, within: Duration, mut check: impl AsyncFnMut() -> bool) {
    let until = std::time::Instant::now() + within;
    while std::time::Instant::now() < until {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{what} within {within:?}");
}

/// A proxy the test controls in front of `stack`'s database, and the database's URL through
/// it (in plain text when `plain`, so that the proxy can read what passes).
pub async fn proxied_database(stack: &Stack, plain: bool) -> (String, testkit::proxy::Proxy) {
    let mut url = url::Url::parse(stack.db.as_ref().expect("a database").url()).expect("url");
    let target = format!(
        "{}:{}",
        url.host_str().expect("host"),
        url.port().unwrap_or(5432)
    );
    let proxy = testkit::proxy::Proxy::start(target.parse().expect("address"))
        .await
        .expect("proxy");
    url.set_port(Some(proxy.addr().port())).expect("port");
    if plain {
        url.query_pairs_mut().append_pair("sslmode", "disable");
    }
    (url.to_string(), proxy)
}

/// The number in the metric line `name value` of a `/metrics` text (`name` may carry labels).
pub fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|v| v.trim().parse().ok()))
        .unwrap_or_else(|| panic!("{name} missing"))
}

/// What `request` is answered: the status and the `Location`, if any.
async fn status_and_location(request: reqwest::RequestBuilder) -> (StatusCode, Option<String>) {
    let response = request.send().await.expect("send");
    let location = response
        .headers()
        .get(reqwest::header::LOCATION)
        .map(|v| v.to_str().expect("ascii").to_string());
    (response.status(), location)
}
