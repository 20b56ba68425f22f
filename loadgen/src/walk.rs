//! The bounds of a walk that lists a tree folder by folder or page by page (a
//! listing protocol's): a file of its own, below the
//! protocols, so a target definition can carry them without importing a protocol.

/// How far a folder-by-folder walk may go before it stops with an error naming the bound: a server
/// that lists its folders in a cycle, nests them without end or invents members cannot keep
/// a walk going, nor fill memory with its listing.
///
/// The defaults are sized from the largest vault profile, `vault100k` (100,000 notes at the
/// real-vault shape: 4 folders per 100 notes, so 4,000 folders, at most 5 deep), with
/// headroom for a user's own vault:
/// - requests: a Depth 1 walk makes one PROPFIND per folder and one for the root, 4,001 for
///   `vault100k`; 4 × 4,001 ≈ 16,000, rounded up to 16,384;
/// - entries: 100,000 notes + 4,000 folders = 104,000; 250,000 is 2.4 times that (less
///   headroom than the others, because entries cost memory: a kept entry is about 370 bytes
///   with short names — a Depth infinity walk stopped at 500,000 peaked at 186 MB — so the
///   bound keeps a walk's listing near 100 MB, under the 200 MiB a walk may take);
/// - depth: real vaults nest 2–5 folders deep and `vault100k` 5; 32 levels;
/// - path: a vault path is written under the pull's directory, so it cannot pass Linux's
///   4,096-byte `PATH_MAX`; the deepest `vault100k` path is about 5 × 20-byte folder names
///   plus a note name up to the 255-byte filesystem limit the `hazards` profile uses, under
///   400 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WalkBounds {
    /// PROPFIND requests in one walk.
    pub max_requests: u64,
    /// Entries (files and folders) one walk keeps.
    pub max_entries: u64,
    /// Folder levels below the walk's root a listed path may have.
    pub max_depth: u64,
    /// Bytes of a listed vault path.
    pub max_path_bytes: u64,
}

impl WalkBounds {
    pub const DEFAULT: WalkBounds = WalkBounds {
        max_requests: 16_384,
        max_entries: 250_000,
        max_depth: 32,
        max_path_bytes: 4096,
    };
}

impl Default for WalkBounds {
    fn default() -> WalkBounds {
        WalkBounds::DEFAULT
    }
}
