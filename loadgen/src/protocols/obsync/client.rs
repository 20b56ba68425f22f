//! A device: its credentials, one pooled hyper client, its own seeded nonce stream, and the
//! two ways a request goes out (sign afresh, send, time, count): `Device::send` over the pool,
//! and `Device::send_lean` over a closed-loop worker's own connection ([`h1`]).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::HeaderName;
use hyper::{HeaderMap, Method, Request};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use protocol::sign::DeviceCredentials;
use protocol::{H_DEVICE, H_NONCE, H_SIG, H_TS, Route, RouteMethod};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sha2::{Digest, Sha256};

use crate::answer::{chain, declared_length};
use crate::error::LoadError;
use crate::h1::{self, H1Conn};
use crate::lock::lock;
use crate::stats::{Recorder, Sample};
use crate::target::Target;

/// Unix seconds for the `X-Obsync-Ts` header (the protocol's signing rule: `ts` is the real
/// wall clock; docs/src/protocol/obsync-v1.md).
pub use crate::clock::{Clock, system_clock};

/// Default bound on one request (connect + answer); long polls add their `wait`.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest answer body read: a chunk batch of 64 chunks of 1 MiB would be 64 MiB, but the
/// generator asks for at most 3 (protocol: client batches of ≤ 3); JSON pages are ≤ 4 MiB.
pub const MAX_ANSWER_BYTES: usize = 32 * 1024 * 1024;

pub(crate) type HttpClient = Client<HttpConnector, Full<Bytes>>;

/// A new pooled HTTP/1.1 client (keep-alive, no Nagle), one per device.
pub(crate) fn http_client() -> HttpClient {
    let mut conn = HttpConnector::new();
    conn.set_nodelay(true);
    conn.set_connect_timeout(Some(Duration::from_secs(5)));
    Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(1024)
        .pool_idle_timeout(Duration::from_secs(30))
        .build(conn)
}

/// What this device knows about one file it pushed or wrote (its local index).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileState {
    pub file_id: String,
    pub head: String,
    pub sids: Vec<String>,
    pub size: u64,
    pub sha256: String,
    pub is_dir: bool,
}

/// An enrolled device. Cheap to clone (an `Arc`): clones share the HTTP client, the nonce
/// stream and the local file index.
#[derive(Clone)]
pub struct Device {
    pub(crate) inner: Arc<DeviceInner>,
}

pub(crate) struct DeviceInner {
    pub target: Target,
    pub creds: DeviceCredentials,
    pub signer: Signer,
    pub index: usize,
    pub domain_id: String,
    pub client: HttpClient,
    pub rng: Mutex<ChaCha8Rng>,
    pub clock: Clock,
    pub files: Mutex<FileIndex>,
    /// Counts the requests of single operations (push_file, wait_changes, ...): counts and
    /// bytes only ([`Recorder::counting`]), so that a held device stays small.
    pub ambient: Recorder,
    /// Chunk uploads this device made or has in flight, by sid. Two files of one push that
    /// share a body both see the sid missing; the second waits for the first's PUT instead of
    /// sending its own, so request and fsync counts do not depend on timing.
    pub uploads: Mutex<BTreeMap<String, Arc<tokio::sync::OnceCell<()>>>>,
    /// A crash point inside a chunk upload's body, when one is armed.
    pub mid_body: Mutex<Option<Arc<crate::protocols::obsync::midbody::MidBodyTrap>>>,
}

/// The device's local index: path -> file state, and file_id -> path (renames keep the id).
#[derive(Debug, Clone, Default)]
pub(crate) struct FileIndex {
    pub by_path: BTreeMap<String, FileState>,
    pub by_id: BTreeMap<String, String>,
}

impl FileIndex {
    pub fn insert(&mut self, path: &str, st: FileState) {
        if let Some(old) = self.by_id.insert(st.file_id.clone(), path.to_owned())
            && old != path
        {
            self.by_path.remove(&old);
        }
        self.by_path.insert(path.to_owned(), st);
    }

    pub fn get_by_id(&self, file_id: &str) -> Option<(String, FileState)> {
        let path = self.by_id.get(file_id)?;
        Some((path.clone(), self.by_path.get(path)?.clone()))
    }

    pub fn remove_id(&mut self, file_id: &str) -> Option<(String, FileState)> {
        let path = self.by_id.remove(file_id)?;
        let st = self.by_path.remove(&path)?;
        Some((path, st))
    }
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Device")
            .field("device_id", &self.inner.creds.device_id)
            .field("index", &self.inner.index)
            .field("target", &self.inner.target.base())
            .finish_non_exhaustive()
    }
}

/// The nonce stream of device `index` in session `session` of run seed `seed`: one
/// ChaCha8 stream per (device, session), so two invocations sharing a state file never
/// send the same nonce (the server would answer `401 replayed_nonce`).
pub(crate) fn nonce_rng(seed: u64, index: usize, session: u64) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(((session & 0xffff_ffff) << 32) | (index as u64 & 0xffff_ffff));
    rng
}

/// The nonce stream of device `index` in a session loaded from a state file: the ChaCha8
/// key is SHA-256 over ("vaultbench/nonce", `seed`, `session`, `salt`), the stream is the
/// device index. `salt` is 64 bits from the operating system drawn by every load, so two
/// invocations never share a stream even when they share a session number (concurrent runs,
/// a restored older state file); nonces are then unique, not reproducible across runs, which
/// is what the server's replay check needs. Within a run they still follow from the key, so
/// workers made in a fixed order draw fixed streams. `salt` 0 is [`nonce_rng`] (enrolment).
/// `tag` (a shard or Locust worker index) fills the stream's upper 32 bits, so generators
/// that share a key by construction (one state file copied to every machine) draw disjoint
/// streams even for the same device.
pub(crate) fn session_nonce_rng(
    seed: u64,
    index: usize,
    session: u64,
    salt: u64,
    tag: u32,
) -> ChaCha8Rng {
    if salt == 0 {
        return nonce_rng(seed, index, session);
    }
    let mut h = Sha256::new();
    h.update(b"vaultbench/nonce\n");
    h.update(seed.to_le_bytes());
    h.update(session.to_le_bytes());
    h.update(salt.to_le_bytes());
    let mut rng = ChaCha8Rng::from_seed(h.finalize().into());
    rng.set_stream((u64::from(tag) << 32) | (index as u64 & 0xffff_ffff));
    rng
}

