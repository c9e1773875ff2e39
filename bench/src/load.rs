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

/// What the requests of an open loop ask for, and so how many there are.
#[derive(Debug, Clone, Copy)]
pub enum Pick {
    /// Zipf(1)-chosen codes, repeats and all (a redirect workload), for this long.
    Zipf(Duration),
    /// Each code once, in order: as many requests as codes (uncached codes, for misses).
    EachOnce,
}

/// Offers `rate` GETs per second of the codes `pick` chooses over `connections` connections
/// (request `i` goes to connection `i % connections`); every answer must be 302. Latency runs from the
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
    pick: Pick,
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
                .block_on(open_loop_here(addr, codes, rate, pick, connections))
        })?;
    tokio::task::spawn_blocking(move || generator.join())
        .await?
        .map_err(|_| anyhow::anyhow!("the open-loop generator panicked"))?
}

async fn open_loop_here(
    addr: SocketAddr,
    codes: Arc<Vec<String>>,
    rate: f64,
    pick: Pick,
    connections: usize,
) -> anyhow::Result<Run> {
    let zipf = Arc::new(match pick {
        Pick::Zipf(_) => Some(Zipf::new(codes.len(), 1.0)),
        Pick::EachOnce => None,
    });
    let mut senders = Vec::new();
    let mut tasks = Vec::new();
    for c in 0..connections {
        // Each request: when it was meant to be sent, and its index in the run.
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(Instant, u64)>();
        senders.push(tx);
        let (codes, zipf) = (Arc::clone(&codes), Arc::clone(&zipf));
        let mut conn = RawConn::connect(addr).await?;
        tasks.push(tokio::spawn(async move {
            let mut rng = rand::rngs::StdRng::seed_from_u64(c as u64 * 7919 + 1);
            let (mut latencies, mut errors, mut unsent) = (Vec::new(), 0u64, 0u64);
            let mut path = String::new();
            while let Some((intended, index)) = rx.recv().await {
                let code = match zipf.as_ref() {
                    Some(zipf) => &codes[zipf.sample(&mut rng)],
                    None => &codes[index as usize],
                };
                path.clear();
                path.push('/');
                path.push_str(code);
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
    let total = match pick {
        Pick::Zipf(duration) => (rate * duration.as_secs_f64()) as u64,
        Pick::EachOnce => codes.len() as u64,
    };
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
                let _ = senders[(next as usize) % senders.len()].send((intended, next));
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

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    /// A server that answers every GET with a 302 and sends the paths it was asked for.
    async fn recording_server() -> (SocketAddr, tokio::sync::mpsc::UnboundedReceiver<String>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let tx = tx.clone();
                tokio::spawn(async move {
                    let (read, mut write) = stream.into_split();
                    let mut lines = BufReader::new(read).lines();
                    while let Ok(Some(line)) = lines.next_line().await {
                        if let Some(path) = line.strip_prefix("GET ") {
                            let path = path.split(' ').next().unwrap_or_default().to_string();
                            let _ = tx.send(path);
                        } else if line.is_empty() {
                            let answer =
                                b"HTTP/1.1 302 Found\r\nlocation: /x\r\ncontent-length: 0\r\n\r\n";
                            if write.write_all(answer).await.is_err() {
                                return;
                            }
                        }
                    }
                });
            }
        });
        (addr, rx)
    }

    /// Runs an open loop against a recording server; its result and the paths asked for.
    async fn recorded(codes: &[String], rate: f64, pick: Pick, conns: usize) -> (Run, Vec<String>) {
        let (addr, mut seen) = recording_server().await;
        let run = open_loop(addr, Arc::new(codes.to_vec()), rate, pick, conns)
            .await
            .unwrap();
        let mut paths = Vec::new();
        while let Ok(path) = seen.try_recv() {
            paths.push(path);
        }
        (run, paths)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_open_loop_over_each_code_asks_for_every_code_once() {
        let codes: Vec<String> = (0..40).map(|i| format!("code{i}")).collect();
        let (run, mut paths) = recorded(&codes, 2000.0, Pick::EachOnce, 4).await;
        assert_eq!(run.errors, 0);
        paths.sort();
        let mut expected: Vec<String> = codes.iter().map(|c| format!("/{c}")).collect();
        expected.sort();
        assert_eq!(paths, expected);
        assert!(run.p50_ms > 0.0 && run.p99_ms >= run.p50_ms);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_open_loop_over_zipf_codes_runs_for_its_duration() {
        let codes: Vec<String> = (0..10).map(|i| format!("z{i}")).collect();
        let pick = Pick::Zipf(Duration::from_millis(100));
        let (run, paths) = recorded(&codes, 500.0, pick, 2).await;
        assert_eq!(run.errors, 0);
        // 500/s for 100 ms, repeats allowed, every one a known code.
        assert_eq!(paths.len(), 50);
        assert!(paths.iter().all(|p| codes.contains(&p[1..].to_string())));
    }
}
