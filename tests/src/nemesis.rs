//! The nemesis: injects faults one at a time while the workload runs, from a seeded RNG so a
//! failing schedule can be replayed (`FAULT_SEED`), and records when each was in force.
//!
//! Every fault kind runs at least once per run, in a seeded order; a longer run (a soak) then
//! keeps drawing random faults until its time is up. After each fault the nemesis waits until
//! every node is ready again before the next one.

use crate::history::{Fault, FaultRecord, History};
use crate::proxy::Mode;
use crate::system::System;
use crate::workload::Workload;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use std::time::{Duration, SystemTime};

/// How long the system may take to be ready again after a fault.
pub(crate) const RECOVERY_TIMEOUT: Duration = Duration::from_secs(45);

/// Timing of the nemesis.
#[derive(Debug, Clone)]
pub struct NemesisConfig {
    /// The RNG seed.
    pub seed: u64,
    /// Keep injecting faults until this much time has passed (at least one of each kind).
    pub duration: Duration,
    /// The longest id-service outage: by then every node must have run out of IDs.
    pub outage_limit: Duration,
}

/// Runs the fault schedule; returns problems that are violations by themselves (a process
/// that would not come back, a system that did not recover).
pub async fn run(
    system: &mut System,
    workload: &Workload,
    history: &History,
    config: &NemesisConfig,
) -> Vec<String> {
    let mut rng = StdRng::seed_from_u64(config.seed);
    let nodes = system.node_count();
    let id_services = system.id_service_count();
    let mut schedule = [
        Fault::KillNode(rng.random_range(0..nodes)),
        Fault::KillIdService(rng.random_range(0..id_services)),
        Fault::IdServiceOutage,
        Fault::PostgresCrash {
            kill: rng.random_bool(0.5),
        },
        Fault::CutNodeFromIdService {
            node: rng.random_range(0..nodes),
            blackhole: rng.random_bool(0.5),
        },
        Fault::CutNodeFromPostgres {
            node: rng.random_range(0..nodes),
            blackhole: rng.random_bool(0.5),
        },
    ];
    schedule.shuffle(&mut rng);
    let started = history.now();
    let mut problems = Vec::new();
    let mut next = 0;
    loop {
        let fault = if next < schedule.len() {
            schedule[next].clone()
        } else if history.now() - started < config.duration {
            random_fault(&mut rng, nodes, id_services)
        } else {
            break;
        };
        next += 1;
        // A quiet gap lets the workload build up state (and runway) between faults.
        tokio::time::sleep(Duration::from_millis(rng.random_range(1000..3000))).await;
        eprintln!("[{:>6.1}s] nemesis: {fault:?}", history.now().as_secs_f64());
        let record = inject(
            system,
            workload,
            history,
            &fault,
            &mut rng,
            config,
            &mut problems,
        )
        .await;
        history.push_fault(record);
        for exit in system.unexpected_exits() {
            problems.push(format!("after {fault:?}: {exit}"));
        }
    }
    // Let the last creates (and idempotent retries) land on a healthy system.
    tokio::time::sleep(Duration::from_secs(2)).await;
    problems
}

fn random_fault(rng: &mut StdRng, nodes: usize, id_services: usize) -> Fault {
    match rng.random_range(0..6) {
        0 => Fault::KillNode(rng.random_range(0..nodes)),
        1 => Fault::KillIdService(rng.random_range(0..id_services)),
        2 => Fault::IdServiceOutage,
        3 => Fault::PostgresCrash {
            kill: rng.random_bool(0.5),
        },
        4 => Fault::CutNodeFromIdService {
            node: rng.random_range(0..nodes),
            blackhole: rng.random_bool(0.5),
        },
        _ => Fault::CutNodeFromPostgres {
            node: rng.random_range(0..nodes),
            blackhole: rng.random_bool(0.5),
        },
    }
}

fn link_mode(blackhole: bool) -> Mode {
    if blackhole {
        Mode::Blackhole
    } else {
        Mode::Reset
    }
}

