//! Retrieval quality of a server's search tool on a vault's planted queries
//! (`scenarios::plant`): each query's phrase goes through `tools/call`, the paths in the
//! answer are mapped back to vault notes, and the ranking is scored against the notes that
//! hold the phrase: recall@10, nDCG@10 (binary relevance) and MRR (reciprocal rank of the
//! first relevant note within the first 10). The scores are deterministic for a server build
//! and a vault seed, so they are keys of the exact class.
//!
//! Which tool searches, how it is called and where its answer holds the paths is the
//! target's `[mcp]` table (`search_tool`, `search_query`, `search_limit`, `search_scope`,
//! `search_result_key`), else a table by tool name ([`SEARCH_TOOLS`]); a tool that matches
//! names only (the reference filesystem server's `search_files`, a glob) is recorded as no
//! content search, not scored as 0. [`first_results`] times an indexing server's first
//! useful answer.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::McpError;
use super::session::{Listing, Session};
use crate::launch::mcp::{SearchScope, SearchSpec};

/// The rank cut-off of every score.
pub const K: usize = 10;

/// What a listed search tool looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Note text: scored.
    Content,
    /// File names only: not scored.
    NameOnly,
}

/// A search tool a vault server lists, by name: how a query is passed to it.
pub struct SearchTool {
    pub name: &'static str,
    pub scope: Scope,
    /// The argument the phrase goes in.
    pub query_arg: &'static str,
    /// The argument that asks for [`K`] results, if any.
    pub limit_arg: Option<&'static str>,
}

/// The search tools known, preferred first, where a target's `[mcp] search_tool` names none.
/// `search_notes` is mcpvault's (BM25 over words, `limit` at most 20, default 5);
/// `search_notes_tool` is obsidian-mcp's (names and content, `max_results`); `search_files`
/// is the reference filesystem server's glob over names; `search_vault` and `search` are the
/// names other vault servers use for a text search (called with `query` and `limit`).
pub const SEARCH_TOOLS: &[SearchTool] = &[
    SearchTool {
        name: "search_notes",
        scope: Scope::Content,
        query_arg: "query",
        limit_arg: Some("limit"),
    },
    SearchTool {
        name: "search_notes_tool",
        scope: Scope::Content,
        query_arg: "query",
        limit_arg: Some("max_results"),
    },
    SearchTool {
        name: "search_vault",
        scope: Scope::Content,
        query_arg: "query",
        limit_arg: Some("limit"),
    },
    SearchTool {
        name: "search",
        scope: Scope::Content,
        query_arg: "query",
        limit_arg: Some("limit"),
    },
    SearchTool {
        name: "search_files",
        scope: Scope::NameOnly,
        query_arg: "pattern",
        limit_arg: None,
    },
];

/// The search tool a run uses: from the target's `[mcp]` table, else from [`SEARCH_TOOLS`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Search {
    pub tool: String,
    pub scope: Scope,
    pub query_arg: String,
    pub limit_arg: Option<String>,
    /// Only strings under this JSON key of an answer are result paths.
    pub result_key: Option<String>,
}

impl Search {
    /// The arguments of one query.
    pub fn arguments(&self, phrase: &str) -> Value {
        let mut args = serde_json::Map::new();
        args.insert(self.query_arg.clone(), json!(phrase));
        if let Some(l) = &self.limit_arg {
            args.insert(l.clone(), json!(K));
        }
        Value::Object(args)
    }

    /// The vault paths of a `tools/call` result ([`paths_in`], or only the strings under
    /// [`Search::result_key`]).
    pub fn paths(&self, result: &Value, root: &Path, notes: &BTreeSet<String>) -> Vec<String> {
        match &self.result_key {
            None => paths_in(result, root, notes),
            Some(key) => paths_under(result, key, root, notes),
        }
    }
}

impl From<&SearchSpec> for Search {
    fn from(s: &SearchSpec) -> Search {
        Search {
            tool: s.tool.clone(),
            scope: match s.scope {
                SearchScope::Content => Scope::Content,
                SearchScope::Names => Scope::NameOnly,
            },
            query_arg: s.query_arg.clone(),
            limit_arg: s.limit_arg.clone(),
            result_key: s.result_key.clone(),
        }
    }
}

