//! What does not fit a pooler in transaction mode is refused at start-up with a message that
//! names it, and migrates nothing: a direct URL at a standby, a database whose sessions do
//! not commit synchronously (the node cannot set it per session there). A node told `session`
//! behind a pooler in transaction mode has its failures explained as a likely mismatch.

use crate::helpers::{Node, Stack};
use crate::pooler_transaction::{SERVER_CONNECTIONS, behind, has_links_table};
use shortener::App;
use shortener::store::LinkStore;
use testkit::cluster::Cluster;
use testkit::pgbouncer::{Mode, PgBouncer};

async fn refused(config: shortener::Config) -> String {
    match App::build(config).await {
        Ok(_) => panic!("the settings were accepted"),
        Err(error) => format!("{error:#}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn what_does_not_fit_transaction_pooling_is_refused_and_migrates_nothing() {
    let primary = Cluster::start(&[]).await;
    let direct = primary.create_database("links").await;
    let standby = primary.start_standby(&[]).await;
    let bouncer = PgBouncer::start(primary.port(), Mode::Transaction, SERVER_CONNECTIONS).await;
    let stack = Stack::on_database(&direct).await;

    let at_standby = behind(&stack, "a", &bouncer, &standby.database_url("links"));
    let message = refused(at_standby).await;
    assert!(
        message.contains("SHORTENER_DATABASE_DIRECT_URL must reach the primary"),
        "{message}"
    );
    assert!(!has_links_table(&direct).await, "a refused start migrated");

    // A database of its own, loosened before the pooler opens a server connection to it.
    let lax = primary.create_database("lax").await;
    primary
        .connect()
        .await
        .batch_execute("ALTER DATABASE lax SET synchronous_commit = off")
        .await
        .expect("loosen the database's commits");
    let message = refused(behind(&stack, "b", &bouncer, &lax)).await;
    assert!(
        message.contains("synchronous_commit") && message.contains("\"off\""),
        "{message}"
    );
    assert!(!has_links_table(&lax).await, "a refused start migrated");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_told_session_behind_a_transaction_pooler_is_explained() {
    let cluster = Cluster::start(&[]).await;
    let direct = cluster.create_database("links").await;
    let bouncer = PgBouncer::start(cluster.port(), Mode::Transaction, 2).await;
    let stack = Stack::on_database(&direct).await;
    // Migrated and filled by a node that is told the truth.
    let right = Node::start(behind(&stack, "right", &bouncer, &direct)).await;
    let creates = (0..40).map(|i| right.create_url_owned(format!("https://example.com/{i}")));
    let codes = futures::future::join_all(creates).await;

    let mut wrong = stack.config("wrong");
    wrong.store.database_url = Some(bouncer.database_url("links"));
    let explained = "a pooler in transaction mode between this service and PostgreSQL?";
    let error = match App::build(wrong).await {
        // Its start may already fail on a statement another server connection never saw.
        Err(error) => format!("{error:#}"),
        // Otherwise its prepared reads do, once connections and server connections mix.
        Ok(app) => {
            let store = &app.node().store;
            let mut found = None;
            for _ in 0..20 {
                let reads = codes.iter().map(|code| store.get(code));
                let failed = futures::future::join_all(reads)
                    .await
                    .into_iter()
                    .find_map(Result::err);
                if let Some(error) = failed {
                    found = Some(error.to_string());
                    break;
                }
            }
            found.expect("no read failed: the pooler did not mix server connections")
        }
    };
    assert!(error.contains(explained), "{error}");
}
