//! Setup, pairing, a note pushed by A reaching B's waiting long poll, and B's reads.

use std::time::{Duration, Instant};

use hyper::{Method, StatusCode};
use protocol::wire::{ChangesResponse, FileResponse, MissingResponse, SidsRequest};

use crate::client::Api;
use crate::{file_id, start};

/// Splits a `multipart/mixed` body into (headers, body) parts using each part's
/// Content-Length, as a client that trusts the server's framing does.
/// One multipart part: lowercased headers and the body.
type Part = (Vec<(String, String)>, Vec<u8>);

fn parse_multipart(content_type: &str, body: &[u8]) -> Vec<Part> {
    let boundary = content_type
        .split("boundary=")
        .nth(1)
        .expect("boundary parameter");
    let delim = format!("--{boundary}");
    let mut parts = Vec::new();
    let mut at = 0;
    loop {
        assert!(
            body[at..].starts_with(delim.as_bytes()),
            "delimiter at {at}"
        );
        at += delim.len();
        if body[at..].starts_with(b"--") {
            break;
        }
        at += 2; // CRLF
        let head_end = at
            + body[at..]
                .windows(4)
                .position(|w| w == b"\r\n\r\n")
                .expect("end of part headers");
        let headers: Vec<(String, String)> = std::str::from_utf8(&body[at..head_end])
            .unwrap()
            .split("\r\n")
            .map(|l| {
                let (k, v) = l.split_once(':').unwrap();
                (k.trim().to_ascii_lowercase(), v.trim().to_owned())
            })
            .collect();
        let len: usize = headers
            .iter()
            .find(|(k, _)| k == "content-length")
            .unwrap()
            .1
            .parse()
            .unwrap();
        at = head_end + 4;
        parts.push((headers, body[at..at + len].to_vec()));
        at += len + 2; // body + CRLF
    }
    parts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_reaches_the_second_devices_long_poll_and_reads_back_identical() {
    let (server, _dir) = start(false);
    let api = Api::new(&server.url(), 1);
    assert_eq!(
        api.raw(Method::GET, "/livez", &[], "").await.status,
        StatusCode::OK
    );
    let a = api.setup(&server.setup_token).await;
    let b = api.pair(&a, "device-b").await;

    // B waits on the change feed before A pushes anything.
    let api_b = Api::new(&server.url(), 2);
    let b2 = b.clone();
    let poll = tokio::spawn(async move {
        let started = Instant::now();
        let r = api_b
            .signed(&b2, Method::GET, "/v1/changes?since=0&wait=30", "")
            .await;
        (r, started.elapsed())
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let note = b"# A note\n\nwith [[links]] and text.\n".repeat(40);
    let fid = file_id(7);
    let posted = api.new_note(&a, &fid, &note).await;
    assert_eq!(posted.seq, 1);
    assert_eq!(posted.heads, vec![posted.version_id.clone()]);
    assert!(!posted.conflicted);

    let (r, waited) = poll.await.unwrap();
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    assert!(
        waited < Duration::from_secs(10),
        "long poll took {waited:?}"
    );
    let feed: ChangesResponse = r.json();
    assert_eq!(feed.seq, 1);
    assert_eq!(feed.head_seq, 1);
    assert_eq!(feed.changes.len(), 1);
    let change = &feed.changes[0];
    assert_eq!(change.file_id, fid);
    assert_eq!(change.device_id, a.device_id);
    let sid = change.sids[0].clone();

    // Single read, a range, and a batched multipart read with one missing sid.
    let r = api
        .signed(&b, Method::GET, &format!("/v1/chunks/{sid}"), "")
        .await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(&r.body[..], &note[..]);
    let target = format!("/v1/chunks/{sid}");
    let nonce = api.random_hex(16);
    let mut headers = Api::sign(
        &b,
        &Method::GET,
        &target,
        b"",
        crate::client::now_s(),
        &nonce,
    );
    headers.push(("range", "bytes=2-8".into()));
    let r = api.raw(Method::GET, &target, &headers, "").await;
    assert_eq!(r.status, StatusCode::PARTIAL_CONTENT);
    assert_eq!(&r.body[..], &note[2..=8]);
    assert_eq!(
        r.headers["content-range"].to_str().unwrap(),
        format!("bytes 2-8/{}", note.len())
    );

    let absent = "ab".repeat(32);
    let req = SidsRequest {
        sids: vec![sid.clone(), absent.clone(), sid.clone()],
    };
    let r = api
        .signed(
            &b,
            Method::POST,
            "/v1/chunks/get",
            serde_json::to_vec(&req).unwrap(),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK);
    let ct = r.headers["content-type"].to_str().unwrap().to_owned();
    assert!(ct.starts_with("multipart/mixed; boundary="), "{ct}");
    let parts = parse_multipart(&ct, &r.body);
    assert_eq!(parts.len(), 3);
    let hv = |p: &Part, k: &str| p.0.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    assert_eq!(hv(&parts[0], "x-obsync-sid").as_deref(), Some(sid.as_str()));
    assert_eq!(parts[0].1, note);
    assert_eq!(
        hv(&parts[1], "x-obsync-sid").as_deref(),
        Some(absent.as_str())
    );
    assert_eq!(hv(&parts[1], "x-obsync-missing").as_deref(), Some("1"));
    assert!(parts[1].1.is_empty());
    assert_eq!(parts[2].1, note);

    // exists, file state, list, and an idle long poll that times out empty.
    let r = api
        .signed(
            &b,
            Method::POST,
            "/v1/chunks/exists",
            serde_json::to_vec(&req).unwrap(),
        )
        .await;
    assert_eq!(r.json::<MissingResponse>().missing, vec![absent]);
    let r = api
        .signed(&b, Method::GET, &format!("/v1/files/{fid}"), "")
        .await;
    let f: FileResponse = r.json();
    assert_eq!(f.heads, vec![posted.version_id.clone()]);
    assert_eq!(f.versions[0].sids, vec![sid]);
    let r = api.signed(&b, Method::GET, "/v1/files?limit=10", "").await;
    let v: serde_json::Value = r.json();
    assert_eq!(v["files"].as_array().unwrap().len(), 1);
    let started = Instant::now();
    let r = api
        .signed(&b, Method::GET, "/v1/changes?since=1&wait=1", "")
        .await;
    assert!(started.elapsed() >= Duration::from_millis(900));
    let feed: ChangesResponse = r.json();
    assert!(feed.changes.is_empty());
    assert_eq!(feed.seq, 1);

    // Every answer carries Cache-Control: no-store; metrics saw the wake-up.
    assert_eq!(r.headers["cache-control"], "no-store");
    let m = api.metrics().await;
    assert_eq!(m["obsync_longpoll_wakeups_total"], 1.0);
    assert_eq!(m["obsync_versions_total"], 1.0);
    assert_eq!(m["obsync_head_seq"], 1.0);
    assert_eq!(m["obsync_chunks_stored_total"], 1.0);
    assert_eq!(m["obsync_chunk_bytes_stored_total"], note.len() as f64);
    assert_eq!(
        m["obsync_requests_total{route=\"post_version\",status=\"201\"}"],
        1.0
    );
    server.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heads_conflicts_tombstones_and_idempotent_posts() {
    let (server, _dir) = start(false);
    let api = Api::new(&server.url(), 3);
    let a = api.setup(&server.setup_token).await;
    let b = api.pair(&a, "b").await;
    let fid = file_id(1);
    let v1 = api.new_note(&a, &fid, b"one").await;
    // Posting the same version again is a 200 no-op with the same seq.
    let (_, sid) = api.put_chunk(&a, b"one").await;
    let same = Api::version(&fid, vec![], vec![sid], 3, b"manifest");
    let r = api.post_version(&a, &fid, &same).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.json::<protocol::wire::VersionPostResponse>().seq, v1.seq);

    // A and B both edit on top of v1: the second becomes a second head (conflict).
    let (_, s2) = api.put_chunk(&a, b"two-a").await;
    let va = Api::version(&fid, vec![v1.version_id.clone()], vec![s2], 5, b"ma");
    let ra: protocol::wire::VersionPostResponse = api.post_version(&a, &fid, &va).await.json();
    assert!(!ra.conflicted);
    let (_, s3) = api.put_chunk(&b, b"two-b").await;
    let vb = Api::version(&fid, vec![v1.version_id.clone()], vec![s3], 5, b"mb");
    let rb: protocol::wire::VersionPostResponse = api.post_version(&b, &fid, &vb).await.json();
    assert!(rb.conflicted);
    assert_eq!(rb.heads.len(), 2);
    // A merge naming both heads resolves it; a tombstone then deletes the file.
    let merge = Api::version(&fid, rb.heads.clone(), vec![], 0, b"merged");
    let rm: protocol::wire::VersionPostResponse = api.post_version(&a, &fid, &merge).await.json();
    assert!(!rm.conflicted);
    assert_eq!(rm.heads, vec![merge.version_id.clone()]);
    let mut tomb = Api::version(&fid, rm.heads.clone(), vec![], 0, b"gone");
    tomb.deleted = true;
    let r = api.post_version(&a, &fid, &tomb).await;
    assert_eq!(r.status, StatusCode::CREATED);
    let feed: ChangesResponse = api
        .signed(&b, Method::GET, "/v1/changes?since=0&limit=2", "")
        .await
        .json();
    assert_eq!(feed.changes.len(), 2);
    assert_eq!(feed.seq, 2);
    assert_eq!(feed.head_seq, 5);
    // Another domain for the same file is refused.
    let mut other = Api::version(&fid, vec![], vec![], 0, b"x");
    other.domain_id = "11".repeat(16);
    let r = api.post_version(&a, &fid, &other).await;
    assert_eq!(
        (r.status, r.error().as_str()),
        (StatusCode::CONFLICT, "domain_mismatch")
    );
}
