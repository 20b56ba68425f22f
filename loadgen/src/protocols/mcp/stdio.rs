//! The stdio transport: the target's command line is the server, started here with its stdin
//! and stdout as the JSON-RPC channel (one message per line) and its stderr kept as a short
//! tail for error messages. Requests carry integer ids; a reader task hands each answer to
//! its waiter by id, answers `ping`, refuses other server requests, and counts what matches
//! no waiter. Whatever the server does, a wait ends by its deadline, and the server's whole
//! process group is killed and reaped when the connection is dropped. A server started by
//! someone else (the harness's sample, which measures and reaps it) is attached by its pipes.

use std::collections::{BTreeMap, BTreeSet};
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::pipe;
use tokio::sync::{mpsc, oneshot};

use super::McpError;
use super::line::{LineError, Lines};

/// How a server is started and what bounds its messages.
#[derive(Debug, Clone)]
pub struct StdioConfig {
    /// The command line: the program, then its arguments.
    pub argv: Vec<String>,
    /// Its working directory (the caller's when `None`).
    pub cwd: Option<PathBuf>,
    /// Environment added to the inherited one.
    pub env: BTreeMap<String, String>,
    /// The longest line a message may take, in bytes.
    pub max_line: usize,
    /// The most JSON values one message may hold (`json_budget`).
    pub max_values: u64,
    /// Answers with an id no request is waiting for (or a string or null id) tolerated before
    /// the connection is refused.
    pub max_unknown_ids: u64,
}

/// 16 MiB: the largest honest message here is a multi-file read of a few notes or a listing
/// of a few hundred tools (the reference filesystem server, 2026.8.31, lists its 14 tools in
/// 13,017 bytes), far below it; a server's line past it is refused rather than held.
pub const DEFAULT_MAX_LINE: usize = 16 << 20;
/// Unknown ids tolerated: a server that answers one request twice, or a late answer after a
/// wait gave up, is counted; a stream of them is a broken server.
pub const DEFAULT_MAX_UNKNOWN_IDS: u64 = 64;

impl StdioConfig {
    /// `argv` with the default bounds.
    pub fn new(argv: Vec<String>) -> StdioConfig {
        StdioConfig {
            argv,
            cwd: None,
            env: BTreeMap::new(),
            max_line: DEFAULT_MAX_LINE,
            max_values: crate::json_budget::MAX_JSON_VALUES,
            max_unknown_ids: DEFAULT_MAX_UNKNOWN_IDS,
        }
    }
}

/// One answer: the result or the JSON-RPC error, and the bytes of its line.
#[derive(Debug)]
pub struct Answer {
    pub outcome: Result<Value, RpcError>,
    pub bytes: usize,
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "error {} {}",
            self.code,
            contract::quote::quote(&self.message)
        )
    }
}

/// Counts of what the server sent beside answers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Traffic {
    /// Lines read.
    pub lines: u64,
    /// Bytes read on stdout.
    pub bytes: u64,
    /// Notifications (messages with a method and no id).
    pub notifications: u64,
    /// Requests from the server (answered: `ping` with an empty result, others refused).
    pub server_requests: u64,
    /// Answers no request was waiting for: an unknown, string or null id.
    pub unknown_ids: u64,
    /// Answers to requests whose wait had given up.
    pub late: u64,
}

#[derive(Default)]
struct State {
    pending: BTreeMap<u64, oneshot::Sender<Answer>>,
    abandoned: BTreeSet<u64>,
    fatal: Option<String>,
    first_byte: Option<Instant>,
    traffic: Traffic,
    closing: bool,
}

type Shared = Arc<Mutex<State>>;

fn lock(s: &Shared) -> std::sync::MutexGuard<'_, State> {
    s.lock().unwrap_or_else(|p| p.into_inner())
}

/// The pipes of a server started elsewhere, for [`StdioConn::attach`].
pub struct Pipes {
    pub stdin: std::process::ChildStdin,
    pub stdout: std::process::ChildStdout,
    /// Its stderr, when the connection is to keep its tail for messages (`None`: the owner
    /// reads it).
    pub stderr: Option<std::process::ChildStderr>,
}

