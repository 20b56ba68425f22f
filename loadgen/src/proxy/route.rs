//! Route templates: which route a request counts under. A request is `METHOD /path`; its
//! template collapses what varies from one request to the next, so that one route's requests
//! are counted together:
//!
//! - a path segment that names a file or folder of the vault (the names the caller gives,
//!   matched after percent-decoding) becomes `{path}`, and a run of them one `{path}`;
//! - an id becomes `{id}`: a number, a UUID, hex of 8 characters or more, or a base64-like
//!   token (16 characters or more of the base64 alphabets with a digit, a letter and the
//!   frequent changes between upper case, lower case and digits of random text, which a
//!   slug or a word has not);
//! - the segment after a CouchDB `_local` segment is a local document's id and becomes
//!   `{id}` whatever it looks like (PouchDB's replication checkpoints are `_local/` and an MD5
//!   in base64 with `/` as `.` and `+` as `_`, its `=` percent-encoded; CouchDB's replicator's
//!   are hex); `_local%2F<id>` in one segment is `_local_{id}` too;
//! - the query is left out, and a trailing `/`.
//!
//! A user's pattern (`NAME=METHOD REGEX`, the regex over the path without its query) names a
//! route instead, the first that matches; method `*` matches any. A GraphQL request (a JSON
//! body or a query with an `operationName`) adds `:OPERATION` to its route.
//!
//! A route is written as a key segment: ASCII letters, digits, `_`, `-`, `{`, `}` and `:`,
//! the path's `/` as `_` (`PUT /notes/a.md` with both names in the vault is `PUT_{path}`,
//! `GET /v1/chunks/3fa9…` is `GET_v1_chunks_{id}`, the root `/` is `GET_`). Pure.

use std::collections::BTreeSet;

/// The longest path segment kept in a route as written (longer ones are cut).
const MAX_SEGMENT: usize = 48;
/// CouchDB's segment of local (not replicated) documents: `/{db}/_local/{id}`, where PouchDB
/// keeps a replication's checkpoint under an id of its own making.
const LOCAL_SEGMENT: &str = "_local";
/// A `_local` document's path segment with its `/` percent-encoded (`_local%2F<id>`).
const LOCAL_PREFIX: &str = "_local/";
/// The longest operation name kept.
const MAX_OPERATION: usize = 64;
/// The largest regex a `--route-pattern` may compile to (the `regex` crate's own limit is
/// 10 MiB; a route pattern is a line of text).
const MAX_PATTERN_BYTES: usize = 1 << 20;

/// A user's named route: requests of `method` (`*`: any) whose path matches `regex`.
#[derive(Debug, Clone)]
pub struct RoutePattern {
    pub name: String,
    pub method: String,
    pub regex: regex::Regex,
}

impl RoutePattern {
    /// Parses `NAME=METHOD REGEX` (`upload=PATCH ^/files/[^/]+$`). NAME is a key segment:
    /// ASCII letters, digits, `_` and `-`.
    pub fn parse(s: &str) -> Result<RoutePattern, String> {
        let (name, rest) = s
            .split_once('=')
            .ok_or_else(|| format!("route pattern {s:?} is not NAME='METHOD REGEX'"))?;
        let name = name.trim();
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(format!(
                "route pattern {s:?}: the name must be ASCII letters, digits, '_' or '-'"
            ));
        }
        let rest = rest.trim();
        let (method, re) = rest
            .split_once(char::is_whitespace)
            .ok_or_else(|| format!("route pattern {s:?}: give a method and a regex"))?;
        if method != "*" && !method.bytes().all(|b| b.is_ascii_uppercase()) {
            return Err(format!(
                "route pattern {s:?}: the method must be upper-case letters or '*'"
            ));
        }
        let regex = regex::RegexBuilder::new(re.trim())
            .size_limit(MAX_PATTERN_BYTES)
            .build()
            .map_err(|e| {
                let first = e.to_string();
                let first = first.lines().last().unwrap_or("").trim().to_owned();
                format!("route pattern {s:?}: the regex does not compile: {first}")
            })?;
        Ok(RoutePattern {
            name: name.to_owned(),
            method: method.to_owned(),
            regex,
        })
    }
}

