//! One S3 request: path-style (`/BUCKET/KEY`) on the plain HTTP client
//! ([`crate::http::HttpClient`]), signed with SigV4 ([`super::sign`]) afresh for every request,
//! with the operations Remotely Save's S3 backend sends (PutObject, GetObject, HeadObject,
//! ListObjectsV2, DeleteObject) plus CreateBucket and CopyObject, and a listing page streamed
//! through the listing parser.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use hyper::Method;

use super::crypt::Cipher;
use super::error::S3Error;
use super::listing::{Object, PageEnd, read_listing};
use super::sign::{self, Credentials, EMPTY_SHA256, REGION, ToSign};
use crate::feed::FeedBounds;
use crate::http::client::{BodyRead, Counted};
use crate::http::{HttpClient, Request, StreamError};
pub use crate::stats::Recorder;
use crate::target::Target;
use crate::xml::{Stop, clip, quoted};

/// Seconds since the Unix epoch, read for every request's `x-amz-date`.
pub use crate::clock::{Clock, system_clock};

/// The header every request of Remotely Save's S3 client carries (its SDK middleware adds it,
/// so no cache between plugin and server answers a listing from memory).
const CACHE_CONTROL: &str = "no-cache";

/// An S3 client for one bucket of one server: the plain HTTP client (cheap to clone, shared
/// pool), the credentials every request is signed with, and the bounds of its listings.
#[derive(Clone)]
pub struct S3Client {
    http: HttpClient,
    creds: Arc<Credentials>,
    bucket: String,
    clock: Clock,
    bounds: FeedBounds,
    /// The plugin's encryption, when the vault is encrypted.
    cipher: Option<Arc<Cipher>>,
    /// Each vault path's object key as last listed or written (the plugin's
    /// `cacheMapOrigToEnc`): an encrypted name is salted, so a file rewritten keeps the key it
    /// was listed under rather than getting a second object.
    keys: Arc<Mutex<BTreeMap<String, String>>>,
}

impl std::fmt::Debug for S3Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Client")
            .field("target", &self.http.target().base())
            .field("bucket", &self.bucket)
            .finish_non_exhaustive()
    }
}

/// A request planned and signed, its parts owned (so it can be borrowed into a [`Request`]).
#[derive(Debug, Clone)]
pub struct Planned {
    pub route: &'static str,
    pub method: Method,
    pub href: String,
    pub headers: Vec<(&'static str, String)>,
    pub body: Bytes,
}

impl Planned {
    /// The request to send. It is retried on every 5xx, as the AWS SDK the plugin uses
    /// retries them (its standard mode: three attempts).
    pub fn request(&self) -> Request<'_> {
        let mut r = Request::new(self.route, self.method.clone(), &self.href);
        r.headers = self.headers.clone();
        r.body = self.body.clone();
        r.retry_on = &[500, 502, 503, 504];
        r
    }
}

/// What a HeadObject said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    pub size: Option<u64>,
    pub etag: Option<String>,
}

/// The Content-Type Remotely Save sends for `key` (it looks the extension up with
/// `mime-types`; the extensions a vault holds, else `application/octet-stream`).
pub fn content_type(key: &str) -> &'static str {
    let ext = key
        .rsplit_once('.')
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default();
    match ext.as_str() {
        "md" => "text/markdown; charset=utf-8",
        "txt" => "text/plain; charset=utf-8",
        "json" => "application/json; charset=utf-8",
        "js" => "application/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "svg" => "image/svg+xml",
        "webp" => "image/webp",
        "pdf" => "application/pdf",
        _ => "application/octet-stream",
    }
}

impl S3Client {
    /// A client for `bucket` on `target`, signing with `creds`.
    pub fn new(target: Target, creds: Credentials, bucket: &str) -> S3Client {
        S3Client {
            http: HttpClient::new(target, None),
            creds: Arc::new(creds),
            bucket: bucket.to_owned(),
            clock: system_clock(),
            bounds: super::LIST_DEFAULT,
            cipher: None,
            keys: Arc::default(),
        }
    }

    /// This client encrypting names and bodies as the plugin's `openssl-base64` does.
    pub fn with_cipher(mut self, cipher: Cipher) -> S3Client {
        self.cipher = Some(Arc::new(cipher));
        self
    }

    /// The cipher, when the vault is encrypted.
    pub fn cipher(&self) -> Option<&Cipher> {
        self.cipher.as_deref()
    }

