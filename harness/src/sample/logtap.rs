//! Log counters: the target's stdout and stderr (or a log file it writes) read line by line as
//! they come, each line matched against the scenario's `[[count]]` rules and added to running
//! totals; a phase's figure is the difference of the totals read at its two boundaries, so a
//! line belongs to the phase whose window holds the moment it was read.
//!
//! A target's log is untrusted and may be hostile, so: the pipes are drained by their own
//! threads whatever the rules (a target never blocks on a full pipe); a line is held only up to
//! [`MAX_LINE`] bytes, the rest of it is skipped and the truncation counted; nothing of the log
//! is kept but the last [`TAIL`] bytes of stderr for error messages; the `regex` crate runs in
//! time linear in the line (it has no backtracking), so a line cannot stall the reader.
//!
//! A server that buffers its log writes lines late. At a phase's end the counters wait for the
//! reader to go quiet ([`Tap::settle`]): up to [`GRACE`] for a pause of [`QUIET`] with nothing
//! read. Lines a server holds longer than that count in the phase in which they arrive; the
//! whole sample's totals are exact whatever the buffering (`docs/src/log-counts.md`).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use scenarios::scenario::{CountKind, LogCount};

/// The longest line kept for matching; the rest of a longer line is skipped (and counted). A
/// debug log line with an SQL statement and its parameters fits in a few KiB; 64 KiB leaves
/// room for long ones while bounding what one hostile line can hold.
pub const MAX_LINE: usize = 64 * 1024;
/// The stderr tail kept for error messages.
pub const TAIL: usize = 8 * 1024;
/// The longest a phase's end waits for the log to go quiet.
pub const GRACE: Duration = Duration::from_millis(500);
/// What counts as quiet: this long with nothing read.
pub const QUIET: Duration = Duration::from_millis(50);
/// How often a log file is polled for new bytes.
const FILE_POLL: Duration = Duration::from_millis(20);
/// The biggest regex program a rule may compile to (the `regex` crate's size limit): a
/// rule is the user's, not the target's, but one that would take hundreds of MiB is a mistake.
const REGEX_SIZE_LIMIT: usize = 4 << 20;

/// A compiled rule.
struct Rule {
    name: String,
    kind: CountKind,
    file: Option<String>,
    re: regex::bytes::Regex,
}

/// Compiles `c`'s regex, checking a `sum` has its `value` capture. The error names the rule.
pub fn compile(c: &LogCount) -> anyhow::Result<regex::bytes::Regex> {
    let re = regex::bytes::RegexBuilder::new(&c.regex)
        .size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|e| anyhow::anyhow!("count {} regex {:?}: {}", c.name, c.regex, one_line(&e)))?;
    if c.kind == CountKind::Sum && !re.capture_names().any(|n| n == Some("value")) {
        anyhow::bail!(
            "sum {} regex {:?} has no named capture `value` (write `(?P<value>[0-9.]+)`)",
            c.name,
            c.regex
        );
    }
    Ok(re)
}

