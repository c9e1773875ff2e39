//! Import over gRPC as over HTTP: each row's own domain (or the first message's for every
//! row, and the hosts that mean the default domain), and what an exported link carries (its
//! routing, and the states an import refuses rather than make active again).

use crate::domains::{call, claim};
use crate::helpers::{Backend, Node, Stack, authed};
use crate::link_domains::{count_links, node, visit};
use futures::StreamExt;
use proto::shortener::v1 as pb;
use reqwest::Method;

/// `ImportLinks` with `key`: its answers (row results, then the summary), or the status it
/// ended with.
async fn grpc_import(
    node: &Node,
    key: &str,
    messages: Vec<pb::ImportLinksRequest>,
) -> Result<Vec<pb::import_links_response::Outcome>, tonic::Status> {
    let mut client = node.links_client().await;
    let mut request = tonic::Request::new(futures::stream::iter(messages));
    request.metadata_mut().insert(
        "authorization",
        format!("Bearer {key}").parse().expect("ascii"),
    );
    let mut answers = client.import_links(request).await?.into_inner();
    let mut outcomes = Vec::new();
    while let Some(answer) = answers.next().await {
        outcomes.push(answer?.outcome.expect("outcome"));
    }
    Ok(outcomes)
}

/// Checks the status (or error code) of each row answer of `outcomes`.
fn assert_rows(outcomes: &[pb::import_links_response::Outcome], expected: &[&str]) {
    assert_eq!(grpc_rows(outcomes), expected, "{outcomes:#?}");
}

/// The status (or error code) of each row answer of `outcomes`.
fn grpc_rows(outcomes: &[pb::import_links_response::Outcome]) -> Vec<String> {
    outcomes
        .iter()
        .filter_map(|o| match o {
            pb::import_links_response::Outcome::Row(row) => Some(match &row.error {
                Some(error) => error.error.clone(),
                None => row.status.clone(),
            }),
            pb::import_links_response::Outcome::Summary(_) => None,
        })
        .collect()
}

/// `ImportLinks` reads each row's `domain` as the HTTP import does (a tenant's claimed domain,
/// the node's own host or one of the first message's `default_hosts` for the default domain,
/// `unknown_domain` and `invalid_domain` otherwise), and the first message's `domain` puts
/// every row on that domain; a domain not the tenant's, or one with `default_hosts`, ends the
/// import before any row is read.
async fn grpc_imports_go_onto_the_rows_domains(backend: Backend) {
    let stack = Stack::new(backend).await;
    let (node, keys) = node(&stack, "grpc-import").await;
    assert_eq!(claim(&node, &keys.own, "go.acme.example").await.0, 201);
    assert_eq!(claim(&node, &keys.other, "go.globex.example").await.0, 201);
    let row = |code: &str, domain: &str| pb::ImportRow {
        url: format!("https://acme.example/{code}"),
        code: Some(code.into()),
        domain: Some(domain.into()),
        ..Default::default()
    };
    let message = pb::ImportLinksRequest {
        rows: vec![
            row("g-branded", "GO.ACME.EXAMPLE."),
            row("g-theirs", "go.globex.example"),
            row("g-old-host", "old.example"),
            row("g-ip", "192.0.2.1"),
            row("g-own", "sho.rt"),
            row("g-none", ""),
        ],
        default_hosts: vec!["https://Old.Example/".into()],
        ..Default::default()
    };
    let outcomes = grpc_import(&node, &keys.own, vec![message])
        .await
        .expect("import");
    assert_rows(
        &outcomes,
        &[
            "created",
            "unknown_domain",
            "created",
            "invalid_domain",
            "created",
            "created",
        ],
    );
    assert_eq!(visit(&node, "go.acme.example", "g-branded").await.0, 302);
    assert_eq!(visit(&node, "sho.rt", "g-branded").await.0, 404);
    assert_eq!(visit(&node, "go.globex.example", "g-theirs").await.0, 404);
    for code in ["g-old-host", "g-own", "g-none"] {
        assert_eq!(visit(&node, "sho.rt", code).await.0, 302, "{code}");
    }
    // The branded link deleted, its row again is `code_deleted` (not `exists`: the code
    // answers 410 and is never given out again), and the row on the default domain `exists`.
    let (status, body) = call(
        &node,
        Method::DELETE,
        "/links/g-branded?domain=go.acme.example",
        &keys.own,
        None,
    )
    .await;
    assert_eq!(status, 204, "{body}");
    let message = pb::ImportLinksRequest {
        rows: vec![row("g-branded", "go.acme.example"), row("g-own", "")],
        ..Default::default()
    };
    let outcomes = grpc_import(&node, &keys.own, vec![message])
        .await
        .expect("import");
    assert_rows(&outcomes, &["code_deleted", "exists"]);
    assert_eq!(visit(&node, "go.acme.example", "g-branded").await.0, 410);

    // The first message's domain is every row's, whatever the rows name.
    let message = pb::ImportLinksRequest {
        rows: vec![
            row("g-fixed", "go.globex.example"),
            row("g-fixed-ip", "192.0.2.1"),
        ],
        domain: Some("go.acme.example".into()),
        ..Default::default()
    };
    let outcomes = grpc_import(&node, &keys.own, vec![message])
        .await
        .expect("import");
    assert_rows(&outcomes, &["created", "created"]);
    assert_eq!(visit(&node, "go.acme.example", "g-fixed-ip").await.0, 302);

    // Refused before any row: another tenant's domain, a domain with default hosts, more
    // default hosts than an import takes.
    let stored = count_links(&node, &keys.own).await;
    let many: Vec<String> = (0..17).map(|i| format!("h{i}.example")).collect();
    for (domain, default_hosts, code) in [
        (Some("go.globex.example"), vec![], "unknown_domain"),
        (
            Some("go.acme.example"),
            vec!["old.example".to_string()],
            "invalid_query_parameter",
        ),
        (None, many, "invalid_query_parameter"),
    ] {
        let message = pb::ImportLinksRequest {
            rows: vec![row("g-never", "")],
            domain: domain.map(String::from),
            default_hosts,
            ..Default::default()
        };
        let status = grpc_import(&node, &keys.own, vec![message])
            .await
            .expect_err("refused");
        let said = status
            .metadata()
            .get("error-code")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        assert_eq!(said, code, "{status:?}");
    }
    assert_eq!(count_links(&node, &keys.own).await, stored);
}

