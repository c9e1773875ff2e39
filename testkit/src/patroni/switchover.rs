//! A planned switchover under load, judged alike for every service that writes through a
//! pooler: load runs, the cluster switches over, the writes that follow the new leader's first
//! acknowledged one must all succeed once a settling second has passed (a failure then is a
//! stale server connection), and there must be acknowledged writes before and after.

use super::Patroni;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

/// Each call's outcome: when it was answered, and its value or the refusal.
pub type Outcomes<T> = Mutex<Vec<(Instant, Result<T, String>)>>;

/// Records `outcome` in `outcomes`; after a refusal, waits a little before the next call.
pub async fn record<T>(outcomes: &Outcomes<T>, outcome: Result<T, String>) {
    let failed = outcome.is_err();
    outcomes
        .lock()
        .expect("outcomes")
        .push((Instant::now(), outcome));
    if failed {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// How the switchover is judged: how long calls run after the new leader's first acknowledged
/// one, how long past it a refusal is still the failover's, and what the calls are called.
pub struct Judging<'a> {
    /// Calls keep running this long after the first one acknowledged after the switchover.
    pub after: Duration,
    /// A refusal this long after that first one is still the failover's.
    pub settle: Duration,
    /// The calls' name in messages (`creates`, `grants`).
    pub what: &'a str,
}

/// Lets the `clients` (which record into `outcomes` until `stop`) run three seconds, switches
/// `cluster` over, waits for the first acknowledged call after it (at most a minute; `log`
/// explains a failure), lets them run `judging.after` longer, stops them and judges: no refusal
/// after the settling time, acknowledged calls before and after. Returns every acknowledged
/// value.
pub async fn switch_over_under_load<T: Clone>(
    cluster: &Patroni,
    (outcomes, stop, clients): (&Outcomes<T>, &AtomicBool, Vec<JoinHandle<()>>),
    judging: Judging<'_>,
    log: impl Fn() -> String,
) -> Vec<T> {
    let what = judging.what;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let switched = Instant::now();
    cluster
        .switchover(None)
        .await
        .expect("Patroni switches over");
    // Patroni answers once the new leader runs: the first acknowledged call after that ends
    // the pause.
    let done = Instant::now();
    let resumed = loop {
        let first = outcomes
            .lock()
            .expect("outcomes")
            .iter()
            .find(|(at, o)| *at > done && o.is_ok())
            .map(|(at, _)| *at);
        if let Some(at) = first {
            break at;
        }
        assert!(
            done.elapsed() < Duration::from_secs(60),
            "no {what} within 60 s of the switchover\n{}",
            log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    tokio::time::sleep(judging.after).await;
    stop.store(true, Ordering::Relaxed);
    for client in clients {
        client.await.expect("client task");
    }
    let outcomes = outcomes.lock().expect("outcomes");
    let acknowledged: Vec<T> = outcomes
        .iter()
        .filter_map(|(_, o)| o.as_ref().ok().cloned())
        .collect();
    let late: Vec<_> = outcomes
        .iter()
        .filter(|(at, o)| o.is_err() && *at > resumed + judging.settle)
        .map(|(_, o)| o.as_ref().err())
        .collect();
    let before = outcomes.iter().filter(|(at, _)| *at < switched).count();
    let after = outcomes
        .iter()
        .filter(|(at, o)| *at > resumed && o.is_ok())
        .count();
    eprintln!(
        "switchover behind PgBouncer: {} {what}, {} refused; {what} paused {:.2}s; {before} \
         before, {after} after",
        acknowledged.len(),
        outcomes.len() - acknowledged.len(),
        (resumed - switched).as_secs_f64()
    );
    assert!(
        late.is_empty(),
        "{what} refused after the new leader served (a stale connection?): {:?}",
        late.iter().take(5).collect::<Vec<_>>()
    );
    assert!(
        before > 0 && after > 0,
        "{before} {what} before, {after} after"
    );
    acknowledged
}
