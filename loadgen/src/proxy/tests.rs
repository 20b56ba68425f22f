//! The proxy between a client and a scripted fake upstream, byte for byte: keep-alive with
//! pipelining, chunked bodies, `Expect: 100-continue` both ways, a WebSocket upgrade, a GraphQL
//! operation, a stalled answer cut at the read deadline, a large answer streamed, and
//! connections closed under a held long poll.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

use super::*;

/// One step of the fake upstream's script on its one connection.
enum Step {
    /// Read exactly these bytes (the proxy passes them unchanged).
    Expect(Vec<u8>),
    /// Write these bytes.
    Send(Vec<u8>),
    /// Write `n` bytes of `x`, 1 MiB at a time.
    SendMany(u64),
    Sleep(Duration),
    /// Fail (close without answering, as Node's HTTP server does) if the proxy has shut down
    /// its writing within this long.
    DropIfHalfClosed(Duration),
}

/// A fake upstream that runs `script` on the first connection it accepts; the task's result
/// says whether every expected byte came.
async fn upstream(script: Vec<Step>) -> (SocketAddr, tokio::task::JoinHandle<Result<(), String>>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let (mut s, _) = l.accept().await.map_err(|e| e.to_string())?;
        for step in script {
            match step {
                Step::Expect(want) => {
                    let mut got = vec![0; want.len()];
                    tokio::time::timeout(Duration::from_secs(10), s.read_exact(&mut got))
                        .await
                        .map_err(|_| "timed out reading".to_string())?
                        .map_err(|e| e.to_string())?;
                    if got != want {
                        return Err(format!(
                            "got {:?}, expected {:?}",
                            String::from_utf8_lossy(&got),
                            String::from_utf8_lossy(&want)
                        ));
                    }
                }
                Step::Send(b) => s.write_all(&b).await.map_err(|e| e.to_string())?,
                Step::SendMany(mut n) => {
                    let block = vec![b'x'; 1 << 20];
                    while n > 0 {
                        let k = n.min(block.len() as u64);
                        if s.write_all(&block[..k as usize]).await.is_err() {
                            break;
                        }
                        n -= k;
                    }
                }
                Step::Sleep(d) => tokio::time::sleep(d).await,
                Step::DropIfHalfClosed(d) => {
                    let mut one = [0u8; 1];
                    if let Ok(Ok(0)) = tokio::time::timeout(d, s.read(&mut one)).await {
                        return Err("the proxy half-closed before the answer".into());
                    }
                }
            }
        }
        // Hold the connection until the proxy closes it.
        let mut sink = [0u8; 1024];
        while let Ok(n) = s.read(&mut sink).await {
            if n == 0 {
                break;
            }
        }
        Ok(())
    });
    (addr, task)
}

fn proxy(upstream: SocketAddr, read_timeout: Duration, names: &[&str]) -> Proxy {
    Proxy::start(ProxyConfig {
        upstream,
        read_timeout,
        classifier: Classifier {
            patterns: Vec::new(),
            names: names
                .iter()
                .map(|s| (*s).to_owned())
                .collect::<BTreeSet<_>>(),
        },
    })
    .unwrap()
}

/// Reads from `s` until `n` bytes came (or 10 s passed, or the stream ended).
async fn read_n(s: &mut TcpStream, n: usize) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = vec![0; 64 * 1024];
    let t0 = Instant::now();
    while got.len() < n && t0.elapsed() < Duration::from_secs(10) {
        match tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => break,
            Ok(Ok(k)) => got.extend_from_slice(&buf[..k]),
        }
    }
    got
}

