//! The public HTTP listener: redirects at the edge and the JSON API.

mod api;
mod edge;
mod error;
pub mod serve;

pub use error::ApiError;

use crate::auth::ApiKeys;
use crate::limits::{ClientAddressPolicy, Limits};
use crate::metrics::Metrics;
use crate::service::LinkService;
use axum::Router;
use axum::body::Body;
use axum::extract::{ConnectInfo, State};
use axum::http::{Method, Request, StatusCode};
use axum::response::Response;
use axum::routing::get;
use hyper::body::Incoming;
use std::net::SocketAddr;
use std::sync::Arc;
use tower::ServiceExt;

/// What the HTTP handlers share.
#[derive(Clone)]
pub struct HttpState {
    /// The link service.
    pub service: Arc<LinkService>,
    /// Accepted API keys.
    pub keys: Arc<ApiKeys>,
    /// The status of redirects (301, 302, 307 or 308).
    pub redirect_status: StatusCode,
    /// Rate limits.
    pub limits: Arc<Limits>,
    /// How to find the client address.
    pub client_policy: Arc<ClientAddressPolicy>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
}

/// The handlers' shared state behind one `Arc`, so each request clones one pointer rather than
/// one per field.
#[derive(Clone)]
pub struct Shared(Arc<HttpState>);

impl std::ops::Deref for Shared {
    type Target = HttpState;
    fn deref(&self) -> &HttpState {
        &self.0
    }
}

/// The public listener's request handling: plain `GET|HEAD /{code}` requests, the bulk of the
/// traffic, go straight to the redirect edge, and `POST /api/v1/links` straight to the create
/// handler; everything else through the axum router.
#[derive(Clone)]
pub struct Edge {
    state: Shared,
    router: Router,
}

impl Edge {
    /// Handling for the public listener over `state`.
    pub fn new(state: HttpState) -> Self {
        let state = Shared(Arc::new(state));
        Self {
            router: router(state.clone()),
            state,
        }
    }

    /// Answers `request` from `peer` at once when no store read is needed: a plain
    /// `GET|HEAD /{code}` whose code is cached (or cannot be a code). `None`: call
    /// [`Edge::handle`].
    pub fn handle_cached(&self, peer: SocketAddr, request: &Request<Incoming>) -> Option<Response> {
        let code = edge::direct_code(request)?;
        edge::answer_cached(&self.state, peer, code, request.method(), request.headers())
    }

    /// Answers one request from `peer`.
    pub async fn handle(&self, peer: SocketAddr, mut request: Request<Incoming>) -> Response {
        if let Some(code) = edge::direct_code(&request) {
            return edge::answer(&self.state, peer, code, request.method(), request.headers())
                .await;
        }
        if request.method() == Method::POST && request.uri().path() == CREATE_PATH {
            // The route the router would pick, without its matching and boxed futures.
            return api::create(State(self.state.clone()), request.map(Body::new)).await;
        }
        request.extensions_mut().insert(ConnectInfo(peer));
        match self.router.clone().oneshot(request.map(Body::new)).await {
            Ok(response) => response,
            Err(never) => match never {},
        }
    }
}

/// Where links are created.
const CREATE_PATH: &str = "/api/v1/links";

fn router(state: Shared) -> Router {
    Router::new()
        .route(
            CREATE_PATH,
            axum::routing::post(api::create).fallback(api::method_not_allowed),
        )
        .route(
            "/api/v1/links/{code}",
            get(api::get)
                .delete(api::delete)
                .fallback(api::method_not_allowed),
        )
        .route("/api/v1/openapi.json", get(openapi))
        .route("/api/{*rest}", axum::routing::any(api::not_found))
        .route("/{code}", get(edge::redirect))
        .fallback(edge::fallback)
        .with_state(state)
}

/// The OpenAPI 3 description of the JSON API.
pub const OPENAPI: &str = include_str!("openapi.json");

async fn openapi() -> impl axum::response::IntoResponse {
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        OPENAPI,
    )
}
