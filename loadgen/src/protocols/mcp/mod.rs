//! MCP (the Model Context Protocol) as vault servers speak it to an assistant: the server is
//! the target's command line, this generator its client over stdio, one JSON-RPC message per
//! line, or over Streamable HTTP (`http`: a POST per message, JSON or SSE answers, `sse`'s
//! bounded parser) when the command line says where it listens. Both eras of the protocol: the handshake revisions (2025-06-18, 2025-11-25) and the
//! stateless 2026-07-28 revision (`server/discover`, per-request `_meta`), told apart by a
//! probe (`session`). What a run measures (cold boot step by step, listings, a seeded
//! `tools/call` workload at several in-flight levels, shutdown, the server's CPU and RSS) is
//! `run`, its figures named as metric keys by `run::Report::keys`.
//!
//! Read order: `line` (bounded framing) → `stdio` (the process and the id-matched channel)
//! → `sse` and `http` (the other transport) → `session` (eras, listing, calls, the
//! transport enum) → `workload` → `run`; `quality` scores a search tool on a vault's planted
//! queries.

pub mod generic;
pub mod http;
pub mod line;
pub mod quality;
pub mod run;
pub mod session;
pub mod sse;
pub mod stdio;
pub mod workload;

use std::time::Duration;

use crate::launch::{Ready, TargetDef};
use crate::protocols::spec::{Preset, Spec};

/// What the rest of the generator and the harness's registry know of this protocol. Its
/// targets are stdio servers (no address, no readiness probe: the client times the first
/// answer) or HTTP servers (ready when their port accepts); no routes and no feed.
pub const SPEC: Spec = Spec {
    name: "mcp",
    aliases: &[],
    about: "MCP (the Model Context Protocol) over stdio or Streamable HTTP, as an assistant starts a vault's tool server",
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
        Preset {
            name: "obsidian-mcp",
            text: include_str!("../../../targets/obsidian-mcp.toml"),
        },
        Preset {
            name: "mcp-everything",
            text: include_str!("../../../targets/mcp-everything.toml"),
        },
    ],
    database: None,
    former_keys: &[],
};

/// A target whose command line says where it listens (`{port}`, `{addr}`, `{host}`) is a
/// Streamable HTTP server, ready when its port accepts; any other is a stdio server.
fn ready(def: &TargetDef) -> Ready {
    if def.has_address() {
        Ready::Tcp
    } else {
        Ready::Stdio
    }
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