impl Device {
    pub(crate) fn new(
        target: Target,
        creds: DeviceCredentials,
        index: usize,
        domain_id: String,
        rng: ChaCha8Rng,
    ) -> Device {
        Device::with_http(target, creds, index, domain_id, rng, http_client())
    }

    /// A device over `client`, a pool it may share with others: a generator holding
    /// thousands of devices keeps one pool, whose connections are the requests in flight,
    /// not one pool per device.
    pub(crate) fn with_http(
        target: Target,
        creds: DeviceCredentials,
        index: usize,
        domain_id: String,
        rng: ChaCha8Rng,
        client: HttpClient,
    ) -> Device {
        Device {
            inner: Arc::new(DeviceInner {
                target,
                signer: Signer::new(&creds.secret),
                creds,
                index,
                domain_id,
                client,
                rng: Mutex::new(rng),
                clock: system_clock(),
                files: Mutex::new(FileIndex::default()),
                ambient: Recorder::counting(),
                uploads: Mutex::new(BTreeMap::new()),
                mid_body: Mutex::new(None),
            }),
        }
    }

    /// A copy of this device that signs with `clock` (tests pin the timestamp). It shares
    /// the HTTP client; the nonce stream continues from the current position.
    pub fn with_clock(&self, clock: Clock) -> Device {
        self.copy_with(self.inner.client.clone(), clock)
    }

    /// A copy of this device with an HTTP client of its own: once the original is dropped,
    /// its pooled connections close (a device paired in a run of many must not keep a
    /// server's connection slot idle). The nonce stream continues from the current position.
    pub fn with_fresh_client(&self) -> Device {
        self.copy_with(http_client(), self.inner.clock.clone())
    }

    /// This device as a client pointed at `target` sees it (the same server behind a proxy):
    /// the same credentials, a nonce stream of its own seeded by 32 bytes of this device's
    /// (so the two never send the same nonce), an HTTP client of its own and an empty index.
    pub(crate) fn via(&self, target: Target) -> Device {
        let mut seed = [0u8; 32];
        self.fill_random(&mut seed);
        let i = &self.inner;
        Device::with_http(
            target,
            i.creds.clone(),
            i.index,
            i.domain_id.clone(),
            ChaCha8Rng::from_seed(seed),
            http_client(),
        )
    }

    fn copy_with(&self, client: HttpClient, clock: Clock) -> Device {
        let i = &self.inner;
        Device {
            inner: Arc::new(DeviceInner {
                target: i.target.clone(),
                creds: i.creds.clone(),
                signer: i.signer.clone(),
                index: i.index,
                domain_id: i.domain_id.clone(),
                client,
                rng: Mutex::new(lock(&i.rng).clone()),
                clock,
                files: Mutex::new(lock(&i.files).clone()),
                ambient: i.ambient.clone(),
                uploads: Mutex::new(lock(&i.uploads).clone()),
                mid_body: Mutex::new(lock(&i.mid_body).clone()),
            }),
        }
    }

    /// The device id (32 hex).
    pub fn device_id(&self) -> &str {
        &self.inner.creds.device_id
    }

    /// The account-wide domain id this device writes into every version.
    pub fn domain_id(&self) -> &str {
        &self.inner.domain_id
    }

    /// The target this device talks to.
    pub fn target(&self) -> &Target {
        &self.inner.target
    }

    /// Position in the enrolment order (0 = the device that ran setup).
    pub fn index(&self) -> usize {
        self.inner.index
    }

    /// What this device's single operations (push_file, delete_file, rename_path,
    /// wait_changes, fetch_and_write) have sent since it was made or last reset: requests,
    /// statuses and bytes per route (no latency histograms).
    pub fn measured(&self) -> crate::stats::Measured {
        self.inner.ambient.snapshot()
    }

    /// Forgets the counts behind [`Device::measured`].
    pub fn reset_measured(&self) {
        self.inner.ambient.reset();
    }

    pub(crate) fn credentials(&self) -> &DeviceCredentials {
        &self.inner.creds
    }

    /// `n` bytes from this device's seeded stream, as hex.
    pub(crate) fn random_hex(&self, n: usize) -> String {
        let mut buf = [0u8; 32];
        let n = n.min(32);
        lock(&self.inner.rng).fill_bytes(&mut buf[..n]);
        fast_hex(&buf[..n])
    }

    /// Fills `buf` from this device's seeded stream (route-load bodies).
    pub(crate) fn fill_random(&self, buf: &mut [u8]) {
        lock(&self.inner.rng).fill_bytes(buf);
    }

    /// The request's head as a hyper builder, signed afresh (a new ts and nonce) unless
    /// `signed` is false, and how long signing took.
    pub(crate) fn request_head(
        &self,
        req: &Outgoing<'_>,
    ) -> (hyper::http::request::Builder, Option<Duration>) {
        let mut builder = Request::builder()
            .method(req.method.clone())
            .uri(self.inner.target.url(req.path_and_query));
        if let Some(ct) = req.content_type {
            builder = builder.header(hyper::header::CONTENT_TYPE, ct);
        }
        let mut sign_time = None;
        if req.signed {
            let t0 = Instant::now();
            let owned_hash;
            let body_hash = match req.body_sha256 {
                Some(h) => h,
                None => {
                    owned_hash = protocol::sha256_hex(&req.body);
                    &owned_hash
                }
            };
            let nonce = self.random_hex(16);
            let ts = (self.inner.clock)();
            let canonical = protocol::canonical_string(
                req.method.as_str(),
                req.path_and_query,
                ts,
                &nonce,
                body_hash,
            );
            let sig = self.inner.signer.sign(canonical.as_bytes());
            sign_time = Some(t0.elapsed());
            builder = builder
                .header(
                    HeaderName::from_static(H_DEVICE),
                    &self.inner.creds.device_id,
                )
                .header(HeaderName::from_static(H_TS), ts.to_string())
                .header(HeaderName::from_static(H_NONCE), nonce)
                .header(HeaderName::from_static(H_SIG), sig);
        }
        (builder, sign_time)
    }

