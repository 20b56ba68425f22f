//! The harness's module graph has no cycles: no file of `harness/src` names (through a
//! `crate::` path) a file that names it back, directly or through others.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, as (module path, source).
fn modules(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            modules(root, &p, out);
            continue;
        }
        if p.extension().is_none_or(|x| x != "rs") {
            continue;
        }
        let rel: PathBuf = p.strip_prefix(root).unwrap().with_extension("");
        let mut parts: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if matches!(
            parts.last().map(String::as_str),
            Some("mod" | "lib" | "main")
        ) {
            parts.pop();
        }
        out.insert(parts.join("::"), std::fs::read_to_string(&p).unwrap());
    }
}

/// The module files a source names with `crate::a::b::...` paths (longest known prefix).
fn edges(src: &str, known: &BTreeMap<String, String>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (i, _) in src.match_indices("crate::") {
        let rest = &src[i + "crate::".len()..];
        let path: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
            .collect();
        let segs: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
        for n in (1..=segs.len()).rev() {
            let m = segs[..n].join("::");
            if known.contains_key(&m) {
                out.insert(m);
                break;
            }
        }
    }
    out
}

fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut mods = BTreeMap::new();
    modules(&root, &root, &mut mods);
    mods.iter()
        .map(|(m, src)| {
            let mut e = edges(src, &mods);
            e.remove(m);
            (m.clone(), e)
        })
        .collect()
}

/// A cycle through the graph, as the modules on it, if there is one.
fn find_cycle(g: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        done: &mut BTreeSet<String>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = stack.iter().position(|s| s == n) {
            let mut c = stack[at..].to_vec();
            c.push(n.to_owned());
            return Some(c);
        }
        if done.contains(n) {
            return None;
        }
        stack.push(n.to_owned());
        for m in g.get(n).into_iter().flatten() {
            if let Some(c) = visit(m, g, done, stack) {
                return Some(c);
            }
        }
        stack.pop();
        done.insert(n.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    g.keys()
        .find_map(|n| visit(n, g, &mut done, &mut Vec::new()))
}

#[test]
fn no_harness_file_imports_a_file_that_imports_it_back() {
    let g = graph();
    assert!(g.contains_key("sample::phases") && g.contains_key("commands::record"));
    assert!(
        g["sample::child"].contains("sample::phases"),
        "the scan sees the child's use of the phases"
    );
    if let Some(c) = find_cycle(&g) {
        panic!("module cycle: {}", c.join(" -> "));
    }
}

#[test]
fn the_cycle_finder_finds_a_cycle() {
    let g: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec![]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.into_iter().map(str::to_owned).collect()))
    .collect();
    assert_eq!(
        find_cycle(&g),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
}
