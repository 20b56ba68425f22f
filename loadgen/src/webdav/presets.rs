//! Third-party WebDAV servers as targets: for each preset, a generated configuration written
//! into the sample's data dir and the command line that starts the server in the foreground on
//! a loopback port, serving `DATA/dav`.
//!
//! Everything a server writes (pid file, lock database, logs, request-body temp files) goes
//! inside the data dir, so a sample's server leaves nothing behind and two samples never share
//! state. The configurations keep each server's packaged defaults except where a benchmark
//! needs otherwise (loopback listen address, paths, no access log); each choice is commented
//! where it is made.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use sha1::{Digest, Sha1};

use super::error::DavError;

/// Where Debian's `apache2` package installs its loadable modules.
pub const APACHE_MODULE_DIR: &str = "/usr/lib/apache2/modules";
/// Where Debian's `libnginx-mod-http-dav-ext` installs the PROPFIND/OPTIONS module.
pub const NGINX_DAV_EXT_MODULE: &str = "/usr/lib/nginx/modules/ngx_http_dav_ext_module.so";

/// A WebDAV server the harness knows how to configure and start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Preset {
    /// Apache httpd with `mod_dav` + `mod_dav_fs` (event MPM), `apache2 -DFOREGROUND`.
    Apache,
    /// nginx's dav module plus `ngx_http_dav_ext_module` for PROPFIND, `daemon off`.
    Nginx,
    /// `rclone serve webdav` over a local directory.
    Rclone,
}

/// HTTP basic credentials a preset is configured to demand, and the client sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BasicAuth {
    pub user: String,
    pub password: String,
}

impl BasicAuth {
    pub fn new(user: &str, password: &str) -> BasicAuth {
        BasicAuth {
            user: user.to_owned(),
            password: password.to_owned(),
        }
    }

    /// The `Authorization` header value (RFC 7617).
    pub fn header_value(&self) -> String {
        let raw = format!("{}:{}", self.user, self.password);
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(raw)
        )
    }

    /// One htpasswd line in the `{SHA}` scheme (base64 of the password's SHA-1): the one
    /// scheme both Apache's `mod_authn_file` and nginx's `auth_basic_user_file` read that
    /// costs the same to check in both (a bcrypt line would make every request pay a
    /// deliberately slow hash, and nginx does not read bcrypt at all).
    pub fn htpasswd_line(&self) -> String {
        let digest = Sha1::digest(self.password.as_bytes());
        format!(
            "{}:{{SHA}}{}\n",
            self.user,
            base64::engine::general_purpose::STANDARD.encode(digest)
        )
    }
}

/// A configured server, ready to spawn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerCommand {
    pub preset: Preset,
    /// The executable, resolved.
    pub program: PathBuf,
    pub args: Vec<String>,
    /// The directory served at `/` (`DATA/dav`, created empty).
    pub root: PathBuf,
    /// The generated configuration file, if the server reads one.
    pub config: Option<PathBuf>,
    /// Where the server logs its errors.
    pub log: PathBuf,
    pub addr: SocketAddr,
}

impl Preset {
    pub const ALL: [Preset; 3] = [Preset::Apache, Preset::Nginx, Preset::Rclone];

