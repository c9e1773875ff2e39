//! Behind a real PgBouncer (Debian's) in transaction pooling mode: with
//! `ID_SERVICE_DATABASE_POOL_MODE=transaction` the ledger prepares nothing that outlives a
//! transaction and migrates over `ID_SERVICE_DATABASE_DIRECT_URL`, so grants, look-ups and
//! namespace listings work while a few server connections serve many clients. Settings that do
//! not fit together are refused at start-up with a message that names them.

use crate::helpers::{Server, assert_ranges_disjoint, lease};
use clap::Parser;
use id_service::{App, Cli, Config};
use pgtls::pooler::PoolMode;
use proto::idalloc::v1::{ListNamespacesRequest, LookupIdRequest};
use testkit::cluster::Cluster;
use testkit::pgbouncer::{Mode, PgBouncer};

fn behind(bouncer: &PgBouncer, direct: &str) -> Config {
    let mut config = Config::for_tests(&bouncer.database_url("ids"));
    config.database_pool_mode = PoolMode::Transaction;
    config.database_direct_url = Some(direct.to_string());
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn grants_and_reads_work_through_pgbouncer_in_transaction_mode() {
    let cluster = Cluster::start(&[]).await;
    let direct = cluster.create_database("ids").await;
    // Two server connections for the service's eight: every transaction may land on another.
    let bouncer = PgBouncer::start(cluster.port(), Mode::Transaction, 2).await;
    let server = Server::start(behind(&bouncer, &direct)).await;

    let grants = (0..40).map(|i| {
        let server = &server;
        async move {
            let mut client = server.client().await;
            let l = lease(&mut client, "links", 10 + i, &format!("holder-{i}"))
                .await
                .unwrap_or_else(|e| panic!("grant {i} through PgBouncer: {e:?}"));
            (l.start, l.end)
        }
    });
    let ranges = futures::future::join_all(grants).await;
    assert_ranges_disjoint(&ranges);

    let mut client = server.client().await;
    let (start, _) = ranges[7];
    let found = client
        .lookup_id(LookupIdRequest {
            namespace: "links".into(),
            id: start,
        })
        .await
        .expect("look-up through PgBouncer")
        .into_inner();
    assert_eq!(found.start, start);
    let namespaces = server
        .admin_client()
        .await
        .list_namespaces(ListNamespacesRequest::default())
        .await
        .expect("list namespaces through PgBouncer")
        .into_inner();
    assert!(
        namespaces.namespaces.iter().any(|n| n.name == "links"),
        "{namespaces:?}"
    );
    // The migrations ran (over the direct URL): the ledger's table is there.
    assert!(has_ledger(&direct).await);
    server.stop().await;
}

/// Whether the database at `url` holds the ledger's table.
async fn has_ledger(url: &str) -> bool {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(connection);
    client
        .query_one("SELECT to_regclass('id_leases') IS NOT NULL", &[])
        .await
        .expect("look for the ledger")
        .get(0)
}

async fn refused(config: Config) -> String {
    match App::build(config).await {
        Ok(_) => panic!("the settings were accepted"),
        Err(error) => format!("{error:#}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn settings_that_do_not_fit_are_refused_with_a_message() {
    let primary = Cluster::start(&[]).await;
    let direct = primary.create_database("ids").await;
    let standby = primary.start_standby(&[]).await;
    let bouncer = PgBouncer::start(primary.port(), Mode::Transaction, 2).await;
    let through = bouncer.database_url("ids");

    let mut cases: Vec<(&str, Config, &str)> = Vec::new();
    let mut no_direct = Config::for_tests(&through);
    no_direct.database_pool_mode = PoolMode::Transaction;
    cases.push((
        "transaction mode without a direct URL",
        no_direct,
        "needs ID_SERVICE_DATABASE_DIRECT_URL",
    ));
    let mut session_direct = Config::for_tests(&through);
    session_direct.database_direct_url = Some(direct.clone());
    cases.push((
        "a direct URL in session mode",
        session_direct,
        "read only with ID_SERVICE_DATABASE_POOL_MODE=transaction",
    ));
    let mut malformed = Config::for_tests(&through);
    malformed.database_pool_mode = PoolMode::Transaction;
    malformed.database_direct_url = Some("postgres://h:notaport/x".into());
    cases.push((
        "a malformed direct URL",
        malformed,
        "ID_SERVICE_DATABASE_DIRECT_URL is not a valid",
    ));
    let at_standby = behind(&bouncer, &standby.database_url("ids"));
    cases.push((
        "a direct URL at a standby",
        at_standby,
        "ID_SERVICE_DATABASE_DIRECT_URL must reach the primary",
    ));
    for (what, config, expected) in cases {
        let message = refused(config).await;
        assert!(message.contains(expected), "{what}: {message}");
    }
    // Nothing was migrated by the refused starts.
    assert!(!has_ledger(&direct).await);

    // Any case is the mode it spells, as PgBouncer's own `pool_mode` may be written.
    let parsed = Cli::try_parse_from([
        "id-service",
        "--database-url",
        "postgres://h/db",
        "--database-pool-mode",
        "Transaction",
    ]);
    assert!(parsed.is_ok(), "{:?}", parsed.err());
    for bad in ["statement", "", "txn"] {
        let error = Cli::try_parse_from([
            "id-service",
            "--database-url",
            "postgres://h/db",
            "--database-pool-mode",
            bad,
        ])
        .map(|_| ())
        .expect_err(bad);
        assert!(
            error.to_string().contains("session or transaction"),
            "{bad}: {error}"
        );
    }
}
