//! Configuration is validated before any port is bound; each bad setting is named.

use pgtls::pooler::PoolMode;
use shortener::{App, Config};

/// A distributed node behind a pooler in `mode`, with `direct` as its direct URL.
fn behind_a_pooler(config: &mut Config, mode: PoolMode, direct: Option<&str>) {
    config.store.database_url = Some("postgres://postgres@127.0.0.1:6432/x".into());
    config.ids.id_service = vec!["http://127.0.0.1:1".into()];
    config.store.database_pool_mode = mode;
    config.store.database_direct_url = direct.map(str::to_string);
}

/// Builds an app from `config` on an HTTP port this test holds, expects the build to fail, and
/// returns the error with its causes. An app that bound anything before checking its settings
/// would fail on the held port instead, and the error would say so; holding the port (rather
/// than checking afterwards that it is free) leaves no moment in which another test's
/// `bind(0)` could take it and blame the app.
async fn refused_before_binding(mut config: Config, what: &str) -> String {
    let held = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    config.listeners.http_addr = held.local_addr().expect("address");
    let error = match App::build(config).await {
        Ok(_) => panic!("{what} was accepted"),
        Err(error) => format!("{error:#}"),
    };
    assert!(
        !error.contains("bind the HTTP listener"),
        "{what}: the app tried its ports before it refused its settings: {error}"
    );
    drop(held);
    error
}

/// Builds an app from `config`, expects the build to fail after it bound its ports, and checks
/// that it let the HTTP port go; returns the error with its causes. The port is on a loopback
/// address of its own (every other test listens on 127.0.0.1), so no other test's `bind(0)`
/// can take it between the app's release and the check.
async fn refused_and_released(mut config: Config, what: &str) -> String {
    let own = std::net::IpAddr::from([127, 0, 0, 73]);
    let addr = std::net::TcpListener::bind((own, 0))
        .and_then(|probe| probe.local_addr())
        .expect("a port on the test's own loopback address");
    config.listeners.http_addr = addr;
    let error = match App::build(config).await {
        Ok(_) => panic!("{what} was accepted"),
        Err(error) => format!("{error:#}"),
    };
    std::net::TcpListener::bind(addr).unwrap_or_else(|e| {
        panic!("{what}: port {addr} was left bound: {e} (the start failed with: {error})")
    });
    error
}

