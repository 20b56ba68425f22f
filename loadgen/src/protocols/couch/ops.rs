//! Whole-vault operations over CouchDB, as Self-hosted LiveSync and the PouchDB replicator
//! under it do them:
//!
//! - **Set-up** ([`setup`]): `GET /` (the server must answer as CouchDB), the database made
//!   when it is missing, the version document (`obsydian_livesync_version`, version 12) and
//!   the `_local` milestone and sync-parameter documents written when missing.
//! - **Push** ([`Writer`]): a file becomes its chunks (`h:` leaf documents, a chunk this
//!   device has written once never again) and then its metadata document, in that order, as
//!   LiveSync writes them into its local database; the replicator then sends them in batches
//!   of 25 (`batch_size`): `POST _revs_diff`, then `POST _bulk_docs` with `new_edits: false`
//!   of what the server lacks, and at the end a checkpoint in `_local/<replication id>`.
//! - **Pull** ([`Replica`]): `GET _changes?style=all_docs&since=…&limit=25` page by page,
//!   `POST _bulk_get?revs=true` of the revisions the replica lacks, then each file assembled
//!   from its chunks; a chunk not replicated yet is fetched on demand with `POST _all_docs`
//!   by keys with `include_docs` (LiveSync's `readChunksOnline`). Live replication waits with
//!   `feed=longpoll` and a heartbeat.
//! - **Rename**: a new metadata document at the new path with the same children (no chunk is
//!   sent again) and the old one marked `deleted: true`, as LiveSync keeps deleted files'
//!   metadata (`deleteMetadataOfDeletedFiles: false`).
//!
//! Revisions are `N-<32 hex>` (the hex from SHA-256 of the previous revision and the body, in
//! place of PouchDB's MD5), sent with `_revisions` so a later write extends its history.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use hyper::Method;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::chunk::{self, Kind};
use super::client::CouchClient;
use super::error::CouchError;
use super::wire::{self, AllDocs, BulkDocsEntry, BulkGet, Doc, Revisions, RevsDiff};
use crate::TransferReport;
use crate::feed::{FeedBounds, FeedWalk};
use crate::stats::Recorder;

/// Documents per replication batch: LiveSync's `batch_size` default (25).
pub const BATCH: usize = 25;
/// LiveSync's version document and the database version it writes there.
pub const DOCID_VERSION: &str = "obsydian_livesync_version";
pub const DB_VERSION: u64 = 12;
/// LiveSync's `_local` documents (the misspelling is LiveSync's).
pub const DOCID_MILESTONE: &str = "_local/obsydian_livesync_milestone";
pub const DOCID_SYNC_PARAMETERS: &str = "_local/obsidian_livesync_sync_parameters";
/// The long poll's heartbeat, in ms: the PouchDB replicator's `heartbeat` default.
pub const HEARTBEAT_MS: u64 = 10_000;
/// A `_changes` page that lists changes but whose `last_seq` does not move is refused after
/// this many in a row: the server would otherwise hold the client in the loop for ever.
pub const STALLED_PAGES: u32 = 3;

/// What a replication batch moved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Written {
    /// Documents the server took (`_bulk_docs`).
    pub docs: u64,
    /// Of those, chunks.
    pub chunks: u64,
    /// Chunk references that sent nothing: the chunk was already written by this device or
    /// already on the server (`_revs_diff` said so).
    pub chunks_deduplicated: u64,
    /// Revisions written that replace an earlier one (edits, renames, deletions).
    pub revisions: u64,
}

impl Written {
    fn add(&mut self, o: Written) {
        self.docs += o.docs;
        self.chunks += o.chunks;
        self.chunks_deduplicated += o.chunks_deduplicated;
        self.revisions += o.revisions;
    }
}

/// The next revision after `prev` for `doc`'s body: `(rev, _revisions)`.
fn next_rev(prev: Option<&str>, doc: &Doc) -> (String, Revisions) {
    let mut body = doc.clone();
    body.rev = None;
    body.revisions = None;
    let (generation, prev_hash) = match prev.and_then(|p| p.split_once('-')) {
        Some((g, h)) => (g.parse::<u64>().unwrap_or(0).saturating_add(1), Some(h)),
        None => (1, None),
    };
    let mut h = Sha256::new();
    h.update(prev.unwrap_or("").as_bytes());
    h.update(serde_json::to_vec(&body).expect("a document serialises"));
    let hash = hex::encode(&h.finalize()[..16]);
    let mut ids = vec![hash.clone()];
    ids.extend(prev_hash.map(str::to_owned));
    (
        format!("{generation}-{hash}"),
        Revisions {
            start: generation,
            ids,
        },
    )
}

