//! Seeded synthetic vaults (pure: seed + profile -> a stream of files) and scenario
//! definitions.
//!
//! Pipeline: [`profile`] (the shape) -> a plan (names, sizes, links' targets) -> [`generate`]
//! (files, made lazily) -> [`manifest`] (paths, sizes, SHA-256, one digest) -> [`edits`]
//! (a churn stream over the vault). No clock, no global RNG, no file I/O. [`shape`] measures a
//! vault into a shape file and `Profile::from_shape` makes the profile of its twin.

mod binary;
pub mod client;
pub mod edits;
mod generate;
pub mod hazards;
pub mod links;
mod manifest;
mod note;
mod plan;
pub mod plant;
mod profile;
mod rng;
pub mod script;
pub mod scenario;
pub mod shape;
pub mod sizes;
mod text;
mod twin;

pub use binary::RandomReader;
pub use generate::{FileReader, Files, GenFile, generate};
pub use manifest::{Difference, Manifest, ManifestEntry, entry, hash_reader, manifest};
pub use plant::{PlantedQuery, queries};
pub use profile::{
    DEFAULT_SEED, Fanout, HazardNames, ImageSizes, LinkStyle, ObsidianConfig, PROFILE_NAMES,
    Profile, TitleNames, profile,
};
pub use rng::civil_from_days;
pub use shape::{Measure, NameStats, Shape, ShapeError};
pub use text::percent_decode;
pub use twin::TWIN_NAME;
