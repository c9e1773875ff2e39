//! `shortener keys add`: a new API key, printed once, its digest appended to a keys file.
//! `shortener keys yourls-token`: a key's YOURLS token, for clients that sign with timestamps.

use crate::access::{
    KEY_FILE_HEADER, KeyEntry, KeySet, YourlsTokens, check_name, digest, generate_api_key,
    is_legacy, parse_key_file, render,
};
use crate::domain::Scopes;
use anyhow::{Context, bail};
use chrono::{DateTime, Utc};
use std::io::Write;
use std::path::{Path, PathBuf};

/// `shortener keys ...`.
#[derive(Debug, clap::Subcommand)]
pub enum KeysCommand {
    /// Make a new API key: prints it once on stdout and appends its digest to the keys file
    /// (created with mode 0600 if missing). A running node picks it up on its next check of the
    /// file, or at once on SIGHUP.
    #[command(after_help = super::KEYS_EXAMPLES)]
    Add(AddArgs),
    /// Print a key's YOURLS token, for a YOURLS client that signs its requests with a
    /// timestamp (`timestamp` and `signature` = md5(timestamp . token)) instead of sending the
    /// key: the token stands for that key alone (its tenant, scopes and expiry), stops working
    /// when the key is removed, and is the same on every node sharing the code-space key.
    #[command(after_help = super::YOURLS_TOKEN_EXAMPLES)]
    YourlsToken(YourlsTokenArgs),
}

/// Arguments of `shortener keys yourls-token`.
#[derive(Debug, clap::Args)]
pub struct YourlsTokenArgs {
    /// The keys file holding the key (the node's SHORTENER_API_KEYS_FILE).
    #[arg(long, value_name = "FILE")]
    pub file: PathBuf,
    /// The key's tenant.
    #[arg(long, default_value = crate::access::DEFAULT_TENANT)]
    pub tenant: String,
    /// The key's name; may be left out when the tenant has one key in the file.
    #[arg(long)]
    pub name: Option<String>,
    /// The code-space key file the nodes use (embedded mode: `<data dir>/code.key`).
    #[arg(long, env = "SHORTENER_KEY_FILE", value_name = "FILE")]
    pub key_file: PathBuf,
}

/// Arguments of `shortener keys add`.
#[derive(Debug, clap::Args)]
pub struct AddArgs {
    /// The keys file (TOML; the node's SHORTENER_API_KEYS_FILE).
    #[arg(long, value_name = "FILE")]
    pub file: PathBuf,
    /// The tenant whose links the key acts on (`a-z0-9_-`).
    #[arg(long)]
    pub tenant: String,
    /// The key's name, unique within its tenant, shown in logs and metrics (`A-Za-z0-9_.-`).
    #[arg(long)]
    pub name: String,
    /// Comma-separated scopes: links:create, links:read, links:write, stats:read, keys:manage,
    /// audit:read, admin.
    #[arg(long)]
    pub scopes: String,
    /// When the key stops working (RFC 3339, e.g. 2027-06-30T00:00:00Z).
    #[arg(long)]
    pub expires: Option<String>,
}

/// Runs `shortener keys ...`; the new key goes to `out`.
pub fn run(command: &KeysCommand, out: impl Write) -> anyhow::Result<()> {
    match command {
        KeysCommand::Add(args) => add(args, out),
        KeysCommand::YourlsToken(args) => yourls_token(args, out),
    }
}

