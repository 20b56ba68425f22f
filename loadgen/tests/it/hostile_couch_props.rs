//! CI-sized property tests of the parsers that read a CouchDB target's messages (the fuzz
//! target `couch_messages` in `fuzz/` runs the same properties for longer): arbitrary bytes
//! are a verdict or a one-line error, never a panic; a feed follower never loops on a page
//! that does not advance, nor follows a feed that never ends past its bounds; LiveSync's
//! chunking covers every file exactly; the pull's assembly takes an honest answer whole and
//! refuses any chunk changed by a byte.

use loadgen::FeedBounds;
use loadgen::protocols::couch::chunk::{Kind, decode, split};
use loadgen::protocols::couch::ops::{assemble_answer, follow_pages, follow_pages_within};
use loadgen::protocols::couch::wire::parse_any;
use proptest::prelude::*;
use serde_json::{Value, json};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_bytes_never_panic_a_message_parser(data in proptest::collection::vec(any::<u8>(), 0..2048)) {
        parse_any(&data);
        let pages: Vec<&[u8]> = data.split(|&b| b == 0x0c).collect();
        if let Err(e) = follow_pages(&pages, Value::from(0)) {
            prop_assert!(!e.contains('\n'), "{e:?}");
        }
    }

    #[test]
    fn a_feed_that_never_advances_is_refused(n in 3usize..20, seq in any::<u32>()) {
        let page = json!({"results": [{"id": "a", "changes": [{"rev": "1-x"}], "seq": seq}], "last_seq": seq}).to_string();
        let pages: Vec<&[u8]> = (0..n).map(|_| page.as_bytes()).collect();
        let e = follow_pages(&pages, Value::from(seq)).unwrap_err();
        prop_assert!(e.contains("without moving last_seq"), "{e}");
    }

    #[test]
    fn an_advancing_feed_ends_where_its_last_page_says(k in 1u64..30) {
        let pages: Vec<String> = (1..=k)
            .map(|i| json!({"results": [{"id": format!("d{i}"), "changes": [{"rev": "1-x"}], "seq": i}], "last_seq": i}).to_string())
            .chain(std::iter::once(json!({"results": [], "last_seq": k}).to_string()))
            .collect();
        let refs: Vec<&[u8]> = pages.iter().map(|p| p.as_bytes()).collect();
        prop_assert_eq!(follow_pages(&refs, Value::from(0)).unwrap(), (Value::from(k), k));
    }

    #[test]
    fn a_feed_that_keeps_inventing_rows_stops_at_the_first_bound_it_passes(
        per_page in 1u64..30,
        max_entries in 1u64..300,
        max_pages in 1u64..30,
    ) {
        let pages: Vec<String> = (0..max_pages)
            .map(|p| {
                let rows: Vec<Value> = (p * per_page + 1..=(p + 1) * per_page)
                    .map(|q| json!({"id": format!("d{q}"), "changes": [{"rev": "1-x"}], "seq": q}))
                    .collect();
                json!({"results": rows, "last_seq": (p + 1) * per_page}).to_string()
            })
            .collect();
        let refs: Vec<&[u8]> = pages.iter().map(|p| p.as_bytes()).collect();
        let bounds = FeedBounds { max_entries, max_pages, ..loadgen::protocols::couch::FEED_DEFAULT };
        let e = follow_pages_within(&refs, Value::from(0), bounds).unwrap_err();
        let want = if max_entries / per_page < max_pages {
            format!("listed more than {max_entries} entries in one walk (bound --feed-max-entries)")
        } else {
            format!("went on past {max_pages} pages in one walk (bound --feed-max-pages)")
        };
        prop_assert!(e.starts_with("GET _changes: server's changes feed ") && e.ends_with(&want), "{}", e);
    }

    #[test]
    fn chunks_cover_text_and_binary_files_exactly(text in "\\PC{0,3000}", bin in proptest::collection::vec(any::<u8>(), 0..20000)) {
        let joined: String = split(Kind::Plain, text.as_bytes()).into_iter().map(|p| p.data).collect();
        prop_assert_eq!(joined, text);
        let mut back = Vec::new();
        for p in split(Kind::Binary, &bin) {
            prop_assert!(p.id.starts_with("h:"));
            back.extend(decode(Kind::Binary, &p.data).unwrap());
        }
        prop_assert_eq!(back, bin);
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_assembly(data in proptest::collection::vec(any::<u8>(), 0..2048)) {
        if let Err(e) = assemble_answer(&data) {
            prop_assert!(!e.contains('\n') && e.bytes().all(|b| b >= 0x20), "{e:?}");
        }
    }

    #[test]
    fn an_honest_answer_assembles_and_a_changed_chunk_is_refused(
        text in "\\PC{1,3000}",
        bin in proptest::collection::vec(any::<u8>(), 1..20000),
        at in any::<usize>(),
    ) {
        let mut results = Vec::new();
        let mut files = Vec::new();
        let mut seen = std::collections::BTreeSet::new();
        for (path, bytes) in [("a.md", text.as_bytes()), ("b.png", &bin[..])] {
            let kind = Kind::of(path, bytes);
            let pieces = split(kind, bytes);
            for p in pieces.iter().filter(|p| seen.insert(p.id.clone())) {
                results.push(json!({"id": p.id, "docs": [{"ok": {"_id": p.id, "_rev": "1-c", "type": "leaf", "data": p.data}}]}));
            }
            files.push(json!({"id": path, "docs": [{"ok": {
                "_id": path, "_rev": "1-m", "type": kind.doc_type(), "path": path,
                "children": pieces.iter().map(|p| p.id.clone()).collect::<Vec<_>>(),
                "size": bytes.len(),
            }}]}));
        }
        let n_chunks = results.len();
        results.extend(files);
        let answer = json!({ "results": results });
        prop_assert_eq!(
            assemble_answer(answer.to_string().as_bytes()),
            Ok((text.len() + bin.len()) as u64)
        );
        // One chunk's data with one character changed (same length where it can be).
        let mut bad = answer.clone();
        let data = &mut bad["results"][at % n_chunks]["docs"][0]["ok"]["data"];
        let old = data.as_str().unwrap().to_owned();
        let i = old.char_indices().nth(at % old.chars().count()).unwrap().0;
        let c = old[i..].chars().next().unwrap();
        let new_c = if c == 'A' { 'B' } else { 'A' };
        *data = format!("{}{new_c}{}", &old[..i], &old[i + c.len_utf8()..]).into();
        let e = assemble_answer(bad.to_string().as_bytes()).unwrap_err();
        prop_assert!(e.contains("does not hash to its id"), "{}", e);
    }
}
