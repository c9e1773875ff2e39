//! Click counting off the redirect path.
//!
//! A redirect only bumps an in-memory counter; a background task writes the accumulated counts
//! in one batched statement per flush interval (never a write per redirect, never a trigger on
//! the link row). A crash loses at most the counts of one flush interval.

use crate::domain::ClickCounts;
use crate::store::Store;
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// What kind of visit a redirect was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Visit {
    /// A GET from a person's browser (or anything not known to be a bot).
    Human,
    /// A HEAD request.
    Head,
    /// A GET from a known crawler or link-preview fetcher.
    Bot,
}

/// User-agent fragments (lowercase) of crawlers and link-preview fetchers.
const BOT_MARKERS: &[&str] = &[
    "bot",
    "crawler",
    "spider",
    "slurp",
    "facebookexternalhit",
    "facebookcatalog",
    "embedly",
    "quora link preview",
    "outbrain",
    "pinterest",
    "vkshare",
    "w3c_validator",
    "whatsapp",
    "skypeuripreview",
    "bitlybot",
    "preview",
    "headlesschrome",
    "lighthouse",
    "python-requests",
    "go-http-client",
    "okhttp",
    "curl/",
    "wget/",
];

/// Classifies a request by method and `User-Agent`.
pub fn classify(is_head: bool, user_agent: Option<&str>) -> Visit {
    if is_head {
        return Visit::Head;
    }
    match user_agent {
        Some(ua) => {
            // Lower-case into a stack buffer: the redirect path should not allocate for this.
            // Markers sit near the start of real user agents; the tail past 256 bytes is ignored.
            let mut buf = [0u8; 256];
            let len = ua.len().min(buf.len());
            for (dst, src) in buf.iter_mut().zip(ua.as_bytes()) {
                *dst = src.to_ascii_lowercase();
            }
            let ua = &buf[..len];
            let is_bot = BOT_MARKERS
                .iter()
                .any(|m| ua.windows(m.len()).any(|w| w == m.as_bytes()));
            if is_bot { Visit::Bot } else { Visit::Human }
        }
        None => Visit::Bot,
    }
}

/// How many independently locked parts the pending counts are split into, so redirects on
/// different codes (and the flush) rarely wait for one another.
const SHARDS: usize = 16;

type Pending = HashMap<String, ClickCounts>;

/// Pending counts, flushed in batches.
#[derive(Default)]
pub struct ClickRecorder {
    shards: [Mutex<Pending>; SHARDS],
    /// Clicks written to the store since start.
    pub flushed: AtomicU64,
}

fn lock(shard: &Mutex<Pending>) -> std::sync::MutexGuard<'_, Pending> {
    // Counters stay consistent whatever panicked while holding the lock.
    shard.lock().unwrap_or_else(|p| p.into_inner())
}

impl ClickRecorder {
    fn shard(&self, code: &str) -> &Mutex<Pending> {
        // Generated and private codes end in a uniformly random character.
        let last = code.as_bytes().last().copied().unwrap_or(0);
        &self.shards[usize::from(last) % SHARDS]
    }

    /// Counts one redirect of `code`.
    pub fn record(&self, code: &str, visit: Visit) {
        let mut pending = lock(self.shard(code));
        let counts = match pending.get_mut(code) {
            Some(counts) => counts,
            None => pending.entry(code.to_string()).or_default(),
        };
        match visit {
            Visit::Human => counts.human += 1,
            Visit::Head => counts.head += 1,
            Visit::Bot => counts.bot += 1,
        }
    }

    fn take(&self) -> Pending {
        let mut all = Pending::new();
        for shard in &self.shards {
            all.extend(std::mem::take(&mut *lock(shard)));
        }
        all
    }

    fn restore(&self, batch: Pending) {
        for (code, c) in batch {
            let mut pending = lock(self.shard(&code));
            let counts = pending.entry(code).or_default();
            counts.human += c.human;
            counts.head += c.head;
            counts.bot += c.bot;
        }
    }

    /// Writes the pending counts to `store` in one batch; on failure they are kept for the next
    /// flush.
    pub async fn flush(&self, store: &Store) {
        let batch = self.take();
        if batch.is_empty() {
            return;
        }
        let mut rows: Vec<(String, ClickCounts)> = batch.clone().into_iter().collect();
        // A fixed order keeps concurrent flushes of several nodes from deadlocking.
        rows.sort_by(|a, b| a.0.cmp(&b.0));
        let total: u64 = rows.iter().map(|(_, c)| c.human + c.head + c.bot).sum();
        match store.add_clicks(&rows).await {
            Ok(()) => {
                self.flushed.fetch_add(total, Ordering::Relaxed);
            }
            Err(error) => {
                tracing::warn!(%error, codes = rows.len(), "click flush failed; will retry");
                self.restore(batch);
            }
        }
    }

    /// Flushes every `interval` until `stop`, then once more.
    pub async fn run(&self, store: Store, interval: Duration, stop: CancellationToken) {
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticker.tick() => self.flush(&store).await,
                () = stop.cancelled() => break,
            }
        }
        self.flush(&store).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn visits_are_classified_by_method_and_user_agent() {
        let browser =
            "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 Chrome/120.0 Safari/537.36";
        assert_eq!(classify(false, Some(browser)), Visit::Human);
        assert_eq!(classify(true, Some(browser)), Visit::Head);
        for ua in [
            "Slackbot-LinkExpanding 1.0",
            "facebookexternalhit/1.1",
            "Twitterbot/1.0",
            "Googlebot/2.1",
            "WhatsApp/2.23",
            "curl/8.0",
        ] {
            assert_eq!(classify(false, Some(ua)), Visit::Bot, "{ua}");
        }
        assert_eq!(classify(false, None), Visit::Bot);
    }

    #[test]
    fn counts_accumulate_per_code() {
        let recorder = ClickRecorder::default();
        recorder.record("a", Visit::Human);
        recorder.record("a", Visit::Human);
        recorder.record("a", Visit::Bot);
        recorder.record("b", Visit::Head);
        let batch = recorder.take();
        assert_eq!(
            batch["a"],
            ClickCounts {
                human: 2,
                head: 0,
                bot: 1
            }
        );
        assert_eq!(
            batch["b"],
            ClickCounts {
                human: 0,
                head: 1,
                bot: 0
            }
        );
        recorder.restore(batch);
        assert_eq!(recorder.take().len(), 2);
    }
}
