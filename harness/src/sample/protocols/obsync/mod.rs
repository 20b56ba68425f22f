//! The signed protocol's side of the sample: its phase client ([`client`]: enrolled devices,
//! the server's `/metrics` counters, the crash phase, the fault hop) and its paired flow
//! ([`paired`]); its side of `vaultbench load` (`load`).

pub mod client;
mod load;
mod paired;

use crate::sample::pairs::PairedJob;
use crate::sample::protocols::load::{
    Conn, LocustJob, RouteJob, RouteRun, TransferJob, Transferred,
};
use crate::sample::protocols::seam::{Local, ProtocolImpl, Run, Support};

/// The registry's entry.
pub struct Impl;

impl ProtocolImpl for Impl {
    fn spec(&self) -> &'static loadgen::protocols::Spec {
        &loadgen::protocols::obsync::SPEC
    }

    fn paired(&self) -> Support {
        Support::Yes
    }

    fn paired_covers_every_phase(&self) -> bool {
        true
    }

    fn faults(&self) -> Support {
        Support::Yes
    }

    fn long_poll(&self) -> Support {
        Support::Yes
    }

    fn drive<'a>(&'a self, run: Run<'a>) -> Local<'a, ()> {
        Box::pin(async move {
            let mut client =
                client::ObsyncClient::connect(run.plan, run.server, run.bounds.scrapes()).await?;
            run.phases(&mut client).await
        })
    }

    fn drive_paired<'a>(&'a self, job: PairedJob<'a>) -> Local<'a, ()> {
        Box::pin(paired::drive(
            job.plan,
            job.a_first,
            job.dirs,
            job.a,
            job.b,
            job.pairs,
            job.skipped,
        ))
    }

    fn load_probe_shows(&self) -> Option<&'static str> {
        Some(load::PROBE_SHOWS)
    }

    fn load_probe<'a>(
        &'a self,
        target: &'a loadgen::Target,
        _auth: Option<&'a loadgen::http::BasicAuth>,
    ) -> Local<'a, ()> {
        Box::pin(load::probe(target))
    }

    fn load_route<'a>(&'a self, job: RouteJob<'a>) -> Local<'a, RouteRun> {
        Box::pin(load::route(job))
    }

    fn load_transfer<'a>(&'a self, job: TransferJob<'a>) -> Local<'a, Transferred> {
        Box::pin(load::transfer(job))
    }

    fn load_devices_support(&self) -> Support {
        Support::Yes
    }

    fn load_devices<'a>(
        &'a self,
        conn: &'a Conn<'a>,
        k: usize,
        shard: Option<loadgen::Shard>,
    ) -> Local<'a, Vec<loadgen::Device>> {
        Box::pin(load::devices(conn, k, shard))
    }

    fn load_locust<'a>(&'a self, job: LocustJob<'a>) -> Local<'a, i32> {
        Box::pin(load::locust(job))
    }
}
