//! Server targets: what to start, its build identity, and its life as a child process.
//!
//! A target is a target definition ([`loadgen::launch::TargetDef`]) and the text it was given
//! as. The text is `ref` (the embedded reference server: this very executable's `serve-ref`),
//! `ref ARGS...` (the same with extra flags, e.g. `ref --group-commit`), a preset name
//! (embedded target files, listed by each protocol's spec), a target file (`*.toml`), a bare
//! path to an executable (which gets ` --listen {addr} --data {data}` appended, the reference
//! server's convention), or any command line with the placeholders `{addr}`,
//! `{host}`, `{port}` and `{data}`, split by POSIX shell rules. Every target runs in its own
//! process group, so a server's workers are measured and stopped with it, and, where one can
//! be made, in a cgroup v2 leaf of its own, so nothing it forks escapes its teardown; a guard
//! kills both if the sample process dies without stopping it (`sample::guard`).

use anyhow::{Context, bail};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::io::Read;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use loadgen::http::BasicAuth;
use loadgen::launch::{Ready, TargetDef};
use reports::schema::TargetIdentity;

/// A parsed target.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TargetSpec {
    /// As the user wrote it (recorded in provenance).
    pub given: String,
    /// What to start and how to talk to it.
    pub def: TargetDef,
}

/// Target options given on the command line (`--protocol`, `--root`, `--auth`,
/// `--ready`): they set what a command line cannot say, and override a preset's or target
/// file's own values when given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TargetOpts {
    /// The protocol a command line speaks (`--protocol`; a preset's or `ref`'s own is checked
    /// against the scenario instead).
    pub protocol: Option<contract::protocol::Protocol>,
    /// The path the vault lives under (`--root`).
    pub root: Option<String>,
    pub auth: Option<BasicAuth>,
    pub ready: Option<Ready>,
    /// A listing walk's bounds (the walk flags of `prepare`); `None`: the defaults.
    pub walk: Option<loadgen::walk::WalkBounds>,
}

impl TargetSpec {
    /// `given` with no command-line options.
    pub fn parse(given: &str) -> anyhow::Result<TargetSpec> {
        TargetSpec::parse_with(given, &TargetOpts::default())
    }

    pub fn parse_with(given: &str, opts: &TargetOpts) -> anyhow::Result<TargetSpec> {
        let words = loadgen::launch::split_command(given)
            .map_err(|e| anyhow::anyhow!("target {given:?}: {e}"))?;
        let first = words[0].as_str();
        let mut def = if words.len() == 1
            && let Some(d) = loadgen::protocols::preset(first)
        {
            d
        } else if words.len() == 1 && first.ends_with(".toml") {
            loadgen::protocols::target_from_file(Path::new(first))
                .and_then(|d| loadgen::protocols::check_target(&d).map(|()| d))
                .map_err(|e| anyhow::anyhow!("target {given:?}: {e}"))?
        } else if first == "ref" {
            let exe = std::env::current_exe().context("cannot find the vaultbench executable")?;
            let exe = exe.display().to_string();
            let mut argv: Vec<String> = vec![exe.clone(), "serve-ref".into()];
            argv.extend(["--listen", "{addr}", "--data", "{data}"].map(String::from));
            argv.extend(words[1..].iter().cloned());
            let mut d = TargetDef::command(argv, "ref")
                .map_err(|e| anyhow::anyhow!("target {given:?}: {e}"))?;
            d.protocol = Some(contract::protocol::Protocol::default());
            d.version = Some(vec![exe, "serve-ref".into(), "--version".into()]);
            d
        } else {
            let mut d = TargetDef::command(words.clone(), first)
                .map_err(|e| anyhow::anyhow!("target {given:?}: {e}"))?;
            // A stdio protocol's server listens nowhere (`--protocol mcp`).
            let stdio = opts
                .protocol
                .as_ref()
                .and_then(|p| loadgen::protocols::spec_named(p.name()))
                .is_some_and(|s| s.ready_of(&d) == Ready::Stdio);
            if !d.has_address() && !stdio {
                if words.len() > 1 {
                    bail!(
                        "target {given:?} has arguments but no {{addr}} or {{port}} placeholder: say where the listen address goes"
                    );
                }
                d.argv
                    .extend(["--listen", "{addr}", "--data", "{data}"].map(String::from));
            }
            if !d.has_data() {
                bail!(
                    "target {given:?} has no {{data}} placeholder: the server needs a fresh data dir per sample"
                );
            }
            d
        };
        if def.protocol.is_none() {
            def.protocol = opts.protocol.clone();
        }
        if let Some(r) = &opts.root {
            def.root = Some(r.clone());
        }
        if let Some(a) = &opts.auth {
            def.auth = Some(a.clone());
        }
        if let Some(r) = &opts.ready {
            def.ready = Some(r.clone());
        }
        if opts.walk.is_some() {
            def.walk = opts.walk;
        }
        Ok(TargetSpec {
            given: given.to_owned(),
            def,
        })
    }