/// The search tool of `listing`: the target's (`preset`, which it must list), else the
/// first of [`SEARCH_TOOLS`] it lists.
pub fn search_tool(
    listing: &Listing,
    preset: Option<&SearchSpec>,
) -> Result<Option<Search>, McpError> {
    let listed = |name: &str| listing.tools.iter().any(|t| t.name == name);
    if let Some(p) = preset {
        if !listed(&p.tool) {
            return Err(McpError::Protocol {
                method: "tools/list".into(),
                what: format!(
                    "the target's [mcp] search_tool {:?} is not among the {} tools it lists",
                    p.tool,
                    listing.tools.len()
                ),
            });
        }
        return Ok(Some(Search::from(p)));
    }
    Ok(SEARCH_TOOLS
        .iter()
        .find(|s| listed(s.name))
        .map(|s| Search {
            tool: s.name.into(),
            scope: s.scope,
            query_arg: s.query_arg.into(),
            limit_arg: s.limit_arg.map(str::to_owned),
            result_key: None,
        }))
}

/// One query's scores.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scores {
    pub recall: f64,
    pub ndcg: f64,
    /// The reciprocal rank of the first relevant path within the first [`K`] (0 if none).
    pub rr: f64,
}

/// 1 / log2(i + 1) for ranks 1..=10 (1 / log2(10) is log10(2)), written out so the scores
/// are the same bits on every platform (a libm's `log2` need not round alike).
const DISCOUNT: [f64; K] = [
    1.0,
    0.6309297535714575,
    0.5,
    0.43067655807339306,
    0.38685280723454163,
    0.3562071871080222,
    0.3333333333333333,
    0.31546487678572877,
    std::f64::consts::LOG10_2,
    0.2890648263178879,
];

/// The scores of `ranked` (best first; a repeated path counts at its first rank) against
/// `relevant` (not empty), binary relevance.
pub fn score(ranked: &[String], relevant: &BTreeSet<String>) -> Scores {
    let mut seen = BTreeSet::new();
    let top: Vec<&String> = ranked
        .iter()
        .filter(|p| seen.insert(p.as_str()))
        .take(K)
        .collect();
    let hits: Vec<bool> = top.iter().map(|p| relevant.contains(*p)).collect();
    let found = hits.iter().filter(|h| **h).count();
    let dcg: f64 = hits
        .iter()
        .zip(DISCOUNT)
        .filter(|(h, _)| **h)
        .map(|(_, d)| d)
        .sum();
    let ideal: f64 = DISCOUNT.iter().take(relevant.len().min(K)).sum();
    let rr = hits
        .iter()
        .position(|h| *h)
        .map_or(0.0, |i| 1.0 / (i + 1) as f64);
    let n = relevant.len().max(1) as f64;
    Scores {
        recall: found as f64 / n,
        ndcg: if ideal > 0.0 { dcg / ideal } else { 0.0 },
        rr,
    }
}

