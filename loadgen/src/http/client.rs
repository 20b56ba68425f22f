//! One plain HTTP request, the client every protocol without request signing shares: the
//! vault path encoded into an href under the target's root, basic auth added, sent over a
//! pooled hyper client (device operations, which need the answer's body) or over a worker's
//! own lean HTTP/1.1 connection (closed-loop route load, which counts and drops it), timed,
//! and counted per route in a [`Recorder`] with the same histograms the signed client fills.
//! One deadline per exchange is shared by its retries, and answers are capped before they
//! are read; a protocol whose answers are long listings streams them through a
//! [`BodyReader`] instead of collecting them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Method;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

use super::auth::BasicAuth;
use super::error::{HttpError, fmt_bytes};
use crate::answer::{chain, declared_length};
use crate::h1::{self, H1Conn};
pub use crate::stats::Recorder;
use crate::stats::Sample;
use crate::target::Target;

/// Bound on one exchange, connect to last byte, every retry included: the signed client's
/// figure.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest answer body read. The hazards profile's biggest attachment is 4.5 MiB and a
/// listing of a 100,000-note vault in one answer is about 60 MB (an allprop
/// listing). A streamed answer ([`BodyReader`]) is never held whole, so this caps the time a
/// listing can take rather than its memory; a collected body (a GET) is held, and a caller
/// that knows a file's size lowers the cap to it ([`Request::max_body`]).
pub const MAX_ANSWER_BYTES: u64 = 256 * 1024 * 1024;

/// Everything but RFC 3986's unreserved characters is percent-encoded in a path segment.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// An answer read in full.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub body: Bytes,
    /// The answer's headers the request asked to keep ([`Request::keep_headers`]), in the
    /// order asked, each the first of its name.
    pub headers: Vec<(&'static str, String)>,
}

impl Answer {
    /// The kept header `name` (as asked, lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A plain HTTP client for one server: cheap to clone (shared pool).
#[derive(Clone)]
pub struct HttpClient {
    inner: Arc<Inner>,
}

struct Inner {
    target: Target,
    /// `Basic ...`, when the server wants credentials.
    auth: Option<String>,
    /// The collection the vault lives under, without its trailing `/` (`""` for `/`,
    /// `/v` for `/v/`), put in front of every href on the wire.
    prefix: String,
    client: Client<HttpConnector, Full<Bytes>>,
}

impl std::fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpClient")
            .field("target", &self.inner.target.base())
            .field("auth", &self.inner.auth.is_some())
            .finish()
    }
}

/// One request, described before it is sent.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    pub route: &'a str,
    pub method: Method,
    /// Encoded path (see [`HttpClient::href`]).
    pub href: &'a str,
    pub headers: Vec<(&'static str, String)>,
    pub body: Bytes,
    pub timeout: Duration,
    /// Open loop: the intended send time (coordinated-omission correction).
    pub intended: Option<Instant>,
    /// Largest answer body accepted ([`MAX_ANSWER_BYTES`] unless the caller knows better);
    /// a declared `Content-Length` above it is refused before the body is read.
    pub max_body: u64,
    /// The cap's name in messages (`MAX_ANSWER_BYTES`).
    pub cap_name: &'static str,
    /// Answer headers to keep (lower-case names; an ETag, a HEAD's length).
    pub keep_headers: &'static [&'static str],
    /// Statuses [`HttpClient::call`] retries (503 unless the protocol's own client retries
    /// more, as the AWS SDKs retry every 5xx).
    pub retry_on: &'static [u16],
}

impl<'a> Request<'a> {
    pub fn new(route: &'a str, method: Method, href: &'a str) -> Request<'a> {
        Request {
            route,
            method,
            href,
            headers: Vec::new(),
            body: Bytes::new(),
            timeout: REQUEST_TIMEOUT,
            intended: None,
            max_body: MAX_ANSWER_BYTES,
            cap_name: "MAX_ANSWER_BYTES",
            keep_headers: &[],
            retry_on: &[503],
        }
    }
}

