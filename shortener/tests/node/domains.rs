//! Branded domains as tenant objects: two tenants claim, list, read, change and remove their
//! domains over the JSON API; another tenant's domain answers as an unknown one; bad hosts and
//! bad patches are refused with their codes and change nothing; two tenants racing for one
//! host get one winner, decided by the database.

use crate::helpers::{Backend, Node, Stack};
use crate::tenants::{TenantKeys, write_keys};
use reqwest::Method;
use serde_json::{Value, json};

/// A node of `stack` with the tenants' keys, `acme` and `globex` each allowed a suffix of its
/// own and both `shared.example`, a short domain besides the public host, and a blocklist.
async fn node_with_domains(stack: &Stack) -> (Node, TenantKeys) {
    let keys = write_keys(&stack.dir.path().join("api-keys.toml"));
    (node_named(stack, "domains").await, keys)
}

/// A node of `stack` named `name`, configured as [`node_with_domains`] says, with the keys
/// file already written.
async fn node_named(stack: &Stack, name: &str) -> Node {
    let blocklist = stack.dir.path().join("blocklist");
    std::fs::write(&blocklist, ".evil.example\n").expect("write blocklist");
    let mut config = stack.config(name);
    config.access.api_keys_file = Some(stack.dir.path().join("api-keys.toml"));
    config.access.domain_suffixes = [
        "acme=acme.example",
        "acme=shared.example",
        "globex=globex.example",
        "globex=shared.example",
    ]
    .map(String::from)
    .to_vec();
    config.listeners.short_domains = vec!["s.example".into()];
    config.redirects.blocklist_file = Some(blocklist);
    Node::start(config).await
}

/// `method` on `/api/v1{path}` with `key` and an optional JSON body: the status and the body.
pub(crate) async fn call(
    node: &Node,
    method: Method,
    path: &str,
    key: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut request = node
        .client
        .request(method, format!("{}/api/v1{path}", node.base))
        .bearer_auth(key);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("send");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// Claims `host` with `key`: the status and the body.
pub(crate) async fn claim(node: &Node, key: &str, host: &str) -> (u16, Value) {
    call(
        node,
        Method::POST,
        "/domains",
        key,
        Some(json!({ "host": host })),
    )
    .await
}

/// Every host `key` lists, page by page.
async fn hosts(node: &Node, key: &str) -> Vec<String> {
    let (status, page) = call(node, Method::GET, "/domains?limit=1000", key, None).await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["next_cursor"], Value::Null);
    page["domains"]
        .as_array()
        .expect("domains")
        .iter()
        .map(|d| d["host"].as_str().expect("host").to_string())
        .collect()
}

