//! Tidy checks, in the manner of rust-analyzer's `xtask/src/tidy.rs`: the invariants the
//! architecture states, enforced by reading the sources.
//!
//! - The pure crates (`protocol`, `scenarios`, `reports`, `contract`; ARCHITECTURE.md names
//!   the same four) touch no file, read no clock and draw from no unseeded RNG: their `src/`
//!   names no `std::fs` (imported alone, in a group `std::{io, fs}`, or used as a bare `fs::`
//!   path), no `Instant::now` or `SystemTime::now`, no unseeded RNG. Their `#[cfg(test)]`
//!   modules (at the bottom of a file, by the house style) are exempt.
//! - Every `.rs` file of the workspace opens with a `//!` module doc.
//! - README.md and ARCHITECTURE.md stay within their sizes (16 KB and 25 KB).

use std::path::{Path, PathBuf};

/// The crates that must stay pure. Not every crate without dependants is: `calibration`,
/// `loadgen` and `refserver` measure, load and serve, which needs files and clocks.
const PURE: [&str; 4] = ["protocol", "scenarios", "reports", "contract"];

/// Each banned text and why, as plain substrings of a line. The module `fs` in a grouped
/// import and as a bare path are found by [`fs_uses`].
const BANNED: [(&str, &str); 10] = [
    ("std::fs", "file system access"),
    ("Instant::now", "a clock read"),
    ("SystemTime::now", "a clock read"),
    ("thread_rng", "an unseeded RNG"),
    ("rand::rng()", "an unseeded RNG"),
    ("rand::random", "an unseeded RNG"),
    ("from_entropy", "an unseeded RNG"),
    ("from_os_rng", "an unseeded RNG"),
    ("OsRng", "an unseeded RNG"),
    ("getrandom", "an unseeded RNG"),
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("contract/ sits in the workspace root")
        .to_owned()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let name = e.file_name();
        let name = name.to_string_lossy();
        if p.is_dir() {
            if name != "target" && !name.starts_with('.') {
                rust_files(&p, out);
            }
        } else if name.ends_with(".rs") {
            out.push(p);
        }
    }
}

