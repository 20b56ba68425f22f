//! One WebDAV request: the vault path encoded into an href, basic auth added, sent over a
//! pooled hyper client (device operations, which need the answer's body) or over a worker's
//! own lean HTTP/1.1 connection (closed-loop route load, which counts and drops it), timed,
//! and counted per route in a [`Recorder`] with the same histograms the signed client fills.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

use super::bounds::WalkBounds;
use super::error::{DavError, fmt_bytes};
use super::multistatus::{self, DavEntry, StreamError, read_multistatus};
use super::presets::BasicAuth;
use crate::answer::{chain, declared_length};
use crate::h1::{self, H1Conn};
pub use crate::stats::Recorder;
use crate::stats::Sample;
use crate::target::Target;

/// Bound on one exchange, connect to last byte, every retry included: the signed client's
/// figure.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest answer body read. The hazards profile's biggest attachment is 4.5 MiB and a Depth
/// infinity listing of a 100,000-note vault is about 60 MB with Apache's allprop answer. A
/// multistatus is parsed as it arrives and never held whole, so this caps the time a
/// listing can take rather than its memory; a collected body (a GET) is held, and a pull
/// lowers the cap to the size the listing gave ([`DavClient::get_sized`]).
pub const MAX_ANSWER_BYTES: u64 = 256 * 1024 * 1024;

/// Everything but RFC 3986's unreserved characters is percent-encoded in a path segment.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// PROPFIND's `Depth` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Depth {
    /// `Depth: 1`: the collection and its members.
    One,
    /// `Depth: infinity`: the whole subtree (Apache and nginx refuse it by default).
    Infinity,
}

impl Depth {
    pub fn header(self) -> &'static str {
        match self {
            Depth::One => "1",
            Depth::Infinity => "infinity",
        }
    }

    /// The route the request is counted under.
    pub fn route(self) -> &'static str {
        match self {
            Depth::One => "propfind-depth1",
            Depth::Infinity => "propfind-infinity",
        }
    }
}

/// An answer read in full.
#[derive(Debug, Clone)]
pub struct DavAnswer {
    pub status: u16,
    pub body: Bytes,
}

/// A WebDAV client for one server: cheap to clone (shared pool).
#[derive(Clone)]
pub struct DavClient {
    inner: Arc<Inner>,
    walk: WalkBounds,
}

struct Inner {
    target: Target,
    /// `Basic ...`, when the server wants credentials.
    auth: Option<String>,
    /// The collection the vault lives under, without its trailing `/` (`""` for `/`,
    /// `/dav` for `/dav/`), put in front of every href on the wire.
    prefix: String,
    client: Client<HttpConnector, Full<Bytes>>,
}

impl std::fmt::Debug for DavClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DavClient")
            .field("target", &self.inner.target.base())
            .field("auth", &self.inner.auth.is_some())
            .finish()
    }
}

/// One request, described before it is sent.
#[derive(Debug, Clone)]
pub struct DavRequest<'a> {
    pub route: &'a str,
    pub method: Method,
    /// Encoded path (see [`DavClient::href`]).
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
}

impl<'a> DavRequest<'a> {
    pub fn new(route: &'a str, method: Method, href: &'a str) -> DavRequest<'a> {
        DavRequest {
            route,
            method,
            href,
            headers: Vec::new(),
            body: Bytes::new(),
            timeout: REQUEST_TIMEOUT,
            intended: None,
            max_body: MAX_ANSWER_BYTES,
            cap_name: "MAX_ANSWER_BYTES",
        }
    }
}

/// A WebDAV method (`PROPFIND`, `MKCOL`, `MOVE`) from its name.
pub fn method(name: &'static str) -> Method {
    Method::from_bytes(name.as_bytes()).expect("WebDAV method names are valid tokens")
}

impl DavClient {
    /// A client for `target` (the server's root is the vault's root).
    pub fn new(target: Target, auth: Option<&BasicAuth>) -> DavClient {
        DavClient::with_root(target, auth, "/")
    }

