//! Criterion benches of the generator's per-request work besides signing: recording one
//! outcome into the route histograms, and parsing an answer head.
//! `cargo bench -p loadgen` compares each run with the last one saved in target/criterion.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use loadgen::internals::{Recorder, h1::parse_answer_head, record};

fn bench(c: &mut Criterion) {
    let recorder = Recorder::new(false);
    let mut us = 0u64;
    c.bench_function("record one outcome (route stats)", |b| {
        b.iter(|| {
            // Latencies spread over the histogram's range, as a real run's are.
            us = (us + 7919) % 200_000;
            record(
                black_box(&recorder),
                "livez",
                "200",
                Duration::from_micros(us + 1),
                16,
            );
        })
    });
    let mut h = loadgen::latency_histogram();
    c.bench_function("record one latency (histogram alone)", |b| {
        b.iter(|| {
            us = (us + 7919) % 200_000;
            h.saturating_record(black_box(us + 1));
        })
    });
    // The reference server's answer to `GET /livez`, as read off the wire.
    let answer = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncache-control: no-store\r\ncontent-length: 13\r\ndate: Mon, 30 Nov 2026 23:00:00 GMT\r\n\r\n{\"live\":true}";
    c.bench_function("parse an answer head", |b| {
        b.iter(|| parse_answer_head(black_box(answer)))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
