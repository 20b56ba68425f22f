//! The proxy's overhead on signed obsync v1 requests (`probe proxy --obsync`): one enrolled
//! device of the server pushes small notes and reads them back, straight to the server and,
//! as a second device view with its own nonce stream, through a proxy in front of it. Each
//! block is `notes` turns of one note: `POST /v1/chunks/exists` of its chunk, `PUT
//! /v1/chunks/{sid}` of it (a fresh 1.5 KiB chunk, random as an encrypted note's bytes are),
//! `POST /v1/files/{id}/versions` of a new file (the push: the reference server fsyncs both
//! writes before answering), `GET /v1/changes?since=0&limit=100` (a full feed page) and `GET
//! /v1/chunks/{sid}` (the note fetched back). Rounds alternate as in the `GET` mode (one
//! block each way, which first alternating by round; the first round a warm-up), each block
//! on a connection of its own opened by an unsigned `GET /livez` that is not counted. Every
//! request is signed afresh before its clock starts; its latency runs from its first byte
//! written to its answer's last byte read, over the lean HTTP/1.1 path of route load.

use std::sync::Arc;

use anyhow::{Context, bail};
use hdrhistogram::Histogram;
use protocol::Route;
use protocol::wire::SidsRequest;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::IO_DEADLINE;
use crate::h1::BlockingSlot;
use crate::protocols::obsync::client::{Device, Outgoing, WorkerConn};
use crate::protocols::obsync::route::{CHANGES_PAGE, PREP_VERSIONS, random_chunk, version_body};
use crate::proxy::{Classifier, Proxy, ProxyConfig};
use crate::stats::Recorder;
use crate::target::Target;

/// Notes pushed before the first round, so that every `changes` read returns a full page.
pub const FEED_NOTES: usize = PREP_VERSIONS;

/// The requests of one note's turn, in order, and whether each is part of a push (a write
/// the server makes durable) or a read.
pub const TURN: [(Route, bool); 5] = [
    (Route::ChunksExists, false),
    (Route::PutChunk, true),
    (Route::PostVersion, true),
    (Route::Changes, false),
    (Route::GetChunk, false),
];

/// One request kind's latencies each way, µs.
pub struct KindOverhead {
    /// The route's generator label (`put-chunk`).
    pub route: &'static str,
    pub push: bool,
    pub direct: Histogram<u64>,
    pub proxied: Histogram<u64>,
}

/// What [`measure`] found: each request kind's latencies, and the requests the proxy counted
/// (the warm-up round's and the connections' opening `GET /livez` included).
pub struct ObsyncOverhead {
    pub kinds: Vec<KindOverhead>,
    pub counted: u64,
}

impl ObsyncOverhead {
    /// The pushes' (`push`) or the reads' latencies merged: (direct, proxied).
    pub fn merged(&self, push: bool) -> anyhow::Result<(Histogram<u64>, Histogram<u64>)> {
        let (mut d, mut p) = (crate::latency_histogram(), crate::latency_histogram());
        for k in self.kinds.iter().filter(|k| k.push == push) {
            d.add(&k.direct).context("merging latencies")?;
            p.add(&k.proxied).context("merging latencies")?;
        }
        Ok((d, p))
    }
}

/// `q` (0..=1) of `direct` and `proxied`, and the difference, µs.
pub fn at(direct: &Histogram<u64>, proxied: &Histogram<u64>, q: f64) -> (u64, u64, i64) {
    let (d, p) = (direct.value_at_quantile(q), proxied.value_at_quantile(q));
    (d, p, p as i64 - d as i64)
}

/// One arm: the device as that arm's client sees the server, and where its counted requests
/// are recorded.
struct Arm<'a> {
    name: &'static str,
    device: &'a Device,
    counted: Recorder,
}

/// What a run's turns write, shared by both arms: the chunks' seeded stream and the next
/// file's number.
struct Notes {
    rng: ChaCha8Rng,
    next: u64,
    seed: u64,
}

