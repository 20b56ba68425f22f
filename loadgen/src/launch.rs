//! Target definitions: a server as a command line with placeholders, the directories and
//! files it needs in its fresh data dir, the protocol it speaks, its credentials and how to
//! tell it is ready.
//!
//! A user's target file (`--target ./mine.toml`) and the built-in presets
//! (`loadgen/targets/*.toml`, embedded, listed by each protocol's spec in
//! [`crate::protocols`]) are read by the same code: a preset is a named target file and
//! nothing else. Placeholders, in the command line and in file templates:
//! `{addr}` (`host:port`), `{host}`, `{port}`, `{data}` (the data dir, absolute), `{user}` and
//! `{group}` (who runs the harness), `{auth_user}`, `{auth_pass}` and `{htpasswd}` (an
//! htpasswd `{SHA}` line for the definition's credentials).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use crate::http::BasicAuth;

pub mod mcp;

/// A target file's largest accepted size: a definition is a command line and a few
/// configuration files.
pub const MAX_DEFINITION_BYTES: u64 = 1 << 20;

/// The placeholders a command line may use.
pub const PLACEHOLDERS: [&str; 9] = [
    "addr",
    "host",
    "port",
    "data",
    "user",
    "group",
    "auth_user",
    "auth_pass",
    "htpasswd",
];

/// What to start and how to talk to it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TargetDef {
    /// The preset's or file's name (for messages and the "not installed" error).
    pub name: String,
    /// The protocol it speaks, as written (the harness's registry resolves it); `None`: the
    /// scenario's.
    pub protocol: Option<contract::protocol::Protocol>,
    /// The command line, split, with placeholders.
    pub argv: Vec<String>,
    /// A command line that prints the version (default: `ARGV0 --version`).
    pub version: Option<Vec<String>>,
    /// Debian packages to name when the executable or a required file is missing.
    pub packages: Option<String>,
    /// Files that must exist (modules a configuration loads).
    pub requires: Vec<String>,
    /// The path the vault lives under (`/` unless given), in the protocol's terms (a
    /// collection, a bucket `/NAME/`); for a target that names a `database`, `/DATABASE/`.
    pub root: Option<String>,
    /// The database a target file named (`database = "..."`), checked against its protocol's
    /// rule by [`crate::protocols::check_target`]; its root is `/DATABASE/`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database: Option<String>,
    /// HTTP Basic credentials the client sends.
    pub auth: Option<BasicAuth>,
    /// The readiness check; `None`: the protocol's default.
    pub ready: Option<Ready>,
    /// Directories created in the data dir before the start.
    pub dirs: Vec<String>,
    /// Files written into the data dir before the start: relative name -> template.
    pub files: BTreeMap<String, String>,
    /// Folder-walk bounds other than the defaults (the `record` flags that set them); `None`:
    /// the defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub walk: Option<crate::walk::WalkBounds>,
    /// Changes feed walk bounds other than the protocol's defaults (`--feed-max-*`); `None`:
    /// the defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feed: Option<crate::feed::FeedOverrides>,
    /// Start the server with its fresh data dir as the working directory (a server that
    /// writes files relative to where it runs, as pouchdb-server writes `_users/` and
    /// `pouch__all_dbs__/`, then writes them there, not into the user's directory).
    /// `false`: it inherits the harness's, so relative paths on a typed command line work.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub run_in_data_dir: bool,
    /// Environment variables the server starts with, beside the harness's own (a runtime's
    /// switch such as Node's `NODE_OPTIONS`, a port as `PORT = "{port}"`); values take the
    /// command line's placeholders.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// An MCP server's `[mcp]` table (its search tool, its index, its shutdown grace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp: Option<mcp::McpOptions>,
}

/// A target file as written.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct DefFile {
    name: Option<String>,
    protocol: Option<String>,
    command: String,
    version: Option<String>,
    packages: Option<String>,
    #[serde(default)]
    requires: Vec<String>,
    /// A protocol's former name for it is read as it (`Spec::former_keys`, through
    /// `TargetDef::parse_renaming`).
    root: Option<String>,
    /// The database a server keeps the vault in, for a protocol that has them: its own name
    /// for what `root` is to a path-addressed server.
    database: Option<String>,
    auth: Option<String>,
    ready: Option<String>,
    #[serde(default)]
    dirs: Vec<String>,
    #[serde(default)]
    files: BTreeMap<String, String>,
    #[serde(default)]
    run_in_data_dir: bool,
    #[serde(default)]
    env: BTreeMap<String, String>,
    mcp: Option<mcp::McpFile>,
}

