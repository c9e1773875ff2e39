//! Settings of one part of the node (`Listeners and connections` in `--help`).

use super::ConfigError;
use super::Listen;
use clap::Args;
use std::net::SocketAddr;
use std::num::{NonZeroU32, NonZeroU64, NonZeroUsize};

/// The listeners and how connections to them are bounded.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Listeners and connections")]
pub struct ListenerConfig {
    /// Public HTTP listener: redirects (`GET /{code}`) and the JSON API (`/api/v1/...`).
    /// Loopback by default: set `0.0.0.0:8080` to serve other machines (the container image
    /// and the manifests do).
    #[arg(long, env = "SHORTENER_HTTP_ADDR", default_value = "127.0.0.1:8080", value_parser = super::listen_addr)]
    pub http_addr: SocketAddr,
    /// Internal gRPC listener (`shortener.v1.Links`, health, reflection), or `off`.
    #[arg(long, env = "SHORTENER_GRPC_ADDR", default_value = "127.0.0.1:50052")]
    pub grpc_addr: Listen,
    /// Admin listener: `/healthz`, `/readyz`, `/metrics`; or `off` (embedded mode only: a
    /// distributed node needs its probes).
    #[arg(long, env = "SHORTENER_ADMIN_ADDR", default_value = "127.0.0.1:9090")]
    pub admin_addr: Listen,
    /// The public base URL of short links (default: `http://<http addr>/`).
    #[arg(long, env = "SHORTENER_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// Other domains this deployment's short links are served under, comma-separated; refused
    /// as targets with their subdomains, as the public URL's host is.
    #[arg(long, env = "SHORTENER_SHORT_DOMAINS", value_delimiter = ',')]
    pub short_domains: Vec<String>,
    /// Seconds to drain in-flight requests on SIGTERM.
    #[arg(long, env = "SHORTENER_DRAIN_TIMEOUT", default_value_t = 20, value_parser = super::units::seconds::<u64>)]
    pub drain_timeout: u64,
    /// Seconds between SIGTERM and the drain, during which readiness is off while every
    /// listener still serves, so that a load balancer's health checks take the node out first
    /// (0 where something else waits, such as a Kubernetes preStop pause).
    #[arg(long, env = "SHORTENER_SHUTDOWN_DELAY", default_value_t = 0, value_parser = super::units::seconds::<u64>)]
    pub shutdown_delay: u64,
    /// Seconds a client has to send its request headers.
    #[arg(long, env = "SHORTENER_HEADER_READ_TIMEOUT", default_value = "10", value_parser = super::units::seconds::<NonZeroU64>)]
    pub header_read_timeout: NonZeroU64,
    /// A header with the client address chain (e.g. `x-forwarded-for`), trusted only from
    /// SHORTENER_TRUSTED_PROXIES.
    #[arg(long, env = "SHORTENER_CLIENT_IP_HEADER")]
    pub client_ip_header: Option<String>,
    /// Networks of trusted proxies, comma-separated CIDRs (e.g. `10.0.0.0/8`).
    #[arg(long, env = "SHORTENER_TRUSTED_PROXIES", value_delimiter = ',')]
    pub trusted_proxies: Vec<ipnet::IpNet>,
    /// IPv6 clients are counted by this many leading bits of their address (one host usually
    /// holds a whole /64), for the 404 budget and the connection caps.
    #[arg(long, env = "SHORTENER_IPV6_PREFIX", default_value_t = 64)]
    pub ipv6_prefix: u8,
    /// Most connections one client address may hold on each listener.
    #[arg(
        long,
        env = "SHORTENER_MAX_CONNECTIONS_PER_CLIENT",
        default_value = "256"
    )]
    pub max_connections_per_client: NonZeroUsize,
    /// Open files kept for the public listener alone, so it keeps accepting when the gRPC and
    /// admin listeners are full (0: a quarter of the limit).
    #[arg(long, env = "SHORTENER_PUBLIC_FD_RESERVE", default_value_t = 0)]
    pub public_fd_reserve: u64,
    /// Seconds a gRPC connection may stay without a call before it is closed.
    #[arg(long, env = "SHORTENER_GRPC_IDLE_TIMEOUT", default_value = "300", value_parser = super::units::seconds::<NonZeroU64>)]
    pub grpc_idle_timeout: NonZeroU64,
    /// Most gRPC calls running at once on the node (more get RESOURCE_EXHAUSTED).
    #[arg(long, env = "SHORTENER_GRPC_MAX_IN_FLIGHT", default_value = "1024")]
    pub grpc_max_in_flight: NonZeroUsize,
    /// Most concurrent streams (calls) on one gRPC connection.
    #[arg(long, env = "SHORTENER_GRPC_MAX_STREAMS", default_value = "128")]
    pub grpc_max_streams: NonZeroU32,
    /// Seconds a client may take no bytes of a response (an export, any answer) before its
    /// connection is closed; an export whose reader takes no page for this long ends.
    #[arg(long, env = "SHORTENER_SEND_TIMEOUT", default_value = "30", value_parser = super::units::seconds::<NonZeroU64>)]
    pub send_timeout: NonZeroU64,
}

impl ListenerConfig {
    /// Checks what this section alone can tell; the error names the setting.
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        super::validate::at_most(
            "SHORTENER_DRAIN_TIMEOUT",
            self.drain_timeout,
            86_400,
            "seconds (a day)",
        )?;
        super::validate::at_most(
            "SHORTENER_SHUTDOWN_DELAY",
            self.shutdown_delay,
            3_600,
            "seconds (an hour)",
        )?;
        if !(1..=128).contains(&self.ipv6_prefix) {
            return Err(ConfigError::new(
                "SHORTENER_IPV6_PREFIX",
                format!(
                    "SHORTENER_IPV6_PREFIX must be 1 to 128, not {}",
                    self.ipv6_prefix
                ),
            ));
        }
        if let Some(header) = &self.client_ip_header
            && axum::http::HeaderName::try_from(header.as_str()).is_err()
        {
            return Err(ConfigError::new(
                "SHORTENER_CLIENT_IP_HEADER",
                format!("SHORTENER_CLIENT_IP_HEADER is not a valid header name: {header:?}"),
            ));
        }
        if self.client_ip_header.is_some() && self.trusted_proxies.is_empty() {
            return Err(ConfigError::new(
                "SHORTENER_TRUSTED_PROXIES",
                "SHORTENER_CLIENT_IP_HEADER needs SHORTENER_TRUSTED_PROXIES (whose connections may set it)",
            ));
        }
        if let Some(public) = &self.public_url {
            let url = url::Url::parse(public).map_err(|e| {
                ConfigError::new(
                    "SHORTENER_PUBLIC_URL",
                    format!("SHORTENER_PUBLIC_URL is not a URL: {e}"),
                )
            })?;
            if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
                return Err(ConfigError::new(
                    "SHORTENER_PUBLIC_URL",
                    format!(
                        "SHORTENER_PUBLIC_URL must be an http(s) URL with a host, not {public:?}"
                    ),
                ));
            }
        }
        Ok(())
    }
}
