//! Namespace management: create with bounds and a block limit, describe, list; bad requests
//! change nothing.

use crate::helpers::tokens::{self, Caller};
use crate::helpers::{Server, allocate, authed, count_rows, lease_as};
use id_service::Config;
use proto::idalloc::v1::{
    CreateNamespaceRequest, DescribeNamespaceRequest, ListNamespacesRequest, NamespaceInfo,
};
use testkit::TestDb;
use tonic::Code;

const ADMIN: Caller = Caller::new("ops", &["*"], &["admin", "lease", "allocate"]);
const TEAM: Caller = Caller::new("team", &["orders", "invoices"], &["admin"]);

async fn server(db: &TestDb, dir: &tempfile::TempDir) -> Server {
    Server::start(Config {
        tokens_file: Some(tokens::write(dir.path(), &[ADMIN, TEAM])),
        insecure_no_auth: false,
        auto_create_namespaces: false,
        max_block: 1_000_000,
        segment_max: 1_000_000,
        ..Config::for_tests(db.url())
    })
    .await
}

fn create(name: &str, first_id: u64, max_id: u64, max_block: u64) -> CreateNamespaceRequest {
    CreateNamespaceRequest {
        name: name.into(),
        first_id,
        max_id,
        max_block,
    }
}

#[tokio::test]
async fn an_admin_creates_a_namespace_with_bounds_and_a_block_limit_the_ledger_enforces() {
    let (db, dir) = (
        TestDb::create().await,
        tempfile::tempdir().expect("tempdir"),
    );
    let server = server(&db, &dir).await;
    let (mut admin, mut client) = (server.admin_client().await, server.client().await);
    let token = ADMIN.token();
    let created = admin
        .create_namespace(authed(create("orders", 1000, 5000, 100), Some(&token)))
        .await
        .expect("create")
        .into_inner();
    assert_eq!(
        (
            created.first_id,
            created.max_id,
            created.max_block,
            created.last_id
        ),
        (1000, 5000, 100, 999)
    );
    assert_eq!((created.ids_granted, created.remaining), (0, 4001));
    assert!(created.projected_exhaustion.is_none(), "no rate yet");
    assert!(created.timeline >= 1, "{created:?}");

    let first = lease_as(&mut client, Some(&token), "orders", 100, "pod", None)
        .await
        .expect("lease");
    assert_eq!(
        (first.start, first.end),
        (1000, 1100),
        "the first ID is first_id"
    );
    let status = lease_as(&mut client, Some(&token), "orders", 101, "pod", None)
        .await
        .expect_err("above the namespace's block limit");
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    // AllocateIds segments respect the limit too.
    let ranges = allocate(&mut client, Some(&token), "orders", 150)
        .await
        .expect("allocate");
    assert_eq!(ranges.iter().map(|(s, e)| e - s).sum::<u64>(), 150);

    let info = describe(&mut admin, &token, "orders")
        .await
        .expect("describe");
    assert!(info.last_id >= 1099 + 150, "{info:?}");
    assert_eq!(info.remaining, 5000 - info.last_id);
    assert!(info.ids_granted >= 250, "{info:?}");
    assert!(info.grant_rate_per_second > 0.0, "{info:?}");
    let exhaustion = info
        .projected_exhaustion
        .expect("a projection once IDs flow");
    let created_at = info.created_at.expect("created_at");
    assert!(exhaustion.seconds >= created_at.seconds, "{info:?}");
    assert_eq!(info.timeline_jumps, 0);

    let again = admin
        .create_namespace(authed(create("orders", 0, 0, 0), Some(&token)))
        .await
        .expect_err("exists");
    assert_eq!(again.code(), Code::AlreadyExists);
    server.stop().await;
}

