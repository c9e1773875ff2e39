//! The OTLP exporter for the configured protocol. Endpoints, headers, timeout and compression
//! come from the `OTEL_EXPORTER_OTLP_*` variables, which the exporter reads itself.

use crate::{ConfigError, Protocol};
use bytes::Bytes;
use opentelemetry_http::{HttpClient, HttpError};
use opentelemetry_otlp::{SpanExporter, WithExportConfig, WithHttpConfig};
use std::future::Future;
use std::pin::Pin;

/// The exporter for `protocol`. gRPC goes through tonic; HTTP/protobuf through reqwest, the
/// client already in the process. Both run on the tokio runtime, where the export task is.
pub(crate) fn exporter(protocol: Protocol) -> Result<SpanExporter, ConfigError> {
    let built = match protocol {
        Protocol::Grpc => SpanExporter::builder().with_tonic().build(),
        Protocol::HttpProtobuf => SpanExporter::builder()
            .with_http()
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .with_http_client(Reqwest(reqwest::Client::new()))
            .build(),
    };
    built.map_err(|error| ConfigError::Exporter(error.to_string()))
}

/// OTLP/HTTP requests sent with reqwest.
#[derive(Debug)]
struct Reqwest(reqwest::Client);

impl HttpClient for Reqwest {
    fn send_bytes<'client, 'call>(
        &'client self,
        request: http::Request<Bytes>,
    ) -> Pin<Box<dyn Future<Output = Result<http::Response<Bytes>, HttpError>> + Send + 'call>>
    where
        'client: 'call,
        Self: 'call,
    {
        Box::pin(async move {
            let request = reqwest::Request::try_from(request)?;
            let response = self.0.execute(request).await?;
            let mut answer = http::Response::builder().status(response.status());
            if let Some(headers) = answer.headers_mut() {
                headers.extend(
                    response
                        .headers()
                        .iter()
                        .map(|(name, value)| (name.clone(), value.clone())),
                );
            }
            // The collector's answer is small (a partial-success message at most).
            let body = response.bytes().await?;
            Ok(answer.body(body)?)
        })
    }
}
