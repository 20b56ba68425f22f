//! `vaultbench load pull --protocol couchdb` against hostile CouchDB servers: small fakes on
//! loopback (std only, a thread per connection) that answer LiveSync's replication honestly
//! from a two-file database until their one hostile move. One test per cause: corrupt
//! chunks, missing documents, memory a server can make the pull take, time it can make it
//! take, and text it can put on the user's terminal.
//!
//! Every pull runs as a child `vaultbench` process whose peak RSS (`VmHWM`) is read; each
//! must end within 60 s, under 200 MiB, without a panic or abort, with exit 2 and one line on
//! stderr naming the problem (exit 0 where the answer is harmless), no stderr line over
//! 4 KiB, no byte under 0x20 but the newline ending it, and no temp file left.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use loadgen::protocols::couch::chunk::{self, Kind};
use serde_json::{Value, json};

/// One request as the fake reads it.
struct Req {
    method: String,
    /// Path and query, the database's prefix removed (`/_changes?…`, `/` for the database,
    /// `None` for the server's root).
    path: Option<String>,
    body: Vec<u8>,
}

/// One answer: status, body, and how long to take sending the body.
struct Resp {
    status: u16,
    body: Vec<u8>,
    trickle: Duration,
}

fn ok(v: Value) -> Option<Resp> {
    Some(Resp {
        status: 200,
        body: v.to_string().into_bytes(),
        trickle: Duration::ZERO,
    })
}

/// What a fake does before its honest answer: `Some` answers instead.
type Hook = dyn Fn(&Req, &Db) -> Option<Resp> + Send + Sync;

/// The honest database: documents in feed order (seq = index + 1).
#[derive(Clone)]
struct Db {
    docs: Vec<Value>,
}

/// The two-file database LiveSync would hold: a note under `notes/` (one text chunk) and
/// `img.bin` (binary, base64 chunks), each file's chunks before its metadata.
fn honest_db() -> Db {
    let mut docs = Vec::new();
    for (path, bytes) in [
        (
            "notes/hello.md",
            b"hello world, a note from the honest server\n".to_vec(),
        ),
        (
            "img.bin",
            (0..9000u32).map(|i| (i * 7919 % 251) as u8).collect(),
        ),
    ] {
        let kind = Kind::of(path, &bytes);
        let pieces = chunk::split(kind, &bytes);
        for p in &pieces {
            docs.push(json!({"_id": p.id, "_rev": "1-c", "type": "leaf", "data": p.data}));
        }
        docs.push(json!({
            "_id": chunk::doc_id(path), "_rev": "1-m", "type": kind.doc_type(), "path": path,
            "children": pieces.iter().map(|p| p.id.clone()).collect::<Vec<_>>(),
            "ctime": 1, "mtime": 2, "size": bytes.len(), "eden": {},
        }));
    }
    Db { docs }
}

impl Db {
    fn id(&self, i: usize) -> &str {
        self.docs[i]["_id"].as_str().unwrap()
    }

    fn get(&self, id: &str) -> Option<&Value> {
        self.docs.iter().find(|d| d["_id"] == id)
    }

    /// The honest answer to `req`.
    fn answer(&self, req: &Req) -> Resp {
        let Some(path) = &req.path else {
            return json_resp(200, json!({"couchdb": "Welcome", "version": "3.3.3"}));
        };
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        if path.starts_with("/_changes") {
            let since = since_of(path);
            let rows: Vec<Value> = (since as usize..self.docs.len())
                .take(25)
                .map(|i| json!({"id": self.id(i), "seq": i + 1, "changes": [{"rev": self.docs[i]["_rev"]}]}))
                .collect();
            let last = since as usize + rows.len();
            json_resp(200, json!({"results": rows, "last_seq": last}))
        } else if path.starts_with("/_bulk_get") {
            let results: Vec<Value> = body["docs"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|d| {
                    let id = d["id"].as_str().unwrap_or("");
                    match self.get(id) {
                        Some(doc) => json!({"id": id, "docs": [{"ok": doc}]}),
                        None => {
                            json!({"id": id, "docs": [{"error": {"id": id, "error": "not_found"}}]})
                        }
                    }
                })
                .collect();
            json_resp(200, json!({ "results": results }))
        } else if path.starts_with("/_all_docs") {
            let rows: Vec<Value> = body["keys"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|k| match self.get(k.as_str().unwrap_or("")) {
                    Some(doc) => {
                        json!({"id": k, "key": k, "value": {"rev": doc["_rev"]}, "doc": doc})
                    }
                    None => json!({"key": k, "error": "not_found"}),
                })
                .collect();
            json_resp(200, json!({ "rows": rows }))
        } else if path == "/" {
            json_resp(200, json!({"db_name": "vault"}))
        } else if req.method == "PUT" {
            json_resp(201, json!({"ok": true, "id": "x", "rev": "1-a"}))
        } else {
            json_resp(404, json!({"error": "not_found", "reason": "missing"}))
        }
    }
}

