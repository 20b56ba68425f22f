//! The scenario's phases over WebDAV (`protocol = "webdav"`), against a WebDAV preset target:
//! cold push (MKCOL + PUT), cold pull (PROPFIND walk + GET, verified against the vault
//! digest), idle resync (a walk that finds nothing to do), edit propagation (B polls with
//! PROPFIND at the scenario's interval: the delay is poll-bounded and the keys say so),
//! folder rename (MOVE, then B's walk), route load (the WebDAV routes).
//!
//! Keys keep the obsync phases' names where the meaning carries over (`cold_push.wall_ms`,
//! `cold_pull.byte_identical`, `idle_resync.requests`, `edit.p50_ms`, `route.<r>.c<n>.p50_us`);
//! WebDAV-only ones are named for what they count (`edit.poll_interval_ms`, `edit.polls`).

use anyhow::{Context, bail};
use std::path::Path;
use std::time::{Duration, Instant};

use loadgen::TransferReport;
use loadgen::webdav::client::Recorder;
use loadgen::webdav::{DavClient, DavRoute, DavRouteLoadConfig, Depth};
use reports::schema::Better;
use scenarios::scenario::{Phase, WebdavOptions};

use crate::sample::phases::{encode_histogram, nearest_rank};
use crate::sample::plan::{Metrics, SamplePlan, ms};

/// How long B waits for one edit before the sample fails.
const EDIT_DEADLINE: Duration = Duration::from_secs(30);

/// Runs every phase of the plan's scenario with the WebDAV client `client` (A and B are two
/// clients of the same server: WebDAV has no devices).
pub async fn drive(
    plan: &SamplePlan,
    client: &DavClient,
    sample_dir: &Path,
    m: &mut Metrics,
) -> anyhow::Result<()> {
    let opts = plan.scenario.webdav.clone().unwrap_or_default();
    let depth = match opts.depth.as_str() {
        "infinity" => Depth::Infinity,
        _ => Depth::One,
    };
    let pull_dir = sample_dir.join("pull-b");
    std::fs::create_dir_all(&pull_dir)
        .with_context(|| format!("creating {}", pull_dir.display()))?;
    // The folder route load lists: the largest, under its new name once it was renamed.
    let mut load_folder = largest_folder(&plan.vault_dir)?.unwrap_or_default();
    for phase in &plan.scenario.phases {
        let name = phase.name();
        match phase {
            Phase::ColdStart => {}
            Phase::ColdPush { .. } => {
                let r = loadgen::webdav::push_vault(client, &plan.vault_dir)
                    .await
                    .context("cold push")?;
                transfer_metrics(name, &r, m);
            }
            Phase::ColdPull => {
                let r = loadgen::webdav::pull_vault(client, &pull_dir, depth)
                    .await
                    .context("cold pull")?;
                transfer_metrics(name, &r, m);
                let got = crate::commands::vault::tree_digest(&pull_dir)
                    .context("hashing the pulled tree")?;
                if got != plan.vault_digest {
                    bail!(
                        "cold pull: the pulled tree's digest {got} differs from the vault's {} ({} files pulled)",
                        plan.vault_digest,
                        r.files
                    );
                }
                m.exact(format!("{name}.byte_identical"), 1.0, "bool");
            }
            Phase::IdleResync => {
                let r = loadgen::webdav::resync(client, &pull_dir, depth)
                    .await
                    .context("idle resync")?;
                m.exact(format!("{name}.requests"), r.requests as f64, "count");
                m.exact(format!("{name}.mismatched"), r.mismatched as f64, "count");
                m.exact(format!("{name}.files_examined"), r.files as f64, "count");
                m.timing(
                    format!("{name}.wall_ms"),
                    r.wall_ns as f64 / 1e6,
                    "ms",
                    Better::Lower,
                );
            }
            Phase::EditPropagation { rounds } => {
                edit_propagation(client, plan, &pull_dir, &opts, *rounds, m).await?;
            }
            Phase::FolderRename => {
                let Some(folder) = largest_folder(&plan.vault_dir)? else {
                    bail!("folder rename: the vault has no folder");
                };
                let to = format!("{folder} renamed");
                let r = loadgen::webdav::rename(client, &folder, &to)
                    .await
                    .context("folder rename")?;
                m.timing(
                    format!("{name}.wall_ms"),
                    r.wall_ns as f64 / 1e6,
                    "ms",
                    Better::Lower,
                );
                m.exact(format!("{name}.requests"), r.requests as f64, "count");
                // B notices by walking (there is no feed) and moves its copy.
                let t1 = Instant::now();
                let rec = Recorder::new(false);
                let listing = loadgen::webdav::walk(client, &rec, "", depth)
                    .await
                    .context("folder rename: B's walk")?;
                let seen =
                    listing.dirs().any(|(p, _)| *p == to) && !listing.entries.contains_key(&folder);
                if !seen {
                    bail!("folder rename: B's walk does not show {folder:?} renamed to {to:?}");
                }
                std::fs::rename(pull_dir.join(&folder), pull_dir.join(&to))
                    .with_context(|| format!("folder rename: moving B's copy of {folder}"))?;
                m.timing(
                    format!("{name}.propagate_ms"),
                    ms(t1.elapsed()),
                    "ms",
                    Better::Lower,
                );
                m.exact(
                    format!("{name}.pull_requests"),
                    rec.snapshot().requests() as f64,
                    "count",
                );
                if load_folder == folder {
                    load_folder = to;
                }
            }
            // The scenario parser refuses a crash phase in a WebDAV scenario.
            Phase::Crash { .. } => bail!("crash phases drive obsync-v1 targets only"),
            Phase::RouteLoad {
                routes, in_flight, ..
            } => {
                let (seconds, max_requests) = phase
                    .route_bound()
                    .context("route_load step without a valid bound")?
                    .duration_and_ceiling();
                route_load(
                    client,
                    routes,
                    in_flight,
                    seconds,
                    max_requests,
                    plan.seed,
                    &load_folder,
                    m,
                )
                .await?;
            }
        }
    }
    Ok(())
}

