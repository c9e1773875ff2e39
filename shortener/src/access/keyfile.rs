//! The API keys file, in either of its two formats.
//!
//! The TOML format names each key's tenant, name, digest, scopes and optional expiry:
//!
//! ```toml
//! [[key]]
//! tenant = "marketing"
//! name = "campaign-tool"
//! digest = "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
//! scopes = ["links:create", "links:read"]
//! expires = "2027-06-30T00:00:00Z"
//! ```
//!
//! The one-key-per-line format of earlier releases (a raw key or `sha256:<hex>` per line, `#`
//! comments) still works: each line is a key of tenant `default` with every scope but `admin`,
//! named by the first 16 hex digits of its digest (the owner id earlier releases recorded).

use super::keys::{DEFAULT_TENANT, KeyEntry, MIN_KEY_LENGTH, check_name, digest};
use crate::domain::{Scope, Scopes, unknown_scope};
use chrono::{DateTime, SecondsFormat, Utc};
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyFile {
    #[serde(default)]
    key: Vec<KeyTable>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyTable {
    tenant: String,
    name: String,
    digest: String,
    scopes: Vec<String>,
    #[serde(default)]
    expires: Option<String>,
}

/// Whether `text` is in the one-key-per-line format: every line that is not blank or a
/// comment is a single token that does not open a TOML table.
pub fn is_legacy(text: &str) -> bool {
    entry_lines(text).all(|line| !line.starts_with('[') && !line.contains(char::is_whitespace))
        && entry_lines(text).next().is_some()
}

fn entry_lines(text: &str) -> impl Iterator<Item = &str> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
}

/// The keys in a file's `text`, in either format.
pub fn parse(text: &str) -> Result<Vec<KeyEntry>, String> {
    if is_legacy(text) {
        return parse_legacy(entry_lines(text));
    }
    let file: KeyFile = toml::from_str(text).map_err(|e| syntax_error(text, &e))?;
    file.key
        .into_iter()
        .enumerate()
        .map(|(i, table)| table_entry(table).map_err(|e| format!("[[key]] number {}: {e}", i + 1)))
        .collect()
}

/// A TOML error of the keys file as it may be logged: where it is and what is wrong, without
/// the offending line or any quoted part of it that could hold a secret (`toml` shows the
/// line, and a line of a keys file, a raw key among them, may be a secret). A quoted word is
/// kept when it cannot be a key: lower-case letters and `_` only, and shorter than the 16
/// characters a key has at least, so the field names (`unknown field `expires_at`, expected
/// one of `tenant`, …`) stay readable.
fn syntax_error(text: &str, error: &toml::de::Error) -> String {
    let shown = |quoted: &str| {
        quoted.len() < super::MIN_KEY_LENGTH
            && quoted.chars().all(|c| c.is_ascii_lowercase() || c == '_')
    };
    let mut message = String::new();
    let mut quote: Option<(char, String)> = None;
    for c in error.message().chars() {
        match &mut quote {
            Some((open, quoted)) if c == *open => {
                message.push_str(if shown(quoted) { quoted } else { "…" });
                message.push(c);
                quote = None;
            }
            Some((_, quoted)) => quoted.push(c),
            None => {
                message.push(c);
                if c == '`' || c == '"' || c == '\'' {
                    quote = Some((c, String::new()));
                }
            }
        }
    }
    let message: String = message.chars().filter(|c| !c.is_control()).collect();
    let Some(span) = error.span() else {
        return format!("not a valid keys file: {}", message.trim());
    };
    let before = &text[..span.start.min(text.len())];
    let line = before.matches('\n').count() + 1;
    format!("not a valid keys file: line {line}: {}", message.trim())
}

fn table_entry(table: KeyTable) -> Result<KeyEntry, String> {
    check_name("tenant", &table.tenant, false)?;
    check_name("name", &table.name, true)?;
    let digest =
        parse_digest(&table.digest).ok_or("digest must be sha256: followed by 64 hex digits")?;
    let scopes = table
        .scopes
        .iter()
        .map(|s| Scope::parse(s).ok_or_else(|| unknown_scope(s)))
        .collect::<Result<Scopes, String>>()?;
    if scopes == Scopes::default() {
        return Err("scopes is empty".into());
    }
    let expires = table
        .expires
        .as_deref()
        .map(|t| {
            DateTime::parse_from_rfc3339(t)
                .map(|t| t.with_timezone(&Utc))
                .map_err(|e| format!("expires is not an RFC 3339 time: {e}"))
        })
        .transpose()?;
    Ok(KeyEntry {
        tenant: table.tenant,
        name: table.name,
        digest,
        scopes,
        expires,
    })
}

fn parse_digest(text: &str) -> Option<[u8; 32]> {
    hex::decode(text.strip_prefix("sha256:")?)
        .ok()?
        .try_into()
        .ok()
}

