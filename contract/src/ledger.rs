//! The attempts ledger (`<out>/<scenario>.attempts.jsonl`): one JSON line per recording
//! attempt, accepted, refused or failed, so that the next accepted recording's sidecar can
//! say how many tries it took ([`Attempts`]). [`LedgerLine`] is its one reader and writer.

use serde::{Deserialize, Serialize};

use crate::schema::Attempts;

/// How one recording attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AttemptOutcome {
    /// The recording was written.
    Accepted,
    /// The calibration gate judged the machine too noisy; nothing was written.
    Refused,
    /// A sample failed; nothing was written.
    Failed,
}

/// One line of the ledger. Fields are declared in the order the line has always been
/// written in (alphabetical: the first writer used an untyped JSON map).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerLine {
    /// When, RFC 3339 UTC.
    pub at: String,
    /// Why, for a refused or failed attempt; empty for an accepted one.
    pub cause: String,
    pub outcome: AttemptOutcome,
    pub scenario: String,
}

impl LedgerLine {
    /// The line as written, without its newline.
    pub fn to_line(&self) -> String {
        // A struct of strings and a unit enum always serialises.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// One line read back; `Err` names what is wrong with it.
    pub fn parse(line: &str) -> Result<LedgerLine, String> {
        serde_json::from_str(line).map_err(|e| format!("attempts ledger line {line:?}: {e}"))
    }
}

/// Attempts since the last accepted one in a ledger's text, counting the accepted attempt
/// about to be written. Lines that do not parse (a line torn by a crash mid-append) are
/// skipped: the ledger is evidence, and one bad line must not hide the others.
pub fn attempts_since_last_accept(text: &str) -> Attempts {
    let mut a = Attempts {
        attempted: 1,
        refused: 0,
        failed: 0,
    };
    for line in text.lines().rev() {
        match LedgerLine::parse(line).map(|l| l.outcome) {
            Ok(AttemptOutcome::Accepted) => break,
            Ok(AttemptOutcome::Refused) => {
                a.attempted += 1;
                a.refused += 1;
            }
            Ok(AttemptOutcome::Failed) => {
                a.attempted += 1;
                a.failed += 1;
            }
            Err(_) => {}
        }
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(outcome: AttemptOutcome, cause: &str) -> String {
        LedgerLine {
            at: "2026-01-02T03:04:05Z".into(),
            cause: cause.into(),
            outcome,
            scenario: "s".into(),
        }
        .to_line()
    }

    #[test]
    fn the_line_keeps_its_established_shape() {
        assert_eq!(
            line(AttemptOutcome::Refused, "cpu_ms cv 0.3 > 0.2"),
            r#"{"at":"2026-01-02T03:04:05Z","cause":"cpu_ms cv 0.3 > 0.2","outcome":"refused","scenario":"s"}"#
        );
        let back = LedgerLine::parse(&line(AttemptOutcome::Failed, "x")).unwrap();
        assert_eq!(back.outcome, AttemptOutcome::Failed);
        let e = LedgerLine::parse(r#"{"at":"t","cause":"","outcome":"maybe","scenario":"s"}"#)
            .unwrap_err();
        assert!(e.contains("maybe"), "{e}");
    }

    #[test]
    fn counts_run_back_to_the_last_accept_and_skip_torn_lines() {
        let text = [
            line(AttemptOutcome::Refused, "a"),
            line(AttemptOutcome::Accepted, ""),
            line(AttemptOutcome::Refused, "b"),
            "{\"at\":\"2026".to_owned(),
            line(AttemptOutcome::Failed, "c"),
        ]
        .join("\n");
        assert_eq!(
            attempts_since_last_accept(&text),
            Attempts {
                attempted: 3,
                refused: 1,
                failed: 1
            }
        );
        assert_eq!(attempts_since_last_accept("").attempted, 1);
    }
}
