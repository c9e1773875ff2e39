//! `shortener preload`: many generated links written the way creates write them, so a
//! benchmark's store holds exactly what a node would have made.
//!
//! IDs are leased from the configured lease source (the embedded ledger or the id-service), so
//! a node started on the same store never hands them out again; each row is the code the
//! configured key gives its ID, inserted through [`LinkStore::insert_many`] in batches.

use crate::app;
use crate::config::Config;
use crate::store::{InsertOutcome, LinkStore, NewLink};
use anyhow::{Context, bail};
use codespace::shape::CodeKind;
use futures::StreamExt;
use std::io::Write;

/// Arguments of `shortener preload`.
#[derive(Debug, clap::Args)]
pub struct PreloadArgs {
    /// How many links to write.
    #[arg(long)]
    pub count: u64,
    /// Target URL of each link; `{id}` becomes its ID, zero-padded to 8 digits.
    #[arg(long, default_value = "https://example.com/{id}")]
    pub url_pattern: String,
    /// The store, key and lease source to use, as for `serve`.
    #[command(flatten)]
    pub config: Config,
}

/// IDs leased at a time.
const LEASE: u64 = 100_000;
/// Rows per insert.
const BATCH: usize = 2_000;

/// Batches written at once.
const IN_FLIGHT: usize = 4;

/// The generated link of `id` with its `code`, as a create would make it.
fn link(args: &PreloadArgs, (id, code): (u64, String)) -> NewLink {
    NewLink::plain(
        code,
        args.url_pattern.replace("{id}", &format!("{id:08}")),
        CodeKind::Generated,
        Some(id),
        crate::access::DEFAULT_TENANT,
        "preload",
    )
}

/// Writes `args.count` links and prints one code per line to `out`, in ID order.
pub async fn run(args: &PreloadArgs, out: impl Write) -> anyhow::Result<()> {
    args.config.validate().context("validate configuration")?;
    let resources = app::prepare(&args.config).await?;
    let mut out = std::io::BufWriter::new(out);
    let mut written = 0;
    while written < args.count {
        let lease = resources
            .lease_source
            .lease((args.count - written).min(LEASE))
            .await
            .context("lease IDs")?;
        // A block larger than asked for leaves a gap, as any node's unused IDs do; so does an
        // ID whose code spells a reserved word, passed over as a create passes it over.
        let ids: Vec<(u64, String)> = (lease.block.start..lease.block.end)
            .map(|id| (id, resources.space.encode(id)))
            .filter(|(_, code)| !codespace::shape::is_reserved(code))
            .take((args.count - written) as usize)
            .collect();
        // A few batches at once: one insert at a time leaves the database waiting on the
        // round trip and this process's encoding. `buffered` keeps the output in ID order.
        let batches = ids.chunks(BATCH).map(|chunk| {
            let links: Vec<NewLink> = chunk.iter().cloned().map(|id| link(args, id)).collect();
            resources.store.insert_many(links)
        });
        let mut results = futures::stream::iter(batches).buffered(IN_FLIGHT);
        while let Some(outcomes) = results.next().await {
            for outcome in outcomes.context("insert links")? {
                match outcome {
                    InsertOutcome::Created(link) => writeln!(out, "{}", link.code)?,
                    other => bail!("a preloaded link was not created: {other:?}"),
                }
                written += 1;
            }
        }
    }
    out.flush().context("write the codes")?;
    Ok(())
}
