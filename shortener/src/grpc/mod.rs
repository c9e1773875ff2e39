//! The internal gRPC API (`shortener.v1.Links`, branded domains included), with the same
//! semantics as the JSON API.
//!
//! A call's key is checked before its message is decoded, and its body bounded by what the
//! method needs (`guard`, a tower layer in front of the service). Each method then admits the
//! caller for its operation ([`crate::access`]), turns the wire message into a domain request
//! once (`wire`), calls the link service, and lets `?` turn a domain error into its status
//! (`status`, the one mapping).

mod decoded;
mod domains;
mod guard;
mod held;
mod manage;
mod status;
mod wire;

pub use guard::{BodyLimits, GuardLayer};
pub use held::StreamBounds;
pub use manage::ROWS_PER_MESSAGE;

pub use status::code_of;

use crate::access::{Admission, Operation};
use crate::domain::{
    Caller, CreateInput, CreateRequest, CreateRules, Error, PublicBase, ShortCode,
};
use crate::links::LinkService;
use crate::metrics::Metrics;
use chrono::Utc;
use futures::StreamExt;
use pb::links_server::Links;
use proto::shortener::v1 as pb;
use std::sync::Arc;
use std::time::Instant;
use tonic::{Request, Response, Status};

/// How many items of one batch are created at once.
const BATCH_CONCURRENCY: usize = 64;

/// The `Links` service.
pub struct LinksApi {
    /// Creates, reads and deletes links.
    pub links: Arc<LinkService>,
    /// Admits API requests.
    pub admission: Arc<Admission>,
    /// What a create must pass.
    pub rules: CreateRules,
    /// The base of short URLs.
    pub public: PublicBase,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Click statistics.
    pub stats: Arc<crate::visits::analytics::StatsService>,
    /// Branded domains.
    pub domains: Arc<crate::domains::DomainService>,
}

impl LinksApi {
    /// The caller the guard authenticated, if it may run `operation` (scope, rate, bounds).
    fn admit<T>(&self, request: &Request<T>, operation: Operation) -> Result<Caller, Error> {
        let mut caller = request
            .extensions()
            .get::<Caller>()
            .cloned()
            .ok_or(Error::Unauthenticated(crate::domain::NoKey::Missing))?;
        self.admission.admit(&caller, operation)?;
        // The connection's peer: gRPC callers are internal services, not behind the public
        // proxies, so no forwarded header is believed here.
        caller.address = request
            .extensions()
            .get::<crate::net::idle::ConnectionInfo>()
            .map(|connection| connection.peer.ip().to_canonical())
            .or_else(|| request.remote_addr().map(|a| a.ip().to_canonical()));
        Ok(caller)
    }

    /// The code `text` on the branded domain `domain` names (the default domain when empty or
    /// one of the node's own hosts); a domain named, the node's own host included, is the only
    /// one a code of generated shape is found on.
    fn code(&self, text: &str, domain: &str) -> Result<ShortCode, Error> {
        let resolved = self.rules.domain(Some(domain))?;
        let code = ShortCode::parse(text, self.rules.code_length)?;
        Ok(if domain.trim().is_empty() {
            code.on(resolved)
        } else {
            code.on_named(resolved)
        })
    }

    /// Converts, checks and creates one item (shared by single and batch creates), counted in
    /// the metrics; answers the link as `caller` may see it.
    async fn create_one(
        &self,
        caller: &Caller,
        item: pb::CreateLinkRequest,
    ) -> Result<pb::Link, Error> {
        let started = Instant::now();
        // The message is converted and checked before the one await, so that no wire or domain
        // value is held across it; the link service's future (kilobytes of state) is boxed, so
        // that the future tonic boxes for every call holds a pointer to it instead of a copy
        // (unboxed, that future was 11,336 bytes, copied into its box on every call).
        let parsed = CreateInput::try_from(item)
            .and_then(|input| CreateRequest::parse(input, &self.rules, Utc::now()));
        let result = match parsed {
            Ok(request) => Box::pin(self.links.create(caller, request)).await,
            Err(error) => Err(error),
        };
        let outcome = match &result {
            Ok((_, true)) => "created",
            Ok((_, false)) => "existing",
            Err(error) => error.outcome(),
        };
        self.metrics.create(outcome, started.elapsed());
        result.map(|(link, created)| wire::answer(caller, created, &self.public, &link))
    }
}

