//! `id-service tokens add`: a new caller with a fresh token. The token is returned once (the
//! binary prints it); only its SHA-256 goes into the file, appended as a `[[callers]]` table.
//! The file is rewritten atomically (a temporary file, fsynced, renamed over it) with mode 0600,
//! and only if the whole result passes the same checks the service applies.

use crate::auth::{token, tokens_file};
use crate::config::AddToken;
use crate::domain::CallerName;
use anyhow::{Context, anyhow};
use std::io::Write;
use std::path::Path;

/// Adds the caller `add` describes to its file; returns the new token.
pub fn add(add: &AddToken) -> anyhow::Result<String> {
    let name = CallerName::parse(&add.name)?;
    tokens_file::namespace_grant(&add.namespaces).map_err(|e| anyhow!("--namespaces: {e}"))?;
    tokens_file::scope_set(&add.scopes).map_err(|e| anyhow!("--scopes: {e}"))?;
    let quota = tokens_file::quota_spec(add.ids_per_second, add.ids_burst, add.leases_per_second)?;
    // A caller without an IDs quota could lease the whole code space in minutes: only on
    // purpose.
    match (add.unlimited, quota.ids_per_second.is_some()) {
        (false, false) => {
            return Err(anyhow!(
                "give the caller a quota (--ids-per-second) or, on purpose, none (--unlimited)"
            ));
        }
        (true, _) if quota != Default::default() => {
            return Err(anyhow!("--unlimited goes with no quota options"));
        }
        _ => {}
    }
    let mut text = match add.file.try_exists() {
        Ok(true) => tokens_file::read_text(&add.file).context("read the tokens file")?,
        Ok(false) => String::new(),
        Err(e) => return Err(e).with_context(|| format!("look for {}", add.file.display())),
    };
    let token = token::generate().context("read random bytes for the token")?;
    if !text.is_empty() {
        if !text.ends_with('\n') {
            text.push('\n');
        }
        text.push('\n');
    }
    text.push_str(&entry(&name, &token, add));
    tokens_file::parse(&text).context("check the tokens file with the new caller")?;
    write_atomically(&add.file, &text).with_context(|| format!("write {}", add.file.display()))?;
    Ok(token)
}

/// The TOML table of one caller. Every value was checked against a character set that needs
/// no escaping in a basic string.
fn entry(name: &CallerName, token: &str, add: &AddToken) -> String {
    let list = |items: &[String]| {
        items
            .iter()
            .map(|i| format!("\"{i}\""))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut text = format!(
        "[[callers]]\nname = \"{name}\"\ntoken_sha256 = \"{}\"\nnamespaces = [{}]\nscopes = [{}]\n",
        hex::encode(token::digest(token.as_bytes())),
        list(&add.namespaces),
        list(&add.scopes),
    );
    if add.unlimited {
        text.push_str("# no quota: added with --unlimited\n");
    }
    for (key, value) in [
        ("ids_per_second", add.ids_per_second),
        ("ids_burst", add.ids_burst),
        ("leases_per_second", add.leases_per_second),
    ] {
        if let Some(value) = value {
            text.push_str(&format!("{key} = {value}\n"));
        }
    }
    text
}

fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "tokens".into());
    let temporary = dir.join(format!(".{file_name}.{}.tmp", std::process::id()));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let written = (|| {
        let mut file = options.open(&temporary)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&temporary, path)?;
        std::fs::File::open(dir)?.sync_all()
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add_to(file: &Path, name: &str) -> anyhow::Result<String> {
        add(&AddToken {
            file: file.to_path_buf(),
            name: name.into(),
            namespaces: vec!["orders".into(), "invoices".into()],
            scopes: vec!["allocate".into(), "lookup".into()],
            ids_per_second: Some(1000),
            ids_burst: None,
            leases_per_second: None,
            unlimited: false,
        })
    }

    #[test]
    fn added_callers_are_valid_entries_holding_only_the_digest() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("tokens.toml");
        std::fs::write(&file, "# callers of the billing cluster\n").expect("seed");
        let first = add_to(&file, "billing").expect("add");
        let second = add_to(&file, "reports").expect("add");
        let text = std::fs::read_to_string(&file).expect("read");
        assert!(
            text.starts_with("# callers of the billing cluster\n"),
            "{text}"
        );
        assert!(
            !text.contains(&first) && !text.contains(&second),
            "a raw token was written"
        );
        let specs = tokens_file::parse(&text).expect("the file stays valid");
        assert_eq!(specs.len(), 2);
        assert_eq!(specs[0].digest, token::digest(first.as_bytes()));
        assert_eq!(specs[1].digest, token::digest(second.as_bytes()));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&file).expect("stat").permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[test]
    fn an_unlimited_caller_is_added_only_on_purpose_and_says_so() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("tokens.toml");
        add(&AddToken {
            file: file.clone(),
            name: "batch".into(),
            namespaces: vec!["orders".into()],
            scopes: vec!["lease".into()],
            ids_per_second: None,
            ids_burst: None,
            leases_per_second: None,
            unlimited: true,
        })
        .expect("add");
        let text = std::fs::read_to_string(&file).expect("read");
        assert!(
            text.contains("# no quota: added with --unlimited"),
            "{text}"
        );
        let specs = tokens_file::parse(&text).expect("valid");
        assert_eq!(specs[0].quota, Default::default());
    }

    #[test]
    fn a_duplicate_name_or_a_bad_value_leaves_the_file_untouched() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("tokens.toml");
        add_to(&file, "billing").expect("add");
        let before = std::fs::read_to_string(&file).expect("read");
        assert!(add_to(&file, "billing").is_err(), "duplicate name");
        assert!(add_to(&file, "Bad Name").is_err(), "bad name");
        let bad_scope = add(&AddToken {
            scopes: vec!["root".into()],
            ..AddToken {
                file: file.clone(),
                name: "x".into(),
                namespaces: vec!["a".into()],
                scopes: vec![],
                ids_per_second: None,
                ids_burst: None,
                leases_per_second: None,
                unlimited: true,
            }
        });
        assert!(bad_scope.is_err(), "unknown scope");
        let no_quota = AddToken {
            file: file.clone(),
            name: "open".into(),
            namespaces: vec!["a".into()],
            scopes: vec!["allocate".into()],
            ids_per_second: None,
            ids_burst: None,
            leases_per_second: None,
            unlimited: false,
        };
        let error = add(&no_quota).expect_err("neither a quota nor --unlimited");
        assert!(error.to_string().contains("--unlimited"), "{error}");
        let both = AddToken {
            unlimited: true,
            leases_per_second: Some(5),
            ..no_quota.clone()
        };
        assert!(add(&both).is_err(), "--unlimited with a quota");
        assert_eq!(std::fs::read_to_string(&file).expect("read"), before);
        let leftovers = std::fs::read_dir(dir.path()).expect("list").count();
        assert_eq!(leftovers, 1, "a temporary file was left behind");
    }
}
