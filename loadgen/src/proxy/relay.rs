//! One client connection through the proxy: a connection to the upstream per client
//! connection, and two halves running at once, so that pipelined requests, `Expect:
//! 100-continue` and an answer that comes before its request's body ends all pass as they
//! would without the proxy.
//!
//! - The request half reads a request head from the client, registers the exchange with the
//!   answer half, and forwards the head and its body as framed (the head and the body bytes
//!   at hand in one write). After a request that asks for an upgrade it waits for the answer
//!   half's verdict: a `101` turns both halves into a tunnel that counts bytes and WebSocket
//!   frames.
//! - The answer half takes the exchanges in order and relays each one's interim answers and
//!   its final answer, framed, every read of the upstream under the read deadline. A body is
//!   relayed as it comes through one buffer per half: a 10 GB answer takes that buffer, not
//!   10 GB.
//!
//! An exchange is counted when it ends: answered whole, or dropped without its answer (the
//! upstream closed, stalled past the deadline, answered what cannot be framed, or the
//! connection was closed under it).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{Notify, mpsc, oneshot};

use super::frame::{self, Body, FrameError, WsFrames};
use super::route::{self, Classifier};
use super::tally::{Ended, Tally};
use crate::lock::lock;

/// The largest request or answer head, and each half's buffer: Apache's default limits are
/// 8 KiB a line and 100 fields; hyper's head limit is about 400 KiB, h1's 64 KiB.
pub const MAX_HEAD_BYTES: usize = 64 * 1024;
/// Requests a client may pipeline ahead of their answers on one connection.
const MAX_PIPELINED: usize = 64;
/// The most JSON body kept to look for a GraphQL operation name.
const MAX_SNIFF: usize = 64 * 1024;

/// What every connection shares: the upstream, the deadline, the classifier and the counts.
pub struct Shared {
    pub upstream: SocketAddr,
    pub read_timeout: Duration,
    pub classifier: Mutex<Arc<Classifier>>,
    pub live: Mutex<Live>,
}

/// The counts and what is open now.
#[derive(Default)]
pub struct Live {
    pub tally: Tally,
    /// Open exchanges by route, and in all.
    open: std::collections::BTreeMap<String, u64>,
    open_all: u64,
}

impl Live {
    fn open(&mut self, route: &str) {
        self.open_all += 1;
        self.tally.max_in_flight = self.tally.max_in_flight.max(self.open_all);
        let n = self.open.entry(route.to_owned()).or_insert(0);
        *n += 1;
        let n = *n;
        let r = self.tally.route_mut(route);
        r.max_in_flight = r.max_in_flight.max(n);
    }

    fn close(&mut self, route: &str) {
        self.open_all = self.open_all.saturating_sub(1);
        if let Some(n) = self.open.get_mut(route) {
            *n -= 1;
            if *n == 0 {
                self.open.remove(route);
            }
        }
    }

    /// The counts so far; the next tally starts with what is open now.
    pub fn take(&mut self) -> Tally {
        let mut next = Tally {
            max_in_flight: self.open_all,
            ..Tally::default()
        };
        for (route, n) in &self.open {
            next.route_mut(route).max_in_flight = *n;
        }
        std::mem::replace(&mut self.tally, next)
    }

    fn fault(&mut self, what: &'static str) {
        *self.tally.faults.entry(what).or_insert(0) += 1;
    }
}

/// Why a connection ended early (counted under [`Tally::faults`]).
#[derive(Debug)]
enum Stop {
    /// The upstream's part: timed out, closed mid-answer, a read error, unframable.
    Upstream(&'static str),
    /// The client's part (a malformed or oversized request, a close mid-request): not a fault
    /// of the server.
    Client,
}

/// One request and its answer, shared by the two halves.
struct Exchange {
    shared: Arc<Shared>,
    method: String,
    upgrade: bool,
    /// The request asked to close the connection after its answer (`Connection: close`).
    close: bool,
    state: Mutex<ExState>,
    /// A final answer has come (a request waiting to send its body after `Expect:
    /// 100-continue` then sends none).
    answered: Notify,
}

#[derive(Default)]
struct ExState {
    route: String,
    sent_at: Option<Instant>,
    answered_at: Option<Instant>,
    status: Option<u16>,
    bytes_up: u64,
    bytes_down: u64,
    ws: (u64, u64),
    /// The upgrade verdict's sender (the request half waits on it).
    verdict: Option<oneshot::Sender<bool>>,
    ended: bool,
}

impl Exchange {
    fn new(shared: Arc<Shared>, route: String, head: &frame::RequestHead) -> Exchange {
        lock(&shared.live).open(&route);
        Exchange {
            shared,
            method: head.method.clone(),
            upgrade: head.upgrade,
            close: head.close,
            state: Mutex::new(ExState {
                route,
                ..ExState::default()
            }),
            answered: Notify::new(),
        }
    }