/// The vault paths in a `tools/call` result, in the order they appear: every text content
/// item, read as JSON where it parses (each string that is a note's path, relative or
/// absolute under `root`) and as lines otherwise (each note path a line holds, by position).
/// `notes` are the vault's relative paths.
pub fn paths_in(result: &Value, root: &Path, notes: &BTreeSet<String>) -> Vec<String> {
    let root = format!("{}/", root.display());
    let as_note = |s: &str| -> Option<String> {
        let s = s.trim();
        let s = s.strip_prefix(root.as_str()).unwrap_or(s);
        let s = s.strip_prefix('/').unwrap_or(s);
        notes.contains(s).then(|| s.to_owned())
    };
    let mut out = Vec::new();
    for item in result
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let Some(text) = item.get("text").and_then(Value::as_str) else {
            continue;
        };
        match serde_json::from_str::<Value>(text) {
            Ok(v) => {
                let mut strings = Vec::new();
                strings_of(&v, &mut strings, 0);
                out.extend(strings.iter().filter_map(|s| as_note(s)));
            }
            Err(_) => {
                for line in text.lines() {
                    if let Some(p) = as_note(line) {
                        out.push(p);
                        continue;
                    }
                    if !line.contains(".md") {
                        continue;
                    }
                    // The longest note path at each position of the line, left to right.
                    let mut found: Vec<(usize, &String)> = notes
                        .iter()
                        .filter_map(|n| line.find(n.as_str()).map(|at| (at, n)))
                        .collect();
                    found.sort_by_key(|(at, n)| (*at, std::cmp::Reverse(n.len())));
                    found.dedup_by_key(|(at, _)| *at);
                    out.extend(found.into_iter().map(|(_, n)| n.clone()));
                }
            }
        }
    }
    // Structured content (a JSON result beside the text), when there is no text to read.
    if out.is_empty()
        && let Some(v) = result.get("structuredContent")
    {
        let mut strings = Vec::new();
        strings_of(v, &mut strings, 0);
        out.extend(strings.iter().filter_map(|s| as_note(s)));
    }
    out
}

/// The vault paths in a `tools/call` result's text items read as JSON (and its structured
/// content), taking only the strings that are the value of an object's `key`, in document
/// order.
pub fn paths_under(
    result: &Value,
    key: &str,
    root: &Path,
    notes: &BTreeSet<String>,
) -> Vec<String> {
    let root = format!("{}/", root.display());
    let mut docs: Vec<Value> = result
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|item| item.get("text").and_then(Value::as_str))
        .filter_map(|t| serde_json::from_str::<Value>(t).ok())
        .collect();
    if docs.is_empty()
        && let Some(v) = result.get("structuredContent")
    {
        docs.push(v.clone());
    }
    let mut strings = Vec::new();
    for d in &docs {
        strings_under(d, key, &mut strings, 0);
    }
    strings
        .into_iter()
        .filter_map(|s| {
            let s = s.trim();
            let s = s.strip_prefix(root.as_str()).unwrap_or(s);
            let s = s.strip_prefix('/').unwrap_or(s);
            notes.contains(s).then(|| s.to_owned())
        })
        .collect()
}

/// Every string that is the value of an object's `key` in `v`, in document order.
fn strings_under<'a>(v: &'a Value, key: &str, out: &mut Vec<&'a str>, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    match v {
        Value::Array(a) => a.iter().for_each(|x| strings_under(x, key, out, depth + 1)),
        Value::Object(o) => {
            for (k, x) in o {
                match x {
                    Value::String(s) if k == key => out.push(s),
                    _ => strings_under(x, key, out, depth + 1),
                }
            }
        }
        _ => {}
    }
}

/// The most nesting [`strings_of`] follows (the reader already bounds an answer's depth).
const MAX_DEPTH: usize = 64;

/// Every string of `v` in document order (object values in the order serde_json keeps).
fn strings_of<'a>(v: &'a Value, out: &mut Vec<&'a str>, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    match v {
        Value::String(s) => out.push(s),
        Value::Array(a) => a.iter().for_each(|x| strings_of(x, out, depth + 1)),
        Value::Object(o) => o.values().for_each(|x| strings_of(x, out, depth + 1)),
        _ => {}
    }
}

/// What the scoring found.
#[derive(Debug, Clone, PartialEq)]
pub enum Quality {
    /// The server lists none of [`SEARCH_TOOLS`].
    NoSearch,
    /// Its search matches names only (not scored).
    NameOnly { tool: String },
    /// Its search was scored: the means over the queries.
    Scored {
        tool: String,
        queries: usize,
        recall: f64,
        ndcg: f64,
        mrr: f64,
        /// Queries answered with `isError` or a JSON-RPC error (scored as finding nothing).
        failed: usize,
    },
}

/// One planted query: its phrase and its relevant notes (vault-relative).
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    pub phrase: String,
    pub relevant: BTreeSet<String>,
}

