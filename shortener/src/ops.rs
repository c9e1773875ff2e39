//! The operations listener (`SHORTENER_ADMIN_ADDR`): liveness, readiness and Prometheus
//! metrics.

use crate::metrics::Metrics;
use crate::store::{Capabilities, Store, StoreError};
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use hyper::body::Incoming;
use id_client::IdPool;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tower::ServiceExt;

/// What the admin handlers share.
#[derive(Clone)]
pub struct OpsState {
    /// The store, which must answer.
    pub store: Store,
    /// The ID pool, which must hold a block.
    pub ids: Arc<IdPool>,
    /// Cleared first on shutdown, so load balancers stop sending traffic before the drain.
    pub accepting: Arc<AtomicBool>,
    /// The metrics registry.
    pub metrics: Arc<Metrics>,
    /// Set the first time readiness found the store answering and an ID block in hand; from
    /// then on a dependency's outage leaves the node ready ([`readyz`]).
    pub seen_ready: Arc<AtomicBool>,
}

/// The admin listener's handling: every request through the router.
pub struct OpsService(Router);

impl OpsService {
    /// Handling over `state`.
    pub fn new(state: OpsState) -> Self {
        Self(router(state))
    }
}

impl crate::http::serve::Handler for OpsService {
    fn handle_now(&self, _: SocketAddr, _: &hyper::Request<Incoming>) -> Option<Response> {
        None
    }

    async fn handle(&self, _: SocketAddr, request: hyper::Request<Incoming>) -> Response {
        match self
            .0
            .clone()
            .oneshot(request.map(axum::body::Body::new))
            .await
        {
            Ok(response) => response,
            Err(never) => match never {},
        }
    }
}

/// The admin router.
pub fn router(state: OpsState) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(state)
}

/// Not ready while shutting down, or while the store fails for a reason of this node's own
/// (a failed fsync of the embedded store, which only a restart clears). Otherwise ready once
/// the store has answered and an ID block has been in hand, and from then on: an outage of the
/// database or of the id-service meets every node alike, and taking them all out of their load
/// balancer would also take away what they still serve (cached redirects, and through an
/// id-service outage the creates their IDs in hand allow). Such an outage is said in the body (`ready,
/// degraded: ...`) and seen in the metrics and alerts; a node that has never been ready (a
/// wrong token, a database it cannot reach at start) stays out, so a broken rollout stops at
/// its first pod.
async fn readyz(State(state): State<OpsState>) -> Response {
    let not_ready = |why: String| {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {why}\n"),
        )
            .into_response()
    };
    if !state.accepting.load(Ordering::SeqCst) {
        return not_ready("shutting down".into());
    }
    let mut outages = Vec::new();
    match state.store.ping().await {
        Ok(()) => {}
        Err(e @ StoreError::Unavailable(_)) => outages.push(format!("store: {e}")),
        Err(e) => return not_ready(format!("store: {e}")),
    }
    if !state.ids.is_ready() {
        outages.push(state.ids.shortage());
    }
    if outages.is_empty() {
        state.seen_ready.store(true, Ordering::SeqCst);
        (StatusCode::OK, "ready\n").into_response()
    } else if state.seen_ready.load(Ordering::SeqCst) {
        let body = format!("ready, degraded: {}\n", outages.join("; "));
        (StatusCode::OK, body).into_response()
    } else {
        not_ready(outages.join("; "))
    }
}

async fn metrics(State(state): State<OpsState>) -> Response {
    let body = state.metrics.render();
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        body,
    )
        .into_response()
}