    /// Sends one request over the device's pooled client: signs it afresh (new ts and
    /// nonce) unless `signed` is false, times it, and counts the outcome in `rec` under
    /// `route`. A non-2xx status is an `Ok` answer; only transport failures are `Err` (and
    /// are counted too).
    pub(crate) async fn send(
        &self,
        rec: &Recorder,
        req: Outgoing<'_>,
    ) -> Result<Answer, LoadError> {
        let (builder, sign_time) = self.request_head(&req);
        if let Some(trap) = self.trap_for(&req) {
            let head = raw_head(&builder, self.inner.target.authority(), req.body.len());
            return self.send_trapped(rec, &req, head, sign_time, &trap).await;
        }
        let bytes_sent = req.body.len() as u64;
        let request = builder
            .body(Full::new(req.body))
            .map_err(|e| LoadError::Invalid {
                what: req.path_and_query.to_owned(),
                reason: e.to_string(),
            })?;
        let sent = Instant::now();
        let outcome = tokio::time::timeout(req.timeout, async {
            let resp = self
                .inner
                .client
                .request(request)
                .await
                .map_err(|e| (if e.is_connect() { "connect" } else { "io" }, chain(&e)))?;
            let (parts, body) = resp.into_parts();
            // A declared length over the cap is refused before a byte of the body is read.
            if let Some(n) = declared_length(&parts.headers)
                && n > MAX_ANSWER_BYTES as u64
            {
                return Err((TOO_LARGE, format!("Content-Length {n}")));
            }
            let body = Limited::new(body, MAX_ANSWER_BYTES)
                .collect()
                .await
                .map_err(|e| {
                    if e.downcast_ref::<http_body_util::LengthLimitError>()
                        .is_some()
                    {
                        (TOO_LARGE, "the body ran past the cap".to_owned())
                    } else {
                        ("io", format!("reading the answer: {}", chain(&*e)))
                    }
                })?
                .to_bytes();
            Ok::<_, (&'static str, String)>((parts, body))
        })
        .await;
        let sample = Sample::done_now(sent, req.intended, bytes_sent, sign_time);
        match outcome {
            Ok(Ok((parts, body))) => {
                let status = parts.status.as_u16();
                rec.record(
                    req.route.label(),
                    status_label(status),
                    sample(body.len() as u64),
                );
                Ok(Answer {
                    status,
                    headers: parts.headers,
                    body,
                })
            }
            Ok(Err((TOO_LARGE, detail))) => {
                rec.record(req.route.label(), TOO_LARGE, sample(0));
                Err(LoadError::AnswerTooLarge {
                    route: req.route.label().to_owned(),
                    cap: MAX_ANSWER_BYTES as u64,
                    detail,
                })
            }
            Ok(Err((kind, detail))) => {
                rec.record(req.route.label(), kind, sample(0));
                Err(transport(req.route, kind, detail))
            }
            Err(_) => {
                rec.record(req.route.label(), "timeout", sample(0));
                Err(timed_out(req.route, req.timeout))
            }
        }
    }

    /// [`Device::send`] over `w`, a connection a closed-loop worker keeps to itself, with
    /// the lean HTTP/1.1 path of [`h1`]: the request is signed and written from reused
    /// buffers (no allocation per request on a bodiless route), the answer's body is counted
    /// and dropped. Returns the status; transport failures are counted and returned.
    pub(crate) async fn send_lean(
        &self,
        rec: &Recorder,
        w: &mut WorkerConn,
        req: &Outgoing<'_>,
    ) -> Result<u16, LoadError> {
        let sign = self.write_lean(w, req);
        let sent = Instant::now();
        let deadline = sent + req.timeout;
        let timer = w
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline.into())));
        timer.as_mut().reset(deadline.into());
        let head_only = req.method == Method::HEAD;
        let outcome = tokio::select! {
            biased;
            r = w.conn.roundtrip(head_only, MAX_ANSWER_BYTES as u64) => r,
            _ = timer.as_mut() => Err(("timeout", String::new())),
        };
        finish_lean(rec, req, sign, sent, outcome)
    }

    /// [`Device::send_lean`] over a blocking connection ([`WorkerConn::blocking`]), on the
    /// worker's own thread: the socket's timeouts bound the exchange (the engine shuts it down
    /// at its hard stop), so no runtime or timer takes part.
    pub(crate) fn send_blocking(
        &self,
        rec: &Recorder,
        w: &mut WorkerConn,
        req: &Outgoing<'_>,
    ) -> Result<u16, LoadError> {
        let sign = self.write_lean(w, req);
        let sent = Instant::now();
        let head_only = req.method == Method::HEAD;
        let outcome = w
            .conn
            .roundtrip_blocking(head_only, MAX_ANSWER_BYTES as u64);
        finish_lean(rec, req, sign, sent, outcome)
    }

    /// Signs `req` afresh (when it is signed) and writes it whole into `w`'s request buffer;
    /// returns how long signing took.
    fn write_lean(&self, w: &mut WorkerConn, req: &Outgoing<'_>) -> Option<Duration> {
        let method = req.method.as_str();
        let mut signed = None;
        if req.signed {
            let t0 = Instant::now();
            let mut owned_hash = [0u8; 64];
            let body_hash: &[u8] = match req.body_sha256 {
                Some(h) => h.as_bytes(),
                None => {
                    hex_into(&Sha256::digest(&req.body), &mut owned_hash);
                    &owned_hash
                }
            };
            let s = w.sign(self, method, req.path_and_query, body_hash);
            signed = Some((s, t0.elapsed()));
        }
        let buf = w.conn.request_buf();
        buf.extend_from_slice(method.as_bytes());
        buf.push(b' ');
        buf.extend_from_slice(req.path_and_query.as_bytes());
        buf.extend_from_slice(b" HTTP/1.1\r\nhost: ");
        buf.extend_from_slice(self.inner.target.authority().as_bytes());
        if let Some(ct) = req.content_type {
            buf.extend_from_slice(b"\r\ncontent-type: ");
            buf.extend_from_slice(ct.as_bytes());
        }
        if let Some((s, _)) = &signed {
            for (name, value) in [
                (H_DEVICE, self.inner.creds.device_id.as_bytes()),
                (H_NONCE, &s.nonce[..]),
                (H_SIG, &s.sig[..]),
            ] {
                buf.extend_from_slice(b"\r\n");
                buf.extend_from_slice(name.as_bytes());
                buf.extend_from_slice(b": ");
                buf.extend_from_slice(value);
            }
            buf.extend_from_slice(b"\r\n");
            buf.extend_from_slice(H_TS.as_bytes());
            buf.extend_from_slice(b": ");
            h1::push_decimal(buf, s.ts);
        }
        // A body, or a method that defines one (RFC 9110 §8.6), announces its length.
        if !req.body.is_empty() || matches!(req.method, Method::POST | Method::PUT | Method::PATCH)
        {
            buf.extend_from_slice(b"\r\ncontent-length: ");
            h1::push_decimal(buf, req.body.len() as i64);
        }
        buf.extend_from_slice(b"\r\n\r\n");
        buf.extend_from_slice(&req.body);
        signed.map(|(_, t)| t)
    }

    /// [`Device::send`] with retries for operations that must succeed (push, pull): up to
    /// three attempts on a transport error or a 503, each signed afresh (protocol: "Every
    /// retry is signed afresh"), with 50/100 ms back-off. The attempts share the request's
    /// one timeout: a target that hangs costs one timeout, not three. Then checks the status
    /// is one of `ok`, turning anything else into a [`LoadError::Status`] naming the route.
    pub(crate) async fn call(
        &self,
        rec: &Recorder,
        req: Outgoing<'_>,
        ok: &[u16],
    ) -> Result<Answer, LoadError> {
        let deadline = Instant::now() + req.timeout;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let left = deadline.saturating_duration_since(Instant::now());
            let res = self.send(rec, req.clone().timeout(left)).await;
            // Only a transport failure or a 503 may pass with time: an answer over the cap,
            // a malformed one or another status would come back the same.
            let retry = match &res {
                Err(LoadError::Transport { .. }) => true,
                Ok(a) => a.status == 503,
                Err(_) => false,
            };
            let backoff = Duration::from_millis(50 << (attempt - 1));
            if retry && attempt < 3 && Instant::now() + backoff < deadline {
                tokio::time::sleep(backoff).await;
                continue;
            }
            let a = res.map_err(|e| within_deadline(e, req.timeout, attempt))?;
            return if ok.contains(&a.status) {
                Ok(a)
            } else {
                Err(a.into_error(req.route))
            };
        }
    }
}

