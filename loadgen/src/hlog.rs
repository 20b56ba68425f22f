//! `hlog merge`: several generators' HdrHistogram interval logs summed into one, interval by
//! interval, exactly (every count kept, at the inputs' own precision), or refused when the
//! logs do not describe the same intervals the same way.
//!
//! Alignment: an interval's place is its offset from its own log's `StartTime`, so "second 7"
//! of every generator lands in the merged "second 7"; the logs' starts may differ by at most
//! a bound (generators started by one Locust `spawn` or one matrix job are within a second).
//! Refused: logs whose starts differ by more than the bound, intervals of one tag at one offset
//! with different lengths, or overlapping intervals of one tag (grids that do not coincide),
//! different `MaxValueDivisor`s (units), different significant digits, and logs that say
//! different things about coordinated-omission correction (`#[Correction: …]`, written by
//! [`crate::stats::write_interval_log`]; a log with no such line counts as "unknown", which
//! merges only with other unknowns).

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use hdrhistogram::Histogram;
use hdrhistogram::serialization::interval_log::{
    IntervalLogIterator, IntervalLogWriterBuilder, LogEntry, Tag,
};
use hdrhistogram::serialization::{Deserializer, V2DeflateSerializer};
use serde::Serialize;

use crate::stats::CORRECTION_HEADER;

/// What a log says about coordinated-omission correction when it has no `#[Correction: …]`.
pub const CORRECTION_UNKNOWN: &str = "unknown";

/// Interval timestamps are written with millisecond resolution (`%.3f`): boundaries closer
/// than this are the same boundary.
const BOUNDARY_SLACK: Duration = Duration::from_millis(1);

/// Why logs could not be merged. Every message names the file(s) it is about.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum HlogError {
    #[error("no input logs: give at least one")]
    NoInput,
    #[error("{name}: not an HdrHistogram interval log: {detail}")]
    Parse { name: String, detail: String },
    #[error(
        "{name}: no #[StartTime: …] or #[BaseTime: …] line, so its intervals cannot be aligned"
    )]
    NoStart { name: String },
    #[error(
        "{a} and {b} started {skew_ms} ms apart, more than the {max_ms} ms allowed (--max-start-skew): their intervals do not align"
    )]
    StartSkew {
        a: String,
        b: String,
        skew_ms: u128,
        max_ms: u128,
    },
    #[error(
        "{a} and {b}: the interval tagged {tag:?} at {offset_s:.3} s lasts {a_s:.3} s in one and {b_s:.3} s in the other: the logs' intervals do not align"
    )]
    Length {
        a: String,
        b: String,
        tag: String,
        offset_s: f64,
        a_s: f64,
        b_s: f64,
    },
    #[error(
        "{a} and {b}: intervals tagged {tag:?} at {first_s:.3} s and {second_s:.3} s overlap: the logs' intervals do not align"
    )]
    Overlap {
        a: String,
        b: String,
        tag: String,
        first_s: f64,
        second_s: f64,
    },
    #[error(
        "{a} says its latencies were corrected for coordinated omission as {ca:?}, {b} as {cb:?}: refusing to add differently corrected samples"
    )]
    Correction {
        a: String,
        ca: String,
        b: String,
        cb: String,
    },
    #[error("{a} has MaxValueDivisor {da}, {b} has {db}: the values are in different units")]
    Divisor {
        a: String,
        da: f64,
        b: String,
        db: f64,
    },
    #[error(
        "{a} holds histograms of {sa} significant digits, {b} of {sb}: a sum would not keep either's precision"
    )]
    Precision {
        a: String,
        sa: u8,
        b: String,
        sb: u8,
    },
    #[error("{name}: could not add an interval tagged {tag:?}: {detail}")]
    Add {
        name: String,
        tag: String,
        detail: String,
    },
}

/// One input: its name (for messages) and its bytes.
pub struct LogInput<'a> {
    pub name: &'a str,
    pub bytes: &'a [u8],
}

/// One merged interval.
#[derive(Debug, Clone)]
pub struct MergedInterval {
    pub tag: String,
    pub offset: Duration,
    pub length: Duration,
    pub histogram: Histogram<u64>,
    /// Logs that contributed to it.
    pub sources: usize,
}

