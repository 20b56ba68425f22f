//! Seeded synthetic vaults (placeholder; see issue 2) and scenario definitions.
pub mod scenario;
