//! The multistatus parser on real PROPFIND answers from Apache mod_dav, nginx dav + dav-ext
//! and rclone, captured by `src/protocols/webdav/capture.rs` over the `hazards` vault (see
//! `tests/fixtures/webdav/README.md`): every listing must name exactly the folder's members
//! with their sizes, hrefs decoded to the bytes the vault has (NFC and NFD kept apart).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use loadgen::protocols::webdav::{DavClient, DavEntry, parse_multistatus};

const SERVERS: [&str; 3] = ["apache-webdav", "nginx-webdav", "rclone-webdav"];
/// The capture's extra folder and names, as `src/protocols/webdav/capture.rs` writes them.
const EXTRA_FOLDER: &str = "vaultbench-extra";
const EXTRA_NAMES: &[&str] = &[
    "100% done.md",
    "a%20b literal.md",
    "hash # and ? mark.md",
    "amp & lt < gt > quote \" apos '.md",
    "plus+semi;colon:comma,eq=.md",
];
const FOLDERS: &[(&str, &str)] = &[
    ("", "root"),
    ("Wiki", "wiki"),
    ("Clippings", "clippings"),
    ("\u{1f4da} Reading", "reading"),
    ("Metric", "metric"),
    (EXTRA_FOLDER, "extra"),
];

fn fixture(server: &str, name: &str) -> Vec<u8> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/webdav")
        .join(server)
        .join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The captured tree: vault path -> Some(size) for files, None for folders.
fn expected_tree() -> BTreeMap<String, Option<u64>> {
    let p = scenarios::profile("hazards").unwrap();
    let mut out = BTreeMap::new();
    let add_parents = |path: &str, out: &mut BTreeMap<String, Option<u64>>| {
        let mut acc = String::new();
        let segs: Vec<&str> = path.split('/').collect();
        for seg in &segs[..segs.len() - 1] {
            if !acc.is_empty() {
                acc.push('/');
            }
            acc.push_str(seg);
            out.insert(acc.clone(), None);
        }
    };
    for f in scenarios::generate(&p, scenarios::DEFAULT_SEED) {
        add_parents(&f.path, &mut out);
        out.insert(f.path.clone(), Some(f.size));
    }
    out.insert(EXTRA_FOLDER.to_owned(), None);
    for n in EXTRA_NAMES {
        out.insert(
            format!("{EXTRA_FOLDER}/{n}"),
            Some(format!("extra note {n}\n").len() as u64),
        );
    }
    out
}

fn parent(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(p, _)| p)
}

/// The listing as vault path -> entry, the requested folder itself left out (and checked).
fn members(entries: Vec<DavEntry>, folder: &str, what: &str) -> BTreeMap<String, DavEntry> {
    let mut out = BTreeMap::new();
    let mut saw_self = false;
    for e in entries {
        match DavClient::rel_of(&e.path).map(str::to_owned) {
            Some(rel) if rel != folder => {
                assert_eq!(e.status, 200, "{what}: {e:?}");
                assert!(out.insert(rel.clone(), e).is_none(), "{what}: {rel} twice");
            }
            _ => {
                assert!(e.is_collection, "{what}: the folder itself {e:?}");
                saw_self = true;
            }
        }
    }
    assert!(saw_self, "{what}: no entry for the folder itself");
    out
}

fn check_members(
    got: &BTreeMap<String, DavEntry>,
    want: &BTreeMap<&String, &Option<u64>>,
    what: &str,
) {
    let got_names: BTreeSet<&String> = got.keys().collect();
    let want_names: BTreeSet<&String> = want.keys().copied().collect();
    assert_eq!(got_names, want_names, "{what}: members differ");
    for (path, size) in want {
        let e = &got[*path];
        assert_eq!(e.is_collection, size.is_none(), "{what}: {path}");
        if let Some(n) = size {
            assert_eq!(e.size, Some(*n), "{what}: size of {path}");
        }
        assert!(
            e.last_modified.is_some(),
            "{what}: {path} has no getlastmodified"
        );
    }
}

