//! The crash phase: device A pushes the vault while the target's whole process tree is
//! killed with SIGKILL after a seeded number of acknowledged version posts. After each kill
//! the target restarts on the same data dir and address, device B pulls everything, and every
//! version A saw acknowledged must be there with its bytes; then the push resumes. After the
//! last crash the push finishes and the whole vault must pull back byte-identical.
//!
//! A SIGKILL keeps the page cache: what this proves is process-crash consistency (nothing
//! acknowledged is lost when the process dies), not power-loss durability (a missing fsync).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use loadgen::{Acknowledged, Device, PushOpts};
use rand::{Rng as _, SeedableRng};
use rand_chacha::ChaCha8Rng;
use reports::schema::Better;

use crate::prepare::vault::manifest_of_dir;
use crate::sample::plan::{Metrics, SamplePlan, ms};
use crate::sample::target::{Server, kill_pids, tree_pids};

/// How long one push may run before its crash point must have been reached.
const PUSH_DEADLINE: Duration = Duration::from_secs(300);

/// The ChaCha stream of the crash points (other purposes of the seed use other streams).
const CRASH_STREAM: u64 = 0xc7a5;

/// `crashes` distinct kill points in `1..files`, ascending: the number of acknowledged
/// version posts (folders included) after which the target is killed. Drawn from the
/// scenario's seed, so a seed names the same crash points on every machine.
pub fn crash_points(seed: u64, files: usize, crashes: usize) -> anyhow::Result<Vec<usize>> {
    if files < 2 || crashes >= files {
        bail!(
            "crash phase: {crashes} crash points need a vault of more than {crashes} files (it has {files})"
        );
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(CRASH_STREAM);
    let mut points = BTreeSet::new();
    while points.len() < crashes {
        // Uniform in 1..files by widening multiply, independent of rand's sampling algorithms.
        let span = (files - 1) as u128;
        points.insert(1 + ((u128::from(rng.next_u64()) * span) >> 64) as usize);
    }
    Ok(points.into_iter().collect())
}

/// What one look at the target after a restart found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Check {
    /// Acknowledged paths missing or with other bytes.
    pub lost: Vec<String>,
    /// Files present that were never acknowledged (posts in flight at the kill).
    pub unacked_present: u64,
}

/// Compares what the client saw acknowledged with a pulled tree (`pulled`: path -> sha256
/// of the files; `dirs`: folders present).
pub fn check(
    acked: &BTreeMap<String, Acknowledged>,
    pulled: &BTreeMap<String, String>,
    dirs: &BTreeSet<String>,
) -> Check {
    let mut c = Check::default();
    for (path, a) in acked {
        let ok = if a.is_dir {
            dirs.contains(path)
        } else {
            pulled.get(path) == Some(&a.sha256)
        };
        if !ok {
            c.lost.push(path.clone());
        }
    }
    c.unacked_present = pulled.keys().filter(|p| !acked.contains_key(*p)).count() as u64;
    c
}

