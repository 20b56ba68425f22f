//! CouchDB's side of `vaultbench load`: a client of the database the URL names (LiveSync's
//! set-up checks the target answers as CouchDB), the route load over it, and the vault
//! replicated into or out of the database as Self-hosted LiveSync does.

use anyhow::Context;
use loadgen::protocols::couch::{
    CouchClient, CouchRoute, CouchRouteLoadConfig, CouchRouteLoadReport, Replica, Writer,
};

use crate::sample::protocols::load::{
    Conn, Facts, Head, Op, RouteJob, RouteReport, RouteRun, TransferJob, Transferred, human_tail,
    json_doc,
};

/// A client of `--url http://HOST:PORT/DB` (the database in the URL's path).
fn client(conn: &Conn<'_>) -> anyhow::Result<CouchClient> {
    let url = conn
        .url
        .context("--url is required (with --protocol couchdb: http://HOST:PORT/DB)")?;
    Ok(CouchClient::from_url(url, conn.auth, conn.allow_remote)?)
}

/// A route load's report and the database it loaded, for the summary.
struct Loaded {
    report: CouchRouteLoadReport,
    db: String,
}

/// The route load after LiveSync's set-up.
pub async fn route(job: RouteJob<'_>) -> anyhow::Result<RouteRun> {
    let client = client(job.conn)?;
    let route = CouchRoute::parse(job.route)
        .with_context(|| format!("--route: unknown route {:?}", job.route))?;
    let cfg = CouchRouteLoadConfig {
        route,
        mode: job.mode,
        duration: job.duration,
        max_requests: job.max_requests,
        seed: job.conn.seed,
    };
    let report = loadgen::protocols::couch::run_couch_route_load(&client, &cfg).await?;
    Ok(RouteRun {
        target: client.target().base().to_owned(),
        report: Box::new(Loaded {
            report,
            db: client.db_name().to_owned(),
        }),
    })
}

impl RouteReport for Loaded {
    fn facts(&self) -> Facts<'_> {
        let r = &self.report;
        Facts {
            route: r.route.name(),
            wall_ns: r.wall_ns,
            requests: r.requests,
            throughput_per_s: r.throughput_per_s,
            stats: &r.stats,
        }
    }

    fn write_hdr_log(&self, w: &mut Vec<u8>) -> std::io::Result<()> {
        self.report.write_hdr_log(w)
    }

    fn json(&self, head: &Head<'_>) -> serde_json::Result<String> {
        json_doc(head, &self.report)
    }

    fn human(&self, head: &Head<'_>) -> String {
        format!(
            "CouchDB route {} against {}/{}: {:.2} s, seed {:#x}\n",
            self.report.route.name(),
            head.target,
            self.db,
            self.report.wall_ns as f64 / 1e9,
            head.seed
        ) + &human_tail(self, head)
    }
}

/// The vault replicated into (or out of) the database.
pub async fn transfer(job: TransferJob<'_>) -> anyhow::Result<Transferred> {
    let feed = loadgen::protocols::couch::SPEC
        .feed
        .unwrap_or(loadgen::protocols::couch::FEED_DEFAULT)
        .with(job.feed);
    let client = client(job.conn)?.with_feed_bounds(feed);
    let vault = job.vault;
    let report = match job.op {
        Op::Push { .. } => {
            Writer::new("vaultbench-load-a")
                .push_vault(&client, vault)
                .await
                .with_context(|| format!("pushing {}", vault.display()))?
                .0
        }
        Op::Pull { .. } => Replica::new("vaultbench-load-b")
            .pull_vault(&client, vault)
            .await
            .with_context(|| format!("pulling into {}", vault.display()))?,
    };
    Ok(Transferred {
        target: client.target().base().to_owned(),
        report,
    })
}
