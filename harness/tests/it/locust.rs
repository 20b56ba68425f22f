//! vaultbench as Locust workers of a real Locust master (PyPI `locust`, installed by
//! `.ci/run`), against the reference server; the merged interval log checked with Python's
//! `hdrhistogram` package (`hdrh`, also installed by `.ci/run`).

use std::io::Read as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use crate::common::{hlog_merge, json_of};

/// Kills and reaps every child it holds when dropped (a failed assertion included).
struct Kids(Vec<Child>);

impl Drop for Kids {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

const LOCUSTFILE: &str = "\
from locust import User, task, constant

# The master needs a user class to count users in; the workers are vaultbench's.
class Vaultbench(User):
    wait_time = constant(1)

    @task
    def idle(self):
        pass
";

fn master(dir: &Path, port: u16, workers: u32, users: u32, run_time: &str) -> Child {
    let lf = dir.join("locustfile.py");
    std::fs::write(&lf, LOCUSTFILE).unwrap();
    Command::new("locust")
        .arg("-f")
        .arg(&lf)
        .args(["--master", "--headless", "--master-bind-host", "127.0.0.1"])
        .args(["--master-bind-port", &port.to_string()])
        .args(["--expect-workers", &workers.to_string()])
        .args([
            "-u",
            &users.to_string(),
            "-r",
            "100",
            "--run-time",
            run_time,
        ])
        .arg("--csv")
        .arg(dir.join("m"))
        .arg("--json-file")
        .arg(dir.join("final"))
        .stdout(std::fs::File::create(dir.join("master.out")).unwrap())
        .stderr(std::fs::File::create(dir.join("master.err")).unwrap())
        .spawn()
        .expect("the `locust` command (PyPI locust; .ci/run installs it)")
}

fn worker(home: &Path, url: &str, token: &Path, port: u16, log: &Path) -> Child {
    Command::new(assert_cmd::cargo::cargo_bin!("vaultbench"))
        .env("XDG_STATE_HOME", home.join("state-home"))
        .args([
            "load",
            "--url",
            url,
            "--route",
            "get-chunk",
            "--devices",
            "2",
        ])
        .arg("--state")
        .arg(home.join("state.json"))
        .arg("--setup-token-file")
        .arg(token)
        .args(["--locust-master", &format!("127.0.0.1:{port}")])
        .arg("--hdr-log")
        .arg(log)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn mtime(p: &Path) -> Option<SystemTime> {
    std::fs::metadata(p).and_then(|m| m.modified()).ok()
}

/// Waits (at most `within`) until `p` exists and was rewritten after `after`.
fn wait_rewritten(p: &Path, after: Option<SystemTime>, within: Duration) {
    let end = Instant::now() + within;
    while Instant::now() < end {
        if let Some(t) = mtime(p)
            && after.is_none_or(|a| t > a)
        {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{} was not (re)written within {within:?}", p.display());
}

/// Waits for a child at most `within`; its exit code.
fn wait_exit(c: &mut Child, within: Duration) -> Option<i32> {
    let end = Instant::now() + within;
    while Instant::now() < end {
        if let Some(st) = c.try_wait().unwrap() {
            return st.code();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("a child did not exit within {within:?}");
}

fn stderr_of(c: &mut Child) -> String {
    let mut s = String::new();
    if let Some(mut e) = c.stderr.take() {
        let _ = e.read_to_string(&mut s);
    }
    s
}

/// The `Request Count` of `name` in the master's `_stats.csv`.
fn csv_requests(csv: &Path, name: &str) -> u64 {
    let text = std::fs::read_to_string(csv).unwrap();
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |h: &str| head.iter().position(|c| c.trim_matches('"') == h).unwrap();
    let (n, req) = (col("Name"), col("Request Count"));
    for l in lines {
        let cells: Vec<&str> = l.split(',').collect();
        if cells[n].trim_matches('"') == name {
            return cells[req].parse().unwrap();
        }
    }
    panic!("no row {name} in {text}");
}

/// Python's hdrhistogram: every interval of `inputs` in one histogram, against every interval
/// of `merged`; prints a JSON document of both counts and percentiles.
const HDRH_CHECK: &str = r#"
import json, math, sys
from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader

def total(paths, tag):
    acc = HdrHistogram(1, 3600 * 10**6, 3)
    for p in paths:
        r = HistogramLogReader(p, HdrHistogram(1, 3600 * 10**6, 3))
        while True:
            h = r.get_next_interval_histogram()
            if h is None:
                break
            if (h.get_tag() or "") == tag:
                acc.add(h)
    return acc

# The value at rank ceil(q * n), as the Rust crate ranks (Python's get_value_at_percentile
# rounds q * n half up, so the two pick neighbouring samples when q * n has a fraction below
# one half); the same walk over the same buckets otherwise.
def at(h, q):
    want = max(math.ceil(q * h.get_total_count()), 1)
    seen = 0
    for i in range(h.counts_len):
        seen += h.get_count_at_index(i)
        if seen >= want:
            return h.get_highest_equivalent_value(h.get_value_from_index(i))
    return 0

tag, merged, inputs = sys.argv[1], sys.argv[2], sys.argv[3:]
a, m = total(inputs, tag), total([merged], tag)
qs = [0.50, 0.90, 0.99, 0.999]
ps = [q * 100 for q in qs]
print(json.dumps({
    "inputs": {"count": a.get_total_count(), "p": [a.get_value_at_percentile(p) for p in ps]},
    "merged": {"count": m.get_total_count(), "p": [m.get_value_at_percentile(p) for p in ps]},
    "merged_ceil": [at(m, q) for q in qs],
}))
"#;

/// Three workers under a real master: the master's CSV counts their requests; one killed
/// mid-run goes missing at the master while the others go on; the merged log's count is the
/// sum of the workers' logs, and its percentiles are those of one histogram of all their
/// samples (checked with Python's hdrhistogram).
#[test]
#[ignore = "slow: a real Locust master (PyPI locust) and three worker processes for ~20 s"]
fn three_workers_under_a_real_master() {
    let data = tempfile::tempdir().unwrap();
    let srv = refserver::TestServer::start(refserver::ServerConfig::new(data.path())).unwrap();
    let url = srv.url();
    let token = data.path().join("setup-token");
    let home = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut kids = Kids(vec![master(home.path(), port, 3, 6, "16s")]);
    let logs: Vec<PathBuf> = (0..3)
        .map(|i| home.path().join(format!("w{i}.hlog")))
        .collect();
    for log in &logs {
        kids.0.push(worker(home.path(), &url, &token, port, log));
    }
    // Kill the third worker just after one of its reports (its log holds what it reported).
    let victim = &logs[2];
    wait_rewritten(victim, None, Duration::from_secs(40));
    let first = mtime(victim);
    wait_rewritten(victim, first, Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(300));
    kids.0[3].kill().unwrap();
    kids.0[3].wait().unwrap();
    let killed_at = Instant::now();
    // The others go on past the master's liveness, then the master quits them (exit 0).
    for i in [1, 2] {
        let code = wait_exit(&mut kids.0[i], Duration::from_secs(60));
        let err = stderr_of(&mut kids.0[i]);
        assert_eq!(code, Some(0), "worker {}: {err}", i - 1);
    }
    assert!(killed_at.elapsed() > Duration::from_secs(3));
    let _ = wait_exit(&mut kids.0[0], Duration::from_secs(30));
    let master_log = std::fs::read_to_string(home.path().join("master.err")).unwrap();
    assert!(
        master_log.contains("setting state to missing"),
        "the master did not see the killed worker go missing:\n{master_log}"
    );
    // The survivors' logs go on for seconds after the victim's ends.
    let intervals = |l: &PathBuf| {
        std::fs::read_to_string(l)
            .unwrap()
            .lines()
            .filter(|l| l.starts_with("Tag=get-chunk,"))
            .count()
    };
    let victim_n = intervals(&logs[2]);
    for l in &logs[..2] {
        assert!(
            intervals(l) >= victim_n + 3,
            "{}: {} intervals, the killed worker {victim_n}",
            l.display(),
            intervals(l)
        );
    }

    // The master's CSV counts every request the workers' logs hold.
    let per_log: Vec<u64> = logs
        .iter()
        .map(|l| {
            loadgen::read_interval_log(&std::fs::read(l).unwrap(), "w").unwrap()["get-chunk"].len()
        })
        .collect();
    // Locust rewrites its CSV every second and not at shutdown, so it holds the reports up
    // to its last write; the final stats (`--json-file`, written after the workers' last
    // reports) hold every request the logs hold.
    let sum = per_log.iter().sum::<u64>();
    let csv = csv_requests(&home.path().join("m_stats.csv"), "get-chunk");
    assert!(csv > 0 && csv <= sum, "CSV {csv}, logs {per_log:?}");
    let fin: serde_json::Value =
        serde_json::from_slice(&std::fs::read(home.path().join("final.json")).unwrap()).unwrap();
    let fin = fin
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "get-chunk")
        .unwrap()["num_requests"]
        .as_u64()
        .unwrap();
    assert_eq!(
        fin, sum,
        "the master's final count against the logs {per_log:?}"
    );

    // hlog merge, then Python's hdrhistogram on the inputs and the merge.
    let merged = home.path().join("merged.hlog");
    let doc = json_of(hlog_merge(home.path(), &logs, &merged, &["--json"]));
    let tag = &doc["tags"]["get-chunk"];
    assert_eq!(tag["count"].as_u64().unwrap(), per_log.iter().sum::<u64>());
    let py = json_of(
        Command::new("python3")
            .arg("-c")
            .arg(HDRH_CHECK)
            .arg("get-chunk")
            .arg(&merged)
            .args(&logs)
            .output()
            .unwrap(),
    );
    assert_eq!(
        py["inputs"], py["merged"],
        "Python's histogram of all samples vs the merge"
    );
    assert_eq!(
        py["merged"]["count"].as_u64().unwrap(),
        per_log.iter().sum::<u64>()
    );
    // vaultbench's printed percentiles are exactly those of Python's histogram of the merged
    // log at the Rust crate's rank, ceil(q * n). (Python's own `get_value_at_percentile` rounds
    // q * n half up, so it may pick the neighbouring sample: seen 5,071 against 5,063 µs at
    // p99 and 98,047 against 97,791 µs at p99.9.)
    for (i, k) in ["p50", "p90", "p99", "p999"].iter().enumerate() {
        assert_eq!(
            tag[k].as_u64().expect("an integer percentile"),
            py["merged_ceil"][i]
                .as_u64()
                .expect("an integer percentile"),
            "{k}: vaultbench {}, hdrh at rank ceil(q * n) {}",
            tag[k],
            py["merged_ceil"][i]
        );
    }
    drop(kids);
    srv.shutdown();
}

/// The master killed mid-run: the worker stops its load within the liveness (3 s) and exits
/// 9 (`MASTER_GONE`).
#[test]
#[ignore = "slow: a real Locust master (PyPI locust) killed under a running worker"]
fn a_worker_whose_master_is_gone_exits_9() {
    let data = tempfile::tempdir().unwrap();
    let srv = refserver::TestServer::start(refserver::ServerConfig::new(data.path())).unwrap();
    let home = tempfile::tempdir().unwrap();
    let port = free_port();
    let log = home.path().join("w.hlog");
    let mut kids = Kids(vec![master(home.path(), port, 1, 2, "120s")]);
    kids.0.push(worker(
        home.path(),
        &srv.url(),
        &data.path().join("setup-token"),
        port,
        &log,
    ));
    wait_rewritten(&log, None, Duration::from_secs(40));
    kids.0[0].kill().unwrap();
    kids.0[0].wait().unwrap();
    let t = Instant::now();
    let code = wait_exit(&mut kids.0[1], Duration::from_secs(15));
    let err = stderr_of(&mut kids.0[1]);
    assert_eq!(code, Some(contract::exit::MASTER_GONE), "{err}");
    assert!(t.elapsed() < Duration::from_secs(6), "{:?}", t.elapsed());
    assert!(err.contains("silent for"), "{err}");
    assert_eq!(
        err.trim()
            .lines()
            .last()
            .unwrap()
            .matches("vaultbench:")
            .count(),
        1
    );
    drop(kids);
    srv.shutdown();
}