/// Runs the crash phase. `a` pushes, `b` pulls; the server is killed and restarted in place.
#[allow(clippy::too_many_arguments)]
pub async fn run(
    plan: &SamplePlan,
    server: &mut Server,
    a: &Device,
    b: &Device,
    in_flight: usize,
    crashes: usize,
    sample_dir: &Path,
    m: &mut Metrics,
) -> anyhow::Result<()> {
    let vault = manifest_of_dir(&plan.vault_dir)?;
    let points = crash_points(plan.seed, vault.entries.len(), crashes)?;
    let opts = PushOpts {
        in_flight,
        checkpoint_every: usize::MAX,
    };
    let mut ready_ms = Vec::new();
    let (mut unacked_present, mut acked_at_kill, mut resume_requests) = (0u64, 0u64, 0u64);
    for (i, &k) in points.iter().enumerate() {
        let root = server.pid;
        let (dev, dir) = (a.clone(), plan.vault_dir.clone());
        let resume = i > 0;
        let push = tokio::spawn(async move {
            if resume {
                loadgen::resume_vault(&dev, &dir, &opts).await
            } else {
                loadgen::push_vault(&dev, &dir, &opts).await
            }
        });
        // A plain thread watches the acknowledgement count and kills the moment it reaches
        // the crash point: the async push keeps going at full speed meanwhile.
        let killed = Arc::new(AtomicBool::new(false));
        let finished = Arc::new(AtomicBool::new(false));
        let acked_then = Arc::new(AtomicU32::new(0));
        let watcher = {
            let (dev, killed, finished, acked_then) = (
                a.clone(),
                killed.clone(),
                finished.clone(),
                acked_then.clone(),
            );
            std::thread::spawn(move || {
                let deadline = Instant::now() + PUSH_DEADLINE;
                while !finished.load(Ordering::SeqCst) && Instant::now() < deadline {
                    let n = dev.acknowledged_count();
                    if n >= k {
                        kill_pids(&tree_pids(root));
                        acked_then.store(n as u32, Ordering::SeqCst);
                        killed.store(true, Ordering::SeqCst);
                        return;
                    }
                    std::thread::sleep(Duration::from_micros(100));
                }
            })
        };
        let pushed = tokio::time::timeout(PUSH_DEADLINE + Duration::from_secs(5), push).await;
        finished.store(true, Ordering::SeqCst);
        let _ = watcher.join();
        if !killed.load(Ordering::SeqCst) {
            let why = match pushed {
                Ok(Ok(Ok(_))) => "the push finished first".to_owned(),
                Ok(Ok(Err(e))) => format!("the push failed: {e}"),
                Ok(Err(e)) => format!("the push task failed: {e}"),
                Err(_) => format!("no answer within {}s", PUSH_DEADLINE.as_secs()),
            };
            bail!(
                "crash {}: the crash point ({k} acknowledged posts) was never reached: {why}",
                i + 1
            );
        }
        server.reap_killed()?;
        if let Ok(Ok(Ok(r))) = &pushed {
            resume_requests += if resume { r.requests } else { 0 };
        }
        acked_at_kill += u64::from(acked_then.load(Ordering::SeqCst));
        let acked = a.acknowledged();
        let ready = server
            .restart(&plan.target)
            .with_context(|| format!("crash {}: restarting the target", i + 1))?;
        ready_ms.push(ms(ready));
        let look = sample_dir.join(format!("crash-pull-{}", i + 1));
        // Enrolment is acknowledged state too: a target that forgot the devices fails here.
        let (pulled, dirs) = pull_tree(b, &look).await.with_context(|| {
            format!(
                "crash {} (killed after {k} acknowledged posts): the target lost acknowledged state: pulling after the restart failed",
                i + 1
            )
        })?;
        let c = check(&acked, &pulled, &dirs);
        if !c.lost.is_empty() {
            m.exact("crash.acked_lost", c.lost.len() as f64, "count");
            let shown: Vec<&str> = c.lost.iter().take(5).map(String::as_str).collect();
            bail!(
                "crash {} (killed after {k} acknowledged posts): crash.acked_lost = {}: the target lost acknowledged versions of {}{}",
                i + 1,
                c.lost.len(),
                shown.join(", "),
                if c.lost.len() > shown.len() {
                    format!(" and {} more", c.lost.len() - shown.len())
                } else {
                    String::new()
                }
            );
        }
        unacked_present += c.unacked_present;
        std::fs::remove_dir_all(&look).ok();
    }
    // The last resume runs to the end, then the whole vault must come back byte-identical.
    let r = loadgen::resume_vault(a, &plan.vault_dir, &opts)
        .await
        .context("crash: the final resumed push")?;
    resume_requests += r.requests;
    let fin = sample_dir.join("crash-pull-final");
    pull_tree(b, &fin).await.context("crash: the final pull")?;
    let got = crate::commands::vault::tree_digest(&fin).context("hashing the pulled tree")?;
    if got != plan.vault_digest {
        bail!(
            "crash: after {crashes} crashes and a resumed push, the pulled tree's digest {got} differs from the vault's {}",
            plan.vault_digest
        );
    }
    std::fs::remove_dir_all(&fin).ok();
    m.exact("crash.kills", points.len() as f64, "count");
    m.exact("crash.acked_lost", 0.0, "count");
    m.passed("crash.byte_identical");
    // Where in flight a kill lands depends on timing: how many posts the server had already
    // made durable without answering, and how many the resumed push redoes, are load-
    // dependent, so these are resource keys, not exact ones.
    m.resource("crash.unacked_present", unacked_present as f64, "count");
    m.resource("crash.acked_at_kill", acked_at_kill as f64, "count");
    m.resource("crash.resume_requests", resume_requests as f64, "count");
    ready_ms.sort_by(f64::total_cmp);
    m.timing(
        "crash.restart_ready_ms",
        ready_ms[ready_ms.len() / 2],
        "ms",
        Better::Lower,
    );
    Ok(())
}

