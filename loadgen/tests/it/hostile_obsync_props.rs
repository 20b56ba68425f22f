//! CI-sized property tests of the parsers that read an obsync target's answers (the fuzz
//! targets `chunks_get`, `changes_page` and `h1_chunked` in `fuzz/` run the same properties
//! for longer): arbitrary bytes are a verdict or a one-line error, never a panic; a generated
//! valid answer parses back to what was generated; a feed that never ends stops at its bounds.

use base64::Engine as _;
use loadgen::FeedBounds;
use loadgen::internals::h1::read_answer;
use loadgen::internals::{ChunkPart, follow_feed, follow_feed_within, parse_chunks_get};
use proptest::prelude::*;

/// A `chunks/get` body as the reference server writes it.
fn multipart(boundary: &str, parts: &[ChunkPart]) -> Vec<u8> {
    let mut out = Vec::new();
    for p in parts {
        if p.missing {
            out.extend_from_slice(
                format!(
                    "--{boundary}\r\nx-obsync-sid: {}\r\nx-obsync-missing: 1\r\ncontent-length: 0\r\n\r\n\r\n",
                    p.sid
                )
                .as_bytes(),
            );
        } else {
            out.extend_from_slice(
                format!(
                    "--{boundary}\r\ncontent-type: application/octet-stream\r\nx-obsync-sid: {}\r\ncontent-length: {}\r\n\r\n",
                    p.sid,
                    p.body.len()
                )
                .as_bytes(),
            );
            out.extend_from_slice(&p.body);
            out.extend_from_slice(b"\r\n");
        }
    }
    out.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    out
}

fn part() -> impl Strategy<Value = ChunkPart> {
    (
        "[0-9a-f]{64}",
        any::<bool>(),
        prop::collection::vec(any::<u8>(), 0..200),
    )
        .prop_map(|(sid, missing, body)| ChunkPart {
            sid,
            missing,
            body: if missing { Vec::new() } else { body },
        })
}

fn change_json(seq: u64, path: &str) -> serde_json::Value {
    let m = serde_json::json!({"path": path, "kind": "file", "size": 1, "sha256": "00"});
    serde_json::json!({
        "seq": seq, "file_id": "f", "domain_id": "d", "version_id": "v", "parents": [],
        "sids": ["aa"], "bytes": 1,
        "manifest_ct": base64::engine::general_purpose::STANDARD.encode(m.to_string()),
        "manifest_nonce": "00", "device_id": "dd", "ts": 0, "deleted": false,
        "heads": ["v"], "conflicted": false,
    })
}

/// `pages` feed pages of `per_page` changes each from `since`, `seq` rising by `per_page`,
/// `head_seq` always ahead: a feed that never ends.
fn endless_feed(since: u64, per_page: u64, pages: u64) -> Vec<Vec<u8>> {
    (0..pages)
        .map(|p| {
            let first = since + p * per_page + 1;
            let changes: Vec<_> = (first..first + per_page)
                .map(|q| change_json(q, &format!("n/{q}.md")))
                .collect();
            serde_json::json!({"seq": first + per_page - 1, "head_seq": u64::MAX, "changes": changes})
                .to_string()
                .into_bytes()
        })
        .collect()
}