/// The merge: the intervals (by offset, then tag), the header facts, and per tag the sum of
/// every interval.
#[derive(Debug, Clone)]
pub struct Merged {
    /// Earliest `StartTime` of the inputs, since the epoch.
    pub start: Duration,
    pub divisor: f64,
    pub correction: String,
    pub inputs: usize,
    pub intervals: Vec<MergedInterval>,
    pub totals: BTreeMap<String, Histogram<u64>>,
}

/// A tag's whole-run figures, in the log's values (µs for vaultbench's logs).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TagSummary {
    pub count: u64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
    pub intervals: usize,
}

impl Merged {
    /// Whole-run figures per tag (quantiles as HdrHistogram reports them: the highest value
    /// equivalent to the sample at that rank).
    pub fn summary(&self) -> BTreeMap<String, TagSummary> {
        self.totals
            .iter()
            .map(|(tag, h)| {
                let n = self.intervals.iter().filter(|i| &i.tag == tag).count();
                (
                    tag.clone(),
                    TagSummary {
                        count: h.len(),
                        p50: h.value_at_quantile(0.50),
                        p90: h.value_at_quantile(0.90),
                        p99: h.value_at_quantile(0.99),
                        p999: h.value_at_quantile(0.999),
                        max: h.max(),
                        intervals: n,
                    },
                )
            })
            .collect()
    }

    /// Writes the merged log: `StartTime` and `BaseTime` the earliest input's, the inputs'
    /// divisor and correction line, intervals at their offsets.
    pub fn write<W: std::io::Write>(&self, out: &mut W) -> std::io::Result<()> {
        let mut ser = V2DeflateSerializer::new();
        let mut b = IntervalLogWriterBuilder::new();
        let start = SystemTime::UNIX_EPOCH + self.start;
        b.add_comment(&format!(
            "vaultbench hlog merge: {} logs summed interval by interval, aligned on each log's offset from its StartTime",
            self.inputs
        ));
        if self.correction != CORRECTION_UNKNOWN {
            b.add_comment(&format!("{CORRECTION_HEADER}{}]", self.correction));
        }
        b.with_start_time(start)
            .with_base_time(start)
            .with_max_value_divisor(self.divisor);
        let mut w = b.begin_log_with(out, &mut ser)?;
        for i in &self.intervals {
            w.write_histogram(&i.histogram, i.offset, i.length, Tag::new(&i.tag))
                .map_err(|e| std::io::Error::other(format!("{e:?}")))?;
        }
        Ok(())
    }
}

/// One merged interval while it is summed: (length, sum, sources, first contributor).
type Slot = (Duration, Histogram<u64>, usize, usize);

/// The header facts of one log, read before any interval is added.
struct Header {
    start: Duration,
    base: Option<Duration>,
    divisor: f64,
    correction: String,
}

fn header(input: &LogInput<'_>) -> Result<Header, HlogError> {
    let parse_err = |detail: String| HlogError::Parse {
        name: input.name.to_owned(),
        detail,
    };
    let mut start = None;
    let mut base = None;
    for entry in IntervalLogIterator::new(input.bytes) {
        match entry.map_err(|e| parse_err(format!("{e:?}")))? {
            LogEntry::StartTime(t) => start = start.or(Some(t)),
            LogEntry::BaseTime(t) => base = base.or(Some(t)),
            LogEntry::Interval(_) => {}
        }
    }
    let mut divisor = 1.0;
    let mut correction = None;
    for line in input.bytes.split(|&b| b == b'\n') {
        let Some(text) = line
            .strip_prefix(b"#")
            .and_then(|l| std::str::from_utf8(l).ok())
        else {
            continue;
        };
        let text = text.trim_end_matches('\r');
        if let Some(v) = text
            .strip_prefix("[MaxValueDivisor: ")
            .and_then(|v| v.strip_suffix(']'))
        {
            divisor = v
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|d| d.is_finite() && *d > 0.0)
                .ok_or_else(|| {
                    parse_err(format!("MaxValueDivisor {v:?} is not a positive number"))
                })?;
        } else if let Some(v) = text
            .strip_prefix(CORRECTION_HEADER)
            .and_then(|v| v.strip_suffix(']'))
        {
            if correction.is_some() {
                return Err(parse_err("two #[Correction: …] lines".into()));
            }
            correction = Some(v.trim().to_owned());
        }
    }
    let start = start.or(base).ok_or_else(|| HlogError::NoStart {
        name: input.name.to_owned(),
    })?;
    Ok(Header {
        start,
        base,
        divisor,
        correction: correction.unwrap_or_else(|| CORRECTION_UNKNOWN.to_owned()),
    })
}

