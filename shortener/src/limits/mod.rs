//! Abuse limits: 404s per client address (against code enumeration) and creates per API key,
//! both token buckets; and the client address itself, from the socket or a trusted proxy
//! (`client_ip`); the node's bounded pool of password checks (`password_checks`); and the
//! places of heavy work running at once per node, tenant and key (`places`).
//!
//! A client whose 404 budget is spent is remembered for the `Retry-After` it is told (its next
//! token, in whole seconds, at least one; `spent`), so the redirect edge refuses its requests
//! before it looks anything up: a scanner past its budget costs the node no cache or store
//! lookup.

mod client_ip;
mod keyed;
mod password_checks;
mod places;
mod spent;

pub use client_ip::{ClientAddressPolicy, client_key};
use governor::Quota;
use keyed::Keyed;
pub use password_checks::{CheckBounds, CheckRefused, PasswordChecks};
pub use places::{Gate, Place, Places};
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

/// A 404 token a client on probation paid at the door for one request ([`Limits::door`]):
/// handed back by a lookup that found its link ([`Paid::refund`]), to be held for the client's
/// next request; spent by anything else, a miss, a store error or a request that ends before
/// its lookup does (a client that hangs up mid-lookup has had the lookup all the same).
#[must_use = "a dropped token is spent; a lookup that found its link refunds it"]
pub struct Paid<'a> {
    limits: &'a Limits,
    client: IpAddr,
}

impl Paid<'_> {
    /// The request found nothing: the token paid is its 404's.
    pub fn spend(self) {}

    /// The request found its link: the token is held for the client's next request, up to its
    /// burst.
    pub fn refund(self) {
        let most = self.limits.not_found_burst;
        self.limits.spent.credit(self.client, most);
    }
}

