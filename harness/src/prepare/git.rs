//! `git:REV` targets: the revision's worktree under the cache, its build (cached by tree hash,
//! build command and toolchain), and the server's command line in that worktree.
//!
//! A build runs before any sample, never during one: `record`, `ab` and `bisect` resolve
//! their `git:` targets right after taking the machine lock. The cache holds, per key
//! (SHA-256 of tree, build command and toolchain), `tree/` (a detached `git worktree`),
//! `build.log` and `build.json`; `build.json` is written last, so a build that was interrupted
//! is redone. A failed build is cached too: its revision does not build with this command and
//! toolchain, and asking again gives the same failure without running it.

use anyhow::{Context, bail};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use contract::schema::GitBuild;

use crate::sample::target::{TargetOpts, TargetSpec};

/// The revision that stands for the working tree as it is on disk, committed or not.
pub const WORKTREE: &str = "WORKTREE";

/// How many lines of a failed build's log its error shows.
const LOG_TAIL_LINES: usize = 15;

/// The flags of `git:REV` targets, shared by `record`, `ab` and `bisect`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct GitArgs {
    /// The repository of `git:REV` targets (default: the current directory's).
    #[arg(long, value_name = "DIR")]
    pub repo: Option<PathBuf>,
    /// A `git:REV` target's build command, run with `sh -c` in the revision's worktree
    /// (e.g. `cargo build --release`); none when absent.
    #[arg(long, value_name = "CMD")]
    pub build: Option<String>,
    /// A `git:REV` target's server executable, relative to the worktree (it gets
    /// `--listen {addr} --data {data}`, like any executable target).
    #[arg(long, value_name = "PATH", conflicts_with = "run")]
    pub bin: Option<String>,
    /// A `git:REV` target's command line with {addr}, {host}, {port} and {data}; words naming
    /// a file of the worktree are taken from the worktree.
    #[arg(long, value_name = "CMD")]
    pub run: Option<String>,
}

/// The revision of a `git:REV` target, or `None` for any other target.
pub fn rev_of(given: &str) -> Option<&str> {
    given.strip_prefix("git:")
}

/// A commit on a path: its hash and subject.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Commit {
    pub id: String,
    pub subject: String,
}

/// A git repository, driven through the `git` command.
#[derive(Debug, Clone)]
pub struct Repo {
    /// The top of the working tree.
    pub dir: PathBuf,
}

impl Repo {
    /// The repository at `dir` (the current directory when `None`), by its top directory.
    pub fn open(dir: Option<&Path>) -> anyhow::Result<Repo> {
        let start = dir.map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        let top = git_out(&start, &["rev-parse", "--show-toplevel"]).map_err(|e| {
            anyhow::anyhow!("--repo {}: not a git repository ({e})", start.display())
        })?;
        Ok(Repo {
            dir: PathBuf::from(top.trim()),
        })
    }

    /// `git ARGS` in the repository: its stdout.
    pub fn git(&self, args: &[&str]) -> anyhow::Result<String> {
        git_out(&self.dir, args)
    }

    /// The commit `rev` names (`WORKTREE`: `HEAD`), with its subject.
    pub fn commit(&self, rev: &str) -> anyhow::Result<Commit> {
        let r = if rev == WORKTREE { "HEAD" } else { rev };
        let id = self
            .git(&[
                "rev-parse",
                "--verify",
                "--quiet",
                &format!("{r}^{{commit}}"),
            ])
            .map_err(|_| anyhow::anyhow!("git:{rev}: no such commit in {}", self.dir.display()))?
            .trim()
            .to_owned();
        let subject = self
            .git(&["log", "-1", "--format=%s", &id])?
            .trim()
            .to_owned();
        Ok(Commit { id, subject })
    }

    /// The commit's tree hash.
    pub fn tree(&self, commit: &str) -> anyhow::Result<String> {
        Ok(self
            .git(&["rev-parse", &format!("{commit}^{{tree}}")])?
            .trim()
            .to_owned())
    }

