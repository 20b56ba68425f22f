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

//!
//! `... --example proxy_overhead -- obsync [ROUNDS] [NOTES]` runs the signed obsync A/A instead
//! (`loadgen::proxy::overhead::obsync`; `vaultbench probe proxy --obsync`): the added p50 and
//! p99 per request kind, pushes and reads merged.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1).peekable();
    if args.peek().map(String::as_str) == Some("obsync") {
        args.next();
        let rounds: usize = args.next().map_or(Ok(20), |a| a.parse())?;
        let notes: usize = args.next().map_or(Ok(40), |a| a.parse())?;
        return obsync(rounds, notes);
    }
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

fn obsync(rounds: usize, notes: usize) -> Result<(), Box<dyn std::error::Error>> {
    use loadgen::proxy::overhead::obsync;
    let (server, _data) = testkit::server();
    let target = loadgen::Target::parse(&server.url(), false)?;
    let rt = loadgen::runtime(1)?;
    let devices = rt.block_on(loadgen::enroll(&target, &server.setup_token, 1, 1))?;
    let o = obsync::measure(&devices[0], rounds, notes, 1)?;
    println!(
        "{rounds} rounds x {notes} notes, one connection per block ({} requests counted by the proxy)",
        o.counted
    );
    println!(
        "{:>14} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}",
        "", "d_p50", "p_p50", "add_p50", "d_p99", "p_p99", "add_p99"
    );
    let row = |name: &str, d: &hdrhistogram::Histogram<u64>, p: &hdrhistogram::Histogram<u64>| {
        let ((d50, p50, a50), (d99, p99, a99)) = (obsync::at(d, p, 0.5), obsync::at(d, p, 0.99));
        println!("{name:>14} {d50:>8} {p50:>8} {a50:>8} {d99:>8} {p99:>8} {a99:>8}");
    };
    for k in &o.kinds {
        row(k.route, &k.direct, &k.proxied);
    }
    let (pd, pp) = o.merged(true)?;
    let (rd, rp) = o.merged(false)?;
    row("pushes", &pd, &pp);
    row("reads", &rd, &rp);
    Ok(())
}
