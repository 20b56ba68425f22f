//! No file of the workspace imports a file that imports it back. For every crate's `src/`
//! (each `src/bin/*.rs` is a crate root of its own and is left out with its directory), the
//! module graph is read from the sources: an edge from a file to every module file it names
//! through a `crate::` or `super::` path (a `{a, b}` group names each item), and from a
//! folder's `mod.rs` (or the crate root) to every child whose items its own code uses by
//! relative path (`trial::run()` in `calibrate/mod.rs`). A `mod child;` declaration and a
//! re-export (`pub use child::X;`) are the folder's table of contents, not a use: so a child
//! may not use what its `mod.rs` defines while the `mod.rs` calls into it. Left out: unit-test
//! modules (from a file's first `#[cfg(test)]` on, where `use super::*` names the file
//! itself); comment lines.
//! The graph must have no cycle. Tests, benches and examples are leaf crates of their own.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("contract/ sits in the workspace root")
        .to_owned()
}

/// The workspace's member crates, from the root manifest's `members = [...]` line.
fn members() -> Vec<String> {
    let manifest = std::fs::read_to_string(workspace_root().join("Cargo.toml")).unwrap();
    let line = manifest
        .lines()
        .find(|l| l.trim_start().starts_with("members"))
        .expect("a members line in the root Cargo.toml");
    line.split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// Every `.rs` file under `dir` but `src/bin`, as (module path, source); `folders` gets the
/// modules that are a folder's `mod.rs` or the crate root.
fn modules(
    root: &Path,
    dir: &Path,
    out: &mut BTreeMap<String, String>,
    folders: &mut BTreeSet<String>,
) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            if p != root.join("bin") {
                modules(root, &p, out, folders);
            }
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
            folders.insert(parts.join("::"));
        }
        let text = std::fs::read_to_string(&p).unwrap();
        out.insert(parts.join("::"), shipped(&text));
    }
}

/// A file's code before its first `#[cfg(test)]` line, comment lines dropped: unit tests sit
/// at the bottom of a file by the house style, and their `use super::*` names the file
/// itself, not its parent; a doc link (`[`super::X`]`) is not an import.
fn shipped(text: &str) -> String {
    let code = match text.find("\n#[cfg(test)]") {
        Some(i) => &text[..i],
        None => text,
    };
    code.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The longest known modules that `base` + the path at the start of `rest` name; a
/// `{a, b::c}` group after the path names each of its items.
fn resolve(base: &[&str], rest: &str, known: &BTreeMap<String, String>) -> Vec<String> {
    let path: String = rest
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
        .collect();
    let mut segs: Vec<&str> = base.to_vec();
    segs.extend(path.split("::").filter(|s| !s.is_empty()));
    let after = &rest[path.len()..];
    if (path.is_empty() || path.ends_with("::"))
        && let Some(group) = after.strip_prefix('{')
    {
        let mut depth = 0;
        let end = group
            .char_indices()
            .find(|&(_, c)| {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => return true,
                    '}' => depth -= 1,
                    _ => {}
                }
                false
            })
            .map_or(group.len(), |(i, _)| i);
        let mut out = Vec::new();
        let mut depth = 0;
        let mut start = 0;
        let inner = &group[..end];
        for (i, c) in inner.char_indices().chain([(inner.len(), ',')]) {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    let item = inner[start..i].trim();
                    if !item.is_empty() {
                        out.extend(resolve(&segs, item, known));
                    }
                    start = i + 1;
                }
                _ => {}
            }
        }
        return out;
    }
    (1..=segs.len())
        .rev()
        .map(|n| segs[..n].join("::"))
        .find(|m| known.contains_key(m))
        .into_iter()
        .collect()
}

/// Whether the text just before `i` ends a path segment or identifier (so `x::` at `i` is
/// not the tail of `a::x::` or of `my_x::`).
fn starts_a_path(src: &str, i: usize) -> bool {
    src[..i]
        .chars()
        .next_back()
        .is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == ':'))
}