const HEX_DIGITS: &[u8; 16] = b"0123456789abcdef";

/// Lowercase hex of `bytes` into `out` (twice as long), without allocating.
pub(crate) fn hex_into(bytes: &[u8], out: &mut [u8]) {
    for (b, pair) in bytes.iter().zip(out.chunks_exact_mut(2)) {
        pair[0] = HEX_DIGITS[(b >> 4) as usize];
        pair[1] = HEX_DIGITS[(b & 15) as usize];
    }
}

/// Lowercase hex without the per-char iterator of `hex::encode`.
pub(crate) fn fast_hex(bytes: &[u8]) -> String {
    let mut out = vec![0u8; bytes.len() * 2];
    hex_into(bytes, &mut out);
    String::from_utf8(out).expect("hex digits are ASCII")
}

/// HMAC-SHA-256 with the key schedule done once per device: the inner and outer hash
/// states after absorbing `key ^ ipad` and `key ^ opad` (RFC 2104), cloned per request.
/// Equal to `protocol::sign::signature` (tested), two SHA-256 blocks cheaper.
#[derive(Clone)]
pub(crate) struct Signer {
    inner: Sha256,
    outer: Sha256,
}

impl Signer {
    pub fn new(secret: &[u8; 32]) -> Signer {
        let (mut ipad, mut opad) = ([0x36u8; 64], [0x5cu8; 64]);
        for (i, b) in secret.iter().enumerate() {
            ipad[i] ^= b;
            opad[i] ^= b;
        }
        let mut inner = Sha256::new();
        inner.update(ipad);
        let mut outer = Sha256::new();
        outer.update(opad);
        Signer { inner, outer }
    }

    /// Hex HMAC-SHA-256 of `msg`.
    pub fn sign(&self, msg: &[u8]) -> String {
        String::from_utf8(self.sign_hex(msg).to_vec()).expect("hex digits are ASCII")
    }

    /// Hex HMAC-SHA-256 of `msg`, on the stack.
    pub fn sign_hex(&self, msg: &[u8]) -> [u8; 64] {
        let mut i = self.inner.clone();
        i.update(msg);
        let mut o = self.outer.clone();
        o.update(i.finalize());
        let mut out = [0u8; 64];
        hex_into(&o.finalize(), &mut out);
        out
    }
}

/// What a closed-loop worker keeps to itself: its connection (the lean HTTP/1.1 path), its
/// nonce stream, a buffer for the canonical string and a timer for the request timeout. Owning
/// these, a worker sends without a lock, an allocation, a pool checkout, a second task or a
/// new timer per request (wrk's shape: one event loop per thread, state per connection).
pub(crate) struct WorkerConn {
    conn: H1Conn,
    rng: ChaCha8Rng,
    canonical: Vec<u8>,
    /// Re-armed per request; moving a deadline later is an atomic update in tokio, not a
    /// timer-wheel insertion as a fresh `timeout()` per request would be. Made on the first
    /// request of an async connection; a blocking one never has it.
    timer: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
}

impl WorkerConn {
    /// A worker of `dev`. Its nonces come from a child stream seeded by 32 bytes of the
    /// device's stream, so they stay deterministic for a seed (when workers are made in a
    /// fixed order) and never depend on how workers interleave. Must run inside a runtime.
    pub fn new(dev: &Device) -> WorkerConn {
        WorkerConn::over(dev, H1Conn::new(dev.target().addr()))
    }

