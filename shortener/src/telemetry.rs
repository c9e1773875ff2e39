//! Logging set-up and the shutdown signal.

use crate::config::LogFormat;
use tokio_util::sync::CancellationToken;
use tracing_subscriber::EnvFilter;

/// Installs the global tracing subscriber (`RUST_LOG` filters; default `info`).
pub fn init_tracing(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// A token cancelled on the first SIGTERM or SIGINT.
pub fn shutdown_signal() -> CancellationToken {
    let token = CancellationToken::new();
    let trigger = token.clone();
    tokio::spawn(async move {
        let ctrl_c = tokio::signal::ctrl_c();
        #[cfg(unix)]
        {
            let mut term =
                match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                    Ok(term) => term,
                    Err(error) => {
                        tracing::error!(%error, "install SIGTERM handler");
                        let _ = ctrl_c.await;
                        trigger.cancel();
                        return;
                    }
                };
            tokio::select! {
                _ = ctrl_c => {}
                _ = term.recv() => {}
            }
        }
        #[cfg(not(unix))]
        let _ = ctrl_c.await;
        trigger.cancel();
    });
    token
}
