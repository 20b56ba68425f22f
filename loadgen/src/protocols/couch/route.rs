//! CouchDB route load: one of the replicator's main routes driven closed-loop (each worker on
//! its own lean HTTP/1.1 connection) or open-loop, through the driver every protocol shares
//! (`route::drive`), with the same per-route histograms and interval logs.
//!
//! Requests refer to documents prepared before the clock starts, with ids under
//! `vaultbench-load-<seed>`: 16 chunks of 1.5 KiB (the median note), and for `changes` enough
//! more documents that every feed read returns a full page of 100.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hyper::Method;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use serde_json::json;
use sha2::{Digest, Sha256};

use super::client::CouchClient;
use super::error::CouchError;
use super::wire::Doc;
use crate::Mode;
use crate::h1::H1Conn;
use crate::http::Request;
use crate::routeload::drive;
use crate::stats::{HistSummary, Recorder, RouteStats, write_interval_log};

pub use crate::routeload::LOAD_CHUNK_BYTES;
/// Chunks stored before a read route starts.
pub const PREP_CHUNKS: usize = 16;
/// Documents in the feed before a `changes` load, and the page it reads.
pub const CHANGES_PAGE: usize = 100;
/// Ids per `_revs_diff` under load: a quarter stored, the rest unknown.
pub const REVS_DIFF_IDS: usize = 64;
/// Chunks per `_bulk_get` and per `_all_docs` by keys: the signed client's batch of three.
pub const READ_BATCH: usize = 3;

/// A CouchDB route under load; names are the metric keys' route part.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CouchRoute {
    /// `POST _bulk_docs` (`new_edits: false`) of one new 1.5 KiB chunk each time
    BulkDocs,
    /// `GET _changes?style=all_docs&since=0&limit=100` over a feed of ≥ 100 documents
    Changes,
    /// `POST _revs_diff` of 64 ids (16 stored)
    RevsDiff,
    /// `POST _bulk_get?revs=true` of three stored chunks
    BulkGet,
    /// `POST _all_docs?include_docs=true` by the keys of three stored chunks
    AllDocsKeys,
}

impl CouchRoute {
    pub const ALL: [CouchRoute; 5] = [
        CouchRoute::BulkDocs,
        CouchRoute::Changes,
        CouchRoute::RevsDiff,
        CouchRoute::BulkGet,
        CouchRoute::AllDocsKeys,
    ];

    pub fn name(self) -> &'static str {
        match self {
            CouchRoute::BulkDocs => "bulk-docs",
            CouchRoute::Changes => "changes",
            CouchRoute::RevsDiff => "revs-diff",
            CouchRoute::BulkGet => "bulk-get",
            CouchRoute::AllDocsKeys => "all-docs-keys",
        }
    }

    /// The route named `name`.
    pub fn parse(name: &str) -> Option<CouchRoute> {
        CouchRoute::ALL.into_iter().find(|r| r.name() == name)
    }
}

/// One CouchDB route load.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CouchRouteLoadConfig {
    pub route: CouchRoute,
    pub mode: Mode,
    /// In JSON `duration_s`, seconds as a float.
    #[serde(rename = "duration_s", serialize_with = "crate::stats::ser_secs")]
    pub duration: Duration,
    pub max_requests: u64,
    pub seed: u64,
}

/// What a CouchDB route load measured.
#[derive(Debug, Clone, Serialize)]
pub struct CouchRouteLoadReport {
    pub route: CouchRoute,
    pub config: CouchRouteLoadConfig,
    pub wall_ns: u64,
    pub requests: u64,
    /// Completed requests per second of wall time.
    pub throughput_per_s: f64,
    /// Open loop: requests that left more than 2 ms after their intended time.
    pub late_starts: u64,
    pub stats: RouteStats,
    #[serde(skip)]
    start_wall: std::time::SystemTime,
}

impl CouchRouteLoadReport {
    /// Headline latency (corrected in open loop) in µs.
    pub fn summary(&self) -> HistSummary {
        self.stats.summary()
    }

    /// Writes the standard HdrHistogram interval log, tagged by route.
    pub fn write_hdr_log<W: std::io::Write>(&self, w: &mut W) -> std::io::Result<()> {
        let mut routes = std::collections::BTreeMap::new();
        routes.insert(self.route.name().to_owned(), self.stats.clone());
        write_interval_log(w, self.start_wall, &routes)
    }
}

/// Mixes a run's level into its seed, so one level's `bulk-docs` chunks never repeat
/// another's (the golden ratio's odd constant, as the signed route load).
const LEVEL_MIX: u64 = 0x9e37_79b9_7f4a_7c15;

/// A printable 1.5 KiB note body: 48 lines of 31 letters and a newline.
fn note_text(rng: &mut ChaCha8Rng) -> String {
    let mut buf = vec![0u8; LOAD_CHUNK_BYTES];
    rng.fill_bytes(&mut buf);
    for (i, b) in buf.iter_mut().enumerate() {
        *b = if i % 32 == 31 { b'\n' } else { b'a' + *b % 26 };
    }
    String::from_utf8(buf).expect("ASCII letters")
}

