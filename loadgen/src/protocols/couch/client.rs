//! One CouchDB request: a JSON body sent to the database (or the server's root) over the
//! plain HTTP client with Basic auth that every unsigned protocol shares ([`HttpClient`]: one deadline per
//! exchange shared by its retries, answers capped before they are read, counted per route in
//! a [`Recorder`]), and its answer parsed as the message it should be ([`super::wire`]).

use std::time::Duration;

use bytes::Bytes;
use hyper::Method;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde::de::DeserializeOwned;

use super::error::CouchError;
use super::wire;
use crate::feed::FeedBounds;
use crate::http::Request;
use crate::http::{BasicAuth, HttpClient};
use crate::stats::Recorder;
use crate::target::Target;

/// Bound on one exchange, every retry included: the other clients' figure.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest answer read: 64 MiB. The largest honest answer is a `_bulk_get` batch of a big
/// attachment's chunks: LiveSync cuts a binary file into about 12 pieces, so a batch holds
/// about one file, base64 (4/3 of its bytes); the hazards profile's largest file is 4.5 MiB.
pub const MAX_ANSWER_BYTES: u64 = 64 * 1024 * 1024;

/// Everything but RFC 3986's unreserved characters is percent-encoded in a document id.
const ID: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// A client of one CouchDB database: cheap to clone (shared pools).
#[derive(Clone, Debug)]
pub struct CouchClient {
    /// Requests to the server's root (`GET /`).
    server: HttpClient,
    /// Requests under `/{db}`.
    db: HttpClient,
    name: String,
    /// How far one replication pass's read of `_changes` may go.
    feed: FeedBounds,
}

/// A database name CouchDB accepts: a lower-case letter, then lower-case letters, digits and
/// `_$()+-/`.
pub fn check_db_name(name: &str) -> Result<(), CouchError> {
    let mut chars = name.chars();
    let ok = chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_$()+-/".contains(c))
        && name.len() <= 238;
    if ok {
        Ok(())
    } else {
        Err(CouchError::Invalid {
            what: format!("database name {name:?}"),
            reason: "must start with a lower-case letter and hold only a-z, 0-9 and _$()+-/".into(),
        })
    }
}

impl CouchClient {
    /// A client of database `db` on `target`.
    pub fn new(
        target: Target,
        db: &str,
        auth: Option<&BasicAuth>,
    ) -> Result<CouchClient, CouchError> {
        check_db_name(db)?;
        let root = format!("/{db}/");
        Ok(CouchClient {
            server: HttpClient::new(target.clone(), auth),
            feed: crate::protocols::couch::FEED_DEFAULT,
            db: HttpClient::with_root(target, auth, &root),
            name: db.to_owned(),
        })
    }

    /// This client with other feed walk bounds ([`crate::protocols::couch::FEED_DEFAULT`] unless set).
    pub fn with_feed_bounds(mut self, bounds: FeedBounds) -> CouchClient {
        self.feed = bounds;
        self
    }

    /// The bounds of one walk of the database's `_changes` feed.
    pub fn feed_bounds(&self) -> FeedBounds {
        self.feed
    }