/// An HTTP method from its name (extension methods included: `MKCOL`, `MOVE`).
pub fn method(name: &'static str) -> Method {
    Method::from_bytes(name.as_bytes()).expect("method names are valid tokens")
}

impl HttpClient {
    /// A client for `target` (the server's root is the vault's root).
    pub fn new(target: Target, auth: Option<&BasicAuth>) -> HttpClient {
        HttpClient::with_root(target, auth, "/")
    }

    /// A client for `target` whose vault lives under the collection `root` (`/v/`; `/` is
    /// the server's root). `root` is a plain path, already checked
    /// ([`crate::launch::normalize_root`]); its segments are percent-encoded here.
    pub fn with_root(target: Target, auth: Option<&BasicAuth>, root: &str) -> HttpClient {
        let prefix = HttpClient::href(root, false)
            .trim_end_matches('/')
            .to_owned();
        let mut conn = HttpConnector::new();
        conn.set_nodelay(true);
        conn.set_connect_timeout(Some(Duration::from_secs(5)));
        let client = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(1024)
            .pool_idle_timeout(Duration::from_secs(30))
            .build(conn);
        HttpClient {
            inner: Arc::new(Inner {
                target,
                auth: auth.map(BasicAuth::header_value),
                prefix,
                client,
            }),
        }
    }

    pub fn target(&self) -> &Target {
        &self.inner.target
    }

    /// The encoded href of vault path `rel` ("" is the root); collections end in `/`.
    pub fn href(rel: &str, collection: bool) -> String {
        let mut out = String::with_capacity(rel.len() + 8);
        for seg in rel.split('/').filter(|s| !s.is_empty()) {
            out.push('/');
            out.extend(utf8_percent_encode(seg, SEGMENT));
        }
        if collection || out.is_empty() {
            out.push('/');
        }
        out
    }

    /// The root's encoded path without its trailing `/` (`""` for `/`), put in front of
    /// every href on the wire.
    pub fn prefix(&self) -> &str {
        &self.inner.prefix
    }

    /// `href` (vault-relative, from [`HttpClient::href`]) as sent: under the root.
    pub fn on_wire(&self, href: &str) -> String {
        format!("{}{href}", self.inner.prefix)
    }

    /// The absolute URL of `href` (vault-relative) on this client's server, under its root
    /// (a MOVE's `Destination`).
    pub fn url(&self, href: &str) -> String {
        self.inner.target.url(&self.on_wire(href))
    }

    /// The vault path of a decoded href path (`/Wiki/x.md` → `Wiki/x.md`), trailing `/`
    /// dropped; `None` for the root.
    pub fn rel_of(path: &str) -> Option<&str> {
        let p = path.trim_start_matches('/').trim_end_matches('/');
        (!p.is_empty()).then_some(p)
    }

    /// Sends `req` over the pooled client, times it, counts it in `rec` under `req.route`.
    /// A non-2xx status is an `Ok` answer; only transport failures (and an answer over
    /// `req.max_body`) are errors (counted too). One attempt, bounded by `req.timeout`.
    pub async fn send(&self, rec: &Recorder, req: &Request<'_>) -> Result<Answer, HttpError> {
        let deadline = Instant::now() + req.timeout;
        let mut sink = Sink::collect();
        self.attempt(rec, req, deadline, &mut sink, "").await
    }