/// Keys given the simple way (`SHORTENER_API_KEYS`, or a file of one per line): raw keys or
/// `sha256:<hex>`, each of tenant `default` with every scope but `admin`.
pub fn parse_legacy<'a>(
    entries: impl IntoIterator<Item = &'a str>,
) -> Result<Vec<KeyEntry>, String> {
    let mut keys = Vec::new();
    for (n, entry) in entries.into_iter().enumerate() {
        let entry = entry.trim();
        if entry.is_empty() || entry.starts_with('#') {
            continue;
        }
        let digest = if entry.starts_with("sha256:") {
            parse_digest(entry).ok_or_else(|| {
                format!(
                    "API key entry {}: sha256: must be followed by 64 hex digits",
                    n + 1
                )
            })?
        } else if entry.len() < MIN_KEY_LENGTH || !entry.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(format!(
                "API key entry {}: keys need at least {MIN_KEY_LENGTH} printable characters without spaces",
                n + 1
            ));
        } else {
            digest(entry)
        };
        keys.push(KeyEntry {
            tenant: DEFAULT_TENANT.into(),
            name: hex::encode(&digest[..8]),
            digest,
            scopes: Scopes::all_but_admin(),
            expires: None,
        });
    }
    Ok(keys)
}

/// `entry` as a TOML table to append to a keys file.
pub fn render(entry: &KeyEntry) -> String {
    let scopes: Vec<String> = entry
        .scopes
        .iter()
        .map(|s| format!("{:?}", s.name()))
        .collect();
    let mut table = format!(
        "\n[[key]]\ntenant = {:?}\nname = {:?}\ndigest = \"sha256:{}\"\nscopes = [{}]\n",
        entry.tenant,
        entry.name,
        hex::encode(entry.digest),
        scopes.join(", ")
    );
    if let Some(expires) = entry.expires {
        table.push_str(&format!(
            "expires = {:?}\n",
            expires.to_rfc3339_opts(SecondsFormat::Secs, true)
        ));
    }
    table
}

/// The first lines of a new keys file.
pub const HEADER: &str = "# shortener API keys: one [[key]] table per key. Only digests are kept here;\n# `shortener keys add` prints each new key once.\n";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::keys::KeySet;

    #[test]
    fn a_rendered_entry_parses_back_and_both_formats_are_told_apart() {
        let entry = KeyEntry {
            tenant: "acme".into(),
            name: "ci.bot".into(),
            digest: digest("a-secret-key-0123456789"),
            scopes: Scopes::parse_list("links:create,stats:read").expect("scopes"),
            expires: Some("2027-01-02T03:04:05Z".parse().expect("time")),
        };
        let text = format!("{HEADER}{}", render(&entry));
        assert!(!is_legacy(&text));
        assert_eq!(parse(&text).expect("parses"), vec![entry]);
        let legacy = "# old\nfirst-key-0123456789\nsha256:".to_string() + &"ab".repeat(32) + "\n";
        assert!(is_legacy(&legacy));
        let keys = parse(&legacy).expect("legacy parses");
        assert_eq!(keys.len(), 2);
        assert!(
            keys.iter()
                .all(|k| k.tenant == "default" && k.scopes == Scopes::all_but_admin())
        );
        assert_eq!(
            keys[0].name,
            hex::encode(&digest("first-key-0123456789")[..8])
        );
        assert!(parse(HEADER).expect("an empty file").is_empty());
    }

    #[test]
    fn a_file_that_is_not_toml_is_refused_without_showing_its_lines() {
        let secret = "Xk3-raw-key-never-shown-0123456789";
        for text in [
            format!("first-key-0123456789\n{secret}  # ci-bot\n"),
            format!("{secret} = 1\n"),
            format!("[[key]]\n{secret} = \"x\"\n"),
            format!("[[key]]\ntenant = \"{secret}\n"),
            // A key of only lower-case letters is long enough never to be shown.
            "[[key]]\nlower_case_only_key_never_shown = 1\n".to_string(),
        ] {
            let error = parse(&text).expect_err("not a keys file");
            assert!(error.starts_with("not a valid keys file"), "{error}");
            assert!(error.contains("line "), "{error}");
            assert!(
                !error.contains("Xk3")
                    && !error.contains("0123456789")
                    && !error.contains("never_shown"),
                "the error shows a key: {error}"
            );
        }
    }

    #[test]
    fn bad_files_are_refused_with_the_reason() {
        let good = "[[key]]\ntenant = \"t\"\nname = \"k\"\ndigest = \"sha256:".to_string()
            + &"00".repeat(32)
            + "\"\nscopes = [\"links:read\"]\n";
        assert!(parse(&good).is_ok());
        let cases = [
            (good.replace("links:read", "links:delete"), "unknown scope"),
            (good.replace("tenant = \"t\"", "tenant = \"T T\""), "tenant"),
            (good.replace("sha256:", "md5:"), "digest"),
            (good.replace("[\"links:read\"]", "[]"), "scopes is empty"),
            (good.clone() + "colour = \"red\"\n", "not a valid keys file"),
            // The field names are said, the one written and the ones the file takes.
            (
                good.clone() + "expires_at = \"2027-01-01T00:00:00Z\"\n",
                "unknown field `expires_at`, expected one of `tenant`, `name`, `digest`",
            ),
            (
                good.replace("scopes", "expires = \"tomorrow\"\nscopes"),
                "RFC 3339",
            ),
            ("[[key]\nbroken".to_string(), "not a valid keys file"),
            ("short\n".to_string(), "at least 16"),
        ];
        for (text, why) in cases {
            let error = parse(&text).expect_err(&text);
            assert!(error.contains(why), "{why}: {error}");
        }
        let twice = format!("{good}{good}");
        let entries = parse(&twice).expect("parses");
        assert!(
            KeySet::new(entries).is_err(),
            "a name given twice is refused"
        );
    }
}
