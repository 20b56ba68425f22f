//! Render tests: fixtures, snapshots of the Markdown and JSON reports (timestamps redacted),
//! HTML self-containment and charts, exports against their documented shapes, compare rules,
//! history, A/B rendering, the CI workflow files (structure, and actionlint), and the HTML in
//! headless Chromium.

mod ab;
mod actionlint;
mod browser;
mod compare;
mod exports;
mod fixtures;
mod history;
mod html;
mod snapshots;
mod where_time;
mod workflows;
