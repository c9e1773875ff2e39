//! The PostgreSQL links layout: codes stay unique in the slot layout under concurrent creates
//! (enforced by the database), creates without a dedup key add nothing to its index, and
//! `shortener layout migrate` moves a database of every kind of link while a node serves,
//! resumes after kill -9 at random points, and verifies what it moved.
//!
//! Long because the migration's three properties (online, resumable, verified) share one
//! setup: a database in the code layout whose rows predate the slot column.

use crate::helpers::Backend;
use crate::helpers::{API_KEY, CODE_KEY, Node, Stack};
use reqwest::StatusCode;
use serde_json::json;
use std::collections::HashMap;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The `shortener` binary with this stack's database, id-service and keys.
pub(crate) fn shortener(stack: &Stack) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_shortener"));
    command
        .envs(stack.env())
        .env("SHORTENER_API_KEYS", API_KEY)
        .env("SHORTENER_KEY", CODE_KEY)
        .env("SHORTENER_DATA_DIR", stack.dir.path().join("cli"))
        .env("SHORTENER_LOG", "warn")
        .env_remove("SHORTENER_KEY_FILE")
        .env_remove("SHORTENER_CODE_LENGTH")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

/// `shortener layout ARGS...`, run to its end.
fn layout(stack: &Stack, args: &[&str]) -> Output {
    shortener(stack)
        .arg("layout")
        .args(args)
        .output()
        .expect("run shortener layout")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn succeed(out: Output) -> String {
    assert!(out.status.success(), "{}", text(&out));
    text(&out)
}

async fn sql(stack: &Stack) -> tokio_postgres::Client {
    stack
        .db
        .as_ref()
        .expect("a PostgreSQL stack")
        .connect()
        .await
}

/// The row count and checksum of `code -> url`, as the migration computes them.
async fn checksum(db: &tokio_postgres::Client) -> (i64, String) {
    let row = db
        .query_one(
            "SELECT count(*), coalesce(sum(hashtextextended(code || E'\\n' || long_url, 0)::numeric), 0)::text FROM links",
            &[],
        )
        .await
        .expect("checksum");
    (row.get(0), row.get(1))
}

async fn layout_row(db: &tokio_postgres::Client) -> (String, Option<String>) {
    let row = db
        .query_one("SELECT layout, step FROM link_layout", &[])
        .await
        .expect("layout row");
    (row.get(0), row.get(1))
}

/// Moves a fresh database to the code layout and makes its rows look like rows written before
/// the slot column existed (no slot), as an upgraded database's are.
pub(crate) async fn code_layout_with_old_rows(stack: &Stack) {
    succeed(layout(stack, &["revert", "--grace-ms", "1000"]));
    let db = sql(stack).await;
    db.batch_execute(
        "ALTER TABLE links ALTER COLUMN slot DROP NOT NULL; UPDATE links SET slot = NULL",
    )
    .await
    .expect("unslot the rows");
}

/// Links of every kind through the API: generated (plain, deduplicated, idempotent, tagged,
/// protected, expiring, deleted), aliases that are and are not base62 of the code length,
/// a private code, and imported legacy codes. Returns code -> url of the live ones.
pub(crate) async fn every_kind(node: &Node) -> HashMap<String, String> {
    let mut made = HashMap::new();
    let mut keep = |status: StatusCode, body: serde_json::Value| {
        assert_eq!(status, StatusCode::CREATED, "{body}");
        made.insert(
            body["code"].as_str().expect("code").to_string(),
            body["url"].as_str().expect("url").to_string(),
        );
    };
    for i in 0..40 {
        let (s, b) = node
            .create(json!({ "url": format!("https://example.com/g/{i}") }))
            .await;
        keep(s, b);
    }
    let bodies = [
        json!({ "url": "https://example.com/dedup", "dedup": true }),
        json!({ "url": "https://example.com/tagged", "tags": ["spring", "mail"] }),
        json!({ "url": "https://example.com/secret", "private": true }),
        json!({ "url": "https://example.com/alias-named", "alias": "spring-sale" }),
        json!({ "url": "https://example.com/alias-short", "alias": "ab1" }),
        json!({ "url": "https://example.com/expiring", "expires_at": "2099-01-01T00:00:00Z" }),
        json!({ "url": "https://example.com/protected", "password": "correct horse battery" }),
    ];
    for body in bodies {
        let (s, b) = node.create(body).await;
        keep(s, b);
    }
    let (s, b) = node
        .create_with(
            json!({ "url": "https://example.com/idem" }),
            &[("idempotency-key", "layout-idem-1")],
        )
        .await;
    keep(s, b);
    let rows = [
        json!({ "url": "https://example.com/legacy-1", "code": "3aBcXyZ" }),
        json!({ "url": "https://example.com/legacy-2", "code": "abc" }),
        json!({ "url": "https://example.com/legacy-3", "code": "old_Link-9" }),
        json!({ "url": "https://example.com/legacy-4", "code": "4bCdYzA" }),
    ];
    let body: String = rows.iter().map(|r| format!("{r}\n")).collect();
    let (status, lines) = node.import("application/x-ndjson", body, "").await;
    assert_eq!(status, StatusCode::OK, "{lines:?}");
    for (n, row) in rows.iter().enumerate() {
        let line = lines
            .iter()
            .find(|l| l["row"] == n as u64 + 1)
            .unwrap_or_else(|| panic!("no row {n}: {lines:?}"));
        assert_eq!(line["status"], "created", "{line}");
        made.insert(
            row["code"].as_str().expect("code").into(),
            row["url"].as_str().expect("url").into(),
        );
    }
    let (s, b) = node
        .create(json!({ "url": "https://example.com/deleted" }))
        .await;
    assert_eq!(s, StatusCode::CREATED);
    let gone = b["code"].as_str().expect("code");
    assert_eq!(node.delete(gone).await, StatusCode::NO_CONTENT);
    made
}

/// Every code of `links` redirects to its URL through `node`, or answers as a live protected
/// or private link does (the API's get shows its URL either way).
async fn all_found(node: &Node, links: &HashMap<String, String>) {
    for (code, url) in links {
        let (status, body) = node.get(code).await;
        assert_eq!(status, StatusCode::OK, "{code}: {body}");
        assert_eq!(body["url"].as_str(), Some(url.as_str()), "{code}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn codes_stay_unique_in_the_slot_layout_under_concurrent_creates() {
    let stack = Stack::new(Backend::Postgres).await;
    let (a, b) = (stack.node("a").await, stack.node("b").await);
    assert!(succeed(layout(&stack, &["status"])).contains("layout: slot"));

    // The same alias from both nodes at once (aliases are named codes): exactly one wins.
    let tries = (0..16).map(|i| {
        let node = if i % 2 == 0 { &a } else { &b };
        node.create(
            json!({ "url": format!("https://example.com/party/{i}"), "alias": "launch-party" }),
        )
    });
    let answers = futures::future::join_all(tries).await;
    let won = answers
        .iter()
        .filter(|(s, _)| *s == StatusCode::CREATED)
        .count();
    let lost = answers
        .iter()
        .filter(|(s, _)| *s == StatusCode::CONFLICT)
        .count();
    assert_eq!((won, lost), (1, 15), "{answers:?}");
    // The same legacy code of generated shape (found by its slot) imported by both nodes at
    // once with different targets: one import creates it.
    let imports = (0..8).map(|i| {
        let node = if i % 2 == 0 { &a } else { &b };
        node.import(
            "application/x-ndjson",
            format!(
                "{}\n",
                json!({ "url": format!("https://example.com/legacy/{i}"), "code": "Q7w8E9r" })
            ),
            "",
        )
    });
    let created = futures::future::join_all(imports)
        .await
        .iter()
        .filter(|(status, lines)| *status == StatusCode::OK && lines[0]["status"] == "created")
        .count();
    assert_eq!(created, 1);
    // A generated code cannot be taken again, by an import of it either: the slot it decodes
    // to is the generated row's.
    let generated = a.create_url("https://example.com/generated").await;
    let (_, lines) = b
        .import(
            "application/x-ndjson",
            format!(
                "{}\n",
                json!({ "url": "https://example.com/intruder", "code": generated })
            ),
            "",
        )
        .await;
    assert_ne!(lines[0]["status"], "created", "{lines:?}");
    assert_eq!(
        b.get(&generated).await.1["url"],
        "https://example.com/generated"
    );
    // Deduplicated creates from both nodes end on one link.
    let dedups = (0..8).map(|i| {
        let node = if i % 2 == 0 { &a } else { &b };
        node.create(json!({ "url": "https://example.com/same", "dedup": true }))
    });
    let codes: std::collections::HashSet<String> = futures::future::join_all(dedups)
        .await
        .into_iter()
        .map(|(s, body)| {
            assert!(s == StatusCode::CREATED || s == StatusCode::OK, "{body}");
            body["code"].as_str().expect("code").to_string()
        })
        .collect();
    assert_eq!(codes.len(), 1, "{codes:?}");

    let db = sql(&stack).await;
    let repeated: i64 = db
        .query_one(
            "SELECT count(*) FROM (SELECT code FROM links GROUP BY code HAVING count(*) > 1) d",
            &[],
        )
        .await
        .expect("repeats")
        .get(0);
    assert_eq!(repeated, 0);
    // Creates without a dedup key add no entry to its index, and only named codes are in the
    // code index.
    db.batch_execute("VACUUM ANALYZE links")
        .await
        .expect("analyze");
    let entries = |index: &'static str| {
        let db = &db;
        async move {
            db.query_one(
                "SELECT reltuples::int8 FROM pg_class WHERE relname = $1",
                &[&index],
            )
            .await
            .expect("reltuples")
            .get::<_, i64>(0)
        }
    };
    assert_eq!(entries("links_dedup").await, 1);
    assert_eq!(entries("links_named_code").await, 1, "only launch-party");
    let slotted: i64 = db
        .query_one(
            "SELECT count(*) FROM links WHERE slot >= 0 AND id IS NULL",
            &[],
        )
        .await
        .expect("legacy")
        .get(0);
    assert_eq!(slotted, 1, "the legacy code sits at its slot");
    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_migration_moves_every_kind_of_link_while_the_node_serves() {
    let stack = Stack::new(Backend::Postgres).await;
    let node = stack.node("a").await;
    let mut links = every_kind(&node).await;
    code_layout_with_old_rows(&stack).await;
    let db = sql(&stack).await;
    let (rows_before, _) = checksum(&db).await;
    let old: i64 = db
        .query_one("SELECT count(*) FROM links WHERE slot IS NULL", &[])
        .await
        .expect("old rows")
        .get(0);
    assert!(old >= 40, "rows without a slot before: {old}");

    // Traffic for the whole migration: creates, and visits of codes made before it.
    let stop = Arc::new(AtomicBool::new(false));
    let failures = Arc::new(AtomicU64::new(0));
    let node = Arc::new(node);
    let traffic = tokio::spawn({
        let (stop, failures, node) = (stop.clone(), failures.clone(), node.clone());
        let known: Vec<(String, String)> = links
            .iter()
            .filter(|(_, url)| url.contains("/g/"))
            .map(|(c, u)| (c.clone(), u.clone()))
            .collect();
        async move {
            let mut made = Vec::new();
            let deadline = Instant::now() + Duration::from_secs(120);
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                let url = format!("https://example.com/during/{i}");
                let (status, body) = node.create(json!({ "url": url })).await;
                match body["code"].as_str() {
                    Some(code) if status == StatusCode::CREATED => {
                        made.push((code.to_string(), url))
                    }
                    _ => {
                        failures.fetch_add(1, Ordering::Relaxed);
                    }
                }
                let (code, url) = &known[i % known.len()];
                if node.location(code).await != (StatusCode::FOUND, Some(url.clone())) {
                    failures.fetch_add(1, Ordering::Relaxed);
                }
                i += 1;
            }
            made
        }
    });
    // Meanwhile two nodes race for the same aliases, round after round, across every step:
    // the database lets exactly one of each pair in, whichever index guards named codes then.
    let rival = Arc::new(stack.node("c").await);
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    let racers: Vec<_> = [node.clone(), rival.clone()]
        .into_iter()
        .enumerate()
        .map(|(who, racer)| {
            let (stop, barrier) = (stop.clone(), barrier.clone());
            tokio::spawn(async move {
                let mut answers = Vec::new();
                // Bounded: the rounds stop with the migration, or at 2000.
                // A racer that sees the stop leaves its rival at the barrier: the rival's wait
                // is bounded, and it leaves too.
                for n in 0..2000 {
                    let met = tokio::time::timeout(Duration::from_secs(5), barrier.wait()).await;
                    if met.is_err() || stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let body = json!({
                        "url": format!("https://example.com/race/{n}/{who}"),
                        "alias": format!("race-{n}"),
                    });
                    answers.push(racer.create(body).await.0);
                }
                answers
            })
        })
        .collect();
    let out = succeed(layout(
        &stack,
        &["migrate", "--batch", "7", "--grace-ms", "2500"],
    ));
    stop.store(true, Ordering::Relaxed);
    let made = traffic.await.expect("traffic");
    assert_eq!(failures.load(Ordering::Relaxed), 0, "{out}");
    let mut rounds = Vec::new();
    for racer in racers {
        rounds.push(racer.await.expect("racer"));
    }
    assert!(!rounds[0].is_empty(), "no alias was raced for");
    for (n, (&first, &second)) in rounds[0].iter().zip(&rounds[1]).enumerate() {
        let pair = [first, second];
        assert!(
            pair.contains(&StatusCode::CREATED) && pair.contains(&StatusCode::CONFLICT),
            "alias race-{n}: {pair:?}"
        );
        let winner = usize::from(pair[1] == StatusCode::CREATED);
        let (status, link) = rival.get(&format!("race-{n}")).await;
        assert_eq!(status, StatusCode::OK, "{link}");
        assert_eq!(
            link["url"],
            format!("https://example.com/race/{n}/{winner}"),
            "race-{n}"
        );
    }
    let created = rounds
        .iter()
        .flatten()
        .filter(|s| **s == StatusCode::CREATED);
    let rows_raced = created.count() as i64;
    assert!(!made.is_empty());
    assert_eq!(layout_row(&db).await, ("slot".to_string(), None));

    // The recorded figures: the rows at the start and at the end, and every row there before
    // the run plus every create made during it is stored.
    let row = db
        .query_one(
            "SELECT before_rows, after_rows, filled FROM link_layout",
            &[],
        )
        .await
        .expect("figures");
    let (before, after, filled): (i64, i64, i64) = (row.get(0), row.get(1), row.get(2));
    // (Traffic ran before the run's first count and after its last one.)
    let now = rows_before + made.len() as i64 + rows_raced;
    assert!(
        rows_before <= before && before <= after && after <= now,
        "{rows_before} {before} {after} {now}"
    );
    assert_eq!(filled, old);
    assert_eq!(checksum(&db).await.0, now);
    assert!(succeed(layout(&stack, &["verify"])).contains(&format!("{now} rows")));

    // Everything is found, by this node and by one that never cached anything, and the
    // rest of a link's life goes on: replays, dedup, tags, edits, deletes.
    links.extend(made);
    all_found(&node, &links).await;
    let fresh = stack.node("b").await;
    all_found(&fresh, &links).await;
    let (status, replay) = fresh
        .create_with(
            json!({ "url": "https://example.com/idem" }),
            &[("idempotency-key", "layout-idem-1")],
        )
        .await;
    assert_eq!(status, StatusCode::OK, "a replay: {replay}");
    assert_eq!(
        links
            .get(replay["code"].as_str().expect("code"))
            .map(String::as_str),
        Some("https://example.com/idem")
    );
    let (_, twin) = fresh
        .create(json!({ "url": "https://example.com/dedup", "dedup": true }))
        .await;
    assert_eq!(
        links
            .get(twin["code"].as_str().expect("code"))
            .map(String::as_str),
        Some("https://example.com/dedup")
    );
    let (status, page) = fresh.list("tag=spring").await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(page["links"][0]["url"], "https://example.com/tagged");
    let (status, _) = fresh
        .create(json!({ "url": "https://example.com/x", "alias": "spring-sale" }))
        .await;
    assert_eq!(
        status,
        StatusCode::CONFLICT,
        "a migrated named code is still taken"
    );
    let (_, lines) = fresh
        .import(
            "application/x-ndjson",
            format!(
                "{}\n",
                json!({ "url": "https://example.com/x", "code": "3aBcXyZ" })
            ),
            "",
        )
        .await;
    assert_ne!(
        lines[0]["status"], "created",
        "a migrated legacy code is still taken: {lines:?}"
    );
    assert_eq!(
        fresh.get("3aBcXyZ").await.1["url"],
        "https://example.com/legacy-1"
    );
    let legacy = "old_Link-9";
    let (status, body) = fresh
        .patch(legacy, json!({ "url": "https://example.com/moved" }))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(node.get(legacy).await.1["url"], "https://example.com/moved");
    assert_eq!(fresh.delete("4bCdYzA").await, StatusCode::NO_CONTENT);
    assert_eq!(fresh.visit("4bCdYzA").await.status(), StatusCode::GONE);
    fresh.stop().await;
    Arc::try_unwrap(rival).ok().expect("one owner").stop().await;
    Arc::try_unwrap(node).ok().expect("one owner").stop().await;
}

/// A small deterministic generator for the kill points (seeded from the clock and printed).
struct Lcg(u64);
impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migration_killed_at_random_points_resumes_and_ends_with_the_same_checksum() {
    let stack = Stack::new(Backend::Postgres).await;
    let preload = shortener(&stack)
        .args(["preload", "--count", "3000"])
        .output()
        .expect("preload");
    succeed(preload);
    {
        let node = stack.node("seed").await;
        every_kind(&node).await;
        node.stop().await;
    }
    code_layout_with_old_rows(&stack).await;
    let db = sql(&stack).await;
    let before = checksum(&db).await;

    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_nanos() as u64;
    println!("kill seed {seed}");
    let mut rng = Lcg(seed);
    let (mut kills, mut steps) = (0, Vec::new());
    let deadline = Instant::now() + Duration::from_secs(240);
    loop {
        assert!(
            Instant::now() < deadline,
            "the migration never finished; killed at {steps:?}"
        );
        let mut command = tokio::process::Command::from(shortener(&stack));
        command.args([
            "layout",
            "migrate",
            "--batch",
            "10",
            "--pause-ms",
            "5",
            "--grace-ms",
            "1000",
        ]);
        command.stdout(Stdio::null());
        let mut child = command.spawn().expect("start migrate");
        // A run takes a few seconds: the first dozen are killed anywhere from start-up on,
        // then one is let finish.
        let after = if kills < 12 {
            Duration::from_millis(100 + rng.below(1100))
        } else {
            Duration::from_secs(120)
        };
        match tokio::time::timeout(after, child.wait()).await {
            Ok(status) => {
                let mut said = String::new();
                if let Some(mut errors) = child.stderr.take() {
                    tokio::io::AsyncReadExt::read_to_string(&mut errors, &mut said)
                        .await
                        .expect("stderr");
                }
                assert!(status.expect("wait").success(), "{said}");
                break;
            }
            Err(_) => {
                child.kill().await.expect("kill -9");
                kills += 1;
                steps.push(layout_row(&db).await.1.unwrap_or_else(|| "none".into()));
            }
        }
    }
    println!("killed {kills} times, at steps {steps:?}");
    assert!(kills >= 3, "too few kills to mean anything: {steps:?}");
    assert!(
        steps.iter().any(|s| s == "backfill"),
        "no kill landed in the backfill: {steps:?}"
    );
    assert_eq!(layout_row(&db).await, ("slot".to_string(), None));
    assert_eq!(checksum(&db).await, before);
    let recorded = db
        .query_one("SELECT after_rows, after_sum::text FROM link_layout", &[])
        .await
        .expect("after");
    assert_eq!(
        (recorded.get::<_, i64>(0), recorded.get::<_, String>(1)),
        before
    );
    let invalid: i64 = db
        .query_one("SELECT count(*) FROM pg_index WHERE NOT indisvalid", &[])
        .await
        .expect("invalid indexes")
        .get(0);
    assert_eq!(invalid, 0, "no index a kill left half-built remains");
    let unslotted: i64 = db
        .query_one("SELECT count(*) FROM links WHERE slot IS NULL", &[])
        .await
        .expect("unslotted")
        .get(0);
    assert_eq!(unslotted, 0);
    let node = stack.node("after").await;
    let rows = db
        .query(
            "SELECT code, long_url FROM links WHERE deleted_at IS NULL ORDER BY code LIMIT 200",
            &[],
        )
        .await
        .expect("sample");
    let sample: HashMap<String, String> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    all_found(&node, &sample).await;
    node.stop().await;
}

/// A run killed while it waits the grace period after the switch: the next run waits it
/// again before it takes the code index away, so nodes that have not yet read the switch are
/// not left finding links by a full scan.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_killed_in_the_grace_period_waits_it_again_before_the_swap() {
    let stack = Stack::new(Backend::Postgres).await;
    succeed(
        shortener(&stack)
            .args(["preload", "--count", "50"])
            .output()
            .expect("preload"),
    );
    code_layout_with_old_rows(&stack).await;
    let db = sql(&stack).await;
    let mut command = tokio::process::Command::from(shortener(&stack));
    command.args(["layout", "migrate", "--grace-ms", "120000"]);
    command.stdout(Stdio::null());
    let mut first = command.spawn().expect("start migrate");
    let switched = testkit::wait_until(Duration::from_secs(60), || async {
        layout_row(&db).await == ("slot".to_string(), Some("swap".to_string()))
    })
    .await;
    assert!(
        switched,
        "the run never switched: {:?}",
        layout_row(&db).await
    );
    first.kill().await.expect("kill -9");

    let grace = Duration::from_millis(1500);
    let resumed = Instant::now();
    let said = succeed(layout(
        &stack,
        &["migrate", "--grace-ms", &grace.as_millis().to_string()],
    ));
    assert!(
        said.contains("waiting the grace period after the switch first"),
        "{said}"
    );
    assert!(resumed.elapsed() >= grace, "the swap did not wait");
    assert_eq!(layout_row(&db).await, ("slot".to_string(), None));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn layout_commands_refuse_what_they_cannot_do_and_change_nothing() {
    let stack = Stack::new(Backend::Postgres).await;
    // Migrating a new database under some key decides nothing: the first write records the
    // code space, so the nodes' key is the database's.
    let out = shortener(&stack)
        .arg("migrate")
        .env("SHORTENER_KEY", "33".repeat(32))
        .output()
        .expect("migrate");
    succeed(out);
    let node = stack.node("a").await;
    node.create_url("https://example.com/one").await;
    let db = sql(&stack).await;
    let before = (checksum(&db).await, layout_row(&db).await);

    // Bad arguments: refused by the parser, before anything connects.
    for args in [
        &["migrate", "--batch", "0"][..],
        &["migrate", "--batch", "many"],
        &["migrate", "--grace-ms", "10"],
        &["revert", "--pause-ms", "-1"],
        &["sideways"],
    ] {
        let out = layout(&stack, args);
        assert!(!out.status.success(), "{args:?} was accepted");
        assert!(text(&out).contains("error"), "{args:?}: {}", text(&out));
    }
    // The store and the code key are all it needs: no id-service, no API keys.
    let alone = |key: Option<&str>| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_shortener"));
        command
            .args(["layout", "status"])
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("DATABASE_URL", stack.db.as_ref().expect("db").url());
        if let Some(key) = key {
            command.env("SHORTENER_KEY", key);
        }
        command.output().expect("run")
    };
    let status = succeed(alone(Some(CODE_KEY)));
    assert!(status.contains("layout"), "{status}");
    let out = alone(None);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("SHORTENER_KEY_FILE or SHORTENER_KEY"),
        "{}",
        text(&out)
    );
    // Its help is about the layout: the store's and the key's settings, not a node's.
    let help = succeed(layout(&stack, &["--help"]));
    for word in [
        "status",
        "migrate",
        "revert",
        "verify",
        "DATABASE_URL",
        "SHORTENER_KEY_FILE",
    ] {
        assert!(help.contains(word), "{word}: {help}");
    }
    assert!(!help.contains("SHORTENER_HTTP_ADDR"), "{help}");
    // The embedded store has no layout to move.
    let out = Command::new(env!("CARGO_BIN_EXE_shortener"))
        .args(["layout", "status"])
        .env("SHORTENER_DATA_DIR", stack.dir.path().join("embedded"))
        .env_remove("DATABASE_URL")
        .output()
        .expect("run");
    assert!(!out.status.success());
    assert!(
        text(&out).contains("for the PostgreSQL store"),
        "{}",
        text(&out)
    );
    // A revert cannot start while a migration is under way, nor the other way round.
    db.execute("UPDATE link_layout SET step = 'backfill'", &[])
        .await
        .expect("pretend");
    let out = layout(&stack, &["revert", "--grace-ms", "1000"]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("run `shortener layout migrate` to finish it"),
        "{}",
        text(&out)
    );
    db.execute("UPDATE link_layout SET step = 'revert-index'", &[])
        .await
        .expect("pretend");
    let out = layout(&stack, &["migrate", "--grace-ms", "1000"]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("run `shortener layout revert` to finish it"),
        "{}",
        text(&out)
    );
    db.execute("UPDATE link_layout SET step = NULL", &[])
        .await
        .expect("restore");
    // Two runs never interleave: one holding the lock refuses the other.
    db.query_one("SELECT pg_advisory_lock($1)", &[&0x6c61796f7574_i64])
        .await
        .expect("hold");
    let out = layout(&stack, &["revert", "--grace-ms", "1000"]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("another `shortener layout` run"),
        "{}",
        text(&out)
    );
    db.query_one("SELECT pg_advisory_unlock($1)", &[&0x6c61796f7574_i64])
        .await
        .expect("release");
    assert_eq!((checksum(&db).await, layout_row(&db).await), before);

    // A node with another code key is refused at start, naming both fingerprints.
    let mut config = stack.config("other-key");
    config.ids.key = Some("11".repeat(32));
    let refused = shortener::App::build(config).await.err().expect("refused");
    let message = format!("{refused:#}");
    assert!(
        message.contains("placed with the code key of fingerprint"),
        "{message}"
    );
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_under_another_key_never_misplaces_links_and_stray_rows_are_placed_again() {
    let stack = Stack::new(Backend::Postgres).await;
    let node = stack.node("a").await;
    let ours = node.create_url("https://example.com/ours").await;
    code_layout_with_old_rows(&stack).await;
    // In the code layout a node under another key is accepted (that is where a key changes),
    // and what it writes is found by code.
    let mut config = stack.config("stray");
    config.ids.key = Some("22".repeat(32));
    let stray = Node::start(config).await;
    let theirs = stray.create_url("https://example.com/theirs").await;

    // The migration places rows under the configured key; the stray node notices within a
    // second, keeps finding links by code, and refuses to write rows it would misplace.
    let out = succeed(layout(
        &stack,
        &["migrate", "--batch", "3", "--grace-ms", "2500"],
    ));
    let refused = testkit::wait_until(Duration::from_secs(10), || async {
        stray
            .create(json!({ "url": "https://example.com/late" }))
            .await
            .0
            == StatusCode::SERVICE_UNAVAILABLE
    })
    .await;
    assert!(refused, "{out}");
    for code in [&ours, &theirs] {
        assert_eq!(stray.get(code).await.0, StatusCode::OK, "{code}");
        assert_eq!(node.get(code).await.0, StatusCode::OK, "{code}");
    }

    // A row that slipped in misplaced anyway (here: moved by hand) fails the verification,
    // which sends the next run back to place every row again.
    let db = sql(&stack).await;
    db.execute(
        "UPDATE links SET slot = slot + 1000000000 WHERE code = $1",
        &[&theirs],
    )
    .await
    .expect("misplace");
    let out = layout(&stack, &["verify"]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("not where their code puts them"),
        "{}",
        text(&out)
    );
    assert_eq!(
        layout_row(&db).await,
        ("slot".into(), Some("backfill".into()))
    );
    succeed(layout(&stack, &["migrate", "--grace-ms", "1000"]));
    assert_eq!(layout_row(&db).await, ("slot".into(), None));
    succeed(layout(&stack, &["verify"]));
    let fresh = stack.node("fresh").await;
    assert_eq!(
        fresh.get(&theirs).await.1["url"],
        "https://example.com/theirs"
    );
    stray.stop().await;
    fresh.stop().await;
    node.stop().await;
}

/// The slot high-water mark (docs/design.md, I9) only refuses codes while rows are found by
/// slot: in the code layout every unknown code is looked up, and once `layout migrate` has
/// switched, every old row and imported legacy code still redirects and a code above them all
/// is refused without a lookup.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mark_refuses_nothing_in_the_code_layout_and_every_old_row_after_the_migration() {
    use shortener::store::{LinkStore, SlotBound};
    let stack = Stack::new(Backend::Postgres).await;
    let mut config = stack.config("a");
    config.limits.not_found_rate = 1_000_000;
    config.limits.not_found_burst = 1_000_000;
    let node = Node::start(config).await;
    let links = every_kind(&node).await;
    let counters = node.app.resolver.counters();
    let (refused, misses) = (
        || counters.refused_impossible.load(Ordering::Relaxed),
        || counters.cache_misses.load(Ordering::Relaxed),
    );
    // Above every stored code's ID (generated ones and the legacy codes alike).
    let mark = links
        .keys()
        .filter_map(|code| node.app.space.decode(code).ok())
        .max()
        .expect("codes that decode");
    let above: Vec<String> = (1..=5)
        .map(|n| node.app.space.encode(62u64.pow(7) - n))
        .filter(|code| node.app.space.decode(code).expect("decodes") > mark)
        .collect();
    assert!(!above.is_empty(), "no code above {mark}");
    let redirects_all = async || {
        for (code, url) in &links {
            let (status, location) = node.location(code).await;
            // Protected and private links answer with their form or redirect; none is a 404.
            assert_ne!(status, StatusCode::NOT_FOUND, "{code} -> {url}");
            if status == StatusCode::FOUND {
                assert_eq!(location.as_deref(), Some(url.as_str()), "{code}");
            }
        }
    };

    code_layout_with_old_rows(&stack).await;
    crate::helpers::wait_for(
        "the node to find rows by code",
        Duration::from_secs(5),
        async || node.app.store.slot_bound() == SlotBound::None,
    )
    .await;
    let (refused_before, misses_before) = (refused(), misses());
    for code in &above {
        assert_eq!(node.visit(code).await.status(), StatusCode::NOT_FOUND);
    }
    assert_eq!(
        refused(),
        refused_before,
        "a code was refused in the code layout"
    );
    assert_eq!(misses(), misses_before + above.len() as u64);
    redirects_all().await;

    succeed(layout(&stack, &["migrate", "--grace-ms", "1500"]));
    crate::helpers::wait_for(
        "the node to find rows by slot",
        Duration::from_secs(5),
        async || matches!(node.app.store.slot_bound(), SlotBound::Stale(_)),
    )
    .await;
    redirects_all().await;
    let refused_before = refused();
    // A code not asked before (so in no negative entry), above every stored one.
    let unseen = (6..100)
        .map(|n| node.app.space.encode(62u64.pow(7) - n))
        .find(|code| node.app.space.decode(code).expect("decodes") > mark)
        .expect("a code above the mark");
    assert_eq!(node.visit(&unseen).await.status(), StatusCode::NOT_FOUND);
    assert_eq!(refused(), refused_before + 1, "{unseen} was looked up");
}
