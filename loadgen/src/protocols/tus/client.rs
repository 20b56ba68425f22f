//! One tus 1.0.0 client of one server's collection, over the shared HTTP client: discovery
//! (`OPTIONS`), an upload (creation, with its first chunk when the server offers
//! `creation-with-upload`, then `PATCH` chunks, resumed by `HEAD` after a cut, a `409` or a
//! stall), the read-back of an upload (`HEAD` for its offset, length and metadata, `GET` for
//! its bytes) and termination (`DELETE`). Each exchange is counted under its route
//! ([`TusRoute`]); every answer's headers go through the strict parsers of
//! [`super::header`], so a hostile server ends an upload with one line, never a loop.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use hyper::Method;

use super::error::TusError;
use super::header::{self, Capabilities, VERSION};
use crate::http::{Answer, HttpClient, HttpError, REQUEST_TIMEOUT, Request, method};
pub use crate::stats::Recorder;
use crate::target::Target;

/// The exchanges of the protocol, each counted under its own route key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TusRoute {
    /// `OPTIONS` of the collection: version, extensions, size limit, checksum algorithms.
    Options,
    /// `POST` of the collection without a body (the creation extension).
    Create,
    /// `POST` of the collection with the first chunk (creation-with-upload).
    CreateWithUpload,
    /// `PATCH` of an upload: one chunk at its offset.
    Patch,
    /// `HEAD` of an upload: its offset (to resume) and metadata (to verify).
    Head,
    /// `GET` of an upload: its bytes (`@tus/server` and tusd serve them; the core protocol
    /// does not require it).
    Get,
    /// `DELETE` of an upload (the termination extension).
    Delete,
}

impl TusRoute {
    pub const ALL: [TusRoute; 7] = [
        TusRoute::Options,
        TusRoute::Create,
        TusRoute::CreateWithUpload,
        TusRoute::Patch,
        TusRoute::Head,
        TusRoute::Get,
        TusRoute::Delete,
    ];

    /// The route's key (`<phase>.<route>.p50_us`).
    pub fn name(self) -> &'static str {
        match self {
            TusRoute::Options => "tus-options",
            TusRoute::Create => "tus-create",
            TusRoute::CreateWithUpload => "tus-create-with-upload",
            TusRoute::Patch => "tus-patch",
            TusRoute::Head => "tus-head",
            TusRoute::Get => "tus-get",
            TusRoute::Delete => "tus-delete",
        }
    }
}

/// A `PATCH` chunk's default size: 4 MiB. Every note of the generated vaults fits in one
/// (the hazards profile's largest attachment is 4.5 MiB), so a server with
/// creation-with-upload takes a note in one round trip, as the field report's import did.
pub const DEFAULT_CHUNK: usize = 4 * 1024 * 1024;

/// Resumes of one upload (a `HEAD` after a cut, a `409` or a `PATCH` the server kept nothing
/// of) before it fails: tus-js-client's default retry schedule has five delays; eight leaves
/// room for a fault phase's seeded cuts and still ends a server that drops every body.
pub const MAX_RESUMES: u32 = 8;

/// `460 Checksum Mismatch` answers to one chunk before the upload fails: the chunk is sent
/// again after each (the protocol discards a mismatched chunk), three tries in all, as the
/// shared client's [`crate::http::ATTEMPTS`].
pub const MAX_MISMATCHES: u32 = 3;

/// What an upload did beside moving its bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Uploaded {
    /// The upload's path on the target (from its `Location`).
    pub url: String,
    /// Round trips the upload took (creation, `PATCH`es, `HEAD`s).
    pub requests: u64,
    /// `HEAD`s sent to resume.
    pub resumes: u64,
    /// Body bytes sent beyond the file's length (chunks sent again after a cut or a `460`).
    pub resent_bytes: u64,
    /// `409 Conflict` answers (an offset the server did not hold).
    pub conflicts: u64,
    /// `460 Checksum Mismatch` answers.
    pub mismatches: u64,
}