/// A replication id for `node` against database `db` (`_local/<32 hex>`, as PouchDB's).
fn replication_id(node: &str, db: &str) -> String {
    let d = Sha256::digest(format!("vaultbench/replication\n{node}\n{db}").as_bytes());
    format!("_local/{}", hex::encode(&d[..16]))
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// LiveSync's set-up as device `node`: the server checked, the database and LiveSync's
/// version, milestone and sync-parameter documents made when missing (`create`: A may make
/// the database; B only checks it is there).
pub async fn setup(
    client: &CouchClient,
    rec: &Recorder,
    node: &str,
    create: bool,
) -> Result<(), CouchError> {
    client.welcome(rec).await?;
    if !client.exists(rec).await? {
        if !create {
            return Err(CouchError::protocol(
                "db-info",
                format!("database {:?} does not exist", client.db_name()),
            ));
        }
        client.create(rec).await?;
    }
    match client.get_doc(rec, "get-doc", DOCID_VERSION).await? {
        Some(v) => {
            let version = v.get("version").and_then(Value::as_u64).unwrap_or(0);
            if version > DB_VERSION {
                return Err(CouchError::protocol(
                    "get-doc",
                    format!("the database's LiveSync version {version} is newer than {DB_VERSION}"),
                ));
            }
        }
        None => {
            let doc = json!({"_id": DOCID_VERSION, "type": "versioninfo", "version": DB_VERSION});
            client.put_doc(rec, "put-doc", DOCID_VERSION, &doc).await?;
        }
    }
    let milestone = client.get_doc(rec, "get-local", DOCID_MILESTONE).await?;
    let accepted = milestone
        .as_ref()
        .and_then(|m| m.get("accepted_nodes"))
        .and_then(Value::as_array)
        .is_some_and(|a| a.iter().any(|n| n.as_str() == Some(node)));
    if !accepted {
        let mut doc = milestone.unwrap_or_else(|| {
            json!({
                "_id": DOCID_MILESTONE,
                "type": "milestoneinfo",
                "created": now_ms(),
                "locked": false,
                "cleaned": false,
                "accepted_nodes": [],
                "node_chunk_info": {},
                "tweak_values": {},
            })
        });
        if let Some(obj) = doc.as_object_mut() {
            let nodes = obj
                .entry("accepted_nodes")
                .or_insert_with(|| Value::Array(Vec::new()));
            if let Some(a) = nodes.as_array_mut() {
                a.push(Value::String(node.to_owned()));
            }
            let info = obj
                .entry("node_chunk_info")
                .or_insert_with(|| Value::Object(Default::default()));
            if let Some(m) = info.as_object_mut() {
                m.insert(
                    node.to_owned(),
                    json!({"min": 0, "max": 2400, "current": 2}),
                );
            }
        }
        client
            .put_doc(rec, "put-local", DOCID_MILESTONE, &doc)
            .await?;
    }
    if client
        .get_doc(rec, "get-local", DOCID_SYNC_PARAMETERS)
        .await?
        .is_none()
    {
        let doc = json!({
            "_id": DOCID_SYNC_PARAMETERS,
            "type": "sync-parameters",
            "protocolVersion": 2,
            "pbkdf2salt": "",
        });
        client
            .put_doc(rec, "put-local", DOCID_SYNC_PARAMETERS, &doc)
            .await?;
    }
    Ok(())
}

/// A replication checkpoint (`_local/<replication id>`), read at the start and written at
/// the end of a replication, as PouchDB's replicator does.
#[derive(Debug, Clone)]
struct Checkpoint {
    id: String,
    rev: Option<String>,
    session: String,
}

impl Checkpoint {
    fn new(node: &str, db: &str) -> Checkpoint {
        Checkpoint {
            id: replication_id(node, db),
            rev: None,
            session: format!("{node}-session"),
        }
    }

    /// The checkpoint of `node`'s replication with `client`'s database, as the server holds it.
    async fn read(
        node: &str,
        client: &CouchClient,
        rec: &Recorder,
    ) -> Result<Checkpoint, CouchError> {
        let mut cp = Checkpoint::new(node, client.db_name());
        if let Some(doc) = client.get_doc(rec, "get-local", &cp.id).await? {
            cp.rev = doc.get("_rev").and_then(Value::as_str).map(str::to_owned);
        }
        Ok(cp)
    }

    async fn write(
        &mut self,
        client: &CouchClient,
        rec: &Recorder,
        last_seq: &Value,
    ) -> Result<(), CouchError> {
        let mut doc = json!({
            "_id": self.id,
            "session_id": self.session,
            "last_seq": last_seq,
            "history": [{"last_seq": last_seq, "session_id": self.session}],
            "replicator": "pouchdb",
            "version": 1,
        });
        if let (Some(rev), Some(obj)) = (&self.rev, doc.as_object_mut()) {
            obj.insert("_rev".into(), Value::String(rev.clone()));
        }
        self.rev = Some(client.put_doc(rec, "put-local", &self.id, &doc).await?);
        Ok(())
    }
}

/// Device A: what it has written into its local database and replicated.
#[derive(Debug, Clone)]
pub struct Writer {
    node: String,
    /// Latest revision per document id.
    revs: BTreeMap<String, String>,
    /// Latest metadata document per vault path (live files only).
    files: BTreeMap<String, Doc>,
    /// Chunks in the local database.
    chunks: BTreeSet<String>,
    /// Documents written locally: the local database's sequence.
    local_seq: u64,
    checkpoint: Option<Checkpoint>,
}

impl Writer {
    pub fn new(node: &str) -> Writer {
        Writer {
            node: node.to_owned(),
            revs: BTreeMap::new(),
            files: BTreeMap::new(),
            chunks: BTreeSet::new(),
            local_seq: 0,
            checkpoint: None,
        }
    }

    /// `doc` with its next revision, recorded as this device's latest.
    fn stage(&mut self, mut doc: Doc) -> Doc {
        let (rev, revisions) = next_rev(self.revs.get(&doc.id).map(String::as_str), &doc);
        self.revs.insert(doc.id.clone(), rev.clone());
        doc.rev = Some(rev);
        doc.revisions = Some(revisions);
        self.local_seq += 1;
        doc
    }

    /// The documents of one file, chunks first; `dedup` counts chunk references already in
    /// the local database.
    fn file_docs(
        &mut self,
        rel: &str,
        bytes: &[u8],
        (ctime, mtime): (u64, u64),
        dedup: &mut u64,
    ) -> Vec<Doc> {
        let kind = Kind::of(rel, bytes);
        let pieces = chunk::split(kind, bytes);
        let mut out = Vec::new();
        let children: Vec<String> = pieces.iter().map(|p| p.id.clone()).collect();
        for p in pieces {
            if !self.chunks.insert(p.id.clone()) {
                *dedup += 1;
                continue;
            }
            let doc = Doc {
                kind: Some("leaf".into()),
                data: Some(p.data),
                ..bare(&p.id)
            };
            out.push(self.stage(doc));
        }
        let meta = Doc {
            kind: Some(kind.doc_type().into()),
            path: Some(rel.to_owned()),
            children: Some(children),
            ctime: Some(ctime),
            mtime: Some(mtime),
            size: Some(bytes.len() as u64),
            eden: Some(BTreeMap::new()),
            ..bare(&chunk::doc_id(rel))
        };
        let meta = self.stage(meta);
        self.files.insert(rel.to_owned(), meta.clone());
        out.push(meta);
        out
    }

    /// The replicator's pass over `docs`: per batch, `_revs_diff`, then `_bulk_docs` with
    /// `new_edits: false` of what the server lacks.
    async fn replicate(
        &self,
        client: &CouchClient,
        rec: &Recorder,
        docs: &[Doc],
    ) -> Result<Written, CouchError> {
        let mut w = Written::default();
        for batch in docs.chunks(BATCH) {
            let mut ask: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
            for d in batch {
                ask.entry(d.id.as_str())
                    .or_default()
                    .extend(d.rev.as_deref());
            }
            let body = serde_json::to_vec(&ask).expect("a map of strings serialises");
            let req = CouchClient::request("revs-diff", Method::POST, "/_revs_diff", Some(body));
            let diff: RevsDiff = client
                .json(rec, &req, &[200, 201], "_revs_diff answer")
                .await?;
            let missing: Vec<&Doc> = batch
                .iter()
                .filter(|d| {
                    diff.get(&d.id)
                        .is_some_and(|m| d.rev.as_ref().is_some_and(|r| m.missing.contains(r)))
                })
                .collect();
            for d in batch {
                if d.is_chunk() && !missing.iter().any(|m| m.id == d.id) {
                    w.chunks_deduplicated += 1;
                }
            }
            if missing.is_empty() {
                continue;
            }
            let body = serde_json::to_vec(&json!({"docs": missing, "new_edits": false}))
                .expect("documents serialise");
            let req = CouchClient::request("bulk-docs", Method::POST, "/_bulk_docs", Some(body));
            let answer: Vec<BulkDocsEntry> = client
                .json(rec, &req, &[200, 201, 202], "_bulk_docs answer")
                .await?;
            if let Some(e) = answer.iter().find(|e| e.error.is_some()) {
                return Err(CouchError::protocol(
                    "bulk-docs",
                    format!(
                        "the server refused {}: {} ({})",
                        e.id.as_deref().unwrap_or("a document"),
                        e.error.as_deref().unwrap_or(""),
                        e.reason.as_deref().unwrap_or("")
                    ),
                ));
            }
            for d in &missing {
                w.docs += 1;
                if d.is_chunk() {
                    w.chunks += 1;
                }
                if d.revisions.as_ref().is_some_and(|r| r.start > 1) {
                    w.revisions += 1;
                }
            }
        }
        Ok(w)
    }

    /// Replicates `docs` and writes the checkpoint.
    async fn send(
        &mut self,
        client: &CouchClient,
        rec: &Recorder,
        docs: &[Doc],
    ) -> Result<Written, CouchError> {
        let w = self.replicate(client, rec, docs).await?;
        let mut cp = match self.checkpoint.take() {
            Some(cp) => cp,
            None => Checkpoint::read(&self.node, client, rec).await?,
        };
        let seq = Value::from(self.local_seq);
        let r = cp.write(client, rec, &seq).await;
        self.checkpoint = Some(cp);
        r?;
        Ok(w)
    }

    /// Cold push of every file under `dir`: set-up, then the replication of its documents.
    pub async fn push_vault(
        &mut self,
        client: &CouchClient,
        dir: &Path,
    ) -> Result<(TransferReport, Written), CouchError> {
        self.push_vault_with(client, dir, usize::MAX).await
    }

    /// [`Writer::push_vault`] that also replicates at every `checkpoint_every` files and
    /// records a throughput checkpoint there (the server's cost is read at each).
    pub async fn push_vault_with(
        &mut self,
        client: &CouchClient,
        dir: &Path,
        checkpoint_every: usize,
    ) -> Result<(TransferReport, Written), CouchError> {
        let every = checkpoint_every.max(1);
        let mut checkpoints = Vec::new();
        let mut last_cp = (0u64, std::time::Duration::ZERO);
        let rec = Recorder::new(false);
        let t0 = Instant::now();
        setup(client, &rec, &self.node, true).await?;
        let (_, files) = crate::transfer::local_tree(dir)?;
        let (mut bytes, mut dedup) = (0u64, 0u64);
        let mut docs = Vec::new();
        let mut total = Written::default();
        let mut cp_read = false;
        for (i, (rel, abs, _)) in files.iter().enumerate() {
            let body = std::fs::read(abs).map_err(|e| CouchError::io(abs, e))?;
            let times = file_times(abs);
            bytes += body.len() as u64;
            docs.extend(self.file_docs(rel, &body, times, &mut dedup));
            let at_checkpoint = (i + 1) % every == 0;
            if docs.len() >= BATCH * 4 || at_checkpoint {
                if !cp_read {
                    self.read_checkpoint(client, &rec).await?;
                    cp_read = true;
                }
                total.add(self.replicate(client, &rec, &docs).await?);
                docs.clear();
            }
            if at_checkpoint {
                let (n, now) = ((i + 1) as u64, t0.elapsed());
                let dt = (now - last_cp.1).as_secs_f64().max(1e-9);
                checkpoints.push(crate::Checkpoint {
                    files: n,
                    elapsed_ms: now.as_millis() as u64,
                    files_per_s: (n - last_cp.0) as f64 / dt,
                    // Documents go in batches: no file has a latency of its own.
                    p50_ms: None,
                });
                last_cp = (n, now);
            }
        }
        if !cp_read {
            self.read_checkpoint(client, &rec).await?;
        }
        total.add(self.send(client, &rec, &docs).await?);
        total.chunks_deduplicated += dedup;
        let mut r =
            crate::transfer::report(rec.snapshot(), t0.elapsed(), files.len() as u64, 0, bytes);
        r.chunks_transferred = total.chunks;
        r.chunks_present = total.chunks_deduplicated;
        r.last_seq = self.local_seq;
        r.checkpoints = checkpoints;
        Ok((r, total))
    }

    async fn read_checkpoint(
        &mut self,
        client: &CouchClient,
        rec: &Recorder,
    ) -> Result<(), CouchError> {
        self.checkpoint = Some(Checkpoint::read(&self.node, client, rec).await?);
        Ok(())
    }

    /// One file written (an edit or a new file) and replicated. Counts go to `rec`.
    pub async fn push_file(
        &mut self,
        client: &CouchClient,
        rec: &Recorder,
        rel: &str,
        bytes: &[u8],
    ) -> Result<Written, CouchError> {
        let mut dedup = 0;
        let now = now_ms();
        let ctime = self.files.get(rel).and_then(|d| d.ctime).unwrap_or(now);
        let docs = self.file_docs(rel, bytes, (ctime, now), &mut dedup);
        let mut w = self.send(client, rec, &docs).await?;
        w.chunks_deduplicated += dedup;
        Ok(w)
    }

    /// Folder `from` renamed to `to`: each file under it gets a metadata document at its new
    /// path (its chunks unchanged) and its old document is marked deleted. Counts go to `rec`.
    pub async fn rename(
        &mut self,
        client: &CouchClient,
        rec: &Recorder,
        from: &str,
        to: &str,
    ) -> Result<Written, CouchError> {
        let prefix = format!("{from}/");
        let moved: Vec<(String, Doc)> = self
            .files
            .range(prefix.clone()..)
            .take_while(|(p, _)| p.starts_with(&prefix))
            .map(|(p, d)| (p.clone(), d.clone()))
            .collect();
        let now = now_ms();
        let mut docs = Vec::new();
        for (old_path, old) in moved {
            let new_path = format!("{to}/{}", &old_path[prefix.len()..]);
            let new = Doc {
                path: Some(new_path.clone()),
                mtime: Some(now),
                rev: None,
                revisions: None,
                ..Doc {
                    id: chunk::doc_id(&new_path),
                    ..old.clone()
                }
            };
            let new = self.stage(new);
            self.files.insert(new_path, new.clone());
            docs.push(new);
            let gone = Doc {
                deleted: true,
                mtime: Some(now),
                ..old
            };
            docs.push(self.stage(gone));
            self.files.remove(&old_path);
        }
        self.send(client, rec, &docs).await
    }
}

/// A document with only its id.
fn bare(id: &str) -> Doc {
    Doc {
        id: id.to_owned(),
        rev: None,
        revisions: None,
        tombstone: false,
        kind: None,
        data: None,
        path: None,
        children: None,
        ctime: None,
        mtime: None,
        size: None,
        deleted: false,
        eden: None,
    }
}

/// A file's creation and modification times in ms (the modification time for both where
/// the file system keeps no creation time).
fn file_times(p: &Path) -> (u64, u64) {
    let ms = |t: std::io::Result<SystemTime>| {
        t.ok()
            .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
            .map(|d| d.as_millis() as u64)
    };
    let meta = std::fs::metadata(p).ok();
    let mtime = meta.as_ref().and_then(|m| ms(m.modified())).unwrap_or(0);
    let ctime = meta.as_ref().and_then(|m| ms(m.created())).unwrap_or(mtime);
    (ctime, mtime)
}

/// What a `_changes` page means for the reader at `since`.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// No rows: the feed is read to its end (at `last_seq`, when the page gave one).
    End(Option<Value>),
    /// Rows to fetch; the reader moves to the page's `last_seq` after them.
    Rows,
}