/// A running stdio server and the JSON-RPC channel to it.
pub struct StdioConn {
    child: Option<Child>,
    /// The process is this connection's (spawned by [`StdioConn::spawn`]): killed on drop,
    /// reaped here. An attached one ([`StdioConn::attach`]) is its owner's to kill and reap.
    owned: bool,
    /// Its stderr is read here (else its owner reads it).
    stderr_kept: bool,
    pid: u32,
    /// When the server was spawned.
    pub spawned: Instant,
    state: Shared,
    out: Option<mpsc::Sender<Vec<u8>>>,
    next_id: std::sync::atomic::AtomicU64,
    stderr_tail: Arc<Mutex<Vec<u8>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// The stderr kept for messages.
const STDERR_TAIL: usize = 2048;

/// Sets `SIGKILL` as the child's parent-death signal, so a killed generator takes the server
/// with it.
fn die_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

impl StdioConn {
    /// Starts the server in its own process group and the tasks that read and write its
    /// pipes. Must be called inside a tokio runtime.
    pub fn spawn(cfg: &StdioConfig) -> Result<StdioConn, McpError> {
        let (program, args) = cfg
            .argv
            .split_first()
            .ok_or_else(|| McpError::Spawn("the command line is empty".into()))?;
        let mut cmd = Command::new(program);
        cmd.args(args)
            .envs(&cfg.env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(dir) = &cfg.cwd {
            cmd.current_dir(dir);
        }
        {
            use std::os::unix::process::CommandExt;
            cmd.process_group(0);
        }
        die_with_parent(&mut cmd);
        let spawned = Instant::now();
        let mut child = cmd
            .spawn()
            .map_err(|e| McpError::Spawn(format!("{}: {e}", contract::quote::quote(program))))?;
        let pid = child.id();
        let pipes = (child.stdin.take(), child.stdout.take(), child.stderr.take());
        let (Some(stdin), Some(stdout), Some(stderr)) = pipes else {
            kill_group(pid, libc::SIGKILL);
            let _ = child.wait();
            return Err(McpError::Spawn("its pipes were not opened".into()));
        };
        let pipes = Pipes {
            stdin,
            stdout,
            stderr: Some(stderr),
        };
        match StdioConn::over(pid, spawned, pipes, cfg) {
            Ok(mut conn) => {
                conn.child = Some(child);
                conn.owned = true;
                Ok(conn)
            }
            Err(e) => {
                kill_group(pid, libc::SIGKILL);
                let _ = child.wait();
                Err(e)
            }
        }
    }

    /// The channel over the pipes of a server started elsewhere, `pid` (a process group
    /// leader) spawned at `spawned`. Its owner kills and reaps it; [`StdioConn::shutdown`]
    /// closes its stdin and waits for it to exit without reaping it. Must be called inside a
    /// tokio runtime.
    pub fn attach(
        pid: u32,
        spawned: Instant,
        pipes: Pipes,
        cfg: &StdioConfig,
    ) -> Result<StdioConn, McpError> {
        StdioConn::over(pid, spawned, pipes, cfg)
    }

    fn over(
        pid: u32,
        spawned: Instant,
        pipes: Pipes,
        cfg: &StdioConfig,
    ) -> Result<StdioConn, McpError> {
        let io = |e: std::io::Error| McpError::Spawn(format!("its pipes: {e}"));
        let stdin = pipe::Sender::from_owned_fd(OwnedFd::from(pipes.stdin)).map_err(io)?;
        let stdout = pipe::Receiver::from_owned_fd(OwnedFd::from(pipes.stdout)).map_err(io)?;
        let stderr = pipes
            .stderr
            .map(|e| pipe::Receiver::from_owned_fd(OwnedFd::from(e)))
            .transpose()
            .map_err(io)?;
        let state: Shared = Arc::default();
        let (tx, rx) = mpsc::channel::<Vec<u8>>(256);
        let stderr_tail = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = vec![
            tokio::spawn(write_loop(stdin, rx, state.clone())),
            tokio::spawn(read_loop(
                Lines::new(stdout, cfg.max_line),
                state.clone(),
                // Weak: closing stdin is dropping the one strong sender.
                tx.downgrade(),
                cfg.max_values,
                cfg.max_unknown_ids,
            )),
        ];
        let stderr_kept = stderr.is_some();
        if let Some(err) = stderr {
            tasks.push(tokio::spawn(stderr_loop(err, stderr_tail.clone())));
        }
        Ok(StdioConn {
            child: None,
            owned: false,
            stderr_kept,
            pid,
            spawned,
            state,
            out: Some(tx),
            next_id: std::sync::atomic::AtomicU64::new(1),
            stderr_tail,
            tasks,
        })
    }

    /// The server's pid (its process group has the same id).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// When the first byte came on stdout, if one has.
    pub fn first_byte(&self) -> Option<Instant> {
        lock(&self.state).first_byte
    }

    /// What the server sent beside answers, so far.
    pub fn traffic(&self) -> Traffic {
        lock(&self.state).traffic
    }

    /// The last line the server wrote on stderr, escaped, for messages.
    pub fn stderr_line(&self) -> String {
        let tail = self
            .stderr_tail
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let text = String::from_utf8_lossy(&tail);
        match text.lines().rev().find(|l| !l.trim().is_empty()) {
            Some(l) => format!("its stderr: {}", contract::quote::text(l.trim())),
            None => "nothing on its stderr".into(),
        }
    }

    /// `e` with the last line of the server's stderr, where this connection reads it.
    pub fn with_stderr(&self, e: McpError) -> McpError {
        if !self.stderr_kept || matches!(e, McpError::Server { .. }) {
            return e;
        }
        McpError::Server {
            inner: Box::new(e),
            stderr: self.stderr_line(),
        }
    }

    fn fatal(&self) -> Option<String> {
        lock(&self.state).fatal.clone()
    }

    /// Sends a notification (no answer is awaited); queueing it waits at most until
    /// `deadline` (a server that reads nothing fills its stdin's pipe).
    pub async fn notify(
        &self,
        method: &str,
        params: Value,
        deadline: Instant,
    ) -> Result<(), McpError> {
        let msg = json!({"jsonrpc": "2.0", "method": method, "params": params});
        let at = Instant::now();
        match tokio::time::timeout_at(deadline.into(), self.send(&msg, method)).await {
            Ok(sent) => sent,
            Err(_) => Err(McpError::Timeout {
                method: method.into(),
                waited: at.elapsed(),
                note: " (its stdin is not being read)".into(),
            }),
        }
    }

    async fn send(&self, msg: &Value, method: &str) -> Result<(), McpError> {
        let mut line = serde_json::to_vec(msg).map_err(|e| McpError::Protocol {
            method: method.into(),
            what: format!("encoding the request: {e}"),
        })?;
        line.push(b'\n');
        let out = self.out.as_ref().ok_or_else(|| McpError::Closed {
            method: method.into(),
            what: "stdin is closed".into(),
        })?;
        out.send(line).await.map_err(|_| self.gone(method))
    }

    fn gone(&self, method: &str) -> McpError {
        McpError::Closed {
            method: method.into(),
            what: self
                .fatal()
                .unwrap_or_else(|| "the connection is closed".into()),
        }
    }

    /// Sends a request and waits for its answer until `deadline`. A wait that gives up
    /// leaves the id abandoned: a late answer is counted as late, not as unknown.
    pub async fn request(
        &self,
        method: &str,
        params: Value,
        deadline: Instant,
    ) -> Result<Answer, McpError> {
        let id = self
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        {
            let mut s = lock(&self.state);
            if let Some(f) = &s.fatal {
                return Err(McpError::Closed {
                    method: method.into(),
                    what: f.clone(),
                });
            }
            s.pending.insert(id, tx);
        }
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let sent_at = Instant::now();
        // One deadline over queueing the line (a server that reads nothing fills its stdin's
        // pipe and the writer's queue) and waiting for the answer.
        let exchange = async {
            self.send(&msg, method).await?;
            rx.await.map_err(|_| self.gone(method))
        };
        match tokio::time::timeout_at(deadline.into(), exchange).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(e)) => {
                lock(&self.state).pending.remove(&id);
                Err(e)
            }
            Err(_) => {
                let mut s = lock(&self.state);
                if s.pending.remove(&id).is_some() {
                    s.abandoned.insert(id);
                }
                let unknown = s.traffic.unknown_ids;
                Err(McpError::Timeout {
                    method: method.into(),
                    waited: sent_at.elapsed(),
                    note: if unknown > 0 {
                        format!(" ({unknown} answers came with ids no request had)")
                    } else {
                        String::new()
                    },
                })
            }
        }
    }