#[test]
fn depth1_listings_name_exactly_the_folder_members() {
    let tree = expected_tree();
    for server in SERVERS {
        for (folder, name) in FOLDERS {
            let what = format!("{server}/{name}.depth1.xml");
            let entries = parse_multistatus(&fixture(server, &format!("{name}.depth1.xml")), &what)
                .unwrap_or_else(|e| panic!("{e}"));
            let got = members(entries, folder, &what);
            // nginx's dav-ext module leaves names that start with a dot out of PROPFIND
            // answers (the files are stored and GET serves them): a vault's `.obsidian`
            // folder is invisible to a client that lists through it.
            let hidden =
                |p: &str| server == "nginx-webdav" && p.split('/').any(|s| s.starts_with('.'));
            let want: BTreeMap<&String, &Option<u64>> = tree
                .iter()
                .filter(|(p, _)| parent(p) == *folder && !hidden(p))
                .collect();
            assert!(!want.is_empty(), "{what}: the vault has no {folder:?}");
            check_members(&got, &want, &what);
        }
    }
}

#[test]
fn rclone_depth_infinity_lists_the_whole_tree() {
    let what = "rclone-webdav/root.infinity.xml";
    let entries = parse_multistatus(&fixture("rclone-webdav", "root.infinity.xml"), what).unwrap();
    let got = members(entries, "", what);
    let tree = expected_tree();
    let want: BTreeMap<&String, &Option<u64>> = tree.iter().collect();
    assert!(want.len() > 800, "{}", want.len());
    check_members(&got, &want, what);
}

#[test]
fn apache_and_nginx_refuse_depth_infinity_with_403() {
    for server in ["apache-webdav", "nginx-webdav"] {
        let text = String::from_utf8(fixture(server, "root.infinity.refused.txt")).unwrap();
        assert!(text.starts_with("HTTP 403\n"), "{server}: {text}");
    }
}

#[test]
fn hazard_names_survive_as_bytes() {
    let nfc = "Wiki/Caf\u{e9} cr\u{e8}me.md";
    let nfd = "Wiki/Cafe\u{301} cre\u{300}me.md";
    assert_ne!(nfc.as_bytes(), nfd.as_bytes());
    for server in SERVERS {
        let what = format!("{server}/wiki.depth1.xml");
        let got = members(
            parse_multistatus(&fixture(server, "wiki.depth1.xml"), &what).unwrap(),
            "Wiki",
            &what,
        );
        for name in [
            nfc,
            nfd,
            "Wiki/MAAS.md",
            "Wiki/MaaS.md",
            "Wiki/trailing space .md",
        ] {
            assert!(got.contains_key(name), "{what}: {name:?} missing");
        }
        // The servers' hrefs differ in hex case (Apache writes %c3%a9, the others %C3%A9);
        // both decode to the same bytes.
        let href = &got[nfc].href;
        assert!(
            href.to_ascii_lowercase().contains("caf%c3%a9"),
            "{what}: {href}"
        );
        let what = format!("{server}/clippings.depth1.xml");
        let got = members(
            parse_multistatus(&fixture(server, "clippings.depth1.xml"), &what).unwrap(),
            "Clippings",
            &what,
        );
        let longest = got.keys().map(|k| k.len() - "Clippings/".len()).max();
        assert_eq!(longest, Some(255), "{what}: the 255-byte name");
    }
}

#[test]
fn etags_where_the_server_sends_them() {
    for (server, has_etag) in [
        ("apache-webdav", true),
        ("nginx-webdav", false),
        ("rclone-webdav", true),
    ] {
        let what = format!("{server}/extra.depth1.xml");
        let got = members(
            parse_multistatus(&fixture(server, "extra.depth1.xml"), &what).unwrap(),
            EXTRA_FOLDER,
            &what,
        );
        for (path, e) in &got {
            assert_eq!(e.etag.is_some(), has_etag, "{what}: {path} {e:?}");
            if let Some(t) = &e.etag {
                assert!(t.ends_with('"'), "{what}: {t}");
            }
        }
    }
}

#[test]
fn nginx_hides_dot_names_the_others_list_them() {
    for (server, listed) in [
        ("apache-webdav", true),
        ("nginx-webdav", false),
        ("rclone-webdav", true),
    ] {
        let what = format!("{server}/root.depth1.xml");
        let got = members(
            parse_multistatus(&fixture(server, "root.depth1.xml"), &what).unwrap(),
            "",
            &what,
        );
        assert_eq!(got.contains_key(".obsidian"), listed, "{what}");
        // Every server stored it: nothing was refused during the capture.
        let refused = String::from_utf8(fixture(server, "refused.txt")).unwrap();
        assert_eq!(refused, "none\n", "{server}");
    }
}