/// Runs every query (one at a time, each within `per_call`) through `search` (the run's
/// search tool, [`search_tool`]; `None`: the server lists none) and scores the answers.
/// `notes` are the vault's relative note paths, `root` the absolute directory the server
/// serves.
pub async fn measure(
    session: &Session,
    search: Option<&Search>,
    queries: &[Query],
    root: &Path,
    notes: &BTreeSet<String>,
    per_call: Duration,
) -> Result<Quality, McpError> {
    let Some(tool) = search else {
        return Ok(Quality::NoSearch);
    };
    if tool.scope == Scope::NameOnly {
        return Ok(Quality::NameOnly {
            tool: tool.tool.clone(),
        });
    }
    let (mut recall, mut ndcg, mut mrr, mut failed) = (0.0, 0.0, 0.0, 0);
    let mut scored = 0;
    for q in queries.iter().filter(|q| !q.relevant.is_empty()) {
        let answer = session
            .call_tool_result(
                &tool.tool,
                tool.arguments(&q.phrase),
                Instant::now() + per_call,
            )
            .await?;
        let ranked = match answer {
            Ok(r) if r.get("isError").and_then(Value::as_bool) != Some(true) => {
                tool.paths(&r, root, notes)
            }
            _ => {
                failed += 1;
                Vec::new()
            }
        };
        let s = score(&ranked, &q.relevant);
        recall += s.recall;
        ndcg += s.ndcg;
        mrr += s.rr;
        scored += 1;
    }
    let n = scored.max(1) as f64;
    Ok(Quality::Scored {
        tool: tool.tool.clone(),
        queries: scored,
        recall: recall / n,
        ndcg: ndcg / n,
        mrr: mrr / n,
        failed,
    })
}

/// How an indexing server's first useful answer went: spawn → the first answer of `search`
/// that names a note, and how many calls it took.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FirstResults {
    pub after: Duration,
    pub calls: u64,
}

/// When and how often [`first_results`] asks.
#[derive(Debug, Clone, Copy)]
pub struct Poll {
    /// When the server was spawned.
    pub spawned: Instant,
    /// Between an empty answer and the next call.
    pub interval: Duration,
    /// One call's answer.
    pub per_call: Duration,
    /// The last moment a call may be made.
    pub deadline: Instant,
}

/// Calls `search` with `phrase` (one at a time) until an answer names a note of `notes`
/// (relative to `root`). An answer that names none (an index still being built) is asked
/// again after `poll.interval`; past `poll.deadline` is an error naming how many calls came
/// back empty.
pub async fn first_results(
    session: &Session,
    search: &Search,
    phrase: &str,
    root: &Path,
    notes: &BTreeSet<String>,
    poll: Poll,
) -> Result<FirstResults, McpError> {
    let Poll {
        spawned,
        interval,
        per_call,
        deadline,
    } = poll;
    let mut calls = 0;
    loop {
        let by = deadline.min(Instant::now() + per_call);
        let answer = session
            .call_tool_result(&search.tool, search.arguments(phrase), by)
            .await?;
        calls += 1;
        if let Ok(r) = &answer
            && r.get("isError").and_then(Value::as_bool) != Some(true)
            && !search.paths(r, root, notes).is_empty()
        {
            return Ok(FirstResults {
                after: spawned.elapsed(),
                calls,
            });
        }
        if Instant::now() + interval >= deadline {
            return Err(McpError::Timeout {
                method: format!("{} (the index's first answer naming a note)", search.tool),
                waited: spawned.elapsed(),
                note: format!(" ({calls} calls answered without a note)"),
            });
        }
        tokio::time::sleep(interval).await;
    }
}

/// The phase of the quality keys.
pub const PHASE: &str = "mcp_quality";

