//! The public HTTP listener: redirects at the edge and the JSON API.
//!
//! [`PublicService`] is what the accept loop ([`serve`]) hands each request to: plain
//! `GET|HEAD /{code}` requests, the bulk of the traffic, go straight to the redirect edge
//! ([`redirect`]), `POST /api/v1/links` straight to the create handler (`api`), and everything
//! else through the axum router. Domain errors become responses in one place ([`ApiError`]).

mod api;
mod body;
pub mod branded;
mod compat;
pub mod console;
mod drain;
mod error;
pub mod redirect;
pub mod serve;
pub mod signin;
pub mod site;
mod tracked;

pub use error::ApiError;

use crate::access::Admission;
use crate::domain::{CreateRules, PublicBase};
use crate::limits::{ClientAddressPolicy, Limits};
use crate::links::LinkService;
use crate::metrics::Metrics;
use crate::redirects::Resolver;
use axum::Router;
use axum::body::Body;
use axum::extract::{ConnectInfo, State};
use axum::http::{Method, Request, StatusCode};
use axum::response::Response;
use axum::routing::get;
use hyper::body::Body as _;
use hyper::body::Incoming;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use tower::ServiceExt;

/// What the HTTP handlers share.
pub struct HttpState {
    /// Creates, reads and deletes links.
    pub links: Arc<LinkService>,
    /// Where codes redirect.
    pub resolver: Arc<Resolver>,
    /// Counts visits (totals and rollups).
    pub visits: Arc<crate::visits::Visits>,
    /// Answers stats.
    pub stats: Arc<crate::visits::analytics::StatsService>,
    /// Webhook endpoints.
    pub webhooks: Arc<crate::webhooks::Webhooks>,
    /// Admits API requests.
    pub admission: Arc<Admission>,
    /// What a create must pass.
    pub rules: CreateRules,
    /// The base of short URLs.
    pub public: PublicBase,
    /// The status of redirects (301, 302, 307 or 308).
    pub redirect_status: StatusCode,
    /// The status of links to blocked domains (403, 404, 410 or 451).
    pub blocked_status: StatusCode,
    /// The 404 budget per client.
    pub limits: Arc<Limits>,
    /// How to find the client address.
    pub client_policy: ClientAddressPolicy,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Whether the web console is served.
    pub console: bool,
    /// The blocked domains the admin API reads and changes.
    pub blocklist: Arc<crate::targets::BlocklistService>,
    /// The branded domains tenants own.
    pub domains: Arc<crate::domains::DomainService>,
    /// The API keys tenant admins make.
    pub api_keys: Arc<crate::keys::KeyService>,
    /// What a host that is neither the node's own nor a domain gets.
    pub unknown_hosts: crate::config::UnknownHosts,
    /// Redirects per listed branded domain.
    pub domain_metrics: Arc<crate::domains::DomainMetrics>,
    /// The other shorteners' APIs the node speaks (`compat`).
    pub compat: crate::config::Dialects,
    /// The browser origins that may call the dialects (`SHORTENER_COMPAT_CORS_ORIGINS`).
    pub compat_cors: crate::config::CorsOrigins,
    /// The secret the keys' YOURLS tokens are derived under (the YOURLS dialect's timestamp
    /// signatures).
    pub yourls_tokens: crate::access::YourlsTokens,
    /// The audit log (`GET /api/v1/audit` reads it).
    pub audit: Arc<crate::audit::AuditLog>,
    /// Single sign-on to the console, when configured.
    pub signin: Option<Arc<crate::signin::SignIn>>,
}

/// The public listener's request handling. Cheap to clone.
#[derive(Clone)]
pub struct PublicService {
    state: Arc<HttpState>,
    router: Router,
}

impl serve::Handler for PublicService {
    fn handle_now(&self, peer: SocketAddr, request: &Request<Incoming>) -> Option<Response> {
        self.handle_cached(peer, request)
    }

    async fn handle(&self, peer: SocketAddr, request: Request<Incoming>) -> Response {
        PublicService::handle(self, peer, request).await
    }
}

impl PublicService {
    /// Handling for the public listener over `state`.
    pub fn new(state: HttpState) -> Self {
        let state = Arc::new(state);
        Self {
            router: router(Arc::clone(&state)),
            state,
        }
    }

    /// Answers `request` from `peer` at once when no store read is needed: a plain
    /// `GET|HEAD /{code}` whose code is cached (or cannot be a code). `None`: call
    /// [`PublicService::handle`].
    pub fn handle_cached(&self, peer: SocketAddr, request: &Request<Incoming>) -> Option<Response> {
        let code = redirect::direct_code(request)?;
        redirect::answer_cached(&self.state, peer, code, request)
    }

