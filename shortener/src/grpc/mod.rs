//! The internal gRPC API (`shortener.v1.Links`), with the same semantics as the JSON API.

mod status;

use crate::auth::{ApiKeys, Owner};
use crate::domain::{Error, Link};
use crate::limits::Limits;
use crate::metrics::Metrics;
use crate::service::{CreateInput, LinkService};
use chrono::{DateTime, Utc};
use futures::StreamExt;
use pb::links_server::Links;
use proto::shortener::v1 as pb;
use std::sync::Arc;
use std::time::Instant;
use tonic::{Request, Response, Status};

pub use status::{code_of, to_status};

/// The `Links` service.
pub struct LinksApi {
    /// The link service.
    pub service: Arc<LinkService>,
    /// Accepted API keys.
    pub keys: Arc<ApiKeys>,
    /// Rate limits.
    pub limits: Arc<Limits>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Most items in one batch.
    pub batch_limit: usize,
}

fn timestamp(t: DateTime<Utc>) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: t.timestamp(),
        nanos: t.timestamp_subsec_nanos() as i32,
    }
}

fn from_timestamp(t: &prost_types::Timestamp) -> Result<DateTime<Utc>, Error> {
    u32::try_from(t.nanos)
        .ok()
        .and_then(|nanos| DateTime::from_timestamp(t.seconds, nanos))
        .ok_or_else(|| Error::invalid("invalid_expiry", "expires_at is not a valid timestamp"))
}

impl LinksApi {
    fn authenticate<T>(&self, request: &Request<T>) -> Result<Owner, Status> {
        let header = request
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok());
        self.keys.authenticate(header).map_err(to_status)
    }

    /// Refuses a code that cannot be a generated, private or alias code.
    fn check_code(&self, code: &str) -> Result<(), Status> {
        match codespace::shape::classify(code, self.service.code_length()) {
            Some(_) => Ok(()),
            None => Err(to_status(Error::invalid(
                "invalid_code",
                format!("{code:?} is not a valid code or alias"),
            ))),
        }
    }

    fn to_proto(&self, link: &Link) -> pb::Link {
        pb::Link {
            code: link.code.clone(),
            short_url: self.service.short_url(&link.code),
            url: link.url.clone(),
            created_at: Some(timestamp(link.created_at)),
            expires_at: link.expires_at.map(timestamp),
            deleted_at: link.deleted_at.map(timestamp),
            clicks: Some(pb::ClickCounts {
                human: link.clicks.human,
                head: link.clicks.head,
                bot: link.clicks.bot,
            }),
        }
    }

    /// Validates and creates one item (shared by single and batch creates).
    async fn create_one(&self, owner: &Owner, item: pb::CreateLinkRequest) -> Result<Link, Error> {
        let started = Instant::now();
        let result = async {
            let expires_at = item.expires_at.as_ref().map(from_timestamp).transpose()?;
            let input = CreateInput {
                url: item.url,
                alias: item.alias,
                expires_at,
                dedup: item.dedup,
                private: item.private,
                idempotency_key: item.idempotency_key,
            };
            let request = self.service.validate(input, Utc::now())?;
            self.service.create(owner, request).await
        }
        .await;
        let outcome = match &result {
            Ok((_, true)) => "created",
            Ok((_, false)) => "existing",
            Err(error) => error.outcome(),
        };
        self.metrics.create(outcome, started.elapsed());
        result.map(|(link, _)| link)
    }
}

#[tonic::async_trait]
impl Links for LinksApi {
    async fn create_link(
        &self,
        request: Request<pb::CreateLinkRequest>,
    ) -> Result<Response<pb::Link>, Status> {
        let owner = self.authenticate(&request)?;
        if let Err(retry_after) = self.limits.create(&owner.0) {
            self.metrics.rate_limited("create");
            return Err(to_status(Error::RateLimited { retry_after }));
        }
        let link = self
            .create_one(&owner, request.into_inner())
            .await
            .map_err(to_status)?;
        Ok(Response::new(self.to_proto(&link)))
    }

    async fn batch_create_links(
        &self,
        request: Request<pb::BatchCreateLinksRequest>,
    ) -> Result<Response<pb::BatchCreateLinksResponse>, Status> {
        let owner = self.authenticate(&request)?;
        let items = request.into_inner().items;
        if items.is_empty() || items.len() > self.batch_limit {
            return Err(to_status(Error::invalid(
                "invalid_batch",
                format!(
                    "a batch holds 1 to {} items, not {}",
                    self.batch_limit,
                    items.len()
                ),
            )));
        }
        if let Err(retry_after) = self.limits.create_n(&owner.0, items.len() as u32) {
            self.metrics.rate_limited("create");
            return Err(to_status(Error::RateLimited { retry_after }));
        }
        // Items run concurrently (bounded) and come back in request order.
        let results: Vec<pb::BatchCreateResult> = futures::stream::iter(items)
            .map(|item| self.create_one(&owner, item))
            .buffered(64)
            .map(|result| pb::BatchCreateResult {
                outcome: Some(match result {
                    Ok(link) => pb::batch_create_result::Outcome::Link(self.to_proto(&link)),
                    Err(error) => {
                        if let Error::Internal(detail) = &error {
                            tracing::error!(%detail, "internal error in a batch item");
                        }
                        pb::batch_create_result::Outcome::Error(pb::ItemError {
                            status: code_of(&error) as i32,
                            error: error.code().to_string(),
                            message: error.public_message(),
                        })
                    }
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
        self.authenticate(&request)?;
        self.check_code(&request.get_ref().code)?;
        let link = self
            .service
            .get(&request.get_ref().code)
            .await
            .map_err(to_status)?;
        Ok(Response::new(self.to_proto(&link)))
    }

    async fn delete_link(
        &self,
        request: Request<pb::DeleteLinkRequest>,
    ) -> Result<Response<pb::DeleteLinkResponse>, Status> {
        self.authenticate(&request)?;
        self.check_code(&request.get_ref().code)?;
        self.service
            .delete(&request.get_ref().code)
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::DeleteLinkResponse {}))
    }
}
