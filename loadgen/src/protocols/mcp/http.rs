//! The Streamable HTTP transport: every JSON-RPC message is its own POST to the server's one
//! MCP endpoint, with `Accept: application/json, text/event-stream`. A request's answer is
//! either one JSON object (`application/json`) or an SSE stream (`text/event-stream`) that
//! carries the response, perhaps after notifications; the stream is read through the bounded
//! [`SseParser`] and dropped (closed) once the response came. A
//! notification is answered 202. The `Mcp-Session-Id` the `initialize` answer gives is sent on
//! every later request, and `MCP-Protocol-Version` once a version is negotiated (the stateless
//! revision's version from the request's own `_meta`, with its `Mcp-Method` and `Mcp-Name`
//! headers). The session ends with a `DELETE` of it. Every exchange ends by its deadline, and
//! a body that goes silent for longer than the trickle bound ends it sooner.
//!
//! A status other than 2xx is an error answer: the JSON-RPC error its body holds, if it holds
//! one (a 2026-07-28 server refuses a version with 400 and an `UnsupportedProtocolVersion`
//! error), else an error naming the status and the body's first bytes.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Method;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};

use super::McpError;
use super::sse::{Event, SseParser};
use super::stdio::{Answer, RpcError, Shutdown, Traffic, Usage};
use crate::answer::chain;

/// Where the server listens and what bounds its answers.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// `http://HOST:PORT/PATH`, the MCP endpoint.
    pub url: String,
    /// The largest JSON message (a JSON answer's body, an SSE event's data), bytes.
    pub max_message: usize,
    /// The longest SSE line, bytes.
    pub max_line: usize,
    /// The most JSON values one message may hold (`json_budget`).
    pub max_values: u64,
    /// Messages on a request's SSE stream with an id that is not the request's, tolerated
    /// before the connection is refused.
    pub max_unknown_ids: u64,
    /// The longest silence inside one answer's body before the exchange is refused.
    pub trickle: Duration,
}

/// The endpoint path when a target names none.
pub const DEFAULT_PATH: &str = "/mcp";
/// 10 s: an honest server answers a call's stream well within it once the head is sent.
pub const DEFAULT_TRICKLE: Duration = Duration::from_secs(10);

impl HttpConfig {
    /// The endpoint `url` with the stdio transport's bounds.
    pub fn new(url: String) -> HttpConfig {
        HttpConfig {
            url,
            max_message: super::stdio::DEFAULT_MAX_LINE,
            max_line: super::stdio::DEFAULT_MAX_LINE,
            max_values: crate::json_budget::MAX_JSON_VALUES,
            max_unknown_ids: super::stdio::DEFAULT_MAX_UNKNOWN_IDS,
            trickle: DEFAULT_TRICKLE,
        }
    }

    /// The endpoint at `addr` under `root` (a target's normalized root, `/mcp/`; `/` or none:
    /// [`DEFAULT_PATH`]).
    pub fn endpoint(addr: std::net::SocketAddr, root: Option<&str>) -> String {
        let path = root.map(|r| r.trim_end_matches('/')).unwrap_or("");
        let path = if path.is_empty() { DEFAULT_PATH } else { path };
        format!("http://{addr}{path}")
    }
}

#[derive(Default)]
struct State {
    session_id: Option<String>,
    version: Option<String>,
    first_byte: Option<Instant>,
    traffic: Traffic,
}

/// An MCP server over Streamable HTTP (started and reaped by someone else; `pid` is its
/// process group, for its CPU and RSS).
pub struct HttpConn {
    client: Client<HttpConnector, Full<Bytes>>,
    uri: hyper::Uri,
    cfg: HttpConfig,
    pid: u32,
    /// When the server was spawned.
    pub spawned: Instant,
    state: Mutex<State>,
    next_id: AtomicU64,
}

/// What the body of one POST held.
enum Body {
    /// A JSON object, or the data of one SSE event that answered.
    Message(Vec<u8>),
    /// A non-2xx status and the first bytes of its body.
    Status(u16, Vec<u8>),
    /// 202 or another 2xx without a message.
    Accepted(u16),
}

