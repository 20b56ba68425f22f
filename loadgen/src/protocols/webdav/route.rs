//! WebDAV route load: one route driven closed-loop (N requests in flight, each worker on its
//! own lean HTTP/1.1 connection) or open-loop (a fixed rate over the pooled client, latency
//! corrected from the intended send time), bounded by a duration and a request ceiling,
//! with the same per-route histograms and interval logs as the signed route load. A failed
//! request is counted per status, never an abort.
//!
//! Requests refer to data prepared before the clock starts, under
//! `vaultbench-load/<seed>/` on the server: notes to GET, and one note per worker (closed
//! loop) or per slot (open loop) that MOVE renames back and forth.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use bytes::Bytes;
use hyper::Method;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use super::client::DavClient;
use super::error::DavError;
use crate::Mode;
use crate::h1::H1Conn;
use crate::http::{Request, method};
use crate::routeload::drive;
use crate::routeload::report::run_prepared;
use crate::routeload::{FolderRouteLoadConfig, RouteKey, RouteLoadReport};
use crate::stats::Recorder;

/// Body of a PUT under load: 2 KiB, the note size every protocol's route load puts (a little
/// above the vault profiles' 1.5 KiB median).
pub const PUT_BYTES: usize = 2048;
/// Notes uploaded before a `get-file` load.
pub const PREP_FILES: usize = 16;
/// Notes MOVE renames in open loop (one slot per request modulo this; a slot's lock is held
/// for its request, so two requests on one slot wait rather than fail).
pub const MOVE_SLOTS: usize = 256;

/// A WebDAV route under load; names are the metric keys' route part.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DavRoute {
    /// `PROPFIND` `Depth: 1` of the configured folder
    PropfindDepth1,
    /// `PROPFIND` `Depth: infinity` of the configured folder (403 on Apache and nginx)
    PropfindInfinity,
    /// `PUT` of a new 2 KiB note each time
    PutFile,
    /// `GET` of a stored 2 KiB note
    GetFile,
    /// `MKCOL` of a new folder each time
    Mkcol,
    /// `MOVE` of a note to the other of its two names
    Move,
    /// `DELETE` of a note (each preceded by an uncounted PUT that creates it; closed loop)
    Delete,
}

impl DavRoute {
    pub const ALL: [DavRoute; 7] = [
        DavRoute::PropfindDepth1,
        DavRoute::PropfindInfinity,
        DavRoute::PutFile,
        DavRoute::GetFile,
        DavRoute::Mkcol,
        DavRoute::Move,
        DavRoute::Delete,
    ];

    pub fn name(self) -> &'static str {
        match self {
            DavRoute::PropfindDepth1 => "propfind-depth1",
            DavRoute::PropfindInfinity => "propfind-infinity",
            DavRoute::PutFile => "put-file",
            DavRoute::GetFile => "get-file",
            DavRoute::Mkcol => "mkcol",
            DavRoute::Move => "move",
            DavRoute::Delete => "delete",
        }
    }
}

impl RouteKey for DavRoute {
    fn key(self) -> &'static str {
        self.name()
    }
}

/// One WebDAV route load; its folder is the one the PROPFIND routes list.
pub type DavRouteLoadConfig = FolderRouteLoadConfig<DavRoute>;

/// What a WebDAV route load measured.
pub type DavRouteLoadReport = RouteLoadReport<DavRoute, DavRouteLoadConfig>;

/// Printable text, as a note is: 64 lines of 31 letters and a newline.
fn note_body(rng: &mut ChaCha8Rng) -> Bytes {
    Bytes::from(crate::routeload::note_text(rng, PUT_BYTES))
}

/// Shared state of one run's workers.
struct Run {
    route: DavRoute,
    client: DavClient,
    rec: Recorder,
    /// `vaultbench-load/<seed>`.
    base: String,
    folder_href: String,
    /// Notes a `get-file` load reads.
    files: Vec<String>,
    /// Per MOVE slot: whether its note currently has its `b` name.
    moved: Vec<tokio::sync::Mutex<bool>>,
    counter: AtomicU64,
    deadline: Instant,
}

/// A planned request: its parts owned, so it can be borrowed into a [`Request`].
struct Planned {
    method: Method,
    href: String,
    headers: Vec<(&'static str, String)>,
    body: Bytes,
}

impl Run {
    fn plan(&self, rng: &mut ChaCha8Rng, slot: usize, moved: bool) -> Planned {
        let mut p = Planned {
            method: Method::GET,
            href: String::new(),
            headers: Vec::new(),
            body: Bytes::new(),
        };
        match self.route {
            DavRoute::PropfindDepth1 | DavRoute::PropfindInfinity => {
                p.method = method("PROPFIND");
                p.href = self.folder_href.clone();
                p.headers.push(("accept", "text/plain".to_owned()));
                let depth = if self.route == DavRoute::PropfindDepth1 {
                    "1"
                } else {
                    "infinity"
                };
                p.headers.push(("depth", depth.to_owned()));
            }
            DavRoute::PutFile | DavRoute::Delete => {
                let n = self.counter.fetch_add(1, Ordering::Relaxed);
                p.method = Method::PUT;
                p.href = DavClient::href(&format!("{}/put-{n}.md", self.base), false);
                p.body = note_body(rng);
            }
            DavRoute::GetFile => {
                let f = &self.files[rng.next_u32() as usize % self.files.len()];
                p.href = DavClient::href(f, false);
            }
            DavRoute::Mkcol => {
                let n = self.counter.fetch_add(1, Ordering::Relaxed);
                p.method = method("MKCOL");
                p.href = DavClient::href(&format!("{}/col-{n}", self.base), true);
            }
            DavRoute::Move => {
                let (from, to) = if moved { ("b", "a") } else { ("a", "b") };
                p.method = method("MOVE");
                p.href = DavClient::href(&format!("{}/move-{slot}-{from}.md", self.base), false);
                let dest = DavClient::href(&format!("{}/move-{slot}-{to}.md", self.base), false);
                p.headers.push(("destination", self.client.url(&dest)));
                p.headers.push(("overwrite", "T".to_owned()));
            }
        }
        p
    }

