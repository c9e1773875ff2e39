//! The operations listener (`SHORTENER_ADMIN_ADDR`): liveness, readiness and Prometheus
//! metrics.

use crate::metrics::Metrics;
use crate::store::{Capabilities, Store};
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

/// Ready when the node accepts traffic, the store answers and an ID block is in hand.
async fn readyz(State(state): State<OpsState>) -> Response {
    let mut problems = Vec::new();
    if !state.accepting.load(Ordering::SeqCst) {
        problems.push("shutting down".to_string());
    }
    if let Err(e) = state.store.ping().await {
        problems.push(format!("store: {e}"));
    }
    if !state.ids.is_ready() {
        problems.push(state.ids.shortage());
    }
    if problems.is_empty() {
        (StatusCode::OK, "ready\n").into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {}\n", problems.join("; ")),
        )
            .into_response()
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
