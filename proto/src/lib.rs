//! The wire contracts of the project, generated from `proto/*.proto` at build time.
//!
//! - [`idalloc::v1`]: the id-service's block leases (`IdAllocator`).
//! - [`shortener::v1`]: the shortener's link API for internal services (`Links`).
//!
//! [`FILE_DESCRIPTOR_SET`] holds the encoded descriptors of both packages (with their imports)
//! so servers can offer gRPC reflection and clients can be built from the running server.
//! With the `server` feature, [`server`] sets up health and reflection the same way for every
//! server of the project.

/// The `idalloc.*` protobuf packages.
pub mod idalloc {
    /// Version 1 of the lease contract.
    pub mod v1 {
        #![allow(missing_docs, clippy::all)]
        tonic::include_proto!("idalloc.v1");
    }
}

/// The `shortener.*` protobuf packages.
pub mod shortener {
    /// Version 1 of the link contract.
    pub mod v1 {
        #![allow(missing_docs, clippy::all)]
        tonic::include_proto!("shortener.v1");
    }
}

#[cfg(feature = "server")]
pub mod server;

/// The encoded `FileDescriptorSet` of every package above, for `tonic-reflection`.
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/descriptor.bin"));

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn descriptor_set_names_both_services() {
        let fds = prost_types::FileDescriptorSet::decode(FILE_DESCRIPTOR_SET).expect("decode");
        let services: Vec<String> = fds
            .file
            .iter()
            .flat_map(|f| {
                let package = f.package().to_string();
                f.service
                    .iter()
                    .map(move |s| format!("{package}.{}", s.name()))
            })
            .collect();
        assert!(
            services.contains(&"idalloc.v1.IdAllocator".to_string()),
            "{services:?}"
        );
        assert!(
            services.contains(&"shortener.v1.Links".to_string()),
            "{services:?}"
        );
    }
}
