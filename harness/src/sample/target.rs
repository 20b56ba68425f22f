//! Server targets: what to start, its build identity, and its life as a child process.
//!
//! A target is `ref` (the embedded reference server: this very executable's `serve-ref`),
//! `ref ARGS...` (the same with extra flags, e.g. `ref --group-commit`), or a command line
//! template with `{addr}` and `{data}` placeholders. A bare path to an executable gets
//! ` --listen {addr} --data {data}` appended (the obsync convention). A WebDAV preset name
//! (`apache-webdav`, `nginx-webdav`, `rclone-webdav`) starts that third-party server from a
//! configuration generated into the data dir (`loadgen::webdav::presets`), in its own process
//! group so its workers are measured and stopped with it.

use anyhow::{Context, bail};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use loadgen::webdav::{BasicAuth, Preset};
use reports::schema::TargetIdentity;

/// A parsed target.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TargetSpec {
    /// As the user wrote it (recorded in provenance).
    pub given: String,
    /// argv template; `{addr}` and `{data}` substituted per start.
    pub argv: Vec<String>,
}

/// The basic-auth credentials every WebDAV preset is configured with (loopback only: they
/// prove the auth path is exercised, not that anything is secret).
pub fn preset_auth() -> BasicAuth {
    BasicAuth::new("vaultbench", "vaultbench")
}

impl TargetSpec {
    pub fn parse(given: &str) -> anyhow::Result<TargetSpec> {
        let words = split_command(given).with_context(|| format!("target {given:?}"))?;
        let Some(first) = words.first() else {
            bail!("target {given:?} is empty")
        };
        let mut argv: Vec<String>;
        if words.len() == 1 && Preset::parse(first).is_some() {
            // A preset is its name alone; the command line is generated per start.
            argv = words.clone();
        } else if first == "ref" {
            let exe = std::env::current_exe().context("cannot find the vaultbench executable")?;
            argv = vec![
                exe.display().to_string(),
                "serve-ref".into(),
                "--listen".into(),
                "{addr}".into(),
                "--data".into(),
                "{data}".into(),
            ];
            argv.extend(words[1..].iter().cloned());
        } else {
            argv = words.clone();
            if !given.contains("{addr}") {
                if words.len() > 1 {
                    bail!(
                        "target {given:?} has arguments but no {{addr}} placeholder: say where the listen address goes"
                    );
                }
                argv.extend(["--listen", "{addr}", "--data", "{data}"].map(String::from));
            }
            if !given.contains("{data}") && !argv.iter().any(|a| a.contains("{data}")) {
                bail!(
                    "target {given:?} has no {{data}} placeholder: the server needs a fresh data dir per sample"
                );
            }
        }
        Ok(TargetSpec {
            given: given.to_owned(),
            argv,
        })
    }

    /// The WebDAV preset this target names, if any.
    pub fn preset(&self) -> Option<Preset> {
        match self.argv.as_slice() {
            [one] => Preset::parse(one),
            _ => None,
        }
    }

    /// The executable, resolved through PATH (a preset: its server binary, or one line
    /// naming the Debian packages to install).
    pub fn executable(&self) -> anyhow::Result<PathBuf> {
        if let Some(p) = self.preset() {
            return Ok(p.locate()?);
        }
        resolve_executable(&self.argv[0]).with_context(|| {
            format!(
                "target {:?}: executable {:?} not found",
                self.given, self.argv[0]
            )
        })
    }

