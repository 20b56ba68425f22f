//! The routes of obsync wire protocol v1: one enum the server routes by, counts in
//! `/metrics`, and the load generator labels its requests with.
//!
//! Each route has a method, a path shape, and two labels that are interfaces: the server's
//! `/metrics` label (`post_version`, in `obsync_requests_total{route=..}`) and the generator's
//! label (`post-version`), which baselines hold inside metric keys such as
//! `cold_push.post-version.p50_us`. Both are pinned by a test; changing one silently renames
//! a stored metric. Every `match` over [`Route`] is exhaustive: a route added here must be
//! handled everywhere, there is no fallback arm.

use std::fmt;

/// The HTTP method a route takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RouteMethod {
    Get,
    Post,
    Put,
}

impl RouteMethod {
    /// The method's token as sent on the wire and signed in the canonical string.
    pub fn as_str(self) -> &'static str {
        match self {
            RouteMethod::Get => "GET",
            RouteMethod::Post => "POST",
            RouteMethod::Put => "PUT",
        }
    }
}

impl fmt::Display for RouteMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One route of the protocol page (health, enrolment, chunks, files, change feed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Route {
    /// `GET /livez`
    Livez,
    /// `GET /readyz`
    Readyz,
    /// `GET /metrics` (the reference server's counters)
    Metrics,
    /// `POST /v1/setup`
    Setup,
    /// `POST /v1/pairing`
    PairingCreate,
    /// `POST /v1/pairing/{id}/claim`
    PairingClaim,
    /// `POST /v1/pairing/{id}/approve`
    PairingApprove,
    /// `GET /v1/pairing/{id}/envelope`
    PairingEnvelope,
    /// `POST /v1/chunks/exists`
    ChunksExists,
    /// `POST /v1/chunks/get`
    ChunksGet,
    /// `GET /v1/chunks/{sid}`
    GetChunk,
    /// `PUT /v1/chunks/{sid}`
    PutChunk,
    /// `POST /v1/files/{file_id}/versions`
    PostVersion,
    /// `GET /v1/files/{file_id}`
    GetFile,
    /// `GET /v1/files?after=&limit=`
    ListFiles,
    /// `GET /v1/changes?since=&wait=&limit=`
    Changes,
}

/// A request path the router recognised: the route and its one path parameter (a pairing
/// id, a sid or a file id), if the route has one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Matched<'a> {
    pub route: Route,
    pub param: Option<&'a str>,
}

impl Route {
    /// Every route, in the order of the protocol page.
    pub const ALL: [Route; 16] = [
        Route::Livez,
        Route::Readyz,
        Route::Metrics,
        Route::Setup,
        Route::PairingCreate,
        Route::PairingClaim,
        Route::PairingApprove,
        Route::PairingEnvelope,
        Route::ChunksExists,
        Route::ChunksGet,
        Route::GetChunk,
        Route::PutChunk,
        Route::PostVersion,
        Route::GetFile,
        Route::ListFiles,
        Route::Changes,
    ];

    /// The method the route takes; any other gets `405`.
    pub fn method(self) -> RouteMethod {
        match self {
            Route::Livez
            | Route::Readyz
            | Route::Metrics
            | Route::PairingEnvelope
            | Route::GetChunk
            | Route::GetFile
            | Route::ListFiles
            | Route::Changes => RouteMethod::Get,
            Route::Setup
            | Route::PairingCreate
            | Route::PairingClaim
            | Route::PairingApprove
            | Route::ChunksExists
            | Route::ChunksGet
            | Route::PostVersion => RouteMethod::Post,
            Route::PutChunk => RouteMethod::Put,
        }
    }