/// A definition that cannot be used, or a server that cannot be started; one line.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("{name} is not installed: {}", install_hint(packages))]
    NotInstalled { name: String, packages: String },
    #[error("{what}: {reason}")]
    Invalid { what: String, reason: String },
    /// The system's error in the message, not also as a source (printed once in a chain).
    #[error("{}: {err}", path.display())]
    Io { path: PathBuf, err: std::io::Error },
}

/// How to install what a definition's `packages` names: a command as written (`npm ...`,
/// `bash tools/...`), else the Debian packages through apt-get.
fn install_hint(packages: &str) -> String {
    if packages.starts_with("npm ") || packages.starts_with("bash ") {
        packages.to_owned()
    } else {
        format!("apt-get install {packages}")
    }
}

fn invalid(what: impl Into<String>, reason: impl Into<String>) -> LaunchError {
    LaunchError::Invalid {
        what: what.into(),
        reason: reason.into(),
    }
}

/// Splits a command line by POSIX shell rules (quotes and backslashes; no expansion).
pub fn split_command(line: &str) -> Result<Vec<String>, LaunchError> {
    let words = shlex::split(line).ok_or_else(|| {
        invalid(
            format!("command line {line:?}"),
            "unbalanced quote or trailing backslash",
        )
    })?;
    if words.is_empty() {
        return Err(invalid(format!("command line {line:?}"), "is empty"));
    }
    Ok(words)
}

/// The `{name}` placeholders in `s` that are not [`PLACEHOLDERS`], with their braces.
fn unknown_placeholders(s: &str) -> Vec<String> {
    contract::parse::unknown_placeholders(s, &PLACEHOLDERS)
        .into_iter()
        .map(|name| format!("{{{name}}}"))
        .collect()
}

/// A data-dir-relative name: no absolute path, no `..`, not empty.
fn check_relative(what: &str, name: &str) -> Result<(), LaunchError> {
    let p = Path::new(name);
    let ok = !name.is_empty()
        && p.components().all(|c| matches!(c, Component::Normal(_)))
        && !name.contains('\0');
    if ok {
        Ok(())
    } else {
        Err(invalid(
            format!("{what} {name:?}"),
            "must be a relative path inside the data dir (no `/` at the start, no `..`)",
        ))
    }
}

impl TargetDef {
    /// Reads a target file (at most [`MAX_DEFINITION_BYTES`]).
    pub fn from_file(path: &Path) -> Result<TargetDef, LaunchError> {
        TargetDef::from_file_renaming(path, &[])
    }