    /// The object key of vault path `path` (a folder with its `/`): the path itself, or the
    /// key it was last listed or written under, or a new encrypted name.
    pub fn key_of(&self, path: &str) -> String {
        let Some(c) = &self.cipher else {
            return path.to_owned();
        };
        let mut keys = self.keys.lock().unwrap_or_else(|p| p.into_inner());
        keys.entry(path.to_owned())
            .or_insert_with(|| c.encrypt_name(path))
            .clone()
    }

    /// The vault path listed key `key` stands for (decrypted when the vault is encrypted,
    /// and remembered as that path's key); `Err` says why it stands for none.
    pub fn path_of_key(&self, key: &str) -> Result<String, String> {
        let Some(c) = &self.cipher else {
            return Ok(key.to_owned());
        };
        let path = c
            .decrypt_name(key)
            .map_err(|e| format!("listed key {}: {e}", quoted(key, 80)))?;
        let mut keys = self.keys.lock().unwrap_or_else(|p| p.into_inner());
        keys.insert(path.clone(), key.to_owned());
        Ok(path)
    }

    /// The size a body of `n` plain bytes is stored at.
    pub fn stored_size(&self, n: u64) -> u64 {
        match self.cipher {
            Some(_) => super::crypt::stored_size(n),
            None => n,
        }
    }

    /// PutObject of vault file `path` with `plain`, encrypted when the vault is (the
    /// Content-Type follows the object key, so an encrypted file goes as
    /// `application/octet-stream`).
    pub async fn put_file(
        &self,
        rec: &Recorder,
        path: &str,
        plain: Bytes,
        mtime_s: u64,
    ) -> Result<Option<String>, S3Error> {
        let key = self.key_of(path);
        let body = match &self.cipher {
            Some(c) => Bytes::from(c.encrypt(&plain)),
            None => plain,
        };
        self.put(rec, &key, body, mtime_s).await
    }

    /// GetObject of listed object `key` (capped at its listed `size`), decrypted when the
    /// vault is encrypted.
    pub async fn get_file(
        &self,
        rec: &Recorder,
        key: &str,
        size: Option<u64>,
    ) -> Result<Bytes, S3Error> {
        let body = self.get_sized(rec, key, size).await?;
        match &self.cipher {
            Some(c) => c
                .decrypt(&body)
                .map(Bytes::from)
                .map_err(|e| S3Error::invalid(format!("GetObject {}", clip(key, 80)), e)),
            None => Ok(body),
        }
    }

    /// This client with other listing bounds ([`super::LIST_DEFAULT`] unless set).
    pub fn with_bounds(mut self, bounds: FeedBounds) -> S3Client {
        self.bounds = bounds;
        self
    }

    /// This client reading `clock` for its signatures' time.
    pub fn with_clock(mut self, clock: Clock) -> S3Client {
        self.clock = clock;
        self
    }

    /// The bounds every listing walk of this client keeps to.
    pub fn bounds(&self) -> FeedBounds {
        self.bounds
    }

    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// The plain HTTP client underneath.
    pub fn http(&self) -> &HttpClient {
        &self.http
    }

    /// `/BUCKET/KEY` with every key segment encoded (an empty segment kept: a folder key
    /// ends in `/`).
    pub fn path_of(&self, key: Option<&str>) -> String {
        let mut p = format!("/{}", sign::encode(&self.bucket));
        if let Some(k) = key {
            p.push('/');
            let segs: Vec<String> = k.split('/').map(sign::encode).collect();
            p.push_str(&segs.join("/"));
        }
        p
    }

