//! Operations: admin endpoints, gRPC health and reflection, readiness-first graceful drain.

use crate::helpers::{Server, lease};
use futures::StreamExt;
use id_service::Config;
use std::time::Duration;
use testkit::TestDb;
use tonic::transport::Channel;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

async fn channel(server: &Server) -> Channel {
    tonic::transport::Endpoint::from_shared(server.endpoint())
        .expect("endpoint")
        .connect()
        .await
        .expect("connect")
}

async fn get(server: &Server, path: &str) -> (u16, String) {
    let response = reqwest::get(format!("http://{}{path}", server.admin_addr))
        .await
        .expect("admin request");
    let status = response.status().as_u16();
    (status, response.text().await.expect("admin body"))
}

async fn health_of(channel: Channel, service: &str) -> ServingStatus {
    let response = HealthClient::new(channel)
        .check(HealthCheckRequest {
            service: service.into(),
        })
        .await
        .expect("health check")
        .into_inner();
    ServingStatus::try_from(response.status).expect("a known status")
}

#[tokio::test]
async fn admin_port_reports_liveness_readiness_and_metrics() {
    let db = TestDb::create().await;
    let server = Server::start(Config::for_tests(db.url())).await;
    let mut client = server.client().await;
    lease(&mut client, "links", 25, "pod").await.expect("lease");
    lease(&mut client, "links", 0, "pod")
        .await
        .expect_err("size 0");

    assert_eq!(get(&server, "/healthz").await.0, 200);
    assert_eq!(get(&server, "/readyz").await.0, 200);
    let (status, metrics) = get(&server, "/metrics").await;
    assert_eq!(status, 200);
    for expected in [
        "idservice_leases_total{namespace=\"links\"} 1",
        "idservice_ids_leased_total{namespace=\"links\"} 25",
        "idservice_lease_errors_total{reason=\"invalid_argument\"} 1",
        "idservice_lease_duration_seconds_count 1",
        "idservice_namespace_last_id{namespace=\"links\"} 26",
        "idservice_db_connections{state=\"max\"} 8",
        "idservice_ready 1",
    ] {
        assert!(
            metrics.contains(expected),
            "missing {expected:?} in\n{metrics}"
        );
    }
    server.stop().await;
}

#[tokio::test]
async fn grpc_health_and_reflection_v1_and_v1alpha_are_served() {
    let db = TestDb::create().await;
    let server = Server::start(Config::for_tests(db.url())).await;
    let channel = channel(&server).await;
    assert_eq!(health_of(channel.clone(), "").await, ServingStatus::Serving);
    assert_eq!(
        health_of(channel.clone(), "idalloc.v1.IdAllocator").await,
        ServingStatus::Serving
    );

    use tonic_reflection::pb::{v1, v1alpha};
    let request = v1::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(v1::server_reflection_request::MessageRequest::ListServices(
            String::new(),
        )),
    };
    let mut responses = v1::server_reflection_client::ServerReflectionClient::new(channel.clone())
        .server_reflection_info(tokio_stream::iter([request]))
        .await
        .expect("reflection v1")
        .into_inner();
    let response = responses.next().await.expect("a reply").expect("ok");
    let Some(v1::server_reflection_response::MessageResponse::ListServicesResponse(list)) =
        response.message_response
    else {
        panic!("unexpected reflection reply {response:?}");
    };
    let names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
    assert!(
        names.contains(&"idalloc.v1.IdAllocator".to_string()),
        "{names:?}"
    );
    assert!(
        names.contains(&"grpc.health.v1.Health".to_string()),
        "{names:?}"
    );

    let request = v1alpha::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(
            v1alpha::server_reflection_request::MessageRequest::ListServices(String::new()),
        ),
    };
    let mut responses = v1alpha::server_reflection_client::ServerReflectionClient::new(channel)
        .server_reflection_info(tokio_stream::iter([request]))
        .await
        .expect("reflection v1alpha")
        .into_inner();
    let response = responses.next().await.expect("a reply").expect("ok");
    assert!(
        matches!(
            response.message_response,
            Some(v1alpha::server_reflection_response::MessageResponse::ListServicesResponse(_))
        ),
        "{response:?}"
    );
    server.stop().await;
}

/// Holds the namespace row lock from outside, so a lease call stays in flight until released.
async fn block_namespace(db: &TestDb) -> tokio_postgres::Client {
    let conn = db.connect().await;
    conn.batch_execute("BEGIN; SELECT * FROM id_namespaces WHERE name = 'links' FOR UPDATE")
        .await
        .expect("lock the namespace");
    conn
}

