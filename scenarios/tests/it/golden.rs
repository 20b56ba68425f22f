//! Golden digests: every profile at its default seed (0x5eed) must keep producing these
//! bytes on every machine. A rand (or any) upgrade that changes output fails here loudly;
//! update the figures only on purpose, and say so in the commit. The digests are computed
//! streaming, without writing (fixture and vault100k take ~8 s each in a dev build).

use scenarios::manifest;

use crate::prof;

fn check(name: &str, files: usize, bytes: u64, digest: &str) {
    let p = prof(name);
    let m = manifest(&p, p.default_seed);
    assert_eq!(
        (m.entries.len(), m.total_bytes(), m.digest.as_str()),
        (files, bytes, digest),
        "golden digest of {name}"
    );
}

#[test]
fn golden_small() {
    check(
        "small",
        100,
        261636,
        "b6caf342a3957ad5812bfaf0236f1b2ce8c9e9d79ad694c1e5124f0fdbf0ce87",
    );
}

#[test]
fn golden_assets() {
    check(
        "assets",
        200,
        272636,
        "05a47936b8dd4f50d732922226309009aaefae0b66c72fff8266328049299a09",
    );
}

#[test]
fn golden_personal() {
    check(
        "personal",
        1865,
        132440358,
        "1da54617e6fda5aef5ef788451ec878b113fb4f7d213897aa6dff06fdb978df4",
    );
}

#[test]
fn golden_small_queries() {
    check(
        "small-queries",
        100,
        264057,
        "b50385ac638d6aeaf8b732e5f1358753ee3a16006be2f637827cbab51700f6a0",
    );
}

#[test]
fn golden_vault1k_queries() {
    check(
        "vault1k-queries",
        1100,
        15244977,
        "769b144f440714529b9e3eceeffb0b2a1573491e9cbbcce4b75efe9d9c9696de",
    );
}

#[test]
fn golden_vault1k() {
    check(
        "vault1k",
        1100,
        15238695,
        "6960af900f6972f01480db66d8d5f8bc02766824adbb7ecb32bc177b8020bb5e",
    );
}

#[test]
fn golden_fixture() {
    check(
        "fixture",
        7703,
        333637706,
        "e8e48f287c62704b4bb81618e60e38a958e7fafd470e06a5cde1f486fc40f591",
    );
}

#[test]
fn golden_large() {
    check(
        "large",
        10000,
        24905427,
        "41e7f91e14c4d343c7d2f52bd75b5ffaf79195039281f276df77225728e8a556",
    );
}

#[test]
fn golden_large_queries() {
    check(
        "large-queries",
        10000,
        24911709,
        "98d538b8bf33e7442955165289fa9012dfb61d2bba09f990ec303285b12863de",
    );
}

#[test]
fn golden_vault100k() {
    check(
        "vault100k",
        100000,
        254401569,
        "1e8fc2365744a3ac03fd2083492059b9948909c00b6d20a2553696b27f6a7654",
    );
}

#[test]
fn golden_hazards() {
    check(
        "hazards",
        717,
        13453901,
        "45c6f7de0167d4cf2a8a15380f4dffb0130f7888124ddb7f4d94238165311c70",
    );
}

#[test]
fn golden_small_big() {
    check(
        "small-big",
        101,
        4455940,
        "649f982c18d9eecc4de43aef035f4c490a5105d7aa2fcb570d555c7bad7aa968",
    );
}

#[test]
fn golden_import() {
    check(
        "import",
        10000,
        24911558,
        "16d60c3057113c9cc4bab1d14746971742501ab3699c8dca5dd87b523d8dd341",
    );
}

#[test]
fn golden_import_small() {
    check(
        "import-small",
        2000,
        5151297,
        "219f069062a9f7564df789c55e768f5c57d0a26b4376f34370566277a2d74122",
    );
}
