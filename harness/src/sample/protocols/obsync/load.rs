//! The signed protocol's side of `vaultbench load`: its readiness probe, enrolled devices
//! (from the state file, enrolled where missing), the route load over them, push and pull as
//! one device, and the Locust worker.

use anyhow::{Context, bail};
use contract::exit;
use loadgen::protocols::obsync::devices::{Enrolment, ensure_devices, ensure_shard_devices};
use loadgen::{
    Device, HistSummary, PushOpts, Route, RouteLoadConfig, RouteLoadReport, Shard, Target,
    mirror_pull, mirror_push, pull_vault, push_vault, run_route_load,
};

use crate::sample::protocols::load::{
    Conn, Facts, Head, LocustJob, Op, RouteJob, RouteReport, RouteRun, TransferJob, Transferred,
    fmt_mode, fmt_summary, json_doc, statuses,
};

/// How a target shows it speaks the protocol.
pub const PROBE_SHOWS: &str = "its readiness probe answers";

/// The readiness probe.
pub async fn probe(target: &Target) -> anyhow::Result<()> {
    Ok(loadgen::probe(target).await?)
}

/// A route by its name (the registry checked it is one).
fn route_named(name: &str) -> anyhow::Result<Route> {
    Route::ALL
        .into_iter()
        .find(|r| r.name() == name)
        .with_context(|| format!("--route: unknown route {name:?}"))
}

/// `k` devices of the state file (or `shard`'s part, `k` per shard), enrolled where missing.
pub async fn devices(
    conn: &Conn<'_>,
    k: usize,
    shard: Option<Shard>,
) -> anyhow::Result<Vec<Device>> {
    let target = conn.target()?;
    devices_on(&target, conn, k, shard).await
}

async fn devices_on(
    target: &Target,
    conn: &Conn<'_>,
    k: usize,
    shard: Option<Shard>,
) -> anyhow::Result<Vec<Device>> {
    let e = Enrolment {
        target,
        state: conn.state,
        setup_token_file: conn.setup_token_file,
        seed: conn.seed,
    };
    match shard {
        Some(shard) => ensure_shard_devices(&e, k, shard, conn.check.check()).await,
        None => {
            let mut d = ensure_devices(&e, k, conn.check.check()).await?;
            d.truncate(k);
            Ok(d)
        }
    }
}

/// The route load over `--devices` enrolled devices.
pub async fn route(job: RouteJob<'_>) -> anyhow::Result<RouteRun> {
    let target = job.conn.target()?;
    let route = route_named(job.route)?;
    if job.devices == 0 {
        bail!("--devices 0: must be at least 1");
    }
    let devices = devices_on(&target, job.conn, job.devices, job.shard).await?;
    let cfg = RouteLoadConfig {
        route,
        mode: job.mode,
        duration: job.duration,
        max_requests: job.max_requests,
        seed: job.conn.seed,
    };
    let report = run_route_load(&devices, &cfg).await?;
    Ok(RouteRun {
        target: target.base().to_owned(),
        report: Box::new(report),
    })
}

impl RouteReport for RouteLoadReport {
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
        RouteLoadReport::write_hdr_log(self, w)
    }

    fn json(&self, head: &Head<'_>) -> serde_json::Result<String> {
        json_doc(head, self)
    }

    /// With the devices, the uncorrected latency of an open loop, signing and the requests
    /// per second.
    fn human(&self, head: &Head<'_>) -> String {
        let r = self;
        let mut out = format!(
            "route {} against {}: {}, {} device(s), {:.2} s, seed {:#x}\n",
            r.route.name(),
            head.target,
            fmt_mode(r.config.mode),
            r.devices,
            r.wall_ns as f64 / 1e9,
            head.seed
        );
        out += &format!(
            "requests {} ({:.1}/s)  ok {}  errors {}  [{}]\n",
            r.requests,
            r.throughput_per_s,
            r.stats.ok(),
            r.stats.errors(),
            statuses(&r.stats.status)
        );
        if let Some(c) = &r.stats.corrected {
            out += &fmt_summary("latency", &HistSummary::of(c, 1000));
            out += &fmt_summary("uncorrected", &HistSummary::of(&r.stats.latency, 1000));
            out += &format!("late starts    {}\n", r.late_starts);
        } else {
            out += &fmt_summary("latency", &HistSummary::of(&r.stats.latency, 1000));
        }
        out += &fmt_summary("signing", &r.signing_summary());
        let per_s: Vec<String> = r.stats.per_second.iter().map(u64::to_string).collect();
        out += &format!("per second     {}\n", per_s.join(" "));
        if let Some(kib) = head.peak_rss_kib {
            out += &format!("peak RSS       {:.1} MiB\n", kib as f64 / 1024.0);
        }
        out
    }
}

