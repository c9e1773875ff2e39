//! `id-service tokens add` and the binary's tokens file: a printed token works at once; the file
//! is re-read on SIGHUP, and a bad version keeps the callers in use.

use crate::helpers::process::Process;
use crate::helpers::{allocate, lease_as};
use std::path::Path;
use std::process::Output;
use std::time::Duration;
use testkit::TestDb;
use tonic::Code;

async fn tokens_add(file: &Path, args: &[&str]) -> Output {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_id-service"));
    command
        .args(["tokens", "add", "--file"])
        .arg(file)
        .args(args)
        .env_remove("DATABASE_URL");
    tokio::time::timeout(Duration::from_secs(30), command.output())
        .await
        .expect("the binary exits")
        .expect("run the binary")
}

/// Adds a caller and returns its token (the only line on stdout).
async fn add(file: &Path, args: &[&str]) -> String {
    let output = tokens_add(file, args).await;
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8(output.stdout).expect("utf-8");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "stdout holds exactly the token: {stdout:?}");
    lines[0].to_string()
}

async fn serve(db: &TestDb, file: &Path) -> Process {
    Process::spawn(
        &[],
        &[
            ("DATABASE_URL", db.url().to_string()),
            ("ID_SERVICE_TOKENS_FILE", file.display().to_string()),
            ("ID_SERVICE_NAMESPACES", "orders,links".into()),
            // Long enough that only SIGHUP can trigger a reload during the test.
            ("ID_SERVICE_TOKENS_RELOAD_INTERVAL", "10m".into()),
        ],
    )
    .await
}

#[tokio::test]
async fn a_token_from_tokens_add_works_on_grpc_and_json_and_only_its_digest_is_stored() {
    let db = TestDb::create().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("tokens.toml");
    let token = add(
        &file,
        &[
            "--name",
            "billing",
            "--namespaces",
            "orders",
            "--scopes",
            "allocate,lease",
            "--ids-per-second",
            "100000",
        ],
    )
    .await;
    assert!(token.len() >= 32, "{token}");
    let text = std::fs::read_to_string(&file).expect("read");
    assert!(!text.contains(&token), "the raw token was stored");
    // A second caller with the same name is refused and the file stays as it was.
    let again = tokens_add(
        &file,
        &[
            "--name",
            "billing",
            "--namespaces",
            "orders",
            "--scopes",
            "lease",
            "--unlimited",
        ],
    )
    .await;
    assert!(!again.status.success());
    assert!(again.stdout.is_empty(), "a refused add printed a token");
    assert_eq!(std::fs::read_to_string(&file).expect("read"), text);
    // A caller without a quota is added only with --unlimited.
    let open = tokens_add(
        &file,
        &[
            "--name",
            "open",
            "--namespaces",
            "orders",
            "--scopes",
            "lease",
        ],
    )
    .await;
    assert!(!open.status.success());
    assert!(open.stdout.is_empty(), "a refused add printed a token");
    let stderr = String::from_utf8_lossy(&open.stderr);
    assert!(stderr.contains("--unlimited"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&file).expect("read"), text);

    let server = serve(&db, &file).await;
    let mut client = crate::helpers::client(server.grpc_addr).await;
    let ranges = allocate(&mut client, Some(&token), "orders", 10)
        .await
        .expect("allocate");
    assert_eq!(ranges.iter().map(|(s, e)| e - s).sum::<u64>(), 10);
    let lease = lease_as(&mut client, Some(&token), "orders", 10, "pod-1", None)
        .await
        .expect("lease");
    assert_eq!(lease.holder, "billing/pod-1");
    let json = reqwest::Client::new()
        .post(format!(
            "http://{}/v1/namespaces/orders/ids:allocate",
            server.http_addr
        ))
        .bearer_auth(&token)
        .json(&serde_json::json!({"count": 3}))
        .send()
        .await
        .expect("post");
    assert_eq!(json.status(), 200);
    assert!(!server.log().contains(&token), "the token reached the log");
    server.kill_9().await;
}

#[tokio::test]
async fn sighup_reloads_the_tokens_file_and_a_bad_file_keeps_the_callers_in_use() {
    let db = TestDb::create().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("tokens.toml");
    let first = add(
        &file,
        &[
            "--name",
            "first",
            "--namespaces",
            "orders",
            "--scopes",
            "allocate",
            "--ids-per-second",
            "1000",
        ],
    )
    .await;
    let server = serve(&db, &file).await;
    let mut client = crate::helpers::client(server.grpc_addr).await;
    allocate(&mut client, Some(&first), "orders", 1)
        .await
        .expect("first works");

    let second = add(
        &file,
        &[
            "--name",
            "second",
            "--namespaces",
            "links",
            "--scopes",
            "allocate",
            "--unlimited",
        ],
    )
    .await;
    let status = allocate(&mut client, Some(&second), "links", 1)
        .await
        .expect_err("not reloaded yet");
    assert_eq!(status.code(), Code::Unauthenticated);
    server.signal("HUP").await;
    let reloaded = testkit::wait_until(Duration::from_secs(10), || {
        let mut client = client.clone();
        let second = second.clone();
        async move {
            allocate(&mut client, Some(&second), "links", 1)
                .await
                .is_ok()
        }
    })
    .await;
    assert!(
        reloaded,
        "SIGHUP did not reload the file; log:\n{}",
        server.log()
    );

    // A broken version is refused whole, and said why; both callers keep working.
    let good = std::fs::read_to_string(&file).expect("read");
    std::fs::write(&file, format!("{good}\n[[callers]]\nname = \"third\"\n"))
        .expect("break the file");
    server.signal("HUP").await;
    let logged = testkit::wait_until(Duration::from_secs(10), || async {
        server
            .log()
            .contains("tokens file refused; keeping the current callers")
    })
    .await;
    assert!(logged, "no reason logged; log:\n{}", server.log());
    allocate(&mut client, Some(&first), "orders", 1)
        .await
        .expect("first still works");
    allocate(&mut client, Some(&second), "links", 1)
        .await
        .expect("second still works");
    let status = server.terminate().await;
    assert!(
        status.success(),
        "SIGHUP handling broke the clean shutdown: {status:?}"
    );
}
