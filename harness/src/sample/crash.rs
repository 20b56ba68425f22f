//! The crash phase: device A pushes the vault while the target's whole process tree is
//! killed with SIGKILL after a seeded number of acknowledged version posts (`kill_at =
//! "acked"`), or while a large chunk upload's body is half sent (`"mid_body"`: a
//! [`loadgen::MidBodyTrap`] writes a seeded number of the body's bytes and holds the rest;
//! the chunk must then be absent or whole, never torn). After each kill
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
use loadgen::{Acknowledged, Device, MidBodyTrap, PushOpts, TrapState};
use rand::{Rng as _, SeedableRng};
use rand_chacha::ChaCha8Rng;
use reports::schema::Better;
use scenarios::scenario::KillAt;
use sha2::Digest as _;

use crate::sample::plan::{Metrics, SamplePlan, ms};
use crate::sample::target::{Server, kill_pids, tree_pids};
use crate::tree::manifest_of_dir;

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

/// Smallest chunk body a mid-body crash point cuts: large uploads only (the client cuts files
/// into 1 MiB chunks; a quarter of one keeps notes, which are kilobytes, out).
pub const MID_BODY_MIN_BYTES: usize = 256 * 1024;

/// The client's chunk size (the load generator cuts files into fixed 1 MiB chunks, as its
/// crate documentation states).
const CLIENT_CHUNK_BYTES: u64 = 1024 * 1024;

/// Chunk bodies of at least [`MID_BODY_MIN_BYTES`] that pushing files of these sizes sends.
pub fn large_bodies(sizes: impl Iterator<Item = u64>) -> usize {
    let chunk = CLIENT_CHUNK_BYTES;
    sizes
        .map(|n| {
            let tail = n % chunk;
            (n / chunk) as usize + usize::from(tail >= MID_BODY_MIN_BYTES as u64)
        })
        .sum()
}

/// One mid-body crash point: let `skip` large bodies through, then cut the next one after
/// `MidBodyTrap::cut_of(draw, len)` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MidBodyPoint {
    pub skip: usize,
    pub draw: u64,
}