fn json_resp(status: u16, v: Value) -> Resp {
    Resp {
        status,
        body: v.to_string().into_bytes(),
        trickle: Duration::ZERO,
    }
}

fn since_of(path: &str) -> u64 {
    path.split(['?', '&'])
        .find_map(|kv| kv.strip_prefix("since="))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// A fake CouchDB with database `vault` on 127.0.0.1:0: `hook` first, then `db`'s honest
/// answer. It stops accepting after 90 s.
fn fake(db: Db, hook: impl Fn(&Req, &Db) -> Option<Resp> + Send + Sync + 'static) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let hook: Arc<Hook> = Arc::new(hook);
    let db = Arc::new(db);
    std::thread::spawn(move || {
        let until = Instant::now() + Duration::from_secs(90);
        l.set_nonblocking(true).unwrap();
        while Instant::now() < until {
            match l.accept() {
                Ok((s, _)) => {
                    let (hook, db) = (hook.clone(), db.clone());
                    std::thread::spawn(move || serve(s, &*hook, &db));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(2)),
            }
        }
    });
    addr
}

/// Answers one connection's requests until the client closes it.
fn serve(mut s: TcpStream, hook: &Hook, db: &Db) {
    s.set_nonblocking(false).unwrap();
    s.set_nodelay(true).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut buf = Vec::new();
    while let Some((req, rest)) = read_req(&mut s, buf) {
        buf = rest;
        let resp = hook(&req, db).unwrap_or_else(|| db.answer(&req));
        let head = format!(
            "HTTP/1.1 {} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            resp.status,
            resp.body.len()
        );
        if resp.trickle.is_zero() {
            // One write: a head and a body in two would wait on the client's delayed ack.
            let mut all = head.into_bytes();
            all.extend_from_slice(&resp.body);
            if s.write_all(&all).is_err() {
                return;
            }
        } else {
            if s.write_all(head.as_bytes()).is_err() {
                return;
            }
            let step = resp.trickle / resp.body.len().max(1) as u32;
            for b in &resp.body {
                std::thread::sleep(step);
                if s.write_all(&[*b]).is_err() {
                    return;
                }
            }
        }
    }
}

/// Reads one request: head, `content-length` body; returns it and the bytes past it.
fn read_req(s: &mut TcpStream, mut buf: Vec<u8>) -> Option<(Req, Vec<u8>)> {
    let mut b = vec![0u8; 64 * 1024];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        match s.read(&mut b) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&b[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let len: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0);
    while buf.len() < head_end + len {
        match s.read(&mut b) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&b[..n]),
        }
    }
    let rest = buf.split_off(head_end + len);
    let body = buf.split_off(head_end);
    let mut words = head.split_whitespace();
    let method = words.next().unwrap_or("").to_owned();
    let pq = words.next().unwrap_or("");
    let path = pq.strip_prefix("/vault").map(|p| {
        if p.is_empty() {
            "/".to_owned()
        } else {
            p.to_owned()
        }
    });
    Some((Req { method, path, body }, rest))
}

/// What one pull did.
struct Run {
    code: i32,
    stderr: Vec<u8>,
    peak_rss_mib: f64,
    took: Duration,
    vault: PathBuf,
    _dir: tempfile::TempDir,
}

impl Run {
    fn line(&self) -> String {
        String::from_utf8_lossy(&self.stderr).trim_end().to_owned()
    }
}