    /// The target name (`--a apache-webdav`).
    pub fn name(self) -> &'static str {
        match self {
            Preset::Apache => "apache-webdav",
            Preset::Nginx => "nginx-webdav",
            Preset::Rclone => "rclone-webdav",
        }
    }

    /// The preset named `name`, if any.
    pub fn parse(name: &str) -> Option<Preset> {
        Preset::ALL.into_iter().find(|p| p.name() == name)
    }

    /// The executable's name.
    pub fn binary(self) -> &'static str {
        match self {
            Preset::Apache => "apache2",
            Preset::Nginx => "nginx",
            Preset::Rclone => "rclone",
        }
    }

    /// The Debian packages that provide the preset.
    pub fn debian_packages(self) -> &'static str {
        match self {
            Preset::Apache => "apache2",
            Preset::Nginx => "nginx libnginx-mod-http-dav-ext",
            Preset::Rclone => "rclone",
        }
    }

    /// Arguments that make the executable print its version (the build identity's second
    /// half). nginx prints it on stderr, the others on stdout: read both.
    pub fn version_args(self) -> &'static [&'static str] {
        match self {
            Preset::Apache => &["-v"],
            Preset::Nginx => &["-v"],
            Preset::Rclone => &["version"],
        }
    }

    /// Whether the server answers `PROPFIND` with `Depth: infinity` in this configuration.
    /// Apache (`DavDepthInfinity` defaults to off) and nginx's dav-ext module answer 403;
    /// rclone walks the tree.
    pub fn allows_depth_infinity(self) -> bool {
        matches!(self, Preset::Rclone)
    }

    /// The executable, found on PATH or in the sbin directories where Debian puts servers
    /// (root's PATH has them, a user's may not). Also checks the modules the preset loads.
    pub fn locate(self) -> Result<PathBuf, DavError> {
        let not_installed = || DavError::NotInstalled {
            preset: self.name(),
            packages: self.debian_packages(),
        };
        let program = find_program(self.binary()).ok_or_else(not_installed)?;
        let modules_present = match self {
            Preset::Apache => ["mod_dav.so", "mod_dav_fs.so", "mod_mpm_event.so"]
                .iter()
                .all(|m| Path::new(APACHE_MODULE_DIR).join(m).is_file()),
            Preset::Nginx => Path::new(NGINX_DAV_EXT_MODULE).is_file(),
            Preset::Rclone => true,
        };
        if !modules_present {
            return Err(not_installed());
        }
        Ok(program)
    }

    /// Writes the configuration for a server listening on `addr` (loopback) into `data_dir`
    /// (created if missing), creates the empty served directory, and returns the command line.
    pub fn prepare(
        self,
        data_dir: &Path,
        addr: SocketAddr,
        auth: Option<&BasicAuth>,
    ) -> Result<ServerCommand, DavError> {
        let program = self.locate()?;
        let data_dir = absolute(data_dir)?;
        let root = data_dir.join("dav");
        mkdir(&root)?;
        let write = |name: &str, text: &str| -> Result<PathBuf, DavError> {
            let p = data_dir.join(name);
            std::fs::write(&p, text).map_err(|e| DavError::io(&p, e))?;
            Ok(p)
        };
        let htpasswd = match auth {
            Some(a) if self != Preset::Rclone => Some(write("htpasswd", &a.htpasswd_line())?),
            _ => None,
        };
        let (args, config, log) = match self {
            Preset::Apache => {
                let log = data_dir.join("error.log");
                let conf = apache_config(&data_dir, &root, addr, htpasswd.as_deref());
                let conf = write("httpd.conf", &conf)?;
                let args = vec![
                    "-f".to_owned(),
                    path_str(&conf)?,
                    // Foreground: the harness's child is the master process itself.
                    "-DFOREGROUND".to_owned(),
                ];
                (args, Some(conf), log)
            }
            Preset::Nginx => {
                mkdir(&data_dir.join("tmp"))?;
                let log = data_dir.join("error.log");
                let conf = nginx_config(&data_dir, &root, addr, htpasswd.as_deref(), is_root());
                let conf = write("nginx.conf", &conf)?;
                let mut prefix = path_str(&data_dir)?;
                prefix.push('/');
                let args = vec![
                    // Prefix and early error log: without them nginx opens its compiled-in
                    // /var/log/nginx/error.log before it has read the configuration.
                    "-p".to_owned(),
                    prefix,
                    "-e".to_owned(),
                    path_str(&log)?,
                    "-c".to_owned(),
                    path_str(&conf)?,
                ];
                (args, Some(conf), log)
            }
            Preset::Rclone => {
                let log = data_dir.join("rclone.log");
                let mut args = vec![
                    "serve".to_owned(),
                    "webdav".to_owned(),
                    path_str(&root)?,
                    "--addr".to_owned(),
                    addr.to_string(),
                    // Its own (absent) config file and cache dir, never the user's.
                    "--config".to_owned(),
                    path_str(&data_dir.join("rclone.conf"))?,
                    "--cache-dir".to_owned(),
                    path_str(&data_dir.join("cache"))?,
                    "--log-file".to_owned(),
                    path_str(&log)?,
                ];
                if let Some(a) = auth {
                    args.extend([
                        "--user".to_owned(),
                        a.user.clone(),
                        "--pass".to_owned(),
                        a.password.clone(),
                    ]);
                }
                (args, None, log)
            }
        };
        Ok(ServerCommand {
            preset: self,
            program,
            args,
            root,
            config,
            log,
            addr,
        })
    }
}

