//! The `shortener` binary: parses the command line and runs the chosen command.

use anyhow::Context;
use clap::Parser;
use shortener::cli::{Cli, Command};
use shortener::{codes_cli, keys};

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Codes { action }) => {
            let (direction, args) = action.split();
            let key = keys::read_code_key(&args.key_file)?;
            let space =
                codespace::CodeSpace::new(&key, args.length).context("configure the code space")?;
            codes_cli::run(
                &space,
                direction,
                &args.items,
                std::io::stdin().lock(),
                std::io::stdout().lock(),
            )
        }
        Some(Command::Keygen { out, force }) => {
            let key = keys::generate_code_key_file(&out, force)?;
            eprintln!(
                "wrote a new code-space key to {} (fingerprint {})",
                out.display(),
                key.fingerprint()
            );
            Ok(())
        }
        None => anyhow::bail!("serving is not available yet"),
    }
}
