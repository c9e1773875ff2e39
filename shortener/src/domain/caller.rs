//! Who is asking: the identity an authenticated request acts as.

/// An authenticated caller. `id` is a short, non-secret id derived from its API key: links
/// record it as their owner, and dedup and idempotency keys are kept per caller.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Caller {
    /// The caller's id (never the key itself).
    pub id: String,
}
