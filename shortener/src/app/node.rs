//! Wiring: every long-lived part of a node, made once from its configuration and resources,
//! and the state each listener is given.
//!
//! One file of about 510 lines on purpose: it reads in the order a node is made, each part from
//! the ones made before it, and that order is what a change to the wiring must keep; the parts'
//! own logic lives in their modules.

use super::memory::{Accounted, account};
use super::metrics::IdSupply;
use super::resources::{DefaultApiKey, Resources};
use crate::access::Admission;
use crate::audit::AuditLog;
use crate::config::Config;
use crate::domain::{CreateRules, PublicBase, TargetPolicy};
use crate::domains::{DomainMetrics, DomainService};
use crate::grpc::LinksApi;
use crate::http::HttpState;
use crate::limits::{ClientAddressPolicy, Limits};
use crate::links::{Budgets, LinkService};
use crate::metrics::{MemoryGauges, Metrics, Sources};
use crate::net::Gates;
use crate::ops::OpsState;
use crate::redirects::{LinkCache, Resolver};
use crate::store::{Capabilities, Store};
use crate::targets::{BlocklistService, TargetRules};
use crate::visits::Visits;
use crate::visits::analytics::{GeoIp, StatsService};
use crate::webhooks::Webhooks;
use anyhow::Context;
use codespace::CodeSpace;
use id_client::IdPool;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// The parts of a running node. Each is shared by the listeners and tasks that need it; none
/// reaches another through this struct.
pub struct Node {
    /// The link store.
    pub store: Store,
    /// IDs in hand.
    pub ids: Arc<IdPool>,
    /// The code space (key and base length).
    pub space: Arc<CodeSpace>,
    /// The redirect cache.
    pub cache: LinkCache,
    /// Creates, reads and deletes links.
    pub links: Arc<LinkService>,
    /// Where codes redirect.
    pub resolver: Arc<Resolver>,
    /// Pending visit counts (totals and analytics).
    pub visits: Arc<Visits>,
    /// The stats the rollups answer.
    pub stats: Arc<StatsService>,
    /// Webhook endpoints and their deliveries.
    pub webhooks: Arc<Webhooks>,
    /// Rate limits.
    pub limits: Arc<Limits>,
    /// Admits API requests.
    pub admission: Arc<Admission>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// What a create must pass.
    pub rules: CreateRules,
    /// The base of short URLs.
    pub public: PublicBase,
    /// Cleared first on shutdown, so load balancers stop sending traffic before the drain.
    pub accepting: Arc<AtomicBool>,
    /// The API key the node made for itself (embedded mode, no keys configured).
    pub default_api_key: Option<DefaultApiKey>,
    /// Whether the console is served.
    pub console: bool,
    /// The listeners' connection caps.
    pub gates: Gates,
    /// What targets the deployment refuses (and its blocklist, re-read while it runs).
    pub targets: Arc<TargetRules>,
    /// The blocked domains kept in the store, and the file's beside them.
    pub blocklist: Arc<BlocklistService>,
    /// The branded domains tenants own.
    pub domains: Arc<DomainService>,
    /// The API keys tenant admins make, kept in the store.
    pub api_keys: Arc<crate::keys::KeyService>,
    /// Redirects per listed branded domain.
    pub domain_metrics: Arc<DomainMetrics>,
    /// The secret the keys' YOURLS tokens are derived under.
    pub yourls_tokens: crate::access::YourlsTokens,
    /// The audit log every change is recorded in.
    pub audit: Arc<AuditLog>,
    /// Single sign-on to the console, when configured.
    pub signin: Option<Arc<crate::signin::SignIn>>,
    /// The memory gauges every bounded structure registers in.
    pub memory: Arc<MemoryGauges>,
}

