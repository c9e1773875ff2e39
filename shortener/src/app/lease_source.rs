//! The id-service as this node's lease source, with failures told in terms of the settings that
//! fix them.
//!
//! A node without IDs answers creates with 503, fails readiness, and logs each failed lease;
//! all three show the pool's last lease error. [`Explained`] rewrites that error once, where
//! the node's settings are known, so each of those places says which of these it is and what
//! to change: the id-service is unreachable (`SHORTENER_ID_SERVICE`), holds the node to its
//! caller's quota for a moment (`leases_per_second` on the id-service), refuses this node's token
//! (`SHORTENER_ID_SERVICE_TOKEN`), has no such namespace (`ID_SERVICE_NAMESPACES` on the
//! id-service, or `SHORTENER_ID_NAMESPACE` here), or has none left.

use id_client::{LeaseError, LeaseFuture, LeaseSource};

/// A lease source whose errors name the setting that fixes them.
///
/// The words are fit for a client of the node as well as its operator: they name settings and
/// the namespace, never the id-service's address; the id-service's own words follow in
/// parentheses, last, so a bounded client message loses them first.
pub struct Explained<S> {
    inner: S,
    namespace: String,
}

impl<S: LeaseSource> Explained<S> {
    /// Explains the errors of `inner`, which leases from `namespace`.
    pub fn new(inner: S, namespace: &str) -> Self {
        Self {
            inner,
            namespace: namespace.to_string(),
        }
    }

    fn explain(&self, error: LeaseError) -> LeaseError {
        let namespace = &self.namespace;
        let detail = error.detail();
        match &error {
            LeaseError::Unavailable(_) => LeaseError::Unavailable(format!(
                "the id-service is unreachable or unavailable; check that it runs and that \
                 SHORTENER_ID_SERVICE names it ({detail})"
            )),
            LeaseError::Throttled { retry_after, .. } => LeaseError::Throttled {
                retry_after: *retry_after,
                detail: format!(
                    "the id-service holds this node to its caller's quota of leases a second (the \
                 caller's leases_per_second in the id-service's tokens file, shared by every \
                 node with this token); the node asks again shortly, and a quota that nodes \
                 starting together meet often can be raised there ({detail})"
                ),
            },
            LeaseError::Unauthorized(_) => LeaseError::Unauthorized(format!(
                "the id-service refused this node's token; set SHORTENER_ID_SERVICE_TOKEN to a \
                 token of the id-service's tokens file that may lease namespace {namespace}, or \
                 check that SHORTENER_ID_NAMESPACE names the namespace the token was made for \
                 ({detail})"
            )),
            LeaseError::UnknownNamespace(_) => LeaseError::UnknownNamespace(format!(
                "the id-service has no namespace {namespace}; create it there (add it to \
                 ID_SERVICE_NAMESPACES and restart the id-service) or set \
                 SHORTENER_ID_NAMESPACE to one that exists ({detail})"
            )),
            LeaseError::Exhausted(_) => LeaseError::Exhausted(format!(
                "namespace {namespace} on the id-service has no IDs left; a new namespace \
                 (SHORTENER_ID_NAMESPACE) starts at ID 1 and so reissues codes unless it comes \
                 with a new code space (a new key and a longer code): see docs/operations.md, \
                 \"Rotating keys and code length\" ({detail})"
            )),
            LeaseError::Refused(_) => LeaseError::Refused(format!(
                "the id-service refused the lease request ({detail})"
            )),
            // Kept as it is: the pool asks for a smaller block.
            LeaseError::Invalid(_) => LeaseError::Invalid(format!(
                "the id-service refused the lease request ({detail})"
            )),
        }
    }
}

impl<S: LeaseSource> LeaseSource for Explained<S> {
    fn lease(&self, size: u64) -> LeaseFuture<'_> {
        self.lease_reporting(size, 0)
    }

    fn lease_reporting(&self, size: u64, high_water: u64) -> LeaseFuture<'_> {
        Box::pin(async move {
            self.inner
                .lease_reporting(size, high_water)
                .await
                .map_err(|error| self.explain(error))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A source that fails every lease with one error.
    struct Failing(LeaseError);

    impl LeaseSource for Failing {
        fn lease(&self, _size: u64) -> LeaseFuture<'_> {
            let error = self.0.clone();
            Box::pin(async move { Err(error) })
        }
    }

    #[tokio::test]
    async fn each_kind_of_failure_names_what_fixes_it() {
        let cases = [
            (
                LeaseError::Unavailable("down".into()),
                "SHORTENER_ID_SERVICE names it",
            ),
            (
                LeaseError::Throttled {
                    detail: "quota".into(),
                    retry_after: std::time::Duration::from_millis(300),
                },
                "leases_per_second",
            ),
            (
                LeaseError::Unauthorized("no".into()),
                "SHORTENER_ID_SERVICE_TOKEN",
            ),
            (
                LeaseError::Unauthorized("no".into()),
                "SHORTENER_ID_NAMESPACE names the namespace",
            ),
            (
                LeaseError::UnknownNamespace("none".into()),
                "ID_SERVICE_NAMESPACES",
            ),
            (LeaseError::Exhausted("empty".into()), "no IDs left"),
        ];
        for (error, says) in cases {
            let cause = error.cause();
            let explained = Explained::new(Failing(error), "links")
                .lease(10)
                .await
                .expect_err("fails");
            assert_eq!(explained.cause(), cause, "{explained}");
            assert!(explained.to_string().contains(says), "{explained}");
        }
    }
}