    /// One attempt of `req`, ending by `deadline` whatever the server does (a trickled head
    /// or body included); `note` says in a timeout's message how the deadline was shared.
    async fn attempt(
        &self,
        rec: &Recorder,
        req: &Request<'_>,
        deadline: Instant,
        sink: &mut Sink<'_>,
        note: &str,
    ) -> Result<Answer, HttpError> {
        let mut b = hyper::Request::builder()
            .method(req.method.clone())
            .uri(self.inner.target.url(&self.on_wire(req.href)));
        if let Some(a) = &self.inner.auth {
            b = b.header(hyper::header::AUTHORIZATION, a);
        }
        for (k, v) in &req.headers {
            b = b.header(*k, v);
        }
        // hyper sends an empty PUT with no Content-Length at all, which some servers answer
        // with 500 (nginx: "PUT request body must be in a file"); say 0, as browsers do.
        if req.body.is_empty() && req.method == Method::PUT {
            b = b.header(hyper::header::CONTENT_LENGTH, "0");
        }
        let bytes_sent = req.body.len() as u64;
        let request = b
            .body(Full::new(req.body.clone()))
            .map_err(|e| HttpError::Invalid {
                what: format!("{} {}", req.route, contract::quote::text(req.href)),
                reason: e.to_string(),
            })?;
        let sent = Instant::now();
        let cap = req.max_body;
        let outcome = tokio::time::timeout_at(deadline.into(), async {
            let resp = self
                .inner
                .client
                .request(request)
                .await
                .map_err(|e| Fail::Transport(if e.is_connect() { "connect" } else { "io" }, chain(&e)))?;
            let status = resp.status().as_u16();
            let kept: Vec<(&'static str, String)> = req
                .keep_headers
                .iter()
                .filter_map(|k| {
                    let v = resp.headers().get(*k)?.to_str().ok()?;
                    Some((*k, v.chars().take(1024).collect()))
                })
                .collect();
            // A HEAD's Content-Length is the resource's size; its answer has no body.
            if req.method != Method::HEAD
                && let Some(n) = declared_length(resp.headers())
                && n > cap
            {
                return Err(Fail::TooLarge(format!(
                    "the answer declares Content-Length {n}, over the {} cap ({}); refused before reading its body",
                    fmt_bytes(cap),
                    req.cap_name
                )));
            }
            let body = resp.into_body();
            match sink.reader.as_mut() {
                Some(reader) if reader.reads(status) => {
                    let n = reader.read(body, cap).await.map_err(|e| match e {
                        StreamError::Read(d) => Fail::Transport("io", d),
                        StreamError::TooLarge(d) => Fail::TooLarge(d),
                        StreamError::Answer(e) => Fail::Answer(HttpError::Refused(e)),
                    })?;
                    Ok((status, Bytes::new(), n, kept))
                }
                _ => {
                    // An error answer is read for its message only: its first 64 KiB.
                    let keep = if (200..300).contains(&status) { None } else { Some(64 * 1024) };
                    let body = collect(body, cap, req.cap_name, keep).await?;
                    let n = body.len() as u64;
                    Ok((status, body, n, kept))
                }
            }
        })
        .await;
        let done = Instant::now();
        let sample = |received: u64| Sample {
            sent,
            intended: req.intended,
            done,
            bytes_sent,
            bytes_received: received,
            sign: None,
        };
        match outcome {
            Ok(Ok((status, body, n, headers))) => {
                rec.record(req.route, &status.to_string(), sample(n));
                Ok(Answer {
                    status,
                    body,
                    headers,
                })
            }
            Ok(Err(Fail::Transport(kind, detail))) => {
                rec.record(req.route, kind, sample(0));
                Err(self.transport(req, kind, detail))
            }
            Ok(Err(Fail::TooLarge(detail))) => {
                rec.record(req.route, "too-large", sample(0));
                Err(HttpError::TooLarge {
                    route: req.route.to_owned(),
                    path: req.href.to_owned(),
                    detail,
                })
            }
            Ok(Err(Fail::Answer(e))) => {
                rec.record(req.route, "bad-answer", sample(0));
                Err(e)
            }
            Err(_) => {
                rec.record(req.route, "timeout", sample(0));
                let budget = deadline.saturating_duration_since(sent);
                Err(self.transport(
                    req,
                    "timeout",
                    format!(
                        "no complete answer within the {} deadline{note} ({} left for this attempt)",
                        contract::quote::duration(req.timeout),
                        contract::quote::duration(budget)
                    ),
                ))
            }
        }
    }

    fn transport(&self, req: &Request<'_>, kind: &'static str, detail: String) -> HttpError {
        HttpError::Transport {
            route: req.route.to_owned(),
            path: req.href.to_owned(),
            kind,
            detail,
        }
    }

    /// [`HttpClient::send`] with retries (transport error or a status of `req.retry_on`, 503
    /// unless set, [`ATTEMPTS`] attempts,
    /// 50/100 ms back-off) that share ONE deadline, `req.timeout` from the first attempt:
    /// a server that answers slowly cannot stretch an exchange to three times its bound.
    /// Then a check that the status is one of `ok`. An answer over the cap, a malformed one
    /// and a timeout are not retried.
    pub async fn call(
        &self,
        rec: &Recorder,
        req: &Request<'_>,
        ok: &[u16],
    ) -> Result<Answer, HttpError> {
        self.call_into(rec, req, ok, &mut Sink::collect()).await
    }

    /// [`HttpClient::call`] with the answer read by `reader` where it reads its status (a
    /// listing parsed as it arrives); the returned answer's body is then empty.
    pub async fn call_streamed(
        &self,
        rec: &Recorder,
        req: &Request<'_>,
        ok: &[u16],
        reader: &mut dyn BodyReader,
    ) -> Result<Answer, HttpError> {
        let mut sink = Sink {
            reader: Some(reader),
        };
        self.call_into(rec, req, ok, &mut sink).await
    }

    async fn call_into(
        &self,
        rec: &Recorder,
        req: &Request<'_>,
        ok: &[u16],
        sink: &mut Sink<'_>,
    ) -> Result<Answer, HttpError> {
        let deadline = Instant::now() + req.timeout;
        let note = format!(" shared by up to {ATTEMPTS} attempts");
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            let res = self.attempt(rec, req, deadline, sink, &note).await;
            let retry = match &res {
                Err(HttpError::Transport { kind, .. }) => *kind != "timeout",
                Ok(a) => req.retry_on.contains(&a.status),
                Err(_) => false,
            };
            // Entries already handed on cannot be taken back: such an answer is not retried.
            let backoff = Duration::from_millis(50 << (attempt - 1).min(4));
            if retry
                && attempt < ATTEMPTS
                && sink.delivered() == 0
                && Instant::now() + backoff < deadline
            {
                tokio::time::sleep(backoff).await;
                continue;
            }
            let a = res?;
            if ok.contains(&a.status) {
                return Ok(a);
            }
            return Err(HttpError::Status {
                route: req.route.to_owned(),
                path: req.href.to_owned(),
                status: a.status,
                detail: first_line_of(&a.body),
            });
        }
    }