/// The keys of `q` (phase [`PHASE`], all of the exact class): `content_search` (1 scored, 0
/// none or names only, so a recording says which), and when scored `queries`,
/// `recall_at_10`, `ndcg_at_10`, `mrr_at_10`, `failed_queries`.
pub fn keys(q: &Quality) -> Vec<(String, f64, &'static str)> {
    let key = |stat: &str| contract::key::PhaseKey::new(PHASE, stat).to_string();
    match q {
        Quality::NoSearch | Quality::NameOnly { .. } => {
            vec![(key("content_search"), 0.0, "bool")]
        }
        Quality::Scored {
            queries,
            recall,
            ndcg,
            mrr,
            failed,
            ..
        } => vec![
            (key("content_search"), 1.0, "bool"),
            (key("queries"), *queries as f64, "queries"),
            (key("recall_at_10"), *recall, "ratio"),
            (key("ndcg_at_10"), *ndcg, "ratio"),
            (key("mrr_at_10"), *mrr, "ratio"),
            (key("failed_queries"), *failed as f64, "queries"),
        ],
    }
}

/// One line for a log or report: which tool was scored, or why none was.
pub fn line(q: &Quality) -> String {
    match q {
        Quality::NoSearch => "no search tool: retrieval not scored".into(),
        Quality::NameOnly { tool } => {
            format!("{tool} matches file names only: no content search, retrieval not scored")
        }
        Quality::Scored {
            tool,
            queries,
            recall,
            ndcg,
            mrr,
            failed,
        } => format!(
            "{tool} on {queries} planted queries: recall@10 {recall:.4}, nDCG@10 {ndcg:.4}, MRR@10 {mrr:.4} ({failed} failed)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocols::mcp::session::Tool;

    fn set(v: &[&str]) -> BTreeSet<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }
    fn list(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }
    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn scores_match_hand_computed_values() {
        // Relevant {a, b, c}; ranking x a y b: hits at ranks 2 and 4.
        let s = score(&list(&["x", "a", "y", "b"]), &set(&["a", "b", "c"]));
        assert!(close(s.recall, 2.0 / 3.0));
        // DCG = 1/log2(3) + 1/log2(5); IDCG = 1 + 1/log2(3) + 1/log2(4).
        let dcg = 0.6309297535714575 + 0.43067655807339306;
        let idcg = 1.0 + 0.6309297535714575 + 0.5;
        assert!(close(s.ndcg, dcg / idcg), "{}", s.ndcg);
        assert!(close(s.rr, 0.5));
        // Perfect: every relevant first.
        let s = score(&list(&["b", "a", "z"]), &set(&["a", "b"]));
        assert_eq!((s.recall, s.ndcg, s.rr), (1.0, 1.0, 1.0));
        // Nothing found.
        let s = score(&list(&["z"]), &set(&["a"]));
        assert_eq!((s.recall, s.ndcg, s.rr), (0.0, 0.0, 0.0));
        // A relevant path at rank 11 is past the cut-off; a repeat counts once.
        let mut r: Vec<String> = (0..10).map(|i| format!("n{i}")).collect();
        r.push("a".into());
        assert_eq!(score(&r, &set(&["a"])).recall, 0.0);
        let s = score(&list(&["a", "a", "b"]), &set(&["a", "b"]));
        assert_eq!((s.recall, s.ndcg), (1.0, 1.0));
        // More than K relevant: the ideal has K hits, so 10 hits in 10 is 1.
        let many: Vec<String> = (0..12).map(|i| format!("r{i}")).collect();
        let rel: BTreeSet<String> = many.iter().cloned().collect();
        let s = score(&many, &rel);
        assert!(close(s.ndcg, 1.0));
        assert!(close(s.recall, 10.0 / 12.0));
    }

    #[test]
    fn discounts_are_one_over_log2_of_rank_plus_one() {
        for (i, d) in DISCOUNT.iter().enumerate() {
            assert!(
                (d - 1.0 / ((i + 2) as f64).log2()).abs() < 1e-15,
                "rank {}",
                i + 1
            );
        }
    }

    #[test]
    fn paths_come_from_json_strings_and_text_lines() {
        let notes = set(&["A/one.md", "A/two.md", "B/Note name.md"]);
        let root = Path::new("/v");
        // mcpvault: a JSON array in a text item; the excerpt's link is not a result.
        let r = json!({"content": [{"type": "text", "text":
            r#"[{"p":"A/two.md","ex":"see [x](A/one.md)","uri":"obsidian:///v/A/two"},{"p":"A/one.md"}]"#}]});
        assert_eq!(paths_in(&r, root, &notes), list(&["A/two.md", "A/one.md"]));
        // Plain text, absolute paths and a line with a path inside.
        let r = json!({"content": [{"type": "text", "text":
            "/v/B/Note name.md\nmatch in A/one.md (line 3)\nnothing"}]});
        assert_eq!(
            paths_in(&r, root, &notes),
            list(&["B/Note name.md", "A/one.md"])
        );
        assert!(paths_in(&json!({"content": []}), root, &notes).is_empty());
        assert!(paths_in(&json!("odd"), root, &notes).is_empty());
    }

    #[test]
    fn search_tools_are_picked_and_name_only_is_not_scored() {
        let l = |names: &[&str]| Listing {
            tools: names.iter().map(|n| Tool { name: (*n).into() }).collect(),
            pages: 1,
            bytes: 0,
        };
        let pick = |names: &[&str]| search_tool(&l(names), None).unwrap();
        assert_eq!(
            pick(&["search_files", "search_notes"]).map(|t| t.tool),
            Some("search_notes".to_owned())
        );
        let fs = pick(&["read_file", "search_files"]).unwrap();
        assert_eq!(fs.scope, Scope::NameOnly);
        assert!(pick(&["read_file"]).is_none());
        let k = keys(&Quality::NameOnly {
            tool: "search_files".into(),
        });
        assert_eq!(k, vec![("mcp_quality.content_search".into(), 0.0, "bool")]);
        let k = keys(&Quality::Scored {
            tool: "search_notes".into(),
            queries: 8,
            recall: 1.0,
            ndcg: 0.5,
            mrr: 0.25,
            failed: 0,
        });
        assert_eq!(k.len(), 6);
        for (key, _, _) in &k {
            assert_eq!(
                key.parse::<contract::key::MetricKey>().unwrap().to_string(),
                *key
            );
        }
    }

    #[test]
    fn a_presets_search_tool_wins_and_its_result_key_picks_the_paths() {
        let l = Listing {
            tools: ["search_notes", "search_notes_tool", "read_note_tool"]
                .iter()
                .map(|n| Tool { name: (*n).into() })
                .collect(),
            pages: 1,
            bytes: 0,
        };
        let spec = SearchSpec {
            tool: "search_notes_tool".into(),
            query_arg: "query".into(),
            limit_arg: Some("max_results".into()),
            scope: SearchScope::Content,
            result_key: Some("path".into()),
        };
        let s = search_tool(&l, Some(&spec)).unwrap().unwrap();
        assert_eq!(s.tool, "search_notes_tool");
        assert_eq!(
            s.arguments("rare phrase"),
            json!({"query": "rare phrase", "max_results": K})
        );
        // Without the preset, the table's first listed name is taken.
        assert_eq!(search_tool(&l, None).unwrap().unwrap().tool, "search_notes");
        // A preset naming a tool the server does not list is an error naming it.
        let missing = SearchSpec {
            tool: "find".into(),
            ..spec.clone()
        };
        let e = search_tool(&l, Some(&missing)).unwrap_err().to_string();
        assert!(e.contains("\"find\"") && e.contains("3 tools"), "{e}");
        // obsidian-mcp's answer: only `path` values count, not a note named in the query
        // echo or in a context excerpt.
        let notes = set(&["A/one.md", "A/two.md"]);
        let text = r#"{"results":[{"path":"A/two.md","context":"A/one.md"},{"path":"A/one.md"}],"query":{"text":"A/one.md"}}"#;
        let r = json!({"content": [{"type": "text", "text": text}]});
        assert_eq!(
            s.paths(&r, Path::new("/v"), &notes),
            list(&["A/two.md", "A/one.md"])
        );
        // Every string would count the echo and the excerpt as results too.
        assert_eq!(paths_in(&r, Path::new("/v"), &notes).len(), 4);
        // Names-only scope from a preset is not scored.
        let names = SearchSpec {
            scope: SearchScope::Names,
            ..spec
        };
        assert_eq!(
            search_tool(&l, Some(&names)).unwrap().unwrap().scope,
            Scope::NameOnly
        );
    }
}
