//! The node's background work: the visits' (their flushes, rollup maintenance and the GeoIP
//! file's re-reads, on `visits::Schedule`), webhook deliveries, forgetting idle rate-limit
//! clients, re-reading the keys file, purging ended console sessions, the stored API keys and the blocklist, purging expired idempotency keys, and (on a shared store) the change feed
//! that keeps the redirect cache in step with other nodes.

use super::node::Node;
use crate::store::{Capabilities, ChangeEvent, LinkStore};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// How often idle clients are dropped from the rate limiters.
const HOUSEKEEPING: Duration = Duration::from_secs(60);
/// How often expired idempotency keys are deleted.
const PURGE: Duration = Duration::from_secs(600);
/// How often the URL search index's pending list is merged into the index.
const SEARCH_INDEX: Duration = Duration::from_secs(1);
/// How long the merge rests after it failed (a standby, a lost connection, a role that does not
/// own the index), so that a lasting refusal is not logged every second.
const SEARCH_INDEX_RETRY: Duration = Duration::from_secs(60);

/// How often the periodic tasks run.
pub(super) struct Intervals {
    /// The visits' flushes and GeoIP re-reads.
    pub(super) visits: crate::visits::Schedule,
    /// Between checks of the keys file for changes.
    pub(super) reload: Duration,
}

/// The running background tasks.
pub(super) struct Tasks {
    stop: CancellationToken,
    handles: Vec<JoinHandle<()>>,
}

impl Tasks {
    /// Starts every background task of `node`.
    pub(super) fn start(node: &Node, every: Intervals) -> Self {
        let stop = CancellationToken::new();
        let mut handles = vec![
            tokio::spawn(Arc::clone(&node.visits).run(
                node.store.clone(),
                every.visits,
                stop.clone(),
            )),
            tokio::spawn(Arc::clone(&node.webhooks).run(stop.clone())),
            tokio::spawn(Arc::clone(node.admission.keys()).watch(every.reload, stop.clone())),
            tokio::spawn(Arc::clone(&node.targets).watch(every.reload, stop.clone())),
            tokio::spawn(crate::signin::SignIn::watch(
                node.signin.clone(),
                crate::signin::Reporter {
                    audit: Arc::clone(&node.audit),
                    node: super::resources::default_holder(),
                },
                every.reload,
                stop.clone(),
            )),
            tokio::spawn({
                let (links, store, stop) = (node.links.clone(), node.store.clone(), stop.clone());
                async move {
                    while tokio::time::timeout(PURGE, stop.cancelled()).await.is_err() {
                        match store.purge_idempotency(links.idempotency_cutoff()).await {
                            Ok(0) => {}
                            Ok(purged) => {
                                tracing::info!(purged, "deleted expired idempotency keys")
                            }
                            Err(error) => {
                                tracing::warn!(%error, "purge of expired idempotency keys failed; will retry")
                            }
                        }
                    }
                }
            }),
            tokio::spawn({
                let (limits, stop) = (node.limits.clone(), stop.clone());
                async move {
                    while tokio::time::timeout(HOUSEKEEPING, stop.cancelled())
                        .await
                        .is_err()
                    {
                        limits.housekeeping();
                    }
                }
            }),
        ];
        handles.push(tokio::spawn(clean_search_index(
            node.store.clone(),
            stop.clone(),
        )));
        handles.push(tokio::spawn(
            Arc::clone(&node.api_keys).run(every.reload, stop.clone()),
        ));
        handles.push(tokio::spawn(
            Arc::clone(&node.audit).run_purge(stop.clone()),
        ));
        handles.push(tokio::spawn(crate::signin::SignIn::run_purge(
            node.signin.clone(),
            crate::signin::PURGE_EVERY,
            stop.clone(),
        )));
        handles.push(tokio::spawn({
            let (blocklist, stop) = (Arc::clone(&node.blocklist), stop.clone());
            async move {
                while tokio::time::timeout(every.reload, stop.cancelled()).await.is_err() {
                    if let Err(error) = blocklist.sync().await {
                        tracing::warn!(%error, "reading the blocked domains failed; the list in force stays");
                    }
                }
            }
        }));
        if let Some(feed) = node.store.change_feed() {
            let cache = node.cache.clone();
            let domains = Arc::clone(&node.domains);
            handles.push(tokio::spawn(feed.run(
                move |event| match event {
                    ChangeEvent::Changed(code) => cache.invalidate(&code),
                    ChangeEvent::DomainChanged(host) => domains.cache().invalidate(&host),
                    ChangeEvent::Reset => {
                        cache.clear();
                        domains.cache().clear();
                    }
                    ChangeEvent::CaughtUp(through) => cache.confirm(through),
                },
                stop.clone(),
            )));
        }
        Self { stop, handles }
    }