/// `vaultbench load pull --protocol couchdb` from `addr` with `extra` flags, as a child
/// whose peak RSS is read; checks what every hostile pull must keep to (see the module's notes).
fn pull(addr: SocketAddr, extra: &[&str]) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let vault = dir.path().join("vault");
    let bin = assert_cmd::cargo::cargo_bin!("vaultbench");
    let t0 = Instant::now();
    let mut child = std::process::Command::new(bin)
        .args(["load", "pull", "--protocol", "couchdb", "--url"])
        .arg(format!("http://{addr}/vault"))
        .arg("--vault")
        .arg(&vault)
        .args(extra)
        .env("XDG_DATA_HOME", dir.path().join("data"))
        .env("XDG_CACHE_HOME", dir.path().join("cache"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    // The child's peak: its `VmHWM`, the kernel's high-water mark of its resident set since
    // its exec, read until it exits (the last read is within 2 ms of its end). `wait4`'s
    // `ru_maxrss` would not do: it also counts the forking test process's pages from before
    // the exec.
    let pid = child.id();
    let poller = std::thread::spawn(move || {
        let mut peak_kib = 0u64;
        while let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) {
            let Some(hwm) = status
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            else {
                break; // a zombie: its memory is gone
            };
            peak_kib = peak_kib.max(hwm);
            std::thread::sleep(Duration::from_millis(2));
        }
        peak_kib
    });
    // Killed past 90 s so that a hung pull fails the test rather than hanging it.
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if t0.elapsed() > Duration::from_secs(90) {
            let _ = child.kill();
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let took = t0.elapsed();
    let peak_kib = poller.join().unwrap();
    let stderr = reader.join().unwrap();
    use std::os::unix::process::ExitStatusExt as _;
    let code = status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
    let run = Run {
        code,
        stderr,
        peak_rss_mib: peak_kib as f64 / 1024.0,
        took,
        vault,
        _dir: dir,
    };
    let line = run.line();
    eprintln!(
        "pull: exit {code}, peak RSS {:.1} MiB, {took:?}: {line:.300}",
        run.peak_rss_mib
    );
    assert!(took < Duration::from_secs(60), "took {took:?}: {line}");
    assert!(
        run.peak_rss_mib < 200.0,
        "peak RSS {:.1} MiB: {line}",
        run.peak_rss_mib
    );
    assert!(
        code == 0 || code == 2,
        "exit {code} (no panic, no abort): {line}"
    );
    for l in run.stderr.split(|&b| b == b'\n') {
        assert!(l.len() <= 4096, "a {}-byte stderr line", l.len());
        assert!(
            l.iter().all(|&b| b >= 0x20 && b != 0x7f),
            "a control byte on stderr: {line:?}"
        );
    }
    if code != 0 {
        assert_eq!(
            run.stderr.iter().filter(|&&b| b == b'\n').count(),
            1,
            "one line: {line}"
        );
        assert!(line.starts_with("vaultbench: "), "{line}");
    }
    assert!(
        files_under(run._dir.path())
            .iter()
            .all(|f| !f.contains(".vbtmp")),
        "no temp file left: {:?}",
        files_under(run._dir.path())
    );
    run
}

/// Every file under `root` (relative paths).
fn files_under(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_owned()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(e.path());
            } else {
                out.push(e.path().strip_prefix(root).unwrap().display().to_string());
            }
        }
    }
    out.sort();
    out
}

/// The note's chunk id in the honest database.
fn hello_chunk(db: &Db) -> String {
    db.get("notes/hello.md").unwrap()["children"][0]
        .as_str()
        .unwrap()
        .to_owned()
}

/// `db` with document `id` changed by `f`.
fn with_doc(mut db: Db, id: &str, f: impl Fn(&mut Value)) -> Db {
    let d = db.docs.iter_mut().find(|d| d["_id"] == id).unwrap();
    f(d);
    db
}

#[test]
fn an_honest_server_pulls_byte_identical() {
    let addr = fake(honest_db(), |_, _| None);
    let run = pull(addr, &[]);
    assert_eq!(run.code, 0, "{}", run.line());
    assert_eq!(
        std::fs::read(run.vault.join("notes/hello.md")).unwrap(),
        b"hello world, a note from the honest server\n"
    );
    let img: Vec<u8> = (0..9000u32).map(|i| (i * 7919 % 251) as u8).collect();
    assert_eq!(std::fs::read(run.vault.join("img.bin")).unwrap(), img);
}

