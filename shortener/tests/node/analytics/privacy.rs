//! Client addresses serve the per-client limits and the country lookup, then are dropped:
//! a node logging at `debug` through visits, an unknown code and a connection that breaks off
//! mid-request writes neither the forwarded address, nor its own peer's, nor the API key.

use super::{get_at, mmdb};
use crate::helpers::{API_KEY, BROWSER};
use crate::served::Served;
use serde_json::json;
use std::time::Duration;
use tokio::io::AsyncWriteExt;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_addresses_and_keys_never_reach_the_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    let geoip = dir.path().join("countries.mmdb");
    std::fs::write(&geoip, mmdb::country_db(&[([81, 0, 0, 0], 8, "DE")])).expect("GeoIP");
    let log = dir.path().join("node.log");
    let env = [
        ("SHORTENER_API_KEYS", API_KEY.to_string()),
        ("RUST_LOG", "debug".to_string()),
        ("SHORTENER_GEOIP_DB", geoip.display().to_string()),
        ("SHORTENER_CLIENT_IP_HEADER", "x-forwarded-for".to_string()),
        ("SHORTENER_TRUSTED_PROXIES", "127.0.0.0/8".to_string()),
        ("SHORTENER_ANALYTICS_FLUSH_INTERVAL_MS", "200".to_string()),
    ];
    let served = Served::start_logging(&dir.path().join("data"), &env, None, Some(&log)).await;
    let client = Served::client();
    let base = format!("http://{}", served.http);
    let code = served.create(&client, "https://example.com/private").await;
    for path in [code.as_str(), code.as_str(), "zzzzzzz"] {
        client
            .get(format!("{base}/{path}"))
            .header("user-agent", BROWSER)
            .header("x-forwarded-for", "81.2.69.160")
            .send()
            .await
            .expect("visit");
    }
    // A connection that sends half a request head and goes away: the node logs that at debug.
    let mut broken = tokio::net::TcpStream::connect(served.http)
        .await
        .expect("connect");
    let broken_from = broken.local_addr().expect("local addr");
    broken
        .write_all(b"GET /abc HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 81.2.69.161\r\n")
        .await
        .expect("write");
    drop(broken);
    // The address was used: the visits are counted under Germany.
    let path = format!("/links/{code}/stats");
    let counted = testkit::wait_until(Duration::from_secs(10), || async {
        get_at(&client, &base, &path, API_KEY).await.1["countries"]
            == json!([{ "country": "DE", "visits": 2 }])
    })
    .await;
    assert!(
        counted,
        "{}",
        get_at(&client, &base, &path, API_KEY).await.1
    );
    served.signal("TERM");
    // A line after the shutdown's says the node stopped, so an operator knows it finished.
    let logged = testkit::wait_until(Duration::from_secs(30), || async {
        std::fs::read_to_string(&log).is_ok_and(|text| {
            text.contains("connection ended")
                && text
                    .split_once("shutting down: readiness off")
                    .is_some_and(|(_, after)| after.lines().any(|l| l.ends_with(" stopped")))
        })
    })
    .await;
    let text = std::fs::read_to_string(&log).expect("read the log");
    assert!(
        logged,
        "the broken connection was not logged at debug, or the stop not at its end:\n{text}"
    );
    for secret in [
        "81.2.69.160",
        "81.2.69.161",
        &broken_from.to_string(),
        API_KEY,
    ] {
        assert!(!text.contains(secret), "{secret} is in the log:\n{text}");
    }
}
