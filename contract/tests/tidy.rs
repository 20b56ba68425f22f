//! Tidy checks, in the manner of rust-analyzer's `xtask/src/tidy.rs`: the invariants the
//! architecture states, enforced by reading the sources.
//!
//! - The leaf crates (`protocol`, `scenarios`, `reports`, `contract`) are pure: their `src/`
//!   names no `std::fs`, no clock (`Instant::now`, `SystemTime::now`) and no unseeded RNG.
//!   Their `#[cfg(test)]` modules (at the bottom of a file, by the house style) are exempt.
//! - Every `.rs` file of the workspace opens with a `//!` module doc.

use std::path::{Path, PathBuf};

const LEAVES: [&str; 4] = ["protocol", "scenarios", "reports", "contract"];

/// Each banned text and why. Plain substrings: an import such as `use std::fs;` or
/// `use std::{fs, ...}` names `fs` too, so the bare-module forms are listed as well.
const BANNED: [(&str, &str); 12] = [
    ("std::fs", "file system access"),
    ("use std::{fs", "file system access"),
    (" fs::", "file system access"),
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

fn violations(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (n, line) in shipped_lines(text) {
        for (needle, why) in BANNED {
            if line.contains(needle) {
                out.push(format!("line {n}: {why} ({needle})"));
            }
        }
    }
    out
}

#[test]
fn leaf_crates_touch_no_file_clock_or_unseeded_rng() {
    let mut bad = Vec::new();
    for leaf in LEAVES {
        let mut files = Vec::new();
        rust_files(&root().join(leaf).join("src"), &mut files);
        assert!(!files.is_empty(), "no sources found for leaf crate {leaf}");
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            for v in violations(&text) {
                bad.push(format!("{}: {v}", f.display()));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "leaf crates must stay pure:\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_check_catches_what_it_bans() {
    assert_eq!(violations("use std::fs;\nfn f() {}\n").len(), 1);
    assert_eq!(violations("let t = std::time::Instant::now();").len(), 1);
    assert_eq!(violations("let r = rand::rng();").len(), 1);
    assert_eq!(violations("let d = fs::read(p);").len(), 1);
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
