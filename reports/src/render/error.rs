//! Why a report could not be made.

use super::format::Format;
use crate::charts::ChartError;

/// Why a report could not be made; each names the input.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error(transparent)]
    Chart(#[from] ChartError),
    #[error("--format {format} exports a recording, not {what}")]
    Unsupported { format: Format, what: &'static str },
    #[error("baselines history: {0}")]
    History(String),
}
