//! The standard `OTEL_*` variables, read once at start.

use crate::sampler;
use opentelemetry::KeyValue;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::Sampler;
use std::time::Duration;

/// How spans travel to the collector (`OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`, else
/// `OTEL_EXPORTER_OTLP_PROTOCOL`; `http/protobuf` when neither is set, as the specification
/// says).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// OTLP/gRPC (`grpc`), usually port 4317.
    Grpc,
    /// OTLP/HTTP with protobuf bodies (`http/protobuf`), usually port 4318, path `/v1/traces`.
    HttpProtobuf,
}

/// A variable that is set to something this process cannot use.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The variable `name` has a value that is not one of those documented.
    #[error("{name}={value:?} is not supported ({supported})")]
    Unsupported {
        /// The variable.
        name: &'static str,
        /// Its value.
        value: String,
        /// What it may be.
        supported: &'static str,
    },
    /// The exporter could not be built (an endpoint that is not a URL, say).
    #[error("the OTLP exporter: {0}")]
    Exporter(String),
}

/// The bounds of the export queue and its batches (`OTEL_BSP_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchSettings {
    /// Spans waiting for export at most (`OTEL_BSP_MAX_QUEUE_SIZE`, default 2048); a span that
    /// finds the queue full is dropped.
    pub max_queue: usize,
    /// Spans in one export at most (`OTEL_BSP_MAX_EXPORT_BATCH_SIZE`, default 512).
    pub max_batch: usize,
    /// How long a span may wait for its batch to fill (`OTEL_BSP_SCHEDULE_DELAY`, ms, default
    /// 5000).
    pub delay: Duration,
    /// How long one export may take before its spans are given up (`OTEL_BSP_EXPORT_TIMEOUT`,
    /// ms, default 30000).
    pub export_timeout: Duration,
}

impl Default for BatchSettings {
    fn default() -> Self {
        Self {
            max_queue: 2048,
            max_batch: 512,
            delay: Duration::from_millis(5000),
            export_timeout: Duration::from_millis(30_000),
        }
    }
}

/// What the `OTEL_*` variables ask for, when tracing is on.
#[derive(Debug, Clone)]
pub struct Settings {
    /// How to reach the collector.
    pub protocol: Protocol,
    /// `OTEL_TRACES_SAMPLER` / `OTEL_TRACES_SAMPLER_ARG` (default `parentbased_always_on`).
    pub sampler: Sampler,
    /// How that sampler decides a trace that starts here (a redirect without context).
    pub(crate) root: sampler::Root,
    /// The export queue's bounds.
    pub batch: BatchSettings,
}