    /// Settles the protocol of a target (the scenario's, already checked against any the
    /// target named): its name in canonical spelling, and its readiness default where the
    /// target sets no check of its own.
    pub fn speak(&mut self, spec: &loadgen::protocols::Spec) {
        self.def.protocol = Some(contract::protocol::Protocol::named(spec.name));
        if self.def.ready.is_none() {
            self.def.ready = Some(spec.ready_of(&self.def));
        }
    }

    /// The protocol the target speaks, when it says (`None`: the scenario's).
    pub fn protocol(&self) -> Option<&str> {
        self.def.protocol.as_ref().map(|p| p.name())
    }

    /// The executable, resolved through PATH and the sbin directories (a target with
    /// `packages`: one line naming the Debian packages to install).
    pub fn executable(&self) -> anyhow::Result<PathBuf> {
        let path = self.def.locate().map_err(|e| match e {
            loadgen::launch::LaunchError::NotInstalled { .. } => anyhow::anyhow!("{e}"),
            _ => anyhow::anyhow!(
                "target {:?}: executable {:?} not found",
                self.given,
                self.def.argv[0]
            ),
        })?;
        // A file that cannot be run (`--target ./README.md`) is refused now, not after the
        // machine lock and a warm-up sample that fails to start it.
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::metadata(&path)
            .map_err(|e| anyhow::anyhow!("target {:?}: {}: {e}", self.given, path.display()))?;
        if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
            bail!(
                "target {:?}: {} is not an executable file (a server binary, a script with `#!` and `chmod +x`, or a command line such as `python3 server.py --listen {{addr}} --data {{data}}`)",
                self.given,
                path.display()
            );
        }
        Ok(path)
    }

    /// The build identity: SHA-256 of the executable, its version answer, and the SHA-256 of
    /// every existing file among its arguments (`python3 srv.py` is `srv.py` as much as
    /// `python3`) and of every file template it writes. A target that gives no version answer
    /// (it cannot be asked, hangs past [`VERSION_TIMEOUT`], or fails) is identified by those
    /// digests alone, with a note saying so: not a failure.
    pub fn identity(&self) -> anyhow::Result<TargetIdentity> {
        let exe = self.executable()?;
        let sha = sha256_file(&exe)?;
        let mut inputs = BTreeMap::new();
        for a in self.def.argv.iter().skip(1).filter(|a| !a.contains('{')) {
            let p = Path::new(a);
            if p.is_file() {
                let abs = std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
                inputs.insert(abs.display().to_string(), sha256_file(p)?);
            }
        }
        for (name, text) in &self.def.files {
            inputs.insert(
                format!("{{data}}/{name}"),
                hex::encode(Sha256::digest(text.as_bytes())),
            );
        }
        let defined = self.def.version.is_some() && self.def.name != "ref";
        let version_argv = match &self.def.version {
            Some(v) => v.clone(),
            None => vec![self.def.argv[0].clone(), "--version".into()],
        };
        let mut cmd = Command::new(&exe);
        if self.def.version.is_some() {
            // The version command's own executable when it names another one.
            if version_argv[0] != self.def.argv[0] && version_argv[0] != exe.display().to_string() {
                cmd = Command::new(&version_argv[0]);
            }
        }
        cmd.args(&version_argv[1..]).envs(&self.def.env);
        let asked = version_argv.join(" ");
        let (version, note) = match probe_version(cmd, &self.given, VERSION_TIMEOUT)? {
            // A defined version command may print on either stream (nginx uses stderr); the
            // `--version` convention prints on stdout.
            Probe::Answered {
                stdout,
                stderr,
                success,
            } => {
                let text = if defined {
                    format!("{stdout}\n{stderr}")
                } else {
                    stdout
                };
                let line = if defined {
                    first_line(&text)
                } else {
                    text.trim().to_owned()
                };
                if success && !line.is_empty() {
                    (line, None)
                } else {
                    let why = if success {
                        "printed nothing".to_owned()
                    } else {
                        format!("failed ({})", first_line(&format!("{text}\n{stderr}")))
                    };
                    (
                        String::new(),
                        Some(format!(
                            "`{asked}` {why}: identified by the SHA-256 of the executable and its input files"
                        )),
                    )
                }
            }
            Probe::NotStarted(e) => (
                String::new(),
                Some(format!(
                    "`{asked}` could not be run ({e}): identified by the SHA-256 of the executable and its input files"
                )),
            ),
            Probe::TimedOut => (
                String::new(),
                Some(format!(
                    "`{asked}` gave no answer within {} s (killed): identified by the SHA-256 of the executable and its input files",
                    VERSION_TIMEOUT.as_secs()
                )),
            ),
        };
        // A target without a version command of its own also carries its flags: `ref` and
        // `ref --group-commit` are two builds of the same executable.
        let flags: Vec<&str> = self
            .def
            .argv
            .iter()
            .skip(1)
            .map(String::as_str)
            .filter(|a| !a.contains('{'))
            .collect();
        let version = if defined || flags.is_empty() || version.is_empty() {
            version
        } else {
            format!("{version} [{}]", flags.join(" "))
        };
        Ok(TargetIdentity {
            command: self.given.clone(),
            executable: exe.display().to_string(),
            sha256: sha,
            version,
            inputs,
            note,
            git: None,
        })
    }

    /// The readiness check in force: the definition's, or its protocol's default once
    /// [`TargetSpec::speak`] settled it; a TCP connect for a target never settled.
    pub fn ready_check(&self) -> Ready {
        self.def.ready.clone().unwrap_or(Ready::Tcp)
    }
}

