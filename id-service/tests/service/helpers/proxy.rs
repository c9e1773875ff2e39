//! A TCP forwarder on a loopback port whose target can change: the stand-in for a database
//! service name that moves to the new primary after a failover.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// Forwards every accepted connection to the current target.
pub struct Proxy {
    addr: SocketAddr,
    target: Arc<Mutex<SocketAddr>>,
    task: JoinHandle<()>,
}

impl Proxy {
    /// A proxy to `target` on a free loopback port.
    pub async fn start(target: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the proxy");
        let addr = listener.local_addr().expect("proxy address");
        let target = Arc::new(Mutex::new(target));
        let task = tokio::spawn({
            let target = Arc::clone(&target);
            async move {
                while let Ok((mut inbound, _)) = listener.accept().await {
                    let to = *target.lock().expect("target");
                    tokio::spawn(async move {
                        if let Ok(mut outbound) = TcpStream::connect(to).await {
                            let _ =
                                tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                        }
                    });
                }
            }
        });
        Proxy { addr, target, task }
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// New connections go to `target` from now on (open ones keep their old target).
    pub fn set_target(&self, target: SocketAddr) {
        *self.target.lock().expect("target") = target;
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}
