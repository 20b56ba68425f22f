//! MCP (the Model Context Protocol) as vault servers speak it to an assistant: the server is
//! the target's command line, this generator its client over stdio, one JSON-RPC message per
//! line. Both eras of the protocol: the handshake revisions (2025-06-18, 2025-11-25) and the
//! stateless 2026-07-28 revision (`server/discover`, per-request `_meta`), told apart by a
//! probe (`session`). What a run measures (cold boot step by step, listings, a seeded
//! `tools/call` workload at several in-flight levels, shutdown, the server's CPU and RSS) is
//! `run`, its figures named as metric keys by `run::Report::keys`.
//!
//! Read order: `line` (bounded framing) → `stdio` (the process and the id-matched channel)
//! → `session` (eras, listing, calls) → `workload` → `run`; `quality` scores a search tool
//! on a vault's planted queries.

pub mod line;
pub mod quality;
pub mod run;
pub mod session;
pub mod stdio;
pub mod workload;

use std::time::Duration;

use crate::launch::{Ready, TargetDef};
use crate::protocols::spec::{Preset, Spec};

/// What the rest of the generator and the harness's registry know of this protocol. Its
/// targets are stdio servers: no address, no readiness probe (the client times the first
/// answer), no routes and no feed.
pub const SPEC: Spec = Spec {
    name: "mcp",
    aliases: &[],
    about: "MCP (the Model Context Protocol) over stdio, as an assistant starts a vault's tool server",
    ready,
    feed: None,
    routes: Vec::new,
    presets: &[
        Preset {
            name: "mcp-filesystem",
            text: include_str!("../../../targets/mcp-filesystem.toml"),
        },
        Preset {
            name: "mcpvault",
            text: include_str!("../../../targets/mcpvault.toml"),
        },
    ],
    database: None,
    former_keys: &[],
};

/// Every MCP target here is a stdio server.
fn ready(_def: &TargetDef) -> Ready {
    Ready::Stdio
}

/// Why an MCP exchange failed: one line, the server's text quoted.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    #[error("starting the MCP server: {0}")]
    Spawn(String),
    #[error("the vault: {0}")]
    Vault(String),
    /// No answer by the deadline.
    #[error("{method}: no answer within {}{note}", contract::quote::duration(*waited))]
    Timeout {
        method: String,
        waited: Duration,
        /// What came instead, if anything (`" (3 answers came with ids no request had)"`).
        note: String,
    },
    /// The connection ended (the reason is what ended it).
    #[error("{method}: the MCP server's connection ended: {what}")]
    Closed { method: String, what: String },
    /// An answer this client cannot use.
    #[error("{method}: {what}")]
    Protocol { method: String, what: String },
    /// Any of the above, with the last line of the server's stderr.
    #[error("{inner} ({stderr})")]
    Server {
        inner: Box<McpError>,
        stderr: String,
    },
}