/// Prints the identity a run will record, before its first sample (on stderr, with the
/// other progress lines).
pub fn print_identity(label: &str, id: &TargetIdentity) {
    let short = &id.sha256[..id.sha256.len().min(12)];
    let version = if id.version.is_empty() {
        "no version".to_owned()
    } else {
        id.version.clone()
    };
    eprintln!(
        "{label}: {} = {} sha256 {short} ({version}){}",
        id.command,
        id.executable,
        if id.inputs.is_empty() {
            String::new()
        } else {
            format!(
                ", inputs {}",
                id.inputs
                    .iter()
                    .map(|(k, v)| format!("{k} {}", &v[..v.len().min(12)]))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    );
    if let Some(n) = &id.note {
        eprintln!("{label}: note: {n}");
    }
    if let Some(g) = &id.git {
        eprintln!(
            "{label}: commit {} \"{}\", tree {}, build `{}`{}",
            &g.commit[..g.commit.len().min(12)],
            g.subject,
            &g.tree[..g.tree.len().min(12)],
            g.build_command,
            if g.dirty {
                " (dirty worktree: uncommitted changes are measured)"
            } else {
                ""
            }
        );
    }
}

/// The first non-empty line of `text`, trimmed.
fn first_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
        .to_owned()
}

/// SHA-256 of a file's bytes, read in blocks.
fn sha256_file(p: &Path) -> anyhow::Result<String> {
    let mut f = std::fs::File::open(p).with_context(|| format!("reading {}", p.display()))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f
            .read(&mut buf)
            .with_context(|| format!("reading {}", p.display()))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex::encode(h.finalize()))
}

