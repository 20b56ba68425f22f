//! The obsync client against fake servers on loopback that answer badly: one test per class
//! of misbehaviour (an answer trickled or never sent, a huge declared length, a feed that does
//! not advance or never ends, malformed multipart lengths and offsets, paths that climb out of
//! the vault).
//! Each ends well within 60 s with a one-line error naming what the server did, and leaves
//! nothing half-written in the vault and nothing outside it.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use loadgen::{FeedBounds, FeedOverrun, LoadError, Target, enroll, pull_vault};
use sha2::{Digest, Sha256};

/// What the fake does with one request: answer these bytes and close, or misbehave.
#[derive(Clone)]
enum Act {
    /// Write the bytes, then close.
    Answer(Vec<u8>),
    /// Write the bytes one at a time, `every` apart, then close.
    Trickle(Vec<u8>, Duration),
    /// Accept, read the request, never answer (hold the socket until the fake stops).
    Silent,
}

type Script = Arc<dyn Fn(&str, &str) -> Act + Send + Sync>;

/// A fake obsync server on 127.0.0.1:0: `/readyz` and `/v1/setup` answer as a real server
/// does, every other request as `script` says (given the method and the path with its
/// query). Counts requests by path without the query.
struct Fake {
    target: Target,
    counts: Arc<Mutex<BTreeMap<String, u64>>>,
    stop: Arc<AtomicBool>,
}

