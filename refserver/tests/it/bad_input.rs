//! Refusals: authentication (missing, unknown, bad signature, stale, replayed, pending) and
//! bad input (sizes, sids, JSON, seq, version ids), each with its documented code.

use std::io::{Read, Write};

use hyper::{Method, StatusCode};
use protocol::wire::{ClaimRequest, PairingResponse};

use crate::client::{Api, now_s};
use crate::{file_id, start};

/// One request over a raw socket (`connection: close`); returns the whole answer as text.
fn exchange(
    addr: std::net::SocketAddr,
    method: &str,
    target: &str,
    signed: &[(&str, String)],
    extra_headers: &str,
    body: &[u8],
) -> String {
    let mut req =
        format!("{method} {target} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n{extra_headers}");
    for (k, v) in signed {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    let mut sock = std::net::TcpStream::connect(addr).unwrap();
    sock.write_all(req.as_bytes()).unwrap();
    sock.write_all(body).unwrap();
    let mut answer = Vec::new();
    let _ = sock.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).into_owned()
}

fn code(r: &crate::client::Resp) -> (u16, String) {
    (r.status.as_u16(), r.error())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authentication_refusals() {
    let (server, _dir) = start(false);
    let api = Api::new(&server.url(), 10);
    // The setup token is checked before "already set up".
    let r = api
        .raw(
            Method::POST,
            "/v1/setup",
            &[],
            r#"{"setup_token":"nope","account_name":"x","device":{"name":"n","platform":"p","app_version":"v"}}"#,
        )
        .await;
    assert_eq!(code(&r), (401, "bad_setup_token".into()));
    let a = api.setup(&server.setup_token).await;
    let again = format!(
        r#"{{"setup_token":"{}","account_name":"x","device":{{"name":"n","platform":"p","app_version":"v"}}}}"#,
        server.setup_token
    );
    let r = api.raw(Method::POST, "/v1/setup", &[], again).await;
    assert_eq!(code(&r), (409, "already_set_up".into()));

    let r = api.raw(Method::GET, "/v1/changes", &[], "").await;
    assert_eq!(code(&r), (401, "missing_headers".into()));

    let stranger =
        protocol::DeviceCredentials::from_hex(&"0f".repeat(16), &"01".repeat(32)).unwrap();
    let r = api.signed(&stranger, Method::GET, "/v1/changes", "").await;
    assert_eq!(code(&r), (401, "unknown_device".into()));

    // Signed over one body, sent with another.
    let nonce = api.random_hex(16);
    let h = Api::sign(
        &a,
        &Method::POST,
        "/v1/chunks/exists",
        br#"{"sids":[]}"#,
        now_s(),
        &nonce,
    );
    let r = api
        .raw(Method::POST, "/v1/chunks/exists", &h, r#"{"sids":["x"]}"#)
        .await;
    assert_eq!(code(&r), (401, "bad_signature".into()));
    // Signed for another target.
    let h = Api::sign(
        &a,
        &Method::GET,
        "/v1/changes?since=0",
        b"",
        now_s(),
        &api.random_hex(16),
    );
    let r = api.raw(Method::GET, "/v1/changes?since=1", &h, "").await;
    assert_eq!(code(&r), (401, "bad_signature".into()));

    let mut stale = Api::new(&server.url(), 11);
    stale.ts_offset = -301;
    let r = stale.signed(&a, Method::GET, "/v1/changes", "").await;
    assert_eq!(code(&r), (401, "stale_timestamp".into()));
    let mut future = Api::new(&server.url(), 12);
    future.ts_offset = 301;
    let r = future.signed(&a, Method::GET, "/v1/changes", "").await;
    assert_eq!(code(&r), (401, "stale_timestamp".into()));

    // The same signed request twice: the second is a replay.
    let h = Api::sign(
        &a,
        &Method::GET,
        "/v1/changes",
        b"",
        now_s(),
        &api.random_hex(16),
    );
    let r = api.raw(Method::GET, "/v1/changes", &h, "").await;
    assert_eq!(r.status, StatusCode::OK);
    let r = api.raw(Method::GET, "/v1/changes", &h, "").await;
    assert_eq!(code(&r), (401, "replayed_nonce".into()));

    // A claimed but unapproved device is pending everywhere but its envelope.
    let p: PairingResponse = api.signed(&a, Method::POST, "/v1/pairing", "").await.json();
    let claim = ClaimRequest {
        enroll_token: "ff".repeat(32),
        name: "b".into(),
        platform: "p".into(),
        app_version: "v".into(),
    };
    let url = format!("/v1/pairing/{}/claim", p.pairing_id);
    let r = api
        .raw(Method::POST, &url, &[], serde_json::to_vec(&claim).unwrap())
        .await;
    assert_eq!(code(&r), (401, "bad_enroll_token".into()));
    let claim = ClaimRequest {
        enroll_token: p.enroll_token.clone(),
        ..claim
    };
    let r = api
        .raw(Method::POST, &url, &[], serde_json::to_vec(&claim).unwrap())
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    let c: protocol::wire::ClaimResponse = r.json();
    let b = protocol::DeviceCredentials::from_hex(&c.device_id, &c.device_secret).unwrap();
    let r = api.signed(&b, Method::GET, "/v1/changes", "").await;
    assert_eq!(code(&r), (403, "device_pending".into()));
    let env = format!("/v1/pairing/{}/envelope", p.pairing_id);
    let r = api.signed(&b, Method::GET, &env, "").await;
    assert_eq!(code(&r), (409, "not_approved".into()));
    // Only the creator approves.
    let approve = r#"{"envelope":"AAAA","nonce":"000000000000000000000000"}"#;
    let ap = format!("/v1/pairing/{}/approve", p.pairing_id);
    let r = api.signed(&b, Method::POST, &ap, approve).await;
    assert_eq!(code(&r), (403, "device_pending".into()));
    let r = api.signed(&a, Method::POST, &ap, approve).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    let r = api.signed(&b, Method::GET, &env, "").await;
    assert_eq!(r.status, StatusCode::OK);
    let r = api.signed(&b, Method::GET, &env, "").await;
    assert_eq!(code(&r), (410, "envelope_consumed".into()));
    let r = api.signed(&b, Method::GET, "/v1/changes", "").await;
    assert_eq!(r.status, StatusCode::OK);

    let m = api.metrics().await;
    assert_eq!(
        m["obsync_requests_total{route=\"changes\",status=\"401\"}"],
        6.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_its_documented_code_and_stores_nothing() {
    let (server, dir) = start(false);
    let api = Api::new(&server.url(), 20);
    let a = api.setup(&server.setup_token).await;

    // Chunk bodies: over the limit (413, refused from Content-Length before any byte is
    // stored), not the sid's hash (422 sid_mismatch), a sid that is not 64 lowercase hex.
    // The server answers from the headers and closes; the body is never sent (as a client
    // using `Expect: 100-continue` would do), so this goes over a raw socket.
    let big = vec![7u8; protocol::limits::MAX_CHUNK_BODY + 1];
    let sid = protocol::sha256_hex(&big);
    let target = format!("/v1/chunks/{sid}");
    let h = Api::sign(
        &a,
        &Method::PUT,
        &target,
        &big,
        now_s(),
        &api.random_hex(16),
    );
    let answer = exchange(
        server.addr,
        "PUT",
        &target,
        &h,
        &format!("content-length: {}\r\nexpect: 100-continue\r\n", big.len()),
        b"",
    );
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("body_too_large"), "{answer}");
    let other = "cd".repeat(32);
    let r = api
        .signed(&a, Method::PUT, &format!("/v1/chunks/{other}"), "body")
        .await;
    assert_eq!(code(&r), (422, "sid_mismatch".into()));
    let upper = protocol::sha256_hex(b"body").to_ascii_uppercase();
    let r = api
        .signed(&a, Method::PUT, &format!("/v1/chunks/{upper}"), "body")
        .await;
    assert_eq!(code(&r), (422, "bad_sid".into()));
    let r = api
        .signed(&a, Method::PUT, "/v1/chunks/..%2F..%2Fescape", "body")
        .await;
    assert_eq!(code(&r), (422, "bad_sid".into()));
    let r = api
        .signed(&a, Method::GET, &format!("/v1/chunks/{other}"), "")
        .await;
    assert_eq!(code(&r), (404, "unknown_chunk".into()));

    // JSON: malformed, oversized, too many sids.
    let r = api.signed(&a, Method::POST, "/v1/chunks/exists", "{").await;
    assert_eq!(code(&r), (400, "bad_json".into()));
    let huge = vec![b' '; protocol::limits::MAX_JSON_BODY + 1];
    let h = Api::sign(
        &a,
        &Method::POST,
        "/v1/chunks/exists",
        &huge,
        now_s(),
        &api.random_hex(16),
    );
    let answer = exchange(
        server.addr,
        "POST",
        "/v1/chunks/exists",
        &h,
        &format!("content-length: {}\r\n", huge.len()),
        b"",
    );
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    let many = serde_json::json!({"sids": vec!["ab".repeat(32); 65]}).to_string();
    let r = api.signed(&a, Method::POST, "/v1/chunks/get", many).await;
    assert_eq!(code(&r), (400, "bad_request".into()));

    // Versions: wrong version_id, chunks not uploaded, tombstone with sids, bad file id.
    let fid = file_id(3);
    let mut v = Api::version(&fid, vec![], vec![], 0, b"m");
    v.version_id = "00".repeat(32);
    let r = api.post_version(&a, &fid, &v).await;
    assert_eq!(code(&r), (422, "version_id_mismatch".into()));
    let v = Api::version(&fid, vec![], vec!["ee".repeat(32)], 1, b"m");
    let r = api.post_version(&a, &fid, &v).await;
    assert_eq!(code(&r), (409, "missing_chunks".into()));
    let (_, s) = api.put_chunk(&a, b"x").await;
    let mut v = Api::version(&fid, vec![], vec![s], 1, b"m");
    v.deleted = true;
    let r = api.post_version(&a, &fid, &v).await;
    assert_eq!(code(&r), (400, "bad_request".into()));
    let r = api
        .signed(&a, Method::POST, "/v1/files/nothex/versions", "{}")
        .await;
    assert_eq!(code(&r), (400, "bad_request".into()));
    let r = api
        .signed(&a, Method::GET, &format!("/v1/files/{}", file_id(99)), "")
        .await;
    assert_eq!(code(&r), (404, "unknown_file".into()));

    // Change feed: since ahead of the head, a non-number.
    let r = api.signed(&a, Method::GET, "/v1/changes?since=5", "").await;
    assert_eq!(code(&r), (416, "seq_ahead".into()));
    let r = api.signed(&a, Method::GET, "/v1/changes?since=x", "").await;
    assert_eq!(code(&r), (400, "bad_request".into()));

    // Routing.
    let r = api.raw(Method::GET, "/nope", &[], "").await;
    assert_eq!(code(&r), (404, "not_found".into()));
    let r = api.raw(Method::DELETE, "/v1/changes", &[], "").await;
    assert_eq!(code(&r), (405, "method_not_allowed".into()));

    // A chunked PUT without Content-Length: 411, over a raw socket.
    let sid = protocol::sha256_hex(b"abc");
    let target = format!("/v1/chunks/{sid}");
    let h = Api::sign(
        &a,
        &Method::PUT,
        &target,
        b"abc",
        now_s(),
        &api.random_hex(16),
    );
    let answer = exchange(
        server.addr,
        "PUT",
        &target,
        &h,
        "transfer-encoding: chunked\r\n",
        b"3\r\nabc\r\n0\r\n\r\n",
    );
    assert!(answer.starts_with("HTTP/1.1 411"), "{answer}");
    assert!(answer.contains("length_required"));

    // Nothing half-written: no temp files, exactly one stored chunk (the "x" above).
    let chunks = dir.path().join("data/chunks");
    assert_eq!(std::fs::read_dir(chunks.join(".tmp")).unwrap().count(), 0);
    let m = api.metrics().await;
    assert_eq!(m["obsync_chunks_stored_total"], 1.0);
    assert_eq!(m["obsync_versions_total"], 0.0);
}