    /// SHA-256 of the executable plus its `--version` output.
    pub fn identity(&self) -> anyhow::Result<TargetIdentity> {
        let exe = self.executable()?;
        let bytes = std::fs::read(&exe)
            .with_context(|| format!("reading target executable {}", exe.display()))?;
        let sha = hex::encode(Sha256::digest(&bytes));
        if let Some(p) = self.preset() {
            // nginx prints its version on stderr, the others on stdout.
            let mut cmd = Command::new(&exe);
            cmd.args(p.version_args());
            let version = match probe_version(cmd, true, &self.given, VERSION_TIMEOUT)? {
                Some(t) => t.lines().next().unwrap_or("").trim().to_owned(),
                None => String::new(),
            };
            return Ok(TargetIdentity {
                command: self.given.clone(),
                executable: exe.display().to_string(),
                sha256: sha,
                version,
            });
        }
        let mut cmd = Command::new(&exe);
        if self.argv.get(1).map(String::as_str) == Some("serve-ref") {
            cmd.arg("serve-ref");
        }
        cmd.arg("--version");
        let version = probe_version(cmd, false, &self.given, VERSION_TIMEOUT)?
            .map(|t| t.trim().to_owned())
            .unwrap_or_default();
        // The embedded server's identity also carries its flags: `ref` and `ref --group-commit`
        // are two builds of the same executable.
        let flags: Vec<&str> = self
            .argv
            .iter()
            .skip(1)
            .map(String::as_str)
            .filter(|a| !a.contains('{'))
            .collect();
        Ok(TargetIdentity {
            command: self.given.clone(),
            executable: exe.display().to_string(),
            sha256: sha,
            version: if flags.is_empty() {
                version
            } else {
                format!("{version} [{}]", flags.join(" "))
            },
        })
    }

    fn argv_for(&self, addr: SocketAddr, data: &Path) -> Vec<String> {
        self.argv
            .iter()
            .map(|a| {
                a.replace("{addr}", &addr.to_string())
                    .replace("{data}", &data.display().to_string())
            })
            .collect()
    }
}

/// How long a target may take to answer `--version` before the run fails. A real server
/// prints its version in milliseconds; ten seconds leaves room for a cold disk cache on a busy
/// machine while keeping a hung target from blocking `record` and `ab` for good.
pub const VERSION_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs a version probe in its own process group with its output in a temp file (so a
/// grandchild holding the descriptor cannot block the read). `Ok(None)` when it could not be
/// started. Past `timeout` the group is killed and reaped and the run fails with one line; on
/// SIGINT/SIGTERM the same, with [`crate::interrupt::Interrupted`].
fn probe_version(
    mut cmd: Command,
    with_stderr: bool,
    given: &str,
    timeout: Duration,
) -> anyhow::Result<Option<String>> {
    use std::io::{Seek, SeekFrom};
    use std::os::unix::process::CommandExt;
    let mut out = tempfile::tempfile().context("creating a temp file for the --version probe")?;
    cmd.stdin(Stdio::null())
        .stdout(Stdio::from(out.try_clone()?))
        .process_group(0);
    if with_stderr {
        cmd.stderr(Stdio::from(out.try_clone()?));
    } else {
        cmd.stderr(Stdio::null());
    }
    set_parent_death_signal(&mut cmd);
    let Ok(mut child) = cmd.spawn() else {
        return Ok(None);
    };
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) => {}
            Err(e) => {
                kill_probe(&mut child);
                return Err(e).with_context(|| format!("target {given:?}: waiting for --version"));
            }
        }
        if crate::interrupt::requested() {
            kill_probe(&mut child);
            return Err(crate::interrupt::Interrupted.into());
        }
        if Instant::now() >= deadline {
            kill_probe(&mut child);
            bail!(
                "target {given:?} gave no --version answer within {} s (killed): is it a server that hangs?",
                timeout.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    // The probe's own group may have left children writing; they go with it.
    kill_group(&child);
    let mut text = Vec::new();
    out.seek(SeekFrom::Start(0))?;
    // A version is a line; 64 KiB bounds a target that prints without end.
    out.take(64 * 1024).read_to_end(&mut text)?;
    Ok(Some(String::from_utf8_lossy(&text).into_owned()))
}

/// SIGKILL to a probe's process group (its pid is the group id).
fn kill_group(child: &Child) {
    // SAFETY: kill(2) on the process group our own child leads.
    unsafe { libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL) };
}

/// Kills a probe's process group and reaps the probe.
fn kill_probe(child: &mut Child) {
    kill_group(child);
    let _ = child.kill();
    let _ = child.wait();
}

fn resolve_executable(name: &str) -> Option<PathBuf> {
    let p = Path::new(name);
    if p.components().count() > 1 {
        return p.is_file().then(|| p.to_path_buf());
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|c| c.is_file())
    })
}

/// Splits a command line on whitespace with simple single/double quoting (no expansion).
pub fn split_command(s: &str) -> anyhow::Result<Vec<String>> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    for c in s.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            (None, c) => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    if quote.is_some() {
        bail!("unbalanced quote");
    }
    if in_word {
        words.push(cur);
    }
    Ok(words)
}

