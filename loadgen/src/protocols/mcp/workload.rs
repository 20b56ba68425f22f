//! The fixed, seeded `tools/call` workload over a vault: read a note, read several, list a
//! folder, and search where the server has a search tool. Which tool does each is read from
//! the server's listing by the names the vault servers use; the paths and search words come
//! from the vault's sorted listing and one ChaCha8 stream, so a build and a seed give the same
//! calls in the same order.

use std::path::Path;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{Value, json};

use super::McpError;
use super::quality::Search;
use super::session::Listing;

/// One kind of call in the workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Op {
    ReadNote,
    ReadSeveral,
    ListFolder,
    Search,
    /// A call of a server without vault tools (`generic`: the reference test server's).
    Fixed,
}

/// Which listed tool does each [`Op`], where the server has one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolMap {
    pub read: Option<String>,
    pub read_several: Option<String>,
    pub list: Option<String>,
    pub search: Option<String>,
    /// The target's own search tool (`[mcp] search_tool`): its calls are made as it says.
    pub search_spec: Option<Search>,
}

/// How a tool takes its arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Args {
    /// `{"path": ABSOLUTE}` (a folder: its absolute path).
    Path,
    /// `{"paths": [ABSOLUTE, ...]}`.
    Paths,
    /// `{"path": VAULT-RELATIVE}` (obsidian-mcp's note tools, which refuse absolute paths).
    RelPath,
    /// `{"directory": VAULT-RELATIVE, "recursive": false}`, the root as no `directory`
    /// (obsidian-mcp's `list_notes_tool`).
    RelDirectory,
    /// `{"path": ROOT, "pattern": "*WORD*", "query": WORD}`: a glob or a query, whichever
    /// the tool reads.
    PathPatternQuery,
    /// `{"query": WORD, "max_results": 10}` (obsidian-mcp's `search_notes_tool`).
    QueryMaxResults,
}

/// Tool names by op, preferred first, with how each takes its arguments: the reference
/// filesystem server's (`read_text_file` since 2025.7, `read_file` before), then vault
/// servers' spellings (mcpvault's, obsidian-mcp's `*_tool`).
const NAMES: &[(Op, &[(&str, Args)])] = &[
    (
        Op::ReadNote,
        &[
            ("read_text_file", Args::Path),
            ("read_file", Args::Path),
            ("read_note", Args::Path),
            ("read_note_tool", Args::RelPath),
        ],
    ),
    (
        Op::ReadSeveral,
        &[
            ("read_multiple_files", Args::Paths),
            ("read_multiple_notes", Args::Paths),
        ],
    ),
    (
        Op::ListFolder,
        &[
            ("list_directory", Args::Path),
            ("list_notes", Args::Path),
            ("list_notes_tool", Args::RelDirectory),
        ],
    ),
    (
        Op::Search,
        &[
            ("search_notes", Args::PathPatternQuery),
            ("search_files", Args::PathPatternQuery),
            ("search", Args::PathPatternQuery),
            ("search_notes_tool", Args::QueryMaxResults),
        ],
    ),
];

/// How `tool` takes its arguments for `op` (a name the table does not hold: absolute paths).
fn args_of(op: Op, tool: &str) -> Args {
    NAMES
        .iter()
        .filter(|(o, _)| *o == op)
        .flat_map(|(_, names)| names.iter())
        .find(|(n, _)| *n == tool)
        .map_or(
            match op {
                Op::ReadSeveral => Args::Paths,
                Op::Search => Args::PathPatternQuery,
                _ => Args::Path,
            },
            |(_, a)| *a,
        )
}

impl ToolMap {
    /// The tools of `listing` that do each op.
    pub fn from_listing(listing: &Listing) -> ToolMap {
        let pick = |op: Op| -> Option<String> {
            let (_, names) = NAMES.iter().find(|(o, _)| *o == op)?;
            names
                .iter()
                .find(|(n, _)| listing.tools.iter().any(|t| t.name == *n))
                .map(|(n, _)| (*n).to_owned())
        };
        ToolMap {
            read: pick(Op::ReadNote),
            read_several: pick(Op::ReadSeveral),
            list: pick(Op::ListFolder),
            search: pick(Op::Search),
            search_spec: None,
        }
    }

    /// The map with the target's own search tool (a listed one, [`super::quality::search_tool`])
    /// doing the search op.
    pub fn with_search(mut self, search: Search) -> ToolMap {
        self.search = Some(search.tool.clone());
        self.search_spec = Some(search);
        self
    }