fn transfer_metrics(p: &str, r: &TransferReport, m: &mut Metrics) {
    m.timing(
        format!("{p}.wall_ms"),
        r.wall_ns as f64 / 1e6,
        "ms",
        Better::Lower,
    );
    m.timing(
        format!("{p}.files_per_s"),
        r.files_per_s(),
        "files/s",
        Better::Higher,
    );
    m.exact(format!("{p}.files"), r.files as f64, "count");
    m.exact(format!("{p}.dirs"), r.dirs as f64, "count");
    m.exact(format!("{p}.bytes"), r.bytes as f64, "bytes");
    m.exact(format!("{p}.requests"), r.requests as f64, "count");
    let mut errors = 0;
    for (route, s) in &r.routes {
        m.exact(format!("{p}.requests.{route}"), s.requests as f64, "count");
        errors += s.errors();
        let sum = s.summary();
        for (q, v) in [
            ("p50", sum.p50_us),
            ("p95", sum.p95_us),
            ("p99", sum.p99_us),
        ] {
            m.timing(format!("{p}.{route}.{q}_us"), v, "us", Better::Lower);
        }
        if let Some(h) = encode_histogram(s.headline()) {
            m.histograms.insert(format!("{p}.{route}"), h);
        }
    }
    m.exact(format!("{p}.errors"), errors as f64, "count");
}

/// A edits a note (appending a line, so its size changes: nginx sends no ETag and every
/// server's last-modified has one-second resolution); B polls the note's folder with
/// PROPFIND Depth 1 every `poll_ms` until the listing shows the change, then GETs the note.
/// The delay is from A's PUT to B's copy on disk.
async fn edit_propagation(
    client: &DavClient,
    plan: &SamplePlan,
    pull_dir: &Path,
    opts: &WebdavOptions,
    rounds: usize,
    m: &mut Metrics,
) -> anyhow::Result<()> {
    let rel = first_note(&plan.vault_dir)?.context("edit propagation: the vault has no note")?;
    let folder = rel.rsplit_once('/').map_or("", |(d, _)| d).to_owned();
    let mut body = std::fs::read(plan.vault_dir.join(&rel))
        .with_context(|| format!("reading {rel} for editing"))?;
    let interval = Duration::from_millis(opts.poll_ms);
    let rec = Recorder::new(false);
    let (mut lat, mut polls) = (Vec::with_capacity(rounds), 0u64);
    for round in 0..rounds {
        let before = client
            .propfind(&rec, &folder, Depth::One)
            .await
            .context("edit propagation: B's listing")?
            .into_iter()
            .find(|e| DavClient::rel_of(&e.path) == Some(rel.as_str()))
            .with_context(|| format!("edit propagation: {rel} not listed"))?;
        body.extend_from_slice(
            format!("\nedit round {round}: vaultbench edit propagation\n").as_bytes(),
        );
        let want = body.len() as u64;
        let (poller, f, r, start) = (client.clone(), folder.clone(), rel.clone(), Instant::now());
        let waiter = tokio::spawn(async move {
            loadgen::webdav::poll_until_changed(
                &poller,
                &f,
                &r,
                Some(&before),
                Some(want),
                interval,
                start + EDIT_DEADLINE,
            )
            .await
        });
        let t0 = Instant::now();
        client
            .put(&rec, &rel, body.clone().into())
            .await
            .context("edit propagation: A's PUT")?;
        let seen = waiter
            .await
            .context("edit propagation: B's poller")?
            .with_context(|| format!("edit propagation: round {round}"))?;
        polls += seen.polls;
        let got = client
            .get(&rec, &rel)
            .await
            .context("edit propagation: B's GET")?;
        std::fs::write(pull_dir.join(&rel), &got)
            .with_context(|| format!("edit propagation: writing B's copy of {rel}"))?;
        lat.push(ms(t0.elapsed()));
        if got.as_ref() != body.as_slice() {
            bail!("edit propagation: B's copy of {rel} differs from A's after round {round}");
        }
    }
    lat.sort_by(|x, y| x.total_cmp(y));
    m.timing("edit.p50_ms", nearest_rank(&lat, 0.50), "ms", Better::Lower);
    m.timing("edit.p95_ms", nearest_rank(&lat, 0.95), "ms", Better::Lower);
    m.timing(
        "edit.max_ms",
        *lat.last().unwrap_or(&0.0),
        "ms",
        Better::Lower,
    );
    m.exact("edit.rounds", rounds as f64, "count");
    // The delay is poll-bounded: it cannot resolve below this interval.
    m.exact("edit.poll_interval_ms", opts.poll_ms as f64, "ms");
    m.timing("edit.polls", polls as f64, "count", Better::Lower);
    Ok(())
}

