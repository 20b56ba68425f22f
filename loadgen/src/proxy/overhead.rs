//! What the recording proxy adds per request: an A/A run against one server, the same request
//! sent straight to it and through a proxy in front of it, in alternating blocks on a
//! keep-alive connection each. Each round runs one block straight and one through the proxy,
//! which first alternating by round, so a drift of the machine falls on both arms alike; the
//! first round is a warm-up and not counted. Every read and connect has a deadline.
//!
//! [`measure`] sends one plain `GET` (`/livez`: the hop's own cost, the server's next to
//! nothing); [`obsync::measure`] sends a device's signed obsync v1 pushes and reads.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use hdrhistogram::Histogram;

use super::{Classifier, Proxy, ProxyConfig};

pub mod obsync;

/// The deadline of each connect and each read.
const IO_DEADLINE: Duration = Duration::from_secs(10);
/// The largest answer head and body read (the probe's requests are small reads).
const MAX_ANSWER: usize = 64 * 1024;

/// What [`measure`] found: each arm's latencies (µs, from a request's write to its answer's
/// last byte) and the requests the proxy counted (the warm-up round's included).
pub struct Overhead {
    pub direct: Histogram<u64>,
    pub proxied: Histogram<u64>,
    pub counted: u64,
}

impl Overhead {
    /// `q` (0..=1) of the direct and proxied latencies and the difference, µs.
    pub fn at(&self, q: f64) -> (u64, u64, i64) {
        let (d, p) = (
            self.direct.value_at_quantile(q),
            self.proxied.value_at_quantile(q),
        );
        (d, p, p as i64 - d as i64)
    }
}

/// `rounds` counted rounds (plus one warm-up) of `requests` `GET path` each way against
/// `upstream`, through a proxy started for it.
pub fn measure(
    upstream: SocketAddr,
    rounds: usize,
    requests: usize,
    path: &str,
) -> anyhow::Result<Overhead> {
    let proxy = Proxy::start(ProxyConfig {
        upstream,
        read_timeout: IO_DEADLINE,
        classifier: Classifier::default(),
    })
    .context("starting the recording proxy")?;
    let mut direct = crate::latency_histogram();
    let mut proxied = crate::latency_histogram();
    for round in 0..=rounds {
        let order = if round % 2 == 0 {
            [(upstream, false), (proxy.addr(), true)]
        } else {
            [(proxy.addr(), true), (upstream, false)]
        };
        for (addr, via_proxy) in order {
            let arm = if via_proxy {
                "through the proxy"
            } else {
                "direct"
            };
            let h = block(addr, path, requests)
                .with_context(|| format!("round {round}, {arm}: GET {path}"))?;
            if round > 0 {
                let into = if via_proxy { &mut proxied } else { &mut direct };
                into.add(&h).context("adding a block's latencies")?;
            }
        }
    }
    proxy.close_connections();
    Ok(Overhead {
        direct,
        proxied,
        counted: proxy.take().requests(),
    })
}

/// `n` requests on one keep-alive connection to `addr`, each timed from its write to its
/// answer's last byte (µs). An answer must carry `Content-Length`.
fn block(addr: SocketAddr, path: &str, n: usize) -> anyhow::Result<Histogram<u64>> {
    let mut s = TcpStream::connect_timeout(&addr, IO_DEADLINE).context("connecting")?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(IO_DEADLINE))?;
    s.set_write_timeout(Some(IO_DEADLINE))?;
    let req = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    let mut h = crate::latency_histogram();
    let mut buf = vec![0u8; MAX_ANSWER];
    for _ in 0..n {
        let t0 = Instant::now();
        s.write_all(req.as_bytes()).context("sending")?;
        let mut have = 0;
        loop {
            if have == buf.len() {
                bail!("an answer of more than {MAX_ANSWER} bytes");
            }
            let k = s.read(&mut buf[have..]).context("reading the answer")?;
            if k == 0 {
                bail!("the server closed the connection");
            }
            have += k;
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut ans = httparse::Response::new(&mut headers);
            if let httparse::Status::Complete(head) = ans
                .parse(&buf[..have])
                .map_err(|e| anyhow::anyhow!("an answer that cannot be read: {e}"))?
            {
                let len = ans
                    .headers
                    .iter()
                    .find(|h| h.name.eq_ignore_ascii_case("content-length"))
                    .and_then(|h| {
                        std::str::from_utf8(h.value)
                            .ok()?
                            .trim()
                            .parse::<usize>()
                            .ok()
                    })
                    .context("an answer without Content-Length")?;
                if have >= head.saturating_add(len) {
                    break;
                }
            }
        }
        h.record((t0.elapsed().as_micros() as u64).max(1))
            .context("recording a latency")?;
    }
    Ok(h)
}