async fn inject(
    system: &mut System,
    workload: &Workload,
    history: &History,
    fault: &Fault,
    rng: &mut StdRng,
    config: &NemesisConfig,
    problems: &mut Vec<String>,
) -> FaultRecord {
    let start = history.now();
    let wall_start = SystemTime::now();
    let mut ran_dry = Vec::new();
    let pause =
        |rng: &mut StdRng, lo: u64, hi: u64| Duration::from_millis(rng.random_range(lo..hi));
    match fault {
        Fault::KillNode(i) => {
            system.kill_node(*i).await;
            tokio::time::sleep(pause(rng, 200, 1500)).await;
            if let Err(e) = system.restart_node(*i).await {
                problems.push(format!("restart node{i} after kill -9: {e:#}"));
            }
        }
        Fault::KillIdService(i) => {
            system.kill_id_service(*i).await;
            tokio::time::sleep(pause(rng, 500, 3000)).await;
            if let Err(e) = system.restart_id_service(*i).await {
                problems.push(format!("restart id-service{i} after kill -9: {e:#}"));
            }
        }
        Fault::IdServiceOutage => {
            for i in 0..system.id_service_count() {
                system.kill_id_service(i).await;
            }
            ran_dry = wait_until_dry(system, workload, history, start, config.outage_limit).await;
            // Stay down a little longer: the nodes must keep failing fast, not hang.
            tokio::time::sleep(pause(rng, 1000, 2500)).await;
        }
        Fault::PostgresCrash { kill } => {
            if *kill {
                system.kill_postgres().await;
            } else {
                system.crash_postgres().await;
            }
            tokio::time::sleep(pause(rng, 300, 2000)).await;
            system.restart_postgres().await;
        }
        Fault::CutNodeFromIdService { node, blackhole } => {
            system.set_id_service_link(*node, link_mode(*blackhole));
            tokio::time::sleep(pause(rng, 2000, 6000)).await;
            system.set_id_service_link(*node, Mode::Open);
        }
        Fault::CutNodeFromPostgres { node, blackhole } => {
            system.set_postgres_link(*node, link_mode(*blackhole));
            tokio::time::sleep(pause(rng, 1000, 4000)).await;
            system.set_postgres_link(*node, Mode::Open);
        }
        Fault::Switchover | Fault::KillLeader | Fault::PartitionLeader | Fault::RestartReplica => {
            problems.push(format!(
                "{fault:?} is a Patroni fault (crate::ha runs those)"
            ));
        }
    }
    let end = history.now();
    let wall_end = SystemTime::now();
    if *fault == Fault::IdServiceOutage {
        for i in 0..system.id_service_count() {
            if let Err(e) = system.restart_id_service(i).await {
                problems.push(format!("restart id-service{i} after the outage: {e:#}"));
            }
        }
    }
    let recovered = match system.wait_all_ready(RECOVERY_TIMEOUT).await {
        Ok(()) => Some(history.now()),
        Err(e) => {
            problems.push(format!("not recovered after {fault:?}: {e:#}"));
            None
        }
    };
    FaultRecord {
        fault: fault.clone(),
        start,
        end,
        wall: (wall_start, wall_end),
        ran_dry,
        recovered,
    }
}

/// Waits until every node has refused a create for lack of IDs since `since`, or `limit`
/// passes; returns when each ran dry.
async fn wait_until_dry(
    system: &System,
    workload: &Workload,
    history: &History,
    since: Duration,
    limit: Duration,
) -> Vec<Option<Duration>> {
    let nodes = system.node_count();
    let mut dry = vec![None; nodes];
    loop {
        for (i, slot) in dry.iter_mut().enumerate() {
            if slot.is_none() {
                *slot = workload.last_dry(i).filter(|t| *t >= since);
            }
        }
        if dry.iter().all(Option::is_some) || history.now() - since >= limit {
            return dry;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
