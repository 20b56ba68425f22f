//! A full volume, on a small tmpfs this test mounts (it needs root, as CI has): chunks of any
//! size get `507 volume_full` (never 500), reads keep working, `/readyz` says 503 and
//! recovers, a restart on the still-full volume works, and writes resume by themselves once
//! space is freed.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use hyper::{Method, StatusCode};
use rand::{Rng as _, SeedableRng as _};
use refserver::{ServerConfig, TestServer};

use crate::client::Api;
use crate::file_id;

/// A tmpfs mounted for the test; unmounted (lazily) on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path, size: &str) -> Tmpfs {
        std::fs::create_dir_all(at).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .output()
            .expect("run mount");
        assert!(
            out.status.success(),
            "this test mounts a {size} tmpfs and needs root: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
        Tmpfs(at.to_owned())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

fn chunk(rng: &mut rand_chacha::ChaCha8Rng, len: usize) -> Vec<u8> {
    let mut b = vec![0u8; len];
    rng.fill_bytes(&mut b);
    b
}

/// On a full volume: writes get a consistent 507, reads are served, `/readyz` says 503.
async fn check_full(api: &Api, a: &protocol::DeviceCredentials, round: &str) {
    for len in [10, 300 * 1024] {
        let (status, _) = api.put_chunk(a, &vec![1u8; len]).await;
        assert_eq!(status, StatusCode::INSUFFICIENT_STORAGE, "{round}: {len}");
    }
    let v = Api::version(&file_id(2), vec![], vec![], 0, b"dir");
    let r = api.post_version(a, &file_id(2), &v).await;
    assert_eq!(r.status, StatusCode::INSUFFICIENT_STORAGE, "{round}: {r:?}");
    assert_eq!(r.error(), "volume_full");
    let r = api.signed(a, Method::GET, "/v1/changes", "").await;
    assert_eq!(r.status, StatusCode::OK, "{round}: {r:?}");
    let r = api
        .signed(a, Method::GET, &format!("/v1/files/{}", file_id(1)), "")
        .await;
    assert_eq!(r.status, StatusCode::OK, "{round}: {r:?}");
    let r = api.raw(Method::GET, "/readyz", &[], "").await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{round}: {r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_volume_degrades_and_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let vol = dir.path().join("vol");
    let _fs = Tmpfs::mount(&vol, "12m");
    let data = vol.join("data");
    // Space the test gives back later.
    let filler = vol.join("filler");
    std::fs::write(&filler, vec![7u8; 4 << 20]).unwrap();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(60);

    let server = TestServer::start(ServerConfig::new(&data)).unwrap();
    let api = Api::new(&server.url(), 60);
    let a = api.setup(&server.setup_token).await;
    let stored = api.new_note(&a, &file_id(1), b"first note").await;
    assert_eq!(stored.seq, 1);

    // Fill the volume with chunks of 200 KiB (under the 256 KiB write buffer, which used to
    // turn ENOSPC into a 500): every refusal is a 507.
    let mut full = false;
    for i in 0..200 {
        let (status, _) = api.put_chunk(&a, &chunk(&mut rng, 200 * 1024)).await;
        match status {
            StatusCode::CREATED => {}
            StatusCode::INSUFFICIENT_STORAGE => {
                full = true;
                break;
            }
            s => panic!("chunk {i}: {s}"),
        }
    }
    assert!(full, "the volume never filled");
    check_full(&api, &a, "full").await;

    // A restart on the still-full volume works, and behaves the same.
    let url = server.url();
    server.shutdown();
    let server = TestServer::start(ServerConfig::new(&data)).expect("restart on a full volume");
    assert_ne!(server.url(), url);
    let api = Api::new(&server.url(), 61);
    check_full(&api, &a, "restarted").await;

    // Free space: within a few seconds the server takes writes again, by itself.
    std::fs::remove_file(&filler).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let r = api.raw(Method::GET, "/readyz", &[], "").await;
        if r.status == StatusCode::OK {
            break;
        }
        assert!(Instant::now() < deadline, "/readyz did not recover: {r:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let stored = api
        .new_note(&a, &file_id(3), b"after the space came back")
        .await;
    assert_eq!(stored.seq, 2);
}