    /// Stops every task and waits up to `bound` for all of them; the visits' flushes write what
    /// is pending before they end. Tasks still running past the bound are aborted and waited
    /// for up to `bound` again ([`stop_all`]).
    pub(super) async fn stop(self, bound: Duration) -> Stopped {
        self.stop.cancel();
        stop_all(self.handles, bound).await
    }
}

/// How the background tasks ended.
pub(super) enum Stopped {
    /// Every task ended, on its own or aborted. One aborted may have handed a write to the
    /// store that has not landed yet.
    Ended {
        /// How many had to be aborted.
        aborted: usize,
    },
    /// Some are still running even aborted (held in code that does not yield): they may write
    /// yet. Their handles, to wait for.
    Running(Vec<JoinHandle<()>>),
}

/// Waits up to `bound` for all of `handles` (already told to stop, so stopping side by side),
/// then aborts those still running and waits up to `bound` again for them to end.
async fn stop_all(handles: Vec<JoinHandle<()>>, bound: Duration) -> Stopped {
    let deadline = tokio::time::Instant::now() + bound;
    let mut late = Vec::new();
    for mut handle in handles {
        if tokio::time::timeout_at(deadline, &mut handle)
            .await
            .is_err()
        {
            late.push(handle);
        }
    }
    if late.is_empty() {
        return Stopped::Ended { aborted: 0 };
    }
    tracing::warn!(
        tasks = late.len(),
        ?bound,
        "background tasks did not stop in time; aborting them"
    );
    late.iter().for_each(JoinHandle::abort);
    let aborted = late.len();
    let deadline = tokio::time::Instant::now() + bound;
    let mut running = Vec::new();
    for mut handle in late {
        if tokio::time::timeout_at(deadline, &mut handle)
            .await
            .is_err()
        {
            running.push(handle);
        }
    }
    if running.is_empty() {
        Stopped::Ended { aborted }
    } else {
        Stopped::Running(running)
    }
}

/// Merges the URL search index's pending list into the index every [`SEARCH_INDEX`], so that no
/// create's statement does it inline (PostgreSQL; a no-op on SQLite), until `stop`. Every node
/// does it; two at once are harmless (the second finds the list empty).
async fn clean_search_index(store: crate::store::Store, stop: CancellationToken) {
    let mut rest = SEARCH_INDEX;
    while tokio::time::timeout(rest, stop.cancelled()).await.is_err() {
        let merged = tokio::select! {
            () = stop.cancelled() => return,
            merged = store.clean_search_index() => merged,
        };
        rest = match merged {
            Ok(0) => SEARCH_INDEX,
            Ok(pages) => {
                tracing::debug!(pages, "merged the search index's pending list");
                SEARCH_INDEX
            }
            Err(error) => {
                tracing::warn!(%error, "merging the search index's pending list failed; creates merge it themselves until this works again");
                SEARCH_INDEX_RETRY
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A task that ends when told, one that never looks (aborted), and one held in blocking code
    /// until the test lets it go (still running when the wait ends).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_task_that_will_not_stop_is_aborted_and_one_that_cannot_is_reported() {
        let bound = Duration::from_secs(1);
        let stop = CancellationToken::new();
        let polite = tokio::spawn({
            let stop = stop.clone();
            async move { stop.cancelled().await }
        });
        stop.cancel();
        let ended = stop_all(vec![polite], bound).await;
        assert!(matches!(ended, Stopped::Ended { aborted: 0 }));

        let deaf = tokio::spawn(std::future::pending::<()>());
        let ended = stop_all(vec![deaf], bound).await;
        assert!(matches!(ended, Stopped::Ended { aborted: 1 }));

        let (started, running) = tokio::sync::oneshot::channel();
        let (release, held) = std::sync::mpsc::channel::<()>();
        let stuck = tokio::spawn(async move {
            let _ = started.send(());
            let _ = held.recv();
        });
        running.await.expect("the stuck task started");
        let deaf = tokio::spawn(std::future::pending::<()>());
        let Stopped::Running(left) = stop_all(vec![deaf, stuck], bound).await else {
            panic!("the stuck task is still running");
        };
        assert_eq!(left.len(), 1, "only the stuck one is left");
        release.send(()).expect("let the stuck task go");
        for handle in left {
            let _ = handle.await;
        }
    }

    /// Tasks that will not stop are waited for side by side: the stop takes one bound (and
    /// their abort), not one bound each.
    #[tokio::test(start_paused = true)]
    async fn tasks_that_will_not_stop_share_one_bound() {
        let bound = Duration::from_secs(5);
        let deaf = (0..3)
            .map(|_| tokio::spawn(std::future::pending::<()>()))
            .collect();
        let began = tokio::time::Instant::now();
        let ended = stop_all(deaf, bound).await;
        assert!(matches!(ended, Stopped::Ended { aborted: 3 }));
        assert_eq!(began.elapsed(), bound, "the waits were not shared");
    }
}
