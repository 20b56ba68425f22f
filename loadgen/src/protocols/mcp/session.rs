//! An MCP client session over a [`StdioConn`]: which protocol era the server speaks, found
//! by probing, then `tools/list` and `tools/call` in that era.
//!
//! The probe follows the stdio backward-compatibility rule of the 2026-07-28 revision: send
//! `server/discover` first with the preferred version in `_meta`. A result listing
//! 2026-07-28 is a stateless server: no handshake, and every request carries `_meta` with the
//! protocol version and the client's capabilities. Any error answer, or none within the
//! probe's bound, is a server of the handshake era: `initialize` asking for 2025-11-25, and
//! the server's answer names the version it speaks (2025-06-18 is accepted too), then
//! `notifications/initialized`. The client declares no capabilities: a server such as the
//! reference filesystem server replaces its directories with a client's `roots`.

use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use super::McpError;
use super::http::HttpConn;
use super::stdio::{Answer, Shutdown, StdioConn, Traffic};

/// The stateless revision.
pub const STATELESS_VERSION: &str = "2026-07-28";
/// The handshake revisions this client speaks, preferred first.
pub const HANDSHAKE_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18"];
/// The 2026-07-28 revision's error for a version the server does not support.
pub const UNSUPPORTED_VERSION: i64 = -32004;

/// Which generation of the protocol a server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// `initialize` → `notifications/initialized`, then requests (2025-06-18, 2025-11-25).
    Handshake,
    /// `server/discover` and per-request `_meta`, no `initialize` (2026-07-28).
    Stateless,
}

impl Era {
    pub fn name(self) -> &'static str {
        match self {
            Era::Handshake => "handshake",
            Era::Stateless => "stateless",
        }
    }
}

/// What the probe found.
#[derive(Debug, Clone, PartialEq)]
pub struct Negotiated {
    pub era: Era,
    /// The protocol version in force.
    pub version: String,
    /// `serverInfo.name` and `.version`, as the server gave them (quoted where shown).
    pub server_name: String,
    pub server_version: String,
    /// Whether the server answered `server/discover` (false: it fell back to `initialize`).
    pub discovered: bool,
}

/// A tool as listed.
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    pub name: String,
}

/// A whole `tools/list`, every page followed.
#[derive(Debug, Clone, PartialEq)]
pub struct Listing {
    pub tools: Vec<Tool>,
    pub pages: usize,
    /// The bytes of every page's answer line.
    pub bytes: usize,
}

/// How a `tools/call` ended, when the server answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallOutcome {
    Ok,
    /// A result with `isError: true`: the tool failed, the protocol worked.
    ToolError,
    /// A JSON-RPC error answer, or a result that is not a complete `CallToolResult`.
    ProtocolError,
}

/// A session in its era.
pub struct Session {
    pub conn: Conn,
    pub negotiated: Negotiated,
}

/// The transport a session runs over: a stdio server's pipes, or a Streamable HTTP endpoint.
pub enum Conn {
    Stdio(StdioConn),
    /// Boxed: the HTTP client and its pool are larger than a pipe's channel.
    Http(Box<HttpConn>),
}

impl From<StdioConn> for Conn {
    fn from(c: StdioConn) -> Conn {
        Conn::Stdio(c)
    }
}

impl From<HttpConn> for Conn {
    fn from(c: HttpConn) -> Conn {
        Conn::Http(Box::new(c))
    }
}

impl Conn {
    /// The transport's name as a recording gives it.
    pub fn transport(&self) -> &'static str {
        match self {
            Conn::Stdio(_) => "stdio",
            Conn::Http(_) => "http",
        }
    }

    /// Sends a request and waits for its answer until `deadline`.
    pub async fn request(
        &self,
        method: &str,
        params: Value,
        deadline: Instant,
    ) -> Result<Answer, McpError> {
        match self {
            Conn::Stdio(c) => c.request(method, params, deadline).await,
            Conn::Http(c) => c.request(method, params, deadline).await,
        }
    }

    /// Sends a notification by `deadline`.
    pub async fn notify(
        &self,
        method: &str,
        params: Value,
        deadline: Instant,
    ) -> Result<(), McpError> {
        match self {
            Conn::Stdio(c) => c.notify(method, params, deadline).await,
            Conn::Http(c) => c.notify(method, params, deadline).await,
        }
    }

    /// The server's process group.
    pub fn pid(&self) -> u32 {
        match self {
            Conn::Stdio(c) => c.pid(),
            Conn::Http(c) => c.pid(),
        }
    }

    /// When the server was spawned.
    pub fn spawned(&self) -> Instant {
        match self {
            Conn::Stdio(c) => c.spawned,
            Conn::Http(c) => c.spawned,
        }
    }

    /// When its first byte came (stdout's, or the first HTTP answer's head).
    pub fn first_byte(&self) -> Option<Instant> {
        match self {
            Conn::Stdio(c) => c.first_byte(),
            Conn::Http(c) => c.first_byte(),
        }
    }

    pub fn traffic(&self) -> Traffic {
        match self {
            Conn::Stdio(c) => c.traffic(),
            Conn::Http(c) => c.traffic(),
        }
    }

    /// `e` with the last line of a stdio server's stderr, where this connection reads it.
    pub fn with_stderr(&self, e: McpError) -> McpError {
        match self {
            Conn::Stdio(c) => c.with_stderr(e),
            Conn::Http(_) => e,
        }
    }

    /// The version negotiated, which an HTTP request names in its header from now on.
    fn negotiated(&self, version: &str) {
        if let Conn::Http(c) = self {
            c.set_version(version);
        }
    }

    /// The transport's end of the session: stdin closed and the exit awaited for `grace`,
    /// then SIGTERM and `term` more, then SIGKILL (stdio); or the session's `DELETE` within
    /// `grace` (HTTP).
    pub async fn shutdown(
        &mut self,
        grace: Duration,
        term: Duration,
    ) -> Result<Shutdown, McpError> {
        match self {
            Conn::Stdio(c) => c.shutdown(grace, term).await,
            Conn::Http(c) => c.shutdown(Instant::now() + grace).await,
        }
    }
}