#[allow(clippy::too_many_arguments)]
async fn route_load(
    client: &DavClient,
    routes: &[String],
    levels: &[usize],
    seconds: f64,
    max_requests: u64,
    seed: u64,
    folder: &str,
    m: &mut Metrics,
) -> anyhow::Result<()> {
    for route in routes {
        let Some(r) = DavRoute::ALL.into_iter().find(|r| r.name() == route) else {
            let known: Vec<&str> = DavRoute::ALL.iter().map(|r| r.name()).collect();
            bail!(
                "route load: unknown WebDAV route {route:?} (known: {})",
                known.join(", ")
            );
        };
        for &level in levels {
            let cfg = DavRouteLoadConfig {
                route: r,
                mode: loadgen::Mode::Closed { in_flight: level },
                duration: Duration::from_secs_f64(seconds),
                max_requests,
                seed,
                folder: folder.to_owned(),
            };
            let rep = loadgen::webdav::run_dav_route_load(client, &cfg)
                .await
                .with_context(|| format!("route load {route} at {level} in flight"))?;
            let key = contract::key::RouteLoadKey::new(route, level as u32, "p50_us");
            let stats = &rep.stats;
            if stats.errors() > 0 {
                let bad: Vec<String> = stats
                    .status
                    .iter()
                    .filter(|(k, _)| !k.starts_with('2'))
                    .map(|(k, v)| format!("{v} x {k}"))
                    .collect();
                bail!(
                    "route load {route} at {level} in flight: {} of {} requests failed ({})",
                    stats.errors(),
                    stats.requests,
                    bad.join(", ")
                );
            }
            let sum = stats.summary();
            m.timing(key.to_string(), sum.p50_us, "us", Better::Lower);
            m.timing(
                key.with_stat("p99_us").to_string(),
                sum.p99_us,
                "us",
                Better::Lower,
            );
            m.timing(
                key.with_stat("rps").to_string(),
                rep.throughput_per_s,
                "req/s",
                Better::Higher,
            );
            m.timing(
                key.with_stat("errors").to_string(),
                stats.errors() as f64,
                "count",
                Better::Lower,
            );
            if let Some(h) = encode_histogram(stats.headline()) {
                m.histograms.insert(key.level(), h);
            }
        }
    }
    Ok(())
}

/// The first non-empty Markdown note in sorted order, dot-folders skipped (the obsync
/// phases pick the same note).
fn first_note(dir: &Path) -> anyhow::Result<Option<String>> {
    let mut stack = vec![dir.to_path_buf()];
    let mut best: Option<String> = None;
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d)? {
            let e = e?;
            let p = e.path();
            let rel = p.strip_prefix(dir)?.to_string_lossy().replace('\\', "/");
            if rel.starts_with('.') {
                continue;
            }
            if e.file_type()?.is_dir() {
                stack.push(p);
            } else if rel.ends_with(".md")
                && std::fs::metadata(&p)?.len() > 0
                && best.as_ref().is_none_or(|b| rel < *b)
            {
                best = Some(rel);
            }
        }
    }
    Ok(best)
}

/// The top-level folder with the most files under it (ties: the first by name), dot-folders
/// skipped (the obsync phases pick the same folder).
fn largest_folder(dir: &Path) -> anyhow::Result<Option<String>> {
    fn count(d: &Path) -> anyhow::Result<u64> {
        let mut n = 0;
        for e in std::fs::read_dir(d)? {
            let e = e?;
            n += if e.file_type()?.is_dir() {
                count(&e.path())?
            } else {
                1
            };
        }
        Ok(n)
    }
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.filter_map(|e| e.ok()).collect();
    entries.sort_by_key(|e| e.file_name());
    let mut best: Option<(u64, String)> = None;
    for e in entries {
        let name = e.file_name().to_string_lossy().into_owned();
        if !e.file_type()?.is_dir() || name.starts_with('.') {
            continue;
        }
        let n = count(&e.path())?;
        if best.as_ref().is_none_or(|(b, _)| n > *b) {
            best = Some((n, name));
        }
    }
    Ok(best.map(|(_, n)| n))
}
