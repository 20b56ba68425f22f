//! The history of a scenario on one machine class: one summary line per accepted recording
//! (`kind: "vaultbench.history-entry"`), appended in commit order to a JSON-lines file kept in
//! the user's repository (`<dir>/<class>/<scenario>.jsonl`). Each line stands alone, so a file
//! is appended to without reading it and a reader names the line that does not parse.
//!
//! A line keeps what change-point detection needs and nothing else: the commit, the date, the
//! machine class, each calibration channel's median, and every key's value with its recorded
//! spread. The recording itself (raw series, histograms, the binding digest) stays an artifact.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::format::{self, FORMAT_VERSION, FormatError};
use crate::schema::{Better, MetricClass};

/// The `kind` of one history line.
pub const KIND_HISTORY_ENTRY: &str = "vaultbench.history-entry";

/// One accepted recording, summarised.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryEntry {
    pub kind: String,
    pub format_version: u32,
    /// The measured build's commit (a `git:REV` target's), else the one given to
    /// `history append --commit`; `None` when neither is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// The commit's subject line, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// When the recording was made (RFC 3339, UTC): metadata, never used to order lines.
    pub date: String,
    /// The machine class the recording was filed under (`contract::class`).
    pub machine_class: String,
    pub scenario: String,
    pub seed: u64,
    pub vault_digest: String,
    /// Each calibration channel's median over the recording's counted samples (`cpu_ms`,
    /// `io_ms`, `rtt_ms`), milliseconds.
    pub calibration: BTreeMap<String, f64>,
    /// Every key of the recording.
    pub keys: BTreeMap<String, HistoryValue>,
}

/// One key at one recording: the value the baseline holds (a median) and the spread of the
/// raw series it came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryValue {
    pub value: f64,
    pub unit: String,
    pub class: MetricClass,
    pub better: Better,
    /// The raw series' smallest and largest value (equal to `value` for a key recorded once).
    pub low: f64,
    pub high: f64,
    /// How many raw values the median was taken over.
    pub n: u32,
}

impl HistoryEntry {
    /// A new entry of this build's format version.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        commit: Option<String>,
        subject: Option<String>,
        date: String,
        machine_class: String,
        scenario: String,
        seed: u64,
        vault_digest: String,
        calibration: BTreeMap<String, f64>,
        keys: BTreeMap<String, HistoryValue>,
    ) -> HistoryEntry {
        HistoryEntry {
            kind: KIND_HISTORY_ENTRY.to_owned(),
            format_version: FORMAT_VERSION,
            commit,
            subject,
            date,
            machine_class,
            scenario,
            seed,
            vault_digest,
            calibration,
            keys,
        }
    }

    /// The entry as one line of JSON, newline included.
    pub fn to_line(&self) -> String {
        // Strings, integers and floats only: serialising this shape cannot fail (a non-finite
        // float is written as null, which the reader refuses with the line named).
        let mut s = serde_json::to_string(self).unwrap_or_default();
        s.push('\n');
        s
    }
}

/// Why a history file was not read: the line (1-based) and what was wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line} {error}")]
pub struct HistoryLineError {
    pub line: usize,
    pub error: FormatError,
}

/// Reads a JSON-lines history: every non-blank line must be a history entry of a version this
/// build reads.
pub fn parse_lines(text: &str) -> Result<Vec<HistoryEntry>, HistoryLineError> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            format::decode_slice(l.as_bytes(), KIND_HISTORY_ENTRY)
                .map_err(|error| HistoryLineError { line: i + 1, error })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(commit: &str, v: f64) -> HistoryEntry {
        let mut keys = BTreeMap::new();
        keys.insert(
            "cold_push.server.instructions".to_owned(),
            HistoryValue {
                value: v,
                unit: "instructions".into(),
                class: MetricClass::Cost,
                better: Better::Lower,
                low: v,
                high: v,
                n: 1,
            },
        );
        HistoryEntry::new(
            Some(commit.into()),
            None,
            "2026-12-06T10:00:00Z".into(),
            "xeon-2c".into(),
            "small".into(),
            0x5eed,
            "d".into(),
            BTreeMap::from([("io_ms".to_owned(), 1.5)]),
            keys,
        )
    }

    #[test]
    fn lines_round_trip_and_a_bad_line_is_named() {
        let text = format!(
            "{}\n{}",
            entry("a", 1.0).to_line(),
            entry("b", 2.0).to_line()
        );
        let back = parse_lines(&text).unwrap();
        assert_eq!(back, vec![entry("a", 1.0), entry("b", 2.0)]);
        let bad = format!(
            "{}{{\"kind\":\"vaultbench.sample\"}}\n",
            entry("a", 1.0).to_line()
        );
        let e = parse_lines(&bad).unwrap_err();
        assert_eq!(e.line, 2);
        assert!(
            e.to_string()
                .starts_with("line 2 is not a vaultbench.history-entry"),
            "{e}"
        );
        let newer = entry("a", 1.0).to_line().replace(
            "\"format_version\":1",
            &format!("\"format_version\":{}", FORMAT_VERSION + 1),
        );
        assert!(
            parse_lines(&newer)
                .unwrap_err()
                .to_string()
                .contains("upgrade vaultbench")
        );
    }
}