/// Cause 1: a chunk whose data does not hash to its id, by `_bulk_get` and by `_all_docs`
/// keys, with the metadata's `size` right or absent: one line naming the chunk and the file,
/// and nothing written for that file.
#[test]
fn a_chunk_that_does_not_hash_to_its_id_is_refused() {
    let db = honest_db();
    let c = hello_chunk(&db);
    let upper = with_doc(db.clone(), &c, |d| {
        d["data"] = d["data"].as_str().unwrap().to_uppercase().into();
    });
    let evil = with_doc(
        with_doc(db.clone(), &c, |d| {
            let n = d["data"].as_str().unwrap().len();
            d["data"] = "EVIL ".repeat(n).chars().take(n).collect::<String>().into();
        }),
        "notes/hello.md",
        |d| {
            d.as_object_mut().unwrap().remove("size");
        },
    );
    // By keys: the feed leaves the chunk out, `_all_docs` gives it corrupt.
    let mut by_keys = upper.clone();
    let corrupt = by_keys.get(&c).unwrap().clone();
    by_keys.docs.retain(|d| d["_id"] != c.as_str());
    let keyed = Arc::new(corrupt);
    for (name, db, hook) in [
        ("_bulk_get, size right", upper, None),
        ("_bulk_get, no size", evil, None),
        ("_all_docs keys", by_keys, Some(keyed)),
    ] {
        let run = match hook {
            None => pull(fake(db, |_, _| None), &[]),
            Some(doc) => pull(
                fake(db, move |req, _| {
                    let p = req.path.as_deref()?;
                    p.starts_with("/_all_docs").then(|| {
                        json_resp(200, json!({"rows": [{"id": doc["_id"], "key": doc["_id"], "value": {"rev": "1-c"}, "doc": *doc}]}))
                    })
                }),
                &[],
            ),
        };
        let line = run.line();
        assert_eq!(run.code, 2, "{name}: {line}");
        assert!(
            line.contains(&format!("chunk \"{c}\" of \"notes/hello.md\""))
                && line.contains("does not hash to its id"),
            "{name}: {line}"
        );
        assert!(
            !run.vault.join("notes/hello.md").exists(),
            "{name}: nothing written for the file"
        );
    }
}

/// Cause 2: a `_bulk_get` that answers `{"results":[]}` to every batch names what it left
/// out; it is not a pull of "0 files".
#[test]
fn documents_the_bulk_get_leaves_out_are_named_missing() {
    let n = honest_db().docs.len();
    let addr = fake(honest_db(), |req, _| {
        let p = req.path.as_deref()?;
        p.starts_with("/_bulk_get")
            .then(|| json_resp(200, json!({"results": []})))
    });
    let run = pull(addr, &[]);
    let line = run.line();
    assert_eq!(run.code, 2, "{line}");
    assert!(
        line.contains(&format!(
            "the answer lacks {n} of the {n} documents asked for: \""
        )),
        "{line}"
    );
    assert!(files_under(&run.vault).is_empty());
}

/// A fake whose feed lists `n` chunks of `size` bytes each, every one new and honest (its
/// data hashes to its id), and no file.
fn chunk_flood(n: usize, size: usize) -> SocketAddr {
    let ids: Arc<Vec<String>> = Arc::new(
        (0..n)
            .map(|i| chunk::chunk_id(&flood_data(i, size)))
            .collect(),
    );
    fake(honest_db(), move |req, _| {
        let p = req.path.as_deref()?;
        if p.starts_with("/_changes") {
            let since = since_of(p) as usize;
            let rows: Vec<Value> = (since..n.min(since + 25))
                .map(|i| json!({"id": ids[i], "seq": i + 1, "changes": [{"rev": "1-c"}]}))
                .collect();
            let last = since + rows.len();
            return ok(json!({"results": rows, "last_seq": last}));
        }
        if p.starts_with("/_bulk_get") {
            let body: Value = serde_json::from_slice(&req.body).ok()?;
            let results: Vec<Value> = body["docs"]
                .as_array()?
                .iter()
                .map(|d| {
                    let id = d["id"].as_str().unwrap_or("");
                    let i = ids.iter().position(|x| x == id).unwrap_or(0);
                    json!({"id": id, "docs": [{"ok": {"_id": id, "_rev": "1-c", "type": "leaf", "data": flood_data(i, size)}}]})
                })
                .collect();
            return ok(json!({ "results": results }));
        }
        None
    })
}

fn flood_data(i: usize, size: usize) -> String {
    let mut s = format!("{i:08}");
    s.extend(std::iter::repeat_n('a', size.saturating_sub(8)));
    s
}

