//! What the recording proxy adds per request: an A/A run against the reference server in one
//! process, the same request sent straight to the server and through the proxy, in alternating
//! blocks on a keep-alive connection each, and the latency percentiles of both and their
//! difference printed (`loadgen::proxy::overhead`; `vaultbench probe proxy` is the same run
//! as a command).
//!
//! `cargo run --release -p loadgen --example proxy_overhead -- [ROUNDS] [REQUESTS] [PATH]`
//! (defaults 20 rounds of 2,000 requests, `GET /livez`). Each round runs one block straight
//! and one through the proxy, which first alternating by round, so a drift of the machine
//! falls on both arms alike; the first round of each arm is a warm-up and not counted.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().map_or(Ok(20), |a| a.parse())?;
    let requests: usize = args.next().map_or(Ok(2000), |a| a.parse())?;
    let path = args.next().unwrap_or_else(|| "/livez".to_owned());
    let (server, _data) = testkit::server();
    let o = loadgen::proxy::overhead::measure(server.addr, rounds, requests, &path)?;
    println!(
        "{rounds} rounds x {requests} requests of GET {path}, one connection per block ({} requests counted by the proxy)",
        o.counted
    );
    println!("{:>10} {:>10} {:>10}", "", "p50_us", "p99_us");
    let (d50, p50, a50) = o.at(0.5);
    let (d99, p99, a99) = o.at(0.99);
    println!("{:>10} {:>10} {:>10}", "direct", d50, d99);
    println!("{:>10} {:>10} {:>10}", "proxied", p50, p99);
    println!("{:>10} {:>10} {:>10}", "added", a50, a99);
    Ok(())
}
