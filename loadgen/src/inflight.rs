//! The loop of a whole-vault transfer, whatever the protocol: a queue of files (or objects)
//! worked through a fixed number at a time, each result taken as it finishes, and a push's
//! throughput checkpoints.

use std::future::Future;
use std::time::{Duration, Instant};

use tokio::task::{JoinError, JoinSet};

use crate::transfer::{Checkpoint, WindowLatency, checkpoint};

/// Starts a task for each of `items` in order, `in_flight` (at least 1) out at once, and hands
/// each task's value to `done` as it finishes. The first error (of `start`, of a task, of a
/// task that panicked, which `join_error` turns into an error, or of `done`) ends the loop;
/// the tasks still out are aborted.
pub(crate) async fn each_in_flight<I, T, E, Fut>(
    items: I,
    in_flight: usize,
    mut start: impl FnMut(I::Item) -> Result<Fut, E>,
    mut done: impl FnMut(T) -> Result<(), E>,
    join_error: impl Fn(JoinError) -> E,
) -> Result<(), E>
where
    I: IntoIterator,
    Fut: Future<Output = Result<T, E>> + Send + 'static,
    T: Send + 'static,
    E: Send + 'static,
{
    let mut set = JoinSet::new();
    let mut queue = items.into_iter();
    loop {
        while set.len() < in_flight.max(1) {
            let Some(item) = queue.next() else {
                break;
            };
            set.spawn(start(item)?);
        }
        let Some(res) = set.join_next().await else {
            return Ok(());
        };
        done(res.map_err(&join_error)??)?;
    }
}

/// A push's progress: files and bytes done, and a throughput checkpoint every `every` files
/// with the median per-file latency of its window.
#[derive(Debug)]
pub(crate) struct Progress {
    t0: Instant,
    every: u64,
    pub files: u64,
    pub bytes: u64,
    pub checkpoints: Vec<Checkpoint>,
    last: (u64, Duration),
    lat: WindowLatency,
}

impl Progress {
    /// A push begun at `t0`, checkpointed every `every` files (at least 1).
    pub(crate) fn new(t0: Instant, every: usize) -> Progress {
        Progress {
            t0,
            every: every.max(1) as u64,
            files: 0,
            bytes: 0,
            checkpoints: Vec::new(),
            last: (0, Duration::ZERO),
            lat: WindowLatency::default(),
        }
    }

    /// One more file done: `bytes` long, `took` from its request's start to its answer.
    pub(crate) fn file_done(&mut self, bytes: u64, took: Duration) {
        self.bytes += bytes;
        self.lat.push(took);
        self.files += 1;
        if self.files.is_multiple_of(self.every) {
            let el = self.t0.elapsed();
            self.checkpoints.push(Checkpoint {
                p50_ms: self.lat.take_p50(),
                ..checkpoint(self.files, el, self.last)
            });
            self.last = (self.files, el);
        }
    }
}