/// A tus client of one server's collection (`/files/`): cheap to clone.
#[derive(Debug, Clone)]
pub struct TusClient {
    http: HttpClient,
    /// The collection's encoded path, as uploads are created at it.
    collection: String,
    caps: Option<Capabilities>,
    /// The largest `PATCH` (or creation) body.
    pub chunk: usize,
    /// One exchange's deadline.
    pub timeout: Duration,
    /// Send the first chunk with the creation when the server offers creation-with-upload
    /// (`false`: always `POST`, then `PATCH`, so every body goes through `PATCH`).
    pub with_upload: bool,
}

/// The headers an upload's answers are read for.
const UPLOAD_HEADERS: &[&str] = &[
    "location",
    "upload-offset",
    "upload-length",
    "upload-metadata",
];
/// The headers an `OPTIONS` answer is read for.
const OPTIONS_HEADERS: &[&str] = &[
    "tus-version",
    "tus-extension",
    "tus-max-size",
    "tus-checksum-algorithm",
];

impl TusClient {
    /// A client of `target`'s collection `collection` (a plain path from `/`, checked by the
    /// target definition; `/files/` for `@tus/server`'s usual one).
    pub fn new(target: Target, auth: Option<&crate::http::BasicAuth>, collection: &str) -> Self {
        TusClient {
            http: HttpClient::new(target, auth),
            collection: HttpClient::href(collection, true),
            caps: None,
            chunk: DEFAULT_CHUNK,
            timeout: REQUEST_TIMEOUT,
            with_upload: true,
        }
    }

    /// This client creating uploads without their first chunk even where the server offers
    /// creation-with-upload (`POST`, then `PATCH`).
    pub fn without_creation_with_upload(mut self) -> Self {
        self.with_upload = false;
        self
    }

    /// This client with `PATCH` bodies of at most `chunk` bytes (at least 1).
    pub fn with_chunk(mut self, chunk: usize) -> Self {
        self.chunk = chunk.max(1);
        self
    }

    /// This client with each exchange bounded by `timeout`.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The collection's path.
    pub fn collection(&self) -> &str {
        &self.collection
    }

    /// What discovery found (`None` before [`TusClient::discover`]).
    pub fn capabilities(&self) -> Option<&Capabilities> {
        self.caps.as_ref()
    }

    /// The server's address.
    pub fn target(&self) -> &Target {
        self.http.target()
    }

