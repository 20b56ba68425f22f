//! The protocol crate's integration tests: its JSON bodies on round trips and on garbage
//! (the `protocol_json` fuzz target in `fuzz/` runs the same properties for longer).

mod wire;
