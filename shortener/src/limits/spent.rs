//! Clients whose 404 budget is spent: refused until their next token, then on probation, when
//! a request pays its 404 token before it is looked up.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{PoisonError, RwLock};
use std::time::{Duration, Instant};

/// Clients remembered at most: a client enters only by spending a whole 404 burst, and leaves at
/// the first housekeeping after its wait that finds it quiet since the one before (or sooner, to
/// make room for a newly spent client, once past its wait and quiet since that housekeeping). Past this many clients still waiting, a newly spent
/// client is not remembered and its requests are looked up and refused as before (each 404
/// still costs it a token it does not have).
const MAX_REMEMBERED: usize = 65_536;

/// The least time between two sweeps a full table makes for room, so that a flood of newly
/// spent clients cannot make every refusal walk the table.
const SWEEP_EVERY: Duration = Duration::from_millis(250);

/// Tokens a client on probation holds at most (and never more than its burst).
const MAX_CREDIT: u32 = 64;

/// What one remembered client costs (see [`Spent::bytes`]).
const ENTRY_BYTES: u64 = 2 * (std::mem::size_of::<(IpAddr, Entry)>() as u64 + 1);

/// One remembered client.
#[derive(Debug)]
struct Entry {
    /// Refused before any lookup until then.
    until: Instant,
    /// Tokens paid at the door for requests that found their link (or ended before a lookup
    /// found nothing), held for the client's next requests.
    credit: AtomicU32,
    /// Asked for anything since the last housekeeping.
    seen: AtomicBool,
}

/// Where a client stands at the door.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Standing {
    /// Not remembered: looked up, and charged for a miss afterwards.
    Clear,
    /// Refused before any lookup, for this long still.
    Waiting(Duration),
    /// Past its wait, not yet forgotten: pays a token (or uses one held) before the lookup.
    Probation,
}

#[derive(Default)]
struct Table {
    clients: HashMap<IpAddr, Entry>,
    swept: Option<Instant>,
}

/// The clients past their 404 budget, for the redirect edge's check before any lookup.
///
/// A client is refused until its next token. Past that, requests arriving together (a scanner on
/// many connections) would all be looked up before the first miss found the budget spent again;
/// so a remembered client pays a token at the door before it is looked up ([`Standing`]), and a
/// miss uses the token paid for it instead of taking another. The token of a request that did
/// not use it (it found its link) is held for the client's next request, so a client whose
/// requests find their links (many people behind one address) pays once per request in flight,
/// not per request.
#[derive(Default)]
pub(super) struct Spent {
    /// How many are remembered: read without the lock on every redirect, so a node nobody
    /// scans pays one atomic load.
    count: AtomicUsize,
    table: RwLock<Table>,
}

impl Spent {
    /// `client` has no 404 token before `until`.
    pub(super) fn mark(&self, client: IpAddr, until: Instant) {
        let mut table = self.write();
        if let Some(entry) = table.clients.get_mut(&client) {
            entry.until = until;
            return;
        }
        if table.clients.len() >= MAX_REMEMBERED {
            let now = Instant::now();
            if table.swept.is_some_and(|at| now < at + SWEEP_EVERY) {
                return;
            }
            table.swept = Some(now);
            table
                .clients
                .retain(|_, entry| entry.until > now || entry.seen.load(Ordering::Relaxed));
            self.count.store(table.clients.len(), Ordering::Relaxed);
            if table.clients.len() >= MAX_REMEMBERED {
                return;
            }
        }
        let entry = Entry {
            until,
            credit: AtomicU32::new(0),
            seen: AtomicBool::new(true),
        };
        table.clients.insert(client, entry);
        self.count.store(table.clients.len(), Ordering::Relaxed);
    }

    /// Whether any client is remembered.
    pub(super) fn any(&self) -> bool {
        self.count.load(Ordering::Relaxed) > 0
    }

    /// Where `client` stands at `now`.
    pub(super) fn standing(&self, client: IpAddr, now: Instant) -> Standing {
        if !self.any() {
            return Standing::Clear;
        }
        let table = self.read();
        let Some(entry) = table.clients.get(&client) else {
            return Standing::Clear;
        };
        entry.seen.store(true, Ordering::Relaxed);
        match entry.until.checked_duration_since(now) {
            Some(wait) if !wait.is_zero() => Standing::Waiting(wait),
            _ => Standing::Probation,
        }
    }

    /// How long `client` still waits at `now`, if it is remembered and its time has not come;
    /// unlike [`Spent::standing`], asking does not keep it remembered.
    pub(super) fn waiting(&self, client: IpAddr, now: Instant) -> Option<Duration> {
        if !self.any() {
            return None;
        }
        let table = self.read();
        let entry = table.clients.get(&client)?;
        entry
            .until
            .checked_duration_since(now)
            .filter(|wait| !wait.is_zero())
    }

    /// Pays `client`'s door with a token it holds; `false` when it holds none.
    pub(super) fn pay_with_credit(&self, client: IpAddr) -> bool {
        self.with(client, |entry| take_one(&entry.credit))
    }

