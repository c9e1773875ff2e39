//! The `shortener` binary: parses the command line and runs the chosen command.

use anyhow::Context;
use clap::Parser;
use shortener::cli::{Cli, Command, codes, keys, layout, migrate, preload};
use shortener::{App, Config, secrets, shutdown, telemetry};

/// mimalloc rather than the system allocator: requests allocate many small short-lived
/// objects on one thread and free them on another (the SQLite blocking pool), where glibc's
/// malloc spends measurable time consolidating (docs/decisions.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => return failed(&error.into()),
    };
    match runtime.block_on(run()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => failed(&error),
    }
}

/// Says why the program stopped, the error and its causes, and fails. A backtrace is no part
/// of it, whatever `RUST_BACKTRACE` says: these are the operator's errors (a port taken, a
/// setting refused), each a sentence, and the panic hook still prints one for a bug.
fn failed(error: &anyhow::Error) -> std::process::ExitCode {
    if let Some(usage) = error.downcast_ref::<shortener::config::UsageError>() {
        // Said as clap says a refused command line, with its exit status.
        eprintln!("{usage}");
        return std::process::ExitCode::from(2);
    }
    // A setting refused by the checks that read settings together: said as one refused by its
    // type is (`error: SHORTENER_...`), with the same exit status.
    if let Some(refused) = error
        .chain()
        .find_map(|e| e.downcast_ref::<shortener::config::ConfigError>())
    {
        eprintln!("error: {refused}");
        return std::process::ExitCode::from(2);
    }
    eprintln!("Error: {error}");
    let causes: Vec<String> = error.chain().skip(1).map(ToString::to_string).collect();
    if !causes.is_empty() {
        eprintln!("\nCaused by:");
        for (i, cause) in causes.iter().enumerate() {
            if causes.len() == 1 {
                eprintln!("    {cause}");
            } else {
                eprintln!("    {i}: {cause}");
            }
        }
    }
    std::process::ExitCode::FAILURE
}

/// The command line; a setting refused from its environment variable is said naming the
/// variable, anything else as clap says it.
fn parse() -> Cli {
    use clap::CommandFactory;
    Cli::try_parse().unwrap_or_else(|error| match otel::env_refusal(&error, &Cli::command()) {
        Some(refusal) => {
            eprintln!("error: {refusal}");
            std::process::exit(2)
        }
        None => error.exit(),
    })
}

async fn run() -> anyhow::Result<()> {
    match parse().command {
        None => serve(Config::from_env_and_defaults()?).await,
        Some(Command::Serve(config)) => serve(*config).await,
        Some(Command::Migrate(args)) => {
            telemetry::init_tracing(args.log_format);
            migrate::run(args).await
        }
        Some(Command::Codes { action }) => {
            let (direction, args) = action.split();
            let key = secrets::read_code_key(&args.key_file)?;
            let space =
                codespace::CodeSpace::new(&key, args.length).context("configure the code space")?;
            let (input, output) = (std::io::stdin().lock(), std::io::stdout().lock());
            codes::run(&space, direction, &args.items, input, output)
        }
        Some(Command::Keygen { out, force }) => {
            let key = secrets::generate_code_key_file(&out, force)?;
            eprintln!(
                "wrote a new code-space key to {} (fingerprint {})",
                out.display(),
                key.fingerprint()
            );
            Ok(())
        }
        Some(Command::Keys { action }) => keys::run(&action, std::io::stdout().lock()),
        Some(Command::Layout(args)) => {
            telemetry::init_tracing(args.log_format);
            layout::run(&args, std::io::stdout().lock()).await
        }
        Some(Command::Preload(args)) => preload::run(&args, std::io::stdout().lock()).await,
    }
}

async fn serve(config: Config) -> anyhow::Result<()> {
    let tracing = telemetry::init_serving(config.log_format)?;
    shortener::cli::check_environment(config.store.database_url.as_deref())?;
    let app = App::build(config).await?;
    let served = app.run(shutdown::shutdown_signal()).await;
    if let Some(tracing) = tracing {
        // Spans still queued go out now, within a bound: a collector that is down does not
        // hold the process.
        tracing.shutdown(TRACE_FLUSH).await;
    }
    served
}

/// How long the spans queued at shutdown may take to reach the collector.
const TRACE_FLUSH: std::time::Duration = std::time::Duration::from_secs(5);
