//! An MCP growth scenario's sample (`sizes = [1000, 5000, 10000]`): for each size n in order,
//! a fresh data dir holding the first n notes of the scenario's vault in generation order
//! (`scenarios::sizes`: the same notes plus more at each size), a fresh server process over
//! it (the previous one shut down as the scenario's shutdown does, then killed and reaped; the
//! new one spawned on the server's CPU set when the sample pins), and the same scenario phases
//! as any MCP sample (`super::serve`): cold boot, warm listings, the seeded workload at each
//! in-flight level, retrieval quality, shutdown.
//!
//! Each size's keys are the one-size keys with the size in their phase (`mcp_boot_n01000.`,
//! `mcp_calls_c1_n01000.search_files.p50_us`, `mcp_n01000.server.peak_rss_kib`). Then each
//! series is fitted against n (`reports::growth::sizes`): every call's latency by tool and
//! level, the server's CPU per call by level, the cold boot to the first listing and the
//! server's peak RSS, as `mcp_growth.SERIES.exponent` with its interval (`exponent_lo`,
//! `exponent_hi`); the one-line findings go to stderr.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, bail};
use contract::key::PhaseKey;
use loadgen::protocols::mcp::run;
use reports::growth::sizes::fit_sizes;
use scenarios::sizes::segment;

use crate::sample::contention;
use crate::sample::plan::{Metrics, SamplePlan};
use crate::sample::protocols::seam::Run;
use crate::sample::target::Server;

/// The phase of the fitted exponents.
pub const PHASE: &str = "mcp_growth";

/// Fills `data` (existing) with the first `n` notes of the scenario's vault, in generation
/// order, copied from the generated vault.
pub(super) fn seed(plan: &SamplePlan, n: u32, data: &Path) -> anyhow::Result<()> {
    let Some(profile) = scenarios::profile(&plan.scenario.profile) else {
        bail!(
            "sizes: the scenario's profile {:?} is not a named profile",
            plan.scenario.profile
        );
    };
    let paths = scenarios::sizes::note_paths(&profile, plan.seed);
    for rel in paths.iter().take(n as usize) {
        let from = plan.vault_dir.join(rel);
        if !from.is_file() {
            bail!(
                "sizes: note {rel:?} of the generated vault is missing from {} (sizes take the scenario's generated vault, not --vault)",
                plan.vault_dir.display()
            );
        }
        let to = data.join(rel);
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::copy(&from, &to)
            .with_context(|| format!("copying {} to {}", from.display(), to.display()))?;
    }
    Ok(())
}

/// The CPU set of `pid`'s main thread, if it can be read.
fn affinity(pid: u32) -> Option<Vec<usize>> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: sched_getaffinity writes at most size_of::<cpu_set_t>() bytes into `set`.
    let r = unsafe {
        libc::sched_getaffinity(
            pid as libc::pid_t,
            std::mem::size_of::<libc::cpu_set_t>(),
            &mut set,
        )
    };
    if r != 0 {
        return None;
    }
    Some(
        (0..libc::CPU_SETSIZE as usize)
            // SAFETY: `c` is below CPU_SETSIZE, the set's size.
            .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
            .collect(),
    )
}

/// The previous size's server (shut down by its run) killed and reaped, and a fresh one
/// started over `data`: on the same CPU set as the one before when the sample pins, its log
/// counted as the scenario says.
fn next_server(plan: &SamplePlan, server: &mut Server, data: &Path) -> anyhow::Result<()> {
    let pin = if plan.no_pin {
        None
    } else {
        affinity(server.pid)
    };
    server.reap_killed()?;
    server.data_dir = data.to_path_buf();
    // Spawned from this thread (PR_SET_PDEATHSIG follows it), which runs on the generator's
    // set: the server's set for the spawn, then back.
    let mine = contention::allowed_cpus().context("reading this thread's CPU set")?;
    if let Some(cpus) = &pin {
        contention::pin_this_thread(cpus).context("pinning the server's CPU set")?;
    }
    let started = server.restart(&plan.target);
    if pin.is_some() {
        contention::pin_this_thread(&mine).context("pinning the generator's CPU set")?;
    }
    started?;
    server.count_log(&plan.scenario.counts)?;
    Ok(())
}

/// A one-size key with the size `seg` in its phase: `mcp_boot.first_byte_us` →
/// `mcp_boot_n01000.first_byte_us`; a sample-wide server key `server.threads` →
/// `mcp_n01000.server.threads`.
pub(super) fn sized_key(key: &str, seg: &str) -> String {
    match key.split_once('.') {
        Some((contract::key::SERVER, rest)) => format!("mcp_{seg}.server.{rest}"),
        Some((phase, rest)) => format!("{phase}_{seg}.{rest}"),
        None => format!("{key}_{seg}"),
    }
}

/// One fitted series: what it is in words, and its points (size, value).
type Series = BTreeMap<String, (String, Vec<(f64, f64)>)>;

