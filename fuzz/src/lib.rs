//! Shared pieces of the fuzz targets: well-framed and torn journals built from fuzz input,
//! scratch files on a RAM disk where there is one, and one reference server per fuzzing
//! process, set up with a device whose credentials sign the structured requests.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use protocol::DeviceCredentials;
use refserver::{ServerConfig, TestServer};

/// Where scratch data goes: `/dev/shm` when present (fsync is free there), else the temp dir.
fn scratch_root() -> PathBuf {
    let shm = PathBuf::from("/dev/shm");
    if shm.is_dir() {
        shm
    } else {
        std::env::temp_dir()
    }
}

/// A per-process scratch dir, removed when the process ends normally.
fn scratch_dir() -> &'static tempfile::TempDir {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        tempfile::Builder::new()
            .prefix("vaultbench-fuzz-")
            .tempdir_in(scratch_root())
            .expect("a scratch dir")
    })
}

/// Writes `bytes` to the scratch file `name` (replacing it) and returns its path.
pub fn scratch_file(name: &str, bytes: &[u8]) -> PathBuf {
    let path = scratch_dir().path().join(name);
    std::fs::write(&path, bytes).expect("writing a scratch file");
    path
}

/// One journal frame per newline-separated line of `data`, and how many there are.
pub fn frame_lines(data: &[u8]) -> (Vec<u8>, usize) {
    let payloads: Vec<&[u8]> = data.split(|&b| b == b'\n').collect();
    let records: Vec<Vec<u8>> = payloads.iter().map(|p| p.to_vec()).collect();
    (frame_payloads(&records), records.len())
}

fn frame_payloads(payloads: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for p in payloads {
        out.extend_from_slice(&(p.len() as u32).to_le_bytes());
        out.extend_from_slice(&crc32(p).to_le_bytes());
        out.extend_from_slice(p);
    }
    out
}

/// CRC-32 (IEEE), bit by bit: the fuzz crate checks the server's framing independently.
fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// Well-framed records from `data` (its first 4 bytes choose a cut point and a bit to
/// flip), torn at the cut and with that bit flipped: what a crash mid-write or a bad sector
/// leaves.
pub fn tear(data: &[u8]) -> Vec<u8> {
    let (knobs, rest) = data.split_at(data.len().min(4));
    let mut k = [0u8; 4];
    k[..knobs.len()].copy_from_slice(knobs);
    let (mut buf, _) = frame_lines(rest);
    let cut = usize::from(u16::from_le_bytes([k[0], k[1]])) % (buf.len() + 1);
    buf.truncate(cut);
    if !buf.is_empty() && k[3] & 0x80 != 0 {
        let at = usize::from(k[2]) * 13 % buf.len();
        buf[at] ^= 1 << (k[3] & 7);
    }
    buf
}

/// Ignores SIGPIPE, as a Rust `main` does: libFuzzer's own `main` leaves it fatal, and a
/// peer closing a socket mid-write must be an error, not the end of the fuzzing process.
pub fn ignore_sigpipe() {
    // SAFETY: setting a signal's disposition to SIG_IGN installs no handler code.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
}

/// The reference server every request target talks to, with one active device.
pub struct Target {
    pub addr: SocketAddr,
    pub creds: DeviceCredentials,
    /// Chunks stored at start-up (content, sid), so version posts can name real sids.
    pub chunks: Vec<(Vec<u8>, String)>,
    /// Version ids the server accepted, so later posts can name real parents.
    pub versions: Mutex<Vec<String>>,
    nonce: AtomicU64,
    _server: TestServer,
}

/// How long a request's answer may stay silent before the client half-closes, and then how
/// long it may take to finish: hyper drops a request whose client half-closed (its
/// half-close support is off), so the client waits for a whole answer first; an incomplete
/// request gets its half-close after this, and whatever answer follows.
const QUIET: Duration = Duration::from_millis(500);

/// Sends `raw` on a fresh connection and returns the first answer, or what came back in time.
pub fn exchange(addr: SocketAddr, raw: &[u8]) -> Vec<u8> {
    exchange_within(addr, raw, QUIET)
}

/// Set-up exchanges wait longer: the machine may be busy, and they must succeed.
const SETUP_QUIET: Duration = Duration::from_secs(30);

fn exchange_within(addr: SocketAddr, raw: &[u8], quiet: Duration) -> Vec<u8> {
    let mut out = Vec::new();
    let Ok(mut s) = TcpStream::connect_timeout(&addr, quiet) else {
        return out;
    };
    let _ = s.set_read_timeout(Some(quiet));
    let _ = s.set_write_timeout(Some(quiet));
    if s.write_all(raw).is_err() {
        return out;
    }
    let mut half_closed = false;
    let mut buf = [0u8; 16 * 1024];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                out.extend_from_slice(&buf[..n]);
                if answer_complete(&out) {
                    break;
                }
            }
            Err(e)
                if !half_closed
                    && matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
            {
                half_closed = true;
                let _ = s.shutdown(std::net::Shutdown::Write);
            }
            Err(_) => break,
        }
    }
    out
}