/// Judges one page at `since`: a page that lists rows without moving `last_seq` counts in
/// `stalled`, and [`STALLED_PAGES`] in a row are an error naming the server's behaviour.
pub fn advance(
    since: &Value,
    stalled: &mut u32,
    page: &wire::ChangesPage,
) -> Result<Step, CouchError> {
    if page.results.is_empty() {
        return Ok(Step::End(page.last_seq.clone().filter(|v| !v.is_null())));
    }
    if page.last_seq.as_ref() == Some(since) {
        *stalled += 1;
        if *stalled >= STALLED_PAGES {
            return Err(CouchError::protocol(
                "changes",
                format!(
                    "the feed listed changes {stalled} times in a row without moving last_seq past {}",
                    clip_value(since)
                ),
            ));
        }
    } else {
        *stalled = 0;
    }
    Ok(Step::Rows)
}

/// Counts a page of rows against the walk's bounds (a rows page always asks for another: the
/// replicator reads until a page is empty).
fn count_rows(walk: &mut FeedWalk, page: &wire::ChangesPage) -> Result<(), CouchError> {
    walk.page(page.results.len(), true)
        .map_err(|overrun| CouchError::protocol("GET _changes", overrun.to_string()))
}

/// Follows a run of `_changes` pages (the bytes as they arrive) from `since` as the replicator
/// does, without fetching documents: the position reached and the rows read, or a one-line
/// error. The fuzz target and the property tests drive it.
pub fn follow_pages(pages: &[&[u8]], since: Value) -> Result<(Value, u64), String> {
    follow_pages_within(pages, since, crate::protocols::couch::FEED_DEFAULT)
}

