//! The workspace's import layering, read from the sources. For every crate's `src/` (each
//! `src/bin/*.rs`, and a `src/main.rs` beside a `src/lib.rs`, is a crate root of its own and
//! is left out), the module graph has an edge from a file to every module file it names
//! through a `crate::` or `super::` path (a `{a, b}` group names each item), and from a
//! folder's `mod.rs` (or the crate root) to every child whose items its own code uses by
//! relative path (`trial::run()` in `calibrate/mod.rs`). A `mod child;` declaration and a
//! re-export (`pub use child::X;`) are the folder's table of contents, not a use: so a child
//! may not use what its `mod.rs` defines while the `mod.rs` calls into it. Left out: unit-test
//! modules (from a file's first `#[cfg(test)]` on, where `use super::*` names the file
//! itself); comment lines.
//!
//! Three rules hold over that graph:
//! - no file imports a file that imports it back (the file graph has no cycle);
//! - no module imports a sibling that imports it back: the files are collapsed to the crate
//!   root's children (`harness::sample`, `harness::prepare`) and, inside every folder, to that
//!   folder's children (`harness::commands::calibrate`), and no such sibling graph has a cycle;
//! - where a crate root or `mod.rs` says in its `//!` doc that a module "imports only modules
//!   above it" in its `mod` list (as `harness/src/lib.rs` does), each child imports only the
//!   children declared above it.
//!
//! A failure names the modules and, for each import on the way, one importing file:line.
//! Tests, benches and examples are leaf crates of their own.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

/// The words by which a crate root or `mod.rs` states that its `mod` list is an import order.
const ORDER_STATED: &str = "imports only modules above it";

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

/// The module files of one crate's `src/`.
#[derive(Default)]
struct Sources {
    /// Module path -> its code as [`shipped`] keeps it.
    code: BTreeMap<String, String>,
    /// Module path -> its file, from the workspace root.
    files: BTreeMap<String, String>,
    /// The modules that are a folder's `mod.rs` or the crate root.
    folders: BTreeSet<String>,
}

/// Every `.rs` file under `dir` but `src/bin` (and `src/main.rs` where a `src/lib.rs` is the
/// library root), into `out`.
fn modules(root: &Path, dir: &Path, out: &mut Sources) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            if p != root.join("bin") {
                modules(root, &p, out);
            }
            continue;
        }
        if p.extension().is_none_or(|x| x != "rs") {
            continue;
        }
        if p == root.join("main.rs") && root.join("lib.rs").exists() {
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
            out.folders.insert(parts.join("::"));
        }
        let text = std::fs::read_to_string(&p).unwrap();
        let file = p
            .strip_prefix(workspace_root())
            .unwrap_or(&p)
            .to_string_lossy()
            .into_owned();
        out.code.insert(parts.join("::"), shipped(&text));
        out.files.insert(parts.join("::"), file);
    }
}

/// A file's code before its first `#[cfg(test)]` line, comment lines blanked (so line numbers
/// stay those of the file): unit tests sit at the bottom of a file by the house style, and
/// their `use super::*` names the file itself, not its parent; a doc link (`[`super::X`]`) is
/// not an import.
fn shipped(text: &str) -> String {
    let code = match text.find("\n#[cfg(test)]") {
        Some(i) => &text[..i],
        None => text,
    };
    code.lines()
        .map(|l| {
            if l.trim_start().starts_with("//") {
                ""
            } else {
                l
            }
        })
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

/// The 1-based line of byte `i` in `src`.
fn line_of(src: &str, i: usize) -> usize {
    src[..i].bytes().filter(|&b| b == b'\n').count() + 1
}

/// The module files that module `m` (source `src`) names, each with the first line naming it.
fn edges(
    m: &str,
    src: &str,
    known: &BTreeMap<String, String>,
    is_folder: bool,
) -> BTreeMap<String, usize> {
    let me: Vec<&str> = m.split("::").filter(|s| !s.is_empty()).collect();
    let mut out = BTreeMap::new();
    let mut add = |targets: Vec<String>, line: usize| {
        for t in targets {
            out.entry(t).or_insert(line);
        }
    };
    for (i, _) in src.match_indices("crate::") {
        if starts_a_path(src, i) {
            add(
                resolve(&[], &src[i + "crate::".len()..], known),
                line_of(src, i),
            );
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
                add(resolve(&me[..me.len() - up], rest, known), line_of(src, i));
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
        for (n, line) in src.lines().map(str::trim_start).enumerate() {
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
                    add(vec![(*name).clone()], n + 1);
                }
            }
        }
    }
    out.remove(m);
    out
}

