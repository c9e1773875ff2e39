//! Bulk import: NDJSON and CSV rows, legacy codes kept as spelled, retries that create nothing
//! twice, bad rows that fail alone, dry runs that store nothing, imports of several chunks, and
//! an import the store fails (it stops, says why, and runs again safely).
//!
//! One file: every case goes through the same endpoint and reads its answer with the same
//! helpers (`summary`, `row`).

use crate::helpers::{Backend, Node, Stack};
use crate::tenants::write_keys;
use reqwest::StatusCode;
use serde_json::{Value, json};

const NDJSON: &str = "application/x-ndjson";

fn ndjson(rows: &[Value]) -> String {
    rows.iter().map(|r| format!("{r}\n")).collect()
}

/// The summary line of an answer.
fn summary(lines: &[Value]) -> &Value {
    let last = lines.last().expect("an answer");
    assert!(last.get("summary").is_some(), "no summary: {lines:?}");
    &last["summary"]
}

/// The row lines of an answer, by row number (from 1).
fn row(lines: &[Value], n: u64) -> &Value {
    lines
        .iter()
        .find(|l| l["row"] == n)
        .unwrap_or_else(|| panic!("no row {n} in {lines:?}"))
}

async fn legacy_codes_keep_their_spelling_and_a_retry_creates_nothing_twice(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = stack.node("a").await;
    let rows = [
        // Seven base62 characters: the shape of a generated code of this deployment.
        json!({ "url": "https://example.com/bitly", "code": "3aBcXyZ", "created_at": "2019-05-06T07:08:09Z", "tags": ["old"] }),
        json!({ "url": "https://example.com/alias", "code": "spring-sale" }),
        // Eight characters that no ID of this code space encodes to, found all the same.
        json!({ "url": "https://example.com/long", "alias": "Zz9Zz9Zz" }),
        json!({ "url": "https://example.com/generated", "max_visits": 9 }),
        json!({ "url": "https://example.com/private", "private": true }),
        json!({ "url": "https://example.com/yourls", "code": "abc", "created_at": "2018-01-02 03:04:05", "expires_at": "2020-01-01" }),
    ];
    let body = ndjson(&rows);
    let (status, lines) = node.import(NDJSON, body.clone(), "").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(lines.len(), rows.len() + 1, "{lines:?}");
    for n in 1..=6 {
        assert_eq!(row(&lines, n)["status"], "created", "{lines:?}");
    }
    assert_eq!(summary(&lines)["created"], 6);
    assert_eq!(row(&lines, 1)["code"], "3aBcXyZ");
    let generated = row(&lines, 4)["code"]
        .as_str()
        .expect("a generated code")
        .to_string();
    assert_eq!(generated.len(), 7);
    let private = row(&lines, 5)["code"]
        .as_str()
        .expect("a private code")
        .to_string();
    assert_eq!(private.len(), 16);
    for (code, url) in [
        ("3aBcXyZ", "https://example.com/bitly"),
        ("spring-sale", "https://example.com/alias"),
        ("Zz9Zz9Zz", "https://example.com/long"),
        (generated.as_str(), "https://example.com/generated"),
        (private.as_str(), "https://example.com/private"),
    ] {
        assert_eq!(
            node.location(code).await,
            (StatusCode::FOUND, Some(url.to_string())),
            "{code}"
        );
    }
    assert_eq!(
        node.location("abc").await.0,
        StatusCode::GONE,
        "imported already expired"
    );
    let (_, link) = node.get("3aBcXyZ").await;
    assert_eq!(link["created_at"], "2019-05-06T07:08:09.000Z");
    assert_eq!(link["imported"], true);
    assert_eq!(link["tags"], json!(["old"]));
    let (_, history) = node.history("3aBcXyZ").await;
    assert_eq!(history["events"][0]["kind"], "create");
    assert_eq!(history["events"][0]["change"]["imported"]["new"], true);
    let (_, link) = node.get(&generated).await;
    assert_eq!(link["max_visits"], 9);

    // The same rows again: every one exists, nothing new is stored.
    let stored = node.stored_links().await;
    let (status, again) = node.import(NDJSON, body, "").await;
    assert_eq!(status, StatusCode::OK);
    for n in 1..=6 {
        assert_eq!(row(&again, n)["status"], "exists", "{again:?}");
    }
    assert_eq!(
        row(&again, 4)["code"],
        generated.as_str(),
        "the generated row finds its link"
    );
    assert_eq!(summary(&again)["created"], 0);
    assert_eq!(summary(&again)["exists"], 6);
    assert_eq!(node.stored_links().await, stored);

    // A legacy code whose link was deleted since is not `exists` (it answers 410 and is never
    // given out again): the row is refused, the run and a dry run alike, and nothing changes.
    assert_eq!(node.delete("spring-sale").await, StatusCode::NO_CONTENT);
    let retried = ndjson(&rows[1..2]);
    for query in ["", "dry_run=true"] {
        let (status, lines) = node.import(NDJSON, retried.clone(), query).await;
        assert_eq!(status, StatusCode::OK, "{query}");
        assert_eq!(row(&lines, 1)["status"], "error", "{query}: {lines:?}");
        assert_eq!(
            row(&lines, 1)["error"],
            "code_deleted",
            "{query}: {lines:?}"
        );
        assert_eq!(row(&lines, 1)["code"], "spring-sale", "{query}: {lines:?}");
        assert_eq!(summary(&lines)["exists"], 0, "{query}");
    }
    assert_eq!(node.location("spring-sale").await.0, StatusCode::GONE);
    assert_eq!(node.stored_links().await, stored);

    // A row without a code whose link was deleted is not made again under a new code: it
    // names the deleted link. The private row beside it still finds its link.
    assert_eq!(node.delete(&generated).await, StatusCode::NO_CONTENT);
    let retried = ndjson(&rows[3..5]);
    for query in ["", "dry_run=true"] {
        let (status, lines) = node.import(NDJSON, retried.clone(), query).await;
        assert_eq!(status, StatusCode::OK, "{query}");
        assert_eq!(
            row(&lines, 1)["error"],
            "code_deleted",
            "{query}: {lines:?}"
        );
        assert_eq!(
            row(&lines, 1)["code"],
            generated.as_str(),
            "{query}: {lines:?}"
        );
        assert_eq!(row(&lines, 2)["status"], "exists", "{query}: {lines:?}");
        assert_eq!(summary(&lines)["created"], 0, "{query}");
    }
    assert_eq!(node.stored_links().await, stored);
}
on_both_stores!(legacy_codes_keep_their_spelling_and_a_retry_creates_nothing_twice);