async fn describe(
    admin: &mut proto::idalloc::v1::namespace_admin_client::NamespaceAdminClient<
        tonic::transport::Channel,
    >,
    token: &str,
    name: &str,
) -> Result<NamespaceInfo, tonic::Status> {
    admin
        .describe_namespace(authed(
            DescribeNamespaceRequest { name: name.into() },
            Some(token),
        ))
        .await
        .map(tonic::Response::into_inner)
}

#[tokio::test]
async fn bad_namespace_requests_are_refused_and_create_nothing() {
    let (db, dir) = (
        TestDb::create().await,
        tempfile::tempdir().expect("tempdir"),
    );
    let server = server(&db, &dir).await;
    let mut admin = server.admin_client().await;
    let (ops, team) = (ADMIN.token(), TEAM.token());
    let cases = [
        (
            "bad name",
            create("Orders", 0, 0, 0),
            Some(&ops),
            Code::InvalidArgument,
        ),
        (
            "first above max",
            create("a", 10, 5, 0),
            Some(&ops),
            Code::InvalidArgument,
        ),
        (
            "bound too high",
            create("a", 0, u64::MAX, 0),
            Some(&ops),
            Code::InvalidArgument,
        ),
        (
            "block above the server's",
            create("a", 0, 0, 2_000_000),
            Some(&ops),
            Code::InvalidArgument,
        ),
        (
            "namespace not in the token",
            create("payroll", 0, 0, 0),
            Some(&team),
            Code::PermissionDenied,
        ),
        (
            "no token",
            create("a", 0, 0, 0),
            None,
            Code::Unauthenticated,
        ),
    ];
    for (case, request, token, code) in cases {
        let status = admin
            .create_namespace(authed(request, token.map(String::as_str)))
            .await
            .expect_err(case);
        assert_eq!(status.code(), code, "{case}: {status:?}");
    }
    let conn = db.connect().await;
    assert_eq!(
        count_rows(&conn, "id_namespaces").await,
        0,
        "a refused call created one"
    );
    let status = describe(&mut admin, &ops, "missing")
        .await
        .expect_err("unknown");
    assert_eq!(status.code(), Code::NotFound);
    server.stop().await;
}

#[tokio::test]
async fn listings_page_in_name_order_and_show_only_the_namespaces_a_token_covers() {
    let (db, dir) = (
        TestDb::create().await,
        tempfile::tempdir().expect("tempdir"),
    );
    let server = server(&db, &dir).await;
    let mut admin = server.admin_client().await;
    let (ops, team) = (ADMIN.token(), TEAM.token());
    for name in ["orders", "invoices", "links", "audit", "zeta"] {
        admin
            .create_namespace(authed(create(name, 0, 0, 0), Some(&ops)))
            .await
            .expect("create");
    }
    let list = |token: String, limit: u32, after: &str| {
        let mut admin = admin.clone();
        let after = after.to_string();
        async move {
            admin
                .list_namespaces(authed(ListNamespacesRequest { limit, after }, Some(&token)))
                .await
                .expect("list")
                .into_inner()
        }
    };
    let names = |page: &proto::idalloc::v1::ListNamespacesResponse| {
        page.namespaces
            .iter()
            .map(|n| n.name.clone())
            .collect::<Vec<_>>()
    };
    let first = list(ops.clone(), 2, "").await;
    assert_eq!(names(&first), ["audit", "invoices"]);
    assert_eq!(first.next_after, "invoices");
    let second = list(ops.clone(), 2, &first.next_after).await;
    assert_eq!(names(&second), ["links", "orders"]);
    let last = list(ops.clone(), 2, &second.next_after).await;
    assert_eq!(names(&last), ["zeta"]);
    assert_eq!(last.next_after, "", "the end of the listing");
    assert_eq!(names(&list(team, 0, "").await), ["invoices", "orders"]);
    let status = admin
        .list_namespaces(authed(
            ListNamespacesRequest {
                limit: 1001,
                after: String::new(),
            },
            Some(&ops),
        ))
        .await
        .expect_err("page too big");
    assert_eq!(status.code(), Code::InvalidArgument);
    server.stop().await;
}
