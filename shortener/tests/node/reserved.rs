//! Reserved words (every fixed route's first segment among them) are refused as codes by every
//! write path, from the one list, and `/console` is never a code's redirect.

use crate::helpers::{Backend, Node, Stack, authed};
use proto::shortener::v1 as pb;
use reqwest::StatusCode;
use serde_json::{Value, json};

/// Reserved words as a client might spell them: the fixed routes, the ops paths, and the
/// compatible APIs' paths, in several cases.
const WORDS: &[&str] = &[
    "console",
    "Console",
    "CONSOLE",
    "api",
    "Api",
    "rest",
    "REST",
    "v4",
    "V4",
    "yourls-api.php",
    "apple-app-site-association",
    "metrics",
    "healthz",
    "readyz",
    "well-known",
];

async fn every_write_path_refuses_reserved_words_as_codes(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = stack.node("a").await;
    let existing = node.create_url("https://example.com/existing").await;
    let stored = node.stored_links().await;
    let mut client = node.links_client().await;

    for &word in WORDS {
        // HTTP create with the word as an alias.
        let (status, body) = node
            .create(json!({ "url": "https://example.com/r", "alias": word }))
            .await;
        assert!(status.is_client_error(), "{word}: create answered {status}");
        assert_eq!(body["error"], "invalid_alias", "{word}: {body}");

        // HTTP import, dry and real, with the word as a legacy code.
        for query in ["dry_run=true", ""] {
            let row = format!(
                "{}\n",
                json!({ "url": "https://example.com/r", "code": word })
            );
            let (status, lines) = node.import("application/x-ndjson", row, query).await;
            assert_eq!(status, StatusCode::OK, "{word} {query}");
            assert_eq!(lines[0]["status"], "error", "{word} {query}: {lines:?}");
            assert_eq!(
                lines[0]["error"], "invalid_code",
                "{word} {query}: {lines:?}"
            );
        }

        // gRPC create, batch create and import.
        let refused = client
            .create_link(authed(pb::CreateLinkRequest {
                url: "https://example.com/r".into(),
                alias: Some(word.into()),
                ..Default::default()
            }))
            .await
            .expect_err(word);
        assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{word}");
        let batch = client
            .batch_create_links(authed(pb::BatchCreateLinksRequest {
                items: vec![pb::CreateLinkRequest {
                    url: "https://example.com/r".into(),
                    alias: Some(word.into()),
                    ..Default::default()
                }],
            }))
            .await
            .expect("a batch answers per item")
            .into_inner();
        match &batch.results[0].outcome {
            Some(pb::batch_create_result::Outcome::Error(error)) => {
                assert_eq!(error.error, "invalid_alias", "{word}")
            }
            other => panic!("{word}: batch item {other:?}"),
        }
        let answers: Vec<pb::ImportLinksResponse> = {
            use futures::StreamExt;
            client
                .import_links(authed(futures::stream::iter([pb::ImportLinksRequest {
                    rows: vec![pb::ImportRow {
                        url: "https://example.com/r".into(),
                        code: Some(word.into()),
                        ..Default::default()
                    }],
                    dry_run: false,
                    ..Default::default()
                }])))
                .await
                .expect("import")
                .into_inner()
                .map(|a| a.expect("an answer"))
                .collect()
                .await
        };
        match &answers[0].outcome {
            Some(pb::import_links_response::Outcome::Row(row)) => {
                assert_eq!(row.status, "error", "{word}");
                assert_eq!(
                    row.error.as_ref().map(|e| e.error.as_str()),
                    Some("invalid_code"),
                    "{word}"
                );
            }
            other => panic!("{word}: import answered {other:?}"),
        }

        // A patch cannot give a link a code at all.
        let (status, body) = node.patch(&existing, json!({ "code": word })).await;
        assert!(status.is_client_error(), "{word}: patch answered {status}");
        assert_eq!(body["error"], "read_only_field", "{word}: {body}");
    }
    assert_eq!(
        node.stored_links().await,
        stored,
        "a reserved word was stored"
    );
}
on_both_stores!(every_write_path_refuses_reserved_words_as_codes);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_without_a_slash_is_a_route_not_a_code() {
    let stack = Stack::new(Backend::Sqlite).await;
    let node = stack.node("a").await;
    let (status, location) = node.location("console").await;
    assert_eq!(status, StatusCode::PERMANENT_REDIRECT);
    assert_eq!(location.as_deref(), Some("/console/"));

    let mut config = stack.config("b");
    config.access.console = false;
    let node = Node::start(config).await;
    let response = node.visit("console").await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["error"], "not_found");
}

/// A generated code that would spell a reserved word (at the default length of 7, one ID each
/// encodes to `console`, `healthz` and `metrics`) is never handed out: its ID is passed over,
/// so no create is acknowledged for a link the router could never reach.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_generated_code_spells_a_reserved_word() {
    let stack = Stack::new(Backend::Sqlite).await;
    let config = stack.config("spelled");
    let first = Node::start(config.clone()).await;
    let space = std::sync::Arc::clone(&first.app.space);
    first.stop().await;
    let console = space
        .decode("console")
        .expect("`console` has the generated shape at the default length");
    // The embedded ledger's next lease starts at that ID.
    let file = rusqlite::Connection::open(
        stack
            .dir
            .path()
            .join("spelled")
            .join(shortener::app::DB_FILE),
    )
    .expect("open");
    let moved = file
        .execute(
            "UPDATE id_namespaces SET next_id = ?1",
            [i64::try_from(console).expect("an ID of 7 characters")],
        )
        .expect("move the ledger");
    assert_eq!(moved, 1);
    drop(file);
    let node = Node::start(config).await;
    let mut codes = Vec::new();
    for n in 0..3 {
        let (status, body) = node
            .create(json!({ "url": format!("https://example.com/spelled/{n}") }))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        codes.push(body["code"].as_str().expect("code").to_owned());
    }
    assert_eq!(codes[0], space.encode(console + 1), "{codes:?}");
    for (n, code) in codes.iter().enumerate() {
        assert!(!codespace::shape::is_reserved(code), "{code}");
        let (status, location) = node.location(code).await;
        assert_eq!(status, StatusCode::FOUND, "{code}");
        assert_eq!(
            location.as_deref(),
            Some(format!("https://example.com/spelled/{n}").as_str())
        );
    }
    // `/console` is still the console.
    let (status, _) = node.location("console").await;
    assert_eq!(status, StatusCode::PERMANENT_REDIRECT);
}