#[tonic::async_trait]
impl Links for LinksApi {
    async fn create_link(
        &self,
        request: Request<pb::CreateLinkRequest>,
    ) -> Result<Response<pb::Link>, Status> {
        let caller = self.admit(&request, Operation::Create)?;
        Ok(Response::new(
            self.create_one(&caller, request.into_inner()).await?,
        ))
    }

    async fn batch_create_links(
        &self,
        request: Request<pb::BatchCreateLinksRequest>,
    ) -> Result<Response<pb::BatchCreateLinksResponse>, Status> {
        let items = request.get_ref().items.len();
        let caller = self.admit(&request, Operation::CreateBatch { items })?;
        // Items run concurrently (bounded) and come back in request order.
        let results: Vec<pb::BatchCreateResult> = futures::stream::iter(request.into_inner().items)
            .map(|item| self.create_one(&caller, item))
            .buffered(BATCH_CONCURRENCY)
            .map(|result| pb::BatchCreateResult {
                outcome: Some(match result {
                    Ok(link) => pb::batch_create_result::Outcome::Link(link),
                    Err(error) => pb::batch_create_result::Outcome::Error(error.into()),
                }),
            })
            .collect()
            .await;
        Ok(Response::new(pb::BatchCreateLinksResponse { results }))
    }

    async fn get_link(
        &self,
        request: Request<pb::GetLinkRequest>,
    ) -> Result<Response<pb::Link>, Status> {
        let caller = self.admit(&request, Operation::Read)?;
        let link = self
            .links
            .get(
                &caller,
                &self.code(&request.get_ref().code, &request.get_ref().domain)?,
            )
            .await?;
        Ok(Response::new(wire::link(&self.public, &link)))
    }

    async fn delete_link(
        &self,
        request: Request<pb::DeleteLinkRequest>,
    ) -> Result<Response<pb::DeleteLinkResponse>, Status> {
        let caller = self.admit(&request, Operation::Delete)?;
        self.links
            .delete(
                &caller,
                &self.code(&request.get_ref().code, &request.get_ref().domain)?,
            )
            .await?;
        Ok(Response::new(pb::DeleteLinkResponse {}))
    }

    async fn list_links(
        &self,
        request: Request<pb::ListLinksRequest>,
    ) -> Result<Response<pb::ListLinksResponse>, Status> {
        let caller = self.admit(&request, Operation::List)?;
        Ok(Response::new(
            self.list(&caller, request.into_inner()).await?,
        ))
    }

    async fn update_link(
        &self,
        request: Request<pb::UpdateLinkRequest>,
    ) -> Result<Response<pb::Link>, Status> {
        let caller = self.admit(&request, Operation::Update)?;
        Ok(Response::new(
            self.update(&caller, request.into_inner()).await?,
        ))
    }

    async fn get_link_stats(
        &self,
        request: Request<pb::GetLinkStatsRequest>,
    ) -> Result<Response<pb::Stats>, Status> {
        let caller = self.admit(&request, Operation::Stats)?;
        let request = request.into_inner();
        let input = wire::stats_input(request.range)?;
        let code = self.code(&request.code, &request.domain)?;
        let (freshness, report) = self.stats.link(&caller, &code, input).await?;
        Ok(Response::new(wire::stats(&report, freshness)))
    }

    async fn get_tenant_stats(
        &self,
        request: Request<pb::GetTenantStatsRequest>,
    ) -> Result<Response<pb::Stats>, Status> {
        let caller = self.admit(&request, Operation::Stats)?;
        let request = request.into_inner();
        let input = wire::stats_input(request.range)?;
        let tag = (!request.tag.is_empty()).then_some(request.tag);
        let (freshness, report) = self.stats.tenant(&caller, tag, input).await?;
        Ok(Response::new(wire::stats(&report, freshness)))
    }

