//! Naming a vault: the seed and profile flags `vault gen`, `vault verify` and `vault bench`
//! share.

use anyhow::Context;

/// Parses a seed: decimal, or hex with a `0x` prefix.
pub fn parse_seed(s: &str) -> anyhow::Result<u64> {
    contract::parse::seed(s).map_err(anyhow::Error::msg)
}

/// Looks up a profile by name, naming the known ones on failure.
pub fn lookup_profile(name: &str) -> anyhow::Result<scenarios::Profile> {
    scenarios::profile(name).with_context(|| {
        format!(
            "unknown profile {name:?} (known: {})",
            scenarios::PROFILE_NAMES.join(", ")
        )
    })
}