/// `rounds` counted rounds (plus one warm-up) of `notes` turns each way, by `device` (enrolled
/// on the server it targets) straight and through a proxy started in front of that server.
/// `seed` picks the chunks' bytes. A request answered other than 2xx ends the run with an
/// error naming it.
pub fn measure(
    device: &Device,
    rounds: usize,
    notes: usize,
    seed: u64,
) -> anyhow::Result<ObsyncOverhead> {
    let proxy = Proxy::start(ProxyConfig {
        upstream: device.target().addr(),
        read_timeout: IO_DEADLINE,
        classifier: Classifier::default(),
    })
    .context("starting the recording proxy")?;
    let via = Target::parse(&proxy.url(), false).context("the proxy's address")?;
    let proxied_device = device.via(via);
    let mut notes_state = Notes {
        rng: ChaCha8Rng::seed_from_u64(seed),
        next: 0,
        seed,
    };
    let warm = Recorder::new(false);
    // A full feed page for every `changes` read: the versions before the first round.
    {
        let mut conn = connection(device, &warm).context("preparing the feed")?;
        for _ in 0..FEED_NOTES {
            push_note(device, &mut conn, &warm, &mut notes_state).context("preparing the feed")?;
        }
    }
    let direct = Arm {
        name: "direct",
        device,
        counted: Recorder::new(false),
    };
    let proxied = Arm {
        name: "through the proxy",
        device: &proxied_device,
        counted: Recorder::new(false),
    };
    for round in 0..=rounds {
        let order = if round % 2 == 0 {
            [&direct, &proxied]
        } else {
            [&proxied, &direct]
        };
        for arm in order {
            let rec = if round > 0 { &arm.counted } else { &warm };
            block(arm.device, rec, notes, &mut notes_state)
                .with_context(|| format!("round {round}, {}", arm.name))?;
        }
    }
    proxy.close_connections();
    let (d, p) = (direct.counted.snapshot(), proxied.counted.snapshot());
    let hist = |m: &crate::stats::Measured, label: &str| {
        m.routes
            .get(label)
            .map(|r| r.latency.clone())
            .unwrap_or_else(crate::latency_histogram)
    };
    let kinds = TURN
        .iter()
        .map(|&(route, push)| KindOverhead {
            route: route.label(),
            push,
            direct: hist(&d, route.label()),
            proxied: hist(&p, route.label()),
        })
        .collect();
    Ok(ObsyncOverhead {
        kinds,
        counted: proxy.take().requests(),
    })
}

/// A block's connection, opened by an unsigned `GET /livez` recorded in `warm`.
fn connection(device: &Device, warm: &Recorder) -> anyhow::Result<WorkerConn> {
    let mut conn = WorkerConn::blocking(device, IO_DEADLINE, Arc::new(BlockingSlot::default()));
    let out = Outgoing::new(Route::Livez, "/livez").unsigned();
    expect_ok(device.send_blocking(warm, &mut conn, &out), Route::Livez)?;
    Ok(conn)
}

fn expect_ok(r: Result<u16, crate::LoadError>, route: Route) -> anyhow::Result<()> {
    let what = format!("{} {}", route.method(), route.label());
    match r {
        Ok(s) if (200..300).contains(&s) => Ok(()),
        Ok(s) => bail!("{what} answered {s}"),
        Err(e) => Err(anyhow::Error::new(e).context(what)),
    }
}

/// One block: `notes` turns on a connection of its own.
fn block(device: &Device, rec: &Recorder, notes: usize, state: &mut Notes) -> anyhow::Result<()> {
    let mut conn = connection(device, rec)?;
    for _ in 0..notes {
        let sid = push_note(device, &mut conn, rec, state)?;
        let changes = format!("/v1/changes?since=0&limit={CHANGES_PAGE}");
        let chunk = format!("/v1/chunks/{sid}");
        for (route, pq) in [(Route::Changes, &changes), (Route::GetChunk, &chunk)] {
            let out = Outgoing::new(route, pq);
            expect_ok(device.send_blocking(rec, &mut conn, &out), route)?;
        }
    }
    Ok(())
}

/// A new note pushed as a client pushes it: its chunk asked after, uploaded, and its file's
/// first version posted. Returns the chunk's sid.
fn push_note(
    device: &Device,
    conn: &mut WorkerConn,
    rec: &Recorder,
    state: &mut Notes,
) -> anyhow::Result<String> {
    let (body, sid) = random_chunk(&mut state.rng);
    let n = state.next;
    state.next += 1;
    let exists = serde_json::to_vec(&SidsRequest {
        sids: vec![sid.clone()],
    })
    .context("a chunks/exists body")?;
    let put = format!("/v1/chunks/{sid}");
    let path = format!("vaultbench-probe/{:016x}/{n}.md", state.seed);
    let (version, version_json) = version_body(device, &sid, &path, device.random_hex(12));
    let requests: [(Route, Outgoing<'_>); 3] = [
        (
            Route::ChunksExists,
            Outgoing::post_json(Route::ChunksExists, "/v1/chunks/exists", exists),
        ),
        (
            Route::PutChunk,
            Outgoing {
                body,
                body_sha256: Some(&sid),
                content_type: Some("application/octet-stream"),
                ..Outgoing::new(Route::PutChunk, &put)
            },
        ),
        (
            Route::PostVersion,
            Outgoing::post_json(Route::PostVersion, &version, version_json),
        ),
    ];
    for (route, out) in &requests {
        expect_ok(device.send_blocking(rec, conn, out), *route)?;
    }
    Ok(sid)
}