    /// The first-parent path from `good` (excluded) to `bad` (included), oldest first.
    pub fn first_parent_path(&self, good: &str, bad: &str) -> anyhow::Result<Vec<Commit>> {
        let out = self.git(&[
            "log",
            "--first-parent",
            "--reverse",
            "--format=%H %s",
            &format!("{good}..{bad}"),
        ])?;
        let path: Vec<Commit> = out
            .lines()
            .filter_map(|l| {
                let (id, subject) = l.split_once(' ').unwrap_or((l, ""));
                (!id.is_empty()).then(|| Commit {
                    id: id.to_owned(),
                    subject: subject.to_owned(),
                })
            })
            .collect();
        // `good..bad` is also non-empty when good is not an ancestor of bad; the path must
        // start right after good.
        let ancestor = Command::new("git")
            .arg("-C")
            .arg(&self.dir)
            .args(["merge-base", "--is-ancestor", good, bad])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .context("running git merge-base")?;
        if !ancestor.success() {
            bail!("--good {good} is not an ancestor of --bad {bad}");
        }
        Ok(path)
    }

    /// Whether the working tree differs from `HEAD` (tracked changes or untracked files), and
    /// the SHA-256 of the diff and the untracked files' names and contents.
    fn dirty_digest(&self) -> anyhow::Result<Option<String>> {
        let diff = self.git(&["diff", "HEAD", "--binary"])?;
        let untracked = self.git(&["ls-files", "--others", "--exclude-standard", "-z"])?;
        if diff.is_empty() && untracked.is_empty() {
            return Ok(None);
        }
        let mut h = Sha256::new();
        h.update(diff.as_bytes());
        for name in untracked.split('\0').filter(|n| !n.is_empty()) {
            h.update(name.as_bytes());
            h.update([0]);
            if let Ok(bytes) = std::fs::read(self.dir.join(name)) {
                h.update(Sha256::digest(&bytes));
            }
        }
        Ok(Some(hex::encode(h.finalize())))
    }
}

