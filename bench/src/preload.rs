//! The node's own code for setting up a benchmark's store: `shortener migrate` creates the
//! schema of a baseline's database, and `shortener preload` writes many generated links the way
//! creates write them (leased IDs, the key's codes, the store's insert path). Neither the
//! schema nor the rows are written here, so a change to either cannot leave the benchmark
//! measuring something the node no longer does.

use crate::node::API_KEY;
use crate::procs::sibling_binary;
use anyhow::{Context, bail};
use codespace::CodeKey;
use std::io::BufRead;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// The SQLite file of a node's data directory (`shortener::app::DB_FILE`).
pub const DB_FILE: &str = "shortener.db";

/// The target URL of the links the benchmarks make, with `{id}` for the ID
/// ([`crate::procs::target_url`] gives the same URL for an ID).
pub const URL_PATTERN: &str =
    "https://www.example.com/articles/2026/11/a-typical-article-slug-{id}?utm_source=bench";

/// `shortener <args>` in the environment of an embedded node on `data_dir` with `key`;
/// returns its standard output.
fn shortener(data_dir: &Path, key: &CodeKey, args: &[&str]) -> anyhow::Result<String> {
    let output = Command::new(sibling_binary("shortener")?)
        .args(args)
        .env("SHORTENER_DATA_DIR", data_dir)
        .env("SHORTENER_KEY", key.to_hex())
        .env("SHORTENER_API_KEYS", API_KEY)
        .env("SHORTENER_HOLDER", "bench-preload")
        .env("RUST_LOG", "warn")
        .output()
        .with_context(|| format!("run shortener {}", args.join(" ")))?;
    if !output.status.success() {
        bail!(
            "shortener {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    String::from_utf8(output.stdout).context("read the output of shortener")
}

/// Writes `n` generated links into the embedded store at `data_dir` (a node may be running on
/// it); returns their codes in ID order (which the keyed permutation makes a random order of
/// codes).
pub fn links(data_dir: &Path, key: &CodeKey, n: u64) -> anyhow::Result<Vec<String>> {
    let count = n.to_string();
    let out = shortener(
        data_dir,
        key,
        &["preload", "--count", &count, "--url-pattern", URL_PATTERN],
    )?;
    let codes: Vec<String> = out.lines().map(str::to_string).collect();
    if codes.len() as u64 != n {
        bail!("shortener preload wrote {} links, not {n}", codes.len());
    }
    Ok(codes)
}

/// Writes `n` generated links into the PostgreSQL store at `database_url`, with IDs leased from
/// the id-service at `id_service` (a node may be running on both); returns their codes in ID
/// order.
pub fn postgres_links(
    database_url: &str,
    id_service: &str,
    key: &CodeKey,
    n: u64,
) -> anyhow::Result<Vec<String>> {
    let mut codes = Vec::with_capacity(n as usize);
    postgres_links_each(database_url, id_service, key, n, PRELOAD_TIMEOUT, |code| {
        codes.push(code.to_string())
    })?;
    Ok(codes)
}

/// How long one `shortener preload` may run unless its caller says otherwise.
const PRELOAD_TIMEOUT: Duration = Duration::from_secs(3600);

/// [`postgres_links`] for loads too large to keep every code: each code goes to `each` as
/// the command prints it, in ID order. The command is killed if it runs longer than `timeout`.
/// Blocks the calling thread.
pub fn postgres_links_each(
    database_url: &str,
    id_service: &str,
    key: &CodeKey,
    n: u64,
    timeout: Duration,
    mut each: impl FnMut(&str),
) -> anyhow::Result<()> {
    let count = n.to_string();
    let args = ["preload", "--count", &count, "--url-pattern", URL_PATTERN];
    let mut child = Command::new(sibling_binary("shortener")?)
        .args(args)
        .env("DATABASE_URL", database_url)
        .env("SHORTENER_ID_SERVICE", id_service)
        .env("SHORTENER_KEY", key.to_hex())
        .env("SHORTENER_API_KEYS", API_KEY)
        .env("SHORTENER_HOLDER", "bench-preload")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("run shortener preload")?;
    let (stdout, mut stderr) = (
        child.stdout.take().context("preload's standard output")?,
        child.stderr.take().context("preload's standard error")?,
    );
    let errors = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut text);
        text
    });
    // The watchdog kills by process ID. The child is reaped only after the watchdog has
    // finished, so until then its ID cannot belong to another process.
    let (done, finished) = std::sync::mpsc::channel::<()>();
    let pid = child.id().to_string();
    let watchdog = std::thread::spawn(move || {
        let expired = matches!(
            finished.recv_timeout(timeout),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout)
        );
        if expired {
            let _ = Command::new("kill").args(["-KILL", &pid]).status();
        }
        expired
    });
    let mut lines = 0u64;
    let mut read_error = None;
    for line in std::io::BufReader::new(stdout).lines() {
        match line {
            Ok(code) => {
                each(&code);
                lines += 1;
            }
            Err(e) => {
                read_error = Some(e);
                let _ = child.kill();
                break;
            }
        }
    }
    let _ = done.send(());
    let expired = watchdog.join().unwrap_or(true);
    let status = child.wait().context("wait for shortener preload")?;
    let errors = errors.join().unwrap_or_default();
    if expired {
        bail!("shortener preload of {n} links did not finish within {timeout:?}: killed");
    }
    if let Some(e) = read_error {
        return Err(e).context("read the codes shortener preload printed");
    }
    if !status.success() {
        bail!("shortener preload failed: {errors}");
    }
    if lines != n {
        bail!("shortener preload wrote {lines} links, not {n}");
    }
    Ok(())
}

/// An embedded store with the node's current schema, made by `shortener migrate` in
/// `data_dir`; returns the path of its SQLite file.
pub fn migrated_sqlite(data_dir: &Path, key: &CodeKey) -> anyhow::Result<std::path::PathBuf> {
    shortener(data_dir, key, &["migrate"])?;
    Ok(data_dir.join(DB_FILE))
}

/// Applies the node's PostgreSQL schema to the database at `url` with `shortener migrate`.
pub fn migrate_postgres(url: &str) -> anyhow::Result<()> {
    let output = Command::new(sibling_binary("shortener")?)
        .arg("migrate")
        .env("DATABASE_URL", url)
        // Required with DATABASE_URL, never contacted by `migrate`.
        .env("SHORTENER_ID_SERVICE", "http://127.0.0.1:9")
        .env("SHORTENER_KEY", CodeKey::generate().to_hex())
        .env("SHORTENER_API_KEYS", API_KEY)
        .env("RUST_LOG", "warn")
        .output()
        .context("run shortener migrate")?;
    if !output.status.success() {
        bail!(
            "shortener migrate failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preloaded_links_point_where_the_benchmarks_create_theirs() {
        for id in [0, 7, 12_345_678, 99_999_999] {
            assert_eq!(
                URL_PATTERN.replace("{id}", &format!("{id:08}")),
                crate::procs::target_url(id)
            );
        }
    }
}