    /// Reads a target file, each `(former, current)` key read as its current name
    /// (`crate::protocols::target_from_file` passes every protocol's).
    pub fn from_file_renaming(
        path: &Path,
        former: &[(&'static str, &'static str)],
    ) -> Result<TargetDef, LaunchError> {
        use std::io::Read;
        let f = std::fs::File::open(path).map_err(|source| LaunchError::Io {
            path: path.to_path_buf(),
            err: source,
        })?;
        let mut text = String::new();
        f.take(MAX_DEFINITION_BYTES + 1)
            .read_to_string(&mut text)
            .map_err(|source| LaunchError::Io {
                path: path.to_path_buf(),
                err: source,
            })?;
        if text.len() as u64 > MAX_DEFINITION_BYTES {
            return Err(invalid(
                format!("target file {}", path.display()),
                format!("is larger than {MAX_DEFINITION_BYTES} bytes"),
            ));
        }
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "target".into());
        TargetDef::parse_renaming(&text, &stem, former).map_err(|e| match e {
            LaunchError::Invalid { what, reason } => {
                invalid(format!("target file {}: {what}", path.display()), reason)
            }
            other => other,
        })
    }

    /// Parses a target file's text; `default_name` when it names none.
    pub fn parse(text: &str, default_name: &str) -> Result<TargetDef, LaunchError> {
        TargetDef::parse_renaming(text, default_name, &[])
    }

    /// Parses a target file's text, each `(former, current)` key read as its current name.
    pub fn parse_renaming(
        text: &str,
        default_name: &str,
        former: &[(&'static str, &'static str)],
    ) -> Result<TargetDef, LaunchError> {
        let text = with_current_keys(text, former)?;
        let f: DefFile = toml::from_str(&text).map_err(|e| {
            invalid(
                "definition",
                e.to_string().lines().next().unwrap_or("").to_owned(),
            )
        })?;
        let argv = split_command(&f.command)?;
        let mut def = TargetDef::command(argv, f.name.as_deref().unwrap_or(default_name))?;
        if let Some(p) = f.protocol {
            def.protocol =
                Some(contract::protocol::Protocol::parse(&p).map_err(|e| invalid("protocol", &e))?);
        }
        def.version = f.version.as_deref().map(split_command).transpose()?;
        def.packages = f.packages;
        def.database = f.database.clone();
        def.requires = f.requires;
        def.root = match (f.root, &f.database) {
            (Some(_), Some(_)) => {
                return Err(invalid("database", "give `database` or `root`, not both"));
            }
            (None, Some(db)) => {
                if def.protocol.is_none() {
                    return Err(invalid(
                        "database",
                        "needs the `protocol` whose server keeps databases",
                    ));
                }
                if db.is_empty() || db.contains(['/', '?', '#', '%']) || db == ".." {
                    return Err(invalid(
                        "database",
                        format!("{db:?} must be one plain path segment"),
                    ));
                }
                Some(normalize_root(&format!("/{db}/"))?)
            }
            (root, None) => root.map(|r| normalize_root(&r)).transpose()?,
        };
        def.auth = f.auth.as_deref().map(parse_auth).transpose()?;
        def.ready = f.ready.as_deref().map(str::parse).transpose()?;
        for d in &f.dirs {
            check_relative("dirs entry", d)?;
        }
        for name in f.files.keys() {
            check_relative("files entry", name)?;
        }
        def.dirs = f.dirs;
        def.files = f.files;
        def.run_in_data_dir = f.run_in_data_dir;
        if let Some(k) = f
            .env
            .keys()
            .find(|k| k.is_empty() || k.contains(['=', '\0']))
        {
            return Err(invalid(format!("env {k:?}"), "is not a variable name"));
        }
        def.env = f.env;
        def.mcp = f.mcp.map(mcp::McpFile::check).transpose()?;
        Ok(def)
    }

    /// A definition from a split command line alone (everything else defaulted).
    pub fn command(argv: Vec<String>, name: &str) -> Result<TargetDef, LaunchError> {
        if argv.is_empty() {
            return Err(invalid(
                format!("target {name:?}"),
                "the command line is empty",
            ));
        }
        let unknown: Vec<String> = argv.iter().flat_map(|a| unknown_placeholders(a)).collect();
        if !unknown.is_empty() {
            return Err(invalid(
                format!("target {name:?}"),
                format!(
                    "unknown placeholder {} (known: {})",
                    unknown.join(", "),
                    PLACEHOLDERS.map(|p| format!("{{{p}}}")).join(" ")
                ),
            ));
        }
        Ok(TargetDef {
            name: name.to_owned(),
            protocol: None,
            argv,
            version: None,
            packages: None,
            requires: Vec::new(),
            root: None,
            database: None,
            auth: None,
            ready: None,
            dirs: Vec::new(),
            files: BTreeMap::new(),
            walk: None,
            feed: None,
            run_in_data_dir: false,
            env: BTreeMap::new(),
            mcp: None,
        })
    }

    /// Whether the command line (or a file template, or an environment value) says where the
    /// listen address goes.
    pub fn has_address(&self) -> bool {
        let said = |s: &str| ["{addr}", "{port}"].iter().any(|p| s.contains(p));
        self.argv.iter().any(|a| said(a))
            || self.files.values().any(|t| said(t))
            || self.env.values().any(|t| said(t))
    }

    /// Whether the command line (or a file template, or its environment) uses the data dir.
    pub fn has_data(&self) -> bool {
        self.argv.iter().any(|a| a.contains("{data}"))
            || self.files.values().any(|t| t.contains("{data}"))
            || self.env.values().any(|v| v.contains("{data}"))
    }

    /// The root (`/`, or `/files/` with both slashes).
    pub fn root(&self) -> &str {
        self.root.as_deref().unwrap_or("/")
    }

    /// The executable, found on PATH or in the sbin directories where Debian puts servers,
    /// and every required file; else one line naming the packages to install.
    pub fn locate(&self) -> Result<PathBuf, LaunchError> {
        let missing = |what: &str| match &self.packages {
            Some(p) => LaunchError::NotInstalled {
                name: self.name.clone(),
                packages: p.clone(),
            },
            None => invalid(
                format!("target {:?}", self.name),
                format!("{what} not found"),
            ),
        };
        let program = find_program(&self.argv[0])
            .ok_or_else(|| missing(&format!("executable {:?}", self.argv[0])))?;
        if let Some(r) = self.requires.iter().find(|r| !Path::new(r).is_file()) {
            return Err(missing(&format!("required file {r:?}")));
        }
        Ok(program)
    }

    /// The values placeholders take for a server on `addr` with `data` (absolute).
    pub fn vars(&self, addr: SocketAddr, data: &Path) -> Vars {
        Vars {
            addr,
            data: data.display().to_string(),
            auth: self.auth.clone(),
        }
    }

    /// Creates the data dir, its directories and files, and returns the command line to
    /// spawn (the executable resolved).
    pub fn prepare(&self, data_dir: &Path, addr: SocketAddr) -> Result<Vec<String>, LaunchError> {
        let program = self.locate()?;
        let io = |p: &Path, source| LaunchError::Io {
            path: p.to_path_buf(),
            err: source,
        };
        std::fs::create_dir_all(data_dir).map_err(|e| io(data_dir, e))?;
        let data = std::fs::canonicalize(data_dir).map_err(|e| io(data_dir, e))?;
        if data.to_str().is_none() {
            return Err(invalid(
                data.display().to_string(),
                "the data dir path must be UTF-8 to go into a command line",
            ));
        }
        let vars = self.vars(addr, &data);
        for d in &self.dirs {
            check_relative("dirs entry", d)?;
            let p = data.join(d);
            std::fs::create_dir_all(&p).map_err(|e| io(&p, e))?;
        }
        for (name, template) in &self.files {
            check_relative("files entry", name)?;
            let p = data.join(name);
            if let Some(parent) = p.parent() {
                std::fs::create_dir_all(parent).map_err(|e| io(parent, e))?;
            }
            std::fs::write(&p, vars.render(template)).map_err(|e| io(&p, e))?;
        }
        let mut argv: Vec<String> = self.argv.iter().map(|a| vars.render(a)).collect();
        argv[0] = program.display().to_string();
        Ok(argv)
    }
}