    /// Answers one request from `peer`.
    pub async fn handle(&self, peer: SocketAddr, request: Request<Incoming>) -> Response {
        if let Some(code) = redirect::direct_code(&request) {
            let (method, uri, headers) = (request.method(), request.uri(), request.headers());
            return redirect::answer(&self.state, peer, code, method, uri, headers).await;
        }
        // A request whose body is refused unread (a bad key is refused before the body is
        // read) cannot share its connection with the next request: say so, so that clients
        // do not send the next one on a connection the server is about to close.
        let client = self.state.client_policy.address(peer, request.headers());
        crate::audit::with_client(client, self.handle_api(peer, request)).await
    }

    /// Answers a request that is not a plain redirect (the API, the console, the dialects),
    /// within which [`crate::audit::client`] is its client address.
    async fn handle_api(&self, peer: SocketAddr, request: Request<Incoming>) -> Response {
        let read = Arc::new(AtomicBool::new(request.body().is_end_stream()));
        let request = request.map(|body| {
            Body::new(tracked::Tracked {
                inner: body,
                read: Arc::clone(&read),
            })
        });
        // A JSON API request made with a console session (no API key) runs with the session's
        // caller in force, once its anti-CSRF checks pass.
        let api = request.uri().path().starts_with("/api/v1/");
        let session = if api {
            signin::api_session(&self.state, request.method(), request.headers()).await
        } else {
            None
        };
        let mut response = match session {
            Some(Err(refused)) => refused,
            Some(Ok(caller)) => {
                Box::pin(signin::session_scope(caller, self.route(peer, request))).await
            }
            None => self.route(peer, request).await,
        };
        tracked::finish(&mut response, &read, api);
        response
    }
}

impl PublicService {
    /// Answers a request that is no plain redirect: the create fast path, or the router.
    async fn route(&self, peer: SocketAddr, request: Request<Body>) -> Response {
        if request.method() == Method::POST && request.uri().path() == CREATE_PATH {
            // The route the router would pick, without its matching. Boxed: a create's future
            // is kilobytes large, and without the box every request's future (which the
            // server moves into a box of its own) would be as large. Boxed before the span
            // wraps it, so that the wrapping moves a pointer and not the future itself.
            let span = otel::http::server_span(&Method::POST, CREATE_PATH, request.headers());
            let create = Box::pin(api::create(State(Arc::clone(&self.state)), request));
            otel::http::answer_in(span, create).await
        } else {
            let mut request = request;
            request.extensions_mut().insert(ConnectInfo(peer));
            match self.router.clone().oneshot(request).await {
                Ok(response) => response,
                Err(never) => match never {},
            }
        }
    }
}

/// Where links are created.
const CREATE_PATH: &str = "/api/v1/links";

/// A server span for each JSON API request, named after its route template, when tracing is
/// on (see the `otel` crate).
async fn trace_api(
    route: axum::extract::MatchedPath,
    request: Request<Body>,
    next: axum::middleware::Next,
) -> Response {
    if !otel::enabled() {
        return next.run(request).await;
    }
    let span = otel::http::server_span(request.method(), route.as_str(), request.headers());
    otel::http::answer_in(span, next.run(request)).await
}

fn router(state: Arc<HttpState>) -> Router {
    let router = if state.console {
        Router::new()
            .route("/console/", get(console::page))
            .route("/console/assets/{digest}/{file}", get(console::asset))
            .route("/console/oidc/login", get(signin::login))
            .route("/console/oidc/callback", get(signin::callback))
            .route(
                "/console/oidc/logout",
                axum::routing::post(signin::logout).fallback(api::method_not_allowed),
            )
            .route("/console/session", get(signin::whoami))
            .route(
                "/console/session/tenant",
                axum::routing::post(signin::switch_tenant).fallback(api::method_not_allowed),
            )
            .route_layer(axum::middleware::map_response_with_state(
                state.public.https(),
                console::strict_transport,
            ))
            // Refusals too (a missing anti-CSRF token, sign-in off, a spent 404 budget).
            .route_layer(axum::middleware::map_response(console::secure))
    } else {
        Router::new()
    };
    router
        .merge(api_router())
        .route(
            "/console",
            get(console_home).fallback(api::method_not_allowed),
        )
        .route("/", get(branded::root).fallback(api::method_not_allowed))
        // Fixed files (no code can hold their paths); other methods are refused as on `/`.
        .route(
            branded::ROBOTS_PATH,
            get(branded::robots).fallback(api::method_not_allowed),
        )
        .route(
            branded::AASA_PATH,
            get(branded::apple_app_site_association).fallback(api::method_not_allowed),
        )
        .route(
            branded::ASSETLINKS_PATH,
            get(branded::assetlinks).fallback(api::method_not_allowed),
        )
        .merge(compat::router(state.compat, state.compat_cors.clone()))
        .route("/{code}", get(redirect::redirect).post(redirect::unlock))
        .fallback(redirect::fallback)
        .with_state(state)
}

