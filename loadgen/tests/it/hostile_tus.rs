//! The tus client against servers that misbehave: fake servers on 127.0.0.1 whose offsets go
//! backwards, past the length, negative or past 2^53, whose `Location` points off loopback or
//! is relative to nowhere, that answer `460` to every chunk or keep nothing of any, or whose
//! `HEAD` never answers after a cut. Each case ends within its deadline with a one-line error
//! naming what the server did; a cut that the server survives resumes from its offset.

use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use loadgen::Target;
use loadgen::protocols::tus::client::Recorder;
use loadgen::protocols::tus::{TusClient, TusError, Uploaded, metadata_of};

/// One request as the fake server read it.
#[derive(Debug, Clone)]
struct Req {
    method: String,
    path: String,
    head: String,
    body: Vec<u8>,
}

impl Req {
    /// The request's header `name` (lower case).
    fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_owned())
        })
    }
}

type Handler = dyn Fn(&Req, &mut TcpStream) + Send + Sync;

/// A server on 127.0.0.1:0 that hands every request to `answer`, one thread per connection,
/// one request per connection; OPTIONS is answered for it with `extensions`.
struct Fake {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Req>>>,
}

impl Fake {
    fn start(
        extensions: &'static str,
        answer: impl Fn(&Req, &mut TcpStream) + Send + Sync + 'static,
    ) -> Fake {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let answer: Arc<Handler> = Arc::new(answer);
        let log = seen.clone();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { continue };
                let (answer, log) = (answer.clone(), log.clone());
                std::thread::spawn(move || {
                    let Some((r, _)) = testkit::read_request(&mut s, Vec::new()) else {
                        return;
                    };
                    let req = Req {
                        method: r.method,
                        path: r.target,
                        head: r.head,
                        body: r.body,
                    };
                    log.lock().unwrap().push(req.clone());
                    if req.method == "OPTIONS" {
                        let ck = if extensions.contains("checksum") {
                            "Tus-Checksum-Algorithm: md5,sha1\r\n"
                        } else {
                            ""
                        };
                        answer_with(
                            &mut s,
                            "204 No Content",
                            &format!("Tus-Version: 1.0.0\r\nTus-Extension: {extensions}\r\n{ck}"),
                        );
                        return;
                    }
                    answer(&req, &mut s);
                });
            }
        });
        Fake { addr, seen }
    }

    fn client(&self) -> TusClient {
        TusClient::new(
            Target::parse(&format!("http://{}", self.addr), false).unwrap(),
            None,
            "/files/",
        )
        .with_timeout(Duration::from_secs(2))
    }

    fn location(&self) -> String {
        format!("http://{}/files/u1", self.addr)
    }

    fn methods(&self) -> Vec<String> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .map(|r| r.method.clone())
            .collect()
    }
}