impl Drop for Fake {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

impl Fake {
    fn start(script: impl Fn(&str, &str) -> Act + Send + Sync + 'static) -> Fake {
        let script: Script = Arc::new(script);
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        l.set_nonblocking(true).unwrap();
        let counts = Arc::new(Mutex::new(BTreeMap::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (c, st) = (counts.clone(), stop.clone());
        std::thread::spawn(move || {
            // Bounded: no fake outlives a minute, whatever a test does.
            let until = Instant::now() + Duration::from_secs(60);
            while !st.load(Ordering::SeqCst) && Instant::now() < until {
                match l.accept() {
                    Ok((s, _)) => {
                        let (script, c, st) = (script.clone(), c.clone(), st.clone());
                        std::thread::spawn(move || serve(s, &script, &c, &st));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Fake {
            target: Target::parse(&format!("http://{addr}"), false).unwrap(),
            counts,
            stop,
        }
    }

    fn count(&self, path: &str) -> u64 {
        self.counts.lock().unwrap().get(path).copied().unwrap_or(0)
    }
}

/// Reads one request (head and `content-length` body) and acts on it.
fn serve(
    mut s: TcpStream,
    script: &Script,
    counts: &Mutex<BTreeMap<String, u64>>,
    stop: &AtomicBool,
) {
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let Some((req, _)) = testkit::read_request(&mut s, Vec::new()) else {
        return;
    };
    let (method, pq, path) = (req.method.as_str(), req.target.as_str(), req.path());
    *counts.lock().unwrap().entry(path.to_owned()).or_default() += 1;
    let act = match path {
        "/readyz" => Act::Answer(json(200, r#"{"ready":true,"seq":0}"#)),
        "/v1/setup" => Act::Answer(json(
            201,
            &format!(
                r#"{{"account_id":"a","device_id":"{}","device_secret":"{}"}}"#,
                "01".repeat(16),
                "02".repeat(32)
            ),
        )),
        _ => script(method, pq),
    };
    match act {
        Act::Answer(bytes) => {
            let _ = s.write_all(&bytes);
        }
        Act::Trickle(bytes, every) => {
            for b in bytes {
                if stop.load(Ordering::SeqCst) || s.write_all(&[b]).is_err() {
                    return;
                }
                std::thread::sleep(every);
            }
        }
        Act::Silent => {
            while !stop.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

fn json(status: u16, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// A feed entry for `path` (a file of `content`, in chunks `sids`) at `seq`.
fn change(seq: u64, path: &str, content: &[u8], sids: &[String]) -> serde_json::Value {
    let manifest = serde_json::json!({
        "path": path, "kind": "file", "size": content.len(),
        "sha256": hex::encode(Sha256::digest(content)),
    });
    let ct = base64::engine::general_purpose::STANDARD.encode(manifest.to_string());
    serde_json::json!({
        "seq": seq, "file_id": format!("{seq:032x}"), "domain_id": "d", "version_id": format!("v{seq}"),
        "parents": [], "sids": sids, "bytes": content.len(), "manifest_ct": ct,
        "manifest_nonce": "00", "device_id": "ff".repeat(16), "ts": 0, "deleted": false,
        "heads": [format!("v{seq}")], "conflicted": false,
    })
}

fn page(seq: u64, head_seq: u64, changes: Vec<serde_json::Value>) -> Vec<u8> {
    json(
        200,
        &serde_json::json!({"seq": seq, "head_seq": head_seq, "changes": changes}).to_string(),
    )
}

fn sid(content: &[u8]) -> String {
    hex::encode(Sha256::digest(content))
}

/// Enrols one device against the fake and pulls into a fresh vault dir; returns the error,
/// the time it took, and the vault (a dir inside a parent, to check nothing lands beside it).
async fn pull_error(fake: &Fake) -> (LoadError, Duration, tempfile::TempDir) {
    pull_error_within(fake, FeedBounds::DEFAULT).await
}

/// [`pull_error`] with the feed walk bounds `bounds`.
async fn pull_error_within(
    fake: &Fake,
    bounds: FeedBounds,
) -> (LoadError, Duration, tempfile::TempDir) {
    let target = fake.target.clone().with_feed_bounds(bounds);
    let dev = enroll(&target, "token", 1, 7).await.unwrap().remove(0);
    let root = tempfile::tempdir().unwrap();
    let vault = root.path().join("vault");
    let t0 = Instant::now();
    let e = pull_vault(&dev, &vault, 0).await.unwrap_err();
    (e, t0.elapsed(), root)
}

/// Every file under `root` (relative paths), temp files included.
fn files_under(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                out.push(e.path().strip_prefix(root).unwrap().display().to_string());
            }
        }
    }
    out.sort();
    out
}

fn one_line(e: &LoadError) -> String {
    let s = e.to_string();
    assert!(!s.contains('\n'), "one line: {s:?}");
    s
}

/// Answer headers at one byte every 500 ms: the pull ends at the request's one 30 s
/// deadline (not three of them), and the message names that deadline.
#[tokio::test]
async fn a_trickled_answer_ends_at_the_request_deadline() {
    let fake = Fake::start(|_, _| Act::Trickle(page(1, 1, vec![]), Duration::from_millis(500)));
    let (e, took, root) = pull_error(&fake).await;
    let msg = one_line(&e);
    assert!(msg.contains("deadline of 30s"), "{msg}");
    assert!(took < Duration::from_secs(40), "{took:?}");
    assert!(files_under(root.path()).is_empty());
}

/// Accepts the feed request and never answers: one deadline, named in the message.
#[tokio::test]
async fn a_silent_server_ends_at_the_request_deadline() {
    let fake = Fake::start(|_, _| Act::Silent);
    let (e, took, _root) = pull_error(&fake).await;
    let msg = one_line(&e);
    assert!(
        msg.contains("timeout") && msg.contains("deadline of 30s"),
        "{msg}"
    );
    assert!(took < Duration::from_secs(40), "{took:?}");
    assert_eq!(
        fake.count("/v1/changes"),
        1,
        "the deadline was spent on one attempt"
    );
}

/// `Content-Length: 10^18`: refused before the body is read, the cap named, not retried.
#[tokio::test]
async fn a_huge_content_length_is_refused_at_once_and_not_retried() {
    let fake = Fake::start(|_, _| {
        Act::Answer(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 1000000000000000000\r\n\r\n{\"seq\":"
                .to_vec(),
        )
    });
    let (e, took, _root) = pull_error(&fake).await;
    let msg = one_line(&e);
    assert!(matches!(e, LoadError::AnswerTooLarge { .. }), "{msg}");
    assert!(
        msg.contains("1000000000000000000") && msg.contains("33554432-byte cap"),
        "{msg}"
    );
    assert_eq!(
        fake.count("/v1/changes"),
        1,
        "a length-limit error is not retried"
    );
    assert!(took < Duration::from_secs(10), "{took:?}");
}

/// A feed that lists a change on every page but keeps `seq` at 0 (head 10): after three such
/// pages the pull names the server's behaviour.
#[tokio::test]
async fn a_feed_that_does_not_advance_seq_is_an_error_after_three_pages() {
    let fake = Fake::start(|_, pq| {
        if pq.starts_with("/v1/changes") {
            let dir = serde_json::json!({"path": "d", "kind": "dir", "size": 0, "sha256": ""});
            let mut c = change(1, "d", b"", &[]);
            c["manifest_ct"] = base64::engine::general_purpose::STANDARD
                .encode(dir.to_string())
                .into();
            Act::Answer(page(0, 10, vec![c]))
        } else {
            Act::Answer(json(404, "{}"))
        }
    });
    let (e, _took, root) = pull_error(&fake).await;
    let msg = one_line(&e);
    assert!(
        matches!(
            e,
            LoadError::FeedStalled {
                seq: 0,
                pages: 3,
                ..
            }
        ),
        "{msg}"
    );
    assert!(
        msg.contains("did not advance seq past 0 in 3 pages"),
        "{msg}"
    );
    assert_eq!(fake.count("/v1/changes"), 3);
    assert_eq!(files_under(root.path()), Vec::<String>::new());
}

/// The `since` of a feed request's query (0 when absent).
fn since_of(pq: &str) -> u64 {
    pq.split(['?', '&'])
        .find_map(|kv| kv.strip_prefix("since="))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// A `chunks/get` answer holding `content` as chunk `sid`.
fn one_chunk(sid: &str, content: &[u8]) -> Vec<u8> {
    let mut body = format!(
        "--b\r\nx-obsync-sid: {sid}\r\ncontent-length: {}\r\n\r\n",
        content.len()
    )
    .into_bytes();
    body.extend_from_slice(content);
    body.extend_from_slice(b"\r\n--b--\r\n");
    let mut a = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: multipart/mixed; boundary=b\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    a.extend_from_slice(&body);
    a
}

/// A feed that never ends: every page lists 100 new files (all of one chunk the fake
/// serves) under a rising `seq`, `head_seq` always ahead. The pull stops on the page that
/// takes it past `--feed-max-entries` (250 here: the third), before writing anything from
/// it; the vault holds the first two pages' files, each whole, and no temp file.
#[tokio::test]
async fn a_feed_that_never_ends_stops_at_its_entry_bound() {
    let content = b"invented, but whole".to_vec();
    let s = sid(&content);
    let fake = {
        let (content, s) = (content.clone(), s.clone());
        Fake::start(move |_, pq| {
            if pq.starts_with("/v1/changes") {
                let since = since_of(pq);
                let changes = (since + 1..=since + 100)
                    .map(|q| change(q, &format!("n/{q}.md"), &content, std::slice::from_ref(&s)))
                    .collect();
                Act::Answer(page(since + 100, u64::MAX, changes))
            } else if pq == "/v1/chunks/get" {
                Act::Answer(one_chunk(&s, &content))
            } else {
                Act::Answer(json(404, "{}"))
            }
        })
    };
    let bounds = FeedBounds {
        max_entries: 250,
        ..FeedBounds::DEFAULT
    };
    let (e, took, root) = pull_error_within(&fake, bounds).await;
    let msg = one_line(&e);
    assert!(
        matches!(
            e,
            LoadError::FeedOverrun {
                overrun: FeedOverrun::Entries { limit: 250 },
                ..
            }
        ),
        "{msg}"
    );
    assert_eq!(
        msg,
        "GET /v1/changes: server's changes feed listed more than 250 entries in one walk (bound --feed-max-entries)"
    );
    assert!(took < Duration::from_secs(60), "{took:?}");
    assert_eq!(fake.count("/v1/changes"), 3);
    let files = files_under(root.path());
    assert_eq!(files.len(), 200, "the first two pages' files: {files:?}");
    for f in &files {
        assert!(f.starts_with("vault/n/") && !f.contains(".vbtmp"), "{f}");
        assert_eq!(std::fs::read(root.path().join(f)).unwrap(), content, "{f}");
    }
}

/// A feed of one-entry pages that never ends (each a tombstone of a file never seen) stops
/// at `--feed-max-pages`, after exactly that many requests, with nothing written.
#[tokio::test]
async fn a_feed_of_small_pages_that_never_ends_stops_at_its_page_bound() {
    let fake = Fake::start(|_, pq| {
        if pq.starts_with("/v1/changes") {
            let seq = since_of(pq) + 1;
            let mut c = change(seq, "gone.md", b"", &[]);
            c["deleted"] = true.into();
            Act::Answer(page(seq, u64::MAX, vec![c]))
        } else {
            Act::Answer(json(404, "{}"))
        }
    });
    let bounds = FeedBounds {
        max_pages: 40,
        ..FeedBounds::DEFAULT
    };
    let (e, took, root) = pull_error_within(&fake, bounds).await;
    let msg = one_line(&e);
    assert_eq!(
        msg,
        "GET /v1/changes: server's changes feed went on past 40 pages in one walk (bound --feed-max-pages)"
    );
    assert!(took < Duration::from_secs(60), "{took:?}");
    assert_eq!(fake.count("/v1/changes"), 40);
    assert_eq!(files_under(root.path()), Vec::<String>::new());
}

/// `chunks/get` answers whose part lengths overflow, overlap the next part or run past the
/// body: each a one-line error, no panic, and no temp file or partial file left.
#[tokio::test]
async fn malformed_multipart_lengths_are_errors_and_leave_nothing() {
    let content = b"hello, vault";
    let s = sid(content);
    let cases: Vec<(&str, String)> = vec![
        ("overflowing", format!("{}", usize::MAX)),
        ("overflowing by one", format!("{}", usize::MAX - 40)),
        ("beyond the body", "5000".to_owned()),
        ("overlapping the next part", "5".to_owned()),
        ("not a number", "-1".to_owned()),
    ];
    for (what, len) in cases {
        let (s2, len2) = (s.clone(), len.clone());
        let fake = Fake::start(move |_, pq| {
            if pq.starts_with("/v1/changes") {
                Act::Answer(page(
                    1,
                    1,
                    vec![change(1, "notes/a.md", content, std::slice::from_ref(&s2))],
                ))
            } else if pq == "/v1/chunks/get" {
                let body = format!(
                    "--b\r\nx-obsync-sid: {s2}\r\ncontent-length: {len2}\r\n\r\nhello, vault\r\n--b--\r\n"
                );
                let mut a = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: multipart/mixed; boundary=b\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                )
                .into_bytes();
                a.extend_from_slice(body.as_bytes());
                Act::Answer(a)
            } else {
                Act::Answer(json(404, "{}"))
            }
        });
        let (e, _took, root) = pull_error(&fake).await;
        let msg = one_line(&e);
        assert!(
            matches!(e, LoadError::BadAnswer { .. }) && msg.contains("chunks-get"),
            "{what}: {msg}"
        );
        assert_eq!(
            fake.count("/v1/chunks/get"),
            1,
            "{what}: a malformed answer is not retried"
        );
        // The folder the file would go in may exist; no file, whole or temporary, does.
        assert_eq!(
            files_under(root.path()),
            Vec::<String>::new(),
            "{what}: {msg}"
        );
    }
}

/// Change paths that climb out of the vault (`..`, absolute, NUL, backslash): refused, and
/// nothing is written anywhere.
#[tokio::test]
async fn paths_that_climb_out_of_the_vault_are_refused() {
    for bad in [
        "../escape.md",
        "/tmp/abs.md",
        "a/\0b.md",
        "a\\..\\b.md",
        "a/../../b.md",
        "",
    ] {
        let content = b"x".to_vec();
        let s = sid(&content);
        let fake = Fake::start(move |_, pq| {
            if pq.starts_with("/v1/changes") {
                Act::Answer(page(
                    1,
                    1,
                    vec![change(1, bad, &content, std::slice::from_ref(&s))],
                ))
            } else {
                Act::Answer(json(404, "{}"))
            }
        });
        let (e, _took, root) = pull_error(&fake).await;
        let msg = one_line(&e);
        assert!(matches!(e, LoadError::UnsafePath { .. }), "{bad:?}: {msg}");
        assert_eq!(fake.count("/v1/chunks/get"), 0, "{bad:?}: nothing fetched");
        assert_eq!(files_under(root.path()), Vec::<String>::new(), "{bad:?}");
    }
}

/// The child side of the RSS test (`HOSTILE_OBSYNC_RSS` set): pulls from a fake whose feed
/// page is 30 MB of `kind` (`empty-parents`: one change whose parents are ten million empty
/// strings; `sids`: one change of 420,000 chunk ids, an honest shape at that size), prints
/// the pull's outcome, then waits on stdin so the parent can read its `VmHWM`.
fn rss_child(kind: &str) {
    let body = match kind {
        "empty-parents" => {
            let mut c = change(1, "a.md", b"x", &[sid(b"x")]);
            c["parents"] = serde_json::Value::Array(Vec::new());
            let mut s = serde_json::json!({"seq": 1, "head_seq": 1, "changes": [c]}).to_string();
            let at = s.find(r#""parents":[]"#).unwrap() + r#""parents":["#.len();
            let mut many = "\"\",".repeat(10_000_000);
            many.pop();
            s.insert_str(at, &many);
            json(200, &s)
        }
        _ => {
            let sids: Vec<String> = (0..420_000u32).map(|i| sid(&i.to_le_bytes())).collect();
            page(1, 1, vec![change(1, "a.md", b"x", &sids)])
        }
    };
    let body = Arc::new(body);
    let fake = Fake::start(move |_, pq| {
        if pq.starts_with("/v1/changes") {
            Act::Answer(body.as_ref().clone())
        } else {
            Act::Answer(json(404, "{}"))
        }
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (e, _took, _root) = rt.block_on(pull_error(&fake));
    println!("HOSTILE_OBSYNC_RSS {}", one_line(&e));
    std::io::stdout().flush().unwrap();
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
}

/// Runs this binary's `rss_child` with `kind`; returns its output line and `VmHWM` in KiB.
fn run_rss_child(kind: &str) -> (String, u64) {
    crate::rss::run_child(
        "hostile_obsync::a_feed_page_of_tiny_values_stays_under_200_mib_peak_rss",
        "HOSTILE_OBSYNC_RSS",
        kind,
    )
}

/// A 30 MB feed page of ten million empty strings (3 bytes each on the wire, 24 bytes each
/// as a `String`) is refused by the value count before it is parsed, and an honest 30 MB page
/// (420,000 chunk ids) is parsed: both stay under 200 MiB of peak RSS, the fake's own copies
/// of the page included.
#[test]
#[ignore = "slow: builds and pulls two 30 MB feed pages in child processes"]
fn a_feed_page_of_tiny_values_stays_under_200_mib_peak_rss() {
    if let Ok(kind) = std::env::var("HOSTILE_OBSYNC_RSS") {
        return rss_child(&kind);
    }
    const BOUND_KIB: u64 = 200 * 1024;
    let (line, hwm) = run_rss_child("empty-parents");
    eprintln!("ten million empty parents: {line}; VmHWM {hwm} kB");
    assert!(
        line.contains("the answer holds more than 1048576 JSON values"),
        "{line}"
    );
    assert!(hwm < BOUND_KIB, "empty parents: peak {hwm} KiB");
    let (line, hwm) = run_rss_child("sids");
    eprintln!("420,000 chunk ids: {line}; VmHWM {hwm} kB");
    // Parsed: the pull gets as far as asking for the chunks, which the fake does not have.
    assert!(!line.contains("JSON values"), "{line}");
    assert!(hwm < BOUND_KIB, "420,000 chunk ids: peak {hwm} KiB");
}