#[tokio::test]
async fn bad_settings_are_refused_by_name_before_any_port_is_bound() {
    let dir = tempfile::tempdir().expect("tempdir");
    type Edit = fn(&mut Config);
    let cases: Vec<(&str, Edit)> = vec![
        ("SHORTENER_CODE_LENGTH", |c| c.ids.code_length = 3),
        ("SHORTENER_CODE_LENGTH", |c| c.ids.code_length = 12),
        ("SHORTENER_MIN_BLOCK", |c| c.ids.min_block = 0),
        ("SHORTENER_MIN_BLOCK", |c| {
            (c.ids.min_block, c.ids.max_block) = (1000, 10)
        }),
        ("SHORTENER_MAX_URL_LENGTH", |c| {
            c.redirects.max_url_length = 1
        }),
        ("SHORTENER_ID_SERVICE", |c| {
            c.store.database_url = Some("postgres://postgres@127.0.0.1/x".into())
        }),
        ("SHORTENER_ID_SERVICE", |c| {
            c.ids.id_service = vec!["id-service:50051".into()]
        }),
        ("SHORTENER_ID_NAMESPACE", |c| {
            c.ids.id_namespace = "Bad-Namespace".into()
        }),
        ("SHORTENER_PUBLIC_URL", |c| {
            c.listeners.public_url = Some("ftp://sho.rt/".into())
        }),
        ("SHORTENER_PUBLIC_URL", |c| {
            c.listeners.public_url = Some("not a url".into())
        }),
        ("SHORTENER_TRUSTED_PROXIES", |c| {
            c.listeners.client_ip_header = Some("x-forwarded-for".into())
        }),
        ("SHORTENER_CLIENT_IP_HEADER", |c| {
            c.listeners.client_ip_header = Some("bad header".into());
            c.listeners.trusted_proxies = vec!["10.0.0.0/8".parse().expect("net")];
        }),
        ("SHORTENER_CREATE_BURST", |c| c.limits.create_burst = 10),
        // Lifetimes and retentions past a century: the date arithmetic that reads them would
        // overflow (u32::MAX days meant as "forever", say).
        ("SHORTENER_ANALYTICS_RETENTION_DAYS", |c| {
            c.visits.analytics_retention_days = u32::MAX
        }),
        ("SHORTENER_WEBHOOK_LOG_DAYS", |c| {
            c.webhooks.webhook_log_days = 100_000
        }),
        ("SHORTENER_IDEMPOTENCY_TTL", |c| {
            c.access.idempotency_ttl = std::num::NonZero::new(u64::MAX).expect("non-zero")
        }),
        ("SHORTENER_SESSION_MAX_SECONDS", |c| {
            c.access.session_max_seconds =
                std::num::NonZero::new(10_000_000_000_000).expect("non-zero")
        }),
        ("SHORTENER_DRAIN_TIMEOUT", |c| {
            c.listeners.drain_timeout = u64::MAX
        }),
        ("SHORTENER_ANALYTICS_COMPACT_AFTER_DAYS", |c| {
            c.visits.analytics_compact_after_days = std::num::NonZero::new(1).expect("non-zero")
        }),
        ("SHORTENER_WRITE_BATCH", |c| c.store.write_batch = 0),
        ("SHORTENER_WRITE_FILL", |c| c.store.write_fill = 0),
        ("SHORTENER_WRITE_FILL", |c| c.store.write_fill = 10_001),
        ("SHORTENER_TAG_CHANGE_MAX_LINKS", |c| {
            c.limits.tag_change_max_links = 0
        }),
        ("SHORTENER_TAG_CHANGE_MAX_LINKS", |c| {
            c.limits.tag_change_max_links = 10_001
        }),
        ("SHORTENER_KEY", |c| c.ids.key = Some("abcd".into())),
        ("SHORTENER_DOMAIN_SUFFIXES", |c| {
            c.access.domain_suffixes = vec!["brand.com".into()]
        }),
        ("SHORTENER_DOMAIN_SUFFIXES", |c| {
            c.access.domain_suffixes = vec!["marketing=*.brand.com".into()]
        }),
        ("SHORTENER_DOMAIN_SUFFIXES", |c| {
            c.access.domain_suffixes = vec!["Marketing=brand.com".into()]
        }),
        ("SHORTENER_DATABASE_CA_FILE", |c| {
            c.store.database_ca_file = Some("/nonexistent/ca.pem".into())
        }),
        ("SHORTENER_DATABASE_CA_FILE", |c| {
            c.store.database_ca_file = Some("/dev/null".into())
        }),
        ("SHORTENER_COMPAT", |c| {
            c.compat.compat = vec!["polr".into()]
        }),
        ("SHORTENER_COMPAT", |c| {
            c.compat.compat = vec!["yourls".into(), "yourls-api".into()]
        }),
        ("SHORTENER_COMPAT_CORS_ORIGINS", |c| {
            c.compat.compat_cors_origins = vec!["https://app.example/".into()]
        }),
        ("SHORTENER_COMPAT_CORS_ORIGINS", |c| {
            c.compat.compat_cors_origins = vec!["*".into(), "https://app.example".into()]
        }),
        ("SHORTENER_COMPAT_CORS_ORIGINS", |c| {
            c.compat.compat_cors_origins = vec!["app.example".into()]
        }),
        ("SHORTENER_DATABASE_DIRECT_URL", |c| {
            behind_a_pooler(c, PoolMode::Transaction, None)
        }),
        ("SHORTENER_DATABASE_DIRECT_URL", |c| {
            behind_a_pooler(
                c,
                PoolMode::Session,
                Some("postgres://postgres@127.0.0.1/x"),
            )
        }),
        ("SHORTENER_DATABASE_DIRECT_URL", |c| {
            behind_a_pooler(c, PoolMode::Transaction, Some("postgres://h:notaport/x"))
        }),
        ("SHORTENER_DATABASE_DIRECT_URL", |c| {
            behind_a_pooler(c, PoolMode::Transaction, Some("dbname=x user=postgres"))
        }),
        ("SHORTENER_DATABASE_POOL_MODE", |c| {
            c.store.database_pool_mode = PoolMode::Transaction;
            c.store.database_direct_url = Some("postgres://postgres@127.0.0.1/x".into());
        }),
        ("SHORTENER_API_KEYS", |c| {
            c.access.api_keys = vec!["short".into()]
        }),
        ("SHORTENER_ADMIN_ADDR", |c| {
            c.listeners.admin_addr = shortener::config::Listen::Off;
            c.store.database_url = Some("postgres://postgres@127.0.0.1/x".into());
            c.ids.id_service = vec!["http://127.0.0.1:1".into()];
        }),
    ];
    for (name, edit) in cases {
        let mut config = Config::for_tests(dir.path().join("data"), "test-key-0123456789abcdef");
        edit(&mut config);
        let error = refused_before_binding(config, &format!("a config with a bad {name}")).await;
        assert!(
            error.contains(name),
            "the error for a bad {name} does not name it: {error}"
        );
    }
}

