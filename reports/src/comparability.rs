//! Whether two recordings were made on machines of the same speed: each calibration channel's
//! median in the one against the other's, and which keys depend on which channel.
//!
//! A machine class names the hardware, not its speed: two VMs of one class were seen to differ
//! by ×2.25 on the fsync path (`io_ms`) while their CPU kernel differed by 11 %, and every
//! 1-in-flight route was 1.7–2.7× slower on the one. So `compare` checks the channels before
//! it judges a key that rests on the machine, and a key whose channel differs beyond the
//! channel's tolerance is *not comparable* there, not a regression (docs/src/decisions/
//! comparability.md has the table below with its reasons, and docs/src/measured.md the figures).
//!
//! Which keys depend on which channel:
//!
//! | family | class | depends on |
//! |---|---|---|
//! | counts, bytes, errors, `fsyncs.journal`, … | exact | nothing: deterministic for a build and seed |
//! | instructions retired | cost | nothing: counted under callgrind, not timed |
//! | latencies, wall times, throughput (`route.<r>.c<N>.p50_us`, `cold_push.wall_ms`) | timing | `cpu_ms`, `io_ms`, `rtt_ms` |
//! | server CPU time (`<scope>.server.cpu_us_per_file`, `thread_cpu_ms.*`) | resource | `cpu_ms`, `io_ms`, `rtt_ms` |
//! | counts that timing coalesces (`fsyncs.nonce_log`, `nonce_flushes`, `syscalls_per_request`) | resource | `cpu_ms`, `io_ms`, `rtt_ms` |
//!
//! Every timing and resource key depends on all three. A 1-in-flight route's latency is one
//! round trip (`rtt_ms`) plus the server's work (`cpu_ms`) plus, on the reference server, a flush:
//! every signed request is replay-checked against a nonce log that a durable server flushes
//! before it answers (the reference server's `fsyncs.nonce_log` equals its request count in
//! every phase), so none of its routes is free of the disk (`io_ms`). The phases are made of the
//! same requests. Server CPU time moves with all three as well: the report that motivated the
//! channels saw `cold_push.server.cpu_us_per_file` rise by 105 % on a VM whose CPU kernel was
//! 11 % *faster* and whose fsync path was ×2.25 slower (CPU time includes the kernel's work on
//! each flush and each wake-up). And how many records share one flush or one wake-up depends on
//! how long a flush and a wake-up take. A finer split would need a measured key-by-key
//! sensitivity per channel; until then a key is comparable only when none of the three moved.

use serde::Serialize;

use crate::schema::{MetricClass, Provenance};
use contract::gate::{CPU, IO, KERNELS, RTT};

/// How far (relative) a channel's median may differ between two recordings before the keys that
/// depend on it are not comparable: a ratio outside `[1 / (1 + t), 1 + t]`.
///
/// Each sits above the spread of the channel's median across recordings on one quiet machine
/// (else two recordings of one machine would not be comparable with each other) and well below
/// the ×2 the slower VM of one class showed on the fsync path. Measured over 11 quiet
/// recordings of a 2-vCPU cloud VM (docs/src/measured.md, "Comparing like with like"): `cpu_ms`
/// ±1.8 %, `io_ms` ±13 %, `rtt_ms` ±12 % of their medians.
pub const DEFAULT_TOLERANCE: [(&str, f64); 3] = [(CPU, 0.25), (IO, 0.50), (RTT, 0.40)];

/// The default tolerance of one channel.
pub fn default_tolerance(channel: &str) -> f64 {
    DEFAULT_TOLERANCE
        .iter()
        .find(|(c, _)| *c == channel)
        .map_or(0.25, |(_, t)| *t)
}

/// The calibration channels a key's value depends on (the module doc's table): none for exact
/// and cost keys, all three for timing and resource keys.
pub fn depends_on(class: MetricClass) -> &'static [&'static str] {
    match class {
        MetricClass::Exact | MetricClass::Cost => &[],
        MetricClass::Timing | MetricClass::Resource => &KERNELS,
    }
}

/// One channel in two recordings.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChannelMatch {
    pub channel: String,
    /// The channel's median over the baseline's counted samples' readings.
    pub baseline_median: Option<f64>,
    pub recording_median: Option<f64>,
    /// recording / baseline.
    pub ratio: Option<f64>,
    pub tolerance: f64,
    /// `Some(false)`: beyond the tolerance. `None`: one side has no reading of the channel (a
    /// recording made before it existed), so it was not checked.
    pub comparable: Option<bool>,
}