    /// A worker of `dev` over a blocking connection, for a thread of its own: every socket
    /// operation is bounded by `timeout`, and `slot` lets the engine shut it down. Nonces as
    /// [`WorkerConn::new`]'s.
    pub fn blocking(dev: &Device, timeout: Duration, slot: Arc<h1::BlockingSlot>) -> WorkerConn {
        WorkerConn::over(dev, H1Conn::blocking(dev.target().addr(), timeout, slot))
    }

    fn over(dev: &Device, conn: H1Conn) -> WorkerConn {
        let mut seed = [0u8; 32];
        dev.fill_random(&mut seed);
        WorkerConn {
            conn,
            rng: ChaCha8Rng::from_seed(seed),
            canonical: Vec::with_capacity(256),
            timer: None,
        }
    }

    /// Signs one request of `dev` afresh: a new nonce from this worker's stream, the clock's
    /// `ts`, and the HMAC of the canonical string, written into a reused buffer by
    /// `protocol::write_canonical` (the same function `protocol::canonical_string` uses).
    pub fn sign(
        &mut self,
        dev: &Device,
        method: &str,
        path_and_query: &str,
        body_sha256_hex: &[u8],
    ) -> LeanSig {
        let mut raw = [0u8; 16];
        self.rng.fill_bytes(&mut raw);
        let mut nonce = [0u8; 32];
        hex_into(&raw, &mut nonce);
        let ts = (dev.inner.clock)();
        let c = &mut self.canonical;
        c.clear();
        protocol::write_canonical(c, method, path_and_query, ts, &nonce, body_sha256_hex);
        LeanSig {
            nonce,
            ts,
            sig: dev.inner.signer.sign_hex(c),
        }
    }
}

/// The varying authentication headers of one request, signed without allocating.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LeanSig {
    /// 32 hex digits.
    pub nonce: [u8; 32],
    pub ts: i64,
    /// 64 hex digits.
    pub sig: [u8; 64],
}

/// Records one lean exchange and turns its outcome into the request's result; a `timeout`
/// failure is the request's timeout, whichever side noticed it.
fn finish_lean(
    rec: &Recorder,
    req: &Outgoing<'_>,
    sign: Option<Duration>,
    sent: Instant,
    outcome: Result<h1::Reply, h1::Fail>,
) -> Result<u16, LoadError> {
    let sample = Sample::done_now(sent, req.intended, req.body.len() as u64, sign);
    match outcome {
        Ok(reply) => {
            rec.record(
                req.route.label(),
                status_label(reply.status),
                sample(reply.body_bytes),
            );
            Ok(reply.status)
        }
        Err(("timeout", detail)) => {
            rec.record(req.route.label(), "timeout", sample(0));
            Err(if detail.is_empty() {
                timed_out(req.route, req.timeout)
            } else {
                transport(
                    req.route,
                    "timeout",
                    format!(
                        "no complete answer within {}: {detail}",
                        contract::quote::duration(req.timeout)
                    ),
                )
            })
        }
        Err((kind, detail)) => {
            rec.record(req.route.label(), kind, sample(0));
            Err(transport(req.route, kind, detail))
        }
    }
}

pub(crate) fn transport(route: Route, kind: &'static str, detail: String) -> LoadError {
    LoadError::Transport {
        route: route.label().to_owned(),
        kind,
        detail,
    }
}

pub(crate) fn timed_out(route: Route, after: Duration) -> LoadError {
    transport(route, "timeout", format!("no answer within {after:?}"))
}

/// A retried request's timeout restated as the one deadline its attempts shared (the last
/// attempt only had what was left of it).
fn within_deadline(e: LoadError, deadline: Duration, attempts: u32) -> LoadError {
    match e {
        LoadError::Transport {
            route,
            kind: "timeout",
            ..
        } => LoadError::Transport {
            route,
            kind: "timeout",
            detail: if attempts == 1 {
                format!("no complete answer within the request's deadline of {deadline:?}")
            } else {
                format!(
                    "no complete answer within the request's deadline of {deadline:?}, \
                     which its {attempts} attempts shared"
                )
            },
        },
        other => other,
    }
}

/// The outcome kind of an answer refused for its size (counted under this label).
pub(crate) const TOO_LARGE: &str = "too_large";

/// One path the server acknowledged (answered 2xx to its version post), as this device
/// last saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acknowledged {
    pub version_id: String,
    pub sha256: String,
    pub size: u64,
    pub is_dir: bool,
}

impl Device {
    /// Every path whose latest version the server acknowledged to this device, by path: what
    /// a crash-consistent server must still have after a crash.
    pub fn acknowledged(&self) -> std::collections::BTreeMap<String, Acknowledged> {
        lock_files(self)
            .by_path
            .iter()
            .map(|(p, st)| {
                (
                    p.clone(),
                    Acknowledged {
                        version_id: st.head.clone(),
                        sha256: st.sha256.clone(),
                        size: st.size,
                        is_dir: st.is_dir,
                    },
                )
            })
            .collect()
    }

    /// How many paths [`Device::acknowledged`] would list, without copying them.
    pub fn acknowledged_count(&self) -> usize {
        lock_files(self).by_path.len()
    }
}

pub(crate) fn lock_files(d: &Device) -> std::sync::MutexGuard<'_, FileIndex> {
    lock(&d.inner.files)
}

