//! The export queue: spans that end go into a bounded channel without waiting; one task on the
//! runtime takes them out in batches and exports them, one batch at a time, each within a
//! deadline. A full queue or a failed batch drops spans and counts them; nothing grows.

use crate::config::BatchSettings;
use opentelemetry::Context;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{Span, SpanData, SpanExporter, SpanProcessor};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// What one span held for export costs, estimated: the SDK's `SpanData` (about 400 bytes) and a
/// server span's attributes (a dozen key-values and their strings) on the heap.
pub const SPAN_BYTES: u64 = 1024;

/// What became of the spans this process recorded.
#[derive(Debug, Default)]
pub struct ExportStats {
    /// Spans in the queue or in the batch being built or exported.
    held: AtomicU64,
    /// The most that can be held: the queue and one batch.
    most_held: AtomicU64,
    exported: AtomicU64,
    dropped_queue_full: AtomicU64,
    dropped_export_failed: AtomicU64,
    failed_exports: AtomicU64,
}

impl ExportStats {
    /// Spans held now, in the queue or in the batch on its way out.
    pub fn held(&self) -> u64 {
        self.held.load(Ordering::Relaxed)
    }

    /// The bytes those spans hold, estimated at [`SPAN_BYTES`] each.
    pub fn held_bytes(&self) -> u64 {
        self.held() * SPAN_BYTES
    }

    /// The most bytes the pipeline holds: the queue's bound and one batch, at [`SPAN_BYTES`].
    pub fn budget_bytes(&self) -> u64 {
        self.most_held.load(Ordering::Relaxed) * SPAN_BYTES
    }

    /// Spans the collector accepted.
    pub fn exported(&self) -> u64 {
        self.exported.load(Ordering::Relaxed)
    }

    /// Spans dropped because the queue was full (the collector slower than the traffic).
    pub fn dropped_queue_full(&self) -> u64 {
        self.dropped_queue_full.load(Ordering::Relaxed)
    }

    /// Spans dropped because their batch was refused, failed or timed out.
    pub fn dropped_export_failed(&self) -> u64 {
        self.dropped_export_failed.load(Ordering::Relaxed)
    }

    /// Spans dropped for either reason.
    pub fn dropped(&self) -> u64 {
        self.dropped_queue_full() + self.dropped_export_failed()
    }

    /// Exports that failed (each dropped its batch).
    pub fn failed_exports(&self) -> u64 {
        self.failed_exports.load(Ordering::Relaxed)
    }
}

/// The SDK's side of the queue.
#[derive(Debug)]
pub(crate) struct QueueProcessor {
    spans: mpsc::Sender<SpanData>,
    stats: Arc<ExportStats>,
}

impl SpanProcessor for QueueProcessor {
    fn on_start(&self, _span: &mut Span, _cx: &Context) {}

    fn on_end(&self, span: SpanData) {
        if !span.span_context.is_sampled() {
            return;
        }
        // Counted before it is sent, so the export task never takes out more than went in.
        self.stats.held.fetch_add(1, Ordering::Relaxed);
        if self.spans.try_send(span).is_err() {
            self.stats.held.fetch_sub(1, Ordering::Relaxed);
            self.stats
                .dropped_queue_full
                .fetch_add(1, Ordering::Relaxed);
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        Ok(())
    }

    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        // The export task is finished by `Pipeline::finish`, which awaits it on the runtime;
        // a blocking wait here could stall the runtime's own threads.
        Ok(())
    }
}

/// The export task and its controls.
pub(crate) struct Pipeline {
    pub(crate) stats: Arc<ExportStats>,
    finish: CancellationToken,
    task: JoinHandle<()>,
}