/// [`follow_pages`] with other walk bounds.
pub fn follow_pages_within(
    pages: &[&[u8]],
    since: Value,
    bounds: FeedBounds,
) -> Result<(Value, u64), String> {
    let (mut since, mut stalled, mut rows) = (since, 0u32, 0u64);
    let mut walk = FeedWalk::new(bounds);
    for body in pages {
        let page = wire::parse_changes(body).map_err(|e| e.to_string())?;
        match advance(&since, &mut stalled, &page).map_err(|e| e.to_string())? {
            Step::End(last) => return Ok((last.unwrap_or(since), rows)),
            Step::Rows => {}
        }
        count_rows(&mut walk, &page).map_err(|e| e.to_string())?;
        rows = rows.saturating_add(page.results.len() as u64);
        since = page.last_seq.unwrap_or(Value::Null);
    }
    Ok((since, rows))
}

/// The pull's assembly over one `_bulk_get` answer (the bytes as they arrive), for the fuzz
/// target and the property tests: its chunks checked against their ids, then every file's
/// metadata in it assembled from them (into nothing) as [`Replica`] writes a file. The bytes
/// the files make, or a one-line error; never a panic.
pub fn assemble_answer(body: &[u8]) -> Result<u64, String> {
    let got: BulkGet = wire::parse("_bulk_get answer", body).map_err(|e| e.to_string())?;
    let mut chunks: BTreeMap<String, Held> = BTreeMap::new();
    let mut files = Vec::new();
    for doc in got
        .results
        .into_iter()
        .flat_map(|r| r.docs)
        .filter_map(|d| d.ok)
    {
        if doc.is_chunk() {
            let held = match doc.data {
                Some(data) => match chunk::check(&doc.id, &data) {
                    Ok(()) => Held::Data(data),
                    Err(flaw) => Held::Flawed(flaw),
                },
                None => Held::Flawed(chunk::Flaw::NoData),
            };
            chunks.insert(doc.id, held);
        } else if doc.is_file() {
            files.push(doc);
        }
    }
    let get = |c: &str| -> Option<Result<&str, chunk::Flaw>> {
        chunks.get(c).map(|h| match h {
            Held::Data(d) => Ok(d.as_str()),
            Held::Flawed(f) => Err(*f),
        })
    };
    let mut total = 0u64;
    for doc in &files {
        let kind = if doc.kind.as_deref() == Some("plain") {
            Kind::Plain
        } else {
            Kind::Binary
        };
        let path = doc.path.as_deref().unwrap_or_default();
        let children = doc.children.as_deref().unwrap_or_default();
        total += chunk::assemble(path, kind, children, doc.size, &get, &mut std::io::sink())
            .map_err(|e| e.to_string())?;
    }
    Ok(total)
}

/// Device B: its replica of the database and its copy of the vault.
///
/// The pull streams: a file is written as soon as its metadata and every chunk it lists are
/// in, and a chunk's data is dropped once no file waiting to be written lists it. What the
/// replica holds at once (chunks no written file has used yet, files waiting for chunks,
/// and what it keeps of every file) is counted against the client's byte budget
/// (`--feed-max-bytes`), and each answer is capped at what is left of it.
#[derive(Debug, Clone)]
pub struct Replica {
    node: String,
    /// What is kept of each file written or removed, by metadata document id.
    files: BTreeMap<String, FileState>,
    /// Metadata documents whose files wait for chunks, by id, indexed by chunk.
    pending: Pending,
    /// Chunks received and checked against their ids, until no waiting file lists them.
    chunks: BTreeMap<String, Held>,
    /// The bytes the three above hold, as [`Replica::cost_of`] counts them.
    held: u64,
    /// Where the feed was read up to.
    since: Value,
    checkpoint: Option<Checkpoint>,
}

/// What the replica keeps of a file once it is written (or removed): what later passes (a
/// resync, a wait for an edit or a rename) read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileState {
    /// The metadata document's revision.
    pub rev: Option<String>,
    /// The vault path.
    pub path: String,
    /// The bytes written (the metadata's `size`).
    pub size: Option<u64>,
    /// Removed (`deleted: true`, or the document deleted).
    pub deleted: bool,
}

/// The metadata documents waiting for chunks, indexed so that a settle looks only at the
/// files a new chunk may have completed, and knows at once which chunks no waiting file lists
/// (a walk over every waiting file per batch made a large pull's CPU grow with the square of
/// its waiting files).
#[derive(Debug, Clone, Default)]
struct Pending {
    docs: BTreeMap<String, Doc>,
    /// How many waiting documents list each chunk (a document listing one twice counts once).
    refs: BTreeMap<String, u32>,
    /// Waiting documents by a chunk they lacked when they came; an entry may name a document
    /// written since, which is skipped.
    waiters: BTreeMap<String, Vec<String>>,
    /// Documents whose chunks may all be in: what the next settle looks at.
    ready: BTreeSet<String>,
}

impl Pending {
    fn distinct_children(doc: &Doc) -> BTreeSet<&String> {
        doc.children.iter().flatten().collect()
    }

    /// Adds (or replaces) `doc`; `held` says whether a chunk is in.
    fn insert(&mut self, doc: Doc, held: impl Fn(&str) -> bool) -> Option<Doc> {
        let old = self.remove(&doc.id);
        for c in Pending::distinct_children(&doc) {
            *self.refs.entry(c.clone()).or_default() += 1;
            if !held(c) {
                self.waiters
                    .entry(c.clone())
                    .or_default()
                    .push(doc.id.clone());
            }
        }
        self.ready.insert(doc.id.clone());
        self.docs.insert(doc.id.clone(), doc);
        old
    }

    fn remove(&mut self, id: &str) -> Option<Doc> {
        let doc = self.docs.remove(id)?;
        self.ready.remove(id);
        for c in Pending::distinct_children(&doc) {
            if let Some(n) = self.refs.get_mut(c) {
                *n -= 1;
                if *n == 0 {
                    self.refs.remove(c);
                }
            }
        }
        Some(doc)
    }

    /// Chunk `id` is in: the documents that lacked it may be complete.
    fn chunk_arrived(&mut self, id: &str) {
        if let Some(ws) = self.waiters.remove(id) {
            self.ready
                .extend(ws.into_iter().filter(|w| self.docs.contains_key(w)));
        }
    }

    /// Whether a waiting document lists chunk `id`.
    fn lists(&self, id: &str) -> bool {
        self.refs.contains_key(id)
    }

