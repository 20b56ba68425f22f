//! The synthetic twin: a generated vault's twin measures back to the same shape within the
//! tolerances stated here and in `docs/src/vaults/twin.md`, the same shape and seed give the
//! same bytes, no name or word of the measured vault reaches the shape file, and bad shape
//! files are refused on one line naming the file and the field.

use scenarios::shape::{FileClass, Shape, classify};
use scenarios::{Measure, Profile, generate, manifest};

use crate::prof;

/// The shape of a generated vault, measured in memory as `vault measure` measures a disk.
pub fn measure_generated(p: &Profile, seed: u64) -> Shape {
    let mut m = Measure::new();
    for f in generate(p, seed) {
        match classify(&f.path) {
            FileClass::Config => m.config(f.size),
            FileClass::Note => m.note(&f.path, &f.to_vec()),
            FileClass::Attachment => m.attachment(&f.path, f.size),
        }
    }
    m.finish()
}

/// `|got / want - 1| <= rel`, or both within `abs` of each other.
fn near(what: &str, got: f64, want: f64, rel: f64, abs: f64) {
    let ok = (got - want).abs() <= abs || (want != 0.0 && (got / want - 1.0).abs() <= rel);
    assert!(
        ok,
        "{what}: twin {got}, source {want} (tolerance {rel} relative or {abs})"
    );
}

/// Three standard errors of the difference of two binomial shares `p` over `n`, at least 0.05.
fn share_tol(p: f64, n: u64) -> f64 {
    (3.0 * (2.0 * p * (1.0 - p) / n.max(1) as f64).sqrt()).max(0.05)
}

/// `|ln(got / want)| <= k sigma / sqrt(n)`, or within 10 %: a quantile of `n` log-normal
/// draws wanders by about that much from seed to seed, in the source as in the twin.
fn near_quantile(what: &str, got: u64, want: u64, k: f64, sigma: f64, n: u64, slack: f64) {
    let tol = (k * sigma / (n.max(1) as f64).sqrt()).max(0.1) + slack;
    let d = ((got.max(1) as f64) / (want.max(1) as f64)).ln().abs();
    assert!(
        d <= tol,
        "{what}: twin {got}, source {want} (|ln ratio| {d:.3} > {tol:.3})"
    );
}

