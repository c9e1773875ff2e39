//! The id-service binary: see the library documentation.

use id_service::{Action, App, Cli};
use std::process::ExitCode;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> ExitCode {
    let (config, migrate) = match Cli::action_from(std::env::args_os()) {
        Ok(Action::AddToken(add)) => return add_token(&add),
        Ok(Action::Serve(config)) => (config, false),
        Ok(Action::Migrate(config)) => (config, true),
        Err(error) => {
            let command = <Cli as clap::CommandFactory>::command();
            match otel::env_refusal(&error, &command) {
                Some(refusal) => {
                    eprintln!("error: {refusal}");
                    return ExitCode::from(2);
                }
                None => error.exit(),
            }
        }
    };
    let outcome = if migrate {
        id_service::init_tracing(config.log_format);
        warn_of_unread();
        id_service::migrate(&config)
            .await
            .map(|applied| tracing::info!(?applied, "migrations up to date"))
    } else {
        match id_service::init_serving(config.log_format) {
            Ok(tracing) => {
                warn_of_unread();
                let served = serve(*config).await;
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
        }
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

/// Warns of each `ID_SERVICE_*` variable no setting reads: a misspelled one would otherwise
/// leave its default in force without a word.
fn warn_of_unread() {
    otel::warn_of_unread(
        "ID_SERVICE_",
        &<Cli as clap::CommandFactory>::command(),
        "id-service --help",
    );
}

/// `id-service tokens add`: prints the new token on stdout, and nothing else (no logging).
fn add_token(add: &id_service::AddToken) -> ExitCode {
    match id_service::tokens_cli::add(add) {
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