async fn two_tenants_own_their_domains_apart(backend: Backend) {
    let stack = Stack::new(backend).await;
    let (node, keys) = node_with_domains(&stack).await;

    let (status, acme) = claim(&node, &keys.own, "Go.Shared.Example.").await;
    assert_eq!(status, 201, "{acme}");
    assert_eq!(
        acme,
        json!({
            "host": "go.shared.example", "tenant": "acme", "created_at": acme["created_at"],
            "created_by": "acme/writer", "root_url": null, "not_found_url": null,
            "expired_url": null, "redirect_status": null, "robots": "disallow",
            "apple_app_site_association": null, "assetlinks": null,
        })
    );
    let (status, body) = claim(&node, &keys.other, "links.globex.example").await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = claim(&node, &keys.own, "bücher.acme.example").await;
    assert_eq!(
        (status, &body["host"]),
        (201, &json!("xn--bcher-kva.acme.example"))
    );

    // A host is one tenant's: claimed again by its owner or by another tenant, it is taken.
    for key in [&keys.own, &keys.other] {
        let (status, body) = claim(&node, key, "go.shared.example").await;
        assert_eq!(
            (status, &body["error"]),
            (409, &json!("domain_taken")),
            "{body}"
        );
    }
    // A key claims only under its tenant's suffixes, and only for its tenant.
    let (status, body) = claim(&node, &keys.own, "go.globex.example").await;
    assert_eq!(
        (status, &body["error"]),
        (403, &json!("host_not_allowed")),
        "{body}"
    );
    let (status, body) = call(
        &node,
        Method::POST,
        "/domains",
        &keys.own,
        Some(json!({"host": "x.acme.example", "tenant": "globex"})),
    )
    .await;
    assert_eq!(
        (status, &body["error"]),
        (403, &json!("forbidden")),
        "{body}"
    );
    let (status, body) = claim(&node, &keys.scopeless, "y.acme.example").await;
    assert_eq!(
        (status, &body["error"]),
        (403, &json!("forbidden")),
        "{body}"
    );
    // An admin key claims any host, for any tenant.
    let (status, body) = call(
        &node,
        Method::POST,
        "/domains",
        &keys.admin,
        Some(json!({"host": "brand.example", "tenant": "globex"})),
    )
    .await;
    assert_eq!((status, &body["tenant"]), (201, &json!("globex")), "{body}");

    assert_eq!(
        hosts(&node, &keys.own).await,
        ["go.shared.example", "xn--bcher-kva.acme.example"]
    );
    assert_eq!(
        hosts(&node, &keys.other).await,
        ["brand.example", "links.globex.example"]
    );
    assert_eq!(hosts(&node, &keys.admin).await.len(), 4);

    // Another tenant's domain answers exactly as an unknown one, and is left as it was.
    let unknown_get = call(
        &node,
        Method::GET,
        "/domains/nowhere.example",
        &keys.other,
        None,
    )
    .await;
    assert_eq!(unknown_get.0, 404);
    let patch = json!({ "robots": "allow" });
    for (method, body) in [
        (Method::GET, None),
        (Method::PATCH, Some(patch.clone())),
        (Method::DELETE, None),
    ] {
        let theirs = call(
            &node,
            method.clone(),
            "/domains/go.shared.example",
            &keys.other,
            body.clone(),
        )
        .await;
        let unknown = call(
            &node,
            method.clone(),
            "/domains/nowhere.example",
            &keys.other,
            body,
        )
        .await;
        assert_eq!(theirs, unknown, "{method}");
        assert_eq!(theirs, unknown_get, "{method}");
    }
    assert_eq!(
        call(
            &node,
            Method::GET,
            "/domains/GO.shared.example.",
            &keys.own,
            None
        )
        .await,
        (200, acme.clone())
    );

    // The owner changes its settings; a merge patch leaves what it does not name.
    let settings = json!({
        "root_url": "https://www.shared.example/", "not_found_url": "https://www.shared.example/missing",
        "expired_url": "https://www.shared.example/expired", "redirect_status": 301, "robots": "allow",
    });
    let (status, changed) = call(
        &node,
        Method::PATCH,
        "/domains/go.shared.example",
        &keys.own,
        Some(settings.clone()),
    )
    .await;
    assert_eq!(status, 200, "{changed}");
    for field in [
        "root_url",
        "not_found_url",
        "expired_url",
        "redirect_status",
        "robots",
    ] {
        assert_eq!(changed[field], settings[field], "{field}");
    }
    let (status, changed) = call(
        &node,
        Method::PATCH,
        "/domains/go.shared.example",
        &keys.own,
        Some(json!({"root_url": null, "redirect_status": null})),
    )
    .await;
    assert_eq!(status, 200, "{changed}");
    assert_eq!(
        (&changed["root_url"], &changed["redirect_status"]),
        (&Value::Null, &Value::Null)
    );
    assert_eq!(changed["not_found_url"], settings["not_found_url"]);
    assert_eq!(
        call(
            &node,
            Method::GET,
            "/domains/go.shared.example",
            &keys.own,
            None
        )
        .await,
        (200, changed)
    );

    // Pages in host order, each cursor the last host of its page.
    for i in 0..3 {
        assert_eq!(
            claim(&node, &keys.own, &format!("p{i}.acme.example"))
                .await
                .0,
            201
        );
    }
    let (mut seen, mut cursor) = (Vec::new(), String::new());
    loop {
        let (status, page) = call(
            &node,
            Method::GET,
            &format!("/domains?limit=2{cursor}"),
            &keys.own,
            None,
        )
        .await;
        assert_eq!(status, 200, "{page}");
        seen.extend(
            page["domains"]
                .as_array()
                .expect("domains")
                .iter()
                .map(|d| d["host"].clone()),
        );
        match page["next_cursor"].as_str() {
            Some(next) => cursor = format!("&cursor={next}"),
            None => break,
        }
    }
    assert_eq!(
        seen,
        [
            "go.shared.example",
            "p0.acme.example",
            "p1.acme.example",
            "p2.acme.example",
            "xn--bcher-kva.acme.example"
        ]
    );

    // Removed, it is unknown, and free to claim again.
    assert_eq!(
        call(
            &node,
            Method::DELETE,
            "/domains/go.shared.example",
            &keys.own,
            None
        )
        .await
        .0,
        204
    );
    assert_eq!(
        call(
            &node,
            Method::GET,
            "/domains/go.shared.example",
            &keys.own,
            None
        )
        .await
        .0,
        404
    );
    assert_eq!(
        call(
            &node,
            Method::DELETE,
            "/domains/go.shared.example",
            &keys.own,
            None
        )
        .await
        .0,
        404
    );
    let (status, body) = claim(&node, &keys.other, "go.shared.example").await;
    assert_eq!((status, &body["tenant"]), (201, &json!("globex")), "{body}");
    node.stop().await;
}
on_both_stores!(two_tenants_own_their_domains_apart);