    /// Holds a token `client` paid at the door and did not use for its next request, up to
    /// `most` held (at most [`MAX_CREDIT`]; past it the token is spent).
    pub(super) fn credit(&self, client: IpAddr, most: u32) {
        let most = most.min(MAX_CREDIT);
        self.with(client, |entry| {
            entry
                .credit
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| {
                    (c < most).then_some(c + 1)
                })
                .is_ok()
        });
    }

    fn with(&self, client: IpAddr, act: impl FnOnce(&Entry) -> bool) -> bool {
        self.read().clients.get(&client).is_some_and(act)
    }

    /// Bytes the remembered clients take, estimated: each client's slot (address, time, tokens
    /// and flag, one control byte), doubled for the free slots a hash table keeps.
    pub(super) fn bytes(&self) -> u64 {
        self.count.load(Ordering::Relaxed) as u64 * ENTRY_BYTES
    }

    /// [`Spent::bytes`] with as many clients as are ever remembered.
    pub(super) fn budget() -> u64 {
        MAX_REMEMBERED as u64 * ENTRY_BYTES
    }

    /// Forgets the clients past their wait that asked for nothing since the last housekeeping
    /// (ending their probation); the others are marked quiet for the next.
    pub(super) fn housekeeping(&self, now: Instant) {
        let mut table = self.write();
        table
            .clients
            .retain(|_, entry| entry.until > now || entry.seen.swap(false, Ordering::Relaxed));
        table.clients.shrink_to_fit();
        self.count.store(table.clients.len(), Ordering::Relaxed);
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Table> {
        self.table.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Table> {
        self.table.write().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Takes one from `count` unless it is zero.
fn take_one(count: &AtomicU32) -> bool {
    count
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| c.checked_sub(1))
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(i: u32) -> IpAddr {
        IpAddr::from(i.to_be_bytes())
    }

    #[test]
    fn a_spent_client_waits_then_is_on_probation_until_a_quiet_housekeeping() {
        let spent = Spent::default();
        let (now, one, other) = (Instant::now(), client(1), client(2));
        assert!(!spent.any());
        assert_eq!(spent.standing(one, now), Standing::Clear);
        spent.mark(one, now + Duration::from_millis(300));
        assert!(spent.any());
        assert_eq!(spent.bytes(), ENTRY_BYTES, "the gauge moves");
        assert_eq!(
            spent.standing(one, now),
            Standing::Waiting(Duration::from_millis(300))
        );
        assert_eq!(spent.standing(other, now), Standing::Clear, "only that one");
        let later = now + Duration::from_millis(300);
        assert_eq!(spent.standing(one, later), Standing::Probation);
        // Asked for since the last housekeeping: kept.
        spent.housekeeping(later);
        assert_eq!(spent.standing(one, later), Standing::Probation);
        spent.housekeeping(later);
        assert_eq!(spent.standing(one, later), Standing::Probation);
        // Quiet from one housekeeping to the next: forgotten.
        spent.housekeeping(later);
        spent.housekeeping(later);
        assert!(!spent.any());
        assert_eq!(spent.standing(one, later), Standing::Clear);
        assert_eq!(spent.bytes(), 0);
    }

    #[test]
    fn tokens_held_are_used_once_each_and_bounded() {
        let spent = Spent::default();
        let one = client(1);
        spent.credit(one, 5);
        assert!(
            !spent.pay_with_credit(one),
            "nothing remembered, nothing held"
        );
        spent.mark(one, Instant::now());
        assert!(!spent.pay_with_credit(one), "no token held yet");
        spent.credit(one, 5);
        assert!(spent.pay_with_credit(one), "held for the next request");
        assert!(!spent.pay_with_credit(one), "once");
        for _ in 0..10 {
            spent.credit(one, 3);
        }
        let mut held = 0;
        while spent.pay_with_credit(one) {
            held += 1;
        }
        assert_eq!(held, 3, "no more than asked");
        for _ in 0..(MAX_CREDIT + 10) {
            spent.credit(one, u32::MAX);
        }
        let mut held = 0;
        while spent.pay_with_credit(one) {
            held += 1;
        }
        assert_eq!(held, MAX_CREDIT, "and never more than the bound");
    }

    #[test]
    fn the_remembered_clients_are_bounded_and_a_full_table_makes_room_from_the_past() {
        let spent = Spent::default();
        let now = Instant::now();
        let until = now + Duration::from_secs(60);
        for i in 0..(MAX_REMEMBERED as u32 + 10) {
            spent.mark(client(i), until);
        }
        assert_eq!(spent.count.load(Ordering::Relaxed), MAX_REMEMBERED);
        assert_eq!(spent.bytes(), Spent::budget(), "the gauge is at its bound");
        // One already remembered is still updated.
        spent.mark(client(0), until + Duration::from_secs(1));
        assert_eq!(spent.count.load(Ordering::Relaxed), MAX_REMEMBERED);
        // Past their wait and quiet since the last housekeeping, the clients a full table holds
        // give way to newly spent ones without waiting for the next (at most one sweep per
        // SWEEP_EVERY); one still asking keeps its place.
        let spent = Spent::default();
        for i in 0..MAX_REMEMBERED as u32 {
            spent.mark(client(i), now);
        }
        spent.housekeeping(Instant::now());
        assert_eq!(
            spent.count.load(Ordering::Relaxed),
            MAX_REMEMBERED,
            "newly spent"
        );
        assert_eq!(
            spent.standing(client(7), Instant::now()),
            Standing::Probation
        );
        let newcomer = client(u32::MAX);
        spent.mark(newcomer, Instant::now() + Duration::from_secs(60));
        assert!(
            matches!(
                spent.standing(newcomer, Instant::now()),
                Standing::Waiting(_)
            ),
            "the newly spent client is refused before any lookup"
        );
        assert_eq!(
            spent.count.load(Ordering::Relaxed),
            2,
            "it and the one asking"
        );
        assert_eq!(
            spent.standing(client(7), Instant::now()),
            Standing::Probation
        );
        // A second newcomer within SWEEP_EVERY of the sweep finds room without one.
        spent.mark(
            client(u32::MAX - 1),
            Instant::now() + Duration::from_secs(60),
        );
        assert_eq!(spent.count.load(Ordering::Relaxed), 3);
    }
}