    fn up(&self, n: usize) {
        lock(&self.state).bytes_up += n as u64;
    }

    fn down(&self, n: usize) {
        lock(&self.state).bytes_down += n as u64;
    }

    /// The request is fully sent; a GraphQL operation refines its route.
    fn sent(&self, operation: Option<String>) {
        let mut s = lock(&self.state);
        s.sent_at = Some(Instant::now());
        if let Some(op) = operation {
            let refined = Classifier::refine(&s.route, &op);
            let mut live = lock(&self.shared.live);
            live.close(&s.route);
            live.open(&refined);
            s.route = refined;
        }
    }

    /// The final answer's status, at the moment its last byte (or an upgrade's head) came.
    fn answer(&self, status: u16) {
        let mut s = lock(&self.state);
        s.status = Some(status);
        s.answered_at = Some(Instant::now());
    }

    /// Counted once, answered or not.
    fn end(&self) {
        let mut s = lock(&self.state);
        if s.ended {
            return;
        }
        s.ended = true;
        let latency = match (s.status, s.sent_at, s.answered_at) {
            (Some(_), Some(sent), Some(at)) => Some(at.saturating_duration_since(sent)),
            (Some(_), None, Some(_)) => Some(Duration::ZERO),
            _ => None,
        };
        let mut live = lock(&self.shared.live);
        live.tally.record(
            &s.route,
            Ended {
                bytes_up: s.bytes_up,
                bytes_down: s.bytes_down,
                status: s.status,
                latency,
                ws_frames: s.ws,
            },
        );
        live.close(&s.route);
    }
}

impl Drop for Exchange {
    fn drop(&mut self) {
        self.end();
    }
}

/// One half's buffer: bytes read but not yet relayed are `buf[start..end]`.
struct Inbuf {
    buf: Box<[u8]>,
    start: usize,
    end: usize,
}

impl Inbuf {
    fn new() -> Inbuf {
        Inbuf {
            buf: vec![0; MAX_HEAD_BYTES].into_boxed_slice(),
            start: 0,
            end: 0,
        }
    }

    fn data(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    fn is_empty(&self) -> bool {
        self.start == self.end
    }

    fn consume(&mut self, n: usize) {
        self.start += n;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }

    /// Room to read into, the unread bytes moved to the front when the end is reached;
    /// empty when the buffer is full.
    fn spare(&mut self) -> &mut [u8] {
        if self.end == self.buf.len() && self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        &mut self.buf[self.end..]
    }
}

/// Reads more into `inb`: the bytes read, 0 at end of stream. Under `deadline` when given.
async fn fill<R: AsyncRead + Unpin>(
    r: &mut R,
    inb: &mut Inbuf,
    deadline: Option<Duration>,
) -> Result<usize, &'static str> {
    let spare = inb.spare();
    if spare.is_empty() {
        return Err("a head over the size limit");
    }
    let n = match deadline {
        Some(d) => match tokio::time::timeout(d, r.read(spare)).await {
            Ok(r) => r.map_err(|_| "a read failed")?,
            Err(_) => return Err("no byte within the read deadline"),
        },
        None => r.read(spare).await.map_err(|_| "a read failed")?,
    };
    inb.end += n;
    Ok(n)
}

/// Writes `data` whole, under `deadline` when given.
async fn send<W: AsyncWrite + Unpin>(
    w: &mut W,
    data: &[u8],
    deadline: Option<Duration>,
) -> Result<(), &'static str> {
    match deadline {
        Some(d) => match tokio::time::timeout(d, w.write_all(data)).await {
            Ok(r) => r.map_err(|_| "a write failed"),
            Err(_) => Err("a write stalled past the read deadline"),
        },
        None => w.write_all(data).await.map_err(|_| "a write failed"),
    }
}

