//! Concurrent clients creating links (generated, idempotent, dedup, alias, private) through
//! HTTP and gRPC, and reading acknowledged links back through redirects. Every attempt is
//! recorded in the [`History`] as acknowledged, refused or indeterminate.

use crate::history::{CreateOp, History, Kind, Outcome, ReadOp, ReadOutcome, Transport};
use crate::system::{API_KEY, Topology};
use crate::transport::{Clients, CreateRequest};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::JoinSet;

/// How many distinct URLs the dedup creates share (so concurrent dedups collide).
const DEDUP_URLS: u64 = 40;
/// How often an indeterminate idempotent create is retried with the same key.
const IDEMPOTENT_ATTEMPTS: usize = 6;

/// Shared state of the running workload.
pub struct Workload {
    history: Arc<History>,
    topology: Arc<Topology>,
    clients: Clients,
    stop: AtomicBool,
    seq: AtomicU64,
    /// Acknowledged (code, url) pairs, for reads.
    acked: Mutex<Vec<(String, String)>>,
    /// Per node: 1 + milliseconds since the run started of its latest out-of-IDs refusal.
    dry_at: Vec<AtomicU64>,
    grpc: bool,
}

impl Workload {
    /// A workload over `topology`; `grpc` enables creates through the gRPC API.
    pub fn new(history: Arc<History>, topology: Arc<Topology>, grpc: bool) -> Arc<Self> {
        let nodes = topology.len();
        Arc::new(Self {
            history,
            clients: Clients::new(Arc::clone(&topology), API_KEY),
            topology,
            stop: AtomicBool::new(false),
            seq: AtomicU64::new(0),
            acked: Mutex::new(Vec::new()),
            dry_at: (0..nodes).map(|_| AtomicU64::new(0)).collect(),
            grpc,
        })
    }

    /// Starts `clients` client tasks, seeded from `seed`.
    pub fn spawn(self: &Arc<Self>, clients: usize, seed: u64) -> JoinSet<()> {
        let mut set = JoinSet::new();
        for client in 0..clients {
            let this = Arc::clone(self);
            let rng = StdRng::seed_from_u64(
                seed ^ (0x9e37_79b9_7f4a_7c15u64.wrapping_mul(client as u64 + 1)),
            );
            set.spawn(async move { this.client(client, rng).await });
        }
        set
    }

    /// Asks the clients to stop after their current operation.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    /// When node `node` last refused a create because it had no IDs, from the start of the run.
    pub fn last_dry(&self, node: usize) -> Option<Duration> {
        match self.dry_at[node].load(Ordering::SeqCst) {
            0 => None,
            ms => Some(Duration::from_millis(ms - 1)),
        }
    }

    /// How many create attempts were made so far.
    pub fn attempts(&self) -> u64 {
        self.seq.load(Ordering::SeqCst)
    }

    async fn client(self: Arc<Self>, client: usize, mut rng: StdRng) {
        while !self.stop.load(Ordering::SeqCst) {
            let node = rng.random_range(0..self.topology.len());
            let roll = rng.random_range(0..100);
            if roll < 25 {
                self.read(node, &mut rng).await;
            } else {
                let kind = match roll {
                    25..=59 => Kind::Generated,
                    60..=69 => Kind::Idempotent,
                    70..=81 => Kind::Dedup,
                    82..=90 => Kind::Alias,
                    _ => Kind::Private,
                };
                let transport = if self.grpc && rng.random_bool(0.3) {
                    Transport::Grpc
                } else {
                    Transport::Http
                };
                self.create(client, node, kind, transport, &mut rng).await;
            }
            // A little think time keeps the machine from saturating completely.
            tokio::time::sleep(Duration::from_millis(rng.random_range(0..8))).await;
        }
    }

    async fn create(
        &self,
        client: usize,
        node: usize,
        kind: Kind,
        transport: Transport,
        rng: &mut StdRng,
    ) {
        let seq = self.seq.fetch_add(1, Ordering::SeqCst);
        let url = match kind {
            Kind::Dedup => format!(
                "https://example.com/dedup/{}",
                rng.random_range(0..DEDUP_URLS)
            ),
            _ => format!(
                "https://example.com/{kind:?}/{client}/{seq}?r={:x}",
                rng.random::<u32>()
            )
            .to_lowercase(),
        };
        let request = CreateRequest {
            url,
            alias: (kind == Kind::Alias).then(|| format!("a-{client}-{seq}")),
            dedup: kind == Kind::Dedup,
            private: kind == Kind::Private,
            idempotency_key: (kind == Kind::Idempotent).then(|| format!("idem-{seq}")),
        };
        let attempts = if kind == Kind::Idempotent {
            IDEMPOTENT_ATTEMPTS
        } else {
            1
        };
        for attempt in 0..attempts {
            let seq = if attempt == 0 {
                seq
            } else {
                self.seq.fetch_add(1, Ordering::SeqCst)
            };
            let incarnation_before = self.topology.node(node).incarnation;
            let start = self.history.now();
            let outcome = self.clients.create(node, transport, &request).await;
            let end = self.history.now();
            if let Outcome::Acked { code, url } = &outcome {
                self.acked
                    .lock()
                    .expect("acked lock")
                    .push((code.clone(), url.clone()));
            }
            if let Outcome::Refused {
                out_of_ids: true, ..
            } = &outcome
            {
                self.dry_at[node].store(end.as_millis() as u64 + 1, Ordering::SeqCst);
            }
            let retry = matches!(outcome, Outcome::Indeterminate { .. });
            self.history.push_create(CreateOp {
                seq,
                client,
                kind,
                transport,
                node,
                incarnations: (incarnation_before, self.topology.node(node).incarnation),
                url: request.url.clone(),
                alias: request.alias.clone(),
                idempotency_key: request.idempotency_key.clone(),
                start,
                elapsed: end - start,
                outcome,
            });
            if !retry {
                break;
            }
            // Retry the same request with the same key: it must come back exactly once.
            tokio::time::sleep(Duration::from_millis(300 * (attempt as u64 + 1))).await;
        }
    }

    async fn read(&self, node: usize, rng: &mut StdRng) {
        let picked = {
            let acked = self.acked.lock().expect("acked lock");
            if acked.is_empty() {
                None
            } else {
                // Favour recent links: they are the ones most at risk.
                let n = acked.len();
                let i = if rng.random_bool(0.5) {
                    n - 1 - rng.random_range(0..n.min(50))
                } else {
                    rng.random_range(0..n)
                };
                Some(acked[i].clone())
            }
        };
        let Some((code, url)) = picked else {
            return;
        };
        let start = self.history.now();
        let outcome = self.clients.redirect(node, &code, &url).await;
        let end = self.history.now();
        self.history.push_read(ReadOp {
            node,
            code,
            start,
            elapsed: end - start,
            outcome,
        });
    }
}

/// Classifies a redirect answer for an acknowledged link whose URL is `url`.
pub fn classify_redirect(status: u16, location: Option<&str>, url: &str) -> ReadOutcome {
    match status {
        301 | 302 | 307 | 308 if location == Some(url) => ReadOutcome::Redirected,
        301 | 302 | 307 | 308 => {
            ReadOutcome::Wrong(format!("{status} to {location:?} instead of {url:?}"))
        }
        404 | 410 => ReadOutcome::Missing(status),
        other => ReadOutcome::Failed(format!("status {other}")),
    }
}
