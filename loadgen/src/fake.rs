//! A scripted fake target for unit tests: answers every request `200 ok` after a fixed
//! service time, and holds every request that arrives inside a stall window until the
//! window ends (a server that stops answering for a known time).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

#[derive(Debug, Clone, Copy)]
pub struct Script {
    pub service: Duration,
    /// (start, length) of the stall, relative to the server's start.
    pub stall: Option<(Duration, Duration)>,
    /// From this time on (relative to the start), answer `503` instead.
    pub fail_after: Option<Duration>,
}

/// Starts the fake on 127.0.0.1:0 inside the current runtime; returns its address and
/// the instant its script clock started.
pub async fn start(script: Script) -> (SocketAddr, Instant) {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let addr = listener.local_addr().expect("local addr");
    let t0 = Instant::now();
    let script = Arc::new(script);
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let script = script.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |_req: Request<hyper::body::Incoming>| {
                    let script = script.clone();
                    async move {
                        if let Some((start, len)) = script.stall {
                            let now = t0.elapsed();
                            if now >= start && now < start + len {
                                tokio::time::sleep_until((t0 + start + len).into()).await;
                            }
                        }
                        tokio::time::sleep(script.service).await;
                        let mut r = Response::new(Full::new(Bytes::from_static(b"ok")));
                        if script.fail_after.is_some_and(|f| t0.elapsed() >= f) {
                            *r.status_mut() = hyper::StatusCode::SERVICE_UNAVAILABLE;
                        }
                        Ok::<_, Infallible>(r)
                    }
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    (addr, t0)
}