impl ChannelMatch {
    /// `io_ms ×2.25`.
    pub fn label(&self) -> String {
        match self.ratio {
            Some(r) => format!("{} ×{}", self.channel, ratio_text(r)),
            None => format!("{} not read on both", self.channel),
        }
    }
}

/// A ratio with two decimals (three below 0.1).
pub fn ratio_text(r: f64) -> String {
    if r < 0.1 {
        format!("{r:.3}")
    } else {
        format!("{r:.2}")
    }
}

/// A channel's median over a recording's counted samples' readings; `None` when no counted
/// sample read it. A sidecar without sample readings falls back to its gate verdict's median.
pub fn channel_median(p: &Provenance, channel: &str) -> Option<f64> {
    let pick = |r: &contract::schema::ChannelReading| match channel {
        CPU => Some(r.cpu_ms),
        IO => Some(r.io_ms),
        RTT => r.rtt_ms,
        _ => None,
    };
    let values: Vec<f64> = p
        .samples
        .iter()
        .filter(|s| !s.warmup && s.ok)
        .flat_map(|s| s.calibration.iter().filter_map(pick))
        .filter(|v| v.is_finite() && *v > 0.0)
        .collect();
    if let Some(m) = contract::schema::median(&values) {
        return Some(m);
    }
    p.gate
        .as_ref()
        .and_then(|g| g.verdict.as_ref())
        .and_then(|v| v.channels.get(channel))
        .map(|s| s.median)
        .filter(|m| m.is_finite() && *m > 0.0)
}

/// Every channel of two recordings, against `tolerance` per channel.
pub fn match_channels(
    base: &Provenance,
    rec: &Provenance,
    tolerance: impl Fn(&str) -> f64,
) -> Vec<ChannelMatch> {
    KERNELS
        .iter()
        .map(|&channel| {
            let (b, r) = (channel_median(base, channel), channel_median(rec, channel));
            let ratio = match (b, r) {
                (Some(b), Some(r)) => Some(r / b),
                _ => None,
            };
            let t = tolerance(channel);
            ChannelMatch {
                channel: channel.to_owned(),
                baseline_median: b,
                recording_median: r,
                ratio,
                tolerance: t,
                comparable: ratio.map(|q| within(q, t)),
            }
        })
        .collect()
}

/// Whether a ratio is inside `[1 / (1 + t), 1 + t]`.
pub fn within(ratio: f64, tolerance: f64) -> bool {
    ratio.is_finite() && ratio <= 1.0 + tolerance && ratio >= 1.0 / (1.0 + tolerance)
}

/// The channels among `depends` that differ beyond their tolerance, named with their ratio.
pub fn differing(matches: &[ChannelMatch], depends: &[&str]) -> Vec<String> {
    matches
        .iter()
        .filter(|m| m.comparable == Some(false) && depends.contains(&m.channel.as_str()))
        .map(ChannelMatch::label)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tolerance_is_symmetric_in_ratio() {
        assert!(within(1.0, 0.5));
        assert!(within(1.5, 0.5));
        assert!(within(1.0 / 1.5, 0.5));
        assert!(!within(1.51, 0.5));
        assert!(!within(0.66, 0.5));
        assert!(!within(f64::NAN, 0.5));
        assert!(!within(f64::INFINITY, 0.5));
    }

    #[test]
    fn exact_and_cost_keys_depend_on_no_channel() {
        assert!(depends_on(MetricClass::Exact).is_empty());
        assert!(depends_on(MetricClass::Cost).is_empty());
        assert_eq!(depends_on(MetricClass::Timing), &KERNELS);
        assert_eq!(depends_on(MetricClass::Resource), &KERNELS);
    }

    #[test]
    fn a_label_names_the_channel_and_its_ratio() {
        let m = ChannelMatch {
            channel: IO.into(),
            baseline_median: Some(1.59),
            recording_median: Some(3.58),
            ratio: Some(3.58 / 1.59),
            tolerance: 0.5,
            comparable: Some(false),
        };
        assert_eq!(m.label(), "io_ms ×2.25");
        assert_eq!(differing(std::slice::from_ref(&m), &[IO]), ["io_ms ×2.25"]);
        assert!(differing(std::slice::from_ref(&m), &[CPU]).is_empty());
    }
}