    async fn get_link_history(
        &self,
        request: Request<pb::GetLinkHistoryRequest>,
    ) -> Result<Response<pb::LinkHistory>, Status> {
        let caller = self.admit(&request, Operation::History)?;
        let (events, truncated) = self
            .links
            .history(
                &caller,
                &self.code(&request.get_ref().code, &request.get_ref().domain)?,
            )
            .await?;
        Ok(Response::new(pb::LinkHistory {
            events: events.iter().map(wire::event).collect(),
            truncated,
        }))
    }

    type ImportLinksStream = manage::ImportStream;

    async fn import_links(
        &self,
        request: Request<tonic::Streaming<pb::ImportLinksRequest>>,
    ) -> Result<Response<Self::ImportLinksStream>, Status> {
        let caller = self.admit(&request, Operation::Import)?;
        let place = self.links.admit_import(&caller)?;
        Ok(Response::new(self.import(
            caller,
            place,
            request.into_inner(),
        )))
    }

    async fn get_link_qr(
        &self,
        request: Request<pb::GetLinkQrRequest>,
    ) -> Result<Response<pb::LinkQr>, Status> {
        let caller = self.admit(&request, Operation::Read)?;
        let request = request.into_inner();
        let options = crate::qr::QrOptions::parse(
            request.format.as_deref(),
            request.size,
            request.margin,
            request.ecc.as_deref(),
        )?;
        let link = self
            .links
            .get(&caller, &self.code(&request.code, &request.domain)?)
            .await?;
        let text = self.public.link_url(&link);
        Ok(Response::new(pb::LinkQr {
            data: crate::qr::render(&text, &options)?,
            content_type: options.format.content_type().to_string(),
            etag: options.etag(&text),
        }))
    }

    async fn claim_domain(
        &self,
        request: Request<pb::ClaimDomainRequest>,
    ) -> Result<Response<pb::Domain>, Status> {
        let caller = self.admit(&request, Operation::DomainWrite)?;
        let claimed = self.claim_domain_for(&caller, request.into_inner()).await;
        Ok(Response::new(claimed.map_err(domains::refused)?))
    }

    async fn list_domains(
        &self,
        request: Request<pb::ListDomainsRequest>,
    ) -> Result<Response<pb::ListDomainsResponse>, Status> {
        let caller = self.admit(&request, Operation::DomainRead)?;
        let page = self.list_domains_for(&caller, request.into_inner()).await;
        Ok(Response::new(page.map_err(domains::refused)?))
    }

    async fn get_domain(
        &self,
        request: Request<pb::GetDomainRequest>,
    ) -> Result<Response<pb::Domain>, Status> {
        let caller = self.admit(&request, Operation::DomainRead)?;
        let found = self.get_domain_for(&caller, &request.get_ref().host).await;
        Ok(Response::new(found.map_err(domains::refused)?))
    }

    async fn update_domain(
        &self,
        request: Request<pb::UpdateDomainRequest>,
    ) -> Result<Response<pb::Domain>, Status> {
        let caller = self.admit(&request, Operation::DomainWrite)?;
        let updated = self.update_domain_for(&caller, request.into_inner()).await;
        Ok(Response::new(updated.map_err(domains::refused)?))
    }

    async fn delete_domain(
        &self,
        request: Request<pb::DeleteDomainRequest>,
    ) -> Result<Response<pb::DeleteDomainResponse>, Status> {
        let caller = self.admit(&request, Operation::DomainWrite)?;
        self.domains
            .delete(&caller, &request.get_ref().host)
            .await
            .map_err(domains::refused)?;
        Ok(Response::new(pb::DeleteDomainResponse {}))
    }

    type ExportLinksStream = manage::ExportStream;

    async fn export_links(
        &self,
        request: Request<pb::ExportLinksRequest>,
    ) -> Result<Response<Self::ExportLinksStream>, Status> {
        let caller = self.admit(&request, Operation::Export)?;
        Ok(Response::new(self.export(&caller, request.into_inner())?))
    }
}
