//! The binary's command line: `migrate`, and configuration refused before anything starts.

use std::process::Output;
use testkit::TestDb;

async fn run(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_id-service"));
    command
        .args(args)
        .env("RUST_LOG", "info")
        .env("ID_SERVICE_LOG_FORMAT", "json");
    for (key, value) in env {
        command.env(key, value);
    }
    tokio::time::timeout(std::time::Duration::from_secs(30), command.output())
        .await
        .expect("the binary exits")
        .expect("run the binary")
}

#[tokio::test]
async fn the_migrate_subcommand_applies_migrations_once_and_exits() {
    let db = TestDb::create().await;
    for round in 0..2 {
        // A misspelled setting (`NAMESPACE` for `NAMESPACES`) is warned of, not silently left.
        let output = run(
            &["migrate"],
            &[
                ("DATABASE_URL", db.url()),
                ("ID_SERVICE_NAMESPACE", "links"),
            ],
        )
        .await;
        assert!(
            output.status.success(),
            "round {round}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let said = String::from_utf8_lossy(&output.stdout);
        assert!(
            said.contains("ID_SERVICE_NAMESPACE is set but no setting reads it: did you mean ID_SERVICE_NAMESPACES?"),
            "round {round}: {said}"
        );
        // RUST_LOG=info, as the manifests set it: the server's notice that the migrations
        // table exists already is no line of the log.
        let log = String::from_utf8_lossy(&output.stdout);
        assert!(!log.contains("NOTICE"), "round {round}: {log}");
    }
    let conn = db.connect().await;
    let versions: Vec<i32> = conn
        .query(
            "SELECT version FROM id_schema_migrations ORDER BY version",
            &[],
        )
        .await
        .expect("read migrations")
        .iter()
        .map(|r| r.get(0))
        .collect();
    let known: Vec<i32> = id_service::migrate::MIGRATIONS
        .iter()
        .map(|m| m.version)
        .collect();
    assert_eq!(versions, known);
    let leases: i64 = conn
        .query_one("SELECT count(*) FROM id_leases", &[])
        .await
        .expect("the ledger exists")
        .get(0);
    assert_eq!(leases, 0);
}

/// A statement_timeout on the database (or the role: where it lives behind a transaction-mode
/// pooler) does not cut short a `migrate` that waits for another replica's migrations.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_waits_for_another_migrator_past_a_database_statement_timeout() {
    let db = TestDb::create().await;
    let admin = db.connect().await;
    admin
        .batch_execute(&format!(
            "ALTER DATABASE \"{}\" SET statement_timeout = '200ms'",
            db.name()
        ))
        .await
        .expect("set the database's statement_timeout");
    // Another migrator holds the lock for a second.
    let mut holder = db.connect().await;
    let tx = holder.transaction().await.expect("begin");
    tx.execute(
        "SELECT pg_advisory_xact_lock($1)",
        &[&0x6964_7376_6300_0001_i64],
    )
    .await
    .expect("take the migration lock");
    let migrate = tokio::spawn({
        let url = db.url().to_string();
        async move { run(&["migrate"], &[("DATABASE_URL", &url)]).await }
    });
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    tx.rollback().await.expect("release the lock");
    let output = migrate.await.expect("join");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(migrated(&db).await);
}

#[tokio::test]
async fn an_invalid_configuration_is_refused_before_any_port_is_bound() {
    let db = TestDb::create().await;
    let cases: [(&str, &[(&str, &str)]); 4] = [
        (
            "min above max",
            &[
                ("ID_SERVICE_MIN_BLOCK", "10"),
                ("ID_SERVICE_MAX_BLOCK", "5"),
            ],
        ),
        ("bad address", &[("ID_SERVICE_GRPC_ADDR", "localhost")]),
        (
            "bad namespace",
            &[("ID_SERVICE_NAMESPACES", "links,Bad-Name")],
        ),
        ("bad duration", &[("ID_SERVICE_DRAIN_TIMEOUT", "soon")]),
    ];
    for (case, settings) in cases {
        let mut env = vec![
            ("DATABASE_URL", db.url()),
            ("ID_SERVICE_GRPC_ADDR", "127.0.0.1:0"),
            ("ID_SERVICE_ADMIN_ADDR", "127.0.0.1:0"),
        ];
        env.extend_from_slice(settings);
        let output = run(&[], &env).await;
        assert!(!output.status.success(), "{case}: started anyway");
        // clap reports parse errors on stderr; validation errors are logged (stdout).
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(
            said.contains("ID_SERVICE") || said.contains("--"),
            "{case}: {said}"
        );
    }
    // Nothing was migrated either: validation comes first.
    let conn = db.connect().await;
    let tables: i64 = conn
        .query_one(
            "SELECT count(*) FROM pg_tables WHERE tablename = 'id_schema_migrations'",
            &[],
        )
        .await
        .expect("pg_tables")
        .get(0);
    assert_eq!(tables, 0);
}

