//! The operations port (`ID_SERVICE_ADMIN_ADDR`): `/healthz` (live), `/readyz` (ready), `/metrics` (Prometheus text).

use crate::ledger::Ledger;
use crate::metrics::Metrics;
use crate::segments::Segments;
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How long `/readyz` waits for the database.
const READY_PING_TIMEOUT: Duration = Duration::from_secs(1);

/// What the admin handlers read.
#[derive(Clone)]
pub struct OpsState {
    /// The ledger, pinged by `/readyz`.
    pub ledger: Ledger,
    /// The metrics `/metrics` encodes.
    pub metrics: Arc<Metrics>,
    /// The replica's segments, whose IDs in hand `/metrics` reports.
    pub segments: Arc<Segments>,
    /// Cancelled when the replica starts draining: `/readyz` answers 503 from then on.
    pub draining: CancellationToken,
}

/// The admin routes.
pub fn router(state: OpsState) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(state)
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(state): State<OpsState>) -> (StatusCode, &'static str) {
    let (status, body) = if state.draining.is_cancelled() {
        (StatusCode::SERVICE_UNAVAILABLE, "draining\n")
    } else if !state.ledger.ping(READY_PING_TIMEOUT).await {
        (StatusCode::SERVICE_UNAVAILABLE, "no primary reachable\n")
    } else {
        (StatusCode::OK, "ready\n")
    };
    state.metrics.set_ready(status == StatusCode::OK);
    (status, body)
}

async fn metrics(State(state): State<OpsState>) -> impl IntoResponse {
    state.segments.report();
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics.encode(state.ledger.pool()),
    )
}