/// Answers `status` with extra header lines `headers` (each ending in CRLF), no body.
fn answer_with(s: &mut TcpStream, status: &str, headers: &str) {
    let _ = write!(
        s,
        "HTTP/1.1 {status}\r\nTus-Resumable: 1.0.0\r\n{headers}Content-Length: 0\r\nConnection: close\r\n\r\n"
    );
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Discovers and uploads `body` as `n.md` with `client`, in `chunk`-byte PATCHes.
fn upload(client: TusClient, chunk: usize, body: &'static [u8]) -> Result<Uploaded, TusError> {
    rt().block_on(async move {
        let mut c = client.with_chunk(chunk);
        let rec = Recorder::new(false);
        c.discover(&rec).await?;
        c.upload(&rec, &metadata_of("n.md"), Bytes::from_static(body))
            .await
    })
}

/// The error's message, checked to be one short line naming `want`.
fn one_line(e: &TusError, want: &str) -> String {
    let m = e.to_string();
    assert!(!m.contains('\n'), "one line: {m:?}");
    assert!(m.len() < 600, "short: {} bytes: {m}", m.len());
    assert!(m.contains(want), "{m:?} lacks {want:?}");
    m
}

/// A server that creates the upload (POST 201, Location on itself) and answers each PATCH
/// with `offset(req)` as its Upload-Offset.
fn patching(offset: impl Fn(&Req) -> String + Send + Sync + 'static) -> Fake {
    let loc = Arc::new(Mutex::new(String::new()));
    let l2 = loc.clone();
    let fake = Fake::start("creation,termination", move |r, s| {
        match r.method.as_str() {
            "POST" => answer_with(
                s,
                "201 Created",
                &format!("Location: {}\r\n", l2.lock().unwrap()),
            ),
            "PATCH" => answer_with(
                s,
                "204 No Content",
                &format!("Upload-Offset: {}\r\n", offset(r)),
            ),
            _ => answer_with(s, "404 Not Found", ""),
        }
    });
    *loc.lock().unwrap() = fake.location();
    fake
}

#[test]
fn an_offset_that_goes_backwards_is_an_error() {
    // The first chunk of 5 is taken whole, then the server says it holds 2.
    let fake = patching(|r| {
        if r.header("upload-offset").as_deref() == Some("0") {
            "5".into()
        } else {
            "2".into()
        }
    });
    let e = upload(fake.client(), 5, b"0123456789").unwrap_err();
    one_line(&e, "Upload-Offset went backwards, from 5 to 2");
    assert_eq!(fake.methods(), ["OPTIONS", "POST", "PATCH", "PATCH"]);
}

#[test]
fn offsets_beyond_the_length_huge_or_negative_are_errors() {
    for (offset, want) in [
        ("11", "Upload-Offset 11 is beyond the upload's length 10"),
        ("99999999999999999999999", "over 2^53 - 1"),
        ("9007199254740992", "over 2^53 - 1"),
        ("-1", "Upload-Offset \"-1\" is negative"),
        ("1e1", "not a decimal integer"),
    ] {
        let fake = patching(move |_| offset.to_owned());
        let e = upload(fake.client(), 1 << 20, b"0123456789").unwrap_err();
        one_line(&e, want);
        assert_eq!(
            fake.methods().len(),
            3,
            "{offset}: no retry after a bad offset"
        );
    }
}

#[test]
fn a_location_off_loopback_or_relative_to_nowhere_is_never_followed() {
    for (loc, want) in [
        ("http://203.0.113.7/files/u1", "points off loopback"),
        ("http://example.org/files/u1", "points off loopback"),
        ("http://127.0.0.2:1/files/u1", "another address on loopback"),
        ("u1", "relative to nowhere"),
        ("//example.org/files/u1", "scheme-relative"),
    ] {
        let fake = Fake::start("creation", move |r, s| match r.method.as_str() {
            "POST" => answer_with(s, "201 Created", &format!("Location: {loc}\r\n")),
            _ => answer_with(s, "204 No Content", "Upload-Offset: 10\r\n"),
        });
        let e = upload(fake.client(), 1 << 20, b"0123456789").unwrap_err();
        one_line(&e, want);
        assert_eq!(fake.methods(), ["OPTIONS", "POST"], "{loc}");
    }
    let fake = Fake::start("creation", |_, s| answer_with(s, "201 Created", ""));
    let e = upload(fake.client(), 1 << 20, b"0123456789").unwrap_err();
    one_line(&e, "has no Location");
}

#[test]
fn a_460_on_every_chunk_ends_after_bounded_retries() {
    let loc = Arc::new(Mutex::new(String::new()));
    let l2 = loc.clone();
    let fake = Fake::start("creation,checksum", move |r, s| match r.method.as_str() {
        "POST" => answer_with(
            s,
            "201 Created",
            &format!("Location: {}\r\n", l2.lock().unwrap()),
        ),
        _ => answer_with(s, "460 Checksum Mismatch", ""),
    });
    *loc.lock().unwrap() = fake.location();
    let t0 = Instant::now();
    let e = upload(fake.client(), 1 << 20, b"hello world").unwrap_err();
    one_line(&e, "460 Checksum Mismatch 3 times in a row");
    assert!(t0.elapsed() < Duration::from_secs(10));
    assert_eq!(
        fake.methods(),
        ["OPTIONS", "POST", "PATCH", "PATCH", "PATCH"]
    );
    // Every chunk carried the protocol's sha1 of its body.
    for r in fake
        .seen
        .lock()
        .unwrap()
        .iter()
        .filter(|r| r.method == "PATCH")
    {
        assert_eq!(
            r.header("upload-checksum").as_deref(),
            Some("sha1 Kq5sNclPz7QV2+lfQIuc6R7oRu0="),
            "{}",
            r.head
        );
        assert_eq!(r.body, b"hello world");
    }
}

#[test]
fn a_server_that_keeps_nothing_ends_after_bounded_resumes() {
    let loc = Arc::new(Mutex::new(String::new()));
    let l2 = loc.clone();
    let fake = Fake::start("creation", move |r, s| match r.method.as_str() {
        "POST" => answer_with(
            s,
            "201 Created",
            &format!("Location: {}\r\n", l2.lock().unwrap()),
        ),
        "HEAD" => answer_with(s, "200 OK", "Upload-Offset: 0\r\nUpload-Length: 10\r\n"),
        _ => answer_with(s, "204 No Content", "Upload-Offset: 0\r\n"),
    });
    *loc.lock().unwrap() = fake.location();
    let e = upload(fake.client(), 1 << 20, b"0123456789").unwrap_err();
    one_line(&e, "still failing after 8 resumes (bound MAX_RESUMES)");
    let heads = fake.methods().iter().filter(|m| *m == "HEAD").count();
    assert_eq!(heads, 8);
}

#[test]
fn a_cut_patch_resumes_from_the_servers_offset() {
    // The first PATCH is read and cut off without an answer; the server kept 4 bytes of it.
    let loc = Arc::new(Mutex::new(String::new()));
    let l2 = loc.clone();
    let fake = Fake::start("creation", move |r, s| match r.method.as_str() {
        "POST" => answer_with(
            s,
            "201 Created",
            &format!("Location: {}\r\n", l2.lock().unwrap()),
        ),
        "PATCH" if r.header("upload-offset").as_deref() == Some("0") => {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
        "HEAD" => answer_with(s, "200 OK", "Upload-Offset: 4\r\nUpload-Length: 10\r\n"),
        "PATCH" => {
            assert_eq!(r.body, b"456789");
            answer_with(s, "204 No Content", "Upload-Offset: 10\r\n");
        }
        _ => answer_with(s, "404 Not Found", ""),
    });
    *loc.lock().unwrap() = fake.location();
    let up = upload(fake.client(), 1 << 20, b"0123456789").unwrap();
    assert_eq!(up.url, "/files/u1");
    assert_eq!((up.resumes, up.resent_bytes, up.requests), (1, 6, 4));
    assert_eq!(
        fake.methods(),
        ["OPTIONS", "POST", "PATCH", "HEAD", "PATCH"]
    );
    let paths: Vec<String> = fake
        .seen
        .lock()
        .unwrap()
        .iter()
        .map(|r| r.path.clone())
        .collect();
    assert_eq!(
        paths,
        ["/files/", "/files/", "/files/u1", "/files/u1", "/files/u1"]
    );
}

#[test]
fn a_head_that_never_answers_ends_at_its_deadline() {
    let loc = Arc::new(Mutex::new(String::new()));
    let l2 = loc.clone();
    let fake = Fake::start("creation", move |r, s| match r.method.as_str() {
        "POST" => answer_with(
            s,
            "201 Created",
            &format!("Location: {}\r\n", l2.lock().unwrap()),
        ),
        "PATCH" => answer_with(s, "409 Conflict", ""),
        // Holds the connection open, answering nothing.
        _ => std::thread::sleep(Duration::from_secs(20)),
    });
    *loc.lock().unwrap() = fake.location();
    let t0 = Instant::now();
    let e = upload(
        fake.client().with_timeout(Duration::from_millis(800)),
        1 << 20,
        b"0123456789",
    )
    .unwrap_err();
    let took = t0.elapsed();
    one_line(&e, "tus-head /files/u1: transport error (timeout)");
    assert!(took < Duration::from_secs(5), "{took:?}");
}
