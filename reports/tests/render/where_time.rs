//! Where the time goes in the reports: an `ab --cost` result leads with the keys that changed,
//! grouped by phase, each cost key explained by the functions that grew, with a differential
//! flame graph; a `--cost` recording shows its top functions, blocked time per syscall, threads
//! and a flame graph per phase. A latency key measured on one request is shown once.

use std::collections::BTreeMap;

use contract::profile::{
    FunctionChange, FunctionCost, PartBlocked, PartChanges, PartProfile, Stack, SyscallTime,
    ThreadTime,
};
use reports::ab::{Better, analyse_cost_metric, analyse_metric};
use reports::render::{Document, Format, render};
use reports::schema::{AbResult, Baseline, CostProvenance, Provenance};

const KEY: &str = "route.post-version.c1.server.instructions_per_request";

/// A call tree of about 1,000 functions under a server's worker loop, with `grow` getting
/// `extra` more instructions.
fn stacks(extra: u64) -> Vec<Stack> {
    let mut out = vec![
        Stack {
            frames: "std::rt::lang_start;tokio::runtime::Runtime::block_on".into(),
            ir: 40_000,
        },
        Stack {
            frames: "tokio::runtime::worker::run;refserver::api::files::post_version;refserver::api::files::inject_work".into(),
            ir: 1_000 + extra,
        },
        Stack {
            frames: "tokio::runtime::worker::run;refserver::api::files::post_version;refserver::store::journal::Journal::append".into(),
            ir: 30_000,
        },
    ];
    for i in 0..1000 {
        out.push(Stack {
            frames: format!(
                "tokio::runtime::worker::run;hyper::proto::h1::dispatch::Dispatcher<D,Bs,I,T>::poll_loop;helper_{}::f{i}",
                i % 37
            ),
            ir: 60 + (i % 7) as u64 * 20,
        });
    }
    out
}

/// The B-is-better A/B of `ab.rs` with a cost key 2 % worse in B, explained by
/// `inject_work`, and a latency key whose percentiles are one request's.
pub fn cost_ab() -> AbResult {
    let mut r = crate::ab::ab_result();
    let orders = r.metrics["server.cpu_s"].orders.clone();
    let a: Vec<f64> = (0..orders.len())
        .map(|i| 165_000.0 + (i % 3) as f64 * 40.0)
        .collect();
    let b: Vec<f64> = a.iter().map(|x| x + 3_300.0).collect();
    r.metrics.insert(
        KEY.into(),
        analyse_cost_metric(&a, &b, &orders, Better::Lower, 0.01, 3).unwrap(),
    );
    r.units.insert(KEY.into(), "instructions/request".into());
    let one: Vec<f64> = (0..orders.len()).map(|i| 900.0 + i as f64).collect();
    for q in ["p50", "p95", "p99"] {
        let k = format!("cold_pull.changes.{q}_us");
        r.metrics.insert(
            k.clone(),
            analyse_metric(&one, &one, &orders, Better::Lower, 0.03, 4).unwrap(),
        );
        r.units.insert(k, "us".into());
    }
    r.functions = BTreeMap::from([(
        "route.post-version.c1".to_owned(),
        PartChanges {
            per: "request".into(),
            a_total: 165_040.0,
            b_total: 168_340.0,
            functions: vec![
                FunctionChange {
                    name: "refserver::api::files::inject_work".into(),
                    a: 10.0,
                    b: 3_210.0,
                    delta: 3_200.0,
                    relative: Some(320.0),
                    share_of_change: Some(0.97),
                    share_of_total: 0.0194,
                },
                FunctionChange {
                    name: "__memcpy_avx_unaligned_erms".into(),
                    a: 2_000.0,
                    b: 2_040.0,
                    delta: 40.0,
                    relative: Some(0.02),
                    share_of_change: Some(0.012),
                    share_of_total: 0.0002,
                },
            ],
            a_stacks: stacks(0),
            b_stacks: stacks(3_200),
            a_work: 2000,
            b_work: 2000,
        },
    )]);
    r
}

