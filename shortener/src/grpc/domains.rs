//! Branded domains over gRPC: the same service, admission and rules as the JSON API's
//! `/api/v1/domains`; this file converts the messages.

use super::LinksApi;
use crate::domain::{AppFile, Caller, Domain, Error};
use proto::shortener::v1 as pb;
use serde_json::{Map, Value};
use tonic::Status;
use tonic::metadata::MetadataValue;

/// A domain as the wire carries it.
fn domain(d: &Domain) -> pb::Domain {
    let s = &d.settings;
    pb::Domain {
        host: d.host.clone(),
        tenant: d.tenant.clone(),
        created_at: Some(prost_types::Timestamp {
            seconds: d.created_at.timestamp(),
            nanos: d.created_at.timestamp_subsec_nanos() as i32,
        }),
        created_by: d.created_by.clone(),
        root_url: s.root_url.clone(),
        not_found_url: s.not_found_url.clone(),
        expired_url: s.expired_url.clone(),
        redirect_status: s.redirect_status.map(u32::from),
        robots: s.robots.name().to_string(),
        apple_app_site_association: s.apple_app_site_association.clone(),
        assetlinks: s.assetlinks.clone(),
    }
}

/// A domain error as a status, with an unknown domain said as such.
pub(super) fn refused(error: Error) -> Status {
    match error {
        Error::NotFound(_) => {
            let mut status = Status::not_found("no such domain");
            status
                .metadata_mut()
                .insert("error-code", MetadataValue::from_static("not_found"));
            status
        }
        other => other.into(),
    }
}

/// The JSON merge patch an update stands for: a value sets a field, `clear_*` unsets it, both
/// at once are `conflicting_options`.
fn patch_of(request: &pb::UpdateDomainRequest) -> Result<Map<String, Value>, Error> {
    let mut patch = Map::new();
    let fields = [
        (
            "root_url",
            request.root_url.clone().map(Value::from),
            request.clear_root_url,
        ),
        (
            "not_found_url",
            request.not_found_url.clone().map(Value::from),
            request.clear_not_found_url,
        ),
        (
            "expired_url",
            request.expired_url.clone().map(Value::from),
            request.clear_expired_url,
        ),
        (
            "redirect_status",
            request.redirect_status.map(Value::from),
            request.clear_redirect_status,
        ),
        ("robots", request.robots.clone().map(Value::from), false),
        (
            "apple_app_site_association",
            json_of(
                AppFile::AppleAppSiteAssociation,
                &request.apple_app_site_association,
            )?,
            request.clear_apple_app_site_association,
        ),
        (
            "assetlinks",
            json_of(AppFile::AssetLinks, &request.assetlinks)?,
            request.clear_assetlinks,
        ),
    ];
    for (field, value, clear) in fields {
        match (value, clear) {
            (Some(_), true) => {
                return Err(Error::invalid(
                    "conflicting_options",
                    format!("{field} and clear_{field} cannot be combined"),
                ));
            }
            (Some(value), false) => {
                patch.insert(field.to_string(), value);
            }
            (None, true) => {
                patch.insert(field.to_string(), Value::Null);
            }
            (None, false) => {}
        }
    }
    Ok(patch)
}

/// An app-link file as a request carries it (JSON text), parsed: `invalid_app_file` when it is
/// not JSON.
fn json_of(file: AppFile, text: &Option<String>) -> Result<Option<Value>, Error> {
    text.as_deref().map(|t| file.parse(t)).transpose()
}

impl LinksApi {
    pub(super) async fn claim_domain_for(
        &self,
        caller: &Caller,
        request: pb::ClaimDomainRequest,
    ) -> Result<pb::Domain, Error> {
        let host = self.domains.host(&request.host)?;
        let named = (!request.tenant.is_empty()).then_some(request.tenant.as_str());
        let tenant = self.domains.tenant(caller, named)?;
        self.admission.admit_claim(caller, &tenant, &host)?;
        Ok(domain(&self.domains.claim(caller, &tenant, &host).await?))
    }

    pub(super) async fn list_domains_for(
        &self,
        caller: &Caller,
        request: pb::ListDomainsRequest,
    ) -> Result<pb::ListDomainsResponse, Error> {
        let limit = (request.limit != 0).then_some(i64::from(request.limit));
        let cursor = (!request.cursor.is_empty()).then_some(request.cursor.as_str());
        let page = self.domains.list(caller, cursor, limit).await?;
        Ok(pb::ListDomainsResponse {
            domains: page.domains.iter().map(domain).collect(),
            next_cursor: page.next_cursor.unwrap_or_default(),
        })
    }

    pub(super) async fn get_domain_for(
        &self,
        caller: &Caller,
        host: &str,
    ) -> Result<pb::Domain, Error> {
        Ok(domain(&self.domains.get(caller, host).await?))
    }

    pub(super) async fn update_domain_for(
        &self,
        caller: &Caller,
        request: pb::UpdateDomainRequest,
    ) -> Result<pb::Domain, Error> {
        let patch = patch_of(&request)?;
        Ok(domain(
            &self.domains.update(caller, &request.host, &patch).await?,
        ))
    }
}
