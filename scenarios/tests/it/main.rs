//! The scenarios crate's integration tests: golden digests, vault shape against real-vault
//! figures, links, determinism, and manifests against files on disk.

mod golden;
mod loader;
mod props;
mod reference_doc;
mod shape;
mod twin;

use scenarios::{GenFile, Profile, generate, profile};

/// Every generated file of `p` at `seed`, bytes in memory (only for profiles without large
/// streamed attachments).
pub fn files(p: &Profile, seed: u64) -> Vec<(String, Vec<u8>)> {
    generate(p, seed)
        .map(|f: GenFile| (f.path.clone(), f.to_vec()))
        .collect()
}

pub fn prof(name: &str) -> Profile {
    profile(name).unwrap()
}