/// The `small` recording with a cost sample's top functions, blocked time and threads.
pub fn cost_recording() -> (Baseline, Provenance) {
    let (b, mut p) = crate::fixtures::small();
    let f = |name: &str, s: u64, i: u64| FunctionCost {
        name: name.into(),
        self_ir: s,
        inclusive_ir: i,
    };
    let profile = PartProfile {
        total_ir: 16_500_000,
        work: 100,
        work_unit: "file".into(),
        functions: vec![
            f("tokio::runtime::worker::run", 10_000, 16_000_000),
            f("refserver::api::chunks::put_chunk", 200_000, 6_000_000),
            f("sha2::sha256::compress256", 3_000_000, 3_000_000),
            f("__memcpy_avx_unaligned_erms", 1_500_000, 1_500_000),
        ],
        stacks: stacks(0),
    };
    let blocked = PartBlocked {
        wall_ms: 3_900.0,
        syscalls: vec![
            SyscallTime {
                name: "fdatasync".into(),
                calls: 480,
                time_us: 610_000.0,
            },
            SyscallTime {
                name: "fsync".into(),
                calls: 380,
                time_us: 180_000.0,
            },
            SyscallTime {
                name: "write".into(),
                calls: 900,
                time_us: 90_000.0,
            },
        ],
        threads: vec![ThreadTime {
            thread: "refsrv-worker".into(),
            threads: 2,
            on_cpu_ms: 410.0,
            run_queue_ms: 12.5,
            blocked_ms: 7_377.5,
        }],
    };
    p.cost = Some(CostProvenance {
        instructions_source: "valgrind-callgrind 3.19.0".into(),
        syscalls_source: "strace 6.1".into(),
        metrics: BTreeMap::new(),
        functions: BTreeMap::from([("cold_push".to_owned(), profile)]),
        blocked: BTreeMap::from([("cold_push".to_owned(), blocked)]),
    });
    (b, p)
}

#[test]
fn the_ab_report_leads_with_what_changed_and_names_the_function_that_grew() {
    let r = cost_ab();
    let md = render(&Document::Ab(&r), Format::Md).unwrap();
    let what = md.find("## What changed").expect("a summary");
    let folded = md
        .find("## Keys not called better or worse")
        .expect("the rest");
    assert!(what < folded, "{md}");
    let section = &md[what..folded];
    assert!(section.contains("### route.post-version.c1"), "{section}");
    let row = section
        .lines()
        .find(|l| l.starts_with(&format!("| {KEY}")))
        .unwrap_or_else(|| panic!("{section}"));
    assert!(row.contains("| worse |"), "{row}");
    assert!(
        row.contains("`refserver::api::files::inject_work` +3,200/request (97% of the change)"),
        "{row}"
    );
    assert!(
        !row.contains("memcpy"),
        "a tenth of the change at least: {row}"
    );
    assert!(section.contains("### whole run") && section.contains("| server.cpu_s"));
    // Undecided keys are folded, with why.
    let rest = &md[folded..];
    assert!(rest.contains("<details><summary>") && rest.contains("</details>"));
    // One request: its three percentiles are one row.
    assert_eq!(md.matches("cold_pull.changes.p").count(), 1, "{md}");
    assert!(md.contains("cold_pull.changes.p50 = p95 = p99_us (one request)"));
    // The functions table, with the share of the change.
    assert!(md.contains("## Functions that changed most"));
    assert!(md.contains("| route.post-version.c1 (165,040 → 168,340/request) | `refserver::api::files::inject_work` |"), "{md}");

    let html = render(&Document::Ab(&r), Format::Html).unwrap();
    assert!(html.contains("<h3>route.post-version.c1</h3>"));
    assert!(html.contains("<code>refserver::api::files::inject_work</code> +3,200/request"));
    assert_eq!(html.matches("<figure class=\"chart flame\"").count(), 1);
    assert!(
        html.contains("inject_work: 4200 instructions in B (2.16%), +3200 against A"),
        "the frame's title"
    );
    assert!(!html.contains("<script") && !html.contains("http"));
}

#[test]
fn a_cost_recording_shows_functions_blocked_time_threads_and_a_flame_graph() {
    let (b, p) = cost_recording();
    let doc = Document::Recording {
        baseline: &b,
        provenance: &p,
    };
    let md = render(&doc, Format::Md).unwrap();
    assert!(md.contains("## Top functions per phase"), "{md}");
    assert!(
        md.contains("| cold_push | 1 | `sha2::sha256::compress256` | 18.2% | 30,000/file | `tokio::runtime::worker::run` | 97.0% |"),
        "{md}"
    );
    assert!(md.contains("## Blocked time per syscall"));
    assert!(
        md.contains("| cold_push | `fdatasync` | 480 | 610 | 69.3% | 3,900 / 1,230.58 (×3.2) |"),
        "{md}"
    );
    assert!(
        md.contains("| cold_push | refsrv-worker | 2 | 410 | 12.50 | 7,377.50 |"),
        "{md}"
    );
    let json = render(&doc, Format::Json).unwrap();
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["functions"]["cold_push"]["work"], 100);
    assert!(v["untraced_wall_ms"]["cold_push"].as_f64().unwrap() > 1000.0);
    let html = render(&doc, Format::Html).unwrap();
    assert_eq!(html.matches("<figure class=\"chart flame\"").count(), 1);
    assert!(html.contains("<td><code>fdatasync</code></td>"));
    assert!(!html.contains("<script") && !html.contains("http"));
}