    /// The stdio transport's shutdown, as the MCP specification orders it: the server's
    /// stdin is closed and its exit awaited for `grace`; a server still running then gets
    /// SIGTERM (its process group) and `term` more; then SIGKILL. `after` is stdin closed →
    /// exit whichever step ended it, and `by` names that step. Either way it is reaped (by
    /// its owner when attached), with its resource use.
    pub async fn shutdown(
        &mut self,
        grace: Duration,
        term: Duration,
    ) -> Result<Shutdown, McpError> {
        lock(&self.state).closing = true;
        // Dropping the only sender ends the writer task, which drops (closes) stdin.
        self.out = None;
        let closed = Instant::now();
        let mut step = EndedBy::Stdin;
        let mut deadline = closed + grace;
        loop {
            let exited = if self.owned {
                self.try_reap()
            } else {
                // The owner reaps (for its own rusage): here only whether it has exited.
                exited_unreaped(self.pid).map(|status| (status, Usage::default()))
            };
            if let Some((status, usage)) = exited {
                if self.owned {
                    kill_group(self.pid, libc::SIGKILL);
                }
                return Ok(Shutdown {
                    after: Some(closed.elapsed()),
                    by: Some(step),
                    status,
                    usage,
                });
            }
            if Instant::now() >= deadline {
                match step {
                    EndedBy::Stdin => {
                        kill_group(self.pid, libc::SIGTERM);
                        step = EndedBy::Sigterm;
                        deadline = Instant::now() + term;
                    }
                    _ => {
                        kill_group(self.pid, libc::SIGKILL);
                        let (status, usage) = if self.owned {
                            self.reap_blocking()
                        } else {
                            // SIGKILL cannot be caught: the exit follows at once.
                            let by = Instant::now() + Duration::from_secs(1);
                            let mut status = exited_unreaped(self.pid);
                            while status.is_none() && Instant::now() < by {
                                tokio::time::sleep(Duration::from_millis(1)).await;
                                status = exited_unreaped(self.pid);
                            }
                            (status.unwrap_or(128 + libc::SIGKILL), Usage::default())
                        };
                        return Ok(Shutdown {
                            after: Some(closed.elapsed()),
                            by: Some(EndedBy::Sigkill),
                            status,
                            usage,
                        });
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// `wait4` without blocking: the exit status and rusage once the server has exited.
    fn try_reap(&mut self) -> Option<(i32, Usage)> {
        self.child.as_ref()?;
        let mut status = 0;
        // SAFETY: a zeroed rusage is a valid out-parameter.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: the pid is our unreaped child.
        let r = unsafe { libc::wait4(self.pid as i32, &mut status, libc::WNOHANG, &mut ru) };
        if r == self.pid as i32 {
            self.child = None;
            Some((status, Usage::of(&ru)))
        } else {
            None
        }
    }

    fn reap_blocking(&mut self) -> (i32, Usage) {
        if self.child.is_none() {
            return (0, Usage::default());
        }
        let mut status = 0;
        // SAFETY: as in `try_reap`.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: the pid is our unreaped child, killed just before.
        unsafe { libc::wait4(self.pid as i32, &mut status, 0, &mut ru) };
        self.child = None;
        (status, Usage::of(&ru))
    }
}

/// Which step of the stdio shutdown ended the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndedBy {
    /// It exited when its stdin closed.
    Stdin,
    /// It exited on SIGTERM after the grace.
    Sigterm,
    /// It was killed.
    Sigkill,
}

impl EndedBy {
    /// The name a key uses (`mcp_shutdown.ended_by.sigterm`).
    pub fn name(self) -> &'static str {
        match self {
            EndedBy::Stdin => "stdin",
            EndedBy::Sigterm => "sigterm",
            EndedBy::Sigkill => "sigkill",
        }
    }
}

/// How a shutdown went.
#[derive(Debug, Clone, Copy)]
pub struct Shutdown {
    /// stdin closed → exit (stdio), or the session's DELETE answered (HTTP); `None`: an
    /// HTTP session that had nothing to end.
    pub after: Option<Duration>,
    /// The step that ended a stdio server; `None` over HTTP.
    pub by: Option<EndedBy>,
    /// The raw wait status.
    pub status: i32,
    pub usage: Usage,
}

/// The reaped server's own resource use (`wait4`; its reaped children's included).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    pub cpu_user_us: u64,
    pub cpu_sys_us: u64,
    /// `ru_maxrss`, KiB on Linux.
    pub peak_rss_kib: u64,
}

impl Usage {
    fn of(ru: &libc::rusage) -> Usage {
        let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
        Usage {
            cpu_user_us: us(ru.ru_utime),
            cpu_sys_us: us(ru.ru_stime),
            peak_rss_kib: ru.ru_maxrss.max(0) as u64,
        }
    }
}

/// Whether child `pid` has exited, its wait status left for its owner to reap (`waitid`
/// with `WNOWAIT`): the exit code, or 128 + the signal.
fn exited_unreaped(pid: u32) -> Option<i32> {
    // SAFETY: a zeroed siginfo_t is a valid out-parameter.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: waitid on our own child; WNOWAIT leaves it unreaped.
    let r = unsafe {
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    // SAFETY: si_pid and si_status are set by a successful waitid (zero when none exited).
    let (who, status, code) = unsafe { (info.si_pid(), info.si_status(), info.si_code) };
    if r != 0 || who == 0 {
        return None;
    }
    Some(if code == libc::CLD_EXITED {
        status
    } else {
        128 + status
    })
}

fn kill_group(pid: u32, signal: i32) {
    // SAFETY: signals the process group this connection made; ESRCH when it is gone.
    unsafe {
        libc::kill(-(pid as i32), signal);
    }
}

impl Drop for StdioConn {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
        if !self.owned {
            return;
        }
        kill_group(self.pid, libc::SIGKILL);
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

async fn write_loop(mut stdin: pipe::Sender, mut rx: mpsc::Receiver<Vec<u8>>, state: Shared) {
    while let Some(line) = rx.recv().await {
        if let Err(e) = stdin.write_all(&line).await {
            fail(&state, format!("writing to its stdin: {e}"));
            return;
        }
    }
}

async fn stderr_loop(mut err: pipe::Receiver, tail: Arc<Mutex<Vec<u8>>>) {
    let mut buf = vec![0u8; 8192];
    while let Ok(n) = err.read(&mut buf).await {
        if n == 0 {
            return;
        }
        let mut t = tail.lock().unwrap_or_else(|p| p.into_inner());
        t.extend_from_slice(&buf[..n]);
        if t.len() > STDERR_TAIL {
            let cut = t.len() - STDERR_TAIL;
            t.drain(..cut);
        }
    }
}

/// Records the connection's end and wakes every waiter (their senders drop).
fn fail(state: &Shared, why: String) {
    let mut s = lock(state);
    if s.fatal.is_none() {
        s.fatal = Some(why);
    }
    s.pending.clear();
}

async fn read_loop(
    mut lines: Lines<pipe::Receiver>,
    state: Shared,
    out: mpsc::WeakSender<Vec<u8>>,
    max_values: u64,
    max_unknown: u64,
) {
    loop {
        let next = lines.next().await;
        {
            let mut s = lock(&state);
            s.traffic.bytes = lines.bytes;
            if s.first_byte.is_none() {
                s.first_byte = lines.first_byte;
            }
        }
        let line = match next {
            Ok(Some(l)) => l,
            Ok(None) => {
                let closing = lock(&state).closing;
                let why = if closing {
                    "it closed its stdout".to_owned()
                } else {
                    "it closed its stdout (exited?)".to_owned()
                };
                fail(&state, why);
                return;
            }
            Err(e @ LineError::TooLong { .. }) => {
                fail(&state, e.to_string());
                return;
            }
            Err(e) => {
                fail(&state, e.to_string());
                return;
            }
        };
        lock(&state).traffic.lines += 1;
        match handle(&line, &state, max_values, max_unknown) {
            Ok(None) => {}
            Ok(Some(reply)) => {
                let mut bytes = serde_json::to_vec(&reply).unwrap_or_default();
                bytes.push(b'\n');
                // No sender left means stdin is closing: nothing to answer.
                if let Some(out) = out.upgrade() {
                    let _ = out.try_send(bytes);
                }
            }
            Err(why) => {
                fail(&state, why);
                return;
            }
        }
    }
}

/// One line: an answer goes to its waiter; a server request gets its reply (returned); `Err`
/// ends the connection with a one-line reason.
fn handle(
    line: &[u8],
    state: &Shared,
    max_values: u64,
    max_unknown: u64,
) -> Result<Option<Value>, String> {
    let not_json = |why: String| {
        format!(
            "wrote a line that is not a JSON-RPC message ({why}): {}",
            contract::quote::bytes(line)
        )
    };
    crate::json_budget::check(line, max_values).map_err(not_json)?;
    let v: Value = serde_json::from_slice(line).map_err(|e| not_json(e.to_string()))?;
    let Value::Object(mut o) = v else {
        // A batch is not part of the 2025-06-18 revision or later.
        return Err(not_json("not an object".into()));
    };
    let method = o.get("method").and_then(Value::as_str).map(str::to_owned);
    let has_id = o.contains_key("id");
    match (method, has_id) {
        (Some(m), true) => {
            lock(state).traffic.server_requests += 1;
            let id = o.remove("id").unwrap_or(Value::Null);
            Ok(Some(if m == "ping" {
                json!({"jsonrpc": "2.0", "id": id, "result": {}})
            } else {
                json!({"jsonrpc": "2.0", "id": id,
                       "error": {"code": -32601, "message": "vaultbench offers no client features"}})
            }))
        }
        (Some(_), false) => {
            lock(state).traffic.notifications += 1;
            Ok(None)
        }
        (None, true) => {
            let outcome = match (o.remove("result"), o.remove("error")) {
                (Some(r), None) => Ok(r),
                (None, Some(e)) => Err(RpcError {
                    code: e.get("code").and_then(Value::as_i64).unwrap_or(0),
                    message: e
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned(),
                    data: e.get("data").cloned(),
                }),
                _ => return Err(not_json("an answer needs one of result and error".into())),
            };
            let mut s = lock(state);
            let waiter = o
                .get("id")
                .and_then(Value::as_u64)
                .map(|id| (id, s.pending.remove(&id)));
            match waiter {
                Some((_, Some(tx))) => {
                    let _ = tx.send(Answer {
                        outcome,
                        bytes: line.len(),
                    });
                }
                Some((id, None)) if s.abandoned.remove(&id) => s.traffic.late += 1,
                _ => {
                    s.traffic.unknown_ids += 1;
                    if s.traffic.unknown_ids > max_unknown {
                        let id = o.get("id").map(Value::to_string).unwrap_or_default();
                        return Err(format!(
                            "answered {} times with an id no request had (the last {})",
                            s.traffic.unknown_ids,
                            contract::quote::quote(&id)
                        ));
                    }
                }
            }
            Ok(None)
        }
        (None, false) => Err(not_json("neither a method nor an id".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `script` under `sh -c` as a stdio server, shut down with 200 ms of grace and 200 ms
    /// after SIGTERM.
    async fn shut(script: &str) -> Shutdown {
        let cfg = StdioConfig::new(vec!["sh".into(), "-c".into(), script.into()]);
        let mut conn = StdioConn::spawn(&cfg).unwrap();
        // Let the shell reach its `trap` before anything is signalled.
        tokio::time::sleep(Duration::from_millis(100)).await;
        conn.shutdown(Duration::from_millis(200), Duration::from_millis(200))
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn the_shutdown_ladder_names_the_step_that_ended_the_server() {
        // Exits when its stdin closes: no signal, well within the grace.
        let s = shut("cat >/dev/null").await;
        assert_eq!(s.by, Some(EndedBy::Stdin));
        assert_eq!(s.status, 0);
        // Ignores stdin's end, exits on SIGTERM: timed past the grace, to the exit.
        let s = shut("exec sleep 30").await;
        assert_eq!(s.by, Some(EndedBy::Sigterm));
        assert!(s.after.unwrap() >= Duration::from_millis(200), "{s:?}");
        assert!(libc::WIFSIGNALED(s.status) && libc::WTERMSIG(s.status) == libc::SIGTERM);
        // Ignores SIGTERM too: killed after both waits.
        let s = shut("trap '' TERM; exec sleep 30").await;
        assert_eq!(s.by, Some(EndedBy::Sigkill));
        assert!(s.after.unwrap() >= Duration::from_millis(400), "{s:?}");
        assert!(libc::WIFSIGNALED(s.status) && libc::WTERMSIG(s.status) == libc::SIGKILL);
        assert_eq!(EndedBy::Sigterm.name(), "sigterm");
    }
}
