//! Abuse limits: 404s per client address (against code enumeration) and creates per API key,
//! both token buckets; and the client address itself, from the socket or a trusted proxy
//! (`client_ip`); and the node's bounded pool of password checks (`password_checks`).
//!
//! A client whose 404 budget is spent is remembered for the `Retry-After` it is told (its next
//! token, in whole seconds, at least one; `spent`), so the redirect edge refuses its requests
//! before it looks anything up: a scanner past its budget costs the node no cache or store
//! lookup.

mod client_ip;
mod keyed;
mod password_checks;
mod spent;

pub use client_ip::{ClientAddressPolicy, client_key};
use governor::Quota;
use keyed::Keyed;
pub use password_checks::{CheckBounds, CheckRefused, PasswordChecks};
use spent::{Spent, Standing};
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

/// Heap bytes of an API key held as a limiter's key, estimated (its usual length,
/// rounded up to the allocator's size class).
const KEY_TEXT_HEAP: u64 = 48;

/// The keyed limiters of a node. Each remembers at most `max_clients` keys ([`keyed`]).
pub struct Limits {
    not_found: Keyed<IpAddr>,
    spent: Spent,
    create: Keyed<String>,
    read: Keyed<String>,
    /// Keyed by the client and a hash of the link's key (a branded host and alias run to
    /// hundreds of bytes): every entry costs the same, whatever the link.
    password: Keyed<(IpAddr, u64)>,
    /// The seed of those hashes, random per node.
    password_keys: foldhash::fast::RandomState,
    password_checks: PasswordChecks,
}