fn one_line(e: &regex::Error) -> String {
    e.to_string()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// Parses `NAME=REGEX` (from `--count` or `--sum`) into a rule on the target's output.
pub fn parse_flag(given: &str, kind: CountKind) -> anyhow::Result<LogCount> {
    let flag = if kind == CountKind::Sum {
        "--sum"
    } else {
        "--count"
    };
    let (name, regex) = given
        .split_once('=')
        .ok_or_else(|| anyhow::anyhow!("{flag} {given:?}: expected NAME=REGEX"))?;
    let c = LogCount {
        name: name.to_owned(),
        regex: regex.to_owned(),
        kind,
        source: "output".into(),
    };
    c.check()
        .map_err(|e| anyhow::anyhow!("{flag} {given:?}: {e}"))?;
    compile(&c)?;
    Ok(c)
}

/// Adds the `--count` and `--sum` flags to a scenario's own `[[count]]` rules, checking every
/// rule compiles and no name is given twice.
pub fn merge(
    scenario: &mut scenarios::scenario::Scenario,
    counts: &[String],
    sums: &[String],
) -> anyhow::Result<()> {
    for (list, kind) in [(counts, CountKind::Count), (sums, CountKind::Sum)] {
        for given in list {
            let c = parse_flag(given, kind)?;
            if scenario.counts.iter().any(|o| o.name == c.name) {
                anyhow::bail!("count {} is given twice (flag or scenario)", c.name);
            }
            scenario.counts.push(c);
        }
    }
    for c in &scenario.counts {
        compile(c)?;
    }
    Ok(())
}

/// Running totals of one target's log, shared by its reader threads and the phase flow.
#[derive(Default)]
pub struct Tap {
    state: Mutex<State>,
    stop: AtomicBool,
}

#[derive(Default)]
struct State {
    rules: Vec<Rule>,
    /// Per rule, in rule order.
    totals: Vec<f64>,
    lines: u64,
    truncated: u64,
    /// Matched lines of a `sum` whose `value` did not parse as a number.
    unparsed: u64,
    last_read: Option<Instant>,
    tail: Vec<u8>,
}

/// A reading of the totals at one moment.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Reading {
    /// (name, total), in rule order.
    pub totals: Vec<(String, f64)>,
    pub lines: u64,
    pub truncated: u64,
    pub unparsed: u64,
}

impl Reading {
    /// What happened between `self` (earlier) and `later`.
    pub fn until(&self, later: &Reading) -> Reading {
        Reading {
            totals: later
                .totals
                .iter()
                .map(|(n, v)| {
                    let before = self
                        .totals
                        .iter()
                        .find(|(m, _)| m == n)
                        .map_or(0.0, |(_, b)| *b);
                    (n.clone(), v - before)
                })
                .collect(),
            lines: later.lines - self.lines,
            truncated: later.truncated - self.truncated,
            unparsed: later.unparsed - self.unparsed,
        }
    }
}

/// Where a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source<'a> {
    Output,
    File(&'a str),
}

