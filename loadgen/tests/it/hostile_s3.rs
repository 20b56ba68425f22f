//! The S3 client against servers that misbehave: fake servers on 127.0.0.1 whose listings
//! never end (a fresh continuation token on every page, or one that repeats), run to hundreds
//! of MB, carry a DTD or keys that climb out of the vault, whose objects declare absurd
//! lengths or lie about their bytes, or whose answers stall. Each case ends well within 60 s
//! with a one-line error naming what the server did; nothing is written outside the pull's
//! directory. The peak-RSS bound of a 300 MB listing is the `#[ignore = "slow: ..."]` test at
//! the end, measured in a child process (this binary re-executed).

use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use loadgen::FeedBounds;
use loadgen::Target;
use loadgen::protocols::s3::client::Recorder;
use loadgen::protocols::s3::{Credentials, Listing, S3Client, S3Error, pull_vault, resync, walk};

/// One request as the fake server read it.
#[derive(Debug, Clone)]
struct Req {
    method: String,
    path: String,
    /// Requests the server has read before this one (0 for the first).
    n: usize,
}

type Handler = dyn Fn(&Req, &mut TcpStream) + Send + Sync;

/// A server on 127.0.0.1:0 that hands every request to `answer`, one thread per connection,
/// one request per connection (the handler's answer ends it).
struct Fake {
    addr: SocketAddr,
    seen: Arc<AtomicUsize>,
}

impl Fake {
    fn start(answer: impl Fn(&Req, &mut TcpStream) + Send + Sync + 'static) -> Fake {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let seen = Arc::new(AtomicUsize::new(0));
        let answer: Arc<Handler> = Arc::new(answer);
        let counter = seen.clone();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { continue };
                let (answer, counter) = (answer.clone(), counter.clone());
                std::thread::spawn(move || {
                    let Some((req, _)) = testkit::read_request(&mut s, Vec::new()) else {
                        return;
                    };
                    let n = counter.fetch_add(1, Ordering::SeqCst);
                    let (method, path) = (req.method, req.target);
                    answer(&Req { method, path, n }, &mut s);
                });
            }
        });
        Fake { addr, seen }
    }

    fn client(&self) -> S3Client {
        S3Client::new(
            Target::parse(&format!("http://{}", self.addr), false).unwrap(),
            Credentials {
                access_key: "ak".into(),
                secret_key: "sk".into(),
            },
            "b",
        )
    }

    fn requests(&self) -> usize {
        self.seen.load(Ordering::SeqCst)
    }
}

