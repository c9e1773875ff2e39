//! Tokens files for tests: callers with fixed tokens, written as `token_sha256` entries.

use std::path::{Path, PathBuf};

/// One caller of a test tokens file.
#[derive(Debug, Clone)]
pub struct Caller {
    /// Its name.
    pub name: &'static str,
    /// Its namespaces (`*` for all).
    pub namespaces: &'static [&'static str],
    /// Its scopes.
    pub scopes: &'static [&'static str],
    /// Extra TOML lines (quotas), or "".
    pub quota: &'static str,
}

impl Caller {
    /// A caller with no quota.
    pub const fn new(
        name: &'static str,
        namespaces: &'static [&'static str],
        scopes: &'static [&'static str],
    ) -> Self {
        Self {
            name,
            namespaces,
            scopes,
            quota: "",
        }
    }

    /// The caller's token (fixed per name, long enough to be accepted).
    pub fn token(&self) -> String {
        token_of(self.name)
    }
}

/// The token the test callers named `name` get.
pub fn token_of(name: &str) -> String {
    format!("idsvc_test-{name}-0123456789abcdefghijklmnopqrstuv")
}

/// The TOML of a tokens file for `callers`.
pub fn toml(callers: &[Caller]) -> String {
    let list = |items: &[&str]| {
        items
            .iter()
            .map(|i| format!("\"{i}\""))
            .collect::<Vec<_>>()
            .join(", ")
    };
    callers
        .iter()
        .map(|c| {
            let digest = hex::encode(id_service::auth::token::digest(c.token().as_bytes()));
            format!(
                "[[callers]]\nname = \"{}\"\ntoken_sha256 = \"{digest}\"\nnamespaces = [{}]\nscopes = [{}]\n{}\n",
                c.name,
                list(c.namespaces),
                list(c.scopes),
                c.quota
            )
        })
        .collect()
}

/// Writes a tokens file for `callers` into `dir`; returns its path.
pub fn write(dir: &Path, callers: &[Caller]) -> PathBuf {
    let path = dir.join("tokens.toml");
    replace(&path, &toml(callers));
    path
}

/// Replaces the file at `path` with `text` at once (write a sibling, rename), as a Secret
/// volume or an editor would.
pub fn replace(path: &Path, text: &str) {
    let temporary = path.with_extension("new");
    std::fs::write(&temporary, text).expect("write the tokens file");
    std::fs::rename(&temporary, path).expect("move the tokens file into place");
}