/// With the default bounds, a feed of one-change pages that never ends is refused on its
/// 4,096th page; one that ends on that page is whole.
#[test]
fn a_feed_that_never_ends_stops_at_the_default_page_bound() {
    let pages = endless_feed(0, 1, 4096);
    let refs: Vec<&[u8]> = pages.iter().map(Vec::as_slice).collect();
    assert_eq!(
        follow_feed(&refs, 0).unwrap_err(),
        "GET /v1/changes: server's changes feed went on past 4096 pages in one walk (bound --feed-max-pages)"
    );
    let last = serde_json::json!({"seq": 4096, "head_seq": 4096, "changes": [change_json(4096, "end.md")]})
        .to_string()
        .into_bytes();
    let mut refs = refs;
    refs[4095] = &last;
    assert_eq!(follow_feed(&refs, 0), Ok((4096, true)));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn a_feed_that_keeps_inventing_entries_stops_at_the_first_bound_it_passes(
        per_page in 1u64..20,
        max_entries in 1u64..200,
        max_pages in 1u64..30,
        since in 0u64..1_000_000,
    ) {
        let pages = endless_feed(since, per_page, max_pages);
        let refs: Vec<&[u8]> = pages.iter().map(Vec::as_slice).collect();
        let bounds = FeedBounds { max_entries, max_pages, ..FeedBounds::DEFAULT };
        let e = follow_feed_within(&refs, since, bounds).unwrap_err();
        // The page whose entries first pass the entry bound, against the last page allowed.
        let want = if max_entries / per_page < max_pages {
            format!("listed more than {max_entries} entries in one walk (bound --feed-max-entries)")
        } else {
            format!("went on past {max_pages} pages in one walk (bound --feed-max-pages)")
        };
        prop_assert!(e.starts_with("GET /v1/changes: server's changes feed ") && e.ends_with(&want), "{}", e);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn garbage_multipart_is_an_error_not_a_panic(
        ct in "[ -~]{0,60}",
        body in prop::collection::vec(any::<u8>(), 0..400),
        max_parts in 0usize..5,
    ) {
        match parse_chunks_get(&ct, &body, max_parts) {
            Ok(parts) => prop_assert!(parts.len() <= max_parts),
            Err(e) => prop_assert!(!e.contains('\n'), "{}", e),
        }
    }

    #[test]
    fn multipart_with_wild_lengths_is_an_error_not_a_panic(
        len in prop_oneof![Just(u64::MAX), Just(usize::MAX as u64 - 3), 0u64..64, any::<u64>()],
        data in prop::collection::vec(any::<u8>(), 0..40),
    ) {
        let mut body = format!("--b\r\nx-obsync-sid: a\r\ncontent-length: {len}\r\n\r\n").into_bytes();
        body.extend_from_slice(&data);
        body.extend_from_slice(b"\r\n--b--\r\n");
        match parse_chunks_get("multipart/mixed; boundary=b", &body, 3) {
            Ok(parts) => prop_assert_eq!(&parts[0].body, &data),
            Err(e) => prop_assert!(!e.contains('\n'), "{}", e),
        }
    }

    #[test]
    fn generated_multipart_round_trips(
        boundary in "[A-Za-z0-9-]{1,40}",
        parts in prop::collection::vec(part(), 0..4),
    ) {
        let body = multipart(&boundary, &parts);
        let ct = format!("multipart/mixed; boundary={boundary}");
        let got = parse_chunks_get(&ct, &body, parts.len()).unwrap();
        prop_assert_eq!(got, parts);
    }

    #[test]
    fn garbage_feed_pages_are_errors_not_panics(
        pages in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..200), 0..4),
        since in any::<u64>(),
    ) {
        let refs: Vec<&[u8]> = pages.iter().map(Vec::as_slice).collect();
        match follow_feed(&refs, since) {
            Ok((seq, _)) => prop_assert!(seq >= since),
            Err(e) => prop_assert!(!e.contains('\n'), "{}", e),
        }
    }

    #[test]
    fn a_generated_feed_is_followed_to_its_head(
        steps in prop::collection::vec(1u64..50, 1..6),
        since in 0u64..1000,
    ) {
        let mut seq = since;
        let head = since + steps.iter().sum::<u64>();
        let mut pages = Vec::new();
        for (i, s) in steps.iter().enumerate() {
            seq += s;
            let page = serde_json::json!({
                "seq": seq, "head_seq": head,
                "changes": [change_json(seq, &format!("dir/n{i}.md"))],
            });
            pages.push(page.to_string().into_bytes());
        }
        let refs: Vec<&[u8]> = pages.iter().map(Vec::as_slice).collect();
        prop_assert_eq!(follow_feed(&refs, since), Ok((head, true)));
    }

    #[test]
    fn a_stalled_feed_is_refused_on_its_third_page(seq in 0u64..u64::MAX - 10, extra in 1u64..10) {
        let page = serde_json::json!({
            "seq": seq, "head_seq": seq + extra,
            "changes": [change_json(seq, "a.md")],
        })
        .to_string()
        .into_bytes();
        let refs = [&page[..], &page[..], &page[..]];
        let e = follow_feed(&refs, seq).unwrap_err();
        let want = format!("did not advance seq past {seq} in 3 pages");
        prop_assert!(e.contains(&want), "{}", e);
    }

    #[test]
    fn climbing_paths_in_the_feed_are_refused(
        path in prop_oneof![
            Just("../x".to_owned()),
            "/[a-z]{1,8}",
            "[a-z]{1,4}/\\.\\./[a-z]{1,4}",
            "[a-z]{0,4}\0[a-z]{0,4}",
        ],
    ) {
        let page = serde_json::json!({"seq": 1, "head_seq": 1, "changes": [change_json(1, &path)]})
            .to_string()
            .into_bytes();
        let e = follow_feed(&[&page[..]], 0).unwrap_err();
        prop_assert!(e.contains("unsafe"), "{}", e);
    }
}

proptest! {
    // Each case is a loopback round trip: fewer of them.
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn garbage_chunked_bodies_are_errors_not_panics(body in prop::collection::vec(any::<u8>(), 0..200)) {
        let mut answer = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
        answer.extend_from_slice(&body);
        match read_answer(&answer, false, 64) {
            Ok((_, n)) => prop_assert!(n <= 64),
            Err(e) => {
                prop_assert!(!e.starts_with("hang"), "{}", e);
                prop_assert!(!e.contains('\n'), "{}", e);
            }
        }
    }

    #[test]
    fn generated_chunked_bodies_decode_to_their_length(
        chunks in prop::collection::vec(prop::collection::vec(any::<u8>(), 1..100), 0..6),
        upper in any::<bool>(),
    ) {
        let mut answer = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
        for c in &chunks {
            let size = if upper { format!("{:X}", c.len()) } else { format!("{:x}", c.len()) };
            answer.extend_from_slice(format!("{size};ext=1\r\n").as_bytes());
            answer.extend_from_slice(c);
            answer.extend_from_slice(b"\r\n");
        }
        answer.extend_from_slice(b"0\r\ntrailer: x\r\n\r\n");
        let total: usize = chunks.iter().map(Vec::len).sum();
        prop_assert_eq!(read_answer(&answer, false, 1 << 20), Ok((200, total as u64)));
    }
}

/// An endless run of interim answers, or of trailers, is an error, not a loop.
#[test]
fn endless_interim_answers_and_trailers_are_errors() {
    let interim = b"HTTP/1.1 100 Continue\r\n\r\n".repeat(40);
    let e = read_answer(&interim, false, 64).unwrap_err();
    assert!(e.contains("interim"), "{e}");
    let mut trailers = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n0\r\n".to_vec();
    for _ in 0..5000 {
        trailers.extend_from_slice(b"x-trailer: aaaaaaaaaaaaaaaa\r\n");
    }
    let e = read_answer(&trailers, false, 64).unwrap_err();
    assert!(e.contains("trailers"), "{e}");
}
