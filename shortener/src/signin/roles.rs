//! Roles per tenant from the issuer's claims: the roles file (`SHORTENER_ROLES_FILE`), TOML
//! `[[role]]` tables of `claim`, `value`, `tenant` and `role`, re-read when it changes like the
//! keys file. A person holds a role in a tenant when one of their ID token's claims is the
//! table's `value` (a string claim) or holds it (an array claim, such as `groups`). Each role is
//! a set of the API keys' scopes; none is `admin`, the operator's right across tenants.

use crate::domain::{Scope, Scopes};
use crate::watch::{ReloadCounters, ReloadSeries};
use arc_swap::ArcSwap;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

/// A role in a tenant, from least to most.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Reads the tenant's links and their stats.
    Viewer,
    /// A viewer who also creates, changes and deletes links (and claims domains).
    Editor,
    /// An editor who also manages the tenant's API keys.
    Admin,
    /// Everything a person can do in the tenant (today what an admin can).
    Owner,
}

impl Role {
    /// The role's name in the roles file and the console.
    pub fn name(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Editor => "editor",
            Role::Admin => "admin",
            Role::Owner => "owner",
        }
    }

    /// What the role may do, as API key scopes.
    pub fn scopes(self) -> Scopes {
        let viewer = [Scope::LinksRead, Scope::StatsRead];
        let editor = [Scope::LinksCreate, Scope::LinksWrite];
        let admin = [Scope::KeysManage, Scope::AuditRead];
        let scopes: &[&[Scope]] = match self {
            Role::Viewer => &[&viewer],
            Role::Editor => &[&viewer, &editor],
            Role::Admin | Role::Owner => &[&viewer, &editor, &admin],
        };
        scopes.iter().flat_map(|s| s.iter().copied()).collect()
    }
}

/// One `[[role]]` table.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mapping {
    /// The ID token claim looked at (`groups`, `email`, ...).
    pub claim: String,
    /// The value it must be, or hold.
    pub value: String,
    /// The tenant the role is in.
    pub tenant: String,
    /// The role.
    pub role: Role,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    role: Vec<Mapping>,
}

/// Parses a roles file's text.
pub fn parse(text: &str) -> Result<Vec<Mapping>, String> {
    let file: File = toml::from_str(text).map_err(|e| format!("roles file: {e}"))?;
    for m in &file.role {
        crate::access::check_name("tenant", &m.tenant, false)?;
        if m.claim.is_empty() || m.value.is_empty() {
            return Err("roles file: a role's claim and value must not be empty".into());
        }
    }
    Ok(file.role)
}

/// How a reload changed one tenant's mappings: the `(claim, value, role)` tables added and
/// removed (a changed role is one of each).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TenantChange {
    /// Tables in the new file that the old one did not have.
    pub added: Vec<(String, String, Role)>,
    /// Tables of the old file that the new one does not have.
    pub removed: Vec<(String, String, Role)>,
}

/// The tenants whose mappings differ between `before` and `after`, with what changed in each
/// (tables only reordered, or repeated, are no change).
pub fn changes(before: &[Mapping], after: &[Mapping]) -> BTreeMap<String, TenantChange> {
    use std::collections::BTreeSet;
    let set = |mappings: &[Mapping]| -> BTreeSet<(String, String, String, Role)> {
        mappings
            .iter()
            .map(|m| (m.tenant.clone(), m.claim.clone(), m.value.clone(), m.role))
            .collect()
    };
    let (old, new) = (set(before), set(after));
    let mut changed: BTreeMap<String, TenantChange> = BTreeMap::new();
    for (tenant, claim, value, role) in new.difference(&old) {
        let change = changed.entry(tenant.clone()).or_default();
        change.added.push((claim.clone(), value.clone(), *role));
    }
    for (tenant, claim, value, role) in old.difference(&new) {
        let change = changed.entry(tenant.clone()).or_default();
        change.removed.push((claim.clone(), value.clone(), *role));
    }
    changed
}

/// Whether claim `value` is `wanted` or, as an array, holds it.
fn matches(value: &serde_json::Value, wanted: &str) -> bool {
    match value {
        serde_json::Value::String(s) => s == wanted,
        serde_json::Value::Array(items) => items.iter().any(|i| i.as_str() == Some(wanted)),
        _ => false,
    }
}

/// The role a person with `claims` holds in each tenant (the highest where several tables
/// match), among `mappings`, leaving out tenants `exists` says are unknown.
pub fn resolve(
    mappings: &[Mapping],
    claims: &serde_json::Map<String, serde_json::Value>,
    exists: impl Fn(&str) -> bool,
) -> BTreeMap<String, Role> {
    let mut roles = BTreeMap::new();
    for m in mappings {
        if !claims.get(&m.claim).is_some_and(|v| matches(v, &m.value)) || !exists(&m.tenant) {
            continue;
        }
        let held = roles.entry(m.tenant.clone()).or_insert(m.role);
        *held = (*held).max(m.role);
    }
    roles
}

/// The mappings in force, re-read from their file when it changes.
pub struct Roles {
    current: ArcSwap<Vec<Mapping>>,
    file: Option<PathBuf>,
    reloads: Arc<ReloadCounters>,
}