impl Settings {
    /// The settings in this process's environment, or `None` when tracing is off.
    pub fn from_env() -> Result<Option<Settings>, ConfigError> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// The settings the variables `var` returns describe, or `None` when tracing is off: no
    /// OTLP endpoint, `OTEL_SDK_DISABLED=true`, or `OTEL_TRACES_EXPORTER=none`.
    pub fn from_vars(
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Settings>, ConfigError> {
        let set = |name: &str| {
            var(name)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        if set("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
            return Ok(None);
        }
        match set("OTEL_TRACES_EXPORTER").as_deref() {
            None | Some("otlp") => {}
            Some("none") => return Ok(None),
            Some(other) => {
                return Err(ConfigError::Unsupported {
                    name: "OTEL_TRACES_EXPORTER",
                    value: other.to_string(),
                    supported: "otlp or none",
                });
            }
        }
        if set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_none()
            && set("OTEL_EXPORTER_OTLP_ENDPOINT").is_none()
        {
            return Ok(None);
        }
        let (name, protocol) = match set("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") {
            Some(value) => ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", Some(value)),
            None => (
                "OTEL_EXPORTER_OTLP_PROTOCOL",
                set("OTEL_EXPORTER_OTLP_PROTOCOL"),
            ),
        };
        let protocol = match protocol.as_deref() {
            None | Some("http/protobuf") => Protocol::HttpProtobuf,
            Some("grpc") => Protocol::Grpc,
            Some(other) => {
                return Err(ConfigError::Unsupported {
                    name,
                    value: other.to_string(),
                    supported: "grpc or http/protobuf",
                });
            }
        };
        let (sampler, root) = sampler::choose(
            set("OTEL_TRACES_SAMPLER").as_deref(),
            set("OTEL_TRACES_SAMPLER_ARG").as_deref(),
        )?;
        let defaults = BatchSettings::default();
        let number = |name: &str, default: u64| -> Result<u64, ConfigError> {
            match set(name) {
                None => Ok(default),
                Some(v) => v
                    .parse()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or(ConfigError::Unsupported {
                        name: leak_name(name),
                        value: v,
                        supported: "a positive whole number",
                    }),
            }
        };
        let max_queue = number("OTEL_BSP_MAX_QUEUE_SIZE", defaults.max_queue as u64)? as usize;
        let batch = BatchSettings {
            max_queue,
            max_batch: (number("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", defaults.max_batch as u64)?
                as usize)
                .min(max_queue),
            delay: Duration::from_millis(number("OTEL_BSP_SCHEDULE_DELAY", 5000)?),
            export_timeout: Duration::from_millis(number("OTEL_BSP_EXPORT_TIMEOUT", 30_000)?),
        };
        Ok(Some(Settings {
            protocol,
            sampler,
            root,
            batch,
        }))
    }

    /// The resource of this process: `OTEL_RESOURCE_ATTRIBUTES` and `OTEL_SERVICE_NAME` (which
    /// wins), `service` as the name when neither names one, and `version`.
    pub(crate) fn resource(&self, service: &str, version: &str) -> Resource {
        let named = std::env::var("OTEL_SERVICE_NAME").is_ok_and(|v| !v.trim().is_empty())
            || std::env::var("OTEL_RESOURCE_ATTRIBUTES").is_ok_and(|v| {
                v.split(',')
                    .any(|pair| pair.trim_start().starts_with("service.name="))
            });
        let mut builder = Resource::builder();
        if !named {
            builder = builder.with_service_name(service.to_string());
        }
        builder
            .with_attribute(KeyValue::new("service.version", version.to_string()))
            .build()
    }
}

/// The static name of a `OTEL_BSP_*` variable (the error names it for good).
fn leak_name(name: &str) -> &'static str {
    [
        "OTEL_BSP_MAX_QUEUE_SIZE",
        "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
        "OTEL_BSP_SCHEDULE_DELAY",
        "OTEL_BSP_EXPORT_TIMEOUT",
    ]
    .into_iter()
    .find(|known| *known == name)
    .unwrap_or("OTEL_BSP_*")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn settings(vars: &[(&str, &str)]) -> Result<Option<Settings>, ConfigError> {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Settings::from_vars(|name| vars.get(name).cloned())
    }

    #[test]
    fn tracing_is_off_without_an_endpoint_or_when_disabled() {
        assert!(settings(&[]).unwrap().is_none());
        assert!(
            settings(&[("OTEL_EXPORTER_OTLP_ENDPOINT", " ")])
                .unwrap()
                .is_none()
        );
        let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318");
        assert!(settings(&[endpoint]).unwrap().is_some());
        assert!(
            settings(&[endpoint, ("OTEL_SDK_DISABLED", "TRUE")])
                .unwrap()
                .is_none()
        );
        assert!(
            settings(&[endpoint, ("OTEL_TRACES_EXPORTER", "none")])
                .unwrap()
                .is_none()
        );
        assert!(settings(&[endpoint, ("OTEL_TRACES_EXPORTER", "zipkin")]).is_err());
    }

    #[test]
    fn the_protocol_defaults_to_http_protobuf_and_the_traces_variable_wins() {
        let endpoint = (
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "http://127.0.0.1:4317",
        );
        let protocol = |vars: &[(&str, &str)]| {
            let mut all = vec![endpoint];
            all.extend_from_slice(vars);
            settings(&all).map(|s| s.unwrap().protocol)
        };
        assert_eq!(protocol(&[]).unwrap(), Protocol::HttpProtobuf);
        assert_eq!(
            protocol(&[("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]).unwrap(),
            Protocol::Grpc
        );
        assert_eq!(
            protocol(&[
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
                ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf")
            ])
            .unwrap(),
            Protocol::HttpProtobuf
        );
        let error = protocol(&[("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")]).unwrap_err();
        assert!(
            error.to_string().contains("OTEL_EXPORTER_OTLP_PROTOCOL"),
            "{error}"
        );
    }

    #[test]
    fn queue_bounds_come_from_the_bsp_variables() {
        let s = settings(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
            ("OTEL_BSP_MAX_QUEUE_SIZE", "100"),
            ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "500"),
            ("OTEL_BSP_SCHEDULE_DELAY", "200"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(s.batch.max_queue, 100);
        assert_eq!(s.batch.max_batch, 100, "a batch never exceeds the queue");
        assert_eq!(s.batch.delay, Duration::from_millis(200));
        assert!(
            settings(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
                ("OTEL_BSP_MAX_QUEUE_SIZE", "0"),
            ])
            .is_err()
        );
    }
}
