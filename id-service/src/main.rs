//! The id-service binary: see the library documentation.

use clap::Parser;
use id_service::{App, Cli, Command, TokensCommand};
use std::process::ExitCode;
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> ExitCode {
    let Cli { command, config } = Cli::parse();
    if let Some(Command::Tokens(TokensCommand::Add(add))) = &command {
        // No logging here: stdout carries the token and nothing else.
        return match id_service::tokens_cli::add(add) {
            Ok(token) => {
                println!("{token}");
                eprintln!(
                    "added caller {} to {}; the token above is shown only now",
                    add.name,
                    add.file.display()
                );
                ExitCode::SUCCESS
            }
            Err(error) => {
                eprintln!("id-service tokens add: {error:#}");
                ExitCode::FAILURE
            }
        };
    }
    id_service::init_tracing(config.log_format);
    let outcome = match command.unwrap_or(Command::Serve) {
        Command::Migrate => id_service::migrate(&config)
            .await
            .map(|applied| tracing::info!(?applied, "migrations up to date")),
        Command::Serve | Command::Tokens(_) => serve(config).await,
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // The whole context chain on one line: "validate configuration: block bounds: ...".
            tracing::error!(error = format!("{error:#}"), "id-service failed");
            ExitCode::FAILURE
        }
    }
}

async fn serve(config: id_service::Config) -> anyhow::Result<()> {
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
