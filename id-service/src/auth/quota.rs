//! A caller's quotas: token buckets for IDs and for leases (governor's GCRA limiters).

use crate::error::Error;
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultDirectRateLimiter, Quota};
use std::num::NonZeroU32;

/// How many seconds of its rate a caller's IDs bucket holds unless `ids_burst` says otherwise.
const DEFAULT_BURST_SECONDS: NonZeroU32 = NonZeroU32::new(10).expect("10 is not zero");

/// The quota settings of one caller, as the tokens file states them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QuotaSpec {
    /// IDs per second (leases count their size, AllocateIds its count); `None`: unlimited.
    pub ids_per_second: Option<NonZeroU32>,
    /// The most IDs one burst may take; defaults to ten seconds' worth.
    pub ids_burst: Option<NonZeroU32>,
    /// Leases per second; `None`: unlimited.
    pub leases_per_second: Option<NonZeroU32>,
}

impl QuotaSpec {
    /// The highest rate accepted: governor's buckets refill in whole nanoseconds.
    pub const MAX_RATE: u32 = 1_000_000_000;

    /// The IDs bucket's size.
    pub fn effective_ids_burst(&self) -> Option<NonZeroU32> {
        let rate = self.ids_per_second?;
        Some(
            self.ids_burst
                .unwrap_or_else(|| rate.saturating_mul(DEFAULT_BURST_SECONDS)),
        )
    }
}

/// The live buckets of one caller. Kept across reloads of the tokens file while the caller's
/// settings stay the same, so a reload never hands out a fresh burst.
pub struct Quotas {
    spec: QuotaSpec,
    ids: Option<DefaultDirectRateLimiter>,
    leases: Option<DefaultDirectRateLimiter>,
    clock: DefaultClock,
}

impl Quotas {
    /// Fresh, full buckets for `spec`.
    pub fn new(spec: QuotaSpec) -> Self {
        let ids = spec.ids_per_second.map(|rate| {
            let burst = spec.effective_ids_burst().unwrap_or(rate);
            DefaultDirectRateLimiter::direct(Quota::per_second(rate).allow_burst(burst))
        });
        let leases = spec
            .leases_per_second
            .map(|rate| DefaultDirectRateLimiter::direct(Quota::per_second(rate)));
        Self {
            spec,
            ids,
            leases,
            clock: DefaultClock::default(),
        }
    }

    /// The settings these buckets were made for.
    pub fn spec(&self) -> QuotaSpec {
        self.spec
    }

    /// Takes one lease token, or says when one is available.
    pub fn take_lease(&self, caller: &str) -> Result<(), Error> {
        let Some(leases) = &self.leases else {
            return Ok(());
        };
        leases.check().map_err(|not_until| {
            let retry_after = not_until.wait_time_from(self.clock.now());
            Error::QuotaExceeded {
                message: format!(
                    "caller {caller} is above its quota of leases per second; retry after {} ms",
                    retry_after.as_millis().max(1)
                ),
                retry_after,
            }
        })
    }

    /// Takes `count` ID tokens at once, or says when they are available. A count above the
    /// bucket's size can never pass: it is `InvalidArgument`, without retry advice (a client
    /// asks for fewer, as id-client's pool does, rather than again).
    pub fn take_ids(&self, caller: &str, count: u64) -> Result<(), Error> {
        let Some(ids) = &self.ids else {
            return Ok(());
        };
        let burst = self.spec.effective_ids_burst().map_or(0, NonZeroU32::get);
        let too_many = || {
            Error::InvalidArgument(format!(
                "{count} IDs are more than caller {caller}'s quota allows at once ({burst}); \
                 ask for fewer, or raise its ids_burst"
            ))
        };
        let Some(n) = u32::try_from(count).ok().and_then(NonZeroU32::new) else {
            return Err(too_many());
        };
        match ids.check_n(n) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(not_until)) => {
                let retry_after = not_until.wait_time_from(self.clock.now());
                Err(Error::QuotaExceeded {
                    message: format!(
                        "caller {caller} is above its quota of IDs per second; retry after {} ms",
                        retry_after.as_millis().max(1)
                    ),
                    retry_after,
                })
            }
            Err(_) => Err(too_many()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn nz(n: u32) -> Option<NonZeroU32> {
        NonZeroU32::new(n)
    }

    #[test]
    fn an_id_quota_refuses_beyond_its_burst_with_retry_advice() {
        let quotas = Quotas::new(QuotaSpec {
            ids_per_second: nz(10),
            ids_burst: nz(100),
            leases_per_second: None,
        });
        quotas.take_ids("a", 60).expect("within the burst");
        quotas.take_ids("a", 40).expect("the rest of the burst");
        match quotas.take_ids("a", 10) {
            Err(Error::QuotaExceeded { retry_after, .. }) => {
                assert!(retry_after > Duration::ZERO && retry_after <= Duration::from_secs(1));
            }
            other => panic!("expected a quota refusal, got {other:?}"),
        }
        // More than the bucket holds can never pass: bad input, not a wait.
        assert!(matches!(
            quotas.take_ids("a", 101),
            Err(Error::InvalidArgument(_))
        ));
        quotas.take_lease("a").expect("no lease quota: unlimited");
    }

    #[test]
    fn the_id_burst_defaults_to_ten_seconds_of_the_rate() {
        let spec = QuotaSpec {
            ids_per_second: nz(7),
            ..QuotaSpec::default()
        };
        assert_eq!(spec.effective_ids_burst(), nz(70));
        assert_eq!(QuotaSpec::default().effective_ids_burst(), None);
    }

    #[test]
    fn a_lease_quota_counts_calls() {
        let quotas = Quotas::new(QuotaSpec {
            leases_per_second: nz(2),
            ..QuotaSpec::default()
        });
        quotas.take_lease("a").expect("first");
        quotas.take_lease("a").expect("second");
        assert!(matches!(
            quotas.take_lease("a"),
            Err(Error::QuotaExceeded { .. })
        ));
        quotas
            .take_ids("a", u64::MAX)
            .expect("no ID quota: unlimited");
    }
}
