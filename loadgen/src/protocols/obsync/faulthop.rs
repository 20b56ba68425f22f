//! The fault hop: a loopback HTTP/1.1 proxy between the load generator and the target that
//! injects faults on a seeded schedule (a 503 before or after the target saw the request, a
//! connection closed with a reset instead of the answer, added latency, a request body that
//! stalls half-way) and counts what the target did under the client's retries: how often it
//! created the same version or stored the same chunk twice.
//!
//! Each rule draws from its own ChaCha stream of the scenario's seed, once per request of its
//! route in arrival order. A request comes back only as the client's retry (method, URI and
//! body the same; the signature is fresh), and a retry passes untouched without drawing: so a
//! client that retries always gets through, and each rule draws exactly once per distinct
//! request. The number of faults of each kind, and every count here, is then the same on every
//! run of a seed even with several requests in flight, whose arrival order varies; with one in
//! flight the whole schedule (which request is faulted) is too.

use std::collections::{BTreeMap, BTreeSet};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::body::{Body, Frame, Incoming};
use hyper::{Request, Response, StatusCode};
use rand::{Rng as _, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tokio::net::{TcpListener, TcpStream};

use crate::lock::lock;

pub use contract::fault::FaultKind;

/// One rule of the schedule.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultRule {
    /// A route label (`put-chunk`, `post-version`, ...) or `*` for every route.
    pub route: String,
    pub kind: FaultKind,
    /// Share of that route's requests the rule picks, in `[0, 1]`.
    pub rate: f64,
    /// Delay or stall length.
    pub ms: u64,
}

/// The route labels a rule may name (besides `*`): every obsync-v1 route.
pub fn route_labels() -> Vec<&'static str> {
    protocol::Route::ALL.iter().map(|r| r.label()).collect()
}

/// What the hop saw and did, over its whole life.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HopCounts {
    /// Requests the client sent, by route label.
    pub requests: BTreeMap<String, u64>,
    /// Faults injected, by `<kind>.<route>`.
    pub injected: BTreeMap<String, u64>,
    /// `201 Created` answers for a path the target had already answered `201` for, by route:
    /// a version created twice, a chunk stored twice.
    pub created_twice: BTreeMap<String, u64>,
    /// `201 Created` answers, by route.
    pub created: BTreeMap<String, u64>,
}

struct Rule {
    rule: FaultRule,
    rng: ChaCha8Rng,
}

struct State {
    upstream: SocketAddr,
    rules: Mutex<Vec<Rule>>,
    counts: Mutex<HopCounts>,
    created_paths: Mutex<BTreeSet<String>>,
    /// Every request seen, by identity ([`identity`]): a second sighting is a retry.
    seen: Mutex<BTreeSet<[u8; 32]>>,
}

/// A request's identity across the client's retries: SHA-256 of method, URI and body (the
/// signature headers change on every retry, so they are left out).
fn identity(method: &str, uri: &str, body: &[u8]) -> [u8; 32] {
    use sha2::Digest as _;
    let mut h = sha2::Sha256::new();
    h.update(method.as_bytes());
    h.update(b" ");
    h.update(uri.as_bytes());
    h.update(b"\n");
    h.update(body);
    h.finalize().into()
}

/// A running hop; stops when dropped.
pub struct FaultHop {
    pub addr: SocketAddr,
    state: Arc<State>,
    task: tokio::task::JoinHandle<()>,
}

/// The ChaCha stream of rule `i` (other purposes of the seed use other streams).
fn stream_of(i: usize) -> u64 {
    0xfa17_0000 + i as u64
}

