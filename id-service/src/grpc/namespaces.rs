//! The `NamespaceAdmin` handlers: create, describe and list namespaces (scope `admin`).

use super::{NamespaceService, Shared, authorization, log_failure};
use crate::auth::Scope;
use crate::domain::{CreateNamespace, DescribeNamespace, ListNamespaces};
use crate::error::Error;
use proto::idalloc::v1 as pb;
use proto::idalloc::v1::namespace_admin_server::NamespaceAdmin;
use tonic::{Request, Response, Status};

#[tonic::async_trait]
impl NamespaceAdmin for NamespaceService {
    async fn create_namespace(
        &self,
        request: Request<pb::CreateNamespaceRequest>,
    ) -> Result<Response<pb::NamespaceInfo>, Status> {
        let shared = &self.0;
        let (metadata, _, message) = request.into_parts();
        // Who was refused by the gate, for the log line that says so.
        let caller = std::sync::OnceLock::new();
        let work = async {
            let (principal, request) = shared
                .gate
                .admit(authorization(&metadata), Scope::Admin, || {
                    CreateNamespace::parse(
                        message,
                        shared.namespace_max,
                        shared.bounds.min..=shared.bounds.max,
                    )
                })
                .map_err(|refused| refused.noted(&caller))?;
            let info = shared.ledger.create_namespace(&request).await?;
            shared.metrics.expect_namespace(request.namespace.as_str());
            tracing::info!(
                namespace = %request.namespace,
                first_id = request.first_id,
                max_id = request.max_id,
                max_block = info.max_block,
                caller = principal.name(),
                "namespace created"
            );
            Ok(info)
        };
        shared
            .guard(async {
                let outcome = work.await;
                finish(
                    shared,
                    "CreateNamespace",
                    caller.get().map_or("", String::as_str),
                    outcome,
                )
            })
            .await
            .map(|info| Response::new(info.into()))
    }

    async fn describe_namespace(
        &self,
        request: Request<pb::DescribeNamespaceRequest>,
    ) -> Result<Response<pb::NamespaceInfo>, Status> {
        let shared = &self.0;
        let (metadata, _, message) = request.into_parts();
        // Who was refused by the gate, for the log line that says so.
        let caller = std::sync::OnceLock::new();
        let work = async {
            let (_, request) = shared
                .gate
                .admit(authorization(&metadata), Scope::Admin, || {
                    DescribeNamespace::try_from(message)
                })
                .map_err(|refused| refused.noted(&caller))?;
            shared.ledger.describe_namespace(&request.0).await
        };
        shared
            .guard(async {
                let outcome = work.await;
                finish(
                    shared,
                    "DescribeNamespace",
                    caller.get().map_or("", String::as_str),
                    outcome,
                )
            })
            .await
            .map(|info| Response::new(info.into()))
    }

    async fn list_namespaces(
        &self,
        request: Request<pb::ListNamespacesRequest>,
    ) -> Result<Response<pb::ListNamespacesResponse>, Status> {
        let shared = &self.0;
        let (metadata, _, message) = request.into_parts();
        // Who was refused by the gate, for the log line that says so.
        let caller = std::sync::OnceLock::new();
        let work = async {
            let (principal, request) = shared
                .gate
                .admit(authorization(&metadata), Scope::Admin, || {
                    ListNamespaces::try_from(message)
                })
                .map_err(|refused| refused.noted(&caller))?;
            let page = shared
                .ledger
                .list_namespaces(&request, principal.visible_namespaces())
                .await?;
            let full = page.len() == request.limit as usize;
            let next_after = match page.last() {
                Some(last) if full => last.name.clone(),
                _ => String::new(),
            };
            Ok(pb::ListNamespacesResponse {
                namespaces: page.into_iter().map(Into::into).collect(),
                next_after,
            })
        };
        shared
            .guard(async {
                let outcome = work.await;
                finish(
                    shared,
                    "ListNamespaces",
                    caller.get().map_or("", String::as_str),
                    outcome,
                )
            })
            .await
            .map(Response::new)
    }
}

/// Counts, logs and converts the outcome of one NamespaceAdmin call.
fn finish<T>(
    shared: &Shared,
    method: &'static str,
    caller: &str,
    outcome: Result<T, Error>,
) -> Result<T, Status> {
    shared.metrics.namespace_admin(method, &outcome);
    outcome.map_err(|error| {
        log_failure(method, caller, &error);
        error.into()
    })
}