/// `USER:PASS` as HTTP Basic credentials.
pub fn parse_auth(s: &str) -> Result<BasicAuth, LaunchError> {
    match s.split_once(':') {
        Some((u, p)) if !u.is_empty() && !u.contains(['\r', '\n']) && !p.contains(['\r', '\n']) => {
            Ok(BasicAuth::new(u, p))
        }
        _ => Err(invalid("auth", "must be USER:PASS, with a non-empty USER")),
    }
}

/// `text` with every `(former, current)` key under its current name (each protocol's
/// `Spec::former_keys`); the text itself when it uses none.
fn with_current_keys<'a>(
    text: &'a str,
    former: &[(&'static str, &'static str)],
) -> Result<std::borrow::Cow<'a, str>, LaunchError> {
    let Ok(mut table) = text.parse::<toml::Table>() else {
        // Not TOML: the parse proper says where.
        return Ok(std::borrow::Cow::Borrowed(text));
    };
    let mut renamed = false;
    for (old, current) in former {
        if let Some(v) = table.remove(*old) {
            if table.contains_key(*current) {
                return Err(invalid(
                    *old,
                    format!("is the former name of `{current}`: give one of them"),
                ));
            }
            table.insert((*current).to_owned(), v);
            renamed = true;
        }
    }
    if !renamed {
        return Ok(std::borrow::Cow::Borrowed(text));
    }
    toml::to_string(&table)
        .map(std::borrow::Cow::Owned)
        .map_err(|e| invalid("definition", e.to_string()))
}