impl FaultHop {
    /// Listens on a fresh loopback port and forwards to `upstream`.
    pub async fn start(
        upstream: SocketAddr,
        rules: Vec<FaultRule>,
        seed: u64,
    ) -> std::io::Result<FaultHop> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let rules = rules
            .into_iter()
            .enumerate()
            .map(|(i, rule)| {
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                rng.set_stream(stream_of(i));
                Rule { rule, rng }
            })
            .collect();
        let state = Arc::new(State {
            upstream,
            rules: Mutex::new(rules),
            counts: Mutex::new(HopCounts::default()),
            created_paths: Mutex::new(BTreeSet::new()),
            seen: Mutex::new(BTreeSet::new()),
        });
        let st = state.clone();
        let task = tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                let st = st.clone();
                tokio::spawn(async move {
                    let _ = serve(sock, st).await;
                });
            }
        });
        Ok(FaultHop { addr, state, task })
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn counts(&self) -> HopCounts {
        lock(&self.state.counts).clone()
    }
}

impl Drop for FaultHop {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Picks the fault for one request of `route`: every rule for the route draws (so one rule's
/// picks never shift another's), the first that fires wins.
fn pick(st: &State, route: &str) -> Option<(FaultKind, u64)> {
    let mut rules = lock(&st.rules);
    let mut chosen = None;
    for r in rules.iter_mut() {
        if r.rule.route != route && r.rule.route != "*" {
            continue;
        }
        // Uniform in [0, 1) from the top 53 bits.
        let u = (r.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        if chosen.is_none() && u < r.rule.rate {
            chosen = Some((r.rule.kind, r.rule.ms));
        }
    }
    chosen
}

/// One client connection: a hyper server whose service forwards over one upstream connection.
async fn serve(
    sock: TcpStream,
    st: Arc<State>,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    // A reset, not a FIN, when the hop closes: what `reset_after` promises.
    set_zero_linger(&sock)?;
    sock.set_nodelay(true)?;
    let up = TcpStream::connect(st.upstream).await?;
    up.set_nodelay(true)?;
    let (sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(up)).await?;
    tokio::spawn(conn);
    let sender = Arc::new(tokio::sync::Mutex::new(sender));
    let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
        let (st, sender) = (st.clone(), sender.clone());
        async move { handle(req, st, sender).await }
    });
    hyper::server::conn::http1::Builder::new()
        .serve_connection(hyper_util::rt::TokioIo::new(sock), svc)
        .await?;
    Ok(())
}

/// SO_LINGER with a zero timeout: `close` sends RST and drops unsent data.
fn set_zero_linger(sock: &TcpStream) -> std::io::Result<()> {
    use std::os::fd::AsRawFd as _;
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt(2) on a socket we own, with a pointer to a live `linger` and its size.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&raw const l).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

type Sender = Arc<tokio::sync::Mutex<hyper::client::conn::http1::SendRequest<HopBody>>>;

/// Why the hop dropped a connection instead of answering (hyper then closes it): a fault,
/// or the client or target side failed.
#[derive(Debug)]
struct Dropped(String);

impl std::fmt::Display for Dropped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "fault hop: {}", self.0)
    }
}

impl std::error::Error for Dropped {}

fn dropped(e: impl std::fmt::Display) -> Dropped {
    Dropped(e.to_string())
}