    /// Each op's name (`read_note`, `read_several`, `list_folder`, `search`) and its tool,
    /// for the ops the server has a tool for.
    pub fn by_op(&self) -> Vec<(&'static str, &str)> {
        [
            ("read_note", &self.read),
            ("read_several", &self.read_several),
            ("list_folder", &self.list),
            ("search", &self.search),
        ]
        .into_iter()
        .filter_map(|(op, t)| t.as_deref().map(|t| (op, t)))
        .collect()
    }

    fn tool(&self, op: Op) -> Option<&str> {
        match op {
            Op::ReadNote => self.read.as_deref(),
            Op::ReadSeveral => self.read_several.as_deref(),
            Op::ListFolder => self.list.as_deref(),
            Op::Search => self.search.as_deref(),
            Op::Fixed => None,
        }
    }
}

/// One planned call.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub op: Op,
    pub tool: String,
    pub arguments: Value,
}

/// Notes read by one "read several" call.
pub const SEVERAL: usize = 4;
/// The most entries a vault walk takes.
pub const MAX_ENTRIES: usize = 1_000_000;

/// The vault's files and folders (folders with the root as `""`), relative, sorted by bytes;
/// dot-entries skipped.
pub fn walk(root: &Path) -> Result<(Vec<String>, Vec<String>), McpError> {
    let mut files = Vec::new();
    let mut folders = vec![String::new()];
    let mut stack = vec![String::new()];
    while let Some(rel) = stack.pop() {
        let dir = root.join(&rel);
        let rd = std::fs::read_dir(&dir)
            .map_err(|e| McpError::Vault(format!("reading {}: {e}", dir.display())))?;
        for e in rd {
            let e = e.map_err(|e| McpError::Vault(format!("reading {}: {e}", dir.display())))?;
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            let path = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            let ty = e
                .file_type()
                .map_err(|e| McpError::Vault(format!("{path}: {e}")))?;
            if ty.is_dir() {
                folders.push(path.clone());
                stack.push(path);
            } else if ty.is_file() {
                files.push(path);
            }
            if files.len() + folders.len() > MAX_ENTRIES {
                return Err(McpError::Vault(format!("more than {MAX_ENTRIES} entries")));
            }
        }
    }
    files.sort();
    folders.sort();
    Ok((files, folders))
}

/// A search word from a note's name: its longest run of 3 or more ASCII letters.
fn word_of(path: &str) -> Option<String> {
    let stem = path.rsplit('/').next()?.split('.').next()?;
    stem.split(|c: char| !c.is_ascii_alphabetic())
        .filter(|w| w.len() >= 3)
        .max_by_key(|w| w.len())
        .map(str::to_ascii_lowercase)
}

/// An index below `n` (> 0) from the stream (the modulo's bias is below 2^-40 for any vault).
fn pick(rng: &mut ChaCha8Rng, n: usize) -> usize {
    (rng.next_u64() % n as u64) as usize
}

/// A search word from a note drawn from the stream.
fn search_word(rng: &mut ChaCha8Rng, notes: &[&String]) -> String {
    word_of(notes[pick(rng, notes.len())]).unwrap_or_else(|| "note".into())
}