/// An embedded data directory keeps the code space its links were made in: a start with
/// another key or another code length is refused, with its ports let go again, and the original
/// settings still start.
#[tokio::test]
async fn an_embedded_data_directory_refuses_another_code_key_or_length() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let config = || Config::for_tests(data.clone(), "test-key-0123456789abcdef");
    // The first start generates the key file and records its code space.
    drop(App::build(config()).await.expect("first start"));

    type Edit = fn(&mut Config);
    let cases: Vec<(&str, Edit)> = vec![
        ("another key", |c| {
            c.ids.key = Some(codespace::CodeKey::generate().to_hex())
        }),
        ("another length", |c| c.ids.code_length = 8),
    ];
    for (why, edit) in cases {
        let mut changed = config();
        edit(&mut changed);
        let error = refused_and_released(changed, &format!("a start with {why}")).await;
        assert!(
            error.contains("start it with the original key"),
            "{why}: {error}"
        );
    }
    drop(
        App::build(config())
            .await
            .expect("the original settings start"),
    );
}

/// A new data directory is made private; an existing one keeps the mode its operator gave it
/// (a looser one is warned about, not changed behind their back).
#[cfg(unix)]
#[tokio::test]
async fn a_new_data_directory_is_private_and_an_existing_one_is_left_as_it_is() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let mode = |path: &std::path::Path| {
        std::fs::metadata(path).expect("stat").permissions().mode() & 0o777
    };
    let fresh = dir.path().join("fresh");
    drop(
        App::build(Config::for_tests(
            fresh.clone(),
            "test-key-0123456789abcdef",
        ))
        .await
        .expect("start"),
    );
    assert_eq!(mode(&fresh), 0o700);
    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).expect("mkdir");
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    drop(
        App::build(Config::for_tests(
            shared.clone(),
            "test-key-0123456789abcdef",
        ))
        .await
        .expect("start"),
    );
    assert_eq!(mode(&shared), 0o755, "the operator's mode was changed");
}