/// Apache httpd 2.4 with only the modules WebDAV and basic auth need, loaded from Debian's
/// module directory (Debian's own /etc/apache2 tree is not read at all).
fn apache_config(data: &Path, root: &Path, addr: SocketAddr, htpasswd: Option<&Path>) -> String {
    let m = APACHE_MODULE_DIR;
    let d = data.display();
    let mut c = String::new();
    let _ = writeln!(
        c,
        "# Generated by vaultbench for one sample: Apache mod_dav over {}",
        root.display()
    );
    let _ = writeln!(c, "ServerName 127.0.0.1");
    let _ = writeln!(c, "Listen {addr}");
    let _ = writeln!(c, "PidFile {d}/apache.pid");
    // Accept and lock mutexes as files in the data dir, not in Debian's /var/lock/apache2.
    let _ = writeln!(c, "Mutex file:{d} default");
    let _ = writeln!(c, "ErrorLog {d}/error.log");
    let _ = writeln!(c, "LogLevel warn");
    // mod_unixd is deliberately not loaded: it would switch the children to another user,
    // who could not write the harness's private data dir. Apache then logs an alert per
    // child ("couldn't determine user name") and serves as the user who started it.
    for (name, file) in [
        ("mpm_event_module", "mod_mpm_event.so"),
        ("authz_core_module", "mod_authz_core.so"),
        ("authn_core_module", "mod_authn_core.so"),
        ("authn_file_module", "mod_authn_file.so"),
        ("authz_user_module", "mod_authz_user.so"),
        ("auth_basic_module", "mod_auth_basic.so"),
        ("dav_module", "mod_dav.so"),
        ("dav_fs_module", "mod_dav_fs.so"),
    ] {
        let _ = writeln!(c, "LoadModule {name} {m}/{file}");
    }
    // Debian's mods-available/mpm_event.conf figures, written out so the process model is
    // the packaged one whatever the compiled-in defaults are.
    let _ = writeln!(c, "StartServers 2");
    let _ = writeln!(c, "MinSpareThreads 25");
    let _ = writeln!(c, "MaxSpareThreads 75");
    let _ = writeln!(c, "ThreadLimit 64");
    let _ = writeln!(c, "ThreadsPerChild 25");
    let _ = writeln!(c, "MaxRequestWorkers 150");
    let _ = writeln!(c, "MaxConnectionsPerChild 0");
    let _ = writeln!(c, "KeepAlive On");
    // Debian's apache2.conf: 100 requests per connection; a route load sends thousands.
    let _ = writeln!(c, "MaxKeepAliveRequests 0");
    let _ = writeln!(c, "DocumentRoot \"{}\"", root.display());
    let _ = writeln!(c, "DAVLockDB {d}/davlock");
    let _ = writeln!(c, "<Directory \"{}\">", root.display());
    let _ = writeln!(c, "  Dav On");
    let _ = writeln!(c, "  AllowOverride None");
    match htpasswd {
        Some(p) => {
            let _ = writeln!(c, "  AuthType Basic");
            let _ = writeln!(c, "  AuthName vaultbench");
            let _ = writeln!(c, "  AuthUserFile \"{}\"", p.display());
            let _ = writeln!(c, "  Require valid-user");
        }
        None => {
            let _ = writeln!(c, "  Require all granted");
        }
    }
    let _ = writeln!(c, "</Directory>");
    c
}

