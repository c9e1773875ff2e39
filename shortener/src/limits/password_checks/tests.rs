//! The password checks' bounds: how many run, how many wait, and who is refused.

use super::*;
use std::sync::mpsc;

fn ip(last: u8) -> IpAddr {
    IpAddr::from([10, 0, 0, last])
}

/// A check that runs until told to finish.
fn held() -> (impl FnOnce() -> u8 + Send + 'static, mpsc::Sender<u8>) {
    let (finish, wait) = mpsc::channel();
    (move || wait.recv().unwrap_or(0), finish)
}

/// Runs `check` for `client` in a task of its own.
fn spawn<T: Send + 'static>(
    checks: &Arc<PasswordChecks>,
    client: IpAddr,
    check: impl FnOnce() -> T + Send + 'static,
) -> tokio::task::JoinHandle<Result<T, CheckRefused>> {
    let checks = Arc::clone(checks);
    tokio::spawn(async move { checks.run(client, check).await })
}

async fn until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !condition() {
        assert!(Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_pool_refuses_at_once_and_a_light_client_goes_first() {
    let checks = Arc::new(PasswordChecks::new(CheckBounds {
        workers: 1,
        queue: 2,
        share: 2,
        max_wait: Duration::from_secs(5),
    }));
    let state = |checks: &PasswordChecks| {
        let s = checks.inner.lock();
        (s.running, s.waiting.len())
    };
    // A busy client: one check running, one waiting; its share is then spent.
    let (first, finish_first) = held();
    let running = spawn(&checks, ip(1), first);
    until("the first check runs", || state(&checks) == (1, 0)).await;
    let (second, finish_second) = held();
    let queued = spawn(&checks, ip(1), second);
    until("the second check waits", || state(&checks) == (1, 1)).await;
    assert_eq!(
        checks.run(ip(1), || 0).await,
        Err(CheckRefused::Busy),
        "past its share"
    );
    // Another busy client (one check in its window) fills the queue.
    {
        let mut s = checks.inner.lock();
        s.charge(ip(2), Instant::now());
    }
    let (third, finish_third) = held();
    let other = spawn(&checks, ip(2), third);
    until("the queue is full", || state(&checks) == (1, 2)).await;
    // A client heavier than every waiter is refused at once.
    {
        let mut s = checks.inner.lock();
        for _ in 0..5 {
            s.charge(ip(3), Instant::now());
        }
    }
    assert_eq!(checks.run(ip(3), || 0).await, Err(CheckRefused::Busy));
    // A fresh client pushes the heaviest waiter out, weighed now: ip 1's (a check run and
    // two places held, against ip 2's one and one), and goes first.
    let user = spawn(&checks, ip(9), || 9);
    assert_eq!(queued.await.expect("join"), Err(CheckRefused::Busy));
    drop(finish_second);
    finish_first.send(1).expect("finish");
    assert_eq!(running.await.expect("join"), Ok(1));
    assert_eq!(user.await.expect("join"), Ok(9), "the light client ran");
    finish_third.send(3).expect("finish");
    assert_eq!(other.await.expect("join"), Ok(3));
    assert_eq!(state(&checks), (0, 0));
    assert!(checks.inner.lock().held.is_empty());
}

/// A flood's first checks join the queue before any of them ran, so no check of theirs is
/// in the window yet; the places they hold weigh them, and a user who holds none still
/// takes the place of one of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_floods_first_waiters_give_way_to_a_user() {
    let checks = Arc::new(PasswordChecks::new(CheckBounds {
        workers: 1,
        queue: 2,
        share: 2,
        max_wait: Duration::from_secs(5),
    }));
    let waiting = |checks: &PasswordChecks| checks.inner.lock().waiting.len();
    let (first, finish_first) = held();
    let running = spawn(&checks, ip(1), first);
    until("the first check runs", || checks.inner.lock().running == 1).await;
    let (second, finish_second) = held();
    let (third, finish_third) = held();
    let flood = [spawn(&checks, ip(2), second), spawn(&checks, ip(3), third)];
    until("the queue is full", || waiting(&checks) == 2).await;
    let user = spawn(&checks, ip(9), || 9);
    until("the user waits", || {
        checks
            .inner
            .lock()
            .waiting
            .iter()
            .any(|w| w.client == ip(9))
    })
    .await;
    // It waits its turn among equals (the flood's remaining waiter and the user each hold
    // one place and ran nothing), but it is not refused.
    drop((finish_second, finish_third));
    finish_first.send(1).expect("finish");
    assert_eq!(running.await.expect("join"), Ok(1));
    assert_eq!(user.await.expect("join"), Ok(9), "the user was refused");
    let answers: Vec<_> = futures::future::join_all(flood)
        .await
        .into_iter()
        .map(|r| r.expect("join"))
        .collect();
    assert!(answers.contains(&Err(CheckRefused::Busy)), "{answers:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_ends_with_a_refusal_and_a_dropped_wait_gives_its_place_back() {
    let checks = Arc::new(PasswordChecks::new(CheckBounds {
        workers: 1,
        queue: 4,
        share: 2,
        max_wait: Duration::from_millis(50),
    }));
    let (first, finish) = held();
    let running = spawn(&checks, ip(1), first);
    until("the first check runs", || checks.inner.lock().running == 1).await;
    // An earlier waiter stands first in line; a later one's wait runs out behind it.
    let ahead = spawn(&checks, ip(4), || 4);
    until("it waits", || checks.inner.lock().waiting.len() == 1).await;
    assert_eq!(checks.run(ip(2), || 0).await, Err(CheckRefused::Busy));
    let abandoned = spawn(&checks, ip(3), || 0);
    until("it waits too", || checks.inner.lock().waiting.len() == 2).await;
    abandoned.abort();
    let _ = abandoned.await;
    assert_eq!(
        checks.inner.lock().waiting.len(),
        1,
        "only the first in line"
    );
    assert!(!checks.inner.lock().held.contains_key(&ip(3)));
    finish.send(1).expect("finish");
    assert_eq!(running.await.expect("join"), Ok(1));
    assert_eq!(ahead.await.expect("join"), Ok(4));
    assert_eq!(checks.run(ip(2), || 2).await, Ok(2));
    checks.housekeeping();
    assert_eq!(checks.inner.lock().recent.len(), 3, "ip 1, 4 and 2 ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_check_next_in_line_keeps_its_place_past_the_wait_and_the_others_do_not() {
    let checks = Arc::new(PasswordChecks::new(CheckBounds {
        workers: 1,
        queue: 3,
        share: 2,
        max_wait: Duration::from_millis(50),
    }));
    // One slow check holds the only worker far past every waiter's max_wait.
    let (first, finish) = held();
    let running = spawn(&checks, ip(1), first);
    until("the first check runs", || checks.inner.lock().running == 1).await;
    // A heavy client waits first, then a user who has checked nothing yet.
    {
        let mut s = checks.inner.lock();
        for _ in 0..3 {
            s.charge(ip(2), Instant::now());
        }
    }
    let heavy = spawn(&checks, ip(2), || 2);
    until("the heavy client waits", || {
        checks.inner.lock().waiting.len() == 1
    })
    .await;
    let user = spawn(&checks, ip(9), || 9);
    // The heavy one's wait runs out behind the user: refused. The user's runs out first in
    // line: it stays, due.
    assert_eq!(heavy.await.expect("join"), Err(CheckRefused::Busy));
    let due = |checks: &PasswordChecks| {
        let s = checks.inner.lock();
        s.waiting.iter().any(|w| w.client == ip(9) && w.due)
    };
    until("the user is due", || due(&checks)).await;
    // A newcomer as light as the user, and earlier in no way, cannot overtake it nor push it
    // out; its own wait runs out behind the user, so it is refused.
    let newcomer = spawn(&checks, ip(7), || 7);
    assert_eq!(newcomer.await.expect("join"), Err(CheckRefused::Busy));
    assert!(due(&checks), "the user still waits");
    finish.send(1).expect("finish");
    assert_eq!(running.await.expect("join"), Ok(1));
    assert_eq!(user.await.expect("join"), Ok(9), "the user ran");
    assert_eq!(checks.inner.lock().running, 0);
    assert!(checks.inner.lock().held.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_remembered_clients_are_bounded_and_a_running_check_is_counted() {
    let checks = Arc::new(PasswordChecks::new(CheckBounds {
        workers: 1,
        queue: 1,
        share: 1,
        max_wait: Duration::from_secs(5),
    }));
    assert_eq!(checks.bytes(), 0);
    let (check, finish) = held();
    let running = spawn(&checks, ip(1), check);
    until("it runs", || checks.inner.lock().running == 1).await;
    assert!(checks.bytes() >= CHECK_BYTES, "a running check is counted");
    finish.send(1).expect("finish");
    assert_eq!(running.await.expect("join"), Ok(1));
    let now = Instant::now();
    {
        let mut state = checks.inner.lock();
        for i in 0..(MAX_RECENT as u32 + 100) {
            state.charge(IpAddr::from(i.to_be_bytes()), now);
        }
        assert_eq!(state.recent.len(), MAX_RECENT, "past the bound");
    }
    assert!(checks.bytes() <= checks.budget());
    assert!(checks.bytes() >= MAX_RECENT as u64 * CLIENT_BYTES);
}