    fn get(&self, id: &str) -> Option<&Doc> {
        self.docs.get(id)
    }

    fn contains_key(&self, id: &str) -> bool {
        self.docs.contains_key(id)
    }

    fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    fn len(&self) -> usize {
        self.docs.len()
    }
}

/// A chunk as held: its data, checked against its id, or why it cannot be used.
#[derive(Debug, Clone)]
enum Held {
    Data(String),
    Flawed(chunk::Flaw),
}

/// Bytes counted per held entry beyond its strings: the map node, the strings' headers.
const ENTRY_OVERHEAD: u64 = 128;
/// Bytes counted per chunk id a waiting file lists, beyond the id: the string's header.
const CHILD_OVERHEAD: u64 = 24;

/// What one replication pass brought in and wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pulled {
    /// Feed rows read.
    pub rows: u64,
    /// Chunks received through `_bulk_get`.
    pub chunks: u64,
    /// Chunks fetched on demand (`_all_docs` by keys).
    pub fetched: u64,
    /// Files written, and their bytes.
    pub files: u64,
    pub bytes: u64,
    /// Files removed.
    pub deleted: u64,
}

/// What a pass does with the files it receives.
#[derive(Clone, Copy)]
enum Mode<'a> {
    /// Writes them into the vault copy at this folder.
    Write(&'a Path),
    /// Only notes them (an idle resync compares what is on disk afterwards).
    Note,
}

impl Replica {
    pub fn new(node: &str) -> Replica {
        Replica {
            node: node.to_owned(),
            files: BTreeMap::new(),
            pending: Pending::default(),
            chunks: BTreeMap::new(),
            held: 0,
            since: Value::from(0),
            checkpoint: None,
        }
    }

