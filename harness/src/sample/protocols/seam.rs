//! The seam between the sample and a protocol: what a registered protocol answers
//! ([`ProtocolImpl`]) and what it is handed to drive a sample ([`Run`]). Each protocol's
//! folder implements it; the registry beside this file lists them.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;

use anyhow::bail;

use crate::sample::pairs::PairedJob;
use crate::sample::phases;
use crate::sample::plan::{Metrics, SamplePlan};
use crate::sample::target::Server;

/// A future on the sample's one runtime thread (never sent between threads).
pub type Local<'a, T> = Pin<Box<dyn Future<Output = anyhow::Result<T>> + 'a>>;

/// Whether a protocol can do something, and why not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Support {
    Yes,
    /// It cannot; the reason, for the refusal.
    No(&'static str),
}

/// One sample's run of the phases, handed to a protocol.
pub struct Run<'a> {
    pub plan: &'a SamplePlan,
    pub server: &'a mut Server,
    pub dir: &'a Path,
    pub m: &'a mut Metrics,
    pub bounds: &'a mut dyn phases::Boundary,
}

impl Run<'_> {
    /// Drives the plan's phases against the run's server through `client` (what a protocol's
    /// [`ProtocolImpl::drive`] does once its client is connected).
    pub async fn phases<C: crate::sample::sync_client::SyncClient>(
        self,
        client: &mut C,
    ) -> anyhow::Result<()> {
        phases::drive(
            self.plan,
            self.server,
            client,
            self.dir,
            self.m,
            self.bounds,
        )
        .await
    }
}

/// Debug shows the protocol's name.
impl std::fmt::Debug for dyn ProtocolImpl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.spec().name)
    }
}

/// One registered protocol: its generator-side facts ([`loadgen::protocols::Spec`]) and its
/// harness side.
pub trait ProtocolImpl: Sync {
    /// Name, aliases, readiness default, feed bounds and routes.
    fn spec(&self) -> &'static loadgen::protocols::Spec;

    /// `--cost` (callgrind and strace over the target).
    fn cost(&self) -> Support {
        Support::Yes
    }

    /// `ab --paired` (both arms up, requests alternated).
    fn paired(&self) -> Support;

    /// Whether its paired flow runs every phase kind (so any key can be probed paired, as
    /// `bisect` does for timing keys); a flow that runs only some names the rest as skipped.
    fn paired_covers_every_phase(&self) -> bool {
        false
    }

    /// `[[fault]]` rules (the fault hop between devices and target) and crash phases.
    fn faults(&self) -> Support;

    /// Long-polling steps (`long_poll_fanout`, `concurrent_push`).
    fn long_poll(&self) -> Support;

    /// The scenario file's options table this protocol reads (its name in brackets), if any.
    fn options_table(&self) -> Option<&'static str> {
        None
    }

    /// Drives the plan's phases against the run's server through this protocol's client.
    fn drive<'a>(&'a self, run: Run<'a>) -> Local<'a, ()>;

    /// The paired flow (`ab --paired`); only called where [`ProtocolImpl::paired`] is `Yes`.
    fn drive_paired<'a>(&'a self, _job: PairedJob<'a>) -> Local<'a, ()> {
        let name = self.spec().name;
        Box::pin(async move { bail!("ab --paired does not drive {name} scenarios") })
    }
}
