//! The two create APIs and the redirect edge, as a client sees them: each answer is classified
//! as acknowledged, refused (nothing can have been stored) or indeterminate.

use crate::history::{Outcome, ReadOutcome, Transport};
use crate::system::Topology;
use crate::workload::classify_redirect;
use proto::shortener::v1::CreateLinkRequest;
use proto::shortener::v1::links_client::LinksClient;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tonic::transport::{Channel, Endpoint};

/// The deadline of one create, whatever the transport.
pub const CREATE_DEADLINE: Duration = Duration::from_secs(5);
/// The deadline of one redirect.
pub const READ_DEADLINE: Duration = Duration::from_secs(3);
/// The message prefix of the fail-fast refusal when a node has no IDs in hand.
const OUT_OF_IDS: &str = "no IDs in hand";

/// What to create.
#[derive(Debug, Clone)]
pub struct CreateRequest {
    /// Target URL.
    pub url: String,
    /// Custom alias.
    pub alias: Option<String>,
    /// Dedup flag.
    pub dedup: bool,
    /// Private flag.
    pub private: bool,
    /// Idempotency key.
    pub idempotency_key: Option<String>,
}

/// HTTP and gRPC clients for every node; clones share connections.
#[derive(Clone)]
pub struct Clients {
    topology: Arc<Topology>,
    http: reqwest::Client,
    channels: Arc<Mutex<HashMap<usize, (SocketAddr, Channel)>>>,
    bearer: String,
}

impl Clients {
    /// Clients for the nodes of `topology`, authenticating with `api_key`.
    pub fn new(topology: Arc<Topology>, api_key: &str) -> Self {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .pool_max_idle_per_host(16)
            .build()
            .expect("build the HTTP client");
        Self {
            topology,
            http,
            channels: Arc::new(Mutex::new(HashMap::new())),
            bearer: format!("Bearer {api_key}"),
        }
    }

    /// Sends one create to `node` and classifies the answer.
    pub async fn create(
        &self,
        node: usize,
        transport: Transport,
        request: &CreateRequest,
    ) -> Outcome {
        match transport {
            Transport::Http => self.create_http(node, request).await,
            Transport::Grpc => self.create_grpc(node, request).await,
        }
    }

    async fn create_http(&self, node: usize, request: &CreateRequest) -> Outcome {
        let endpoint = self.topology.node(node);
        let mut body = serde_json::json!({ "url": request.url });
        if let Some(alias) = &request.alias {
            body["alias"] = alias.clone().into();
        }
        if request.dedup {
            body["dedup"] = true.into();
        }
        if request.private {
            body["private"] = true.into();
        }
        let mut builder = self
            .http
            .post(format!("http://{}/api/v1/links", endpoint.http))
            .header("authorization", &self.bearer)
            .timeout(CREATE_DEADLINE)
            .json(&body);
        if let Some(key) = &request.idempotency_key {
            builder = builder.header("idempotency-key", key);
        }
        let response = match builder.send().await {
            Ok(response) => response,
            Err(e) => return transport_error(&e),
        };
        let status = response.status().as_u16();
        let body: serde_json::Value = match response.json().await {
            Ok(body) => body,
            Err(e) if (200..300).contains(&status) => {
                return Outcome::Indeterminate {
                    reason: format!("{status} with an unreadable body: {e}"),
                };
            }
            Err(_) => serde_json::Value::Null,
        };
        let field = |name: &str| body[name].as_str().unwrap_or_default().to_string();
        match status {
            200 | 201 => Outcome::Acked {
                code: field("code"),
                url: field("url"),
            },
            400..=499 => Outcome::Refused {
                reason: format!("{status} {}", field("error")),
                out_of_ids: false,
            },
            503 if field("message").starts_with(OUT_OF_IDS) => Outcome::Refused {
                reason: format!("503 {}: {}", field("error"), field("message")),
                out_of_ids: true,
            },
            // A store failure may come after the commit reached the server: unknown.
            _ => Outcome::Indeterminate {
                reason: format!("{status} {}: {}", field("error"), field("message")),
            },
        }
    }

