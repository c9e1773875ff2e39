//! The gate: tokens, scopes, namespaces, holders and reloads.

use super::*;
use crate::domain::{CallerName, DescribeNamespace, Holder, Namespace};

const TOKEN: &str = "idsvc_unit-test-token-000000000000000000000000";

fn spec(name: &str, token: &str, namespaces: &[&str], scopes: &[&str]) -> CallerSpec {
    let own = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    CallerSpec {
        name: CallerName::parse(name).expect("name"),
        digest: token::digest(token.as_bytes()),
        namespaces: tokens_file::namespace_grant(&own(namespaces)).expect("namespaces"),
        scopes: tokens_file::scope_set(&own(scopes)).expect("scopes"),
        quota: tokens_file::quota_spec(Some(100), Some(100), None).expect("quota"),
    }
}

fn gate() -> Gate {
    let set = CallerSet::build(vec![spec("shortener", TOKEN, &["links"], &["lease"])], None);
    Gate::with_callers(set, Arc::new(Metrics::new()))
}

fn describe(ns: &str) -> impl FnOnce() -> Result<DescribeNamespace, Error> {
    let ns = ns.to_string();
    move || Ok(DescribeNamespace(Namespace::parse(&ns)?))
}

fn bearer(token: &str) -> Vec<u8> {
    format!("Bearer {token}").into_bytes()
}

#[test]
fn a_missing_malformed_or_unknown_token_is_unauthenticated_before_the_request_is_read() {
    let gate = gate();
    for (case, header) in [
        ("missing", None),
        ("not bearer", Some(TOKEN.as_bytes().to_vec())),
        (
            "lower-case scheme",
            Some(format!("bearer {TOKEN}").into_bytes()),
        ),
        ("empty", Some(b"Bearer ".to_vec())),
        (
            "unknown",
            Some(bearer("idsvc_some-other-token-of-enough-length-00")),
        ),
        ("prefix of the token", Some(bearer(&TOKEN[..40]))),
        ("trailing space", Some(bearer(&format!("{TOKEN} ")))),
        ("huge", Some(bearer(&"a".repeat(10_000)))),
    ] {
        let mut parsed = false;
        let result = gate.admit(header.as_deref(), Scope::Lease, || {
            parsed = true;
            Err::<DescribeNamespace, _>(Error::invalid("never reached"))
        });
        assert!(
            matches!(
                result,
                Err(Refused {
                    caller: None,
                    error: Error::Unauthenticated(_)
                })
            ),
            "{case}"
        );
        assert!(
            !parsed,
            "{case}: the request was parsed for an unknown caller"
        );
    }
}

#[test]
fn the_scope_and_the_namespace_must_both_be_covered() {
    let gate = gate();
    let header = bearer(TOKEN);
    let (principal, _) = gate
        .admit(Some(&header), Scope::Lease, describe("links"))
        .expect("covered");
    assert_eq!(principal.name(), "shortener");
    for (case, scope, ns) in [
        ("other namespace", Scope::Lease, "other"),
        ("missing scope", Scope::Allocate, "links"),
        ("admin", Scope::Admin, "links"),
    ] {
        // Refused with who asked, for the log line that says so.
        let Err(refused) = gate.admit(Some(&header), scope, describe(ns)) else {
            panic!("{case}: admitted");
        };
        assert!(
            matches!(refused.error, Error::PermissionDenied(_)),
            "{case}"
        );
        assert_eq!(refused.caller_name(), "shortener", "{case}");
    }
    // Malformed input from a known caller is a bad request, not a denial.
    let Err(refused) = gate.admit(Some(&header), Scope::Lease, describe("Bad")) else {
        panic!("a malformed request was admitted");
    };
    assert!(matches!(refused.error, Error::InvalidArgument(_)));
    assert_eq!(refused.caller_name(), "shortener");
}

#[test]
fn holders_are_prefixed_with_the_callers_name_and_fit_the_ledger() {
    let gate = gate();
    let (principal, _) = gate
        .admit(Some(&bearer(TOKEN)), Scope::Lease, describe("links"))
        .expect("covered");
    let instance = Holder::parse("pod-1").expect("valid");
    assert_eq!(
        principal.holder(&instance).expect("fits"),
        "shortener/pod-1"
    );
    let fits = Holder::parse(&"x".repeat(190)).expect("valid alone");
    assert_eq!(principal.holder(&fits).expect("fits").chars().count(), 200);
    let long = Holder::parse(&"x".repeat(191)).expect("valid alone");
    assert!(principal.holder(&long).is_err());
    assert_eq!(Principal::Insecure.holder(&instance).expect("raw"), "pod-1");
}

#[test]
fn a_reload_swaps_callers_at_once_and_keeps_unchanged_quotas_spent() {
    let gate = gate();
    let (before, _) = gate
        .admit(Some(&bearer(TOKEN)), Scope::Lease, describe("links"))
        .expect("covered");
    before.take_ids(100).expect("the whole burst");
    let second = "idsvc_second-unit-test-token-0000000000000000";
    gate.replace(vec![
        spec("shortener", TOKEN, &["links"], &["lease"]),
        spec("billing", second, &["*"], &["allocate"]),
    ]);
    let (after, _) = gate
        .admit(Some(&bearer(TOKEN)), Scope::Lease, describe("links"))
        .expect("still known");
    assert!(after.take_ids(1).is_err(), "the reload refilled the bucket");
    gate.admit(Some(&bearer(second)), Scope::Allocate, describe("anything"))
        .expect("the new caller is known");
    gate.replace(vec![spec("billing", second, &["*"], &["allocate"])]);
    assert!(matches!(
        gate.admit(Some(&bearer(TOKEN)), Scope::Lease, describe("links")),
        Err(Refused {
            error: Error::Unauthenticated(_),
            ..
        })
    ));
}

#[test]
fn an_insecure_gate_admits_anyone_with_every_scope() {
    let gate = Gate::insecure(Arc::new(Metrics::new()));
    for scope in Scope::ALL {
        let (principal, _) = gate.admit(None, scope, describe("any")).expect("open");
        assert_eq!(principal.name(), "-");
        principal.take_ids(u64::MAX).expect("no quota");
    }
}
