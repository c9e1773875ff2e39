//! Session cookies carry a tag only the deployment can make: a made-up cookie is refused without
//! a read of the sessions table, and so no 404 budget stands between a client and the console.
//! A person whose address has spent its budget on unknown codes still reaches their session,
//! made-up cookies are answered `401` however many come (never `429`) and spend none of that
//! budget, and a lock held on the table shows they never wait for it.

use super::me;
use super::tables::{sign_in, small_404_budget, whoami};
use crate::helpers::{Backend, Node};
use reqwest::StatusCode;
use std::time::Duration;

/// The made-up cookies of the table, each `name=value`, from the real session cookie `session`:
/// empty, a word, an untagged 32 random bytes (what cookies were before they were tagged), the
/// right shape with the tag changed, cut short or taken from another value, and a long one.
fn made_up(session: &str) -> Vec<(&'static str, String)> {
    let value = session
        .strip_prefix("shortener-session=")
        .expect("the session cookie's name");
    let (random, tag) = value.split_once('.').expect("a tagged cookie");
    let mut flipped = tag.to_string();
    let last = flipped.pop().expect("a tag");
    flipped.push(if last == 'A' { 'B' } else { 'A' });
    let mut other = random.to_string();
    let first = other.remove(0);
    other.insert(0, if first == 'A' { 'B' } else { 'A' });
    let cookie = |value: String| format!("shortener-session={value}");
    vec![
        ("empty", cookie(String::new())),
        ("a word", cookie("made-up".into())),
        ("untagged", cookie(random.to_string())),
        ("tag changed", cookie(format!("{random}.{flipped}"))),
        ("tag cut short", cookie(format!("{random}.{}", &tag[..10]))),
        ("another value's tag", cookie(format!("{other}.{tag}"))),
        ("long", cookie("a".repeat(3000))),
    ]
}

/// Spends the client's 404 budget on unknown codes until the node answers `429`.
async fn spend_404_budget(node: &Node) {
    for n in 0..40 {
        let (status, _) = node.location(&format!("nope{n:03}")).await;
        if status == StatusCode::TOO_MANY_REQUESTS {
            return;
        }
        assert_eq!(status, StatusCode::NOT_FOUND, "unknown code {n}");
    }
    panic!("the 404 budget of four was never spent");
}

/// `GET /console/session` and `GET /api/v1/me` with `cookie`: whether the console says someone
/// is signed in, and the API's status.
async fn answers(node: &Node, cookie: &str) -> (bool, StatusCode) {
    let signed_in = whoami(node, cookie).await["signed_in"] == true;
    (signed_in, me(node, cookie).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_outlives_its_addresss_404_budget_and_made_up_cookies_are_never_read() {
    let (stack, issuer, key, node) = small_404_budget(Backend::Postgres, "tagged").await;
    let session = sign_in(&node, &issuer, &key, &["link-editors"]).await;
    assert_eq!(answers(&node, &session).await, (true, StatusCode::OK));

    // Made-up cookies, more than the budget of four, leave the address's budget as it was.
    for (what, cookie) in made_up(&session) {
        assert_eq!(
            answers(&node, &cookie).await,
            (false, StatusCode::UNAUTHORIZED),
            "{what}"
        );
    }
    let (status, _) = node.location("nope-first").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "the 404 budget is untouched");
    spend_404_budget(&node).await;
    assert_eq!(
        answers(&node, &session).await,
        (true, StatusCode::OK),
        "a session is served past its address's 404 budget"
    );
    for (what, cookie) in made_up(&session) {
        assert_eq!(
            answers(&node, &cookie).await,
            (false, StatusCode::UNAUTHORIZED),
            "{what}: refused as unauthenticated, not rate limited"
        );
    }

    // With the sessions table locked, a read of it waits: made-up cookies are answered at once,
    // the real one is not (which shows the lock would catch a read).
    let db = stack.db.as_ref().expect("PostgreSQL").connect().await;
    db.batch_execute("BEGIN; LOCK TABLE console_sessions IN ACCESS EXCLUSIVE MODE")
        .await
        .expect("lock the sessions table");
    let quick = reqwest::Client::builder()
        .timeout(Duration::from_secs(1))
        .build()
        .expect("client");
    let at_once = |cookie: String| {
        let quick = quick.clone();
        let url = format!("{}/api/v1/me", node.base);
        async move { quick.get(url).header("cookie", cookie).send().await }
    };
    for (what, cookie) in made_up(&session) {
        let answer = at_once(cookie).await;
        assert_eq!(
            answer.map(|r| r.status()).ok(),
            Some(StatusCode::UNAUTHORIZED),
            "{what}: answered without waiting for the locked table"
        );
    }
    let real = at_once(session.clone()).await;
    assert!(
        real.as_ref().map_or(true, |r| r.status().is_server_error()),
        "the real cookie reads the locked table: {:?}",
        real.map(|r| r.status())
    );
    db.batch_execute("ROLLBACK").await.expect("unlock");
    assert_eq!(answers(&node, &session).await, (true, StatusCode::OK));
    node.stop().await;
}