/// A chunk document of `text`, at revision 1.
fn chunk_doc(text: String) -> Doc {
    let id = super::chunk::chunk_id(&text);
    let raw = json!({"_id": id, "type": "leaf", "data": text});
    let mut doc: Doc = serde_json::from_value(raw).expect("a leaf document");
    let hash = hex::encode(&Sha256::digest(doc.data.as_deref().unwrap_or("").as_bytes())[..16]);
    doc.rev = Some(format!("1-{hash}"));
    doc.revisions = Some(super::wire::Revisions {
        start: 1,
        ids: vec![hash],
    });
    doc
}

fn bulk_docs_body(docs: &[Doc]) -> Vec<u8> {
    serde_json::to_vec(&json!({"docs": docs, "new_edits": false})).expect("documents serialise")
}

/// Shared state of one run's workers.
struct Run {
    route: CouchRoute,
    client: CouchClient,
    rec: Recorder,
    /// Stored chunks: id and revision.
    stored: Vec<(String, String)>,
    /// The `_revs_diff` body (fixed).
    revs_diff: Vec<u8>,
    counter: AtomicU64,
    deadline: Instant,
    seed: u64,
    level: u64,
}

/// A planned request: its parts owned, so it can be borrowed into a [`Request`].
struct Planned {
    method: Method,
    href: String,
    body: Option<Vec<u8>>,
}

impl Run {
    /// Three stored chunks in a row from a random start.
    fn pick(&self, rng: &mut ChaCha8Rng) -> Vec<&(String, String)> {
        let i = rng.next_u32() as usize;
        (0..READ_BATCH)
            .map(|j| &self.stored[(i + j) % self.stored.len()])
            .collect()
    }

    fn plan(&self, rng: &mut ChaCha8Rng) -> Planned {
        match self.route {
            CouchRoute::BulkDocs => {
                let n = self.counter.fetch_add(1, Ordering::Relaxed);
                let mut r =
                    ChaCha8Rng::seed_from_u64(self.seed ^ self.level.wrapping_mul(LEVEL_MIX));
                r.set_stream(n);
                Planned {
                    method: Method::POST,
                    href: "/_bulk_docs".into(),
                    body: Some(bulk_docs_body(&[chunk_doc(note_text(&mut r))])),
                }
            }
            CouchRoute::Changes => Planned {
                method: Method::GET,
                href: format!("/_changes?style=all_docs&since=0&limit={CHANGES_PAGE}"),
                body: None,
            },
            CouchRoute::RevsDiff => Planned {
                method: Method::POST,
                href: "/_revs_diff".into(),
                body: Some(self.revs_diff.clone()),
            },
            CouchRoute::BulkGet => {
                let docs: Vec<_> = self
                    .pick(rng)
                    .into_iter()
                    .map(|(id, rev)| json!({"id": id, "rev": rev}))
                    .collect();
                Planned {
                    method: Method::POST,
                    href: "/_bulk_get?revs=true".into(),
                    body: Some(serde_json::to_vec(&json!({ "docs": docs })).expect("JSON")),
                }
            }
            CouchRoute::AllDocsKeys => {
                let keys: Vec<&String> = self.pick(rng).into_iter().map(|(id, _)| id).collect();
                Planned {
                    method: Method::POST,
                    href: "/_all_docs?include_docs=true".into(),
                    body: Some(serde_json::to_vec(&json!({ "keys": keys })).expect("JSON")),
                }
            }
        }
    }

    fn request<'a>(&self, p: &'a Planned, intended: Option<Instant>) -> Request<'a> {
        let mut req =
            CouchClient::request(self.route.name(), p.method.clone(), &p.href, p.body.clone());
        req.timeout = drive::request_timeout(super::client::REQUEST_TIMEOUT, self.deadline);
        req.intended = intended;
        req
    }
}

impl drive::Worker for Run {
    type Conn = H1Conn;

    async fn one(
        &self,
        _w: usize,
        rng: &mut ChaCha8Rng,
        conn: Option<&mut H1Conn>,
        intended: Option<Instant>,
    ) {
        let p = self.plan(rng);
        let req = self.request(&p, intended);
        let http = self.client.http();
        let _ = match conn {
            Some(c) => http.send_lean(&self.rec, c, &req).await.map(|_| ()),
            None => http.send(&self.rec, &req).await.map(|_| ()),
        };
    }
}

