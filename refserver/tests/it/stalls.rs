//! Slow and stalled clients: head and body deadlines (answered `408`), idle reaping, and the
//! connection caps that keep a flood of stalled strangers from locking out signed clients
//! under a low open-file limit.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt as _;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hyper::{Method, StatusCode};
use refserver::{ServerConfig, TestServer};

use crate::client::Api;

const BIN: &str = env!("CARGO_BIN_EXE_obsync-refserver");

/// Reads what the server sends until it closes (at most `within`).
fn read_until_close(s: &mut TcpStream, within: Duration) -> (String, Duration) {
    let t0 = Instant::now();
    s.set_read_timeout(Some(within)).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    (String::from_utf8_lossy(&out).into_owned(), t0.elapsed())
}

#[test]
fn slow_heads_get_408_slow_bodies_408_idle_connections_close() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = ServerConfig::new(dir.path().join("data"));
    cfg.header_read_timeout = Duration::from_millis(300);
    cfg.body_read_timeout = Duration::from_millis(300);
    let server = TestServer::start(cfg).unwrap();

    // Half a head: 408, then the connection closes.
    let mut s = TcpStream::connect(server.addr).unwrap();
    s.write_all(b"GET /livez HTTP/1.1\r\nhost: x\r\n").unwrap();
    let (answer, took) = read_until_close(&mut s, Duration::from_secs(5));
    assert!(answer.starts_with("HTTP/1.1 408 "), "{answer:?}");
    assert!(answer.contains("\"request_timeout\""), "{answer:?}");
    assert!(took < Duration::from_secs(3), "{took:?}");

    // A whole head, then a body that stalls: 408 request_timeout.
    let mut s = TcpStream::connect(server.addr).unwrap();
    s.write_all(b"POST /v1/setup HTTP/1.1\r\nhost: x\r\ncontent-length: 1000\r\n\r\n0123456789")
        .unwrap();
    let (answer, took) = read_until_close(&mut s, Duration::from_secs(5));
    assert!(answer.starts_with("HTTP/1.1 408 "), "{answer:?}");
    assert!(answer.contains("\"request_timeout\""), "{answer:?}");
    assert!(took < Duration::from_secs(3), "{took:?}");

    // Idle (nothing sent, or nothing after an answer): closed without a word.
    let mut s = TcpStream::connect(server.addr).unwrap();
    let (answer, took) = read_until_close(&mut s, Duration::from_secs(5));
    assert_eq!(answer, "");
    assert!(took < Duration::from_secs(3), "{took:?}");
    let mut s = TcpStream::connect(server.addr).unwrap();
    s.write_all(b"GET /livez HTTP/1.1\r\nhost: x\r\n\r\n")
        .unwrap();
    let (answer, took) = read_until_close(&mut s, Duration::from_secs(5));
    assert!(answer.starts_with("HTTP/1.1 200 "), "{answer:?}");
    assert!(!answer.contains("408"), "{answer:?}");
    assert!(took < Duration::from_secs(3), "{took:?}");
}

/// The server binary under a 128-descriptor limit (set with setrlimit in the child only).
struct Limited {
    child: Child,
    url: String,
}

impl Drop for Limited {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_limited(data: &std::path::Path, nofile: u64) -> Limited {
    let mut cmd = Command::new(BIN);
    cmd.args(["--listen", "127.0.0.1:0", "--data"])
        .arg(data)
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    // SAFETY: the closure runs in the forked child before exec and only calls prctl(2) and
    // setrlimit(2), which are async-signal-safe; it touches no memory shared with the parent.
    unsafe {
        cmd.pre_exec(move || {
            // Dies with the test process, even if the test is killed.
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            let lim = libc::rlimit {
                rlim_cur: nofile,
                rlim_max: nofile,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().expect("spawn obsync-refserver");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .trim_end()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("first stdout line was {line:?}"))
        .to_owned();
    Limited { child, url }
}

/// Hundreds of connections that announce a body and stall (unauthenticated setup posts, and
/// chunk puts naming a known device) under a 128-descriptor limit: a signed request on a new
/// connection is still answered within 1 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_strangers_do_not_lock_out_signed_clients() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = start_limited(&data, 128);
    let token = std::fs::read_to_string(data.join("setup-token")).unwrap();
    let a = Api::new(&server.url, 50).setup(token.trim()).await;
    let addr: std::net::SocketAddr = server.url.trim_start_matches("http://").parse().unwrap();

    let sid = "ab".repeat(32);
    let stall_put = format!(
        "PUT /v1/chunks/{sid} HTTP/1.1\r\nhost: x\r\n{}: {}\r\n{}: 1\r\n{}: {}\r\n{}: {}\r\ncontent-length: 1000\r\n\r\n0123456789",
        protocol::H_DEVICE,
        a.device_id,
        protocol::H_TS,
        protocol::H_NONCE,
        "0".repeat(32),
        protocol::H_SIG,
        "0".repeat(64),
    );
    let stall_setup =
        "POST /v1/setup HTTP/1.1\r\nhost: x\r\ncontent-length: 1000\r\n\r\n0123456789";
    let mut stalled = Vec::new();
    // A server that stops accepting fills its backlog and then connects hang: bound them.
    let flood_until = Instant::now() + Duration::from_secs(10);
    for i in 0..400 {
        if Instant::now() > flood_until {
            break;
        }
        let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(500)) else {
            continue;
        };
        let req = if i % 2 == 0 { stall_setup } else { &stall_put };
        let _ = s.write_all(req.as_bytes());
        stalled.push(s);
    }
    assert!(stalled.len() >= 300, "only {} connected", stalled.len());
    // Let the server take in the flood before the signed client arrives.
    tokio::time::sleep(Duration::from_millis(300)).await;

    for round in 0..3 {
        let api = Api::new(&server.url, 51 + round);
        let t0 = Instant::now();
        let r = tokio::time::timeout(
            Duration::from_secs(1),
            api.signed(&a, Method::GET, "/v1/changes", ""),
        )
        .await
        .unwrap_or_else(|_| panic!("round {round}: no answer within 1 s"));
        assert_eq!(r.status, StatusCode::OK, "round {round}: {r:?}");
        assert!(t0.elapsed() < Duration::from_secs(1));
    }
    drop(stalled);
}
