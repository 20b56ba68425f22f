//! One WebDAV request: the plain HTTP client ([`crate::http::HttpClient`]) with the
//! methods the Remotely Save plugin's sync uses (MKCOL, PUT, GET, PROPFIND, MOVE, DELETE),
//! a PROPFIND answer streamed through the multistatus parser, and the walk bounds every
//! listing of this client keeps to.

use bytes::Bytes;
use hyper::Method;

use super::error::DavError;
use super::multistatus::{self, DavEntry, read_multistatus};
use crate::http::client::{BodyRead, Counted};
use crate::http::{BasicAuth, HttpClient, Request, StreamError, method};
pub use crate::stats::Recorder;
use crate::target::Target;
use crate::walk::WalkBounds;

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

/// A WebDAV client for one server: the plain HTTP client (cheap to clone, shared pool) and
/// the bounds of its walks. Its plain requests are the HTTP client's ([`std::ops::Deref`]).
#[derive(Clone, Debug)]
pub struct DavClient {
    http: HttpClient,
    walk: WalkBounds,
}

impl std::ops::Deref for DavClient {
    type Target = HttpClient;
    fn deref(&self) -> &HttpClient {
        &self.http
    }
}

/// A PROPFIND answer read as it arrives: each entry handed to the visitor once its
/// `</response>` is read.
struct Multistatus<'v> {
    what: &'v str,
    items: Counted<'v, DavEntry, DavError>,
}

impl crate::http::BodyReader for Multistatus<'_> {
    fn reads(&self, status: u16) -> bool {
        status == 207
    }

    fn read<'a>(&'a mut self, body: hyper::body::Incoming, cap: u64) -> BodyRead<'a> {
        Box::pin(async move {
            let items = &mut self.items;
            let (n, _) = read_multistatus(body, cap, self.what, &mut |e: DavEntry| items.visit(e))
                .await
                .map_err(|e| match e {
                    multistatus::StreamError::Read(d) => StreamError::Read(d),
                    multistatus::StreamError::TooLarge(d) => StreamError::TooLarge(d),
                    multistatus::StreamError::Answer(e) => StreamError::Answer(Box::new(e)),
                })?;
            Ok(n)
        })
    }

    fn delivered(&self) -> u64 {
        self.items.delivered
    }
}

impl DavClient {
    /// A client for `target` (the server's root is the vault's root).
    pub fn new(target: Target, auth: Option<&BasicAuth>) -> DavClient {
        DavClient::with_root(target, auth, "/")
    }

    /// A client for `target` whose vault lives under the collection `root` (`/dav/`; `/` is
    /// the server's root). `root` is a plain path, already checked
    /// ([`crate::launch::normalize_root`]).
    pub fn with_root(target: Target, auth: Option<&BasicAuth>, root: &str) -> DavClient {
        DavClient {
            http: HttpClient::with_root(target, auth, root),
            walk: WalkBounds::DEFAULT,
        }
    }

    /// The plain HTTP client underneath.
    pub fn http(&self) -> &HttpClient {
        &self.http
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

    /// The encoded href of vault path `rel` ("" is the root); collections end in `/`
    /// ([`HttpClient::href`]).
    pub fn href(rel: &str, collection: bool) -> String {
        HttpClient::href(rel, collection)
    }

    /// The vault path of a decoded href path as this client's server lists it (under its
    /// root); `None` for the root itself or a path outside it.
    pub fn rel<'p>(&self, path: &'p str) -> Option<&'p str> {
        let prefix = super::multistatus::decode_href(self.http.prefix()).unwrap_or_default();
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
        let prefix = super::multistatus::decode_href(self.http.prefix()).unwrap_or_default();
        match path.strip_prefix(prefix.as_str()) {
            Some(rest) if rest.bytes().all(|b| b == b'/') => Place::Root,
            _ => Place::Outside,
        }
    }
    /// The vault path of a decoded href path (`/Wiki/x.md` → `Wiki/x.md`), trailing `/`
    /// dropped; `None` for the root.
    pub fn rel_of(path: &str) -> Option<&str> {
        let p = path.trim_start_matches('/').trim_end_matches('/');
        (!p.is_empty()).then_some(p)
    }
    /// `MKCOL` of folder `rel`. 405 (it exists already) counts as done, as the `webdav`
    /// client's `createDirectory` treats it.
    pub async fn mkcol(&self, rec: &Recorder, rel: &str) -> Result<u16, DavError> {
        let href = DavClient::href(rel, true);
        let req = Request::new("mkcol", method("MKCOL"), &href);
        Ok(self
            .http
            .call(rec, &req, &[200, 201, 204, 405])
            .await?
            .status)
    }

    /// `PUT` of file `rel`.
    pub async fn put(&self, rec: &Recorder, rel: &str, body: Bytes) -> Result<u16, DavError> {
        let href = DavClient::href(rel, false);
        let mut req = Request::new("put-file", Method::PUT, &href);
        req.headers
            .push(("content-type", "application/octet-stream".to_owned()));
        req.body = body;
        Ok(self.http.call(rec, &req, &[200, 201, 204]).await?.status)
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
        let mut req = Request::new("get-file", Method::GET, &href);
        if let Some(n) = size
            && n < req.max_body
        {
            req.max_body = n;
            req.cap_name = "the size its listing gave";
        }
        Ok(self.http.call(rec, &req, &[200]).await?.body)
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
        let mut req = Request::new(depth.route(), method("PROPFIND"), &href);
        req.headers.push(("accept", "text/plain".to_owned()));
        req.headers.push(("depth", depth.header().to_owned()));
        let what = format!("PROPFIND {}", multistatus::clip(&href, 200));
        let mut reader = Multistatus {
            what: &what,
            items: Counted::new(visit),
        };
        self.http
            .call_streamed(rec, &req, &[207], &mut reader)
            .await?;
        Ok(reader.items.delivered)
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
        let mut req = Request::new("move", method("MOVE"), &href);
        req.headers
            .push(("destination", self.url(&DavClient::href(to, collection))));
        req.headers.push(("overwrite", "T".to_owned()));
        Ok(self.http.call(rec, &req, &[201, 204]).await?.status)
    }

    /// `DELETE` of `rel` (a folder when `collection`).
    pub async fn delete(
        &self,
        rec: &Recorder,
        rel: &str,
        collection: bool,
    ) -> Result<u16, DavError> {
        let href = DavClient::href(rel, collection);
        let req = Request::new("delete", Method::DELETE, &href);
        Ok(self.http.call(rec, &req, &[200, 204]).await?.status)
    }
}

/// Where a listed path lies ([`DavClient::locate`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place<'p> {
    Root,
    Inside(&'p str),
    Outside,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocols::webdav::multistatus::decode_href;

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
}