/// The code a leaf ships: everything before its first `#[cfg(test)]`, comments dropped.
fn shipped_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .take_while(|(_, l)| l.trim() != "#[cfg(test)]")
        .filter(|(_, l)| !l.trim_start().starts_with("//"))
        .map(|(i, l)| (i + 1, l))
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Byte offsets in `code` where the module `fs` is named without `std::` in front of it: as
/// a path starting `fs::` (after `use std::fs;`), and as an item of a grouped import
/// `std::{..}`, at any depth and across lines (`use std::{io, fs};`, `std::{fs::File, io}`).
fn fs_uses(code: &str) -> Vec<usize> {
    let mut out = Vec::new();
    // A bare path: `fs::` not preceded by an identifier character or `::`.
    for (i, _) in code.match_indices("fs::") {
        let before = code[..i].chars().next_back();
        if !before.is_some_and(|c| is_ident(c) || c == ':') {
            out.push(i);
        }
    }
    // Grouped imports: every path that starts after `{` or `,` inside `std::{ .. }`.
    for (i, m) in code.match_indices("std::{") {
        let body = i + m.len();
        let (mut depth, mut at_start, mut ident_at) = (1, true, None::<usize>);
        for (j, c) in code[body..].char_indices() {
            let at = body + j;
            if let Some(from) = ident_at
                && !is_ident(c)
            {
                if &code[from..at] == "fs" {
                    out.push(from);
                }
                ident_at = None;
            }
            match c {
                '{' => {
                    depth += 1;
                    at_start = true;
                }
                ',' => at_start = true,
                '}' => {
                    depth -= 1;
                    at_start = false;
                    if depth == 0 {
                        break;
                    }
                }
                c if c.is_whitespace() => {}
                c if is_ident(c) => {
                    if at_start {
                        ident_at = Some(at);
                    }
                    at_start = false;
                }
                _ => at_start = false,
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

fn violations(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let shipped: Vec<(usize, &str)> = shipped_lines(text).collect();
    for (n, line) in &shipped {
        for (needle, why) in BANNED {
            if line.contains(needle) {
                out.push(format!("line {n}: {why} ({needle})"));
            }
        }
    }
    // The shipped code as one text (a grouped import may span lines), and where each
    // shipped line starts in it.
    let mut code = String::new();
    let mut starts = Vec::new();
    for (_, line) in &shipped {
        starts.push(code.len());
        code.push_str(line);
        code.push('\n');
    }
    for at in fs_uses(&code) {
        let idx = starts.partition_point(|s| *s <= at) - 1;
        out.push(format!(
            "line {}: file system access (the module fs)",
            shipped[idx].0
        ));
    }
    out
}

#[test]
fn pure_crates_touch_no_file_clock_or_unseeded_rng() {
    let mut bad = Vec::new();
    for leaf in PURE {
        let mut files = Vec::new();
        rust_files(&root().join(leaf).join("src"), &mut files);
        assert!(!files.is_empty(), "no sources found for pure crate {leaf}");
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            for v in violations(&text) {
                bad.push(format!("{}: {v}", f.display()));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "the pure crates must stay pure:\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_check_catches_what_it_bans() {
    assert_eq!(violations("use std::fs;\nfn f() {}\n").len(), 1);
    assert_eq!(violations("let t = std::time::Instant::now();").len(), 1);
    assert_eq!(violations("let r = rand::rng();").len(), 1);
    assert_eq!(violations("let d = fs::read(p);").len(), 1);
    // A bare `fs::` after `use std::fs;`, wherever it stands.
    assert_eq!(
        violations("use std::fs;\nfn f(p: &str) { g(fs::read(p)); h(&fs::read(p)); }\n").len(),
        3
    );
    // Grouped imports, first or not, on one line or several, nested or renamed.
    for grouped in [
        "use std::{fs, io};",
        "use std::{io, fs};",
        "use std::{io::Read, fs::File};",
        "use std::{\n    io,\n    fs::{self, File},\n};",
        "use std::{io::{self, Read}, fs as f};",
    ] {
        assert_eq!(violations(grouped).len(), 1, "{grouped}");
    }
    assert_eq!(
        violations("use std::{\n    io,\n    fs,\n};")[0],
        "line 3: file system access (the module fs)"
    );
    for clean in [
        "use std::{io::{self, Read}, collections::BTreeMap};",
        "let x = procfs::read();",
        "let x = self.fs_root;",
        "use std::{io, fsm};",
    ] {
        assert!(violations(clean).is_empty(), "{clean}");
    }
    assert!(violations("// std::fs in a comment\n").is_empty());
    assert!(violations("fn f() {}\n#[cfg(test)]\nmod tests { use std::fs; }\n").is_empty());
}

#[test]
fn every_source_file_opens_with_a_module_doc() {
    let mut files = Vec::new();
    rust_files(&root(), &mut files);
    assert!(files.len() > 50, "found only {} .rs files", files.len());
    let missing: Vec<String> = files
        .iter()
        .filter(|f| !std::fs::read_to_string(f).unwrap().starts_with("//!"))
        .map(|f| f.display().to_string())
        .collect();
    assert!(
        missing.is_empty(),
        "files without a `//!` module doc:\n{}",
        missing.join("\n")
    );
}

/// ARCHITECTURE.md's invariant names the same pure crates as [`PURE`].
#[test]
fn the_architecture_names_the_pure_crates() {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let line = text
        .lines()
        .find(|l| l.contains("`contract/tests/tidy.rs` enforces"))
        .expect("ARCHITECTURE.md says what the tidy test enforces");
    for c in PURE {
        assert!(line.contains(&format!("`{c}`")), "{c} missing from: {line}");
    }
}

/// The front door and the map stay short: README.md at most 16 KB (hyperfine's and oha's are
/// about 11 KB), ARCHITECTURE.md at most 25 KB. Reference and measured figures go to the book
/// under `docs/`, decisions to `docs/src/decisions/`.
#[test]
fn the_readme_and_the_architecture_stay_short() {
    for (file, max) in [("README.md", 16 * 1024), ("ARCHITECTURE.md", 25 * 1024)] {
        let len = std::fs::metadata(root().join(file)).unwrap().len();
        assert!(
            len <= max,
            "{file} is {len} bytes, over its {max}: move detail into the book (docs/src/)"
        );
    }
}
