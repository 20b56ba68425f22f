//! tus's side of the sample: its phase client ([`client`]): an import of the vault, one
//! upload per file, and its read-back. tus has no listing, no change feed and no rename, so a
//! tus scenario runs push-type phases only ([`Impl::phase`] refuses the others with the
//! reason).

pub mod client;

use scenarios::scenario::Phase;

use crate::sample::protocols::seam::{Local, ProtocolImpl, Run, Support};

/// The registry's entry.
pub struct Impl;

impl ProtocolImpl for Impl {
    fn spec(&self) -> &'static loadgen::protocols::Spec {
        &loadgen::protocols::tus::SPEC
    }

    fn paired(&self) -> Support {
        Support::No("its client has no paired flow (an import is one upload after another)")
    }

    fn runs(&self, p: &Phase) -> Support {
        match p {
            Phase::ColdStart
            | Phase::ColdPush { .. }
            | Phase::ColdPull
            | Phase::TusResume { .. } => Support::Yes,
            Phase::IdleResync | Phase::EditPropagation { .. } | Phase::FolderRename => Support::No(
                "tus has no listing, change feed or rename; it runs cold_push, and cold_pull reads each upload back",
            ),
            _ => Support::No(
                "tus runs cold_push, the cold_pull that reads each upload back, and tus_resume",
            ),
        }
    }

    fn drive<'a>(&'a self, run: Run<'a>) -> Local<'a, ()> {
        Box::pin(async move {
            let mut client = client::TusSyncClient::connect(run.plan, run.server).await?;
            run.phases(&mut client).await
        })
    }
}
