//! The create path's alarms, bumped where a code is generated, and its costly work (password
//! hashes), reported as a part of `/metrics`.

use crate::metrics::{Sample, Samples};
use std::sync::atomic::{AtomicU64, Ordering};

/// The create path's alarm (bumped by the link service).
#[derive(Debug, Default)]
pub struct CreateCounters {
    /// Generated codes that were unexpectedly taken (must stay 0: alarm).
    pub generated_conflicts: AtomicU64,
    /// Generated codes stepped over because an imported legacy code holds them (expected).
    pub imported_skips: AtomicU64,
    /// Passwords of protected links hashed for a create or an edit.
    pub password_hashes: AtomicU64,
}

impl Sample for CreateCounters {
    fn sample(&self, out: &mut Samples<'_, '_>) -> std::fmt::Result {
        out.counter(
            "shortener_generated_code_conflicts",
            "Generated codes found already taken (must stay 0: alarm)",
            self.generated_conflicts.load(Ordering::Relaxed),
        )?;
        out.counter(
            "shortener_generated_codes_skipped_imported",
            "Generated codes stepped over because an imported legacy code holds them (expected)",
            self.imported_skips.load(Ordering::Relaxed),
        )?;
        out.counter(
            "shortener_link_password_hashes",
            "Passwords of protected links hashed for a create or an edit (Argon2id: ~19 MiB and \
             tens of milliseconds of a core each)",
            self.password_hashes.load(Ordering::Relaxed),
        )
    }
}
