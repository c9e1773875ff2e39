//! The id-service binary: see the library documentation.

use clap::Parser;
use id_service::{App, Cli, Command, TokensCommand};
use std::process::ExitCode;
use std::time::Duration;
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
    let outcome = match command.unwrap_or(Command::Serve) {
        Command::Migrate => {
            id_service::init_tracing(config.log_format);
            id_service::migrate(&config)
                .await
                .map(|applied| tracing::info!(?applied, "migrations up to date"))
        }
        Command::Serve | Command::Tokens(_) => match id_service::init_serving(config.log_format) {
            Ok(tracing) => {
                let served = serve(config).await;
                if let Some(tracing) = tracing {
                    // Spans still queued go out now, within a bound.
                    tracing.shutdown(Duration::from_secs(5)).await;
                }
                served
            }
            Err(error) => {
                eprintln!("id-service: {error:#}");
                return ExitCode::FAILURE;
            }
        },
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
