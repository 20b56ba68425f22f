//! Criterion benches of the vault generator: planning a vault, and generating one note file
//! from a plan (the work behind every file a push uploads).
//! `cargo bench -p scenarios` compares each run with the last one saved in target/criterion.

use std::hint::black_box;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};

fn bench(c: &mut Criterion) {
    let p = scenarios::profile("small").expect("built-in profile");
    let seed = scenarios::DEFAULT_SEED;
    c.bench_function("plan the small vault", |b| {
        b.iter(|| scenarios::generate(black_box(&p), seed).file_count())
    });
    c.bench_function("generate one note file", |b| {
        b.iter_batched(
            || scenarios::generate(&p, seed),
            |mut files| files.next().map(|f| f.to_vec()),
            BatchSize::SmallInput,
        )
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
