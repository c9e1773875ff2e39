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
use std::time::{Duration, Instant};
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
    /// then on an outage of the id-service leaves the node ready, and one of the store does
    /// for [`OpsState::store_grace`] ([`readyz`]).
    pub seen_ready: Arc<AtomicBool>,
    /// When a readiness check last found the store answering.
    pub store_answered: Arc<std::sync::Mutex<Option<Instant>>>,
    /// How long after the store last answered a node stays ready without it: the redirect
    /// cache's lifetime (`SHORTENER_CACHE_TTL`), past which its cached links are read again and
    /// it has nothing left to serve.
    pub store_grace: Duration,
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

/// How long a readiness check waits for the store: a database that drops packets is an outage
/// too, said before the probe's own deadline passes.
const PING_WITHIN: Duration = Duration::from_secs(1);

/// Not ready while shutting down, or while the store fails for a reason of this node's own
/// (a failed fsync of the embedded store, which only a restart clears). Otherwise ready once
/// the store has answered and an ID block has been in hand, and then:
///
/// - through an outage of the id-service (or IDs used up): ready, since every redirect still
///   answers and every node meets the outage alike;
/// - through an outage of the store: ready for [`OpsState::store_grace`] after it last
///   answered, while the cached links answer. A failover or a blip of the database meets every
///   node at once, and taking them all out of their load balancer would take away the redirects
///   they still serve; past the grace a node has nothing left to serve, and one cut off from
///   the database on its own is taken out rather than answering 503 to its share of traffic.
///
/// A degraded node says so in the body (`ready, degraded: ...`). A node that has never been
/// ready (a wrong token, a database it cannot reach at start) stays out, so a broken rollout
/// stops at its first pod.
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
    let seen = state.seen_ready.load(Ordering::SeqCst);
    let mut outages = Vec::new();
    let pinged = tokio::time::timeout(PING_WITHIN, state.store.ping())
        .await
        .unwrap_or_else(|_| {
            Err(StoreError::Unavailable(format!(
                "no answer within {PING_WITHIN:?}"
            )))
        });
    let mut answered = state
        .store_answered
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    match pinged {
        Ok(()) => *answered = Some(Instant::now()),
        Err(e @ StoreError::Unavailable(_)) => {
            let since = answered.map(|at| at.elapsed());
            match since {
                Some(since) if seen && since < state.store_grace => outages.push(format!(
                    "store: {e} (cached links answer for up to {}s more)",
                    (state.store_grace - since).as_secs()
                )),
                Some(since) if seen => {
                    return not_ready(format!(
                        "store: {e} (for {}s, past the cache's lifetime, SHORTENER_CACHE_TTL)",
                        since.as_secs()
                    ));
                }
                _ => outages.push(format!("store: {e}")),
            }
        }
        Err(e) => return not_ready(format!("store: {e}")),
    }
    drop(answered);
    if !state.ids.is_ready() {
        outages.push(state.ids.shortage());
    }
    if outages.is_empty() {
        state.seen_ready.store(true, Ordering::SeqCst);
        (StatusCode::OK, "ready\n").into_response()
    } else if seen {
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