    /// The feed's position as a query value.
    fn since_param(&self) -> String {
        match &self.since {
            Value::String(s) => {
                percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC)
                    .to_string()
            }
            v => v.to_string(),
        }
    }

    /// The bytes a document costs the budget while held.
    fn cost_of(doc: &Doc) -> u64 {
        let strings = doc.id.len()
            + doc.rev.as_deref().map_or(0, str::len)
            + doc.path.as_deref().map_or(0, str::len)
            + doc.data.as_deref().map_or(0, str::len);
        let children: u64 = doc
            .children
            .iter()
            .flatten()
            .map(|c| c.len() as u64 + CHILD_OVERHEAD)
            .sum();
        strings as u64 + children + ENTRY_OVERHEAD
    }

    fn cost_of_chunk(id: &str, held: &Held) -> u64 {
        let data = match held {
            Held::Data(d) => d.len(),
            Held::Flawed(_) => 0,
        };
        (id.len() + data) as u64 + ENTRY_OVERHEAD
    }

    fn cost_of_file(id: &str, f: &FileState) -> u64 {
        (id.len() + f.path.len() + f.rev.as_deref().map_or(0, str::len)) as u64 + ENTRY_OVERHEAD
    }

    /// The budget passed: an error naming the bound and what is held.
    fn check_budget(&self, client: &CouchClient) -> Result<(), CouchError> {
        let max = client.feed_bounds().max_bytes;
        if self.held <= max {
            return Ok(());
        }
        Err(CouchError::protocol(
            "pull",
            format!(
                "the server's documents would have the pull hold more than {} at once (bound --feed-max-bytes): {} chunks no written file has used, {} files waiting for chunks, {} files kept",
                crate::http::fmt_bytes(max),
                self.chunks.len(),
                self.pending.len(),
                self.files.len()
            ),
        ))
    }

    /// What an answer may take of the budget: what is left of it, at most the answer cap.
    fn answer_cap(&self, client: &CouchClient) -> (u64, &'static str) {
        let left = client.feed_bounds().max_bytes.saturating_sub(self.held);
        if left < super::client::MAX_ANSWER_BYTES {
            (left, "--feed-max-bytes, less what the pull holds")
        } else {
            (super::client::MAX_ANSWER_BYTES, "couch::MAX_ANSWER_BYTES")
        }
    }

    /// Reads the feed from where the replica is until a page is empty, fetching the
    /// revisions it lacks and writing each file into `dir` once its chunks are in. With
    /// `longpoll`, the first read waits for a change (heartbeat [`HEARTBEAT_MS`]) for at
    /// most that long. One call is one walk of the feed, bounded by the client's
    /// [`FeedBounds`]: a page past them is an error before its rows are fetched. When it
    /// returns, no file waits: the chunks the feed did not bring were fetched by keys.
    pub async fn replicate(
        &mut self,
        client: &CouchClient,
        rec: &Recorder,
        longpoll: Option<Duration>,
        dir: &Path,
    ) -> Result<Pulled, CouchError> {
        self.walk(client, rec, longpoll, Mode::Write(dir)).await
    }

    async fn walk(
        &mut self,
        client: &CouchClient,
        rec: &Recorder,
        longpoll: Option<Duration>,
        mode: Mode<'_>,
    ) -> Result<Pulled, CouchError> {
        let mut out = Pulled::default();
        let mut stalled = 0u32;
        let mut walk = FeedWalk::new(client.feed_bounds());
        let mut first = true;
        loop {
            let mut href = format!(
                "/_changes?style=all_docs&since={}&limit={BATCH}",
                self.since_param()
            );
            let mut req_timeout = super::client::REQUEST_TIMEOUT;
            let route = match longpoll {
                Some(wait) if first => {
                    href.push_str(&format!(
                        "&feed=longpoll&heartbeat={HEARTBEAT_MS}&timeout={}",
                        wait.as_millis()
                    ));
                    req_timeout = wait + Duration::from_secs(5);
                    "changes-longpoll"
                }
                _ => "changes",
            };
            first = false;
            let mut req = CouchClient::request(route, Method::GET, &href, None);
            req.timeout = req_timeout;
            (req.max_body, req.cap_name) = self.answer_cap(client);
            let (_, body) = client.call(rec, &req, &[200]).await?;
            let page = wire::parse_changes(&body).map_err(CouchError::Message)?;
            drop(body);
            match advance(&self.since, &mut stalled, &page)? {
                Step::End(last) => {
                    if let Some(last) = last {
                        self.since = last;
                    }
                    if let Mode::Write(dir) = mode {
                        self.settle(client, rec, dir, true, &mut out).await?;
                    }
                    return Ok(out);
                }
                Step::Rows => {}
            }
            count_rows(&mut walk, &page)?;
            let last = page.last_seq.clone().unwrap_or(Value::Null);
            out.rows = out.rows.saturating_add(page.results.len() as u64);
            let mut want: Vec<(String, String)> = Vec::new();
            for row in &page.results {
                for c in &row.changes {
                    let have = self
                        .files
                        .get(&row.id)
                        .is_some_and(|f| f.rev.as_ref() == Some(&c.rev))
                        || self.chunks.contains_key(&row.id);
                    if !have && !want.iter().any(|(i, r)| *i == row.id && *r == c.rev) {
                        want.push((row.id.clone(), c.rev.clone()));
                    }
                }
            }
            drop(page);
            for batch in want.chunks(BATCH) {
                out.chunks += self.bulk_get(client, rec, batch, mode).await?;
                if let Mode::Write(dir) = mode {
                    self.settle(client, rec, dir, false, &mut out).await?;
                    if self.held > client.feed_bounds().max_bytes / 2 {
                        // Files waiting on chunks the feed has not brought yet: fetch them
                        // now rather than hold more.
                        self.settle(client, rec, dir, true, &mut out).await?;
                    }
                }
                self.check_budget(client)?;
            }
            self.since = last;
        }
    }

    /// `POST _bulk_get` of `batch`: every document asked for must come back, as the
    /// revision asked for or an error naming why not. Returns the chunks received.
    async fn bulk_get(
        &mut self,
        client: &CouchClient,
        rec: &Recorder,
        batch: &[(String, String)],
        mode: Mode<'_>,
    ) -> Result<u64, CouchError> {
        let docs: Vec<Value> = batch
            .iter()
            .map(|(id, rev)| json!({"id": id, "rev": rev}))
            .collect();
        let body = serde_json::to_vec(&json!({ "docs": docs })).expect("JSON serialises");
        let mut req =
            CouchClient::request("bulk-get", Method::POST, "/_bulk_get?revs=true", Some(body));
        (req.max_body, req.cap_name) = self.answer_cap(client);
        let got: BulkGet = client.json(rec, &req, &[200], "_bulk_get answer").await?;
        let mut answered: BTreeSet<&str> = BTreeSet::new();
        let mut chunks = 0;
        for result in got.results {
            let Some((asked, _)) = batch.iter().find(|(id, _)| *id == result.id) else {
                return Err(CouchError::protocol(
                    "bulk-get",
                    format!(
                        "the answer holds {}, which was not asked for",
                        quote(&result.id)
                    ),
                ));
            };
            for d in result.docs {
                let Some(doc) = d.ok else {
                    return Err(CouchError::protocol(
                        "bulk-get",
                        format!(
                            "{}: {}",
                            quote(&result.id),
                            d.error
                                .map_or_else(|| "no document".into(), |e| clip_value(&e))
                        ),
                    ));
                };
                if doc.id != result.id {
                    return Err(CouchError::protocol(
                        "bulk-get",
                        format!(
                            "the answer for {} holds {}",
                            quote(&result.id),
                            quote(&doc.id)
                        ),
                    ));
                }
                answered.insert(asked.as_str());
                if self.take(doc, mode)? {
                    chunks += 1;
                }
            }
        }
        let missing: Vec<&str> = batch
            .iter()
            .map(|(id, _)| id.as_str())
            .filter(|id| !answered.contains(id))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        lacks("bulk-get", &missing, batch.len(), "documents")?;
        Ok(chunks)
    }

    /// Takes a document the server sent: a chunk is checked against its id and held (in
    /// [`Mode::Write`]); a file's metadata waits for its chunks, or (deleted) its file is
    /// removed. Returns whether it was a chunk.
    fn take(&mut self, doc: Doc, mode: Mode<'_>) -> Result<bool, CouchError> {
        if doc.tombstone {
            self.drop_chunk(&doc.id);
            if self.files.contains_key(&doc.id) || self.pending.contains_key(&doc.id) {
                self.remove_file(&doc.id, doc.rev.clone(), mode)?;
            }
            return Ok(false);
        }
        if doc.is_chunk() {
            if let Mode::Write(_) = mode
                && !self.chunks.contains_key(&doc.id)
            {
                let held = match doc.data {
                    Some(data) => match chunk::check(&doc.id, &data) {
                        Ok(()) => Held::Data(data),
                        Err(flaw) => Held::Flawed(flaw),
                    },
                    None => Held::Flawed(chunk::Flaw::NoData),
                };
                self.held = self
                    .held
                    .saturating_add(Replica::cost_of_chunk(&doc.id, &held));
                self.pending.chunk_arrived(&doc.id);
                self.chunks.insert(doc.id, held);
            }
            return Ok(true);
        }
        if !doc.is_file() {
            return Ok(false);
        }
        let Some(path) = doc.path.as_deref() else {
            return Err(CouchError::protocol(
                "bulk-get",
                format!("document {} has no path", quote(&doc.id)),
            ));
        };
        if crate::transfer::safe_rel_path(path).is_err() {
            return Err(CouchError::protocol(
                "bulk-get",
                format!(
                    "document {} names a path outside the vault: {}",
                    quote(&doc.id),
                    quote(path)
                ),
            ));
        }
        if doc.deleted {
            return self
                .remove_file(&doc.id, doc.rev.clone(), mode)
                .map(|()| false);
        }
        match mode {
            Mode::Write(_) => {
                self.held = self.held.saturating_add(Replica::cost_of(&doc));
                let chunks = &self.chunks;
                if let Some(old) = self.pending.insert(doc, |c| chunks.contains_key(c)) {
                    self.held = self.held.saturating_sub(Replica::cost_of(&old));
                }
            }
            Mode::Note => {
                let state = FileState {
                    rev: doc.rev.clone(),
                    path: path.to_owned(),
                    size: doc.size,
                    deleted: false,
                };
                self.keep_file(doc.id, state);
            }
        }
        Ok(false)
    }

    /// Records what is kept of file `id`, counted against the budget.
    fn keep_file(&mut self, id: String, state: FileState) {
        self.held = self.held.saturating_add(Replica::cost_of_file(&id, &state));
        if let Some(old) = self.files.insert(id.clone(), state) {
            self.held = self.held.saturating_sub(Replica::cost_of_file(&id, &old));
        }
    }

    fn drop_chunk(&mut self, id: &str) {
        if let Some(h) = self.chunks.remove(id) {
            self.held = self.held.saturating_sub(Replica::cost_of_chunk(id, &h));
        }
    }

    /// File `id` deleted on the server: removed from the copy (in [`Mode::Write`]), noted
    /// deleted.
    fn remove_file(
        &mut self,
        id: &str,
        rev: Option<String>,
        mode: Mode<'_>,
    ) -> Result<(), CouchError> {
        if let Some(old) = self.pending.remove(id) {
            self.held = self.held.saturating_sub(Replica::cost_of(&old));
        }
        let Some(path) = self.files.get(id).map(|f| f.path.clone()) else {
            return Ok(());
        };
        if let Mode::Write(dir) = mode
            && let Ok(rel) = crate::transfer::safe_rel_path(&path)
        {
            let abs = dir.join(rel);
            match std::fs::remove_file(&abs) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(CouchError::io(&abs, e)),
            }
        }
        let state = FileState {
            rev,
            path,
            size: None,
            deleted: true,
        };
        self.keep_file(id.to_owned(), state);
        Ok(())
    }

    /// Writes every waiting file whose chunks are all in; with `fetch`, first fetches by keys
    /// the chunks the others lack, so that none waits after it. Chunks no waiting file lists
    /// any more are dropped.
    async fn settle(
        &mut self,
        client: &CouchClient,
        rec: &Recorder,
        dir: &Path,
        fetch: bool,
        out: &mut Pulled,
    ) -> Result<(), CouchError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        // Without fetching, only the files a chunk may have completed; with it, every one.
        let ids: Vec<String> = if fetch {
            self.pending.ready.clear();
            self.pending.docs.keys().cloned().collect()
        } else {
            std::mem::take(&mut self.pending.ready)
                .into_iter()
                .collect()
        };
        if ids.is_empty() {
            return Ok(());
        }
        std::fs::create_dir_all(dir).map_err(|e| CouchError::io(dir, e))?;
        let mut used: BTreeSet<String> = BTreeSet::new();
        for id in ids {
            let Some(doc) = self.pending.get(&id) else {
                continue;
            };
            let complete = doc
                .children
                .iter()
                .flatten()
                .all(|c| self.chunks.contains_key(c));
            if !complete && !fetch {
                // It waits on a chunk that has not come: that chunk's arrival (or the last
                // settle, which fetches) brings it back.
                continue;
            }
            let children = doc.children.clone().unwrap_or_default();
            if !complete {
                let missing: Vec<String> = children
                    .iter()
                    .filter(|c| !self.chunks.contains_key(*c))
                    .cloned()
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect();
                let path = doc.path.clone().unwrap_or_default();
                // A file that cannot be made whatever its chunks are is refused before any
                // is fetched: each chunk is at least a byte.
                if let Some(size) = doc.size
                    && children.len() as u64 > size.max(1)
                {
                    return Err(CouchError::protocol(
                        "pull",
                        format!(
                            "{}: its metadata lists {} chunks for {size} bytes; nothing was written for the file",
                            quote(&path),
                            children.len()
                        ),
                    ));
                }
                for batch in missing.chunks(BATCH) {
                    out.fetched += self.fetch_chunks(client, rec, batch, &path).await?;
                    self.check_budget(client)?;
                }
            }
            let Some(doc) = self.pending.remove(&id) else {
                continue;
            };
            self.held = self.held.saturating_sub(Replica::cost_of(&doc));
            let written = self.write_doc(dir, &doc)?;
            out.files += 1;
            out.bytes += written;
            used.extend(children);
            let state = FileState {
                rev: doc.rev.clone(),
                path: doc.path.clone().unwrap_or_default(),
                size: Some(written),
                deleted: false,
            };
            self.keep_file(id, state);
        }
        // Chunks a written file used and no waiting file lists are dropped.
        let unneeded: Vec<String> = used
            .into_iter()
            .filter(|c| !self.pending.lists(c))
            .collect();
        for c in unneeded {
            self.drop_chunk(&c);
        }
        Ok(())
    }

    /// Assembles metadata document `doc`'s file from the held chunks into a temp file beside
    /// it, then renames it into place: every chunk is checked before a byte is written, and
    /// on any error the temp file is removed and nothing is left. Returns the bytes written.
    fn write_doc(&self, dir: &Path, doc: &Doc) -> Result<u64, CouchError> {
        let path = doc.path.as_deref().unwrap_or_default();
        let rel = crate::transfer::safe_rel_path(path).map_err(|_| {
            CouchError::protocol(
                "bulk-get",
                format!("document {} names a path outside the vault", quote(&doc.id)),
            )
        })?;
        let abs = dir.join(rel);
        let kind = if doc.kind.as_deref() == Some("plain") {
            Kind::Plain
        } else {
            Kind::Binary
        };
        let children = doc.children.as_deref().unwrap_or_default();
        let get = |c: &str| -> Option<Result<&str, chunk::Flaw>> {
            self.chunks.get(c).map(|h| match h {
                Held::Data(d) => Ok(d.as_str()),
                Held::Flawed(f) => Err(*f),
            })
        };
        // Checked before the temp file is made.
        chunk::check_file(path, kind, children, doc.size, &get)
            .map_err(|e| CouchError::protocol("pull", e.to_string()))?;
        write_streamed(&abs, |w| {
            chunk::assemble(path, kind, children, doc.size, &get, w)
                .map_err(|e| CouchError::protocol("pull", e.to_string()))
        })
    }

    /// `POST _all_docs?include_docs=true` of `keys`, the chunks of file `path`: every key must
    /// come back as a chunk, checked against its id. Returns the chunks taken.
    async fn fetch_chunks(
        &mut self,
        client: &CouchClient,
        rec: &Recorder,
        keys: &[String],
        path: &str,
    ) -> Result<u64, CouchError> {
        let body = serde_json::to_vec(&json!({ "keys": keys })).expect("JSON serialises");
        let mut req = CouchClient::request(
            "all-docs-keys",
            Method::POST,
            "/_all_docs?include_docs=true",
            Some(body),
        );
        (req.max_body, req.cap_name) = self.answer_cap(client);
        let got: AllDocs = client.json(rec, &req, &[200], "_all_docs answer").await?;
        let mut n = 0;
        let mut answered: BTreeSet<String> = BTreeSet::new();
        for row in got.rows {
            match row.doc {
                Some(doc) if doc.is_chunk() && keys.contains(&doc.id) => {
                    let Some(data) = doc.data else {
                        return Err(flawed(&doc.id, path, chunk::Flaw::NoData));
                    };
                    if let Err(flaw) = chunk::check(&doc.id, &data) {
                        return Err(flawed(&doc.id, path, flaw));
                    }
                    answered.insert(doc.id.clone());
                    if !self.chunks.contains_key(&doc.id) {
                        let held = Held::Data(data);
                        self.held = self
                            .held
                            .saturating_add(Replica::cost_of_chunk(&doc.id, &held));
                        self.chunks.insert(doc.id, held);
                        n += 1;
                    }
                }
                _ => {
                    return Err(CouchError::protocol(
                        "all-docs-keys",
                        format!(
                            "chunk {} of {} is not on the server ({})",
                            clip_value(&row.key),
                            quote(path),
                            row.error
                                .as_deref()
                                .map_or_else(|| "no document".to_owned(), text)
                        ),
                    ));
                }
            }
        }
        let missing: Vec<&str> = keys
            .iter()
            .map(String::as_str)
            .filter(|k| !answered.contains(*k))
            .collect();
        lacks(
            "all-docs-keys",
            &missing,
            keys.len(),
            &format!("chunks of {}", quote(path)),
        )?;
        Ok(n)
    }

    async fn checkpoint(&mut self, client: &CouchClient, rec: &Recorder) -> Result<(), CouchError> {
        let mut cp = match self.checkpoint.take() {
            Some(cp) => cp,
            None => Checkpoint::read(&self.node, client, rec).await?,
        };
        let since = self.since.clone();
        let r = cp.write(client, rec, &since).await;
        self.checkpoint = Some(cp);
        r
    }

    /// Cold pull into `dir`: set-up checks, the whole feed replicated, every file written as
    /// its chunks arrive.
    pub async fn pull_vault(
        &mut self,
        client: &CouchClient,
        dir: &Path,
    ) -> Result<TransferReport, CouchError> {
        let rec = Recorder::new(false);
        let t0 = Instant::now();
        setup(client, &rec, &self.node, false).await?;
        self.checkpoint = Some(Checkpoint::read(&self.node, client, &rec).await?);
        // The folder is made when the first file is written (and at the end, for an empty
        // database): a pull that fails on its feed leaves nothing.
        let pulled = self.replicate(client, &rec, None, dir).await?;
        std::fs::create_dir_all(dir).map_err(|e| CouchError::io(dir, e))?;
        self.checkpoint(client, &rec).await?;
        let mut r =
            crate::transfer::report(rec.snapshot(), t0.elapsed(), pulled.files, 0, pulled.bytes);
        r.chunks_transferred = pulled.chunks + pulled.fetched;
        r.deleted = pulled.deleted;
        r.last_seq = self.since.as_u64().unwrap_or(0);
        Ok(r)
    }

    /// Idle resync: the checkpoint read, one feed read from it (which should list nothing),
    /// and the copy under `dir` compared with the replica. `mismatched` counts feed rows and
    /// files whose size differs from their metadata.
    pub async fn resync(
        &mut self,
        client: &CouchClient,
        dir: &Path,
    ) -> Result<TransferReport, CouchError> {
        let rec = Recorder::new(false);
        let t0 = Instant::now();
        self.checkpoint = Some(Checkpoint::read(&self.node, client, &rec).await?);
        let pulled = self.walk(client, &rec, None, Mode::Note).await?;
        let mut mismatched = pulled.rows;
        let mut files = 0;
        for f in self.files.values().filter(|f| !f.deleted) {
            files += 1;
            let ok = crate::transfer::safe_rel_path(&f.path)
                .ok()
                .and_then(|p| std::fs::metadata(dir.join(p)).ok())
                .is_some_and(|m| Some(m.len()) == f.size);
            if !ok {
                mismatched += 1;
            }
        }
        let mut r = crate::transfer::report(rec.snapshot(), t0.elapsed(), files, 0, 0);
        r.mismatched = mismatched;
        r.last_seq = self.since.as_u64().unwrap_or(0);
        Ok(r)
    }

    /// Live replication until `done` (long polls of at most `until - now` each), each pass
    /// writing the changed files into `dir`, then the checkpoint. Counts go to `rec`.
    pub async fn wait_for(
        &mut self,
        client: &CouchClient,
        rec: &Recorder,
        dir: &Path,
        until: Instant,
        done: &(dyn Fn(&Replica) -> bool + Send + Sync),
    ) -> Result<Pulled, CouchError> {
        let mut all = Pulled::default();
        while !done(self) {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(CouchError::protocol(
                    "changes-longpoll",
                    "the awaited change did not arrive before the deadline",
                ));
            }
            let p = self.replicate(client, rec, Some(left), dir).await?;
            all.rows += p.rows;
            all.chunks += p.chunks;
            all.fetched += p.fetched;
            all.files += p.files;
            all.bytes += p.bytes;
            all.deleted += p.deleted;
        }
        self.checkpoint(client, rec).await?;
        Ok(all)
    }

    /// Whether the replica holds a live file under `prefix` (`Folder/`).
    pub fn has_path_under(&self, prefix: &str) -> bool {
        self.files
            .values()
            .any(|f| !f.deleted && f.path.starts_with(prefix))
    }

    /// What the replica keeps of vault path `rel`'s file, if it has written it.
    pub fn file_of(&self, rel: &str) -> Option<&FileState> {
        self.files.get(&chunk::doc_id(rel))
    }

    /// The bytes the replica holds now, as counted against `--feed-max-bytes`.
    pub fn held_bytes(&self) -> u64 {
        self.held
    }
}