impl Pipeline {
    /// Starts the export task for `exporter` on the current runtime; returns the processor
    /// that feeds it.
    pub(crate) fn start<E: SpanExporter + 'static>(
        exporter: E,
        settings: BatchSettings,
    ) -> (QueueProcessor, Pipeline) {
        let (tx, rx) = mpsc::channel(settings.max_queue);
        let stats = Arc::new(ExportStats::default());
        stats.most_held.store(
            (settings.max_queue + settings.max_batch) as u64,
            Ordering::Relaxed,
        );
        let finish = CancellationToken::new();
        let task = tokio::spawn(export_loop(
            rx,
            exporter,
            settings,
            Arc::clone(&stats),
            finish.clone(),
        ));
        let processor = QueueProcessor {
            spans: tx,
            stats: Arc::clone(&stats),
        };
        (
            processor,
            Pipeline {
                stats,
                finish,
                task,
            },
        )
    }

    /// Exports what is queued and stops, within `deadline`; what is left then is dropped.
    pub(crate) async fn finish(self, deadline: Duration) {
        self.finish.cancel();
        let mut task = self.task;
        if tokio::time::timeout(deadline, &mut task).await.is_err() {
            task.abort();
            // What the task held is dropped with it.
            self.stats.held.store(0, Ordering::Relaxed);
            tracing::warn!(
                ?deadline,
                "trace export did not finish within its deadline; the spans left were dropped"
            );
        }
    }
}

/// Takes batches off the queue and exports them until finished; then exports what is left.
async fn export_loop<E: SpanExporter>(
    mut rx: mpsc::Receiver<SpanData>,
    exporter: E,
    settings: BatchSettings,
    stats: Arc<ExportStats>,
    finish: CancellationToken,
) {
    let mut batch = Vec::with_capacity(settings.max_batch);
    loop {
        let first = tokio::select! {
            span = rx.recv() => span,
            () = finish.cancelled() => None,
        };
        let Some(first) = first else { break };
        batch.push(first);
        let full_by = tokio::time::Instant::now() + settings.delay;
        while batch.len() < settings.max_batch {
            tokio::select! {
                span = rx.recv() => match span {
                    Some(span) => batch.push(span),
                    None => break,
                },
                () = tokio::time::sleep_until(full_by) => break,
                () = finish.cancelled() => break,
            }
        }
        export(&exporter, &mut batch, settings.export_timeout, &stats).await;
    }
    // Finishing: no new spans are recorded; send what is queued.
    rx.close();
    while let Ok(span) = rx.try_recv() {
        batch.push(span);
        if batch.len() == settings.max_batch {
            export(&exporter, &mut batch, settings.export_timeout, &stats).await;
        }
    }
    if !batch.is_empty() {
        export(&exporter, &mut batch, settings.export_timeout, &stats).await;
    }
    let _ = exporter.shutdown();
}

/// Exports `batch` (leaving it empty) within `timeout`, counting the outcome.
async fn export<E: SpanExporter>(
    exporter: &E,
    batch: &mut Vec<SpanData>,
    timeout: Duration,
    stats: &ExportStats,
) {
    let spans = std::mem::replace(batch, Vec::with_capacity(batch.capacity()));
    let count = spans.len() as u64;
    let outcome = tokio::time::timeout(timeout, exporter.export(spans)).await;
    stats.held.fetch_sub(count, Ordering::Relaxed);
    match outcome {
        Ok(Ok(())) => {
            stats.exported.fetch_add(count, Ordering::Relaxed);
        }
        Ok(Err(error)) => failed(stats, count, &error),
        Err(_) => failed(stats, count, &format!("no answer within {timeout:?}")),
    }
}