fn yourls_token(args: &YourlsTokenArgs, mut out: impl Write) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&args.file)
        .with_context(|| format!("read {}", args.file.display()))?;
    let entries = parse_key_file(&text)
        .map_err(anyhow::Error::msg)
        .with_context(|| format!("parse {}", args.file.display()))?;
    let of_tenant: Vec<&KeyEntry> = entries.iter().filter(|e| e.tenant == args.tenant).collect();
    let entry = match (&args.name, of_tenant.as_slice()) {
        (Some(name), _) => of_tenant.iter().find(|e| e.name == *name).copied(),
        (None, [one]) => Some(*one),
        (None, []) => None,
        (None, _) => bail!(
            "tenant {:?} has {} keys in {}: name one with --name",
            args.tenant,
            of_tenant.len(),
            args.file.display()
        ),
    };
    let Some(entry) = entry else {
        bail!(
            "{} holds no key {}of tenant {:?}",
            args.file.display(),
            args.name
                .as_ref()
                .map(|n| format!("{n:?} "))
                .unwrap_or_default(),
            args.tenant
        );
    };
    let code_key = crate::secrets::read_code_key(&args.key_file)?;
    let token = YourlsTokens::derive(&code_key).token(&entry.digest);
    writeln!(out, "{token}").context("print the token")?;
    eprintln!(
        "the YOURLS token of key {:?} of tenant {:?} ({}); it works while the key is in the \
         keys file",
        entry.name, entry.tenant, entry.scopes
    );
    Ok(())
}

fn add(args: &AddArgs, mut out: impl Write) -> anyhow::Result<()> {
    check_name("tenant", &args.tenant, false).map_err(anyhow::Error::msg)?;
    check_name("name", &args.name, true).map_err(anyhow::Error::msg)?;
    let scopes = Scopes::parse_list(&args.scopes).map_err(anyhow::Error::msg)?;
    let expires = args
        .expires
        .as_deref()
        .map(|t| {
            DateTime::parse_from_rfc3339(t)
                .map(|t| t.with_timezone(&Utc))
                .with_context(|| format!("--expires {t:?} is not an RFC 3339 time"))
        })
        .transpose()?;
    if expires.is_some_and(|t| t <= Utc::now()) {
        bail!("--expires is in the past");
    }
    let existing = match std::fs::read_to_string(&args.file) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e).with_context(|| format!("read {}", args.file.display())),
    };
    let mut entries = Vec::new();
    if let Some(text) = &existing {
        if is_legacy(text) {
            bail!(
                "{} holds keys in the one-per-line format; keys added with tenants and scopes need a TOML keys file",
                args.file.display()
            );
        }
        entries = parse_key_file(text)
            .map_err(anyhow::Error::msg)
            .with_context(|| format!("parse {}", args.file.display()))?;
    }
    let key = generate_api_key();
    let entry = KeyEntry {
        tenant: args.tenant.clone(),
        name: args.name.clone(),
        digest: digest(&key),
        scopes,
        expires,
    };
    entries.push(entry.clone());
    KeySet::new(entries).map_err(anyhow::Error::msg)?;
    let text = existing.unwrap_or_else(|| KEY_FILE_HEADER.to_string()) + &render(&entry);
    replace_file(&args.file, &text)?;
    writeln!(out, "{key}").context("print the key")?;
    eprintln!(
        "added key {:?} of tenant {:?} ({scopes}) to {}; this is the only time the key is shown",
        entry.name,
        entry.tenant,
        args.file.display()
    );
    Ok(())
}

/// Writes `text` to `path` in one step (a file beside it, renamed over it), mode 0600, so a
/// node watching the file never reads half of it.
fn replace_file(path: &Path, text: &str) -> anyhow::Result<()> {
    let name = path
        .file_name()
        .context("the keys file needs a file name")?
        .to_string_lossy();
    let temporary = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&temporary);
    crate::secrets::write_secret_file(&temporary, text, false)?;
    std::fs::rename(&temporary, path).with_context(|| format!("replace {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::domain::Scope;
    use clap::CommandFactory;

    #[test]
    fn the_help_of_keys_add_names_every_scope() {
        let mut cli = crate::cli::Cli::command();
        let add = cli
            .find_subcommand_mut("keys")
            .and_then(|keys| keys.find_subcommand_mut("add"))
            .expect("keys add");
        let help = add.render_long_help().to_string();
        for scope in Scope::ALL {
            assert!(
                help.contains(scope.name()),
                "{} missing: {help}",
                scope.name()
            );
        }
    }
}