/// The one-line error for a chunk fetched by key that cannot be used.
fn flawed(id: &str, path: &str, flaw: chunk::Flaw) -> CouchError {
    CouchError::protocol(
        "all-docs-keys",
        format!(
            "chunk {} of {}: {}; nothing was written for the file",
            quote(id),
            quote(path),
            flaw.reason()
        ),
    )
}

/// A few of `ids`, quoted, and how many more.
/// An answer that lacks some of the `asked` `what` (ids `missing`) is a protocol error of `route`.
fn lacks(
    route: &'static str,
    missing: &[&str],
    asked: usize,
    what: &str,
) -> Result<(), CouchError> {
    if missing.is_empty() {
        return Ok(());
    }
    Err(CouchError::protocol(
        route,
        format!(
            "the answer lacks {} of the {asked} {what} asked for: {}",
            missing.len(),
            name_some(missing)
        ),
    ))
}

fn name_some(ids: &[&str]) -> String {
    let mut out: Vec<String> = ids.iter().take(3).map(|i| quote(i)).collect();
    if ids.len() > 3 {
        out.push(format!("and {} more", ids.len() - 3));
    }
    out.join(", ")
}

fn quote(s: &str) -> String {
    contract::quote::quote(s)
}

fn text(s: &str) -> String {
    contract::quote::text(s)
}

