//! Loading and creating secret key files (code-space key, API keys), and the secrets derived
//! from the code-space key (list cursors, YOURLS tokens, console session tags).

use anyhow::{Context, bail};
use codespace::CodeKey;
use std::io::Write;
use std::path::Path;

/// Reads a code-space key from `path` (64 hex digits or base64, surrounding whitespace ignored).
pub fn read_code_key(path: &Path) -> anyhow::Result<CodeKey> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("read code-space key file {}", path.display()))?;
    CodeKey::parse(&text).with_context(|| format!("parse code-space key file {}", path.display()))
}

/// Writes `contents` to a new file at `path` readable by its owner only (mode 0600).
/// Refuses to overwrite an existing file unless `overwrite` is set.
pub fn write_secret_file(path: &Path, contents: &str, overwrite: bool) -> anyhow::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true);
    if overwrite {
        options.create(true).truncate(true);
    } else {
        options.create_new(true);
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = match options.open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            bail!(
                "{} already exists; pass --force to replace it",
                path.display()
            )
        }
        Err(e) => return Err(e).with_context(|| format!("create {}", path.display())),
    };
    #[cfg(unix)]
    {
        // `mode` applies only to newly created files; tighten an overwritten one too.
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))
            .with_context(|| format!("restrict permissions of {}", path.display()))?;
    }
    file.write_all(contents.as_bytes())
        .with_context(|| format!("write {}", path.display()))?;
    file.sync_all()
        .with_context(|| format!("sync {}", path.display()))?;
    Ok(())
}

/// Writes a fresh random code-space key to `path` (0600) and returns it.
pub fn generate_code_key_file(path: &Path, overwrite: bool) -> anyhow::Result<CodeKey> {
    let key = CodeKey::generate();
    write_secret_file(path, &format!("{}\n", key.to_hex()), overwrite)?;
    Ok(key)
}

/// HMAC-SHA256 of `input` under `key`.
pub fn hmac_sha256(key: &[u8], input: &[u8]) -> [u8; 32] {
    use hmac::{Hmac, KeyInit, Mac};
    let mut mac = <Hmac<sha2::Sha256> as KeyInit>::new_from_slice(key)
        .expect("HMAC takes keys of any length");
    mac.update(input);
    mac.finalize().into_bytes().into()
}

/// The secret a deployment whose code-space key is `key` derives for the use `label` names:
/// one-way (what is made with it reveals nothing of the code-space key), the same on every
/// node, and another for every label.
pub fn derive_secret(key: &CodeKey, label: &[u8]) -> [u8; 32] {
    hmac_sha256(key.as_bytes(), label)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_key_files_are_private_and_read_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("code.key");
        let key = generate_code_key_file(&path, false).expect("write");
        assert_eq!(read_code_key(&path).expect("read"), key);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).expect("stat").permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let again = generate_code_key_file(&path, false).expect_err("must not overwrite");
        assert!(again.to_string().contains("already exists"), "{again}");
        let replaced = generate_code_key_file(&path, true).expect("overwrite");
        assert_ne!(replaced, key);
    }

    #[test]
    fn a_bad_key_file_names_the_file_and_the_problem() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("short.key");
        std::fs::write(&path, "abcd\n").expect("write");
        let error = format!("{:#}", read_code_key(&path).expect_err("too short"));
        assert!(
            error.contains("short.key") && error.contains("2 bytes"),
            "{error}"
        );
        let missing = format!(
            "{:#}",
            read_code_key(&dir.path().join("nope")).expect_err("missing")
        );
        assert!(missing.contains("nope"), "{missing}");
    }
}