fn b(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

#[tokio::test]
async fn pipelined_keep_alive_requests_pass_unchanged_and_are_counted() {
    let r1 = b("GET /notes/a.md HTTP/1.1\r\nHost: x\r\n\r\n");
    let r2 = b(
        "PUT /notes/b.md HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    );
    let r3 = b("DELETE /v1/files/1234 HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nok");
    let a1 = b("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nnote");
    let a2 = b("HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n");
    let a3 = b("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
    let (addr, fake) = upstream(vec![
        Step::Expect(r1.clone()),
        Step::Send(a1.clone()),
        Step::Expect(r2.clone()),
        Step::Send(a2.clone()),
        Step::Expect(r3.clone()),
        Step::Send(a3.clone()),
    ])
    .await;
    let p = proxy(addr, Duration::from_secs(5), &["notes", "a.md", "b.md"]);
    let mut c = TcpStream::connect(p.addr()).await.unwrap();
    // All three in one write: pipelined.
    c.write_all(&[r1.clone(), r2.clone(), r3.clone()].concat())
        .await
        .unwrap();
    let want = [a1.clone(), a2.clone(), a3.clone()].concat();
    assert_eq!(read_n(&mut c, want.len()).await, want);
    drop(c);
    fake.await.unwrap().unwrap();
    p.close_connections();
    let t = p.take();
    assert_eq!(t.requests(), 3);
    assert_eq!(t.connections, 1);
    let get = &t.routes["GET_{path}"];
    assert_eq!((get.requests, get.status[1]), (1, 1));
    assert_eq!(get.bytes_up, r1.len() as u64);
    assert_eq!(get.bytes_down, a1.len() as u64);
    let put = &t.routes["PUT_{path}"];
    assert_eq!(
        (put.bytes_up, put.bytes_down),
        (r2.len() as u64, a2.len() as u64)
    );
    let del = &t.routes["DELETE_v1_files_{id}"];
    assert_eq!((del.status[3], del.failed), (1, 0));
    assert_eq!(get.latency.len() + put.latency.len() + del.latency.len(), 3);
    // Nothing carried into the next phase.
    assert_eq!(p.take().requests(), 0);
}

#[tokio::test]
async fn expect_continue_waits_for_the_server_either_way() {
    let head = b("PUT /f HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n");
    let cont = b("HTTP/1.1 100 Continue\r\n\r\n");
    let done = b("HTTP/1.1 204 No Content\r\n\r\n");
    let refused = b("HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n");
    let next = b("GET /g HTTP/1.1\r\nHost: x\r\n\r\n");
    let ok = b("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n!");
    let (addr, fake) = upstream(vec![
        Step::Expect(head.clone()),
        Step::Send(cont.clone()),
        Step::Expect(b("body")),
        Step::Send(done.clone()),
        // The second time the server refuses before the body: the client sends none and
        // goes on with its next request.
        Step::Expect(head.clone()),
        Step::Send(refused.clone()),
        Step::Expect(next.clone()),
        Step::Send(ok.clone()),
    ])
    .await;
    let p = proxy(addr, Duration::from_secs(5), &[]);
    let mut c = TcpStream::connect(p.addr()).await.unwrap();
    c.write_all(&head).await.unwrap();
    assert_eq!(read_n(&mut c, cont.len()).await, cont);
    c.write_all(b"body").await.unwrap();
    assert_eq!(read_n(&mut c, done.len()).await, done);
    c.write_all(&head).await.unwrap();
    assert_eq!(read_n(&mut c, refused.len()).await, refused);
    c.write_all(&next).await.unwrap();
    assert_eq!(read_n(&mut c, ok.len()).await, ok);
    drop(c);
    fake.await.unwrap().unwrap();
    p.close_connections();
    let t = p.take();
    assert_eq!(t.routes["PUT_f"].requests, 2);
    assert_eq!(t.routes["PUT_f"].status, [0, 1, 0, 1, 0]);
    assert_eq!(t.routes["GET_g"].status[1], 1);
}

#[tokio::test]
async fn a_websocket_upgrade_is_tunnelled_with_its_frames_counted() {
    let req = b(
        "GET /feed HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
    );
    let switch =
        b("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n");
    // Client frames are masked; two of them. The server sends three.
    let up = [
        vec![0x81, 0x82, 1, 2, 3, 4, b'h' ^ 1, b'i' ^ 2],
        vec![0x89, 0x80, 0, 0, 0, 0],
    ]
    .concat();
    let down = [
        vec![0x81, 0x01, b'a'],
        vec![0x81, 0x01, b'b'],
        vec![0x8a, 0x00],
    ]
    .concat();
    let (addr, fake) = upstream(vec![
        Step::Expect(req.clone()),
        Step::Send(switch.clone()),
        Step::Expect(up.clone()),
        Step::Send(down.clone()),
    ])
    .await;
    let p = proxy(addr, Duration::from_secs(5), &[]);
    let mut c = TcpStream::connect(p.addr()).await.unwrap();
    c.write_all(&req).await.unwrap();
    assert_eq!(read_n(&mut c, switch.len()).await, switch);
    c.write_all(&up).await.unwrap();
    assert_eq!(read_n(&mut c, down.len()).await, down);
    drop(c);
    fake.await.unwrap().unwrap();
    p.close_connections();
    let t = p.take();
    let r = &t.routes["GET_feed"];
    assert_eq!((r.requests, r.status[0]), (1, 1));
    assert_eq!((r.ws_frames_up, r.ws_frames_down), (2, 3));
    assert_eq!(r.bytes_up, (req.len() + up.len()) as u64);
    assert_eq!(r.bytes_down, (switch.len() + down.len()) as u64);
}

#[tokio::test]
async fn a_graphql_operation_names_its_route() {
    let body = r#"{"operationName":"PushNotes","query":"mutation PushNotes { ok }"}"#;
    let req = b(&format!(
        "POST /graphql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    ));
    let ans = b("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}");
    let (addr, fake) = upstream(vec![Step::Expect(req.clone()), Step::Send(ans.clone())]).await;
    let p = proxy(addr, Duration::from_secs(5), &[]);
    let mut c = TcpStream::connect(p.addr()).await.unwrap();
    c.write_all(&req).await.unwrap();
    assert_eq!(read_n(&mut c, ans.len()).await, ans);
    drop(c);
    fake.await.unwrap().unwrap();
    p.close_connections();
    let t = p.take();
    assert_eq!(
        t.routes.keys().collect::<Vec<_>>(),
        vec!["POST_graphql", "POST_graphql:PushNotes"]
    );
    assert_eq!(t.routes["POST_graphql:PushNotes"].requests, 1);
    assert_eq!(t.routes["POST_graphql"].requests, 0);
}

#[tokio::test]
async fn a_stalled_answer_ends_at_the_read_deadline_as_a_failed_exchange() {
    let req = b("GET /big HTTP/1.1\r\nHost: x\r\n\r\n");
    let (addr, _fake) = upstream(vec![
        Step::Expect(req.clone()),
        Step::Send(b(
            "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nonly ten..",
        )),
        Step::Sleep(Duration::from_secs(30)),
    ])
    .await;
    let p = proxy(addr, Duration::from_millis(300), &[]);
    let mut c = TcpStream::connect(p.addr()).await.unwrap();
    c.write_all(&req).await.unwrap();
    let t0 = Instant::now();
    let got = read_n(&mut c, 10_000).await;
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    assert!(got.ends_with(b"only ten.."), "the client got what came");
    let t = p.take();
    assert_eq!(t.routes["GET_big"].failed, 1);
    assert_eq!(t.routes["GET_big"].latency.len(), 0);
    assert_eq!(t.faults.get("no byte within the read deadline"), Some(&1));
}

#[tokio::test]
async fn a_large_answer_streams_through() {
    const N: u64 = 256 << 20;
    let req = b("GET /huge HTTP/1.1\r\nHost: x\r\n\r\n");
    let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {N}\r\n\r\n");
    let (addr, fake) = upstream(vec![
        Step::Expect(req.clone()),
        Step::Send(b(&head)),
        Step::SendMany(N),
    ])
    .await;
    let p = proxy(addr, Duration::from_secs(5), &[]);
    let mut c = TcpStream::connect(p.addr()).await.unwrap();
    c.write_all(&req).await.unwrap();
    let mut total = 0u64;
    let mut buf = vec![0; 1 << 20];
    let want = N + head.len() as u64;
    while total < want {
        let n = tokio::time::timeout(Duration::from_secs(10), c.read(&mut buf))
            .await
            .unwrap()
            .unwrap();
        assert!(n > 0, "closed after {total} bytes");
        total += n as u64;
    }
    assert_eq!(total, want);
    drop(c);
    fake.await.unwrap().unwrap();
    p.close_connections();
    let t = p.take();
    assert_eq!(t.routes["GET_huge"].bytes_down, want);
    assert_eq!(t.routes["GET_huge"].status[1], 1);
}

#[tokio::test]
async fn closing_the_connections_ends_a_held_long_poll() {
    let req = b("GET /v1/changes?wait=55 HTTP/1.1\r\nHost: x\r\n\r\n");
    let (addr, _fake) = upstream(vec![
        Step::Expect(req.clone()),
        Step::Sleep(Duration::from_secs(60)),
    ])
    .await;
    let p = proxy(addr, Duration::from_secs(120), &[]);
    let mut c = TcpStream::connect(p.addr()).await.unwrap();
    c.write_all(&req).await.unwrap();
    // Held: nothing comes while the server waits.
    let mut one = [0u8; 1];
    assert!(
        tokio::time::timeout(Duration::from_millis(300), c.read(&mut one))
            .await
            .is_err()
    );
    let t0 = Instant::now();
    tokio::task::spawn_blocking({
        let p = std::sync::Arc::new(p);
        move || {
            p.close_connections();
            let t = p.take();
            assert_eq!(t.routes["GET_v1_changes"].failed, 1);
            assert_eq!(t.max_in_flight, 1);
        }
    })
    .await
    .unwrap();
    assert!(matches!(c.read(&mut one).await, Ok(0) | Err(_)));
    assert!(t0.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn a_request_that_asks_to_close_still_gets_its_answer() {
    let r = b("GET /db/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let a = b("HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\nConnection: close\r\n\r\nno");
    let (addr, fake) = upstream(vec![
        Step::Expect(r.clone()),
        Step::DropIfHalfClosed(Duration::from_millis(200)),
        Step::Send(a.clone()),
    ])
    .await;
    let p = proxy(addr, Duration::from_secs(5), &[]);
    let mut c = TcpStream::connect(p.addr()).await.unwrap();
    c.write_all(&r).await.unwrap();
    // The whole answer, then the connection closed by the proxy.
    assert_eq!(read_n(&mut c, a.len() + 1).await, a);
    fake.await.unwrap().unwrap();
    assert_eq!(p.take().requests(), 1);
}