/// The bytes a node's limiter state holds now and may hold at most, by part (the memory
/// gauges' `structure` label, then bytes in use and budget).
pub type LimitMemory = [(&'static str, u64, u64); 4];

fn quota(rate: Rate) -> Quota {
    let per_second = NonZeroU32::new(rate.per_second.max(1)).expect("at least 1");
    let burst = NonZeroU32::new(rate.burst.max(1)).expect("at least 1");
    Quota::per_second(per_second).allow_burst(burst)
}

impl Limits {
    /// Limiters with the given rates: 404s per client address, creates and changes per API
    /// key, reads per API key; password attempts per client address and code, at most
    /// `password_per_minute` a minute. Each limiter remembers at most `max_clients` keys.
    pub fn new(
        not_found: Rate,
        create: Rate,
        read: Rate,
        password_per_minute: u32,
        max_clients: usize,
    ) -> Self {
        let attempts = NonZeroU32::new(password_per_minute.max(1)).expect("at least 1");
        Self {
            not_found: Keyed::new(quota(not_found), max_clients, 0),
            spent: Spent::default(),
            create: Keyed::new(quota(create), max_clients, KEY_TEXT_HEAP),
            read: Keyed::new(quota(read), max_clients, KEY_TEXT_HEAP),
            password: Keyed::new(Quota::per_minute(attempts), max_clients, 0),
            password_keys: foldhash::fast::RandomState::default(),
            password_checks: PasswordChecks::new(CheckBounds::for_this_machine()),
        }
    }

    /// What the limiter state holds now and at most: the 404 budgets, the clients past theirs,
    /// the password attempts per client and code, and the API keys' create and read buckets
    /// together. Estimates: entries times what one costs ([`keyed`], `spent`).
    pub fn memory(&self) -> LimitMemory {
        [
            (
                "limits_not_found",
                self.not_found.bytes(),
                self.not_found.budget(),
            ),
            ("limits_spent", self.spent.bytes(), Spent::budget()),
            (
                "limits_password",
                self.password.bytes(),
                self.password.budget(),
            ),
            (
                "limits_api_keys",
                self.create.bytes() + self.read.bytes(),
                self.create.budget() + self.read.budget(),
            ),
        ]
    }

    /// The node's pool of password checks.
    pub fn password_checks(&self) -> &PasswordChecks {
        &self.password_checks
    }

    /// Takes one token for a password attempt by `client` on `code`.
    pub fn password_attempt(&self, client: IpAddr, code: &str) -> Result<(), Duration> {
        use std::hash::BuildHasher;
        self.password
            .check(&(client, self.password_keys.hash_one(code)))
    }

    /// Takes one token for an API read by `key`.
    pub fn read(&self, key: &str) -> Result<(), Duration> {
        self.read.check(&key.to_string())
    }

    /// Takes one token for a 404 answered to `client`; `Err(retry_after)` once the budget is
    /// spent: the wait for its next token in whole seconds, at least one (what `Retry-After`
    /// says). Until then the client is refused before any lookup (see
    /// [`Limits::refused_before_lookup`]).
    /// A client on probation that paid a token at the door ([`Limits::refused_before_lookup`])
    /// uses that one.
    pub fn not_found(&self, client: IpAddr) -> Result<(), Duration> {
        if self.spent.use_paid(client) {
            return Ok(());
        }
        self.not_found
            .check(&client)
            .map_err(|wait| self.spent_for(client, wait))
    }

    /// Remembers `client` as past its 404 budget for `wait` (in whole seconds, at least one:
    /// what `Retry-After` says), which it returns.
    fn spent_for(&self, client: IpAddr, wait: Duration) -> Duration {
        let retry_after = Duration::from_secs(wait.as_secs().max(1));
        self.spent.mark(client, Instant::now() + retry_after);
        retry_after
    }

    /// Whether any client's 404 budget is spent right now: when not, no request needs its
    /// client address found for [`Limits::refused_before_lookup`] (one atomic read).
    pub fn any_404_budget_spent(&self) -> bool {
        self.spent.any()
    }

    /// `Some(retry_after)` when `client` spent its 404 budget and has no token yet: its request
    /// is answered 429 before the cache or the store is asked. Past its wait, a client that spent
    /// its budget is on probation until it is forgotten: it pays a 404 token here, before the
    /// lookup (one held from a request that found its link, else a new one), and is refused
    /// when it has none; a miss then uses that token ([`Limits::not_found`]) and a hit hands it
    /// back ([`Limits::found`]). So requests that arrive together as its wait ends are not all
    /// looked up before the first miss finds the budget spent.
    pub fn refused_before_lookup(&self, client: IpAddr) -> Option<Duration> {
        match self.spent.standing(client, Instant::now()) {
            Standing::Clear => None,
            Standing::Waiting(wait) => Some(wait),
            Standing::Probation if self.spent.pay_with_credit(client) => None,
            Standing::Probation => match self.not_found.check(&client) {
                Ok(()) => {
                    self.spent.paid(client);
                    None
                }
                Err(wait) => Some(self.spent_for(client, wait)),
            },
        }
    }

    /// `Some(retry_after)` while `client` waits for its next 404 token, without paying one on
    /// probation: for a lookup behind [`Limits::refused_before_lookup`] or one that pays after.
    pub fn waiting_for_404_token(&self, client: IpAddr) -> Option<Duration> {
        match self.spent.standing(client, Instant::now()) {
            Standing::Waiting(wait) => Some(wait),
            Standing::Clear | Standing::Probation => None,
        }
    }

    /// A lookup by `client` found its link: a token it paid at the door is held for its next
    /// request.
    pub fn found(&self, client: IpAddr) {
        self.spent.found(client);
    }

    /// Takes one token for a create by `owner`.
    pub fn create(&self, owner: &str) -> Result<(), Duration> {
        self.create.check(&owner.to_string())
    }

    /// Takes `n` tokens for a batch create by `owner`.
    pub fn create_n(&self, owner: &str, n: u32) -> Result<(), Duration> {
        let Some(n) = NonZeroU32::new(n) else {
            return Ok(());
        };
        // More than the burst can ever hold is refused with a nominal delay.
        self.create.check_n(&owner.to_string(), n)
    }

    /// Forgets idle clients so memory stays bounded (call periodically).
    pub fn housekeeping(&self) {
        self.not_found.housekeeping();
        self.spent.housekeeping(Instant::now());
        self.create.housekeeping();
        self.read.housekeeping();
        self.password.housekeeping();
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
            1000,
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

    /// Past its wait, a client that spent its budget pays at the door: requests that arrive
    /// together are refused once its tokens are paid, a miss uses the token paid for it, and a
    /// hit's token is held for the next request.
    #[test]
    fn on_probation_a_client_pays_before_it_is_looked_up() {
        let slow = Rate {
            per_second: 1,
            burst: 3,
        };
        let limits = Limits::new(slow, slow, slow, 5, 1000);
        let scanner: IpAddr = "10.0.0.1".parse().expect("ip");
        assert!(limits.not_found(scanner).is_ok());
        assert!(limits.not_found(scanner).is_ok());
        // Remembered as spent, its wait over, one token left.
        limits.spent.mark(scanner, Instant::now());
        assert_eq!(
            limits.refused_before_lookup(scanner),
            None,
            "pays its last token"
        );
        assert!(
            limits.refused_before_lookup(scanner).is_some(),
            "a request beside it has nothing to pay with"
        );
        assert!(
            matches!(
                limits.waiting_for_404_token(scanner),
                Some(wait) if wait > Duration::ZERO
            ),
            "and is remembered as waiting again"
        );
        limits.spent.mark(scanner, Instant::now());
        assert!(
            limits.not_found(scanner).is_ok(),
            "the first request's miss uses the token it paid"
        );
        assert!(
            limits.not_found(scanner).is_err(),
            "a miss that paid nothing is charged"
        );

        let crowd: IpAddr = "10.0.0.2".parse().expect("ip");
        limits.spent.mark(crowd, Instant::now());
        for _ in 0..10 {
            assert_eq!(limits.refused_before_lookup(crowd), None);
            assert_eq!(limits.waiting_for_404_token(crowd), None);
            limits.found(crowd);
        }
        // Ten hits paid one token between them: two are left.
        assert!(limits.not_found.check(&crowd).is_ok());
        assert!(limits.not_found.check(&crowd).is_ok());
        assert!(limits.not_found.check(&crowd).is_err());
    }

    /// Password attempts are counted per client and link, and a link on a long branded host
    /// costs its entry no more than a short code does.
    #[test]
    fn password_attempts_cost_the_same_whatever_the_links_key() {
        let rate = Rate {
            per_second: 1,
            burst: 1,
        };
        let limits = Limits::new(rate, rate, rate, 2, 1000);
        let bytes = |limits: &Limits| {
            limits
                .memory()
                .iter()
                .find(|(name, ..)| *name == "limits_password")
                .map(|(_, used, _)| *used)
                .expect("the password limiter")
        };
        let client: IpAddr = "10.0.0.1".parse().expect("ip");
        let long = format!("{}.example/{}", "h".repeat(240), "a".repeat(60));
        assert!(limits.password_attempt(client, "abc1234").is_ok());
        let one = bytes(&limits);
        assert!(limits.password_attempt(client, &long).is_ok());
        assert_eq!(
            bytes(&limits),
            2 * one,
            "the long key's entry costs the same"
        );
        assert!(limits.password_attempt(client, "abc1234").is_ok());
        assert!(
            limits.password_attempt(client, "abc1234").is_err(),
            "two a minute per link"
        );
        assert!(
            limits.password_attempt(client, &long).is_ok(),
            "another link"
        );
        let other: IpAddr = "10.0.0.2".parse().expect("ip");
        assert!(
            limits.password_attempt(other, "abc1234").is_ok(),
            "another client"
        );
    }
}