/// Settings whose type refuses a bad value (a zero count or interval, a listener that is
/// neither an address nor `off`): the binary exits at once, naming the setting as it was given
/// (the environment variable, or the flag), before it binds or writes anything, and says it
/// in its message alone, whatever `RUST_BACKTRACE` asks for.
#[tokio::test]
async fn values_their_type_refuses_stop_the_binary_naming_the_setting() {
    for (variable, value, flag) in [
        ("SHORTENER_CACHE_TTL", "0", "--cache-ttl"),
        (
            "SHORTENER_HEADER_READ_TIMEOUT",
            "0",
            "--header-read-timeout",
        ),
        (
            "SHORTENER_CLICK_FLUSH_INTERVAL_MS",
            "0",
            "--click-flush-interval-ms",
        ),
        (
            "SHORTENER_WEBHOOK_MAX_PENDING",
            "0",
            "--webhook-max-pending",
        ),
        ("SHORTENER_GRPC_MAX_STREAMS", "0", "--grpc-max-streams"),
        ("SHORTENER_HIGH_WATER_READS", "0", "--high-water-reads"),
        ("SHORTENER_HIGH_WATER_READS", "many", "--high-water-reads"),
        ("SHORTENER_IDEMPOTENCY_TTL", "-1", "--idempotency-ttl"),
        ("SHORTENER_DRAIN_TIMEOUT", "1500ms", "--drain-timeout"),
        ("SHORTENER_CACHE_TTL", "5 fortnights", "--cache-ttl"),
        ("SHORTENER_CACHE_BYTES", "240 M", "--cache-bytes"),
        ("SHORTENER_ADMIN_ADDR", "everywhere", "--admin-addr"),
        ("SHORTENER_REDIRECT_STATUS", "303", "--redirect-status"),
        ("SHORTENER_BLOCKED_STATUS", "200", "--blocked-status"),
        (
            "SHORTENER_DATABASE_POOL_MODE",
            "statement",
            "--database-pool-mode",
        ),
        (
            "SHORTENER_DATABASE_POOL_MODE",
            "txn",
            "--database-pool-mode",
        ),
    ] {
        let flag_arg = format!("{flag}={value}");
        // The README's start (no subcommand), `serve`, and `serve` with the flag written.
        for (args, exit, names) in [
            (&[][..], 2, variable),
            (&["serve"][..], 2, variable),
            (&["serve", flag_arg.as_str()][..], 2, flag),
        ] {
            let dir = tempfile::tempdir().expect("tempdir");
            let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_shortener"));
            command
                .args(args)
                .env_remove("DATABASE_URL")
                .env("RUST_BACKTRACE", "1")
                .env("SHORTENER_DATA_DIR", dir.path().join("data"))
                .env("SHORTENER_HTTP_ADDR", "127.0.0.1:0")
                .env("SHORTENER_GRPC_ADDR", "127.0.0.1:0")
                .env("SHORTENER_ADMIN_ADDR", "127.0.0.1:0");
            if args.len() < 2 {
                command.env(variable, value);
            }
            let out = exited(&mut command).await;
            let stderr = String::from_utf8_lossy(&out.stderr);
            let case = format!("{variable}={value} {args:?}");
            assert_eq!(out.status.code(), Some(exit), "{case}: {stderr}");
            assert!(stderr.contains(names), "{case}: {stderr}");
            if names == variable {
                assert!(!stderr.contains(flag), "{case}: {stderr}");
                // And what the setting is, its unit among it.
                assert!(
                    stderr.contains(&format!("{variable} is: ")),
                    "{case}: {stderr}"
                );
            }
            assert!(!stderr.contains("backtrace"), "{case}: {stderr}");
            assert!(
                !dir.path().join("data").exists(),
                "{case} wrote the data directory"
            );
        }
    }
    // Two settings that exclude each other are said as clap says them, naming both.
    let dir = tempfile::tempdir().expect("tempdir");
    let out = exited(
        tokio::process::Command::new(env!("CARGO_BIN_EXE_shortener"))
            .env_remove("DATABASE_URL")
            .env("SHORTENER_DATA_DIR", dir.path().join("data"))
            .env("SHORTENER_KEY", "00".repeat(32))
            .env("SHORTENER_KEY_FILE", dir.path().join("key")),
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("cannot be used with"), "{stderr}");
    assert!(!stderr.contains("Error: error"), "{stderr}");
}