fn git_out(dir: &Path, args: &[&str]) -> anyhow::Result<String> {
    let o = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .context("running git (is it installed?)")?;
    if !o.status.success() {
        let err = String::from_utf8_lossy(&o.stderr);
        bail!(
            "git {}: {}",
            args.join(" "),
            err.lines().next().unwrap_or("failed").trim()
        );
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

/// A revision built (or found built) in the cache.
#[derive(Debug, Clone)]
pub struct Built {
    /// The worktree the server runs from.
    pub dir: PathBuf,
    pub info: GitBuild,
    /// Whether this call ran the build (false: found in the cache).
    pub built_now: bool,
    pub build_s: f64,
}

/// What a build gave.
#[derive(Debug, Clone)]
pub enum Outcome {
    Built(Built),
    /// The build command failed: the revision, its exit status and the log's tail.
    Failed {
        info: GitBuild,
        code: Option<i32>,
        tail: String,
        built_now: bool,
    },
}

impl Outcome {
    /// The failure as the error `record` and `ab` end with (exit [`contract::exit::BUILD_FAILED`]).
    pub fn failure(&self) -> Option<contract::exit::BuildFailed> {
        match self {
            Outcome::Built(_) => None,
            Outcome::Failed {
                info, code, tail, ..
            } => Some(contract::exit::BuildFailed(format!(
                "git:{} ({} \"{}\") did not build: `{}` {}; the log ends: {}",
                info.rev,
                short(&info.commit),
                info.subject,
                info.build_command,
                code.map_or_else(|| "was killed".to_owned(), |c| format!("exited {c}")),
                tail.lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .collect::<Vec<_>>()
                    .join(" | ")
            ))),
        }
    }

    pub fn info(&self) -> &GitBuild {
        match self {
            Outcome::Built(b) => &b.info,
            Outcome::Failed { info, .. } => info,
        }
    }

    pub fn built_now(&self) -> bool {
        match self {
            Outcome::Built(b) => b.built_now,
            Outcome::Failed { built_now, .. } => *built_now,
        }
    }
}

/// A progress line on stderr (as `prepare::progress`; this module sits below `prepare`).
fn progress(msg: &str) {
    eprintln!("{msg}");
}

/// The first 12 characters of a hash.
pub fn short(id: &str) -> &str {
    &id[..id.len().min(12)]
}

/// What `build.json` keeps.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Record {
    ok: bool,
    code: Option<i32>,
    info: GitBuild,
}

/// The build cache: `<cache>/builds`.
#[derive(Debug, Clone)]
pub struct Cache {
    pub root: PathBuf,
    pub repo: Repo,
    pub build: String,
}

impl Cache {
    pub fn new(cache_dir: &Path, repo: Repo, build: Option<&str>) -> Cache {
        Cache {
            root: cache_dir.join("builds"),
            repo,
            build: build.unwrap_or("").to_owned(),
        }
    }

    /// The toolchain's identity for `commit`: `rustc -vV` (run in the repository) when the
    /// commit has a `Cargo.toml`, else the build command's own text.
    fn toolchain(&self, commit: &str) -> String {
        let cargo = self
            .repo
            .git(&["cat-file", "-e", &format!("{commit}:Cargo.toml")])
            .is_ok();
        if cargo
            && let Ok(o) = Command::new("rustc")
                .arg("-vV")
                .current_dir(&self.repo.dir)
                .stdin(Stdio::null())
                .output()
            && o.status.success()
        {
            return String::from_utf8_lossy(&o.stdout).trim().to_owned();
        }
        self.build.clone()
    }

    /// Builds `rev` (or finds its build in the cache). `git:WORKTREE` builds in the
    /// repository's own working tree, every time (its content is not a commit's), and is
    /// recorded as dirty with the diff's digest when it differs from `HEAD`.
    pub fn build(&self, rev: &str) -> anyhow::Result<Outcome> {
        let commit = self.repo.commit(rev)?;
        let tree = self.repo.tree(&commit.id)?;
        let toolchain = self.toolchain(&commit.id);
        let diff = if rev == WORKTREE {
            self.repo.dirty_digest()?
        } else {
            None
        };
        let mut h = Sha256::new();
        for part in [&tree, &self.build, &toolchain] {
            h.update(part.as_bytes());
            h.update([0]);
        }
        if let Some(d) = &diff {
            h.update(d.as_bytes());
        }
        let key = hex::encode(h.finalize());
        let mut info = GitBuild {
            rev: rev.to_owned(),
            commit: commit.id.clone(),
            subject: commit.subject.clone(),
            tree,
            build_command: self.build.clone(),
            toolchain,
            build_log_sha256: String::new(),
            cache_key: key.clone(),
            dirty: diff.is_some(),
            diff_sha256: diff,
        };
        let slot = self.root.join(&key[..16]);
        let record_path = slot.join("build.json");
        let log_path = slot.join("build.log");
        if rev != WORKTREE
            && let Ok(bytes) = std::fs::read(&record_path)
            && let Ok(rec) = serde_json::from_slice::<Record>(&bytes)
            && rec.info.cache_key == key
        {
            // The same build, whatever the revision was called this time.
            info.build_log_sha256 = rec.info.build_log_sha256;
            let dir = slot.join("tree");
            return Ok(if rec.ok {
                Outcome::Built(Built {
                    dir,
                    info,
                    built_now: false,
                    build_s: 0.0,
                })
            } else {
                Outcome::Failed {
                    info,
                    code: rec.code,
                    tail: tail(&log_path),
                    built_now: false,
                }
            });
        }
        let dir = if rev == WORKTREE {
            std::fs::create_dir_all(&slot)
                .with_context(|| format!("build cache {}", slot.display()))?;
            self.repo.dir.clone()
        } else {
            self.worktree(&slot, &commit.id)?
        };
        progress(&format!(
            "building git:{rev} ({} \"{}\") in {}",
            short(&commit.id),
            commit.subject,
            dir.display()
        ));
        let t0 = Instant::now();
        let code = run_build(&self.build, &dir, &log_path)?;
        let build_s = t0.elapsed().as_secs_f64();
        info.build_log_sha256 =
            hex::encode(Sha256::digest(std::fs::read(&log_path).unwrap_or_default()));
        let ok = code == Some(0);
        let rec = Record {
            ok,
            code,
            info: info.clone(),
        };
        crate::atomic::write_atomic(&record_path, &serde_json::to_vec_pretty(&rec)?)?;
        Ok(if ok {
            progress(&format!("built git:{rev} in {build_s:.1} s"));
            Outcome::Built(Built {
                dir,
                info,
                built_now: true,
                build_s,
            })
        } else {
            Outcome::Failed {
                info,
                code,
                tail: tail(&log_path),
                built_now: true,
            }
        })
    }

    /// A fresh detached worktree of `commit` at `slot/tree` (an interrupted build's is
    /// removed first).
    fn worktree(&self, slot: &Path, commit: &str) -> anyhow::Result<PathBuf> {
        let dir = slot.join("tree");
        if slot.exists() {
            std::fs::remove_dir_all(slot)
                .with_context(|| format!("removing the unfinished build {}", slot.display()))?;
        }
        std::fs::create_dir_all(slot).with_context(|| format!("build cache {}", slot.display()))?;
        // A worktree whose directory is gone is forgotten before its path is used again.
        self.repo.git(&["worktree", "prune"])?;
        let d = dir.display().to_string();
        self.repo
            .git(&["worktree", "add", "--detach", "--force", &d, commit])
            .with_context(|| format!("creating the worktree of {} in {d}", short(commit)))?;
        Ok(dir)
    }
}

/// The last [`LOG_TAIL_LINES`] lines of a log.
fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n")
}

