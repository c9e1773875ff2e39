//! In-process figures: code encode/decode per second, and IDs per second from an `IdPool`'s
//! leased block.

use codespace::{Block, CodeKey, CodeSpace};
use id_client::{IdPool, Lease, LeaseFuture, LeaseSource, PoolConfig};
use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Operations per second of the code space.
#[derive(Debug, Clone, Copy)]
pub struct CodeRates {
    /// `CodeSpace::encode` (FF1 + base62).
    pub encode: f64,
    /// `CodeSpace::decode`.
    pub decode: f64,
}

/// Times encode and decode of 7-character codes for `duration` each.
pub fn code_rates(duration: Duration) -> anyhow::Result<CodeRates> {
    let space = CodeSpace::new(&CodeKey::generate(), codespace::DEFAULT_LENGTH)?;
    let started = Instant::now();
    let mut id = 1_000_000u64;
    let mut codes = Vec::new();
    while started.elapsed() < duration {
        for _ in 0..256 {
            id += 1;
            codes.push(black_box(space.encode(black_box(id))));
        }
    }
    let encode = codes.len() as f64 / started.elapsed().as_secs_f64();
    let started = Instant::now();
    let mut decoded = 0u64;
    'outer: while started.elapsed() < duration {
        for code in &codes {
            black_box(space.decode(black_box(code))?);
            decoded += 1;
            if decoded.is_multiple_of(256) && started.elapsed() >= duration {
                break 'outer;
            }
        }
    }
    let decode = decoded as f64 / started.elapsed().as_secs_f64();
    Ok(CodeRates { encode, decode })
}

/// A ledger in memory: consecutive blocks of the requested size.
struct MemorySource(AtomicU64);

impl LeaseSource for MemorySource {
    fn lease(&self, size: u64) -> LeaseFuture<'_> {
        let start = self.0.fetch_add(size, Ordering::SeqCst);
        Box::pin(async move {
            Ok(Lease {
                lease_id: start,
                block: Block::new(start, start + size).expect("non-empty block"),
            })
        })
    }
}

/// `IdPool::next_id` calls per second on one thread, from blocks of 10M held in RAM.
pub async fn pool_ids_per_second(duration: Duration) -> anyhow::Result<f64> {
    let pool = Arc::new(IdPool::start(
        Arc::new(MemorySource(AtomicU64::new(0))),
        PoolConfig {
            min_block: 10_000_000,
            max_block: 10_000_000,
            initial_block: 10_000_000,
            ..PoolConfig::default()
        },
    ));
    anyhow::ensure!(
        pool.wait_ready(Duration::from_secs(5)).await,
        "no first block"
    );
    let rate = tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        let mut issued = 0u64;
        while started.elapsed() < duration {
            for _ in 0..1024 {
                if pool.next_id().is_ok() {
                    issued += 1;
                }
            }
        }
        issued as f64 / started.elapsed().as_secs_f64()
    })
    .await?;
    Ok(rate)
}