async fn handle(
    req: Request<Incoming>,
    st: Arc<State>,
    sender: Sender,
) -> Result<Response<Full<Bytes>>, Dropped> {
    let path = req.uri().path().to_owned();
    let route = protocol::Route::recognize(req.method().as_str(), &path)
        .map_or("unknown", |m| m.route.label())
        .to_owned();
    *lock(&st.counts).requests.entry(route.clone()).or_insert(0) += 1;
    let (parts, body) = req.into_parts();
    let bytes = body.collect().await.map_err(dropped)?.to_bytes();
    let id = identity(parts.method.as_str(), &parts.uri.to_string(), &bytes);
    let first = lock(&st.seen).insert(id);
    let fault = if first { pick(&st, &route) } else { None };
    if let Some((kind, _)) = fault {
        *lock(&st.counts)
            .injected
            .entry(format!("{}.{route}", kind.label()))
            .or_insert(0) += 1;
    }
    if let Some((FaultKind::StatusBefore, _)) = fault {
        return Ok(unavailable());
    }
    if let Some((FaultKind::Delay, ms)) = fault {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
    let stall = match fault {
        Some((FaultKind::StallBody, ms)) => Some(Duration::from_millis(ms)),
        _ => None,
    };
    let up_req = Request::from_parts(parts, HopBody::new(bytes, stall));
    let answer = {
        let mut s = sender.lock().await;
        s.ready().await.map_err(dropped)?;
        s.send_request(up_req).await.map_err(dropped)?
    };
    let (aparts, abody) = answer.into_parts();
    let abytes = abody.collect().await.map_err(dropped)?.to_bytes();
    if aparts.status == StatusCode::CREATED {
        let mut c = lock(&st.counts);
        *c.created.entry(route.clone()).or_insert(0) += 1;
        if !lock(&st.created_paths).insert(format!("{route} {path}")) {
            *c.created_twice.entry(route.clone()).or_insert(0) += 1;
        }
    }
    match fault {
        Some((FaultKind::StatusAfter, _)) => Ok(unavailable()),
        Some((FaultKind::ResetAfter, _)) => Err(dropped("connection reset instead of the answer")),
        _ => Ok(Response::from_parts(aparts, Full::new(abytes))),
    }
}

fn unavailable() -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from_static(
        br#"{"error":{"code":"unavailable","message":"fault hop"}}"#,
    )));
    *r.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    r
}

/// A request body sent whole, or in two halves with a pause between (`stall_body`).
pub struct HopBody {
    halves: [Option<Bytes>; 2],
    stall: Option<Pin<Box<tokio::time::Sleep>>>,
    pause: Option<Duration>,
}

impl HopBody {
    fn new(b: Bytes, pause: Option<Duration>) -> HopBody {
        let halves = match pause {
            Some(_) if b.len() >= 2 => {
                let mid = b.len() / 2;
                [Some(b.slice(..mid)), Some(b.slice(mid..))]
            }
            _ => [Some(b), None],
        };
        HopBody {
            halves,
            stall: None,
            pause,
        }
    }
}