/// Runs `sh -c build` in `dir` in its own process group, stdout and stderr into `log`; its
/// exit code (`None`: killed by a signal). An empty command builds nothing. Ctrl-C kills the
/// group and returns [`crate::interrupt::Interrupted`].
fn run_build(build: &str, dir: &Path, log: &Path) -> anyhow::Result<Option<i32>> {
    use std::os::unix::process::CommandExt;
    let out = std::fs::File::create(log).with_context(|| format!("build log {}", log.display()))?;
    if build.trim().is_empty() {
        return Ok(Some(0));
    }
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(build)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::from(out.try_clone()?))
        .stderr(Stdio::from(out))
        .process_group(0);
    crate::sample::target::set_parent_death_signal(&mut cmd);
    let mut child = cmd
        .spawn()
        .with_context(|| format!("starting the build `{build}`"))?;
    let pgid = child.id() as libc::pid_t;
    loop {
        if let Some(status) = child.try_wait().context("waiting for the build")? {
            // What the build left running in its group goes with it.
            // SAFETY: kill(2) on the process group of our own (reaped) child.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
            return Ok(status.code());
        }
        if crate::interrupt::requested() {
            // SAFETY: kill(2) on our own child's process group, not reaped yet.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
            let _ = child.wait();
            return Err(crate::interrupt::Interrupted.into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Quotes a word for POSIX shell splitting.
fn quote(w: &str) -> String {
    if !w.is_empty()
        && w.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./{}:=,@%+".contains(&b))
    {
        return w.to_owned();
    }
    format!("'{}'", w.replace('\'', r"'\''"))
}

/// The server's command line in a built worktree: `--bin PATH` (an executable target) or
/// `--run CMD` with every word that names a file of the worktree made absolute.
pub fn command_line(args: &GitArgs, dir: &Path) -> anyhow::Result<String> {
    match (&args.bin, &args.run) {
        (Some(bin), _) => {
            let p = dir.join(bin);
            if !p.is_file() {
                bail!(
                    "--bin {bin}: no such file in the built worktree {}",
                    dir.display()
                );
            }
            Ok(quote(&p.display().to_string()))
        }
        (None, Some(run)) => {
            let words = loadgen::launch::split_command(run)
                .map_err(|e| anyhow::anyhow!("--run {run:?}: {e}"))?;
            Ok(words
                .iter()
                .map(|w| {
                    let local = dir.join(w);
                    if !w.contains('{') && !Path::new(w).is_absolute() && local.exists() {
                        quote(&local.display().to_string())
                    } else {
                        quote(w)
                    }
                })
                .collect::<Vec<_>>()
                .join(" "))
        }
        (None, None) => bail!(
            "a git:REV target needs --bin PATH (the built server, relative to the worktree) or --run CMD"
        ),
    }
}

/// A built revision as a target: its command line parsed as any other, named `git:REV`.
pub fn spec_of(built: &Built, args: &GitArgs, opts: &TargetOpts) -> anyhow::Result<TargetSpec> {
    let line = command_line(args, &built.dir)?;
    let mut spec = TargetSpec::parse_with(&line, opts)?;
    spec.given = format!("git:{}", built.info.rev);
    Ok(spec)
}

/// Checks the `git:` flags before anything runs: the repository opens, the revision names a
/// commit, and a command line is given.
pub fn check(given: &str, args: &GitArgs) -> anyhow::Result<()> {
    let Some(rev) = rev_of(given) else {
        return Ok(());
    };
    if args.bin.is_none() && args.run.is_none() {
        bail!(
            "target {given:?} needs --bin PATH (the built server, relative to the worktree) or --run CMD"
        );
    }
    Repo::open(args.repo.as_deref())?.commit(rev)?;
    Ok(())
}

/// A target as `record` and `ab` take it: `git:REV` built (or found in the cache) under
/// `cache_dir`, anything else parsed. A failed build is [`contract::exit::BuildFailed`].
pub fn resolve(
    given: &str,
    args: &GitArgs,
    opts: &TargetOpts,
    cache_dir: &Path,
) -> anyhow::Result<(TargetSpec, Option<GitBuild>)> {
    let Some(rev) = rev_of(given) else {
        return Ok((TargetSpec::parse_with(given, opts)?, None));
    };
    let repo = Repo::open(args.repo.as_deref())?;
    let cache = Cache::new(cache_dir, repo, args.build.as_deref());
    let outcome = cache.build(rev)?;
    let built = match outcome {
        Outcome::Built(b) => b,
        failed => {
            let f = failed
                .failure()
                .unwrap_or_else(|| contract::exit::BuildFailed(format!("git:{rev} did not build")));
            return Err(f.into());
        }
    };
    if !built.built_now {
        progress(&format!(
            "git:{rev}: {} \"{}\", cached build {}",
            short(&built.info.commit),
            built.info.subject,
            short(&built.info.cache_key)
        ));
    }
    let spec = spec_of(&built, args, opts)?;
    Ok((spec, Some(built.info)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_quoted_only_when_needed() {
        assert_eq!(quote("/a/b-c_d.sh"), "/a/b-c_d.sh");
        assert_eq!(quote("{data}/x"), "{data}/x");
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), r"'it'\''s'");
        let back = loadgen::launch::split_command(&quote("it's a {data}")).unwrap();
        assert_eq!(back, ["it's a {data}"]);
    }

    #[test]
    fn run_words_naming_worktree_files_become_absolute() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("srv.py"), "").unwrap();
        let args = GitArgs {
            run: Some("python3 srv.py --listen {addr} --root {data} --name 'x y'".into()),
            ..GitArgs::default()
        };
        let line = command_line(&args, d.path()).unwrap();
        let words = loadgen::launch::split_command(&line).unwrap();
        assert_eq!(words[0], "python3");
        assert_eq!(words[1], d.path().join("srv.py").display().to_string());
        assert_eq!(words[3..], ["{addr}", "--root", "{data}", "--name", "x y"]);
        let none = command_line(&GitArgs::default(), d.path()).unwrap_err();
        assert!(none.to_string().contains("--bin PATH"), "{none}");
    }

    fn git(dir: &Path, args: &[&str]) -> String {
        let o = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
            .args(args)
            .output()
            .unwrap();
        assert!(o.status.success(), "git {args:?}: {o:?}");
        String::from_utf8(o.stdout).unwrap().trim().to_owned()
    }

    /// A repository of three commits: the second's build fails.
    fn repo() -> (tempfile::TempDir, Vec<String>) {
        let d = tempfile::tempdir().unwrap();
        let r = d.path().join("r");
        std::fs::create_dir(&r).unwrap();
        git(&r, &["init", "-q"]);
        let mut ids = Vec::new();
        for (i, build) in [
            "echo ok > built",
            "echo 'broken here' >&2; exit 3",
            "echo ok > built",
        ]
        .iter()
        .enumerate()
        {
            std::fs::write(r.join("build.sh"), build).unwrap();
            std::fs::write(r.join("n"), i.to_string()).unwrap();
            git(&r, &["add", "-A"]);
            git(&r, &["commit", "-q", "-m", &format!("commit {i}")]);
            ids.push(git(&r, &["rev-parse", "HEAD"]));
        }
        (d, ids)
    }

    #[test]
    fn a_build_is_cached_by_tree_command_and_toolchain_and_a_failure_too() {
        let (d, ids) = repo();
        let repo = Repo::open(Some(&d.path().join("r"))).unwrap();
        let cache = Cache::new(&d.path().join("cache"), repo.clone(), Some("sh build.sh"));
        let Outcome::Built(b) = cache.build(&ids[0]).unwrap() else {
            panic!("commit 0 builds")
        };
        assert!(b.built_now && b.dir.join("built").is_file());
        assert_eq!(b.info.subject, "commit 0");
        assert_eq!(
            b.info.toolchain, "sh build.sh",
            "no Cargo.toml: the command's text"
        );
        assert_eq!(b.info.build_log_sha256.len(), 64);
        let again = cache.build(&ids[0]).unwrap();
        assert!(!again.built_now());
        assert_eq!(again.info().build_log_sha256, b.info.build_log_sha256);
        // Another build command is another build.
        let other = Cache::new(&d.path().join("cache"), repo.clone(), Some("true"));
        assert!(other.build(&ids[0]).unwrap().built_now());
        let failed = cache.build(&ids[1]).unwrap();
        let msg = failed.failure().expect("commit 1 fails").0;
        assert!(
            msg.contains(&ids[1][..12]) && msg.contains("exited 3") && msg.contains("broken here"),
            "{msg}"
        );
        let again = cache.build(&ids[1]).unwrap();
        assert!(!again.built_now() && again.failure().is_some());
        // HEAD names the third commit; its cache key differs from the first's (another tree).
        let head = cache.build("HEAD").unwrap();
        assert_eq!(head.info().commit, ids[2]);
        assert_ne!(
            head.info().cache_key,
            cache.build(&ids[0]).unwrap().info().cache_key
        );
        assert!(cache.build("no-such").is_err());
        let path = repo.first_parent_path(&ids[0], &ids[2]).unwrap();
        let subjects: Vec<&str> = path.iter().map(|c| c.subject.as_str()).collect();
        assert_eq!(subjects, ["commit 1", "commit 2"]);
        assert!(repo.first_parent_path(&ids[2], &ids[0]).is_err());
    }

    #[test]
    fn a_dirty_worktree_is_built_in_place_and_recorded_with_its_diff() {
        let (d, _) = repo();
        let r = d.path().join("r");
        let repo = Repo::open(Some(&r)).unwrap();
        let cache = Cache::new(&d.path().join("cache"), repo, Some("sh build.sh"));
        let clean = cache.build(WORKTREE).unwrap();
        assert!(!clean.info().dirty && clean.info().diff_sha256.is_none());
        std::fs::write(r.join("n"), "changed").unwrap();
        let Outcome::Built(b) = cache.build(WORKTREE).unwrap() else {
            panic!("the worktree builds")
        };
        assert!(b.built_now && b.info.dirty && b.info.diff_sha256.is_some());
        assert_eq!(b.dir, std::fs::canonicalize(&r).unwrap());
    }

    #[test]
    fn only_git_prefixed_targets_are_revisions() {
        assert_eq!(rev_of("git:v1.1.4"), Some("v1.1.4"));
        assert_eq!(rev_of("ref"), None);
    }
}
