//! A TCP proxy the test controls: it forwards loopback connections to a target and can cut
//! them, either by closing every connection and refusing new ones ([`Mode::Reset`]) or by
//! silently holding all traffic ([`Mode::Blackhole`], like a network partition: bytes wait in
//! the kernel buffers and flow again when the link is restored). It can also lose one answer:
//! [`Proxy::cut_answer_to`] forwards the next request that carries some bytes, then closes that
//! connection when the server answers, without passing the answer on (a connection lost after
//! the server did the work, before the client heard of it).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
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

/// The answer to lose: armed with the byte patterns a connection's requests must carry, in
/// order, and how many answers were lost.
#[derive(Default)]
struct Cut {
    /// The patterns, and the arming they belong to (progress made towards an earlier arming
    /// does not count towards a later one).
    armed: Mutex<(u64, Option<Vec<Vec<u8>>>)>,
    done: AtomicUsize,
}

impl Cut {
    /// Whether `bytes`, read on a connection whose requests carried the first `seen.1` patterns
    /// of arming `seen.0`, carry the rest of them (in order); disarms the cut if so.
    fn hit(&self, bytes: &[u8], seen: &mut (u64, usize)) -> bool {
        let mut armed = self.armed.lock().expect("proxy cut lock");
        let (arming, ref patterns) = *armed;
        let Some(patterns) = patterns else {
            return false;
        };
        if seen.0 != arming {
            *seen = (arming, 0);
        }
        let seen = &mut seen.1;
        let mut rest = bytes;
        while let Some(pattern) = patterns.get(*seen) {
            let found = (!pattern.is_empty())
                .then(|| rest.windows(pattern.len()).position(|w| w == pattern))
                .flatten();
            let Some(at) = found else {
                return false;
            };
            rest = &rest[at + pattern.len()..];
            *seen += 1;
        }
        armed.1 = None;
        true
    }
}

/// A running proxy; stops (and closes its connections) on drop.
pub struct Proxy {
    addr: SocketAddr,
    target: Arc<Mutex<SocketAddr>>,
    state: watch::Sender<State>,
    cut: Arc<Cut>,
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
        let cut = Arc::new(Cut::default());
        let task = tokio::spawn(accept_loop(
            listener,
            Arc::clone(&target),
            state.clone(),
            Arc::clone(&cut),
        ));
        Ok(Proxy {
            addr,
            target,
            state,
            cut,
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

    /// Loses one answer: on the first connection whose requests from now on carry each of
    /// `patterns` in turn (each within one read), the request with the last is forwarded, and
    /// when the server answers it the answer is dropped and the connection closed. One-shot;
    /// [`Proxy::answers_cut`] counts those done.
    pub fn cut_answer_to(&self, patterns: &[&[u8]]) {
        let patterns = patterns.iter().map(|p| p.to_vec()).collect();
        let mut armed = self.cut.armed.lock().expect("proxy cut lock");
        *armed = (armed.0 + 1, Some(patterns));
    }

    /// Answers lost by [`Proxy::cut_answer_to`] so far.
    pub fn answers_cut(&self) -> usize {
        self.cut.done.load(Ordering::SeqCst)
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
    cut: Arc<Cut>,
) {
    loop {
        let Ok((inbound, _)) = listener.accept().await else {
            // Out of file descriptors or similar: back off instead of spinning.
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let _ = inbound.set_nodelay(true);
        let to = *target.lock().expect("proxy target lock");
        tokio::spawn(connection(inbound, to, state.subscribe(), Arc::clone(&cut)));
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

async fn connection(
    inbound: TcpStream,
    target: SocketAddr,
    mut state: watch::Receiver<State>,
    cut: Arc<Cut>,
) {
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
    // Set when this connection carried the request whose answer is to be lost.
    let lose_answer = Arc::new(AtomicBool::new(false));
    let upstream = pump(
        in_read,
        out_write,
        state.clone(),
        epoch,
        Side::Requests(&cut, &lose_answer),
    );
    let downstream = pump(
        out_read,
        in_write,
        state,
        epoch,
        Side::Answers(&cut, &lose_answer),
    );
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

/// Which direction a pump copies, with what it needs to lose an answer.
enum Side<'a> {
    /// Client to server: looks for the armed request.
    Requests(&'a Cut, &'a AtomicBool),
    /// Server to client: drops the answer to it and closes.
    Answers(&'a Cut, &'a AtomicBool),
}

/// Copies one direction while the proxy is open.
async fn pump(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    mut state: watch::Receiver<State>,
    epoch: u64,
    side: Side<'_>,
) -> End {
    let mut buf = vec![0u8; 16 * 1024];
    // The cut's patterns this connection's requests carried so far.
    let mut seen = (0, 0);
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
                match side {
                    Side::Requests(cut, lose) if cut.hit(&buf[..n], &mut seen) => {
                        lose.store(true, Ordering::SeqCst);
                    }
                    Side::Answers(cut, lose) if lose.load(Ordering::SeqCst) => {
                        cut.done.fetch_add(1, Ordering::SeqCst);
                        return End::Closed;
                    }
                    _ => {}
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
