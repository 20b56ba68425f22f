//! Machine classes: the short stable name a recording's baseline is filed under
//! (`baselines/<class>/`), derived from the parts of a machine fingerprint that change
//! performance. Pure over the fingerprint's identity fields, so it works on a live fingerprint,
//! on a recorded provenance sidecar's `machine` object, and on whichever crate owns the
//! fingerprint type.
//!
//! The name reads as `<cpu>-<n>c-<m>g-<fs>-k<major>-<hash>`, e.g. `epyc-2c-24g-ext4-k6-3f9a1c`:
//! - `<cpu>`: the first word of the CPU model that is not a vendor or marketing word, at most
//!   12 lowercase characters (`AMD EPYC 7B13 64-Core Processor` → `epyc`);
//! - `<n>c`: logical CPUs; `<m>g`: memory in whole GiB, rounded up: MemTotal is always a little
//!   below the installed size (the kernel and firmware keep some, and the figure moves by a few
//!   pages between kernels), so a 24 GiB VM reporting 23.4 or 23.5 GiB and a 16 GiB runner
//!   reporting 15.6 read as the size that was bought, and no boundary sits at x.5;
//! - `<fs>`: the filesystem the server's data (and its fsyncs) lives on;
//! - `k<major>`: the kernel's major version (minor releases rarely move these numbers, a
//!   major one changes the I/O stack);
//! - `<hash>`: six hex digits of SHA-256 over the five values as the name uses them but with
//!   the full CPU model, so two CPU models with the same first word get different names.
//!
//! What is left out on purpose: the OS name, the hostname, the CPU governor and the
//! virtualisation hint. Two runners of the same size and CPU are the same class, whatever
//! they are called.

use sha2::{Digest, Sha256};

/// The fingerprint identity fields a class is made of, in the order the name shows them.
pub const PARTS: [&str; 5] = [
    "cpu_model",
    "logical_cpus",
    "memory_gib",
    "fs_type",
    "kernel",
];

/// Words of a CPU model that name no model: vendors, trademarks, filler.
const NOISE: [&str; 10] = [
    "amd",
    "intel",
    "genuine",
    "processor",
    "cpu",
    "apple",
    "qualcomm",
    "arm",
    "ampere",
    "virtual",
];

/// The class name of a machine from its fingerprint identity fields (`field` returns a
/// field's value, `None` when absent). Absent parts read as `unknown`.
pub fn name(field: impl Fn(&str) -> Option<String>) -> String {
    let get = |k: &str| field(k).unwrap_or_else(|| "unknown".to_owned());
    let cpu_model = get("cpu_model");
    let cpus = get("logical_cpus");
    let mem = get("memory_gib");
    let fs = get("fs_type");
    let kernel = get("kernel");
    let mem = mem
        .parse::<f64>()
        .ok()
        .filter(|m| m.is_finite() && *m >= 0.0)
        .map(|m| format!("{:.0}", m.ceil()))
        .unwrap_or_else(|| "x".to_owned());
    let major = kernel
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .filter(|s| !s.is_empty())
        .unwrap_or("x")
        .to_owned();
    // The hash is over the values as the name uses them (memory rounded, kernel major), so a
    // kernel patch release or a few pages of MemTotal do not move a machine to a new class.
    let mut h = Sha256::new();
    for (k, v) in PARTS.iter().zip([&cpu_model, &cpus, &mem, &fs, &major]) {
        h.update(k.as_bytes());
        h.update(b"=");
        h.update(v.as_bytes());
        h.update(b"\n");
    }
    let hash = hex::encode(&h.finalize()[..3]);
    format!(
        "{}-{}c-{mem}g-{}-k{major}-{hash}",
        cpu_word(&cpu_model),
        slug(&cpus, 4),
        slug(&fs, 10)
    )
}

/// The class of a recorded fingerprint (a provenance sidecar's or an A/B result's
/// `machine`); `None` when it holds none of the class's identity fields (a hand-made sidecar).
pub fn of_machine(machine: &crate::machine::Fingerprint) -> Option<String> {
    let id = &machine.identity;
    if !PARTS.iter().any(|p| id.contains_key(*p)) {
        return None;
    }
    Some(name(|k| id.get(k).cloned()))
}