fn failed(stats: &ExportStats, count: u64, error: &dyn std::fmt::Display) {
    stats
        .dropped_export_failed
        .fetch_add(count, Ordering::Relaxed);
    // One line for the first failure, then one per hundred, so that a collector that is down
    // does not flood the log.
    let failures = stats.failed_exports.fetch_add(1, Ordering::Relaxed);
    if failures.is_multiple_of(100) {
        tracing::warn!(%error, spans = count, failures = failures + 1, "trace export failed; spans dropped");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::{
        SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
    };
    use opentelemetry_sdk::error::OTelSdkError;
    use opentelemetry_sdk::trace::{SpanEvents, SpanLinks};
    use std::sync::Mutex;
    use std::time::SystemTime;

    #[derive(Debug, Clone, Default)]
    struct Recorder {
        got: Arc<Mutex<Vec<usize>>>,
        fail: bool,
        stall: bool,
    }

    impl SpanExporter for Recorder {
        async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
            if self.stall {
                std::future::pending::<()>().await;
            }
            if self.fail {
                return Err(OTelSdkError::InternalFailure("down".into()));
            }
            self.got.lock().unwrap().push(batch.len());
            Ok(())
        }
    }

    fn span(sampled: bool) -> SpanData {
        let flags = if sampled {
            TraceFlags::SAMPLED
        } else {
            TraceFlags::default()
        };
        SpanData {
            span_context: SpanContext::new(
                TraceId::from(1u128),
                SpanId::from(2u64),
                flags,
                false,
                TraceState::default(),
            ),
            parent_span_id: SpanId::INVALID,
            parent_span_is_remote: false,
            span_kind: SpanKind::Server,
            name: "test".into(),
            start_time: SystemTime::now(),
            end_time: SystemTime::now(),
            attributes: Vec::new(),
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links: SpanLinks::default(),
            status: Status::Unset,
            instrumentation_scope: Default::default(),
        }
    }

    fn settings(max_queue: usize) -> BatchSettings {
        BatchSettings {
            max_queue,
            max_batch: 4,
            delay: Duration::from_millis(20),
            export_timeout: Duration::from_millis(50),
        }
    }

    #[tokio::test]
    async fn spans_go_out_in_batches_and_the_rest_is_sent_at_finish() {
        let recorder = Recorder::default();
        let (processor, pipeline) = Pipeline::start(recorder.clone(), settings(100));
        for _ in 0..10 {
            processor.on_end(span(true));
        }
        processor.on_end(span(false));
        let stats = Arc::clone(&pipeline.stats);
        assert_eq!(stats.held(), 10, "the unsampled span is not queued");
        pipeline.finish(Duration::from_secs(5)).await;
        assert_eq!(stats.held(), 0, "what went out is no longer held");
        let got = recorder.got.lock().unwrap().clone();
        assert_eq!(got.iter().sum::<usize>(), 10, "{got:?}");
        assert!(got.iter().all(|n| *n <= 4), "{got:?}");
    }

    #[tokio::test]
    async fn a_stalled_collector_costs_dropped_spans_not_memory_or_waiting() {
        let recorder = Recorder {
            stall: true,
            ..Recorder::default()
        };
        let (processor, pipeline) = Pipeline::start(recorder, settings(8));
        let stats = Arc::clone(&pipeline.stats);
        let started = std::time::Instant::now();
        for _ in 0..1000 {
            processor.on_end(span(true));
        }
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "on_end never waits"
        );
        // At most the queue and one batch in flight are held; the rest were dropped at once.
        assert!(stats.dropped_queue_full() >= 1000 - 8 - 4, "{stats:?}");
        assert!((8..=12).contains(&stats.held()), "{stats:?}");
        assert_eq!(stats.budget_bytes(), 12 * SPAN_BYTES);
        assert!(stats.held_bytes() <= stats.budget_bytes());
        pipeline.finish(Duration::from_secs(5)).await;
        assert_eq!(stats.exported(), 0);
        assert_eq!(stats.dropped(), 1000, "{stats:?}");
        assert_eq!(stats.held(), 0, "what the aborted task held is gone");
    }

    #[test]
    fn a_span_costs_no_more_than_its_estimate_before_its_attributes() {
        assert!(
            std::mem::size_of::<SpanData>() as u64 <= SPAN_BYTES / 2,
            "SpanData is {} bytes",
            std::mem::size_of::<SpanData>()
        );
    }

    #[tokio::test]
    async fn a_failed_export_drops_and_counts_its_batch() {
        let recorder = Recorder {
            fail: true,
            ..Recorder::default()
        };
        let (processor, pipeline) = Pipeline::start(recorder, settings(100));
        let stats = Arc::clone(&pipeline.stats);
        for _ in 0..6 {
            processor.on_end(span(true));
        }
        pipeline.finish(Duration::from_secs(5)).await;
        assert_eq!(stats.dropped_export_failed(), 6);
        assert!(stats.failed_exports() >= 2);
    }
}