impl Node {
    /// Wires a node for `config` over `resources`, listening on `addrs` (public HTTP first: the
    /// base of short URLs unless `SHORTENER_PUBLIC_URL` sets one) behind `gates`. The ID pool
    /// starts leasing at once.
    pub fn wire(
        config: &Config,
        resources: Resources,
        addrs: &[SocketAddr],
        gates: Gates,
    ) -> anyhow::Result<Self> {
        let public = public_base(config, addrs[0]);
        let (targets, own_hosts) = target_rules(config, &public, addrs)?;
        let rules = create_rules(config, &targets, resources.space.length(), &own_hosts);
        let ids = Arc::new(IdPool::start(resources.lease_source, config.ids.pool()));
        let click_flush = config.visits.click_flush();
        let store = resources.store;
        let cache = link_cache(config, click_flush, &targets, &store);
        let limits = Arc::new(config.rates());
        let audit = Arc::new(AuditLog::new(store.clone(), config.access.audit()));
        let links = Arc::new(
            LinkService::new(
                store.clone(),
                Arc::clone(&ids),
                Arc::clone(&resources.space),
                Arc::new(cache.clone()),
                Duration::from_secs(config.access.idempotency_ttl.get()),
                resources.cursors.clone(),
                budgets(config, &limits),
            )
            .with_audit(Arc::clone(&audit)),
        );
        let webhooks = Arc::new(Webhooks::new(
            store.clone(),
            Arc::clone(&targets),
            config
                .webhooks
                .delivery(click_flush.min(Duration::from_secs(1))),
            config.clock.clone(),
            Arc::clone(&audit),
        ));
        let visits = visits(config);
        let memory = Arc::new(MemoryGauges::default());
        cache.register_memory(&memory);
        let resolver = Arc::new(Resolver::new(
            store.clone(),
            cache.clone(),
            Arc::clone(&resources.space),
            Arc::clone(&targets),
            Arc::clone(&visits),
            config.redirects.high_water_reads.get(),
        ));
        let domain_metrics = Arc::new(DomainMetrics::new(&config.redirects.domain_metrics));
        let metrics = Arc::new(Metrics::new(Sources::new(vec![
            Arc::clone(&visits) as _,
            Arc::clone(&webhooks) as _,
            Arc::new(IdSupply::new(Arc::clone(&ids), resources.space.capacity())),
            links.counters(),
            Arc::clone(&resolver) as _,
            Arc::new(store.clone()),
            resources.api_keys.reloads(),
            resources.api_keys.lookups(),
            targets.reloads(),
            Arc::new(gates.clone()),
            Arc::new(crate::telemetry::TraceExport),
            Arc::clone(&domain_metrics) as _,
            Arc::clone(&audit) as _,
            Arc::clone(&memory) as _,
        ])));
        let admission = Arc::new(Admission::new(
            resources.api_keys,
            Arc::clone(&limits),
            Arc::clone(&metrics),
            config.limits.batch_limit,
            config.access.suffixes()?,
        ));
        let made = managed(
            config, &store, &own_hosts, &rules, &targets, &admission, &audit,
        )?;
        let (domains, blocklist, api_keys) = (made.domains, made.blocklist, made.api_keys);
        let (keys, tags) = (admission.keys(), resources.session_tags);
        let signin = signin(config, &public, &store, keys, made.roles, tags)?;
        let parts = Accounted {
            limits: &limits,
            visits: &visits,
            domains: &domains,
            gates: &gates,
            max_head: crate::http::serve::ServeSettings::head_for(config.redirects.max_url_length),
        };
        account(&memory, parts);
        let stats = Arc::new(StatsService::new(
            Arc::clone(visits.analytics()),
            Arc::clone(&links),
            store.clone(),
        ));
        Ok(Self {
            store,
            ids,
            space: resources.space,
            cache,
            links,
            resolver,
            visits,
            stats,
            webhooks,
            limits,
            admission,
            metrics,
            rules,
            public,
            accepting: Arc::new(AtomicBool::new(true)),
            default_api_key: resources.default_api_key,
            console: config.access.console,
            gates,
            blocklist,
            targets,
            domains,
            api_keys,
            domain_metrics,
            yourls_tokens: resources.yourls_tokens,
            audit,
            signin,
            memory,
        })
    }

    /// The public listener's state.
    pub fn http_state(&self, config: &Config) -> anyhow::Result<HttpState> {
        let header = config
            .listeners
            .client_ip_header
            .as_deref()
            .map(axum::http::HeaderName::try_from)
            .transpose()
            .context("client IP header")?;
        Ok(HttpState {
            links: Arc::clone(&self.links),
            resolver: Arc::clone(&self.resolver),
            visits: Arc::clone(&self.visits),
            stats: Arc::clone(&self.stats),
            webhooks: Arc::clone(&self.webhooks),
            admission: Arc::clone(&self.admission),
            rules: self.rules.clone(),
            public: self.public.clone(),
            redirect_status: config.redirects.redirect_status,
            blocked_status: config.redirects.blocked_status,
            limits: Arc::clone(&self.limits),
            client_policy: ClientAddressPolicy {
                header,
                trusted: config.listeners.trusted_proxies.clone(),
                ipv6_prefix: config.listeners.ipv6_prefix,
            },
            metrics: Arc::clone(&self.metrics),
            console: config.access.console,
            blocklist: Arc::clone(&self.blocklist),
            domains: Arc::clone(&self.domains),
            api_keys: Arc::clone(&self.api_keys),
            unknown_hosts: config.redirects.unknown_hosts,
            domain_metrics: Arc::clone(&self.domain_metrics),
            compat: config.compat.dialects()?,
            compat_cors: config.compat.cors_origins()?,
            yourls_tokens: self.yourls_tokens.clone(),
            audit: Arc::clone(&self.audit),
            signin: self.signin.clone(),
        })
    }