impl HttpConn {
    /// A connection to the endpoint of `cfg` for the server `pid` (a process group leader)
    /// spawned at `spawned`. Nothing is sent yet.
    pub fn new(cfg: HttpConfig, pid: u32, spawned: Instant) -> Result<HttpConn, McpError> {
        let uri: hyper::Uri = cfg.url.parse().map_err(|e| {
            McpError::Spawn(format!(
                "the MCP endpoint {}: {e}",
                contract::quote::quote(&cfg.url)
            ))
        })?;
        let mut conn = HttpConnector::new();
        conn.set_nodelay(true);
        conn.set_connect_timeout(Some(Duration::from_secs(5)));
        let client = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(64)
            .pool_idle_timeout(Duration::from_secs(30))
            .build(conn);
        Ok(HttpConn {
            client,
            uri,
            cfg,
            pid,
            spawned,
            state: Mutex::new(State::default()),
            next_id: AtomicU64::new(1),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// When the first answer's head came.
    pub fn first_byte(&self) -> Option<Instant> {
        self.lock().first_byte
    }

    pub fn traffic(&self) -> Traffic {
        self.lock().traffic
    }

    /// The session id the server gave, if it gave one.
    pub fn session_id(&self) -> Option<String> {
        self.lock().session_id.clone()
    }

    /// The negotiated version, sent as `MCP-Protocol-Version` from now on.
    pub fn set_version(&self, version: &str) {
        self.lock().version = Some(version.to_owned());
    }

    /// The request for `body`, with the session's and the era's headers.
    fn post(&self, method: &str, params: &Value, body: Vec<u8>) -> hyper::Request<Full<Bytes>> {
        let (session, version) = {
            let s = self.lock();
            (s.session_id.clone(), s.version.clone())
        };
        // A stateless request names its version in `_meta`; the header must match it.
        let meta_version = params
            .get("_meta")
            .and_then(|m| m.get("io.modelcontextprotocol/protocolVersion"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        let mut b = hyper::Request::builder()
            .method(Method::POST)
            .uri(self.uri.clone())
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .header(hyper::header::ACCEPT, "application/json, text/event-stream");
        if let Some(s) = session {
            b = b.header("mcp-session-id", s);
        }
        // A request that names its version in `_meta` is of the stateless revision, which
        // also wants the method (and a call's tool) in headers.
        let stateless = meta_version.is_some();
        if let Some(v) = meta_version.or(version) {
            b = b.header("mcp-protocol-version", v);
            if stateless {
                b = b.header("mcp-method", method);
                if let Some(name) = params.get("name").and_then(Value::as_str)
                    && plain_header(name)
                {
                    b = b.header("mcp-name", name);
                }
            }
        }
        b.body(Full::new(Bytes::from(body)))
            .unwrap_or_else(|_| hyper::Request::new(Full::new(Bytes::new())))
    }

    /// POSTs `msg` and reads its answer: for a request (`id` given) the message whose id is
    /// it, else the status. By `deadline`.
    async fn exchange(
        &self,
        method: &str,
        params: &Value,
        msg: &Value,
        id: Option<u64>,
        deadline: Instant,
    ) -> Result<Body, McpError> {
        let body = serde_json::to_vec(msg).map_err(|e| McpError::Protocol {
            method: method.into(),
            what: format!("encoding the request: {e}"),
        })?;
        let req = self.post(method, params, body);
        let sent = Instant::now();
        let mut streamed = 0u64;
        let work = self.read_answer(method, req, id, &mut streamed);
        match tokio::time::timeout_at(deadline.into(), work).await {
            Ok(r) => r,
            Err(_) => Err(McpError::Timeout {
                method: method.into(),
                waited: sent.elapsed(),
                note: if streamed > 0 {
                    format!(" (its answer's body had sent {streamed} bytes)")
                } else {
                    String::new()
                },
            }),
        }
    }

    async fn read_answer(
        &self,
        method: &str,
        req: hyper::Request<Full<Bytes>>,
        id: Option<u64>,
        streamed: &mut u64,
    ) -> Result<Body, McpError> {
        let closed = |what: String| McpError::Closed {
            method: method.into(),
            what,
        };
        let resp = self
            .client
            .request(req)
            .await
            .map_err(|e| closed(format!("POST {}: {}", self.cfg.url, chain(&e))))?;
        let status = resp.status().as_u16();
        let content_type = resp
            .headers()
            .get(hyper::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase();
        let session = resp
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        {
            let mut s = self.lock();
            s.first_byte.get_or_insert_with(Instant::now);
            if method == "initialize"
                && let Some(sid) = session
            {
                if sid.is_empty()
                    || sid.len() > 1024
                    || !sid.bytes().all(|b| (0x21..=0x7e).contains(&b))
                {
                    return Err(McpError::Protocol {
                        method: method.into(),
                        what: format!(
                            "the Mcp-Session-Id is not 1 to 1024 visible ASCII characters: {}",
                            contract::quote::quote_within(&sid, 80)
                        ),
                    });
                }
                s.session_id = Some(sid);
            }
        }
        let mut body = resp.into_body();
        if !(200..300).contains(&status) {
            let mut head = Vec::new();
            while head.len() < 64 * 1024 {
                match self.frame(&mut body, method).await? {
                    Some(b) => {
                        *streamed += b.len() as u64;
                        head.extend_from_slice(&b);
                    }
                    None => break,
                }
            }
            head.truncate(64 * 1024);
            return Ok(Body::Status(status, head));
        }
        let Some(want) = id else {
            return Ok(Body::Accepted(status));
        };
        if content_type.starts_with("text/event-stream") {
            let mut parser = SseParser::new(self.cfg.max_line, self.cfg.max_message);
            let mut events: Vec<Event> = Vec::new();
            loop {
                let Some(b) = self.frame(&mut body, method).await? else {
                    return Err(closed(format!(
                        "its SSE stream ended without the answer (after {} bytes)",
                        parser.bytes
                    )));
                };
                *streamed += b.len() as u64;
                self.lock().traffic.bytes += b.len() as u64;
                parser
                    .push(&b, &mut events)
                    .map_err(|e| closed(e.to_string()))?;
                for ev in events.drain(..) {
                    if ev.data.is_empty() {
                        continue;
                    }
                    if self.on_message(&ev.data, want, method)? {
                        return Ok(Body::Message(ev.data));
                    }
                }
            }
        } else if content_type.starts_with("application/json") {
            let mut whole = Vec::new();
            while let Some(b) = self.frame(&mut body, method).await? {
                *streamed += b.len() as u64;
                if whole.len() + b.len() > self.cfg.max_message {
                    return Err(closed(format!(
                        "its JSON answer is longer than {} bytes",
                        self.cfg.max_message
                    )));
                }
                whole.extend_from_slice(&b);
            }
            self.lock().traffic.bytes += whole.len() as u64;
            if self.on_message(&whole, want, method)? {
                Ok(Body::Message(whole))
            } else {
                Err(McpError::Protocol {
                    method: method.into(),
                    what: "its JSON answer is not the answer to the request".into(),
                })
            }
        } else {
            Err(McpError::Protocol {
                method: method.into(),
                what: format!(
                    "answered {status} with Content-Type {}, neither application/json nor text/event-stream",
                    contract::quote::quote_within(&content_type, 80)
                ),
            })
        }
    }

    /// The next frame's bytes, `None` at the end; a silence over the trickle bound is an
    /// error.
    async fn frame(
        &self,
        body: &mut hyper::body::Incoming,
        method: &str,
    ) -> Result<Option<Bytes>, McpError> {
        loop {
            let next = tokio::time::timeout(self.cfg.trickle, body.frame())
                .await
                .map_err(|_| McpError::Protocol {
                    method: method.into(),
                    what: format!(
                        "its answer's body went silent for {}",
                        contract::quote::duration(self.cfg.trickle)
                    ),
                })?;
            match next {
                None => return Ok(None),
                Some(Err(e)) => {
                    return Err(McpError::Closed {
                        method: method.into(),
                        what: format!("reading its answer: {}", chain(&e)),
                    });
                }
                Some(Ok(f)) => {
                    if let Ok(data) = f.into_data() {
                        return Ok(Some(data));
                    }
                }
            }
        }
    }

    /// One message of an answer: `Ok(true)` when it is the response to `want`; a
    /// notification or another id is counted; a server request is counted (and, on the
    /// handshake era's streams, not answered: this client offers no client features).
    fn on_message(&self, data: &[u8], want: u64, method: &str) -> Result<bool, McpError> {
        let bad = |why: String| McpError::Protocol {
            method: method.into(),
            what: format!(
                "sent a message that is not JSON-RPC ({why}): {}",
                contract::quote::bytes(&data[..data.len().min(200)])
            ),
        };
        crate::json_budget::check(data, self.cfg.max_values).map_err(bad)?;
        let v: Value = serde_json::from_slice(data).map_err(|e| bad(e.to_string()))?;
        let Value::Object(o) = v else {
            return Err(bad("not an object".into()));
        };
        let mut s = self.lock();
        s.traffic.lines += 1;
        match (o.contains_key("method"), o.get("id")) {
            (true, Some(_)) => s.traffic.server_requests += 1,
            (true, None) => s.traffic.notifications += 1,
            (false, Some(id)) if id.as_u64() == Some(want) => return Ok(true),
            (false, _) => {
                s.traffic.unknown_ids += 1;
                if s.traffic.unknown_ids > self.cfg.max_unknown_ids {
                    return Err(McpError::Protocol {
                        method: method.into(),
                        what: format!(
                            "answered {} times with an id no request had (the last {})",
                            s.traffic.unknown_ids,
                            contract::quote::quote_within(
                                &o.get("id").map(Value::to_string).unwrap_or_default(),
                                80
                            )
                        ),
                    });
                }
            }
        }
        Ok(false)
    }

    /// Sends a request and waits for its answer until `deadline`.
    pub async fn request(
        &self,
        method: &str,
        params: Value,
        deadline: Instant,
    ) -> Result<Answer, McpError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        match self
            .exchange(method, &params, &msg, Some(id), deadline)
            .await?
        {
            Body::Message(data) => {
                let v: Value = serde_json::from_slice(&data).unwrap_or(Value::Null);
                let outcome = match (v.get("result"), v.get("error")) {
                    (Some(r), None) => Ok(r.clone()),
                    (None, Some(e)) => Err(rpc_error(e)),
                    _ => {
                        return Err(McpError::Protocol {
                            method: method.into(),
                            what: "an answer needs one of result and error".into(),
                        });
                    }
                };
                Ok(Answer {
                    outcome,
                    bytes: data.len(),
                })
            }
            Body::Status(status, body) => Ok(Answer {
                outcome: Err(status_error(status, &body)),
                bytes: body.len(),
            }),
            Body::Accepted(status) => Err(McpError::Protocol {
                method: method.into(),
                what: format!("answered {status} without a message to a request"),
            }),
        }
    }

    /// Sends a notification: the server answers 202 (any 2xx is taken).
    pub async fn notify(
        &self,
        method: &str,
        params: Value,
        deadline: Instant,
    ) -> Result<(), McpError> {
        let msg = json!({"jsonrpc": "2.0", "method": method, "params": params});
        match self.exchange(method, &params, &msg, None, deadline).await? {
            Body::Accepted(_) | Body::Message(_) => Ok(()),
            Body::Status(status, body) => Err(McpError::Protocol {
                method: method.into(),
                what: format!("refused the notification: {}", status_error(status, &body)),
            }),
        }
    }

    /// Ends the session: a `DELETE` of it, by `deadline`. `after` is the DELETE's answer
    /// time when the server ended it (2xx); `None` when there was no session to end or the
    /// server does not let clients end sessions (405). The server keeps running (its owner
    /// stops it).
    pub async fn shutdown(&self, deadline: Instant) -> Result<Shutdown, McpError> {
        let none = Shutdown {
            after: None,
            by: None,
            status: 0,
            usage: Usage::default(),
        };
        let (session, version) = {
            let s = self.lock();
            (s.session_id.clone(), s.version.clone())
        };
        let Some(session) = session else {
            return Ok(none);
        };
        let mut b = hyper::Request::builder()
            .method(Method::DELETE)
            .uri(self.uri.clone())
            .header("mcp-session-id", session);
        if let Some(v) = version {
            b = b.header("mcp-protocol-version", v);
        }
        let req = b
            .body(Full::new(Bytes::new()))
            .unwrap_or_else(|_| hyper::Request::new(Full::new(Bytes::new())));
        let at = Instant::now();
        let work = async {
            let resp = self
                .client
                .request(req)
                .await
                .map_err(|e| McpError::Closed {
                    method: "DELETE".into(),
                    what: chain(&e),
                })?;
            let status = resp.status().as_u16();
            let mut body = resp.into_body();
            while self.frame(&mut body, "DELETE").await?.is_some() {}
            Ok::<u16, McpError>(status)
        };
        let status = tokio::time::timeout_at(deadline.into(), work)
            .await
            .map_err(|_| McpError::Timeout {
                method: "DELETE".into(),
                waited: at.elapsed(),
                note: String::new(),
            })??;
        match status {
            200..=299 => Ok(Shutdown {
                after: Some(at.elapsed()),
                ..none
            }),
            405 => Ok(none),
            s => Err(McpError::Protocol {
                method: "DELETE".into(),
                what: format!("the session's DELETE was answered {s}"),
            }),
        }
    }
}

/// A value that can go in a header as it is (visible ASCII and spaces, not too long).
fn plain_header(s: &str) -> bool {
    !s.is_empty() && s.len() <= 256 && s.bytes().all(|b| (0x20..=0x7e).contains(&b))
}

fn rpc_error(e: &Value) -> RpcError {
    RpcError {
        code: e.get("code").and_then(Value::as_i64).unwrap_or(0),
        message: e
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("")
            .chars()
            .take(500)
            .collect(),
        data: e.get("data").cloned(),
    }
}

/// A non-2xx answer as an error answer: the JSON-RPC error its body holds, else the status
/// with the body's first bytes.
fn status_error(status: u16, body: &[u8]) -> RpcError {
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    if let Some(e) = parsed.as_ref().and_then(|v| v.get("error"))
        && e.is_object()
    {
        let mut r = rpc_error(e);
        r.message = format!("HTTP {status}: {}", r.message);
        return r;
    }
    RpcError {
        code: 0,
        message: format!(
            "HTTP {status}: {}",
            String::from_utf8_lossy(&body[..body.len().min(200)]).trim()
        ),
        data: None,
    }
}