fn client_info() -> Value {
    json!({"name": "vaultbench", "version": env!("CARGO_PKG_VERSION")})
}

/// The `_meta` every stateless request carries.
fn stateless_meta(version: &str) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": client_info(),
    })
}

fn server_info(result: &Value) -> (String, String) {
    let info = result.get("serverInfo");
    let field = |k: &str| {
        info.and_then(|i| i.get(k))
            .and_then(Value::as_str)
            .unwrap_or("")
            .chars()
            .take(200)
            .collect()
    };
    (field("name"), field("version"))
}

fn versions_in(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .take(64)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

impl Session {
    /// Probes the era (the `server/discover` wait bounded by `probe`) and completes the
    /// handshake where the era has one, all by `deadline`.
    pub async fn open(
        conn: impl Into<Conn>,
        probe: Duration,
        deadline: Instant,
    ) -> Result<Session, McpError> {
        let conn = conn.into();
        match negotiate(&conn, probe, deadline).await {
            Ok(negotiated) => {
                conn.negotiated(&negotiated.version);
                Ok(Session { conn, negotiated })
            }
            Err(e) => Err(conn.with_stderr(e)),
        }
    }
}

/// The era probe and the handshake where the era has one.
async fn negotiate(
    conn: &Conn,
    probe: Duration,
    deadline: Instant,
) -> Result<Negotiated, McpError> {
    {
        let probe_by = deadline.min(Instant::now() + probe);
        let asked = conn
            .request(
                "server/discover",
                json!({"_meta": stateless_meta(STATELESS_VERSION)}),
                probe_by,
            )
            .await;
        let fallback = match asked {
            Ok(Answer {
                outcome: Ok(result),
                ..
            }) => {
                let supported = versions_in(result.get("supportedVersions"));
                if supported.iter().any(|v| v == STATELESS_VERSION) {
                    let (server_name, server_version) = server_info(&result);
                    return Ok(Negotiated {
                        era: Era::Stateless,
                        version: STATELESS_VERSION.into(),
                        server_name,
                        server_version,
                        discovered: true,
                    });
                }
                supported
            }
            Ok(Answer {
                outcome: Err(e), ..
            }) if e.code == UNSUPPORTED_VERSION => versions_in(
                e.data
                    .as_ref()
                    .and_then(|d| d.get("supported").or_else(|| d.get("supportedVersions"))),
            ),
            // Any other error, or no answer in time: a server of the handshake era.
            Ok(Answer {
                outcome: Err(_), ..
            })
            | Err(McpError::Timeout { .. }) => Vec::new(),
            Err(e) => return Err(e),
        };
        // A modern server that lists only versions this client does not speak.
        if !fallback.is_empty()
            && !fallback
                .iter()
                .any(|v| HANDSHAKE_VERSIONS.contains(&v.as_str()))
        {
            return Err(McpError::Protocol {
                method: "server/discover".into(),
                what: format!(
                    "the server supports only {}, none of {STATELESS_VERSION}, {}",
                    contract::quote::quote(&fallback.join(", ")),
                    HANDSHAKE_VERSIONS.join(", ")
                ),
            });
        }
        let answer = conn
            .request(
                "initialize",
                json!({
                    "protocolVersion": HANDSHAKE_VERSIONS[0],
                    "capabilities": {},
                    "clientInfo": client_info(),
                }),
                deadline,
            )
            .await?;
        let result = match answer.outcome {
            Ok(r) => r,
            // A stateless server slower to start than the probe's bound refuses the
            // handshake with the versions it speaks: it is of the stateless era after all.
            Err(e)
                if e.code == UNSUPPORTED_VERSION
                    && versions_in(e.data.as_ref().and_then(|d| {
                        d.get("supported").or_else(|| d.get("supportedVersions"))
                    }))
                    .iter()
                    .any(|v| v == STATELESS_VERSION) =>
            {
                return Ok(Negotiated {
                    era: Era::Stateless,
                    version: STATELESS_VERSION.into(),
                    server_name: String::new(),
                    server_version: String::new(),
                    discovered: false,
                });
            }
            Err(e) => {
                return Err(McpError::Protocol {
                    method: "initialize".into(),
                    what: e.to_string(),
                });
            }
        };
        let version = result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        if !HANDSHAKE_VERSIONS.contains(&version) {
            return Err(McpError::Protocol {
                method: "initialize".into(),
                what: format!(
                    "the server answered protocolVersion {}, which this client does not speak ({})",
                    contract::quote::quote(version),
                    HANDSHAKE_VERSIONS.join(", ")
                ),
            });
        }
        let version = version.to_owned();
        let (server_name, server_version) = server_info(&result);
        conn.negotiated(&version);
        conn.notify("notifications/initialized", json!({}), deadline)
            .await?;
        Ok(Negotiated {
            era: Era::Handshake,
            version,
            server_name,
            server_version,
            discovered: false,
        })
    }
}

impl Session {
    /// `params` with the era's `_meta` added.
    fn params(&self, mut params: Map<String, Value>) -> Value {
        if self.negotiated.era == Era::Stateless {
            params.insert("_meta".into(), stateless_meta(&self.negotiated.version));
        }
        Value::Object(params)
    }

    /// Every page of `tools/list`, at most `max_pages`, by `deadline`.
    pub async fn list_tools(
        &self,
        max_pages: usize,
        deadline: Instant,
    ) -> Result<Listing, McpError> {
        let mut listing = Listing {
            tools: Vec::new(),
            pages: 0,
            bytes: 0,
        };
        let mut cursor: Option<String> = None;
        loop {
            if listing.pages == max_pages {
                return Err(McpError::Protocol {
                    method: "tools/list".into(),
                    what: format!("still gave a nextCursor after {max_pages} pages"),
                });
            }
            let mut p = Map::new();
            if let Some(c) = cursor.take() {
                p.insert("cursor".into(), Value::String(c));
            }
            let answer = self
                .conn
                .request("tools/list", self.params(p), deadline)
                .await?;
            listing.pages += 1;
            listing.bytes += answer.bytes;
            let result = answer.outcome.map_err(|e| McpError::Protocol {
                method: "tools/list".into(),
                what: e.to_string(),
            })?;
            let tools = result
                .get("tools")
                .and_then(Value::as_array)
                .ok_or_else(|| McpError::Protocol {
                    method: "tools/list".into(),
                    what: "the result has no tools array".into(),
                })?;
            for t in tools {
                let name =
                    t.get("name")
                        .and_then(Value::as_str)
                        .ok_or_else(|| McpError::Protocol {
                            method: "tools/list".into(),
                            what: "a tool without a name".into(),
                        })?;
                listing.tools.push(Tool { name: name.into() });
            }
            match result.get("nextCursor") {
                Some(Value::String(c)) => cursor = Some(c.clone()),
                None | Some(Value::Null) => return Ok(listing),
                Some(other) => {
                    return Err(McpError::Protocol {
                        method: "tools/list".into(),
                        what: format!(
                            "nextCursor is not a string: {}",
                            contract::quote::quote(&other.to_string())
                        ),
                    });
                }
            }
        }
    }

    /// One `tools/call` by `deadline`; a wait that ends without an answer is an error.
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: Value,
        deadline: Instant,
    ) -> Result<CallOutcome, McpError> {
        let mut p = Map::new();
        p.insert("name".into(), Value::String(name.into()));
        p.insert("arguments".into(), arguments);
        let answer = self
            .conn
            .request("tools/call", self.params(p), deadline)
            .await?;
        Ok(match answer.outcome {
            Err(_) => CallOutcome::ProtocolError,
            Ok(r) => {
                let complete = r
                    .get("resultType")
                    .is_none_or(|t| t.as_str() == Some("complete"));
                if !complete || !r.get("content").is_some_and(Value::is_array) {
                    CallOutcome::ProtocolError
                } else if r.get("isError").and_then(Value::as_bool) == Some(true) {
                    CallOutcome::ToolError
                } else {
                    CallOutcome::Ok
                }
            }
        })
    }

    /// One `tools/call` by `deadline`, with its result when the server gave one (the
    /// retrieval scoring reads what a search returned; the timed workload uses [`call_tool`],
    /// which keeps no result).
    ///
    /// [`call_tool`]: Session::call_tool
    pub async fn call_tool_result(
        &self,
        name: &str,
        arguments: Value,
        deadline: Instant,
    ) -> Result<Result<Value, String>, McpError> {
        let mut p = Map::new();
        p.insert("name".into(), Value::String(name.into()));
        p.insert("arguments".into(), arguments);
        let answer = self
            .conn
            .request("tools/call", self.params(p), deadline)
            .await?;
        Ok(answer.outcome.map_err(|e| e.to_string()))
    }
}
