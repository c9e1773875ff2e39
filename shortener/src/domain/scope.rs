//! What an API key may do: its scopes.

use std::fmt;

/// One permission an API key can carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scope {
    /// Create links.
    LinksCreate,
    /// Read links (get, list, export).
    LinksRead,
    /// Change links (update, disable, delete).
    LinksWrite,
    /// Read click statistics.
    StatsRead,
    /// Everything, on every tenant's links, and key and operator management.
    Admin,
    /// Manage the API keys of the key's own tenant (create, list, revoke); a key made this
    /// way gets at most the scopes of the key that made it. The tenant admin's right.
    KeysManage,
    /// Read the tenant's audit log (`GET /api/v1/audit`); granted by `admin`, which reads every
    /// tenant's.
    AuditRead,
}

impl Scope {
    /// Every scope, in the order they are shown.
    pub const ALL: [Scope; 7] = [
        Scope::LinksCreate,
        Scope::LinksRead,
        Scope::LinksWrite,
        Scope::StatsRead,
        Scope::KeysManage,
        Scope::AuditRead,
        Scope::Admin,
    ];

    /// The scope's name in key files and errors (`links:create`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Scope::LinksCreate => "links:create",
            Scope::LinksRead => "links:read",
            Scope::LinksWrite => "links:write",
            Scope::StatsRead => "stats:read",
            Scope::Admin => "admin",
            Scope::KeysManage => "keys:manage",
            Scope::AuditRead => "audit:read",
        }
    }

    /// The scope named `name`.
    pub fn parse(name: &str) -> Option<Scope> {
        Scope::ALL.into_iter().find(|s| s.name() == name)
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A set of scopes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Scopes(u8);

impl Scopes {
    /// Every scope but `admin`, `keys:manage` and `audit:read` (the links and stats scopes): what a key of
    /// the simple one-key setups gets.
    pub fn all_but_admin() -> Self {
        Scope::ALL
            .into_iter()
            .filter(|s| !matches!(s, Scope::Admin | Scope::KeysManage | Scope::AuditRead))
            .collect()
    }

    /// Whether every scope of `self` is granted by `other` (`admin` grants them all).
    pub fn within(self, other: Scopes) -> bool {
        self.iter().all(|s| other.grants(s))
    }

    /// The scopes of `self` that `cap` grants (`admin` in `cap` grants them all).
    pub fn capped_by(self, cap: Scopes) -> Scopes {
        self.iter().filter(|s| cap.grants(*s)).collect()
    }

    /// Whether the set is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Whether the set grants `scope`: `admin` grants every scope.
    pub fn grants(self, scope: Scope) -> bool {
        self.0 & (scope.bit() | Scope::Admin.bit()) != 0
    }

    /// Whether the set holds `admin`.
    pub fn is_admin(self) -> bool {
        self.0 & Scope::Admin.bit() != 0
    }

    /// The scopes in the set, in [`Scope::ALL`] order.
    pub fn iter(self) -> impl Iterator<Item = Scope> {
        Scope::ALL
            .into_iter()
            .filter(move |s| self.0 & s.bit() != 0)
    }

    /// Parses a comma-separated list of scope names (`links:create,links:read`).
    pub fn parse_list(text: &str) -> Result<Self, String> {
        text.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| Scope::parse(s).ok_or_else(|| unknown_scope(s)))
            .collect::<Result<Scopes, String>>()
            .and_then(|s| {
                if s.0 == 0 {
                    Err("no scope given".to_string())
                } else {
                    Ok(s)
                }
            })
    }
}

/// The refusal of an unknown scope name, listing the known ones.
pub fn unknown_scope(name: &str) -> String {
    let known: Vec<&str> = Scope::ALL.iter().map(|s| s.name()).collect();
    format!(
        "unknown scope {}; the scopes are {}",
        crate::domain::echo(name),
        known.join(", ")
    )
}

impl FromIterator<Scope> for Scopes {
    fn from_iter<I: IntoIterator<Item = Scope>>(iter: I) -> Self {
        Scopes(iter.into_iter().fold(0, |bits, s| bits | s.bit()))
    }
}

impl fmt::Display for Scopes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.iter().map(Scope::name).collect();
        f.write_str(&names.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admin_grants_every_scope_and_others_only_themselves() {
        let admin: Scopes = [Scope::Admin].into_iter().collect();
        let reader: Scopes = [Scope::LinksRead].into_iter().collect();
        for scope in Scope::ALL {
            assert!(admin.grants(scope), "{scope}");
            assert_eq!(reader.grants(scope), scope == Scope::LinksRead, "{scope}");
        }
        assert!(!Scopes::all_but_admin().is_admin());
        assert!(Scopes::all_but_admin().grants(Scope::StatsRead));
        assert!(!Scopes::all_but_admin().grants(Scope::KeysManage));
    }

    #[test]
    fn a_set_is_within_another_only_when_that_grants_each_of_its_scopes() {
        let manager = Scopes::parse_list("keys:manage,links:read").expect("valid");
        let reader = Scopes::parse_list("links:read").expect("valid");
        let writer = Scopes::parse_list("links:write").expect("valid");
        let admin = Scopes::parse_list("admin").expect("valid");
        assert!(reader.within(manager));
        assert!(manager.within(manager));
        assert!(!writer.within(manager));
        assert!(!admin.within(manager));
        assert!(admin.within(admin) && writer.within(admin) && manager.within(admin));
        assert_eq!(Scope::parse("keys:manage"), Some(Scope::KeysManage));
    }

    #[test]
    fn scope_lists_parse_and_refuse_unknown_names() {
        let parsed = Scopes::parse_list("links:create, links:read").expect("valid");
        assert_eq!(parsed.to_string(), "links:create,links:read");
        for bad in ["", "links:delete", "links:create,root", " , "] {
            assert!(Scopes::parse_list(bad).is_err(), "{bad:?}");
        }
    }
}
