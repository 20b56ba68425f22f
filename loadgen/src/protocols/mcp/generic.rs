//! The seeded `tools/call` workload for a server that has none of the vault tools: the
//! reference test server (`@modelcontextprotocol/server-everything`) lists `echo` and
//! `get-sum`, which a transport's latency can be measured on. `echo` sends a note's path of
//! the vault as its message, `get-sum` two seeded integers; the order is shuffled over the
//! same ChaCha8 stream, so a build and a seed give the same calls.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::json;

use super::session::Listing;
use super::workload::{Call, Op};

/// The tools this workload calls, where the server lists them.
pub const TOOLS: &[&str] = &["echo", "get-sum"];

/// `per_op` calls of each of [`TOOLS`] the listing has, messages from `files` (the vault's
/// sorted listing; `"note"` when empty), interleaved in a seeded order.
pub fn plan(listing: &Listing, files: &[String], per_op: usize, seed: u64) -> Vec<Call> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let has = |n: &str| listing.tools.iter().any(|t| t.name == n);
    let mut calls = Vec::new();
    for tool in TOOLS.iter().filter(|t| has(t)) {
        for _ in 0..per_op {
            let arguments = match *tool {
                "echo" => {
                    let message = if files.is_empty() {
                        "note".to_owned()
                    } else {
                        files[(rng.next_u64() % files.len() as u64) as usize].clone()
                    };
                    json!({ "message": message })
                }
                _ => json!({
                    "a": rng.next_u64() % 1_000_000,
                    "b": rng.next_u64() % 1_000_000,
                }),
            };
            calls.push(Call {
                op: Op::Fixed,
                tool: (*tool).to_owned(),
                arguments,
            });
        }
    }
    for i in (1..calls.len()).rev() {
        calls.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
    }
    calls
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocols::mcp::session::Tool;

    #[test]
    fn echo_and_sum_are_planned_where_listed_and_seeded() {
        let listing = Listing {
            tools: ["echo", "get-sum", "get-env"]
                .map(|n| Tool { name: n.into() })
                .to_vec(),
            pages: 1,
            bytes: 0,
        };
        let files = vec!["a.md".to_owned(), "b/c.md".to_owned()];
        let p = plan(&listing, &files, 3, 7);
        assert_eq!(p.len(), 6);
        assert_eq!(p.iter().filter(|c| c.tool == "echo").count(), 3);
        assert_eq!(p, plan(&listing, &files, 3, 7));
        assert_ne!(p, plan(&listing, &files, 3, 8));
        for c in p.iter().filter(|c| c.tool == "echo") {
            assert!(files.contains(&c.arguments["message"].as_str().unwrap().to_owned()));
        }
        let only_echo = Listing {
            tools: vec![Tool {
                name: "echo".into(),
            }],
            pages: 1,
            bytes: 0,
        };
        assert_eq!(plan(&only_echo, &[], 2, 1).len(), 2);
    }
}
