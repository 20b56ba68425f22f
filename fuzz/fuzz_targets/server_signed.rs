//! The reference server behind authentication: structured requests to every route, signed
//! by a real device (so the body parsers, ids, ranges, queries and `X-Obsync-*` header
//! checks are reached), with raw or shaped bodies. Answers must be well-formed and never an
//! internal error; the server never panics.
#![no_main]

use base64::Engine as _;
use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use vaultbench_fuzz::{Target, answer_body, check_answer, exchange};

const METHODS: &[&str] = &["GET", "POST", "PUT", "HEAD", "DELETE", "OPTIONS"];
const ROUTES: &[&str] = &[
    "/v1/files/{id}/versions",
    "/v1/files/{id}",
    "/v1/files",
    "/v1/changes",
    "/v1/chunks/{id}",
    "/v1/chunks/exists",
    "/v1/chunks/get",
    "/v1/pairing",
    "/v1/pairing/{id}/claim",
    "/v1/pairing/{id}/approve",
    "/v1/pairing/{id}/envelope",
    "/v1/setup",
    "/livez",
    "/readyz",
    "/metrics",
    "{id}",
];

#[derive(Debug, Arbitrary)]
enum Id {
    Raw(String),
    /// One of a few valid file ids.
    File(u8),
    /// The sid of a stored chunk.
    Chunk(u8),
    /// The SHA-256 of this request's body (a valid sid for a chunk put).
    BodyHash,
}

#[derive(Debug, Arbitrary)]
enum Body {
    Raw(Vec<u8>),
    Json(String),
    Sids(Vec<Id>),
    Version {
        parents: Vec<u8>,
        sids: Vec<u8>,
        bytes: u64,
        manifest: Vec<u8>,
        manifest_nonce: String,
        deleted: bool,
        /// Send the `version_id` the server will compute, or this string.
        version_id: Option<String>,
        domain: bool,
    },
}

#[derive(Debug, Arbitrary)]
struct Req {
    method: u8,
    route: u8,
    id: Id,
    query: Option<String>,
    headers: Vec<(String, String)>,
    ts: Option<String>,
    body: Body,
}

fn header_safe(s: &str) -> String {
    s.chars().filter(|c| !matches!(c, '\r' | '\n')).collect()
}

fn path_safe(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_ascii_graphic() && *c != '?' && *c != '#')
        .collect()
}

fn id_text(t: &Target, id: &Id, body: &[u8]) -> String {
    match id {
        Id::Raw(s) => path_safe(s),
        Id::File(n) => format!("{:032x}", n % 4),
        Id::Chunk(n) => t.chunks[usize::from(*n) % t.chunks.len()].1.clone(),
        Id::BodyHash => protocol::sha256_hex(body),
    }
}

fuzz_target!(|r: Req| {
    let t = Target::get();
    let method = METHODS[usize::from(r.method) % METHODS.len()];
    let route = ROUTES[usize::from(r.route) % ROUTES.len()];
    let file_id = match &r.id {
        Id::File(n) => format!("{:032x}", n % 4),
        _ => format!("{:032x}", 0),
    };
    let body: Vec<u8> = match &r.body {
        Body::Raw(b) => b.clone(),
        Body::Json(s) => s.clone().into_bytes(),
        Body::Sids(ids) => {
            let sids: Vec<String> = ids.iter().map(|i| id_text(t, i, &[])).collect();
            serde_json::json!({ "sids": sids }).to_string().into_bytes()
        }
        Body::Version {
            parents,
            sids,
            bytes,
            manifest,
            manifest_nonce,
            deleted,
            version_id,
            domain,
        } => {
            let known = t.versions.lock().map(|v| v.clone()).unwrap_or_default();
            let parents: Vec<String> = parents
                .iter()
                .filter_map(|&p| {
                    (!known.is_empty()).then(|| known[usize::from(p) % known.len()].clone())
                })
                .collect();
            let sids: Vec<String> = sids
                .iter()
                .map(|&s| t.chunks[usize::from(s) % t.chunks.len()].1.clone())
                .collect();
            let computed =
                protocol::version_id(&file_id, &parents, manifest, &sids).unwrap_or_default();
            let b64 = base64::engine::general_purpose::STANDARD.encode(manifest);
            serde_json::json!({
                "version_id": version_id.clone().unwrap_or(computed),
                "parents": parents,
                "sids": sids,
                "bytes": bytes,
                "domain_id": if *domain { format!("{:032x}", 7) } else { manifest_nonce.clone() },
                "manifest_ct": b64,
                "manifest_nonce": manifest_nonce,
                "deleted": deleted,
            })
            .to_string()
            .into_bytes()
        }
    };
    let id = id_text(t, &r.id, &body);
    let mut target = route.replace("{id}", &id);
    if !target.starts_with('/') {
        target.insert(0, '/');
    }
    if let Some(q) = &r.query {
        target.push('?');
        target.push_str(&path_safe(q));
    }
    let headers: Vec<(String, String)> = r
        .headers
        .iter()
        .map(|(k, v)| (path_safe(k).replace(':', ""), header_safe(v)))
        .filter(|(k, _)| !k.is_empty() && !k.eq_ignore_ascii_case("content-length"))
        .collect();
    let raw = t.signed(
        method,
        &target,
        &headers,
        r.ts.as_deref().map(header_safe).as_deref(),
        &body,
    );
    let answer = exchange(t.addr, &raw);
    if check_answer(&answer) == Some(201) && route.ends_with("/versions") {
        if let Ok(v) =
            serde_json::from_slice::<protocol::wire::VersionPostResponse>(answer_body(&answer))
        {
            if let Ok(mut known) = t.versions.lock() {
                if known.len() < 64 {
                    known.push(v.version_id);
                }
            }
        }
    }
});