/// Whether `s` could be a class name (a path component `record` would have made): lowercase
/// ASCII letters, digits and `-`, ending in the six-digit hash.
pub fn looks_like_class(s: &str) -> bool {
    let Some((_, hash)) = s.rsplit_once('-') else {
        return false;
    };
    hash.len() == 6
        && hash.bytes().all(|b| b.is_ascii_hexdigit())
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

fn cpu_word(model: &str) -> String {
    let word = model
        .split(|c: char| c.is_whitespace() || c == ',')
        .map(|w| {
            w.to_ascii_lowercase()
                .replace("(r)", "")
                .replace("(tm)", "")
        })
        .find(|w| {
            !w.is_empty()
                && !NOISE.contains(&w.as_str())
                && !w.contains("core")
                && w.chars().any(|c| c.is_ascii_alphabetic())
        })
        .unwrap_or_else(|| "cpu".to_owned());
    let s = slug(&word, 12);
    if s.is_empty() { "cpu".to_owned() } else { s }
}

/// Lowercase ASCII letters and digits of `s`, at most `max` of them.
fn slug(s: &str, max: usize) -> String {
    let t: String = s
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .take(max)
        .collect();
    if t.is_empty() { "x".to_owned() } else { t }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn fields(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn of(m: &BTreeMap<String, String>) -> String {
        name(|k| m.get(k).cloned())
    }

    fn vm() -> BTreeMap<String, String> {
        fields(&[
            ("cpu_model", "AMD EPYC 7B13 64-Core Processor"),
            ("logical_cpus", "2"),
            ("memory_gib", "23.4"),
            ("fs_type", "ext4"),
            ("kernel", "6.1.0-27-cloud-amd64"),
            ("os", "Debian GNU/Linux 12 (bookworm)"),
            ("cpu_governor", "not exposed"),
        ])
    }

    #[test]
    fn a_class_is_short_readable_and_stable() {
        let c = of(&vm());
        // sha256 of the five parts, first three bytes; fixed so a change of the recipe, which
        // would orphan every committed baseline directory, cannot pass unnoticed.
        assert_eq!(c, "epyc-2c-24g-ext4-k6-aca8f6");
        assert_eq!(of(&vm()), c);
        assert!(looks_like_class(&c));
        assert!(c.len() <= 48);
    }

    #[test]
    fn every_part_changes_the_class_and_nothing_else_does() {
        let base = of(&vm());
        let mut m = vm();
        m.insert("memory_gib".into(), "23.5".into());
        assert!(of(&m).contains("-24g-"), "{}", of(&m));
        for (k, v) in [
            ("cpu_model", "AMD EPYC 7763 64-Core Processor"),
            ("logical_cpus", "4"),
            ("memory_gib", "15.6"),
            ("fs_type", "xfs"),
            ("kernel", "5.15.0-1017-azure"),
        ] {
            let mut m = vm();
            m.insert(k.into(), v.into());
            assert_ne!(of(&m), base, "{k}");
        }
        for (k, v) in [
            ("kernel", "6.8.0-1017-azure"),
            ("memory_gib", "23.9"),
            ("os", "Ubuntu 24.04"),
            ("cpu_governor", "performance"),
            ("hostname", "x"),
        ] {
            let mut m = vm();
            m.insert(k.into(), v.into());
            assert_eq!(of(&m), base, "{k}");
        }
    }

    #[test]
    fn cpu_words_and_odd_values() {
        assert_eq!(
            cpu_word("Intel(R) Xeon(R) Platinum 8370C CPU @ 2.80GHz"),
            "xeon"
        );
        assert_eq!(cpu_word("Intel(R) Core(TM) i7-8650U CPU"), "i78650u");
        assert_eq!(cpu_word("Apple M2"), "m2");
        assert_eq!(cpu_word("unknown"), "unknown");
        assert_eq!(cpu_word(""), "cpu");
        let c = name(|_| None);
        assert!(c.starts_with("unknown-unknc-xg-unknown-kx-"), "{c}");
        assert!(looks_like_class(&c));
        assert!(!looks_like_class("small.json"));
        assert!(!looks_like_class("Epyc-2c-abcdef"));
    }

    #[test]
    fn a_recorded_machine_object_gives_the_same_class() {
        let v: crate::machine::Fingerprint = serde_json::from_value(
            serde_json::json!({ "identity": vm(), "info": { "hostname": "h" } }),
        )
        .unwrap();
        assert_eq!(of_machine(&v), Some(of(&vm())));
        assert_eq!(of_machine(&crate::machine::Fingerprint::default()), None);
    }
}