/// nginx with its dav module (PUT, DELETE, MKCOL, COPY, MOVE) and dav-ext (PROPFIND,
/// OPTIONS), two workers as Debian's `worker_processes auto` gives on this 2-core class of
/// machine (written out so the process tree does not change with the core count).
fn nginx_config(
    data: &Path,
    root: &Path,
    addr: SocketAddr,
    htpasswd: Option<&Path>,
    as_root: bool,
) -> String {
    let d = data.display();
    let mut c = String::new();
    let _ = writeln!(
        c,
        "# Generated by vaultbench for one sample: nginx dav over {}",
        root.display()
    );
    let _ = writeln!(c, "daemon off;");
    let _ = writeln!(c, "master_process on;");
    let _ = writeln!(c, "worker_processes 2;");
    if as_root {
        // A master started by root hands its workers to `nobody`, who could not write the
        // private data dir; keep them as the user who started the harness.
        let _ = writeln!(c, "user root root;");
    }
    let _ = writeln!(c, "pid {d}/nginx.pid;");
    let _ = writeln!(c, "error_log {d}/error.log warn;");
    let _ = writeln!(c, "load_module {NGINX_DAV_EXT_MODULE};");
    let _ = writeln!(c, "events {{ worker_connections 1024; }}");
    let _ = writeln!(c, "http {{");
    let _ = writeln!(c, "  access_log off;");
    for t in ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"] {
        let _ = writeln!(c, "  {t}_temp_path {d}/tmp/{t};");
    }
    let _ = writeln!(c, "  sendfile on;");
    // Debian's nginx.conf: keepalive_timeout 65; keepalive_requests is 1000 by default,
    // lifted so a route load's connections are not closed every thousand requests.
    let _ = writeln!(c, "  keepalive_timeout 65;");
    let _ = writeln!(c, "  keepalive_requests 1000000;");
    let _ = writeln!(c, "  server {{");
    let _ = writeln!(c, "    listen {addr};");
    let _ = writeln!(c, "    root {};", root.display());
    let _ = writeln!(c, "    location / {{");
    let _ = writeln!(c, "      dav_methods PUT DELETE MKCOL COPY MOVE;");
    let _ = writeln!(c, "      dav_ext_methods PROPFIND OPTIONS;");
    let _ = writeln!(c, "      dav_access user:rw group:rw all:r;");
    // No upload limit (the default is 1 MiB; vault attachments are larger).
    let _ = writeln!(c, "      client_max_body_size 0;");
    if let Some(p) = htpasswd {
        let _ = writeln!(c, "      auth_basic vaultbench;");
        let _ = writeln!(c, "      auth_basic_user_file {};", p.display());
    }
    let _ = writeln!(c, "    }}");
    let _ = writeln!(c, "  }}");
    let _ = writeln!(c, "}}");
    c
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

fn mkdir(p: &Path) -> Result<(), DavError> {
    std::fs::create_dir_all(p).map_err(|e| DavError::io(p, e))
}

fn absolute(p: &Path) -> Result<PathBuf, DavError> {
    mkdir(p)?;
    std::fs::canonicalize(p).map_err(|e| DavError::io(p, e))
}

/// Paths go into configuration files and argv as text.
fn path_str(p: &Path) -> Result<String, DavError> {
    p.to_str()
        .map(str::to_owned)
        .ok_or_else(|| DavError::Invalid {
            what: p.display().to_string(),
            reason: "the data dir path must be UTF-8 to go into a server configuration".into(),
        })
}

/// `name` on PATH, else in /usr/sbin or /sbin.
fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/local/sbin", "/usr/sbin", "/sbin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// One blocking readiness probe: an `OPTIONS /` that gets any HTTP answer with a `DAV`
/// header (RFC 4918 §10.1: a DAV-compliant resource must return it on OPTIONS). 401 without
/// credentials still proves the server is up, so the probe sends them when it has them and
/// accepts 2xx only.
pub fn probe_ready(addr: SocketAddr, auth: Option<&BasicAuth>) -> bool {
    use std::io::{Read, Write};
    use std::time::Duration;
    let Ok(mut s) = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
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
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let head = String::from_utf8_lossy(&buf).to_ascii_lowercase();
    head.starts_with("http/1.1 2") && head.contains("\r\ndav:")
}

/// How long a preset may take to answer its first OPTIONS.
pub const READY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);
/// How long a stopped server's process group gets to exit after SIGTERM before SIGKILL.
pub const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// A preset server started in its own process group (so its workers can be stopped with
/// it), killed and reaped on drop. The harness's sample lifecycle starts presets its own way
/// (from the same [`ServerCommand`]); this one serves tools and tests.
pub struct RunningServer {
    pub command: ServerCommand,
    child: std::process::Child,
    /// Spawn to the first 2xx OPTIONS answer.
    pub ready_after: std::time::Duration,
}