crate::on_both_stores!(grpc_imports_go_onto_the_rows_domains);

/// An import row over gRPC carries what an exported link does, as the HTTP import reads it:
/// its routing comes along (rules, UTM, the preview), a private row gets a private code, and a
/// link that was disabled, deleted, used up or password protected where it comes from is
/// refused rather than made an open, active link.
async fn grpc_import_rows_carry_routing_and_refuse_links_not_active(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = stack.node("routed").await;
    let mut client = node.links_client().await;
    let row = |code: Option<&str>| pb::ImportRow {
        url: "https://example.com/base".into(),
        code: code.map(String::from),
        ..Default::default()
    };
    let language = |value: &str| pb::Condition {
        r#type: "language".into(),
        values: vec![value.into()],
        ..Default::default()
    };
    let routed = pb::ImportRow {
        rules: vec![pb::Rule {
            url: "https://example.com/de".into(),
            conditions: vec![language("de")],
            ..Default::default()
        }],
        utm_source: Some("news".into()),
        title: Some("Imported".into()),
        state: "active".into(),
        ..row(Some("r-routed"))
    };
    let rows = vec![
        routed,
        pb::ImportRow {
            state: "disabled".into(),
            ..row(Some("r-off"))
        },
        pb::ImportRow {
            state: "used_up".into(),
            ..row(Some("r-used"))
        },
        pb::ImportRow {
            max_visits: Some(2),
            clicks: Some(2),
            ..row(Some("r-spent"))
        },
        pb::ImportRow {
            protected: true,
            ..row(Some("r-locked"))
        },
        pb::ImportRow {
            rules: vec![pb::Rule {
                url: "https://example.com/x".into(),
                conditions: vec![language("not a language!")],
                ..Default::default()
            }],
            ..row(Some("r-bad-rule"))
        },
        pb::ImportRow {
            private: true,
            ..row(None)
        },
    ];
    let answers: Vec<pb::ImportRowResult> = client
        .import_links(authed(futures::stream::iter([pb::ImportLinksRequest {
            rows,
            ..Default::default()
        }])))
        .await
        .expect("import")
        .into_inner()
        .filter_map(|a| async move {
            match a.expect("an answer").outcome {
                Some(pb::import_links_response::Outcome::Row(row)) => Some(row),
                _ => None,
            }
        })
        .collect()
        .await;
    let said: Vec<&str> = answers
        .iter()
        .map(|a| {
            a.error
                .as_ref()
                .map_or(a.status.as_str(), |e| e.error.as_str())
        })
        .collect();
    assert_eq!(
        said,
        [
            "created",
            "not_active",
            "not_active",
            "not_active",
            "password_protected",
            "invalid_rules",
            "created"
        ],
        "{answers:#?}"
    );
    // A row with a link names its short URL; a refused one has none.
    let urls: Vec<bool> = answers.iter().map(|a| a.short_url.is_some()).collect();
    assert_eq!(urls, [true, false, false, false, false, false, true]);
    assert!(
        answers[0]
            .short_url
            .as_deref()
            .is_some_and(|u| u.ends_with("/r-routed")),
        "{answers:#?}"
    );
    // A refused row is named by its code as well as its number.
    let codes: Vec<Option<&str>> = answers[..6].iter().map(|a| a.code.as_deref()).collect();
    assert_eq!(
        codes,
        [
            Some("r-routed"),
            Some("r-off"),
            Some("r-used"),
            Some("r-spent"),
            Some("r-locked"),
            Some("r-bad-rule")
        ],
        "{answers:#?}"
    );
    assert_eq!(
        answers[6].code.as_deref().map(str::len),
        Some(16),
        "a private code: {answers:#?}"
    );
    assert_eq!(node.stored_links().await, 2);

    let link = client
        .get_link(authed(pb::GetLinkRequest {
            code: "r-routed".into(),
            ..Default::default()
        }))
        .await
        .expect("get")
        .into_inner();
    assert_eq!(
        (
            link.rules.len(),
            link.utm_source.as_deref(),
            link.title.as_deref()
        ),
        (1, Some("news"), Some("Imported"))
    );
    let visit = |language: &str| {
        node.client
            .get(format!("{}/r-routed", node.base))
            .header("user-agent", crate::helpers::BROWSER)
            .header("accept-language", language)
            .send()
    };
    let location = |response: reqwest::Response| {
        response
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    let german = location(visit("de").await.expect("visit"));
    assert!(german.starts_with("https://example.com/de"), "{german}");
    assert!(german.contains("utm_source=news"), "{german}");
    let english = location(visit("en").await.expect("visit"));
    assert!(english.starts_with("https://example.com/base"), "{english}");
}
crate::on_both_stores!(grpc_import_rows_carry_routing_and_refuse_links_not_active);
