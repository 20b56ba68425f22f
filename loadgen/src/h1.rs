//! A lean HTTP/1.1 client connection for the closed-loop route engine, built the way wrk
//! builds its requests: one TCP stream per worker (no Nagle, keep-alive), the request written
//! from a reused buffer in one `write`, the answer read into a reused buffer and its head
//! parsed with `httparse` (status line, `Content-Length`, `Transfer-Encoding: chunked`,
//! `Connection: close`) to find where it ends. The body is counted and dropped (route load never reads it).
//!
//! hyper's client cost about twice wrk's CPU per request on `/livez` (a dispatcher task
//! protocol, a header map and a body channel per request): the generator's "never the
//! bottleneck" target needs the generator to be nearly as cheap as wrk (`vaultbench load bench-peer`).
//!
//! A connection is either a tokio stream (its reads wait in the runtime's epoll, so one
//! thread serves many connections) or a blocking socket on a thread of its own
//! ([`H1Conn::blocking`]): a read then sleeps in `recv` itself, two system calls per request
//! (send, recv) against three through epoll and wrk's six (`epoll_wait`, `read`, `epoll_ctl`,
//! `epoll_wait`, `write`, `epoll_ctl`), and no runtime, scheduler or timer runs per request.
//! The route engine uses blocking connections when every connection can have a CPU of its
//! own (`route::blocking_workers`). The exchange code is the same for both: a blocking
//! stream's futures never wait, so the engine polls them once ([`H1Conn::roundtrip_blocking`]).

use std::future::Future;
use std::io::Write as _;
use std::net::SocketAddr;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[doc(hidden)]
pub mod probe;

/// Largest response head (status line + headers) accepted; hyper's default is ~400 KiB,
/// but the signed protocol's answers have a handful of short headers.
pub(crate) const MAX_HEAD_BYTES: usize = 64 * 1024;
/// Bytes asked of the socket per read: a `/livez` or JSON answer fits in one read.
const READ_CHUNK: usize = 16 * 1024;
/// Interim (1xx) answers accepted before the final one: a server sends one `100 Continue`
/// or a `103 Early Hints` or two; an endless stream of them is a server that never answers.
const MAX_INTERIM: usize = 16;

/// A transport failure: its kind ("connect", "io") and what happened.
pub(crate) type Fail = (&'static str, String);

/// What a round trip returned: the status and the number of body bytes read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reply {
    pub status: u16,
    pub body_bytes: u64,
}

/// One keep-alive HTTP/1.1 connection and its buffers; reconnects when the last exchange
/// failed, was abandoned (a timeout dropped it mid-way) or the server asked to close.
pub(crate) struct H1Conn {
    addr: SocketAddr,
    /// `None` between a failure and the next request; taken out while an exchange runs, so
    /// an exchange dropped half-way (timeout) never leaves a desynchronised stream behind.
    stream: Option<Stream>,
    /// `Some` for a blocking connection: its read and write timeout, and where the current
    /// socket is published so that another thread can shut it down (the engine's hard stop).
    blocking: Option<(Duration, Arc<BlockingSlot>)>,
    /// The request to send, head and body (callers fill it, see [`H1Conn::request_buf`]).
    wbuf: Vec<u8>,
    /// Answer bytes read but not yet consumed are `rbuf[rpos..]`.
    rbuf: Vec<u8>,
    rpos: usize,
    /// A blocking exchange's end: each read is bounded by the socket's timeout, and a read
    /// that returns past this ends the exchange, so an answer trickled just inside the read
    /// timeout still ends within two timeouts (an async exchange is bounded by its caller's
    /// timer instead).
    deadline: Option<std::time::Instant>,
}

/// The parsed head of an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Head {
    status: u16,
    /// Bytes of the head, including the blank line.
    len: usize,
    body: BodyLen,
    close: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BodyLen {
    Known(u64),
    Chunked,
    /// No length: the body runs until the server closes (HTTP/1.1 §6.3 rule 7).
    UntilClose,
}

/// Where a blocking connection publishes its current socket, so that the thread that runs the
/// load can end an exchange that outlives the run ([`BlockingSlot::shut_down`]).
#[derive(Debug, Default)]
pub(crate) struct BlockingSlot {
    socket: std::sync::Mutex<Option<Arc<std::net::TcpStream>>>,
    shut: std::sync::atomic::AtomicBool,
}

