//! A distributed node that gets no IDs says why, in the words of the setting that fixes it: in
//! the 503 a create answers, in readiness, and in its log. The binary runs against a real
//! id-service (callers from a tokens file, namespaces not created on demand) on a real database.

use proto::idalloc::v1::CreateNamespaceRequest;
use proto::idalloc::v1::namespace_admin_client::NamespaceAdminClient;
use reqwest::StatusCode;
use serde_json::json;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;
use testkit::TestDb;
use tokio_util::sync::CancellationToken;

const API_KEY: &str = "shortage-key-0123456789abcdef";
const CODE_KEY: &str = "5f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0";
const NODE_TOKEN: &str = "idsvc_node-0123456789abcdefghijklmnopqrstuv";
const OPS_TOKEN: &str = "idsvc_ops-0123456789abcdefghijklmnopqrstuvw";

/// An id-service whose callers are a node (`links`, lease) and an operator (`*`, admin), with
/// no namespace created and none created on demand.
async fn id_service(db: &TestDb, dir: &std::path::Path) -> (String, CancellationToken) {
    let hex = |token: &str| {
        id_service::auth::token::digest(token.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    };
    let tokens = dir.join("tokens.toml");
    std::fs::write(
        &tokens,
        format!(
            "[[callers]]\nname = \"shortener\"\ntoken_sha256 = \"{}\"\nnamespaces = [\"links\"]\n\
             scopes = [\"lease\"]\n\n[[callers]]\nname = \"ops\"\ntoken_sha256 = \"{}\"\n\
             namespaces = [\"*\"]\nscopes = [\"admin\"]\n",
            hex(NODE_TOKEN),
            hex(OPS_TOKEN)
        ),
    )
    .expect("write the tokens file");
    let app = id_service::App::build(id_service::Config {
        tokens_file: Some(tokens),
        insecure_no_auth: false,
        auto_create_namespaces: false,
        namespaces: Vec::new(),
        ..id_service::Config::for_tests(db.url())
    })
    .await
    .expect("build the id-service");
    let addr = format!("http://{}", app.grpc_addr());
    let stop = CancellationToken::new();
    tokio::spawn({
        let stop = stop.clone();
        async move { app.run(stop).await.expect("id-service run") }
    });
    (addr, stop)
}

/// A node process in distributed mode leasing from `id_service` (with `token`, if any).
struct NodeProcess {
    child: Child,
    lines: mpsc::Receiver<String>,
    log: Vec<String>,
    base: String,
    admin: String,
}

impl NodeProcess {
    fn start(db: &TestDb, id_service: &str, token: Option<&str>) -> NodeProcess {
        let mut command = Command::new(env!("CARGO_BIN_EXE_shortener"));
        command
            .env_remove("SHORTENER_API_KEYS_FILE")
            .env_remove("SHORTENER_KEY_FILE")
            .env_remove("SHORTENER_ID_SERVICE_TOKEN")
            .env("DATABASE_URL", db.url())
            .env("SHORTENER_ID_SERVICE", id_service)
            .env("SHORTENER_KEY", CODE_KEY)
            .env("SHORTENER_API_KEYS", API_KEY)
            .env("SHORTENER_PUBLIC_URL", "http://sho.rt/")
            .env("SHORTENER_HTTP_ADDR", "127.0.0.1:0")
            .env("SHORTENER_GRPC_ADDR", "127.0.0.1:0")
            .env("SHORTENER_ADMIN_ADDR", "127.0.0.1:0")
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(token) = token {
            command.env("SHORTENER_ID_SERVICE_TOKEN", token);
        }
        let mut child = command.spawn().expect("start shortener");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut node = NodeProcess {
            child,
            lines,
            log: Vec::new(),
            base: String::new(),
            admin: String::new(),
        };
        let serving = node.wait_for_line("shortener serving");
        let addr = |label: &str| {
            let rest = serving.split_once(label).expect(label).1;
            format!(
                "http://{}",
                rest.split_whitespace().next().expect("an address")
            )
        };
        node.base = addr("http_addr=");
        node.admin = addr("admin_addr=");
        node
    }

    /// The first line (from now or already read) that contains `wanted`; panics after 30 s.
    fn wait_for_line(&mut self, wanted: &str) -> String {
        if let Some(line) = self.log.iter().find(|l| l.contains(wanted)) {
            return line.clone();
        }
        loop {
            match self.lines.recv_timeout(Duration::from_secs(30)) {
                Ok(line) => {
                    self.log.push(line.clone());
                    if line.contains(wanted) {
                        return line;
                    }
                }
                Err(_) => panic!("no {wanted:?} in the log: {:#?}", self.log),
            }
        }
    }

    /// The status and message of a create.
    async fn create(&self, client: &reqwest::Client) -> (StatusCode, String) {
        let response = client
            .post(format!("{}/api/v1/links", self.base))
            .bearer_auth(API_KEY)
            .json(&json!({ "url": "https://example.com/shortage" }))
            .send()
            .await
            .expect("create");
        let status = response.status();
        let body: serde_json::Value = response.json().await.unwrap_or_default();
        (status, body["message"].as_str().unwrap_or("").into())
    }

    /// The status and text of readiness.
    async fn ready(&self, client: &reqwest::Client) -> (StatusCode, String) {
        let response = client
            .get(format!("{}/readyz", self.admin))
            .send()
            .await
            .expect("readyz");
        (response.status(), response.text().await.expect("text"))
    }
}

impl Drop for NodeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_without_ids_names_the_cause_and_the_setting_in_its_answers_readiness_and_log() {
    let db = TestDb::create().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (addr, stop) = id_service(&db, dir.path()).await;
    let client = reqwest::Client::new();

    // The cause and the words each must name, in the 503, in readiness and in the log.
    let mut nodes = [
        (
            "unknown namespace",
            NodeProcess::start(&db, &addr, Some(NODE_TOKEN)),
            ["no namespace links", "ID_SERVICE_NAMESPACES"],
        ),
        (
            "no token",
            NodeProcess::start(&db, &addr, None),
            ["refused this node's token", "SHORTENER_ID_SERVICE_TOKEN"],
        ),
        (
            "unreachable",
            NodeProcess::start(&db, "http://127.0.0.1:9", Some(NODE_TOKEN)),
            ["unreachable", "SHORTENER_ID_SERVICE names it"],
        ),
    ];
    for (cause, node, words) in &mut nodes {
        let (status, message) = node.create(&client).await;
        assert_eq!(
            status,
            StatusCode::SERVICE_UNAVAILABLE,
            "{cause}: {message}"
        );
        let (ready, readiness) = node.ready(&client).await;
        assert_eq!(
            ready,
            StatusCode::SERVICE_UNAVAILABLE,
            "{cause}: {readiness}"
        );
        let logged = node.wait_for_line("serving without IDs");
        for word in *words {
            assert!(
                message.contains(word),
                "{cause}: 503 {message:?} lacks {word:?}"
            );
            assert!(
                readiness.contains(word),
                "{cause}: {readiness:?} lacks {word:?}"
            );
            assert!(
                logged.contains(word),
                "{cause}: log {logged:?} lacks {word:?}"
            );
        }
        // The answer to a client names settings, never where the id-service is.
        assert!(!message.contains(&addr), "{cause}: {message}");
    }

    // Once the namespace exists, the node that named it gets IDs and creates.
    let mut admin = NamespaceAdminClient::connect(addr.clone())
        .await
        .expect("connect");
    let mut request = tonic::Request::new(CreateNamespaceRequest {
        name: "links".into(),
        ..Default::default()
    });
    request.metadata_mut().insert(
        "authorization",
        format!("Bearer {OPS_TOKEN}").parse().expect("metadata"),
    );
    admin.create_namespace(request).await.expect("create links");
    let node = &nodes[0].1;
    crate::helpers::wait_for("the node gets IDs", Duration::from_secs(20), async || {
        node.ready(&client).await.0 == StatusCode::OK
    })
    .await;
    assert_eq!(node.create(&client).await.0, StatusCode::CREATED);
    stop.cancel();
}
