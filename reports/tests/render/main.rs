//! Render tests: snapshots of the Markdown and JSON reports, HTML self-containment, exports.