impl Tap {
    /// Sets the rules (compiled again; [`merge`] has checked them). Totals start at zero.
    pub fn set_rules(&self, counts: &[LogCount]) -> anyhow::Result<()> {
        let rules = counts
            .iter()
            .map(|c| {
                Ok(Rule {
                    name: c.name.clone(),
                    kind: c.kind,
                    file: c.file().map(str::to_owned),
                    re: compile(c)?,
                })
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let mut s = self.lock();
        s.totals = vec![0.0; rules.len()];
        s.rules = rules;
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether any rule is set.
    pub fn counting(&self) -> bool {
        !self.lock().rules.is_empty()
    }

    /// The files the rules tail, relative to the data dir.
    pub fn files(&self) -> Vec<String> {
        let s = self.lock();
        let mut f: Vec<String> = s.rules.iter().filter_map(|r| r.file.clone()).collect();
        f.sort();
        f.dedup();
        f
    }

    /// One complete line (without its newline), read from `src`; `cut` when it was longer
    /// than [`MAX_LINE`] and only its start is given.
    pub fn line(&self, line: &[u8], src: Source<'_>, cut: bool) {
        let mut s = self.lock();
        let s = &mut *s;
        s.lines += 1;
        s.truncated += u64::from(cut);
        s.last_read = Some(Instant::now());
        for (i, r) in s.rules.iter().enumerate() {
            let ours = match (src, &r.file) {
                (Source::Output, None) => true,
                (Source::File(f), Some(g)) => f == g,
                _ => false,
            };
            if !ours {
                continue;
            }
            match r.kind {
                CountKind::Count => {
                    if r.re.is_match(line) {
                        s.totals[i] += 1.0;
                    }
                }
                CountKind::Sum => {
                    if let Some(c) = r.re.captures(line) {
                        let v = c
                            .name("value")
                            .and_then(|m| std::str::from_utf8(m.as_bytes()).ok())
                            .and_then(|t| t.trim().parse::<f64>().ok())
                            .filter(|v| v.is_finite());
                        match v {
                            Some(v) => s.totals[i] += v,
                            None => s.unparsed += 1,
                        }
                    }
                }
            }
        }
    }

    /// Bytes read that were not a whole line yet (they only move the quiet clock).
    fn touched(&self) {
        self.lock().last_read = Some(Instant::now());
    }

    fn keep_tail(&self, bytes: &[u8]) {
        let mut s = self.lock();
        s.tail.extend_from_slice(bytes);
        let len = s.tail.len();
        if len > TAIL {
            s.tail.drain(..len - TAIL);
        }
    }

    /// The last [`TAIL`] bytes of stderr.
    pub fn tail(&self) -> Vec<u8> {
        self.lock().tail.clone()
    }

    /// The totals now.
    pub fn read(&self) -> Reading {
        let s = self.lock();
        Reading {
            totals: s
                .rules
                .iter()
                .zip(&s.totals)
                .map(|(r, v)| (r.name.clone(), *v))
                .collect(),
            lines: s.lines,
            truncated: s.truncated,
            unparsed: s.unparsed,
        }
    }

    /// Waits, at most [`GRACE`], until nothing has been read for [`QUIET`], then reads the
    /// totals: a phase's end gives a server's late lines a moment to arrive.
    pub fn settle(&self) -> Reading {
        let until = Instant::now() + GRACE;
        loop {
            let quiet = self.lock().last_read.is_none_or(|t| t.elapsed() >= QUIET);
            if quiet || Instant::now() >= until {
                return self.read();
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Stops the file tailers.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Splits a byte stream into lines of at most [`MAX_LINE`] bytes, feeding each to a tap.
struct Lines {
    buf: Vec<u8>,
    /// The current line went over [`MAX_LINE`]: skip to its newline.
    cut: bool,
}

impl Lines {
    fn new() -> Lines {
        Lines {
            buf: Vec::with_capacity(4096),
            cut: false,
        }
    }

    fn feed(&mut self, mut bytes: &[u8], tap: &Tap, src: Source<'_>) {
        while !bytes.is_empty() {
            match memchr(bytes) {
                Some(i) => {
                    self.take(&bytes[..i]);
                    tap.line(&self.buf, src, self.cut);
                    self.buf.clear();
                    self.cut = false;
                    bytes = &bytes[i + 1..];
                }
                None => {
                    self.take(bytes);
                    tap.touched();
                    return;
                }
            }
        }
    }

    fn take(&mut self, part: &[u8]) {
        let room = MAX_LINE - self.buf.len();
        if part.len() > room {
            self.cut = true;
        }
        self.buf.extend_from_slice(&part[..part.len().min(room)]);
    }

    /// A last line without a newline at the end of the stream.
    fn finish(&mut self, tap: &Tap, src: Source<'_>) {
        if !self.buf.is_empty() || self.cut {
            tap.line(&self.buf, src, self.cut);
            self.buf.clear();
            self.cut = false;
        }
    }
}

fn memchr(b: &[u8]) -> Option<usize> {
    b.iter().position(|&c| c == b'\n')
}

/// Drains `pipe` (a target's stdout or stderr) until it closes, on its own thread; `tail`
/// keeps the stream's last bytes for error messages (stderr).
pub fn drain<R: Read + Send + 'static>(mut pipe: R, tap: Arc<Tap>, tail: bool) {
    std::thread::Builder::new()
        .name("vb-log-drain".into())
        .spawn(move || {
            let mut lines = Lines::new();
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                match pipe.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        if tail {
                            tap.keep_tail(&buf[..n]);
                        }
                        // Without rules the bytes are only drained: a chatty target costs the
                        // sample process a read per 64 KiB, not a lock per line.
                        if tap.counting() {
                            lines.feed(&buf[..n], &tap, Source::Output);
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            lines.finish(&tap, Source::Output);
        })
        .ok();
}

/// Tails `rel` under `data_dir` on its own thread until [`Tap::stop`]: the file may not exist
/// yet, may grow, and may be replaced by a shorter one (a rotated log is read from its start).
pub fn tail_file(data_dir: &Path, rel: &str, tap: Arc<Tap>) {
    let path: PathBuf = data_dir.join(rel);
    let rel = rel.to_owned();
    std::thread::Builder::new()
        .name("vb-log-tail".into())
        .spawn(move || {
            let mut lines = Lines::new();
            let mut off = 0u64;
            let mut buf = vec![0u8; 64 * 1024];
            let mut file: Option<std::fs::File> = None;
            loop {
                let stopping = tap.stop.load(Ordering::Relaxed);
                if file.is_none() {
                    file = std::fs::File::open(&path).ok();
                }
                if let Some(f) = file.as_mut() {
                    use std::io::{Seek, SeekFrom};
                    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
                    if len < off {
                        off = 0; // replaced or truncated: start again
                    }
                    if f.seek(SeekFrom::Start(off)).is_ok() {
                        while let Ok(n) = f.read(&mut buf) {
                            if n == 0 {
                                break;
                            }
                            off += n as u64;
                            lines.feed(&buf[..n], &tap, Source::File(&rel));
                        }
                    }
                }
                if stopping {
                    lines.finish(&tap, Source::File(&rel));
                    return;
                }
                std::thread::sleep(FILE_POLL);
            }
        })
        .ok();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(name: &str, re: &str, kind: CountKind, source: &str) -> LogCount {
        LogCount {
            name: name.into(),
            regex: re.into(),
            kind,
            source: source.into(),
        }
    }

    #[test]
    fn counts_and_sums_lines_split_anywhere() {
        let tap = Tap::default();
        tap.set_rules(&[
            rule("reindex", "re-read ", CountKind::Count, "output"),
            rule(
                "sql_ms",
                r"duration=(?P<value>[0-9.]+)ms",
                CountKind::Sum,
                "output",
            ),
        ])
        .unwrap();
        let text = b"re-read a\nquery duration=1.5ms\nre-read b\nquery duration=2.25ms\nnoise\n";
        let mut l = Lines::new();
        for chunk in text.chunks(3) {
            l.feed(chunk, &tap, Source::Output);
        }
        let r = tap.read();
        assert_eq!(
            r.totals,
            vec![("reindex".into(), 2.0), ("sql_ms".into(), 3.75)]
        );
        assert_eq!(r.lines, 5);
    }

    #[test]
    fn a_long_line_is_cut_and_counted_once() {
        let tap = Tap::default();
        tap.set_rules(&[rule("x", "^x", CountKind::Count, "output")])
            .unwrap();
        let mut l = Lines::new();
        let long = vec![b'x'; MAX_LINE * 3];
        l.feed(&long, &tap, Source::Output);
        l.feed(b"\nx\n", &tap, Source::Output);
        let r = tap.read();
        assert_eq!(r.totals[0].1, 2.0);
        assert_eq!(r.truncated, 1);
        assert!(l.buf.capacity() <= MAX_LINE * 2);
    }

    #[test]
    fn a_file_rule_counts_only_its_file() {
        let tap = Tap::default();
        tap.set_rules(&[
            rule("f", "hit", CountKind::Count, "file:logs/server.log"),
            rule("o", "hit", CountKind::Count, "output"),
        ])
        .unwrap();
        tap.line(b"hit", Source::File("logs/server.log"), false);
        tap.line(b"hit", Source::Output, false);
        tap.line(b"hit", Source::File("other.log"), false);
        assert_eq!(
            tap.read().totals,
            vec![("f".into(), 1.0), ("o".into(), 1.0)]
        );
        assert_eq!(tap.files(), vec!["logs/server.log".to_string()]);
    }

    #[test]
    fn flags_are_checked() {
        assert!(parse_flag("reindex=re-read", CountKind::Count).is_ok());
        assert!(parse_flag("noequals", CountKind::Count).is_err());
        assert!(parse_flag("Bad=x", CountKind::Count).is_err());
        assert!(parse_flag("x=(", CountKind::Count).is_err());
        let e = parse_flag("t=ms", CountKind::Sum).unwrap_err().to_string();
        assert!(e.contains("value"), "{e}");
    }

    /// A target that writes 1 GiB of log lines: every line is counted, this process's memory
    /// stays under 200 MiB, and no single write of the target waits long on its pipe (the
    /// reader drains while it counts; a write of 1 MiB waits at most for that much to be read).
    #[test]
    #[ignore = "slow: 1 GiB of log lines through a pipe"]
    fn a_gibibyte_of_log_lines_is_counted_in_bounded_memory_without_stalling_the_writer() {
        const LINE: &[u8] = b"reindex version=0123456789abcdef0123456789abcdef file=0123456\n";
        const TOTAL: usize = 1 << 30;
        let lines = TOTAL / LINE.len();
        let dir = tempfile::tempdir().unwrap();
        let report = dir.path().join("longest_write_s");
        // The writer times each 1 MiB write(2) and leaves its longest in a file.
        let script = format!(
            "import os,sys,time\nline={line:?}.encode()\nblock=line*({per})\nn={lines}\nlongest=0.0\n\
             while n>0:\n    k=min(n,{per})\n    b=block if k=={per} else line*k\n    \
             t=time.monotonic()\n    v=memoryview(b)\n    while v:\n        w=os.write(1,v)\n        v=v[w:]\n    \
             longest=max(longest,time.monotonic()-t)\n    n-=k\nopen({out:?},'w').write(str(longest))\n",
            line = String::from_utf8_lossy(LINE),
            per = (1 << 20) / LINE.len(),
            out = report.display().to_string(),
        );
        let tap = Arc::new(Tap::default());
        tap.set_rules(&[
            rule(
                "reindex",
                "^reindex version=[0-9a-f]+ file=",
                CountKind::Count,
                "output",
            ),
            rule("never", "no such line", CountKind::Count, "output"),
        ])
        .unwrap();
        procstat::read::reset_peak_rss();
        let mut child = std::process::Command::new("python3")
            .args(["-c", &script])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3 runs the writer");
        drain(child.stdout.take().unwrap(), tap.clone(), false);
        let deadline = Instant::now() + Duration::from_secs(600);
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            assert!(
                Instant::now() < deadline,
                "the writer did not finish in 600 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(status.success());
        // The reader may still hold the pipe's last bytes: wait for the count to settle.
        let until = Instant::now() + Duration::from_secs(30);
        while tap.read().lines < lines as u64 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
        let r = tap.read();
        assert_eq!(
            r.totals,
            vec![("reindex".into(), lines as f64), ("never".into(), 0.0)]
        );
        assert_eq!((r.lines, r.truncated), (lines as u64, 0));
        let peak_kib = procstat::read::peak_rss_kib(procstat::Pid::Current)
            .unwrap()
            .unwrap();
        assert!(peak_kib < 200 * 1024, "peak RSS {peak_kib} KiB");
        let longest: f64 = std::fs::read_to_string(&report).unwrap().parse().unwrap();
        assert!(
            longest < 1.0,
            "a 1 MiB write waited {longest:.3} s on the pipe"
        );
    }

    #[test]
    fn a_reading_subtracts() {
        let a = Reading {
            totals: vec![("x".into(), 3.0)],
            lines: 10,
            truncated: 1,
            unparsed: 0,
        };
        let b = Reading {
            totals: vec![("x".into(), 8.0)],
            lines: 15,
            truncated: 1,
            unparsed: 0,
        };
        assert_eq!(a.until(&b).totals, vec![("x".into(), 5.0)]);
        assert_eq!(a.until(&b).lines, 5);
    }
}
