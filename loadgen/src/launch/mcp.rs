//! A target file's `[mcp]` table: what an MCP server's definition says beyond its command
//! line. Which tool is its content search, how a query is passed to it and where the paths
//! are in its answer (else the search tools known by name are tried); where it keeps an index
//! on disk (then the sample measures the index: its first useful answer, its size, a second
//! start); and how long it may take to exit after its stdin closes before it gets SIGTERM.

use std::path::{Component, Path};
use std::time::Duration;

/// The `[mcp]` table as written.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct McpFile {
    search_tool: Option<String>,
    search_query: Option<String>,
    search_limit: Option<String>,
    search_scope: Option<String>,
    search_result_key: Option<String>,
    index: Option<String>,
    shutdown_grace: Option<String>,
}

/// What a search tool looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SearchScope {
    /// Note text: scored on the planted queries.
    Content,
    /// File names only: recorded as no content search, not scored.
    Names,
}

/// A preset's search tool.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SearchSpec {
    /// The tool's name as it lists it.
    pub tool: String,
    /// The argument the query's phrase goes in (`query` unless given).
    pub query_arg: String,
    /// The argument that asks for 10 results (`search_limit`); `None`: not sent.
    pub limit_arg: Option<String>,
    pub scope: SearchScope,
    /// Only strings under this JSON key of the answer are result paths (`path` for
    /// `{"results": [{"path": ...}]}`); `None`: every string and line that names a note.
    pub result_key: Option<String>,
}

/// The `[mcp]` table, checked.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct McpOptions {
    /// The search tool; `None`: the table of known names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<SearchSpec>,
    /// The index's files, relative to the data dir (the server's vault); `*` matches within
    /// the last segment (`.obsidian/mcp-search-index.db*`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<String>,
    /// stdin closed → SIGTERM; `None`: the client's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shutdown_grace: Option<Duration>,
}

fn invalid(what: &str, reason: impl Into<String>) -> super::LaunchError {
    super::LaunchError::Invalid {
        what: format!("[mcp] {what}"),
        reason: reason.into(),
    }
}

/// An argument or tool name: not empty, no control characters, at most 128 bytes.
fn name(what: &str, s: String) -> Result<String, super::LaunchError> {
    if s.is_empty() || s.len() > 128 || s.chars().any(char::is_control) {
        return Err(invalid(
            what,
            format!("{s:?} must be 1 to 128 bytes without control characters"),
        ));
    }
    Ok(s)
}

impl McpFile {
    /// The checked options; each error names its field.
    pub(super) fn check(self) -> Result<McpOptions, super::LaunchError> {
        let given_without_tool = self.search_tool.is_none()
            && [
                &self.search_query,
                &self.search_limit,
                &self.search_scope,
                &self.search_result_key,
            ]
            .iter()
            .any(|f| f.is_some());
        if given_without_tool {
            return Err(invalid(
                "search_*",
                "the search fields describe `search_tool`, which is not given",
            ));
        }
        let search = match self.search_tool {
            None => None,
            Some(tool) => Some(SearchSpec {
                tool: name("search_tool", tool)?,
                query_arg: name(
                    "search_query",
                    self.search_query.unwrap_or_else(|| "query".into()),
                )?,
                limit_arg: self
                    .search_limit
                    .map(|l| name("search_limit", l))
                    .transpose()?,
                scope: match self.search_scope.as_deref() {
                    None | Some("content") => SearchScope::Content,
                    Some("names") => SearchScope::Names,
                    Some(other) => {
                        return Err(invalid(
                            "search_scope",
                            format!("{other:?} is not \"content\" or \"names\""),
                        ));
                    }
                },
                result_key: self
                    .search_result_key
                    .map(|k| name("search_result_key", k))
                    .transpose()?,
            }),
        };
        if let Some(i) = &self.index {
            let p = Path::new(i);
            let plain = !i.is_empty()
                && p.components().all(|c| matches!(c, Component::Normal(_)))
                && p.parent()
                    .is_none_or(|d| !d.to_string_lossy().contains('*'));
            if !plain {
                return Err(invalid(
                    "index",
                    format!(
                        "{i:?} must be a relative path inside the data dir, `*` only in its last segment"
                    ),
                ));
            }
        }
        let shutdown_grace = self
            .shutdown_grace
            .as_deref()
            .map(|g| contract::parse::duration(g).map_err(|e| invalid("shutdown_grace", e)))
            .transpose()?;
        Ok(McpOptions {
            search,
            index: self.index,
            shutdown_grace,
        })
    }
}