async fn bad_hosts_and_bad_patches_are_refused_and_change_nothing(backend: Backend) {
    let stack = Stack::new(backend).await;
    let (node, keys) = node_with_domains(&stack).await;
    assert_eq!(claim(&node, &keys.own, "go.acme.example").await.0, 201);
    let before = hosts(&node, &keys.admin).await;

    let long_label = format!("{}.acme.example", "a".repeat(64));
    let long_host = format!("{}.acme.example", vec!["a".repeat(60); 5].join("."));
    let bad_hosts: &[(&str, u16, &str)] = &[
        ("", 422, "invalid_host"),
        ("acme", 422, "invalid_host"),
        ("x..acme.example", 422, "invalid_host"),
        ("x.acme.example:8080", 422, "invalid_host"),
        ("user@x.acme.example", 422, "invalid_host"),
        ("x.acme.example/path", 422, "invalid_host"),
        ("https://x.acme.example", 422, "invalid_host"),
        ("x.acme.example?q=1", 422, "invalid_host"),
        ("*.acme.example", 422, "invalid_host"),
        ("xn--a.acme.example", 422, "invalid_host"),
        ("x_y.acme.example", 422, "invalid_host"),
        ("192.0.2.1", 422, "ip_host"),
        ("[2001:db8::1]", 422, "ip_host"),
        ("2001:db8::1", 422, "ip_host"),
        ("acme.example.0x7f", 422, "ip_host"),
        (&long_label, 422, "host_too_long"),
        (&long_host, 422, "host_too_long"),
        ("sho.rt", 422, "reserved_host"),
        ("S.Example.", 422, "reserved_host"),
        ("localhost.localdomain", 422, "reserved_host"),
        ("go.acme.example", 409, "domain_taken"),
        ("elsewhere.example", 403, "host_not_allowed"),
    ];
    for (host, status, code) in bad_hosts {
        let (got, body) = claim(&node, &keys.own, host).await;
        assert_eq!(
            (got, body["error"].as_str()),
            (*status, Some(*code)),
            "{host:?}: {body}"
        );
    }
    let bad_bodies: &[(Value, u16, &str)] = &[
        (json!({}), 400, "invalid_json"),
        (json!({"host": 5}), 400, "invalid_json"),
        (
            json!({"host": "z.acme.example", "color": "red"}),
            400,
            "invalid_json",
        ),
        (
            json!({"host": "z.acme.example", "tenant": "Not A Tenant"}),
            422,
            "invalid_tenant",
        ),
    ];
    for (body, status, code) in bad_bodies {
        let (got, answer) = call(
            &node,
            Method::POST,
            "/domains",
            &keys.admin,
            Some(body.clone()),
        )
        .await;
        assert_eq!(
            (got, answer["error"].as_str()),
            (*status, Some(*code)),
            "{body}: {answer}"
        );
    }
    assert_eq!(
        hosts(&node, &keys.admin).await,
        before,
        "a refused claim wrote nothing"
    );

    let (_, domain) = call(
        &node,
        Method::GET,
        "/domains/go.acme.example",
        &keys.own,
        None,
    )
    .await;
    let bad_patches: &[(Value, u16, &str)] = &[
        (json!({"root_url": "not a url"}), 422, "invalid_url"),
        (
            json!({"not_found_url": "ftp://files.example/"}),
            422,
            "invalid_url",
        ),
        (json!({"expired_url": 5}), 422, "invalid_url"),
        (
            json!({"root_url": "https://user:pw@www.example/"}),
            422,
            "invalid_url",
        ),
        (json!({"root_url": "https://sho.rt/x"}), 422, "invalid_url"),
        (
            json!({"root_url": "https://phish.evil.example/"}),
            422,
            "blocked_target",
        ),
        (
            json!({"not_found_url": "https://go.acme.example/home"}),
            422,
            "fallback_loop",
        ),
        (
            json!({"expired_url": "https://GO.ACME.EXAMPLE./"}),
            422,
            "fallback_loop",
        ),
        (
            json!({"redirect_status": 303}),
            422,
            "invalid_redirect_status",
        ),
        (
            json!({"redirect_status": "301"}),
            422,
            "invalid_redirect_status",
        ),
        (json!({"robots": "sometimes"}), 422, "invalid_robots"),
        (json!({"robots": null}), 422, "invalid_robots"),
        (json!({"host": "other.acme.example"}), 400, "unknown_field"),
        (
            json!({"robots": "allow", "tenant": "globex"}),
            400,
            "unknown_field",
        ),
        (json!(["robots"]), 400, "invalid_json"),
    ];
    for (patch, status, code) in bad_patches {
        let (got, body) = call(
            &node,
            Method::PATCH,
            "/domains/go.acme.example",
            &keys.own,
            Some(patch.clone()),
        )
        .await;
        assert_eq!(
            (got, body["error"].as_str()),
            (*status, Some(*code)),
            "{patch}: {body}"
        );
    }
    assert_eq!(
        call(
            &node,
            Method::GET,
            "/domains/go.acme.example",
            &keys.own,
            None
        )
        .await,
        (200, domain),
        "a refused patch changed nothing"
    );
    let (status, body) = call(&node, Method::GET, "/domains?limit=0", &keys.own, None).await;
    assert_eq!((status, &body["error"]), (400, &json!("invalid_limit")));
    let (status, body) = call(
        &node,
        Method::GET,
        "/domains?cursor=Not..A.Cursor",
        &keys.own,
        None,
    )
    .await;
    assert_eq!((status, &body["error"]), (400, &json!("invalid_cursor")));
    node.stop().await;
}
on_both_stores!(bad_hosts_and_bad_patches_are_refused_and_change_nothing);