    fn request<'a>(&self, route: TusRoute, m: Method, href: &'a str) -> Request<'a> {
        let mut r = Request::new(route.name(), m, href);
        r.timeout = self.timeout;
        r.retry_on = &[];
        r
    }

    /// `OPTIONS` of the collection: the server's version, extensions, size limit and checksum
    /// algorithms, kept for the uploads that follow.
    pub async fn discover(&mut self, rec: &Recorder) -> Result<&Capabilities, TusError> {
        let href = self.collection.clone();
        let mut req = self.request(TusRoute::Options, Method::OPTIONS, &href);
        req.keep_headers = OPTIONS_HEADERS;
        let a = self.http.call(rec, &req, &[200, 204]).await?;
        let caps = Capabilities::parse(
            a.header("tus-version"),
            a.header("tus-extension"),
            a.header("tus-max-size"),
            a.header("tus-checksum-algorithm"),
        )
        .map_err(|r| TusError::server(format!("OPTIONS {}", self.collection), r))?;
        Ok(self.caps.insert(caps))
    }

    fn caps(&self) -> Result<&Capabilities, TusError> {
        self.caps.as_ref().ok_or_else(|| TusError::Invalid {
            what: "tus upload".into(),
            reason: "the server's capabilities were never discovered (OPTIONS first)".into(),
        })
    }

    /// Uploads `body` as a new upload carrying `meta` (`relativePath`, `filetype`): a creation
    /// (with the first chunk when the server offers creation-with-upload), then `PATCH`es of
    /// at most [`TusClient::chunk`] bytes. A `PATCH` cut off, answered `409`, or kept nothing of
    /// is resumed from the offset a `HEAD` answers (at most [`MAX_RESUMES`] times); a `460`
    /// sends the chunk again (at most [`MAX_MISMATCHES`] times in a row).
    pub async fn upload(
        &self,
        rec: &Recorder,
        meta: &BTreeMap<String, String>,
        body: Bytes,
    ) -> Result<Uploaded, TusError> {
        let caps = self.caps()?;
        let len = body.len() as u64;
        let name = meta
            .get("relativePath")
            .or_else(|| meta.get("filename"))
            .map_or("(unnamed)", String::as_str);
        let what = |w: &str| format!("tus upload of {}: {w}", contract::quote::quote(name));
        if let Some(max) = caps.max_size
            && len > max
        {
            return Err(TusError::Invalid {
                what: what("creation"),
                reason: format!("{len} bytes, over the server's Tus-Max-Size {max}"),
            });
        }
        let sha1 = caps.sha1();
        let mut up = Uploaded::default();
        let mut sent = 0u64;
        let coll = self.collection.clone();
        let metadata = header::encode_metadata(meta);
        let with_upload = self.with_upload && caps.has("creation-with-upload");
        let route = if with_upload {
            TusRoute::CreateWithUpload
        } else {
            TusRoute::Create
        };
        let mut req = self.request(route, Method::POST, &coll);
        req.keep_headers = UPLOAD_HEADERS;
        req.headers.push(("tus-resumable", VERSION.into()));
        req.headers.push(("upload-length", len.to_string()));
        if !metadata.is_empty() {
            req.headers.push(("upload-metadata", metadata));
        }
        let first = if with_upload {
            body.slice(..(self.chunk as u64).min(len) as usize)
        } else {
            Bytes::new()
        };
        if with_upload {
            req.headers
                .push(("content-type", "application/offset+octet-stream".into()));
            if sha1 && !first.is_empty() {
                req.headers
                    .push(("upload-checksum", header::sha1_checksum(&first)));
            }
        }
        if first.is_empty() {
            req.headers.push(("content-length", "0".into()));
        }
        req.body = first.clone();
        sent += first.len() as u64;
        up.requests += 1;
        let a = self.http.call(rec, &req, &[201]).await?;
        let location = a
            .header("location")
            .ok_or_else(|| TusError::server(what("creation"), "the 201 answer has no Location"))?;
        up.url = header::location_path(location, self.http.target().authority())
            .map_err(|r| TusError::server(what("creation"), r))?;
        let mut offset = if with_upload {
            header::check_patched(a.header("upload-offset"), 0, first.len() as u64, len)
                .map_err(|r| TusError::server(what("creation"), r))?
        } else {
            0
        };
        let mut acked = offset;
        let mut mismatches_in_row = 0u32;
        let url = up.url.clone();
        while offset < len {
            let end = offset.saturating_add(self.chunk as u64).min(len);
            let piece = body.slice(offset as usize..end as usize);
            let mut req = self.request(TusRoute::Patch, Method::PATCH, &url);
            req.keep_headers = UPLOAD_HEADERS;
            req.headers.push(("tus-resumable", VERSION.into()));
            req.headers.push(("upload-offset", offset.to_string()));
            req.headers
                .push(("content-type", "application/offset+octet-stream".into()));
            if sha1 {
                req.headers
                    .push(("upload-checksum", header::sha1_checksum(&piece)));
            }
            req.body = piece.clone();
            sent += piece.len() as u64;
            up.requests += 1;
            let at = format!("PATCH {} at offset {offset}", contract::quote::text(&url));
            let why_resume = match self.http.send(rec, &req).await {
                Ok(a) if a.status == 204 || a.status == 200 => {
                    let n = header::check_patched(
                        a.header("upload-offset"),
                        offset,
                        piece.len() as u64,
                        len,
                    )
                    .map_err(|r| TusError::server(what(&at), r))?;
                    mismatches_in_row = 0;
                    if n > offset {
                        offset = n;
                        acked = n;
                        continue;
                    }
                    "the server kept none of the chunk".to_owned()
                }
                Ok(a) if a.status == 460 => {
                    up.mismatches += 1;
                    mismatches_in_row += 1;
                    if mismatches_in_row >= MAX_MISMATCHES {
                        return Err(TusError::server(
                            what(&at),
                            format!(
                                "460 Checksum Mismatch {MAX_MISMATCHES} times in a row for the same chunk (bound MAX_MISMATCHES)"
                            ),
                        ));
                    }
                    continue;
                }
                Ok(a) if a.status == 409 => {
                    up.conflicts += 1;
                    "409 Conflict (the server holds another offset)".to_owned()
                }
                Ok(a) => return Err(status_error(&req, &a)),
                Err(HttpError::Transport { kind, detail, .. }) => {
                    format!("transport error ({kind}): {detail}")
                }
                Err(e) => return Err(e.into()),
            };
            if up.resumes >= u64::from(MAX_RESUMES) {
                return Err(TusError::server(
                    what(&at),
                    format!(
                        "still failing after {MAX_RESUMES} resumes (bound MAX_RESUMES); last: {why_resume}"
                    ),
                ));
            }
            up.resumes += 1;
            up.requests += 1;
            offset = self
                .resume_offset(rec, &url, acked, len)
                .await
                .map_err(|e| match e {
                    TusError::Server { reason, .. } => TusError::server(what("resume"), reason),
                    other => other,
                })?;
            acked = offset;
        }
        up.resent_bytes = sent.saturating_sub(len);
        Ok(up)
    }

    /// `HEAD` of the upload at `url`: the offset to resume from, checked against the offset
    /// last acknowledged and the upload's length.
    pub async fn resume_offset(
        &self,
        rec: &Recorder,
        url: &str,
        acked: u64,
        len: u64,
    ) -> Result<u64, TusError> {
        let a = self.head(rec, url).await?;
        header::check_resumed(
            a.header("upload-offset"),
            a.header("upload-length"),
            acked,
            len,
        )
        .map_err(|r| TusError::server(format!("HEAD {}", contract::quote::text(url)), r))
    }

    /// `HEAD` of the upload at `url` (200 or 204), its upload headers kept.
    pub async fn head(&self, rec: &Recorder, url: &str) -> Result<Answer, TusError> {
        let mut req = self.request(TusRoute::Head, Method::HEAD, url);
        req.keep_headers = UPLOAD_HEADERS;
        req.headers.push(("tus-resumable", VERSION.into()));
        Ok(self.http.call(rec, &req, &[200, 204]).await?)
    }

    /// `GET` of the upload at `url`: its bytes, at most `len` of them (a longer answer is
    /// refused before it is read whole).
    pub async fn get(&self, rec: &Recorder, url: &str, len: u64) -> Result<Bytes, TusError> {
        let mut req = self.request(TusRoute::Get, Method::GET, url);
        req.headers.push(("tus-resumable", VERSION.into()));
        req.max_body = len;
        req.cap_name = "the upload's length";
        Ok(self.http.call(rec, &req, &[200]).await?.body)
    }

    /// `DELETE` of the upload at `url` (the termination extension; refused when the server
    /// does not list it).
    pub async fn terminate(&self, rec: &Recorder, url: &str) -> Result<(), TusError> {
        if !self.caps()?.has("termination") {
            return Err(TusError::Invalid {
                what: format!("DELETE {}", contract::quote::text(url)),
                reason: "the server does not list the termination extension".into(),
            });
        }
        let mut req = self.request(TusRoute::Delete, method("DELETE"), url);
        req.headers.push(("tus-resumable", VERSION.into()));
        self.http.call(rec, &req, &[204]).await?;
        Ok(())
    }
}

/// An unexpected status as the shared client words it.
fn status_error(req: &Request<'_>, a: &Answer) -> TusError {
    TusError::Http(HttpError::Status {
        route: req.route.to_owned(),
        path: req.href.to_owned(),
        status: a.status,
        detail: crate::http::client::first_line_of(&a.body),
    })
}