/// `crashes` mid-body crash points over `bodies` large chunk bodies, from the scenario's
/// seed. A body let through is stored (one file's chunks go up one after another), a cut one
/// is not, so crash `i` skips a seeded share of the bodies still missing and always leaves
/// the cut one to cut.
pub fn mid_body_points(
    seed: u64,
    bodies: usize,
    crashes: usize,
) -> anyhow::Result<Vec<MidBodyPoint>> {
    if bodies == 0 {
        bail!(
            "crash phase: kill_at = \"mid_body\" needs a vault with a file of at least {} KiB (a large upload to cut; the small-big profile has one)",
            MID_BODY_MIN_BYTES / 1024
        );
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(CRASH_STREAM + 1);
    let mut left = bodies;
    let mut out = Vec::with_capacity(crashes);
    for _ in 0..crashes {
        let skip = ((u128::from(rng.next_u64()) * left as u128) >> 64) as usize;
        left -= skip;
        out.push(MidBodyPoint {
            skip,
            draw: rng.next_u64(),
        });
    }
    Ok(out)
}

/// How the crash phase runs (the scenario's `crash` phase).
#[derive(Debug, Clone, Copy)]
pub struct How {
    pub in_flight: usize,
    pub crashes: usize,
    pub kill_at: KillAt,
}

/// A crash point of either kind.
#[derive(Debug, Clone, Copy)]
enum Point {
    Acked(usize),
    MidBody(MidBodyPoint),
}

impl std::fmt::Display for Point {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Point::Acked(k) => write!(f, "{k} acknowledged posts"),
            Point::MidBody(p) => write!(
                f,
                "mid-body of the large upload after {} large bodies",
                p.skip
            ),
        }
    }
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
pub async fn run(
    plan: &SamplePlan,
    server: &mut Server,
    a: &Device,
    b: &Device,
    how: How,
    sample_dir: &Path,
    m: &mut Metrics,
) -> anyhow::Result<()> {
    let vault = manifest_of_dir(&plan.vault_dir)?;
    let points: Vec<Point> = match how.kill_at {
        KillAt::Acked => crash_points(plan.seed, vault.entries.len(), how.crashes)?
            .into_iter()
            .map(Point::Acked)
            .collect(),
        KillAt::MidBody => {
            let bodies = large_bodies(vault.entries.iter().map(|e| e.size));
            mid_body_points(plan.seed, bodies, how.crashes)?
                .into_iter()
                .map(Point::MidBody)
                .collect()
        }
    };
    let opts = PushOpts {
        in_flight: how.in_flight,
        checkpoint_every: usize::MAX,
    };
    let mut ready_ms = Vec::new();
    let (mut unacked_present, mut acked_at_kill, mut resume_requests) = (0u64, 0u64, 0u64);
    let (mut mid_kills, mut mid_sent, mut mid_len, mut mid_answered) = (0u64, 0u64, 0u64, 0u64);
    for (i, &point) in points.iter().enumerate() {
        let root = server.pid;
        let trap = match point {
            Point::MidBody(p) => {
                let t = Arc::new(MidBodyTrap::new(p.skip, MID_BODY_MIN_BYTES, p.draw));
                a.arm_mid_body(t.clone());
                Some(t)
            }
            Point::Acked(_) => None,
        };
        let (dev, dir) = (a.clone(), plan.vault_dir.clone());
        let resume = i > 0;
        let push =
            tokio::spawn(
                async move { loadgen::push_vault_counted(&dev, &dir, &opts, resume).await },
            );
        // A plain thread watches the acknowledgement count (or the trap) and kills the moment
        // the crash point is reached: the async push keeps going at full speed meanwhile.
        let killed = Arc::new(AtomicBool::new(false));
        let finished = Arc::new(AtomicBool::new(false));
        let acked_then = Arc::new(AtomicU32::new(0));
        let watcher = {
            let (dev, killed, finished, acked_then, trap) = (
                a.clone(),
                killed.clone(),
                finished.clone(),
                acked_then.clone(),
                trap.clone(),
            );
            std::thread::spawn(move || {
                let deadline = Instant::now() + PUSH_DEADLINE;
                while !finished.load(Ordering::SeqCst) && Instant::now() < deadline {
                    let due = match (point, &trap) {
                        (Point::Acked(k), _) => dev.acknowledged_count() >= k,
                        // Held with its cut written: the target has part of the body.
                        (Point::MidBody(_), Some(t)) => {
                            matches!(t.state(), TrapState::Held(c) if c.sent > 0)
                        }
                        (Point::MidBody(_), None) => false,
                    };
                    if due {
                        kill_pids(&tree_pids(root));
                        acked_then.store(dev.acknowledged_count() as u32, Ordering::SeqCst);
                        killed.store(true, Ordering::SeqCst);
                        if let Some(t) = &trap {
                            t.release();
                        }
                        return;
                    }
                    std::thread::sleep(Duration::from_micros(100));
                }
            })
        };
        let pushed = tokio::time::timeout(PUSH_DEADLINE + Duration::from_secs(5), push).await;
        finished.store(true, Ordering::SeqCst);
        let _ = watcher.join();
        if let Some(t) = &trap {
            t.release();
        }
        a.disarm_mid_body();
        if !killed.load(Ordering::SeqCst) {
            let why = match pushed {
                Ok(Ok(Ok(_))) => "the push finished first".to_owned(),
                Ok(Ok(Err(e))) => format!("the push failed: {}", e.error),
                Ok(Err(e)) => format!("the push task failed: {e}"),
                Err(_) => format!("no answer within {}s", PUSH_DEADLINE.as_secs()),
            };
            bail!(
                "crash {}: the crash point ({point}) was never reached: {why}",
                i + 1
            );
        }
        server.reap_killed()?;
        // A resumed push counts whole, also when this kill cut it short.
        if resume {
            resume_requests += match &pushed {
                Ok(Ok(Ok(r))) => r.requests,
                Ok(Ok(Err(e))) => e.report.requests,
                _ => 0,
            };
        }
        acked_at_kill += u64::from(acked_then.load(Ordering::SeqCst));
        let acked = a.acknowledged();
        let ready = server
            .restart(&plan.target)
            .with_context(|| format!("crash {}: restarting the target", i + 1))?;
        ready_ms.push(ms(ready));
        let cut = match trap.as_ref().map(|t| t.state()) {
            Some(TrapState::Done(c)) => Some(c),
            Some(s) => bail!(
                "crash {}: the mid-body crash point's upload did not end ({s:?})",
                i + 1
            ),
            None => None,
        };
        let at = match &cut {
            Some(c) => format!(
                "killed mid-body after {} of {} bytes of PUT {}",
                c.sent, c.len, c.path
            ),
            None => format!(
                "killed after {} acknowledged posts",
                acked_then.load(Ordering::SeqCst)
            ),
        };
        if let Some(c) = &cut {
            mid_kills += 1;
            mid_sent += c.sent;
            mid_len += c.len;
            mid_answered += u64::from(c.answered);
            // The half-sent chunk must be absent, or whole: never a torn body under its sid.
            let sid = c.path.rsplit('/').next().unwrap_or_default();
            let served = loadgen::get_chunk(b, sid).await.with_context(|| {
                format!(
                    "crash {} ({at}): reading the cut chunk after the restart",
                    i + 1
                )
            })?;
            if let Some(body) = served
                && hex::encode(sha2::Sha256::digest(&body)) != sid
            {
                m.exact("crash.torn_served", 1.0, "count");
                bail!(
                    "crash {} ({at}): crash.torn_served = 1: the target serves {} bytes under {sid} that do not hash to it (a torn upload)",
                    i + 1,
                    body.len()
                );
            }
        }
        let look = sample_dir.join(format!("crash-pull-{}", i + 1));
        // Enrolment is acknowledged state too: a target that forgot the devices fails here.
        let (pulled, dirs) = pull_tree(b, &look).await.with_context(|| {
            format!(
                "crash {} ({at}): the target lost acknowledged state: pulling after the restart failed",
                i + 1
            )
        })?;
        let c = check(&acked, &pulled, &dirs);
        if !c.lost.is_empty() {
            m.exact("crash.acked_lost", c.lost.len() as f64, "count");
            let shown: Vec<&str> = c.lost.iter().take(5).map(String::as_str).collect();
            bail!(
                "crash {} ({at}): crash.acked_lost = {}: the target lost acknowledged versions of {}{}",
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
    let r = loadgen::push_vault_counted(a, &plan.vault_dir, &opts, true)
        .await
        .map_err(|e| e.error)
        .context("crash: the final resumed push")?;
    resume_requests += r.requests;
    let fin = sample_dir.join("crash-pull-final");
    pull_tree(b, &fin).await.context("crash: the final pull")?;
    let got = crate::tree::tree_digest(&fin).context("hashing the pulled tree")?;
    if got != plan.vault_digest {
        bail!(
            "crash: after {} crashes and a resumed push, the pulled tree's digest {got} differs from the vault's {}",
            how.crashes,
            plan.vault_digest
        );
    }
    std::fs::remove_dir_all(&fin).ok();
    m.exact("crash.kills", points.len() as f64, "count");
    m.exact("crash.acked_lost", 0.0, "count");
    m.passed("crash.byte_identical");
    if how.kill_at == KillAt::MidBody {
        // The cuts are seeded (which body, how many of its bytes): exact keys.
        m.exact("crash.mid_body_kills", mid_kills as f64, "count");
        m.exact("crash.mid_body_bytes_sent", mid_sent as f64, "bytes");
        m.exact("crash.mid_body_bytes_total", mid_len as f64, "bytes");
        m.exact("crash.mid_body_answered", mid_answered as f64, "count");
        m.exact("crash.torn_served", 0.0, "count");
    }
    // Where in flight a kill lands depends on timing: how many posts the server had already
    // made durable without answering, and how many requests the resumed pushes made, are
    // load-dependent, so these are resource keys, not exact ones.
    m.resource("crash.unacked_present", unacked_present as f64, "count");
    m.resource("crash.acked_at_kill", acked_at_kill as f64, "count");
    m.resource("crash.resume_requests", resume_requests as f64, "count");
    m.timing(
        "crash.restart_ready_ms",
        contract::schema::median(&ready_ms).unwrap_or(0.0),
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

    #[test]
    fn mid_body_points_are_seeded_and_always_leave_a_body_to_cut() {
        let p = mid_body_points(0x5eed, 4, 3).unwrap();
        assert_eq!(p, mid_body_points(0x5eed, 4, 3).unwrap());
        assert_ne!(p, mid_body_points(0x5eee, 4, 3).unwrap());
        for seed in 0..200 {
            let p = mid_body_points(seed, 4, 5).unwrap();
            // Each skipped body is stored; the cut one is not: the skips never use up all 4.
            assert!(p.iter().map(|x| x.skip).sum::<usize>() < 4, "{p:?}");
        }
        assert!(mid_body_points(1, 0, 1).is_err());
    }

    #[test]
    fn large_bodies_count_full_chunks_and_a_large_tail() {
        let mib = CLIENT_CHUNK_BYTES;
        assert_eq!(large_bodies([4 * mib].into_iter()), 4);
        assert_eq!(large_bodies([mib + 300 * 1024, 2000].into_iter()), 2);
        assert_eq!(large_bodies([mib + 1000, 200 * 1024].into_iter()), 1);
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
