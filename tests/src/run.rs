//! One fault-injection run from start to verdict: start the system, run the workload with the
//! nemesis, then check the history against the database and the redirect edge.

use crate::binaries::Binaries;
use crate::checker::{self, Bounds, Input, Report};
use crate::database::DatabaseKind;
use crate::ha::{self, LeaseProbe};
use crate::history::{Fault, History, Outcome, ReadOutcome};
use crate::nemesis::{self, NemesisConfig};
use crate::snapshot::Snapshot;
use crate::system::{API_KEY, CODE_KEY, NAMESPACE, System, SystemConfig};
use crate::transport::Clients;
use crate::workload::Workload;
use anyhow::Context;
use codespace::{CodeKey, CodeSpace};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

/// Log lines that are alarms by design: they must never appear.
const ALARMS: &[&str] = &[
    "generated code already taken",
    "lease starts below a block already received",
];

/// How a run is sized, from the environment.
#[derive(Debug, Clone)]
pub struct RunSettings {
    /// Seed of the nemesis and the clients (`FAULT_SEED`, random by default).
    pub seed: u64,
    /// Seconds of faults after the first round of every kind (`SOAK_SECONDS`, default 30).
    pub duration: Duration,
    /// Concurrent clients (`SOAK_CLIENTS`, default 6).
    pub clients: usize,
    /// gRPC creates: `auto` (when the nodes serve them), `on` or `off` (`FAULT_GRPC`).
    pub grpc: String,
    /// The system's shape.
    pub system: SystemConfig,
}

fn env_parse<T: std::str::FromStr>(name: &str, default: T) -> anyhow::Result<T> {
    match std::env::var(name) {
        Ok(text) => text
            .trim()
            .parse()
            .map_err(|_| anyhow::anyhow!("{name}={text:?} is not a valid value")),
        Err(_) => Ok(default),
    }
}

impl RunSettings {
    /// Reads `FAULT_SEED`, `SOAK_SECONDS`, `SOAK_CLIENTS` and `FAULT_GRPC`.
    pub fn from_env() -> anyhow::Result<Self> {
        Ok(Self {
            seed: env_parse("FAULT_SEED", rand::random::<u64>())?,
            duration: Duration::from_secs(env_parse("SOAK_SECONDS", 30)?),
            clients: env_parse("SOAK_CLIENTS", 6usize)?.max(1),
            grpc: env_parse("FAULT_GRPC", "auto".to_string())?,
            system: SystemConfig {
                nodes: 3,
                id_services: 2,
                min_block: 20,
                max_block: 200,
                database: DatabaseKind::Single,
            },
        })
    }

    /// The Patroni failover suite's settings: `FAULT_SEED`, `SOAK_CLIENTS` and `FAULT_GRPC` as
    /// above; `PATRONI_SOAK_SECONDS` (default 0: each fault kind once) extends it into a soak.
    pub fn patroni(replication: testkit::patroni::Replication) -> anyhow::Result<Self> {
        let mut settings = Self::from_env()?;
        settings.duration = Duration::from_secs(env_parse("PATRONI_SOAK_SECONDS", 0)?);
        settings.system.database = DatabaseKind::Patroni(replication);
        Ok(settings)
    }
}

/// Runs the whole test and returns the checker's verdict (the caller asserts on it).
pub async fn run(settings: &RunSettings) -> anyhow::Result<Report> {
    let wall = Instant::now();
    eprintln!(
        "fault test: seed {} (replay with FAULT_SEED={}), {} clients, {:?} of faults",
        settings.seed, settings.seed, settings.clients, settings.duration
    );
    let binaries = Binaries::locate()?;
    let mut system = System::start(&binaries, &settings.system).await?;
    eprintln!(
        "system up in {:.1}s; logs in {}",
        wall.elapsed().as_secs_f64(),
        system.log_dir().display()
    );

    let history = Arc::new(History::new());
    let probe = Clients::new(system.topology(), API_KEY);
    let grpc = match settings.grpc.as_str() {
        "on" => true,
        "off" => false,
        _ => probe.grpc_available().await,
    };
    eprintln!(
        "gRPC creates: {}",
        if grpc {
            "on"
        } else {
            "off (the nodes do not serve shortener.v1.Links)"
        }
    );
    let workload = Workload::new(Arc::clone(&history), system.topology(), grpc);
    let clients = workload.spawn(settings.clients, settings.seed);
    let (problems, lease_probe) = inject_faults(settings, &mut system, &workload, &history).await;
    let problems = wind_down(&mut system, &workload, clients, problems).await;

    let (mut report, (leases, links)) =
        check(settings, &system, &history, &probe, &problems).await?;
    if let Some(probe) = &lease_probe {
        check_failovers(&mut report, &system, &history, probe).await?;
    }
    report.notes.push(format!(
        "{leases} leases, {links} links in the database, {} faults, wall time {:.1}s",
        history.faults().len(),
        wall.elapsed().as_secs_f64()
    ));
    tell(settings, &mut system, &report);
    Ok(report)
}