/// Serves one accepted client connection until either side closes it.
pub async fn serve(client: TcpStream, shared: Arc<Shared>) {
    lock(&shared.live).tally.connections += 1;
    let _ = client.set_nodelay(true);
    let up = match tokio::time::timeout(shared.read_timeout, TcpStream::connect(shared.upstream))
        .await
    {
        Ok(Ok(s)) => s,
        _ => {
            lock(&shared.live).fault("the upstream refused or did not accept a connection");
            return;
        }
    };
    let _ = up.set_nodelay(true);
    let (cr, cw) = client.into_split();
    let (ur, uw) = up.into_split();
    let (tx, rx) = mpsc::channel(MAX_PIPELINED);
    let req = requests(shared.clone(), tx, cr, uw);
    let ans = answers(shared.clone(), rx, ur, cw);
    tokio::pin!(req, ans);
    tokio::select! {
        _ = &mut ans => {}
        r = &mut req => match r {
            // The client finished sending: its answers still come.
            Ok(()) => ans.await,
            Err(Stop::Upstream(what)) => lock(&shared.live).fault(what),
            Err(Stop::Client) => {}
        },
    }
}

/// The request half (see the module's doc).
async fn requests(
    shared: Arc<Shared>,
    tx: mpsc::Sender<Arc<Exchange>>,
    mut cr: OwnedReadHalf,
    mut uw: OwnedWriteHalf,
) -> Result<(), Stop> {
    let deadline = Some(shared.read_timeout);
    let mut inb = Inbuf::new();
    loop {
        let head = loop {
            match frame::parse_request(inb.data()) {
                Ok(Some(h)) => break h,
                Ok(None) => {}
                Err(_) => return Err(Stop::Client),
            }
            match fill(&mut cr, &mut inb, None).await {
                Ok(0) if inb.is_empty() => {
                    let _ = uw.shutdown().await;
                    return Ok(());
                }
                Ok(0) | Err(_) => return Err(Stop::Client),
                Ok(_) => {}
            }
        };
        let classifier = lock(&shared.classifier).clone();
        let route = classifier.route(&head.method, &head.target);
        let ex = Arc::new(Exchange::new(shared.clone(), route, &head));
        let verdict = if head.upgrade {
            let (vtx, vrx) = oneshot::channel();
            lock(&ex.state).verdict = Some(vtx);
            Some(vrx)
        } else {
            None
        };
        if tx.send(ex.clone()).await.is_err() {
            return Ok(());
        }
        let mut body = Body::new(head.body);
        let mut sniff = (head.json || head.target.contains("operationName=")).then(Vec::<u8>::new);
        let mut owed = head.len;
        if head.expect_continue && !body.is_done() && inb.data().len() == head.len {
            // The head alone, then the body when the client sends it; none if the server
            // answered finally first.
            send(&mut uw, &inb.data()[..owed], deadline)
                .await
                .map_err(Stop::Upstream)?;
            ex.up(owed);
            inb.consume(owed);
            owed = 0;
            tokio::select! {
                biased;
                _ = ex.answered.notified() => body = Body::Done,
                r = cr.readable() => r.map_err(|_| Stop::Client)?,
            }
        }
        loop {
            let n = body
                .feed(&inb.data()[owed..])
                .map_err(|_: FrameError| Stop::Client)?;
            if let Some(s) = sniff.as_mut() {
                let part = &inb.data()[owed..owed + n];
                if s.len() + part.len() <= MAX_SNIFF {
                    s.extend_from_slice(part);
                } else {
                    sniff = None;
                }
            }
            let w = owed + n;
            owed = 0;
            if w > 0 {
                send(&mut uw, &inb.data()[..w], deadline)
                    .await
                    .map_err(Stop::Upstream)?;
                ex.up(w);
                inb.consume(w);
            }
            if body.is_done() {
                break;
            }
            match fill(&mut cr, &mut inb, None).await {
                Ok(n) if n > 0 => {}
                _ => return Err(Stop::Client),
            }
        }
        let op = sniff.and_then(|s| {
            route::graphql_operation(&head.target, (!s.is_empty()).then_some(&s[..]))
        });
        ex.sent(op);
        if let Some(v) = verdict
            && v.await == Ok(true)
        {
            return tunnel(&mut cr, &mut uw, &mut inb, &ex, true).await;
        }
        drop(ex);
        if head.close {
            // No request follows. The upstream's write side stays open until its answer is
            // relayed (a server may drop a request whose client half-closes, as Node's does):
            // the answer half ends the connection after that answer.
            std::future::pending::<()>().await;
        }
    }
}

/// The answer half (see the module's doc). An upstream's fault is counted before the client's
/// connection closes.
async fn answers(
    shared: Arc<Shared>,
    mut rx: mpsc::Receiver<Arc<Exchange>>,
    mut ur: OwnedReadHalf,
    mut cw: OwnedWriteHalf,
) {
    if let Err(Stop::Upstream(what)) = answer_loop(&shared, &mut rx, &mut ur, &mut cw).await {
        lock(&shared.live).fault(what);
    }
}