/// How long a target may take to answer its version probe before it is killed and the
/// target is identified by digests alone. A real server prints its version in milliseconds;
/// ten seconds leaves room for a cold disk cache on a busy machine while keeping a hung
/// target from blocking `record` and `ab` for good.
pub const VERSION_TIMEOUT: Duration = Duration::from_secs(10);

/// What a version probe got.
enum Probe {
    /// It exited: its output (at most 64 KiB of each stream) and whether it succeeded.
    Answered {
        stdout: String,
        stderr: String,
        success: bool,
    },
    /// It could not be spawned.
    NotStarted(String),
    /// It ran past the deadline and was killed.
    TimedOut,
}

/// Runs a version probe in its own process group with its output in a temp file (so a
/// grandchild holding the descriptor cannot block the read). Past `timeout` the group is
/// killed and reaped; on SIGINT/SIGTERM the same, with [`crate::interrupt::Interrupted`].
fn probe_version(mut cmd: Command, given: &str, timeout: Duration) -> anyhow::Result<Probe> {
    use std::io::{Seek, SeekFrom};
    use std::os::unix::process::CommandExt;
    let mut out = tempfile::tempfile().context("creating a temp file for the --version probe")?;
    let mut err = tempfile::tempfile().context("creating a temp file for the --version probe")?;
    cmd.stdin(Stdio::null())
        .stdout(Stdio::from(out.try_clone()?))
        .stderr(Stdio::from(err.try_clone()?))
        .process_group(0);
    set_parent_death_signal(&mut cmd);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return Ok(Probe::NotStarted(e.to_string())),
    };
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
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
            return Ok(Probe::TimedOut);
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    // The probe's own group may have left children writing; they go with it.
    kill_group(&child);
    let read = |f: &mut std::fs::File| -> anyhow::Result<String> {
        let mut text = Vec::new();
        f.seek(SeekFrom::Start(0))?;
        // A version is a line; 64 KiB bounds a target that prints without end.
        f.take(64 * 1024).read_to_end(&mut text)?;
        Ok(String::from_utf8_lossy(&text).into_owned())
    };
    Ok(Probe::Answered {
        stdout: read(&mut out)?,
        stderr: read(&mut err)?,
        success: status.success(),
    })
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
    /// The target's stdout and stderr, drained line by line into the log counters (and the
    /// stderr tail kept for error messages).
    pub log: Arc<crate::sample::logtap::Tap>,
    rss_stop: Arc<AtomicBool>,
    rss_thread: Option<std::thread::JoinHandle<RssSamples>>,
    /// The server runs in its own process group (master plus workers), measured and stopped
    /// as a whole (always, now; kept as a field for the code that reads it).
    group: bool,
    /// The wrapper it was started under (a restart uses it again).
    wrap: Vec<String>,
    /// Kills the server's whole tree if this process dies without stopping it.
    guard: Option<crate::sample::guard::GroupGuard>,
    /// The tree is registered with the subreaper (until [`Server::tear_down_tree`]).
    tracked: bool,
    /// The cgroup holding the server's whole tree, where one could be made.
    cgroup: Option<crate::sample::guard::Cgroup>,
    /// When it was spawned.
    pub spawned: Instant,
    /// Its stdin and stdout are its protocol's transport (it listens nowhere).
    stdio: bool,
    /// A stdio server's stdin and stdout, until its protocol's client takes them.
    pipes: Option<loadgen::protocols::mcp::stdio::Pipes>,
    /// Asked to exit by its protocol (a stdio server's stdin closed): its threads' CPU and
    /// io as read just before, which a stop after its exit can no longer read.
    exit_requested: Option<LiveUsage>,
}

/// A live server's threads' CPU and io, as [`Server::stop`] reads them.
type LiveUsage = (BTreeMap<String, f64>, BTreeMap<String, u64>);

/// How long one read of a readiness answer may stay silent (as `Ready::probe`'s).
const PROBE_READ: Duration = Duration::from_millis(500);
/// How long one readiness connect may take.
const PROBE_CONNECT: Duration = Duration::from_millis(200);

