//! Naming a vault: the seed and profile flags `vault gen`, `vault verify` and `vault bench`
//! share.

use anyhow::Context;

/// The `--seed` of `vault gen|verify|bench`, or the profile's default seed when it is absent.
/// The flag is kept as text and parsed here, not by clap, so that a bad seed is a one-line
/// error like every other of these commands'.
pub fn seed_or_default(p: &scenarios::Profile, seed: Option<&str>) -> anyhow::Result<u64> {
    seed.map_or(Ok(p.default_seed), |s| {
        contract::parse::seed(s).map_err(anyhow::Error::msg)
    })
}

/// Looks up a profile by name, naming the known ones on failure.
pub fn lookup_profile(name: &str) -> anyhow::Result<scenarios::Profile> {
    // A shape file given where a profile name goes: say which flag takes it.
    if name.ends_with(".toml") || std::path::Path::new(name).is_file() {
        anyhow::bail!(
            "{name:?} is a file, not a profile name: a shape file from `vault measure` goes to --profile-file {name}"
        );
    }
    scenarios::profile(name).with_context(|| {
        let close = crate::hint::did_you_mean(name, scenarios::PROFILE_NAMES);
        let hint = match close.first() {
            Some(c) => format!("did you mean {c}? "),
            None => String::new(),
        };
        format!(
            "unknown profile {name:?} ({hint}known: {})",
            scenarios::PROFILE_NAMES.join(", ")
        )
    })
}