    /// A client of `http://HOST:PORT/DB` (loopback unless `allow_remote`).
    pub fn from_url(
        url: &str,
        auth: Option<&BasicAuth>,
        allow_remote: bool,
    ) -> Result<CouchClient, CouchError> {
        let invalid = |reason: &str| CouchError::Invalid {
            what: format!("CouchDB target {url:?}"),
            reason: reason.into(),
        };
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| invalid("must be http://HOST:PORT/DB"))?;
        let (authority, db) = rest
            .split_once('/')
            .ok_or_else(|| invalid("names no database: give http://HOST:PORT/DB"))?;
        let db = db.trim_end_matches('/');
        if db.is_empty() {
            return Err(invalid("names no database: give http://HOST:PORT/DB"));
        }
        let target = Target::parse(&format!("http://{authority}"), allow_remote)
            .map_err(|e| invalid(&e.to_string()))?;
        CouchClient::new(target, db, auth)
    }

    /// The database's name.
    pub fn db_name(&self) -> &str {
        &self.name
    }

    pub fn target(&self) -> &Target {
        self.db.target()
    }

    /// The plain HTTP client under `/{db}` (route load sends over it).
    pub(crate) fn http(&self) -> &HttpClient {
        &self.db
    }

    /// The href of document `id` under the database (`_local/…` keeps its `/`).
    pub fn doc_href(id: &str) -> String {
        match id.strip_prefix("_local/") {
            Some(rest) => format!("/_local/{}", utf8_percent_encode(rest, ID)),
            None => format!("/{}", utf8_percent_encode(id, ID)),
        }
    }

    /// One request under the database, `route` its name in the counts; `None` body: none.
    pub(crate) fn request<'a>(
        route: &'a str,
        method: Method,
        href: &'a str,
        body: Option<Vec<u8>>,
    ) -> Request<'a> {
        let mut req = Request::new(route, method, href);
        req.timeout = REQUEST_TIMEOUT;
        req.max_body = MAX_ANSWER_BYTES;
        req.cap_name = "couch::MAX_ANSWER_BYTES";
        req.headers.push(("accept", "application/json".to_owned()));
        if let Some(b) = body {
            req.headers
                .push(("content-type", "application/json".to_owned()));
            req.body = Bytes::from(b);
        }
        req
    }

    /// Sends `req` under the database; its status must be one of `ok`. Returns status and
    /// body.
    pub(crate) async fn call(
        &self,
        rec: &Recorder,
        req: &Request<'_>,
        ok: &[u16],
    ) -> Result<(u16, Bytes), CouchError> {
        let a = self.db.call(rec, req, ok).await?;
        Ok((a.status, a.body))
    }

    /// [`CouchClient::call`], the answer parsed as `T` (refused as `what` when it is not).
    pub(crate) async fn json<T: DeserializeOwned>(
        &self,
        rec: &Recorder,
        req: &Request<'_>,
        ok: &[u16],
        what: &'static str,
    ) -> Result<T, CouchError> {
        let (_, body) = self.call(rec, req, ok).await?;
        wire::parse(what, &body).map_err(CouchError::Message)
    }

    /// `GET /`: the server's welcome, which must name CouchDB (`"couchdb": "Welcome"`).
    pub async fn welcome(&self, rec: &Recorder) -> Result<wire::Welcome, CouchError> {
        let req = CouchClient::request("welcome", Method::GET, "/", None);
        let a = self.server.call(rec, &req, &[200]).await?;
        let w: wire::Welcome = wire::parse("welcome", &a.body).map_err(CouchError::Message)?;
        if w.couchdb.is_none() && w.express_pouchdb.is_none() {
            return Err(CouchError::protocol(
                "welcome",
                "GET / does not answer as CouchDB (no \"couchdb\" or \"express-pouchdb\" member)",
            ));
        }
        Ok(w)
    }

    /// `GET /{db}`: whether the database exists.
    pub async fn exists(&self, rec: &Recorder) -> Result<bool, CouchError> {
        let req = CouchClient::request("db-info", Method::GET, "/", None);
        let (status, _) = self.call(rec, &req, &[200, 404]).await?;
        Ok(status == 200)
    }

    /// `PUT /{db}`: creates the database (412: it exists already, which is fine).
    pub async fn create(&self, rec: &Recorder) -> Result<(), CouchError> {
        let req = CouchClient::request("create-db", Method::PUT, "/", None);
        self.call(rec, &req, &[201, 202, 412]).await?;
        Ok(())
    }

    /// `GET /{db}/{id}`: the document, or `None` when there is none.
    pub async fn get_doc(
        &self,
        rec: &Recorder,
        route: &'static str,
        id: &str,
    ) -> Result<Option<serde_json::Value>, CouchError> {
        let href = CouchClient::doc_href(id);
        let req = CouchClient::request(route, Method::GET, &href, None);
        let (status, body) = self.call(rec, &req, &[200, 404]).await?;
        if status == 404 {
            return Ok(None);
        }
        wire::parse("document", &body)
            .map(Some)
            .map_err(CouchError::Message)
    }

    /// `PUT /{db}/{id}` of `doc` (with its `_rev` when it replaces one); returns the new rev.
    pub async fn put_doc(
        &self,
        rec: &Recorder,
        route: &'static str,
        id: &str,
        doc: &serde_json::Value,
    ) -> Result<String, CouchError> {
        let href = CouchClient::doc_href(id);
        let body = serde_json::to_vec(doc).expect("a JSON value serialises");
        let req = CouchClient::request(route, Method::PUT, &href, Some(body));
        #[derive(serde::Deserialize)]
        struct Put {
            rev: String,
        }
        let put: Put = self
            .json(rec, &req, &[200, 201, 202], "document write")
            .await?;
        Ok(put.rev)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_a_database_and_ids_are_encoded() {
        let c = CouchClient::from_url("http://127.0.0.1:5984/vault", None, false).unwrap();
        assert_eq!(c.db_name(), "vault");
        assert!(CouchClient::from_url("http://127.0.0.1:5984/", None, false).is_err());
        assert!(CouchClient::from_url("http://127.0.0.1:5984/Vault", None, false).is_err());
        assert!(CouchClient::from_url("https://127.0.0.1:5984/v", None, false).is_err());
        assert_eq!(CouchClient::doc_href("h:abc"), "/h%3Aabc");
        assert_eq!(CouchClient::doc_href("/_a/b c.md"), "/%2F_a%2Fb%20c.md");
        assert_eq!(
            CouchClient::doc_href("_local/obsydian_livesync_milestone"),
            "/_local/obsydian_livesync_milestone"
        );
    }
}