async fn bad_rows_fail_alone_and_store_nothing(backend: Backend) {
    let stack = Stack::new(backend).await;
    let path = stack.dir.path().join("api-keys.toml");
    let keys = write_keys(&path);
    let mut config = stack.config("tenants");
    config.access.api_keys_file = Some(path);
    let node = Node::start(config).await;
    // Another tenant holds `taken-code` and `also-theirs`.
    for (url, alias) in [
        ("https://example.com/mine-too", "taken-code"),
        ("https://example.com/theirs", "also-theirs"),
    ] {
        let (status, _) = node
            .create_with_key(json!({ "url": url, "alias": alias }), &keys.other)
            .await;
        assert_eq!(status, StatusCode::CREATED);
    }
    let stored = node.stored_links().await;

    let mut body = Vec::new();
    let mut expect: Vec<(&str, &str)> = Vec::new();
    let mut line = |text: &[u8], status: &'static str, error: &'static str| {
        body.extend_from_slice(text);
        body.push(b'\n');
        expect.push((status, error));
    };
    line(
        br#"{"url": "https://example.com/ok-1", "code": "ok-1"}"#,
        "created",
        "",
    );
    line(
        br#"{"url": "not a url", "code": "bad-url"}"#,
        "error",
        "invalid_url",
    );
    line(br#"{"url": "javascript:alert(1)"}"#, "error", "invalid_url");
    line(
        br#"{"url": "https://example.com/r", "code": "metrics"}"#,
        "error",
        "invalid_code",
    );
    line(
        br#"{"url": "https://example.com/r", "code": "API"}"#,
        "error",
        "invalid_code",
    );
    line(
        br#"{"url": "https://example.com/r", "code": "a b"}"#,
        "error",
        "invalid_code",
    );
    line(
        br#"{"url": "https://example.com/r", "code": "caf\u00e9"}"#,
        "error",
        "invalid_code",
    );
    line(
        br#"{"url": "https://example.com/r", "code": "0123456789abc"}"#,
        "error",
        "invalid_code",
    );
    line(
        br#"{"url": "https://example.com/dup", "code": "dup-code"}"#,
        "created",
        "",
    );
    line(
        br#"{"url": "https://example.com/dup", "code": "dup-code"}"#,
        "error",
        "duplicate_code",
    );
    line(
        br#"{"url": "https://example.com/mine", "code": "taken-code"}"#,
        "error",
        "code_taken",
    );
    line(
        br#"{"url": "https://example.com/theirs", "code": "also-theirs"}"#,
        "error",
        "code_taken",
    );
    line(
        br#"{"url": "https://example.com/d", "code": "bad-date", "created_at": "yesterday"}"#,
        "error",
        "invalid_created_at",
    );
    line(
        br#"{"url": "https://example.com/d", "created_at": "2999-01-01T00:00:00Z"}"#,
        "error",
        "invalid_created_at",
    );
    line(
        br#"{"url": "https://example.com/d", "expires_at": "2020-13-01T00:00:00Z"}"#,
        "error",
        "invalid_expiry",
    );
    line(br#"{"url": "https://example.com/d", "created_at": "2020-01-02T00:00:00Z", "expires_at": "2020-01-01T00:00:00Z"}"#, "error", "invalid_expiry");
    line(
        br#"{"url": "https://example.com/t", "tags": ["q&a"]}"#,
        "error",
        "invalid_tag",
    );
    line(
        br#"{"url": "https://example.com/t", "max_visits": 0}"#,
        "error",
        "invalid_max_visits",
    );
    line(
        br#"{"url": "https://example.com/t", "max_visits": 18446744073709551615}"#,
        "error",
        "invalid_max_visits",
    );
    line(
        br#"{"url": "https://example.com/t", "code": "x-1", "private": true}"#,
        "error",
        "conflicting_options",
    );
    line(
        br#"{"url": "https://example.com/t", "colour": "red"}"#,
        "error",
        "invalid_json",
    );
    line(
        br#"{"url": "https://example.com/t""#,
        "error",
        "invalid_json",
    );
    line(
        b"{\"url\": \"https://example.com/\xff\xfe\"}",
        "error",
        "invalid_utf8",
    );
    line(
        br#"{"url": "https://example.com/ok-2", "code": "ok-2"}"#,
        "created",
        "",
    );
    // A 100 MB line is refused on its own; the row after it is read.
    let huge = format!(
        "{{\"url\": \"https://example.com/{}\"}}",
        "a".repeat(100 * 1024 * 1024)
    );
    line(huge.as_bytes(), "error", "row_too_long");
    drop(huge);
    line(br#"{"url": "https://example.com/ok-3"}"#, "created", "");
    let rows = expect.len();

    let (status, lines) = node.import_with_key(NDJSON, body, "", &keys.own).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(lines.len(), rows + 1);
    for (n, (status, error)) in expect.iter().enumerate() {
        let line = row(&lines, n as u64 + 1);
        assert_eq!(line["status"], *status, "row {}: {line}", n + 1);
        if !error.is_empty() {
            assert_eq!(line["error"], *error, "row {}: {line}", n + 1);
            assert!(
                line["message"].as_str().is_some_and(|m| m.len() <= 300),
                "{line}"
            );
        }
    }
    // A row with a link names its short URL; a refused one has none.
    let short_url = |n: u64| row(&lines, n)["short_url"].clone();
    assert!(
        short_url(1).as_str().is_some_and(|u| u.ends_with("/ok-1")),
        "{lines:?}"
    );
    let generated = row(&lines, rows as u64);
    let url = generated["short_url"]
        .as_str()
        .expect("a generated row's short URL");
    assert!(url.ends_with(&format!("/{}", generated["code"].as_str().expect("code"))));
    assert_eq!(short_url(2), Value::Null, "{lines:?}");
    // A refused row is named by a code it gave that the node can serve, and only by such.
    let named = |n: u64| row(&lines, n)["code"].clone();
    assert_eq!(named(2), json!("bad-url"), "a row refused for its URL");
    assert_eq!(named(3), Value::Null, "a row without a code");
    assert_eq!(named(13), json!("bad-date"), "a row refused as it was read");
    for n in 4..=8 {
        assert_eq!(named(n), Value::Null, "row {n}: a code no link can have");
    }
    // Another tenant's code is `code_taken`, never `exists`: nothing says whose it is.
    assert!(!lines.iter().any(|l| l["status"] == "exists"));
    // A row refused as no import row still names its code; a password (which an import does
    // not set) is refused as such, not as an unknown field.
    let (_, odd) = node
        .import_with_key(
            NDJSON,
            concat!(
                r#"{"url": "https://example.com/t", "code": "odd-field", "colour": "red"}"#,
                "\n",
                r#"{"url": "https://example.com/t", "code": "with-password", "password": "pw"}"#,
                "\n",
                r#"{"url": "https://example.com/t", "code": "minus-one", "max_visits": -1}"#,
                "\n",
            ),
            "dry_run=true",
            &keys.own,
        )
        .await;
    assert_eq!(
        (&row(&odd, 1)["error"], &row(&odd, 1)["code"]),
        (&json!("invalid_json"), &json!("odd-field")),
        "{odd:?}"
    );
    assert_eq!(
        (&row(&odd, 2)["error"], &row(&odd, 2)["code"]),
        (&json!("password_protected"), &json!("with-password")),
        "{odd:?}"
    );
    assert_eq!(row(&odd, 3)["error"], "invalid_max_visits", "{odd:?}");
    // Another tool's CSV with a password column: a row with one is refused, never imported
    // open to anyone; a row without one is imported.
    let (_, csv) = node
        .import_with_key(
            "text/csv",
            "url,code,password\nhttps://example.com/p,csv-pw,secret\nhttps://example.com/o,csv-open,\n",
            "dry_run=true",
            &keys.own,
        )
        .await;
    assert_eq!(row(&csv, 1)["error"], "password_protected", "{csv:?}");
    assert_eq!(row(&csv, 2)["status"], "valid", "{csv:?}");
    let created = expect.iter().filter(|(s, _)| *s == "created").count();
    assert_eq!(summary(&lines)["created"], created);
    assert_eq!(summary(&lines)["errors"], rows - created);
    assert_eq!(
        node.stored_links().await,
        stored + created as u64,
        "a refused row was stored"
    );

    // `?results=errors` answers only the refused rows, and the summary.
    let body = ndjson(&[
        json!({ "url": "https://example.com/q1" }),
        json!({ "url": "bad" }),
    ]);
    let (_, lines) = node
        .import_with_key(NDJSON, body, "results=errors", &keys.own)
        .await;
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[0]["row"], 2);

    // One code twice in a file is a duplicate, on the first run and on a rerun (where the
    // first row finds the link the first run made), a dry one too.
    let body = || {
        ndjson(&[
            json!({ "url": "https://example.com/first", "code": "twice" }),
            json!({ "url": "https://example.com/second", "code": "twice" }),
        ])
    };
    for (query, first) in [("", "created"), ("", "exists"), ("dry_run=true", "exists")] {
        let (_, lines) = node.import_with_key(NDJSON, body(), query, &keys.own).await;
        let said = |n: u64| {
            (
                row(&lines, n)["status"].clone(),
                row(&lines, n)["error"].clone(),
            )
        };
        assert_eq!(said(1).0, first, "{query}: {lines:?}");
        assert_eq!(
            said(2),
            (json!("error"), json!("duplicate_code")),
            "{query}: {lines:?}"
        );
    }

    // Requests refused as a whole: nothing read, nothing stored.
    let before = node.stored_links().await;
    for (content_type, query, key, status) in [
        (
            "text/plain",
            "",
            &keys.own,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
        ),
        (NDJSON, "dry_run=maybe", &keys.own, StatusCode::BAD_REQUEST),
        (NDJSON, "results=some", &keys.own, StatusCode::BAD_REQUEST),
        (NDJSON, "mode=fast", &keys.own, StatusCode::BAD_REQUEST),
        (NDJSON, "", &keys.scopeless, StatusCode::FORBIDDEN),
        (
            NDJSON,
            "",
            &"not-a-key-at-all-0000000000".to_string(),
            StatusCode::UNAUTHORIZED,
        ),
        ("text/csv", "", &keys.own, StatusCode::UNPROCESSABLE_ENTITY),
    ] {
        let body = if content_type == "text/csv" {
            "code,tags\nabc-1,x\n".to_string()
        } else {
            ndjson(&[json!({ "url": "https://example.com/never" })])
        };
        let (got, answer) = node.import_with_key(content_type, body, query, key).await;
        assert_eq!(got, status, "{content_type} {query}: {answer:?}");
    }
    let (_, answer) = node
        .import_with_key("text/csv", "code,tags\nabc-1,x\n", "", &keys.own)
        .await;
    assert_eq!(answer[0]["error"], "missing_url_column");
    assert_eq!(node.stored_links().await, before);
}
on_both_stores!(bad_rows_fail_alone_and_store_nothing);

/// A row imported already expired without a creation time is dated at its expiry, so this
/// node's own export of it imports again (into a dry run here: every row is `exists`), while a
/// row whose expiry comes before its creation is still refused.
async fn an_expired_row_imports_back_from_its_export(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = stack.node("a").await;
    let rows = [
        json!({ "url": "https://example.com/old", "code": "old-expired", "expires_at": "2020-01-01T00:00:00Z" }),
        json!({ "url": "https://example.com/old-generated", "expires_at": "2020-01-01T00:00:00Z" }),
    ];
    let (status, lines) = node.import(NDJSON, ndjson(&rows), "").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(summary(&lines)["created"], 2, "{lines:?}");
    let (_, link) = node.get("old-expired").await;
    assert_eq!(link["created_at"], "2020-01-01T00:00:00.000Z", "{link}");
    assert_eq!(link["state"], "expired", "{link}");
    for format in ["csv", "ndjson"] {
        let (status, export) = node.export(&format!("format={format}")).await;
        assert_eq!(status, StatusCode::OK, "{export}");
        let kind = if format == "csv" { "text/csv" } else { NDJSON };
        let (status, again) = node.import(kind, export, "dry_run=true").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(summary(&again)["exists"], 2, "{format}: {again:?}");
    }
    let reversed = json!({ "url": "https://example.com/r", "code": "reversed",
        "created_at": "2021-01-01T00:00:00Z", "expires_at": "2020-01-01T00:00:00Z" });
    let (_, lines) = node.import(NDJSON, ndjson(&[reversed]), "").await;
    assert_eq!(row(&lines, 1)["error"], "invalid_expiry", "{lines:?}");
}
on_both_stores!(an_expired_row_imports_back_from_its_export);

async fn csv_exports_of_other_shorteners_import_with_their_columns(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = stack.node("a").await;
    let bitly = "Title,Bitlink,Long URL,Created,Tags\n\
        Spring,https://bit.ly/3xYzAbC,https://example.com/spring,2024-03-01 10:00:00,Promo|Spring Sale\n\
        \"Quoted, title\",bit.ly/4Qq,\"https://example.com/q?a=1,2\",2024-03-02 10:00:00,\n";
    let (status, lines) = node.import("text/csv", bitly, "").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(summary(&lines)["created"], 2, "{lines:?}");
    assert_eq!(
        node.location("3xYzAbC").await.1.as_deref(),
        Some("https://example.com/spring")
    );
    assert_eq!(
        node.location("4Qq").await.1.as_deref(),
        Some("https://example.com/q?a=1,2")
    );
    let (_, link) = node.get("3xYzAbC").await;
    // Tags as Shlink stores them: lower case, a dash for each space.
    assert_eq!(link["tags"], json!(["promo", "spring-sale"]));
    assert_eq!(link["created_at"], "2024-03-01T10:00:00.000Z");

    // The Shlink web client's export: an empty domain is the default domain.
    let shlink = "createdAt,domain,shortCode,shortUrl,longUrl,title,tags,visits\r\n\
        2023-05-06T07:08:09+00:00,,x-1,https://s.test/x-1,https://example.com/x1,,t1|t2,3\r\n";
    let (_, lines) = node.import("text/csv", shlink, "").await;
    assert_eq!(summary(&lines)["created"], 1, "{lines:?}");
    let yourls = "keyword,url,title,timestamp,ip,clicks\nyo_1,https://example.com/y,T,2019-01-02 03:04:05,1.2.3.4,7\n";
    let (_, lines) = node.import("text/csv", yourls, "").await;
    assert_eq!(summary(&lines)["created"], 1, "{lines:?}");
    assert_eq!(
        node.location("yo_1").await.1.as_deref(),
        Some("https://example.com/y")
    );
    // A row with more fields than the header, and bad bytes, fail alone.
    let bad = b"url,code\nhttps://example.com/a,c-1,extra\nhttps://example.com/\xff,c-2\nhttps://example.com/b,c-3\n".to_vec();
    let (_, lines) = node.import("text/csv", bad, "").await;
    assert_eq!(row(&lines, 1)["error"], "invalid_csv");
    assert_eq!(row(&lines, 2)["error"], "invalid_utf8");
    assert_eq!(row(&lines, 3)["status"], "created");
}
on_both_stores!(csv_exports_of_other_shorteners_import_with_their_columns);

async fn a_dry_run_checks_every_row_and_stores_nothing(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = stack.node("a").await;
    let (_, first) = node
        .import(
            NDJSON,
            ndjson(&[
                json!({ "url": "https://example.com/have", "code": "have-1" }),
                json!({ "url": "https://example.com/gen" }),
            ]),
            "",
        )
        .await;
    assert_eq!(summary(&first)["created"], 2);
    let stored = node.stored_links().await;
    let rows = [
        json!({ "url": "https://example.com/new", "code": "new-1" }),
        json!({ "url": "https://example.com/have", "code": "have-1" }),
        json!({ "url": "https://example.com/gen" }),
        json!({ "url": "https://example.com/fresh" }),
        json!({ "url": "bad" }),
        json!({ "url": "https://example.com/new", "code": "new-1" }),
    ];
    let (status, lines) = node.import(NDJSON, ndjson(&rows), "dry_run=true").await;
    assert_eq!(status, StatusCode::OK);
    let statuses: Vec<&str> = (1..=6)
        .map(|n| row(&lines, n)["status"].as_str().expect("status"))
        .collect();
    assert_eq!(
        statuses,
        ["valid", "exists", "exists", "valid", "error", "error"]
    );
    assert_eq!(row(&lines, 6)["error"], "duplicate_code");
    let said = summary(&lines);
    assert_eq!(said["dry_run"], true);
    // What a dry run would make is `valid`, never `created`.
    assert_eq!(
        (&said["valid"], &said["created"]),
        (&json!(2), &json!(0)),
        "{said}"
    );
    assert_eq!(
        node.stored_links().await,
        stored,
        "a dry run stored something"
    );
    assert_eq!(node.location("new-1").await.0, StatusCode::NOT_FOUND);
}
on_both_stores!(a_dry_run_checks_every_row_and_stores_nothing);

/// A legacy code may spell the code of an ID this node has not used yet: the generated create
/// that reaches that ID steps over it, without failing and without the conflict alarm.
async fn a_generated_create_steps_over_an_imported_code_without_the_alarm(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = stack.node("a").await;
    let id = node.app.ids.next_id().expect("an ID in hand");
    let legacy = node.app.space.encode(id + 1);
    let (_, lines) = node
        .import(
            NDJSON,
            ndjson(&[json!({ "url": "https://legacy.example/", "code": legacy })]),
            "",
        )
        .await;
    assert_eq!(row(&lines, 1)["status"], "created", "{lines:?}");
    let made = node.create_url("https://example.com/next").await;
    assert_eq!(
        made,
        node.app.space.encode(id + 2),
        "the create took the ID after the legacy code's"
    );
    assert_eq!(
        node.location(&legacy).await.1.as_deref(),
        Some("https://legacy.example/")
    );
    assert_eq!(
        node.location(&made).await.1.as_deref(),
        Some("https://example.com/next")
    );
    let metrics = node.metrics().await;
    assert!(
        metrics.contains("shortener_generated_code_conflicts_total 0"),
        "the alarm went off"
    );
    assert!(
        metrics.contains("shortener_generated_codes_skipped_imported_total 1"),
        "{metrics}"
    );

    // An import's codeless rows go in together; one whose code a legacy code holds steps over
    // it the same way.
    let next = id + 3;
    let planted = node.app.space.encode(next + 1);
    let (_, lines) = node
        .import(
            NDJSON,
            ndjson(&[json!({ "url": "https://legacy.example/2", "code": planted })]),
            "",
        )
        .await;
    assert_eq!(row(&lines, 1)["status"], "created", "{lines:?}");
    let (_, lines) = node
        .import(
            NDJSON,
            ndjson(&[
                json!({ "url": "https://example.com/first" }),
                json!({ "url": "https://example.com/second" }),
            ]),
            "",
        )
        .await;
    assert_eq!(
        row(&lines, 1)["code"],
        node.app.space.encode(next).as_str(),
        "{lines:?}"
    );
    assert_eq!(row(&lines, 2)["status"], "created", "{lines:?}");
    assert_eq!(
        row(&lines, 2)["code"],
        node.app.space.encode(next + 2).as_str(),
        "{lines:?}"
    );
    assert_eq!(
        node.location(&planted).await.1.as_deref(),
        Some("https://legacy.example/2")
    );
    let metrics = node.metrics().await;
    assert!(
        metrics.contains("shortener_generated_code_conflicts_total 0"),
        "the alarm went off"
    );
    assert!(
        metrics.contains("shortener_generated_codes_skipped_imported_total 2"),
        "{metrics}"
    );
}
on_both_stores!(a_generated_create_steps_over_an_imported_code_without_the_alarm);

/// Imports `codes` as legacy links in one request; every row is created.
async fn plant(node: &Node, codes: &[String]) {
    let rows: Vec<Value> = codes
        .iter()
        .map(|code| json!({ "url": format!("https://legacy.example/{code}"), "code": code }))
        .collect();
    let (status, lines) = node.import(NDJSON, ndjson(&rows), "").await;
    assert_eq!(status, StatusCode::OK, "{lines:?}");
    assert_eq!(
        summary(&lines)["created"],
        codes.len(),
        "the legacy codes were not all imported: {lines:?}"
    );
}

/// However many imported legacy codes hold the next generated codes, a create steps over all
/// of them: it never fails for imported rows, and the conflict alarm stays silent.
async fn creates_step_over_any_run_of_imported_codes(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = stack.node("a").await;
    let metrics_say = |metrics: &str, skipped: u64| {
        assert!(
            metrics.contains("shortener_generated_code_conflicts_total 0"),
            "the alarm went off"
        );
        assert!(
            metrics.contains(&format!(
                "shortener_generated_codes_skipped_imported_total {skipped}"
            )),
            "{metrics}"
        );
    };
    // The next 200 generated codes, taken by an import.
    let id = node.app.ids.next_id().expect("an ID in hand");
    let planted: Vec<String> = (id + 1..=id + 200)
        .map(|n| node.app.space.encode(n))
        .collect();
    plant(&node, &planted).await;
    let (status, body) = node
        .create(json!({ "url": "https://example.com/first" }))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["code"], node.app.space.encode(id + 201).as_str());
    metrics_say(&node.metrics().await, 200);

    // Another run ahead of many creates at once: every one is made, under its own code.
    let id = node.app.ids.next_id().expect("an ID in hand");
    let planted: Vec<String> = (id + 1..=id + 100)
        .map(|n| node.app.space.encode(n))
        .collect();
    plant(&node, &planted).await;
    let creates =
        (0..60).map(|i| node.create(json!({ "url": format!("https://example.com/{i}") })));
    let mut made = std::collections::HashSet::new();
    for (status, body) in futures::future::join_all(creates).await {
        assert_eq!(status, StatusCode::CREATED, "{body}");
        made.insert(body["code"].as_str().expect("a code").to_string());
    }
    assert_eq!(made.len(), 60, "two creates answered the same code");
    assert!(made.iter().all(|code| !planted.contains(code)));
    metrics_say(&node.metrics().await, 300);

    // An import's codeless rows, written together, step over a run the same way.
    let id = node.app.ids.next_id().expect("an ID in hand");
    let planted: Vec<String> = (id + 1..=id + 50)
        .map(|n| node.app.space.encode(n))
        .collect();
    plant(&node, &planted).await;
    let (_, lines) = node
        .import(
            NDJSON,
            ndjson(&[
                json!({ "url": "https://example.com/row-1" }),
                json!({ "url": "https://example.com/row-2" }),
            ]),
            "",
        )
        .await;
    assert_eq!(summary(&lines)["created"], 2, "{lines:?}");
    assert_eq!(
        row(&lines, 1)["code"],
        node.app.space.encode(id + 51).as_str()
    );
    metrics_say(&node.metrics().await, 350);
    for code in &planted {
        assert_eq!(
            node.location(code).await.1,
            Some(format!("https://legacy.example/{code}"))
        );
    }
}
on_both_stores!(creates_step_over_any_run_of_imported_codes);

/// An import of several chunks is answered row by row in order, whatever chunk a row falls in:
/// a code repeated in a later chunk is a duplicate and a codeless row repeated there finds the
/// link the earlier one made, bad rows at the edges of chunks fail alone, and the import again
/// creates nothing.
async fn an_import_of_several_chunks_answers_every_row_in_order(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = stack.node("a").await;
    // More than two chunks of rows (shortener/src/links/import/mod.rs, CHUNK_ROWS).
    let total = 4_500u64;
    let bad = [2_000, 2_001, 4_000, total];
    let rows: Vec<Value> = (1..=total)
        .map(|n| match n {
            n if bad.contains(&n) => json!({ "url": format!("not a url {n}") }),
            // The code of row 3 again, a chunk later.
            3_100 => json!({ "url": "https://example.com/3", "code": "legacy-3" }),
            // The codeless row 10 again, a chunk later.
            2_600 => json!({ "url": "https://example.com/10" }),
            n if n % 3 == 0 => {
                json!({ "url": format!("https://example.com/{n}"), "code": format!("legacy-{n}") })
            }
            n => json!({ "url": format!("https://example.com/{n}") }),
        })
        .collect();
    let body = ndjson(&rows);
    let (status, lines) = node.import(NDJSON, body.clone(), "").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(lines.len() as u64, total + 1);
    for (i, line) in lines[..total as usize].iter().enumerate() {
        let n = i as u64 + 1;
        assert_eq!(line["row"], n, "rows answered in order");
        let expected = match n {
            n if bad.contains(&n) => "error",
            2_600 => "exists",
            3_100 => "error",
            _ => "created",
        };
        assert_eq!(line["status"], expected, "{line}");
    }
    assert_eq!(row(&lines, 3_100)["error"], "duplicate_code");
    assert_eq!(row(&lines, 2_600)["code"], row(&lines, 10)["code"]);
    assert_eq!(row(&lines, 4_000)["error"], "invalid_url");
    let made = total - 6;
    assert_eq!(
        (
            &summary(&lines)["created"],
            &summary(&lines)["exists"],
            &summary(&lines)["errors"]
        ),
        (&json!(made), &json!(1), &json!(5))
    );
    let stored = node.stored_links().await;
    assert_eq!(stored, made);

    // Again, answering only the refused rows: nothing is made twice (the repeated code now
    // finds the link of the first run, as row 3 does).
    let (_, again) = node.import(NDJSON, body, "results=errors").await;
    let refused: Vec<u64> = again[..again.len() - 1]
        .iter()
        .map(|l| l["row"].as_u64().expect("a row number"))
        .collect();
    assert_eq!(refused, [2_000, 2_001, 4_000, total]);
    assert_eq!(summary(&again)["created"], 0);
    assert_eq!(summary(&again)["exists"], made + 2);
    assert_eq!(node.stored_links().await, stored);
}
on_both_stores!(an_import_of_several_chunks_answers_every_row_in_order);

/// Rows without codes stop the import too when their chunk's write fails, rather than each
/// row of the rest being answered the same error (and spending an ID).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_of_generated_codes_whose_write_fails_stops() {
    let stack = Stack::new(Backend::Postgres).await;
    let mut config = stack.config("stopped-generated");
    config.store.database_statement_timeout_ms = 1000;
    let node = Node::start(config).await;
    // Three chunks' worth, none with a code of its own.
    let rows: Vec<Value> = (1..=5_000)
        .map(|n| json!({ "url": format!("https://example.com/{n}") }))
        .collect();
    let locker = stack.db.as_ref().expect("a database").connect().await;
    locker
        .batch_execute("BEGIN; LOCK TABLE links IN EXCLUSIVE MODE")
        .await
        .expect("lock");
    let (status, lines) = node.import(NDJSON, ndjson(&rows), "").await;
    locker.batch_execute("ROLLBACK").await.expect("unlock");
    assert_eq!(status, StatusCode::OK);
    let stopped = summary(&lines);
    assert!(stopped["stopped"]["error"].is_string(), "{stopped}");
    assert_eq!(stopped["created"], 0, "{stopped}");
    // Only the first chunk was tried: the rows after it are not answered at all.
    assert!(lines.len() <= 2_001, "{} lines", lines.len());
    assert_eq!(node.stored_links().await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_whose_writes_fail_stops_and_a_second_run_creates_each_row_once() {
    let stack = Stack::new(Backend::Postgres).await;
    let mut config = stack.config("stopped");
    config.store.database_statement_timeout_ms = 1000;
    let node = Node::start(config).await;
    let rows: Vec<Value> = (1..=30)
        .map(|n| match n {
            n if n % 3 == 0 => {
                json!({ "url": format!("https://example.com/{n}"), "code": format!("stop-{n}") })
            }
            n => json!({ "url": format!("https://example.com/{n}") }),
        })
        .collect();
    let body = ndjson(&rows);
    // The links table is locked against writes: the chunk's write runs into the statement
    // timeout, and the import stops there.
    let locker = stack.db.as_ref().expect("a database").connect().await;
    locker
        .batch_execute("BEGIN; LOCK TABLE links IN EXCLUSIVE MODE")
        .await
        .expect("lock");
    let (status, lines) = node.import(NDJSON, body.clone(), "").await;
    assert_eq!(status, StatusCode::OK, "{lines:?}");
    let stopped = summary(&lines);
    assert!(stopped["stopped"]["error"].is_string(), "{stopped}");
    assert!(stopped["stopped"]["message"].is_string(), "{stopped}");
    assert_eq!(stopped["created"], 0, "{stopped}");
    // No row of the chunk is answered as made, and none is stored.
    assert!(
        lines[..lines.len() - 1]
            .iter()
            .all(|l| l["status"] != "created" && l["status"] != "exists"),
        "{lines:?}"
    );
    locker.batch_execute("ROLLBACK").await.expect("unlock");
    assert_eq!(node.stored_links().await, 0);

    // Importing the file again makes every row once; a third run finds them all.
    let (_, again) = node.import(NDJSON, body.clone(), "").await;
    assert!(summary(&again).get("stopped").is_none(), "{again:?}");
    assert_eq!(summary(&again)["created"], 30);
    let (_, third) = node.import(NDJSON, body, "").await;
    assert_eq!(
        (&summary(&third)["created"], &summary(&third)["exists"]),
        (&json!(0), &json!(30))
    );
    assert_eq!(node.stored_links().await, 30);
}
