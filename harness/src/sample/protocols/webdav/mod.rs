//! WebDAV's side of the sample: its phase client ([`client`], shaped like the Remotely Save
//! plugin's sync), its paired flow ([`paired`]) and its side of `vaultbench load` (`load`).

pub mod client;
mod load;
mod paired;

use crate::sample::pairs::PairedJob;
use crate::sample::protocols::load::{RouteJob, RouteRun, TransferJob, Transferred};
use crate::sample::protocols::seam::{Local, ProtocolImpl, Run, Support};

/// The registry's entry.
pub struct Impl;

/// What a protocol without devices or a long-poll feed cannot run.
const NO_DEVICES: &str = "it has no signed devices or long-poll feed";

impl ProtocolImpl for Impl {
    fn spec(&self) -> &'static loadgen::protocols::Spec {
        &loadgen::protocols::webdav::SPEC
    }

    fn paired(&self) -> Support {
        Support::Yes
    }

    fn faults(&self) -> Support {
        Support::No(NO_DEVICES)
    }

    fn long_poll(&self) -> Support {
        Support::No(NO_DEVICES)
    }

    fn options_table(&self) -> Option<&'static str> {
        Some("webdav")
    }

    fn drive<'a>(&'a self, run: Run<'a>) -> Local<'a, ()> {
        Box::pin(async move {
            let mut client = client::WebdavClient::connect(run.plan, run.server)?;
            run.phases(&mut client).await
        })
    }

    fn drive_paired<'a>(&'a self, job: PairedJob<'a>) -> Local<'a, ()> {
        Box::pin(paired::drive_dav(
            job.plan,
            job.a_first,
            job.specs,
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
        auth: Option<&'a loadgen::http::BasicAuth>,
    ) -> Local<'a, ()> {
        Box::pin(load::probe(target, auth))
    }

    fn load_route<'a>(&'a self, job: RouteJob<'a>) -> Local<'a, RouteRun> {
        Box::pin(load::route(job))
    }

    fn load_transfer<'a>(&'a self, job: TransferJob<'a>) -> Local<'a, Transferred> {
        Box::pin(load::transfer(job))
    }
}
