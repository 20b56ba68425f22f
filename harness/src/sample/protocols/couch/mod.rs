//! CouchDB's side of the sample: its phase client ([`client`], shaped like Self-hosted
//! LiveSync's replication) and its side of `vaultbench load` (`load`). It has no paired flow
//! and no cost sample.

pub mod client;
mod load;

use crate::sample::protocols::load::{RouteJob, RouteRun, TransferJob, Transferred};
use crate::sample::protocols::seam::{Local, ProtocolImpl, Run, Support};

/// The registry's entry.
pub struct Impl;

impl ProtocolImpl for Impl {
    fn spec(&self) -> &'static loadgen::protocols::Spec {
        &loadgen::protocols::couch::SPEC
    }

    fn cost(&self) -> Support {
        Support::No(
            "callgrind cannot count a Node server's instructions in useful time (see docs/src/targets/couchdb.md); per-phase server CPU from /proc is recorded without it",
        )
    }

    fn paired(&self) -> Support {
        Support::No("its replication has no per-file exchange to alternate")
    }

    fn faults(&self) -> Support {
        Support::No("its replicator is not driven through the fault hop")
    }

    fn long_poll(&self) -> Support {
        Support::No("its long-polling steps are not built")
    }

    fn drive<'a>(&'a self, run: Run<'a>) -> Local<'a, ()> {
        Box::pin(async move {
            let mut client = client::CouchSyncClient::connect(run.plan, run.server)?;
            run.phases(&mut client).await
        })
    }

    fn load_route<'a>(&'a self, job: RouteJob<'a>) -> Local<'a, RouteRun> {
        Box::pin(load::route(job))
    }

    fn load_transfer<'a>(&'a self, job: TransferJob<'a>) -> Local<'a, Transferred> {
        Box::pin(load::transfer(job))
    }
}
