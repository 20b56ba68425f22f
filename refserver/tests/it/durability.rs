//! Restart durability: acknowledged versions, devices and spent nonces survive a restart; a
//! torn journal tail is truncated, not fatal.

use std::io::Write;

use hyper::{Method, StatusCode};
use protocol::wire::{ChangesResponse, FileResponse};
use refserver::{ManualClock, ServerConfig, TestServer};

use crate::client::{Api, now_s};
use crate::file_id;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn versions_and_spent_nonces_survive_a_restart_and_a_torn_tail_is_cut() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = TestServer::start(ServerConfig::new(&data)).unwrap();
    let token = server.setup_token.clone();
    let api = Api::new(&server.url(), 30);
    let a = api.setup(&token).await;
    let fid = file_id(5);
    let posted = api.new_note(&a, &fid, b"durable note").await;
    // A request whose nonce is now spent.
    let spent = Api::sign(
        &a,
        &Method::GET,
        "/v1/changes",
        b"",
        now_s(),
        &api.random_hex(16),
    );
    assert_eq!(
        api.raw(Method::GET, "/v1/changes", &spent, "").await.status,
        StatusCode::OK
    );
    server.shutdown();

    // Tear the journal: a frame header promising more bytes than follow.
    let journal = data.join("journal");
    let good_len = std::fs::metadata(&journal).unwrap().len();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&journal)
        .unwrap();
    f.write_all(&[200, 0, 0, 0, 1, 2, 3, 4, b'{', b'"'])
        .unwrap();
    drop(f);
    // And the nonce log: half a record.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(data.join("nonces.log"))
        .unwrap();
    f.write_all(&[40, 0, 0]).unwrap();
    drop(f);

    let server = TestServer::start(ServerConfig::new(&data)).unwrap();
    assert_eq!(server.setup_token, token, "the setup token is kept");
    assert_eq!(std::fs::metadata(&journal).unwrap().len(), good_len);
    let api = Api::new(&server.url(), 31);
    let r = api.raw(Method::GET, "/v1/changes", &spent, "").await;
    assert_eq!(
        (r.status.as_u16(), r.error()),
        (401, "replayed_nonce".to_owned())
    );
    let f: FileResponse = api
        .signed(&a, Method::GET, &format!("/v1/files/{fid}"), "")
        .await
        .json();
    assert_eq!(f.heads, vec![posted.version_id.clone()]);
    let feed: ChangesResponse = api
        .signed(&a, Method::GET, "/v1/changes?since=0", "")
        .await
        .json();
    assert_eq!(feed.head_seq, 1);
    // The chunk is still there and byte-identical; new posts continue the sequence.
    let r = api
        .signed(
            &a,
            Method::GET,
            &format!("/v1/chunks/{}", f.versions[0].sids[0]),
            "",
        )
        .await;
    assert_eq!(&r.body[..], b"durable note");
    let next = api.new_note(&a, &file_id(6), b"second").await;
    assert_eq!(next.seq, 2);
    let r = api.raw(Method::GET, "/readyz", &[], "").await;
    assert_eq!(r.json::<protocol::wire::ReadyResponse>().seq, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_clock_is_a_parameter() {
    let dir = tempfile::tempdir().unwrap();
    // The request is stamped with the server clock's start, not a second read of the real
    // clock: a second boundary crossed in between would leave it a second inside the window.
    let t0 = now_s();
    let clock = ManualClock::new(t0 * 1000);
    let mut cfg = ServerConfig::new(dir.path().join("data"));
    cfg.clock = clock.clone();
    let server = TestServer::start(cfg).unwrap();
    let api = Api::new(&server.url(), 40);
    let a = api.setup(&server.setup_token).await;
    let h = Api::sign(
        &a,
        &Method::GET,
        "/v1/changes",
        b"",
        t0,
        &api.random_hex(16),
    );
    assert_eq!(
        api.raw(Method::GET, "/v1/changes", &h, "").await.status,
        StatusCode::OK
    );
    // Five minutes later the same request is still a replay...
    clock.advance_s(299);
    let r = api.raw(Method::GET, "/v1/changes", &h, "").await;
    assert_eq!(r.error(), "replayed_nonce");
    // ...and past the skew window it is stale, whatever its nonce (3 s past it, so a request
    // signed below with the real clock, a second boundary later, is still past it).
    clock.advance_s(4);
    let r = api.raw(Method::GET, "/v1/changes", &h, "").await;
    assert_eq!(r.error(), "stale_timestamp");
    let r = api.signed(&a, Method::GET, "/v1/changes", "").await;
    assert_eq!(r.error(), "stale_timestamp");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pairings_expire_after_ten_minutes() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(now_s() * 1000);
    let mut cfg = ServerConfig::new(dir.path().join("data"));
    cfg.clock = clock.clone();
    let server = TestServer::start(cfg).unwrap();
    let api = Api::new(&server.url(), 41);
    let a = api.setup(&server.setup_token).await;
    let p: protocol::wire::PairingResponse =
        api.signed(&a, Method::POST, "/v1/pairing", "").await.json();
    assert_eq!(p.expires, clock_ms(&clock) + 600_000);
    clock.advance_s(601);
    let claim = protocol::wire::ClaimRequest {
        enroll_token: p.enroll_token,
        name: "late".into(),
        platform: "p".into(),
        app_version: "v".into(),
    };
    let r = api
        .raw(
            Method::POST,
            &format!("/v1/pairing/{}/claim", p.pairing_id),
            &[],
            serde_json::to_vec(&claim).unwrap(),
        )
        .await;
    assert_eq!(
        (r.status.as_u16(), r.error().as_str()),
        (404, "unknown_pairing")
    );
}

fn clock_ms(c: &ManualClock) -> i64 {
    use refserver::Clock;
    c.now_ms()
}

/// `/metrics` is answered to loopback peers only. Needs a non-loopback address on this
/// machine; without one (an isolated sandbox) there is nothing to connect from, and the test
/// says so and returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_refuse_non_loopback_peers() {
    let probe = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
    // Connecting a UDP socket sends nothing; it only picks the outgoing interface.
    let ip = match probe
        .connect("192.0.2.1:9")
        .and_then(|()| probe.local_addr())
    {
        Ok(a) if !a.ip().is_loopback() && !a.ip().is_unspecified() => a.ip(),
        _ => {
            eprintln!("no non-loopback address here; skipping");
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = ServerConfig::new(dir.path().join("data"));
    cfg.listen = "0.0.0.0:0".parse().unwrap();
    cfg.allow_remote = true;
    let server = TestServer::start(cfg).unwrap();
    let api = Api::new(&format!("http://{ip}:{}", server.addr.port()), 42);
    let r = api.raw(Method::GET, "/metrics", &[], "").await;
    assert_eq!((r.status.as_u16(), r.error().as_str()), (404, "not_found"));
    let r = api.raw(Method::GET, "/livez", &[], "").await;
    assert_eq!(r.status, StatusCode::OK);
    let local = Api::new(&format!("http://127.0.0.1:{}", server.addr.port()), 43);
    assert!(local.metrics().await.contains_key("obsync_head_seq"));
}