async fn two_tenants_racing_for_one_host_get_one_winner(backend: Backend) {
    let stack = Stack::new(backend).await;
    let (node, keys) = node_with_domains(&stack).await;
    for round in 0..8 {
        let host = format!("race{round}.shared.example");
        let ((a, acme), (b, globex)) = tokio::join!(
            claim(&node, &keys.own, &host),
            claim(&node, &keys.other, &host)
        );
        let mut statuses = [a, b];
        statuses.sort();
        assert_eq!(statuses, [201, 409], "round {round}: {acme} {globex}");
        let winner = if a == 201 { "acme" } else { "globex" };
        let loser = if a == 201 { globex } else { acme };
        assert_eq!(loser["error"], "domain_taken");
        let (status, domain) = call(
            &node,
            Method::GET,
            &format!("/domains/{host}"),
            &keys.admin,
            None,
        )
        .await;
        assert_eq!(
            (status, &domain["tenant"]),
            (200, &json!(winner)),
            "round {round}"
        );
    }
    assert_eq!(hosts(&node, &keys.admin).await.len(), 8);
    node.stop().await;
}
on_both_stores!(two_tenants_racing_for_one_host_get_one_winner);

/// Two PostgreSQL nodes, each believing the host free: the database's primary key decides,
/// whichever node and tenant ask.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_racing_on_two_postgres_nodes_get_one_winner() {
    let stack = Stack::new(Backend::Postgres).await;
    let (a, keys) = node_with_domains(&stack).await;
    let b = node_named(&stack, "domains-b").await;
    for round in 0..8 {
        let host = format!("both{round}.shared.example");
        let (key_a, key_b) = if round % 2 == 0 {
            (&keys.own, &keys.other)
        } else {
            (&keys.other, &keys.own)
        };
        let ((first, _), (second, _)) =
            tokio::join!(claim(&a, key_a, &host), claim(&b, key_b, &host));
        let mut statuses = [first, second];
        statuses.sort();
        assert_eq!(statuses, [201, 409], "round {round}");
    }
    assert_eq!(hosts(&a, &keys.admin).await, hosts(&b, &keys.admin).await);
    assert_eq!(hosts(&b, &keys.admin).await.len(), 8);
    a.stop().await;
    b.stop().await;
}

