//! The `shortener` binary: parses the command line and runs the chosen command.

use anyhow::Context;
use clap::Parser;
use shortener::cli::{Cli, Command};
use shortener::{App, Config, codes_cli, keys, setup, telemetry};

/// mimalloc rather than the system allocator: requests allocate many small short-lived
/// objects on one thread and free them on another (the SQLite blocking pool), where glibc's
/// malloc spends measurable time consolidating; see docs/benchmarks.md.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        None => serve(Config::from_env_and_defaults()?).await,
        Some(Command::Serve(config)) => serve(*config).await,
        Some(Command::Migrate(config)) => {
            telemetry::init_tracing(config.log_format);
            setup::prepare(&config).await?;
            tracing::info!("migrations applied");
            Ok(())
        }
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
    }
}

async fn serve(config: Config) -> anyhow::Result<()> {
    telemetry::init_tracing(config.log_format);
    let app = App::build(config).await?;
    app.run(telemetry::shutdown_signal()).await
}