    fn channel(&self, node: usize) -> Channel {
        let addr = self.topology.node(node).grpc;
        let mut channels = self.channels.lock().expect("channel cache lock");
        match channels.get(&node) {
            Some((cached, channel)) if *cached == addr => channel.clone(),
            _ => {
                let channel = Endpoint::from_shared(format!("http://{addr}"))
                    .expect("a valid endpoint")
                    .connect_timeout(Duration::from_secs(1))
                    .timeout(CREATE_DEADLINE)
                    .connect_lazy();
                channels.insert(node, (addr, channel.clone()));
                channel
            }
        }
    }

    async fn create_grpc(&self, node: usize, request: &CreateRequest) -> Outcome {
        let mut client = LinksClient::new(self.channel(node));
        let mut grpc_request = tonic::Request::new(CreateLinkRequest {
            url: request.url.clone(),
            alias: request.alias.clone(),
            expires_at: None,
            dedup: request.dedup,
            private: request.private,
            idempotency_key: request.idempotency_key.clone(),
            ..Default::default()
        });
        grpc_request.set_timeout(CREATE_DEADLINE);
        grpc_request.metadata_mut().insert(
            "authorization",
            self.bearer.parse().expect("the API key is header-safe"),
        );
        let result = tokio::time::timeout(
            CREATE_DEADLINE + Duration::from_millis(500),
            client.create_link(grpc_request),
        )
        .await;
        let status = match result {
            Err(_) => {
                return Outcome::Indeterminate {
                    reason: "grpc: client deadline".into(),
                };
            }
            Ok(Ok(response)) => {
                let link = response.into_inner();
                return Outcome::Acked {
                    code: link.code,
                    url: link.url,
                };
            }
            Ok(Err(status)) => status,
        };
        classify_status(&status)
    }

    /// Checks with an invalid create whether node 0 serves `shortener.v1.Links` at all:
    /// false for UNIMPLEMENTED or nothing listening on its gRPC port.
    pub async fn grpc_available(&self) -> bool {
        let request = CreateRequest {
            url: String::new(),
            alias: None,
            dedup: false,
            private: false,
            idempotency_key: None,
        };
        match self.create_grpc(0, &request).await {
            Outcome::Refused { reason, .. } => {
                !reason.contains("Unimplemented") && !reason.contains("not delivered")
            }
            _ => true,
        }
    }

    /// Reads `code` through `node`'s redirect edge and checks it points at `url`.
    pub async fn redirect(&self, node: usize, code: &str, url: &str) -> ReadOutcome {
        let endpoint = self.topology.node(node);
        match self
            .http
            .get(format!("http://{}/{code}", endpoint.http))
            .timeout(READ_DEADLINE)
            .send()
            .await
        {
            Ok(response) => {
                let location = response
                    .headers()
                    .get("location")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string);
                classify_redirect(response.status().as_u16(), location.as_deref(), url)
            }
            Err(e) => ReadOutcome::Failed(e.to_string()),
        }
    }
}

fn transport_error(e: &reqwest::Error) -> Outcome {
    if e.is_connect() {
        // No connection, so no request reached a server.
        Outcome::Refused {
            reason: format!("not delivered: {e}"),
            out_of_ids: false,
        }
    } else {
        Outcome::Indeterminate {
            reason: format!("http: {e}"),
        }
    }
}

/// Classifies a gRPC error status.
pub fn classify_status(status: &tonic::Status) -> Outcome {
    use tonic::Code;
    let reason = format!("{:?}: {}", status.code(), status.message());
    match status.code() {
        Code::InvalidArgument
        | Code::AlreadyExists
        | Code::NotFound
        | Code::FailedPrecondition
        | Code::Unauthenticated
        | Code::PermissionDenied
        | Code::ResourceExhausted
        | Code::Unimplemented => Outcome::Refused {
            reason,
            out_of_ids: false,
        },
        Code::Unavailable if status.message().starts_with(OUT_OF_IDS) => Outcome::Refused {
            reason,
            out_of_ids: true,
        },
        // tonic reports a failed connection as UNAVAILABLE before any request was sent.
        Code::Unavailable if is_connect_failure(status) => Outcome::Refused {
            reason: format!("not delivered: {reason}"),
            out_of_ids: false,
        },
        _ => Outcome::Indeterminate { reason },
    }
}

fn is_connect_failure(status: &tonic::Status) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(status);
    while let Some(error) = source {
        if let Some(io) = error.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::ConnectionRefused
        {
            return true;
        }
        source = error.source();
    }
    status.message().contains("tcp connect error")
}
