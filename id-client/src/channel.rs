//! The gRPC channel and credentials shared by the lease source and the AllocateIds client.

use std::time::Duration;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::transport::{Channel, Endpoint};

/// A lazily connecting channel balanced over `endpoints` (`http://host:port`); the error names
/// the first malformed endpoint.
pub(crate) fn balanced_channel(
    endpoints: &[String],
    connect_timeout: Duration,
    request_timeout: Duration,
) -> Result<Channel, String> {
    if endpoints.is_empty() {
        return Err("no id-service endpoint configured".into());
    }
    let mut built = endpoints
        .iter()
        .map(|uri| {
            Endpoint::from_shared(uri.clone())
                .map(|e| {
                    e.connect_timeout(connect_timeout)
                        .timeout(request_timeout)
                        .tcp_nodelay(true)
                })
                .map_err(|e| format!("bad id-service endpoint {uri:?}: {e}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(match built.pop() {
        Some(only) if built.is_empty() => only.connect_lazy(),
        Some(last) => {
            built.push(last);
            Channel::balance_list(built.into_iter())
        }
        None => return Err("no id-service endpoint configured".into()),
    })
}

/// The `authorization` metadata value for a bearer token, if one is configured.
pub(crate) fn bearer(token: Option<&str>) -> Result<Option<MetadataValue<Ascii>>, String> {
    token
        .map(|t| {
            format!("Bearer {t}")
                .parse()
                .map_err(|_| "the id-service token is not valid header text".to_string())
        })
        .transpose()
}
