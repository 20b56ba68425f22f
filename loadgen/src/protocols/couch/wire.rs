//! CouchDB's messages as the replicator reads them, parsed from a target's answer: a
//! `_changes` page, a `_revs_diff` answer, a `_bulk_get` answer, an `_all_docs` answer, a
//! `_bulk_docs` answer, the server's welcome, and LiveSync's documents inside them.
//!
//! Every answer is counted against the JSON value budget (`crate::json_budget`) before it
//! is parsed, and every parse error is one line naming the message. Nothing here panics on a
//! server's bytes: numbers stay what the server sent (`seq` is a number on PouchDB and a
//! string on CouchDB 2+, so it is kept as a JSON value and only handed back).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::json_budget::{self, MAX_JSON_VALUES};

/// A document as LiveSync writes it: a chunk (`type: "leaf"`, `data`) or a file's metadata
/// (`type: "plain"` or `"newnote"`, `path`, `children`, times and size). Fields this client
/// does not read are kept only as far as the replicator needs them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Doc {
    #[serde(rename = "_id")]
    pub id: String,
    #[serde(rename = "_rev", default, skip_serializing_if = "Option::is_none")]
    pub rev: Option<String>,
    #[serde(
        rename = "_revisions",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub revisions: Option<Revisions>,
    #[serde(rename = "_deleted", default, skip_serializing_if = "is_false")]
    pub tombstone: bool,
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub children: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ctime: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtime: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// LiveSync marks a deleted file's metadata `deleted: true` (and keeps the document).
    #[serde(default, skip_serializing_if = "is_false")]
    pub deleted: bool,
    /// LiveSync's cache of recent small chunks; always empty here (`useEden: false`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eden: Option<BTreeMap<String, Value>>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// A revision's ancestry as `new_edits: false` writes carry it: `start` is the newest
/// generation, `ids` the hashes from newest to oldest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Revisions {
    pub start: u64,
    pub ids: Vec<String>,
}

impl Doc {
    /// Whether this is a chunk (`type: "leaf"`).
    pub fn is_chunk(&self) -> bool {
        self.kind.as_deref() == Some("leaf")
    }

    /// Whether this is a file's metadata (`plain` or `newnote`).
    pub fn is_file(&self) -> bool {
        matches!(self.kind.as_deref(), Some("plain" | "newnote"))
    }
}

/// One row of a `_changes` page (`style=all_docs`: every leaf revision).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ChangeRow {
    pub id: String,
    #[serde(default)]
    pub seq: Value,
    #[serde(default)]
    pub changes: Vec<RevOnly>,
    #[serde(default)]
    pub deleted: bool,
}

/// `{"rev": "..."}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RevOnly {
    pub rev: String,
}

/// A `_changes` page.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ChangesPage {
    #[serde(default)]
    pub results: Vec<ChangeRow>,
    /// Absent on a malformed page: [`parse_changes`] refuses it.
    pub last_seq: Option<Value>,
}

/// A `_revs_diff` answer: per id, the revisions the server lacks.
pub type RevsDiff = BTreeMap<String, Missing>;

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Missing {
    #[serde(default)]
    pub missing: Vec<String>,
}

/// A `_bulk_get` answer.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct BulkGet {
    pub results: Vec<BulkGetResult>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct BulkGetResult {
    pub id: String,
    #[serde(default)]
    pub docs: Vec<BulkGetDoc>,
}

/// One revision in a `_bulk_get` answer: the document, or why not.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct BulkGetDoc {
    pub ok: Option<Doc>,
    pub error: Option<Value>,
}

/// An `_all_docs` answer.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct AllDocs {
    #[serde(default)]
    pub rows: Vec<AllDocsRow>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct AllDocsRow {
    #[serde(default)]
    pub key: Value,
    pub id: Option<String>,
    pub doc: Option<Doc>,
    pub error: Option<String>,
}

/// One entry of a `_bulk_docs` answer (empty with `new_edits: false` unless a write failed).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct BulkDocsEntry {
    pub id: Option<String>,
    pub error: Option<String>,
    pub reason: Option<String>,
}

/// The server's welcome at `GET /`: CouchDB says `"couchdb": "Welcome"`, pouchdb-server
/// `"express-pouchdb": "Welcome!"`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Welcome {
    pub couchdb: Option<String>,
    #[serde(rename = "express-pouchdb")]
    pub express_pouchdb: Option<String>,
    pub version: Option<Value>,
}