    /// The gRPC `Links` service.
    pub fn links_api(&self) -> LinksApi {
        LinksApi {
            links: Arc::clone(&self.links),
            admission: Arc::clone(&self.admission),
            rules: self.rules.clone(),
            public: self.public.clone(),
            metrics: Arc::clone(&self.metrics),
            stats: Arc::clone(&self.stats),
            domains: Arc::clone(&self.domains),
        }
    }

    /// The admin listener's state; a store outage leaves the node ready for `store_grace`.
    pub fn ops_state(&self, store_grace: std::time::Duration) -> OpsState {
        OpsState {
            store: self.store.clone(),
            ids: Arc::clone(&self.ids),
            accepting: Arc::clone(&self.accepting),
            metrics: Arc::clone(&self.metrics),
            seen_ready: Arc::default(),
            store_answered: Arc::default(),
            store_grace,
        }
    }
}

/// What [`managed`] makes.
struct Managed {
    domains: Arc<DomainService>,
    blocklist: Arc<BlocklistService>,
    api_keys: Arc<crate::keys::KeyService>,
    roles: Arc<crate::signin::roles::Roles>,
}

/// The services tenants manage their domains, blocked domains and API keys through, each
/// recording its changes in `audit`; and the roles people hold, which cap the keys they made.
fn managed(
    config: &Config,
    store: &Store,
    own_hosts: &[String],
    rules: &CreateRules,
    targets: &Arc<TargetRules>,
    admission: &Arc<Admission>,
    audit: &Arc<AuditLog>,
) -> anyhow::Result<Managed> {
    let cache_config = config.redirects.cache(config.visits.click_flush());
    let domains = Arc::new(DomainService::new(
        store.clone(),
        own_hosts,
        rules.clone(),
        cache_config.ttl,
        cache_config.negative_ttl,
        Arc::clone(audit),
    ));
    let blocklist = Arc::new(BlocklistService::new(
        store.clone(),
        Arc::clone(targets),
        Arc::clone(audit),
    ));
    // Sign-in reads the same roles: those that cap the keys people made.
    let roles = roles(config)?;
    let api_keys = Arc::new(crate::keys::KeyService::new(
        store.clone(),
        Arc::clone(admission.keys()),
        Arc::clone(audit),
        Arc::clone(&roles),
    ));
    // Only nodes that share their store can meet a key another node made.
    if matches!(store, Store::Postgres(_)) {
        let lookup: std::sync::Weak<crate::keys::KeyService> = Arc::downgrade(&api_keys);
        admission.keys().look_up_with(lookup);
    }
    Ok(Managed {
        domains,
        blocklist,
        api_keys,
        roles,
    })
}

/// What targets the node refuses: its own names and addresses (no link may point at the node
/// itself), private addresses if so configured, and the blocklist file; and the node's own
/// host names (the public URL's and the short domains), which no tenant may claim as a domain.
fn target_rules(
    config: &Config,
    public: &PublicBase,
    addrs: &[SocketAddr],
) -> anyhow::Result<(Arc<TargetRules>, Vec<String>)> {
    let own_hosts: Vec<String> = public
        .host()
        .into_iter()
        .chain(config.listeners.short_domains.iter().cloned())
        .collect();
    let own_ips = addrs
        .iter()
        .map(|a| a.ip())
        .filter(|ip| !ip.is_unspecified())
        .collect();
    let rules = TargetRules::load(config.redirects.targets(own_hosts.clone(), own_ips))
        .map_err(anyhow::Error::msg)
        .context("load the target rules")?;
    Ok((Arc::new(rules), own_hosts))
}

/// What a create must pass on this node: the URL bound, the target rules, the code length,
/// and the default domain's hosts in normal form (an IP address as it is).
fn create_rules(
    config: &Config,
    targets: &Arc<TargetRules>,
    code_length: usize,
    own_hosts: &[String],
) -> CreateRules {
    CreateRules {
        max_url_length: config.redirects.max_url_length,
        targets: Arc::clone(targets) as Arc<dyn TargetPolicy>,
        code_length,
        own_hosts: own_hosts
            .iter()
            .map(|h| crate::domain::path_host(h).unwrap_or_else(|| h.to_ascii_lowercase()))
            .collect(),
        countries: config.visits.geoip_db.is_some(),
    }
}

