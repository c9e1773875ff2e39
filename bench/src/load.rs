//! Load generators written here: a closed loop that requests every code once (cache warming and
//! the cache-miss figure), and an open loop at a fixed rate that measures latency from each
//! request's intended send time, so queueing behind a slow answer is counted (as wrk2 does).

use crate::http::{Conn, RawConn};
use crate::stats::Run;
use rand::{Rng, SeedableRng};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Zipf(s) over `n` ranks by inverse CDF.
pub struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    /// The distribution over ranks `0..n`.
    pub fn new(n: usize, s: f64) -> Zipf {
        let mut sum = 0.0;
        let mut cdf: Vec<f64> = (1..=n)
            .map(|i| {
                sum += (i as f64).powf(-s);
                sum
            })
            .collect();
        for v in &mut cdf {
            *v /= sum;
        }
        Zipf { cdf }
    }

    /// A rank.
    pub fn sample(&self, rng: &mut impl Rng) -> usize {
        let u: f64 = rng.random();
        self.cdf.partition_point(|&c| c < u).min(self.cdf.len() - 1)
    }
}

/// What one connection's task of a run returns: its latencies (microseconds) and failures.
pub type Timed = anyhow::Result<(Vec<u32>, u64)>;

/// Waits for the tasks of a run and joins what they timed.
pub async fn gather(tasks: Vec<tokio::task::JoinHandle<Timed>>) -> Timed {
    let (mut all, mut failures) = (Vec::new(), 0);
    for task in tasks {
        let (latencies, f) = task.await??;
        all.extend(latencies);
        failures += f;
    }
    Ok((all, failures))
}

/// Requests each code once over `connections` connections; every answer must be 302.
pub async fn each_once(
    addr: SocketAddr,
    codes: Arc<Vec<String>>,
    connections: usize,
) -> anyhow::Result<Run> {
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..connections {
        let (codes, next) = (Arc::clone(&codes), Arc::clone(&next));
        tasks.push(tokio::spawn(async move {
            let mut conn = Conn::connect(addr).await?;
            let (mut latencies, mut errors) = (Vec::new(), 0u64);
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(code) = codes.get(i) else { break };
                let t = Instant::now();
                let status = conn.get(&format!("/{code}")).await?;
                latencies.push(t.elapsed().as_micros() as u32);
                if status.as_u16() != 302 {
                    errors += 1;
                }
            }
            anyhow::Ok((latencies, errors))
        }));
    }
    let (all, errors) = gather(tasks).await?;
    let n = all.len() as u64;
    Ok(Run::from_latencies(all, n, started.elapsed(), errors))
}

/// Offers `rate` GETs per second of Zipf-chosen codes for `duration` over `connections`
/// connections (request `i` goes to connection `i % connections`). Latency runs from the
/// intended send time to the end of the answer, so a request queued behind a slow answer
/// counts its wait. The connections are [`RawConn`]s: per request they cost the one load core
/// less than hyper's client, whose cost capped the rates this generator could offer.
///
/// The generator runs on a thread of its own with a single-threaded runtime whose dispatcher
/// never sleeps: it hands each request to its connection as its time comes and yields, so the
/// runtime polls the sockets in between. Sleeping on tokio's 1 ms timer would bunch sends, and
/// handing them over from another thread would add a cross-thread wake-up (and a context switch
/// on the one load core) to every request; either adds latency that belongs to the generator.
pub async fn open_loop(
    addr: SocketAddr,
    codes: Arc<Vec<String>>,
    rate: f64,
    duration: Duration,
    connections: usize,
) -> anyhow::Result<Run> {
    anyhow::ensure!(
        rate.is_finite() && rate > 0.0,
        "open loop: the rate {rate} is not a positive number"
    );
    let generator = std::thread::Builder::new()
        .name("open-loop".into())
        .spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?
                .block_on(open_loop_here(addr, codes, rate, duration, connections))
        })?;
    tokio::task::spawn_blocking(move || generator.join())
        .await?
        .map_err(|_| anyhow::anyhow!("the open-loop generator panicked"))?
}

async fn open_loop_here(
    addr: SocketAddr,
    codes: Arc<Vec<String>>,
    rate: f64,
    duration: Duration,
    connections: usize,
) -> anyhow::Result<Run> {
    let zipf = Arc::new(Zipf::new(codes.len(), 1.0));
    let mut senders = Vec::new();
    let mut tasks = Vec::new();
    for c in 0..connections {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Instant>();
        senders.push(tx);
        let (codes, zipf) = (Arc::clone(&codes), Arc::clone(&zipf));
        let mut conn = RawConn::connect(addr).await?;
        tasks.push(tokio::spawn(async move {
            let mut rng = rand::rngs::StdRng::seed_from_u64(c as u64 * 7919 + 1);
            let (mut latencies, mut errors, mut unsent) = (Vec::new(), 0u64, 0u64);
            let mut path = String::new();
            while let Some(intended) = rx.recv().await {
                path.clear();
                path.push('/');
                path.push_str(&codes[zipf.sample(&mut rng)]);
                match conn.get(&path).await {
                    Ok(302) => {}
                    Ok(_) => errors += 1,
                    Err(_) => {
                        // The connection is unusable: this request and the rest of its
                        // share fail without a latency.
                        unsent += 1;
                        while rx.recv().await.is_some() {
                            unsent += 1;
                        }
                        break;
                    }
                }
                latencies.push(intended.elapsed().as_micros() as u32);
            }
            (latencies, errors, unsent)
        }));
    }
    let interval = Duration::from_secs_f64(1.0 / rate);
    let total = (rate * duration.as_secs_f64()) as u64;
    // Without a core of its own the generator must not spin through long gaps: it would take
    // the CPU from the server it measures. It sleeps until shortly before the next send.
    let spin_only = crate::machine::pinning();
    let started = Instant::now();
    let dispatcher = tokio::spawn(async move {
        let (mut next, mut behind) = (0u64, Duration::ZERO);
        while next < total {
            let now = Instant::now();
            let mut intended = started + interval.mul_f64(next as f64);
            while next < total && intended <= now {
                behind = behind.max(now - intended);
                let _ = senders[(next as usize) % senders.len()].send(intended);
                next += 1;
                intended = started + interval.mul_f64(next as f64);
            }
            let gap = intended.saturating_duration_since(now);
            if !spin_only && gap > Duration::from_millis(3) {
                tokio::time::sleep(gap - Duration::from_millis(2)).await;
            } else {
                tokio::task::yield_now().await;
            }
        }
        behind
    });
    let behind = dispatcher.await?;
    // A server that cannot keep up leaves a backlog; it is measured, but not forever.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let (mut all, mut errors, mut lost) = (Vec::new(), 0, 0);
    for task in tasks {
        match tokio::time::timeout_at(deadline, task).await {
            Ok(joined) => {
                let (latencies, e, u) = joined?;
                all.extend(latencies);
                errors += e;
                lost += u;
            }
            // Its connection's latencies are lost with it: counted as one error.
            Err(_) => lost += 1,
        }
    }
    // Only redirects count as answered.
    let answered = all.len() as u64 - errors;
    let mut run = Run::from_latencies(all, answered, started.elapsed(), errors + lost);
    run.behind_ms = Some(behind.as_secs_f64() * 1e3);
    Ok(run)
}
