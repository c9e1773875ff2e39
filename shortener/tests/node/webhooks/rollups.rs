//! The hourly `clicks.rollup` event: told once per tenant, hour and revision, whatever the
//! number of maintenance runs and nodes; clicks that reach an hour after its event make the
//! hour's next revision.

use super::support::Receiver;
use super::{SECRET, config, receiver, register, verified};
use crate::helpers::{Backend, Node, Stack, wait_for};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::time::Duration;

/// A node on a manual clock at 2026-01-10 10:30, tenant acme's webhook endpoint at a receiver
/// answering `status`, and a link of acme's.
pub(super) struct Acme {
    pub(super) node: Node,
    pub(super) receiver: Receiver,
    pub(super) clock: shortener::clock::Clock,
    pub(super) start: chrono::DateTime<chrono::Utc>,
    pub(super) code: String,
    /// The node's configuration, to start it again.
    pub(super) config: shortener::Config,
}

/// [`Acme`], its endpoint disabled after `max_failures`, with `adjust` applied to the node's
/// configuration.
pub(super) async fn acme(
    stack: &Stack,
    status: u16,
    max_failures: u32,
    adjust: impl FnOnce(&mut shortener::Config),
) -> Acme {
    let receiver = receiver(status, Duration::ZERO).await;
    let (mut config, keys) = config(stack, max_failures);
    adjust(&mut config);
    let start = chrono::DateTime::parse_from_rfc3339("2026-01-10T10:30:00Z")
        .expect("time")
        .to_utc();
    let clock = shortener::clock::Clock::manual(start);
    config.clock = clock.clone();
    let node = Node::start(config.clone()).await;
    let (status, _) = register(
        &node,
        &keys.admin,
        json!({ "tenant": "acme", "url": receiver.url, "secret": SECRET }),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let (_, link) = node
        .create_with_key(json!({ "url": "https://example.com/rolled" }), &keys.own)
        .await;
    let code = link["code"].as_str().expect("code").to_string();
    Acme {
        node,
        receiver,
        clock,
        start,
        code,
        config,
    }
}

/// `visits` visits of `code` at `at` (the clock set there), flushed to the store.
pub(super) async fn clicks_at(
    node: &Node,
    clock: &shortener::clock::Clock,
    code: &str,
    visits: usize,
    at: chrono::DateTime<chrono::Utc>,
) {
    clock.set(at);
    for _ in 0..visits {
        assert_eq!(node.visit(code).await.status(), StatusCode::FOUND);
    }
    assert!(node.app.visits.analytics().flush(&node.app.store).await);
}

/// The data of acme's `clicks.rollup` event of `hour` telling `bot` bot visits (and no other)
/// as its `revision`.
pub(super) fn acme_hour(hour: &str, bot: i64, revision: i64) -> Value {
    json!({ "tenant": "acme", "hour": hour, "human": 0, "bot": bot, "head": 0, "revision": revision })
}

/// The `clicks.rollup` events `receiver` got, in order.
fn rollups(receiver: &Receiver) -> Vec<Value> {
    receiver
        .requests()
        .iter()
        .map(|(_, body)| serde_json::from_str::<Value>(body).expect("json"))
        .filter(|e| e["type"] == "clicks.rollup")
        .collect()
}

/// The data of the `n`th `clicks.rollup` event (from 1) once `receiver` has it, every request
/// it got signed, and no event past the `n`th.
pub(super) async fn told(receiver: &Receiver, n: usize, what: &str) -> Value {
    let arrived = testkit::wait_until(Duration::from_secs(10), || async {
        rollups(receiver).len() >= n
    })
    .await;
    assert!(arrived, "{what} never arrived: {:?}", receiver.requests());
    verified(receiver);
    let got = rollups(receiver);
    assert_eq!(got.len(), n, "{what}: {got:?}");
    got[n - 1]["data"].clone()
}

async fn an_hourly_rollup_event_tells_a_tenant_its_clicks_once(backend: Backend) {
    let stack = Stack::new(backend).await;
    let Acme {
        node,
        receiver,
        clock,
        start,
        code,
        ..
    } = acme(&stack, 200, 10, |_| {}).await;
    clicks_at(&node, &clock, &code, 2, start).await;
    let told = async |n: usize, what: &str| told(&receiver, n, what).await;
    clock.set(start + chrono::Duration::minutes(95)); // 12:05: the 10:00 hour has ended
    node.maintain_rollups().await;
    assert_eq!(
        told(1, "the 10:00 hour").await,
        acme_hour("2026-01-10T10:00:00Z", 2, 0)
    );
    let signed = verified(&receiver);
    assert_eq!(
        signed.len(),
        2,
        "the link's creation and the hour: {signed:?}"
    );
    assert_eq!(signed[1].1, "clicks.rollup");
    // Asked again (another run, another node), the hour is not told twice.
    let hour = time_of("2026-01-10T10:00:00Z");
    use shortener::store::OutboxStore;
    let record = async |hour: i64| {
        node.app
            .store
            .record_rollup_events(hour)
            .await
            .expect("record")
    };
    assert_eq!(record(hour).await, 0);

    // A click of 10:50 reaches the store only now (its node was cut off): the next run tells
    // the 10:00 hour again, as its revision 1 with the new totals, and only once.
    clicks_at(
        &node,
        &clock,
        &code,
        1,
        start + chrono::Duration::minutes(20),
    )
    .await;
    clock.set(start + chrono::Duration::minutes(100)); // 12:10
    node.maintain_rollups().await;
    assert_eq!(
        told(2, "the 10:00 hour's correction").await,
        acme_hour("2026-01-10T10:00:00Z", 3, 1)
    );
    assert_eq!(record(hour).await, 0, "a correction told twice");
    let ids: Vec<i64> = verified(&receiver).iter().map(|(id, _, _)| *id).collect();
    assert!(
        ids[2] > ids[1],
        "a correction is an event of its own: {ids:?}"
    );

    // Visits in the 12:00 hour, then no maintenance run for eight hours (every node down):
    // the next run still tells the 12:00 hour, and only it.
    clicks_at(
        &node,
        &clock,
        &code,
        3,
        start + chrono::Duration::minutes(100),
    )
    .await;
    clock.set(start + chrono::Duration::minutes(95 + 8 * 60)); // 20:05
    node.maintain_rollups().await;
    assert_eq!(
        told(3, "the 12:00 hour").await,
        acme_hour("2026-01-10T12:00:00Z", 3, 0)
    );
    assert_eq!(
        record(time_of("2026-01-10T12:00:00Z")).await,
        0,
        "the caught-up hour would be told twice"
    );
    assert_eq!(record(hour).await, 0);

    // The 12:00 hour as a node of the release before told it (no told row, only its event):
    // asked again it is not told twice, and a late click still makes its revision 1.
    forget_told(&stack, backend).await;
    assert_eq!(record(time_of("2026-01-10T12:00:00Z")).await, 0);
    clicks_at(
        &node,
        &clock,
        &code,
        1,
        start + chrono::Duration::minutes(120),
    )
    .await; // 12:30
    clock.set(start + chrono::Duration::minutes(100 + 8 * 60)); // 20:10
    node.maintain_rollups().await;
    assert_eq!(
        told(4, "the 12:00 hour's correction").await,
        acme_hour("2026-01-10T12:00:00Z", 4, 1)
    );
    node.stop().await;
}

/// Empties `rollup_told`, as a store the release before wrote events into has it.
async fn forget_told(stack: &Stack, backend: Backend) {
    match backend {
        Backend::Postgres => {
            let db = stack.db.as_ref().expect("PostgreSQL").connect().await;
            db.execute("DELETE FROM rollup_told", &[])
                .await
                .expect("forget");
        }
        Backend::Sqlite => {
            let path = stack.dir.path().join("a").join(shortener::app::DB_FILE);
            let conn = rusqlite::Connection::open(path).expect("open");
            conn.execute("DELETE FROM rollup_told", []).expect("forget");
        }
    }
}
on_both_stores!(an_hourly_rollup_event_tells_a_tenant_its_clicks_once);

pub(super) fn time_of(text: &str) -> i64 {
    chrono::DateTime::parse_from_rfc3339(text)
        .expect("time")
        .timestamp()
}

/// An hour's rollup event that the outbox bound dropped (its tenant's receiver was behind) is
/// told by a later run once there is room: only an event that went in counts as told.
async fn a_dropped_rollup_event_is_told_once_there_is_room(backend: Backend) {
    use shortener::store::OutboxStore;
    let stack = Stack::new(backend).await;
    // The link's event stays pending (its receiver fails): acme's outbox is at its bound.
    let Acme {
        node,
        receiver,
        clock,
        start,
        code,
        ..
    } = acme(&stack, 500, 1000, |config| {
        config.webhooks.webhook_max_pending = std::num::NonZero::new(1).expect("non-zero");
    })
    .await;
    clicks_at(&node, &clock, &code, 1, start).await;
    let store = &node.app.store;
    let bound = store.bound_outbox(1).await.expect("measure");
    assert_eq!(bound.full, ["acme"], "{bound:?}");

    clock.set(start + chrono::Duration::minutes(95)); // 12:05
    let hour = time_of("2026-01-10T10:00:00Z");
    assert_eq!(store.record_rollup_events(hour).await.expect("record"), 0);
    node.maintain_rollups().await;
    assert_eq!(store.record_rollup_events(hour).await.expect("record"), 0);

    // The receiver catches up; once nothing of acme's waits, the hour is told, once.
    receiver.answer(200);
    wait_for(
        "acme's outbox to drain",
        Duration::from_secs(30),
        async || {
            store
                .bound_outbox(1)
                .await
                .expect("measure")
                .full
                .is_empty()
        },
    )
    .await;
    assert_eq!(store.record_rollup_events(hour).await.expect("record"), 1);
    assert_eq!(store.record_rollup_events(hour).await.expect("record"), 0);
    assert_eq!(
        told(&receiver, 1, "the hour").await,
        acme_hour("2026-01-10T10:00:00Z", 1, 0)
    );
    node.stop().await;
}
on_both_stores!(a_dropped_rollup_event_is_told_once_there_is_room);