/// Pending visit counts and analytics, with the country database when one is configured.
fn visits(config: &Config) -> Arc<Visits> {
    let geoip = config
        .visits
        .geoip_db
        .clone()
        .map(|p| Arc::new(GeoIp::open(p)));
    Arc::new(Visits::new(
        config.visits.analytics(config.webhooks.webhook_log_days),
        geoip,
        config.clock.clone(),
        config.visits.click_max_pending.get(),
    ))
}

/// The roles people hold: the roles file's mappings when sign-in is on
/// (`SHORTENER_OIDC_ISSUER`), none otherwise (so no person holds a role, and no key a person
/// made is in force).
fn roles(config: &Config) -> anyhow::Result<Arc<crate::signin::roles::Roles>> {
    let file = config
        .access
        .oidc_issuer
        .as_ref()
        .and(config.access.roles_file.clone());
    let roles = crate::signin::roles::Roles::load(file)
        .map_err(anyhow::Error::msg)
        .context("load SHORTENER_ROLES_FILE")?;
    Ok(Arc::new(roles))
}

/// Single sign-on to the console, when `SHORTENER_OIDC_ISSUER` is set: the client secret read
/// from its file, with `roles` (a mapping to a tenant that holds no keys is warned about and
/// left out).
fn signin(
    config: &Config,
    public: &PublicBase,
    store: &Store,
    keys: &Arc<crate::access::ApiKeys>,
    roles: Arc<crate::signin::roles::Roles>,
    tags: crate::signin::SessionTags,
) -> anyhow::Result<Option<Arc<crate::signin::SignIn>>> {
    let access = &config.access;
    let (Some(issuer), Some(client_id), Some(secret_file)) = (
        &access.oidc_issuer,
        &access.oidc_client_id,
        &access.oidc_client_secret_file,
    ) else {
        return Ok(None);
    };
    let secret = std::fs::read_to_string(secret_file).with_context(|| {
        format!(
            "read SHORTENER_OIDC_CLIENT_SECRET_FILE {}",
            secret_file.display()
        )
    })?;
    let secret = secret.lines().next().unwrap_or("").trim().to_string();
    anyhow::ensure!(
        !secret.is_empty(),
        "SHORTENER_OIDC_CLIENT_SECRET_FILE is empty"
    );
    let settings = crate::signin::Settings {
        client: crate::signin::oidc::ClientConfig {
            issuer: issuer.clone(),
            client_id: client_id.clone(),
            client_secret: secret,
            redirect_url: format!("{}console/oidc/callback", public.as_str()),
        },
        idle: Duration::from_secs(access.session_idle_seconds.get()),
        absolute: Duration::from_secs(access.session_max_seconds.get()),
        public_url: public.as_str().to_string(),
        tags,
    };
    let signin = crate::signin::SignIn::new(settings, roles, Arc::clone(keys), store.clone())?;
    signin.warn_unknown_tenants();
    Ok(Some(Arc::new(signin)))
}

/// The redirect cache for `config` (links with a visit limit kept about a `click_flush`), its
/// answers stale when the blocklist of `targets` moves; where the node is the store's only
/// writer (the embedded file, which has no change feed), every change reaches the cache as it is
/// made, so a cached link is not read again for its lifetime alone.
fn link_cache(
    config: &Config,
    click_flush: Duration,
    targets: &TargetRules,
    store: &Store,
) -> LinkCache {
    let cache = LinkCache::new(
        config.redirects.cache(click_flush),
        targets.generation_source(),
    );
    if store.change_feed().is_none() {
        cache.sees_every_change();
    }
    cache
}

/// The base of short URLs: `SHORTENER_PUBLIC_URL`, or the public listener's address.
fn public_base(config: &Config, http_addr: SocketAddr) -> PublicBase {
    PublicBase::new(
        &config
            .listeners
            .public_url
            .clone()
            .unwrap_or_else(|| format!("http://{}", display_addr(http_addr))),
    )
}

fn display_addr(addr: SocketAddr) -> String {
    if addr.ip().is_unspecified() {
        format!("localhost:{}", addr.port())
    } else {
        addr.to_string()
    }
}

/// What the link service lets callers spend: exports at once, the keys' rates, and the links one
/// tag change may touch.
fn budgets(config: &Config, limits: &Arc<Limits>) -> Budgets {
    Budgets {
        exports: config
            .limits
            .exports(Duration::from_secs(config.listeners.send_timeout.get())),
        imports: config.limits.imports(),
        import_idle: config.limits.import_idle(),
        import_max: config.limits.import_max(),
        rates: Arc::clone(limits),
        tag_change_links: config.limits.tag_change_max_links,
    }
}