pub(super) async fn drive(run: Run<'_>) -> anyhow::Result<()> {
    let Run {
        plan,
        server,
        dir,
        m,
        bounds,
    } = run;
    let sizes = &plan.scenario.sizes;
    let mut series: Series = BTreeMap::new();
    let mut add = |name: String, what: String, n: u32, v: f64| {
        series
            .entry(name)
            .or_insert_with(|| (what, Vec::new()))
            .1
            .push((f64::from(n), v));
    };
    for (i, &n) in sizes.iter().enumerate() {
        let seg = segment(n);
        if i > 0 {
            let data = dir.join(format!("data-{seg}"));
            std::fs::create_dir_all(&data)
                .with_context(|| format!("creating {}", data.display()))?;
            seed(plan, n, &data)?;
            next_server(plan, server, &data).with_context(|| format!("size {n}"))?;
            bounds.restarted(server.pid);
        }
        eprintln!("  size {n}: a fresh server over the first {n} notes");
        let mut one = Metrics::default();
        let r = super::serve::serve(plan, server, &mut one, bounds)
            .await
            .with_context(|| format!("size {n}"))?;
        for (k, v) in one.map {
            m.map.insert(sized_key(&k, &seg), v);
        }
        for (k, v) in one.histograms {
            m.histograms.insert(sized_key(&k, &seg), v);
        }
        m.exact(format!("mcp_{seg}.notes"), f64::from(n), "notes");
        m.resource(
            format!("mcp_{seg}.server.peak_rss_kib"),
            r.peak_rss_kib as f64,
            "KiB",
        );
        add(
            "mcp_boot.first_list".into(),
            "cold boot to the first listing".into(),
            n,
            r.boot.first_list.as_micros() as f64,
        );
        add(
            "peak_rss".into(),
            "the server's peak RSS".into(),
            n,
            r.peak_rss_kib as f64,
        );
        for (level, l) in &r.levels {
            let p = run::calls_phase(*level);
            for (tool, us) in &l.latency_us {
                for &v in us {
                    add(
                        format!("{p}.{}", run::segment(tool)),
                        format!("{tool} latency at {level} in flight"),
                        n,
                        v as f64,
                    );
                }
            }
            if l.calls > 0 {
                add(
                    format!("{p}.server_cpu_per_call"),
                    format!("server CPU per call at {level} in flight"),
                    n,
                    l.cpu_us as f64 / l.calls as f64,
                );
            }
        }
    }
    let (from, to) = (f64::from(sizes[0]), f64::from(sizes[sizes.len() - 1]));
    for (line, keys) in fits(&series, from, to) {
        eprintln!("  {PHASE}: {line}");
        for (k, v) in keys {
            m.resource(k, v, "exponent");
        }
    }
    Ok(())
}

/// Each series' finding and its keys (`mcp_growth.SERIES.exponent`, `exponent_lo`,
/// `exponent_hi`); a series that cannot be fitted (a zero cost) gets its line and no keys.
fn fits(series: &Series, from: f64, to: f64) -> Vec<(String, Vec<(String, f64)>)> {
    let round3 = |v: f64| (v * 1e3).round() / 1e3;
    series
        .iter()
        .map(|(name, (what, points))| match fit_sizes(what, points) {
            Ok(g) => {
                let key = |stat: &str| PhaseKey::new(PHASE, &format!("{name}.{stat}")).to_string();
                (
                    g.finding(from, to),
                    vec![
                        (key("exponent"), round3(g.exponent)),
                        (key("exponent_lo"), round3(g.lo)),
                        (key("exponent_hi"), round3(g.hi)),
                    ],
                )
            }
            Err(e) => (format!("no fit: {e}"), Vec::new()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sized_keys_keep_their_family_and_parse_back() {
        for (k, want) in [
            ("mcp_boot.first_byte_us", "mcp_boot_n01000.first_byte_us"),
            (
                "mcp_calls_c8.search_files.p99_us",
                "mcp_calls_c8_n01000.search_files.p99_us",
            ),
            (
                "mcp_calls_c1.server.cpu_us_per_call",
                "mcp_calls_c1_n01000.server.cpu_us_per_call",
            ),
            ("server.threads", "mcp_n01000.server.threads"),
            (
                "mcp_quality.recall_at_10",
                "mcp_quality_n01000.recall_at_10",
            ),
        ] {
            let got = sized_key(k, &segment(1000));
            assert_eq!(got, want);
            let parsed: contract::key::MetricKey = got.parse().unwrap();
            assert_eq!(parsed.to_string(), got);
            // The family is the one-size key's: a phase route stays a phase route.
            let before: contract::key::MetricKey = k.parse().unwrap();
            assert_eq!(
                std::mem::discriminant(&parsed),
                std::mem::discriminant(&before),
                "{k}"
            );
        }
    }

    #[test]
    fn a_walking_tool_is_fitted_linear_and_its_keys_named() {
        let mut s: Series = BTreeMap::new();
        let walk: Vec<(f64, f64)> = [1000.0, 5000.0, 10_000.0]
            .iter()
            .flat_map(|&n| (0..10).map(move |i| (n, n * (1.0 + 0.01 * f64::from(i)))))
            .collect();
        s.insert(
            "mcp_calls_c1.search_files".into(),
            ("search_files latency at 1 in flight".into(), walk),
        );
        s.insert(
            "peak_rss".into(),
            (
                "peak RSS".into(),
                vec![(1000.0, 0.0), (5000.0, 1.0), (10_000.0, 2.0)],
            ),
        );
        let f = fits(&s, 1000.0, 10_000.0);
        assert_eq!(f.len(), 2);
        assert!(
            f[0].0
                .starts_with("search_files latency at 1 in flight grows as n^1.00")
                && f[0].0.ends_with("linear in the vault (O(n))"),
            "{}",
            f[0].0
        );
        let keys: Vec<&str> = f[0].1.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "mcp_growth.mcp_calls_c1.search_files.exponent",
                "mcp_growth.mcp_calls_c1.search_files.exponent_lo",
                "mcp_growth.mcp_calls_c1.search_files.exponent_hi",
            ]
        );
        assert!((f[0].1[0].1 - 1.0).abs() < 0.01);
        // A zero cost cannot be fitted on log axes: a line, no keys.
        assert!(
            f[1].0.starts_with("no fit:") && f[1].1.is_empty(),
            "{:?}",
            f[1]
        );
    }
}