/// The HTTP/1.1 head of the request `b` describes, with `Host` and `Content-Length`, as
/// written on a connection of its own (a mid-body crash point's request).
pub(crate) fn raw_head(
    b: &hyper::http::request::Builder,
    authority: &str,
    body_len: usize,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(512);
    let method = b.method_ref().map_or("GET", |m| m.as_str());
    let path = b
        .uri_ref()
        .and_then(|u| u.path_and_query())
        .map_or("/", |p| p.as_str());
    out.extend_from_slice(format!("{method} {path} HTTP/1.1\r\nhost: {authority}\r\n").as_bytes());
    if let Some(h) = b.headers_ref() {
        for (name, value) in h {
            out.extend_from_slice(name.as_str().as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
    }
    out.extend_from_slice(format!("content-length: {body_len}\r\n\r\n").as_bytes());
    out
}

/// Status labels for the common codes without allocating per request.
pub(crate) fn status_label(status: u16) -> &'static str {
    match status {
        200 => "200",
        201 => "201",
        204 => "204",
        206 => "206",
        400 => "400",
        401 => "401",
        403 => "403",
        404 => "404",
        409 => "409",
        410 => "410",
        413 => "413",
        416 => "416",
        422 => "422",
        500 => "500",
        502 => "502",
        503 => "503",
        504 => "504",
        507 => "507",
        s if s < 200 => "1xx",
        s if s < 300 => "2xx",
        s if s < 400 => "3xx",
        s if s < 500 => "4xx",
        _ => "5xx",
    }
}

/// The hyper method of a protocol route.
fn method_of(route: Route) -> Method {
    match route.method() {
        RouteMethod::Get => Method::GET,
        RouteMethod::Post => Method::POST,
        RouteMethod::Put => Method::PUT,
    }
}

/// Appended to a `401 replayed_nonce`: the generator never repeats a nonce within a run, so
/// the likely cause is outside it.
pub(crate) const REPLAYED_NONCE_HINT: &str = " (likely cause: another process signing as this \
device with the same nonces, e.g. a copy of the --state file used by an older vaultbench that \
did not salt its sessions; use a separate --state file per concurrent run)";

/// One request to send.
#[derive(Clone)]
pub(crate) struct Outgoing<'a> {
    pub route: Route,
    pub method: Method,
    pub path_and_query: &'a str,
    pub body: Bytes,
    /// Hex SHA-256 of `body` when the caller already has it (a chunk's sid).
    pub body_sha256: Option<&'a str>,
    pub content_type: Option<&'static str>,
    pub signed: bool,
    pub timeout: Duration,
    /// Open loop: the intended send time (coordinated-omission correction).
    pub intended: Option<Instant>,
}

impl<'a> Outgoing<'a> {
    /// A bodiless request to `route` (its method), signed, with the default timeout.
    pub fn new(route: Route, path_and_query: &'a str) -> Self {
        Outgoing {
            route,
            method: method_of(route),
            path_and_query,
            body: Bytes::new(),
            body_sha256: Some(protocol::sign::EMPTY_BODY_SHA256),
            content_type: None,
            signed: true,
            timeout: REQUEST_TIMEOUT,
            intended: None,
        }
    }

    /// A request to `route` with a JSON body.
    pub fn post_json(route: Route, path_and_query: &'a str, body: Vec<u8>) -> Self {
        Outgoing {
            body: Bytes::from(body),
            body_sha256: None,
            content_type: Some("application/json"),
            ..Outgoing::new(route, path_and_query)
        }
    }

    pub fn unsigned(mut self) -> Self {
        self.signed = false;
        self
    }

    pub fn timeout(mut self, t: Duration) -> Self {
        self.timeout = t;
        self
    }
}

/// An answer read in full.
#[derive(Debug, Clone)]
pub(crate) struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Answer {
    /// Parses a JSON answer body.
    pub fn json<T: serde::de::DeserializeOwned>(&self, route: Route) -> Result<T, LoadError> {
        // Counted first: the byte cap alone does not bound what the parse allocates.
        crate::json_budget::check(&self.body, crate::json_budget::MAX_JSON_VALUES).map_err(
            |e| LoadError::BadAnswer {
                route: route.label().to_owned(),
                detail: format!("{e} (status {})", self.status),
            },
        )?;
        serde_json::from_slice(&self.body).map_err(|e| LoadError::BadAnswer {
            route: route.label().to_owned(),
            detail: format!("{e} (status {})", self.status),
        })
    }

    /// The protocol error code of a non-2xx answer ("" when the body is not the error JSON).
    pub fn error_code(&self) -> (String, String) {
        match serde_json::from_slice::<protocol::error::ErrorBody>(&self.body) {
            Ok(b) => (one_line(&b.error), one_line(&b.detail)),
            Err(_) => (
                String::new(),
                one_line(&String::from_utf8_lossy(
                    &self.body[..self.body.len().min(200)],
                )),
            ),
        }
    }

    pub fn into_error(self, route: Route) -> LoadError {
        let (code, mut detail) = self.error_code();
        if code == protocol::ErrorCode::ReplayedNonce.as_str() {
            detail.push_str(REPLAYED_NONCE_HINT);
        }
        LoadError::Status {
            route: route.label().to_owned(),
            status: self.status,
            code,
            detail,
        }
    }
}

/// A server's text for an error message: at most 200 characters, control characters
/// (line breaks included) as spaces, so the message stays one line.
fn one_line(s: &str) -> String {
    contract::quote::text(s)
}

/// The mid-body crash point's side of a device (the trap itself is `crate::protocols::obsync::midbody`).
impl Device {
    /// Arms `trap` on this device (and its clones): the next chunk uploads of at least the
    /// trap's size go through it. Replaces an earlier trap.
    pub fn arm_mid_body(
        &self,
        trap: std::sync::Arc<crate::protocols::obsync::midbody::MidBodyTrap>,
    ) {
        *lock(&self.inner.mid_body) = Some(trap);
    }

    /// Removes the armed trap, if any.
    pub fn disarm_mid_body(&self) {
        *lock(&self.inner.mid_body) = None;
    }

    /// The armed trap, when it catches this chunk upload.
    pub(crate) fn trap_for(
        &self,
        req: &Outgoing<'_>,
    ) -> Option<std::sync::Arc<crate::protocols::obsync::midbody::MidBodyTrap>> {
        if req.route != protocol::Route::PutChunk {
            return None;
        }
        let t = lock(&self.inner.mid_body).clone()?;
        t.catches(req.body.len()).then_some(t)
    }