/// The tolerances of the book's table. Counts exact: notes, folders, attachments, large
/// attachments, config files, duplicate groups and duplicate notes (when every group has one
/// size), hazard classes present. Distributions fitted, with `s` the ln-size sigma and `n`
/// the files measured: size p50 within `5.5 s / sqrt(n)` in log terms and p90 within
/// `8 s / sqrt(n)` (three standard errors of the difference of two samples' quantiles; at
/// least 10 %), ln-size sigma within `max(0.1, 3 s / sqrt(n))`, links per note within 10 %
/// (or 0.2), shares `p` over `n` within `max(0.05, 3 sqrt(2 p (1 - p) / n))` (non-ASCII
/// 0.05 more: the generator's parameter is inverted through a model of its titles), empty notes within 3 + 40 %, heavy notes
/// within 1 + 0.5 % of the notes, max depth the same or one less.
fn check_round_trip(src: &Shape, size_slack: f64) -> Shape {
    let twin = measure_generated(&Profile::from_shape(src), scenarios::DEFAULT_SEED);
    let (s, t) = (src, &twin);
    assert_eq!(t.notes.count, s.notes.count, "notes");
    assert_eq!(t.folders.count, s.folders.count, "folders");
    assert_eq!(t.attachments.count, s.attachments.count, "attachments");
    assert_eq!(
        t.attachments.large, s.attachments.large,
        "large attachments"
    );
    assert_eq!(t.config.files, s.config.files, "config files");
    assert_eq!(
        t.notes.duplicate_groups, s.notes.duplicate_groups,
        "dup groups"
    );
    assert_eq!(
        t.notes.duplicate_notes, s.notes.duplicate_notes,
        "dup notes"
    );
    let present = |n: &scenarios::shape::Names| {
        [
            n.long_name > 0,
            n.case_collision > 0,
            n.nfd > 0,
            n.same_basename_folders > 1,
            n.emoji > 0,
            n.trailing_space > 0,
            n.multiple_spaces > 0,
        ]
    };
    assert_eq!(present(&t.names), present(&s.names), "hazard classes");
    assert!(
        t.folders.max_depth <= s.folders.max_depth
            && t.folders.max_depth + 1 >= s.folders.max_depth,
        "max depth: twin {}, source {}",
        t.folders.max_depth,
        s.folders.max_depth
    );
    let f = |x: u64| x as f64;
    let (sig, n) = (s.notes.size_log_sigma, s.notes.count);
    near_quantile(
        "note p50",
        t.notes.size.p50,
        s.notes.size.p50,
        5.5,
        sig,
        n,
        size_slack,
    );
    near_quantile(
        "note p90",
        t.notes.size.p90,
        s.notes.size.p90,
        8.0,
        sig,
        n,
        size_slack,
    );
    let tol = (3.0 * sig / f(n).sqrt()).max(0.1);
    near("note sigma", t.notes.size_log_sigma, sig, 0.0, tol);
    let n = s.notes.count - s.notes.empty;
    near("empty notes", f(t.notes.empty), f(s.notes.empty), 0.40, 3.0);
    near(
        "heavy notes",
        f(t.notes.heavy),
        f(s.notes.heavy),
        0.0,
        1.0 + 0.005 * f(s.notes.count),
    );
    near(
        "links per note",
        t.links.per_note_mean,
        s.links.per_note_mean,
        0.10,
        0.2,
    );
    // A geometric count of mean m has variance m (1 + m): three standard errors of the
    // difference of two vaults' means.
    let m = s.links.embeds_per_note;
    let tol = (3.0 * (2.0 * m * (1.0 + m) / f(n.max(1))).sqrt()).max(0.05);
    near("embeds per note", t.links.embeds_per_note, m, 0.0, tol);
    let links = s.links.wiki + s.links.markdown;
    let v = s.links.same_note_share;
    near(
        "same-note share",
        t.links.same_note_share,
        v,
        0.0,
        share_tol(v, links),
    );
    let v = s.links.unresolved_share;
    near(
        "unresolved share",
        t.links.unresolved_share,
        v,
        0.0,
        share_tol(v, links),
    );
    // A binomial share's spread over the notes: three standard errors of a difference.
    let d = s.folders.dominant_share;
    near(
        "dominant share",
        t.folders.dominant_share,
        d,
        0.0,
        share_tol(d, s.notes.count),
    );
    let v = s.notes.frontmatter_share;
    near(
        "frontmatter share",
        t.notes.frontmatter_share,
        v,
        0.0,
        share_tol(v, n),
    );
    let v = s.notes.non_ascii_share;
    near(
        "non-ASCII share",
        t.notes.non_ascii_share,
        v,
        0.0,
        0.05 + share_tol(v, n),
    );
    assert_eq!(
        t.links.wiki > t.links.markdown,
        s.links.wiki > s.links.markdown,
        "link style"
    );
    if s.attachments.count > s.attachments.large {
        let (sig, n) = (s.attachments.size_log_sigma, s.attachments.count);
        near_quantile(
            "attachment p50",
            t.attachments.size.p50,
            s.attachments.size.p50,
            5.5,
            sig,
            n,
            0.0,
        );
        let tol = (3.0 * sig / f(n).sqrt()).max(0.1);
        near(
            "attachment sigma",
            t.attachments.size_log_sigma,
            sig,
            0.0,
            tol,
        );
    }
    twin
}

#[test]
fn twin_of_small_measures_back() {
    let p = prof("small");
    let src = measure_generated(&p, p.default_seed);
    eprintln!("{}", src.to_toml());
    let twin = check_round_trip(&src, 0.0);
    // small's every note has three links: the twin's too (a fixed fan-out).
    assert_eq!((twin.links.per_note_p50, twin.links.per_note_max), (3, 3));
}

#[test]
fn twin_of_vault1k_measures_back() {
    let p = prof("vault1k");
    check_round_trip(&measure_generated(&p, p.default_seed), 0.0);
}

#[test]
#[ignore = "slow: personal is 130 MB of attachments, measured twice"]
fn twin_of_personal_measures_back() {
    let p = prof("personal");
    check_round_trip(&measure_generated(&p, p.default_seed), 0.0);
}

#[test]
fn twin_of_hazards_measures_back() {
    // The hazard names are 76 notes of their own, 61 of them short `Index.md` lists: the
    // source's size quantiles hold them, the twin's fit draws its other notes from those
    // quantiles and then adds the same 76 notes again, so its sizes sit lower (p50 -44 %
    // here). A known bias of a vault with many hazard-named notes: 0.5 more in log terms.
    let p = prof("hazards");
    check_round_trip(&measure_generated(&p, p.default_seed), 0.5);
}

#[test]
fn same_shape_and_seed_give_the_same_manifest() {
    let p = prof("vault1k");
    let shape = measure_generated(&p, p.default_seed);
    let text = shape.to_toml();
    let back = Shape::parse(&text, "shape.toml").unwrap();
    assert_eq!(back, shape, "a shape file reads back to its shape");
    assert_eq!(back.to_toml(), text, "and writes back to its bytes");
    let twin = Profile::from_shape(&back);
    let a = manifest(&twin, 7);
    assert_eq!(a, manifest(&Profile::from_shape(&shape), 7));
    assert_ne!(a.digest, manifest(&twin, 8).digest, "the seed matters");
}