/// A loopback port that was free a moment ago.
fn reserve_port() -> anyhow::Result<SocketAddr> {
    let l = TcpListener::bind("127.0.0.1:0").context("binding 127.0.0.1:0 to reserve a port")?;
    Ok(l.local_addr()?)
}

/// Resource use of a reaped server process.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServerUsage {
    pub cpu_user_s: f64,
    pub cpu_sys_s: f64,
    pub peak_rss_kib: u64,
    pub mean_rss_kib: f64,
    /// CPU seconds by thread name, read from `/proc/<pid>/task` at the end.
    pub thread_cpu_s: std::collections::BTreeMap<String, f64>,
    /// `/proc/<pid>/io` at the end: syscr, syscw, read_bytes, write_bytes, rchar, wchar.
    pub io: std::collections::BTreeMap<String, u64>,
    pub exit_status: Option<i32>,
}

/// A running server: a child process with a fresh data dir, killed and reaped on drop.
pub struct Server {
    pub addr: SocketAddr,
    pub data_dir: PathBuf,
    pub pid: u32,
    /// Spawn to `/readyz` 200.
    pub ready_after: Duration,
    child: Option<Child>,
    stderr_tail: Arc<std::sync::Mutex<Vec<u8>>>,
    rss_stop: Arc<AtomicBool>,
    rss_thread: Option<std::thread::JoinHandle<RssSamples>>,
    /// A preset: the server runs in its own process group (master plus workers), measured
    /// and stopped as a whole.
    group: bool,
    /// The wrapper it was started under (a restart uses it again).
    wrap: Vec<String>,
}

/// How long a server may take to become ready before the sample fails.
pub const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// The same under a cost sample's valgrind, which runs start-up 5 to 25 times slower (the
/// cost-channel study's CPU factor of 5, and more on a loaded machine).
pub const WRAPPED_READY_TIMEOUT: Duration = Duration::from_secs(150);

impl Server {
    /// Starts `spec` on a fresh loopback port with `data_dir` (created empty) and waits for
    /// `/readyz`, bounded by [`READY_TIMEOUT`]. The child dies with its parent (PR_SET_PDEATHSIG).
    pub fn start(spec: &TargetSpec, data_dir: &Path) -> anyhow::Result<Server> {
        Server::start_wrapped(spec, data_dir, &[])
    }

    /// [`Server::start`] with `wrap` in front of the target's command line (a cost sample's
    /// valgrind or strace). A wrapped server runs in its own process group, so a stop reaches
    /// the tool and the server alike.
    pub fn start_wrapped(
        spec: &TargetSpec,
        data_dir: &Path,
        wrap: &[String],
    ) -> anyhow::Result<Server> {
        Self::start_on(spec, data_dir, reserve_port()?, wrap)
    }