impl Roles {
    /// The mappings of `file` (none without one).
    pub fn load(file: Option<PathBuf>) -> Result<Self, String> {
        let mappings = match &file {
            Some(path) => parse(
                &std::fs::read_to_string(path)
                    .map_err(|e| format!("read {}: {e}", path.display()))?,
            )?,
            None => Vec::new(),
        };
        Ok(Self {
            current: ArcSwap::from_pointee(mappings),
            file,
            reloads: Arc::new(ReloadCounters::new(ReloadSeries {
                name: "shortener_roles_reloads",
                applied_help: "Reloads of the roles file that replaced the mappings in force",
                refused_help: "Reloads of the roles file refused because it did not parse (the mappings in force stayed)",
            })),
        })
    }

    /// The mappings in force now.
    pub fn mappings(&self) -> Arc<Vec<Mapping>> {
        self.current.load_full()
    }

    /// Re-reads the file; the mappings in force stay if it is refused.
    pub fn reload(&self) -> Result<usize, String> {
        let Some(path) = &self.file else {
            return Ok(0);
        };
        let text =
            std::fs::read_to_string(path).map_err(|e| format!("read {}: {e}", path.display()))?;
        let mappings = parse(&text)?;
        let count = mappings.len();
        self.current.store(Arc::new(mappings));
        Ok(count)
    }

    /// How many reloads were applied and refused.
    pub fn reloads(&self) -> Arc<ReloadCounters> {
        Arc::clone(&self.reloads)
    }

    /// The file the mappings are read from.
    pub fn file(&self) -> Option<&PathBuf> {
        self.file.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(json: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
        json.as_object().expect("object").clone()
    }

    #[test]
    fn a_group_array_or_a_string_claim_maps_to_the_highest_role_of_known_tenants() {
        let mappings = parse(
            r#"
            [[role]]
            claim = "groups"
            value = "marketing-editors"
            tenant = "marketing"
            role = "editor"
            [[role]]
            claim = "email"
            value = "ann@example.com"
            tenant = "marketing"
            role = "viewer"
            [[role]]
            claim = "groups"
            value = "sales"
            tenant = "sales"
            role = "viewer"
            [[role]]
            claim = "groups"
            value = "sales"
            tenant = "nowhere"
            role = "owner"
            "#,
        )
        .expect("parse");
        let person = claims(serde_json::json!({
            "email": "ann@example.com",
            "groups": ["sales", "marketing-editors"],
        }));
        let roles = resolve(&mappings, &person, |t| t != "nowhere");
        assert_eq!(
            roles.into_iter().collect::<Vec<_>>(),
            [
                ("marketing".to_string(), Role::Editor),
                ("sales".to_string(), Role::Viewer)
            ]
        );
        let nobody = claims(serde_json::json!({ "groups": "marketing-editors-x" }));
        assert!(resolve(&mappings, &nobody, |_| true).is_empty());
    }

    #[test]
    fn roles_grant_growing_scopes_and_never_admin() {
        let order = [Role::Viewer, Role::Editor, Role::Admin, Role::Owner];
        for pair in order.windows(2) {
            assert!(pair[0].scopes().within(pair[1].scopes()));
        }
        for role in order {
            assert!(!role.scopes().is_admin(), "{}", role.name());
            assert!(role.scopes().grants(Scope::LinksRead));
        }
        assert!(!Role::Viewer.scopes().grants(Scope::LinksCreate));
        assert!(!Role::Editor.scopes().grants(Scope::KeysManage));
        assert!(Role::Admin.scopes().grants(Scope::KeysManage));
        assert!(!Role::Editor.scopes().grants(Scope::AuditRead));
        assert!(Role::Admin.scopes().grants(Scope::AuditRead));
    }

    #[test]
    fn changes_are_told_per_tenant_and_a_reordered_file_is_none() {
        let table = |value: &str, tenant: &str, role: Role| Mapping {
            claim: "groups".into(),
            value: value.into(),
            tenant: tenant.into(),
            role,
        };
        let before = [
            table("eds", "m", Role::Editor),
            table("vs", "s", Role::Viewer),
        ];
        let reordered = [before[1].clone(), before[0].clone(), before[0].clone()];
        assert!(changes(&before, &reordered).is_empty());
        let after = [
            table("eds", "m", Role::Admin),
            table("vs", "s", Role::Viewer),
        ];
        let changed = changes(&before, &after);
        assert_eq!(changed.len(), 1);
        let entry = |role| ("groups".to_string(), "eds".to_string(), role);
        assert_eq!(changed["m"].added, [entry(Role::Admin)]);
        assert_eq!(changed["m"].removed, [entry(Role::Editor)]);
    }

    #[test]
    fn a_bad_file_is_refused() {
        for text in [
            "[[role]]\nclaim = \"groups\"\nvalue = \"x\"\ntenant = \"t\"\nrole = \"god\"\n",
            "[[role]]\nclaim = \"groups\"\nvalue = \"x\"\ntenant = \"Bad Tenant\"\nrole = \"viewer\"\n",
            "[[role]]\nclaim = \"\"\nvalue = \"x\"\ntenant = \"t\"\nrole = \"viewer\"\n",
            "[[role]]\nclaim = \"groups\"\nvalue = \"x\"\ntenant = \"t\"\nrole = \"viewer\"\nextra = 1\n",
        ] {
            assert!(parse(text).is_err(), "{text}");
        }
    }
}
