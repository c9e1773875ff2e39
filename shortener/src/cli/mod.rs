//! The command line of the `shortener` binary: serving is the default; `migrate`, `codes`,
//! `keygen`, `keys`, `layout` and the benchmark's `preload` are the operator's tools.

pub mod codes;
pub mod keys;
pub mod layout;
pub mod migrate;
pub mod preload;

use clap::{Args, Parser, Subcommand};
use codes::Direction;
use std::path::PathBuf;

/// URL shortener node. With no subcommand it serves (see `shortener serve --help`).
#[derive(Debug, Parser)]
#[command(
    name = "shortener",
    version,
    about,
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    /// What to do; serving is the default.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve redirects, the JSON API and the admin endpoints (the default).
    Serve(Box<crate::config::Config>),
    /// Apply the schema migrations to the configured store and exit.
    Migrate(migrate::MigrateArgs),
    /// Map IDs to codes and back with a code-space key.
    Codes {
        /// Encode or decode.
        #[command(subcommand)]
        action: CodesAction,
    },
    /// Write a fresh random code-space key (32 bytes, hex) to a new file with mode 0600.
    Keygen {
        /// Where to write the key.
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
        /// Replace the file if it exists (codes made under the old key stop decoding).
        #[arg(long)]
        force: bool,
    },
    /// Manage API keys.
    Keys {
        /// What to do.
        #[command(subcommand)]
        action: keys::KeysCommand,
    },
    /// Where the PostgreSQL store finds a link's row, and moving it online.
    Layout(Box<layout::LayoutArgs>),
    /// Write synthetic generated links through the store, as creates would (for benchmarks);
    /// prints their codes in ID order.
    #[command(hide = true)]
    Preload(Box<preload::PreloadArgs>),
}

/// `shortener codes ...`.
#[derive(Debug, Subcommand)]
pub enum CodesAction {
    /// Print the code of each ID, one per line.
    Encode(CodesArgs),
    /// Print the ID of each generated code, one per line.
    Decode(CodesArgs),
}

impl CodesAction {
    /// The direction and its arguments.
    pub fn split(&self) -> (Direction, &CodesArgs) {
        match self {
            CodesAction::Encode(args) => (Direction::Encode, args),
            CodesAction::Decode(args) => (Direction::Decode, args),
        }
    }
}

/// Arguments of `codes encode|decode`.
#[derive(Debug, Args)]
pub struct CodesArgs {
    /// The code-space key file (64 hex digits or base64).
    #[arg(long, env = "SHORTENER_KEY_FILE", value_name = "FILE")]
    pub key_file: PathBuf,
    /// The base code length L (4 to 11).
    #[arg(long, env = "SHORTENER_CODE_LENGTH", default_value_t = codespace::DEFAULT_LENGTH)]
    pub length: usize,
    /// IDs (encode) or codes (decode); with none, one item per line is read from standard input.
    pub items: Vec<String>,
}
