//! Abuse limits: 404s per client address (against code enumeration) and creates per API key,
//! both token buckets; and the client address itself, from the socket or a trusted proxy
//! (`client_ip`); and the node's bounded pool of password checks (`password_checks`).
//!
//! A client whose 404 budget is spent is remembered for the `Retry-After` it is told (its next
//! token, in whole seconds, at least one; `spent`), so the redirect edge refuses its requests
//! before it looks anything up: a scanner past its budget costs the node no cache or store
//! lookup.

mod client_ip;
mod password_checks;
mod spent;

pub use client_ip::{ClientAddressPolicy, client_key};
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota};
pub use password_checks::{CheckBounds, CheckRefused, PasswordChecks};
use spent::Spent;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::time::{Duration, Instant};

/// Token-bucket settings: a sustained rate per second and a burst.
#[derive(Debug, Clone, Copy)]
pub struct Rate {
    /// Tokens added per second.
    pub per_second: u32,
    /// Bucket size.
    pub burst: u32,
}

/// The keyed limiters of a node.
pub struct Limits {
    not_found: DefaultKeyedRateLimiter<IpAddr>,
    spent: Spent,
    create: DefaultKeyedRateLimiter<String>,
    read: DefaultKeyedRateLimiter<String>,
    password: DefaultKeyedRateLimiter<(IpAddr, String)>,
    clock: DefaultClock,
    password_checks: PasswordChecks,
}

fn quota(rate: Rate) -> Quota {
    let per_second = NonZeroU32::new(rate.per_second.max(1)).expect("at least 1");
    let burst = NonZeroU32::new(rate.burst.max(1)).expect("at least 1");
    Quota::per_second(per_second).allow_burst(burst)
}

impl Limits {
    /// Limiters with the given rates: 404s per client address, creates and changes per API
    /// key, reads per API key; password attempts per client address and code, at most
    /// `password_per_minute` a minute.
    pub fn new(not_found: Rate, create: Rate, read: Rate, password_per_minute: u32) -> Self {
        let attempts = NonZeroU32::new(password_per_minute.max(1)).expect("at least 1");
        Self {
            not_found: DefaultKeyedRateLimiter::keyed(quota(not_found)),
            spent: Spent::default(),
            create: DefaultKeyedRateLimiter::keyed(quota(create)),
            read: DefaultKeyedRateLimiter::keyed(quota(read)),
            password: DefaultKeyedRateLimiter::keyed(Quota::per_minute(attempts)),
            clock: DefaultClock::default(),
            password_checks: PasswordChecks::new(CheckBounds::for_this_machine()),
        }
    }

    /// The node's pool of password checks.
    pub fn password_checks(&self) -> &PasswordChecks {
        &self.password_checks
    }

    /// Takes one token for a password attempt by `client` on `code`.
    pub fn password_attempt(&self, client: IpAddr, code: &str) -> Result<(), Duration> {
        self.password
            .check_key(&(client, code.to_string()))
            .map_err(|nu| nu.wait_time_from(self.clock.now()))
    }

    /// Takes one token for an API read by `key`.
    pub fn read(&self, key: &str) -> Result<(), Duration> {
        self.read
            .check_key(&key.to_string())
            .map_err(|nu| nu.wait_time_from(self.clock.now()))
    }

    /// Takes one token for a 404 answered to `client`; `Err(retry_after)` once the budget is
    /// spent: the wait for its next token in whole seconds, at least one (what `Retry-After`
    /// says). Until then the client is refused before any lookup (see
    /// [`Limits::refused_before_lookup`]).
    pub fn not_found(&self, client: IpAddr) -> Result<(), Duration> {
        self.not_found.check_key(&client).map_err(|nu| {
            let wait = nu.wait_time_from(self.clock.now());
            let retry_after = Duration::from_secs(wait.as_secs().max(1));
            self.spent.mark(client, Instant::now() + retry_after);
            retry_after
        })
    }

    /// Whether any client's 404 budget is spent right now: when not, no request needs its
    /// client address found for [`Limits::refused_before_lookup`] (one atomic read).
    pub fn any_404_budget_spent(&self) -> bool {
        self.spent.any()
    }

    /// `Some(retry_after)` when `client` spent its 404 budget and has no token yet: its request
    /// is answered 429 before the cache or the store is asked.
    pub fn refused_before_lookup(&self, client: IpAddr) -> Option<Duration> {
        self.spent.wait(client, Instant::now())
    }

    /// Takes one token for a create by `owner`.
    pub fn create(&self, owner: &str) -> Result<(), Duration> {
        self.create
            .check_key(&owner.to_string())
            .map_err(|nu| nu.wait_time_from(self.clock.now()))
    }

    /// Takes `n` tokens for a batch create by `owner`.
    pub fn create_n(&self, owner: &str, n: u32) -> Result<(), Duration> {
        let Some(n) = NonZeroU32::new(n) else {
            return Ok(());
        };
        match self.create.check_key_n(&owner.to_string(), n) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(nu)) => Err(nu.wait_time_from(self.clock.now())),
            // More than the burst can ever hold: refuse with a nominal delay.
            Err(_) => Err(Duration::from_secs(1)),
        }
    }

    /// Forgets idle clients so memory stays bounded (call periodically).
    pub fn housekeeping(&self) {
        self.not_found.retain_recent();
        self.not_found.shrink_to_fit();
        self.spent.housekeeping(Instant::now());
        self.create.retain_recent();
        self.create.shrink_to_fit();
        self.read.retain_recent();
        self.read.shrink_to_fit();
        self.password.retain_recent();
        self.password.shrink_to_fit();
        self.password_checks.housekeeping();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_over_its_404_budget_is_refused_while_others_are_not() {
        let limits = Limits::new(
            Rate {
                per_second: 1,
                burst: 3,
            },
            Rate {
                per_second: 1,
                burst: 1,
            },
            Rate {
                per_second: 1,
                burst: 2,
            },
            5,
        );
        let scanner: IpAddr = "10.0.0.1".parse().expect("ip");
        let other: IpAddr = "10.0.0.2".parse().expect("ip");
        for _ in 0..3 {
            assert!(limits.not_found(scanner).is_ok());
        }
        let retry = limits.not_found(scanner).expect_err("over budget");
        assert!(
            retry > Duration::ZERO && retry <= Duration::from_secs(1),
            "{retry:?}"
        );
        assert!(limits.not_found(other).is_ok());
        assert!(limits.create("k").is_ok());
        assert!(limits.create("k").is_err());
        assert!(limits.create_n("j", 5).is_err(), "more than the burst");
        assert!(limits.read("k").is_ok() && limits.read("k").is_ok());
        assert!(
            limits.read("k").is_err(),
            "reads have a bucket of their own"
        );
    }
}
