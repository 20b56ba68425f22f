//! Durable storage: the frame codec, append-only fsynced logs, and the chunk store.

pub mod chunks;
pub mod frame;
pub mod log;