/// Runs the binary as a server that should refuse to start; returns what it said.
async fn refused(env: &[(&str, &str)], args: &[&str]) -> String {
    let db_env = [
        ("ID_SERVICE_GRPC_ADDR", "127.0.0.1:0"),
        ("ID_SERVICE_HTTP_ADDR", "127.0.0.1:0"),
        ("ID_SERVICE_ADMIN_ADDR", "127.0.0.1:0"),
    ];
    let mut all: Vec<(&str, &str)> = db_env.to_vec();
    all.extend_from_slice(env);
    let output = run(args, &all).await;
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(!output.status.success(), "started anyway: {said}");
    said
}

async fn migrated(db: &TestDb) -> bool {
    db.connect()
        .await
        .query_one(
            "SELECT count(*) FROM pg_tables WHERE tablename = 'id_schema_migrations'",
            &[],
        )
        .await
        .expect("pg_tables")
        .get::<_, i64>(0)
        > 0
}

#[tokio::test]
async fn without_a_tokens_file_the_service_refuses_to_serve_unless_told_insecure_explicitly() {
    let db = TestDb::create().await;
    let said = refused(&[("DATABASE_URL", db.url())], &[]).await;
    assert!(
        said.contains("--insecure-no-auth") && said.contains("ID_SERVICE_TOKENS_FILE"),
        "{said}"
    );
    let said = refused(
        &[("DATABASE_URL", db.url()), ("ID_SERVICE_TOKEN", "x")],
        &["--insecure-no-auth"],
    )
    .await;
    assert!(
        said.contains("ID_SERVICE_TOKEN is no longer read"),
        "{said}"
    );
    assert!(!said.contains("\"x\""), "{said}");
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("t.toml");
    std::fs::write(&file, "").expect("write");
    let path = file.display().to_string();
    let said = refused(
        &[
            ("DATABASE_URL", db.url()),
            ("ID_SERVICE_TOKENS_FILE", &path),
        ],
        &["--insecure-no-auth"],
    )
    .await;
    assert!(said.contains("contradict"), "{said}");
    assert!(
        !migrated(&db).await,
        "a refused start migrated the database"
    );
}

#[tokio::test]
async fn a_bad_tokens_file_is_refused_at_start_with_its_reason_and_without_its_tokens() {
    let db = TestDb::create().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let secret = "idsvc_a-raw-token-that-must-never-be-logged-0001";
    let entry = |name: &str, token: &str, scopes: &str| {
        format!(
            "[[callers]]\nname = \"{name}\"\ntoken = \"{token}\"\nnamespaces = [\"links\"]\nscopes = [{scopes}]\n"
        )
    };
    let other = "idsvc_another-raw-token-for-the-duplicate-test";
    let cases = [
        (
            "duplicate name",
            format!(
                "{}{}",
                entry("a", secret, "\"lease\""),
                entry("a", other, "\"lease\"")
            ),
            "same name",
        ),
        (
            "unknown scope",
            entry("a", secret, "\"lease\", \"superuser\""),
            "unknown scope",
        ),
        (
            "short token",
            entry("a", "tooshort", "\"lease\""),
            "at least 32",
        ),
        (
            "bad TOML",
            format!("[[callers]\ntoken = \"{secret}\""),
            "line 1",
        ),
        (
            "line separator in a name",
            entry("a\u{2028}b", secret, "\"lease\""),
            "\\u{2028}",
        ),
        ("missing file", String::new(), "cannot read"),
    ];
    for (case, text, reason) in cases {
        let file = dir.path().join(format!("{}.toml", case.replace(' ', "-")));
        if case != "missing file" {
            std::fs::write(&file, text).expect("write");
        }
        let path = file.display().to_string();
        let said = refused(
            &[
                ("DATABASE_URL", db.url()),
                ("ID_SERVICE_TOKENS_FILE", &path),
            ],
            &[],
        )
        .await;
        assert!(said.contains(reason), "{case}: {said}");
        assert!(
            !said.contains(secret) && !said.contains("tooshort"),
            "{case}: a token was logged: {said}"
        );
        assert!(
            !said.contains('\u{2028}'),
            "{case}: a raw separator reached the log"
        );
    }
    assert!(
        !migrated(&db).await,
        "a refused start migrated the database"
    );
}

#[tokio::test]
async fn every_commands_help_is_grouped_under_headings_with_an_example() {
    for command in [
        &["--help"][..],
        &["serve", "--help"],
        &["migrate", "--help"],
        &["tokens", "--help"],
        &["tokens", "add", "--help"],
    ] {
        let out = run(command, &[]).await;
        assert!(out.status.success(), "{command:?}");
        let help = String::from_utf8(out.stdout).expect("utf-8");
        assert!(
            help.contains("\nExample"),
            "{command:?} shows no example:\n{help}"
        );
    }
    let help = String::from_utf8(run(&["-h"], &[]).await.stdout).expect("utf-8");
    for heading in [
        "Listeners:",
        "Database:",
        "Callers:",
        "Namespaces and blocks:",
        "AllocateIds:",
        "After a failover:",
        "Shutdown and timeouts:",
        "Logging:",
    ] {
        assert!(
            help.contains(&format!("\n{heading}\n")),
            "{heading}\n{help}"
        );
    }
    // The general options hold only help and version: every setting is under its part.
    let options: Vec<&str> = help
        .split("\nOptions:\n")
        .nth(1)
        .expect("options")
        .lines()
        .take_while(|l| !l.is_empty())
        .collect();
    assert_eq!(options.len(), 2, "{options:?}");
}
