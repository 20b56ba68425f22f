//! Criterion bench of signing one request (canonical string, body hash, HMAC-SHA-256), the
//! work the load generator does before every request and the server before every answer.
//! `cargo bench -p protocol` compares each run with the last one saved in target/criterion.

use criterion::{Criterion, criterion_group, criterion_main};
use protocol::{DeviceCredentials, sha256_hex, sign_request};
use std::hint::black_box;

fn bench(c: &mut Criterion) {
    let creds = DeviceCredentials::from_hex(
        "00112233445566778899aabbccddeeff",
        "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f",
    )
    .expect("fixed credentials");
    let nonce = "0123456789abcdef0123456789abcdef";
    c.bench_function("sign GET /v1/changes (empty body)", |b| {
        b.iter(|| {
            sign_request(
                black_box(&creds),
                "GET",
                black_box("/v1/changes?since=42&limit=1000"),
                1_790_000_000,
                nonce,
                protocol::sign::EMPTY_BODY_SHA256,
            )
        })
    });
    // A version post's JSON body is a few hundred bytes: hash it, then sign.
    let body = vec![b'x'; 600];
    c.bench_function("sign POST version (600-byte body)", |b| {
        b.iter(|| {
            let hash = sha256_hex(black_box(&body));
            sign_request(
                &creds,
                "POST",
                "/v1/files/000102030405060708090a0b0c0d0e0f/versions",
                1_790_000_000,
                nonce,
                &hash,
            )
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