impl ServerCommand {
    /// Spawns the server (stdout and stderr to `DATA/server.out`) and waits until it answers
    /// OPTIONS, bounded by [`READY_TIMEOUT`].
    pub fn start(self, auth: Option<&BasicAuth>) -> Result<RunningServer, DavError> {
        use std::os::unix::process::CommandExt;
        use std::time::{Duration, Instant};
        let out_path = self.log.with_file_name("server.out");
        let out = std::fs::File::create(&out_path).map_err(|e| DavError::io(&out_path, e))?;
        let err = out.try_clone().map_err(|e| DavError::io(&out_path, e))?;
        let mut cmd = std::process::Command::new(&self.program);
        cmd.args(&self.args)
            .stdin(std::process::Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0);
        let t0 = Instant::now();
        let child = cmd.spawn().map_err(|e| DavError::io(&self.program, e))?;
        let mut server = RunningServer {
            command: self,
            child,
            ready_after: Duration::ZERO,
        };
        loop {
            if let Ok(Some(status)) = server.child.try_wait() {
                return Err(DavError::Invalid {
                    what: server.command.preset.name().to_owned(),
                    reason: format!(
                        "exited before it was ready ({status}): {}",
                        server.last_log_line()
                    ),
                });
            }
            if probe_ready(server.command.addr, auth) {
                break;
            }
            if t0.elapsed() > READY_TIMEOUT {
                return Err(DavError::Invalid {
                    what: server.command.preset.name().to_owned(),
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

impl RunningServer {
    /// The master process's pid (the process group's id).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The last non-empty line of the server's error log or its captured output.
    pub fn last_log_line(&self) -> String {
        let out = self.command.log.with_file_name("server.out");
        [&self.command.log, &out]
            .iter()
            .filter_map(|p| std::fs::read(p).ok())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_packages_are_named() {
        for p in Preset::ALL {
            assert_eq!(Preset::parse(p.name()), Some(p));
            assert!(!p.debian_packages().is_empty());
        }
        assert_eq!(Preset::parse("apache"), None);
        let e = DavError::NotInstalled {
            preset: "nginx-webdav",
            packages: Preset::Nginx.debian_packages(),
        };
        assert_eq!(
            e.to_string(),
            "nginx-webdav is not installed: apt-get install nginx libnginx-mod-http-dav-ext"
        );
    }

    #[test]
    fn htpasswd_sha_line_matches_htpasswd_s() {
        // `htpasswd -nbs bench secret` prints this line.
        assert_eq!(
            BasicAuth::new("bench", "secret").htpasswd_line(),
            "bench:{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ=\n"
        );
        assert_eq!(
            BasicAuth::new("Aladdin", "open sesame").header_value(),
            "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ=="
        );
    }

    #[test]
    fn configs_keep_everything_in_the_data_dir() {
        let data = Path::new("/d/x");
        let addr: SocketAddr = "127.0.0.1:4321".parse().unwrap();
        let a = apache_config(data, &data.join("dav"), addr, Some(&data.join("htpasswd")));
        assert!(a.contains("Listen 127.0.0.1:4321\n"), "{a}");
        assert!(a.contains("PidFile /d/x/apache.pid\n"), "{a}");
        assert!(a.contains("Require valid-user"), "{a}");
        assert!(!a.contains("mod_unixd"), "{a}");
        let n = nginx_config(data, &data.join("dav"), addr, None, true);
        assert!(n.contains("daemon off;\n"), "{n}");
        assert!(n.contains("listen 127.0.0.1:4321;\n"), "{n}");
        assert!(n.contains("user root root;"), "{n}");
        assert!(!n.contains("auth_basic"), "{n}");
        for text in [&a, &n] {
            for word in text.split_whitespace().filter(|w| w.len() > 1) {
                let path = word.trim_matches(['"', ';']).trim_start_matches("file:");
                if path.starts_with('/') && !path.contains("/modules/") {
                    assert!(
                        path.starts_with("/d/x"),
                        "a path outside the data dir: {word}"
                    );
                }
            }
        }
        assert!(!nginx_config(data, data, addr, None, false).contains("user "));
    }
}