/// One readiness probe of `addr` that ends by `deadline` whatever the server does: the
/// connect, the write and every read get at most what is left of it (and a read at most
/// [`PROBE_READ`]), so a server that accepts and never answers, or trickles its answer a byte
/// at a time, holds the wait no longer than its bound. `Err` says what the server did, for the
/// error that ends the wait.
fn probe_by(
    ready: &Ready,
    addr: SocketAddr,
    auth: Option<&BasicAuth>,
    deadline: Instant,
) -> Result<(), String> {
    use std::io::Write;
    let left = || deadline.saturating_duration_since(Instant::now());
    let bounded = |cap: Duration| {
        let l = left();
        (!l.is_zero()).then(|| l.min(cap))
    };
    let Some(t) = bounded(PROBE_CONNECT) else {
        return Err("no time left to connect".to_owned());
    };
    let mut s =
        std::net::TcpStream::connect_timeout(&addr, t).map_err(|e| format!("connecting: {e}"))?;
    let (method, path, status) = match ready {
        Ready::Tcp => return Ok(()),
        // Never probed: `Server::start_on` hands a stdio server's pipes to its client.
        Ready::Stdio => return Err("a stdio server has no address to probe".to_owned()),
        Ready::Http {
            method,
            path,
            status,
        } => (method, path, status),
    };
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    if let Some(a) = auth {
        req.push_str(&format!("Authorization: {}\r\n", a.header_value()));
    }
    req.push_str("\r\n");
    let t = bounded(PROBE_READ).ok_or("no time left to send the request")?;
    s.set_write_timeout(Some(t))
        .and_then(|()| s.write_all(req.as_bytes()))
        .map_err(|e| format!("sending the request: {e}"))?;
    // "HTTP/1.x NNN" is all the check reads.
    let mut buf = [0u8; 12];
    let mut got = 0;
    while got < buf.len() {
        let Some(t) = bounded(PROBE_READ) else {
            return Err(format!(
                "the answer trickled in too slowly: {got} bytes of its status line by the deadline"
            ));
        };
        s.set_read_timeout(Some(t))
            .map_err(|e| format!("setting a read timeout: {e}"))?;
        match s.read(&mut buf[got..]) {
            Ok(0) if got == 0 => return Err("closed the connection without answering".to_owned()),
            Ok(0) => {
                return Err(format!(
                    "closed the connection after {got} bytes of an answer"
                ));
            }
            Ok(n) => got += n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                // A read cut short by the deadline ends the wait: say so.
                let by_deadline = t < PROBE_READ;
                return Err(match (got, by_deadline) {
                    (0, false) => format!(
                        "accepted the connection but sent no answer within {} ms",
                        t.as_millis()
                    ),
                    (0, true) => {
                        "accepted the connection but sent no answer by the deadline".to_owned()
                    }
                    (_, false) => format!(
                        "sent {got} bytes of an answer, then nothing for {} ms",
                        t.as_millis()
                    ),
                    (_, true) => format!(
                        "the answer trickled in too slowly: {got} bytes of its status line by \
                         the deadline"
                    ),
                });
            }
            Err(e) => return Err(format!("reading the answer: {e}")),
        }
    }
    let code = buf
        .starts_with(b"HTTP/1.")
        .then(|| std::str::from_utf8(&buf[9..12]).ok()?.parse::<u16>().ok())
        .flatten()
        .ok_or_else(|| {
            format!(
                "answered {:?}, not an HTTP/1.x status line",
                String::from_utf8_lossy(&buf)
            )
        })?;
    if status.matches(code) {
        Ok(())
    } else {
        Err(format!("answered {code}"))
    }
}

/// How long a server may take to become ready before the sample fails.
pub const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// The same under a cost sample's valgrind, which runs start-up 5 to 25 times slower (the
/// cost-channel study's CPU factor of 5, and more on a loaded machine).
pub const WRAPPED_READY_TIMEOUT: Duration = Duration::from_secs(150);

