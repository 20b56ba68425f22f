//! The signed protocol's side of the sample: its phase client ([`client`]: enrolled devices,
//! the server's `/metrics` counters, the crash phase, the fault hop) and its paired flow
//! ([`paired`]).

pub mod client;
mod paired;

use crate::sample::pairs::PairedJob;
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
}