    /// Writes `req` as HTTP/1.1 bytes into `buf` (the lean path: no header map, no body
    /// channel; the same shape hyper would send).
    pub(crate) fn write_request(&self, req: &Request<'_>, buf: &mut Vec<u8>) {
        buf.extend_from_slice(req.method.as_str().as_bytes());
        buf.push(b' ');
        buf.extend_from_slice(self.inner.prefix.as_bytes());
        buf.extend_from_slice(req.href.as_bytes());
        buf.extend_from_slice(b" HTTP/1.1\r\nhost: ");
        buf.extend_from_slice(self.inner.target.authority().as_bytes());
        if let Some(a) = &self.inner.auth {
            buf.extend_from_slice(b"\r\nauthorization: ");
            buf.extend_from_slice(a.as_bytes());
        }
        for (k, v) in &req.headers {
            buf.extend_from_slice(b"\r\n");
            buf.extend_from_slice(k.as_bytes());
            buf.extend_from_slice(b": ");
            buf.extend_from_slice(v.as_bytes());
        }
        if !req.body.is_empty() || req.method == Method::PUT {
            buf.extend_from_slice(b"\r\ncontent-length: ");
            h1::push_decimal(buf, req.body.len() as i64);
        }
        buf.extend_from_slice(b"\r\n\r\n");
        buf.extend_from_slice(&req.body);
    }