/// The module files that module `m` (source `src`) names.
fn edges(
    m: &str,
    src: &str,
    known: &BTreeMap<String, String>,
    is_folder: bool,
) -> BTreeSet<String> {
    let me: Vec<&str> = m.split("::").filter(|s| !s.is_empty()).collect();
    let mut out = BTreeSet::new();
    for (i, _) in src.match_indices("crate::") {
        if starts_a_path(src, i) {
            out.extend(resolve(&[], &src[i + "crate::".len()..], known));
        }
    }
    for (i, _) in src.match_indices("super::") {
        if starts_a_path(src, i) && !me.is_empty() {
            // `super::super::x` climbs twice.
            let mut rest = &src[i..];
            let mut up = 0;
            while let Some(r) = rest.strip_prefix("super::") {
                rest = r;
                up += 1;
            }
            if up <= me.len() {
                out.extend(resolve(&me[..me.len() - up], rest, known));
            }
        }
    }
    // A folder's mod.rs (or the crate root) that uses a child's items in its own code names
    // that child: `child::f()`, `use child::X;`. Its `mod child;` declarations and its
    // re-exports (`pub use child::X;`) are its table of contents, not a use.
    if is_folder {
        let children: Vec<(&str, &String)> = known
            .keys()
            .filter_map(|name| {
                let child = if me.is_empty() {
                    name.as_str()
                } else {
                    name.strip_prefix(m)?.strip_prefix("::")?
                };
                (!child.is_empty() && !child.contains("::")).then_some((child, name))
            })
            .collect();
        for line in src.lines().map(str::trim_start) {
            let declaration = [
                "mod ",
                "pub mod ",
                "pub(crate) mod ",
                "pub use ",
                "pub(crate) use ",
            ]
            .iter()
            .any(|p| line.starts_with(p));
            if declaration {
                continue;
            }
            for (child, name) in &children {
                let named = line
                    .match_indices(&format!("{child}::"))
                    .any(|(i, _)| starts_a_path(line, i));
                if named {
                    out.insert((*name).clone());
                }
            }
        }
    }
    out.remove(m);
    out
}

fn graph(src_dir: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let (mut mods, mut folders) = (BTreeMap::new(), BTreeSet::new());
    modules(src_dir, src_dir, &mut mods, &mut folders);
    mods.iter()
        .map(|(m, src)| (m.clone(), edges(m, src, &mods, folders.contains(m))))
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
fn no_file_in_the_workspace_imports_a_file_that_imports_it_back() {
    let crates = members();
    assert!(crates.len() >= 10, "members: {crates:?}");
    let mut cycles = Vec::new();
    for c in &crates {
        let g = graph(&workspace_root().join(c).join("src"));
        if let Some(cycle) = find_cycle(&g) {
            cycles.push(format!("{c}: {}", cycle.join(" -> ")));
        }
    }
    assert!(cycles.is_empty(), "module cycles:\n{}", cycles.join("\n"));
}

#[test]
fn the_scan_sees_crate_and_super_paths() {
    let harness = graph(&workspace_root().join("harness/src"));
    assert!(
        harness["sample::child"].contains("sample::phases"),
        "a crate:: path: {:?}",
        harness["sample::child"]
    );
    assert!(
        harness["commands::calibrate::trial"].contains("subprocess"),
        "a crate:: path: {:?}",
        harness["commands::calibrate::trial"]
    );
    let refserver = graph(&workspace_root().join("refserver/src"));
    assert!(
        refserver["api::health"]
            .iter()
            .any(|m| m.starts_with("api")),
        "a super:: path: {:?}",
        refserver["api::health"]
    );
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

#[test]
fn edges_resolve_super_and_child_paths_to_module_files() {
    let known: BTreeMap<String, String> = ["", "a", "a::b", "a::c", "d"]
        .into_iter()
        .map(|k| (k.to_owned(), String::new()))
        .collect();
    let e = edges(
        "a::b",
        "use super::c::Thing; use crate::d::f; let x = my_c::y;",
        &known,
        false,
    );
    assert_eq!(e, BTreeSet::from(["a::c".to_owned(), "d".to_owned()]));
    // A folder's mod.rs using its children's items names them; its declarations and
    // re-exports do not.
    let e = edges(
        "a",
        "mod b;\npub use c::Y;\nfn f() { b::run(); }",
        &known,
        true,
    );
    assert_eq!(e, BTreeSet::from(["a::b".to_owned()]));
    let e = edges("", "pub mod a;\nfn f() { a::go(); d::go(); }", &known, true);
    assert_eq!(e, BTreeSet::from(["a".to_owned(), "d".to_owned()]));
    // A group names its items, not the module the path stops at.
    let e = edges("a::b", "use super::{c, X};", &known, false);
    assert_eq!(e, BTreeSet::from(["a::c".to_owned(), "a".to_owned()]));
    let e = edges("d", "use crate::a::{b::Y, c};", &known, false);
    assert_eq!(e, BTreeSet::from(["a::b".to_owned(), "a::c".to_owned()]));
}