fn answer(s: &mut TcpStream, status: &str, body: &str) {
    let _ = write!(
        s,
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

/// A listing page of `(key, size)` objects, truncated with `token` when given.
fn page(objects: &[(&str, u64)], token: Option<&str>) -> String {
    let mut x = String::from(r#"<?xml version="1.0"?><ListBucketResult>"#);
    for (k, n) in objects {
        x.push_str(&format!(
            "<Contents><Key>{k}</Key><Size>{n}</Size><ETag>&quot;e-{k}&quot;</ETag></Contents>"
        ));
    }
    match token {
        Some(t) => x.push_str(&format!(
            "<IsTruncated>true</IsTruncated><NextContinuationToken>{t}</NextContinuationToken>"
        )),
        None => x.push_str("<IsTruncated>false</IsTruncated>"),
    }
    x.push_str("</ListBucketResult>");
    x
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// The error's message, checked to be one short line naming `want`.
fn one_line(e: &S3Error, want: &str) -> String {
    let m = e.to_string();
    assert!(!m.contains('\n'), "one line: {m:?}");
    assert!(m.len() < 600, "short: {} bytes: {m}", m.len());
    assert!(m.contains(want), "{m:?} lacks {want:?}");
    m
}

fn walk_err(client: &S3Client) -> S3Error {
    rt().block_on(walk(client, &Recorder::new(false), ""))
        .unwrap_err()
}

#[test]
fn continuation_tokens_forever_stop_at_the_page_bound() {
    let fake = Fake::start(|r, s| {
        let body = page(&[(&format!("n{}.md", r.n), 1)], Some(&format!("t{}", r.n)));
        answer(s, "200 OK", &body);
    });
    let client = fake.client().with_bounds(FeedBounds {
        max_entries: 1_000_000,
        max_pages: 50,
        max_bytes: FeedBounds::HELD_BYTES_DEFAULT,
    });
    let t0 = Instant::now();
    let e = walk_err(&client);
    one_line(&e, "past 50 pages in one walk (bound --feed-max-pages)");
    assert_eq!(fake.requests(), 50);
    assert!(t0.elapsed() < Duration::from_secs(30));
}

#[test]
fn a_repeating_continuation_token_is_refused_at_once() {
    // Page 1 gives token A, page 2 token B, page 3 token A again: a cycle.
    let fake = Fake::start(|r, s| {
        let t = ["A", "B"][r.n % 2];
        answer(s, "200 OK", &page(&[("a.md", 1)], Some(t)));
    });
    let e = walk_err(&fake.client());
    one_line(&e, "came back a second time (page 3)");
    assert_eq!(fake.requests(), 3);
    // A truncated page without a token cannot be followed either.
    let fake = Fake::start(|_, s| {
        let body = page(&[("a.md", 1)], None).replace("false", "true");
        answer(s, "200 OK", &body);
    });
    one_line(&walk_err(&fake.client()), "no NextContinuationToken");
}

#[test]
fn a_300_mb_listing_stops_at_the_entry_bound_as_it_streams() {
    let fake = Fake::start(|_, s| {
        // Chunked, never-ending in practice: 300 MB of one-byte objects.
        let _ = write!(
            s,
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        );
        let head = "<ListBucketResult><IsTruncated>false</IsTruncated>";
        let _ = write!(s, "{:x}\r\n{head}\r\n", head.len());
        let mut sent = 0u64;
        let mut i = 0u64;
        while sent < 300 * 1024 * 1024 {
            let mut chunk = String::with_capacity(64 * 1024);
            while chunk.len() < 60 * 1024 {
                chunk.push_str(&format!(
                    "<Contents><Key>k{i}</Key><Size>1</Size></Contents>"
                ));
                i += 1;
            }
            if write!(s, "{:x}\r\n{chunk}\r\n", chunk.len()).is_err() {
                return;
            }
            sent += chunk.len() as u64;
        }
    });
    let client = fake.client().with_bounds(FeedBounds {
        max_entries: 20_000,
        max_pages: 10,
        max_bytes: FeedBounds::HELD_BYTES_DEFAULT,
    });
    let t0 = Instant::now();
    let e = walk_err(&client);
    one_line(
        &e,
        "past 20000 objects in one walk (bound --feed-max-entries)",
    );
    assert!(t0.elapsed() < Duration::from_secs(30));
}

#[test]
fn a_dtd_and_malformed_listings_are_one_line_errors() {
    for (body, want) in [
        (
            "<!DOCTYPE l [<!ENTITY a \"aaaaaaaaaa\"><!ENTITY b \"&a;&a;&a;&a;\">]><ListBucketResult><Contents><Key>&b;</Key><Size>1</Size></Contents></ListBucketResult>",
            "has a DTD",
        ),
        (
            "<Error><Code>InternalError</Code></Error>",
            "not ListBucketResult",
        ),
        ("<ListBucketResult><Contents><Key>a", "truncated"),
        (
            "<ListBucketResult><Contents><Key>a</Key><Size>99999999999999999999999</Size></Contents></ListBucketResult>",
            "bad <Size>",
        ),
    ] {
        let b = body.to_owned();
        let fake = Fake::start(move |_, s| answer(s, "200 OK", &b));
        let e = walk_err(&fake.client());
        let m = one_line(&e, want);
        assert!(m.starts_with("ListObjectsV2 of b/"), "{m}");
        assert_eq!(fake.requests(), 1, "a malformed listing is not retried");
    }
}

#[test]
fn keys_that_climb_out_are_refused_and_nothing_is_written_outside() {
    for (key, want) in [
        ("../escaped.md", ".. segment"),
        ("a/../../escaped.md", ".. segment"),
        ("/tmp/escaped.md", "absolute path"),
        ("a&#0;b.md", "character reference"),
        ("a\\..\\escaped.md", "backslash"),
    ] {
        let body = page(&[("ok.md", 3), (key, 3)], None);
        let fake = Fake::start(move |r, s| {
            if r.method == "GET" && r.path.contains("list-type") {
                answer(s, "200 OK", &body)
            } else {
                answer(s, "200 OK", "abc")
            }
        });
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("pull");
        std::fs::create_dir_all(&dir).unwrap();
        let e = rt().block_on(pull_vault(&fake.client(), &dir)).unwrap_err();
        one_line(&e, want);
        assert_eq!(fake.requests(), 1, "refused before any GET");
        let written: Vec<_> = std::fs::read_dir(root.path()).unwrap().collect();
        assert_eq!(written.len(), 1, "nothing beside the pull's directory");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "{key}");
    }
}

#[test]
fn a_content_length_over_the_listing_is_refused_before_reading_and_not_retried() {
    let fake = Fake::start(|r, s| {
        if r.path.contains("list-type") {
            return answer(s, "200 OK", &page(&[("a.md", 3)], None));
        }
        let _ = write!(
            s,
            "HTTP/1.1 200 OK\r\nContent-Length: 1000000000000\r\n\r\nabcdef"
        );
        std::thread::sleep(Duration::from_secs(60));
    });
    let dir = tempfile::tempdir().unwrap();
    let t0 = Instant::now();
    let e = rt()
        .block_on(pull_vault(&fake.client(), dir.path()))
        .unwrap_err();
    one_line(
        &e,
        "declares Content-Length 1000000000000, over the 3 bytes cap",
    );
    assert!(t0.elapsed() < Duration::from_secs(10));
    assert_eq!(fake.requests(), 2, "one listing, one GET: not retried");
}

#[test]
fn etags_that_lie_do_not_make_bytes_right() {
    // The listing's ETag is what the client saw at the last sync, but the object now holds
    // other bytes of the same size: a sync that trusted the ETag would keep its stale copy.
    // The pull writes what GET returns, so the harness's byte-identity check against the
    // vault's digest (cold_pull.byte_identical) is what catches it; and a server whose ETags
    // change on every listing shows as mismatches in the resync, never as nothing to do.
    let fake = Fake::start(|r, s| {
        if r.path.contains("list-type") {
            let body = page(&[("a.md", 3)], None).replace("e-a.md", &format!("e{}", r.n));
            return answer(s, "200 OK", &body);
        }
        answer(s, "200 OK", "xyz")
    });
    let dir = tempfile::tempdir().unwrap();
    let (r, record) = rt()
        .block_on(pull_vault(&fake.client(), dir.path()))
        .unwrap();
    assert_eq!(r.files, 1);
    assert_eq!(std::fs::read(dir.path().join("a.md")).unwrap(), b"xyz");
    let again = rt()
        .block_on(resync(&fake.client(), dir.path(), &record, false))
        .unwrap();
    assert_eq!(again.mismatched, 1, "the listed ETag moved without a write");
    let empty = rt()
        .block_on(resync(
            &fake.client(),
            dir.path(),
            &Listing::default(),
            false,
        ))
        .unwrap();
    assert_eq!(empty.mismatched, 1, "an object the record lacks");
}

#[test]
fn a_listing_stalled_after_its_first_bytes_ends_at_the_default_deadline() {
    let fake = Fake::start(|_, s| {
        let body = page(&[("a.md", 1)], None);
        let _ = write!(
            s,
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{}",
            body.len() * 100,
            &body[..body.len() / 2]
        );
        std::thread::sleep(Duration::from_secs(120));
    });
    let dir = tempfile::tempdir().unwrap();
    let t0 = Instant::now();
    let e = rt()
        .block_on(pull_vault(&fake.client(), dir.path()))
        .unwrap_err();
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_secs(29) && took < Duration::from_secs(33),
        "{took:?}"
    );
    one_line(&e, "within the 30s deadline");
    assert_eq!(fake.requests(), 1);
}

/// In a child process: walks a 300 MB single-page listing of short keys with the default
/// bounds (it ends at the 256 MiB body cap or the 250,000-object bound, whichever comes
/// first) and prints what it read.
fn rss_child() {
    let fake = Fake::start(|_, s| {
        let _ = write!(
            s,
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        );
        let mut i = 0u64;
        let mut sent = 0u64;
        let head = "<ListBucketResult><IsTruncated>false</IsTruncated>";
        let _ = write!(s, "{:x}\r\n{head}\r\n", head.len());
        while sent < 300 * 1024 * 1024 {
            let mut chunk = String::with_capacity(64 * 1024);
            while chunk.len() < 60 * 1024 {
                // Long keys, so the object bound is met late: the record holds its most.
                chunk.push_str(&format!(
                    "<Contents><Key>folder/{i:0>200}.md</Key><Size>1</Size><ETag>&quot;0123456789abcdef0123456789abcdef&quot;</ETag></Contents>"
                ));
                i += 1;
            }
            if write!(s, "{:x}\r\n{chunk}\r\n", chunk.len()).is_err() {
                return;
            }
            sent += chunk.len() as u64;
        }
    });
    let e = walk_err(&fake.client());
    println!("S3_RSS_CHILD {e}");
}

#[test]
#[ignore = "slow: streams a 300 MB listing in a child process"]
fn a_300_mb_listing_stays_under_200_mib_peak_rss() {
    if std::env::var("S3_RSS_CHILD").is_ok() {
        return rss_child();
    }
    let (line, hwm_kib) = crate::rss::run_child(
        "hostile_s3::a_300_mb_listing_stays_under_200_mib_peak_rss",
        "S3_RSS_CHILD",
        "1",
    );
    assert!(line.contains("--feed-max-entries"), "{line}");
    assert!(
        hwm_kib < 200 * 1024,
        "peak RSS {} MiB over 200 MiB: {line}",
        hwm_kib / 1024
    );
}

mod props {
    //! CI-sized properties of the listing parser (the fuzz target `s3_listing` runs the first
    //! at length).
    use loadgen::protocols::s3::parse_listing_each;
    use proptest::prelude::*;

    /// One listed object: key, size, ETag.
    type Item = (String, u64, Option<String>);

    fn item() -> impl Strategy<Value = Item> {
        (
            "[a-zA-Z0-9 é&<>'\"%#?./~_-]{1,40}",
            any::<u64>(),
            proptest::option::of("\"[a-f0-9]{32}\""),
        )
    }

    fn escape(s: &str) -> String {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('"', "&quot;")
    }

    fn render(items: &[Item], token: Option<&str>) -> String {
        let mut x = String::from(
            "<?xml version=\"1.0\"?>\n<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">",
        );
        if let Some(t) = token {
            x.push_str(&format!(
                "<IsTruncated>true</IsTruncated><NextContinuationToken>{}</NextContinuationToken>",
                escape(t)
            ));
        }
        for (key, size, etag) in items {
            x.push_str(&format!(
                "<Contents><Key>{}</Key><Size>{size}</Size>",
                escape(key)
            ));
            if let Some(e) = etag {
                x.push_str(&format!("<ETag>{}</ETag>", escape(e)));
            }
            x.push_str("</Contents>\n");
        }
        x.push_str("</ListBucketResult>");
        x
    }

    fn parse(
        body: &[u8],
    ) -> Result<
        (
            Vec<loadgen::protocols::s3::Object>,
            loadgen::protocols::s3::PageEnd,
        ),
        String,
    > {
        let mut out = Vec::new();
        let end = parse_listing_each(body, "LIST", &mut |o| {
            out.push(o);
            Ok(())
        })?;
        Ok((out, end))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn arbitrary_bytes_never_panic_and_errors_are_one_line(
            body in proptest::collection::vec(any::<u8>(), 0..2048),
        ) {
            if let Err(m) = parse(&body) {
                prop_assert!(!m.contains('\n') && m.len() < 600, "{m:?}");
            }
        }

        #[test]
        fn mangled_listings_never_panic(
            items in proptest::collection::vec(item(), 0..8),
            cut in any::<prop::sample::Index>(),
            flip in any::<prop::sample::Index>(),
            byte in any::<u8>(),
        ) {
            let mut body = render(&items, Some("t")).into_bytes();
            let i = flip.index(body.len());
            body[i] = byte;
            body.truncate(cut.index(body.len() + 1));
            if let Err(m) = parse(&body) {
                prop_assert!(!m.contains('\n'));
            }
        }

        #[test]
        fn generated_listings_round_trip(
            items in proptest::collection::vec(item(), 0..12),
            token in proptest::option::of("[a-zA-Z0-9/+=]{1,40}"),
        ) {
            let body = render(&items, token.as_deref());
            let (got, end) = parse(body.as_bytes()).unwrap();
            prop_assert_eq!(got.len(), items.len());
            prop_assert_eq!(end.is_truncated, token.is_some());
            prop_assert_eq!(end.next_token, token);
            for (o, (key, size, etag)) in got.iter().zip(&items) {
                prop_assert_eq!(&o.key, key);
                prop_assert_eq!(o.size, *size);
                prop_assert_eq!(&o.etag, etag);
            }
        }
    }
}