/// Settings refused by the checks that read them together (a code length out of range, a
/// header without the proxies that may set it) are said as a refused value is, `error:` and
/// the variable, with the same exit status, and nothing is written.
#[tokio::test]
async fn settings_refused_together_are_said_as_refused_values_are() {
    for (env, names) in [
        (
            &[("SHORTENER_CODE_LENGTH", "12")][..],
            "SHORTENER_CODE_LENGTH",
        ),
        (
            &[("SHORTENER_CLIENT_IP_HEADER", "x-forwarded-for")][..],
            "SHORTENER_CLIENT_IP_HEADER needs SHORTENER_TRUSTED_PROXIES",
        ),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_shortener"));
        command
            .env_remove("DATABASE_URL")
            .env("SHORTENER_DATA_DIR", dir.path().join("data"))
            .env("SHORTENER_HTTP_ADDR", "127.0.0.1:0")
            .env("SHORTENER_GRPC_ADDR", "127.0.0.1:0")
            .env("SHORTENER_ADMIN_ADDR", "127.0.0.1:0")
            .envs(env.iter().copied());
        let out = exited(&mut command).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{env:?}: {stderr}");
        assert!(
            stderr.starts_with(&format!("error: {names}")),
            "{env:?}: {stderr}"
        );
        assert!(!stderr.contains("Caused by"), "{env:?}: {stderr}");
        assert!(
            !dir.path().join("data").exists(),
            "{env:?} wrote the data directory"
        );
    }
}

/// A `SHORTENER_*` variable no setting reads is warned of at start, with the setting a typo
/// away from it; `SHORTENER_DATABASE_URL` without `DATABASE_URL` (a node that would quietly
/// serve from the embedded store) is refused before anything is written.
#[tokio::test]
async fn variables_no_setting_reads_are_warned_of_and_a_misplaced_database_url_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let run = async |args: &[&str], env: &[(&str, &str)]| {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_shortener"));
        command
            .args(args)
            .env_remove("DATABASE_URL")
            .env("SHORTENER_DATA_DIR", &data)
            .env("SHORTENER_HTTP_ADDR", "127.0.0.1:0")
            .env("SHORTENER_GRPC_ADDR", "127.0.0.1:0")
            .env("SHORTENER_ADMIN_ADDR", "127.0.0.1:0");
        for (name, value) in env {
            command.env(name, value);
        }
        exited(&mut command).await
    };
    for args in [&[][..], &["serve"], &["migrate"]] {
        let out = run(args, &[("SHORTENER_DATABASE_URL", "postgres://db/links")]).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("reads its database from DATABASE_URL"),
            "{args:?}: {stderr}"
        );
        assert!(!data.exists(), "{args:?} wrote the data directory");
    }
    let out = run(
        &["migrate"],
        &[
            ("SHORTENER_HTTP_ADRR", "127.0.0.1:1"),
            ("SHORTENER_CACHE_SIZE", "64MiB"),
        ],
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(
            "SHORTENER_HTTP_ADRR is set but no setting reads it: did you mean SHORTENER_HTTP_ADDR?"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("SHORTENER_CACHE_SIZE is set but no setting reads it"),
        "{stderr}"
    );
    assert!(!stderr.contains("SHORTENER_DATA_DIR is set"), "{stderr}");
    assert!(
        stderr.contains("the embedded store in the data directory is migrated"),
        "{stderr}"
    );
}

/// What `command` printed and how it exited, within 30 s: a start that should have been
/// refused and serves instead fails the test rather than holding it.
async fn exited(command: &mut tokio::process::Command) -> std::process::Output {
    command.kill_on_drop(true);
    tokio::time::timeout(std::time::Duration::from_secs(30), command.output())
        .await
        .expect("the binary exits within 30 s (a start that should be refused served)")
        .expect("run shortener")
}
