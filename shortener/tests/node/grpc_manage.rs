//! Link management over gRPC, with the semantics and errors of the JSON API: ListLinks,
//! UpdateLink, GetLinkHistory, ImportLinks (streams both ways), ExportLinks (streams out).

use crate::helpers::{Backend, Stack, authed, create};
use futures::StreamExt;
use proto::shortener::v1 as pb;
use tonic::Code;

fn error_code(status: &tonic::Status) -> String {
    status
        .metadata()
        .get("error-code")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}

fn filter(tag: Option<&str>) -> Option<pb::LinkFilter> {
    Some(pb::LinkFilter {
        tag: tag.map(str::to_string),
        ..Default::default()
    })
}

async fn list_update_and_history_work_over_grpc(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = stack.node("a").await;
    let mut client = node.links_client().await;
    let mut made = Vec::new();
    for i in 0..9 {
        let mut request = create(&format!("https://example.com/{i}"));
        request.tags = vec!["g".into()];
        request.max_visits = Some(100);
        let link = client
            .create_link(authed(request))
            .await
            .expect("create")
            .into_inner();
        assert_eq!(
            (link.tags.clone(), link.max_visits, link.state.as_str()),
            (vec!["g".to_string()], Some(100), "active")
        );
        made.push(link.code);
    }
    // Pages of four, newest first, each link once.
    let mut seen = Vec::new();
    let mut cursor = None;
    loop {
        let page = client
            .list_links(authed(pb::ListLinksRequest {
                limit: Some(4),
                cursor: cursor.clone(),
                filter: filter(Some("g")),
            }))
            .await
            .expect("list")
            .into_inner();
        seen.extend(page.links.into_iter().map(|l| l.code));
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    made.reverse();
    assert_eq!(seen, made);

    let code = made[0].clone();
    let updated = client
        .update_link(authed(pb::UpdateLinkRequest {
            code: code.clone(),
            url: Some("https://example.com/moved".into()),
            tags: Some(pb::TagList { tags: vec![] }),
            clear_max_visits: true,
            disabled: Some(true),
            ..Default::default()
        }))
        .await
        .expect("update")
        .into_inner();
    assert_eq!(updated.url, "https://example.com/moved");
    assert!(updated.tags.is_empty());
    assert_eq!(updated.max_visits, None);
    assert_eq!(updated.state, "disabled");
    assert!(updated.disabled_at.is_some());
    let history = client
        .get_link_history(authed(pb::GetLinkHistoryRequest {
            code: code.clone(),
            ..Default::default()
        }))
        .await
        .expect("history")
        .into_inner();
    let kinds: Vec<&str> = history.events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, ["create", "update", "disable"]);
    let change = history.events[1].change.as_ref().expect("a change");
    let url = change.fields["url"].kind.as_ref().expect("url change");
    let pb_value_new = match url {
        prost_types::value::Kind::StructValue(s) => s.fields["new"].clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(
        pb_value_new.kind,
        Some(prost_types::value::Kind::StringValue(
            "https://example.com/moved".into()
        ))
    );
    assert!(
        history
            .events
            .iter()
            .all(|e| e.key.starts_with("default/") && e.key == history.events[0].key)
    );

    // The errors of the JSON API, as statuses with the same machine codes.
    client
        .delete_link(authed(pb::DeleteLinkRequest {
            code: made[1].clone(),
            ..Default::default()
        }))
        .await
        .expect("delete");
    let cases: Vec<(pb::UpdateLinkRequest, Code, &str)> = vec![
        (
            pb::UpdateLinkRequest {
                code: made[1].clone(),
                disabled: Some(true),
                ..Default::default()
            },
            Code::FailedPrecondition,
            "gone",
        ),
        (
            pb::UpdateLinkRequest {
                code: "zzzzzzz".into(),
                disabled: Some(true),
                ..Default::default()
            },
            Code::NotFound,
            "not_found",
        ),
        (
            pb::UpdateLinkRequest {
                code: code.clone(),
                url: Some("ftp://x".into()),
                ..Default::default()
            },
            Code::InvalidArgument,
            "invalid_url",
        ),
        (
            pb::UpdateLinkRequest {
                code: code.clone(),
                max_visits: Some(1),
                clear_max_visits: true,
                ..Default::default()
            },
            Code::InvalidArgument,
            "conflicting_options",
        ),
        (
            pb::UpdateLinkRequest {
                code: code.clone(),
                max_visits: Some(0),
                ..Default::default()
            },
            Code::InvalidArgument,
            "invalid_max_visits",
        ),
        (
            pb::UpdateLinkRequest {
                code: code.clone(),
                tags: Some(pb::TagList {
                    tags: vec!["A".into()],
                }),
                ..Default::default()
            },
            Code::InvalidArgument,
            "invalid_tag",
        ),
        (
            pb::UpdateLinkRequest {
                code: "bad code".into(),
                ..Default::default()
            },
            Code::InvalidArgument,
            "invalid_code",
        ),
    ];
    for (request, code_want, error) in cases {
        let status = client
            .update_link(authed(request.clone()))
            .await
            .expect_err("refused");
        assert_eq!(
            (status.code(), error_code(&status).as_str()),
            (code_want, error),
            "{request:?}"
        );
    }
    let bad_lists: Vec<(pb::ListLinksRequest, &str)> = vec![
        (
            pb::ListLinksRequest {
                limit: Some(0),
                ..Default::default()
            },
            "invalid_limit",
        ),
        (
            pb::ListLinksRequest {
                limit: Some(1001),
                ..Default::default()
            },
            "invalid_limit",
        ),
        (
            pb::ListLinksRequest {
                cursor: Some("nope".into()),
                ..Default::default()
            },
            "invalid_cursor",
        ),
        (
            pb::ListLinksRequest {
                cursor: cursor_of(&mut client).await,
                filter: filter(Some("other")),
                ..Default::default()
            },
            "invalid_cursor",
        ),
        (
            pb::ListLinksRequest {
                filter: Some(pb::LinkFilter {
                    state: Some("gone".into()),
                    ..Default::default()
                }),
                ..Default::default()
            },
            "invalid_state",
        ),
        (
            pb::ListLinksRequest {
                filter: filter(Some("Bad!")),
                ..Default::default()
            },
            "invalid_tag",
        ),
        (
            pb::ListLinksRequest {
                filter: Some(pb::LinkFilter {
                    created_after: Some(prost_types::Timestamp {
                        seconds: 0,
                        nanos: -1,
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            },
            "invalid_date",
        ),
    ];
    for (request, error) in bad_lists {
        let status = client
            .list_links(authed(request.clone()))
            .await
            .expect_err("refused");
        assert_eq!(
            (status.code(), error_code(&status).as_str()),
            (Code::InvalidArgument, error),
            "{request:?}"
        );
    }
    // Without a key, nothing.
    let status = client
        .list_links(pb::ListLinksRequest::default())
        .await
        .expect_err("unauthenticated");
    assert_eq!(status.code(), Code::Unauthenticated);
}
on_both_stores!(list_update_and_history_work_over_grpc);

/// The cursor of a first page of tag `g`.
async fn cursor_of(
    client: &mut pb::links_client::LinksClient<tonic::transport::Channel>,
) -> Option<String> {
    client
        .list_links(authed(pb::ListLinksRequest {
            limit: Some(1),
            filter: filter(Some("g")),
            ..Default::default()
        }))
        .await
        .expect("list")
        .into_inner()
        .next_cursor
}

async fn imports_and_exports_stream_over_grpc(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = stack.node("a").await;
    let mut client = node.links_client().await;
    let row = |url: &str, code: Option<&str>| pb::ImportRow {
        url: url.into(),
        code: code.map(str::to_string),
        ..Default::default()
    };
    // 3,000 rows in three messages: more than one chunk, answered in order.
    let messages: Vec<pb::ImportLinksRequest> = (0..3)
        .map(|m| pb::ImportLinksRequest {
            rows: (0..1000)
                .map(|i| {
                    let n = m * 1000 + i;
                    if n == 7 {
                        row("not a url", None)
                    } else if n % 2 == 0 {
                        row(
                            &format!("https://example.com/{n}"),
                            Some(&format!("legacy-{n}")),
                        )
                    } else {
                        row(&format!("https://example.com/{n}"), None)
                    }
                })
                .collect(),
            dry_run: false,
            ..Default::default()
        })
        .collect();
    let run = |messages: Vec<pb::ImportLinksRequest>| {
        let mut client = client.clone();
        async move {
            let answers = client
                .import_links(authed(futures::stream::iter(messages)))
                .await
                .expect("import")
                .into_inner();
            answers
                .map(|a| a.expect("an answer").outcome.expect("outcome"))
                .collect::<Vec<_>>()
                .await
        }
    };
    let answers = run(messages.clone()).await;
    assert_eq!(answers.len(), 3001);
    for (i, answer) in answers[..3000].iter().enumerate() {
        let pb::import_links_response::Outcome::Row(result) = answer else {
            panic!("{answer:?}")
        };
        assert_eq!(result.row, i as u64 + 1);
        if i == 7 {
            assert_eq!(result.status, "error");
            let error = result.error.as_ref().expect("an error");
            assert_eq!(
                (error.error.as_str(), error.status),
                ("invalid_url", Code::InvalidArgument as i32)
            );
        } else {
            assert_eq!(result.status, "created", "{result:?}");
        }
    }
    let pb::import_links_response::Outcome::Summary(summary) = &answers[3000] else {
        panic!("no summary")
    };
    assert_eq!(
        (
            summary.rows,
            summary.created,
            summary.errors,
            summary.exists
        ),
        (3000, 2999, 1, 0)
    );
    // Again: nothing twice.
    let answers = run(messages).await;
    let pb::import_links_response::Outcome::Summary(summary) = answers.last().expect("answers")
    else {
        panic!("no summary")
    };
    assert_eq!((summary.created, summary.exists), (0, 2999));
    assert_eq!(node.stored_links().await, 2999);

    // Export: every link, from one snapshot, as a stream.
    let exported: Vec<pb::Link> = client
        .export_links(authed(pb::ExportLinksRequest { filter: None }))
        .await
        .expect("export")
        .into_inner()
        .map(|l| l.expect("a link"))
        .collect()
        .await;
    // More than one batch of the store's export, in list order.
    assert_eq!(exported.len(), 2999);
    assert_eq!(exported.iter().filter(|l| l.imported).count(), 1500);
    let made = |l: &pb::Link| l.created_at.as_ref().map(|t| (t.seconds, t.nanos));
    assert!(
        exported.windows(2).all(|w| made(&w[0]) >= made(&w[1])),
        "newest first"
    );
    let status = client
        .export_links(authed(pb::ExportLinksRequest {
            filter: Some(pb::LinkFilter {
                state: Some("gone".into()),
                ..Default::default()
            }),
        }))
        .await
        .expect_err("refused");
    assert_eq!(error_code(&status), "invalid_state");
}
on_both_stores!(imports_and_exports_stream_over_grpc);

/// An import message of more rows than a chunk holds is refused before any of its rows is
/// checked: the import fails with INVALID_ARGUMENT, having created nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_message_of_too_many_rows_is_refused() {
    let stack = Stack::new(Backend::Sqlite).await;
    let node = stack.node("rows").await;
    let mut client = node.links_client().await;
    let rows = shortener::grpc::ROWS_PER_MESSAGE + 1;
    let message = pb::ImportLinksRequest {
        rows: (0..rows)
            .map(|n| pb::ImportRow {
                url: format!("https://example.com/{n}"),
                ..Default::default()
            })
            .collect(),
        dry_run: false,
        ..Default::default()
    };
    let answers = client
        .import_links(authed(futures::stream::iter([message])))
        .await;
    let refusal = match answers {
        Err(status) => status,
        Ok(stream) => {
            let answers: Vec<_> = stream.into_inner().collect().await;
            answers
                .into_iter()
                .find_map(Result::err)
                .expect("the import was refused")
        }
    };
    assert_eq!(refusal.code(), Code::InvalidArgument, "{refusal:?}");
    assert!(refusal.message().contains("at most"), "{refusal:?}");
    assert_eq!(node.stored_links().await, 0);
}

/// A message is decoded whole, and an empty item is two bytes on the wire but hundreds in
/// memory: a batch or an import message of a million empty items, within the bytes its method
/// takes, is refused as its bytes arrive, with RESOURCE_EXHAUSTED, before it is decoded (decoded,
/// the batch would be answered INVALID_ARGUMENT for its item count, after taking hundreds of
/// megabytes). A full batch of real links, tags and rules included, still fits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_that_would_decode_far_past_their_bytes_are_refused_unread() {
    let stack = Stack::new(Backend::Sqlite).await;
    let node = stack.node("decoded").await;
    let mut client = node.links_client().await;
    let refused_unread = |status: &tonic::Status| {
        assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
        assert_eq!(error_code(status), "payload_too_large");
        assert!(status.message().contains("once decoded"), "{status:?}");
    };

    let empty = vec![pb::CreateLinkRequest::default(); 1_000_000];
    let status = client
        .batch_create_links(authed(pb::BatchCreateLinksRequest { items: empty }))
        .await
        .expect_err("a million empty items were taken");
    refused_unread(&status);

    let rows = vec![pb::ImportRow::default(); 1_000_000];
    let messages = [
        pb::ImportLinksRequest {
            rows: vec![pb::ImportRow {
                url: "https://example.com/imported".into(),
                ..Default::default()
            }],
            dry_run: false,
            ..Default::default()
        },
        pb::ImportLinksRequest {
            rows,
            dry_run: false,
            ..Default::default()
        },
    ];
    let status = match client
        .import_links(authed(futures::stream::iter(messages)))
        .await
    {
        Err(status) => status,
        Ok(answers) => answers
            .into_inner()
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .find_map(Result::err)
            .expect("the import was refused"),
    };
    refused_unread(&status);

    // The most a batch holds, each link with twenty tags and a rule: what a real batch
    // decodes to is far inside the bound.
    let full: Vec<_> = (0..1000)
        .map(|n| pb::CreateLinkRequest {
            tags: (0..20).map(|t| format!("t{t}")).collect(),
            rules: vec![pb::Rule {
                url: format!("https://example.com/{n}/de"),
                conditions: vec![pb::Condition {
                    r#type: "language".into(),
                    key: String::new(),
                    values: vec!["de".into()],
                }],
                variants: vec![],
            }],
            ..create(&format!("https://example.com/full/{n}"))
        })
        .collect();
    let results = client
        .batch_create_links(authed(pb::BatchCreateLinksRequest { items: full }))
        .await
        .expect("a full batch")
        .into_inner()
        .results;
    let created = results
        .iter()
        .filter(|r| matches!(r.outcome, Some(pb::batch_create_result::Outcome::Link(_))))
        .count();
    assert_eq!(created, 1000, "{:?}", results.first());
}

/// An import whose rows come slowly but steadily, each well within the idle bound, stops at
/// its bound in all (`SHORTENER_IMPORT_MAX_SECONDS`) with the rows before it answered and
/// imported, and gives its place back: a trickling client cannot hold a place for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_that_runs_past_its_bound_stops() {
    let stack = Stack::new(Backend::Sqlite).await;
    let mut config = stack.config("long-import");
    config.limits.import_max_seconds = std::num::NonZeroU64::new(1).expect("non-zero");
    let node = crate::helpers::Node::start(config).await;
    let mut client = node.links_client().await;
    // One row every 300 ms, ten in all: three seconds, three times the bound.
    let messages = futures::stream::iter(0..10).then(|n| async move {
        if n > 0 {
            // The client's pace, which is what the bound is about.
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        }
        pb::ImportLinksRequest {
            rows: vec![pb::ImportRow {
                url: format!("https://example.com/slow/{n}"),
                ..Default::default()
            }],
            dry_run: false,
            ..Default::default()
        }
    });
    let answers: Vec<_> = client
        .import_links(authed(messages))
        .await
        .expect("import")
        .into_inner()
        .collect()
        .await;
    let rows = answers
        .iter()
        .filter(|a| {
            matches!(
                a,
                Ok(pb::ImportLinksResponse {
                    outcome: Some(pb::import_links_response::Outcome::Row(_))
                })
            )
        })
        .count();
    let stopped = answers
        .last()
        .expect("answers")
        .as_ref()
        .expect_err("the import stopped");
    assert!(
        stopped.message().contains("ran past its bound"),
        "{stopped:?}"
    );
    assert!((1..10).contains(&rows), "{rows} rows answered");
    assert_eq!(node.stored_links().await, rows as u64);
    // Its place is free again: another import of the same key goes through.
    let again = client
        .import_links(authed(futures::stream::iter([pb::ImportLinksRequest {
            rows: vec![pb::ImportRow {
                url: "https://example.com/after".into(),
                ..Default::default()
            }],
            dry_run: false,
            ..Default::default()
        }])))
        .await
        .expect("a second import")
        .into_inner()
        .collect::<Vec<_>>()
        .await;
    assert!(again.iter().all(Result::is_ok), "{again:?}");
}