/// `per_op` calls of every op the server has a tool for, interleaved in a seeded order.
/// Paths are absolute under `root` (what a filesystem server's allowed directory holds).
pub fn plan(
    root: &Path,
    files: &[String],
    folders: &[String],
    map: &ToolMap,
    per_op: usize,
    seed: u64,
) -> Vec<Call> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let abs = |rel: &str| {
        if rel.is_empty() {
            root.display().to_string()
        } else {
            root.join(rel).display().to_string()
        }
    };

    let notes: Vec<&String> = files.iter().filter(|f| f.ends_with(".md")).collect();
    let notes: Vec<&String> = if notes.is_empty() {
        files.iter().collect()
    } else {
        notes
    };
    let mut calls = Vec::new();
    for op in [Op::ReadNote, Op::ReadSeveral, Op::ListFolder, Op::Search] {
        let Some(tool) = map.tool(op) else { continue };
        if notes.is_empty() && op != Op::ListFolder {
            continue;
        }
        for _ in 0..per_op {
            let arguments = match (op, &map.search_spec) {
                (Op::Search, Some(spec)) => spec.arguments(&search_word(&mut rng, &notes)),
                (Op::Fixed, _) => continue,
                _ => match (op, args_of(op, tool)) {
                    (Op::ReadSeveral, _) => {
                        let paths: Vec<String> = (0..SEVERAL)
                            .map(|_| abs(notes[pick(&mut rng, notes.len())]))
                            .collect();
                        json!({"paths": paths})
                    }
                    (Op::ListFolder, Args::RelDirectory) => {
                        match folders[pick(&mut rng, folders.len())].as_str() {
                            "" => json!({"recursive": false}),
                            dir => json!({"directory": dir, "recursive": false}),
                        }
                    }
                    (Op::ListFolder, _) => {
                        json!({"path": abs(&folders[pick(&mut rng, folders.len())])})
                    }
                    (Op::Search, Args::QueryMaxResults) => {
                        json!({"query": search_word(&mut rng, &notes), "max_results": 10})
                    }
                    (Op::Search, _) => {
                        let w = search_word(&mut rng, &notes);
                        json!({"path": abs(""), "pattern": format!("*{w}*"), "query": w})
                    }
                    (_, Args::RelPath) => {
                        json!({"path": notes[pick(&mut rng, notes.len())]})
                    }
                    _ => json!({"path": abs(notes[pick(&mut rng, notes.len())])}),
                },
            };
            calls.push(Call {
                op,
                tool: tool.to_owned(),
                arguments,
            });
        }
    }
    // Fisher–Yates over the seeded stream.
    for i in (1..calls.len()).rev() {
        calls.swap(i, pick(&mut rng, i + 1));
    }
    calls
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocols::mcp::session::Tool;

    fn listing(names: &[&str]) -> Listing {
        Listing {
            tools: names.iter().map(|n| Tool { name: (*n).into() }).collect(),
            pages: 1,
            bytes: 0,
        }
    }

    #[test]
    fn tools_are_picked_by_name_and_the_plan_is_seeded() {
        let map = ToolMap::from_listing(&listing(&[
            "read_file",
            "read_text_file",
            "list_directory",
            "write_file",
        ]));
        assert_eq!(map.read.as_deref(), Some("read_text_file"));
        assert_eq!(map.read_several, None);
        assert_eq!(map.search, None);
        let files: Vec<String> = ["a/one-apple.md", "b/two-pear.md", "c.png"]
            .map(String::from)
            .to_vec();
        let folders: Vec<String> = ["", "a", "b"].map(String::from).to_vec();
        let root = Path::new("/v");
        let p = plan(root, &files, &folders, &map, 5, 7);
        assert_eq!(p.len(), 10);
        assert_eq!(p, plan(root, &files, &folders, &map, 5, 7));
        assert_ne!(p, plan(root, &files, &folders, &map, 5, 8));
        for c in &p {
            let path = c.arguments["path"].as_str().unwrap();
            assert!(path.starts_with("/v"), "{path}");
            assert!(!path.ends_with(".png"), "a note is read: {path}");
        }
        assert_eq!(word_of("a/one-apple.md").as_deref(), Some("apple"));
    }

    #[test]
    fn obsidian_mcps_tools_get_vault_relative_paths_and_a_directory() {
        let map = ToolMap::from_listing(&listing(&[
            "read_note_tool",
            "list_notes_tool",
            "search_notes_tool",
        ]));
        assert_eq!(map.read.as_deref(), Some("read_note_tool"));
        assert_eq!(map.list.as_deref(), Some("list_notes_tool"));
        assert_eq!(map.search.as_deref(), Some("search_notes_tool"));
        let files: Vec<String> = ["a/one-apple.md", "b/two-pear.md"]
            .map(String::from)
            .to_vec();
        let folders: Vec<String> = ["", "a", "b"].map(String::from).to_vec();
        let p = plan(Path::new("/v"), &files, &folders, &map, 10, 3);
        assert_eq!(p.len(), 30);
        let mut root_listed = false;
        for c in &p {
            match c.op {
                Op::ReadNote => {
                    let path = c.arguments["path"].as_str().unwrap();
                    assert!(files.contains(&path.to_owned()), "relative: {path}");
                }
                Op::ListFolder => {
                    assert!(c.arguments.get("path").is_none());
                    assert_eq!(c.arguments["recursive"], json!(false));
                    match c.arguments.get("directory") {
                        Some(d) => assert!(["a", "b"].contains(&d.as_str().unwrap())),
                        None => root_listed = true,
                    }
                }
                Op::Search => {
                    assert_eq!(c.arguments["max_results"], json!(10));
                    assert!(c.arguments.get("path").is_none());
                }
                _ => panic!("{c:?}"),
            }
        }
        assert!(root_listed, "the root is listed as no directory");
        // A target's own search tool is called as its `[mcp]` table says.
        let spec = Search {
            tool: "find".into(),
            scope: super::super::quality::Scope::Content,
            query_arg: "q".into(),
            limit_arg: None,
            result_key: None,
        };
        let map = map.with_search(spec);
        let p = plan(Path::new("/v"), &files, &folders, &map, 2, 3);
        let search: Vec<&Call> = p.iter().filter(|c| c.op == Op::Search).collect();
        assert_eq!(search.len(), 2);
        for c in search {
            assert_eq!(c.tool, "find");
            assert_eq!(c.arguments.as_object().unwrap().len(), 1);
            assert!(c.arguments["q"].is_string());
        }
    }
}
