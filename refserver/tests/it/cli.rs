//! The `obsync-refserver` binary: the listening line, the data-dir lock, refusals with exit
//! code 2, SIGTERM (exit 0) and SIGKILL (nothing acknowledged lost).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use hyper::Method;
use protocol::wire::ChangesResponse;

use crate::client::Api;
use crate::file_id;

const BIN: &str = env!("CARGO_BIN_EXE_obsync-refserver");

/// A running server process; killed and reaped on drop.
struct Proc {
    child: Child,
    url: String,
}

impl Proc {
    fn start(data: &Path) -> Proc {
        let mut child = Command::new(BIN)
            .args(["--listen", "127.0.0.1:0", "--data"])
            .arg(data)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn obsync-refserver");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .trim_end()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("first stdout line was {line:?}"))
            .to_owned();
        assert!(url.starts_with("http://127.0.0.1:"), "{url}");
        Proc { child, url }
    }

    fn signal(&mut self, sig: i32) -> std::process::ExitStatus {
        // SAFETY: kill(2) on the pid of a child this test spawned and has not reaped.
        unsafe { libc::kill(self.child.id() as i32, sig) };
        self.child.wait().unwrap()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs the binary to completion; returns (exit code, stderr).
fn run(args: &[&str]) -> (i32, String) {
    let out = Command::new(BIN).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn version_flag() {
    let out = Command::new(BIN).arg("--version").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(
        text.starts_with(&format!(
            "vaultbench reference server {} (obsync-v1;",
            env!("CARGO_PKG_VERSION")
        )),
        "{text}"
    );
}

#[test]
fn the_server_says_where_its_setup_token_is() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut child = Command::new(BIN)
        .args(["--listen", "127.0.0.1:0", "--data"])
        .arg(&data)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn obsync-refserver");
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut lines = Vec::new();
    // The two start-up lines come before serving; read_line returns at EOF if it dies.
    for _ in 0..2 {
        let mut line = String::new();
        err.read_line(&mut line).unwrap();
        lines.push(line);
    }
    let _ = child.kill();
    let _ = child.wait();
    let want = format!("setup token in {}", data.join("setup-token").display());
    assert!(lines.iter().any(|l| l.contains(&want)), "{lines:?}");
    assert!(data.join("setup-token").exists());
}

/// Every thread of the binary carries a name it was given, none cut at Linux's 15 bytes (the
/// main thread would otherwise be `obsync-refserve`, after the 16-byte executable name).
#[test]
fn every_thread_has_a_name_it_was_given() {
    let dir = tempfile::tempdir().unwrap();
    let server = Proc::start(&dir.path().join("data"));
    let given: Vec<&str> = [refserver::MAIN_THREAD, refserver::WORKER_THREAD]
        .into_iter()
        .chain(refserver::WRITER_THREADS)
        .collect();
    let tasks = Path::new("/proc")
        .join(server.child.id().to_string())
        .join("task");
    let mut names: Vec<String> = std::fs::read_dir(tasks)
        .unwrap()
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
        .map(|n| n.trim_end().to_owned())
        .collect();
    names.sort();
    assert!(
        names.contains(&refserver::MAIN_THREAD.to_owned()),
        "{names:?}"
    );
    for n in &names {
        assert!(
            given.contains(&n.as_str()),
            "thread {n:?} not among {given:?}"
        );
    }
}

#[test]
fn refusals_are_one_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = Proc::start(&data);
    let token = std::fs::read_to_string(data.join("setup-token")).unwrap();
    assert!(token.trim().len() >= 32 && token.trim().bytes().all(|b| b.is_ascii_hexdigit()));

    let (code, err) = run(&["--data", data.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("in use by another obsync-refserver"), "{err}");
    drop(server);

    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let (code, err) = run(&["--data", file.join("sub").to_str().unwrap()]);
    assert_eq!(code, 2);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("is not writable"), "{err}");
    assert_eq!(err.matches("os error").count(), 1, "the cause once: {err}");

    let (code, _) = run(&[]);
    assert_eq!(code, 2, "--data is required");

    let (code, err) = run(&["--listen", "0.0.0.0:0", "--data", data.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("without --allow-remote"), "{err}");

    let (code, err) = run(&[
        "--inject-delay-us",
        "5000000",
        "--data",
        data.to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("--inject-delay-us"), "{err}");

    let (code, err) = run(&[
        "--inject-work",
        "100000001",
        "--data",
        data.to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("--inject-work"), "{err}");
}

#[test]
fn an_unknown_inject_delay_route_is_refused_naming_the_known_ones() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (code, err) = run(&[
        "--inject-delay-route",
        "put_chunk",
        "--data",
        data.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("unknown route \"put_chunk\"") && err.contains("put-chunk"),
        "{err}"
    );
}

/// `--inject-delay-route` moves the delay to the named route: 300 ms on `GET /readyz` makes
/// every readiness answer take at least that long.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_injected_delay_slows_the_named_route() {
    use refserver::{ServerConfig, TestServer};
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = ServerConfig::new(dir.path().join("data"));
    cfg.inject_delay_us = 300_000;
    cfg.inject_delay_route = protocol::Route::Readyz;
    let server = TestServer::start(cfg).unwrap();
    let api = Api::new(&server.url(), 43);
    for _ in 0..2 {
        let t = std::time::Instant::now();
        let r = api.raw(Method::GET, "/readyz", &[], "").await;
        assert_eq!(r.status, hyper::StatusCode::OK);
        assert!(
            t.elapsed() >= std::time::Duration::from_millis(300),
            "{:?}",
            t.elapsed()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_exits_0_and_sigkill_loses_nothing_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut server = Proc::start(&data);
    let token = std::fs::read_to_string(data.join("setup-token")).unwrap();
    let api = Api::new(&server.url, 60);
    let a = api.setup(token.trim()).await;
    for i in 0..10 {
        api.new_note(&a, &file_id(i), format!("note {i}").as_bytes())
            .await;
    }
    let status = server.signal(libc::SIGKILL);
    assert!(!status.success());

    let mut server = Proc::start(&data);
    let api = Api::new(&server.url, 61);
    let feed: ChangesResponse = api
        .signed(&a, Method::GET, "/v1/changes?since=0", "")
        .await
        .json();
    assert_eq!(feed.head_seq, 10);
    assert_eq!(feed.changes.len(), 10);
    // SIGTERM with a long poll in flight: the poll is answered (empty) and the process exits
    // 0 promptly instead of waiting out the 55 s.
    let api = std::sync::Arc::new(api);
    let api2 = api.clone();
    let a2 = a.clone();
    let poll = tokio::spawn(async move {
        api2.signed(&a2, Method::GET, "/v1/changes?since=10&wait=55", "")
            .await
    });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let started = std::time::Instant::now();
    let status = tokio::task::block_in_place(|| server.signal(libc::SIGTERM));
    assert_eq!(status.code(), Some(0));
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    let r = poll.await.unwrap();
    assert_eq!(r.status.as_u16(), 200);
    assert!(r.json::<ChangesResponse>().changes.is_empty());
}
