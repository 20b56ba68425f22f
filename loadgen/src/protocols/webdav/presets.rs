//! Third-party WebDAV servers as targets: the credentials a client sends, a readiness probe,
//! and a started server for tools and tests. What to start is a target definition
//! ([`crate::launch::TargetDef`]); the presets (Apache, nginx, rclone) are embedded target
//! files under `loadgen/targets/`, read by the same code as a user's own.
//!
//! Everything a preset's server writes (pid file, lock database, logs, request-body temp
//! files) goes inside the data dir, so a sample's server leaves nothing behind and two samples
//! never share state.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use super::error::DavError;
use crate::http::BasicAuth;
use crate::launch::TargetDef;

/// One blocking readiness probe: an `OPTIONS /` that gets any HTTP answer with a `DAV`
/// header (RFC 4918 §10.1: a DAV-compliant resource must return it on OPTIONS). 401 without
/// credentials still proves the server is up, so the probe sends them when it has them and
/// accepts 2xx only. One probe ends within [`PROBE_DEADLINE`] however the server trickles its
/// answer (each read is bounded by what is left of it, not by a fixed read timeout).
pub fn probe_ready(addr: SocketAddr, auth: Option<&BasicAuth>) -> bool {
    use std::io::{Read, Write};
    use std::time::{Duration, Instant};
    let deadline = Instant::now() + PROBE_DEADLINE;
    let Ok(mut s) = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else {
        return false;
    };
    let _ = s.set_write_timeout(Some(PROBE_DEADLINE));
    let mut req = format!("OPTIONS / HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    if let Some(a) = auth {
        let _ = write!(req, "Authorization: {}\r\n", a.header_value());
    }
    req.push_str("\r\n");
    if s.write_all(req.as_bytes()).is_err() {
        return false;
    }
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < 16 * 1024 {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || s.set_read_timeout(Some(left)).is_err() {
            return false;
        }
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let head = String::from_utf8_lossy(&buf).to_ascii_lowercase();
    head.starts_with("http/1.1 2") && head.contains("\r\ndav:")
}

/// Bound on one readiness probe, connect to the answer's blank line: a WebDAV server answers
/// OPTIONS from memory in well under a millisecond, so 1 s is slack, not a measurement.
pub const PROBE_DEADLINE: std::time::Duration = std::time::Duration::from_secs(1);

/// How long a server may take to answer its first readiness check.
pub const READY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);
/// How long a stopped server's process group gets to exit after SIGTERM before SIGKILL.
pub const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// A configured server, ready to spawn: a target definition prepared in a data dir.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerCommand {
    pub def: TargetDef,
    /// The executable, resolved.
    pub program: PathBuf,
    pub args: Vec<String>,
    /// The data dir (absolute).
    pub data: PathBuf,
    pub addr: SocketAddr,
}

impl ServerCommand {
    /// Writes `def`'s directories and files into `data_dir` for a server on `addr`.
    pub fn prepare(
        def: &TargetDef,
        data_dir: &Path,
        addr: SocketAddr,
    ) -> Result<ServerCommand, DavError> {
        let argv = def.prepare(data_dir, addr).map_err(|e| DavError::Invalid {
            what: def.name.clone(),
            reason: e.to_string(),
        })?;
        let data = std::fs::canonicalize(data_dir).map_err(|e| DavError::io(data_dir, e))?;
        Ok(ServerCommand {
            def: def.clone(),
            program: PathBuf::from(&argv[0]),
            args: argv[1..].to_vec(),
            data,
            addr,
        })
    }

    /// The directory a preset serves (`DATA/dav`).
    pub fn served_dir(&self) -> PathBuf {
        self.data.join("dav")
    }

    /// Spawns the server (stdout and stderr to `DATA/server.out`) in its own process group
    /// and waits until its readiness check passes, bounded by [`READY_TIMEOUT`].
    pub fn start(self) -> Result<RunningServer, DavError> {
        use std::os::unix::process::CommandExt;
        use std::time::{Duration, Instant};
        let out_path = self.data.join("server.out");
        let out = std::fs::File::create(&out_path).map_err(|e| DavError::io(&out_path, e))?;
        let err = out.try_clone().map_err(|e| DavError::io(&out_path, e))?;
        let mut cmd = std::process::Command::new(&self.program);
        cmd.args(&self.args)
            .envs(&self.def.env)
            .stdin(std::process::Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0);
        let t0 = Instant::now();
        let child = cmd.spawn().map_err(|e| DavError::io(&self.program, e))?;
        let ready = super::SPEC.ready_of(&self.def);
        let mut server = RunningServer {
            command: self,
            child,
            ready_after: Duration::ZERO,
        };
        loop {
            if let Ok(Some(status)) = server.child.try_wait() {
                return Err(DavError::Invalid {
                    what: server.command.def.name.clone(),
                    reason: format!(
                        "exited before it was ready ({status}): {}",
                        server.last_log_line()
                    ),
                });
            }
            if ready.probe(server.command.addr, server.command.def.auth.as_ref()) {
                break;
            }
            if t0.elapsed() > READY_TIMEOUT {
                return Err(DavError::Invalid {
                    what: server.command.def.name.clone(),
                    reason: format!(
                        "not ready on {} within {} s: {}",
                        server.command.addr,
                        READY_TIMEOUT.as_secs(),
                        server.last_log_line()
                    ),
                });
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        server.ready_after = t0.elapsed();
        Ok(server)
    }
}

/// A server started in its own process group (so its workers can be stopped with it), killed
/// and reaped on drop. The harness's sample lifecycle starts targets its own way (from the
/// same [`TargetDef`]); this one serves tools and tests.
pub struct RunningServer {
    pub command: ServerCommand,
    child: std::process::Child,
    /// Spawn to the first passed readiness check.
    pub ready_after: std::time::Duration,
}

impl RunningServer {
    /// The master process's pid (the process group's id).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The last non-empty line of the server's error log or its captured output.
    pub fn last_log_line(&self) -> String {
        let d = &self.command.data;
        ["error.log", "rclone.log", "server.out"]
            .iter()
            .filter_map(|n| std::fs::read(d.join(n)).ok())
            .flat_map(|b| {
                String::from_utf8_lossy(&b)
                    .lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            })
            .next_back()
            .unwrap_or_else(|| "(no log output)".to_owned())
    }
    /// SIGTERM to the whole process group, SIGKILL after [`STOP_GRACE`], master reaped.
    pub fn stop(mut self) -> std::process::ExitStatus {
        self.stop_inner()
    }

    fn stop_inner(&mut self) -> std::process::ExitStatus {
        use std::time::{Duration, Instant};
        let pgid = self.child.id() as libc::pid_t;
        // SAFETY: kill has no memory-safety preconditions; a negative pid names the group.
        unsafe { libc::kill(-pgid, libc::SIGTERM) };
        let t0 = Instant::now();
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                // Workers that outlived their master (they should not) go too.
                // SAFETY: as above.
                unsafe { libc::kill(-pgid, libc::SIGKILL) };
                return status;
            }
            if t0.elapsed() > STOP_GRACE {
                // SAFETY: as above.
                unsafe { libc::kill(-pgid, libc::SIGKILL) };
                return self.child.wait().unwrap_or_else(|_| {
                    std::os::unix::process::ExitStatusExt::from_raw(libc::SIGKILL)
                });
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.stop_inner();
        }
    }
}
