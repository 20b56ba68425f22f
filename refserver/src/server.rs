//! Binding, the accept loop, graceful shutdown, and [`TestServer`] (an in-process server on
//! its own thread and runtime, for other crates' tests).

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;

use std::os::fd::AsRawFd as _;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::app::{App, StartError, until_shutdown};
use crate::config::ServerConfig;
use crate::conn::{Admitted, Conns, connection_cap};

/// How long shutdown waits for in-flight requests before dropping their connections. Posts
/// already handed to the journal still become durable: the writer thread finishes its queue.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// A server with its data dir open and its socket bound, not yet serving.
#[derive(Debug)]
pub struct Server {
    app: Arc<App>,
    listener: TcpListener,
    addr: SocketAddr,
    shutdown_tx: tokio::sync::watch::Sender<bool>,
    conns: Arc<Conns>,
    header_read_timeout: Duration,
}

impl Server {
    /// Refuses a non-loopback address without `allow_remote`, opens the data dir (lock,
    /// replay), then binds.
    pub async fn bind(cfg: ServerConfig) -> Result<Server, StartError> {
        if !cfg.listen.ip().is_loopback() && !cfg.allow_remote {
            return Err(StartError::Remote { addr: cfg.listen });
        }
        let (shutdown_tx, shutdown_rx) = tokio::sync::watch::channel(false);
        let app = Arc::new(App::open(&cfg, shutdown_rx)?);
        let listener = TcpListener::bind(cfg.listen)
            .await
            .map_err(|source| StartError::Bind {
                addr: cfg.listen,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| StartError::Bind {
            addr: cfg.listen,
            source,
        })?;
        Ok(Server {
            app,
            listener,
            addr,
            shutdown_tx,
            conns: Conns::new(connection_cap(cfg.max_connections)),
            header_read_timeout: cfg.header_read_timeout,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn setup_token(&self) -> &str {
        &self.app.setup_token
    }

    /// Serves until `shutdown` completes, then stops accepting, wakes long polls, lets
    /// in-flight requests finish (at most 10 s) and closes the logs.
    pub async fn serve(self, shutdown: impl Future<Output = ()>) {
        let Server {
            app,
            listener,
            shutdown_tx,
            conns: admission,
            header_read_timeout,
            ..
        } = self;
        let mut conns = tokio::task::JoinSet::new();
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                r = listener.accept() => match r {
                    Ok((stream, peer)) => {
                        // Over the caps with every connection proven: close it at once.
                        if let Some(admitted) = admission.admit() {
                            let _ = stream.set_nodelay(true);
                            conns.spawn(connection(
                                app.clone(),
                                stream,
                                peer,
                                admitted,
                                header_read_timeout,
                            ));
                        }
                    }
                    Err(e) => {
                        // EMFILE and friends: back off instead of spinning.
                        eprintln!("obsync-refserver: accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                },
                Some(_) = conns.join_next(), if !conns.is_empty() => {}
            }
        }
        drop(listener);
        let _ = shutdown_tx.send(true);
        let drained = tokio::time::timeout(DRAIN_TIMEOUT, async {
            while conns.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            conns.abort_all();
            while conns.join_next().await.is_some() {}
        }
        let app2 = app.clone();
        let _ = tokio::task::spawn_blocking(move || app2.close()).await;
    }
}

async fn connection(
    app: Arc<App>,
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    mut admitted: Admitted,
    header_read_timeout: Duration,
) {
    let proven = admitted.proven.clone();
    let mut shutdown = app.shutdown.clone();
    let fd = stream.as_raw_fd();
    let read = Arc::new(AtomicU64::new(0));
    // Bytes read when the last answer was handed back: more than that at a header timeout
    // means a partial request head, which gets a 408; otherwise the connection was idle.
    let answered_at = Arc::new(AtomicU64::new(0));
    let svc_app = app.clone();
    let (svc_read, svc_answered, svc_proven) = (read.clone(), answered_at.clone(), proven.clone());
    let svc = service_fn(move |mut req| {
        let app = svc_app.clone();
        req.extensions_mut().insert(svc_proven.clone());
        let (read, answered) = (svc_read.clone(), svc_answered.clone());
        async move {
            let resp = crate::api::handle(app, peer, req).await;
            answered.store(read.load(Ordering::Relaxed), Ordering::Relaxed);
            Ok::<_, Infallible>(resp)
        }
    });
    let conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(header_read_timeout)
        .max_buf_size(protocol::limits::MAX_HEADER_BYTES)
        .serve_connection(
            TokioIo::new(Counted {
                inner: stream,
                read: read.clone(),
            }),
            svc,
        );
    tokio::pin!(conn);
    tokio::select! {
        r = conn.as_mut() => {
            if let Err(e) = r
                && e.is_timeout()
                && read.load(Ordering::Relaxed) > answered_at.load(Ordering::Relaxed)
            {
                // The connection (and so `fd`) is still open: `conn` is dropped below.
                send_request_timeout(fd);
            }
        }
        _ = &mut admitted.evicted => {}
        () = until_shutdown(&mut shutdown) => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
    drop(admitted);
}

/// Answers `408 request_timeout` on `fd` without waiting: a client that did not finish its
/// request head in time learns why the connection closes (RFC 9110 §15.5.9).
fn send_request_timeout(fd: std::os::fd::RawFd) {
    let body = format!(
        r#"{{"error":"{}","detail":"the request head did not arrive in time"}}"#,
        protocol::ErrorCode::RequestTimeout.as_str()
    );
    let msg = format!(
        "HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\ncache-control: no-store\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    // SAFETY: `fd` is the open socket of a connection its caller still owns; send(2) reads
    // `msg.len()` bytes from a live buffer and blocks neither (MSG_DONTWAIT) nor raises
    // SIGPIPE (MSG_NOSIGNAL). A short or failed send only loses the courtesy answer.
    let _ = unsafe {
        libc::send(
            fd,
            msg.as_ptr().cast(),
            msg.len(),
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
        )
    };
}

/// A socket that counts the bytes read from it.
struct Counted {
    inner: tokio::net::TcpStream,
    read: Arc<AtomicU64>,
}

impl tokio::io::AsyncRead for Counted {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = buf.filled().len() - before;
        self.read.fetch_add(n as u64, Ordering::Relaxed);
        r
    }
}

impl tokio::io::AsyncWrite for Counted {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// An in-process server on its own thread and tokio runtime. Dropping it shuts it down.
#[derive(Debug)]
pub struct TestServer {
    pub addr: SocketAddr,
    pub setup_token: String,
    pub data_dir: PathBuf,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TestServer {
    /// Opens `cfg.data_dir`, binds `cfg.listen` and serves until shut down.
    pub fn start(cfg: ServerConfig) -> anyhow::Result<TestServer> {
        let data_dir = cfg.data_dir.clone();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("refserver".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .thread_name(crate::threads::WORKER_THREAD)
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(anyhow::anyhow!("tokio runtime: {e}")));
                        return;
                    }
                };
                rt.block_on(async move {
                    match Server::bind(cfg).await {
                        Ok(server) => {
                            let _ = ready_tx
                                .send(Ok((server.local_addr(), server.setup_token().to_owned())));
                            server
                                .serve(async {
                                    let _ = stop_rx.await;
                                })
                                .await;
                        }
                        Err(e) => {
                            let _ = ready_tx.send(Err(e.into()));
                        }
                    }
                });
            })?;
        let (addr, setup_token) = match ready_rx.recv() {
            Ok(r) => r?,
            Err(_) => anyhow::bail!("the refserver thread exited before binding"),
        };
        Ok(TestServer {
            addr,
            setup_token,
            data_dir,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// `http://IP:PORT`
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops the server gracefully and waits for its thread.
    pub fn shutdown(mut self) {
        self.stop_and_join();
    }

    fn stop_and_join(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}
