//! End to end against the real WebDAV servers (slow: real servers, so `#[ignore]`d; `.ci/run`
//! installs them and runs these): per preset, push a vault, pull it byte-identical, an idle
//! resync that finds nothing, a folder rename by MOVE, an edit seen by polling, and a short
//! route load on each route the scenarios use. A preset that is not installed fails with the
//! package to install.

use std::time::{Duration, Instant};

use loadgen::protocols::webdav::client::Recorder;
use loadgen::protocols::webdav::{
    BasicAuth, DavClient, DavRoute, Depth, RunningServer, ServerCommand, poll_until_changed,
    pull_vault, push_vault, rename, resync, run_dav_route_load, walk,
};
use loadgen::{Mode, Target};

/// Starts the preset `name` with `auth` in place of its own credentials (the test's own
/// password proves the server reads the credentials it is given).
fn start(name: &str, data: &std::path::Path, auth: &BasicAuth) -> RunningServer {
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let mut def = loadgen::protocols::preset(name).unwrap();
    def.auth = Some(auth.clone());
    ServerCommand::prepare(&def, data, addr)
        .and_then(ServerCommand::start)
        .unwrap_or_else(|e| panic!("{e}"))
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn round_trip(preset: &str) {
    // rclone walks the tree; Apache (`DavDepthInfinity` off) and nginx's dav-ext answer 403.
    let depth_infinity = preset == "rclone-webdav";
    let data = tempfile::tempdir().unwrap();
    let auth = BasicAuth::new("vaultbench", "e2e");
    let server = start(preset, data.path(), &auth);
    let target = Target::parse(&format!("http://{}", server.command.addr), false).unwrap();
    let client = DavClient::new(target.clone(), Some(&auth));
    let vault = tempfile::tempdir().unwrap();
    testkit::write_small_vault(vault.path());
    let (want_files, want_dirs) = testkit::tree(vault.path());
    rt().block_on(async {
        // Wrong credentials are refused (the preset really demands them).
        let stranger = DavClient::new(target.clone(), Some(&BasicAuth::new("vaultbench", "no")));
        let e = stranger
            .propfind(&Recorder::new(false), "", Depth::One)
            .await
            .unwrap_err();
        assert!(e.to_string().contains("401"), "{e}");

        let pushed = push_vault(&client, vault.path()).await.unwrap();
        assert_eq!(pushed.files as usize, want_files.len());
        assert_eq!(pushed.dirs as usize, want_dirs.len());
        assert_eq!(
            pushed.routes["put-file"].requests as usize,
            want_files.len()
        );
        assert_eq!(pushed.routes["mkcol"].requests as usize, want_dirs.len());

        let depths: &[Depth] = if depth_infinity {
            &[Depth::One, Depth::Infinity]
        } else {
            &[Depth::One]
        };
        for &depth in depths {
            let out = tempfile::tempdir().unwrap();
            let pulled = pull_vault(&client, out.path(), depth).await.unwrap();
            let (files, dirs) = testkit::tree(out.path());
            assert_eq!(files, want_files, "{}: pulled tree differs", preset);
            assert_eq!(dirs, want_dirs);
            assert_eq!(pulled.files as usize, want_files.len());
            let walks = pulled.routes[depth.route()].requests;
            match depth {
                // One PROPFIND per folder, the root included.
                Depth::One => assert_eq!(walks as usize, want_dirs.len() + 1),
                Depth::Infinity => assert_eq!(walks, 1),
            }
            let idle = resync(&client, out.path(), depth).await.unwrap();
            assert_eq!(idle.mismatched, 0, "{}", preset);
            assert_eq!(idle.requests, walks, "the idle resync is one walk");
        }
        if !depth_infinity {
            let e = client
                .propfind(&Recorder::new(false), "", Depth::Infinity)
                .await
                .unwrap_err();
            assert!(e.to_string().contains("403"), "{e}");
        }

        // Folder rename: one MOVE, and the files are under the new name.
        let folder = want_dirs.iter().find(|d| !d.contains('/')).unwrap().clone();
        let renamed = format!("{folder} renamed");
        let r = rename(&client, &folder, &renamed).await.unwrap();
        assert_eq!(r.routes["move"].requests, 1);
        let listing = walk(&client, &Recorder::new(false), "", Depth::One)
            .await
            .unwrap();
        let prefix = format!("{folder}/");
        let moved: Vec<_> = want_files
            .keys()
            .filter(|p| p.starts_with(&prefix))
            .collect();
        assert!(!moved.is_empty());
        for p in moved {
            let to = format!("{renamed}/{}", &p[prefix.len()..]);
            assert!(listing.entries.contains_key(&to), "{to} missing after MOVE");
            assert!(!listing.entries.contains_key(p.as_str()), "{p} still there");
        }

        // Edit propagation by polling: B sees A's edit within a few poll intervals. The edit
        // changes the size, which every server reports (nginx sends no ETag, and its
        // last-modified has one-second resolution).
        let (path, before) = listing
            .files()
            .find(|(p, _)| p.ends_with(".md"))
            .map(|(p, e)| (p.clone(), e.clone()))
            .unwrap();
        let parent = path.rsplit_once('/').map_or("", |(d, _)| d).to_owned();
        let writer = client.clone();
        let edit_path = path.clone();
        let edit = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(150)).await;
            writer
                .put(
                    &Recorder::new(false),
                    &edit_path,
                    bytes::Bytes::from("edited\n"),
                )
                .await
        });
        let poll = poll_until_changed(
            &client,
            &parent,
            &path,
            Some(&before),
            Some(7),
            Duration::from_millis(50),
            Instant::now() + Duration::from_secs(10),
        )
        .await
        .unwrap();
        edit.await.unwrap().unwrap();
        assert_eq!(poll.entry.size, Some(7));
        assert!(poll.polls >= 1);
        assert!(
            poll.elapsed >= Duration::from_millis(150),
            "{:?}",
            poll.elapsed
        );

        // Route load: each route the scenarios drive answers without errors.
        for route in [
            DavRoute::PropfindDepth1,
            DavRoute::PutFile,
            DavRoute::GetFile,
            DavRoute::Move,
            DavRoute::Mkcol,
            DavRoute::Delete,
        ] {
            let cfg = loadgen::routeload::RouteLoadConfig {
                route,
                mode: Mode::Closed { in_flight: 2 },
                duration: Duration::from_millis(400),
                max_requests: 400,
                seed: 7,
            }
            .in_folder(renamed.clone());
            let r = run_dav_route_load(&client, &cfg).await.unwrap();
            assert!(r.requests > 0, "{}: {}", preset, route.name());
            assert_eq!(
                r.stats.errors(),
                0,
                "{}: {} {:?}",
                preset,
                route.name(),
                r.stats.status
            );
        }
        let open = loadgen::routeload::RouteLoadConfig {
            route: DavRoute::Move,
            mode: Mode::Open {
                rate_per_s: 200.0,
                max_in_flight: 4,
            },
            duration: Duration::from_millis(400),
            max_requests: 1000,
            seed: 8,
        }
        .in_folder(String::new());
        let r = run_dav_route_load(&client, &open).await.unwrap();
        assert!(r.requests > 20, "{}", r.requests);
        assert_eq!(r.stats.errors(), 0, "{:?}", r.stats.status);
        assert!(r.stats.corrected.is_some());
    });
    let pid = server.pid();
    let status = server.stop();
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "master {pid} not reaped ({status})"
    );
}

#[test]
#[ignore = "slow: real servers"]
fn apache_webdav_round_trip() {
    round_trip("apache-webdav");
}

#[test]
#[ignore = "slow: real servers"]
fn nginx_webdav_round_trip() {
    round_trip("nginx-webdav");
}

#[test]
#[ignore = "slow: real servers"]
fn rclone_webdav_round_trip() {
    round_trip("rclone-webdav");
}