/// `message` with `key` in its metadata.
pub fn with_key<T>(key: &str, message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.metadata_mut().insert(
        "authorization",
        format!("Bearer {key}").parse().expect("ascii"),
    );
    request
}

/// A refused call's gRPC code and its `error-code`.
pub fn refusal(status: tonic::Status) -> (tonic::Code, String) {
    let code = status
        .metadata()
        .get("error-code")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    (status.code(), code)
}

async fn domains_work_over_grpc_with_the_same_rules(backend: Backend) {
    use proto::shortener::v1 as pb;
    use tonic::Code;
    let stack = Stack::new(backend).await;
    let (node, keys) = node_with_domains(&stack).await;
    let mut grpc = node.links_client().await;
    let claim = |key: &str, host: &str| {
        with_key(
            key,
            pb::ClaimDomainRequest {
                host: host.into(),
                tenant: String::new(),
            },
        )
    };

    let claimed = grpc
        .claim_domain(claim(&keys.own, "GO.acme.example."))
        .await
        .expect("claim")
        .into_inner();
    assert_eq!(
        (
            claimed.host.as_str(),
            claimed.tenant.as_str(),
            claimed.robots.as_str()
        ),
        ("go.acme.example", "acme", "disallow")
    );
    assert_eq!(
        (claimed.root_url.clone(), claimed.redirect_status),
        (None, None)
    );
    // Over HTTP, the same domain.
    let (status, http) = call(
        &node,
        Method::GET,
        "/domains/go.acme.example",
        &keys.own,
        None,
    )
    .await;
    assert_eq!((status, &http["created_by"]), (200, &json!("acme/writer")));

    // The same refusals, with the same machine codes, as over HTTP.
    let refused: &[(&str, &str, Code, &str)] = &[
        (
            &keys.own,
            "go.acme.example",
            Code::AlreadyExists,
            "domain_taken",
        ),
        (
            &keys.other,
            "go.globex.example:80",
            Code::InvalidArgument,
            "invalid_host",
        ),
        (&keys.other, "192.0.2.1", Code::InvalidArgument, "ip_host"),
        (
            &keys.other,
            "sho.rt",
            Code::InvalidArgument,
            "reserved_host",
        ),
        (
            &keys.other,
            "go.acme.example",
            Code::PermissionDenied,
            "host_not_allowed",
        ),
        (
            &keys.scopeless,
            "x.acme.example",
            Code::PermissionDenied,
            "forbidden",
        ),
    ];
    for (key, host, code, error) in refused {
        let status = grpc.claim_domain(claim(key, host)).await.expect_err(host);
        assert_eq!(refusal(status), (*code, error.to_string()), "{host}");
    }

    // Another tenant's domain is NOT_FOUND, as an unknown host is; nothing changes.
    let get = |key: &str, host: &str| with_key(key, pb::GetDomainRequest { host: host.into() });
    let theirs = grpc
        .get_domain(get(&keys.other, "go.acme.example"))
        .await
        .expect_err("theirs");
    let unknown = grpc
        .get_domain(get(&keys.other, "no.globex.example"))
        .await
        .expect_err("unknown");
    assert_eq!(
        (theirs.code(), theirs.message()),
        (unknown.code(), unknown.message())
    );
    assert_eq!(refusal(theirs), (Code::NotFound, "not_found".into()));
    let update = |key: &str, change: pb::UpdateDomainRequest| {
        with_key(
            key,
            pb::UpdateDomainRequest {
                host: "go.acme.example".into(),
                ..change
            },
        )
    };
    let status = grpc
        .update_domain(update(
            &keys.other,
            pb::UpdateDomainRequest {
                robots: Some("allow".into()),
                ..Default::default()
            },
        ))
        .await
        .expect_err("another tenant's update");
    assert_eq!(refusal(status), (Code::NotFound, "not_found".into()));
    let status = grpc
        .delete_domain(with_key(
            &keys.other,
            pb::DeleteDomainRequest {
                host: "go.acme.example".into(),
            },
        ))
        .await
        .expect_err("another tenant's delete");
    assert_eq!(refusal(status), (Code::NotFound, "not_found".into()));
    let listed = grpc
        .list_domains(with_key(&keys.other, pb::ListDomainsRequest::default()))
        .await
        .expect("list")
        .into_inner();
    assert!(listed.domains.is_empty() && listed.next_cursor.is_empty());

    // Changes and refused changes.
    let changed = grpc
        .update_domain(update(
            &keys.own,
            pb::UpdateDomainRequest {
                root_url: Some("https://www.acme.example/".into()),
                redirect_status: Some(307),
                robots: Some("allow".into()),
                ..Default::default()
            },
        ))
        .await
        .expect("update")
        .into_inner();
    assert_eq!(
        (
            changed.root_url.as_deref(),
            changed.redirect_status,
            changed.robots.as_str()
        ),
        (Some("https://www.acme.example/"), Some(307), "allow")
    );
    let bad: Vec<(pb::UpdateDomainRequest, &str)> = vec![
        (
            pb::UpdateDomainRequest {
                root_url: Some("https://go.acme.example/".into()),
                ..Default::default()
            },
            "fallback_loop",
        ),
        (
            pb::UpdateDomainRequest {
                not_found_url: Some("https://x.evil.example/".into()),
                ..Default::default()
            },
            "blocked_target",
        ),
        (
            pb::UpdateDomainRequest {
                expired_url: Some("nope".into()),
                ..Default::default()
            },
            "invalid_url",
        ),
        (
            pb::UpdateDomainRequest {
                redirect_status: Some(200),
                ..Default::default()
            },
            "invalid_redirect_status",
        ),
        (
            pb::UpdateDomainRequest {
                robots: Some("maybe".into()),
                ..Default::default()
            },
            "invalid_robots",
        ),
        (
            pb::UpdateDomainRequest {
                root_url: Some("https://a.example/".into()),
                clear_root_url: true,
                ..Default::default()
            },
            "conflicting_options",
        ),
    ];
    for (change, error) in bad {
        let status = grpc
            .update_domain(update(&keys.own, change))
            .await
            .expect_err(error);
        assert_eq!(refusal(status), (Code::InvalidArgument, error.to_string()));
    }
    let cleared = grpc
        .update_domain(update(
            &keys.own,
            pb::UpdateDomainRequest {
                clear_root_url: true,
                clear_redirect_status: true,
                ..Default::default()
            },
        ))
        .await
        .expect("clear")
        .into_inner();
    assert_eq!(
        (
            cleared.root_url,
            cleared.redirect_status,
            cleared.robots.as_str()
        ),
        (None, None, "allow")
    );

    let listed = grpc
        .list_domains(with_key(
            &keys.own,
            pb::ListDomainsRequest {
                limit: 1,
                cursor: String::new(),
            },
        ))
        .await
        .expect("list")
        .into_inner();
    assert_eq!(
        listed
            .domains
            .iter()
            .map(|d| d.host.as_str())
            .collect::<Vec<_>>(),
        ["go.acme.example"]
    );
    assert_eq!(listed.next_cursor, "go.acme.example");
    grpc.delete_domain(with_key(
        &keys.own,
        pb::DeleteDomainRequest {
            host: "go.acme.example".into(),
        },
    ))
    .await
    .expect("delete");
    assert_eq!(
        call(
            &node,
            Method::GET,
            "/domains/go.acme.example",
            &keys.own,
            None
        )
        .await
        .0,
        404
    );
    node.stop().await;
}
on_both_stores!(domains_work_over_grpc_with_the_same_rules);
