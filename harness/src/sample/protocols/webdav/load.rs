//! WebDAV's side of `vaultbench load`: its probe (OPTIONS answered with a `DAV` header), the
//! route load over one client, and push and pull of a vault.

use anyhow::Context;
use loadgen::http::BasicAuth;
use loadgen::protocols::webdav::{DavClient, DavRoute, DavRouteLoadReport};
use loadgen::{FeedBounds, Target};

use crate::sample::protocols::load::{
    Conn, Facts, Head, Op, RouteJob, RouteReport, RouteRun, TransferJob, Transferred, fmt_mode,
    human_tail, json_doc,
};

/// How a target shows it speaks the protocol.
pub const PROBE_SHOWS: &str = "OPTIONS answers with a DAV header";

/// Whether the target answers an OPTIONS with a `DAV` header (with the credentials given).
pub async fn probe(target: &Target, auth: Option<&BasicAuth>) -> anyhow::Result<()> {
    let (addr, owned) = (target.addr(), auth.cloned());
    let speaks = tokio::task::spawn_blocking(move || {
        loadgen::protocols::webdav::probe_ready(addr, owned.as_ref())
    })
    .await
    .unwrap_or(false);
    anyhow::ensure!(
        speaks,
        "target {} does not answer OPTIONS with a 2xx and a DAV header: not a WebDAV server, or --auth is missing or wrong",
        target.base()
    );
    Ok(())
}

/// A client of the target, after the protocol check, and the target as printed.
async fn client(conn: &Conn<'_>, feed: Option<FeedBounds>) -> anyhow::Result<(DavClient, String)> {
    let mut target = conn.target()?;
    if let Some(feed) = feed {
        target = target.with_feed_bounds(feed);
    }
    conn.check.check().await?;
    let base = target.base().to_owned();
    Ok((DavClient::new(target, conn.auth), base))
}

/// The route load over one client.
pub async fn route(job: RouteJob<'_>) -> anyhow::Result<RouteRun> {
    let route = DavRoute::ALL
        .into_iter()
        .find(|r| r.name() == job.route)
        .with_context(|| format!("--route: unknown route {:?}", job.route))?;
    let (client, target) = client(job.conn, None).await?;
    let cfg = loadgen::routeload::RouteLoadConfig {
        route,
        mode: job.mode,
        duration: job.duration,
        max_requests: job.max_requests,
        seed: job.conn.seed,
    }
    .in_folder(job.folder.to_owned());
    let report = loadgen::protocols::webdav::run_dav_route_load(&client, &cfg).await?;
    Ok(RouteRun {
        target,
        report: Box::new(report),
    })
}

impl RouteReport for DavRouteLoadReport {
    fn facts(&self) -> Facts<'_> {
        Facts {
            route: self.route.name(),
            wall_ns: self.wall_ns,
            requests: self.requests,
            throughput_per_s: self.throughput_per_s,
            stats: &self.stats,
        }
    }

    fn write_hdr_log(&self, w: &mut Vec<u8>) -> std::io::Result<()> {
        DavRouteLoadReport::write_hdr_log(self, w)
    }

    fn json(&self, head: &Head<'_>) -> serde_json::Result<String> {
        json_doc(head, self)
    }

    fn human(&self, head: &Head<'_>) -> String {
        format!(
            "WebDAV route {} against {}: {}, {:.2} s, seed {:#x}\n",
            self.route.name(),
            head.target,
            fmt_mode(self.config.mode),
            self.wall_ns as f64 / 1e9,
            head.seed
        ) + &human_tail(self, head)
    }
}

/// Push or pull the vault (a pull walks with Depth 1 per folder, or one `Depth: infinity`).
pub async fn transfer(job: TransferJob<'_>) -> anyhow::Result<Transferred> {
    let feed = loadgen::protocols::webdav::SPEC
        .feed
        .unwrap_or(FeedBounds::DEFAULT)
        .with(job.feed);
    let (client, target) = client(job.conn, Some(feed)).await?;
    let vault = job.vault;
    let report = match job.op {
        Op::Push { .. } => loadgen::protocols::webdav::push_vault(&client, vault)
            .await
            .with_context(|| format!("pushing {}", vault.display()))?,
        Op::Pull { depth_infinity, .. } => {
            std::fs::create_dir_all(vault)
                .with_context(|| format!("--vault {}", vault.display()))?;
            let depth = if depth_infinity {
                loadgen::protocols::webdav::Depth::Infinity
            } else {
                loadgen::protocols::webdav::Depth::One
            };
            loadgen::protocols::webdav::pull_vault(&client, vault, depth)
                .await
                .with_context(|| format!("pulling into {}", vault.display()))?
        }
    };
    Ok(Transferred { target, report })
}
