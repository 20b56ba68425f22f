//! The output formats a report is rendered in (`--format`).

/// An output format of `vaultbench report`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Md,
    Html,
    Json,
    /// Bencher Metric Format (recordings only).
    Bmf,
    /// github-action-benchmark `customSmallerIsBetter` (recordings only).
    Gab,
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "md" | "markdown" => Ok(Format::Md),
            "html" => Ok(Format::Html),
            "json" => Ok(Format::Json),
            "bmf" => Ok(Format::Bmf),
            "gab" => Ok(Format::Gab),
            other => Err(format!(
                "format {other:?} is not one of md, html, json, bmf, gab"
            )),
        }
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Format::Md => "md",
            Format::Html => "html",
            Format::Json => "json",
            Format::Bmf => "bmf",
            Format::Gab => "gab",
        })
    }
}