/// Push or pull as one enrolled device.
pub async fn transfer(job: TransferJob<'_>) -> anyhow::Result<Transferred> {
    let feed = loadgen::protocols::obsync::SPEC
        .feed
        .unwrap_or(loadgen::FeedBounds::DEFAULT)
        .with(job.feed);
    let target = job.conn.target()?.with_feed_bounds(feed);
    let devices = devices_on(&target, job.conn, job.device + 1, None).await?;
    let dev = &devices[job.device];
    let vault = job.vault;
    let report = match job.op {
        Op::Push {
            in_flight,
            checkpoint_every,
            mirror,
        } => {
            let opts = PushOpts {
                in_flight,
                checkpoint_every,
            };
            if mirror {
                mirror_push(dev, vault, &opts).await
            } else {
                push_vault(dev, vault, &opts).await
            }
            .with_context(|| format!("pushing {}", vault.display()))?
        }
        Op::Pull { mirror: true, .. } => mirror_pull(dev, vault)
            .await
            .with_context(|| format!("pulling into {}", vault.display()))?,
        Op::Pull { since, .. } => pull_vault(dev, vault, since)
            .await
            .with_context(|| format!("pulling into {}", vault.display()))?,
    };
    Ok(Transferred {
        target: target.base().to_owned(),
        report,
    })
}

/// The route load as a Locust worker: connects, takes the worker index the master assigns
/// (or `--shard`'s), enrols that index's device range under the state file's lock, then runs
/// users as the master says until it says quit (exit 0) or goes silent (exit 9,
/// `MASTER_GONE`).
pub async fn locust(job: LocustJob<'_>) -> anyhow::Result<i32> {
    let target = job.conn.target()?;
    let route = route_named(job.route)?;
    let master = job.master;
    let cfg = loadgen::locust::WorkerConfig {
        master: master.to_owned(),
        route,
        seed: job.conn.seed,
        liveness: job.master_timeout,
        hdr_log: job.hdr_log.map(ToOwned::to_owned),
        rss_bytes: std::sync::Arc::new(|| {
            procstat::read::rss_kib(procstat::Pid::Current)
                .ok()
                .flatten()
                .unwrap_or(0)
                * 1024
        }),
    };
    let conn = loadgen::locust::connect(&cfg).await?;
    let index = match (job.shard, conn.index) {
        (Some(s), _) => s.index,
        (None, Some(i)) => i,
        (None, None) => bail!(
            "locust master {master} assigned no worker index (a master before Locust 2.10.3): pass --shard I/N"
        ),
    };
    let shard = job.shard.unwrap_or(Shard {
        index,
        count: index + 1,
    });
    let devices = devices_on(&target, job.conn, job.devices, Some(shard)).await?;
    eprintln!(
        "vaultbench: locust worker {index} of master {master}: route {}, devices {}..{} of the state file",
        route.name(),
        index as usize * job.devices,
        (index as usize + 1) * job.devices
    );
    match conn.run(devices, &cfg).await? {
        loadgen::locust::Outcome::Quit => Ok(exit::OK),
        loadgen::locust::Outcome::MasterGone { silent } => {
            eprintln!(
                "vaultbench: locust master {master} silent for {:.1} s (more than --master-timeout {:?}): load stopped",
                silent.as_secs_f64(),
                job.master_timeout
            );
            Ok(exit::MASTER_GONE)
        }
    }
}