    /// [`HttpClient::send`] over a worker's own connection: the answer's body is counted and
    /// dropped. Returns the status; transport failures are counted and returned.
    pub(crate) async fn send_lean(
        &self,
        rec: &Recorder,
        conn: &mut H1Conn,
        req: &Request<'_>,
    ) -> Result<u16, HttpError> {
        self.write_request(req, conn.request_buf());
        let sent = Instant::now();
        // One deadline over the whole round trip (connect, head, body), however slowly the
        // server trickles; the connection drops an exchange cut off half-way.
        let deadline = sent + req.timeout;
        let outcome = tokio::time::timeout_at(
            deadline.into(),
            conn.roundtrip(req.method == Method::HEAD, req.max_body),
        )
        .await;
        let done = Instant::now();
        let sample = |received: u64| Sample {
            sent,
            intended: req.intended,
            done,
            bytes_sent: req.body.len() as u64,
            bytes_received: received,
            sign: None,
        };
        match outcome {
            Ok(Ok(reply)) => {
                rec.record(
                    req.route,
                    &reply.status.to_string(),
                    sample(reply.body_bytes),
                );
                Ok(reply.status)
            }
            Ok(Err((kind, detail))) => {
                rec.record(req.route, kind, sample(0));
                Err(self.transport(req, kind, detail))
            }
            Err(_) => {
                rec.record(req.route, "timeout", sample(0));
                Err(self.transport(
                    req,
                    "timeout",
                    format!(
                        "no complete answer within the {} deadline",
                        contract::quote::duration(req.timeout)
                    ),
                ))
            }
        }
    }
}

/// Attempts of an operation that must succeed ([`HttpClient::call`]).
pub const ATTEMPTS: u32 = 3;

/// Why a streamed answer stopped.
#[derive(Debug)]
pub enum StreamError {
    /// The body could not be read (the connection failed mid-answer): a transport failure.
    Read(String),
    /// The body passed the size cap (the detail names it).
    TooLarge(String),
    /// The answer was malformed, or the caller refused what it said: the protocol's own error.
    Answer(Box<dyn std::error::Error + Send + Sync>),
}

/// A streamed answer's parser: a protocol whose answers are long listings reads them as they
/// arrive (one entry at a time), never holding one whole.
pub trait BodyReader: Send {
    /// Whether an answer with `status` is read by this reader (others are collected).
    fn reads(&self, status: u16) -> bool;
    /// Reads `body`, at most `cap` bytes of it; returns the bytes read.
    fn read<'a>(
        &'a mut self,
        body: hyper::body::Incoming,
        cap: u64,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<u64, StreamError>> + Send + 'a>>;
    /// Entries handed on so far, over every attempt: an answer that delivered some cannot
    /// be retried (they cannot be taken back).
    fn delivered(&self) -> u64;
}

/// Where an attempt puts the answer's body: collected, or read by a [`BodyReader`].
struct Sink<'v> {
    reader: Option<&'v mut dyn BodyReader>,
}

impl Sink<'_> {
    fn collect() -> Sink<'static> {
        Sink { reader: None }
    }

    fn delivered(&self) -> u64 {
        self.reader.as_ref().map_or(0, |r| r.delivered())
    }
}