/// Where an import is written: a file (from the workspace root) and a line.
#[derive(Clone, Debug, PartialEq, Eq)]
struct At {
    file: String,
    line: usize,
}

/// Module -> the modules it imports, each with one place that imports it.
type Graph = BTreeMap<String, BTreeMap<String, At>>;

fn sources(src_dir: &Path) -> Sources {
    let mut s = Sources::default();
    modules(src_dir, src_dir, &mut s);
    s
}

/// The file graph of the crate whose `src/` is `src_dir`.
fn graph(src_dir: &Path) -> Graph {
    let s = sources(src_dir);
    s.code
        .iter()
        .map(|(m, src)| {
            let to = edges(m, src, &s.code, s.folders.contains(m))
                .into_iter()
                .map(|(t, line)| {
                    let file = s.files[m].clone();
                    (t, At { file, line })
                })
                .collect();
            (m.clone(), to)
        })
        .collect()
}

/// A cycle through the graph, as the modules on it, if there is one.
fn find_cycle(g: &Graph) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        g: &Graph,
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
        for m in g.get(n).into_iter().flat_map(BTreeMap::keys) {
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

/// `module` named with its crate: `harness::sample`, or `harness` for the crate root.
fn qualified(krate: &str, module: &str) -> String {
    if module.is_empty() {
        krate.to_owned()
    } else {
        format!("{krate}::{module}")
    }
}

/// A cycle as `a -> b -> a`, then each step with one import that makes it.
fn describe(krate: &str, g: &Graph, cycle: &[String]) -> String {
    let names: Vec<String> = cycle.iter().map(|m| qualified(krate, m)).collect();
    let steps: Vec<String> = cycle
        .windows(2)
        .map(|w| {
            let at = &g[&w[0]][&w[1]];
            format!(
                "{} imports {} at {}:{}",
                qualified(krate, &w[0]),
                qualified(krate, &w[1]),
                at.file,
                at.line
            )
        })
        .collect();
    format!("{} ({})", names.join(" -> "), steps.join("; "))
}

/// Every folder of the graph's modules: the crate root ("") and each proper prefix of a
/// module path.
fn folders(g: &Graph) -> BTreeSet<String> {
    let mut out = BTreeSet::from([String::new()]);
    for m in g.keys() {
        let segs: Vec<&str> = m.split("::").collect();
        for n in 1..segs.len() {
            out.insert(segs[..n].join("::"));
        }
    }
    out
}

/// The graph between the children of `folder` ("" for the crate root): child `a` imports
/// child `b` when a file in or under `a` imports a file in or under `b`, witnessed by the
/// first such import. The folder's own file is none of its children.
fn siblings(g: &Graph, folder: &str) -> Graph {
    let child = |m: &str| -> Option<String> {
        let rest = if folder.is_empty() {
            m
        } else {
            m.strip_prefix(folder)?.strip_prefix("::")?
        };
        let first = rest.split("::").next().filter(|s| !s.is_empty())?;
        Some(if folder.is_empty() {
            first.to_owned()
        } else {
            format!("{folder}::{first}")
        })
    };
    let mut out = Graph::new();
    for (from, to) in g {
        let Some(a) = child(from) else { continue };
        let edges = out.entry(a.clone()).or_default();
        for (t, at) in to {
            if let Some(b) = child(t)
                && b != a
            {
                edges.entry(b).or_insert_with(|| at.clone());
            }
        }
    }
    out
}

/// The groups of two or more modules that each reach all the others (the graph's strongly
/// connected components with a cycle through them).
fn tangles(g: &Graph) -> Vec<BTreeSet<String>> {
    let reach = |from: &str| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo = VecDeque::from([from.to_owned()]);
        while let Some(n) = todo.pop_front() {
            for m in g.get(&n).into_iter().flat_map(BTreeMap::keys) {
                if seen.insert(m.clone()) {
                    todo.push_back(m.clone());
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&String, BTreeSet<String>> = g.keys().map(|n| (n, reach(n))).collect();
    let mut placed = BTreeSet::new();
    let mut out = Vec::new();
    for (n, r) in &reached {
        if placed.contains(*n) || !r.contains(*n) {
            continue;
        }
        let group: BTreeSet<String> = r
            .iter()
            .filter(|m| reached.get(m).is_some_and(|back| back.contains(*n)))
            .cloned()
            .collect();
        placed.extend(group.iter().cloned());
        if group.len() > 1 {
            out.push(group);
        }
    }
    out
}

/// For every folder of crate `krate`'s file graph, the sibling modules that import each other
/// (one line each, with a cycle through them).
fn module_cycles(krate: &str, g: &Graph) -> Vec<String> {
    let mut out = Vec::new();
    for folder in folders(g) {
        let s = siblings(g, &folder);
        for group in tangles(&s) {
            let inside: Graph = s
                .iter()
                .filter(|(m, _)| group.contains(*m))
                .map(|(m, to)| {
                    let to = to
                        .iter()
                        .filter(|(t, _)| group.contains(*t))
                        .map(|(t, at)| (t.clone(), at.clone()))
                        .collect();
                    (m.clone(), to)
                })
                .collect();
            let cycle = find_cycle(&inside).expect("a group that reaches itself has a cycle");
            out.push(format!(
                "{krate}: sibling modules import each other: {}",
                describe(krate, &s, &cycle)
            ));
        }
    }
    out
}

/// The `mod` list of a crate root or `mod.rs` whose `//!` doc states that a module imports
/// only modules above it, in order, as module paths under `folder`; `None` when it states no
/// order.
fn stated_order(text: &str, folder: &str) -> Option<Vec<String>> {
    let doc: Vec<&str> = text
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("//!"))
        .flat_map(str::split_whitespace)
        .collect();
    if !doc.join(" ").contains(ORDER_STATED) {
        return None;
    }
    let names = text.lines().filter_map(|l| {
        let l = l.trim_start();
        let l = ["pub(crate) ", "pub(super) ", "pub "]
            .iter()
            .find_map(|v| l.strip_prefix(v))
            .unwrap_or(l);
        let name = l.strip_prefix("mod ")?.strip_suffix(';')?.trim();
        Some(if folder.is_empty() {
            name.to_owned()
        } else {
            format!("{folder}::{name}")
        })
    });
    Some(names.collect())
}

/// The imports between the children of `folder` that go up `order` (a module importing one
/// listed below it), or that involve a child the list does not name; one line each, with the
/// importing file:line. `list` is the file that states the order.
fn upward_imports(
    krate: &str,
    g: &Graph,
    folder: &str,
    list: &str,
    order: &[String],
) -> Vec<String> {
    let pos = |m: &str| order.iter().position(|o| o == m);
    let mut out = Vec::new();
    for (a, to) in &siblings(g, folder) {
        for (b, at) in to {
            let (qa, qb) = (qualified(krate, a), qualified(krate, b));
            match (pos(a), pos(b)) {
                (Some(i), Some(j)) if i < j => {
                    out.push(format!(
                        "{krate}: upward import: {qa} imports {qb}, which {list} lists below it, at {}:{}",
                        at.file, at.line
                    ));
                }
                (None, _) | (_, None) => {
                    let missing = if pos(a).is_none() { &qa } else { &qb };
                    out.push(format!(
                        "{krate}: {qa} imports {qb} at {}:{}, but {list} does not list {missing} in its order",
                        at.file, at.line
                    ));
                }
                _ => {}
            }
        }
    }
    out
}

#[test]
fn no_file_in_the_workspace_imports_a_file_that_imports_it_back() {
    let crates = members();
    assert!(crates.len() >= 10, "members: {crates:?}");
    let mut cycles = Vec::new();
    for c in &crates {
        let g = graph(&workspace_root().join(c).join("src"));
        if let Some(cycle) = find_cycle(&g) {
            cycles.push(format!("{c}: {}", describe(c, &g, &cycle)));
        }
    }
    assert!(cycles.is_empty(), "file cycles:\n{}", cycles.join("\n"));
}

#[test]
fn no_module_imports_a_sibling_that_imports_it_back() {
    let mut cycles = Vec::new();
    for c in &members() {
        let g = graph(&workspace_root().join(c).join("src"));
        cycles.extend(module_cycles(c, &g));
    }
    assert!(cycles.is_empty(), "module cycles:\n{}", cycles.join("\n"));
}

#[test]
fn modules_import_only_modules_above_them_where_their_list_says_so() {
    let mut failures = Vec::new();
    let mut lists = Vec::new();
    for c in &members() {
        let src = workspace_root().join(c).join("src");
        let s = sources(&src);
        let g = graph(&src);
        for folder in &s.folders {
            let list = &s.files[folder];
            let text = std::fs::read_to_string(workspace_root().join(list)).unwrap();
            if let Some(order) = stated_order(&text, folder) {
                failures.extend(upward_imports(c, &g, folder, list, &order));
                lists.push(list.clone());
            }
        }
    }
    // The harness states its pipeline order; a rewording that loses it must not turn the
    // check off.
    assert!(
        lists.iter().any(|l| l == "harness/src/lib.rs"),
        "harness/src/lib.rs no longer says a module {ORDER_STATED:?} (lists read: {lists:?})"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_scan_sees_crate_and_super_paths() {
    let harness = graph(&workspace_root().join("harness/src"));
    assert!(
        harness["sample::child"].contains_key("sample::phases"),
        "a crate:: path: {:?}",
        harness["sample::child"]
    );
    assert!(
        harness["commands::calibrate::trial"].contains_key("subprocess"),
        "a crate:: path: {:?}",
        harness["commands::calibrate::trial"]
    );
    let refserver = graph(&workspace_root().join("refserver/src"));
    assert!(
        refserver["api::health"]
            .keys()
            .any(|m| m.starts_with("api")),
        "a super:: path: {:?}",
        refserver["api::health"]
    );
    // The witness is the importing file and line.
    let at = &harness["prepare"]["sample::plan"];
    assert_eq!(at.file, "harness/src/prepare/mod.rs");
    let text = std::fs::read_to_string(workspace_root().join(&at.file)).unwrap();
    let line = text.lines().nth(at.line - 1).unwrap();
    assert!(line.contains("sample::plan"), "line {}: {line}", at.line);
}

/// A graph from (importer, imported) pairs, each import witnessed at `<importer>.rs:1`.
fn graph_of(edges: &[(&str, &str)]) -> Graph {
    let mut g = Graph::new();
    for &(a, b) in edges {
        let at = At {
            file: format!("{}.rs", a.replace("::", "/")),
            line: 1,
        };
        g.entry(a.to_owned()).or_default().insert(b.to_owned(), at);
        g.entry(b.to_owned()).or_default();
    }
    g
}

#[test]
fn the_cycle_finder_finds_a_cycle() {
    let mut g = graph_of(&[("a", "b"), ("b", "c"), ("c", "a")]);
    g.entry("d".to_owned()).or_default();
    assert_eq!(
        find_cycle(&g),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
}

#[test]
fn a_cycle_between_sibling_modules_is_found_at_every_folder_level() {
    // No file cycle: a::x -> b::y -> a::z, but a and b import each other.
    let g = graph_of(&[("a::x", "b::y"), ("b::y", "a::z"), ("c", "a::x")]);
    assert_eq!(find_cycle(&g), None);
    let e = module_cycles("k", &g);
    assert_eq!(
        e,
        [
            "k: sibling modules import each other: k::a -> k::b -> k::a \
          (k::a imports k::b at a/x.rs:1; k::b imports k::a at b/y.rs:1)"
        ],
    );
    // One folder down: p::a::x -> p::b -> p::a::z; the crate root sees one module, p.
    let g = graph_of(&[("p::a::x", "p::b"), ("p::b", "p::a::z"), ("q", "p::b")]);
    let e = module_cycles("k", &g);
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(e[0].contains("k::p::a -> k::p::b -> k::p::a"), "{e:?}");
    // A three-module cycle is one finding.
    let g = graph_of(&[("a", "b"), ("b", "a"), ("b", "c"), ("c", "a")]);
    assert_eq!(module_cycles("k", &g).len(), 1);
}

#[test]
fn an_upward_import_is_found_and_a_clean_graph_passes() {
    let lib = "//! A module imports only\n//! modules above it in this list.\n\
               pub mod base;\nmod mid;\npub(crate) mod top;\n#[cfg(test)]\nmod tests {}\n";
    let order = stated_order(lib, "").expect("an order stated over two doc lines");
    assert_eq!(order, ["base", "mid", "top"]);
    assert_eq!(
        stated_order("//! One file per subcommand.\npub mod a;\n", ""),
        None
    );
    assert_eq!(
        stated_order(lib, "f").unwrap(),
        ["f::base", "f::mid", "f::top"]
    );
    // Downward imports only, from files inside the modules too: clean.
    let clean = graph_of(&[("top::x", "mid"), ("mid", "base::y"), ("top", "base")]);
    assert!(module_cycles("k", &clean).is_empty());
    assert!(upward_imports("k", &clean, "", "lib.rs", &order).is_empty());
    // base::y importing mid goes up the list.
    let up = graph_of(&[("top", "mid"), ("base::y", "mid")]);
    assert_eq!(
        upward_imports("k", &up, "", "lib.rs", &order),
        ["k: upward import: k::base imports k::mid, which lib.rs lists below it, at base/y.rs:1"]
    );
    // A module the list does not name is named.
    let stray = graph_of(&[("stray", "base")]);
    let e = upward_imports("k", &stray, "", "lib.rs", &order);
    assert_eq!(e.len(), 1);
    assert!(e[0].contains("does not list k::stray"), "{e:?}");
}

#[test]
fn edges_resolve_super_and_child_paths_to_module_files() {
    let known: BTreeMap<String, String> = ["", "a", "a::b", "a::c", "d"]
        .into_iter()
        .map(|k| (k.to_owned(), String::new()))
        .collect();
    let names = |e: BTreeMap<String, usize>| e.into_keys().collect::<BTreeSet<_>>();
    let e = edges(
        "a::b",
        "use super::c::Thing; use crate::d::f; let x = my_c::y;",
        &known,
        false,
    );
    assert_eq!(
        names(e),
        BTreeSet::from(["a::c".to_owned(), "d".to_owned()])
    );
    // A folder's mod.rs using its children's items names them; its declarations and
    // re-exports do not.
    let e = edges(
        "a",
        "mod b;\npub use c::Y;\nfn f() { b::run(); }",
        &known,
        true,
    );
    assert_eq!(e, BTreeMap::from([("a::b".to_owned(), 3)]));
    let e = edges("", "pub mod a;\nfn f() { a::go(); d::go(); }", &known, true);
    assert_eq!(names(e), BTreeSet::from(["a".to_owned(), "d".to_owned()]));
    // A group names its items, not the module the path stops at.
    let e = edges("a::b", "use super::{c, X};", &known, false);
    assert_eq!(
        names(e),
        BTreeSet::from(["a::c".to_owned(), "a".to_owned()])
    );
    let e = edges("d", "use crate::a::{b::Y, c};", &known, false);
    assert_eq!(
        names(e),
        BTreeSet::from(["a::b".to_owned(), "a::c".to_owned()])
    );
    // Each import is placed at its first line; a blanked comment line keeps the count.
    let src = shipped("//! doc\nuse crate::d::f;\n// crate::a::b\nfn g() { crate::d::h(); }\n");
    assert_eq!(
        edges("a::c", &src, &known, false),
        BTreeMap::from([("d".to_owned(), 2)])
    );
}