    /// A request of `route` signed now: `key` (None: the bucket), `query`, `extra` headers
    /// (all signed, as S3 wants every `x-amz-*` header signed) and `body`.
    pub fn plan(
        &self,
        route: &'static str,
        method: Method,
        key: Option<&str>,
        query: &[(&str, &str)],
        extra: Vec<(&'static str, String)>,
        body: Bytes,
    ) -> Planned {
        let path = self.path_of(key);
        let q = sign::canonical_query(query);
        let hash = if body.is_empty() {
            EMPTY_SHA256.to_owned()
        } else {
            sign::sha256_hex(&body)
        };
        let date = sign::amz_date((self.clock)());
        let mut headers = extra;
        headers.push(("x-amz-content-sha256", hash.clone()));
        headers.push(("x-amz-date", date.clone()));
        let host = self.http.target().authority().to_owned();
        let mut signed: Vec<(&str, &str)> = vec![("host", host.as_str())];
        signed.extend(headers.iter().map(|(k, v)| (*k, v.as_str())));
        let s = sign::sign(
            &self.creds,
            REGION,
            &ToSign {
                method: method.as_str(),
                path: &path,
                query: &q,
                headers: &signed,
                payload_sha256: &hash,
                amz_date: &date,
            },
        );
        headers.push(("authorization", s.authorization));
        headers.push(("cache-control", CACHE_CONTROL.to_owned()));
        let href = if q.is_empty() {
            path
        } else {
            format!("{path}?{q}")
        };
        Planned {
            route,
            method,
            href,
            headers,
            body,
        }
    }

    /// CreateBucket of this client's bucket (before a sample's phases; not timed).
    pub async fn create_bucket(&self, rec: &Recorder) -> Result<(), S3Error> {
        let p = self.plan(
            "create-bucket",
            Method::PUT,
            None,
            &[],
            Vec::new(),
            Bytes::new(),
        );
        self.http.call(rec, &p.request(), &[200]).await?;
        Ok(())
    }

    /// PutObject of `key` with `body`, its Content-Type and Remotely Save's `mtime`/`ctime`
    /// metadata (seconds); returns the answer's ETag.
    pub async fn put(
        &self,
        rec: &Recorder,
        key: &str,
        body: Bytes,
        mtime_s: u64,
    ) -> Result<Option<String>, S3Error> {
        let extra = vec![
            ("content-type", content_type(key).to_owned()),
            ("x-amz-meta-ctime", mtime_s.to_string()),
            ("x-amz-meta-mtime", mtime_s.to_string()),
        ];
        let p = self.plan("put-object", Method::PUT, Some(key), &[], extra, body);
        let mut req = p.request();
        req.keep_headers = &["etag"];
        let a = self.http.call(rec, &req, &[200]).await?;
        Ok(a.header("etag").map(str::to_owned))
    }

    /// GetObject of `key`, refused as it arrives when it declares or sends more than `size`
    /// (the listing's) bytes.
    pub async fn get_sized(
        &self,
        rec: &Recorder,
        key: &str,
        size: Option<u64>,
    ) -> Result<Bytes, S3Error> {
        let p = self.plan(
            "get-object",
            Method::GET,
            Some(key),
            &[],
            Vec::new(),
            Bytes::new(),
        );
        let mut req = p.request();
        if let Some(n) = size
            && n < req.max_body
        {
            req.max_body = n;
            req.cap_name = "the size its listing gave";
        }
        Ok(self.http.call(rec, &req, &[200]).await?.body)
    }

    /// HeadObject of `key`: its length and ETag (Remotely Save heads every object it writes).
    pub async fn head(&self, rec: &Recorder, key: &str) -> Result<Head, S3Error> {
        let p = self.plan(
            "head-object",
            Method::HEAD,
            Some(key),
            &[],
            Vec::new(),
            Bytes::new(),
        );
        let mut req = p.request();
        req.keep_headers = &["content-length", "etag"];
        let a = self.http.call(rec, &req, &[200]).await?;
        let size = match a.header("content-length") {
            Some(v) => Some(v.trim().parse::<u64>().map_err(|_| {
                S3Error::invalid(
                    format!("HEAD {}", clip(key, 120)),
                    format!("bad Content-Length {}", quoted(v, 40)),
                )
            })?),
            None => None,
        };
        Ok(Head {
            size,
            etag: a.header("etag").map(str::to_owned),
        })
    }

    /// DeleteObject of `key`.
    pub async fn delete(&self, rec: &Recorder, key: &str) -> Result<(), S3Error> {
        let p = self.plan(
            "delete-object",
            Method::DELETE,
            Some(key),
            &[],
            Vec::new(),
            Bytes::new(),
        );
        self.http.call(rec, &p.request(), &[200, 204]).await?;
        Ok(())
    }

    /// CopyObject of `from` to `to` (server-side; an answer of 200 whose body is an
    /// `<Error>` is a failure, as S3 documents for copies that fail after they began).
    pub async fn copy(&self, rec: &Recorder, from: &str, to: &str) -> Result<(), S3Error> {
        let source = self.path_of(Some(from));
        let p = self.plan(
            "copy-object",
            Method::PUT,
            Some(to),
            &[],
            vec![("x-amz-copy-source", source)],
            Bytes::new(),
        );
        let a = self.http.call(rec, &p.request(), &[200]).await?;
        let head = &a.body[..a.body.len().min(4096)];
        if String::from_utf8_lossy(head).contains("<Error>") {
            return Err(S3Error::invalid(
                format!("CopyObject {} -> {}", clip(from, 120), clip(to, 120)),
                format!(
                    "answered 200 with an error: {}",
                    crate::http::client::first_line_of(&a.body)
                ),
            ));
        }
        Ok(())
    }

    /// One ListObjectsV2 page under `prefix` from `token`, each object handed to `visit` as
    /// its `</Contents>` arrives (an error from `visit` stops the request). Returns the page's
    /// own fields.
    pub async fn list_page(
        &self,
        rec: &Recorder,
        prefix: &str,
        token: Option<&str>,
        visit: &mut (dyn FnMut(Object) -> Result<(), String> + Send),
    ) -> Result<PageEnd, S3Error> {
        let mut query = vec![("list-type", "2")];
        if !prefix.is_empty() {
            query.push(("prefix", prefix));
        }
        if let Some(t) = token {
            query.push(("continuation-token", t));
        }
        let p = self.plan(
            "list-objects",
            Method::GET,
            None,
            &query,
            Vec::new(),
            Bytes::new(),
        );
        let what = format!("ListObjectsV2 of {}/{}", self.bucket, clip(prefix, 120));
        let mut reader = Page {
            what: &what,
            items: Counted::new(visit),
            end: None,
        };
        self.http
            .call_streamed(rec, &p.request(), &[200], &mut reader)
            .await?;
        reader.end.ok_or_else(|| S3Error::BadListing {
            what: what.clone(),
            reason: "the answer was read but not as a listing".into(),
        })
    }
}

/// A ListObjectsV2 answer read as it arrives.
struct Page<'v> {
    what: &'v str,
    items: Counted<'v, Object, String>,
    end: Option<PageEnd>,
}

