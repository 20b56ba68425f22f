//! `--group-commit`: 8 version posts in flight share journal flushes; without it each post
//! gets its own (read from `/metrics`).

use std::sync::Arc;

use crate::client::Api;
use crate::{file_id, start};

const POSTS: u32 = 64;
const IN_FLIGHT: u32 = 8;

/// Posts `POSTS` versions (chunks uploaded first) with `IN_FLIGHT` posts at a time; returns
/// (journal flushes, journal records) spent on the posts alone.
async fn flushes_for_posts(group_commit: bool) -> (f64, f64) {
    let (server, _dir) = start(group_commit);
    let api = Arc::new(Api::new(&server.url(), 50));
    let a = api.setup(&server.setup_token).await;
    let mut versions = Vec::new();
    for i in 0..POSTS {
        let body = format!("note {i}");
        let (_, sid) = api.put_chunk(&a, body.as_bytes()).await;
        let fid = file_id(i);
        versions.push((
            fid.clone(),
            Api::version(&fid, vec![], vec![sid], body.len() as u64, b"m"),
        ));
    }
    let before = api.metrics().await;
    let mut workers = Vec::new();
    for w in 0..IN_FLIGHT {
        let api = api.clone();
        let a = a.clone();
        let mine: Vec<_> = versions
            .iter()
            .skip(w as usize)
            .step_by(IN_FLIGHT as usize)
            .cloned()
            .collect();
        workers.push(tokio::spawn(async move {
            for (fid, v) in mine {
                let r = api.post_version(&a, &fid, &v).await;
                assert_eq!(r.status.as_u16(), 201, "{r:?}");
            }
        }));
    }
    for w in workers {
        w.await.unwrap();
    }
    let after = api.metrics().await;
    let d = |k: &str| after[k] - before[k];
    assert_eq!(d("obsync_versions_total"), POSTS as f64);
    server.shutdown();
    (
        d("obsync_journal_flushes_total"),
        d("obsync_journal_records_total"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_commit_needs_fewer_journal_flushes_than_posts() {
    let (flushes, records) = flushes_for_posts(true).await;
    assert_eq!(records, POSTS as f64);
    assert!(
        flushes < POSTS as f64,
        "{flushes} journal flushes for {POSTS} posts with group commit"
    );
    let (flushes, records) = flushes_for_posts(false).await;
    assert_eq!(records, POSTS as f64);
    assert_eq!(
        flushes, POSTS as f64,
        "one flush per post without group commit"
    );
}