async fn answer_loop(
    shared: &Shared,
    rx: &mut mpsc::Receiver<Arc<Exchange>>,
    ur: &mut OwnedReadHalf,
    cw: &mut OwnedWriteHalf,
) -> Result<(), Stop> {
    let deadline = Some(shared.read_timeout);
    let mut inb = Inbuf::new();
    loop {
        // Between exchanges the upstream may close an idle connection: the client sees it.
        let ex = loop {
            tokio::select! {
                ex = rx.recv() => match ex {
                    Some(ex) => break ex,
                    None => {
                        let _ = cw.shutdown().await;
                        return Ok(());
                    }
                },
                n = fill(ur, &mut inb, None), if inb.is_empty() => match n {
                    Ok(n) if n > 0 => {}
                    _ => {
                        let _ = cw.shutdown().await;
                        return Ok(());
                    }
                },
            }
        };
        let head = loop {
            let head = loop {
                match frame::parse_answer(inb.data(), &ex.method) {
                    Ok(Some(h)) => break h,
                    Ok(None) => {}
                    Err(_) => return Err(Stop::Upstream("an answer head that cannot be parsed")),
                }
                match fill(ur, &mut inb, deadline).await {
                    Ok(0) => return Err(Stop::Upstream("the upstream closed before answering")),
                    Ok(_) => {}
                    Err(e) => return Err(Stop::Upstream(e)),
                }
            };
            if head.status == 101 && ex.upgrade {
                send(cw, &inb.data()[..head.len], None)
                    .await
                    .map_err(|_| Stop::Client)?;
                ex.down(head.len);
                inb.consume(head.len);
                ex.answer(101);
                if let Some(v) = lock(&ex.state).verdict.take() {
                    let _ = v.send(true);
                }
                return tunnel(ur, cw, &mut inb, &ex, false).await;
            }
            if (100..200).contains(&head.status) {
                send(cw, &inb.data()[..head.len], None)
                    .await
                    .map_err(|_| Stop::Client)?;
                ex.down(head.len);
                inb.consume(head.len);
                continue;
            }
            break head;
        };
        ex.answered.notify_one();
        if let Some(v) = lock(&ex.state).verdict.take() {
            let _ = v.send(false);
        }
        let mut body = Body::new(head.body);
        let mut owed = head.len;
        loop {
            let n = body
                .feed(&inb.data()[owed..])
                .map_err(|_| Stop::Upstream("an answer body that cannot be framed"))?;
            let w = owed + n;
            owed = 0;
            if body.is_done() {
                ex.answer(head.status);
            }
            if w > 0 {
                send(cw, &inb.data()[..w], None)
                    .await
                    .map_err(|_| Stop::Client)?;
                ex.down(w);
                inb.consume(w);
            }
            if body.is_done() {
                break;
            }
            match fill(ur, &mut inb, deadline).await {
                Ok(0) if body == Body::UntilClose => {
                    ex.answer(head.status);
                    break;
                }
                Ok(0) => return Err(Stop::Upstream("the upstream closed mid-answer")),
                Ok(_) => {}
                Err(e) => return Err(Stop::Upstream(e)),
            }
        }
        ex.end();
        if head.close || ex.close {
            let _ = cw.shutdown().await;
            return Ok(());
        }
    }
}

/// One direction of an upgraded connection: bytes relayed and counted, WebSocket frames
/// counted, until end of stream (then the other side's writing is shut down).
async fn tunnel<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    r: &mut R,
    w: &mut W,
    inb: &mut Inbuf,
    ex: &Exchange,
    upward: bool,
) -> Result<(), Stop> {
    let mut ws = WsFrames::default();
    loop {
        if !inb.is_empty() {
            let n = inb.data().len();
            ws.feed(inb.data());
            let ok = send(w, inb.data(), None).await;
            {
                let mut s = lock(&ex.state);
                if upward {
                    s.bytes_up += n as u64;
                    s.ws.0 = ws.frames;
                } else {
                    s.bytes_down += n as u64;
                    s.ws.1 = ws.frames;
                }
            }
            inb.consume(n);
            if ok.is_err() {
                return Ok(());
            }
        }
        match fill(r, inb, None).await {
            Ok(n) if n > 0 => {}
            _ => {
                let _ = w.shutdown().await;
                return Ok(());
            }
        }
    }
}