/// A message that does not parse: one line, naming it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what}: {reason}")]
pub struct BadMessage {
    pub what: &'static str,
    pub reason: String,
}

/// Counts `body`'s values against the budget, then parses it as `T`.
pub fn parse<T: serde::de::DeserializeOwned>(
    what: &'static str,
    body: &[u8],
) -> Result<T, BadMessage> {
    let bad = |reason: String| BadMessage {
        what,
        reason: clip(&reason),
    };
    json_budget::check(body, MAX_JSON_VALUES).map_err(bad)?;
    serde_json::from_slice(body).map_err(|e| bad(e.to_string()))
}

/// A `_changes` page, refused without a `last_seq`.
pub fn parse_changes(body: &[u8]) -> Result<ChangesPage, BadMessage> {
    let page: ChangesPage = parse("_changes page", body)?;
    if page.last_seq.is_none() {
        return Err(BadMessage {
            what: "_changes page",
            reason: "it has no last_seq".into(),
        });
    }
    Ok(page)
}

/// Every message parser, for the fuzz target and the property tests: none may panic.
pub fn parse_any(body: &[u8]) {
    let _ = parse_changes(body);
    let _ = parse::<RevsDiff>("_revs_diff answer", body);
    let _ = parse::<BulkGet>("_bulk_get answer", body);
    let _ = parse::<AllDocs>("_all_docs answer", body);
    let _ = parse::<Vec<BulkDocsEntry>>("_bulk_docs answer", body);
    let _ = parse::<Welcome>("welcome", body);
}

/// A reason (which may quote the server's bytes) escaped and clipped to one short line.
fn clip(s: &str) -> String {
    contract::quote::text(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pouchdb_server_answers_parse() {
        let page = parse_changes(
            br#"{"results":[{"id":"h:abc","changes":[{"rev":"1-x"}],"seq":3},{"id":"a.md","changes":[{"rev":"2-y"}],"seq":4,"deleted":true}],"last_seq":4}"#,
        )
        .unwrap();
        assert_eq!(page.results.len(), 2);
        assert!(page.results[1].deleted);
        assert_eq!(page.last_seq, Some(serde_json::json!(4)));
        // Heartbeat newlines before the body are whitespace.
        assert!(parse_changes(b"\n\n{\"results\":[],\"last_seq\":\"7-g1\"}").is_ok());
        assert!(parse_changes(b"{\"results\":[]}").is_err());
        let diff: RevsDiff = parse("_revs_diff answer", br#"{"h:a":{"missing":["1-x"]}}"#).unwrap();
        assert_eq!(diff["h:a"].missing, ["1-x"]);
        let got: BulkGet = parse(
            "_bulk_get answer",
            br#"{"results":[{"id":"h:a","docs":[{"ok":{"_id":"h:a","_rev":"1-x","type":"leaf","data":"hi"}}]},{"id":"h:b","docs":[{"error":{"id":"h:b","rev":"1-y","error":"not_found","reason":"missing"}}]}]}"#,
        )
        .unwrap();
        assert!(got.results[0].docs[0].ok.as_ref().unwrap().is_chunk());
        assert!(got.results[1].docs[0].ok.is_none());
        let all: AllDocs = parse(
            "_all_docs answer",
            br#"{"total_rows":2,"offset":0,"rows":[{"key":"h:zz","error":"not_found"},{"id":"h:a","key":"h:a","value":{"rev":"1-x"},"doc":{"_id":"h:a","_rev":"1-x","type":"leaf","data":"d"}}]}"#,
        )
        .unwrap();
        assert_eq!(all.rows[0].error.as_deref(), Some("not_found"));
        assert_eq!(all.rows[1].doc.as_ref().unwrap().data.as_deref(), Some("d"));
    }

    #[test]
    fn bad_messages_are_one_line_and_name_the_message() {
        for body in [
            &b""[..],
            b"[",
            b"{\"results\":5,\"last_seq\":1}",
            b"\xff\xfe",
        ] {
            let e = parse_changes(body).unwrap_err();
            let s = e.to_string();
            assert!(s.starts_with("_changes page: "), "{s}");
            assert!(!s.contains('\n'), "{s}");
        }
        let deep = "[".repeat(100_000);
        assert!(parse::<AllDocs>("_all_docs answer", deep.as_bytes()).is_err());
    }
}
