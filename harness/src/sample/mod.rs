//! One sample: the plan; the runner seam the loops call; the parent side that spawns a fresh
//! `vaultbench sample` process; the child side that starts the target server (`target`),
//! drives the scenario's phases (`phases`, one flow over the `sync_client` seam, implemented
//! by each protocol in the `protocols` registry) and prints the result; `contention` reads the
//! in-sample contention over the measured window and pins the server and the generator to
//! disjoint CPUs; `client` runs the scenario's own client as the devices (client mode); `logtap` counts the target's log lines per phase and `growth` reads the
//! server's cost at every checkpoint of a cold push.

pub mod checkpoint_cost;
pub mod child;
pub mod client;
pub mod contention;
pub mod cost;
pub mod crash;
pub mod escapee_wire;
pub mod fanout;
pub mod growth;
pub mod guard;
pub mod logtap;
pub mod paired;
pub mod pairs;
pub mod parent;
pub mod phases;
pub mod plan;
pub mod protocols;
pub mod runner;
pub mod server_cost;
pub mod stopped;
pub mod subreaper;
pub mod sync_client;
pub mod target;