impl BlockingSlot {
    /// Shuts the current socket down (a blocked `recv` returns at once) and every socket the
    /// connection opens after this.
    pub fn shut_down(&self) {
        self.shut.store(true, std::sync::atomic::Ordering::SeqCst);
        let g = crate::lock::lock(&self.socket);
        if let Some(s) = g.as_ref() {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }

    /// Whether [`BlockingSlot::shut_down`] was called.
    pub fn is_shut(&self) -> bool {
        self.shut.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn publish(&self, s: &Arc<std::net::TcpStream>) {
        *crate::lock::lock(&self.socket) = Some(s.clone());
        if self.is_shut() {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
}

/// The socket under a connection.
enum Stream {
    /// Reads wait in the runtime's epoll.
    Async(TcpStream),
    /// Reads sleep in `recv` on the calling thread, bounded by the socket's read timeout.
    Blocking(Arc<std::net::TcpStream>),
}

/// An I/O error of a blocking socket: its read or write timeout shows as `WouldBlock` (or
/// `TimedOut`), which is the exchange's timeout.
fn io_fail(what: &str, e: std::io::Error) -> Fail {
    match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
            ("timeout", format!("{what}: no progress within the timeout"))
        }
        _ => ("io", format!("{what}: {e}")),
    }
}

impl Stream {
    async fn write_all(&mut self, buf: &[u8]) -> Result<(), Fail> {
        match self {
            Stream::Async(s) => s.write_all(buf).await,
            Stream::Blocking(s) => (&**s).write_all(buf),
        }
        .map_err(|e| io_fail("sending the request", e))
    }

    /// Reads into the spare capacity of `buf`; `Ok(0)` at end of stream.
    async fn read_buf(&mut self, buf: &mut Vec<u8>) -> Result<usize, Fail> {
        let r = match self {
            Stream::Async(s) => s.read_buf(buf).await,
            Stream::Blocking(s) => recv_into_spare(s, buf),
        };
        r.map_err(|e| io_fail("reading the answer", e))
    }
}

/// One `recv` into the spare capacity that `fill` reserved, without zeroing it first (16 KiB
/// of zeroes per read would cost more than the read); retried when a signal interrupts it.
fn recv_into_spare(s: &std::net::TcpStream, buf: &mut Vec<u8>) -> std::io::Result<usize> {
    use std::os::fd::AsRawFd as _;
    let spare = buf.spare_capacity_mut();
    loop {
        // SAFETY: `recv` writes at most `spare.len()` bytes into memory this Vec owns, and
        // only the count it reports is marked initialised below.
        let n = unsafe { libc::recv(s.as_raw_fd(), spare.as_mut_ptr().cast(), spare.len(), 0) };
        if n >= 0 {
            let n = n as usize;
            // SAFETY: the kernel initialised exactly `n` bytes past the old length.
            unsafe { buf.set_len(buf.len() + n) };
            return Ok(n);
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

impl H1Conn {
    pub fn new(addr: SocketAddr) -> H1Conn {
        H1Conn {
            addr,
            stream: None,
            blocking: None,
            wbuf: Vec::with_capacity(4096),
            rbuf: Vec::with_capacity(READ_CHUNK),
            rpos: 0,
            deadline: None,
        }
    }

    /// A connection over a blocking socket, for a thread of its own: connecting, sending and
    /// every read are bounded by `timeout`; `slot` lets another thread shut it down.
    pub fn blocking(addr: SocketAddr, timeout: Duration, slot: Arc<BlockingSlot>) -> H1Conn {
        H1Conn {
            blocking: Some((timeout, slot)),
            ..H1Conn::new(addr)
        }
    }

    /// [`H1Conn::roundtrip`] of a blocking connection, run to completion on this thread.
    pub fn roundtrip_blocking(&mut self, head_only: bool, max_body: u64) -> Result<Reply, Fail> {
        debug_assert!(self.blocking.is_some(), "a blocking connection");
        let r = {
            let mut fut = pin!(self.roundtrip(head_only, max_body));
            match fut.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
                Poll::Ready(r) => r,
                // Every await of a blocking stream is ready at once; a pending one would be a
                // bug in this file, reported as a failed exchange rather than a hang.
                Poll::Pending => Err((
                    "io",
                    "internal: a blocking exchange waited on the runtime".to_owned(),
                )),
            }
        };
        match (r, &self.blocking) {
            // The engine's hard stop shut the socket down under a waiting exchange: that
            // request ran out of time.
            (Err(_), Some((_, slot))) if slot.is_shut() => Err((
                "timeout",
                "the run's hard stop ended the exchange".to_owned(),
            )),
            (r, _) => r,
        }
    }

    async fn connect(&mut self) -> Result<Stream, Fail> {
        let stream = match &self.blocking {
            None => {
                let s = TcpStream::connect(self.addr)
                    .await
                    .map_err(|e| ("connect", e.to_string()))?;
                // Requests are written whole; Nagle would only delay them.
                let _ = s.set_nodelay(true);
                Stream::Async(s)
            }
            Some((timeout, slot)) => {
                if slot.is_shut() {
                    return Err(("timeout", "the run is over".to_owned()));
                }
                let s = std::net::TcpStream::connect_timeout(&self.addr, *timeout)
                    .map_err(|e| ("connect", e.to_string()))?;
                let _ = s.set_nodelay(true);
                s.set_read_timeout(Some(*timeout))
                    .and_then(|()| s.set_write_timeout(Some(*timeout)))
                    .map_err(|e| ("connect", format!("setting the socket timeouts: {e}")))?;
                let s = Arc::new(s);
                slot.publish(&s);
                Stream::Blocking(s)
            }
        };
        self.rbuf.clear();
        self.rpos = 0;
        Ok(stream)
    }

    /// The request buffer, emptied: write the whole request (head and body) into it, then
    /// call [`H1Conn::roundtrip`].
    pub fn request_buf(&mut self) -> &mut Vec<u8> {
        self.wbuf.clear();
        &mut self.wbuf
    }

    /// Sends the request in the buffer and reads the whole answer (at most `max_body`
    /// body bytes). `head_only` is set for `HEAD` requests, whose answers carry no body.
    pub async fn roundtrip(&mut self, head_only: bool, max_body: u64) -> Result<Reply, Fail> {
        self.deadline = self
            .blocking
            .as_ref()
            .map(|(timeout, _)| std::time::Instant::now() + *timeout);
        let mut stream = match self.stream.take() {
            Some(s) => s,
            None => self.connect().await?,
        };
        stream.write_all(&self.wbuf).await?;
        let mut interim = 0;
        let reply = loop {
            let head = self.read_head(&mut stream).await?;
            self.rpos += head.len;
            // Interim 1xx answers (100 Continue, 103 Early Hints) precede the real one.
            if (100..200).contains(&head.status) && head.status != 101 {
                interim += 1;
                if interim > MAX_INTERIM {
                    return Err((
                        "io",
                        format!("the server sent over {MAX_INTERIM} interim (1xx) answers"),
                    ));
                }
                continue;
            }
            if head.status == 101 {
                return Err(("io", "the server switched protocols (101)".to_owned()));
            }
            let no_body = head_only || head.status == 204 || head.status == 304;
            let body_bytes = match head.body {
                _ if no_body => 0,
                BodyLen::Known(n) if n > max_body => {
                    return Err((
                        "io",
                        format!(
                            "declared Content-Length {n} is over the {max_body}-byte cap on an answer"
                        ),
                    ));
                }
                BodyLen::Known(n) => self.skip_exact(&mut stream, n).await?,
                BodyLen::Chunked => self.skip_chunked(&mut stream, max_body).await?,
                BodyLen::UntilClose => self.skip_to_eof(&mut stream, max_body).await?,
            };
            let close = head.close || (head.body == BodyLen::UntilClose && !no_body);
            break (
                Reply {
                    status: head.status,
                    body_bytes,
                },
                close,
            );
        };
        let (reply, close) = reply;
        if !close {
            self.stream = Some(stream);
        }
        Ok(reply)
    }

    /// Unconsumed bytes.
    fn pending(&self) -> &[u8] {
        &self.rbuf[self.rpos..]
    }

    /// Reads more from the socket into `rbuf`; `Ok(0)` at end of stream.
    async fn fill(&mut self, stream: &mut Stream) -> Result<usize, Fail> {
        if self.rpos == self.rbuf.len() {
            self.rbuf.clear();
            self.rpos = 0;
        } else if self.rpos > 0 {
            self.rbuf.drain(..self.rpos);
            self.rpos = 0;
        }
        self.rbuf.reserve(READ_CHUNK);
        let n = stream.read_buf(&mut self.rbuf).await?;
        if let Some(d) = self.deadline
            && std::time::Instant::now() > d
        {
            return Err((
                "timeout",
                "reading the answer: it trickled past the exchange's deadline".to_owned(),
            ));
        }
        Ok(n)
    }

    async fn read_head(&mut self, stream: &mut Stream) -> Result<Head, Fail> {
        loop {
            let buf = self.pending();
            if let Some(head) = parse_head(buf).map_err(|e| ("io", e))? {
                return Ok(head);
            }
            if buf.len() > MAX_HEAD_BYTES {
                return Err(("io", format!("answer head is over {MAX_HEAD_BYTES} bytes")));
            }
            let had = buf.len();
            if self.fill(stream).await? == 0 {
                return Err((
                    "io",
                    if had == 0 {
                        "connection closed by the server".to_owned()
                    } else {
                        "connection closed in the middle of the answer head".to_owned()
                    },
                ));
            }
        }
    }

    /// Consumes exactly `n` body bytes.
    async fn skip_exact(&mut self, stream: &mut Stream, n: u64) -> Result<u64, Fail> {
        let mut left = n;
        loop {
            let take = (self.pending().len() as u64).min(left);
            self.rpos += take as usize;
            left -= take;
            if left == 0 {
                return Ok(n);
            }
            if self.fill(stream).await? == 0 {
                return Err((
                    "io",
                    format!("connection closed {left} bytes before the end of the answer"),
                ));
            }
        }
    }

    /// Consumes a chunked body and its trailers; returns the decoded length.
    async fn skip_chunked(&mut self, stream: &mut Stream, max: u64) -> Result<u64, Fail> {
        let mut total = 0u64;
        loop {
            let line = self.line(stream).await?;
            let size = parse_chunk_size(&line).map_err(|e| ("io", e))?;
            if size == 0 {
                // Trailers, up to the blank line, no more of them than a head may hold.
                let mut trailers = 0usize;
                loop {
                    let line = self.line(stream).await?;
                    if line.is_empty() {
                        return Ok(total);
                    }
                    trailers = trailers.saturating_add(line.len() + 2);
                    if trailers > MAX_HEAD_BYTES {
                        return Err((
                            "io",
                            format!("chunked answer's trailers are over {MAX_HEAD_BYTES} bytes"),
                        ));
                    }
                }
            }
            total = total.saturating_add(size);
            if total > max {
                return Err((
                    "io",
                    format!("chunked answer body is over the {max}-byte cap on an answer"),
                ));
            }
            self.skip_exact(stream, size).await?;
            if !self.line(stream).await?.is_empty() {
                return Err(("io", "chunk data not followed by CRLF".to_owned()));
            }
        }
    }

    /// Consumes everything up to the end of the stream.
    async fn skip_to_eof(&mut self, stream: &mut Stream, max: u64) -> Result<u64, Fail> {
        let mut total = 0u64;
        loop {
            total = total.saturating_add(self.pending().len() as u64);
            self.rpos = self.rbuf.len();
            if total > max {
                return Err((
                    "io",
                    format!("answer body is over the {max}-byte cap on an answer"),
                ));
            }
            if self.fill(stream).await? == 0 {
                return Ok(total);
            }
        }
    }

    /// The next line (without its CRLF or LF), consumed. Lines are short (chunk sizes,
    /// trailers), so a copy is fine.
    async fn line(&mut self, stream: &mut Stream) -> Result<Vec<u8>, Fail> {
        loop {
            let buf = self.pending();
            if let Some(i) = buf.iter().position(|&b| b == b'\n') {
                let line = buf[..i].strip_suffix(b"\r").unwrap_or(&buf[..i]).to_vec();
                self.rpos += i + 1;
                return Ok(line);
            }
            if buf.len() > MAX_HEAD_BYTES {
                return Err(("io", "chunk line too long".to_owned()));
            }
            if self.fill(stream).await? == 0 {
                return Err(("io", "connection closed inside a chunked answer".to_owned()));
            }
        }
    }
}

/// Headers read from one answer head; the signed protocol's answers carry a handful.
const MAX_HEADERS: usize = 64;

/// Parses the answer head at the start of `buf` with `httparse` (status line, headers; lines
/// end in CRLF or a bare LF, which recipients may accept, RFC 9112 §2.2) and reads the headers
/// that decide where the body ends. `Ok(None)`: the head is not complete yet.
fn parse_head(buf: &[u8]) -> Result<Option<Head>, String> {
    // Uninitialised header slots: filling 64 empty headers per answer showed in the lean
    // path's profile.
    let mut headers =
        [const { std::mem::MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut []);
    let len = match httparse::ParserConfig::default().parse_response_with_uninit_headers(
        &mut resp,
        buf,
        &mut headers,
    ) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => {
            let line = buf.split(|&b| b == b'\n').next().unwrap_or_default();
            return Err(format!(
                "bad HTTP/1.x status line or header ({e}), answer starts {}",
                contract::quote::quote(&String::from_utf8_lossy(&line[..line.len().min(80)]))
            ));
        }
    };
    let status = resp.code.unwrap_or(0);
    if !(100..=999).contains(&status) {
        return Err(format!("not an HTTP/1.x status line: status {status}"));
    }
    let http10 = resp.version == Some(0);
    let (mut length, mut chunked, mut other_coding) = (None, false, false);
    let (mut says_close, mut says_keep_alive) = (false, false);
    // Bytes, not str: a header value may carry obs-text (RFC 9110 §5.5), which is not UTF-8
    // but must not fail the answer.
    for h in resp.headers.iter() {
        let (name, value) = (h.name, h.value.trim_ascii());
        if name.eq_ignore_ascii_case("content-length") {
            let n: u64 = std::str::from_utf8(value)
                .ok()
                .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| {
                    format!(
                        "bad content-length {}",
                        contract::quote::quote(&String::from_utf8_lossy(value))
                    )
                })?;
            if length.is_some_and(|l| l != n) {
                return Err("conflicting content-length headers".to_owned());
            }
            length = Some(n);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            // Chunked must be the final coding (RFC 9112 §6.1); anything else runs to close.
            chunked = value
                .rsplit(|&b| b == b',')
                .next()
                .is_some_and(|c| c.trim_ascii().eq_ignore_ascii_case(b"chunked"));
            other_coding = !chunked;
        } else if name.eq_ignore_ascii_case("connection") {
            for token in value.split(|&b| b == b',').map(<[u8]>::trim_ascii) {
                says_close |= token.eq_ignore_ascii_case(b"close");
                says_keep_alive |= token.eq_ignore_ascii_case(b"keep-alive");
            }
        }
    }
    // HTTP/1.0 closes after each answer unless it says keep-alive (RFC 9112 §9.3).
    let close = says_close || other_coding || (http10 && !says_keep_alive);
    // Transfer-Encoding overrides Content-Length (RFC 9112 §6.3 rule 3).
    let body = match (chunked, length) {
        (true, _) => BodyLen::Chunked,
        (false, Some(n)) => BodyLen::Known(n),
        (false, None) => BodyLen::UntilClose,
    };
    Ok(Some(Head {
        status,
        len,
        body,
        close,
    }))
}

/// A chunk-size line: hex digits, optionally followed by `;extensions`.
fn parse_chunk_size(line: &[u8]) -> Result<u64, String> {
    let hex = line.split(|&b| b == b';').next().unwrap_or_default();
    let hex = std::str::from_utf8(hex).unwrap_or("").trim();
    // At most 15 hex digits (under 2^60, so sums of sizes cannot overflow), and only hex
    // digits: `from_str_radix` would also take a leading `+`.
    if hex.is_empty() || hex.len() > 15 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!(
            "bad chunk size line {}",
            contract::quote::quote(&String::from_utf8_lossy(&line[..line.len().min(40)]))
        ));
    }
    u64::from_str_radix(hex, 16).map_err(|_| format!("bad chunk size {hex:?}"))
}

/// Appends the decimal form of `v` without going through `fmt` (`itoa`).
pub(crate) fn push_decimal(out: &mut Vec<u8>, v: i64) {
    out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;
    use tokio::net::TcpListener;

    /// Test helper: a complete head parses.
    fn parse_head(head: &[u8]) -> Result<Head, String> {
        super::parse_head(head).map(|h| h.expect("a complete head"))
    }

    /// The end of the head: the index just past the blank line that ends it, searching from
    /// `from` (the scripted server's framing).
    fn find_head_end(buf: &[u8], from: usize) -> Option<usize> {
        let mut i = from;
        while let Some(off) = buf.get(i..)?.iter().position(|&b| b == b'\n') {
            let nl = i + off;
            match buf.get(nl + 1..) {
                Some([b'\n', ..]) => return Some(nl + 2),
                Some([b'\r', b'\n', ..]) => return Some(nl + 3),
                _ => i = nl + 1,
            }
        }
        None
    }

    #[test]
    fn heads_parse() {
        let h = parse_head(b"HTTP/1.1 200 OK\r\ncontent-length: 13\r\ndate: x\r\n\r\n").unwrap();
        assert_eq!(h.status, 200);
        assert_eq!(h.body, BodyLen::Known(13));
        assert!(!h.close);
        let h = parse_head(
            b"HTTP/1.1 201 Created\r\nTransfer-Encoding: gzip, chunked\r\nContent-Length: 5\r\n\r\n",
        )
        .unwrap();
        assert_eq!(h.body, BodyLen::Chunked);
        let h = parse_head(b"HTTP/1.1 503 x\r\nConnection: Close\r\n\r\n").unwrap();
        assert_eq!(
            (h.status, h.body, h.close),
            (503, BodyLen::UntilClose, true)
        );
        let h = parse_head(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n").unwrap();
        assert!(h.close, "HTTP/1.0 closes unless keep-alive");
        let h =
            parse_head(b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n")
                .unwrap();
        assert!(!h.close);
        assert_eq!(
            super::parse_head(b"HTTP/1.1 200 OK\r\ncontent-le"),
            Ok(None)
        );
        assert_eq!(super::parse_head(b""), Ok(None));
        let h = parse_head(b"HTTP/1.1 200 OK\r\n\r\nBODY").unwrap();
        assert_eq!(h.len, 19, "the head ends before the body");
        let h = parse_head(b"HTTP/1.1 204\r\n\r\n").unwrap();
        assert_eq!(h.status, 204);
        // obs-text in a value, bare LF line ends: still an answer.
        let h = parse_head(b"HTTP/1.1 200 OK\nx-note: caf\xe9\ncontent-length: 2\n\n").unwrap();
        assert_eq!((h.status, h.body), (200, BodyLen::Known(2)));
        for bad in [
            b"HTTP/1.1 200 OK\r\nbad name: 1\r\n\r\n",
            &b"HTTP/2 200 OK\r\n\r\n"[..],
            b"HTTP/1.1 2000 OK\r\n\r\n",
            b"HTTP/1.1 abc\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n",
            b"HTTP/1.1 200 OK\r\ncontent-length: -1\r\n\r\n",
            b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\n",
            b"HTTP/1.1 200 OK\r\ncontent-length: +1\r\n\r\n",
            b"HTTP/1.1 099 OK\r\n\r\n",
            b"SSH-2.0-OpenSSH\r\n\r\n",
        ] {
            assert!(
                super::parse_head(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn head_end_is_found_wherever_it_falls() {
        let head = b"HTTP/1.1 200 OK\r\na: b\r\n\r\nBODY";
        // The blank line ends at byte 25; any scan start up to its first byte finds it.
        for from in 0..=21 {
            assert_eq!(find_head_end(head, from), Some(25), "{from}");
        }
        assert_eq!(find_head_end(b"HTTP/1.1 200 OK\r\n\r", 0), None);
        assert_eq!(find_head_end(b"\r\n\r\n", 0), Some(4));
        assert_eq!(find_head_end(b"x\n\r\n\r\n", 0), Some(4));
        assert_eq!(find_head_end(b"HTTP/1.1 200 OK\na: b\n\nBODY", 0), Some(22));
        assert_eq!(find_head_end(b"HTTP/1.1 200 OK\r\n\r\n", 16), Some(19));
    }

    #[test]
    fn chunk_sizes_and_decimals() {
        assert_eq!(parse_chunk_size(b"1a"), Ok(26));
        assert_eq!(parse_chunk_size(b"0;ext=1"), Ok(0));
        assert!(parse_chunk_size(b"").is_err());
        assert!(parse_chunk_size(b"zz").is_err());
        assert!(parse_chunk_size(b"+5").is_err());
        assert!(parse_chunk_size(b"1000000000000000").is_err(), "16 digits");
        for v in [0i64, 7, 10, 1_700_000_000, -42, i64::MIN, i64::MAX] {
            let mut out = Vec::new();
            push_decimal(&mut out, v);
            assert_eq!(out, v.to_string().as_bytes());
        }
    }

    /// A scripted server: answers each request (read up to its blank line) with the next
    /// canned answer, split into small writes to exercise partial reads, and closes the
    /// connection after it when its flag says so (an empty answer: close without one).
    async fn scripted(answers: Vec<(&'static [u8], bool)>) -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            let mut answers = answers.into_iter();
            'conn: loop {
                let Ok((mut s, _)) = l.accept().await else {
                    return;
                };
                let mut got = Vec::new();
                loop {
                    let mut b = [0u8; 1024];
                    let n = s.read(&mut b).await.unwrap_or(0);
                    if n == 0 {
                        continue 'conn;
                    }
                    got.extend_from_slice(&b[..n]);
                    while let Some(end) = find_head_end(&got, 0) {
                        got.drain(..end);
                        let Some((a, close)) = answers.next() else {
                            return;
                        };
                        for piece in a.chunks(7) {
                            s.write_all(piece).await.unwrap();
                            s.flush().await.unwrap();
                            tokio::task::yield_now().await;
                        }
                        if close || a.is_empty() {
                            continue 'conn;
                        }
                    }
                }
            }
        });
        addr
    }

    fn get(c: &mut H1Conn) {
        c.request_buf()
            .extend_from_slice(b"GET /livez HTTP/1.1\r\nhost: x\r\n\r\n");
    }

    #[tokio::test]
    async fn keep_alive_chunked_interim_and_close() {
        let addr = scripted(vec![
            (
                &b"HTTP/1.1 200 OK\r\ncontent-length: 13\r\n\r\n{\"live\":true}"[..],
                false,
            ),
            (
                b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\ntransfer-encoding: chunked\r\n\r\n5;x\r\nhello\r\n3\r\nabc\r\n0\r\nt: 1\r\n\r\n",
                false,
            ),
            (
                b"HTTP/1.1 404 Not Found\r\ncontent-length: 2\r\nconnection: close\r\n\r\nno",
                true,
            ),
            (b"HTTP/1.1 200 OK\r\n\r\nuntil close", true),
            (b"HTTP/1.1 204 No Content\r\n\r\n", false),
            (b"", true),
        ])
        .await;
        let mut c = H1Conn::new(addr);
        let want = [(200, 13), (201, 8), (404, 2), (200, 11), (204, 0)];
        for (status, body_bytes) in want {
            get(&mut c);
            assert_eq!(
                c.roundtrip(false, 1 << 20).await,
                Ok(Reply { status, body_bytes })
            );
        }
        // The server closes without answering: an error, and the next request reconnects
        // (and finds the scripted server out of answers, so it closes again).
        get(&mut c);
        let e = c.roundtrip(false, 1 << 20).await.unwrap_err();
        assert_eq!(e.0, "io");
        assert!(e.1.contains("closed"), "{e:?}");
    }

    #[tokio::test]
    async fn bounds_and_bad_answers_are_errors() {
        let addr = scripted(vec![
            (
                &b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n"[..],
                false,
            ),
            (b"NOT HTTP\r\n\r\n", false),
            (b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nshort", true),
        ])
        .await;
        let mut c = H1Conn::new(addr);
        get(&mut c);
        let e = c.roundtrip(false, 50).await.unwrap_err();
        assert!(e.1.contains("over the 50-byte cap"), "{e:?}");
        get(&mut c);
        let e = c.roundtrip(false, 1 << 20).await.unwrap_err();
        assert!(e.1.contains("status line"), "{e:?}");
        get(&mut c);
        let e = c.roundtrip(false, 1 << 20).await.unwrap_err();
        assert!(e.1.contains("before the end"), "{e:?}");
        let dead = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap()
        };
        let mut c = H1Conn::new(dead);
        get(&mut c);
        assert_eq!(c.roundtrip(false, 1).await.unwrap_err().0, "connect");
    }
}
