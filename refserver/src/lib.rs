//! The reference obsync-v1 server (placeholder; see issue 3).
pub mod cli;