/// Why one attempt failed.
enum Fail {
    Transport(&'static str, String),
    TooLarge(String),
    Answer(HttpError),
}

/// Reads a body whole, refusing it as soon as it passes `cap`; with `keep`, only its first
/// `keep` bytes (the rest is not read: the connection is dropped).
async fn collect(
    mut body: hyper::body::Incoming,
    cap: u64,
    cap_name: &str,
    keep: Option<usize>,
) -> Result<Bytes, Fail> {
    let mut first: Option<Bytes> = None;
    let mut buf: Vec<u8> = Vec::new();
    let mut seen = 0u64;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| Fail::Transport("io", format!("reading the answer: {e}")))?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        seen = seen.saturating_add(data.len() as u64);
        if let Some(k) = keep
            && seen > k as u64
        {
            let mut all = first.take().map(Vec::from).unwrap_or(buf);
            all.extend_from_slice(&data);
            all.truncate(k);
            return Ok(Bytes::from(all));
        }
        if seen > cap {
            return Err(Fail::TooLarge(format!(
                "the answer's body passed the {} cap ({cap_name})",
                fmt_bytes(cap)
            )));
        }
        // One frame (the common case for small answers) is kept without a copy.
        match first.take() {
            None if buf.is_empty() => first = Some(data),
            Some(f) => {
                buf.extend_from_slice(&f);
                buf.extend_from_slice(&data);
            }
            None => buf.extend_from_slice(&data),
        }
    }
    Ok(first.unwrap_or_else(|| Bytes::from(buf)))
}

/// The first non-empty line of an error body with its markup stripped, for messages
/// ("Conflict", "PROPFIND requests with a Depth of infinity are not allowed for /."),
/// escaped and clipped ([`contract::quote::text`]): a server's escape sequences never reach
/// the terminal.
pub(crate) fn first_line_of(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(4096)]);
    let mut plain = String::new();
    let mut in_tag = false;
    for c in text.chars() {
        match c {
            '<' => {
                in_tag = true;
                plain.push('\n');
            }
            '>' => in_tag = false,
            c if !in_tag => plain.push(c),
            _ => {}
        }
    }
    // The most specific line: HTML error pages put the explanation in a paragraph after the
    // title, so take the longest of the short lines.
    plain
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("!DOCTYPE") && l.len() < 300)
        .max_by_key(|l| l.len())
        .map_or_else(|| "(empty body)".to_owned(), contract::quote::text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies_shrink_to_their_explanation() {
        let apache = b"<!DOCTYPE HTML PUBLIC \"-//W3C//DTD HTML 4.01//EN\">\n<html><head>\n<title>403 Forbidden</title>\n</head><body>\n<h1>Forbidden</h1>\n<p>PROPFIND requests with a Depth of \"infinity\" are not allowed for /.</p>\n</body></html>\n";
        assert_eq!(
            first_line_of(apache),
            "PROPFIND requests with a Depth of \"infinity\" are not allowed for /."
        );
        assert_eq!(first_line_of(b"Created"), "Created");
        assert_eq!(first_line_of(b""), "(empty body)");
    }

    #[test]
    fn lean_requests_carry_auth_depth_and_length() {
        let target = Target::parse("http://127.0.0.1:9", false).unwrap();
        let c = HttpClient::new(target, Some(&BasicAuth::new("u", "p")));
        let mut req = Request::new("put-file", Method::PUT, "/a%20b.md");
        req.body = Bytes::from_static(b"hello");
        let mut buf = Vec::new();
        c.write_request(&req, &mut buf);
        assert_eq!(
            String::from_utf8(buf).unwrap(),
            "PUT /a%20b.md HTTP/1.1\r\nhost: 127.0.0.1:9\r\nauthorization: Basic dTpw\r\ncontent-length: 5\r\n\r\nhello"
        );
        let mut req = Request::new("propfind-depth1", method("PROPFIND"), "/");
        req.headers.push(("depth", "1".into()));
        let mut buf = Vec::new();
        HttpClient::new(Target::parse("http://127.0.0.1:9", false).unwrap(), None)
            .write_request(&req, &mut buf);
        assert_eq!(
            String::from_utf8(buf).unwrap(),
            "PROPFIND / HTTP/1.1\r\nhost: 127.0.0.1:9\r\ndepth: 1\r\n\r\n"
        );
    }
}