/// Whether `a` holds a whole answer: a head, and its `Content-Length` body or a chunked
/// body's last chunk.
fn answer_complete(a: &[u8]) -> bool {
    let Some(end) = a.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4) else {
        return false;
    };
    let head = String::from_utf8_lossy(&a[..end]).to_ascii_lowercase();
    if head.contains("transfer-encoding: chunked") {
        return a[end..].ends_with(b"0\r\n\r\n");
    }
    let len = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    a.len() >= end + len
}

/// The status of an answer, asserting it is a well-formed HTTP/1.x answer and not an
/// internal error (`500`: the server failed on a client's input). `None`: no answer in time.
pub fn check_answer(answer: &[u8]) -> Option<u16> {
    if answer.is_empty() {
        return None;
    }
    // An HTTP/1.0 request is answered as HTTP/1.0 (hyper answers in the request's version),
    // which is right; anything else is not an answer.
    assert!(
        (answer.starts_with(b"HTTP/1.1 ") || answer.starts_with(b"HTTP/1.0 "))
            && answer.len() >= 12,
        "not an HTTP/1.x answer: {:?}",
        String::from_utf8_lossy(&answer[..answer.len().min(80)])
    );
    let status: u16 = std::str::from_utf8(&answer[9..12])
        .ok()
        .and_then(|s| s.parse().ok())
        .expect("a numeric status");
    assert_ne!(
        status,
        500,
        "internal error on client input: {}",
        String::from_utf8_lossy(&answer[..answer.len().min(400)])
    );
    Some(status)
}

/// The body of an answer with a `Content-Length` (what the server sends for JSON).
pub fn answer_body(answer: &[u8]) -> &[u8] {
    answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(&[][..], |i| &answer[i + 4..])
}

impl Target {
    /// The process's server: started, set up, and holding a few chunks, on first use.
    pub fn get() -> &'static Target {
        static T: OnceLock<Target> = OnceLock::new();
        T.get_or_init(Target::start)
    }

    fn start() -> Target {
        ignore_sigpipe();
        let cfg = ServerConfig::new(scratch_dir().path().join("server"));
        let server = TestServer::start(cfg).expect("the reference server starts");
        let addr = server.addr;
        let setup = serde_json::json!({
            "setup_token": server.setup_token,
            "account_name": "fuzz",
            "device": {"name": "fuzz", "platform": "fuzz", "app_version": "0"},
        })
        .to_string();
        let raw = format!(
            "POST /v1/setup HTTP/1.1\r\nhost: fuzz\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{setup}",
            setup.len()
        );
        let answer = exchange_within(addr, raw.as_bytes(), SETUP_QUIET);
        let r: protocol::wire::SetupResponse = serde_json::from_slice(answer_body(&answer))
            .unwrap_or_else(|e| panic!("setup answer ({e}): {}", String::from_utf8_lossy(&answer)));
        let creds =
            DeviceCredentials::from_hex(&r.device_id, &r.device_secret).expect("credentials");
        let mut t = Target {
            addr,
            creds,
            chunks: Vec::new(),
            versions: Mutex::new(Vec::new()),
            nonce: AtomicU64::new(1),
            _server: server,
        };
        for i in 0..4u8 {
            let content = vec![i; 100 + usize::from(i)];
            let sid = protocol::sha256_hex(&content);
            let put = t.signed("PUT", &format!("/v1/chunks/{sid}"), &[], None, &content);
            let answer = exchange_within(addr, &put, SETUP_QUIET);
            let status = check_answer(&answer);
            assert!(
                matches!(status, Some(200 | 201)),
                "storing a chunk: {status:?}"
            );
            t.chunks.push((content, sid));
        }
        t
    }

    /// A fresh nonce (32 hex), never repeated within this process.
    pub fn next_nonce(&self) -> String {
        format!("{:032x}", self.nonce.fetch_add(1, Ordering::Relaxed))
    }

    /// A whole signed request. `ts_header` replaces the timestamp header's text (the
    /// signature then covers its integer value when it has one).
    pub fn signed(
        &self,
        method: &str,
        target: &str,
        extra_headers: &[(String, String)],
        ts_header: Option<&str>,
        body: &[u8],
    ) -> Vec<u8> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        let ts_text = ts_header.map_or_else(|| now.to_string(), str::to_owned);
        let ts = ts_text.trim().parse::<i64>().unwrap_or(now);
        let nonce = self.next_nonce();
        let h = protocol::sign_request(
            &self.creds,
            method,
            target,
            ts,
            &nonce,
            &protocol::sha256_hex(body),
        );
        let mut raw = format!(
            "{method} {target} HTTP/1.1\r\nhost: fuzz\r\n{}: {}\r\n{}: {ts_text}\r\n{}: {}\r\n{}: {}\r\n",
            protocol::H_DEVICE,
            h.device,
            protocol::H_TS,
            protocol::H_NONCE,
            h.nonce,
            protocol::H_SIG,
            h.sig,
        )
        .into_bytes();
        for (k, v) in extra_headers {
            raw.extend_from_slice(format!("{k}: {v}\r\n").as_bytes());
        }
        raw.extend_from_slice(format!("content-length: {}\r\n\r\n", body.len()).as_bytes());
        raw.extend_from_slice(body);
        raw
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn crc_matches_the_check_value() {
        assert_eq!(super::crc32(b"123456789"), 0xCBF4_3926);
    }
}