/// A root as `/` or `/a/b/`: starts and ends with `/`, no `..`, no query.
pub fn normalize_root(s: &str) -> Result<String, LaunchError> {
    let segs: Vec<&str> = s.split('/').filter(|x| !x.is_empty()).collect();
    if segs.iter().any(|x| *x == ".." || *x == ".") || s.contains(['?', '#', ' ', '\r', '\n']) {
        return Err(invalid(
            format!("root {s:?}"),
            "must be a plain path such as / or /files/ (no .., no query)",
        ));
    }
    let mut out = String::from("/");
    for x in segs {
        out.push_str(x);
        out.push('/');
    }
    Ok(out)
}

/// What a readiness check's status must be.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum StatusMatch {
    Code(u16),
    /// `2xx` is `Class(2)`.
    Class(u8),
    /// `any`: whatever status, as long as the server answers HTTP (an S3 server answers an
    /// unsigned request with an error).
    Any,
}

impl StatusMatch {
    pub fn matches(&self, status: u16) -> bool {
        match self {
            StatusMatch::Code(c) => status == *c,
            StatusMatch::Class(k) => status / 100 == u16::from(*k),
            StatusMatch::Any => (100..=599).contains(&status),
        }
    }
}

/// How the harness tells a started server is ready.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Ready {
    /// A TCP connect succeeds.
    Tcp,
    /// No probe: the server's stdin and stdout are the protocol's transport, so it has no
    /// address, and its first answer on stdout (which the protocol's client times) is its
    /// readiness.
    Stdio,
    /// One HTTP/1.1 request (with the credentials, if any) answers with a matching status.
    Http {
        method: String,
        path: String,
        status: StatusMatch,
    },
}

impl std::str::FromStr for Ready {
    type Err = LaunchError;

    /// `tcp`, `stdio`, or `METHOD PATH STATUS` (`GET /readyz 200`, `OPTIONS / 2xx`).
    fn from_str(s: &str) -> Result<Ready, LaunchError> {
        let bad = || {
            invalid(
                format!("ready check {s:?}"),
                "must be `tcp`, `stdio` or `METHOD PATH STATUS`, e.g. `GET /readyz 200`, `OPTIONS / 2xx` or `GET / any`",
            )
        };
        let words: Vec<&str> = s.split_whitespace().collect();
        match words.as_slice() {
            ["tcp"] => Ok(Ready::Tcp),
            ["stdio"] => Ok(Ready::Stdio),
            [method, path, status] => {
                if !method.chars().all(|c| c.is_ascii_uppercase()) || !path.starts_with('/') {
                    return Err(bad());
                }
                let status = if *status == "any" {
                    StatusMatch::Any
                } else if let Some(k) = status.strip_suffix("xx") {
                    match k.parse::<u8>() {
                        Ok(k @ 1..=5) => StatusMatch::Class(k),
                        _ => return Err(bad()),
                    }
                } else {
                    match status.parse::<u16>() {
                        Ok(c @ 100..=599) => StatusMatch::Code(c),
                        _ => return Err(bad()),
                    }
                };
                Ok(Ready::Http {
                    method: (*method).to_owned(),
                    path: (*path).to_owned(),
                    status,
                })
            }
            _ => Err(bad()),
        }
    }
}

impl std::fmt::Display for Ready {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ready::Tcp => write!(f, "tcp"),
            Ready::Stdio => write!(f, "stdio"),
            Ready::Http {
                method,
                path,
                status,
            } => {
                let s = match status {
                    StatusMatch::Code(c) => c.to_string(),
                    StatusMatch::Class(k) => format!("{k}xx"),
                    StatusMatch::Any => "any".to_owned(),
                };
                write!(f, "{method} {path} {s}")
            }
        }
    }
}