    /// [`Server::start_wrapped`] on a given address (a restart after a crash keeps the
    /// address, so enrolled devices keep talking to it).
    fn start_on(
        spec: &TargetSpec,
        data_dir: &Path,
        addr: SocketAddr,
        wrap: &[String],
    ) -> anyhow::Result<Server> {
        std::fs::create_dir_all(data_dir)
            .with_context(|| format!("creating data dir {}", data_dir.display()))?;
        let preset = spec.preset();
        let auth = preset_auth();
        let argv = match preset {
            Some(p) => {
                let c = p.prepare(data_dir, addr, Some(&auth))?;
                let mut argv = vec![c.program.display().to_string()];
                argv.extend(c.args);
                argv
            }
            None => spec.argv_for(addr, data_dir),
        };
        let argv: Vec<String> = wrap.iter().cloned().chain(argv).collect();
        let group = preset.is_some() || !wrap.is_empty();
        let ready_timeout = if wrap.is_empty() {
            READY_TIMEOUT
        } else {
            WRAPPED_READY_TIMEOUT
        };
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if group {
            use std::os::unix::process::CommandExt;
            cmd.process_group(0);
        }
        set_parent_death_signal(&mut cmd);
        let t0 = Instant::now();
        let mut child = cmd
            .spawn()
            .with_context(|| format!("target {:?} did not start", spec.given))?;
        let pid = child.id();
        let stderr_tail = Arc::new(std::sync::Mutex::new(Vec::new()));
        if let Some(mut err) = child.stderr.take() {
            let tail = stderr_tail.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = err.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    let mut t = tail.lock().unwrap_or_else(|e| e.into_inner());
                    t.extend_from_slice(&buf[..n]);
                    let len = t.len();
                    if len > 8192 {
                        t.drain(..len - 8192);
                    }
                }
            });
        }
        let mut server = Server {
            addr,
            data_dir: data_dir.to_path_buf(),
            pid,
            ready_after: Duration::ZERO,
            child: Some(child),
            stderr_tail,
            rss_stop: Arc::new(AtomicBool::new(false)),
            rss_thread: None,
            group,
            wrap: wrap.to_vec(),
        };
        loop {
            if let Some(child) = server.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                bail!(
                    "target {:?} exited before it was ready ({status}): {}",
                    spec.given,
                    server.stderr_line()
                );
            }
            let ready = match preset {
                Some(_) => loadgen::webdav::probe_ready(addr, Some(&auth)),
                None => probe_ready(addr),
            };
            if ready {
                break;
            }
            if t0.elapsed() > ready_timeout {
                bail!(
                    "target {:?} was not ready on {addr} within {}s: {}",
                    spec.given,
                    ready_timeout.as_secs(),
                    server.stderr_line()
                );
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        server.ready_after = t0.elapsed();
        let stop = server.rss_stop.clone();
        let group = server.group;
        server.rss_thread = Some(std::thread::spawn(move || sample_rss(pid, group, &stop)));
        Ok(server)
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The last line the server wrote on stderr, for error messages.
    pub fn stderr_line(&self) -> String {
        let t = self.stderr_tail.lock().unwrap_or_else(|e| e.into_inner());
        String::from_utf8_lossy(&t)
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("(no stderr)")
            .trim()
            .to_owned()
    }

    /// True while the process has not exited.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.as_mut().map(|c| c.try_wait()), Some(Ok(None)))
    }

    /// Reads per-thread CPU and /proc io, sends SIGTERM, waits (bounded; then SIGKILL) and
    /// reaps with `wait4` to get the child's own rusage.
    pub fn stop(mut self) -> anyhow::Result<ServerUsage> {
        let pids = if self.group {
            group_pids(self.pid)
        } else {
            vec![self.pid]
        };
        let mut usage = ServerUsage::default();
        for &p in &pids {
            for (k, v) in thread_cpu(p) {
                *usage.thread_cpu_s.entry(k).or_insert(0.0) += v;
            }
            for (k, v) in proc_io(p) {
                *usage.io.entry(k).or_insert(0) += v;
            }
        }
        self.rss_stop.store(true, Ordering::SeqCst);
        let mut sampled_peak = 0;
        if let Some(h) = self.rss_thread.take()
            && let Ok(r) = h.join()
        {
            usage.mean_rss_kib = r.mean_kib;
            sampled_peak = r.peak_kib;
        }
        let Some(mut child) = self.child.take() else {
            return Ok(usage);
        };
        let pid = child.id() as libc::pid_t;
        // A preset's master stops its workers on SIGTERM and reaps them, so their CPU is in
        // the master's rusage below; the group gets the signal too in case one is stuck.
        let target = if self.group { -pid } else { pid };
        // SAFETY: kill(2) on our own child's pid (or its process group), not reaped yet.
        unsafe { libc::kill(target, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(10);
        let (status, ru) = loop {
            let (done, status, ru) = wait4_nohang(pid)?;
            if done {
                break (status, ru);
            }
            if Instant::now() > deadline {
                // SAFETY: as above.
                unsafe { libc::kill(target, libc::SIGKILL) };
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        // Reaped by wait4 above; this wait returns at once (ECHILD is fine) and satisfies the
        // rule that every spawned child is waited on.
        let _ = child.wait();
        usage.cpu_user_s = tv_s(ru.ru_utime);
        usage.cpu_sys_s = tv_s(ru.ru_stime);
        // ru_maxrss is one process's peak; a process group's is the sampled peak of the sum.
        usage.peak_rss_kib = (ru.ru_maxrss.max(0) as u64).max(sampled_peak);
        if self.group {
            // Workers that outlived their master (they should not) go too.
            // SAFETY: kill(2) on our own process group.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
        }
        usage.exit_status = Some(status);
        Ok(usage)
    }
}

/// Every pid of the process tree under `root` (the root first), read from `/proc`; just the
/// root when the tree cannot be read.
pub fn tree_pids(root: u32) -> Vec<u32> {
    match procstat::Snapshot::capture(root) {
        Ok(s) => {
            let mut pids: Vec<u32> = s.processes.keys().copied().filter(|p| *p != root).collect();
            pids.insert(0, root);
            pids
        }
        Err(_) => vec![root],
    }
}

/// Sends SIGKILL to each pid (the crash a power cut or the OOM killer deals: no handler runs).
pub fn kill_pids(pids: &[u32]) {
    for &p in pids {
        // SAFETY: kill(2) with a pid read from our own child's process tree; a pid that has
        // already exited gives ESRCH, which is fine.
        unsafe { libc::kill(p as libc::pid_t, libc::SIGKILL) };
    }
}

/// How long a SIGKILLed target may take to be reaped: a task inside an fsync dies only when
/// the flush returns.
pub const REAP_TIMEOUT: Duration = Duration::from_secs(30);

impl Server {
    /// After [`kill_pids`] on this server's tree: reaps the root (bounded by
    /// [`REAP_TIMEOUT`]) and stops the RSS sampler. The server counts as stopped.
    pub fn reap_killed(&mut self) -> anyhow::Result<()> {
        self.rss_stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.rss_thread.take() {
            let _ = h.join();
        }
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        if self.group {
            // SAFETY: kill(2) on our own, unreaped child's process group.
            unsafe { libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL) };
        }
        let _ = child.kill();
        let deadline = Instant::now() + REAP_TIMEOUT;
        loop {
            if child
                .try_wait()
                .context("reaping the killed target")?
                .is_some()
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "the killed target (pid {}) was not reaped within {}s",
                    self.pid,
                    REAP_TIMEOUT.as_secs()
                );
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Starts `spec` again on the same address and data dir (after [`Server::reap_killed`]),
    /// bounded by [`READY_TIMEOUT`]; returns spawn-to-ready.
    pub fn restart(&mut self, spec: &TargetSpec) -> anyhow::Result<Duration> {
        if self.child.is_some() {
            bail!("restart: the target (pid {}) is still running", self.pid);
        }
        let fresh = Server::start_on(spec, &self.data_dir, self.addr, &self.wrap)?;
        let ready = fresh.ready_after;
        *self = fresh;
        Ok(ready)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.rss_stop.store(true, Ordering::SeqCst);
        if let Some(mut c) = self.child.take() {
            if self.group {
                // SAFETY: kill(2) on our own, unreaped child's process group.
                unsafe { libc::kill(-(c.id() as libc::pid_t), libc::SIGKILL) };
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn tv_s(tv: libc::timeval) -> f64 {
    tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6
}

/// `wait4(pid, WNOHANG)`: (reaped?, exit code or 128+signal, rusage).
fn wait4_nohang(pid: libc::pid_t) -> anyhow::Result<(bool, i32, libc::rusage)> {
    let mut status: libc::c_int = 0;
    // SAFETY: rusage is plain data; zeroed is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointers to locals; pid is our unreaped child.
    let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut ru) };
    if r < 0 {
        return Err(std::io::Error::last_os_error()).context("wait4 on the server process");
    }
    if r == 0 {
        return Ok((false, 0, ru));
    }
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        128 + libc::WTERMSIG(status)
    };
    Ok((true, code, ru))
}

pub use crate::subprocess::set_parent_death_signal;

/// One `GET /readyz` over a plain blocking socket (no runtime needed at start-up).
fn probe_ready(addr: SocketAddr) -> bool {
    use std::io::Write;
    let Ok(mut s) = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    if s.write_all(
        format!("GET /readyz HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .is_err()
    {
        return false;
    }
    let mut buf = [0u8; 16];
    let mut got = 0;
    while got < 12 {
        match s.read(&mut buf[got..]) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    got >= 12 && &buf[9..12] == b"200"
}

/// What the RSS sampler saw: mean and peak resident KiB (of the process, or the sum over its
/// process group), and how many samples.
struct RssSamples {
    mean_kib: f64,
    peak_kib: u64,
}

fn rss_kib(pid: u32) -> Option<f64> {
    procstat::read::rss_kib(procstat::Pid::Of(pid))
        .ok()
        .flatten()
        .map(|k| k as f64)
}

/// Samples resident memory every 20 ms until told to stop; with `group`, the sum over every
/// process in `pid`'s process group (a master and its workers).
fn sample_rss(pid: u32, group: bool, stop: &AtomicBool) -> RssSamples {
    let (mut sum, mut n, mut peak) = (0.0, 0u64, 0.0f64);
    while !stop.load(Ordering::SeqCst) {
        let kib = if group {
            let pids = group_pids(pid);
            if pids.is_empty() {
                break;
            }
            Some(pids.into_iter().filter_map(rss_kib).sum())
        } else {
            match procstat::read::process_stat(procstat::Pid::Of(pid)) {
                Ok(Some(_)) => rss_kib(pid),
                _ => break,
            }
        };
        if let Some(k) = kib {
            sum += k;
            n += 1;
            peak = peak.max(k);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    RssSamples {
        mean_kib: if n == 0 { 0.0 } else { sum / n as f64 },
        peak_kib: peak as u64,
    }
}

/// The live processes whose process group is `pgid`.
fn group_pids(pgid: u32) -> Vec<u32> {
    procstat::read::group_pids(pgid).unwrap_or_default()
}

/// CPU seconds per thread name from `/proc/<pid>/task/*/stat` (utime + stime, clock ticks).
/// Linux keeps 15 bytes of a thread name; the reference server names its threads to fit. The
/// main thread's name is the executable's, which may be longer: it is keyed by the executable's
/// file name from `/proc/<pid>/exe` instead of its cut copy.
fn thread_cpu(pid: u32) -> std::collections::BTreeMap<String, f64> {
    let mut out = std::collections::BTreeMap::new();
    let hz = procstat::clock_ticks_per_second() as f64;
    for (tid, st) in procstat::read::task_stats(procstat::Pid::Of(pid)).unwrap_or_default() {
        let mut name = fold_digits(&st.comm);
        if tid == pid
            && let Some(exe) = procstat::read::exe_name(procstat::Pid::Of(pid))
        {
            name = exe;
        }
        *out.entry(name).or_insert(0.0) += (st.utime_ticks + st.stime_ticks) as f64 / hz;
    }
    out
}

/// A thread name with its digits folded to `N`, so numbered workers share one key.
fn fold_digits(comm: &str) -> String {
    comm.chars()
        .map(|c| if c.is_ascii_digit() { 'N' } else { c })
        .collect()
}

/// `/proc/<pid>/io` by field name (empty when the process is gone or unreadable).
fn proc_io(pid: u32) -> std::collections::BTreeMap<String, u64> {
    procstat::read::io(procstat::Pid::Of(pid))
        .ok()
        .flatten()
        .map(|io| {
            io.fields()
                .iter()
                .map(|&(k, v)| (k.to_owned(), v))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_command_quotes() {
        assert_eq!(
            split_command("a 'b c' \"d\"  e").unwrap(),
            ["a", "b c", "d", "e"]
        );
        assert!(split_command("a 'b").is_err());
    }

    #[test]
    fn ref_target_runs_serve_ref() {
        let t = TargetSpec::parse("ref --group-commit").unwrap();
        assert_eq!(
            &t.argv[1..],
            [
                "serve-ref",
                "--listen",
                "{addr}",
                "--data",
                "{data}",
                "--group-commit"
            ]
        );
    }

    #[test]
    fn command_templates_need_placeholders() {
        assert!(TargetSpec::parse("/bin/srv --port 1").is_err());
        assert!(TargetSpec::parse("/bin/srv --listen {addr}").is_err());
        let t = TargetSpec::parse("/bin/srv").unwrap();
        assert_eq!(
            t.argv,
            ["/bin/srv", "--listen", "{addr}", "--data", "{data}"]
        );
    }

    #[test]
    fn task_stat_parsing() {
        let line = "42 (tokio-rt-worker 3) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 1 0 100 0 0";
        let st = procstat::parse::stat(line, "task stat").unwrap();
        assert_eq!(fold_digits(&st.comm), "tokio-rt-worker N");
        assert_eq!(st.utime_ticks + st.stime_ticks, 300);
    }
}