/// Sums `inputs` interval by interval (see the module doc for what is refused).
/// `max_start_skew` bounds how far apart the logs' starts may be.
pub fn merge(inputs: &[LogInput<'_>], max_start_skew: Duration) -> Result<Merged, HlogError> {
    let first = inputs.first().ok_or(HlogError::NoInput)?;
    let headers = inputs.iter().map(header).collect::<Result<Vec<_>, _>>()?;
    let h0 = &headers[0];
    for (inp, h) in inputs.iter().zip(&headers).skip(1) {
        if h.correction != h0.correction {
            return Err(HlogError::Correction {
                a: first.name.to_owned(),
                ca: h0.correction.clone(),
                b: inp.name.to_owned(),
                cb: h.correction.clone(),
            });
        }
        if h.divisor != h0.divisor {
            return Err(HlogError::Divisor {
                a: first.name.to_owned(),
                da: h0.divisor,
                b: inp.name.to_owned(),
                db: h.divisor,
            });
        }
    }
    let (lo, hi) = (
        (0..inputs.len())
            .min_by_key(|&i| headers[i].start)
            .unwrap_or(0),
        (0..inputs.len())
            .max_by_key(|&i| headers[i].start)
            .unwrap_or(0),
    );
    let skew = headers[hi].start - headers[lo].start;
    if skew > max_start_skew {
        return Err(HlogError::StartSkew {
            a: inputs[lo].name.to_owned(),
            b: inputs[hi].name.to_owned(),
            skew_ms: skew.as_millis(),
            max_ms: max_start_skew.as_millis(),
        });
    }

    let mut acc: BTreeMap<(Duration, String), Slot> = BTreeMap::new();
    let mut sigfig: Option<(u8, usize)> = None;
    let mut de = Deserializer::new();
    for (k, (inp, h)) in inputs.iter().zip(&headers).enumerate() {
        let parse_err = |detail: String| HlogError::Parse {
            name: inp.name.to_owned(),
            detail,
        };
        for entry in IntervalLogIterator::new(inp.bytes) {
            let LogEntry::Interval(ilh) = entry.map_err(|e| parse_err(format!("{e:?}")))? else {
                continue;
            };
            let tag = ilh.tag().map(|t| t.as_str().to_owned()).unwrap_or_default();
            let offset = offset_of(ilh.start_timestamp(), h).ok_or_else(|| {
                parse_err(format!(
                    "an interval tagged {tag:?} starts before the log's StartTime"
                ))
            })?;
            let raw = base64_decode(ilh.encoded_histogram())
                .ok_or_else(|| parse_err(format!("an interval tagged {tag:?} is not base64")))?;
            let hist: Histogram<u64> = de.deserialize(&mut &raw[..]).map_err(|e| {
                parse_err(format!(
                    "an interval tagged {tag:?} is not an HdrHistogram: {e:?}"
                ))
            })?;
            match sigfig {
                None => sigfig = Some((hist.sigfig(), k)),
                Some((s, j)) if s != hist.sigfig() => {
                    return Err(HlogError::Precision {
                        a: inputs[j].name.to_owned(),
                        sa: s,
                        b: inp.name.to_owned(),
                        sb: hist.sigfig(),
                    });
                }
                Some(_) => {}
            }
            let length = ilh.duration();
            let slot = acc.entry((offset, tag.clone())).or_insert_with(|| {
                let mut e = Histogram::new(hist.sigfig()).expect("sigfig of a decoded histogram");
                e.auto(true);
                (length, e, 0, k)
            });
            if slot.0.abs_diff(length) > BOUNDARY_SLACK {
                return Err(HlogError::Length {
                    a: inputs[slot.3].name.to_owned(),
                    b: inp.name.to_owned(),
                    tag,
                    offset_s: offset.as_secs_f64(),
                    a_s: slot.0.as_secs_f64(),
                    b_s: length.as_secs_f64(),
                });
            }
            slot.1.add(&hist).map_err(|e| HlogError::Add {
                name: inp.name.to_owned(),
                tag: tag.clone(),
                detail: format!("{e:?}"),
            })?;
            slot.2 += 1;
        }
    }

    // Grids must coincide: per tag, each interval ends before the next begins.
    let mut last: BTreeMap<&str, (Duration, Duration, usize)> = BTreeMap::new();
    for ((offset, tag), (length, _, _, src)) in &acc {
        if let Some(&(o, l, s)) = last.get(tag.as_str())
            && o + l > *offset + BOUNDARY_SLACK
        {
            return Err(HlogError::Overlap {
                a: inputs[s].name.to_owned(),
                b: inputs[*src].name.to_owned(),
                tag: tag.clone(),
                first_s: o.as_secs_f64(),
                second_s: offset.as_secs_f64(),
            });
        }
        last.insert(tag, (*offset, *length, *src));
    }

    let mut totals: BTreeMap<String, Histogram<u64>> = BTreeMap::new();
    let mut intervals = Vec::with_capacity(acc.len());
    for ((offset, tag), (length, histogram, sources, _)) in acc {
        let t = totals.entry(tag.clone()).or_insert_with(|| {
            let mut e = Histogram::new(histogram.sigfig()).expect("valid sigfig");
            e.auto(true);
            e
        });
        t.add(&histogram).map_err(|e| HlogError::Add {
            name: "the merged log".into(),
            tag: tag.clone(),
            detail: format!("{e:?}"),
        })?;
        intervals.push(MergedInterval {
            tag,
            offset,
            length,
            histogram,
            sources,
        });
    }
    Ok(Merged {
        start: headers[lo].start,
        divisor: h0.divisor,
        correction: h0.correction.clone(),
        inputs: inputs.len(),
        intervals,
        totals,
    })
}

/// An interval's offset from its log's start. With a `BaseTime`, timestamps count from it;
/// without one, a timestamp below the `StartTime` counts from the start (Java's
/// `HistogramLogReader` convention), else it is absolute.
fn offset_of(ts: Duration, h: &Header) -> Option<Duration> {
    match h.base {
        Some(base) => (base + ts).checked_sub(h.start),
        None if ts < h.start => Some(ts),
        None => ts.checked_sub(h.start),
    }
}

fn base64_decode(s: &str) -> Option<Vec<u8>> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.decode(s).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{CORRECTED_NONE, write_interval_log};
    use crate::stats::{RouteStats, latency_histogram};

    /// A log of one route with `per_sec[i]` values in second i, starting at `start_ms`.
    fn log(start_ms: u64, per_sec: &[&[u64]], open: bool) -> Vec<u8> {
        let mut st = RouteStats {
            requests: 0,
            status: BTreeMap::new(),
            bytes_sent: 0,
            bytes_received: 0,
            latency: latency_histogram(),
            corrected: open.then(latency_histogram),
            per_second: vec![],
            intervals: vec![],
            intervals_uncorrected: vec![],
        };
        for vals in per_sec {
            let mut h = Histogram::<u64>::new(3).unwrap();
            h.auto(true);
            for &v in *vals {
                h.record(v).unwrap();
            }
            st.intervals.push(h);
        }
        let mut routes = BTreeMap::new();
        routes.insert("put-chunk".to_owned(), st);
        let mut out = Vec::new();
        let start = SystemTime::UNIX_EPOCH + Duration::from_millis(1_700_000_000_000 + start_ms);
        write_interval_log(&mut out, start, &routes).unwrap();
        out
    }

    fn inp<'a>(name: &'a str, b: &'a [u8]) -> LogInput<'a> {
        LogInput { name, bytes: b }
    }

    #[test]
    fn sums_interval_by_interval_and_writes_what_it_read() {
        let a = log(0, &[&[100, 200], &[300]], false);
        let b = log(400, &[&[150], &[], &[5000, 7]], false);
        let m = merge(&[inp("a", &a), inp("b", &b)], Duration::from_secs(1)).unwrap();
        assert_eq!(m.correction, CORRECTED_NONE);
        let offsets: Vec<u64> = m.intervals.iter().map(|i| i.offset.as_secs()).collect();
        assert_eq!(offsets, vec![0, 1, 2]);
        assert_eq!(m.intervals[0].histogram.len(), 3);
        assert_eq!(m.intervals[0].sources, 2);
        let s = &m.summary()["put-chunk"];
        assert_eq!(s.count, 6);
        assert_eq!(s.max, m.totals["put-chunk"].max());
        // The merged log reads back as what was merged, and merges with itself to twice it.
        let mut out = Vec::new();
        m.write(&mut out).unwrap();
        let back = merge(&[inp("m", &out)], Duration::ZERO).unwrap();
        assert_eq!(back.totals, m.totals);
        assert_eq!(back.correction, CORRECTED_NONE);
        let twice = merge(&[inp("m", &out), inp("m2", &out)], Duration::ZERO).unwrap();
        assert_eq!(twice.summary()["put-chunk"].count, 12);
    }

    #[test]
    fn refuses_what_does_not_align() {
        let a = log(0, &[&[100]], false);
        let late = log(1500, &[&[100]], false);
        let e = merge(&[inp("a", &a), inp("late", &late)], Duration::from_secs(1)).unwrap_err();
        assert!(matches!(e, HlogError::StartSkew { .. }), "{e}");
        assert!(e.to_string().contains("late"), "{e}");
        let open = log(0, &[&[100]], true);
        let e = merge(&[inp("a", &a), inp("open", &open)], Duration::from_secs(1)).unwrap_err();
        assert!(matches!(e, HlogError::Correction { .. }), "{e}");
        // A foreign log with half-second intervals.
        let text = String::from_utf8(a.clone()).unwrap();
        let half = text.replace(",1.000,", ",0.500,");
        let e = merge(
            &[inp("a", &a), inp("half", half.as_bytes())],
            Duration::ZERO,
        )
        .unwrap_err();
        assert!(matches!(e, HlogError::Length { .. }), "{e}");
        let shifted = text.replace("Tag=put-chunk,0.000,1.000,", "Tag=put-chunk,0.500,1.000,");
        let e = merge(
            &[inp("a", &a), inp("shift", shifted.as_bytes())],
            Duration::ZERO,
        )
        .unwrap_err();
        assert!(matches!(e, HlogError::Overlap { .. }), "{e}");
        let units = text.replace("[MaxValueDivisor: 1000.000]", "[MaxValueDivisor: 1.000]");
        let e = merge(&[inp("a", &a), inp("u", units.as_bytes())], Duration::ZERO).unwrap_err();
        assert!(matches!(e, HlogError::Divisor { .. }), "{e}");
        let no_start: String = text
            .lines()
            .filter(|l| !l.starts_with("#[StartTime") && !l.starts_with("#[BaseTime"))
            .map(|l| format!("{l}\n"))
            .collect();
        let e = merge(&[inp("ns", no_start.as_bytes())], Duration::ZERO).unwrap_err();
        assert!(matches!(e, HlogError::NoStart { .. }), "{e}");
        assert_eq!(merge(&[], Duration::ZERO).unwrap_err(), HlogError::NoInput);
        let e = merge(&[inp("g", b"garbage,1,2\n")], Duration::ZERO).unwrap_err();
        assert!(e.to_string().starts_with("g: "), "{e}");
    }

    #[test]
    fn open_loop_logs_keep_both_tags_per_second() {
        let mut st = RouteStats {
            requests: 0,
            status: BTreeMap::new(),
            bytes_sent: 0,
            bytes_received: 0,
            latency: latency_histogram(),
            corrected: Some(latency_histogram()),
            per_second: vec![],
            intervals: vec![],
            intervals_uncorrected: vec![],
        };
        for v in [10u64, 20] {
            let mut h = Histogram::<u64>::new(3).unwrap();
            h.record(v).unwrap();
            st.intervals.push(h.clone());
            st.intervals_uncorrected.push(h);
        }
        let mut routes = BTreeMap::new();
        routes.insert("r".to_owned(), st);
        let mut out = Vec::new();
        write_interval_log(&mut out, SystemTime::UNIX_EPOCH, &routes).unwrap();
        let m = merge(&[inp("o", &out), inp("p", &out)], Duration::ZERO).unwrap();
        assert_eq!(m.correction, crate::stats::CORRECTED_INTENDED);
        assert_eq!(m.summary()["r-uncorrected"].intervals, 2);
        assert_eq!(m.summary()["r"].count, 4);
    }
}