    /// Sends `head` and the trap's cut of `body` on a fresh connection, marks the trap held,
    /// and waits for the connection to close, an answer, a release or the timeout. Always a
    /// transport error: the rest of the body is never sent.
    pub(crate) async fn send_trapped(
        &self,
        rec: &Recorder,
        req: &Outgoing<'_>,
        head: Vec<u8>,
        sign: Option<Duration>,
        trap: &crate::protocols::obsync::midbody::MidBodyTrap,
    ) -> Result<Answer, LoadError> {
        let route = req.route;
        let len = req.body.len() as u64;
        let cut = crate::protocols::obsync::midbody::MidBodyTrap::cut_of(trap.draw, len);
        let sent_at = Instant::now();
        let io = |e: std::io::Error| transport(route, "io", e.to_string());
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let outcome = tokio::time::timeout(req.timeout, async {
            let mut s = tokio::net::TcpStream::connect(self.inner.target.addr())
                .await
                .map_err(|e| transport(route, "connect", e.to_string()))?;
            s.set_nodelay(true).map_err(io)?;
            s.write_all(&head).await.map_err(io)?;
            s.write_all(&req.body[..cut as usize]).await.map_err(io)?;
            s.flush().await.map_err(io)?;
            if let crate::protocols::obsync::midbody::TrapState::Held(c) = &mut *lock(&trap.state) {
                c.path = req.path_and_query.to_owned();
                c.sent = cut;
            }
            let mut buf = [0u8; 512];
            let mut got = 0u64;
            loop {
                tokio::select! {
                    r = s.read(&mut buf) => match r {
                        Ok(0) | Err(_) => break,
                        Ok(n) => got += n as u64,
                    },
                    _ = trap.release.notified() => break,
                }
            }
            Ok::<u64, LoadError>(got)
        })
        .await;
        let answered = matches!(outcome, Ok(Ok(n)) if n > 0);
        {
            let mut st = lock(&trap.state);
            let c = match &*st {
                crate::protocols::obsync::midbody::TrapState::Held(c) => {
                    crate::protocols::obsync::midbody::MidBodyCut {
                        answered,
                        ..c.clone()
                    }
                }
                _ => crate::protocols::obsync::midbody::MidBodyCut {
                    path: req.path_and_query.to_owned(),
                    sent: 0,
                    len,
                    answered,
                },
            };
            *st = crate::protocols::obsync::midbody::TrapState::Done(c);
        }
        let sent = lock(&trap.state).clone();
        let bytes_sent = match sent {
            crate::protocols::obsync::midbody::TrapState::Done(c) => c.sent,
            _ => 0,
        };
        rec.record(
            route.label(),
            "io",
            Sample {
                sent: sent_at,
                intended: req.intended,
                done: Instant::now(),
                bytes_sent,
                bytes_received: 0,
                sign,
            },
        );
        match outcome {
            Ok(Err(e)) => Err(e),
            Err(_) => Err(transport(
                route,
                "timeout",
                format!(
                    "no answer within {}",
                    contract::quote::duration(req.timeout)
                ),
            )),
            Ok(Ok(_)) => Err(transport(
                route,
                "io",
                format!(
                    "the body was cut after {bytes_sent} of {len} bytes (a mid-body crash point)"
                ),
            )),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use protocol::ErrorCode;

    #[test]
    fn nonce_streams_differ_per_device_and_session() {
        let mut a = nonce_rng(7, 0, 0);
        let mut b = nonce_rng(7, 1, 0);
        let mut c = nonce_rng(7, 0, 1);
        let mut again = nonce_rng(7, 0, 0);
        let (mut x, mut y, mut z, mut w) = ([0u8; 16], [0u8; 16], [0u8; 16], [0u8; 16]);
        a.fill_bytes(&mut x);
        b.fill_bytes(&mut y);
        c.fill_bytes(&mut z);
        again.fill_bytes(&mut w);
        assert_ne!(x, y);
        assert_ne!(x, z);
        assert_eq!(x, w, "same (seed, device, session) gives the same stream");
    }

    #[test]
    fn precomputed_hmac_equals_the_protocol_signature() {
        let secret: [u8; 32] = std::array::from_fn(|i| i as u8);
        let s = Signer::new(&secret);
        for msg in ["", "obsync/v1\nGET\n/livez\n1\nab\ncd", &"x".repeat(300)] {
            assert_eq!(
                s.sign(msg.as_bytes()),
                protocol::sign::signature(&secret, msg)
            );
        }
    }

    /// The worker's allocation-free signing equals the protocol crate's, and every request
    /// gets a fresh nonce.
    #[tokio::test]
    async fn worker_signature_verifies_with_the_protocol() {
        let target = Target::parse("http://127.0.0.1:9", false).unwrap();
        let creds = DeviceCredentials {
            device_id: "00112233445566778899aabbccddeeff".into(),
            secret: std::array::from_fn(|i| i as u8),
        };
        let dev = Device::new(target, creds.clone(), 0, String::new(), nonce_rng(1, 0, 0))
            .with_clock(Arc::new(|| 1_700_000_123));
        let mut w = WorkerConn::new(&dev);
        let body_hash = protocol::sha256_hex(br#"{"sids":[]}"#);
        let a = w.sign(&dev, "POST", "/v1/chunks/exists", body_hash.as_bytes());
        let b = w.sign(&dev, "POST", "/v1/chunks/exists", body_hash.as_bytes());
        assert_ne!(a.nonce, b.nonce);
        assert_eq!(a.ts, 1_700_000_123);
        for s in [a, b] {
            let nonce = std::str::from_utf8(&s.nonce).unwrap();
            assert!(nonce.bytes().all(|c| c.is_ascii_hexdigit()));
            let canonical =
                protocol::canonical_string("POST", "/v1/chunks/exists", s.ts, nonce, &body_hash);
            let sig = std::str::from_utf8(&s.sig).unwrap();
            assert!(protocol::sign::verify(&creds.secret, &canonical, sig));
        }
    }

    /// A listener that accepts and never answers (a hung target or hop); the accepted
    /// sockets are kept open until the returned guard drops.
    pub(crate) fn hanging_target() -> (Target, std::thread::JoinHandle<()>) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        l.set_nonblocking(true).unwrap();
        let t = std::thread::spawn(move || {
            let mut held = Vec::new();
            let until = Instant::now() + Duration::from_secs(20);
            while Instant::now() < until {
                match l.accept() {
                    Ok((s, _)) => held.push(s),
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        (Target::parse(&format!("http://{addr}"), false).unwrap(), t)
    }

    pub(crate) fn test_device(target: Target) -> Device {
        let creds = DeviceCredentials {
            device_id: "00112233445566778899aabbccddeeff".into(),
            secret: std::array::from_fn(|i| i as u8),
        };
        Device::new(target, creds, 0, "d".repeat(32), nonce_rng(1, 0, 0))
    }

    /// Retries share the request's timeout: a hung target costs one timeout, not three.
    #[tokio::test]
    async fn retries_share_one_timeout() {
        let (target, _t) = hanging_target();
        let dev = test_device(target);
        let rec = Recorder::new(false);
        let t0 = Instant::now();
        let req = Outgoing::new(Route::Changes, "/v1/changes").timeout(Duration::from_millis(600));
        let e = dev.call(&rec, req, &[200]).await.unwrap_err();
        let took = t0.elapsed();
        assert!(matches!(e, LoadError::Transport { .. }), "{e:?}");
        assert!(took < Duration::from_millis(1100), "{took:?}");
    }

    /// A listener whose every connection is answered one byte of `answer` per `every`.
    pub(crate) fn trickling_target(answer: &'static [u8], every: Duration) -> Target {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            for s in l.incoming().take(8) {
                let Ok(mut s) = s else { return };
                std::thread::spawn(move || {
                    use std::io::{Read, Write};
                    let mut b = [0u8; 4096];
                    let _ = s.read(&mut b);
                    for &byte in answer {
                        if s.write_all(&[byte]).is_err() {
                            return;
                        }
                        std::thread::sleep(every);
                    }
                });
            }
        });
        Target::parse(&format!("http://{addr}"), false).unwrap()
    }

    const SLOW_ANSWER: &[u8] =
        b"HTTP/1.1 200 OK\r\ncontent-length: 20\r\ncontent-type: application/json\r\n\r\n{\"seq\":0,\"head_seq\":0}";

    /// An answer trickled a byte per 50 ms ends at the one deadline on the pooled path, and
    /// the message states that deadline (not what was left for the last attempt).
    #[tokio::test]
    async fn a_trickled_answer_ends_at_the_one_deadline() {
        let dev = test_device(trickling_target(SLOW_ANSWER, Duration::from_millis(50)));
        let rec = Recorder::new(false);
        let t0 = Instant::now();
        let req = Outgoing::new(Route::Changes, "/v1/changes").timeout(Duration::from_millis(700));
        let e = dev.call(&rec, req, &[200]).await.unwrap_err();
        assert!(
            t0.elapsed() < Duration::from_millis(1500),
            "{:?}",
            t0.elapsed()
        );
        let msg = e.to_string();
        assert!(msg.contains("deadline of 700ms"), "{msg}");
    }

    /// The lean path, async and blocking: a trickle ends at the exchange's deadline (the
    /// blocking one within two socket timeouts, however often a byte arrives).
    #[tokio::test]
    async fn a_trickled_answer_ends_the_lean_exchange() {
        let dev = test_device(trickling_target(SLOW_ANSWER, Duration::from_millis(50)));
        let rec = Recorder::new(false);
        let req = Outgoing::new(Route::Changes, "/v1/changes").timeout(Duration::from_millis(600));
        let mut w = WorkerConn::new(&dev);
        let t0 = Instant::now();
        let e = dev.send_lean(&rec, &mut w, &req).await.unwrap_err();
        assert!(
            t0.elapsed() < Duration::from_millis(1200),
            "{:?}",
            t0.elapsed()
        );
        assert!(e.to_string().contains("within 600ms"), "{e}");
        let d = dev.clone();
        let (took, e) = tokio::task::spawn_blocking(move || {
            let slot = Arc::new(h1::BlockingSlot::default());
            let mut w = WorkerConn::blocking(&d, Duration::from_millis(400), slot);
            let t0 = Instant::now();
            let e = d.send_blocking(&rec, &mut w, &req).unwrap_err();
            (t0.elapsed(), e)
        })
        .await
        .unwrap();
        assert!(took < Duration::from_millis(1500), "{took:?}");
        assert!(e.to_string().contains("trickled past"), "{e}");
    }

    /// A declared length over the cap is refused before the body, named, and not retried.
    #[tokio::test]
    async fn a_declared_length_over_the_cap_is_refused_once() {
        let dev = test_device(trickling_target(
            b"HTTP/1.1 200 OK\r\ncontent-length: 1000000000000000000\r\n\r\n",
            Duration::ZERO,
        ));
        let rec = Recorder::new(false);
        let req = Outgoing::new(Route::Changes, "/v1/changes");
        let e = dev.call(&rec, req, &[200]).await.unwrap_err();
        assert!(matches!(e, LoadError::AnswerTooLarge { .. }), "{e}");
        assert!(e.to_string().contains("33554432-byte cap"), "{e}");
        assert_eq!(rec.snapshot().requests(), 1, "not retried");
    }

    #[test]
    fn replayed_nonce_points_at_the_likely_cause() {
        let answer = |code: ErrorCode| Answer {
            status: 401,
            headers: HeaderMap::new(),
            body: Bytes::from(
                serde_json::to_vec(&protocol::error::ErrorBody::new(code, "seen")).unwrap(),
            ),
        };
        let e = answer(ErrorCode::ReplayedNonce).into_error(Route::Changes);
        assert!(e.to_string().contains("--state"), "{e}");
        let e = answer(ErrorCode::BadSignature).into_error(Route::Changes);
        assert!(!e.to_string().contains("--state"), "{e}");
    }

    #[test]
    fn fast_hex_matches_hex_crate() {
        let b: Vec<u8> = (0..=255).collect();
        assert_eq!(fast_hex(&b), hex::encode(&b));
    }

    #[test]
    fn status_labels() {
        assert_eq!(status_label(201), "201");
        assert_eq!(status_label(418), "4xx");
        assert_eq!(status_label(599), "5xx");
    }
}