    /// The label in the reference server's `obsync_requests_total{route=..}`.
    pub fn metric_label(self) -> &'static str {
        match self {
            Route::Livez => "livez",
            Route::Readyz => "readyz",
            Route::Metrics => "metrics",
            Route::Setup => "setup",
            Route::PairingCreate => "pairing_create",
            Route::PairingClaim => "pairing_claim",
            Route::PairingApprove => "pairing_approve",
            Route::PairingEnvelope => "pairing_envelope",
            Route::ChunksExists => "chunks_exists",
            Route::ChunksGet => "chunks_get",
            Route::GetChunk => "get_chunk",
            Route::PutChunk => "put_chunk",
            Route::PostVersion => "post_version",
            Route::GetFile => "get_file",
            Route::ListFiles => "list_files",
            Route::Changes => "changes",
        }
    }

    /// The load generator's label: per-route statistics, interval-log tags, errors, and the
    /// route part of metric keys (`cold_push.post-version.p50_us`).
    pub fn label(self) -> &'static str {
        match self {
            Route::Livez => "livez",
            Route::Readyz => "readyz",
            Route::Metrics => "metrics",
            Route::Setup => "setup",
            Route::PairingCreate => "pairing",
            Route::PairingClaim => "claim",
            Route::PairingApprove => "approve",
            Route::PairingEnvelope => "envelope",
            Route::ChunksExists => "chunks-exists",
            Route::ChunksGet => "chunks-get",
            Route::GetChunk => "get-chunk",
            Route::PutChunk => "put-chunk",
            Route::PostVersion => "post-version",
            Route::GetFile => "get-file",
            Route::ListFiles => "list-files",
            Route::Changes => "changes",
        }
    }

    /// The route a request of `method` to `path` (no query) is for, and its path parameter.
    /// `None` is `404`. The path is matched as sent: `//livez` or `/v1//changes` is no
    /// route (a router that collapses slashes answers paths the signer never signed).
    /// A request to a known path with another method matches the path's route (the server
    /// then answers `405`); only `/v1/chunks/{sid}` takes two methods, told apart here.
    pub fn recognize<'a>(method: &str, path: &'a str) -> Option<Matched<'a>> {
        let rest = path.strip_prefix('/')?;
        let mut segs = [""; 5];
        let mut n = 0;
        for s in rest.split('/') {
            if n == segs.len() || s.is_empty() {
                return None;
            }
            segs[n] = s;
            n += 1;
        }
        let m = |route, param| {
            Some(Matched {
                route,
                param: Some(param),
            })
        };
        let plain = |route| Some(Matched { route, param: None });
        match &segs[..n] {
            ["livez"] => plain(Route::Livez),
            ["readyz"] => plain(Route::Readyz),
            ["metrics"] => plain(Route::Metrics),
            ["v1", "setup"] => plain(Route::Setup),
            ["v1", "pairing"] => plain(Route::PairingCreate),
            ["v1", "pairing", id, "claim"] => m(Route::PairingClaim, id),
            ["v1", "pairing", id, "approve"] => m(Route::PairingApprove, id),
            ["v1", "pairing", id, "envelope"] => m(Route::PairingEnvelope, id),
            ["v1", "chunks", "exists"] => plain(Route::ChunksExists),
            ["v1", "chunks", "get"] => plain(Route::ChunksGet),
            ["v1", "chunks", sid] if method == "GET" => m(Route::GetChunk, sid),
            ["v1", "chunks", sid] => m(Route::PutChunk, sid),
            ["v1", "files", id, "versions"] => m(Route::PostVersion, id),
            ["v1", "files", id] => m(Route::GetFile, id),
            ["v1", "files"] => plain(Route::ListFiles),
            ["v1", "changes"] => plain(Route::Changes),
            _ => None,
        }
    }
}

impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The labels are stored in baselines and scraped from `/metrics`: pinned here.
    #[test]
    fn labels_are_pinned() {
        let got: Vec<(&str, &str, &str)> = Route::ALL
            .iter()
            .map(|r| (r.method().as_str(), r.metric_label(), r.label()))
            .collect();
        assert_eq!(
            got,
            [
                ("GET", "livez", "livez"),
                ("GET", "readyz", "readyz"),
                ("GET", "metrics", "metrics"),
                ("POST", "setup", "setup"),
                ("POST", "pairing_create", "pairing"),
                ("POST", "pairing_claim", "claim"),
                ("POST", "pairing_approve", "approve"),
                ("GET", "pairing_envelope", "envelope"),
                ("POST", "chunks_exists", "chunks-exists"),
                ("POST", "chunks_get", "chunks-get"),
                ("GET", "get_chunk", "get-chunk"),
                ("PUT", "put_chunk", "put-chunk"),
                ("POST", "post_version", "post-version"),
                ("GET", "get_file", "get-file"),
                ("GET", "list_files", "list-files"),
                ("GET", "changes", "changes"),
            ]
        );
    }

    #[test]
    fn every_route_is_recognised_from_its_own_path() {
        let sid = "ab".repeat(32);
        let id = "cd".repeat(16);
        for r in Route::ALL {
            let path = match r {
                Route::Livez => "/livez".to_owned(),
                Route::Readyz => "/readyz".to_owned(),
                Route::Metrics => "/metrics".to_owned(),
                Route::Setup => "/v1/setup".to_owned(),
                Route::PairingCreate => "/v1/pairing".to_owned(),
                Route::PairingClaim => format!("/v1/pairing/{id}/claim"),
                Route::PairingApprove => format!("/v1/pairing/{id}/approve"),
                Route::PairingEnvelope => format!("/v1/pairing/{id}/envelope"),
                Route::ChunksExists => "/v1/chunks/exists".to_owned(),
                Route::ChunksGet => "/v1/chunks/get".to_owned(),
                Route::GetChunk | Route::PutChunk => format!("/v1/chunks/{sid}"),
                Route::PostVersion => format!("/v1/files/{id}/versions"),
                Route::GetFile => format!("/v1/files/{id}"),
                Route::ListFiles => "/v1/files".to_owned(),
                Route::Changes => "/v1/changes".to_owned(),
            };
            let got = Route::recognize(r.method().as_str(), &path).unwrap();
            assert_eq!(got.route, r, "{path}");
            if let Some(p) = got.param {
                assert!(p == sid || p == id, "{path}: {p}");
            }
        }
    }

    #[test]
    fn slashes_are_not_collapsed() {
        for path in [
            "//livez",
            "/livez/",
            "livez",
            "",
            "/",
            "/v1//changes",
            "/v1/chunks//",
            "/v1/files//versions",
            "/v1/pairing/x/claim/more",
            "/v1/unknown",
        ] {
            assert_eq!(Route::recognize("GET", path), None, "{path:?}");
        }
    }

    #[test]
    fn wrong_method_still_names_the_route() {
        assert_eq!(
            Route::recognize("DELETE", "/v1/changes").map(|m| m.route),
            Some(Route::Changes)
        );
        assert_eq!(
            Route::recognize("POST", &format!("/v1/chunks/{}", "a".repeat(64))).map(|m| m.route),
            Some(Route::PutChunk)
        );
    }
}
