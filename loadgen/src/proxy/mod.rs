//! The recording proxy: a loopback HTTP/1.1 hop between a client the harness does not control
//! (a user's own sync client) and the server, which passes every byte through unchanged and
//! records what went by, per route ([`route`]): requests, bytes each way, answers by status
//! class, the most in flight and the latency at the proxy (request fully sent to answer fully
//! received) as an HdrHistogram ([`Tally`]).
//!
//! It is a byte relay, not an HTTP stack: heads are parsed to find where each request and
//! answer ends (`Content-Length`, chunked bodies with trailers, `Expect: 100-continue`,
//! keep-alive and pipelining, answers until close), bodies stream through one buffer per
//! direction, a long poll is held as long as the client waits, and an upgrade (WebSocket)
//! becomes a tunnel whose bytes and frames are counted both ways (`relay.rs`).
//!
//! Bounded: a head is at most [`MAX_HEAD_BYTES`], a connection holds two buffers of that size
//! whatever the bodies' sizes, at most [`MAX_CONNECTIONS`] connections are open, at most
//! [`tally::MAX_ROUTES`] routes are counted, and every read of the upstream (and every write
//! to it) has the read deadline: an upstream that stalls ends its connection there, counted
//! as a failed exchange. [`Proxy::close_connections`] ends every connection at once (a
//! client run is over: nothing of it may go on).
//!
//! The proxy runs on a thread of its own with a current-thread runtime, so the caller's
//! runtime may block (a client run is waited for synchronously) without stalling it, and a
//! request's bytes never change threads.
//!
//! What the hop adds per request is measured by [`overhead`] (`vaultbench probe proxy`).

pub mod frame;
pub mod overhead;
mod relay;
pub mod route;
pub mod tally;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use relay::MAX_HEAD_BYTES;
pub use route::{Classifier, RoutePattern};
pub use tally::{RouteTally, Tally};

use crate::lock::lock;

/// Connections open at once; another is closed as it is accepted. A sync client opens a
/// handful (rclone's default is 4 transfers and 8 checkers); each holds two 64 KiB buffers.
pub const MAX_CONNECTIONS: usize = 512;

/// How long [`Proxy::close_connections`] waits for the proxy's thread.
const CONTROL_WAIT: Duration = Duration::from_secs(10);

/// What the proxy relays to and how.
#[derive(Debug, Clone)]
pub struct ProxyConfig {
    pub upstream: SocketAddr,
    /// The deadline of every read of (and write to) the upstream, and of connecting to it.
    /// A long poll longer than this is cut: give the client's own deadline.
    pub read_timeout: Duration,
    pub classifier: Classifier,
}

enum Control {
    /// Close every connection, then acknowledge.
    Close(std::sync::mpsc::Sender<()>),
}

/// A running proxy on `127.0.0.1`; stops (its connections closed) when dropped.
pub struct Proxy {
    addr: SocketAddr,
    shared: Arc<relay::Shared>,
    control: Option<tokio::sync::mpsc::UnboundedSender<Control>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Proxy {
    /// Listens on a fresh loopback port and relays to the upstream.
    pub fn start(cfg: ProxyConfig) -> std::io::Result<Proxy> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(relay::Shared {
            upstream: cfg.upstream,
            read_timeout: cfg.read_timeout,
            classifier: Mutex::new(Arc::new(cfg.classifier)),
            live: Mutex::new(relay::Live::default()),
        });
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let sh = shared.clone();
        let thread = std::thread::Builder::new()
            .name("vb-proxy".into())
            .spawn(move || rt.block_on(accept_loop(listener, sh, rx)))?;
        Ok(Proxy {
            addr,
            shared,
            control: Some(tx),
            thread: Some(thread),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The counts since the last take (a phase's), and a fresh tally from now on.
    pub fn take(&self) -> Tally {
        lock(&self.shared.live).take()
    }

    /// What ended connections on the upstream's side since the last take, by kind.
    pub fn faults(&self) -> std::collections::BTreeMap<&'static str, u64> {
        lock(&self.shared.live).tally.faults.clone()
    }

    /// Adds file and folder names that collapse into `{path}` (a folder's new name after a
    /// rename).
    pub fn add_names<I: IntoIterator<Item = String>>(&self, names: I) {
        let mut c = lock(&self.shared.classifier);
        let mut next = (**c).clone();
        next.names.extend(names);
        *c = Arc::new(next);
    }

    /// Closes every open connection, counting its open exchanges as failed, and returns once
    /// they are counted.
    pub fn close_connections(&self) {
        let (ack, done) = std::sync::mpsc::channel();
        if let Some(c) = &self.control
            && c.send(Control::Close(ack)).is_ok()
        {
            let _ = done.recv_timeout(CONTROL_WAIT);
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        // The accept loop ends when its control channel closes.
        self.control.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn accept_loop(
    listener: std::net::TcpListener,
    shared: Arc<relay::Shared>,
    mut control: tokio::sync::mpsc::UnboundedReceiver<Control>,
) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
        return;
    };
    let mut conns = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            c = control.recv() => match c {
                Some(Control::Close(ack)) => {
                    conns.shutdown().await;
                    let _ = ack.send(());
                }
                None => {
                    conns.shutdown().await;
                    return;
                }
            },
            a = listener.accept() => {
                if let Ok((sock, _)) = a
                    && conns.len() < MAX_CONNECTIONS
                {
                    conns.spawn(relay::serve(sock, shared.clone()));
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}

#[cfg(test)]
mod tests;
