//! What the recording proxy adds per request: an A/A run against the reference server in one
//! process, the same request sent straight to the server and through the proxy, in alternating
//! blocks on a keep-alive connection each, and the latency percentiles of both and their
//! difference printed.
//!
//! `cargo run --release -p loadgen --example proxy_overhead -- [ROUNDS] [REQUESTS] [PATH]`
//! (defaults 20 rounds of 2,000 requests, `GET /livez`). Each round runs one block straight
//! and one through the proxy, which first alternating by round, so a drift of the machine
//! falls on both arms alike; the first round of each arm is a warm-up and not counted.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().map_or(Ok(20), |a| a.parse())?;
    let requests: usize = args.next().map_or(Ok(2000), |a| a.parse())?;
    let path = args.next().unwrap_or_else(|| "/livez".to_owned());
    let (server, _data) = testkit::server();
    let proxy = loadgen::proxy::Proxy::start(loadgen::proxy::ProxyConfig {
        upstream: server.addr,
        read_timeout: Duration::from_secs(30),
        classifier: loadgen::proxy::Classifier::default(),
    })?;
    let mut direct = loadgen::latency_histogram();
    let mut proxied = loadgen::latency_histogram();
    for round in 0..=rounds {
        let order = if round % 2 == 0 {
            [(server.addr, false), (proxy.addr(), true)]
        } else {
            [(proxy.addr(), true), (server.addr, false)]
        };
        for (addr, via_proxy) in order {
            let h = block(addr, &path, requests)?;
            if round > 0 {
                if via_proxy {
                    proxied.add(&h)?;
                } else {
                    direct.add(&h)?;
                }
            }
        }
    }
    proxy.close_connections();
    let seen = proxy.take();
    let q = |h: &Histogram<u64>, x: f64| h.value_at_quantile(x);
    println!(
        "{rounds} rounds x {requests} requests of GET {path}, one connection per block ({} requests counted by the proxy)",
        seen.requests()
    );
    println!("{:>10} {:>10} {:>10}", "", "p50_us", "p99_us");
    println!(
        "{:>10} {:>10} {:>10}",
        "direct",
        q(&direct, 0.5),
        q(&direct, 0.99)
    );
    println!(
        "{:>10} {:>10} {:>10}",
        "proxied",
        q(&proxied, 0.5),
        q(&proxied, 0.99)
    );
    println!(
        "{:>10} {:>10} {:>10}",
        "added",
        q(&proxied, 0.5) as i64 - q(&direct, 0.5) as i64,
        q(&proxied, 0.99) as i64 - q(&direct, 0.99) as i64
    );
    Ok(())
}

/// `n` requests on one keep-alive connection to `addr`, each timed from its write to its
/// answer's last byte (µs).
fn block(
    addr: SocketAddr,
    path: &str,
    n: usize,
) -> Result<Histogram<u64>, Box<dyn std::error::Error>> {
    let mut s = TcpStream::connect(addr)?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let req = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    let mut h = loadgen::latency_histogram();
    let mut buf = vec![0u8; 64 * 1024];
    for _ in 0..n {
        let t0 = Instant::now();
        s.write_all(req.as_bytes())?;
        let mut have = 0;
        loop {
            let k = s.read(&mut buf[have..])?;
            if k == 0 {
                return Err("the server closed the connection".into());
            }
            have += k;
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut ans = httparse::Response::new(&mut headers);
            if let httparse::Status::Complete(head) = ans.parse(&buf[..have])? {
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
                    .ok_or("an answer without Content-Length")?;
                if have >= head + len {
                    break;
                }
            }
        }
        h.record((t0.elapsed().as_micros() as u64).max(1))?;
    }
    Ok(h)
}
