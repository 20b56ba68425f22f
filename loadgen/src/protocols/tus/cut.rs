//! A seeded cutting hop for the resume check: a loopback proxy between a tus client and its
//! server that forwards every request whole, except the first `PATCH` of an upload
//! (`Upload-Offset: 0`), up to `cuts` of them: of those it forwards the head and a seeded part
//! of the body (at least one byte, never all of it), then closes both connections. The server
//! keeps what reached it; the client sees a transport error and must resume with `HEAD` and a
//! `PATCH` from the server's offset. One request per connection (`Connection: close` is added
//! to each forwarded head), so every request is seen. Every read has a deadline.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::{Rng as _, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The longest request head the hop reads (a tus request's head is a few hundred bytes).
const MAX_HEAD: usize = 64 * 1024;
/// Bound on one exchange through the hop.
const DEADLINE: Duration = Duration::from_secs(30);

/// A running hop; it stops when dropped.
pub struct CutHop {
    addr: SocketAddr,
    cut: Arc<AtomicU64>,
    bytes_cut: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for CutHop {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct Shared {
    upstream: SocketAddr,
    left: AtomicU64,
    rng: Mutex<ChaCha8Rng>,
    cut: Arc<AtomicU64>,
    bytes_cut: Arc<AtomicU64>,
}

impl CutHop {
    /// A hop on 127.0.0.1:0 in front of `upstream`, cutting up to `cuts` first `PATCH`es at
    /// points drawn from `seed`.
    pub async fn start(upstream: SocketAddr, seed: u64, cuts: u64) -> std::io::Result<CutHop> {
        let l = TcpListener::bind("127.0.0.1:0").await?;
        let addr = l.local_addr()?;
        let (cut, bytes_cut) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let shared = Arc::new(Shared {
            upstream,
            left: AtomicU64::new(cuts),
            rng: Mutex::new(ChaCha8Rng::seed_from_u64(seed)),
            cut: cut.clone(),
            bytes_cut: bytes_cut.clone(),
        });
        let task = tokio::spawn(async move {
            while let Ok((s, _)) = l.accept().await {
                let sh = shared.clone();
                tokio::spawn(async move {
                    let _ = tokio::time::timeout(DEADLINE, one(s, &sh)).await;
                });
            }
        });
        Ok(CutHop {
            addr,
            cut,
            bytes_cut,
            task,
        })
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Bodies cut so far.
    pub fn cut(&self) -> u64 {
        self.cut.load(Ordering::SeqCst)
    }

    /// Body bytes the cuts kept from the server.
    pub fn bytes_cut(&self) -> u64 {
        self.bytes_cut.load(Ordering::SeqCst)
    }
}

/// One connection: one request forwarded (whole, or cut), its answer copied back.
async fn one(mut client: TcpStream, sh: &Shared) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(4096);
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if buf.len() > MAX_HEAD {
            return Ok(());
        }
        let mut b = [0u8; 4096];
        let n = client.read(&mut b).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&b[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let method = head
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_owned();
    let header = |name: &str| {
        head.lines().skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_owned())
        })
    };
    let len: u64 = header("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let first_patch = method == "PATCH" && header("upload-offset").as_deref() == Some("0");
    let keep = if first_patch
        && len >= 2
        && sh
            .left
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    {
        let mut rng = sh.rng.lock().unwrap_or_else(|e| e.into_inner());
        // 1 ..= len - 1: at least one byte reaches the server, never the whole body.
        Some(1 + rng.next_u64() % (len - 1))
    } else {
        None
    };
    let mut up = TcpStream::connect(sh.upstream).await?;
    let mut out: Vec<u8> = head
        .lines()
        .filter(|l| {
            !l.is_empty()
                && !l
                    .split_once(':')
                    .is_some_and(|(k, _)| k.trim().eq_ignore_ascii_case("connection"))
        })
        .flat_map(|l| [l.as_bytes(), b"\r\n"])
        .flatten()
        .copied()
        .collect();
    out.extend_from_slice(b"connection: close\r\n\r\n");
    up.write_all(&out).await?;
    let forward = keep.unwrap_or(len);
    let early = &buf[head_end..];
    let from_buf = (early.len() as u64).min(forward) as usize;
    up.write_all(&early[..from_buf]).await?;
    let mut rest = (&mut client).take(forward - from_buf as u64);
    tokio::io::copy(&mut rest, &mut up).await?;
    up.flush().await?;
    if let Some(k) = keep {
        // Give the server the bytes that reached it, then cut both sides.
        tokio::time::sleep(Duration::from_millis(50)).await;
        sh.cut.fetch_add(1, Ordering::SeqCst);
        sh.bytes_cut.fetch_add(len - k, Ordering::SeqCst);
        let _ = up.shutdown().await;
        drop(up);
        drop(client);
        return Ok(());
    }
    tokio::io::copy(&mut up, &mut client).await?;
    client.shutdown().await
}
