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

impl ProtocolImpl for Impl {
    fn spec(&self) -> &'static loadgen::protocols::Spec {
        &loadgen::protocols::webdav::SPEC
    }

    fn paired(&self) -> Support {
        Support::Yes
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
        Box::pin(paired::drive_dav(job))
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

#[cfg(test)]
mod tests {
    #[test]
    fn presets_are_target_definitions_and_options_override() {
        let t = crate::sample::target::TargetSpec::parse("nginx-webdav").unwrap();
        assert_eq!(t.protocol(), Some("webdav"));
        assert_eq!(t.ready_check().to_string(), "OPTIONS / 2xx");
        let opts = crate::sample::target::TargetOpts {
            protocol: Some(contract::protocol::Protocol::named("webdav")),
            root: Some("/dav/".into()),
            auth: Some(loadgen::http::BasicAuth::new("u", "p")),
            ready: None,
            walk: Some(loadgen::protocols::webdav::WalkBounds {
                max_depth: 3,
                ..loadgen::protocols::webdav::WalkBounds::DEFAULT
            }),
        };
        let mut t = crate::sample::target::TargetSpec::parse_with(
            "rclone serve webdav {data} --addr {addr}",
            &opts,
        )
        .unwrap();
        assert_eq!(t.protocol(), Some("webdav"));
        assert_eq!(t.ready_check().to_string(), "tcp", "not settled yet");
        t.speak(&loadgen::protocols::webdav::SPEC);
        assert_eq!(t.ready_check().to_string(), "OPTIONS /dav/ 2xx");
        assert_eq!(t.def.auth, Some(loadgen::http::BasicAuth::new("u", "p")));
        assert_eq!(t.def.walk.map(|w| w.max_depth), Some(3));
        let r = crate::sample::target::TargetSpec::parse_with("ref", &opts).unwrap();
        assert_eq!(
            r.protocol(),
            Some(contract::protocol::DEFAULT_NAME),
            "ref keeps its own protocol"
        );
    }
}