/// Turns requests into routes (see the module's doc).
#[derive(Debug, Clone, Default)]
pub struct Classifier {
    pub patterns: Vec<RoutePattern>,
    /// File and folder names of the vault: a segment equal to one is part of a `{path}`.
    pub names: BTreeSet<String>,
}

impl Classifier {
    /// The route of a request line's method and target (origin form, `/path?query`; an
    /// absolute URI's path is taken).
    pub fn route(&self, method: &str, target: &str) -> String {
        let path = path_of(target);
        if let Some(p) = self
            .patterns
            .iter()
            .find(|p| (p.method == "*" || p.method == method) && p.regex.is_match(path))
        {
            return p.name.clone();
        }
        let mut out = clean(method, 16);
        let mut in_path = false;
        let mut after_local = false;
        let segments: Vec<&str> = path.trim_end_matches('/').split('/').skip(1).collect();
        if segments.is_empty() {
            out.push('_');
        }
        for seg in segments {
            let decoded = percent_encoding::percent_decode_str(seg).decode_utf8_lossy();
            if std::mem::take(&mut after_local) && !decoded.is_empty() {
                // A `_local` document's id, whatever it looks like.
                in_path = false;
                out.push_str("_{id}");
                continue;
            }
            if let Some(id) = decoded.strip_prefix(LOCAL_PREFIX)
                && !id.is_empty()
            {
                // `_local%2F<id>`: one segment, the `/` percent-encoded.
                in_path = false;
                out.push_str("__local_{id}");
                continue;
            }
            if !decoded.is_empty() && self.names.contains(decoded.as_ref()) {
                if !in_path {
                    out.push_str("_{path}");
                }
                in_path = true;
                continue;
            }
            in_path = false;
            after_local = decoded == LOCAL_SEGMENT;
            out.push('_');
            if is_id(&decoded) {
                out.push_str("{id}");
            } else {
                out.push_str(&clean(&decoded, MAX_SEGMENT));
            }
        }
        out
    }

    /// `route` refined by a GraphQL operation name.
    pub fn refine(route: &str, operation: &str) -> String {
        format!("{route}:{}", clean(operation, MAX_OPERATION))
    }
}

/// The path of a request target: without the query, an absolute URI's scheme and authority
/// dropped.
fn path_of(target: &str) -> &str {
    let t = target.split(['?', '#']).next().unwrap_or("");
    if let Some(rest) = t
        .strip_prefix("http://")
        .or_else(|| t.strip_prefix("https://"))
    {
        return rest.find('/').map_or("/", |i| &rest[i..]);
    }
    if t.is_empty() { "/" } else { t }
}

/// `s` as key characters: ASCII letters, digits, `_` and `-`; anything else `-`; at most
/// `max` characters.
fn clean(s: &str, max: usize) -> String {
    s.chars()
        .take(max)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// Whether a path segment is an id (see the module's doc).
pub fn is_id(s: &str) -> bool {
    let b = s.as_bytes();
    if b.is_empty() {
        return false;
    }
    if b.iter().all(u8::is_ascii_digit) {
        return true;
    }
    if is_uuid(b) {
        return true;
    }
    if b.len() >= 8 && b.iter().all(u8::is_ascii_hexdigit) {
        return true;
    }
    is_base64_like(b)
}

fn is_uuid(b: &[u8]) -> bool {
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| {
            if matches!(i, 8 | 13 | 18 | 23) {
                *c == b'-'
            } else {
                c.is_ascii_hexdigit()
            }
        })
}

/// 16 characters or more of the base64 alphabets (`=` only at the end), a digit and a letter
/// among them, and a change of class (upper, lower, digit) between at least 45 % of the
/// neighbouring letter and digit pairs: random base64 changes class at about 64 % of them
/// (1 − Σp² over 26 upper, 26 lower and 10 digits of 64), a camel-case title at about a third.
fn is_base64_like(b: &[u8]) -> bool {
    let body = {
        let mut end = b.len();
        while end > 0 && b[end - 1] == b'=' {
            end -= 1;
        }
        &b[..end]
    };
    if body.len() < 16
        || !body
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'-' | b'_'))
        || !body.iter().any(u8::is_ascii_digit)
        || !body.iter().any(u8::is_ascii_alphabetic)
    {
        return false;
    }
    let class = |c: u8| {
        if c.is_ascii_uppercase() {
            Some(0)
        } else if c.is_ascii_lowercase() {
            Some(1)
        } else if c.is_ascii_digit() {
            Some(2)
        } else {
            None
        }
    };
    let (mut pairs, mut changes) = (0usize, 0usize);
    for w in body.windows(2) {
        if let (Some(x), Some(y)) = (class(w[0]), class(w[1])) {
            pairs += 1;
            changes += usize::from(x != y);
        }
    }
    pairs >= 12 && changes * 100 >= pairs * 45
}