/// Cause 3: memory. 525 new 2 MiB chunks no file lists stop at `--feed-max-bytes` (64 MiB);
/// 25 new one-byte leaves a page for ever stop there too, long before `--feed-max-pages`;
/// one metadata document naming a 64 KiB chunk 400,000 times is refused before it is
/// assembled. Each under 200 MiB (checked by `pull`).
#[test]
fn what_a_server_lists_cannot_make_the_pull_hold_more_than_its_budget() {
    let run = pull(chunk_flood(525, 2 << 20), &[]);
    let line = run.line();
    assert_eq!(run.code, 2, "{line}");
    assert!(line.contains("--feed-max-bytes"), "{line}");
    eprintln!(
        "525 chunks of 2 MiB: peak RSS {:.1} MiB, {:?}",
        run.peak_rss_mib, run.took
    );

    // Leaves with made-up ids (their data cannot hash to them): held as flawed, counted.
    let addr = fake(honest_db(), |req, _| {
        let p = req.path.as_deref()?;
        if p.starts_with("/_changes") {
            let since = since_of(p);
            let rows: Vec<Value> = (since + 1..=since + 25)
                .map(|q| json!({"id": format!("h:leaf{q}"), "seq": q, "changes": [{"rev": "1-c"}]}))
                .collect();
            return ok(json!({"results": rows, "last_seq": since + 25}));
        }
        if p.starts_with("/_bulk_get") {
            let body: Value = serde_json::from_slice(&req.body).ok()?;
            let results: Vec<Value> = body["docs"]
                .as_array()?
                .iter()
                .map(|d| json!({"id": d["id"], "docs": [{"ok": {"_id": d["id"], "_rev": "1-c", "type": "leaf", "data": "x"}}]}))
                .collect();
            return ok(json!({ "results": results }));
        }
        None
    });
    let run = pull(addr, &[]);
    let line = run.line();
    assert_eq!(run.code, 2, "{line}");
    assert!(line.contains("--feed-max-bytes"), "{line}");
    eprintln!(
        "invented leaves: peak RSS {:.1} MiB, {:?}",
        run.peak_rss_mib, run.took
    );

    let big = "b".repeat(64 << 10);
    let big_id = chunk::chunk_id(&big);
    let meta = json!({
        "_id": "huge.bin", "_rev": "1-m", "type": "plain", "path": "huge.md",
        "children": vec![big_id.clone(); 400_000], "ctime": 1, "mtime": 2, "eden": {},
    });
    let db = Db {
        docs: vec![
            json!({"_id": big_id, "_rev": "1-c", "type": "leaf", "data": big}),
            meta,
        ],
    };
    let run = pull(fake(db, |_, _| None), &[]);
    let line = run.line();
    assert_eq!(run.code, 2, "{line}");
    assert!(
        line.contains("\"huge.md\": its 400000 chunks make more than 1073741824 bytes"),
        "{line}"
    );
    assert!(
        files_under(&run.vault).is_empty(),
        "{:?}",
        files_under(&run.vault)
    );
    eprintln!(
        "400,000 children: peak RSS {:.1} MiB, {:?}",
        run.peak_rss_mib, run.took
    );
}

/// Cause 4: every answer arrives whole but trickles over 3 s, inside the per-exchange
/// deadline: the pull as a whole stops at `--transfer-timeout`, named.
#[test]
fn a_trickling_server_stops_at_the_transfer_timeout() {
    let addr = fake(honest_db(), |req, db| {
        let mut r = db.answer(req);
        r.trickle = Duration::from_secs(3);
        Some(r)
    });
    let run = pull(addr, &["--transfer-timeout", "8s"]);
    let line = run.line();
    assert_eq!(run.code, 2, "{line}");
    assert_eq!(
        line,
        "vaultbench: the pull did not finish within 8s (bound --transfer-timeout)"
    );
    assert!(run.took < Duration::from_secs(20), "{:?}", run.took);
}