/// Pulls everything into a fresh `dir` with device `b` (from seq 0): path -> sha256 of the
/// files, and the folders.
async fn pull_tree(
    b: &Device,
    dir: &Path,
) -> anyhow::Result<(BTreeMap<String, String>, BTreeSet<String>)> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    loadgen::pull_vault(b, dir, 0).await?;
    let files = manifest_of_dir(dir)?
        .entries
        .into_iter()
        .map(|e| (e.path, e.sha256))
        .collect();
    let mut dirs = BTreeSet::new();
    let mut stack = vec![(dir.to_owned(), String::new())];
    while let Some((abs, rel)) = stack.pop() {
        for e in std::fs::read_dir(&abs).with_context(|| format!("listing {}", abs.display()))? {
            let e = e?;
            if e.file_type()?.is_dir() {
                let name = e.file_name().to_string_lossy().into_owned();
                let r = if rel.is_empty() {
                    name
                } else {
                    format!("{rel}/{name}")
                };
                dirs.insert(r.clone());
                stack.push((e.path(), r));
            }
        }
    }
    Ok((files, dirs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crash_points_are_seeded_distinct_and_in_range() {
        let p = crash_points(0x5eed, 100, 5).unwrap();
        assert_eq!(p, crash_points(0x5eed, 100, 5).unwrap());
        assert_ne!(p, crash_points(0x5eee, 100, 5).unwrap());
        assert_eq!(p.len(), 5);
        assert!(p.windows(2).all(|w| w[0] < w[1]));
        assert!(p.iter().all(|&k| (1..100).contains(&k)));
        assert!(crash_points(1, 5, 5).is_err());
        assert!(crash_points(1, 1, 1).is_err());
    }

    fn ack(sha: &str, is_dir: bool) -> Acknowledged {
        Acknowledged {
            version_id: "v".into(),
            sha256: sha.into(),
            size: 1,
            is_dir,
        }
    }

    #[test]
    fn check_names_lost_and_counts_unacknowledged() {
        let acked: BTreeMap<String, Acknowledged> = [
            ("a.md".to_owned(), ack("aa", false)),
            ("b.md".to_owned(), ack("bb", false)),
            ("d".to_owned(), ack("", true)),
        ]
        .into();
        let dirs: BTreeSet<String> = ["d".to_owned()].into();
        let all: BTreeMap<String, String> = [
            ("a.md".to_owned(), "aa".to_owned()),
            ("b.md".to_owned(), "bb".to_owned()),
            ("c.md".to_owned(), "cc".to_owned()),
        ]
        .into();
        assert_eq!(
            check(&acked, &all, &dirs),
            Check {
                lost: vec![],
                unacked_present: 1
            }
        );
        // Other bytes under an acknowledged path count as lost, as does a missing folder.
        let mut changed = all.clone();
        changed.insert("b.md".into(), "XX".into());
        let c = check(&acked, &changed, &BTreeSet::new());
        assert_eq!(c.lost, vec!["b.md".to_owned(), "d".to_owned()]);
    }
}
