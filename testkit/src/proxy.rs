//! A TCP proxy the test controls: it forwards loopback connections to a target and can cut
//! them, either by closing every connection and refusing new ones ([`Mode::Reset`]) or by
//! silently holding all traffic ([`Mode::Blackhole`], like a network partition: bytes wait in
//! the kernel buffers and flow again when the link is restored).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// What the proxy does with traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Forward everything.
    Open,
    /// Close every open connection and close new ones at once.
    Reset,
    /// Accept connections but forward nothing, in either direction, until restored.
    Blackhole,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct State {
    mode: Mode,
    /// Bumped by every switch to `Reset`: connections from an earlier epoch are closed even if
    /// the proxy is reopened before they notice.
    epoch: u64,
}

/// A running proxy; stops (and closes its connections) on drop.
pub struct Proxy {
    addr: SocketAddr,
    target: Arc<Mutex<SocketAddr>>,
    state: watch::Sender<State>,
    task: JoinHandle<()>,
}

impl Proxy {
    /// Listens on `127.0.0.1:0` and forwards to `target`.
    pub async fn start(target: SocketAddr) -> std::io::Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let target = Arc::new(Mutex::new(target));
        let (state, _) = watch::channel(State {
            mode: Mode::Open,
            epoch: 0,
        });
        let task = tokio::spawn(accept_loop(listener, Arc::clone(&target), state.clone()));
        Ok(Proxy {
            addr,
            target,
            state,
            task,
        })
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Points new connections at `target` (existing ones keep theirs).
    pub fn set_target(&self, target: SocketAddr) {
        *self.target.lock().expect("proxy target lock") = target;
    }

    /// The current mode.
    pub fn mode(&self) -> Mode {
        self.state.borrow().mode
    }

    /// Switches the mode; takes effect on every connection at once.
    pub fn set_mode(&self, mode: Mode) {
        self.state.send_modify(|s| {
            if mode == Mode::Reset {
                s.epoch += 1;
            }
            s.mode = mode;
        });
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.set_mode(Mode::Reset);
        self.task.abort();
    }
}

async fn accept_loop(
    listener: TcpListener,
    target: Arc<Mutex<SocketAddr>>,
    state: watch::Sender<State>,
) {
    loop {
        let Ok((inbound, _)) = listener.accept().await else {
            // Out of file descriptors or similar: back off instead of spinning.
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let _ = inbound.set_nodelay(true);
        let to = *target.lock().expect("proxy target lock");
        tokio::spawn(connection(inbound, to, state.subscribe()));
    }
}

/// Waits until the proxy is open; `None` if the connection must be closed instead.
async fn wait_open(state: &mut watch::Receiver<State>, epoch: u64) -> Option<()> {
    loop {
        let s = *state.borrow_and_update();
        if s.epoch != epoch || s.mode == Mode::Reset {
            return None;
        }
        if s.mode == Mode::Open {
            return Some(());
        }
        state.changed().await.ok()?;
    }
}

async fn connection(inbound: TcpStream, target: SocketAddr, mut state: watch::Receiver<State>) {
    let epoch = state.borrow().epoch;
    // A blackholed link also delays the connection to the target until it is restored.
    if wait_open(&mut state, epoch).await.is_none() {
        return;
    }
    let outbound =
        match tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(target)).await {
            Ok(Ok(stream)) => stream,
            _ => return,
        };
    let _ = outbound.set_nodelay(true);
    let (in_read, in_write) = inbound.into_split();
    let (out_read, out_write) = outbound.into_split();
    // An error or a reset in either direction closes both sockets; after a clean EOF
    // (half-close) the other direction runs on until it ends too.
    let upstream = pump(in_read, out_write, state.clone(), epoch);
    let downstream = pump(out_read, in_write, state, epoch);
    tokio::pin!(upstream, downstream);
    tokio::select! {
        end = &mut upstream => if end == End::Eof { downstream.await; },
        end = &mut downstream => if end == End::Eof { upstream.await; },
    }
}

/// How one direction of a connection ended.
#[derive(Debug, PartialEq, Eq)]
enum End {
    /// The sender closed its side cleanly; the shutdown was passed on.
    Eof,
    /// An error or a reset: the whole connection must close.
    Closed,
}

/// Copies one direction while the proxy is open.
async fn pump(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    mut state: watch::Receiver<State>,
    epoch: u64,
) -> End {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        if wait_open(&mut state, epoch).await.is_none() {
            return End::Closed;
        }
        tokio::select! {
            read = from.read(&mut buf) => {
                let n = match read {
                    Ok(0) => {
                        let _ = to.shutdown().await;
                        return End::Eof;
                    }
                    Err(_) => return End::Closed,
                    Ok(n) => n,
                };
                // Bytes read just before a cut are held back like the rest.
                if wait_open(&mut state, epoch).await.is_none() {
                    return End::Closed;
                }
                if to.write_all(&buf[..n]).await.is_err() {
                    return End::Closed;
                }
            }
            changed = state.changed() => {
                if changed.is_err() {
                    return End::Closed;
                }
            }
        }
    }
}
