//! What every gRPC server of the project offers besides its own services: `grpc.health.v1`
//! health and server reflection, in the one shape both binaries use.

use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;
use tonic_reflection::server::{v1, v1alpha};

/// The health service of one server, reporting the overall service `""` and the named
/// services together, so a probe of either answers the same.
#[derive(Clone)]
pub struct Health {
    reporter: HealthReporter,
    services: &'static [&'static str],
}

impl Health {
    /// A health reporter for `services` (their full names, e.g. `shortener.v1.Links`), all
    /// `NOT_SERVING` until [`Health::set`] says otherwise, and the service to add to the server.
    pub fn new(
        services: &'static [&'static str],
    ) -> (
        Self,
        tonic_health::pb::health_server::HealthServer<impl tonic_health::pb::health_server::Health>,
    ) {
        let (reporter, server) = tonic_health::server::health_reporter();
        (Self { reporter, services }, server)
    }

    /// Sets the status of the overall service and of every named one.
    pub async fn set(&self, serving: bool) {
        let status = if serving {
            ServingStatus::Serving
        } else {
            ServingStatus::NotServing
        };
        for name in self.services {
            self.reporter.set_service_status(*name, status).await;
        }
        self.reporter.set_service_status("", status).await;
    }
}

/// The reflection services, `v1` and `v1alpha` (some clients, Python's grpcio among them, speak
/// only `v1alpha`), describing every package of this crate and the health service.
pub fn reflection() -> Result<
    (
        v1::ServerReflectionServer<impl v1::ServerReflection>,
        v1alpha::ServerReflectionServer<impl v1alpha::ServerReflection>,
    ),
    tonic_reflection::server::Error,
> {
    let builder = || {
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(crate::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
    };
    Ok((builder().build_v1()?, builder().build_v1alpha()?))
}
