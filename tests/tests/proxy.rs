//! The test proxy does what the nemesis relies on: it forwards, resets, holds traffic in a
//! blackhole, and lets it flow again when restored.

use std::time::Duration;
use tests::proxy::{Mode, Proxy};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// An echo server on a loopback port.
async fn echo_server() -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                while let Ok(n) = socket.read(&mut buf).await {
                    if n == 0 || socket.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    addr
}

async fn roundtrip(stream: &mut TcpStream, text: &[u8], within: Duration) -> Option<Vec<u8>> {
    stream.write_all(text).await.ok()?;
    let mut buf = vec![0u8; text.len()];
    match tokio::time::timeout(within, stream.read_exact(&mut buf)).await {
        Ok(Ok(_)) => Some(buf),
        _ => None,
    }
}

#[tokio::test]
async fn proxy_forwards_and_reset_closes_connections_until_reopened() {
    let proxy = Proxy::start(echo_server().await).await.expect("proxy");
    let mut stream = TcpStream::connect(proxy.addr()).await.expect("connect");
    let second = Duration::from_secs(1);
    assert_eq!(
        roundtrip(&mut stream, b"ping", second).await.as_deref(),
        Some(&b"ping"[..])
    );

    proxy.set_mode(Mode::Reset);
    let mut buf = [0u8; 4];
    let read = tokio::time::timeout(second, stream.read(&mut buf)).await;
    assert!(
        matches!(read, Ok(Ok(0)) | Ok(Err(_))),
        "the open connection is closed: {read:?}"
    );
    let mut fresh = TcpStream::connect(proxy.addr())
        .await
        .expect("connect while reset");
    assert_eq!(
        roundtrip(&mut fresh, b"x", second).await,
        None,
        "new connections are refused"
    );

    proxy.set_mode(Mode::Open);
    let mut again = TcpStream::connect(proxy.addr())
        .await
        .expect("connect after reopen");
    assert_eq!(
        roundtrip(&mut again, b"pong", second).await.as_deref(),
        Some(&b"pong"[..])
    );
}

#[tokio::test]
async fn blackholed_traffic_waits_and_flows_again_when_restored() {
    let proxy = Proxy::start(echo_server().await).await.expect("proxy");
    let mut stream = TcpStream::connect(proxy.addr()).await.expect("connect");
    let short = Duration::from_millis(300);
    assert!(roundtrip(&mut stream, b"a", short).await.is_some());

    proxy.set_mode(Mode::Blackhole);
    assert_eq!(
        roundtrip(&mut stream, b"held", short).await,
        None,
        "nothing flows"
    );
    proxy.set_mode(Mode::Open);
    let mut buf = [0u8; 4];
    tokio::time::timeout(Duration::from_secs(2), stream.read_exact(&mut buf))
        .await
        .expect("the held bytes arrive after the restore")
        .expect("read");
    assert_eq!(&buf, b"held");
}

#[tokio::test]
async fn a_cut_answer_is_lost_once_on_the_connection_that_asked_in_order() {
    let proxy = Proxy::start(echo_server().await).await.expect("proxy");
    let second = Duration::from_secs(1);
    let mut bystander = TcpStream::connect(proxy.addr()).await.expect("connect");
    let mut asker = TcpStream::connect(proxy.addr()).await.expect("connect");
    proxy.cut_answer_to(&[b"BEGIN", b"COMMIT"]);
    // Another connection's COMMIT, and the second pattern before the first: no cut.
    for (asking, text) in [(false, &b"COMMIT"[..]), (true, b"COMMIT"), (true, b"BEGIN")] {
        let stream = if asking { &mut asker } else { &mut bystander };
        assert_eq!(
            roundtrip(stream, text, second).await.as_deref(),
            Some(text),
            "{}",
            String::from_utf8_lossy(text)
        );
    }
    assert_eq!(proxy.answers_cut(), 0);
    // The asker's COMMIT after its BEGIN reaches the server, whose answer is dropped.
    assert_eq!(roundtrip(&mut asker, b"xCOMMITx", second).await, None);
    let mut buf = [0u8; 1];
    let read = tokio::time::timeout(second, asker.read(&mut buf)).await;
    assert!(
        matches!(read, Ok(Ok(0)) | Ok(Err(_))),
        "the connection is closed: {read:?}"
    );
    assert_eq!(proxy.answers_cut(), 1);
    // One-shot: the bystander and new connections go on as before.
    assert!(
        roundtrip(&mut bystander, b"BEGIN COMMIT", second)
            .await
            .is_some()
    );
    let mut fresh = TcpStream::connect(proxy.addr()).await.expect("connect");
    assert!(
        roundtrip(&mut fresh, b"BEGIN COMMIT", second)
            .await
            .is_some()
    );
    assert_eq!(proxy.answers_cut(), 1);
}
