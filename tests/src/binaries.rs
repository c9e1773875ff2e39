//! Finding the `id-service` and `shortener` executables built by cargo.
//!
//! `CARGO_BIN_EXE_*` only names binaries of the package under test, so the harness looks next
//! to its own executable: a test runs as `target/<profile>/deps/<name>-<hash>`, and cargo puts
//! the workspace's binaries in `target/<profile>/`. `cargo test --workspace` builds them before
//! running any test; `cargo test -p tests` does not, hence the message below.

use anyhow::{Context, bail};
use std::path::{Path, PathBuf};

/// The executables the harness starts.
#[derive(Debug, Clone)]
pub struct Binaries {
    /// The lease server.
    pub id_service: PathBuf,
    /// The shortener node.
    pub shortener: PathBuf,
}

impl Binaries {
    /// Finds both binaries in `FAULT_BIN_DIR`, or else in the profile directory this test
    /// executable was built into; fails with the command that builds them.
    pub fn locate() -> anyhow::Result<Binaries> {
        let dir = match std::env::var_os("FAULT_BIN_DIR") {
            Some(dir) => PathBuf::from(dir),
            None => profile_dir()?,
        };
        let binaries = Binaries {
            id_service: dir.join("id-service"),
            shortener: dir.join("shortener"),
        };
        for path in [&binaries.id_service, &binaries.shortener] {
            if !path.is_file() {
                bail!(
                    "{} is missing: build the binaries first with \
                     `cargo build -p id-service -p shortener` (same profile as the tests), \
                     or point FAULT_BIN_DIR at a directory holding them",
                    path.display()
                );
            }
        }
        Ok(binaries)
    }
}

fn profile_dir() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("find the test executable")?;
    let deps = exe
        .parent()
        .context("the test executable has a directory")?;
    let profile = if deps.file_name() == Some("deps".as_ref()) {
        deps.parent().unwrap_or(deps)
    } else {
        deps
    };
    Ok(Path::to_path_buf(profile))
}
