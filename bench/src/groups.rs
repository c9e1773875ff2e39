//! The groups that write sections of docs/benchmarks.md of their own and are not part of
//! `bench all`: link management, stats latency and table growth; and the branded-domain and
//! routing comparisons, which print only.

use crate::{
    Cli, Command, analytics, branded, budgets, growth, machine, manage, plot, report, routing,
};
use std::path::PathBuf;
use std::time::Instant;

/// A scratch directory for the group, and the machine's description (printed as read).
async fn prepare() -> anyhow::Result<(tempfile::TempDir, Vec<(String, String)>)> {
    let scratch = tempfile::Builder::new()
        .prefix("shortener-bench-")
        .tempdir()?;
    let machine = tokio::task::spawn_blocking(machine::describe).await?;
    for (k, v) in &machine {
        eprintln!("{k}: {v}");
    }
    Ok((scratch, machine))
}

/// Writes `section` between the markers `begin` and `end` of docs/benchmarks.md.
fn write_section(begin: &str, end: &str, section: &str) -> anyhow::Result<()> {
    let docs = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/benchmarks.md");
    report::write_section(&docs, begin, end, section)
}

/// `bench manage`: the link-management group, printed and (full runs on both stores) written
/// into its own section of docs/benchmarks.md.
pub(crate) async fn manage(cli: &Cli) -> anyhow::Result<()> {
    let started = Instant::now();
    let settings = manage::ManageSettings::new(cli.quick);
    let (scratch, mut machine) = prepare().await?;
    let results = manage::run(&settings, scratch.path(), cli.store).await?;
    machine.push(("load average at end".into(), machine::load_average()));
    let command = format!(
        "manage{}{}",
        if cli.quick { " --quick" } else { "" },
        cli.store.map_or(String::new(), |s| format!(
            " --store {}",
            s.label().to_lowercase()
        ))
    );
    let section = report::manage::markdown(&results, &machine, &command, started.elapsed());
    println!("{section}");
    let write = !cli.no_docs && (cli.write_docs || (!cli.quick && cli.store.is_none()));
    if write {
        write_section(report::manage::BEGIN, report::manage::END, &section)?;
        eprintln!("wrote the link-management section of docs/benchmarks.md");
    }
    Ok(())
}

/// `bench stats`: the stats-latency group, printed and (full runs) written into its own
/// section of docs/benchmarks.md.
pub(crate) async fn stats(cli: &Cli) -> anyhow::Result<()> {
    let started = Instant::now();
    let settings = analytics::StatsSettings::new(cli.quick);
    let (scratch, mut machine) = prepare().await?;
    let results = analytics::run(&settings, scratch.path()).await?;
    machine.push(("load average at end".into(), machine::load_average()));
    let command = format!("stats{}", if cli.quick { " --quick" } else { "" });
    let section = report::analytics::markdown(&results, &machine, &command, started.elapsed());
    println!("{section}");
    if !cli.no_docs && (cli.write_docs || !cli.quick) {
        write_section(report::analytics::BEGIN, report::analytics::END, &section)?;
        eprintln!("wrote the stats section of docs/benchmarks.md");
    }
    Ok(())
}

/// `bench growth`: the table-growth group, printed and (full runs) written into its own section
/// of docs/benchmarks.md with its chart.
pub(crate) async fn growth(cli: &Cli) -> anyhow::Result<()> {
    let Command::Growth {
        sizes,
        shared_buffers,
        layouts,
        load_minutes,
    } = &cli.command
    else {
        unreachable!("called for `growth` only");
    };
    let started = Instant::now();
    let settings = growth::GrowthSettings::new(
        cli.quick,
        sizes.clone(),
        shared_buffers.clone(),
        layouts.clone(),
        *load_minutes,
    )?;
    let (scratch, mut machine) = prepare().await?;
    let results = growth::run(&settings, scratch.path()).await?;
    machine.push(("load average at end".into(), machine::load_average()));
    let sizes: Vec<String> = settings
        .sizes
        .iter()
        .map(|&n| growth::count_label(n))
        .collect();
    let command = format!(
        "growth{} --sizes {} --shared-buffers {} --layouts {}",
        if cli.quick { " --quick" } else { "" },
        sizes.join(","),
        settings.shared_buffers.join(","),
        settings
            .layouts
            .iter()
            .map(|l| l.label())
            .collect::<Vec<_>>()
            .join(",")
    );
    let write = !cli.no_docs && (cli.write_docs || !cli.quick);
    let docs = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs");
    if write {
        plot::growth_throughput(&results, &docs.join(report::growth::CHART))?;
    }
    let section = report::growth::markdown(&results, &machine, &command, started.elapsed(), write);
    println!("{section}");
    if write {
        write_section(report::growth::BEGIN, report::growth::END, &section)?;
        eprintln!(
            "wrote the growth section of docs/benchmarks.md and docs/{}",
            report::growth::CHART
        );
    }
    Ok(())
}

/// `bench branded`: cache-hit redirects on a branded domain beside the default domain, printed.
pub(crate) async fn branded(cli: &Cli) -> anyhow::Result<()> {
    let started = Instant::now();
    let settings = branded::BrandedSettings::new(cli.quick, cli.reps.map(usize::from));
    let (scratch, mut machine) = prepare().await?;
    let results = branded::run(&settings, scratch.path()).await?;
    machine.push(("load average at end".into(), machine::load_average()));
    let command = format!(
        "branded{}{}",
        if cli.quick { " --quick" } else { "" },
        cli.reps.map_or(String::new(), |r| format!(" --reps {r}"))
    );
    let section = report::branded::markdown(&results, &machine, &command, started.elapsed());
    println!("{section}");
    Ok(())
}

/// `bench routing`: cache-hit redirects of links with rules and splits beside plain links,
/// printed.
pub(crate) async fn routing(cli: &Cli) -> anyhow::Result<()> {
    let started = Instant::now();
    let settings = routing::RoutingSettings::new(cli.quick, cli.reps.map(usize::from));
    let (scratch, mut machine) = prepare().await?;
    let results = routing::run(&settings, scratch.path()).await?;
    machine.push(("load average at end".into(), machine::load_average()));
    let command = format!(
        "routing{}{}",
        if cli.quick { " --quick" } else { "" },
        cli.reps.map_or(String::new(), |r| format!(" --reps {r}"))
    );
    let section = report::routing::markdown(&results, &machine, &command, started.elapsed());
    println!("{section}");
    Ok(())
}

/// `bench budgets`: node memory against its budgets and the cold working set, printed and
/// (full runs) written into its own section of docs/benchmarks.md.
pub(crate) async fn budgets(cli: &Cli) -> anyhow::Result<()> {
    let started = Instant::now();
    let settings = budgets::BudgetSettings::new(cli.quick);
    let (scratch, mut machine) = prepare().await?;
    let results = budgets::run(&settings, scratch.path()).await?;
    machine.push(("load average at end".into(), machine::load_average()));
    let command = format!("budgets{}", if cli.quick { " --quick" } else { "" });
    let section = report::budgets::markdown(&results, &machine, &command, started.elapsed());
    println!("{section}");
    if !cli.no_docs && (cli.write_docs || !cli.quick) {
        write_section(report::budgets::BEGIN, report::budgets::END, &section)?;
        eprintln!("wrote the memory-budget section of docs/benchmarks.md");
    }
    Ok(())
}
