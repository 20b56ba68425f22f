//! One WebDAV request: the vault path encoded into an href, basic auth added, sent over a
//! pooled hyper client (device operations, which need the answer's body) or over a worker's
//! own lean HTTP/1.1 connection (closed-loop route load, which counts and drops it), timed,
//! and counted per route in a [`Recorder`] with the same histograms the signed client fills.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::{Method, Request};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

use super::error::DavError;
use super::multistatus::{DavEntry, parse_multistatus};
use super::presets::BasicAuth;
use crate::h1::{self, H1Conn};
pub use crate::stats::Recorder;
use crate::stats::Sample;
use crate::target::Target;

/// Bound on one request, connect to last byte: the signed client's figure.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest answer body read. The hazards profile's biggest attachment is 4.5 MiB and a Depth
/// infinity listing of a 100,000-note vault is about 60 MB with Apache's allprop answer.
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
    /// A non-2xx status is an `Ok` answer; only transport failures are errors (counted too).
    pub async fn send(&self, rec: &Recorder, req: &DavRequest<'_>) -> Result<DavAnswer, DavError> {
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
                what: req.href.to_owned(),
                reason: e.to_string(),
            })?;
        let sent = Instant::now();
        let outcome = tokio::time::timeout(req.timeout, async {
            let resp = self
                .inner
                .client
                .request(request)
                .await
                .map_err(|e| (if e.is_connect() { "connect" } else { "io" }, chain(&e)))?;
            let status = resp.status().as_u16();
            let body = Limited::new(resp.into_body(), MAX_ANSWER_BYTES as usize)
                .collect()
                .await
                .map_err(|e| ("io", format!("reading the answer: {e}")))?
                .to_bytes();
            Ok::<_, (&'static str, String)>((status, body))
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
            Ok(Ok((status, body))) => {
                rec.record(req.route, &status.to_string(), sample(body.len() as u64));
                Ok(DavAnswer { status, body })
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
                    format!("no answer within {:?}", req.timeout),
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

    /// [`DavClient::send`] with retries (transport error or 503, three attempts, 50/100 ms
    /// back-off), then a check that the status is one of `ok`.
    pub async fn call(
        &self,
        rec: &Recorder,
        req: &DavRequest<'_>,
        ok: &[u16],
    ) -> Result<DavAnswer, DavError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let res = self.send(rec, req).await;
            let retry = match &res {
                Err(DavError::Transport { .. }) => true,
                Ok(a) => a.status == 503,
                Err(_) => false,
            };
            if retry && attempt < 3 {
                tokio::time::sleep(Duration::from_millis(50 << (attempt - 1))).await;
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
        let href = DavClient::href(rel, false);
        let req = DavRequest::new("get-file", Method::GET, &href);
        Ok(self.call(rec, &req, &[200]).await?.body)
    }

    /// `PROPFIND` of folder `rel` ("" = root) at `depth`, parsed.
    pub async fn propfind(
        &self,
        rec: &Recorder,
        rel: &str,
        depth: Depth,
    ) -> Result<Vec<DavEntry>, DavError> {
        let href = DavClient::href(rel, true);
        let mut req = DavRequest::new(depth.route(), method("PROPFIND"), &href);
        req.headers.push(("accept", "text/plain".to_owned()));
        req.headers.push(("depth", depth.header().to_owned()));
        let a = self.call(rec, &req, &[207]).await?;
        parse_multistatus(&a.body, &format!("PROPFIND {href}"))
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
        let outcome = tokio::time::timeout(
            req.timeout,
            conn.roundtrip(req.method == Method::HEAD, MAX_ANSWER_BYTES),
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
                    format!("no answer within {:?}", req.timeout),
                ))
            }
        }
    }
}

/// The first non-empty line of an error body with its markup stripped, for messages
/// ("Conflict", "PROPFIND requests with a Depth of infinity are not allowed for /.").
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
        .unwrap_or("(empty body)")
        .to_owned()
}

/// An error and its sources on one line.
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        let t = s.to_string();
        if !out.contains(&t) {
            out.push_str(": ");
            out.push_str(&t);
        }
        cur = s.source();
    }
    out
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
