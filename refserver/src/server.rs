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

use crate::app::{App, StartError, until_shutdown};
use crate::config::ServerConfig;

/// How long shutdown waits for in-flight requests before dropping their connections. Posts
/// already handed to the journal still become durable: the writer thread finishes its queue.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// A client must send its request headers within this long (bounds idle half-open clients).
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// A server with its data dir open and its socket bound, not yet serving.
#[derive(Debug)]
pub struct Server {
    app: Arc<App>,
    listener: TcpListener,
    addr: SocketAddr,
    shutdown_tx: tokio::sync::watch::Sender<bool>,
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
            ..
        } = self;
        let mut conns = tokio::task::JoinSet::new();
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                r = listener.accept() => match r {
                    Ok((stream, peer)) => {
                        let _ = stream.set_nodelay(true);
                        conns.spawn(connection(app.clone(), stream, peer));
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

async fn connection(app: Arc<App>, stream: tokio::net::TcpStream, peer: SocketAddr) {
    let mut shutdown = app.shutdown.clone();
    let svc_app = app.clone();
    let svc = service_fn(move |req| {
        let app = svc_app.clone();
        async move { Ok::<_, Infallible>(crate::api::handle(app, peer, req).await) }
    });
    let conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .max_buf_size(protocol::limits::MAX_HEADER_BYTES)
        .serve_connection(TokioIo::new(stream), svc);
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => {}
        () = until_shutdown(&mut shutdown) => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
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
                    .thread_name(crate::WORKER_THREAD)
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
