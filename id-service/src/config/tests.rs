//! Parsing and validation of the configuration.

use super::*;

#[test]
fn durations_parse_with_or_without_units() {
    // The switches read as the shortener's do.
    for (args, on) in [
        (&["id-service", "--auto-create-namespaces", "on"][..], true),
        (&["id-service", "--auto-create-namespaces", "TRUE"], true),
        (&["id-service", "--auto-create-namespaces", "0"], false),
        (&["id-service"], false),
    ] {
        let Ok(Action::Serve(config)) = Cli::action_from(args.iter().copied()) else {
            panic!("{args:?}");
        };
        assert_eq!(config.auto_create_namespaces, on, "{args:?}");
    }
    assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
    assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
    assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
    assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
    assert!(parse_duration("ten").is_err());
    assert_eq!(parse_duration("5h"), Ok(Duration::from_secs(18_000)));
    assert_eq!(parse_duration("1d"), Ok(Duration::from_secs(86_400)));
    assert!(parse_duration("5w").is_err());
}

#[test]
fn defaults_bind_loopback_and_create_no_namespace_on_first_use() {
    let Ok(Action::Serve(config)) =
        Cli::action_from(["id-service", "--database-url", "postgres://u@h/db"])
    else {
        panic!("no subcommand does not serve");
    };
    assert_eq!(config.grpc_addr.to_string(), "127.0.0.1:50051");
    assert_eq!(config.http_addr.to_string(), "127.0.0.1:8091");
    assert_eq!(config.admin_addr.to_string(), "127.0.0.1:9091");
    assert!(!config.auto_create_namespaces);
    assert!(!config.insecure_no_auth);
    config.validate().expect("defaults are valid");
}

/// `id-service serve --flag` and `id-service --flag serve` (or `migrate`) mean the same; flags
/// on both sides are refused rather than one side dropped.
#[test]
fn settings_go_before_or_after_the_subcommand_but_not_both() {
    let settings = |args: &[&str]| match Cli::action_from(args.iter().copied()) {
        Ok(Action::Serve(config)) => ("serve", config),
        Ok(Action::Migrate(config)) => ("migrate", config),
        Ok(Action::AddToken(_)) => panic!("{args:?}: tokens add"),
        Err(error) => panic!("{args:?}: {error}"),
    };
    let given = ["--namespaces", "a,b", "--grpc-addr", "127.0.0.1:1"];
    for (sub, before) in [
        (None, true),
        (Some("serve"), false),
        (Some("serve"), true),
        (Some("migrate"), false),
        (Some("migrate"), true),
    ] {
        let mut args = vec!["id-service"];
        if before {
            args.extend(given);
        }
        args.extend(sub);
        if !before {
            args.extend(given);
        }
        let (chosen, config) = settings(&args);
        assert_eq!(chosen, sub.unwrap_or("serve"), "{args:?}");
        assert_eq!(config.namespaces, ["a", "b"], "{args:?}");
        assert_eq!(config.grpc_addr.to_string(), "127.0.0.1:1", "{args:?}");
    }
    let (_, plain) = settings(&["id-service", "serve"]);
    assert_eq!(plain.grpc_addr.to_string(), "127.0.0.1:50051");
    for args in [
        &[
            "id-service",
            "--namespaces",
            "a",
            "serve",
            "--grpc-addr",
            "127.0.0.1:1",
        ][..],
        &[
            "id-service",
            "--insecure-no-auth",
            "migrate",
            "--namespaces",
            "a",
        ],
        &[
            "id-service",
            "--namespaces",
            "a",
            "tokens",
            "add",
            "--file",
            "t",
            "--name",
            "n",
            "--namespaces",
            "a",
            "--scopes",
            "lease",
            "--unlimited",
        ],
    ] {
        let Err(error) = Cli::action_from(args.iter().copied()) else {
            panic!("{args:?} was taken");
        };
        assert_eq!(
            error.kind(),
            clap::error::ErrorKind::ArgumentConflict,
            "{args:?}: {error}"
        );
    }
}

#[test]
fn the_tokens_subcommand_needs_no_database() {
    let action = Cli::action_from([
        "id-service",
        "tokens",
        "add",
        "--file",
        "t.toml",
        "--name",
        "billing",
        "--namespaces",
        "orders,invoices",
        "--scopes",
        "allocate",
        "--ids-per-second",
        "100",
    ]);
    let Ok(Action::AddToken(add)) = action else {
        panic!("not tokens add");
    };
    assert_eq!(add.namespaces, ["orders", "invoices"]);
    assert_eq!(add.ids_per_second, Some(100));
}

#[test]
fn tokens_add_needs_a_quota_or_an_explicit_unlimited() {
    let base = [
        "id-service",
        "tokens",
        "add",
        "--file",
        "t.toml",
        "--name",
        "billing",
        "--namespaces",
        "orders",
        "--scopes",
        "lease",
    ];
    let parse = |extra: &[&str]| Cli::action_from(base.iter().chain(extra));
    let Err(error) = parse(&[]) else {
        panic!("no quota was taken");
    };
    assert!(error.to_string().contains("--unlimited"), "{error}");
    assert!(
        parse(&["--leases-per-second", "5"]).is_err(),
        "no IDs quota"
    );
    assert!(parse(&["--unlimited", "--ids-per-second", "5"]).is_err());
    assert!(parse(&["--unlimited", "--leases-per-second", "5"]).is_err());
    let Ok(Action::AddToken(add)) = parse(&["--unlimited"]) else {
        panic!("not tokens add");
    };
    assert!(add.unlimited && add.ids_per_second.is_none());
    assert!(parse(&["--ids-per-second", "5", "--leases-per-second", "1"]).is_ok());
}

