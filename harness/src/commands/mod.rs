//! One file per subcommand: argument structs and flows. The pipeline pieces they call live
//! in `prepare`, `sample`, `gate` and `recording`.

pub mod ab;
pub mod calibrate;
pub mod class;
pub mod load;
pub mod probe;
pub mod record;
pub mod report;
pub mod sample;
pub mod vault;
pub mod verify;