/// Whether `name` matches `pattern`, whose `*` matches any run of characters.
pub fn wildcard(pattern: &str, name: &str) -> bool {
    let Some((first, rest)) = pattern.split_once('*') else {
        return pattern == name;
    };
    let Some(mut tail) = name.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = rest.split('*').collect();
    let (last, middle) = parts.split_last().unwrap_or((&"", &[]));
    for m in middle {
        match tail.find(m) {
            Some(at) => tail = &tail[at + m.len()..],
            None => return false,
        }
    }
    tail.len() >= last.len() && tail.ends_with(last)
}

/// The files of `index` (an `[mcp] index` pattern) under `data`, with their sizes, sorted by
/// name; none when its folder does not exist.
pub fn index_files(data: &Path, index: &str) -> Vec<(String, u64)> {
    let rel = Path::new(index);
    let (dir, pattern) = match (rel.parent(), rel.file_name()) {
        (Some(d), Some(f)) => (data.join(d), f.to_string_lossy().into_owned()),
        _ => return Vec::new(),
    };
    let mut out: Vec<(String, u64)> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let meta = e.metadata().ok()?;
            (meta.is_file() && wildcard(&pattern, &name)).then_some((name, meta.len()))
        })
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<McpOptions, String> {
        toml::from_str::<McpFile>(text)
            .map_err(|e| e.to_string())?
            .check()
            .map_err(|e| e.to_string())
    }

    #[test]
    fn the_table_is_checked_field_by_field() {
        let o = parse(
            "search_tool = \"search_notes_tool\"\nsearch_limit = \"max_results\"\nsearch_result_key = \"path\"\nindex = \".obsidian/x.db*\"\nshutdown_grace = \"2s\"",
        )
        .unwrap();
        let s = o.search.unwrap();
        assert_eq!(
            (s.tool.as_str(), s.query_arg.as_str()),
            ("search_notes_tool", "query")
        );
        assert_eq!(s.limit_arg.as_deref(), Some("max_results"));
        assert_eq!(s.scope, SearchScope::Content);
        assert_eq!(o.shutdown_grace, Some(Duration::from_secs(2)));
        assert_eq!(parse("").unwrap(), McpOptions::default());
        let err = |t: &str| parse(t).unwrap_err();
        assert!(err("search_query = \"q\"").contains("search_tool"));
        assert!(err("search_tool = \"s\"\nsearch_scope = \"all\"").contains("search_scope"));
        assert!(err("index = \"../x\"").contains("[mcp] index"));
        assert!(err("index = \"/abs\"").contains("[mcp] index"));
        assert!(err("index = \"a*/x\"").contains("[mcp] index"));
        assert!(err("shutdown_grace = \"soon\"").contains("shutdown_grace"));
        assert!(err("bogus = 1").contains("bogus"));
    }

    #[test]
    fn wildcards_match_within_a_name_and_index_files_are_summed_by_pattern() {
        assert!(wildcard("a.db*", "a.db"));
        assert!(wildcard("a.db*", "a.db-wal"));
        assert!(!wildcard("a.db*", "b.db"));
        assert!(wildcard("*.db", "x.db"));
        assert!(!wildcard("*.db", "x.dbx"));
        assert!(wildcard("a*b*c", "a1b2c"));
        assert!(!wildcard("a*b*c", "a1c"));
        assert!(wildcard("x", "x") && !wildcard("x", "xy"));
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join(".o")).unwrap();
        std::fs::write(d.path().join(".o/i.db"), [0u8; 10]).unwrap();
        std::fs::write(d.path().join(".o/i.db-wal"), [0u8; 5]).unwrap();
        std::fs::write(d.path().join(".o/other"), [0u8; 7]).unwrap();
        assert_eq!(
            index_files(d.path(), ".o/i.db*"),
            vec![("i.db".into(), 10), ("i.db-wal".into(), 5)]
        );
        assert!(index_files(d.path(), "none/i.db").is_empty());
    }
}