/// Waits until a lease call is waiting on the namespace lock inside PostgreSQL.
async fn wait_for_lock_waiter(db: &TestDb) {
    let conn = db.connect().await;
    let waiting = testkit::wait_until(Duration::from_secs(5), || async {
        let row = conn
            .query_one(
                "SELECT count(*) FROM pg_stat_activity
                  WHERE wait_event_type = 'Lock' AND query LIKE '%id_grant(%'",
                &[],
            )
            .await
            .expect("pg_stat_activity");
        row.get::<_, i64>(0) > 0
    })
    .await;
    assert!(waiting, "the lease never reached the lock");
}

#[tokio::test]
async fn shutdown_turns_readiness_off_first_then_lets_in_flight_leases_finish() {
    let db = TestDb::create().await;
    let server = Server::start(Config::for_tests(db.url())).await;
    let mut client = server.client().await;
    lease(&mut client, "links", 10, "pod").await.expect("lease");
    let mut health = HealthClient::new(channel(&server).await)
        .watch(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .expect("watch health")
        .into_inner();
    let first = health.next().await.expect("a status").expect("ok");
    assert_eq!(first.status, ServingStatus::Serving as i32);

    let blocker = block_namespace(&db).await;
    let in_flight = tokio::spawn({
        let mut client = client.clone();
        async move { lease(&mut client, "links", 10, "slow").await }
    });
    wait_for_lock_waiter(&db).await;

    server.shutdown_token().cancel();
    let next = tokio::time::timeout(Duration::from_secs(5), health.next())
        .await
        .expect("a health update after shutdown began")
        .expect("a status")
        .expect("ok");
    assert_eq!(
        next.status,
        ServingStatus::NotServing as i32,
        "gRPC health must go NOT_SERVING first"
    );
    drop(health);
    let (status, body) = get(&server, "/readyz").await;
    assert_eq!((status, body.as_str()), (503, "draining\n"));
    assert!(!in_flight.is_finished(), "the in-flight lease was cut off");

    blocker
        .batch_execute("ROLLBACK")
        .await
        .expect("release the lock");
    let granted = in_flight
        .await
        .expect("join")
        .expect("the in-flight lease completes during the drain");
    assert_eq!(granted.end - granted.start, 10);
    server.stop().await;
}

#[tokio::test]
async fn the_drain_is_bounded_by_the_drain_timeout() {
    let db = TestDb::create().await;
    let config = Config {
        drain_timeout: Duration::from_millis(300),
        ..Config::for_tests(db.url())
    };
    let server = Server::start(config).await;
    let mut client = server.client().await;
    lease(&mut client, "links", 10, "pod").await.expect("lease");

    let blocker = block_namespace(&db).await;
    let in_flight = tokio::spawn({
        let mut client = client.clone();
        async move { lease(&mut client, "links", 10, "stuck").await }
    });
    wait_for_lock_waiter(&db).await;
    // Stopping returns although the call never finishes by itself.
    let started = tokio::time::Instant::now();
    server.stop().await;
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "shutdown took {:?}",
        started.elapsed()
    );
    let status = in_flight
        .await
        .expect("join")
        .expect_err("the stuck call was cut off");
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "the cut-off call took {:?}",
        started.elapsed()
    );
    drop(blocker);
}

#[tokio::test]
async fn a_lease_stuck_behind_a_lock_gives_up_at_the_request_timeout_inside_postgres_too() {
    let db = TestDb::create().await;
    let config = Config {
        request_timeout: Duration::from_millis(500),
        ..Config::for_tests(db.url())
    };
    let server = Server::start(config).await;
    let mut client = server.client().await;
    lease(&mut client, "links", 10, "pod").await.expect("lease");

    let blocker = block_namespace(&db).await;
    let started = tokio::time::Instant::now();
    let status = lease(&mut client, "links", 10, "stuck")
        .await
        .expect_err("the namespace is locked");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "took {:?}",
        started.elapsed()
    );
    assert_ne!(status.code(), tonic::Code::Ok);
    // The statement was cancelled in PostgreSQL as well: nothing keeps waiting on the lock.
    let conn = db.connect().await;
    let gone = testkit::wait_until(Duration::from_secs(3), || async {
        let row = conn
            .query_one(
                "SELECT count(*) FROM pg_stat_activity
                  WHERE wait_event_type = 'Lock' AND query LIKE '%id_grant(%'",
                &[],
            )
            .await
            .expect("pg_stat_activity");
        row.get::<_, i64>(0) == 0
    })
    .await;
    assert!(gone, "the grant kept waiting inside PostgreSQL");
    blocker.batch_execute("ROLLBACK").await.expect("release");
    lease(&mut client, "links", 10, "pod")
        .await
        .expect("leases work again");
    server.stop().await;
}