impl crate::http::BodyReader for Page<'_> {
    fn reads(&self, status: u16) -> bool {
        status == 200
    }

    fn read<'a>(&'a mut self, body: hyper::body::Incoming, cap: u64) -> BodyRead<'a> {
        Box::pin(async move {
            let what = self.what;
            let items = &mut self.items;
            let (n, end) = read_listing(body, cap, &mut |o: Object| items.visit(o))
                .await
                .map_err(|e| match e {
                    Stop::Read(d) => StreamError::Read(d),
                    Stop::TooLarge(d) => StreamError::TooLarge(d),
                    Stop::Bad(reason) => StreamError::Answer(Box::new(S3Error::BadListing {
                        what: what.to_owned(),
                        reason,
                    })),
                    Stop::Visit(detail) => StreamError::Answer(Box::new(S3Error::Listing {
                        what: what.to_owned(),
                        detail,
                    })),
                })?;
            self.end = Some(end);
            Ok(n)
        })
    }

    fn delivered(&self) -> u64 {
        self.items.delivered
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_path_style_and_signed() {
        let t = Target::parse("http://127.0.0.1:9000", false).unwrap();
        let c = S3Client::new(
            t,
            Credentials {
                access_key: "ak".into(),
                secret_key: "sk".into(),
            },
            "vault",
        )
        .with_clock(Arc::new(|| 1_369_353_600));
        assert_eq!(c.path_of(Some("Wiki/a b.md")), "/vault/Wiki/a%20b.md");
        assert_eq!(c.path_of(Some("Wiki/")), "/vault/Wiki/");
        let p = c.plan(
            "list-objects",
            Method::GET,
            None,
            &[("list-type", "2"), ("prefix", "a/")],
            Vec::new(),
            Bytes::new(),
        );
        assert_eq!(p.href, "/vault?list-type=2&prefix=a%2F");
        let auth = &p
            .headers
            .iter()
            .find(|(k, _)| *k == "authorization")
            .unwrap()
            .1;
        assert!(
            auth.starts_with(
                "AWS4-HMAC-SHA256 Credential=ak/20130524/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature="
            ),
            "{auth}"
        );
        assert_eq!(content_type("a/B.MD"), "text/markdown; charset=utf-8");
        assert_eq!(content_type("a/b"), "application/octet-stream");
    }
}
