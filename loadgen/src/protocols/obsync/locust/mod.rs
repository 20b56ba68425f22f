//! The generator as a worker of a Locust master (Locust's own distributed engine: a master
//! and workers exchanging msgpack messages over ZeroMQ; non-Python workers such as boomer
//! and locust4j are an intended use). `message` reads and writes the messages, `report` turns
//! the recorder's counts into Locust's stats format, `worker` is the DEALER socket and the
//! loop between them and the route load.

pub mod message;
pub mod report;
pub mod worker;

pub use worker::{Connected, Outcome, WorkerConfig, WorkerError, connect};
