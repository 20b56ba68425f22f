//! The MCP client's configuration for a target: its command line, and its `[mcp]` table's
//! search tool and shutdown grace where it has them (one place for a sample and a paired
//! sample).

use std::path::PathBuf;

use loadgen::launch::TargetDef;
use loadgen::protocols::mcp::run::RunConfig;

/// The client's configuration for `def` over `vault`.
pub(super) fn config(def: &TargetDef, vault: PathBuf) -> RunConfig {
    let mut cfg = RunConfig::new(def.argv.clone(), vault);
    if let Some(o) = &def.mcp {
        cfg.search = o.search.clone();
        if let Some(g) = o.shutdown_grace {
            cfg.shutdown = g;
        }
    }
    cfg
}