/// The JSON API's routes, each request in a server span when tracing is on.
fn api_router() -> Router<Arc<HttpState>> {
    Router::new()
        .route("/api/v1/me", get(api::me).fallback(api::method_not_allowed))
        .route(
            "/api/v1/admin/blocklist",
            get(api::blocklist)
                .post(api::block)
                .fallback(api::method_not_allowed),
        )
        .route(
            "/api/v1/admin/blocklist/{domain}",
            axum::routing::delete(api::unblock).fallback(api::method_not_allowed),
        )
        .route(
            CREATE_PATH,
            axum::routing::post(api::create)
                .get(api::list)
                .fallback(api::method_not_allowed),
        )
        // Static segments win over `{code}`: `import` and `export` are reserved words, which
        // no alias can take.
        .route(
            "/api/v1/links/import",
            axum::routing::post(api::import).fallback(api::method_not_allowed),
        )
        .route(
            "/api/v1/links/export",
            get(api::export).fallback(api::method_not_allowed),
        )
        .route(
            "/api/v1/links/{code}",
            get(api::get)
                .patch(api::update)
                .delete(api::delete)
                .fallback(api::method_not_allowed),
        )
        .route(
            "/api/v1/links/{code}/history",
            get(api::history).fallback(api::method_not_allowed),
        )
        .route(
            "/api/v1/webhooks",
            get(api::webhooks)
                .post(api::register_webhook)
                .fallback(api::method_not_allowed),
        )
        .route(
            "/api/v1/webhooks/{id}",
            axum::routing::delete(api::delete_webhook)
                .patch(api::update_webhook)
                .fallback(api::method_not_allowed),
        )
        .route(
            "/api/v1/webhooks/{id}/deliveries",
            get(api::webhook_deliveries).fallback(api::method_not_allowed),
        )
        .route(
            "/api/v1/webhooks/{id}/deliveries/retry",
            axum::routing::post(api::retry_webhook_deliveries).fallback(api::method_not_allowed),
        )
        .route(
            "/api/v1/links/{code}/stats",
            get(api::link_stats).fallback(api::method_not_allowed),
        )
        .route(
            "/api/v1/tags/{tag}",
            axum::routing::patch(api::rename_tag)
                .delete(api::delete_tag)
                .fallback(api::method_not_allowed),
        )
        .route(
            "/api/v1/stats",
            get(api::tenant_stats).fallback(api::method_not_allowed),
        )
        .route(
            "/api/v1/links/{code}/qr",
            get(api::qr).fallback(api::method_not_allowed),
        )
        .route(
            "/api/v1/domains",
            get(api::domains)
                .post(api::claim_domain)
                .fallback(api::method_not_allowed),
        )
        .route(
            "/api/v1/domains/{host}",
            get(api::domain)
                .patch(api::update_domain)
                .delete(api::delete_domain)
                .fallback(api::method_not_allowed),
        )
        .route(
            "/api/v1/keys",
            get(api::api_keys)
                .post(api::create_api_key)
                .fallback(api::method_not_allowed),
        )
        .route(
            "/api/v1/audit",
            get(api::audit).fallback(api::method_not_allowed),
        )
        .route(
            "/api/v1/keys/{name}",
            axum::routing::delete(api::revoke_api_key).fallback(api::method_not_allowed),
        )
        .route("/api/v1/openapi.json", get(openapi))
        .route("/api/{*rest}", axum::routing::any(api::not_found))
        .route_layer(axum::middleware::from_fn(trace_api))
}

/// The first path segments the public listener routes itself; each is a reserved word, so no
/// code can be served where a route is (checked by a test). `rest` and `v4` are Shlink's and
/// Bitly's: a bare `/rest` is the dialect's 404 in its own shape when it is spoken.
pub const FIXED_SEGMENTS: &[&str] = &["api", "console", "rest", "v4"];

/// The single-segment files the public listener routes itself (a branded domain's
/// `robots.txt`; YOURLS's `yourls-api.php`, answered 404 unless that dialect is spoken): each
/// holds a `.`, which no code of any shape or import holds, and the redirect edge's fast path
/// hands them to the router (checked by a test). `/.well-known/...` is two segments, never the
/// fast path's, and its first holds a `.` too.
pub const FIXED_FILES: &[&str] = &["robots.txt", compat::yourls::PATH_FILE];

/// `GET /console`: the console's page (at `/console/`) when it is served, else a 404.
async fn console_home(State(state): State<Arc<HttpState>>) -> axum::response::Response {
    use axum::response::IntoResponse;
    if state.console {
        axum::response::Redirect::permanent("/console/").into_response()
    } else {
        api::not_found().await.into_response()
    }
}

/// `GET /` on the node's own hosts (and hosts that are no domain, or a domain without a
/// `root_url`): the console, when it is served (a person who types the short domain lands
/// somewhere useful), else a 404.
fn default_root(state: &HttpState) -> axum::response::Response {
    use axum::response::IntoResponse;
    if state.console {
        axum::response::Redirect::to("/console/").into_response()
    } else {
        api::not_found_error().into_response()
    }
}

/// The OpenAPI 3 description of the JSON API.
pub const OPENAPI: &str = include_str!("openapi.json");

async fn openapi() -> impl axum::response::IntoResponse {
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        OPENAPI,
    )
}

#[cfg(test)]
mod fixed_routes;
