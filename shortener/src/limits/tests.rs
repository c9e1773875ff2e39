//! The limits together: budgets, probation and networks.

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
/// together are refused once its tokens are paid (without restarting its wait), a miss
/// spends the token its request paid, as does a request dropped mid-lookup, and the token of
/// a request that found its link is held for the client's next, up to its burst.
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
    let first = limits.door(scanner).expect("pays its last token");
    assert!(first.is_some(), "on probation, the request paid");
    assert!(
        limits.door(scanner).is_err(),
        "a request beside it has nothing to pay with"
    );
    assert_eq!(
        limits.waiting_for_404_token(scanner),
        None,
        "a refusal at the door does not restart the wait"
    );
    first.expect("paid").spend();
    assert!(
        limits.door(scanner).is_err(),
        "the miss spent it: nothing is held"
    );

    let crowd: IpAddr = "10.0.0.2".parse().expect("ip");
    limits.spent.mark(crowd, Instant::now());
    for _ in 0..10 {
        // A request that found its link hands its token back.
        limits.door(crowd).expect("room").expect("paid").refund();
    }
    // Ten requests paid one token between them: two are left.
    assert!(limits.not_found.check(&crowd).is_ok());
    assert!(limits.not_found.check(&crowd).is_ok());
    assert!(limits.not_found.check(&crowd).is_err());
    // Three requests at once: the one held, then none (the bucket is empty).
    let held = limits.door(crowd).expect("held").expect("paid");
    assert!(limits.door(crowd).is_err());
    // A request that ends before its lookup does (its client hung up) has had the lookup:
    // its token is spent, not held for the next.
    drop(held);
    assert!(
        limits.door(crowd).is_err(),
        "a dropped token is not handed back"
    );
    let stranger: IpAddr = "10.0.0.3".parse().expect("ip");
    assert!(
        limits.door(stranger).is_ok_and(|paid| paid.is_none()),
        "a client not remembered pays nothing at the door"
    );
}

/// The /64s of one IPv6 allocation share their /48's budget beside their own: once a
/// scanner rotating through them has spent it, a /64 it never used is refused before any
/// lookup, and another network is not. The first /64 of a network, whose key is the same
/// address as the network's, is a client like the others.
#[test]
fn the_clients_of_one_ipv6_network_share_its_budget_too() {
    let rate = Rate {
        per_second: 1,
        burst: 2,
    };
    let client = |net: u16, sub: u16| {
        let address: IpAddr = format!("2001:db8:{net:x}:{sub:x}::1").parse().expect("ip");
        client_key(address, 64)
    };
    // The first /64 spending its own budget leaves the rest of its network alone.
    let limits = Limits::new(rate, rate, rate, 5, 10_000);
    for _ in 0..2 {
        assert!(limits.not_found(client(7, 0)).is_ok());
    }
    assert!(limits.not_found(client(7, 0)).is_err());
    assert!(limits.door(client(7, 0)).is_err(), "it waits");
    assert!(
        limits.door(client(7, 5)).is_ok_and(|paid| paid.is_none()),
        "another /64 of its network does not"
    );
    assert!(limits.not_found(client(7, 5)).is_ok());

    let limits = Limits::new(rate, rate, rate, 5, 10_000);
    let network_budget = 2 * NETWORK_FACTOR as usize;
    let mut answered = 0;
    for sub in 0..(network_budget as u16 + 5) {
        // Each /64 within its own burst.
        if limits.not_found(client(7, sub)).is_ok() {
            answered += 1;
        }
    }
    // (A token or two more may come in while the loop runs: the network's rate is 16/s.)
    assert!(
        (network_budget..network_budget + 3).contains(&answered),
        "the network's budget bounds them all: {answered} answered"
    );
    assert!(
        limits.door(client(7, 999)).is_err(),
        "a fresh /64 of the network is refused before any lookup"
    );
    assert!(limits.waiting_for_404_token(client(7, 998)).is_some());
    assert!(
        limits.door(client(8, 0)).is_ok_and(|paid| paid.is_none()),
        "another network"
    );
    assert!(limits.not_found(client(8, 0)).is_ok());
    // IPv4 clients, and IPv6 clients counted by /48 or less, have no network of their own.
    assert_eq!(limits.network_of("192.0.2.1".parse().expect("ip")), None);
    let wide = Limits::new(rate, rate, rate, 5, 10_000).counting_networks(48);
    assert_eq!(wide.network_of(client(7, 0)), None);
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