async fn prepare(client: &CouchClient, cfg: &CouchRouteLoadConfig) -> Result<Run, CouchError> {
    let rec = Recorder::new(false);
    super::ops::setup(client, &rec, "vaultbench-load", true).await?;
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    rng.set_stream(u64::MAX);
    let chunks: Vec<Doc> = (0..PREP_CHUNKS)
        .map(|_| chunk_doc(note_text(&mut rng)))
        .collect();
    let mut docs = chunks.clone();
    if cfg.route == CouchRoute::Changes {
        // Metadata documents, each listing one stored chunk, until the feed holds a full page.
        for i in 0..CHANGES_PAGE {
            let c = &chunks[i % PREP_CHUNKS];
            let path = format!("vaultbench-load-{:016x}/prep-{i}.md", cfg.seed);
            let raw = json!({
                "_id": super::chunk::doc_id(&path),
                "type": "plain",
                "path": path,
                "children": [c.id],
                "ctime": 0, "mtime": 0,
                "size": LOAD_CHUNK_BYTES,
                "eden": {},
            });
            let mut doc: Doc = serde_json::from_value(raw).expect("a metadata document");
            let hash = hex::encode(&Sha256::digest(format!("{}/{i}", cfg.seed).as_bytes())[..16]);
            doc.rev = Some(format!("1-{hash}"));
            doc.revisions = Some(super::wire::Revisions {
                start: 1,
                ids: vec![hash],
            });
            docs.push(doc);
        }
    }
    for batch in docs.chunks(super::ops::BATCH) {
        let req = CouchClient::request(
            "bulk-docs",
            Method::POST,
            "/_bulk_docs",
            Some(bulk_docs_body(batch)),
        );
        client.call(&rec, &req, &[200, 201, 202]).await?;
    }
    let stored: Vec<(String, String)> = chunks
        .iter()
        .map(|d| (d.id.clone(), d.rev.clone().unwrap_or_default()))
        .collect();
    let mut ask = std::collections::BTreeMap::new();
    for (id, rev) in &stored {
        ask.insert(id.clone(), vec![rev.clone()]);
    }
    let mut k = 0u64;
    while ask.len() < REVS_DIFF_IDS {
        ask.insert(format!("h:vaultbench-missing-{k}"), vec!["1-0".to_owned()]);
        k += 1;
    }
    Ok(Run {
        route: cfg.route,
        client: client.clone(),
        rec: Recorder::new(false),
        stored,
        revs_diff: serde_json::to_vec(&ask).expect("a map serialises"),
        counter: AtomicU64::new(0),
        deadline: Instant::now(),
        seed: cfg.seed,
        level: match cfg.mode {
            Mode::Closed { in_flight } => in_flight as u64,
            Mode::Open { rate_per_s, .. } => (1 << 63) | rate_per_s.to_bits() >> 1,
        },
    })
}

/// Runs one CouchDB route load. Stops at `duration` or `max_requests`, whichever comes
/// first; its preparation is bounded by `duration` too.
pub async fn run_couch_route_load(
    client: &CouchClient,
    cfg: &CouchRouteLoadConfig,
) -> Result<CouchRouteLoadReport, CouchError> {
    drive::check(cfg.duration, cfg.max_requests, cfg.mode).map_err(|e| CouchError::Invalid {
        what: e.what.into(),
        reason: e.reason.into(),
    })?;
    let open = matches!(cfg.mode, Mode::Open { .. });
    let mut run = tokio::time::timeout(
        cfg.duration.max(Duration::from_secs(10)),
        prepare(client, cfg),
    )
    .await
    .map_err(|_| CouchError::Invalid {
        what: cfg.route.name().into(),
        reason: format!(
            "preparing the route load did not finish within {:?}",
            cfg.duration.max(Duration::from_secs(10))
        ),
    })??;
    let rec = Recorder::with_intervals(open);
    let t0 = rec.start();
    run.rec = rec.clone();
    run.deadline = t0 + cfg.duration;
    let run = Arc::new(run);
    let bounds = drive::Bounds {
        t0,
        deadline: run.deadline,
        max_requests: cfg.max_requests,
        seed: cfg.seed,
        stop: None,
    };
    drive::run_mode(&run, &rec, cfg.mode, &bounds, |n| {
        (0..n)
            .map(|_| H1Conn::new(client.target().addr()))
            .collect()
    })
    .await;
    let wall = t0.elapsed();
    let m = rec.snapshot();
    let stats = drive::route_stats(&m, cfg.route.name(), open);
    Ok(CouchRouteLoadReport {
        route: cfg.route,
        config: cfg.clone(),
        wall_ns: wall.as_nanos() as u64,
        requests: stats.requests,
        throughput_per_s: stats.requests as f64 / wall.as_secs_f64().max(1e-9),
        late_starts: m.late_starts,
        stats,
        start_wall: m.start_wall,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_names_round_trip() {
        for r in CouchRoute::ALL {
            assert_eq!(CouchRoute::parse(r.name()), Some(r));
        }
        assert_eq!(CouchRoute::parse("put-chunk"), None);
    }

    #[test]
    fn load_chunks_are_leaf_documents_with_a_first_revision() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let d = chunk_doc(note_text(&mut rng));
        assert!(d.is_chunk() && d.id.starts_with("h:"));
        assert!(d.rev.as_deref().unwrap().starts_with("1-"));
        let v: serde_json::Value = serde_json::from_slice(&bulk_docs_body(&[d])).unwrap();
        assert_eq!(v["new_edits"], false);
        assert_eq!(v["docs"][0]["type"], "leaf");
    }
}
