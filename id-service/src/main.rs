//! The id-service binary: see the library documentation.

use clap::Parser;
use id_service::{App, Cli, Command};
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let Cli { command, config } = Cli::parse();
    id_service::init_tracing(config.log_format);
    match command.unwrap_or(Command::Serve) {
        Command::Migrate => {
            let applied = id_service::migrate(&config).await?;
            tracing::info!(?applied, "migrations up to date");
            Ok(())
        }
        Command::Serve => {
            let app = App::build(config).await?;
            let shutdown = CancellationToken::new();
            tokio::spawn({
                let shutdown = shutdown.clone();
                async move {
                    id_service::shutdown_signal().await;
                    shutdown.cancel();
                }
            });
            app.run(shutdown).await
        }
    }
}