/// The GraphQL operation name of a request: `operationName` in a JSON object body (at most
/// `body`'s bytes, given whole), else in the target's query.
pub fn graphql_operation(target: &str, body: Option<&[u8]>) -> Option<String> {
    if let Some(b) = body
        && let Ok(serde_json::Value::Object(o)) = serde_json::from_slice::<serde_json::Value>(b)
        && let Some(serde_json::Value::String(op)) = o.get("operationName")
        && !op.is_empty()
    {
        return Some(op.clone());
    }
    let query = target.split_once('?')?.1;
    query.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == "operationName" && !v.is_empty()).then(|| {
            percent_encoding::percent_decode_str(v)
                .decode_utf8_lossy()
                .into_owned()
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classifier(names: &[&str], patterns: &[&str]) -> Classifier {
        Classifier {
            patterns: patterns
                .iter()
                .map(|p| RoutePattern::parse(p).unwrap())
                .collect(),
            names: names.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    #[test]
    fn ids_collapse_and_words_stay() {
        let c = classifier(&[], &[]);
        let r = |m: &str, t: &str| c.route(m, t);
        assert_eq!(
            r("GET", "/v1/files/123/versions/7"),
            "GET_v1_files_{id}_versions_{id}"
        );
        assert_eq!(
            r("DELETE", "/api/notes/3f2b8c1e-9a4d-4e6f-8b2a-1c3d5e7f9a0b"),
            "DELETE_api_notes_{id}"
        );
        let sha = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
        assert_eq!(r("PUT", &format!("/v1/chunks/{sha}")), "PUT_v1_chunks_{id}");
        assert_eq!(
            r("PATCH", "/files/dGhpcyBpcyBhIHR1cyB1cGxvYWQ0Mg"),
            "PATCH_files_{id}"
        );
        assert_eq!(r("PATCH", "/files/aB3xQ9kLm2Np7RtV"), "PATCH_files_{id}");
        // Words, slugs and camel case are not ids.
        assert_eq!(
            r("GET", "/api/my-long-note-name-2024"),
            "GET_api_my-long-note-name-2024"
        );
        assert_eq!(
            r("GET", "/api/CamelCaseNoteTitle2024"),
            "GET_api_CamelCaseNoteTitle2024"
        );
        assert_eq!(r("GET", "/v1/changes?since=42&wait=30"), "GET_v1_changes");
        assert_eq!(r("GET", "/"), "GET_");
        assert_eq!(r("OPTIONS", "http://127.0.0.1:8080/"), "OPTIONS_");
        assert_eq!(r("GET", "/feed/"), "GET_feed");
        // Characters outside the key alphabet become '-'.
        assert_eq!(r("GET", "/a.b/c d"), "GET_a-b_c-d");
        assert!(!is_id("deadbee"));
        assert!(is_id("deadbeef"));
        assert!(!is_id(""));
    }

    /// Checkpoint ids as PouchDB 9's `generateReplicationId` makes them (MD5 in base64, `/`
    /// as `.`, `+` as `_`) and its HTTP adapter's `encodeDocId` sends them (`=` as `%3D`), and
    /// a CouchDB replicator's (hex MD5, `+continuous`).
    #[test]
    fn local_document_ids_collapse_and_local_stays() {
        let c = classifier(&["vault"], &[]);
        let r = |m: &str, t: &str| c.route(m, t);
        for id in [
            "2bCvSRKiDPQwssZcDhXnFQ%3D%3D",
            "pNhI08WU7.OMRfXwWqiZfw%3D%3D",
            "ndTkYSaMgDT1yFZOFVxnpg==",
            "d99e532c1129e9cd5a9e8ba4ab4bd4d5",
            "d99e532c1129e9cd5a9e8ba4ab4bd4d5%2Bcontinuous",
            "lastSeq",
        ] {
            assert_eq!(
                r("GET", &format!("/notes/_local/{id}")),
                "GET_notes__local_{id}",
                "{id}"
            );
            assert_eq!(
                r("PUT", &format!("/notes/_local%2F{id}?rev=0-1")),
                "PUT_notes__local_{id}",
                "{id}"
            );
            assert_eq!(
                r("PUT", &format!("/notes/_local%2f{id}")),
                "PUT_notes__local_{id}"
            );
        }
        // The database may be a vault name; `_local` itself and `_local_docs` stay.
        assert_eq!(
            r("GET", "/vault/_local/pNhI08WU7.OMRfXwWqiZfw%3D%3D"),
            "GET_{path}__local_{id}"
        );
        assert_eq!(r("GET", "/notes/_local"), "GET_notes__local");
        assert_eq!(r("GET", "/notes/_local/"), "GET_notes__local");
        assert_eq!(r("GET", "/notes/_local_docs"), "GET_notes__local_docs");
        assert_eq!(r("GET", "/notes/_local%2F"), "GET_notes__local-");
        // Only the one segment after `_local` is its id.
        assert_eq!(
            r("GET", "/notes/_local/2bCvSRKiDPQwssZcDhXnFQ%3D%3D/extra"),
            "GET_notes__local_{id}_extra"
        );
        // Before the change a checkpoint id with a `.` was kept as written.
        assert!(!is_id("pNhI08WU7.OMRfXwWqiZfw=="));
    }

    #[test]
    fn vault_names_collapse_into_one_path() {
        let c = classifier(&["notes", "daily", "2024-01-01.md", "a b.md"], &[]);
        assert_eq!(
            c.route("PUT", "/dav/notes/daily/2024-01-01.md"),
            "PUT_dav_{path}"
        );
        assert_eq!(c.route("PUT", "/dav/notes/a%20b.md"), "PUT_dav_{path}");
        assert_eq!(c.route("MKCOL", "/notes/"), "MKCOL_{path}");
        assert_eq!(
            c.route("PROPFIND", "/notes/x/daily"),
            "PROPFIND_{path}_x_{path}"
        );
        assert_eq!(c.route("PROPFIND", "/"), "PROPFIND_");
    }

    #[test]
    fn a_users_pattern_names_its_route_first() {
        let c = classifier(
            &["notes"],
            &["upload=PATCH ^/files/[^/]+$", "any-note=* ^/notes/"],
        );
        assert_eq!(c.route("PATCH", "/files/abc?x=1"), "upload");
        assert_eq!(c.route("POST", "/files/abc"), "POST_files_abc");
        assert_eq!(c.route("GET", "/notes/z"), "any-note");
        for bad in [
            "no-equals",
            "=GET ^/",
            "a b=GET ^/",
            "x=GET",
            "x=get ^/",
            "x=GET ^/(",
        ] {
            assert!(RoutePattern::parse(bad).is_err(), "{bad}");
        }
        let e = RoutePattern::parse("x=GET ^/(").unwrap_err();
        assert!(
            e.starts_with("route pattern \"x=GET ^/(\": the regex"),
            "{e}"
        );
    }

    #[test]
    fn a_graphql_operation_refines_the_route() {
        let body = br#"{"operationName":"PushNotes","query":"mutation PushNotes { x }"}"#;
        let op = graphql_operation("/graphql", Some(body)).unwrap();
        assert_eq!(op, "PushNotes");
        assert_eq!(
            Classifier::refine("POST_graphql", &op),
            "POST_graphql:PushNotes"
        );
        assert_eq!(
            graphql_operation("/graphql?operationName=Pull%20It&query=x", None).as_deref(),
            Some("Pull It")
        );
        assert_eq!(
            Classifier::refine("GET_graphql", "Pull It"),
            "GET_graphql:Pull-It"
        );
        assert_eq!(graphql_operation("/graphql", Some(b"[1,2]")), None);
        assert_eq!(
            graphql_operation("/graphql", Some(b"{\"operationName\":null}")),
            None
        );
        assert_eq!(graphql_operation("/graphql", Some(b"not json")), None);
    }
}
