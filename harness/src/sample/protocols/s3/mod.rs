//! S3's side of the sample: its phase client ([`client`], shaped like the Remotely Save
//! plugin's S3 backend) and its paired flow ([`paired`]).

pub mod client;
mod paired;

use crate::sample::pairs::PairedJob;
use crate::sample::protocols::seam::{Local, ProtocolImpl, Run, Support};

/// The registry's entry.
pub struct Impl;

/// What a protocol without devices or a long-poll feed cannot run.
const NO_DEVICES: &str = "it has no signed devices or long-poll feed";

impl ProtocolImpl for Impl {
    fn spec(&self) -> &'static loadgen::protocols::Spec {
        &loadgen::protocols::s3::SPEC
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
        Some("s3")
    }

    fn drive<'a>(&'a self, run: Run<'a>) -> Local<'a, ()> {
        Box::pin(async move {
            let mut client = client::S3SyncClient::connect(run.plan, run.server).await?;
            run.phases(&mut client).await
        })
    }

    fn drive_paired<'a>(&'a self, job: PairedJob<'a>) -> Local<'a, ()> {
        Box::pin(paired::drive_s3(job))
    }
}