    fn request<'a>(&self, p: &'a Planned, intended: Option<Instant>) -> Request<'a> {
        let timeout = drive::request_timeout(crate::http::REQUEST_TIMEOUT, self.deadline);
        Request {
            route: self.route.name(),
            method: p.method.clone(),
            href: &p.href,
            headers: p.headers.clone(),
            body: p.body.clone(),
            timeout,
            intended,
            max_body: crate::http::MAX_ANSWER_BYTES,
            cap_name: "MAX_ANSWER_BYTES",
            keep_headers: &[],
            retry_on: &[503],
        }
    }
}

impl drive::Worker for Run {
    type Conn = H1Conn;

    /// One request of the route; `conn` is the worker's own connection in closed loop. `slot`
    /// is the worker (closed loop) or the request's index (open loop): MOVE renames the note
    /// of its slot.
    async fn one(
        &self,
        slot: usize,
        rng: &mut ChaCha8Rng,
        conn: Option<&mut H1Conn>,
        intended: Option<Instant>,
    ) {
        // MOVE: the slot's note, locked for the request so its name is known.
        let slot = if self.moved.is_empty() {
            slot
        } else {
            slot % self.moved.len()
        };
        let lock = match self.moved.get(slot) {
            Some(m) if self.route == DavRoute::Move => Some(m.lock().await),
            _ => None,
        };
        let p = self.plan(rng, slot, lock.as_deref().copied().unwrap_or(false));
        let status = match conn {
            Some(c) => {
                if self.route == DavRoute::Delete {
                    // The note to delete, created outside the route's figures.
                    let mut put = self.request(&p, None);
                    put.route = "delete-prep";
                    if self.client.send_lean(&self.rec, c, &put).await.is_err() {
                        return;
                    }
                    let del = Planned {
                        method: Method::DELETE,
                        body: Bytes::new(),
                        ..p
                    };
                    let _ = self
                        .client
                        .send_lean(&self.rec, c, &self.request(&del, None))
                        .await;
                    return;
                }
                self.client
                    .send_lean(&self.rec, c, &self.request(&p, intended))
                    .await
                    .ok()
            }
            None => self
                .client
                .send(&self.rec, &self.request(&p, intended))
                .await
                .ok()
                .map(|a| a.status),
        };
        if let (Some(mut moved), Some(s)) = (lock, status)
            && (200..300).contains(&s)
        {
            *moved = !*moved;
        }
    }
}

async fn prepare(
    client: &DavClient,
    cfg: &DavRouteLoadConfig,
    slots: usize,
) -> Result<Run, DavError> {
    let rec = Recorder::new(false);
    let base = format!("vaultbench-load/{:016x}", cfg.seed);
    client.mkcol(&rec, "vaultbench-load").await?;
    client.mkcol(&rec, &base).await?;
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    rng.set_stream(u64::MAX);
    let mut files = Vec::new();
    if cfg.route == DavRoute::GetFile {
        for i in 0..PREP_FILES {
            let f = format!("{base}/get-{i}.md");
            client.put(&rec, &f, note_body(&mut rng)).await?;
            files.push(f);
        }
    }
    let mut moved = Vec::new();
    if cfg.route == DavRoute::Move {
        for slot in 0..slots {
            client
                .put(
                    &rec,
                    &format!("{base}/move-{slot}-a.md"),
                    note_body(&mut rng),
                )
                .await?;
            moved.push(tokio::sync::Mutex::new(false));
        }
    }
    Ok(Run {
        route: cfg.route,
        client: client.clone(),
        rec: Recorder::new(false),
        base,
        folder_href: DavClient::href(&cfg.folder, true),
        files,
        moved,
        counter: AtomicU64::new(0),
        deadline: Instant::now(),
    })
}

/// Runs one WebDAV route load. Stops at `duration` or `max_requests`, whichever comes
/// first; requests still out `DRAIN_GRACE` after the duration are abandoned and counted as
/// timeouts.
pub async fn run_dav_route_load(
    client: &DavClient,
    cfg: &DavRouteLoadConfig,
) -> Result<DavRouteLoadReport, DavError> {
    drive::check(cfg.duration, cfg.max_requests, cfg.mode).map_err(|e| DavError::Invalid {
        what: e.what.into(),
        reason: e.reason.into(),
    })?;
    let slots = match cfg.mode {
        Mode::Open { .. } if cfg.route == DavRoute::Delete => {
            return Err(DavError::Invalid {
                what: "delete".into(),
                reason: "runs closed-loop only (each DELETE needs the PUT before it)".into(),
            });
        }
        Mode::Closed { in_flight } => in_flight,
        Mode::Open { .. } => MOVE_SLOTS,
    };
    let run = prepare(client, cfg, slots).await?;
    let addr = client.target().addr();
    let start = |rec, deadline| Run {
        rec,
        deadline,
        ..run
    };
    Ok(run_prepared(cfg, start, |n| (0..n).map(|_| H1Conn::new(addr)).collect()).await)
}
