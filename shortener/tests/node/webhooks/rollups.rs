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
struct Acme {
    node: Node,
    receiver: Receiver,
    clock: shortener::clock::Clock,
    start: chrono::DateTime<chrono::Utc>,
    code: String,
}

/// [`Acme`], its endpoint disabled after `max_failures`, with `adjust` applied to the node's
/// configuration.
async fn acme(
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
    let node = Node::start(config).await;
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
    }
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
async fn told(receiver: &Receiver, n: usize, what: &str) -> Value {
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
    } = acme(&stack, 200, 10, |_| {}).await;
    for _ in 0..2 {
        assert_eq!(node.visit(&code).await.status(), StatusCode::FOUND);
    }
    assert!(node.app.visits.analytics().flush(&node.app.store).await);
    let told = async |n: usize, what: &str| told(&receiver, n, what).await;
    clock.set(start + chrono::Duration::minutes(95)); // 12:05: the 10:00 hour has ended
    node.maintain_rollups().await;
    assert_eq!(
        told(1, "the 10:00 hour").await,
        json!({ "tenant": "acme", "hour": "2026-01-10T10:00:00Z", "human": 0, "bot": 2, "head": 0, "revision": 0 })
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
    clock.set(start + chrono::Duration::minutes(20));
    assert_eq!(node.visit(&code).await.status(), StatusCode::FOUND);
    assert!(node.app.visits.analytics().flush(&node.app.store).await);
    clock.set(start + chrono::Duration::minutes(100)); // 12:10
    node.maintain_rollups().await;
    assert_eq!(
        told(2, "the 10:00 hour's correction").await,
        json!({ "tenant": "acme", "hour": "2026-01-10T10:00:00Z", "human": 0, "bot": 3, "head": 0, "revision": 1 })
    );
    assert_eq!(record(hour).await, 0, "a correction told twice");
    let ids: Vec<i64> = verified(&receiver).iter().map(|(id, _, _)| *id).collect();
    assert!(
        ids[2] > ids[1],
        "a correction is an event of its own: {ids:?}"
    );

    // Visits in the 12:00 hour, then no maintenance run for eight hours (every node down):
    // the next run still tells the 12:00 hour, and only it.
    for _ in 0..3 {
        assert_eq!(node.visit(&code).await.status(), StatusCode::FOUND);
    }
    assert!(node.app.visits.analytics().flush(&node.app.store).await);
    clock.set(start + chrono::Duration::minutes(95 + 8 * 60)); // 20:05
    node.maintain_rollups().await;
    assert_eq!(
        told(3, "the 12:00 hour").await,
        json!({ "tenant": "acme", "hour": "2026-01-10T12:00:00Z", "human": 0, "bot": 3, "head": 0, "revision": 0 })
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
    clock.set(start + chrono::Duration::minutes(120)); // 12:30
    assert_eq!(node.visit(&code).await.status(), StatusCode::FOUND);
    assert!(node.app.visits.analytics().flush(&node.app.store).await);
    clock.set(start + chrono::Duration::minutes(100 + 8 * 60)); // 20:10
    node.maintain_rollups().await;
    assert_eq!(
        told(4, "the 12:00 hour's correction").await,
        json!({ "tenant": "acme", "hour": "2026-01-10T12:00:00Z", "human": 0, "bot": 4, "head": 0, "revision": 1 })
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

fn time_of(text: &str) -> i64 {
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
    } = acme(&stack, 500, 1000, |config| {
        config.webhooks.webhook_max_pending = std::num::NonZero::new(1).expect("non-zero");
    })
    .await;
    assert_eq!(node.visit(&code).await.status(), StatusCode::FOUND);
    assert!(node.app.visits.analytics().flush(&node.app.store).await);
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
        json!({ "tenant": "acme", "hour": "2026-01-10T10:00:00Z", "human": 0, "bot": 1, "head": 0, "revision": 0 })
    );
    node.stop().await;
}
on_both_stores!(a_dropped_rollup_event_is_told_once_there_is_room);

/// The `clicks.rollup` events recorded for tenant acme, as (revision, bot) in revision order,
/// read from the store itself, so an event recorded twice shows whether or not it was sent.
async fn recorded(stack: &Stack, backend: Backend) -> Vec<(i64, i64)> {
    const EVENTS: &str =
        "SELECT data FROM webhook_events WHERE kind = 'clicks.rollup' AND tenant = 'acme'";
    let data: Vec<String> = match backend {
        Backend::Postgres => {
            let db = stack.db.as_ref().expect("PostgreSQL").connect().await;
            let rows = db.query(EVENTS, &[]).await.expect("events");
            rows.iter().map(|r| r.get(0)).collect()
        }
        Backend::Sqlite => {
            let path = stack.dir.path().join("a").join(shortener::app::DB_FILE);
            let conn = rusqlite::Connection::open(path).expect("open");
            let mut query = conn.prepare(EVENTS).expect("prepare");
            query
                .query_map([], |r| r.get(0))
                .expect("events")
                .collect::<Result<_, _>>()
                .expect("rows")
        }
    };
    let mut events: Vec<(i64, i64)> = data
        .iter()
        .map(|d| {
            let v: Value = serde_json::from_str(d).expect("json");
            (
                v["revision"].as_i64().expect("revision"),
                v["bot"].as_i64().expect("bot"),
            )
        })
        .collect();
    events.sort_unstable();
    events
}

/// Several nodes tell one hour at once, again and again, while late clicks of the hour keep
/// reaching the store: each revision is recorded once, the revisions run from 0 without a gap,
/// each tells more clicks than the one before, and once the clicks stop the last one tells the
/// hour's final totals. On PostgreSQL the runs come from three nodes' stores (three pools); the
/// embedded store has one node, whose runs meet in its writer.
async fn nodes_telling_one_hour_at_once_record_each_revision_once(backend: Backend) {
    use shortener::domain::ClickCounts;
    use shortener::store::{BatchMark, FlushStream, OutboxStore, RollupRow, VisitStore};
    const ROUNDS: i64 = 8;
    const RUNS_PER_ROUND: usize = 6;
    let stack = Stack::new(backend).await;
    let Acme {
        node, clock, code, ..
    } = acme(&stack, 200, 1000, |_| {}).await;
    let mut others = Vec::new();
    if matches!(backend, Backend::Postgres) {
        for name in ["b", "c"] {
            let mut config = stack.config(name);
            config.clock = clock.clone();
            others.push(Node::start(config).await);
        }
    }
    let stores: Vec<_> = std::iter::once(&node)
        .chain(&others)
        .map(|n| n.app.store.clone())
        .collect();
    let hour = time_of("2026-01-10T10:00:00Z");
    let late = |seq: i64| {
        let rows = vec![RollupRow {
            tenant: "acme".into(),
            code: code.clone(),
            bucket: hour,
            referrer: String::new(),
            device: "bot",
            country: String::new(),
            route: String::new(),
            counts: ClickCounts {
                bot: seq as u64,
                ..Default::default()
            },
        }];
        let mark = BatchMark {
            writer: 9001,
            stream: FlushStream::Rollups,
            seq,
        };
        (mark, std::sync::Arc::from(rows))
    };
    let mut clicks = 0;
    for round in 1..=ROUNDS {
        let (mark, rows) = late(round);
        let added = stores[0].add_rollups(mark, rows);
        let runs = (0..RUNS_PER_ROUND).map(|i| stores[i % stores.len()].record_rollup_events(hour));
        let (added, runs) = futures::join!(added, futures::future::join_all(runs));
        added.expect("add late clicks");
        for run in runs {
            run.expect("record");
        }
        clicks += round;
    }
    // The clicks have stopped: one more run tells what the last round's runs may have missed,
    // and a run after it has nothing left to tell.
    stores[0].record_rollup_events(hour).await.expect("record");
    for store in &stores {
        assert_eq!(store.record_rollup_events(hour).await.expect("record"), 0);
    }
    let events = recorded(&stack, backend).await;
    let revisions: Vec<i64> = events.iter().map(|e| e.0).collect();
    assert_eq!(
        revisions,
        (0..events.len() as i64).collect::<Vec<_>>(),
        "each revision once, none skipped: {events:?}"
    );
    assert!(
        events.windows(2).all(|w| w[0].1 < w[1].1),
        "each revision tells more clicks than the one before: {events:?}"
    );
    assert_eq!(
        events.last().map(|e| e.1),
        Some(clicks),
        "the last revision tells the final totals: {events:?}"
    );
    for other in others {
        other.stop().await;
    }
    node.stop().await;
}
on_both_stores!(nodes_telling_one_hour_at_once_record_each_revision_once);