impl Server {
    /// Starts `spec` on a fresh loopback port with `data_dir` (created empty) and waits for
    /// `/readyz`, bounded by [`READY_TIMEOUT`]. The child dies with its parent (PR_SET_PDEATHSIG);
    /// its whole tree dies with this process (its cgroup or process group, by the guard).
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
        // A stdio server listens nowhere: no port is reserved for it.
        let addr = if spec.ready_check() == Ready::Stdio {
            SocketAddr::from(([127, 0, 0, 1], 0))
        } else {
            reserve_port()?
        };
        Self::start_on(spec, data_dir, addr, wrap)
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
        // A server started in its data dir gets that dir's placeholders as absolute paths.
        let abs;
        let data_dir = if spec.def.run_in_data_dir {
            abs = std::path::absolute(data_dir)
                .with_context(|| format!("data dir {}", data_dir.display()))?;
            abs.as_path()
        } else {
            data_dir
        };
        let argv = spec
            .def
            .prepare(data_dir, addr)
            .map_err(|e| anyhow::anyhow!("target {:?}: {e}", spec.given))?;
        let argv: Vec<String> = wrap.iter().cloned().chain(argv).collect();
        // Every target runs in its own process group: a server's workers (Apache's children,
        // nginx's workers, a script's interpreter and what it forks) are measured and stopped
        // with it, and a wrapper's stop reaches the tool and the server alike.
        let group = true;
        let ready = spec.ready_check();
        let auth = spec.def.auth.clone();
        let ready_timeout = if wrap.is_empty() {
            READY_TIMEOUT
        } else {
            WRAPPED_READY_TIMEOUT
        };
        // A stdio server's stdin and stdout are its protocol's transport, handed to the
        // protocol's client; no address is probed.
        let stdio = ready == Ready::Stdio;
        // Environment values take the command line's placeholders (`PORT = "{port}"`).
        let canon = std::fs::canonicalize(data_dir).unwrap_or_else(|_| data_dir.to_path_buf());
        let vars = spec.def.vars(addr, &canon);
        let env: BTreeMap<&String, String> = spec
            .def
            .env
            .iter()
            .map(|(k, v)| (k, vars.render(v)))
            .collect();
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..])
            .envs(env)
            .stdin(if stdio { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if spec.def.run_in_data_dir {
            cmd.current_dir(data_dir);
        }
        // This sample process is the OOM killer's first choice from now on; the target is put
        // back to the score it would have had on its own (see `sample::guard`).
        crate::sample::guard::prefer_this_process_as_oom_victim();
        // The tree's cgroup where one can be made: every descendant is born in it. Else this
        // process becomes the tree's subreaper before the spawn, so no orphan of it, however
        // early, goes to init (see `sample::guard`).
        let cgroup = crate::sample::guard::Cgroup::create();
        if cgroup.is_none() {
            crate::sample::subreaper::enable();
        }
        {
            use std::os::unix::process::CommandExt;
            cmd.process_group(0);
            // SAFETY: the hooks only open, write and close files named before the fork.
            unsafe {
                cmd.pre_exec(crate::sample::guard::restore_oom_score_adj_hook());
                if let Some(cg) = &cgroup {
                    cmd.pre_exec(cg.join_hook());
                }
            }
        }
        set_parent_death_signal(&mut cmd);
        let t0 = Instant::now();
        // One deadline for the whole wait, however the server answers: each probe's
        // connect, write and reads get only what is left of it.
        let ready_deadline = t0 + ready_timeout;
        let mut child =
            crate::sample::subreaper::spawn_command(crate::sample::subreaper::Own::Tree, &mut cmd)
                .with_context(|| format!("target {:?} did not start", spec.given))?;
        let pid = child.id();
        // A child that could not join (no permission to move it) is guarded by its group and
        // the subreaper (on from now: the kernel hands it the tree's later orphans too).
        let cgroup = cgroup.filter(|cg| cg.holds(pid));
        if cgroup.is_none() {
            crate::sample::subreaper::enable();
        }
        let guard = crate::sample::guard::GroupGuard::spawn(pid, cgroup.as_ref());
        // Both pipes are drained from the start, counted or not: a target never blocks on a
        // full pipe (`sample::logtap`).
        let log = Arc::new(crate::sample::logtap::Tap::default());
        let mut pipes = None;
        if stdio {
            if let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) {
                pipes = Some(loadgen::protocols::mcp::stdio::Pipes {
                    stdin,
                    stdout,
                    stderr: None,
                });
            }
        } else if let Some(out) = child.stdout.take() {
            crate::sample::logtap::drain(out, log.clone(), false);
        }
        if let Some(err) = child.stderr.take() {
            crate::sample::logtap::drain(err, log.clone(), true);
        }
        let mut server = Server {
            addr,
            data_dir: data_dir.to_path_buf(),
            pid,
            ready_after: Duration::ZERO,
            child: Some(child),
            log,
            rss_stop: Arc::new(AtomicBool::new(false)),
            rss_thread: None,
            group,
            wrap: wrap.to_vec(),
            guard,
            tracked: true,
            cgroup,
            spawned: t0,
            stdio,
            pipes,
            exit_requested: None,
        };
        if stdio {
            if server.pipes.is_none() {
                bail!(
                    "target {:?}: its stdin and stdout were not opened",
                    spec.given
                );
            }
            let stop = server.rss_stop.clone();
            server.rss_thread = Some(std::thread::spawn(move || sample_rss(pid, true, &stop)));
            return Ok(server);
        }
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
            let last = match probe_by(&ready, addr, auth.as_ref(), ready_deadline) {
                Ok(()) => break,
                Err(why) => why,
            };
            if Instant::now() >= ready_deadline {
                bail!(
                    "target {:?} was not ready on {addr} within {}s (ready check `{ready}`; \
                     the last probe: {last}): {}",
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

    /// Counts the target's log by `counts` from now on (the scenario's `[[count]]` rules and the
    /// `--count`/`--sum` flags): output rules read the drained pipes, file rules get a tailer
    /// of their file under the data dir.
    pub fn count_log(&self, counts: &[scenarios::scenario::LogCount]) -> anyhow::Result<()> {
        if counts.is_empty() {
            return Ok(());
        }
        self.log.set_rules(counts)?;
        for rel in self.log.files() {
            crate::sample::logtap::tail_file(&self.data_dir, &rel, self.log.clone());
        }
        Ok(())
    }

    /// The last line the server wrote on stderr, for error messages.
    pub fn stderr_line(&self) -> String {
        let t = self.log.tail();
        String::from_utf8_lossy(&t)
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("(no stderr)")
            .trim()
            .to_owned()
    }

    /// A stdio server's stdin and stdout (once: its protocol's client takes them).
    pub fn take_pipes(&mut self) -> Option<loadgen::protocols::mcp::stdio::Pipes> {
        self.pipes.take()
    }

    /// Whether the server's stdin and stdout are its transport (it has no address).
    pub fn is_stdio(&self) -> bool {
        self.stdio
    }

    /// The protocol is about to ask the server to exit (a stdio server's stdin closed):
    /// its threads' CPU and io are read now, while they can be, and its exit is no crash.
    pub fn exit_will_be_requested(&mut self) {
        self.exit_requested = Some(self.live_usage());
    }

    /// Whether [`Server::exit_will_be_requested`] was called.
    pub fn exit_is_requested(&self) -> bool {
        self.exit_requested.is_some()
    }

    fn live_usage(&self) -> LiveUsage {
        let pids = if self.group {
            group_pids(self.pid)
        } else {
            vec![self.pid]
        };
        let (mut cpu, mut io) = (BTreeMap::new(), BTreeMap::new());
        for &p in &pids {
            for (k, v) in thread_cpu(p) {
                *cpu.entry(k).or_insert(0.0) += v;
            }
            for (k, v) in proc_io(p) {
                *io.entry(k).or_insert(0) += v;
            }
        }
        (cpu, io)
    }

    /// True while the process has not exited.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.as_mut().map(|c| c.try_wait()), Some(Ok(None)))
    }

    /// Reads per-thread CPU and /proc io, sends SIGTERM, waits (bounded; then SIGKILL) and
    /// reaps with `wait4` to get the child's own rusage.
    pub fn stop(mut self) -> anyhow::Result<ServerUsage> {
        let mut usage = ServerUsage::default();
        (usage.thread_cpu_s, usage.io) = match self.exit_requested.take() {
            Some(before) => before,
            None => self.live_usage(),
        };
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
        self.tear_down_tree();
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

/// How long a SIGKILLed target may take to be reaped (defined with the subreaper, whose
/// teardown waits as long).
pub use crate::sample::subreaper::REAP_TIMEOUT;

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
                self.tear_down_tree();
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

impl Server {
    /// After the server's root is reaped and its group killed: kills what is left in its
    /// cgroup (a process that left the group) and removes the cgroup, kills and reaps what the
    /// subreaper inherited, then disarms the guard. Only then, so a sample that dies in
    /// between still has its guard.
    fn tear_down_tree(&mut self) {
        if let Some(cg) = self.cgroup.take() {
            cg.kill_and_remove();
        }
        if std::mem::take(&mut self.tracked) {
            crate::sample::subreaper::tree_gone(self.pid);
        }
        if let Some(g) = self.guard.take() {
            g.disarm();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.rss_stop.store(true, Ordering::SeqCst);
        self.log.stop();
        if let Some(mut c) = self.child.take() {
            if self.group {
                // SAFETY: kill(2) on our own, unreaped child's process group.
                unsafe { libc::kill(-(c.id() as libc::pid_t), libc::SIGKILL) };
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        self.tear_down_tree();
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
    fn ref_target_runs_serve_ref() {
        let t = TargetSpec::parse("ref --group-commit").unwrap();
        assert_eq!(
            &t.def.argv[1..],
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
        assert!(TargetSpec::parse("/bin/srv --listen {adr} {data}").is_err());
        let t = TargetSpec::parse("/bin/srv").unwrap();
        assert_eq!(
            t.def.argv,
            ["/bin/srv", "--listen", "{addr}", "--data", "{data}"]
        );
        assert_eq!(t.protocol(), None);
        // {port} says where the address goes as well as {addr}; shell quoting holds.
        let t =
            TargetSpec::parse(r"python3 srv.py --port {port} --root '{data}/a b' x\ y").unwrap();
        assert_eq!(t.def.argv[5..], ["{data}/a b", "x y"]);
    }

    #[test]
    fn task_stat_parsing() {
        let line = "42 (tokio-rt-worker 3) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 1 0 100 0 0";
        let st = procstat::parse::stat(line, "task stat").unwrap();
        assert_eq!(fold_digits(&st.comm), "tokio-rt-worker N");
        assert_eq!(st.utime_ticks + st.stime_ticks, 300);
    }

    /// A readiness probe of a server that accepts and trickles, or accepts and never
    /// answers, ends at the wait's deadline with what the server did.
    #[test]
    fn a_readiness_probe_ends_at_the_deadline_whatever_the_server_does() {
        use std::io::Write as _;
        let ready: Ready = "GET /readyz 200".parse().unwrap();
        for trickle in [true, false] {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = l.local_addr().unwrap();
            std::thread::spawn(move || {
                let Ok((mut s, _)) = l.accept() else { return };
                let mut b = [0u8; 512];
                let _ = s.read(&mut b);
                for &byte in b"HTTP/1.1 200 OK\r\n" {
                    if !trickle {
                        std::thread::sleep(Duration::from_secs(3));
                        return;
                    }
                    if s.write_all(&[byte]).is_err() {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(150));
                }
            });
            let t0 = Instant::now();
            let e = probe_by(&ready, addr, None, t0 + Duration::from_millis(700)).unwrap_err();
            assert!(
                t0.elapsed() < Duration::from_millis(1000),
                "{:?}",
                t0.elapsed()
            );
            let want = if trickle {
                "trickled in too slowly"
            } else {
                "sent no answer"
            };
            assert!(e.contains(want), "{e}");
        }
    }
}