#[test]
fn serving_needs_a_tokens_file_or_an_explicit_insecure_flag_but_not_both() {
    let base = Config {
        insecure_no_auth: false,
        ..Config::for_tests("postgres://postgres@127.0.0.1/x")
    };
    let error = base.validate_serving().expect_err("neither");
    assert!(error.to_string().contains("--insecure-no-auth"), "{error}");
    let both = Config {
        insecure_no_auth: true,
        tokens_file: Some("tokens.toml".into()),
        ..base.clone()
    };
    assert!(both.validate_serving().is_err());
    let tokens = Config {
        tokens_file: Some("tokens.toml".into()),
        ..base.clone()
    };
    tokens.validate_serving().expect("tokens file");
    let insecure = Config {
        insecure_no_auth: true,
        ..base
    };
    insecure.validate_serving().expect("insecure by choice");
}

#[test]
fn inconsistent_settings_are_refused_with_a_reason() {
    let base = Config::for_tests("postgres://postgres@127.0.0.1/x");
    base.validate().expect("test config is valid");
    let cases: Vec<(&str, Config)> = vec![
        (
            "min above max",
            Config {
                min_block: 10,
                max_block: 5,
                ..base.clone()
            },
        ),
        (
            "min zero",
            Config {
                min_block: 0,
                ..base.clone()
            },
        ),
        (
            "no url",
            Config {
                database_url: String::new(),
                ..base.clone()
            },
        ),
        (
            "bad url",
            Config {
                database_url: "postgres://h:notaport/x".into(),
                ..base.clone()
            },
        ),
        (
            "no host",
            Config {
                database_url: "dbname=x".into(),
                ..base.clone()
            },
        ),
        (
            "missing CA file",
            Config {
                database_url: "postgres://h/x?sslmode=require".into(),
                database_ca_file: Some("/nonexistent/ca.pem".into()),
                ..base.clone()
            },
        ),
        (
            "CA file without certificates",
            Config {
                database_ca_file: Some("/etc/hostname".into()),
                ..base.clone()
            },
        ),
        (
            "bad namespace",
            Config {
                namespaces: vec!["Links".into()],
                ..base.clone()
            },
        ),
        (
            "huge bound",
            Config {
                namespace_max: u64::MAX,
                ..base.clone()
            },
        ),
        (
            "legacy token",
            Config {
                legacy_token: Some("a".parse().expect("infallible")),
                ..base.clone()
            },
        ),
        (
            "no pool",
            Config {
                db_pool_size: 0,
                ..base.clone()
            },
        ),
        (
            "zero drain",
            Config {
                drain_timeout: Duration::ZERO,
                ..base.clone()
            },
        ),
        (
            "zero count",
            Config {
                allocate_max_count: 0,
                ..base.clone()
            },
        ),
        (
            "segments below the count",
            Config {
                segment_min: 100,
                allocate_max_count: 1000,
                ..base.clone()
            },
        ),
        (
            "segment min above max",
            Config {
                segment_min: 20_000,
                segment_max: 10_000,
                ..base.clone()
            },
        ),
        (
            "instance with a newline",
            Config {
                instance: Some("a\nb".into()),
                ..base.clone()
            },
        ),
        (
            "huge margin",
            Config {
                failover_margin_ids: u64::MAX,
                ..base.clone()
            },
        ),
    ];
    for (case, config) in cases {
        let err = config.validate().expect_err(case);
        assert!(!err.to_string().is_empty(), "{case}");
    }
}

#[test]
fn debug_output_hides_secrets() {
    let config = Config {
        legacy_token: Some("hunter2".parse().expect("infallible")),
        ..Config::for_tests("postgres://u:pa55word@h/db")
    };
    let shown = format!("{config:?}");
    assert!(
        !shown.contains("hunter2") && !shown.contains("pa55word"),
        "{shown}"
    );
}

/// A setting that takes one of a few words takes it in any case (`ID_SERVICE_LOG_FORMAT=JSON`),
/// in every subcommand.
#[test]
fn word_settings_take_any_case() {
    use clap::CommandFactory;
    fn walk(command: &clap::Command, seen: &mut usize) {
        for arg in command.get_arguments() {
            if arg.get_env().is_some() && !arg.get_possible_values().is_empty() {
                *seen += 1;
                let name = (command.get_name(), arg.get_id());
                assert!(arg.is_ignore_case_set(), "{name:?} is case-sensitive");
            }
        }
        command.get_subcommands().for_each(|sub| walk(sub, seen));
    }
    let mut seen = 0;
    walk(&Cli::command(), &mut seen);
    assert!(seen >= 1, "no word settings found");
}