/// Writes a file at `abs` through a temp file in the same folder, `fill` writing its bytes;
/// the temp file is removed on every error path. Returns what `fill` returns.
fn write_streamed(
    abs: &Path,
    fill: impl FnOnce(&mut dyn std::io::Write) -> Result<u64, CouchError>,
) -> Result<u64, CouchError> {
    let parent = abs.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(|e| CouchError::io(parent, e))?;
    // A short temp name: the file's own may already be at the 255-byte limit.
    let name = abs
        .file_name()
        .map(|n| n.as_encoded_bytes())
        .unwrap_or_default();
    let tag = hex::encode(&Sha256::digest(name)[..8]);
    let tmp: PathBuf = parent.join(format!(".vbtmp-{tag}"));
    let file = std::fs::File::create(&tmp).map_err(|e| CouchError::io(&tmp, e))?;
    let mut w = std::io::BufWriter::with_capacity(256 * 1024, file);
    let r = fill(&mut w).and_then(|n| {
        use std::io::Write as _;
        w.flush()
            .and_then(|()| std::fs::rename(&tmp, abs))
            .map_err(|e| CouchError::io(abs, e))?;
        Ok(n)
    });
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    r
}

/// A server's JSON value for a message: escaped and clipped ([`contract::quote::text`]).
fn clip_value(v: &Value) -> String {
    text(&v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revisions_chain_and_differ_by_body() {
        let d = Doc {
            kind: Some("leaf".into()),
            data: Some("x".into()),
            ..bare("h:1")
        };
        let (r1, v1) = next_rev(None, &d);
        assert!(r1.starts_with("1-") && r1.len() == 34, "{r1}");
        assert_eq!(v1.start, 1);
        let (r2, v2) = next_rev(Some(&r1), &d);
        assert!(r2.starts_with("2-"), "{r2}");
        assert_eq!(v2.ids.len(), 2);
        assert_eq!(v2.ids[1], r1[2..]);
        let e = Doc {
            data: Some("y".into()),
            ..d
        };
        assert_ne!(next_rev(None, &e).0, r1);
        // A server's odd revision never panics.
        assert!(next_rev(Some("x-"), &e).0.starts_with("1-"));
        assert!(
            next_rev(Some("18446744073709551615-a"), &e)
                .0
                .starts_with("18446744073709551615-")
        );
    }

    #[test]
    fn a_file_becomes_chunks_then_metadata_and_chunks_are_written_once() {
        let mut w = Writer::new("a");
        let mut dedup = 0;
        let body = "same body\n".repeat(50);
        let one = w.file_docs("A/one.md", body.as_bytes(), (1, 2), &mut dedup);
        let two = w.file_docs("B/two.md", body.as_bytes(), (1, 2), &mut dedup);
        assert!(one.len() >= 2);
        assert!(one[..one.len() - 1].iter().all(Doc::is_chunk));
        let meta = one.last().unwrap();
        assert_eq!(meta.kind.as_deref(), Some("plain"));
        assert_eq!(meta.id, "a/one.md");
        assert_eq!(
            two.len(),
            1,
            "the second copy's chunks were already written"
        );
        assert_eq!(dedup as usize, one.len() - 1);
        assert_eq!(two[0].children, meta.children);
    }
}
