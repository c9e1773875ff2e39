//! `shortener layout`: where the PostgreSQL store finds a link's row, and moving it online
//! (docs/operations.md, "Moving to the slot layout").

use crate::app;
use crate::config::{IdsConfig, LogFormat, StoreConfig};
use crate::store::LayoutOptions;
use anyhow::{Context, bail};
use std::io::Write;
use std::time::Duration;

/// Arguments of `shortener layout`.
#[derive(Debug, clap::Args)]
pub struct LayoutArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: LayoutAction,
    /// The store to work on, as for `serve`.
    #[command(flatten)]
    pub store: StoreConfig,
    /// The code key and length its links were made with, as for `serve` (the id-service
    /// settings among them are not used).
    #[command(flatten)]
    pub ids: IdsConfig,
    /// Log output format.
    #[arg(long, env = "SHORTENER_LOG_FORMAT", value_enum, ignore_case = true, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// `shortener layout ...`.
#[derive(Debug, clap::Subcommand)]
pub enum LayoutAction {
    /// Print the layout, and a migration's progress if one is under way.
    Status,
    /// Move the links table to the slot layout while nodes serve; run it again after an
    /// interruption and it carries on where it stopped.
    Migrate(RunArgs),
    /// Move the links table back to the code layout (the primary key on `code`), online.
    Revert(RunArgs),
    /// Check that every row is where its code puts it; print the row count and checksum.
    Verify,
}

/// How a migration or revert runs.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Rows given a slot per transaction.
    #[arg(long, default_value_t = 5_000, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub batch: u64,
    /// Milliseconds to wait after switching the layout before dropping the index nodes used;
    /// nodes read the layout every second.
    #[arg(long, default_value_t = 5_000, value_parser = clap::value_parser!(u64).range(1_000..=600_000))]
    pub grace_ms: u64,
    /// Milliseconds to pause after each batch, to leave the database room for its traffic.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=60_000))]
    pub pause_ms: u64,
}

impl RunArgs {
    fn options(&self) -> LayoutOptions {
        LayoutOptions {
            batch: self.batch as usize,
            grace: Duration::from_millis(self.grace_ms),
            pause: Duration::from_millis(self.pause_ms),
        }
    }
}

/// Runs `args`, writing progress and results to `out`.
pub async fn run(args: &LayoutArgs, mut out: impl Write) -> anyhow::Result<()> {
    if args.store.database_url.is_none() {
        bail!(
            "`shortener layout` is for the PostgreSQL store (set DATABASE_URL); the embedded \
             store files generated links under their ID already"
        );
    }
    if args.ids.key_file.is_none() && args.ids.key.is_none() {
        bail!(
            "`shortener layout` needs the nodes' code key (SHORTENER_KEY_FILE or SHORTENER_KEY) \
             to find where each link's row belongs"
        );
    }
    args.store
        .validate()
        .and_then(|()| args.ids.validate())
        .context("validate configuration")?;
    let store = &app::postgres_store(&args.store, &args.ids).await?;
    let mut say = |line: &str| {
        let _ = writeln!(out, "{line}");
    };
    match &args.action {
        LayoutAction::Status => say(&store.layout_status().await?.to_string()),
        LayoutAction::Migrate(run) => {
            let status = store.layout_migrate(&run.options(), &mut say).await?;
            say(&status.to_string());
        }
        LayoutAction::Revert(run) => {
            let status = store.layout_revert(&run.options(), &mut say).await?;
            say(&status.to_string());
        }
        LayoutAction::Verify => {
            let (rows, sum) = store.layout_verify().await?;
            say(&format!(
                "every row is where its code puts it: {rows} rows, checksum {sum}"
            ));
        }
    }
    Ok(())
}