    /// A client for `target` whose vault lives under the collection `root` (`/dav/`; `/` is
    /// the server's root). `root` is a plain path, already checked
    /// ([`crate::launch::normalize_root`]); its segments are percent-encoded here.
    pub fn with_root(target: Target, auth: Option<&BasicAuth>, root: &str) -> DavClient {
        let prefix = DavClient::href(root, false)
            .trim_end_matches('/')
            .to_owned();
        let mut conn = HttpConnector::new();
        conn.set_nodelay(true);
        conn.set_connect_timeout(Some(Duration::from_secs(5)));
        let client = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(1024)
            .pool_idle_timeout(Duration::from_secs(30))
            .build(conn);
        DavClient {
            inner: Arc::new(Inner {
                target,
                auth: auth.map(BasicAuth::header_value),
                prefix,
                client,
            }),
            walk: WalkBounds::DEFAULT,
        }
    }

    /// This client with other walk bounds ([`WalkBounds::DEFAULT`] unless set).
    pub fn with_walk_bounds(mut self, bounds: WalkBounds) -> DavClient {
        self.walk = bounds;
        self
    }

    /// The bounds every walk of this client keeps to.
    pub fn walk_bounds(&self) -> WalkBounds {
        self.walk
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

    /// The vault path of a decoded href path as this client's server lists it (under its
    /// root); `None` for the root itself or a path outside it.
    pub fn rel<'p>(&self, path: &'p str) -> Option<&'p str> {
        let prefix =
            crate::webdav::multistatus::decode_href(&self.inner.prefix).unwrap_or_default();
        let rest = path.strip_prefix(prefix.as_str())?;
        if !prefix.is_empty() && !rest.is_empty() && !rest.starts_with('/') {
            return None;
        }
        DavClient::rel_of(rest)
    }

    /// Where a decoded href path lies: the vault's root, a vault path under it, or outside.
    pub(crate) fn locate<'p>(&self, path: &'p str) -> Place<'p> {
        if let Some(rel) = self.rel(path) {
            return Place::Inside(rel);
        }
        let prefix =
            crate::webdav::multistatus::decode_href(&self.inner.prefix).unwrap_or_default();
        match path.strip_prefix(prefix.as_str()) {
            Some(rest) if rest.bytes().all(|b| b == b'/') => Place::Root,
            _ => Place::Outside,
        }
    }

    /// `href` (vault-relative, from [`DavClient::href`]) as sent: under the root.
    fn on_wire(&self, href: &str) -> String {
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
    pub async fn send(&self, rec: &Recorder, req: &DavRequest<'_>) -> Result<DavAnswer, DavError> {
        let deadline = Instant::now() + req.timeout;
        let mut sink = Sink::collect();
        self.attempt(rec, req, deadline, &mut sink, "").await
    }

    /// One attempt of `req`, ending by `deadline` whatever the server does (a trickled head
    /// or body included); `note` says in a timeout's message how the deadline was shared.
    async fn attempt(
        &self,
        rec: &Recorder,
        req: &DavRequest<'_>,
        deadline: Instant,
        sink: &mut Sink<'_>,
        note: &str,
    ) -> Result<DavAnswer, DavError> {
        let mut b = Request::builder()
            .method(req.method.clone())
            .uri(self.inner.target.url(&self.on_wire(req.href)));
        if let Some(a) = &self.inner.auth {
            b = b.header(hyper::header::AUTHORIZATION, a);
        }
        for (k, v) in &req.headers {
            b = b.header(*k, v);
        }
        // hyper sends an empty PUT with no Content-Length at all, which nginx's dav module
        // answers with 500 ("PUT request body must be in a file"); say 0, as browsers do.
        if req.body.is_empty() && req.method == Method::PUT {
            b = b.header(hyper::header::CONTENT_LENGTH, "0");
        }
        let bytes_sent = req.body.len() as u64;
        let request = b
            .body(Full::new(req.body.clone()))
            .map_err(|e| DavError::Invalid {
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
            if let Some(n) = declared_length(resp.headers())
                && n > cap
            {
                return Err(Fail::TooLarge(format!(
                    "the answer declares Content-Length {n}, over the {} cap ({}); refused before reading its body",
                    fmt_bytes(cap),
                    req.cap_name
                )));
            }
            let body = resp.into_body();
            match sink.parse.as_mut() {
                Some((what, visit)) if status == 207 => {
                    let delivered = &mut sink.delivered;
                    let mut counting = |e: DavEntry| {
                        *delivered += 1;
                        visit(e)
                    };
                    let (n, _) = read_multistatus(body, cap, what, &mut counting)
                        .await
                        .map_err(|e| match e {
                            StreamError::Read(d) => Fail::Transport("io", d),
                            StreamError::TooLarge(d) => Fail::TooLarge(d),
                            StreamError::Answer(e) => Fail::Answer(e),
                        })?;
                    Ok((status, Bytes::new(), n))
                }
                _ => {
                    // An error answer is read for its message only: its first 64 KiB.
                    let keep = if (200..300).contains(&status) { None } else { Some(64 * 1024) };
                    let body = collect(body, cap, req.cap_name, keep).await?;
                    let n = body.len() as u64;
                    Ok((status, body, n))
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
            Ok(Ok((status, body, n))) => {
                rec.record(req.route, &status.to_string(), sample(n));
                Ok(DavAnswer { status, body })
            }
            Ok(Err(Fail::Transport(kind, detail))) => {
                rec.record(req.route, kind, sample(0));
                Err(self.transport(req, kind, detail))
            }
            Ok(Err(Fail::TooLarge(detail))) => {
                rec.record(req.route, "too-large", sample(0));
                Err(DavError::TooLarge {
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

    fn transport(&self, req: &DavRequest<'_>, kind: &'static str, detail: String) -> DavError {
        DavError::Transport {
            route: req.route.to_owned(),
            path: req.href.to_owned(),
            kind,
            detail,
        }
    }

    /// [`DavClient::send`] with retries (transport error or 503, [`ATTEMPTS`] attempts,
    /// 50/100 ms back-off) that share ONE deadline, `req.timeout` from the first attempt:
    /// a server that answers slowly cannot stretch an exchange to three times its bound.
    /// Then a check that the status is one of `ok`. An answer over the cap, a malformed one
    /// and a timeout are not retried.
    pub async fn call(
        &self,
        rec: &Recorder,
        req: &DavRequest<'_>,
        ok: &[u16],
    ) -> Result<DavAnswer, DavError> {
        self.call_into(rec, req, ok, &mut Sink::collect()).await
    }

    async fn call_into(
        &self,
        rec: &Recorder,
        req: &DavRequest<'_>,
        ok: &[u16],
        sink: &mut Sink<'_>,
    ) -> Result<DavAnswer, DavError> {
        let deadline = Instant::now() + req.timeout;
        let note = format!(" shared by up to {ATTEMPTS} attempts");
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            let res = self.attempt(rec, req, deadline, sink, &note).await;
            let retry = match &res {
                Err(DavError::Transport { kind, .. }) => *kind != "timeout",
                Ok(a) => a.status == 503,
                Err(_) => false,
            };
            // Entries already handed on cannot be taken back: such an answer is not retried.
            let backoff = Duration::from_millis(50 << (attempt - 1).min(4));
            if retry
                && attempt < ATTEMPTS
                && sink.delivered == 0
                && Instant::now() + backoff < deadline
            {
                tokio::time::sleep(backoff).await;
                continue;
            }
            let a = res?;
            if ok.contains(&a.status) {
                return Ok(a);
            }
            return Err(DavError::Status {
                route: req.route.to_owned(),
                path: req.href.to_owned(),
                status: a.status,
                detail: first_line_of(&a.body),
            });
        }
    }

    /// `MKCOL` of folder `rel`. 405 (it exists already) counts as done, as the `webdav`
    /// client's `createDirectory` treats it.
    pub async fn mkcol(&self, rec: &Recorder, rel: &str) -> Result<u16, DavError> {
        let href = DavClient::href(rel, true);
        let req = DavRequest::new("mkcol", method("MKCOL"), &href);
        Ok(self.call(rec, &req, &[200, 201, 204, 405]).await?.status)
    }

    /// `PUT` of file `rel`.
    pub async fn put(&self, rec: &Recorder, rel: &str, body: Bytes) -> Result<u16, DavError> {
        let href = DavClient::href(rel, false);
        let mut req = DavRequest::new("put-file", Method::PUT, &href);
        req.headers
            .push(("content-type", "application/octet-stream".to_owned()));
        req.body = body;
        Ok(self.call(rec, &req, &[200, 201, 204]).await?.status)
    }

    /// `GET` of file `rel`.
    pub async fn get(&self, rec: &Recorder, rel: &str) -> Result<Bytes, DavError> {
        self.get_sized(rec, rel, None).await
    }

    /// `GET` of file `rel` whose listing said `size` bytes: an answer that declares or sends
    /// more is refused as it arrives (so a file never costs more memory than its listing
    /// said), not after it was read whole.
    pub async fn get_sized(
        &self,
        rec: &Recorder,
        rel: &str,
        size: Option<u64>,
    ) -> Result<Bytes, DavError> {
        let href = DavClient::href(rel, false);
        let mut req = DavRequest::new("get-file", Method::GET, &href);
        if let Some(n) = size
            && n < req.max_body
        {
            req.max_body = n;
            req.cap_name = "the size its listing gave";
        }
        Ok(self.call(rec, &req, &[200]).await?.body)
    }

    /// `PROPFIND` of folder `rel` ("" = root) at `depth`, parsed (the whole listing held; a
    /// walk uses [`DavClient::propfind_each`]).
    pub async fn propfind(
        &self,
        rec: &Recorder,
        rel: &str,
        depth: Depth,
    ) -> Result<Vec<DavEntry>, DavError> {
        let mut out = Vec::new();
        self.propfind_each(rec, rel, depth, &mut |e| {
            out.push(e);
            Ok(())
        })
        .await?;
        Ok(out)
    }

    /// `PROPFIND` of folder `rel` ("" = root) at `depth`, its answer parsed as it arrives:
    /// each entry goes to `visit` once its `</response>` is read, so the answer is never held
    /// whole (an error from `visit` stops the request). Returns the entries read.
    pub async fn propfind_each(
        &self,
        rec: &Recorder,
        rel: &str,
        depth: Depth,
        visit: &mut (dyn FnMut(DavEntry) -> Result<(), DavError> + Send),
    ) -> Result<u64, DavError> {
        let href = DavClient::href(rel, true);
        let mut req = DavRequest::new(depth.route(), method("PROPFIND"), &href);
        req.headers.push(("accept", "text/plain".to_owned()));
        req.headers.push(("depth", depth.header().to_owned()));
        let what = format!("PROPFIND {}", multistatus::clip(&href, 200));
        let mut sink = Sink {
            parse: Some((&what, visit)),
            delivered: 0,
        };
        self.call_into(rec, &req, &[207], &mut sink).await?;
        Ok(sink.delivered)
    }

    /// `MOVE` of `from` to `to` (a folder when `collection`), overwriting as the `webdav`
    /// client's `moveFile` does by default.
    pub async fn move_to(
        &self,
        rec: &Recorder,
        from: &str,
        to: &str,
        collection: bool,
    ) -> Result<u16, DavError> {
        let href = DavClient::href(from, collection);
        let mut req = DavRequest::new("move", method("MOVE"), &href);
        req.headers.push((
            "destination",
            self.inner
                .target
                .url(&self.on_wire(&DavClient::href(to, collection))),
        ));
        req.headers.push(("overwrite", "T".to_owned()));
        Ok(self.call(rec, &req, &[201, 204]).await?.status)
    }

    /// `DELETE` of `rel` (a folder when `collection`).
    pub async fn delete(
        &self,
        rec: &Recorder,
        rel: &str,
        collection: bool,
    ) -> Result<u16, DavError> {
        let href = DavClient::href(rel, collection);
        let req = DavRequest::new("delete", Method::DELETE, &href);
        Ok(self.call(rec, &req, &[200, 204]).await?.status)
    }

    /// Writes `req` as HTTP/1.1 bytes into `buf` (the lean path: no header map, no body
    /// channel; the same shape hyper would send).
    pub(crate) fn write_request(&self, req: &DavRequest<'_>, buf: &mut Vec<u8>) {
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

    /// [`DavClient::send`] over a worker's own connection: the answer's body is counted and
    /// dropped. Returns the status; transport failures are counted and returned.
    pub(crate) async fn send_lean(
        &self,
        rec: &Recorder,
        conn: &mut H1Conn,
        req: &DavRequest<'_>,
    ) -> Result<u16, DavError> {
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

/// Where a listed path lies ([`DavClient::locate`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place<'p> {
    Root,
    Inside(&'p str),
    Outside,
}

/// Attempts of an operation that must succeed ([`DavClient::call`]).
pub const ATTEMPTS: u32 = 3;

/// What a streamed PROPFIND hands each entry to.
type Visit<'v> = dyn FnMut(DavEntry) -> Result<(), DavError> + Send + 'v;

/// Where an attempt puts the answer's body: collected, or (a `207`) parsed as it arrives.
struct Sink<'v> {
    parse: Option<(&'v str, &'v mut Visit<'v>)>,
    /// Entries handed to the visitor so far, over every attempt.
    delivered: u64,
}

impl Sink<'_> {
    fn collect() -> Sink<'static> {
        Sink {
            parse: None,
            delivered: 0,
        }
    }
}

/// Why one attempt failed.
enum Fail {
    Transport(&'static str, String),
    TooLarge(String),
    Answer(DavError),
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
    use crate::webdav::multistatus::decode_href;

    #[test]
    fn hrefs_encode_every_segment_and_round_trip() {
        assert_eq!(DavClient::href("", true), "/");
        assert_eq!(DavClient::href("", false), "/");
        assert_eq!(DavClient::href("Wiki", true), "/Wiki/");
        assert_eq!(
            DavClient::href("Wiki/100% a#b?c&d.md", false),
            "/Wiki/100%25%20a%23b%3Fc%26d.md"
        );
        for rel in [
            "Wiki/Caf\u{e9} cr\u{e8}me.md",
            "Wiki/Cafe\u{301} cre\u{300}me.md",
            "📚 Reading/Books I loved ❤\u{fe0f}.md",
            "Wiki/trailing space .md",
            "a/b~c_d-e.f",
        ] {
            let href = DavClient::href(rel, false);
            assert!(href.is_ascii(), "{href}");
            let back = decode_href(&href).unwrap();
            assert_eq!(DavClient::rel_of(&back), Some(rel));
        }
        assert_eq!(DavClient::rel_of("/"), None);
        assert_eq!(DavClient::rel_of("/a/b/"), Some("a/b"));
    }

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
        let c = DavClient::new(target, Some(&BasicAuth::new("u", "p")));
        let mut req = DavRequest::new("put-file", Method::PUT, "/a%20b.md");
        req.body = Bytes::from_static(b"hello");
        let mut buf = Vec::new();
        c.write_request(&req, &mut buf);
        assert_eq!(
            String::from_utf8(buf).unwrap(),
            "PUT /a%20b.md HTTP/1.1\r\nhost: 127.0.0.1:9\r\nauthorization: Basic dTpw\r\ncontent-length: 5\r\n\r\nhello"
        );
        let mut req = DavRequest::new("propfind-depth1", method("PROPFIND"), "/");
        req.headers.push(("depth", "1".into()));
        let mut buf = Vec::new();
        DavClient::new(Target::parse("http://127.0.0.1:9", false).unwrap(), None)
            .write_request(&req, &mut buf);
        assert_eq!(
            String::from_utf8(buf).unwrap(),
            "PROPFIND / HTTP/1.1\r\nhost: 127.0.0.1:9\r\ndepth: 1\r\n\r\n"
        );
    }
}
