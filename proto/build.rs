//! Compiles the .proto files with a pure-Rust compiler (no system `protoc`), writes the file
//! descriptor set for server reflection, and generates tonic clients and servers.

use prost::Message;
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = ["idalloc/v1/idalloc.proto", "shortener/v1/shortener.proto"];
    let dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("proto");
    for file in files {
        println!("cargo:rerun-if-changed={}", dir.join(file).display());
    }
    let fds = protox::compile(files, [&dir])?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out.join("descriptor.bin"), fds.encode_to_vec())?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(fds)?;
    Ok(())
}
