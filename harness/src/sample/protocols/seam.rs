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
use crate::sample::protocols::load::{
    Conn, LocustJob, RouteJob, RouteRun, TransferJob, Transferred,
};
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

/// What a protocol without devices or a long-poll feed cannot run.
pub const NO_DEVICES: Support = Support::No("it has no signed devices or long-poll feed");

/// `bail!` inside a [`Local`]: what a protocol without a part of `load` answers.
fn refuse<'a, T: 'a>(name: &'static str, what: &'static str) -> Local<'a, T> {
    Box::pin(async move { bail!("--protocol {name}: `vaultbench load` has no {what} for it") })
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

    /// A scenario's `sizes` (each sample runs the phases once per vault size, each over a
    /// fresh server holding the first n notes); by default not.
    fn sizes(&self) -> Support {
        Support::No(
            "its phase flow runs one server over one vault per sample; sizes need a flow that boots a fresh server per size",
        )
    }

    /// `[[fault]]` rules (the fault hop between devices and target) and crash phases; by
    /// default not, for a protocol without devices.
    fn faults(&self) -> Support {
        NO_DEVICES
    }

    /// Long-polling steps (`long_poll_fanout`, `concurrent_push`); by default not, for a
    /// protocol without a long-poll feed.
    fn long_poll(&self) -> Support {
        NO_DEVICES
    }

    /// Whether it runs `phase`: by default every phase but an MCP server's and tus's resume
    /// check.
    fn runs(&self, phase: &scenarios::scenario::Phase) -> Support {
        if phase.is_mcp() {
            Support::No("it is a sync protocol; MCP phases need an MCP server")
        } else if matches!(phase, scenarios::scenario::Phase::TusResume { .. }) {
            Support::No("tus_resume checks tus's resume after a cut; it needs a tus target")
        } else {
            Support::Yes
        }
    }

    /// Fills the sample's fresh data dir before the server starts (an MCP server is given a
    /// copy of the vault to serve); by default nothing.
    fn seed_data_dir(&self, _plan: &SamplePlan, _data: &Path) -> anyhow::Result<()> {
        Ok(())
    }

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

    /// How a target shows it speaks this protocol, for the message naming the protocol a
    /// target speaks instead of the one asked for ("its readiness probe answers"); `None`:
    /// it has no probe cheap enough to try on a target that may speak another.
    fn load_probe_shows(&self) -> Option<&'static str> {
        None
    }

    /// Whether `target` answers as this protocol (with `auth`); the error says why not.
    fn load_probe<'a>(
        &'a self,
        _target: &'a loadgen::Target,
        _auth: Option<&'a loadgen::http::BasicAuth>,
    ) -> Local<'a, ()> {
        refuse(self.spec().name, "probe")
    }

    /// `load`'s route load (`--route`), the route name already found in the spec's list.
    fn load_route<'a>(&'a self, _job: RouteJob<'a>) -> Local<'a, RouteRun> {
        refuse(self.spec().name, "route load")
    }

    /// `load push|pull`: a whole-vault transfer.
    fn load_transfer<'a>(&'a self, _job: TransferJob<'a>) -> Local<'a, Transferred> {
        refuse(self.spec().name, "transfer")
    }

    /// Whether it has enrolled devices for `load` to hold (`load fanout`, a Locust worker).
    fn load_devices_support(&self) -> Support {
        Support::No("it enrols no devices")
    }

    /// `k` enrolled devices (or `shard`'s part of `k` per shard), enrolled when missing;
    /// only called where [`ProtocolImpl::load_devices_support`] is `Yes`.
    fn load_devices<'a>(
        &'a self,
        _conn: &'a Conn<'a>,
        _k: usize,
        _shard: Option<loadgen::Shard>,
    ) -> Local<'a, Vec<loadgen::Device>> {
        refuse(self.spec().name, "devices")
    }

    /// `load --locust-master`: the route load as a Locust worker, returning the exit code;
    /// only called where [`ProtocolImpl::load_devices_support`] is `Yes`.
    fn load_locust<'a>(&'a self, _job: LocustJob<'a>) -> Local<'a, i32> {
        refuse(self.spec().name, "Locust worker")
    }
}