impl Ready {
    /// One blocking probe of `addr` (connect 200 ms, answer 500 ms).
    pub fn probe(&self, addr: SocketAddr, auth: Option<&BasicAuth>) -> bool {
        use std::io::{Read, Write};
        let Ok(mut s) = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200))
        else {
            return false;
        };
        let (method, path, status) = match self {
            Ready::Tcp => return true,
            // Nothing listens: a stdio server is ready when its client says so.
            Ready::Stdio => return false,
            Ready::Http {
                method,
                path,
                status,
            } => (method, path, status),
        };
        let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
        let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
        if let Some(a) = auth {
            req.push_str(&format!("Authorization: {}\r\n", a.header_value()));
        }
        req.push_str("\r\n");
        if s.write_all(req.as_bytes()).is_err() {
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
        got >= 12
            && buf.starts_with(b"HTTP/1.")
            && std::str::from_utf8(&buf[9..12])
                .ok()
                .and_then(|c| c.parse::<u16>().ok())
                .is_some_and(|c| status.matches(c))
    }
}

/// Placeholder values for one start.
#[derive(Debug, Clone)]
pub struct Vars {
    pub addr: SocketAddr,
    pub data: String,
    pub auth: Option<BasicAuth>,
}

impl Vars {
    /// `template` with every known placeholder replaced.
    pub fn render(&self, template: &str) -> String {
        let (user, group) = user_and_group();
        let (au, ap, ht) = match &self.auth {
            Some(a) => (a.user.clone(), a.password.clone(), a.htpasswd_line()),
            None => Default::default(),
        };
        template
            .replace("{addr}", &self.addr.to_string())
            .replace("{host}", &self.addr.ip().to_string())
            .replace("{port}", &self.addr.port().to_string())
            .replace("{data}", &self.data)
            .replace("{user}", &user)
            .replace("{group}", &group)
            .replace("{auth_user}", &au)
            .replace("{auth_pass}", &ap)
            .replace("{htpasswd}", &ht)
    }
}

/// The effective user's and group's names (their numbers when they have none).
fn user_and_group() -> (String, String) {
    // SAFETY: geteuid/getegid cannot fail; getpwuid/getgrgid return a pointer into static
    // storage or null, read at once and copied (the harness calls this from one thread at a
    // time per start; the strings are copied before any other call).
    unsafe {
        let uid = libc::geteuid();
        let gid = libc::getegid();
        let pw = libc::getpwuid(uid);
        let user = if pw.is_null() || (*pw).pw_name.is_null() {
            uid.to_string()
        } else {
            std::ffi::CStr::from_ptr((*pw).pw_name)
                .to_string_lossy()
                .into_owned()
        };
        let gr = libc::getgrgid(gid);
        let group = if gr.is_null() || (*gr).gr_name.is_null() {
            gid.to_string()
        } else {
            std::ffi::CStr::from_ptr((*gr).gr_name)
                .to_string_lossy()
                .into_owned()
        };
        (user, group)
    }
}

/// Where this checkout's tool installs put the servers' commands (the workspace root is fixed
/// at build time): every `tools/NAME/node_modules/.bin` (`npm ci --prefix tools/NAME`) and
/// `tools/NAME/.venv/bin` (a tool's `install.sh`), in name order.
pub fn tools_bins() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools");
    let mut tools: Vec<PathBuf> = std::fs::read_dir(&root)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    tools.sort();
    tools
        .iter()
        .flat_map(|t| [t.join("node_modules/.bin"), t.join(".venv/bin")])
        .filter(|d| d.is_dir())
        .collect()
}

