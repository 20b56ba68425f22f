//! Hardening: refusals that must not depend on arithmetic wrapping or path rewriting, the
//! loopback check behind `/metrics` on a dual-stack socket, and the modes of secret files.

use std::os::unix::fs::PermissionsExt as _;

use hyper::{Method, StatusCode};
use refserver::{ServerConfig, TestServer};

use crate::client::{Api, now_s};
use crate::start;

fn code(r: &crate::client::Resp) -> (u16, String) {
    (r.status.as_u16(), r.error())
}

/// A correctly signed request dated `now - 2^63` (and other far timestamps) is stale: the
/// skew check must not wrap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn far_timestamps_are_stale_not_wrapped() {
    let (server, _dir) = start(false);
    let api = Api::new(&server.url(), 40);
    let a = api.setup(&server.setup_token).await;
    let now = now_s();
    for ts in [now.wrapping_sub(i64::MIN), i64::MIN, i64::MAX, now - 301] {
        let h = Api::sign(
            &a,
            &Method::GET,
            "/v1/changes",
            b"",
            ts,
            &api.random_hex(16),
        );
        let r = api.raw(Method::GET, "/v1/changes", &h, "").await;
        assert_eq!(code(&r), (401, "stale_timestamp".into()), "ts {ts}");
    }
    // The server is still there and answers a fresh request.
    let r = api.signed(&a, Method::GET, "/v1/changes", "").await;
    assert_eq!(r.status, StatusCode::OK);
}

/// Paths are matched as sent: doubled or trailing slashes are no route.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slashes_are_not_collapsed() {
    let (server, _dir) = start(false);
    let api = Api::new(&server.url(), 41);
    for path in ["//livez", "/livez/", "//v1/setup", "/v1//changes"] {
        let r = api.raw(Method::GET, path, &[], "").await;
        assert_eq!(code(&r), (404, "not_found".into()), "{path}");
    }
    let r = api.raw(Method::GET, "/livez", &[], "").await;
    assert_eq!(r.status, StatusCode::OK);
}

/// On a dual-stack listener an IPv4 loopback client is `::ffff:127.0.0.1`: still loopback.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mapped_ipv4_loopback_peers_get_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = ServerConfig::new(dir.path().join("data"));
    cfg.listen = "[::]:0".parse().unwrap();
    cfg.allow_remote = true;
    let server = TestServer::start(cfg).unwrap();
    let api = Api::new(&format!("http://127.0.0.1:{}", server.addr.port()), 42);
    let r = api.raw(Method::GET, "/metrics", &[], "").await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
}

/// The data dir is 0700; the journal, nonce log and setup token are 0600, also when an older
/// build left them wider.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_are_private() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let check = |data: &std::path::Path| {
        assert_eq!(mode(data), 0o700, "data dir");
        for f in ["journal", "nonces.log", "setup-token"] {
            assert_eq!(mode(&data.join(f)), 0o600, "{f}");
        }
    };
    {
        let server = TestServer::start(ServerConfig::new(&data)).unwrap();
        let api = Api::new(&server.url(), 43);
        let a = api.setup(&server.setup_token).await;
        let r = api.signed(&a, Method::GET, "/v1/changes", "").await;
        assert_eq!(r.status, StatusCode::OK);
        check(&data);
    }
    // Widen everything, as an older build left it; a restart narrows it again.
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();
    for f in ["journal", "nonces.log", "setup-token"] {
        std::fs::set_permissions(data.join(f), std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let server = TestServer::start(ServerConfig::new(&data)).unwrap();
    check(&data);
    drop(server);
}