/// The keyed limiters of a node. Each remembers at most `max_clients` keys ([`keyed`]).
pub struct Limits {
    not_found: Keyed<IpAddr>,
    /// The 404 budgets of IPv6 networks ([`Limits::network_of`]), [`NETWORK_FACTOR`] times a
    /// client's.
    network: Keyed<IpAddr>,
    /// Whether IPv6 clients are counted by a prefix longer than [`NETWORK_PREFIX`], and so in
    /// their network's budget too.
    networks: bool,
    /// The networks past their 404 budget: a table of their own, since a network's key (its
    /// /48) is the same address as the key of the first /64 in it.
    network_spent: Spent,
    /// A client's 404 burst: the most tokens it holds from requests that did not use them.
    not_found_burst: u32,
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

/// The leading bits of an IPv6 address that name the network its 404s are also counted in:
/// one site's or customer's allocation, which holds 65,536 /64s, each a client of its own.
const NETWORK_PREFIX: u8 = 48;

/// How many clients' 404 budgets a network's holds (its rate and its burst alike).
const NETWORK_FACTOR: u32 = 16;

/// Which budget ran out: the client's own, or its network's.
enum Spender {
    Client(Duration),
    Network(IpAddr, Duration),
}

/// A wait in whole seconds, at least one (what `Retry-After` says).
fn whole_seconds(wait: Duration) -> Duration {
    Duration::from_secs(wait.as_secs().max(1))
}

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
            network: Keyed::new(
                quota(Rate {
                    per_second: not_found.per_second.saturating_mul(NETWORK_FACTOR),
                    burst: not_found.burst.saturating_mul(NETWORK_FACTOR),
                }),
                max_clients,
                0,
            ),
            networks: true,
            network_spent: Spent::default(),
            not_found_burst: not_found.burst,
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
                self.not_found.bytes() + self.network.bytes(),
                self.not_found.budget() + self.network.budget(),
            ),
            (
                "limits_spent",
                self.spent.bytes() + self.network_spent.bytes(),
                2 * Spent::budget(),
            ),
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
    /// says). Until then the client is refused before any lookup (see [`Limits::door`]). A
    /// miss of a request that paid at the door spends that token instead ([`Paid::spend`]).
    ///
    /// An IPv6 client's 404s are counted in its network's budget as well ([`Limits::network_of`]):
    /// once that is spent, every client of the network is refused as its own would be, so
    /// the 65,536 /64s of one allocation are not 65,536 budgets.
    pub fn not_found(&self, client: IpAddr) -> Result<(), Duration> {
        self.take_404_token(client)
            .map_err(|spender| match spender {
                Spender::Client(wait) => {
                    let retry_after = whole_seconds(wait);
                    self.spent.mark(client, Instant::now() + retry_after);
                    retry_after
                }
                Spender::Network(network, wait) => self.network_spent_for(network, wait),
            })
    }

    /// Takes one 404 token of `client` and, for an IPv6 client, one of its network.
    fn take_404_token(&self, client: IpAddr) -> Result<(), Spender> {
        self.not_found.check(&client).map_err(Spender::Client)?;
        if let Some(network) = self.network_of(client) {
            self.network
                .check(&network)
                .map_err(|wait| Spender::Network(network, wait))?;
        }
        Ok(())
    }

    /// Remembers `network` as past its 404 budget for `wait` (in whole seconds), which it
    /// returns.
    fn network_spent_for(&self, network: IpAddr, wait: Duration) -> Duration {
        let retry_after = whole_seconds(wait);
        self.network_spent
            .mark(network, Instant::now() + retry_after);
        retry_after
    }

    /// Counts IPv6 clients in their network's 404 budget too, unless they are counted by a
    /// prefix of [`NETWORK_PREFIX`] bits or fewer already (`ipv6_prefix`,
    /// `SHORTENER_IPV6_PREFIX`).
    pub fn counting_networks(mut self, ipv6_prefix: u8) -> Self {
        self.networks = ipv6_prefix > NETWORK_PREFIX;
        self
    }

    /// The network an IPv6 `client` (a client key) is also counted in: its /48.
    fn network_of(&self, client: IpAddr) -> Option<IpAddr> {
        match client {
            IpAddr::V6(_) if self.networks => Some(client_key(client, NETWORK_PREFIX)),
            _ => None,
        }
    }

    /// Whether any client's 404 budget is spent right now: when not, no request needs its
    /// client address found for [`Limits::door`] (one atomic read).
    pub fn any_404_budget_spent(&self) -> bool {
        self.spent.any() || self.network_spent.any()
    }

    /// The door before a lookup by `client`: `Err(retry_after)` when it spent its 404 budget
    /// and has no token yet, so its request is answered 429 before the cache or the store is
    /// asked. Past its wait, a client that spent its budget is on probation until it is
    /// forgotten: it pays a 404 token here, before the lookup (one held from an earlier request,
    /// else a new one), and is refused this request when it has none. The token paid is the
    /// request's [`Paid`]: a miss spends it instead of taking another ([`Paid::spend`]), as does
    /// a request that ends before its lookup does; one that found its link hands it back to be
    /// held for the client's next ([`Paid::refund`]). So requests that arrive together as its
    /// wait ends are looked up only as far as its tokens go.
    pub fn door(&self, client: IpAddr) -> Result<Option<Paid<'_>>, Duration> {
        if let Some(wait) = self.network_waiting(client) {
            return Err(wait);
        }
        match self.spent.standing(client, Instant::now()) {
            Standing::Clear => Ok(None),
            Standing::Waiting(wait) => Err(wait),
            Standing::Probation => {
                if !self.spent.pay_with_credit(client) {
                    // A refusal here starts no new wait of the client's own.
                    self.take_404_token(client)
                        .map_err(|spender| match spender {
                            Spender::Client(wait) => whole_seconds(wait),
                            Spender::Network(network, wait) => {
                                self.network_spent_for(network, wait)
                            }
                        })?;
                }
                Ok(Some(Paid {
                    limits: self,
                    client,
                }))
            }
        }
    }

    /// `Some(retry_after)` while `client` waits for its next 404 token, without paying one on
    /// probation: for a lookup behind [`Limits::door`] or one that pays after.
    pub fn waiting_for_404_token(&self, client: IpAddr) -> Option<Duration> {
        if let Some(wait) = self.network_waiting(client) {
            return Some(wait);
        }
        match self.spent.standing(client, Instant::now()) {
            Standing::Waiting(wait) => Some(wait),
            Standing::Clear | Standing::Probation => None,
        }
    }

    /// The wait of `client`'s network while its 404 budget is spent (a network past its wait
    /// pays nothing at the door: its clients do).
    fn network_waiting(&self, client: IpAddr) -> Option<Duration> {
        let network = self.network_of(client)?;
        self.network_spent.waiting(network, Instant::now())
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
        self.network.housekeeping();
        self.network_spent.housekeeping(Instant::now());
        self.spent.housekeeping(Instant::now());
        self.create.housekeeping();
        self.read.housekeeping();
        self.password.housekeeping();
        self.password_checks.housekeeping();
    }
}

#[cfg(test)]
mod tests;
