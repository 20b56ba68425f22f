//! Change points over a history of recordings: E-Divisive means with a permutation test
//! (`edivisive`), the size of each change with an interval and the step/drift residuals
//! (`fit`), and the detection that names each point a step, a drift or a machine change
//! (`detect`); a recording as a history line (`entry`). Pure: the history comes in as data, the shuffles draw from a seeded ChaCha8.

mod detect;
mod edivisive;
mod entry;
mod fit;

pub use detect::{Config, DEFAULT_SEED, detect};
pub use edivisive::{Search, Split, detect as edivisive};
pub use entry::entry_of;