/// Runs the nemesis over `system` while the workload runs (the Patroni one, with a lease probe,
/// when the database is a Patroni cluster); the problems it saw, and the probe.
async fn inject_faults(
    settings: &RunSettings,
    system: &mut System,
    workload: &Workload,
    history: &Arc<History>,
) -> (Vec<String>, Option<LeaseProbe>) {
    let nemesis = NemesisConfig {
        seed: settings.seed,
        duration: settings.duration,
        outage_limit: Duration::from_secs(45),
    };
    if matches!(settings.system.database, DatabaseKind::Patroni(_)) {
        let (probe, task) = LeaseProbe::start(system.id_service_grpc(0), Arc::clone(history));
        let problems = ha::run(system, history, &nemesis).await;
        task.abort();
        (problems, Some(probe))
    } else {
        (
            nemesis::run(system, workload, history, &nemesis).await,
            None,
        )
    }
}

/// Stops the workload and waits for its clients, then for every process to be ready again;
/// `problems` with what went wrong in the end added (clients that hung, processes not ready or
/// gone, alarms in the logs).
async fn wind_down(
    system: &mut System,
    workload: &Workload,
    mut clients: JoinSet<()>,
    mut problems: Vec<String>,
) -> Vec<String> {
    workload.stop();
    let drained = tokio::time::timeout(Duration::from_secs(60), async {
        while clients.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        problems.push("the clients did not finish within 60 s of the stop".into());
        clients.abort_all();
    }
    if let Err(e) = system.wait_all_ready(Duration::from_secs(30)).await {
        problems.push(format!("not ready at the end of the run: {e:#}"));
    }
    problems.extend(system.unexpected_exits());
    for line in system.log_lines_containing(ALARMS) {
        problems.push(format!("alarm logged: {line}"));
    }
    problems
}

/// The checker's verdict on the history (and on the `problems` the run saw), against the
/// database's final state and a last read of every created code at every node; and how many
/// leases and links the database holds.
async fn check(
    settings: &RunSettings,
    system: &System,
    history: &History,
    probe: &Clients,
    problems: &[String],
) -> anyhow::Result<(Report, (usize, usize))> {
    let db = system.db().await?;
    let snapshot = Snapshot::load(&db).await?;
    let creates = history.creates();
    let final_reads = sweep(probe, &creates, system.node_count()).await;
    let key = CodeKey::parse(CODE_KEY).context("parse the code key")?;
    let space = CodeSpace::new(&key, codespace::DEFAULT_LENGTH).context("build the code space")?;
    let reads = history.reads();
    let faults = history.faults();
    let report = checker::check(&Input {
        creates: &creates,
        reads: &reads,
        faults: &faults,
        snapshot: &snapshot,
        final_reads: &final_reads,
        space: &space,
        namespace: NAMESPACE,
        nodes: system.node_count(),
        bounds: Bounds {
            lossy: settings.system.database
                == DatabaseKind::Patroni(testkit::patroni::Replication::Async),
            ..Bounds::default()
        },
        problems,
    });
    Ok((report, (snapshot.leases.len(), snapshot.links.len())))
}

/// The Patroni suite's checks beyond the history's: each fault's pause and recovery (notes),
/// and a jump of the ledger's timeline fence for every promotion (a violation if one is
/// missing).
async fn check_failovers(
    report: &mut Report,
    system: &System,
    history: &History,
    probe: &LeaseProbe,
) -> anyhow::Result<()> {
    let (faults, creates) = (history.faults(), history.creates());
    report.notes.extend(recovery_notes(
        &faults,
        &creates,
        probe,
        system.node_count(),
        history.now(),
    ));
    let (jumps, timeline) = ha::fence_jumps(system).await?;
    // Each promotion starts a timeline, and the probe leases within 100 ms of the new
    // leader's first write: every promotion must show as a jump of the fence.
    let promotions = faults
        .iter()
        .filter(|f| {
            matches!(
                f.fault,
                Fault::Switchover | Fault::KillLeader | Fault::PartitionLeader
            )
        })
        .count() as i64;
    if jumps < promotions {
        report.violations.push(format!(
            "the timeline fence recorded {jumps} jumps after {promotions} promotions"
        ));
    }
    report.notes.push(format!(
        "timeline fence: {jumps} jumps recorded in the ledger after {promotions} promotions \
         (last grant on timeline {timeline}); {} IDs skipped by grants whose answer reached \
         an id-service; acknowledged creates lost in failovers: {}; IDs in use outside \
         every surviving lease: {}",
        ha::ids_skipped_by_fence(system).await,
        report.lost_in_failover,
        report.ids_outside_surviving_leases
    ));
    Ok(())
}

/// Prints the verdict: the notes, the violations (keeping the logs, with the seed to replay),
/// and the summary line.
fn tell(settings: &RunSettings, system: &mut System, report: &Report) {
    for note in &report.notes {
        eprintln!("  {note}");
    }
    if std::env::var_os("FAULT_KEEP_LOGS").is_some() && report.passed() {
        eprintln!("process logs kept in {}", system.keep_logs().display());
    }
    if !report.passed() {
        let kept = system.keep_logs();
        for violation in report.violations.iter().take(40) {
            eprintln!("VIOLATION: {violation}");
        }
        eprintln!(
            "{} violations; process logs kept in {}; replay with FAULT_SEED={}",
            report.violations.len(),
            kept.display(),
            settings.seed
        );
    }
    println!("{} seed={}", report.summary(), settings.seed);
}

/// One line per fault: how long creates (the worst node) and leases paused, and the time from
/// the fault to the first success after the pause (the recovery time).
fn recovery_notes(
    faults: &[crate::history::FaultRecord],
    creates: &[crate::history::CreateOp],
    probe: &LeaseProbe,
    nodes: usize,
    run_end: Duration,
) -> Vec<String> {
    let show = |p: &ha::Pause| {
        if p.resumed && p.longest < Duration::from_millis(500) {
            format!(
                "no pause over 0.5s (longest {:.2}s)",
                p.longest.as_secs_f64()
            )
        } else if p.resumed {
            format!(
                "paused {:.2}s, first after the fault at {:.2}s",
                p.longest.as_secs_f64(),
                p.until_first.as_secs_f64()
            )
        } else {
            "never resumed".to_string()
        }
    };
    ha::recoveries(faults, creates, probe, nodes, run_end)
        .iter()
        .map(|r| {
            format!(
                "recovery after {:?}: creates (worst node) {}; leases {}",
                r.fault,
                show(&r.creates),
                show(&r.leases)
            )
        })
        .collect()
}

/// Reads every acknowledged code once through the redirect edge of a node other than the one
/// that created it (so the creator's cache cannot hide a lost row).
async fn sweep(
    clients: &Clients,
    creates: &[crate::history::CreateOp],
    nodes: usize,
) -> Vec<(String, ReadOutcome)> {
    let mut targets: BTreeMap<String, (String, usize)> = BTreeMap::new();
    for op in creates {
        if let Outcome::Acked { code, url } = &op.outcome {
            targets.insert(code.clone(), (url.clone(), (op.node + 1) % nodes));
        }
    }
    let clients = Arc::new(clients.clone());
    let limit = Arc::new(Semaphore::new(16));
    let mut tasks = JoinSet::new();
    for (code, (url, node)) in targets {
        let (clients, limit) = (Arc::clone(&clients), Arc::clone(&limit));
        tasks.spawn(async move {
            let _permit = limit.acquire_owned().await.expect("semaphore open");
            let mut outcome = clients.redirect(node, &code, &url).await;
            // A transient failure (not a wrong answer) is retried once on another node.
            if matches!(outcome, ReadOutcome::Failed(_)) {
                outcome = clients.redirect((node + 1) % nodes, &code, &url).await;
            }
            (code, outcome)
        });
    }
    let mut results = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        if let Ok(result) = joined {
            results.push(result);
        }
    }
    results
}
