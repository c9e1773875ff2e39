//! The links table's layout, a loop dimension of the growth group: `code` (the table keyed by
//! `code text PRIMARY KEY`) and `slot` (keyed by a bigint derived from the code). A fresh
//! database gets whatever the node's migrations make; `shortener layout revert` turns the slot
//! layout into the code layout and `shortener layout status` prints the current one. A binary
//! without the `layout` subcommand predates the slot layout: its databases are the code layout.

use crate::procs::sibling_binary;
use anyhow::{Context, bail};
use codespace::CodeKey;
use std::process::{Command, Output};

/// A layout of the links table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Layout {
    /// `code text PRIMARY KEY` (the layout before the slot change).
    Code,
    /// Keyed by a bigint derived from the code.
    Slot,
}

impl Layout {
    /// Its name, as `shortener layout status` prints it.
    pub fn label(self) -> &'static str {
        match self {
            Layout::Code => "code",
            Layout::Slot => "slot",
        }
    }
}

/// What [`set_layout`] could do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LayoutReady {
    /// The database has the layout.
    Ready,
    /// It cannot have it with this binary; the reason.
    Skip(String),
}

/// `shortener layout <args>` on `database_url`: the store and a code key are all it needs.
fn layout_command(database_url: &str, args: &[&str]) -> anyhow::Result<Output> {
    Command::new(sibling_binary("shortener")?)
        .arg("layout")
        .args(args)
        .env("DATABASE_URL", database_url)
        .env("SHORTENER_KEY", CodeKey::generate().to_hex())
        .env("RUST_LOG", "warn")
        .output()
        .context("run shortener layout")
}

/// Whether this `shortener` has the `layout` subcommand (its help is side-effect free).
fn has_layout_command() -> anyhow::Result<bool> {
    let out = Command::new(sibling_binary("shortener")?)
        .args(["layout", "--help"])
        .output()
        .context("run shortener layout --help")?;
    if out.status.success() {
        return Ok(true);
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.contains("unrecognized subcommand") {
        return Ok(false);
    }
    bail!("shortener layout --help failed: {stderr}");
}

/// The layout `shortener layout status` reports for the database.
fn status(database_url: &str) -> anyhow::Result<Layout> {
    let out = layout_command(database_url, &["status"])?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!(
            "shortener layout status failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let words: Vec<&str> = stdout.split(|c: char| !c.is_ascii_alphanumeric()).collect();
    match (words.contains(&"slot"), words.contains(&"code")) {
        (true, false) => Ok(Layout::Slot),
        (false, true) => Ok(Layout::Code),
        _ => bail!("cannot tell the layout from `shortener layout status`: {stdout:?}"),
    }
}

/// Gives the (migrated, still empty) database at `database_url` the layout `layout`, with the
/// node's own `shortener layout` commands; says so when this binary cannot.
pub fn set_layout(database_url: &str, layout: Layout) -> anyhow::Result<LayoutReady> {
    if !has_layout_command()? {
        return Ok(match layout {
            Layout::Code => {
                eprintln!(
                    "growth: this shortener has no `layout` subcommand (it predates the slot layout): \
                     its schema is the code layout, nothing to revert"
                );
                LayoutReady::Ready
            }
            Layout::Slot => LayoutReady::Skip(
                "this shortener has no `layout` subcommand, so it has no slot layout".into(),
            ),
        });
    }
    let now = status(database_url)?;
    if now == layout {
        return Ok(LayoutReady::Ready);
    }
    match (now, layout) {
        (Layout::Slot, Layout::Code) => {
            let out = layout_command(database_url, &["revert"])?;
            if !out.status.success() {
                bail!(
                    "shortener layout revert failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            let after = status(database_url)?;
            if after != Layout::Code {
                bail!("after `shortener layout revert` the layout is {after:?}, not code");
            }
            Ok(LayoutReady::Ready)
        }
        _ => Ok(LayoutReady::Skip(format!(
            "a fresh database has the {} layout and there is no command to make it {}",
            now.label(),
            layout.label()
        ))),
    }
}