impl Body for HopBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if let Some(first) = self.halves[0].take() {
            if let Some(p) = self.pause
                && self.halves[1].is_some()
            {
                self.stall = Some(Box::pin(tokio::time::sleep(p)));
            }
            return Poll::Ready(Some(Ok(Frame::data(first))));
        }
        if let Some(s) = self.stall.as_mut() {
            if s.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            self.stall = None;
        }
        Poll::Ready(self.halves[1].take().map(|b| Ok(Frame::data(b))))
    }

    fn is_end_stream(&self) -> bool {
        self.halves.iter().all(Option::is_none)
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        let n: usize = self.halves.iter().flatten().map(Bytes::len).sum();
        hyper::body::SizeHint::with_exact(n as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(route: &str, kind: FaultKind, rate: f64) -> FaultRule {
        FaultRule {
            route: route.into(),
            kind,
            rate,
            ms: 0,
        }
    }

    fn state(rules: Vec<FaultRule>, seed: u64) -> State {
        State {
            upstream: SocketAddr::from(([127, 0, 0, 1], 9)),
            rules: Mutex::new(
                rules
                    .into_iter()
                    .enumerate()
                    .map(|(i, rule)| {
                        let mut rng = ChaCha8Rng::seed_from_u64(seed);
                        rng.set_stream(stream_of(i));
                        Rule { rule, rng }
                    })
                    .collect(),
            ),
            counts: Mutex::new(HopCounts::default()),
            created_paths: Mutex::new(BTreeSet::new()),
            seen: Mutex::new(BTreeSet::new()),
        }
    }

    #[test]
    fn the_schedule_is_seeded_and_keeps_its_rate() {
        let picks = |seed| {
            let st = state(vec![rule("put-chunk", FaultKind::StatusAfter, 0.1)], seed);
            (0..10_000)
                .map(|_| pick(&st, "put-chunk").is_some())
                .collect::<Vec<_>>()
        };
        let a = picks(7);
        assert_eq!(a, picks(7));
        assert_ne!(a, picks(8));
        let n = a.iter().filter(|p| **p).count();
        assert!((900..1100).contains(&n), "{n} of 10000 at rate 0.1");
        // Other routes are never picked by a route's rule.
        let st = state(vec![rule("put-chunk", FaultKind::StatusAfter, 1.0)], 7);
        assert_eq!(pick(&st, "get-chunk"), None);
        assert_eq!(pick(&st, "put-chunk"), Some((FaultKind::StatusAfter, 0)));
    }

    #[test]
    fn one_rule_does_not_shift_another() {
        // The second rule's picks are the same whether or not the first one fires.
        let second = |first_rate| {
            let st = state(
                vec![
                    rule("put-chunk", FaultKind::Delay, first_rate),
                    rule("*", FaultKind::StatusBefore, 0.2),
                ],
                3,
            );
            let mut v = Vec::new();
            for _ in 0..200 {
                v.push(pick(&st, "put-chunk") == Some((FaultKind::StatusBefore, 0)));
            }
            v
        };
        let (none, some) = (second(0.0), second(0.5));
        // Wherever the first rule did not fire, the second's verdict is unchanged.
        let st = state(vec![rule("put-chunk", FaultKind::Delay, 0.5)], 3);
        for (i, first_fired) in (0..200)
            .map(|_| pick(&st, "put-chunk").is_some())
            .enumerate()
        {
            if !first_fired {
                assert_eq!(none[i], some[i], "request {i}");
            }
        }
    }

    /// One HTTP/1.1 request on a fresh connection to `addr`; the answer's status code.
    async fn status_of(addr: SocketAddr, path: &str, body: &str) -> u16 {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let mut s = TcpStream::connect(addr).await.unwrap();
        let head = format!(
            "PUT {path} HTTP/1.1\r\nHost: hop\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        s.write_all(head.as_bytes()).await.unwrap();
        s.write_all(body.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut answer))
            .await
            .unwrap()
            .unwrap();
        let line = String::from_utf8_lossy(&answer);
        line.split(' ').nth(1).unwrap().parse().unwrap()
    }

    #[tokio::test]
    async fn a_retry_passes_untouched_and_draws_nothing() {
        let up = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let upstream = up.local_addr().unwrap();
        let server = tokio::spawn(async move {
            while let Ok((sock, _)) = up.accept().await {
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(|_req: Request<Incoming>| async {
                        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"ok"))))
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(sock), svc)
                        .await;
                });
            }
        });
        // Every first sighting is faulted; only a retry (same method, URI and body) gets by.
        let hop = FaultHop::start(
            upstream,
            vec![rule("put-chunk", FaultKind::StatusBefore, 1.0)],
            7,
        )
        .await
        .unwrap();
        let (a, b) = ("/v1/chunks/aaaa", "/v1/chunks/bbbb");
        assert_eq!(status_of(hop.addr, a, "one").await, 503);
        assert_eq!(status_of(hop.addr, a, "one").await, 200, "the retry");
        assert_eq!(status_of(hop.addr, a, "two").await, 503, "another body");
        assert_eq!(status_of(hop.addr, b, "one").await, 503, "another path");
        assert_eq!(status_of(hop.addr, b, "one").await, 200, "its retry");
        let c = hop.counts();
        assert_eq!(c.requests.get("put-chunk"), Some(&5));
        assert_eq!(c.injected.get("status_before.put-chunk"), Some(&3));
        server.abort();
    }

    #[tokio::test]
    async fn a_stalled_body_arrives_whole_after_the_pause() {
        let b = HopBody::new(
            Bytes::from_static(b"abcdefgh"),
            Some(Duration::from_millis(50)),
        );
        let t0 = std::time::Instant::now();
        let got = b.collect().await.unwrap().to_bytes();
        assert_eq!(&got[..], b"abcdefgh");
        assert!(t0.elapsed() >= Duration::from_millis(50));
    }
}
