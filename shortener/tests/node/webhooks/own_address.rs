//! A node with a public address of its own refuses webhooks that lead back to it. The node runs
//! in network, mount, user and PID namespaces of its own (`unshare`), with 93.184.215.14 on its
//! loopback interface, its public port on every address, and an `/etc/hosts` the test writes;
//! the test reaches its API through a Unix socket, which a forwarder in the namespace joins to
//! the node's port. A URL naming that address, or a name resolving to it, is refused at
//! registration, and a name that moves to it afterwards is refused when a delivery resolves it,
//! so the node never posts to its own port.

use crate::tenants::{TenantKeys, write_keys};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The public address the node holds in its namespace.
const OWN: &str = "93.184.215.14";

/// A public prefix on the node's loopback interface: every address in it is the node's.
const OWN_PREFIX: &str = "93.184.216.1/24";

/// A public address that is not the node's (nothing answers there: the namespace has no route).
const ELSEWHERE: &str = "93.184.215.99";

/// Joins connections to a Unix socket (argv 1) to 127.0.0.1 (argv 2), each both ways.
const FORWARDER: &str = r#"
import socket, sys, threading

def pipe(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass

server = socket.socket(socket.AF_UNIX)
server.bind(sys.argv[1])
server.listen(16)
while True:
    client, _ = server.accept()
    try:
        upstream = socket.create_connection(("127.0.0.1", int(sys.argv[2])), timeout=5)
        upstream.settimeout(None)
    except OSError:
        client.close()
        continue
    threading.Thread(target=pipe, args=(client, upstream), daemon=True).start()
    threading.Thread(target=pipe, args=(upstream, client), daemon=True).start()
"#;

/// What the namespace runs: its addresses, its hosts file, the forwarder, then the node (PID 1
/// of the namespace, so everything in it ends with the node).
const SETUP: &str = r#"set -e
ip link set lo up
ip addr add "$OWN_ADDRESS/32" dev lo
ip addr add "$OWN_PREFIX" dev lo
mount --bind "$HOSTS_FILE" /etc/hosts
python3 "$FORWARDER" "$API_SOCKET" 8080 &
exec "$SHORTENER""#;

/// The node in its namespaces; killed (and everything in them with it) when dropped.
struct Contained {
    child: Mutex<Child>,
    /// The node's public port, through the forwarder.
    base: String,
    client: reqwest::Client,
}

impl Drop for Contained {
    fn drop(&mut self) {
        let child = self.child.get_mut().unwrap_or_else(|p| p.into_inner());
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// Writes the hosts file the namespace reads: `name` for each `(name, address)`.
fn hosts(path: &Path, names: &[(&str, &str)]) {
    let text: String = names
        .iter()
        .map(|(name, address)| format!("{address} {name}\n"))
        .collect();
    // In place: the namespace sees this file through a bind mount of its inode.
    std::fs::write(path, format!("127.0.0.1 localhost\n{text}")).expect("hosts file");
}

/// Starts the node in `dir` with `keys_file`, and a bridge from a local TCP port to its API.
async fn start(dir: &Path, keys_file: &Path) -> Contained {
    let forwarder = dir.join("forward.py");
    std::fs::write(&forwarder, FORWARDER).expect("forwarder");
    let socket = dir.join("api.sock");
    let child = Command::new("unshare")
        .args([
            "--user",
            "--map-root-user",
            "--net",
            "--mount",
            "--pid",
            "--fork",
            "--kill-child",
            "sh",
            "-c",
            SETUP,
        ])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("OWN_ADDRESS", OWN)
        .env("OWN_PREFIX", OWN_PREFIX)
        .env("HOSTS_FILE", dir.join("hosts"))
        .env("FORWARDER", &forwarder)
        .env("API_SOCKET", &socket)
        .env("SHORTENER", env!("CARGO_BIN_EXE_shortener"))
        .env("SHORTENER_DATA_DIR", dir.join("data"))
        .env("SHORTENER_HTTP_ADDR", "0.0.0.0:8080")
        .env("SHORTENER_GRPC_ADDR", "127.0.0.1:50052")
        .env("SHORTENER_ADMIN_ADDR", "127.0.0.1:9090")
        .env("SHORTENER_API_KEYS_FILE", keys_file)
        .env("SHORTENER_PUBLIC_URL", "http://sho.rt")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("node.log")).expect("log file"))
        .spawn()
        .expect("unshare (util-linux) runs");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bridge");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(bridge(listener, socket));
    let contained = Contained {
        child: Mutex::new(child),
        base,
        client: reqwest::Client::new(),
    };
    // Up, or gone: a machine that refuses the namespaces ends the child at once.
    let settled = testkit::wait_until(Duration::from_secs(60), || async {
        let exited = contained.child.lock().expect("lock").try_wait();
        matches!(exited, Ok(Some(_)))
            || contained
                .client
                .get(format!("{}/api/v1/links", contained.base))
                .send()
                .await
                .is_ok_and(|r| r.status() == reqwest::StatusCode::UNAUTHORIZED)
    })
    .await;
    let exited = contained.child.lock().expect("lock").try_wait();
    let log = std::fs::read_to_string(dir.join("node.log")).unwrap_or_default();
    assert!(
        settled && matches!(exited, Ok(None)),
        "the node in its namespaces never answered ({exited:?}; tests/prepare checks that \
         this machine lets unshare make user and network namespaces): {log}"
    );
    contained
}

/// Each connection to `listener`, joined to the Unix socket at `path`.
async fn bridge(listener: tokio::net::TcpListener, path: PathBuf) {
    while let Ok((mut tcp, _)) = listener.accept().await {
        let path = path.clone();
        tokio::spawn(async move {
            if let Ok(mut unix) = tokio::net::UnixStream::connect(&path).await {
                let _ = tokio::io::copy_bidirectional(&mut tcp, &mut unix).await;
            }
        });
    }
}

impl Contained {
    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        key: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut request = self
            .client
            .request(method, format!("{}/api/v1{path}", self.base))
            .bearer_auth(key);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let answer = request.send().await.expect("send");
        let status = answer.status().as_u16();
        (status, answer.json().await.unwrap_or(Value::Null))
    }

    async fn register(&self, keys: &TenantKeys, url: &str) -> (u16, Value) {
        let body = json!({ "tenant": "acme", "url": url, "secret": super::SECRET });
        self.call(reqwest::Method::POST, "/webhooks", &keys.admin, Some(body))
            .await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_may_not_lead_back_to_the_nodes_own_address() {
    let dir = tempfile::tempdir().expect("tempdir");
    let keys_file = dir.path().join("api-keys.toml");
    let keys = write_keys(&keys_file);
    let hosts_file = dir.path().join("hosts");
    hosts(
        &hosts_file,
        &[("own.hooks.test", OWN), ("moves.hooks.test", ELSEWHERE)],
    );
    let node = start(dir.path(), &keys_file).await;

    // Refused at registration: the address itself, in two spellings, and a name for it.
    let refused = [
        (
            format!("http://{OWN}:8080/hook"),
            "an address of this node's own",
        ),
        (
            "http://[::ffff:5db8:d70e]:8080/hook".to_string(),
            "an address of this node's own",
        ),
        (
            "http://93.184.216.77:8080/hook".to_string(),
            "an address of this node's own",
        ),
        (
            "http://own.hooks.test:8080/hook".to_string(),
            "resolves to 93.184.215.14, an address of this node's own",
        ),
    ];
    for (url, says) in &refused {
        let (status, answer) = node.register(&keys, url).await;
        assert_eq!(status, 422, "{url}: {answer}");
        assert_eq!(answer["error"], "invalid_webhook_url", "{url}: {answer}");
        let message = answer["message"].as_str().unwrap_or_default();
        assert!(message.contains(says), "{url}: {answer}");
    }
    let (_, list) = node
        .call(reqwest::Method::GET, "/webhooks", &keys.admin, None)
        .await;
    assert_eq!(list["webhooks"], json!([]), "nothing was registered");

    // A name that is public and elsewhere is taken; then it moves to the node's address.
    let (status, endpoint) = node
        .register(&keys, "http://moves.hooks.test:8080/hook")
        .await;
    assert_eq!(status, 201, "{endpoint}");
    let id = endpoint["id"].as_i64().expect("id");
    hosts(
        &hosts_file,
        &[("own.hooks.test", OWN), ("moves.hooks.test", OWN)],
    );
    let (status, link) = node
        .call(
            reqwest::Method::POST,
            "/links",
            &keys.own,
            Some(json!({ "url": "https://example.com/hooked" })),
        )
        .await;
    assert_eq!(status, 201, "{link}");

    // The delivery resolves the name again and finds nothing it may reach: it never posts to
    // the node's own port (which would answer it with a status).
    let last = Arc::new(Mutex::new(Value::Null));
    let attempted = testkit::wait_until(Duration::from_secs(30), || {
        let (node, keys, last) = (&node, &keys, Arc::clone(&last));
        async move {
            let (_, log) = node
                .call(
                    reqwest::Method::GET,
                    &format!("/webhooks/{id}/deliveries"),
                    &keys.admin,
                    None,
                )
                .await;
            let tried = log["deliveries"][0]["attempts"].as_u64().unwrap_or(0) > 0;
            *last.lock().expect("lock") = log;
            tried
        }
    })
    .await;
    let last = last.lock().expect("lock").clone();
    assert!(attempted, "no delivery was attempted: {last}");
    let delivery = &last["deliveries"][0];
    assert_eq!(delivery["last_status"], Value::Null, "{last}");
    let error = delivery["last_error"].as_str().unwrap_or_default();
    assert!(
        error.contains("moves.hooks.test resolves to no public address other than the node's own"),
        "{last}"
    );
}