/// Cause 5: the server's text. A 30 MiB document id, a 200,000-character `last_seq`, a
/// 100 KB path, a 500 answer full of escape sequences and an `_all_docs` error with a newline
/// each give one short line with the server's text escaped and clipped; error chains name
/// their cause once.
#[test]
fn a_servers_text_never_reaches_the_terminal_raw() {
    // A 30 MiB id in place of the one asked for.
    let long_id = "i".repeat(30 << 20);
    let addr = fake(honest_db(), move |req, _| {
        let p = req.path.as_deref()?;
        p.starts_with("/_bulk_get")
            .then(|| ok(json!({"results": [{"id": long_id, "docs": []}]})).unwrap())
    });
    let run = pull(addr, &[]);
    let line = run.line();
    assert_eq!(run.code, 2, "{line}");
    assert!(line.contains("(31457080 more bytes)"), "{line}");
    assert!(line.len() < 600, "{}", line.len());

    // A feed stalled at a 200,000-character last_seq.
    let seq = "7".repeat(200_000);
    let addr = fake(honest_db(), move |req, _| {
        let p = req.path.as_deref()?;
        p.starts_with("/_changes").then(|| {
            ok(json!({"results": [{"id": "notes/hello.md", "seq": seq, "changes": [{"rev": "1-m"}]}], "last_seq": seq}))
                .unwrap()
        })
    });
    let run = pull(addr, &[]);
    let line = run.line();
    assert_eq!(run.code, 2, "{line}");
    // The next request cannot carry such a position (`uri too long`): named, clipped.
    assert!(
        line.contains("&since=777") && line.contains("more bytes)"),
        "{line}"
    );
    assert!(line.len() < 600, "{}", line.len());

    // A 100 KB path (its parts under the 255-byte name limit): the system's error names
    // it clipped, once.
    let long_path: String = vec!["d".repeat(200); 500].join("/") + "/x.md";
    let db = with_doc(honest_db(), "notes/hello.md", |d| {
        d["path"] = long_path.clone().into();
    });
    let run = pull(fake(db, |_, _| None), &[]);
    let line = run.line();
    assert_eq!(run.code, 2, "{line}");
    assert!(line.contains("more bytes)"), "{line}");
    assert!(line.len() < 1000, "{}", line.len());
    assert_eq!(
        line.matches("os error").count(),
        1,
        "the cause once: {line}"
    );

    // A 500 whose body sets the title, clears the screen and prints a green "pull ok".
    let addr = fake(honest_db(), |req, _| {
        let p = req.path.as_deref()?;
        p.starts_with("/_changes").then(|| Resp {
            status: 500,
            body: b"\x1b]0;owned\x07\x1b[2J\x1b[32mvaultbench: pull ok\x1b[0m\r\nFAKE: 0 errors"
                .to_vec(),
            trickle: Duration::ZERO,
        })
    });
    let run = pull(addr, &[]);
    let line = run.line();
    assert_eq!(run.code, 2, "{line}");
    assert!(
        line.contains("\\x1b]0;owned\\x07\\x1b[2J\\x1b[32mvaultbench: pull ok"),
        "{line}"
    );

    // An `_all_docs` row error with a newline and a fake second line.
    let db = honest_db();
    let c = hello_chunk(&db);
    let mut db2 = db.clone();
    db2.docs.retain(|d| d["_id"] != c.as_str());
    let addr = fake(db2, move |req, _| {
        let p = req.path.as_deref()?;
        p.starts_with("/_all_docs").then(|| {
            ok(json!({"rows": [{"key": c, "error": "not_found\nFAKE: pull finished, 0 errors"}]}))
                .unwrap()
        })
    });
    let run = pull(addr, &[]);
    let line = run.line();
    assert_eq!(run.code, 2, "{line}");
    assert!(
        line.contains("(not_found\\nFAKE: pull finished, 0 errors)"),
        "{line}"
    );

    // A `_bulk_get` answer with a duplicate field: the parser's complaint once.
    let addr = fake(honest_db(), |req, _| {
        let p = req.path.as_deref()?;
        p.starts_with("/_bulk_get").then(|| Resp {
            status: 200,
            body: br#"{"results":[],"results":[]}"#.to_vec(),
            trickle: Duration::ZERO,
        })
    });
    let run = pull(addr, &[]);
    let line = run.line();
    assert_eq!(run.code, 2, "{line}");
    assert_eq!(line.matches("_bulk_get answer").count(), 1, "{line}");
    assert_eq!(line.matches("duplicate field").count(), 1, "{line}");

    // A file where a folder must go: `File exists` once.
    let mut db = honest_db();
    let mut clash = db.get("notes/hello.md").unwrap().clone();
    clash["_id"] = "notes/hello.md/inner.md".into();
    clash["path"] = "notes/hello.md/inner.md".into();
    db.docs.push(clash);
    let run = pull(fake(db, |_, _| None), &[]);
    let line = run.line();
    assert_eq!(run.code, 2, "{line}");
    assert_eq!(line.matches("os error").count(), 1, "{line}");
}
