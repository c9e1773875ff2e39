use super::*;

fn caller(scopes: &str) -> Caller {
    Caller::of_key(
        Arc::from("acme"),
        Arc::from("lead"),
        Scopes::parse_list(scopes).expect("scopes"),
    )
}

fn request(name: &str, scopes: &[&str], expires_at: Option<&str>) -> KeyRequest {
    KeyRequest {
        name: name.into(),
        scopes: scopes.iter().map(|s| s.to_string()).collect(),
        expires_at: expires_at.map(str::to_string),
    }
}

#[test]
fn a_valid_request_gives_its_name_scopes_and_expiry() {
    let now = Utc::now();
    let checked = check(
        &caller("keys:manage,links:create,links:read"),
        &request(
            "Deploy.bot_2",
            &["links:read", "links:create", "links:read"],
            Some("2999-01-01T00:00:00Z"),
        ),
        now,
    )
    .expect("valid");
    assert_eq!(checked.name, "Deploy.bot_2");
    assert_eq!(checked.scopes.to_string(), "links:create,links:read");
    assert_eq!(
        checked.expires_at.map(|t| t.to_rfc3339()),
        Some("2999-01-01T00:00:00+00:00".into())
    );
    let admin = check(
        &caller("admin"),
        &request("any", &["admin", "keys:manage"], None),
        now,
    )
    .expect("admin grants every scope");
    assert!(admin.scopes.is_admin() && admin.expires_at.is_none());
}

#[test]
fn each_bad_field_is_refused_by_its_code_and_named() {
    let now = Utc::now();
    let manager = caller("keys:manage,links:read");
    let long = "a".repeat(65);
    let table: Vec<(KeyRequest, &str, &str)> = vec![
        (request("", &["links:read"], None), "invalid_name", "name"),
        (
            request(&long, &["links:read"], None),
            "invalid_name",
            "name",
        ),
        (
            request("tab\there", &["links:read"], None),
            "invalid_name",
            "name",
        ),
        (
            request("-dash", &["links:read"], None),
            "invalid_name",
            "name",
        ),
        (request("ok", &[], None), "invalid_scopes", "scopes"),
        (
            request("ok", &["links:delete"], None),
            "invalid_scopes",
            "scopes",
        ),
        (
            request("ok", &["links:write"], None),
            "scope_not_held",
            "scopes",
        ),
        (request("ok", &["admin"], None), "scope_not_held", "admin"),
        (
            request("ok", &["links:read"], Some("tomorrow")),
            "invalid_expiry",
            "expires_at",
        ),
        (
            request("ok", &["links:read"], Some("2001-01-01T00:00:00Z")),
            "invalid_expiry",
            "expires_at",
        ),
    ];
    for (bad, code, named) in table {
        let error = check(&manager, &bad, now).expect_err(&format!("{bad:?}"));
        assert_eq!(error.code(), code, "{bad:?}");
        assert!(error.to_string().contains(named), "{bad:?}: {error}");
    }
}

#[test]
fn a_key_that_expires_makes_none_that_outlives_it() {
    let now = Utc::now();
    let limit = now + chrono::Duration::days(7);
    let maker = Caller {
        expires: Some(limit),
        ..caller("keys:manage,links:read")
    };
    let at = |days: i64| (now + chrono::Duration::days(days)).to_rfc3339();
    for (case, expires_at) in [
        ("no expiry", None),
        ("a day after the maker", Some(at(8))),
        ("years after", Some("2999-01-01T00:00:00Z".to_string())),
    ] {
        let refused = check(
            &maker,
            &request("ci", &["links:read"], expires_at.as_deref()),
            now,
        )
        .expect_err(case);
        assert_eq!(refused.code(), "invalid_expiry", "{case}");
    }
    let checked = check(&maker, &request("ci", &["links:read"], Some(&at(6))), now)
        .expect("within the maker's life");
    assert!(checked.expires_at.is_some_and(|t| t <= limit));
    // A key that never expires makes keys as before.
    assert!(
        check(
            &caller("keys:manage,links:read"),
            &request("ci", &["links:read"], None),
            now
        )
        .is_ok()
    );
}