/// `name` as a path (when it has a `/`), else on PATH, else in /usr/local/sbin, /usr/sbin
/// or /sbin (root's PATH has them, a user's may not), else in [`tools_bins`].
pub fn find_program(name: &str) -> Option<PathBuf> {
    let p = Path::new(name);
    if p.components().count() > 1 {
        return p.is_file().then(|| p.to_path_buf());
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/local/sbin", "/usr/sbin", "/sbin"].map(PathBuf::from))
        .chain(tools_bins())
        .map(|d| d.join(name))
        .find(|c| c.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_file_is_read_like_a_preset_and_bad_ones_get_one_line() {
        let d = TargetDef::parse(
            "command = \"srv --port {port} --root '{data}/my root'\"\nprotocol = \"s3\"\n\
             root = \"dav\"\nauth = \"u:p\"\nready = \"tcp\"\n[files]\n\"conf/a.ini\" = \"port={port}\"\n",
            "mine",
        )
        .unwrap();
        assert_eq!(
            d.argv,
            ["srv", "--port", "{port}", "--root", "{data}/my root"]
        );
        assert_eq!(d.root(), "/dav/");
        assert_eq!(d.ready, Some(Ready::Tcp));
        assert_eq!(d.auth, Some(BasicAuth::new("u", "p")));
        for (text, want) in [
            ("command = \"srv {adr}\"", "unknown placeholder {adr}"),
            ("command = \"srv 'x\"", "unbalanced quote"),
            (
                "command = \"srv\"\n[files]\n\"../x\" = \"\"",
                "relative path inside the data dir",
            ),
            (
                "command = \"srv\"\n[files]\n\"/etc/x\" = \"\"",
                "relative path inside the data dir",
            ),
            (
                "command = \"srv\"\ndirs = [\"a/../../b\"]",
                "relative path inside the data dir",
            ),
            (
                "command = \"srv\"\nready = \"GET readyz 200\"",
                "ready check",
            ),
            ("command = \"srv\"\nready = \"GET / 7xx\"", "ready check"),
            ("command = \"srv\"\nauth = \"nopass\"", "USER:PASS"),
            (
                "command = \"srv\"\nprotocol = \"FTP!\"",
                "not a protocol name",
            ),
            ("command = \"srv\"\nroot = \"/a/../b\"", "root \"/a/../b\""),
            ("commnd = \"srv\"", "definition"),
        ] {
            let e = TargetDef::parse(text, "t").unwrap_err().to_string();
            assert!(e.contains(want), "{text}: {e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn the_target_files_in_the_book_parse() {
        let book = include_str!("../../docs/src/targets/bring-your-own.md");
        let mut found = 0;
        for block in book.split("```toml\n").skip(1) {
            let text = &block[..block.find("```").unwrap()];
            if text.contains("command =") {
                let d = TargetDef::parse(text, "book").unwrap_or_else(|e| panic!("{e}: {text}"));
                assert!(d.has_address() && d.has_data(), "{text}");
                found += 1;
            }
        }
        assert!(found > 0, "the guide shows a target file");
    }

    #[test]
    fn shell_rules_split_backslashes_and_quotes() {
        assert_eq!(
            split_command(r#"a 'b c' "d e" f\ g h\"i"#).unwrap(),
            ["a", "b c", "d e", "f g", "h\"i"]
        );
        assert!(split_command("a 'b").is_err());
        assert!(split_command("  ").is_err());
    }

    #[test]
    fn ready_checks_parse_and_print() {
        for s in [
            "tcp",
            "GET /readyz 200",
            "OPTIONS / 2xx",
            "PROPFIND /dav/ 207",
            "GET / any",
        ] {
            assert_eq!(s.parse::<Ready>().unwrap().to_string(), s);
        }
        assert!(StatusMatch::Class(2).matches(204));
        assert!(!StatusMatch::Class(2).matches(401));
    }

    #[test]
    fn prepare_writes_files_inside_the_data_dir_and_renders_argv() {
        let dir = tempfile::tempdir().unwrap();
        let d = TargetDef::parse(
            "command = \"sh -c 'echo {port}' {data}/conf\"\ndirs = [\"dav/x\"]\n[files]\nconf = \"listen {addr}\\n{htpasswd}\"\n",
            "t",
        )
        .unwrap();
        let addr: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let argv = d.prepare(dir.path(), addr).unwrap();
        let data = std::fs::canonicalize(dir.path()).unwrap();
        assert!(argv[0].ends_with("/sh"), "{argv:?}");
        assert_eq!(
            argv[1..],
            ["-c", "echo 9", &format!("{}/conf", data.display())]
        );
        assert!(data.join("dav/x").is_dir());
        assert_eq!(
            std::fs::read_to_string(data.join("conf")).unwrap(),
            "listen 127.0.0.1:9\n"
        );
    }
}
