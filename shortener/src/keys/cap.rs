//! What a key a signed-in person made may do now. The person's role bounded the key when they
//! made it ([`super::check`]); afterwards the key carries at most what the person still holds:
//! its own scopes, capped by the role that the roles file in force gives the claims of the
//! person's latest sign-in in the key's tenant. With no role there (the mapping removed, the
//! person's groups changed at their next sign-in, sign-in turned off) the key is not in force.
//! A key made by an API key is not capped: its maker's key is the operator's business.

use crate::domain::Scopes;
use crate::signin::roles::{self, Mapping};
use crate::store::PersonClaims;

/// The scopes in force of a key of `tenant` with `scopes`, made by `person` (`None`: by an API
/// key), under `mappings` in the tenants `exists` knows; `None` when it is not in force.
pub fn in_force(
    scopes: Scopes,
    tenant: &str,
    person: Option<&PersonClaims>,
    mappings: &[Mapping],
    exists: impl Fn(&str) -> bool,
) -> Option<Scopes> {
    let Some(person) = person else {
        return Some(scopes);
    };
    // Claims that do not parse (a hand-edited row) give no role.
    let claims: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&person.claims).ok()?;
    let role = *roles::resolve(mappings, &claims, exists).get(tenant)?;
    Some(scopes.capped_by(role.scopes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROLES: &str = r#"
[[role]]
claim = "groups"
value = "link-admins"
tenant = "acme"
role = "admin"

[[role]]
claim = "groups"
value = "link-viewers"
tenant = "acme"
role = "viewer"

[[role]]
claim = "email"
value = "ana@example.com"
tenant = "globex"
role = "editor"
"#;

    fn person(claims: &str) -> PersonClaims {
        PersonClaims {
            subject: "248289761001".into(),
            claims: claims.into(),
        }
    }

    fn scopes(text: &str) -> Scopes {
        Scopes::parse_list(text).expect("scopes")
    }

    #[test]
    fn a_persons_key_keeps_only_what_their_role_grants_now() {
        let mappings = roles::parse(ROLES).expect("roles");
        let key = scopes("links:read,links:create,keys:manage");
        let known = |t: &str| t != "gone";
        let cases: &[(&str, &str, &str, Option<&str>)] = &[
            // (tenant, claims, why, scopes in force)
            (
                "acme",
                r#"{"groups":["link-admins"]}"#,
                "still an admin",
                Some("links:create,links:read,keys:manage"),
            ),
            (
                "acme",
                r#"{"groups":["link-viewers"]}"#,
                "now a viewer",
                Some("links:read"),
            ),
            (
                "acme",
                r#"{"groups":["link-viewers","link-admins"]}"#,
                "the highest role counts",
                Some("links:create,links:read,keys:manage"),
            ),
            ("acme", r#"{"groups":[]}"#, "no role left", None),
            (
                "acme",
                r#"{"email":"ana@example.com"}"#,
                "a role in another tenant only",
                None,
            ),
            (
                "globex",
                r#"{"email":"ana@example.com"}"#,
                "an editor there",
                Some("links:create,links:read"),
            ),
            ("acme", "not json", "claims that do not parse", None),
            ("acme", "[1, 2]", "claims that are no object", None),
        ];
        for (tenant, claims, why, want) in cases {
            let got = in_force(key, tenant, Some(&person(claims)), &mappings, known);
            assert_eq!(
                got.map(|s| s.to_string()),
                want.map(|w| scopes(w).to_string()),
                "{why}"
            );
        }
        // A tenant the node does not know gives no role, as to a session.
        let admin = person(r#"{"groups":["link-admins"]}"#);
        assert_eq!(
            in_force(key, "acme", Some(&admin), &mappings, |_| false),
            None
        );
        // No mappings at all (sign-in off): no person holds a role.
        assert_eq!(in_force(key, "acme", Some(&admin), &[], known), None);
    }

    #[test]
    fn a_key_made_by_a_key_is_not_capped() {
        let key = scopes("admin");
        assert_eq!(in_force(key, "acme", None, &[], |_| false), Some(key));
    }
}
